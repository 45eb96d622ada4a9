//! `POST /api/queues/{queue}/pipelines/{pipeline}/jobs` end to end: a private
//! `redis-server`, a pipeline spec registered by hand (as a worker would
//! publish it), the dashboard binary on a free loopback port, and `reqwest`
//! (and `examples/enqueue_http.py`, when `python3` is on PATH) posting jobs.

mod support;

use std::process::Stdio;
use std::time::Duration;

use leasehold_core::{JobId, Outcome, PipelineSpec, Queue, StaleLock};
use leasehold_testkit::RedisServer;
use reqwest::{header, StatusCode};
use serde_json::{json, Value};
use support::dashboard::{http, Dashboard};
use support::jobs::{lease_one, queue};

const TOKEN: &str = "enqueue-secret-0123456789";
const QUEUE: &str = "shops";
const PIPELINE: &str = "hourly_sync";

/// The spec a worker serving `hourly_sync` would publish.
fn spec(own_queue: &str) -> PipelineSpec {
    let mut spec = PipelineSpec {
        name: PIPELINE.into(),
        queue: Some(own_queue.into()),
        steps: vec!["fetch".into(), "load".into()],
        max_attempts: 4,
        stale_lock: StaleLock::Hold,
        resource_template: Some("shop:{shop}".into()),
        input_key_template: Some("{shop}:{hour}".into()),
        input_schema: Some(json!({
            "type": "object",
            "properties": {
                "shop": {"type": "string", "minLength": 1},
                "hour": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}$"}
            },
            "required": ["shop", "hour"]
        })),
        flow: None,
        version: String::new(),
    };
    spec.version = spec.digest();
    spec
}

/// Redis, the queue with the spec registered, and a dashboard with the token.
async fn scene() -> (RedisServer, Queue, Dashboard) {
    let srv = RedisServer::start();
    let q = queue(&srv, QUEUE).await;
    q.register_pipeline(&spec(QUEUE)).await.unwrap();
    let dash = Dashboard::start(&srv.url(), &[], Some(TOKEN)).await;
    (srv, q, dash)
}

fn jobs_url(dash: &Dashboard, queue: &str, pipeline: &str) -> String {
    dash.url(&format!("/api/queues/{queue}/pipelines/{pipeline}/jobs"))
}

/// POSTs `body` (JSON text) with `token` as a bearer token.
async fn post_text(url: &str, body: String, token: Option<&str>) -> (StatusCode, Value) {
    let mut req = http()
        .post(url)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.expect("POST");
    let status = r.status();
    let text = r.text().await.unwrap();
    let v = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("POST {url}: {status}, not JSON ({e}): {text}"));
    (status, v)
}

async fn post(dash: &Dashboard, body: Value) -> (StatusCode, Value) {
    post_text(
        &jobs_url(dash, QUEUE, PIPELINE),
        body.to_string(),
        Some(TOKEN),
    )
    .await
}

fn hget(srv: &RedisServer, key: &str, field: &str) -> String {
    match srv.cmd(&["HGET", key, field]) {
        leasehold_core::redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
        other => panic!("HGET {key} {field}: {other:?}"),
    }
}

fn dbsize(srv: &RedisServer) -> i64 {
    match srv.cmd(&["DBSIZE"]) {
        leasehold_core::redis::Value::Int(n) => n,
        other => panic!("DBSIZE: {other:?}"),
    }
}

fn input(shop: &str, hour: &str) -> Value {
    json!({ "shop": shop, "hour": hour })
}

fn id_of(job: &Value) -> JobId {
    JobId::parse(job["id"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn one_job_gets_the_contracts_keys_and_the_same_again_is_existing() {
    let (srv, q, dash) = scene().await;
    let (status, v) = post(
        &dash,
        json!({ "input": input("a", "2026-05-06T07"), "priority": 5, "delay_ms": 60000 }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    assert_eq!(v["queue"], QUEUE);
    assert_eq!(v["pipeline"], PIPELINE);
    assert_eq!(
        (&v["created"], &v["existing"], &v["succeeded"], &v["rerun"]),
        (&json!(1), &json!(0), &json!(0), &json!(0)),
        "{v}"
    );
    // the spec publishes an input schema: the input was checked, no note
    assert_eq!(v["input_checked"], true, "{v}");
    assert_eq!(v.get("note"), None, "{v}");
    let job = &v["jobs"][0];
    assert_eq!(job["status"], "created");
    assert_eq!(job["previous"], Value::Null);
    let id = id_of(job);
    let key = q.keys().job(id.as_str());
    // resource and input key from the spec's templates, max attempts from the spec
    assert_eq!(hget(&srv, &key, "resource"), "shop:a");
    assert_eq!(hget(&srv, &key, "input_key"), "a:2026-05-06T07");
    assert_eq!(hget(&srv, &key, "max_attempts"), "4");
    assert_eq!(hget(&srv, &key, "priority"), "5");
    assert_eq!(hget(&srv, &key, "state"), "QUEUED");
    let created: i64 = hget(&srv, &key, "created_at").parse().unwrap();
    let not_before: i64 = hget(&srv, &key, "not_before").parse().unwrap();
    assert!(not_before - created >= 59_000, "delay_ms applied");
    let input: Value = serde_json::from_str(&hget(&srv, &key, "input")).unwrap();
    assert_eq!(input, json!({ "shop": "a", "hour": "2026-05-06T07" }));

    let (status, v) = post(&dash, json!({ "input": input })).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["jobs"][0]["status"], "existing");
    assert_eq!(id_of(&v["jobs"][0]), id);
    assert_eq!((&v["created"], &v["existing"]), (&json!(0), &json!(1)));
    dash.stop().await;
}

#[tokio::test]
async fn a_batch_enqueues_every_job_with_per_job_options_and_counts_them() {
    let (srv, q, dash) = scene().await;
    let (status, _) = post(&dash, json!({ "input": input("a", "2026-05-06T00") })).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, v) = post(
        &dash,
        json!({
            "jobs": [
                { "input": input("a", "2026-05-06T00") },
                { "input": input("a", "2026-05-06T01") },
                { "input": input("b", "2026-05-06T01"), "priority": 9 },
            ],
            "priority": 3,
            "max_attempts": 2,
        }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let statuses: Vec<&str> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["existing", "created", "created"]);
    assert_eq!((&v["created"], &v["existing"]), (&json!(2), &json!(1)));
    let second = q.keys().job(id_of(&v["jobs"][1]).as_str());
    let third = q.keys().job(id_of(&v["jobs"][2]).as_str());
    assert_eq!(hget(&srv, &second, "priority"), "3", "the batch's default");
    assert_eq!(
        hget(&srv, &third, "priority"),
        "9",
        "the job's own value wins"
    );
    assert_eq!(hget(&srv, &third, "max_attempts"), "2");
    assert_eq!(hget(&srv, &third, "resource"), "shop:b");
    dash.stop().await;
}

#[tokio::test]
async fn a_bad_shape_in_a_batch_refuses_it_all_naming_the_job_and_field() {
    let (srv, _q, dash) = scene().await;
    let before = dbsize(&srv);
    let (status, v) = post(
        &dash,
        json!({ "jobs": [
            { "input": input("a", "2026-05-06T00") },
            { "input": input("a", "2026-05-06T01") },
            { "input": { "shop": "a", "hour": 7 } },
        ] }),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"], "invalid_input");
    assert_eq!(v["field"], "/hour");
    assert_eq!(v["job"], 2);
    assert!(v["problem"].as_str().unwrap().contains("string"), "{v}");
    assert_eq!(dbsize(&srv), before, "nothing was written");
    // one job: the same answer, job 0
    let (status, v) = post(&dash, json!({ "input": { "shop": "a", "hour": "7" } })).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!((&v["field"], &v["job"]), (&json!("/hour"), &json!(0)));
    assert_eq!(dbsize(&srv), before, "nothing was written");
    dash.stop().await;
}

#[tokio::test]
async fn malformed_bodies_are_400_naming_what_is_wrong() {
    let (srv, _q, dash) = scene().await;
    let before = dbsize(&srv);
    let url = jobs_url(&dash, QUEUE, PIPELINE);
    let (status, v) = post_text(&url, "{\"input\": {\"shop\": ".into(), Some(TOKEN)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert!(v["message"].as_str().unwrap().contains("not JSON"), "{v}");
    let (status, v) = post(
        &dash,
        json!({ "jobs": [{ "input": input("a", "2026-05-06T00") }, { "input": input("a", "2026-05-06T01"), "priority": 300 }] }),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["field"], "/jobs/1/priority");
    // a misspelt option is refused, not ignored
    let (status, v) = post(
        &dash,
        json!({ "input": input("a", "2026-05-06T00"), "re_run": true }),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert!(v["message"].as_str().unwrap().contains("re_run"), "{v}");
    // a registered pipeline computes its keys: a given one is refused
    let (status, v) = post(
        &dash,
        json!({ "jobs": [{ "input": input("a", "2026-05-06T00"), "resource": "shop:z" }] }),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["field"], "/jobs/0/resource");
    let (status, v) = post(&dash, json!({ "priority": 1 })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["field"], "/input");
    assert_eq!(dbsize(&srv), before, "nothing was written");
    dash.stop().await;
}

#[tokio::test]
async fn enqueue_without_the_token_is_refused_and_writes_nothing() {
    let (srv, _q, dash) = scene().await;
    let before = dbsize(&srv);
    let url = jobs_url(&dash, QUEUE, PIPELINE);
    let body = json!({ "input": input("a", "2026-05-06T00") });
    let (status, v) = post_text(&url, body.to_string(), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{v}");
    assert_eq!(v["error"], "unauthorized");
    let (status, _) = post_text(&url, body.to_string(), Some("wrong")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // nothing about the body is said without the token
    let (status, _) = post_text(&url, "not json".into(), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(dbsize(&srv), before, "nothing was written");
    // the token may come in the body, as with the other actions
    let with_field = json!({ "input": input("a", "2026-05-06T00"), "token": TOKEN });
    let (status, v) = post_text(&url, with_field.to_string(), None).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    dash.stop().await;
    // a dashboard started without a token refuses every enqueue
    let ro = Dashboard::start(&srv.url(), &[], None).await;
    let (status, v) = post_text(
        &jobs_url(&ro, QUEUE, PIPELINE),
        body.to_string(),
        Some(TOKEN),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"], "actions_disabled");
    ro.stop().await;
}

#[tokio::test]
async fn an_unregistered_pipeline_is_404_unless_the_body_says_unregistered() {
    let (srv, q, dash) = scene().await;
    let before = dbsize(&srv);
    let url = jobs_url(&dash, QUEUE, "adhoc");
    let (status, v) = post_text(
        &url,
        json!({ "input": { "n": 1 } }).to_string(),
        Some(TOKEN),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{v}");
    assert_eq!(v["error"], "unregistered_pipeline");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("\"unregistered\": true"),
        "{v}"
    );
    assert_eq!(dbsize(&srv), before, "nothing was written");
    // the pipeline registered in another queue: the 404 names it
    let other = queue(&srv, "elsewhere").await;
    let mut adhoc = spec("elsewhere");
    adhoc.name = "adhoc".into();
    other.register_pipeline(&adhoc).await.unwrap();
    let (status, v) = post_text(
        &url,
        json!({ "input": { "n": 1 } }).to_string(),
        Some(TOKEN),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{v}");
    assert_eq!(v["registered_in"], json!(["elsewhere"]), "{v}");

    let body = json!({
        "unregistered": true,
        "input": { "n": 1 },
        "resource": "box:1",
        "input_key": "n=1",
    });
    let (status, v) = post_text(&url, body.to_string(), Some(TOKEN)).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    assert_eq!(v["input_checked"], false, "{v}");
    assert_eq!(
        v["note"], "input not checked: pipeline adhoc is enqueued unregistered",
        "{v}"
    );
    let key = q.keys().job(id_of(&v["jobs"][0]).as_str());
    assert_eq!(hget(&srv, &key, "pipeline"), "adhoc");
    assert_eq!(hget(&srv, &key, "resource"), "box:1");
    assert_eq!(hget(&srv, &key, "input_key"), "n=1");
    // resource and input key are optional
    let body = json!({ "unregistered": true, "jobs": [{ "input": { "n": 2 } }] });
    let (status, v) = post_text(&url, body.to_string(), Some(TOKEN)).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    // a registered pipeline is never enqueued around its contract
    let (status, v) = post(
        &dash,
        json!({ "unregistered": true, "input": input("a", "2026-05-06T00") }),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"], "registered_pipeline");
    dash.stop().await;
}

#[tokio::test]
async fn a_spec_naming_another_queue_is_409_naming_it() {
    let srv = RedisServer::start();
    let q = queue(&srv, QUEUE).await;
    q.register_pipeline(&spec("orders")).await.unwrap();
    let dash = Dashboard::start(&srv.url(), &[], Some(TOKEN)).await;
    let before = dbsize(&srv);
    let (status, v) = post(&dash, json!({ "input": input("a", "2026-05-06T00") })).await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"], "wrong_queue");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("/api/queues/orders/pipelines/hourly_sync/jobs"),
        "{v}"
    );
    assert_eq!(dbsize(&srv), before, "nothing was written");
    dash.stop().await;
}

#[tokio::test]
async fn after_success_a_post_is_succeeded_and_rerun_makes_a_linked_job() {
    let (_srv, q, dash) = scene().await;
    let body = json!({ "input": input("a", "2026-05-06T03") });
    let (status, v) = post(&dash, body.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let first = id_of(&v["jobs"][0]);
    let lease = lease_one(&q, "w1", PIPELINE, Duration::from_secs(60)).await;
    assert_eq!(lease.job, first);
    let _ = q.start(&lease, "fetch").await.unwrap();
    q.finish(&lease, &Outcome::Succeeded).await.unwrap();

    let (status, v) = post(&dash, body.clone()).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["jobs"][0]["status"], "succeeded");
    assert_eq!(id_of(&v["jobs"][0]), first);
    assert_eq!(v["succeeded"], 1);

    let (status, v) = post(
        &dash,
        json!({ "input": input("a", "2026-05-06T03"), "rerun": true }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let job = &v["jobs"][0];
    assert_eq!(job["status"], "rerun");
    assert_eq!(job["previous"], first.as_str());
    assert_ne!(id_of(job), first);
    assert_eq!((&v["rerun"], &v["created"]), (&json!(1), &json!(0)));
    dash.stop().await;
}

#[tokio::test]
async fn a_body_over_the_limit_is_413_and_one_under_it_is_taken() {
    let (srv, _q, dash) = scene().await;
    // over axum's default limit (2 MiB), under the endpoint's (10 MiB)
    let pad = "p".repeat(3 * 1024 * 1024);
    let body = json!({ "input": { "shop": "a", "hour": "2026-05-06T00", "pad": pad } });
    let (status, v) = post(&dash, body).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let before = dbsize(&srv);
    let big = "x".repeat(11 * 1024 * 1024);
    let body = json!({ "input": { "shop": big, "hour": "2026-05-06T00" } }).to_string();
    let (status, v) = post_text(&jobs_url(&dash, QUEUE, PIPELINE), body, Some(TOKEN)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert_eq!(v["error"], "too_large");
    assert_eq!(dbsize(&srv), before, "nothing was written");
    dash.stop().await;
}

#[tokio::test]
async fn redis_unreachable_is_503() {
    let (mut srv, _q, dash) = scene().await;
    srv.stop();
    let (status, v) = post(&dash, json!({ "input": input("a", "2026-05-06T00") })).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    assert_eq!(v["error"], "redis_unavailable");
    dash.stop().await;
}

/// `python3`, if on PATH.
fn python3() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("python3"))
        .find(|p| p.is_file())
}

#[tokio::test]
async fn the_python_example_backfills_a_day_and_reports_a_refusal() {
    let Some(python) = python3() else {
        eprintln!("skipped: python3 is not on PATH, examples/enqueue_http.py was not run");
        return;
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/enqueue_http.py");
    let (_srv, _q, dash) = scene().await;
    let run = |day: &str, token: &str| {
        let mut cmd = tokio::process::Command::new(&python);
        cmd.arg(script)
            .args([
                "--url",
                &dash.base,
                "--queue",
                QUEUE,
                "--pipeline",
                PIPELINE,
            ])
            .args(["--shop", "a", "--day", day])
            .env("LEASEHOLD_DASHBOARD_TOKEN", token)
            // loopback, never through a proxy of the machine running the tests
            .env("no_proxy", "*")
            .env("NO_PROXY", "*")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        support::binary::run_cmd(cmd)
    };
    let first = run("2026-05-06", TOKEN).await.code(0);
    assert!(
        first
            .stdout
            .contains("24 created, 0 rerun, 0 existing, 0 succeeded"),
        "{first:#?}"
    );
    let again = run("2026-05-06", TOKEN).await.code(0);
    assert!(
        again.stdout.contains("0 created, 0 rerun, 24 existing"),
        "{again:#?}"
    );
    // a day the schema refuses: the field and the job are named, exit 1
    let bad = run("2026-5-6", TOKEN).await.code(1);
    assert!(
        bad.stderr.contains("HTTP 422") && bad.stderr.contains("job 0, field /hour"),
        "{bad:#?}"
    );
    let unauthorised = run("2026-05-07", "wrong").await.code(1);
    assert!(
        unauthorised.stderr.contains("HTTP 401"),
        "{unauthorised:#?}"
    );
    dash.stop().await;
}

#[test]
fn the_docs_show_the_python_example_as_it_is() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let script = std::fs::read_to_string(format!("{root}/examples/enqueue_http.py")).unwrap();
    let docs = std::fs::read_to_string(format!("{root}/docs/operations.md")).unwrap();
    assert!(
        docs.contains(&format!("```python\n{script}```")),
        "docs/operations.md's Python example differs from examples/enqueue_http.py"
    );
}

#[tokio::test]
async fn a_pipeline_without_an_input_schema_is_enqueued_with_a_note_saying_so() {
    let (srv, q, dash) = scene().await;
    let mut loose = spec(QUEUE);
    loose.name = "loose".into();
    loose.input_schema = None;
    loose.version = loose.digest();
    q.register_pipeline(&loose).await.unwrap();
    let url = jobs_url(&dash, QUEUE, "loose");
    // any JSON goes in: nothing can check its shape
    let (status, v) = post_text(
        &url,
        json!({ "input": { "shop": "a", "hour": 7 } }).to_string(),
        Some(TOKEN),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    assert_eq!(v["input_checked"], false, "{v}");
    assert_eq!(
        v["note"], "input not checked: pipeline loose publishes no input schema",
        "{v}"
    );
    let key = q.keys().job(id_of(&v["jobs"][0]).as_str());
    assert_eq!(hget(&srv, &key, "pipeline"), "loose");
    drop(srv);
    dash.stop().await;
}

/// A field of a job hash, `None` when absent.
fn hget_opt(srv: &RedisServer, key: &str, field: &str) -> Option<String> {
    match srv.cmd(&["HGET", key, field]) {
        leasehold_core::redis::Value::BulkString(b) => Some(String::from_utf8(b).unwrap()),
        leasehold_core::redis::Value::Nil => None,
        other => panic!("HGET {key} {field}: {other:?}"),
    }
}

/// A registered pipeline takes a `resource` or `input_key` given in the body
/// when it has no template for that field and refuses it when it has one:
/// the rule of `leasehold enqueue --resource/--input-key` and of
/// `Client::enqueue_json`, which answer the same requests the same way.
#[tokio::test]
async fn a_key_the_pipeline_has_no_template_for_is_taken_as_the_cli_and_client_take_it() {
    let (srv, q, dash) = scene().await;
    // no template at all; a resource template and no input-key template
    let mut bare = spec(QUEUE);
    bare.name = "bare".into();
    bare.resource_template = None;
    bare.input_key_template = None;
    bare.version = bare.digest();
    let mut half = spec(QUEUE);
    half.name = "half".into();
    half.input_key_template = None;
    half.version = half.digest();
    q.register_pipeline(&bare).await.unwrap();
    q.register_pipeline(&half).await.unwrap();
    let to = |pipeline: &str, body: Value| {
        let url = jobs_url(&dash, QUEUE, pipeline);
        async move { post_text(&url, body.to_string(), Some(TOKEN)).await }
    };
    // one job: both keys as given
    let (status, v) = to(
        "bare",
        json!({ "input": input("a", "2026-05-06T00"), "resource": "box:1", "input_key": "k:1" }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let key = q.keys().job(id_of(&v["jobs"][0]).as_str());
    assert_eq!(hget(&srv, &key, "resource"), "box:1");
    assert_eq!(hget(&srv, &key, "input_key"), "k:1");
    assert_eq!(hget(&srv, &key, "max_attempts"), "4", "the spec's policies");
    // a batch: per job, and a job without them has none
    let (status, v) = to(
        "bare",
        json!({ "jobs": [
            { "input": input("a", "2026-05-06T01"), "resource": "box:2", "input_key": "k:2" },
            { "input": input("a", "2026-05-06T02") }
        ] }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let first = q.keys().job(id_of(&v["jobs"][0]).as_str());
    let second = q.keys().job(id_of(&v["jobs"][1]).as_str());
    assert_eq!(hget(&srv, &first, "resource"), "box:2");
    assert_eq!(hget(&srv, &first, "input_key"), "k:2");
    assert_eq!(hget_opt(&srv, &second, "resource"), None);
    assert_eq!(hget_opt(&srv, &second, "input_key"), None);
    // the input key given is idempotent like a computed one
    let (status, v) = to(
        "bare",
        json!({ "input": input("b", "2026-05-06T00"), "input_key": "k:1" }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["jobs"][0]["status"], "existing", "{v}");
    // a template for one field only: the other is taken, that one computed
    let (status, v) = to(
        "half",
        json!({ "input": input("a", "2026-05-06T03"), "input_key": "k:3" }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let key = q.keys().job(id_of(&v["jobs"][0]).as_str());
    assert_eq!(hget(&srv, &key, "resource"), "shop:a");
    assert_eq!(hget(&srv, &key, "input_key"), "k:3");
    // ...and a value for the templated field is refused, naming it
    let before = dbsize(&srv);
    let (status, v) = to(
        "half",
        json!({ "input": input("a", "2026-05-06T04"), "resource": "box:9" }),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["field"], "/resource", "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("computes its resource"),
        "{v}"
    );
    assert_eq!(dbsize(&srv), before, "nothing was written");
    // the client (the CLI's enqueue goes through the same jobs_from_json)
    // answers the same requests the same way
    let client = leasehold_core::Client::from_queue(q.clone());
    let mut o = leasehold_core::EnqueueOptions::new();
    o.queue = Some(QUEUE.into());
    o.resource = Some("box:5".into());
    o.input_key = Some("k:5".into());
    let text = input("c", "2026-05-06T05").to_string();
    let done = client.enqueue_json("bare", &text, &o).await.unwrap();
    let key = q.keys().job(done.id.as_str());
    assert_eq!(hget(&srv, &key, "resource"), "box:5");
    assert_eq!(hget(&srv, &key, "input_key"), "k:5");
    let refused = client.enqueue_json("half", &text, &o).await.unwrap_err();
    assert!(
        refused.to_string().contains("computes its resource"),
        "{refused}"
    );
    o.resource = None;
    o.input_key = Some("k:6".into());
    let done = client.enqueue_json("half", &text, &o).await.unwrap();
    assert!(done.created);
    let key = q.keys().job(done.id.as_str());
    assert_eq!(hget(&srv, &key, "resource"), "shop:c");
    assert_eq!(hget(&srv, &key, "input_key"), "k:6");
    dash.stop().await;
}
