//! A group's completion job under its pipeline's flow gates and policies: the
//! completion job of a `#[pipeline]` with `max_running` carries its flow gate
//! and `max_attempts`, and the gate holds when it is leased. The rest of the
//! groups tests drive only the core client and live in `core/tests/groups_*.rs`.

mod support;

use leasehold::group::NewGroup;
use leasehold::lease::Outcome;
use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};
use leasehold::queue::{JobId, Queue};
use leasehold_testkit::RedisServer;
use support::{connect, enqueue, get, job, lease_one};

/// Leases one job of `pipeline`, starts it and finishes it with `outcome`; returns its id.
async fn run_one(q: &Queue, pipeline: &str, outcome: Outcome) -> JobId {
    let lease = lease_one(q, "w1", pipeline).await;
    let _ = q.start(&lease, "only").await.expect("start");
    q.finish(&lease, &outcome).await.expect("finish");
    lease.job
}

/// A completion pipeline under flow control: at most one of its jobs runs.
struct LimitedAgg;

#[pipeline(name = "limited_agg", queue = "g", max_attempts = 3, max_running = 1)]
impl LimitedAgg {
    #[step]
    async fn run(&self, _ctx: &StepContext, _input: &serde_json::Value) -> Result<(), StepError> {
        Ok(())
    }
}

#[tokio::test]
async fn the_completion_job_carries_its_pipelines_flow_gates_and_policies() {
    let srv = RedisServer::start();
    let q = connect(&srv, "g").await;
    let done = JobId::new();
    let completion = leasehold::queue::job_for::<LimitedAgg>(&serde_json::json!({"day": 1}))
        .unwrap()
        .id(done.clone());
    q.create_group(&NewGroup::new("f").completion(completion), "t")
        .await
        .unwrap();
    enqueue(&q, job("win", 1).group("f")).await;
    q.seal_group("f", "t").await.unwrap();
    run_one(&q, "win", Outcome::Succeeded).await;
    let fields: Vec<Option<String>> = get(
        &srv,
        &[
            "HMGET",
            &q.keys().job(done.as_str()),
            "flow",
            "max_attempts",
            "state",
        ],
    );
    assert_eq!(
        fields,
        vec![
            Some("running:1:limited_agg".to_owned()),
            Some("3".to_owned()),
            Some("QUEUED".to_owned())
        ]
    );
    // and the gate holds when it is leased
    let l = lease_one(&q, "w1", "limited_agg").await;
    let holders: Vec<String> = get(
        &srv,
        &[
            "ZRANGE",
            &format!("{}:running:limited_agg", q.keys().base()),
            "0",
            "-1",
        ],
    );
    assert_eq!(holders, vec![l.job.to_string()]);
}
