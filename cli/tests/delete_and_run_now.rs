//! Two operator actions from the command line, each through its own script
//! (state-checked, validated before the first write, recorded as an event
//! with who and why): `delete` of a terminal job and `run-now` of a delayed
//! job.

mod support;

use std::time::Duration;

use leasehold_core::{Inspector, JobId, JobState};
use leasehold_testkit::RedisServer;
use serde_json::json;
use support::binary::{command, run_cmd, Run};
use support::dashboard::{http, Dashboard};
use support::jobs::{enqueue, job, lease_one, queue};

async fn cli(srv: &RedisServer, args: &[&str]) -> Run {
    run_cmd(command(&srv.url(), args)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_a_terminal_job_and_run_a_delayed_one_now() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    let k = q.keys().clone();

    // delete: a CANCELLED job goes, with its attempt record and index entries
    let gone = enqueue(
        &q,
        job("sync", 1).input_key("orders:a:1").resource("shop:a"),
    )
    .await;
    q.cancel(&gone, "test data", "alice").await.unwrap();
    let queued = enqueue(&q, job("sync", 2)).await;
    // a job that has not ended is refused (exit 4), and nothing is written
    let before = srv.dump("*");
    let run = cli(&srv, &["delete", queued.as_str(), "--reason", "x"])
        .await
        .code(4);
    assert!(
        run.stderr.contains("is QUEUED: delete refused")
            && run
                .stderr
                .contains("only a SUCCEEDED, FAILED or CANCELLED job is deleted"),
        "{run:?}"
    );
    assert_eq!(before, srv.dump("*"), "a refused delete writes nothing");
    cli(&srv, &["delete", gone.as_str(), "--reason", ""])
        .await
        .code(2);
    cli(
        &srv,
        &[
            "--by",
            "bob",
            "delete",
            gone.as_str(),
            "--reason",
            "test data, not real",
        ],
    )
    .await
    .ok()
    .shows(&["(CANCELLED) deleted from queue orders"]);
    assert!(q.job(&gone).await.unwrap().is_none());
    // nothing of it is left but its events and its input key's last outcome
    // (kept as retention keeps it: a later enqueue of the key still knows it):
    // no record, attempt record, `done` entry or search index member
    for (key, value) in srv.dump("*") {
        if key != k.events() && !key.ends_with(":outcomes") {
            assert!(
                !value.contains(gone.as_str()),
                "{key} still names it: {value}"
            );
        }
    }
    let events = Inspector::new(q.clone()).job_events(&gone).await.unwrap();
    let last = events.last().expect("its events outlive it");
    assert_eq!(
        (
            last.op.as_str(),
            last.by.as_str(),
            last.reason.as_str(),
            last.to
        ),
        ("delete", "bob", "test data, not real", JobState::Cancelled)
    );
    // it is gone for the CLI too
    cli(&srv, &["show", gone.as_str()]).await.code(3);

    // run-now: a job delayed an hour becomes due and is leased at once
    let later = enqueue(&q, job("later", 3).delay(Duration::from_secs(3600))).await;
    assert!(q
        .lease("w1", &["later"], 1, Duration::from_secs(60))
        .await
        .unwrap()
        .leases
        .is_empty());
    cli(
        &srv,
        &[
            "--by",
            "carol",
            "run-now",
            later.as_str(),
            "--reason",
            "source ready early",
        ],
    )
    .await
    .ok()
    .shows(&["is due now (it was delayed until 20"]);
    let l = lease_one(&q, "w1", "later", Duration::from_secs(60)).await;
    assert_eq!(l.job, later);
    let events = Inspector::new(q.clone()).job_events(&later).await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.op == "run_now" && e.by == "carol" && e.reason == "source ready early"),
        "{events:?}"
    );
    // not delayed, or not QUEUED: refused
    let run = cli(&srv, &["run-now", queued.as_str()]).await.code(4);
    assert!(run.stderr.contains("it is not delayed"), "{run:?}");
    let run = cli(&srv, &["run-now", later.as_str()]).await.code(4);
    assert!(run.stderr.contains("is LEASED: run now refused"), "{run:?}");

    // the dashboard: the job page offers each where it applies, and the API
    // runs them through the same scripts (token needed)
    let dash = Dashboard::start(&srv.url(), &["--token", "s3cret"], None).await;
    let delayed = enqueue(&q, job("later", 4).delay(Duration::from_secs(3600))).await;
    let page = |id: JobId| {
        let url = dash.url(&format!("/jobs/orders/{id}"));
        async move { http().get(url).send().await.unwrap().text().await.unwrap() }
    };
    let p = page(delayed.clone()).await;
    assert!(p.contains("form class=\"action-run-now\""), "{p}");
    assert!(!p.contains("action-delete"), "{p}");
    let post = |path: String, body: serde_json::Value| {
        let url = dash.url(&path);
        async move {
            http()
                .post(url)
                .bearer_auth("s3cret")
                .json(&body)
                .send()
                .await
                .unwrap()
        }
    };
    let res = post(
        format!("/api/jobs/orders/{delayed}/run-now"),
        json!({"operator": "dave", "reason": "now"}),
    )
    .await;
    assert_eq!(res.status().as_u16(), 200);
    assert_eq!(
        lease_one(&q, "w2", "later", Duration::from_secs(60))
            .await
            .job,
        delayed
    );
    // a job that has not ended cannot be deleted: 409
    let res = post(
        format!("/api/jobs/orders/{queued}/delete"),
        json!({"reason": "x"}),
    )
    .await;
    assert_eq!(res.status().as_u16(), 409);
    q.cancel(&queued, "test", "dave").await.unwrap();
    let p = page(queued.clone()).await;
    assert!(p.contains("form class=\"action-delete\""), "{p}");
    let res = post(
        format!("/api/jobs/orders/{queued}/delete"),
        json!({"operator": "dave", "reason": "test data"}),
    )
    .await;
    assert_eq!(res.status().as_u16(), 200);
    assert!(q.job(&queued).await.unwrap().is_none());
    dash.stop().await;
}
