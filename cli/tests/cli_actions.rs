//! The `leasehold` binary end to end, the commands that change Redis: the
//! operator's actions (through the scripts, recording who), enqueue and
//! backfill ranges (idempotent, with progress), sweep (and its dry run) and
//! purge, against a private `redis-server` populated through the `Queue`
//! client.

mod support;

use std::time::Duration;

use leasehold_core::{JobId, JobState};
use leasehold_testkit::RedisServer;
use serde_json::json;
use support::jobs::{enqueue, job, lease_one, queue, start};
use support::scene::*;

#[tokio::test]
async fn actions_go_through_the_scripts_and_record_who() {
    let srv = RedisServer::start();
    let s = scene(&srv).await;
    let q = queue(&srv, "orders").await;

    // cancel a QUEUED job: at once
    let v = cli(
        &srv,
        &["cancel", s.ready.as_str(), "--reason", "dup", "--json"],
    )
    .await
    .ok()
    .json();
    assert_eq!(
        (&v["outcome"], &v["state"]),
        (&json!("cancelled"), &json!("CANCELLED"))
    );
    assert_eq!(
        q.job(&s.ready).await.unwrap().unwrap().state,
        JobState::Cancelled
    );
    // cancel a LEASED job: a request; again: it stands
    let v = cli(
        &srv,
        &[
            "cancel",
            s.leased.as_str(),
            "--reason",
            "stop",
            "--by",
            "ops:bob",
            "--json",
        ],
    )
    .await
    .ok()
    .json();
    assert_eq!(v["outcome"], "requested");
    let again = cli(&srv, &["cancel", s.leased.as_str(), "--reason", "stop!"])
        .await
        .ok();
    assert!(
        again.stdout.contains("already has a cancel request"),
        "{again:?}"
    );

    // is the failure retryable? show says so
    let human = cli(&srv, &["show", s.failed.as_str()]).await.ok().stdout;
    assert!(human.contains("verdict    not retryable"), "{human}");
    let human = cli(&srv, &["show", s.stale.as_str()]).await.ok().stdout;
    assert!(human.contains("verdict    needs a decision"), "{human}");

    // retry the FAILED job (resume, default) and the CANCELLED one from the start
    let v = cli(
        &srv,
        &[
            "retry",
            s.failed.as_str(),
            "--reason",
            "fixed data",
            "--json",
        ],
    )
    .await
    .ok()
    .json();
    assert_eq!((&v["attempt"], &v["mode"]), (&json!(2), &json!("resume")));
    let run = cli(&srv, &["retry", s.cancelled.as_str(), "--from-start"])
        .await
        .ok();
    assert!(
        run.stdout.contains("attempt 2, from the first step"),
        "{run:?}"
    );

    // resolve the STALE job; its lock is released and the operator is recorded
    let run = cli(
        &srv,
        &[
            "resolve",
            s.stale.as_str(),
            "--as",
            "succeeded",
            "--reason",
            "rows verified",
        ],
    )
    .await
    .ok();
    assert!(run.stdout.contains("resolved as SUCCEEDED"), "{run:?}");
    let job = q.job(&s.stale).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Succeeded);
    let res = job.attempts[0].resolution.as_ref().unwrap();
    assert_eq!(
        (res.by.as_str(), res.reason.as_str()),
        ("tester", "rows verified")
    );
    let v = cli(&srv, &["events", "--json", "--limit", "200"])
        .await
        .ok()
        .json();
    let by_of = |op: &str, job: &JobId| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|e| e["op"] == op && e["job"] == job.as_str())
            .map(|e| e["by"].as_str().unwrap().to_owned())
    };
    assert_eq!(by_of("cancel", &s.leased).as_deref(), Some("ops:bob"));
    assert_eq!(by_of("retry", &s.failed).as_deref(), Some("tester"));
    assert_eq!(by_of("resolve", &s.stale).as_deref(), Some("tester"));
    let _ = (s.running, s.running_lease, s.parked, s.succeeded, s.delayed);
}

#[tokio::test]
async fn enqueue_one_job_idempotently() {
    let srv = RedisServer::start();
    let args = [
        "enqueue",
        "sync",
        "--unregistered",
        "--queue",
        "orders",
        "--input",
        r#"{"shop":"a"}"#,
        "--input-key",
        "shop:a:1",
        "--resource",
        "shop:a",
        "--priority",
        "7",
        "--max-attempts",
        "3",
        "--json",
    ];
    let first = cli(&srv, &args).await.ok().json();
    assert_eq!(first["created"], true);
    let second = cli(&srv, &args).await.ok().json();
    assert_eq!(
        (&second["created"], &second["id"]),
        (&json!(false), &first["id"])
    );
    let q = queue(&srv, "orders").await;
    let job = q
        .job(&JobId::parse(first["id"].as_str().unwrap()).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.input, json!({"shop": "a"}));
    assert_eq!((job.priority, job.max_attempts), (7, 3));
    assert_eq!(job.resource.as_deref(), Some("shop:a"));

    // human output; --delay; the queue defaults to the one the pipeline's spec names
    queue(&srv, "nightly-q")
        .await
        .register_pipeline(&leasehold_core::PipelineSpec {
            name: "nightly".into(),
            queue: Some("nightly-q".into()),
            steps: vec!["run".into()],
            max_attempts: 2,
            stale_lock: leasehold_core::StaleLock::Hold,
            resource_template: None,
            input_key_template: None,
            input_schema: None,
            flow: None,
            version: String::new(),
        })
        .await
        .unwrap();
    let run = cli(
        &srv,
        &["enqueue", "nightly", "--input", "{}", "--delay", "5m"],
    )
    .await
    .ok();
    assert!(run.stdout.starts_with("created job "), "{run:?}");
    assert!(run.stdout.contains("in queue nightly-q"), "{run:?}");
    let v = cli(&srv, &["status", "--queue", "nightly-q", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(v[0]["pipelines"][0]["delayed"], 1);
}

#[tokio::test]
async fn backfill_ranges_are_idempotent_and_report_progress() {
    let srv = RedisServer::start();
    let args = [
        "enqueue",
        "orders_sync",
        "--unregistered",
        "--queue",
        "orders",
        "--input-template",
        r#"{"shop":"a","from":"{from}","to":"{to}"}"#,
        "--from",
        "2026-05-06T00:00:00Z",
        "--to",
        "2026-05-07T00:00:00Z",
        "--step",
        "1h",
        "--input-key-template",
        "shop:a:{from}",
        "--resource",
        "shop:a",
    ];
    let first = cli(&srv, &args).await.ok();
    assert!(
        first.stdout.contains("24 windows of orders_sync")
            && first.stdout.contains("24 created, 0 already enqueued"),
        "{first:?}"
    );
    assert!(
        first
            .stderr
            .contains("enqueued 24/24 windows (24 created, 0 existing, 0 succeeded, 0 re-run)"),
        "{first:?}"
    );
    let second = cli(&srv, &args).await.ok();
    assert!(
        second.stdout.contains("0 created, 24 already enqueued"),
        "{second:?}"
    );

    // JSON lists every window; the inputs are filled in
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let v = cli(&srv, &json_args).await.ok().json();
    assert_eq!(
        (&v["windows"], &v["created"], &v["existing"]),
        (&json!(24), &json!(0), &json!(24))
    );
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs[0]["from"], "2026-05-06T00:00:00Z");
    assert_eq!(jobs[23]["to"], "2026-05-07T00:00:00Z");
    assert_eq!(jobs[1]["input_key"], "shop:a:2026-05-06T01:00:00Z");
    let q = queue(&srv, "orders").await;
    let job = q
        .job(&JobId::parse(jobs[1]["id"].as_str().unwrap()).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        job.input,
        json!({"shop": "a", "from": "2026-05-06T01:00:00Z", "to": "2026-05-06T02:00:00Z"})
    );
    assert_eq!(
        job.input_key.as_deref(),
        Some("shop:a:2026-05-06T01:00:00Z")
    );

    // a larger range: chunked, a progress line per chunk, only the new windows created
    let mut wide = args.to_vec();
    assert_eq!(wide[7], "--from");
    wide[8] = "2026-04-06T00:00:00Z"; // 30 more days
    let run = cli(&srv, &wide).await.ok();
    let progress: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("enqueued "))
        .collect();
    assert_eq!(progress.len(), 2, "{run:?}");
    assert!(
        progress[0].starts_with("enqueued 500/744 windows"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("720 created, 24 already enqueued"),
        "{run:?}"
    );
}

#[tokio::test]
async fn sweep_dry_run_changes_nothing_and_sweep_recovers() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    let id = enqueue(&q, job("sync", 1)).await;
    let lease = lease_one(&q, "w1", "sync", Duration::from_millis(100)).await;
    start(&q, &lease).await;
    tokio::time::sleep(Duration::from_millis(250)).await;

    let before = srv.dump("*");
    let v = cli(&srv, &["sweep", "--dry-run", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(
        (&v[0]["queue"], &v[0]["stale"], &v[0]["dry_run"]),
        (&json!("orders"), &json!(1), &json!(true))
    );
    assert_eq!(
        v[0]["moves"][0],
        json!({"job": id.as_str(), "from": "RUNNING", "to": "STALE"})
    );
    assert_eq!(before, srv.dump("*"), "a dry run changed Redis");
    let human = cli(&srv, &["sweep", "--dry-run"]).await.ok().stdout;
    assert!(
        human.contains("dry run: nothing changed") && human.contains("RUNNING -> STALE"),
        "{human}"
    );

    let run = cli(&srv, &["sweep"]).await.ok();
    assert!(
        run.stdout
            .contains("orders: 0 requeued, 0 cancelled, 1 STALE"),
        "{run:?}"
    );
    assert_eq!(q.job(&id).await.unwrap().unwrap().state, JobState::Stale);
}

#[tokio::test]
async fn purge_applies_the_retention_given() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    for n in 0..3 {
        let id = enqueue(&q, job("sync", n)).await;
        q.cancel(&id, "x", "t").await.unwrap();
    }
    let v = cli(&srv, &["purge", "--keep-count", "1", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(
        (&v[0]["queue"], &v[0]["purged"]),
        (&json!("orders"), &json!(2))
    );
    let human = cli(&srv, &["purge", "--keep-count", "1"]).await.ok().stdout;
    assert!(human.contains("orders: purged 0 terminal jobs"), "{human}");
    let v = cli(&srv, &["jobs", "--json"]).await.ok().json();
    assert_eq!(ids(&v).len(), 1);
}
