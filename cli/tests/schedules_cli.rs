//! `leasehold schedules` against a real worker serving two scheduled
//! pipelines (one every second, one hourly): the list shows them, pause and
//! resume change what ticks do (recorded), trigger enqueues one window
//! idempotently, and a backfill with `leasehold enqueue --range` computes the
//! same input keys as the schedule, so windows the schedule enqueued are not
//! enqueued again.

mod support;

use std::time::Duration;

use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};
use leasehold::schedule::Window;
use leasehold::worker::Worker;
use leasehold::{schemars, JsonSchema};
use leasehold_testkit::{wait_until_async, RedisServer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use support::binary::{command, run_cmd, Run};
use support::jobs::queue;
use tokio::sync::oneshot;

const QUEUE: &str = "nightly";
const WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Tick {
    window: Window,
    table: String,
}

struct Secondly;

#[pipeline(
    queue = "nightly",
    max_attempts = 1,
    schedule(every = "1s", input = r#"{"table": "s"}"#)
)]
impl Secondly {
    #[step]
    async fn run(&self, _ctx: &StepContext, _input: &Tick) -> Result<(), StepError> {
        Ok(())
    }
}

struct Hourly;

#[pipeline(
    queue = "nightly",
    max_attempts = 1,
    schedule(name = "compaction", every = "1h", input = r#"{"table": "orders"}"#)
)]
impl Hourly {
    #[step]
    async fn run(&self, _ctx: &StepContext, _input: &Tick) -> Result<(), StepError> {
        Ok(())
    }
}

async fn worker(url: &str) -> oneshot::Sender<()> {
    let w = Worker::builder(url)
        .pipeline(Secondly)
        .pipeline(Hourly)
        .max_idle_wait(Duration::from_millis(200))
        .build()
        .await
        .expect("worker");
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(w.run_until(async {
        let _ = stopped.await;
    }));
    stop
}

async fn cli(srv: &RedisServer, args: &[&str]) -> Run {
    run_cmd(command(&srv.url(), args)).await
}

async fn ticks(srv: &RedisServer, name: &str) -> Vec<Value> {
    let run = cli(
        srv,
        &["schedules", "ticks", name, "--limit", "200", "--json"],
    )
    .await
    .ok();
    run.json().as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_pause_resume_trigger_and_a_backfill_with_the_same_input_keys() {
    let srv = RedisServer::start();
    let _stop = worker(&srv.url()).await;
    let q = queue(&srv, QUEUE).await;

    // the list: both schedules, next due, counts
    let run = cli(&srv, &["schedules", "--json"]).await.ok();
    let list = run.json();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["schedule"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{list}");
    assert!(
        names.contains(&"secondly") && names.contains(&"compaction"),
        "{list}"
    );
    wait_until_async(WAIT, "a second's tick", || {
        let q = q.clone();
        async move { q.schedule_info("secondly").await.unwrap().unwrap().counts["enqueued"] >= 1 }
    })
    .await;
    cli(&srv, &["schedules"]).await.ok().shows(&[
        "secondly (pipeline secondly, queue nightly) every 1s, active",
        "next due",
        "last job",
    ]);
    // times in reasons are UTC RFC 3339, never epoch milliseconds: the
    // enqueue event of a window, and the registration tick's cursor
    let v = cli(&srv, &["events", "--queue", "nightly", "--json"])
        .await
        .ok()
        .json();
    let reason = v
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["op"] == "enqueue")
        .and_then(|e| e["reason"].as_str())
        .expect("an enqueue event")
        .to_owned();
    let window = reason
        .strip_prefix("schedule secondly window ")
        .unwrap_or_else(|| panic!("{reason:?}"));
    let (from, to) = window.split_once("..").expect("from..to");
    for t in [from, to] {
        assert!(
            t.parse::<jiff::Timestamp>().is_ok() && t.ends_with('Z'),
            "{reason:?}"
        );
    }
    let registered = ticks(&srv, "secondly")
        .await
        .into_iter()
        .find(|t| t["outcome"] == "registered")
        .expect("a registration tick");
    let cursor = registered["reason"].as_str().unwrap();
    assert!(
        cursor
            .strip_prefix("cursor at ")
            .is_some_and(|t| t.parse::<jiff::Timestamp>().is_ok()),
        "{cursor:?}"
    );

    // pause: ticks are recorded as skipped, by whom and why
    cli(
        &srv,
        &["schedules", "pause", "secondly", "--reason", "maintenance"],
    )
    .await
    .ok()
    .shows(&["paused"]);
    wait_until_async(WAIT, "a tick skipped while paused", || async {
        ticks(&srv, "secondly")
            .await
            .iter()
            .any(|t| t["outcome"] == "skipped" && t["reason"] == "paused")
    })
    .await;
    let all = ticks(&srv, "secondly").await;
    assert!(
        all.iter().any(|t| t["outcome"] == "paused"
            && t["by"] == "tester"
            && t["reason"] == "maintenance"),
        "{all:?}"
    );
    cli(&srv, &["schedules"])
        .await
        .ok()
        .shows(&["PAUSED by tester"]);
    cli(&srv, &["schedules", "resume", "secondly"])
        .await
        .ok()
        .shows(&["resumed"]);
    let enqueued_before = q.schedule_info("secondly").await.unwrap().unwrap().counts["enqueued"];
    wait_until_async(WAIT, "ticks enqueue again after resume", || {
        let q = q.clone();
        async move {
            q.schedule_info("secondly").await.unwrap().unwrap().counts["enqueued"] > enqueued_before
        }
    })
    .await;

    // trigger: the latest due hourly window, once
    let now = q.redis_time_ms().await.unwrap();
    let hour = now - now.rem_euclid(3_600_000);
    let stamp = |ms: i64| {
        leasehold::jiff::Timestamp::from_millisecond(ms)
            .unwrap()
            .to_string()
    };
    let first = cli(&srv, &["schedules", "trigger", "compaction", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(first["status"], "created", "{first}");
    assert_eq!(first["window"]["start"], stamp(hour - 3_600_000));
    let again = cli(&srv, &["schedules", "trigger", "compaction", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(again["job"], first["job"], "the same window's job: {again}");
    assert!(
        again["status"] == "existing" || again["status"] == "succeeded",
        "{again}"
    );

    // a backfill of the last three hours computes the schedule's input keys:
    // the triggered window is not enqueued again
    let from = stamp(hour - 3 * 3_600_000);
    let to = stamp(hour);
    let backfill = cli(
        &srv,
        &[
            "enqueue",
            "hourly",
            "--input-template",
            r#"{"window":{"start":"{from}","end":"{to}"},"table":"orders"}"#,
            "--input-key-template",
            "compaction:{from}",
            "--from",
            &from,
            "--to",
            &to,
            "--step",
            "1h",
            "--json",
        ],
    )
    .await
    .ok()
    .json();
    assert_eq!(backfill["windows"], 3, "{backfill}");
    assert_eq!(backfill["created"], 2, "{backfill}");
    let jobs = backfill["jobs"].as_array().unwrap();
    assert_eq!(
        jobs[2]["id"], first["job"],
        "the schedule's job is the answer: {backfill}"
    );
    // and the other way round: triggering a backfilled window enqueues nothing
    let back = cli(
        &srv,
        &[
            "schedules",
            "trigger",
            "compaction",
            "--window",
            &from,
            "--json",
        ],
    )
    .await
    .ok()
    .json();
    assert_eq!(back["job"], jobs[0]["id"], "{back}");
    assert_ne!(back["status"], "created", "{back}");
    // the triggers are recorded with who asked
    let all = ticks(&srv, "compaction").await;
    assert_eq!(
        all.iter()
            .filter(|t| t["outcome"] == "triggered" && t["by"] == "tester")
            .count(),
        3,
        "{all:?}"
    );

    // a window start that is not one, and an unknown schedule
    cli(
        &srv,
        &[
            "schedules",
            "trigger",
            "compaction",
            "--window",
            "2026-01-01T00:30:00Z",
        ],
    )
    .await
    .code(2);
    let run = cli(&srv, &["schedules", "pause", "nope"]).await.code(3);
    assert!(run.stderr.contains("no schedule \"nope\""), "{run:?}");
    assert!(run.stderr.contains("known schedules: "), "{run:?}");
    // a typo: did you mean
    let run = cli(&srv, &["schedules", "pause", "secondyl"]).await.code(3);
    assert!(run.stderr.contains("did you mean \"secondly\"?"), "{run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_lists_schedules_and_pauses_resumes_and_triggers_them() {
    use support::dashboard::{http, Dashboard};
    const TOKEN: &str = "sched-secret-0123456789";
    let srv = RedisServer::start();
    let _stop = worker(&srv.url()).await;
    let q = queue(&srv, QUEUE).await;
    let dash = Dashboard::start(&srv.url(), &["--queue", QUEUE], Some(TOKEN)).await;
    let client = http();

    let page = client.get(dash.url("/schedules")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let body = page.text().await.unwrap();
    for part in [
        "Schedules",
        "secondly",
        "compaction",
        "every 1h",
        "Next due",
        "Trigger",
    ] {
        assert!(body.contains(part), "the page lacks {part:?}");
    }
    let api: Value = client
        .get(dash.url("/api/schedules"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(api.as_array().map(Vec::len), Some(2), "{api}");

    // without the token nothing happens
    let denied = client
        .post(dash.url("/api/schedules/nightly/secondly/pause"))
        .json(&serde_json::json!({"operator": "ana"}))
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status(), 401);
    assert!(!q.schedule_info("secondly").await.unwrap().unwrap().paused);

    // the form pauses (recorded with the operator), the API resumes
    let paused = client
        .post(dash.url("/schedules/nightly/secondly/pause"))
        .form(&[("token", TOKEN), ("operator", "ana"), ("reason", "deploy")])
        .send()
        .await
        .unwrap();
    assert_eq!(paused.status(), 303);
    let info = q.schedule_info("secondly").await.unwrap().unwrap();
    assert!(info.paused);
    assert_eq!(info.paused_by.as_deref(), Some("dashboard:ana"));
    let resumed: Value = client
        .post(dash.url("/api/schedules/nightly/secondly/resume"))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({"operator": "ana"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(resumed["outcome"], "resumed", "{resumed}");
    assert!(!q.schedule_info("secondly").await.unwrap().unwrap().paused);

    // trigger the hourly schedule's latest window, twice: one job
    let first: Value = client
        .post(dash.url("/api/schedules/nightly/compaction/trigger"))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({"operator": "ana"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        first["outcome"].as_str().unwrap().ends_with("created"),
        "{first}"
    );
    let second: Value = client
        .post(dash.url("/api/schedules/nightly/compaction/trigger"))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(second["job"], first["job"], "{second}");
    let unknown = client
        .post(dash.url("/api/schedules/nightly/nope/pause"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 400, "{}", dash.stderr());
    dash.stop().await;
}
