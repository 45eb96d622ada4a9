//! Flow control as an operator sees it, over the real binary and a private
//! `redis-server`: `leasehold pause`/`resume`, `status` showing pauses and
//! gates at their limit, `show` and `jobs` saying why a job waits, and the
//! dashboard's pause API and pages.

mod support;

use std::time::Duration;

use leasehold_core::{FlowSpec, JobId, NewJob, PauseScope};
use leasehold_testkit::RedisServer;
use reqwest::StatusCode;
use serde_json::json;
use support::binary::{command, run_cmd, Run};
use support::dashboard::{http, Dashboard};
use support::jobs::{job, queue};

const TTL: Duration = Duration::from_secs(60);
const TOKEN: &str = "dash-secret-0123456789";

async fn cli(srv: &RedisServer, args: &[&str]) -> Run {
    run_cmd(command(&srv.url(), args)).await
}

/// A job of `load` on resource `wh` under `resource_limit = 2`.
fn limited(i: u32) -> NewJob {
    let flow = FlowSpec {
        resource_limit: Some(2),
        ..FlowSpec::default()
    };
    let (resource, gates) = flow.gates("load", Some("wh"), None).unwrap();
    assert_eq!(resource, None, "counted in slots, not locked");
    job("load", i).flow(gates)
}

#[tokio::test]
async fn operators_see_why_jobs_wait_and_pause_and_resume() {
    let srv = RedisServer::start();
    let q = queue(&srv, "loads").await;
    let mut ids: Vec<JobId> = Vec::new();
    for i in 0..3 {
        ids.push(q.enqueue(limited(i)).await.unwrap().id);
    }
    // two take the resource's slots, the third waits for one
    let held = q.lease("w", &["load"], 10, TTL).await.unwrap();
    assert_eq!(held.leases.len(), 2);
    cli(&srv, &["show", ids[2].as_str()]).await.ok().shows(&[
        "waiting",
        "resource wh at its limit (2/2 held)",
        "slots:2:wh",
    ]);
    cli(&srv, &["jobs", "--state", "queued"])
        .await
        .ok()
        .shows(&[ids[2].as_str(), "resource wh at its limit"]);
    cli(&srv, &["status", "--queue", "loads"])
        .await
        .ok()
        .shows(&["1 waiting: resource wh at limit 2/2"]);

    // pause the pipeline: recorded, shown, and the waiting job says so
    cli(
        &srv,
        &[
            "pause",
            "loads",
            "--pipeline",
            "load",
            "--reason",
            "warehouse maintenance",
        ],
    )
    .await
    .ok()
    .shows(&["paused pipeline load of queue loads"]);
    cli(&srv, &["status", "--queue", "loads"])
        .await
        .ok()
        .shows(&["PAUSED: pipeline load since", "warehouse maintenance"]);
    let extra = q.enqueue(job("load", 9)).await.unwrap().id;
    cli(&srv, &["show", extra.as_str()])
        .await
        .ok()
        .shows(&["paused (pipeline load) since", "warehouse maintenance"]);
    assert!(q
        .lease("w", &["load"], 10, TTL)
        .await
        .unwrap()
        .leases
        .is_empty());
    let status = cli(&srv, &["--json", "status", "--queue", "loads"])
        .await
        .ok()
        .json();
    let pauses = &status[0]["pauses"];
    assert_eq!(pauses[0]["scope"]["scope"], "pipeline", "{status}");
    assert_eq!(pauses[0]["reason"], "warehouse maintenance");
    cli(&srv, &["resume", "loads", "--pipeline", "load"])
        .await
        .ok()
        .shows(&["resumed pipeline load of queue loads"]);
    cli(&srv, &["resume", "loads", "--pipeline", "load"])
        .await
        .ok()
        .shows(&["was not paused"]);
    assert_eq!(
        q.lease("w", &["load"], 10, TTL).await.unwrap().leases.len(),
        1
    );

    // the dashboard: the API needs the token, pauses the queue, the page shows it
    let dash = Dashboard::start(&srv.url(), &[], Some(TOKEN)).await;
    let c = http();
    let r = c
        .post(dash.url("/api/queues/loads/pause"))
        .json(&json!({"reason": "freeze"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(q.pauses().await.unwrap().is_empty());
    let r = c
        .post(dash.url("/api/queues/loads/pause"))
        .bearer_auth(TOKEN)
        .json(&json!({"reason": "freeze", "operator": "alice"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["outcome"], "paused");
    assert_eq!(v["by"], "dashboard:alice");
    let pauses = q.pauses().await.unwrap();
    assert_eq!(pauses[0].scope, PauseScope::Queue);
    let page = c
        .get(dash.url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("the whole queue"), "{page}");
    assert!(page.contains("freeze"));
    let detail = c
        .get(dash.url(&format!("/jobs/loads/{}", ids[2])))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(detail.contains("paused (queue loads)"), "{detail}");
    let r = c
        .post(dash.url("/queues/loads/resume"))
        .form(&[("token", TOKEN), ("reason", "thaw")])
        .send()
        .await
        .unwrap();
    assert!(
        r.status().is_success() || r.status().is_redirection(),
        "{}",
        r.status()
    );
    assert!(q.pauses().await.unwrap().is_empty());
    dash.stop().await;
}
