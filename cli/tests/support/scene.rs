//! A populated queue for the `cli_*` tests: a run of the binary against a
//! test's `redis-server`, a failure outcome, a STALE job, and the scene most
//! tests read (jobs in every state, a lock, a worker) with its job ids.

use std::time::Duration;

use super::binary::{command, run_cmd, Run};
use super::jobs::{enqueue, job, lease_one, queue, start};
use leasehold_core::{AttemptError, JobId, Lease, Outcome, Queue};
use leasehold_testkit::RedisServer;
use serde_json::Value;

pub(crate) const TTL: Duration = Duration::from_secs(60);

/// Runs the binary against `srv` with `args`.
pub(crate) async fn cli(srv: &RedisServer, args: &[&str]) -> Run {
    run_cmd(command(&srv.url(), args)).await
}

pub(crate) fn failure(retryable: bool) -> Outcome {
    Outcome::Failed {
        error: AttemptError {
            kind: "validation".into(),
            message: "3 orders have negative totals".into(),
            retryable,
            retries_exhausted: false,
        },
        backoff: Duration::ZERO,
        cleanup_needed: false,
    }
}

/// A RUNNING job whose lease expires and is swept: STALE, holding its lock.
pub(crate) async fn make_stale(q: &Queue, pipeline: &str) -> Lease {
    let lease = lease_one(q, "w-dead", pipeline, Duration::from_millis(1000)).await;
    start(q, &lease).await;
    q.checkpoint(&lease, "fetch", "{\"rows\":1}", Some("load"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(q.sweep(100).await.unwrap().stale, 1);
    lease
}

/// A populated queue `orders`: one job in every state, a worker, two locks.
pub(crate) struct Scene {
    pub(crate) stale: JobId,
    pub(crate) running: JobId,
    pub(crate) leased: JobId,
    pub(crate) parked: JobId,
    pub(crate) ready: JobId,
    pub(crate) delayed: JobId,
    pub(crate) succeeded: JobId,
    pub(crate) failed: JobId,
    pub(crate) cancelled: JobId,
    pub(crate) running_lease: Lease,
}

pub(crate) async fn scene(srv: &RedisServer) -> Scene {
    let q = queue(srv, "orders").await;
    let stale = enqueue(&q, job("sync", 1).resource("shop:s")).await;
    make_stale(&q, "sync").await;
    let succeeded = enqueue(&q, job("sync", 2)).await;
    let l = lease_one(&q, "w1", "sync", TTL).await;
    start(&q, &l).await;
    q.checkpoint(&l, "fetch", "{\"rows\":2}", None)
        .await
        .unwrap();
    q.finish(&l, &Outcome::Succeeded).await.unwrap();
    let failed = enqueue(&q, job("sync", 3)).await;
    let l = lease_one(&q, "w1", "sync", TTL).await;
    start(&q, &l).await;
    q.finish(&l, &failure(false)).await.unwrap();
    let cancelled = enqueue(&q, job("sync", 4)).await;
    q.cancel(&cancelled, "not needed", "alice").await.unwrap();
    let running = enqueue(&q, job("sync", 5).resource("shop:a")).await;
    let running_lease = lease_one(&q, "w1", "sync", TTL).await;
    start(&q, &running_lease).await;
    let leased = enqueue(&q, job("sync", 6)).await;
    lease_one(&q, "w2", "sync", TTL).await;
    let parked = enqueue(&q, job("sync", 7).resource("shop:a")).await;
    assert!(q
        .lease("w2", &["sync"], 1, TTL)
        .await
        .unwrap()
        .leases
        .is_empty());
    let ready = enqueue(&q, job("report", 8)).await;
    let delayed = enqueue(&q, job("report", 9).delay(Duration::from_secs(3600))).await;
    srv.cmd(&[
        "SET",
        &q.keys().worker("w1"),
        r#"{"id":"w1","pid":4242,"started_at":1778025600000,"pipelines":["sync"],"concurrency":4,"active":1,"shutting_down":false}"#,
        "PX",
        "60000",
    ]);
    srv.cmd(&["SADD", &q.keys().workers(), "w1", "w-gone"]);
    Scene {
        stale,
        running,
        leased,
        parked,
        ready,
        delayed,
        succeeded,
        failed,
        cancelled,
        running_lease,
    }
}

pub(crate) fn ids(v: &Value) -> Vec<String> {
    v["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect()
}
