//! Why and what, in every list: each job row of `jobs` (its table and JSON),
//! `/api/jobs` and the dashboard's jobs page shows a short input summary and,
//! for a FAILED, STALE or CANCELLED job, the step, error kind, message and
//! whether it is retryable; a bulk retry counts retryable and permanent
//! failures apart and retries only the retryable ones unless told otherwise.
//!
//! The tests drive the jobs themselves through the `Queue` client.

mod support;

use std::time::Duration;

use leasehold_core::{AttemptError, JobId, JobState, Outcome, PipelineSpec, Queue, StaleLock};
use leasehold_testkit::RedisServer;
use serde_json::{json, Value};
use support::binary::{command, run_cmd, Run};
use support::dashboard::{http, Dashboard};
use support::jobs::{enqueue, job, lease_one, queue, start};

async fn cli(srv: &RedisServer, args: &[&str]) -> Run {
    run_cmd(command(&srv.url(), args)).await
}

/// Runs the next job of `sync` through `fetch`, then fails it in `load`.
async fn fail_in_load(q: &Queue, kind: &str, message: &str, retryable: bool) {
    let l = lease_one(q, "w1", "sync", Duration::from_secs(60)).await;
    start(q, &l).await;
    q.checkpoint(&l, "fetch", "{}", Some("load")).await.unwrap();
    q.finish(
        &l,
        &Outcome::Failed {
            error: AttemptError {
                kind: kind.into(),
                message: message.into(),
                retryable,
                retries_exhausted: false,
            },
            backoff: Duration::ZERO,
            cleanup_needed: false,
        },
    )
    .await
    .unwrap();
}

/// The row of job `id` in a `JobPage` as JSON.
fn row<'a>(page: &'a Value, id: &JobId) -> &'a Value {
    page["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == id.as_str())
        .unwrap_or_else(|| panic!("no row of {id}: {page:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_list_says_what_a_job_processes_and_why_it_ended() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    // the pipeline's published steps name the step a failure happened in
    q.register_pipeline(&PipelineSpec {
        name: "sync".into(),
        queue: Some("orders".into()),
        steps: vec!["fetch".into(), "load".into()],
        max_attempts: 1,
        stale_lock: StaleLock::Hold,
        resource_template: None,
        input_key_template: None,
        input_schema: None,
        flow: None,
        version: String::new(),
    })
    .await
    .unwrap();
    let permanent = enqueue(&q, job("sync", 1).input_key("orders:shop-a:0506")).await;
    fail_in_load(&q, "validation", "3 orders have negative totals", false).await;
    let retryable = enqueue(&q, job("sync", 2)).await;
    fail_in_load(&q, "io", "warehouse busy", true).await;
    let stale = enqueue(&q, job("sync", 3)).await;
    let l = lease_one(&q, "w-dead", "sync", Duration::from_millis(800)).await;
    start(&q, &l).await;
    q.checkpoint(&l, "fetch", "{}", Some("load")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(q.sweep(100).await.unwrap().stale, 1);
    let cancelled = enqueue(&q, job("sync", 4)).await;
    q.cancel(&cancelled, "duplicate of yesterday's", "alice")
        .await
        .unwrap();
    let queued = enqueue(&q, job("sync", 5)).await;

    // jobs --json: the input summary, and why each ended
    let v = cli(&srv, &["jobs", "--json"]).await.ok().json();
    assert_eq!(
        row(&v, &permanent)["input"],
        "orders:shop-a:0506",
        "the input key"
    );
    assert_eq!(row(&v, &queued)["input"], r#"{"n":5}"#, "the input itself");
    assert_eq!(row(&v, &queued)["ended"], Value::Null);
    assert_eq!(
        row(&v, &permanent)["ended"],
        json!({"step": "load", "kind": "validation", "message": "3 orders have negative totals", "retryable": false})
    );
    assert_eq!(
        row(&v, &retryable)["ended"],
        json!({"step": "load", "kind": "io", "message": "warehouse busy", "retryable": true})
    );
    let e = &row(&v, &stale)["ended"];
    assert_eq!(
        (&e["step"], &e["kind"], &e["retryable"]),
        (&json!("load"), &json!("stale"), &json!(true)),
        "{e:#}"
    );
    let e = &row(&v, &cancelled)["ended"];
    assert_eq!(
        (&e["kind"], &e["message"], &e["retryable"]),
        (
            &json!("cancelled"),
            &json!("duplicate of yesterday's"),
            &json!(true)
        ),
        "{e:#}"
    );

    // the table says the same
    let table = cli(&srv, &["jobs", "--state", "failed"]).await.ok().stdout;
    for needle in [
        "INPUT",
        "WHY IT ENDED",
        "orders:shop-a:0506",
        "in step load: validation: 3 orders have negative totals (permanent)",
        "in step load: io: warehouse busy (retryable)",
    ] {
        assert!(table.contains(needle), "jobs lacks {needle:?}:\n{table}");
    }

    // /api/jobs and the dashboard's list
    let dash = Dashboard::start(&srv.url(), &["--token", "s3cret"], None).await;
    let api: Value = http()
        .get(dash.url("/api/jobs?queue=orders"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for id in [&permanent, &retryable, &stale, &cancelled, &queued] {
        assert_eq!(row(&api, id)["ended"], row(&v, id)["ended"], "{id}");
        assert_eq!(row(&api, id)["input"], row(&v, id)["input"], "{id}");
    }
    let page = http()
        .get(dash.url("/jobs?queue=orders&state=FAILED"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("orders:shop-a:0506"), "{page}");
    assert!(page.contains("data-retryable=\"no\""), "{page}");
    assert!(page.contains("data-retryable=\"yes\""), "{page}");
    assert!(page.contains("3 orders have negative totals"), "{page}");

    // the bulk retry confirm page counts them apart, and retries only the retryable
    let confirm = |extra: &'static str| {
        let url = dash.url(&format!("/bulk?action=retry&queue=orders{extra}"));
        async move { http().get(url).send().await.unwrap().text().await.unwrap() }
    };
    let page = confirm("").await;
    assert!(page.contains("data-count=\"1\""), "{page}");
    assert!(
        page.contains("data-retryable=\"1\" data-permanent=\"1\""),
        "{page}"
    );
    assert!(page.contains("those are left out"), "{page}");
    let page = confirm("&include_permanent=on").await;
    assert!(page.contains("data-count=\"2\""), "{page}");
    dash.stop().await;

    // the command line the same
    cli(&srv, &["bulk", "retry", "--queue", "orders", "--dry-run"])
        .await
        .ok()
        .shows(&[
            "would touch 1 FAILED job of queue orders; 1 job failed permanently",
            "--include-permanent retries them too",
        ]);
    cli(
        &srv,
        &[
            "bulk",
            "retry",
            "--queue",
            "orders",
            "--dry-run",
            "--include-permanent",
        ],
    )
    .await
    .ok()
    .shows(&["would touch 2 FAILED jobs of queue orders (1 retryable, 1 permanent"]);
    cli(
        &srv,
        &[
            "bulk",
            "retry",
            "--queue",
            "orders",
            "--reason",
            "warehouse back",
        ],
    )
    .await
    .ok()
    .shows(&["1 of 1 job done"]);
    assert_eq!(
        q.job(&retryable).await.unwrap().unwrap().state,
        JobState::Queued
    );
    assert_eq!(
        q.job(&permanent).await.unwrap().unwrap().state,
        JobState::Failed
    );
}
