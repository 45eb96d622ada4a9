//! Small readers shared by the `client_scripts_*` tests: Redis's clock, a
//! job's events and moves, a failure's error, and a reset of the command
//! statistics.

use std::collections::BTreeMap;
use std::time::Duration;

use super::server::{events, get};
use leasehold_core::Outcome;
use leasehold_core::{AttemptError, JobId, Queue};
use leasehold_testkit::RedisServer;

pub(crate) fn redis_now_ms(srv: &RedisServer) -> i64 {
    let (secs, micros): (i64, i64) = get(srv, &["TIME"]);
    secs * 1000 + micros / 1000
}

/// The events of one job, oldest first.
pub(crate) fn events_of(srv: &RedisServer, q: &Queue, id: &JobId) -> Vec<BTreeMap<String, String>> {
    events(srv, q)
        .into_iter()
        .filter(|e| e["job"] == id.as_str())
        .collect()
}

/// `(op, from, to)` of each event.
pub(crate) fn moves(events: &[BTreeMap<String, String>]) -> Vec<(String, String, String)> {
    events
        .iter()
        .map(|e| (e["op"].clone(), e["from"].clone(), e["to"].clone()))
        .collect()
}

pub(crate) fn mv(op: &str, from: &str, to: &str) -> (String, String, String) {
    (op.to_owned(), from.to_owned(), to.to_owned())
}

pub(crate) fn failed(kind: &str, message: &str, retryable: bool, backoff: Duration) -> Outcome {
    Outcome::Failed {
        error: AttemptError {
            kind: kind.into(),
            message: message.into(),
            retryable,
            retries_exhausted: false,
        },
        backoff,
        cleanup_needed: false,
    }
}

/// Resets command statistics after making sure every script is cached.
pub(crate) async fn reset_stats(srv: &RedisServer, q: &Queue) {
    q.load_scripts().await.expect("load scripts");
    assert_eq!(get::<String>(srv, &["CONFIG", "RESETSTAT"]), "OK");
}
