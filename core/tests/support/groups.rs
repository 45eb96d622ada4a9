//! The holder's moves made by hand and the readers the `groups_*` tests share:
//! a failure outcome, one job leased, started and finished, a pipeline's ready
//! set, and the completion jobs enqueued so far.

use std::time::Duration;

use super::server::{get, group_count_errors, lease_one};
use leasehold_core::Outcome;
use leasehold_core::{AttemptError, JobId, Queue};
use leasehold_testkit::RedisServer;

pub(crate) fn failed(retryable: bool) -> Outcome {
    Outcome::Failed {
        error: AttemptError {
            kind: "test".into(),
            message: "it broke".into(),
            retryable,
            retries_exhausted: false,
        },
        backoff: Duration::ZERO,
        cleanup_needed: false,
    }
}

/// Leases one job of `pipeline`, starts it and finishes it with `outcome`; returns its id.
pub(crate) async fn run_one(q: &Queue, pipeline: &str, outcome: Outcome) -> JobId {
    let lease = lease_one(q, "w1", pipeline).await;
    let _ = q.start(&lease, "only").await.expect("start");
    q.finish(&lease, &outcome).await.expect("finish");
    lease.job
}

/// The ids of the queue's ready set of `pipeline`.
pub(crate) fn ready(srv: &RedisServer, q: &Queue, pipeline: &str) -> Vec<String> {
    get(srv, &["ZRANGE", &q.keys().ready(pipeline), "0", "-1"])
}

pub(crate) fn completion_events(srv: &RedisServer, q: &Queue) -> usize {
    super::server::events(srv, q)
        .iter()
        .filter(|e| {
            e.get("reason")
                .is_some_and(|r| r.starts_with("completion of group"))
        })
        .count()
}

/// Asserts group `g`'s counts per state are exact (each child once, in the
/// state it is in) and returns the group.
pub(crate) async fn exact(srv: &RedisServer, q: &Queue, g: &str) -> leasehold_core::GroupInfo {
    let errors = group_count_errors(srv, q, g);
    assert!(errors.is_empty(), "group {g}: {errors:?}");
    let info = q.group(g).await.unwrap().unwrap();
    assert_eq!(info.counted(), info.total);
    info
}
