//! Populating a queue through the `Queue` client, as the tests that drive jobs
//! themselves (no worker runtime) do: connect, enqueue, lease one, start.

use std::time::Duration;

use leasehold_core::{JobId, Lease, NewJob, Queue, QueueConfig, Started};
use leasehold_testkit::RedisServer;
use serde_json::json;

/// A `Queue` client for queue `name` on the test server.
pub(crate) async fn queue(srv: &RedisServer, name: &str) -> Queue {
    Queue::connect(&srv.url(), name, QueueConfig::default())
        .await
        .expect("connect")
}

/// Enqueues `job` and returns its id.
pub(crate) async fn enqueue(q: &Queue, job: NewJob) -> JobId {
    q.enqueue(job).await.expect("enqueue").id
}

/// A new job of `pipeline` with input `{"n": n}`.
pub(crate) fn job(pipeline: &str, n: u32) -> NewJob {
    NewJob::new(pipeline, &json!({ "n": n })).unwrap()
}

/// Leases exactly one job of `pipeline` (the next in line) for `worker`.
pub(crate) async fn lease_one(q: &Queue, worker: &str, pipeline: &str, ttl: Duration) -> Lease {
    let mut leased = q.lease(worker, &[pipeline], 1, ttl).await.expect("lease");
    assert_eq!(leased.leases.len(), 1, "expected one lease of {pipeline}");
    leased.leases.pop().unwrap()
}

/// Starts the leased job at its first step, `fetch`.
pub(crate) async fn start(q: &Queue, lease: &Lease) {
    assert_eq!(q.start(lease, "fetch").await.unwrap(), Started::Running);
}
