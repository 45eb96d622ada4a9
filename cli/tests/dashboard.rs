//! `leasehold dashboard` end to end over real HTTP: a private `redis-server`,
//! jobs driven through lease/start/checkpoint/finish with the `Queue` client,
//! the binary serving on a free loopback port, and `reqwest` reading the JSON
//! API and the pages and posting actions. A process step's record (exit
//! code, cut-off, log tail) comes from a real worker running a real script.

mod support;

use std::time::Duration;

use leasehold_core::{AttemptError, JobId, JobState, Lease, NewJob, Outcome, Queue};
use leasehold_testkit::RedisServer;
use reqwest::{header, StatusCode};
use serde_json::{json, Value};
use support::binary::command;
use support::dashboard::{http, Dashboard};
use support::jobs::{enqueue, job, lease_one, queue, start};

const TTL: Duration = Duration::from_secs(60);
const TOKEN: &str = "dash-secret-0123456789";
const EVIL: &str = "<script>alert('x')</script>";

/// Queue `orders` with a job in most states, a live worker and two locks.
struct Scene {
    queued: JobId,
    running: JobId,
    running_lease: Lease,
    stale: JobId,
    succeeded: JobId,
    failed: JobId,
}

async fn scene(srv: &RedisServer) -> Scene {
    let q = queue(srv, "orders").await;
    // STALE: RUNNING, then its lease expires and a sweep finds it
    let stale = enqueue(&q, job("sync", 1).resource("shop:s")).await;
    let l = lease_one(&q, "w-dead", "sync", Duration::from_millis(1000)).await;
    start(&q, &l).await;
    q.checkpoint(&l, "fetch", "{\"rows\":1}", Some("load"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(q.sweep(100).await.unwrap().stale, 1);
    // SUCCEEDED after two steps
    let succeeded = enqueue(&q, job("sync", 2)).await;
    let l = lease_one(&q, "w1", "sync", TTL).await;
    start(&q, &l).await;
    q.checkpoint(&l, "fetch", "{\"rows\":2}", Some("load"))
        .await
        .unwrap();
    q.checkpoint(&l, "load", "{\"loaded\":2}", None)
        .await
        .unwrap();
    q.finish(&l, &Outcome::Succeeded).await.unwrap();
    // FAILED, not retryable
    let failed = enqueue(&q, job("sync", 3)).await;
    let l = lease_one(&q, "w1", "sync", TTL).await;
    start(&q, &l).await;
    q.finish(
        &l,
        &Outcome::Failed {
            error: AttemptError {
                kind: "validation".into(),
                message: format!("bad row {EVIL}"),
                retryable: false,
                retries_exhausted: false,
            },
            backoff: Duration::ZERO,
            cleanup_needed: false,
        },
    )
    .await
    .unwrap();
    // RUNNING on w1, holding shop:a, its input is hostile HTML
    let running = enqueue(
        &q,
        NewJob::new("sync", &json!({ "shop": EVIL }))
            .unwrap()
            .resource("shop:a"),
    )
    .await;
    let running_lease = lease_one(&q, "w1", "sync", TTL).await;
    start(&q, &running_lease).await;
    q.checkpoint(&running_lease, "fetch", "{\"rows\":5}", Some("load"))
        .await
        .unwrap();
    // QUEUED
    let queued = enqueue(&q, job("report", 4)).await;
    srv.cmd(&[
        "SET",
        &q.keys().worker("w1"),
        r#"{"id":"w1","pid":4242,"started_at":1778025600000,"pipelines":["sync"],"concurrency":4,"active":1,"shutting_down":false}"#,
        "PX",
        "60000",
    ]);
    srv.cmd(&["SADD", &q.keys().workers(), "w1"]);
    Scene {
        queued,
        running,
        running_lease,
        stale,
        succeeded,
        failed,
    }
}

async fn get_json(c: &reqwest::Client, url: &str) -> (StatusCode, Value) {
    let r = c.get(url).send().await.expect("GET");
    let status = r.status();
    let text = r.text().await.unwrap();
    let v =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {url}: not JSON ({e}): {text}"));
    (status, v)
}

async fn get_ok_json(c: &reqwest::Client, url: &str) -> Value {
    let (status, v) = get_json(c, url).await;
    assert_eq!(status, StatusCode::OK, "GET {url}: {v}");
    v
}

async fn get_html(c: &reqwest::Client, url: &str) -> (StatusCode, String) {
    let r = c.get(url).send().await.expect("GET");
    let status = r.status();
    let ct = r
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    assert!(ct.starts_with("text/html"), "GET {url}: content type {ct}");
    (status, r.text().await.unwrap())
}

async fn page(c: &reqwest::Client, url: &str) -> String {
    let (status, body) = get_html(c, url).await;
    assert_eq!(status, StatusCode::OK, "GET {url}:\n{body}");
    // nothing from the data may come through unescaped
    assert!(!body.contains("<script>alert"), "unescaped data in {url}");
    body
}

fn ids(page: &Value) -> Vec<String> {
    page["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn json_api_and_pages_show_what_the_scripts_recorded() {
    let srv = RedisServer::start();
    let s = scene(&srv).await;
    let dash = Dashboard::start(&srv.url(), &[], None).await;
    let c = http();

    // ---- JSON ----
    let v = get_ok_json(&c, &dash.url("/api/queues")).await;
    let st = &v[0];
    assert_eq!(st["queue"], "orders");
    let counts = &st["counts"];
    for (state, n) in [
        ("queued", 1),
        ("leased", 0),
        ("running", 1),
        ("stale", 1),
        ("succeeded", 1),
        ("failed", 1),
        ("cancelled", 0),
    ] {
        assert_eq!(counts[state], n, "{state}: {counts}");
    }
    assert_eq!(st["oldest_waiting"]["job"], s.queued.as_str());
    assert_eq!(st["workers"][0]["id"], "w1");
    assert_eq!(st["stale"][0]["job"]["id"], s.stale.as_str());
    let resources: Vec<&str> = st["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["resource"].as_str().unwrap())
        .collect();
    assert!(
        resources.contains(&"shop:a") && resources.contains(&"shop:s"),
        "{resources:?}"
    );

    let running = get_ok_json(&c, &dash.url("/api/jobs?state=running")).await;
    assert_eq!(ids(&running), vec![s.running.to_string()]);
    assert_eq!(running["jobs"][0]["worker"], "w1");
    assert_eq!(running["jobs"][0]["step"], "load");
    let v = get_ok_json(&c, &dash.url("/api/jobs?queue=orders&state=SUCCEEDED")).await;
    assert_eq!(ids(&v), vec![s.succeeded.to_string()]);
    let v = get_ok_json(&c, &dash.url("/api/jobs?pipeline=report")).await;
    assert_eq!(ids(&v), vec![s.queued.to_string()]);
    let v = get_ok_json(&c, &dash.url("/api/jobs?resource=shop:s")).await;
    assert_eq!(ids(&v), vec![s.stale.to_string()]);
    let v = get_ok_json(&c, &dash.url("/api/jobs?worker=w-dead")).await;
    assert_eq!(ids(&v), vec![s.stale.to_string()]);
    // paging: five jobs, two per page
    let all = ids(&get_ok_json(&c, &dash.url("/api/jobs?limit=50")).await);
    assert_eq!(all.len(), 5, "{all:?}");
    let p2 = get_ok_json(&c, &dash.url("/api/jobs?limit=2&offset=2")).await;
    assert_eq!(ids(&p2), all[2..4].to_vec());
    assert_eq!(p2["has_more"], true);
    let (status, v) = get_json(&c, &dash.url("/api/jobs?state=sleeping")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"], "bad_request");

    let detail = get_ok_json(&c, &dash.url(&format!("/api/jobs/orders/{}", s.running))).await;
    assert_eq!(detail["job"]["state"], "RUNNING");
    assert_eq!(detail["job"]["input"]["shop"], EVIL);
    assert_eq!(detail["job"]["lease"]["worker"], "w1");
    assert_eq!(detail["job"]["lease"]["token"], "(redacted)");
    assert_eq!(detail["job"]["steps"][0]["step"], "fetch");
    assert_eq!(detail["lock"]["holder"], s.running.as_str());
    let moments: Vec<&str> = detail["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["what"].as_str().unwrap())
        .collect();
    assert!(
        moments.contains(&"step fetch completed")
            && moments.iter().any(|m| m.starts_with("leased by w1")),
        "{moments:?}"
    );
    assert!(
        !detail.to_string().contains(&s.running_lease.token),
        "the lease token leaks"
    );

    let v = get_ok_json(
        &c,
        &dash.url(&format!("/api/jobs/orders/{}/events", s.stale)),
    )
    .await;
    let ops: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["enqueue", "lease", "start", "sweep"]);

    let v = get_ok_json(&c, &dash.url("/api/workers")).await;
    assert_eq!(v[0]["queue"], "orders");
    assert_eq!(v[0]["live"][0]["id"], "w1");
    let v = get_ok_json(&c, &dash.url("/api/locks?queue=orders")).await;
    assert_eq!(v.as_array().unwrap().len(), 2, "{v}");
    let v = get_ok_json(&c, &dash.url("/api/events?limit=3")).await;
    let evs = v.as_array().unwrap();
    assert_eq!(evs.len(), 3);
    assert_eq!(evs[0]["op"], "enqueue", "newest first: {v}");
    assert_eq!(evs[0]["job"], s.queued.as_str());
    let v = get_ok_json(&c, &dash.url(&format!("/api/events?job={}", s.failed))).await;
    assert_eq!(v.as_array().unwrap().len(), 4, "{v}");

    // ---- unknown things ----
    let (status, v) = get_json(&c, &dash.url("/api/jobs/orders/no-such-job")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{v}");
    assert_eq!(v["error"], "not_found");
    let (status, body) = get_html(&c, &dash.url("/jobs/orders/no-such-job")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("not found in queue orders"), "{body}");
    let (status, _) = get_html(&c, &dash.url("/no/such/page")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // ---- pages ----
    let home = page(&c, &dash.url("/")).await;
    for needle in [
        "orders",
        "STALE: 1 job needs a decision",
        s.stale.as_str(),
        "w1 (1/4 busy)",
        "shop:a",
        "data-live",
        "/static/app.js",
    ] {
        assert!(home.contains(needle), "/ lacks {needle:?}");
    }
    let jobs = page(&c, &dash.url("/jobs?state=RUNNING")).await;
    assert!(jobs.contains(s.running.as_str()));
    assert!(!jobs.contains(s.succeeded.as_str()));
    let detail = page(&c, &dash.url(&format!("/jobs/orders/{}", s.running))).await;
    for needle in [
        "load (running)",
        "&lt;script&gt;alert(",
        "fence ",
        "tl-seg seg-step",
        "this job",
    ] {
        assert!(detail.contains(needle), "job page lacks {needle:?}");
    }
    assert!(
        !detail.contains(&s.running_lease.token),
        "the lease token leaks"
    );
    // read-only: the forms are replaced by the reason actions are off
    assert!(detail.contains("actions are disabled"));
    assert!(!detail.contains("<form class=\"action-cancel\""));
    let failed = page(&c, &dash.url(&format!("/jobs/orders/{}", s.failed))).await;
    assert!(failed.contains("validation: bad row &lt;script&gt;"));
    assert!(failed.contains("not retryable"));
    let stale = page(&c, &dash.url(&format!("/jobs/orders/{}", s.stale))).await;
    assert!(stale.contains("load (cut off: STALE)"), "{stale}");
    assert!(page(&c, &dash.url("/workers")).await.contains("4242"));
    assert!(page(&c, &dash.url("/locks")).await.contains("shop:s"));
    assert!(page(&c, &dash.url("/events?queue=orders"))
        .await
        .contains("sweep"));
    // the find box jumps to the job
    let r = c
        .get(dash.url(&format!("/find?id={}", s.failed)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        r.headers()[header::LOCATION],
        format!("/jobs/orders/{}", s.failed).as_str()
    );

    // ---- Prometheus ----
    let r = c.get(dash.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let text = r.text().await.unwrap();
    for line in [
        "leasehold_jobs{queue=\"orders\",state=\"RUNNING\"} 1",
        "leasehold_jobs{queue=\"orders\",state=\"QUEUED\"} 1",
        "leasehold_jobs{queue=\"orders\",state=\"STALE\"} 1",
        "leasehold_jobs{queue=\"orders\",state=\"CANCELLED\"} 0",
    ] {
        assert!(text.contains(line), "/metrics lacks {line:?}:\n{text}");
    }
    dash.stop().await;
}

async fn state_of(q: &Queue, id: &JobId) -> JobState {
    q.job(id).await.unwrap().expect("job exists").state
}

async fn events_by(q: &Queue, id: &JobId) -> Vec<(String, String, String)> {
    leasehold_core::Inspector::new(q.clone())
        .job_events(id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.op, e.by, e.reason))
        .collect()
}

#[tokio::test]
async fn actions_need_the_token_and_go_through_the_scripts() {
    let srv = RedisServer::start();
    let s = scene(&srv).await;
    let q = queue(&srv, "orders").await;
    let c = http();
    let cancel = |dash: &Dashboard, id: &JobId| dash.url(&format!("/api/jobs/orders/{id}/cancel"));

    // no token configured: every action is 403, pages still work
    let ro = Dashboard::start(&srv.url(), &[], None).await;
    let r = c
        .post(cancel(&ro, &s.queued))
        .bearer_auth(TOKEN)
        .json(&json!({"reason": "stop"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"], "actions_disabled");
    assert!(v["message"].as_str().unwrap().contains("--token"), "{v}");
    let r = c
        .post(ro.url(&format!("/jobs/orders/{}/cancel", s.queued)))
        .form(&[("token", TOKEN), ("reason", "stop")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(r.text().await.unwrap().contains("Actions disabled"));
    ro.stop().await;

    // the token from the environment
    let dash = Dashboard::start(&srv.url(), &[], Some(TOKEN)).await;
    // missing, wrong (header or form field): 401, nothing changes
    let r = c
        .post(cancel(&dash, &s.queued))
        .json(&json!({"reason": "stop"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.headers().contains_key(header::WWW_AUTHENTICATE));
    let r = c
        .post(cancel(&dash, &s.queued))
        .bearer_auth("dash-secret-0123456788")
        .json(&json!({"reason": "stop"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = c
        .post(dash.url(&format!("/jobs/orders/{}/cancel", s.queued)))
        .form(&[("token", "nope"), ("reason", "stop")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // a GET cannot act
    let r = c.get(cancel(&dash, &s.queued)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(state_of(&q, &s.queued).await, JobState::Queued);
    assert_eq!(
        events_by(&q, &s.queued).await.len(),
        1,
        "only the enqueue event"
    );

    // with the token: JSON, Bearer
    let r = c
        .post(cancel(&dash, &s.queued))
        .bearer_auth(TOKEN)
        .json(&json!({"reason": "not needed <b>today</b>", "operator": "alice"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["outcome"], "cancelled");
    assert_eq!(v["by"], "dashboard:alice");
    assert_eq!(state_of(&q, &s.queued).await, JobState::Cancelled);
    assert!(events_by(&q, &s.queued).await.contains(&(
        "cancel".into(),
        "dashboard:alice".into(),
        "not needed <b>today</b>".into()
    )));
    let page = c
        .get(dash.url(&format!("/jobs/orders/{}", s.queued)))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("not needed &lt;b&gt;today&lt;/b&gt;"));

    // a form with the token field, no operator: a request the holder honours later
    let r = c
        .post(dash.url(&format!("/jobs/orders/{}/cancel", s.running)))
        .form(&[
            ("token", TOKEN),
            ("reason", "wrong window"),
            ("operator", ""),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        r.headers()[header::LOCATION],
        format!("/jobs/orders/{}?notice=requested", s.running).as_str()
    );
    let job = q.job(&s.running).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Running);
    let cancel_req = job.cancel.expect("cancel recorded");
    assert_eq!(
        (cancel_req.by.as_str(), cancel_req.reason.as_str()),
        ("dashboard:operator", "wrong window")
    );
    let detail = get_ok_json(&c, &dash.url(&format!("/api/jobs/orders/{}", s.running))).await;
    assert_eq!(detail["cancel"]["outcome"], "pending");
    // the holder sees it at its next checkpoint and honours it
    let seen = q
        .checkpoint(&s.running_lease, "load", "{}", None)
        .await
        .unwrap();
    assert_eq!(seen.as_deref(), Some("wrong window"));
    q.finish(
        &s.running_lease,
        &Outcome::Cancelled {
            reason: "wrong window".into(),
            cleanup_needed: false,
        },
    )
    .await
    .unwrap();
    let detail = get_ok_json(&c, &dash.url(&format!("/api/jobs/orders/{}", s.running))).await;
    assert_eq!(detail["job"]["state"], "CANCELLED", "{detail}");
    assert_eq!(detail["cancel"]["outcome"], "honoured");

    // retry from the start
    let r = c
        .post(dash.url(&format!("/api/jobs/orders/{}/retry", s.failed)))
        .bearer_auth(TOKEN)
        .json(&json!({"mode": "from_start", "reason": "fixed the rows", "operator": "bob"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        (v["outcome"].clone(), v["attempt"].clone()),
        (json!("retried"), json!(2))
    );
    let job = q.job(&s.failed).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempt), (JobState::Queued, 2));
    assert!(events_by(&q, &s.failed)
        .await
        .iter()
        .any(|(op, by, _)| op == "retry" && by == "dashboard:bob"));

    // resolve: a reason is needed, a non-STALE job is refused, a STALE one resolves
    let resolve = |id: &JobId| dash.url(&format!("/api/jobs/orders/{id}/resolve"));
    let r = c
        .post(resolve(&s.stale))
        .bearer_auth(TOKEN)
        .json(&json!({"as": "failed"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let r = c
        .post(resolve(&s.succeeded))
        .bearer_auth(TOKEN)
        .json(&json!({"as": "failed", "reason": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let v: Value = r.json().await.unwrap();
    assert!(v["message"].as_str().unwrap().contains("SUCCEEDED"), "{v}");
    let r = c
        .post(dash.url(&format!("/jobs/orders/{}/resolve", s.stale)))
        .form(&[
            ("token", TOKEN),
            ("as", "failed"),
            ("reason", "the rows were never written"),
            ("operator", "carol"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(state_of(&q, &s.stale).await, JobState::Failed);
    assert!(events_by(&q, &s.stale).await.contains(&(
        "resolve".into(),
        "dashboard:carol".into(),
        "the rows were never written".into()
    )));

    // an unknown job, with the token: 404
    let r = c
        .post(cancel(&dash, &JobId::parse("no-such-job").unwrap()))
        .bearer_auth(TOKEN)
        .json(&json!({"reason": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    dash.stop().await;
}

#[tokio::test]
async fn binding_beyond_loopback_needs_a_token_and_hosts_are_checked() {
    let srv = RedisServer::start();
    let out = command(&srv.url(), &["dashboard", "--bind", "0.0.0.0:0"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("not a loopback address") && stderr.contains("LEASEHOLD_DASHBOARD_TOKEN"),
        "{stderr}"
    );
    let out = command(&srv.url(), &["dashboard", "--token", ""])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));

    // with a token it serves on every interface (reached here through loopback only)
    let dash = Dashboard::start(&srv.url(), &["--bind", "0.0.0.0:0", "--token", TOKEN], None).await;
    let port = dash.base.rsplit(':').next().unwrap().to_owned();
    let c = http();
    let r = c
        .get(format!("http://127.0.0.1:{port}/api/queues"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    dash.stop().await;

    // on loopback, a foreign Host (DNS rebinding) is turned away; --allow-host admits one
    let dash = Dashboard::start(&srv.url(), &["--allow-host", "dash.internal"], None).await;
    let r = c
        .get(dash.url("/api/queues"))
        .header(header::HOST, "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::MISDIRECTED_REQUEST);
    let r = c
        .get(dash.url("/api/queues"))
        .header(header::HOST, "dash.internal:8080")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // security headers on every answer
    let csp = r.headers()[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
    dash.stop().await;
}

#[tokio::test]
async fn redis_going_away_gives_503_not_a_crash() {
    let mut srv = RedisServer::start_tcp();
    let q = queue(&srv, "orders").await;
    enqueue(&q, job("sync", 1)).await;
    let dash = Dashboard::start(&srv.url(), &["--queue", "orders"], Some(TOKEN)).await;
    let c = http();
    get_ok_json(&c, &dash.url("/api/queues")).await;

    srv.stop();
    let (status, v) = get_json(&c, &dash.url("/api/queues")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    assert_eq!(v["error"], "redis_unavailable");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("cannot reach Redis"),
        "{v}"
    );
    let (status, body) = get_html(&c, &dash.url("/jobs")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("Redis unavailable"));
    let r = c.get(dash.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);

    // it comes back by itself
    srv.restart();
    let mut ok = false;
    for _ in 0..50 {
        if c.get(dash.url("/api/queues"))
            .send()
            .await
            .unwrap()
            .status()
            == StatusCode::OK
        {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        ok,
        "the dashboard did not recover; stderr: {}",
        dash.stderr()
    );
    dash.stop().await;

    // a dashboard started while Redis is down serves 503s too
    srv.stop();
    let dash = Dashboard::start(&srv.url(), &[], None).await;
    let (status, v) = get_json(&c, &dash.url("/api/queues")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    for _ in 0..50 {
        if dash.stderr().contains("warning: cannot reach Redis") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        dash.stderr().contains("warning: cannot reach Redis"),
        "{}",
        dash.stderr()
    );
    dash.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_page_shows_a_process_steps_exit_code_cut_off_and_log_tail_escaped() {
    use leasehold_core::process::{DeclaredPipeline, ProcessStep};
    use leasehold_core::{PipelineOptions, RetryPolicy, Worker};
    let srv = RedisServer::start();
    // cut off by its time limit, the script answers SIGTERM with a hostile
    // line and an exit code of its own
    let pipeline = DeclaredPipeline::new("scripted")
        .step(
            "load",
            ProcessStep::shell(
                "trap 'echo \"<script>alert(1)</script> & more\"; exit 7' TERM\n\
                 echo started\n\
                 while :; do sleep 0.05; done",
            )
            .timeout(Duration::from_millis(500))
            .grace(Duration::from_secs(10)),
        )
        .options(PipelineOptions::new().retry(RetryPolicy::NONE));
    let worker = Worker::builder(srv.url())
        .declared(pipeline)
        .unwrap()
        .build()
        .await
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        worker
            .run_until(async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    let q = queue(&srv, "scripted").await;
    let id = leasehold_core::Client::connect(&srv.url(), Default::default())
        .await
        .unwrap()
        .enqueue_json("scripted", "{}", &Default::default())
        .await
        .unwrap()
        .id;
    leasehold_testkit::wait_until_async(Duration::from_secs(30), "the job ended", || {
        let (q, id) = (&q, &id);
        async move { state_of(q, id).await.is_terminal() }
    })
    .await;
    let _ = stop.send(());
    running.await.unwrap();

    let dash = Dashboard::start(&srv.url(), &["--queue", "scripted"], Some(TOKEN)).await;
    let c = http();
    // `page` also checks that no `<script>alert` came through unescaped
    let body = page(&c, &dash.url(&format!("/jobs/scripted/{id}"))).await;
    let card = &body[body
        .find("id=\"process-steps\"")
        .expect("the Process steps card")..];
    let card = &card[..card.find("</section>").unwrap()];
    assert!(card.contains("Attempt 1 · load"), "{card}");
    assert!(card.contains("exited with code 7"), "{card}");
    assert!(card.contains("Cut off by the worker (timeout)"), "{card}");
    assert!(
        card.contains("started\n&lt;script&gt;alert(1)&lt;/script&gt; &amp; more\n"),
        "{card}"
    );
    assert!(card.contains("stdout ("), "{card}");
    dash.stop().await;
}
