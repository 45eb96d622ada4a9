//! Notice hooks, as cron's MAILTO: three replicas of a pipelines file with
//! `[pipeline.notify]`. A schedule whose ticks fail notifies once (every
//! replica's ticks fail, one of them says so), and a job that ends FAILED
//! notifies once, with the job's JSON on the command's standard input; a
//! failed attempt that a retry follows notifies nothing.

mod support;

use std::path::Path;
use std::time::Duration;

use leasehold_testkit::{wait_until_async, RedisServer};
use serde_json::Value;
use support::binary::{command, run_cmd};

const WAIT: Duration = Duration::from_secs(60);

/// The notices the hook wrote, one JSON document a line.
fn notices(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_schedule_and_a_failed_job_notify_once_across_three_replicas() {
    let srv = RedisServer::start();
    let url = srv.url();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("notices.jsonl");
    // the hook appends its standard input as one line
    std::fs::write(
        dir.path().join("hook.sh"),
        format!("#!/bin/sh\n{{ cat; echo; }} >> '{}'\n", out.display()),
    )
    .unwrap();
    let file = dir.path().join("pipelines.toml");
    // the schema takes only the window of 2026-01-01 00:00: the first tick
    // `--check` tries (from the start) passes, every tick the replicas make
    // (the latest window) is refused, so the schedule fails at run time
    std::fs::write(
        &file,
        r#"
[[pipeline]]
name = "hourly"
queue = "cron"
input_schema = { type = "object", properties = { window = { type = "object", properties = { start = { type = "string", pattern = "^2026-01-01T00:00:00Z$" } } } } }
[[pipeline.schedule]]
name = "load"
every = "1s"
start = "2026-01-01T00:00:00Z"
catch_up = "latest"
[[pipeline.step]]
name = "s"
run = ["true"]
[pipeline.notify]
run = ["sh", "hook.sh"]

# exits 1 twice: the first failure is retried (no notice), the second is final
[[pipeline]]
name = "flaky"
queue = "cron"
retry = { max_attempts = 2, initial_backoff = "100ms" }
[[pipeline.step]]
name = "s"
run = ["sh", "-c", "echo 'it broke' >&2; exit 1"]
[pipeline.notify]
run = ["sh", "hook.sh"]
on = ["job_failed"]
"#,
    )
    .unwrap();
    let path = file.to_str().unwrap();
    run_cmd(command(&url, &["worker", "--pipelines", path, "--check"]))
        .await
        .ok();
    let mut replicas = Vec::new();
    for _ in 0..3 {
        let mut cmd = command(&url, &["worker", "--pipelines", path]);
        cmd.stderr(std::process::Stdio::null());
        replicas.push(cmd.spawn().unwrap());
    }
    let failures = || {
        let url = url.clone();
        async move {
            let run = run_cmd(command(&url, &["--json", "schedules"])).await;
            serde_json::from_str::<Value>(&run.stdout)
                .ok()
                .and_then(|v| {
                    v.as_array()?
                        .iter()
                        .find(|s| s["schedule"]["name"] == "load")?["schedule"]["failing"]
                        ["failures"]
                        .as_u64()
                })
        }
    };
    wait_until_async(WAIT, "the schedule failing on the replicas", || {
        let f = failures();
        async move { f.await >= Some(6) }
    })
    .await;
    let enqueued = run_cmd(command(
        &url,
        &["--json", "enqueue", "flaky", "--input", "{}"],
    ))
    .await
    .ok()
    .json();
    let id = enqueued["id"].as_str().unwrap().to_owned();
    wait_until_async(WAIT, "both notices", || {
        let out = out.clone();
        async move {
            let n = notices(&out);
            n.iter().any(|v| v["event"] == "schedule_failing")
                && n.iter().any(|v| v["event"] == "job_failed")
        }
    })
    .await;
    // more failed ticks and events pass on every replica: still one notice each
    let seen = failures().await.unwrap_or(0);
    wait_until_async(WAIT, "more failed ticks", || {
        let f = failures();
        async move { f.await >= Some(seen + 6) }
    })
    .await;
    let n = notices(&out);
    let of = |event: &str| n.iter().filter(|v| v["event"] == event).count();
    assert_eq!(of("schedule_failing"), 1, "{n:#?}");
    assert_eq!(of("job_failed"), 1, "{n:#?}");
    assert_eq!(n.len(), 2, "{n:#?}");
    let failed = n.iter().find(|v| v["event"] == "job_failed").unwrap();
    assert_eq!(failed["job"]["id"], id.as_str());
    assert_eq!(failed["job"]["attempt"], 2, "{failed:#}");
    assert_eq!(failed["pipeline"], "flaky");
    assert!(
        failed["summary"].as_str().unwrap().contains("it broke"),
        "{failed:#}"
    );
    let schedule = n.iter().find(|v| v["event"] == "schedule_failing").unwrap();
    assert_eq!(schedule["schedule"], "load");
    assert!(
        schedule["error"].as_str().unwrap().contains("window"),
        "{schedule:#}"
    );
    for mut r in replicas {
        // SAFETY: each replica is this test's own child
        unsafe { libc::kill(r.id().unwrap() as i32, libc::SIGTERM) };
        let _ = tokio::time::timeout(WAIT, r.wait()).await;
    }
}

struct Strict;

#[leasehold::pipeline(
    queue = "strict",
    max_attempts = 1,
    notify(run = ["sh", "-c", "cat >> \"$NOTICES\"; echo >> \"$NOTICES\""], on = ["job_failed"], timeout = "10s")
)]
impl Strict {
    #[step]
    async fn check(
        &self,
        _ctx: &leasehold::pipeline::StepContext,
        input: &serde_json::Value,
    ) -> Result<(), leasehold::pipeline::StepError> {
        Err(leasehold::pipeline::StepError::permanent(format!(
            "refused: {input}"
        )))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_pipelines_notify_option_runs_its_hook_once_across_two_replicas() {
    let srv = RedisServer::start();
    let url = srv.url();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rust-notices.jsonl");
    // the hook's command reads where to write from the worker's environment
    std::env::set_var("NOTICES", &out);
    let mut stops = Vec::new();
    for _ in 0..2 {
        let worker = leasehold::worker::Worker::builder(&url)
            .pipeline(Strict)
            .build()
            .await
            .unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(worker.run_until(async {
            let _ = stopped.await;
        }));
        stops.push(stop);
    }
    let mut ids = Vec::new();
    for n in 0..3 {
        let input = format!("{{\"n\": {n}}}");
        let run = run_cmd(command(
            &url,
            &["--json", "enqueue", "strict", "--input", &input],
        ))
        .await
        .ok()
        .json();
        ids.push(run["id"].as_str().unwrap().to_owned());
    }
    wait_until_async(WAIT, "three notices", || {
        let out = out.clone();
        async move { notices(&out).len() >= 3 }
    })
    .await;
    // every job's FAILED event was read once: one notice each, no more
    let n = notices(&out);
    let mut seen: Vec<String> = n
        .iter()
        .map(|v| v["job"]["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    seen.sort();
    ids.sort();
    assert_eq!(seen, ids, "{n:#?}");
    assert!(n.iter().all(|v| v["event"] == "job_failed"));
    for stop in stops {
        let _ = stop.send(());
    }
}

/// A webhook that answers `500` to its first POST and `200` to the next, and
/// keeps the body of each: (port, bodies).
async fn flaky_webhook() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use axum::http::StatusCode;
    let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let kept = bodies.clone();
    let app = axum::Router::new().route(
        "/notices",
        axum::routing::post(move |body: String| {
            let kept = kept.clone();
            async move {
                let mut bodies = kept.lock().unwrap();
                bodies.push(body);
                if bodies.len() == 1 {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::OK
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (port, bodies)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_answering_500_is_retried_and_gets_the_notice_once() {
    let srv = RedisServer::start();
    let url = srv.url();
    let (port, bodies) = flaky_webhook().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pipelines.toml");
    std::fs::write(
        &file,
        format!(
            r#"
[[pipeline]]
name = "doomed"
queue = "hooks"
retry = {{ max_attempts = 1 }}
[[pipeline.step]]
name = "s"
run = ["sh", "-c", "echo 'the feed is gone' >&2; exit 1"]
[pipeline.notify]
webhook = "http://127.0.0.1:{port}/notices"
attempts = 3
timeout = "5s"
"#
        ),
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let mut cmd = command(&url, &["worker", "--pipelines", path]);
    cmd.stderr(std::process::Stdio::null());
    let mut worker = cmd.spawn().unwrap();
    // the pipeline is known once the worker registered it
    let enqueue = || {
        run_cmd(command(
            &url,
            &["--json", "enqueue", "doomed", "--input", "{}"],
        ))
    };
    wait_until_async(WAIT, "the worker registering the pipeline", || async {
        run_cmd(command(&url, &["--json", "workers"]))
            .await
            .stdout
            .contains("doomed")
    })
    .await;
    let id = enqueue().await.ok().json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // the first POST is answered 500, the retry (after 1 s) 200
    wait_until_async(WAIT, "the retried POST", || {
        let bodies = bodies.clone();
        async move { bodies.lock().unwrap().len() >= 2 }
    })
    .await;
    // no third POST follows a 200
    tokio::time::sleep(Duration::from_secs(3)).await;
    let bodies = bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2, "{bodies:#?}");
    assert_eq!(bodies[0], bodies[1]);
    let notice: Value = serde_json::from_str(&bodies[1]).unwrap();
    assert_eq!(notice["event"], "job_failed", "{notice:#}");
    assert_eq!(notice["job"]["id"], id.as_str());
    assert!(
        notice["summary"]
            .as_str()
            .unwrap()
            .contains("the feed is gone"),
        "{notice:#}"
    );
    // SAFETY: the worker is this test's own child
    unsafe { libc::kill(worker.id().unwrap() as i32, libc::SIGTERM) };
    let _ = tokio::time::timeout(WAIT, worker.wait()).await;
}
