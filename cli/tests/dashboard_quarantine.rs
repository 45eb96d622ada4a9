//! The dashboard's quarantine: the queue page lists quarantined jobs with why,
//! and repair and purge are `POST` actions guarded by the token, recorded as
//! events.

mod support;

use std::time::Duration;

use leasehold_core::JobState;
use leasehold_testkit::RedisServer;
use reqwest::StatusCode;
use serde_json::{json, Value};
use support::dashboard::{http, Dashboard};
use support::jobs::{enqueue, job, queue};

const TOKEN: &str = "dash-secret-0123456789";

#[tokio::test]
async fn quarantined_jobs_are_listed_and_repaired_or_purged_with_the_token() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    let fixable = enqueue(&q, job("sync", 1)).await;
    let broken = enqueue(&q, job("sync", 2)).await;
    srv.cmd(&["HSET", &q.keys().job(fixable.as_str()), "attempt", "-1"]);
    srv.cmd(&["DEL", &q.keys().job(broken.as_str())]);
    srv.cmd(&["SET", &q.keys().job(broken.as_str()), "oops"]);
    let leased = q
        .lease("w1", &["sync"], 5, Duration::from_secs(60))
        .await
        .expect("lease");
    assert!(leased.leases.is_empty());
    assert_eq!(q.quarantined().await.unwrap().len(), 2);

    let dash = Dashboard::start(&srv.url(), &["--token", TOKEN], None).await;
    let c = http();
    let page = c
        .get(dash.url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for part in [
        "Quarantined: 2",
        fixable.as_str(),
        broken.as_str(),
        "not a positive integer",
        "action-repair",
        "action-purge",
    ] {
        assert!(page.contains(part), "the queues page lacks {part:?}");
    }
    let repair = dash.url(&format!("/api/jobs/orders/{fixable}/repair"));
    // no token: refused, nothing changes
    let r = c.post(&repair).json(&json!({})).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // still unreadable: refused naming the field
    let r = c
        .post(&repair)
        .bearer_auth(TOKEN)
        .json(&json!({"operator": "alice"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let v: Value = r.json().await.unwrap();
    assert!(v["message"].as_str().unwrap().contains("attempt"), "{v}");
    srv.cmd(&["HSET", &q.keys().job(fixable.as_str()), "attempt", "1"]);
    let r = c
        .post(&repair)
        .bearer_auth(TOKEN)
        .json(&json!({"operator": "alice"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["outcome"], "repaired");
    assert_eq!(v["by"], "dashboard:alice");
    assert_eq!(
        q.job(&fixable).await.unwrap().unwrap().state,
        JobState::Queued
    );

    // purge by form: back to the queues page
    let r = c
        .post(dash.url(&format!("/jobs/orders/{broken}/purge")))
        .form(&[("token", TOKEN), ("operator", "bob")])
        .send()
        .await
        .unwrap();
    assert!(
        r.status().is_success() || r.status().is_redirection(),
        "{r:?}"
    );
    assert!(q.quarantined().await.unwrap().is_empty());
    let exists: i64 = match srv.cmd(&["EXISTS", &q.keys().job(broken.as_str())]) {
        leasehold_core::redis::Value::Int(n) => n,
        other => panic!("{other:?}"),
    };
    assert_eq!(exists, 0);
    let events = q.keys().events();
    let raw = format!("{:?}", srv.cmd(&["XRANGE", &events, "-", "+"]));
    assert!(
        raw.contains("repair") && raw.contains("dashboard:alice"),
        "{raw}"
    );
    dash.stop().await;
}
