//! `leasehold enqueue` under the pipeline's published contract, against a
//! real worker: the CLI finds the pipeline's queue, computes each window's
//! resource and input key from the pipeline's templates (so a backfill of one
//! resource never overlaps), refuses an input of the wrong shape with its JSON
//! path, and re-running a half-failed backfill runs only the failed windows.
//! A pipeline that publishes no input schema is enqueued with a note saying
//! its input is not checked.

mod support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold::prelude::*;
use leasehold_testkit::{wait_until_async, RedisServer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use support::binary::{command, run_cmd, Run};
use support::jobs::queue;
use tokio::sync::oneshot;

/// The pipeline's queue (not its name: the CLI must find it from the spec).
const QUEUE: &str = "warehouse";
/// Deadline of every wait.
const WAIT: Duration = Duration::from_secs(30);

/// One hour of one shop. `#[derive(JsonSchema)]` with the prelude in scope
/// is all a pipeline needs to publish its input schema.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Window {
    shop: String,
    from: String,
    to: String,
}

/// What the step saw: each run's window and time span, and which windows fail.
#[derive(Default)]
struct Record {
    spans: Vec<(String, Instant, Instant)>,
    failing: BTreeSet<String>,
}

#[derive(Clone)]
struct Backfill {
    record: Arc<Mutex<Record>>,
}

#[pipeline(
    name = "hourly_load",
    queue = "warehouse",
    max_attempts = 1,
    resource = "shop:{shop}",
    input_key = "{shop}:{from}"
)]
impl Backfill {
    #[step]
    async fn load(&self, _ctx: &StepContext, input: &Window) -> Result<(), StepError> {
        let started = Instant::now();
        tokio::time::sleep(Duration::from_millis(120)).await;
        let mut r = self
            .record
            .lock()
            .map_err(|_| StepError::permanent("poisoned"))?;
        r.spans.push((input.from.clone(), started, Instant::now()));
        if r.failing.contains(&input.from) {
            return Err(StepError::permanent("the warehouse refused the load"));
        }
        Ok(())
    }
}

/// An input whose pipeline publishes no schema (`input_schema = false`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Loose {
    n: u32,
}

struct Unchecked;

#[pipeline(name = "unchecked_load", queue = "warehouse", input_schema = false)]
impl Unchecked {
    #[step]
    async fn load(&self, _ctx: &StepContext, _input: &Loose) -> Result<(), StepError> {
        Ok(())
    }
}

/// A worker serving the pipeline at concurrency 4 until the sender is dropped.
async fn worker(url: &str, record: Arc<Mutex<Record>>) -> oneshot::Sender<()> {
    let w = Worker::builder(url)
        .pipeline(Backfill { record })
        .pipeline(Unchecked)
        .concurrency(4)
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

/// An integer reply of one command on the test server (0 otherwise).
fn int(srv: &RedisServer, args: &[&str]) -> i64 {
    match srv.cmd(args) {
        leasehold::redis::Value::Int(n) => n,
        _ => 0,
    }
}

async fn cli(srv: &RedisServer, args: &[&str]) -> Run {
    run_cmd(command(&srv.url(), args)).await
}

/// The backfill of shop `a`, 00:00 to 04:00 in hours, as JSON.
async fn backfill(srv: &RedisServer, extra: &[&str]) -> Value {
    let mut args = vec![
        "enqueue",
        "hourly_load",
        "--input-template",
        r#"{"shop":"a","from":"{from}","to":"{to}"}"#,
        "--from",
        "2026-05-06T00:00:00Z",
        "--to",
        "2026-05-06T04:00:00Z",
        "--step",
        "1h",
        "--json",
    ];
    args.extend_from_slice(extra);
    cli(srv, &args).await.ok().json()
}

/// Waits until the queue has `n` terminal jobs.
async fn terminal(srv: &RedisServer, n: usize) {
    let q = queue(srv, QUEUE).await;
    let done = q.keys().done();
    wait_until_async(WAIT, "the jobs end", || {
        let done = done.clone();
        async move { int(srv, &["ZCARD", &done]) >= i64::try_from(n).unwrap_or(i64::MAX) }
    })
    .await;
}

/// Waits until a worker registered the pipeline's spec.
async fn registered(srv: &RedisServer) {
    let q = queue(srv, QUEUE).await;
    wait_until_async(WAIT, "the spec is published", || {
        let q = q.clone();
        async move { matches!(q.pipeline_spec("hourly_load").await, Ok(Some(_))) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cli_backfill_of_one_resource_never_overlaps() {
    let srv = RedisServer::start();
    let record = Arc::new(Mutex::new(Record::default()));
    let stop = worker(&srv.url(), record.clone()).await;
    registered(&srv).await;
    let v = backfill(&srv, &[]).await;
    assert_eq!(
        v["queue"], QUEUE,
        "the spec's queue, not the pipeline's name"
    );
    assert_eq!(v["created"], 4, "{v}");
    terminal(&srv, 4).await;
    let q = queue(&srv, QUEUE).await;
    for j in v["jobs"].as_array().expect("jobs") {
        let id = leasehold::queue::JobId::parse(j["id"].as_str().unwrap_or_default()).expect("id");
        let job = q.job(&id).await.expect("read").expect("a job");
        assert_eq!(job.resource.as_deref(), Some("shop:a"));
        assert_eq!(job.state, leasehold::queue::JobState::Succeeded);
    }
    let mut spans = record.lock().expect("record").spans.clone();
    assert_eq!(spans.len(), 4);
    spans.sort_by_key(|s| s.1);
    for pair in spans.windows(2) {
        assert!(
            pair[1].1 >= pair[0].2,
            "windows {} and {} of one resource ran at the same time",
            pair[0].0,
            pair[1].0
        );
    }
    drop(stop);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerunning_a_half_failed_backfill_runs_only_the_failed_windows() {
    let srv = RedisServer::start();
    let record = Arc::new(Mutex::new(Record::default()));
    record.lock().expect("record").failing = ["2026-05-06T01:00:00Z", "2026-05-06T03:00:00Z"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    let stop = worker(&srv.url(), record.clone()).await;
    registered(&srv).await;
    let first = backfill(&srv, &[]).await;
    assert_eq!(first["created"], 4, "{first}");
    terminal(&srv, 4).await;

    // the warehouse is fixed; the same command again
    record.lock().expect("record").failing.clear();
    let second = backfill(&srv, &[]).await;
    assert_eq!(
        (&second["created"], &second["succeeded"], &second["rerun"]),
        (&Value::from(0), &Value::from(2), &Value::from(2)),
        "{second}"
    );
    terminal(&srv, 6).await;
    let ran: Vec<String> = record
        .lock()
        .expect("record")
        .spans
        .iter()
        .map(|s| s.0.clone())
        .collect();
    assert_eq!(ran.len(), 6, "{ran:?}");
    let mut again = ran[4..].to_vec();
    again.sort();
    assert_eq!(again, ["2026-05-06T01:00:00Z", "2026-05-06T03:00:00Z"]);
    // each re-run names the failed job it replaces, and `show` says so
    for j in second["jobs"].as_array().expect("jobs") {
        if j["status"] == "rerun" {
            let previous = j["previous"].as_str().expect("a previous job");
            let shown = cli(&srv, &["show", j["id"].as_str().unwrap_or_default()])
                .await
                .ok();
            assert!(shown.stdout.contains(previous), "{shown:?}");
        }
    }

    // a third time: everything SUCCEEDED, nothing runs; --rerun asks for all four
    let third = backfill(&srv, &[]).await;
    assert_eq!(third["succeeded"], 4, "{third}");
    let forced = backfill(&srv, &["--rerun"]).await;
    assert_eq!(forced["rerun"], 4, "{forced}");
    terminal(&srv, 10).await;
    drop(stop);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_input_shape_is_refused_with_its_json_path_and_writes_nothing() {
    let srv = RedisServer::start();
    let record = Arc::new(Mutex::new(Record::default()));
    let stop = worker(&srv.url(), record).await;
    registered(&srv).await;
    let run = cli(
        &srv,
        &[
            "enqueue",
            "hourly_load",
            "--input",
            r#"{"shop":"a","from":5,"to":"x"}"#,
        ],
    )
    .await
    .code(2);
    assert!(run.stderr.contains("/from"), "{run:?}");
    let run = cli(
        &srv,
        &["enqueue", "hourly_load", "--input", r#"{"shop":"a"}"#],
    )
    .await
    .code(2);
    assert!(run.stderr.contains("invalid"), "{run:?}");
    // the key is computed from the input: giving one is refused
    let run = cli(
        &srv,
        &[
            "enqueue",
            "hourly_load",
            "--input",
            r#"{"shop":"a","from":"f","to":"t"}"#,
            "--input-key",
            "mine",
        ],
    )
    .await
    .code(2);
    assert!(run.stderr.contains("computes its input key"), "{run:?}");
    // the workers' own registration keys change on their own; no job was written
    let q = queue(&srv, QUEUE).await;
    let jobs = srv.cmd(&["KEYS", &format!("{}:job:*", q.keys().base())]);
    assert_eq!(
        jobs,
        leasehold::redis::Value::Array(vec![]),
        "a refused enqueue wrote a job"
    );
    drop(stop);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_is_checked_by_default_and_a_pipeline_without_a_schema_says_so() {
    let srv = RedisServer::start();
    let record = Arc::new(Mutex::new(Record::default()));
    let stop = worker(&srv.url(), record).await;
    registered(&srv).await;
    // the default pipeline (no attribute beyond the derive): a wrong type is
    // refused with exit 2, naming the field, and nothing is written
    let run = cli(
        &srv,
        &[
            "enqueue",
            "hourly_load",
            "--input",
            r#"{"shop":["a"],"from":"f","to":"t"}"#,
        ],
    )
    .await
    .code(2);
    assert!(
        run.stderr.contains("/shop") && run.stderr.contains("hourly_load"),
        "{run:?}"
    );
    assert!(!run.stderr.contains("not checked"), "{run:?}");
    // a well-formed input: created, and --json says it was checked
    let run = cli(
        &srv,
        &[
            "enqueue",
            "hourly_load",
            "--input",
            r#"{"shop":"a","from":"f","to":"t"}"#,
            "--json",
        ],
    )
    .await
    .ok();
    assert_eq!(run.json()["input_checked"], true, "{run:?}");
    assert!(!run.stderr.contains("not checked"), "{run:?}");
    // the pipeline that publishes no schema: enqueued, and the output says so
    let q = queue(&srv, QUEUE).await;
    wait_until_async(WAIT, "the unchecked spec is published", || {
        let q = q.clone();
        async move { matches!(q.pipeline_spec("unchecked_load").await, Ok(Some(_))) }
    })
    .await;
    let run = cli(
        &srv,
        &[
            "enqueue",
            "unchecked_load",
            "--input",
            r#"{"n":"not a number"}"#,
        ],
    )
    .await
    .ok();
    assert!(
        run.stderr
            .contains("input not checked: pipeline unchecked_load publishes no input schema"),
        "{run:?}"
    );
    let run = cli(
        &srv,
        &[
            "enqueue",
            "unchecked_load",
            "--input",
            r#"{"n":2}"#,
            "--json",
        ],
    )
    .await
    .ok();
    assert_eq!(run.json()["input_checked"], false, "{run:?}");
    drop(stop);
}

#[tokio::test]
async fn two_versions_of_one_pipeline_live_at_once_are_reported_by_status() {
    let srv = RedisServer::start();
    let q = queue(&srv, QUEUE).await;
    for (id, version) in [("w-old", "00000000000000aa"), ("w-new", "00000000000000bb")] {
        let info = format!(
            r#"{{"id":"{id}","pipelines":["hourly_load"],"versions":{{"hourly_load":"{version}"}}}}"#
        );
        srv.cmd(&["SET", &q.keys().worker(id), &info, "PX", "60000"]);
        srv.cmd(&["SADD", &q.keys().workers(), id]);
    }
    let run = cli(&srv, &["status", "--queue", QUEUE]).await.ok();
    assert!(
        run.stdout
            .contains("pipeline hourly_load runs in 2 versions at once")
            && run.stdout.contains("00000000000000aa on w-old"),
        "{run:?}"
    );
}
