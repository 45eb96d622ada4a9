//! Shared by the core crate's integration tests. Here: connecting a queue
//! client, Redis's own clock, and the wait for a lease call held in a stalled
//! proxy. In the submodules: the helpers over a test's own `RedisServer`
//! ([`server`]), worker replicas as OS processes ([`replica`]), process steps
//! with real processes ([`process`]), and what one family of tests shares:
//! [`client_scripts`], [`groups`], the model of `model_proptest.rs`
//! ([`model`], [`model_holder`]), the transition-table cases ([`table`],
//! [`table_run`]) and direct script calls ([`validate`]).
//!
//! The worker processes some tests spawn are binaries of their own, not
//! modules of this one: `bin/replica.rs` (`leasehold-replica-fixture`) and
//! `bin/process_worker.rs` (`leasehold-process-fixture`), declared in
//! `core/Cargo.toml`.
//!
//! Each test file includes it with `mod support;` and uses what it needs, so
//! some items are unused in any one file.

#![allow(dead_code)]

pub(crate) mod client_scripts;
pub(crate) mod groups;
pub(crate) mod model;
pub(crate) mod model_holder;
pub(crate) mod process;
pub(crate) mod replica;
pub(crate) mod server;
pub(crate) mod table;
pub(crate) mod table_run;
pub(crate) mod validate;

use std::time::{Duration, Instant};

use leasehold_core::{Queue, QueueConfig};

/// A client of queue `name` on the Redis at `url`, with the default configuration.
pub(crate) async fn connect(url: &str, name: &str) -> Queue {
    Queue::connect(url, name, QueueConfig::default())
        .await
        .expect("connect to the test redis")
}

/// Redis's clock (`TIME`), in milliseconds.
pub(crate) async fn redis_now(queue: &Queue) -> i64 {
    let mut conn = queue.pool().get().await.expect("a connection");
    let (secs, micros): (i64, i64) = leasehold_core::redis::cmd("TIME")
        .query_async(&mut conn)
        .await
        .expect("TIME");
    secs * 1000 + micros / 1000
}

/// Whether a `settle` call (a lease, a start, a finish) is among the bytes
/// `proxy` holds.
pub(crate) fn settle_held(proxy: &leasehold_testkit::TcpProxy) -> bool {
    proxy.held_requests().windows(6).any(|w| w == b"settle")
}

/// Whether a `settle` call is held by `proxy` within `within`.
pub(crate) async fn wait_for_held_settle(
    proxy: &leasehold_testkit::TcpProxy,
    within: Duration,
) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if settle_held(proxy) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}
