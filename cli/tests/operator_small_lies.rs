//! Small lies and crashes of the operator tool, each through the binary or the
//! dashboard's HTTP: `events --follow` into a pipe its reader closed, workers
//! registered with a queue that has no job yet, a lock's time left (the
//! holder's lease, not the key's hour-long safety TTL), a STALE attempt's run
//! time (it stopped when the attempt went STALE), and a wrong password (not
//! "cannot reach Redis").

mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};
use leasehold::worker::Worker;
use leasehold::{schemars, JsonSchema};
use leasehold_testkit::RedisServer;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use support::binary::{command, run_cmd, Run};
use support::dashboard::{http, Dashboard};
use support::jobs::{enqueue, job, lease_one, queue, start};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

async fn cli(srv: &RedisServer, args: &[&str]) -> Run {
    run_cmd(command(&srv.url(), args)).await
}

#[tokio::test]
async fn events_follow_into_a_closed_pipe_exits_quietly_without_a_panic() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    enqueue(&q, job("sync", 1)).await;
    let mut cmd = command(
        &srv.url(),
        &["--json", "events", "--follow", "--queue", "orders"],
    );
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("a line within 20 s")
        .expect("read")
        .expect("not closed");
    assert!(first.contains("\"enqueue\""), "{first}");
    // the reader goes away, as `| head -1` does
    drop(lines);
    // new events make the follower write into the closed pipe
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().expect("poll the child") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the follower kept running after its reader closed the pipe"
        );
        enqueue(&q, job("sync", 2)).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut err = String::new();
    stderr.read_to_string(&mut err).await.unwrap();
    assert!(!err.contains("panicked"), "stderr: {err}");
    assert!(!err.to_lowercase().contains("broken pipe"), "stderr: {err}");
    assert_eq!(status.code(), Some(0), "stderr: {err}");
}

/// The job input of the idle pipeline.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Nothing {}

struct Idle;

#[pipeline(queue = "fresh", max_attempts = 1)]
impl Idle {
    #[step]
    async fn only(&self, _ctx: &StepContext, _input: &Nothing) -> Result<u32, StepError> {
        Ok(0)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_are_found_while_their_queue_has_no_job_yet() {
    let srv = RedisServer::start();
    let mut stops = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let w = Worker::builder(srv.url())
            .pipeline(Idle)
            .build()
            .await
            .expect("worker");
        ids.push(w.id().to_owned());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(w.run_until(async {
            let _ = stopped.await;
        }));
        stops.push(stop);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while format!("{:?}", srv.cmd(&["SCARD", "leasehold:{fresh}:workers"])) != "int(2)" {
        assert!(Instant::now() < deadline, "the workers never registered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let run = cli(&srv, &["workers"]).await.ok();
    assert!(!run.stdout.contains("no live workers"), "{run:?}");
    for id in &ids {
        assert!(run.stdout.contains(id.as_str()), "{id} missing: {run:?}");
    }
    let v = cli(&srv, &["status", "--json"]).await.ok().json();
    assert_eq!(v[0]["queue"], "fresh", "{v:#}");
    drop(stops);
}

#[tokio::test]
async fn a_locks_time_left_is_its_holders_lease_not_the_keys_hour() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    let id = enqueue(&q, job("sync", 1).resource("shop:a")).await;
    let lease = lease_one(&q, "w1", "sync", Duration::from_secs(6)).await;
    start(&q, &lease).await;

    let v = cli(&srv, &["locks", "--json"]).await.ok().json();
    let lock = &v[0];
    assert_eq!(lock["holder"], id.as_str(), "{v:#}");
    let left = lock["holder_lease_ms"]
        .as_i64()
        .expect("the holder's lease");
    assert!((0..=6_000).contains(&left), "{left} ms: {v:#}");
    assert!(
        lock["ttl_ms"].as_i64().unwrap() > 3_600_000,
        "the key itself keeps its hour-long safety TTL: {v:#}"
    );

    for args in [&["locks"][..], &["status"], &["show", id.as_str()]] {
        let out = cli(&srv, args).await.ok().stdout;
        assert!(out.contains("(holder's lease)"), "{args:?}:\n{out}");
        assert!(!out.contains("1h0"), "{args:?}:\n{out}");
    }
    let dash = Dashboard::start(&srv.url(), &[], None).await;
    let page = http()
        .get(dash.url("/locks"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("(holder&#39;s lease)") || page.contains("(holder's lease)"),
        "{page}"
    );
    dash.stop().await;
}

/// The current attempt's row of the dashboard's job page.
fn current_row(page: &str) -> String {
    let start = page
        .find("<tr class=\"current\">")
        .unwrap_or_else(|| panic!("no current attempt row: {page}"));
    let end = page[start..].find("</tr>").unwrap() + start;
    page[start..end].to_owned()
}

#[tokio::test]
async fn a_stale_attempts_run_time_stops_when_it_went_stale() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    let id = enqueue(&q, job("sync", 1)).await;
    let lease = lease_one(&q, "w-dead", "sync", Duration::from_millis(300)).await;
    start(&q, &lease).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while q.sweep(100).await.unwrap().stale == 0 {
        assert!(Instant::now() < deadline, "the lease never expired");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let dash = Dashboard::start(&srv.url(), &[], None).await;
    let path = format!("/jobs/orders/{id}");
    let row = |page: String| current_row(&page);
    let get = || async {
        http()
            .get(dash.url(&path))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    let before = row(get().await);
    assert!(before.contains("(until STALE)"), "{before}");
    assert!(!before.contains("so far"), "{before}");
    // a second later the run time is the same: it ended when the attempt went STALE
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let after = row(get().await);
    assert_eq!(before, after);
    let v: Value = http()
        .get(dash.url(&format!("/api/jobs/orders/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["job"]["state"], "STALE", "{v:#}");
    dash.stop().await;
}

#[tokio::test]
async fn a_wrong_password_is_authentication_failed_with_its_own_exit_code() {
    let srv = RedisServer::start_tcp();
    let port = srv.port().unwrap();
    srv.cmd(&[
        "ACL", "SETUSER", "alice", "on", ">s3cret", "~*", "&*", "+@all",
    ]);
    let url = format!("redis://alice:wrong@127.0.0.1:{port}");
    for args in [&["status"][..], &["jobs"], &["events"]] {
        let run = run_cmd(command(&url, args)).await.code(6);
        assert!(run.stderr.contains("authentication failed"), "{run:?}");
        assert!(!run.stderr.contains("cannot reach"), "{run:?}");
        assert!(!run.stderr.contains("wrong@"), "{run:?}");
    }
    // the right password works
    let ok = format!("redis://alice:s3cret@127.0.0.1:{port}");
    run_cmd(command(&ok, &["status"])).await.ok();
    // no password where one is required: the same
    srv.cmd(&["CONFIG", "SET", "requirepass", "pw"]);
    let run = run_cmd(command(&format!("redis://127.0.0.1:{port}"), &["status"]))
        .await
        .code(6);
    assert!(run.stderr.contains("authentication failed"), "{run:?}");
}
