//! The `leasehold` binary and the dashboard on groups: a backfill range
//! enqueued as a group with a completion job (`group create`, `enqueue
//! --range --group`), its progress in `groups` and `group show`, retrying its
//! failed children, cancelling a group, a job waiting for its parents, and
//! the dashboard's groups pages, JSON and actions. The holder's moves are
//! made through the `Queue` client, so every count shown is exact.

mod support;

use std::time::Duration;

use leasehold_core::{AttemptError, JobId, JobState, Outcome, Queue};
use leasehold_testkit::RedisServer;
use serde_json::json;
use support::binary::{command, run_cmd, Run};
use support::dashboard::{http, Dashboard};
use support::jobs::{lease_one, queue};

async fn cli(srv: &RedisServer, args: &[&str]) -> Run {
    run_cmd(command(&srv.url(), args)).await
}

async fn finish_one(q: &Queue, pipeline: &str, outcome: Outcome) -> JobId {
    let lease = lease_one(q, "w1", pipeline, Duration::from_secs(60)).await;
    let _ = q.start(&lease, "only").await.unwrap();
    q.finish(&lease, &outcome).await.unwrap();
    lease.job
}

fn failed() -> Outcome {
    Outcome::Failed {
        error: AttemptError {
            kind: "test".into(),
            message: "broken window".into(),
            retryable: false,
            retries_exhausted: false,
        },
        backoff: Duration::ZERO,
        cleanup_needed: false,
    }
}

#[tokio::test]
async fn a_backfill_group_with_a_completion_job_from_the_command_line() {
    let srv = RedisServer::start();
    cli(
        &srv,
        &[
            "group",
            "create",
            "day-0506",
            "--queue",
            "orders",
            "--completion",
            "aggregate",
            "--completion-input",
            r#"{"day":"2026-05-06"}"#,
        ],
    )
    .await
    .ok()
    .shows(&["created group day-0506 in queue orders"]);
    let run = cli(
        &srv,
        &[
            "enqueue",
            "load",
            "--unregistered",
            "--queue",
            "orders",
            "--input-template",
            r#"{"from":"{from}"}"#,
            "--input-key-template",
            "load:{from}",
            "--from",
            "2026-05-06T00:00:00Z",
            "--to",
            "2026-05-06T04:00:00Z",
            "--step",
            "1h",
            "--group",
            "day-0506",
        ],
    )
    .await
    .ok();
    assert!(run.stderr.contains("group day-0506 sealed"), "{run:?}");
    let q = queue(&srv, "orders").await;
    for _ in 0..3 {
        finish_one(&q, "load", Outcome::Succeeded).await;
    }
    let bad = finish_one(&q, "load", failed()).await;
    cli(&srv, &["groups"]).await.ok().shows(&[
        "day-0506",
        "blocked",
        "100% 4/4 ended: 3 succeeded, 1 failed",
    ]);
    cli(&srv, &["group", "show", "day-0506"])
        .await
        .ok()
        .shows(&[
            "completion held: 1 of 4 children did not succeed",
            &format!("FAILED: {bad}"),
            "not enqueued yet (when every child SUCCEEDED)",
        ]);
    let v = cli(&srv, &["group", "show", "day-0506", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(v["failed"], json!([bad.to_string()]), "{v:#}");
    assert_eq!(v["children"].as_array().map(Vec::len), Some(4));

    cli(&srv, &["group", "retry", "day-0506", "--reason", "fixed"])
        .await
        .ok()
        .shows(&["1 child retried"]);
    finish_one(&q, "load", Outcome::Succeeded).await;
    let v = cli(&srv, &["group", "show", "day-0506", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(v["group"]["status"], json!("completed"), "{v:#}");
    let done = JobId::parse(v["group"]["completion"].as_str().unwrap()).unwrap();
    let agg = q.job(&done).await.unwrap().unwrap();
    assert_eq!(agg.pipeline, "aggregate");
    assert_eq!(agg.input, json!({"day": "2026-05-06"}));
    assert_eq!(agg.state, JobState::Queued);

    // the same range again, into a new group: the windows that loaded join it as SUCCEEDED
    let run = cli(
        &srv,
        &[
            "enqueue",
            "load",
            "--unregistered",
            "--queue",
            "orders",
            "--input-template",
            r#"{"from":"{from}"}"#,
            "--input-key-template",
            "load:{from}",
            "--from",
            "2026-05-06T00:00:00Z",
            "--to",
            "2026-05-06T04:00:00Z",
            "--step",
            "1h",
            "--group",
            "day-0506-again",
        ],
    )
    .await
    .ok();
    assert!(
        run.stdout
            .contains("4 of them existed already and are children of group day-0506-again"),
        "{run:?}"
    );
    cli(&srv, &["groups"]).await.ok().shows(&[
        "day-0506-again",
        "completed",
        "4/4 ended: 4 succeeded",
    ]);

    // the dashboard offers no cancel for a completed group, nor a retry
    // when no child failed
    let dash = Dashboard::start(&srv.url(), &["--token", "s3cret"], None).await;
    let page = http()
        .get(dash.url("/groups/orders/day-0506-again"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("completed"), "{page}");
    assert!(!page.contains("Cancel the group"), "{page}");
    assert!(!page.contains("Retry its failed children"), "{page}");
    assert!(
        page.contains("A completed group cannot be cancelled."),
        "{page}"
    );
    dash.stop().await;
}

#[tokio::test]
async fn cancel_a_group_and_wait_for_parents_from_the_command_line_and_the_dashboard() {
    let srv = RedisServer::start();
    let q = queue(&srv, "ops").await;
    let base = [
        "enqueue",
        "sync",
        "--unregistered",
        "--queue",
        "ops",
        "--json",
        "--group",
        "batch",
        "--keep-open",
    ];
    let mut ids = Vec::new();
    for n in 0..3 {
        let input = format!(r#"{{"n":{n}}}"#);
        let mut args = base.to_vec();
        args.extend(["--input", &input]);
        ids.push(cli(&srv, &args).await.ok().json()["id"].clone());
    }
    let parent = ids[0].as_str().unwrap().to_owned();
    let child = cli(
        &srv,
        &[
            "enqueue",
            "after",
            "--unregistered",
            "--queue",
            "ops",
            "--input",
            "{}",
            "--depends-on",
            &parent,
            "--json",
        ],
    )
    .await
    .ok()
    .json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    cli(
        &srv,
        &[
            "enqueue",
            "after",
            "--unregistered",
            "--queue",
            "ops",
            "--input",
            "{}",
            "--depends-on",
            JobId::new().as_str(),
        ],
    )
    .await
    .code(3);
    let waiting: Vec<String> = redis_list(&srv, &q.awaiting_key());
    assert_eq!(waiting, vec![child.clone()]);
    cli(&srv, &["show", &child])
        .await
        .ok()
        .shows(&[&format!("waiting for {parent} (QUEUED, not leasable")]);

    // one child runs; the dashboard shows the group, then cancels it
    let lease = lease_one(&q, "w1", "sync", Duration::from_secs(60)).await;
    let _ = q.start(&lease, "only").await.unwrap();
    let dash = Dashboard::start(&srv.url(), &["--token", "s3cret"], None).await;
    let c = http();
    // create a group and add a child over HTTP
    let v: serde_json::Value = c
        .post(dash.url("/api/groups/ops"))
        .bearer_auth("s3cret")
        .json(&json!({"name": "web", "policy": "all_terminal"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["created"], json!(true), "{v:#}");
    let r = c
        .post(dash.url("/api/queues/ops/pipelines/sync/jobs"))
        .bearer_auth("s3cret")
        .json(&json!({"input": {"n": 9}, "unregistered": true, "group": "batch"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let page = c
        .get(dash.url("/groups"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("batch") && page.contains("web"), "{page}");
    let v: serde_json::Value = c
        .get(dash.url("/api/groups/ops/batch"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["group"]["total"], json!(4), "{v:#}");
    assert_eq!(v["children"].as_array().map(Vec::len), Some(4));
    let page = c
        .get(dash.url("/groups/ops/batch"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("Children") && page.contains("Cancel the group"),
        "{page}"
    );
    let refused = c
        .post(dash.url("/api/groups/ops/batch/cancel"))
        .json(&json!({"reason": "no token"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    let v: serde_json::Value = c
        .post(dash.url("/api/groups/ops/batch/cancel"))
        .bearer_auth("s3cret")
        .json(&json!({"reason": "wrong input", "operator": "ann"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (&v["children"]["cancelled"], &v["children"]["requested"]),
        (&json!(3), &json!(1)),
        "{v:#}"
    );
    dash.stop().await;
    let job = q.job(&lease.job).await.unwrap().unwrap();
    assert!(
        job.cancel.is_some(),
        "the running child got its in-flight cancel"
    );
    // the oldest child (the parent) is the one running: its dependent waits
    // until the holder honours the cancel, then is cancelled with the reason
    assert_eq!(lease.job.as_str(), parent);
    let waited = JobId::parse(&child).unwrap();
    assert_eq!(
        q.job(&waited).await.unwrap().unwrap().state,
        JobState::Queued
    );
    q.finish(
        &lease,
        &Outcome::Cancelled {
            reason: "honoured".into(),
            cleanup_needed: false,
        },
    )
    .await
    .unwrap();
    let job = q.job(&waited).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Cancelled);
    let why = job.cancel.map(|c| c.reason).unwrap_or_default();
    assert!(why.contains(&parent) && why.contains("CANCELLED"), "{why}");
    cli(&srv, &["group", "show", "batch"])
        .await
        .ok()
        .shows(&["cancelled: wrong input"]);
}

fn redis_list(srv: &RedisServer, key: &str) -> Vec<String> {
    let v = srv.cmd(&["ZRANGE", key, "0", "-1"]);
    leasehold_core::redis::from_redis_value(v).unwrap()
}

#[tokio::test]
async fn an_http_group_create_builds_its_completion_job_under_the_pipelines_contract() {
    let srv = RedisServer::start();
    let q = queue(&srv, "ops").await;
    let mut spec = leasehold_core::PipelineSpec {
        name: "daily".into(),
        queue: Some("ops".into()),
        steps: vec!["sum".into()],
        max_attempts: 4,
        stale_lock: leasehold_core::StaleLock::Release,
        resource_template: Some("day:{day}".into()),
        input_key_template: None,
        input_schema: Some(json!({
            "type": "object",
            "properties": {"day": {"type": "string", "minLength": 1}},
            "required": ["day"]
        })),
        flow: Some(leasehold_core::FlowSpec {
            resource_limit: None,
            max_running: Some(1),
            rate: None,
            limiter_template: None,
        }),
        version: String::new(),
    };
    spec.version = spec.digest();
    q.register_pipeline(&spec).await.unwrap();
    let dash = Dashboard::start(&srv.url(), &["--token", "s3cret"], None).await;
    let c = http();
    let create = |body: serde_json::Value| {
        c.post(dash.url("/api/groups/ops"))
            .bearer_auth("s3cret")
            .json(&body)
            .send()
    };
    // an input the schema refuses: nothing is created
    let r = create(json!({"name": "d1", "completion": "daily", "completion_input": {"day": 5}}))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let body = r.text().await.unwrap();
    assert!(body.contains("/day"), "{body}");
    assert!(q.group("d1").await.unwrap().is_none());
    // a pipeline no worker registered is refused unless the request says so
    let r = create(json!({"name": "d1", "completion": "nobody"}))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let r = create(json!({"name": "d0", "completion": "nobody", "unregistered": true}))
        .await
        .unwrap();
    assert!(r.status().is_success());
    // a good one: the completion job gets the spec's policies, resource and flow gates
    let r = create(
        json!({"name": "d1", "completion": "daily", "completion_input": {"day": "2026-12-01"}}),
    )
    .await
    .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    q.seal_group("d1", "t").await.unwrap();
    let info = q.group("d1").await.unwrap().unwrap();
    let done = info.completion.expect("a completion job");
    assert!(info.fired, "an empty sealed group completes at once");
    let fields: Vec<Option<String>> = redis_get(
        &srv,
        &[
            "HMGET",
            &q.keys().job(done.as_str()),
            "max_attempts",
            "stale_lock",
            "resource",
            "flow",
        ],
    );
    assert_eq!(
        fields,
        vec![
            Some("4".into()),
            Some("release".into()),
            Some("day:2026-12-01".into()),
            Some("running:1:daily".into())
        ]
    );
}

fn redis_get<T: leasehold_core::redis::FromRedisValue>(srv: &RedisServer, args: &[&str]) -> T {
    leasehold_core::redis::from_redis_value(srv.cmd(args)).expect("a reply of that type")
}
