//! A holder operation sent while the lease may still be ours: transient
//! Redis failures are retried with backoff; nothing is sent once the lease is
//! lost (a renewal or a refusal said so, or its local deadline passed).

use std::time::{Duration, Instant};

use tracing::warn;

use super::active::ActiveJob;
use super::watchdog;
use crate::error::Error;
use crate::pipeline::StopWhy;

/// A holder operation that could not be completed.
pub(crate) enum Gone {
    /// The lease is lost: the job moved on without us. Write nothing more.
    Lost,
}

/// Calls a holder operation, retrying transient Redis failures while the lease
/// may still be ours; sends nothing once the lease is lost (a renewal or a
/// refusal said so, or its local deadline passed: see `watchdog.rs`).
pub(crate) async fn holder_call<T, F, Fut>(
    active: &ActiveJob,
    what: &str,
    mut op: F,
) -> Result<T, Gone>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    let mut backoff = Duration::from_millis(50);
    // checked here, synchronously, not only by the watchdog's timer: a worker
    // that wakes from a freeze runs this before the watchdog has looked
    if !active.is_lost() && active.expired_locally(Instant::now()) {
        watchdog::expire(active, Instant::now());
    }
    if let Some(StopWhy::Lost(reason)) = active.why() {
        // the lease is gone or past its local deadline: a write now would be
        // refused at best (stale token), and could hang on a cut-off connection
        warn!(%reason, "{what} not sent: the lease is lost; the attempt writes nothing more");
        return Err(Gone::Lost);
    }
    if what == "finish" || what == "release" {
        active.mark_ending();
    }
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if e.is_lease_lost() => {
                warn!(error = %e, "{what}: the lease is gone; stopping this attempt without writing");
                active.stop(StopWhy::Lost(e.to_string()));
                return Err(Gone::Lost);
            }
            Err(e) => {
                if active.is_lost() || active.expired_locally(Instant::now()) {
                    warn!(error = %e, "{what}: Redis unreachable past the lease deadline; giving up on this attempt");
                    active.stop(StopWhy::Lost(format!(
                        "cut off from Redis past the lease deadline: {e}"
                    )));
                    return Err(Gone::Lost);
                }
                warn!(error = %e, retry_in = ?backoff, "{what} failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }
}
