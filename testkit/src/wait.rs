//! Polling helpers: wait until a condition holds, with a deadline and a
//! message naming what was awaited.

use std::future::Future;
use std::time::{Duration, Instant};

/// Waits until `cond()` returns true, polling every 20 ms.
///
/// # Panics
///
/// With a message naming `what` if `cond` is still false after `deadline`.
#[track_caller]
pub fn wait_until(deadline: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    loop {
        if cond() {
            return;
        }
        if started.elapsed() >= deadline {
            panic!("timed out after {deadline:?} waiting until {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Async version of [`wait_until`] for tokio tests: awaits `cond()` every
/// 20 ms (sleeping with `tokio::time::sleep`, so the runtime keeps running).
///
/// # Panics
///
/// With a message naming `what` if `cond` is still false after `deadline`.
pub async fn wait_until_async<F, Fut>(deadline: Duration, what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if cond().await {
            return;
        }
        if started.elapsed() >= deadline {
            panic!("timed out after {deadline:?} waiting until {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
