//! The STALE moment is kept: an operator's retry or resolve of a STALE job adds
//! the decision (who, when, what, why) beside the attempt's record and changes
//! none of its facts (it ended when it went STALE, in its cut-off step, after
//! the time it ran). `show`, `show --json`, the dashboard's job page and its
//! API say both.
//!
//! The tests lease, start and checkpoint the jobs themselves through the
//! `Queue` client and let the sweep make them STALE; the binary reads them.

mod support;

use std::time::Duration;

use leasehold_core::{JobId, Queue};
use leasehold_testkit::RedisServer;
use serde_json::Value;
use support::binary::{command, run_cmd, Run};
use support::dashboard::{http, Dashboard};
use support::jobs::{enqueue, job, lease_one, queue, start};

async fn cli(srv: &RedisServer, args: &[&str]) -> Run {
    run_cmd(command(&srv.url(), args)).await
}

/// A job of `sync` on resource `res` that completed `fetch`, was cut off in
/// `collect` (its lease expired) and was swept: STALE.
async fn stale_in_collect(q: &Queue, res: &str) -> JobId {
    let id = enqueue(q, job("sync", 1).resource(res)).await;
    let lease = lease_one(q, "w-dead", "sync", Duration::from_millis(800)).await;
    start(q, &lease).await;
    q.checkpoint(&lease, "fetch", "{\"rows\":1}", Some("collect"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(q.sweep(100).await.unwrap().stale, 1);
    id
}

/// `show --json` of `id`.
async fn shown(srv: &RedisServer, id: &JobId) -> Value {
    cli(srv, &["show", id.as_str(), "--json"]).await.ok().json()
}

/// The record of attempt 1 as `show --json` gives it, and the decision taken
/// out of it.
fn split_decision(v: &Value) -> (Value, Value) {
    let mut a = v["job"]["attempts"][0].clone();
    let decision = a
        .as_object_mut()
        .and_then(|o| o.remove("resolution"))
        .unwrap_or(Value::Null);
    (a, decision)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_and_resolve_of_a_stale_job_add_the_decision_and_keep_the_attempt() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    let retried = stale_in_collect(&q, "shop:a").await;
    let resolved = stale_in_collect(&q, "shop:b").await;

    for (id, args, what) in [
        (
            &retried,
            vec![
                "retry",
                retried.as_str(),
                "--reason",
                "collect is idempotent",
            ],
            "retry",
        ),
        (
            &resolved,
            vec![
                "resolve",
                resolved.as_str(),
                "--as",
                "failed",
                "--reason",
                "half the rows written",
            ],
            "resolve",
        ),
    ] {
        // before the decision: the attempt as it went STALE
        let v = shown(&srv, id).await;
        let stale_at = v["job"]["stale_at"].as_i64().expect("stale_at");
        let (before, none) = split_decision(&v);
        assert_eq!(none, Value::Null, "{v:#}");
        assert_eq!(before["state"], "STALE", "{v:#}");
        assert_eq!(
            before["ended_at"], stale_at,
            "ended when it went STALE: {v:#}"
        );
        assert_eq!(before["cut_step"], "collect", "{v:#}");
        assert_eq!(before["steps"][0]["step"], "fetch", "{v:#}");
        let human = cli(&srv, &["show", id.as_str()]).await.ok().stdout;
        let ran = ran_of(&human);
        assert!(
            human.contains("went STALE: lease expired while running step collect"),
            "{human}"
        );

        // the decision, a moment later
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut args = args.clone();
        args.splice(0..0, ["--by", "alice"]);
        cli(&srv, &args).await.ok();

        // after: the same record, with the decision beside it
        let v = shown(&srv, id).await;
        let (after, decision) = split_decision(&v);
        assert_eq!(after, before, "{what} changed the attempt's facts: {v:#}");
        assert_eq!(decision["action"], what, "{decision:#}");
        assert_eq!(decision["by"], "alice", "{decision:#}");
        let at = decision["at"].as_i64().expect("decided at");
        assert!(
            at >= stale_at + 50,
            "decided after it went STALE: {decision:#}"
        );
        if what == "retry" {
            assert_eq!(
                (&decision["to"], &decision["mode"]),
                (&Value::from("QUEUED"), &Value::from("resume")),
                "{decision:#}"
            );
            assert_eq!(v["job"]["state"], "QUEUED");
            assert_eq!(v["job"]["attempt"], 2);
        } else {
            assert_eq!(decision["to"], "FAILED", "{decision:#}");
            assert_eq!(v["job"]["state"], "FAILED");
            assert_eq!(v["verdicts"]["cleanup"], "needed", "{v:#}");
        }

        // show: the facts unchanged, and the decision
        let human = cli(&srv, &["show", id.as_str()]).await.ok().stdout;
        assert_eq!(ran_of(&human), ran, "the duration stays:\n{human}");
        assert!(
            human.contains("went STALE: lease expired while running step collect"),
            "{human}"
        );
        assert!(
            human.contains(&format!("operator {what} by alice: ")),
            "{human}"
        );
        assert!(
            human.contains("decision on the STALE attempt: operator"),
            "the decision is a moment of the timeline:\n{human}"
        );
    }

    // the dashboard and its API say the same
    let dash = Dashboard::start(&srv.url(), &[], None).await;
    for id in [&retried, &resolved] {
        let api: Value = http()
            .get(dash.url(&format!("/api/jobs/orders/{id}")))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let v = shown(&srv, id).await;
        assert_eq!(
            api["job"]["attempts"][0], v["job"]["attempts"][0],
            "the API's record is show's"
        );
        let page = http()
            .get(dash.url(&format!("/jobs/orders/{id}")))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(page.contains("collect (cut off: STALE)"), "{page}");
        assert!(
            page.contains("went STALE: lease expired while running step collect"),
            "{page}"
        );
        assert!(page.contains("operator "), "{page}");
        assert!(page.contains(" by alice: "), "{page}");
    }
    dash.stop().await;
}

/// The `(ran …)` of attempt 1's line in `show`.
fn ran_of(human: &str) -> String {
    let line = human
        .lines()
        .find(|l| l.trim_start().starts_with("#1 STALE"))
        .unwrap_or_else(|| panic!("no attempt 1 line:\n{human}"));
    let (_, ran) = line
        .rsplit_once("(ran ")
        .unwrap_or_else(|| panic!("no run time: {line}"));
    ran.to_owned()
}
