//! The `leasehold` binary against a REAL worker run: a `leasehold_core::Worker`
//! runs in-process with a small hand-written pipeline (`fetch → load →
//! aggregate`, where `load` can be told to run long), and the tests run the
//! real binary to see it, cancel its job, and recover the jobs of a worker that
//! died abruptly (its runtime dropped mid-step).
//!
//! Every wait is on an observable condition (the binary's output or Redis)
//! with a generous deadline; nothing sleeps to synchronise. The workers never
//! sweep on their own after their first heartbeat (`sweep_interval` of an
//! hour), so the binary's `sweep` is the one that recovers expired leases.

mod support;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold_core::{
    BoxFuture, CleanupContext, CleanupReason, JobId, JobState, Pipeline, PipelineOptions, Queue,
    QueueConfig, RetryPolicy, StepContext, StepError, StepSpec, Worker,
};
use leasehold_testkit::RedisServer;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use support::binary::{command, run_cmd, Run};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The pipeline's queue.
const QUEUE: &str = "ops";
/// The pipeline's name.
const PIPELINE: &str = "sync";
/// Deadline of every wait.
const WAIT: Duration = Duration::from_secs(20);
/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(50);

// ---- the pipeline -------------------------------------------------------------

leasehold_testkit::step_enum!(Step, PIPELINE; Fetch = "fetch", Load = "load", Aggregate = "aggregate");

/// The job input: `slow` jobs run a long `load` on workers that hold them.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Input {
    n: u64,
    #[serde(default)]
    slow: bool,
}

/// What the cleanup hook was told, per job.
type Cleanups = Arc<Mutex<Vec<(JobId, CleanupReason, Option<&'static str>)>>>;

/// `fetch → load → aggregate` in queue `ops`, no automatic retries.
#[derive(Clone)]
struct Sync {
    /// Whether `load` runs long for `slow` jobs (a replacement worker's does not).
    hold: bool,
    cleanups: Cleanups,
}

impl Pipeline for Sync {
    type Input = Input;
    type Step = Step;
    const NAME: &'static str = PIPELINE;
    const STEPS: &'static [StepSpec] = &[
        StepSpec::new("fetch"),
        StepSpec::new("load"),
        StepSpec::new("aggregate"),
    ];

    fn options() -> PipelineOptions {
        PipelineOptions::new().queue(QUEUE).retry(RetryPolicy::NONE)
    }

    fn run_step<'a>(
        &'a self,
        index: usize,
        ctx: &'a StepContext,
        input: &'a Input,
        previous: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, StepError>> {
        Box::pin(async move {
            match index {
                0 => Ok(json!({ "rows": input.n * 10 }).to_string()),
                1 => {
                    if input.slow && self.hold {
                        tokio::select! {
                            _ = ctx.cancelled() => {
                                return Err(StepError::permanent("cancelled while loading")
                                    .with_kind("cancelled"));
                            }
                            _ = tokio::time::sleep(Duration::from_secs(600)) => {}
                        }
                    }
                    let fetched: Value = serde_json::from_str(previous.unwrap_or("{}"))
                        .map_err(StepError::permanent)?;
                    Ok(json!({ "loaded": fetched["rows"], "fence": ctx.fence() }).to_string())
                }
                _ => Ok(previous.unwrap_or("null").to_owned()),
            }
        })
    }

    fn cleanup<'a>(&'a self, ctx: &'a CleanupContext, _input: &'a Input) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.cleanups.lock().unwrap().push((
                ctx.job.clone(),
                ctx.reason.clone(),
                ctx.last_completed_step,
            ));
        })
    }
}

// ---- workers --------------------------------------------------------------------

async fn build_worker(url: &str, pipeline: Sync) -> Worker {
    Worker::builder(url)
        .pipeline(pipeline)
        .concurrency(4)
        .lease_ttl(Duration::from_secs(30))
        // cancel requests are seen at the next renewal; the registration lives 1 s
        .renew_interval(Duration::from_millis(200))
        // the binary sweeps, not the workers (they sweep once, at their first heartbeat)
        .sweep_interval(Duration::from_secs(3600))
        .shutdown_grace(Duration::from_secs(5))
        .cancel_grace(Duration::from_secs(2))
        .max_idle_wait(Duration::from_millis(500))
        .build()
        .await
        .expect("the worker connects")
}

/// A worker running on the test's runtime, stopped gracefully.
struct LiveWorker {
    id: String,
    stop: oneshot::Sender<()>,
    handle: JoinHandle<leasehold_core::Result<()>>,
}

impl LiveWorker {
    async fn start(url: &str, pipeline: Sync) -> LiveWorker {
        let worker = build_worker(url, pipeline).await;
        let id = worker.id().to_owned();
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = tokio::spawn(worker.run_until(async {
            let _ = stopped.await;
        }));
        LiveWorker { id, stop, handle }
    }

    async fn shutdown(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(WAIT, self.handle)
            .await
            .expect("the worker stops within the deadline")
            .expect("the worker task did not panic")
            .expect("the worker stopped without an error");
    }
}

/// A worker on a runtime of its own, so that it can die abruptly: dropping the
/// runtime drops every task of the worker (job steps, heartbeat, leasing)
/// without any of them writing anything more, as when a process is SIGKILLed.
struct DoomedWorker {
    id: String,
    runtime: Option<tokio::runtime::Runtime>,
}

impl DoomedWorker {
    async fn start(url: &str, pipeline: Sync) -> DoomedWorker {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime for the doomed worker");
        let (tx, rx) = oneshot::channel::<String>();
        let url = url.to_owned();
        runtime.spawn(async move {
            let worker = build_worker(&url, pipeline).await;
            let _ = tx.send(worker.id().to_owned());
            let _ = worker.run_until(std::future::pending::<()>()).await;
        });
        let id = tokio::time::timeout(WAIT, rx)
            .await
            .expect("the doomed worker starts within the deadline")
            .expect("the doomed worker started");
        DoomedWorker {
            id,
            runtime: Some(runtime),
        }
    }

    /// Dies at once: no release, no finish, no deregistration, no more renewals.
    fn kill(mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for DoomedWorker {
    // a runtime may not be dropped (which blocks) inside the test's runtime,
    // e.g. when an assertion fails before `kill`
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

// ---- the binary -----------------------------------------------------------------

/// Runs the binary against `url` with `args`.
async fn cli(url: &str, args: &[&str]) -> Run {
    run_cmd(command(url, args)).await
}

/// Runs the binary with `args` (which should include `--json`) until `done`
/// holds for its output, and returns that output.
async fn cli_until(url: &str, args: &[&str], what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let v = cli(url, args).await.ok().json();
        if done(&v) {
            return v;
        }
        assert!(
            started.elapsed() < WAIT,
            "timed out after {WAIT:?} waiting until {what}; last `leasehold {}`:\n{v:#}",
            args.join(" ")
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until `cond` holds.
async fn until<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !cond().await {
        assert!(
            started.elapsed() < WAIT,
            "timed out after {WAIT:?} waiting until {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Enqueues one job of the pipeline with the binary and returns its id (as
/// unregistered: the tests enqueue before their workers start and publish the spec).
async fn enqueue(url: &str, input: Value, resource: Option<&str>) -> JobId {
    let input = input.to_string();
    let mut args = vec![
        "enqueue",
        PIPELINE,
        "--unregistered",
        "--queue",
        QUEUE,
        "--input",
        &input,
    ];
    if let Some(r) = resource {
        args.extend(["--resource", r]);
    }
    args.push("--json");
    let v = cli(url, &args).await.ok().json();
    assert_eq!(v["created"], json!(true), "{v:#}");
    JobId::parse(v["id"].as_str().expect("an id")).expect("a job id")
}

async fn queue(srv: &RedisServer) -> Queue {
    Queue::connect(&srv.url(), QUEUE, QueueConfig::default())
        .await
        .expect("connect")
}

async fn state_of(q: &Queue, id: &JobId) -> JobState {
    q.job(id)
        .await
        .expect("read")
        .expect("the job exists")
        .state
}

async fn until_state(q: &Queue, id: &JobId, want: JobState) {
    until(&format!("job {id} is {want}"), || async {
        state_of(q, id).await == want
    })
    .await;
}

/// The data row of `queue` in a table whose first column is the queue name.
#[track_caller]
fn row<'a>(table: &'a str, first: &str) -> Vec<&'a str> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&first))
        .unwrap_or_else(|| panic!("no row starting with {first:?} in:\n{table}"))
}

/// The `op`, `from->to` and `by` of a job's events, in order.
fn moves(events: &Value) -> Vec<(String, String, String)> {
    events
        .as_array()
        .expect("an array of events")
        .iter()
        .map(|e| {
            (
                e["op"].as_str().unwrap_or("").to_owned(),
                format!(
                    "{}->{}",
                    e["from"].as_str().unwrap_or(""),
                    e["to"].as_str().unwrap_or("")
                ),
                e["by"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn mv(op: &str, transition: &str, by: &str) -> (String, String, String) {
    (op.to_owned(), transition.to_owned(), by.to_owned())
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

// ---- a live worker --------------------------------------------------------------

/// `workers`, `status`, `jobs`, `show` and `events` see a live worker and its
/// RUNNING job; `cancel` makes the worker stop the job mid-step, and `show`
/// tells that the cancel was honoured, why, and after which step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_worker_is_seen_and_honours_a_cancel() {
    let srv = RedisServer::start();
    let url = srv.url();
    let q = queue(&srv).await;
    let fast1 = enqueue(&url, json!({"n": 1}), None).await;
    let fast2 = enqueue(&url, json!({"n": 2}), None).await;
    let slow = enqueue(&url, json!({"n": 3, "slow": true}), Some("shop:a")).await;
    let parked = enqueue(&url, json!({"n": 4}), Some("shop:a")).await;

    let cleanups = Cleanups::default();
    let worker = LiveWorker::start(
        &url,
        Sync {
            hold: true,
            cleanups: cleanups.clone(),
        },
    )
    .await;
    let wid = worker.id.clone();

    // the fast jobs finish, the slow one runs `load`, the fourth waits for shop:a
    let v = cli_until(
        &url,
        &["status", "--json"],
        "2 SUCCEEDED, 1 RUNNING, 1 parked and the worker registered",
        |v| {
            let c = &v[0]["counts"];
            c["succeeded"] == json!(2)
                && c["running"] == json!(1)
                && c["queued"] == json!(1)
                && v[0]["parked"] == json!(1)
                // the registration says what the worker holds at its last heartbeat
                && v[0]["workers"].as_array().is_some_and(|w| w.len() == 1)
                && v[0]["workers"][0]["active"] == json!(1)
        },
    )
    .await;
    assert_eq!(v[0]["queue"], json!(QUEUE));
    assert_eq!(v[0]["counts"]["leased"], json!(0));
    assert_eq!(v[0]["counts"]["stale"], json!(0));
    assert_eq!(v[0]["expired_leases"], json!(0));
    assert_eq!(v[0]["locks"][0]["holder"], json!(slow.as_str()));
    until(&format!("job {slow} runs `load`"), || async {
        let job = q.job(&slow).await.unwrap().unwrap();
        job.state == JobState::Running && job.step.as_deref() == Some("load")
    })
    .await;
    for id in [&fast1, &fast2] {
        assert_eq!(state_of(&q, id).await, JobState::Succeeded);
    }
    assert_eq!(state_of(&q, &parked).await, JobState::Queued);

    // status: the counts per state, the worker, the lock and what waits for it
    let status = cli(&url, &["status"]).await.ok();
    let cells = row(&status.stdout, QUEUE);
    // QUEUE QUEUED LEASED RUNNING STALE SUCCEEDED FAILED CANCELLED OLDEST.. WORKERS LOCKS
    assert_eq!(
        &cells[..8],
        &[QUEUE, "1", "0", "1", "0", "2", "0", "0"],
        "{}",
        status.stdout
    );
    assert_eq!(&cells[cells.len() - 2..], &["1", "1"], "{}", status.stdout);
    let status = status.shows(&[
        "1 parked on locked resources",
        &format!("workers: {wid} (1/4 busy)"),
        "STALE jobs needing a decision: none",
    ]);
    let lock = row(&status.stdout, "shop:a");
    assert_eq!(
        &lock[1..3],
        &[slow.as_str(), "RUNNING"],
        "{}",
        status.stdout
    );
    assert_eq!(lock.last(), Some(&"1"), "one job parked: {}", status.stdout);

    // workers: the live worker with its pipelines, table and JSON
    let run = cli(&url, &["workers"]).await.ok();
    let w = row(&run.stdout, QUEUE);
    assert_eq!(
        (w[1], w[3], w[4], w.last().copied()),
        (wid.as_str(), PIPELINE, "1/4", Some("live")),
        "{}",
        run.stdout
    );
    let v = cli(&url, &["workers", "--json"]).await.ok().json();
    assert_eq!(v[0]["queue"], json!(QUEUE), "{v:#}");
    let live = &v[0]["live"];
    assert_eq!(live.as_array().map(Vec::len), Some(1), "{v:#}");
    assert_eq!(live[0]["id"], json!(wid));
    assert_eq!(live[0]["pipelines"], json!([PIPELINE]));
    assert_eq!(live[0]["pid"], json!(std::process::id()));
    assert_eq!(
        (&live[0]["concurrency"], &live[0]["active"]),
        (&json!(4), &json!(1))
    );
    assert_eq!(live[0]["shutting_down"], json!(false));
    assert!(live[0]["expires_in_ms"].as_i64().is_some_and(|ms| ms > 0));

    // jobs --state running: the running job and the worker that took it
    let run = cli(&url, &["jobs", "--state", "running"]).await.ok();
    let r = row(&run.stdout, slow.as_str());
    // ID QUEUE PIPELINE STATE ATTEMPT STEP LAST-DONE RESOURCE WINDOW WORKER ...
    // (this job's input has no window: `-`)
    assert_eq!(
        &r[1..10],
        &[
            QUEUE,
            PIPELINE,
            "RUNNING",
            "1",
            "load",
            "fetch",
            "shop:a",
            "-",
            wid.as_str()
        ],
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("1 job (offset 0)"), "{}", run.stdout);
    let v = cli(&url, &["jobs", "--state", "running", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(v["jobs"].as_array().map(Vec::len), Some(1), "{v:#}");
    let j = &v["jobs"][0];
    assert_eq!(
        (s(&j["id"]), s(&j["state"]), s(&j["worker"]), s(&j["step"])),
        (slow.as_str(), "RUNNING", wid.as_str(), "load")
    );
    let fence = j["fence"].as_u64().expect("a fence");
    let v = cli(&url, &["jobs", "--worker", &wid, "--json"])
        .await
        .ok()
        .json();
    assert_eq!(v["jobs"].as_array().map(Vec::len), Some(3), "{v:#}");

    // show: the step timeline, the current lease (token redacted) and the lock
    let base = q.keys().base().to_owned();
    let token = match srv.cmd(&["HGET", &format!("{base}:job:{slow}"), "token"]) {
        leasehold_core::redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
        other => panic!("the RUNNING job has a token: {other:?}"),
    };
    assert!(token.len() >= 16, "{token}");
    let run = cli(&url, &["show", slow.as_str()]).await.ok().shows(&[
        "state      RUNNING (attempt 1",
        "step       load (last completed: fetch)",
        &format!("held by {wid} (fence {fence}), deadline"),
        "shop:a held by this job",
        "1 job parked on it",
        "none requested",
        &format!("leased by {wid} (fence {fence})"),
        "started",
        "step fetch completed",
        "#1 RUNNING (current)",
    ]);
    assert!(!run.stdout.contains(&token), "the token leaked: {run:#?}");
    let timeline: Vec<&str> = run
        .stdout
        .lines()
        .skip_while(|l| *l != "timeline")
        .take_while(|l| !l.is_empty())
        .collect();
    let order = ["enqueued", "leased by", "started", "step fetch completed"];
    let mut at = 0;
    for want in order {
        let found = timeline[at..]
            .iter()
            .position(|l| l.contains(want))
            .unwrap_or_else(|| panic!("{want:?} missing or out of order: {timeline:#?}"));
        at += found + 1;
    }
    let run = cli(&url, &["show", slow.as_str(), "--json"]).await.ok();
    assert!(!run.stdout.contains(&token), "the token leaked: {run:#?}");
    let v = run.json();
    assert_eq!(v["job"]["lease"]["token"], json!("(redacted)"));
    assert_eq!(v["job"]["lease"]["worker"], json!(wid));
    assert_eq!(v["job"]["lease"]["fence"], json!(fence));
    assert_eq!(v["lock"]["holder"], json!(slow.as_str()));
    assert_eq!(v["lock"]["parked"], json!(1));
    assert_eq!(v["cancel"], Value::Null);

    // cancel: a request the worker honours mid-step (phase B)
    cli(
        &url,
        &[
            "cancel",
            slow.as_str(),
            "--reason",
            "shop a is being migrated",
            "--by",
            "alice",
        ],
    )
    .await
    .ok()
    .shows(&[&format!("cancel requested for job {slow} (RUNNING)")]);
    until_state(&q, &slow, JobState::Cancelled).await;
    // its lock is released: the parked job runs
    until_state(&q, &parked, JobState::Succeeded).await;

    cli(&url, &["show", slow.as_str()]).await.ok().shows(&[
        "state      CANCELLED (attempt 1",
        "step       - (last completed: fetch)",
        "cleanup    needed (a step was cut mid-way)",
        "requested by alice at",
        "\"shop a is being migrated\"",
        "honoured: attempt 1 ended CANCELLED",
        &format!("#1 CANCELLED  worker {wid}  fence {fence}"),
        "steps completed: fetch at",
        "reason: shop a is being migrated",
        "cancel requested by alice: shop a is being migrated",
        "ended CANCELLED: shop a is being migrated",
    ]);
    let v = cli(&url, &["show", slow.as_str(), "--json"])
        .await
        .ok()
        .json();
    assert_eq!(v["cancel"]["outcome"], json!("honoured"), "{v:#}");
    assert_eq!(
        v["cancel"]["request"]["reason"],
        json!("shop a is being migrated")
    );
    assert_eq!(v["cancel"]["request"]["by"], json!("alice"));
    assert_eq!(
        v["cancel_explained"],
        json!("honoured: attempt 1 ended CANCELLED")
    );
    let a = &v["job"]["attempts"][0];
    assert_eq!(
        (s(&a["state"]), s(&a["reason"]), &a["cleanup_needed"]),
        ("CANCELLED", "shop a is being migrated", &json!(true))
    );
    let steps: Vec<&str> = a["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| s(&x["step"]))
        .collect();
    assert_eq!(steps, ["fetch"]);
    assert_eq!(v["job"]["last_step"], json!("fetch"));
    assert_eq!(v["job"]["lease"], Value::Null);
    // the worker ran the cleanup hook, told the attempt was cut after `fetch`
    {
        let seen = cleanups.lock().unwrap();
        assert!(
            seen.iter().any(|(id, reason, last)| id == &slow
                && matches!(reason, CleanupReason::Cancelled { reason } if reason == "shop a is being migrated")
                && *last == Some("fetch")),
            "{seen:?}"
        );
    }

    // events --job: the transitions in order, with who made them
    let v = cli(&url, &["events", "--job", slow.as_str(), "--json"])
        .await
        .ok()
        .json();
    assert_eq!(
        moves(&v),
        [
            mv("enqueue", "->QUEUED", ""),
            mv("start", "QUEUED->RUNNING", &wid),
            mv("cancel", "RUNNING->RUNNING", "alice"),
            mv("finish", "RUNNING->CANCELLED", &wid),
        ],
        "{v:#}"
    );
    assert_eq!(
        v[2]["reason"],
        json!("cancel requested: shop a is being migrated")
    );
    let run = cli(&url, &["events", "--job", slow.as_str()]).await.ok();
    let ops: Vec<&str> = run
        .stdout
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(4))
        .collect();
    assert_eq!(
        ops,
        ["enqueue", "start", "cancel", "finish"],
        "{}",
        run.stdout
    );

    // everything ended: nothing runs, no lock is held
    let status = cli(&url, &["status"]).await.ok();
    assert_eq!(
        &row(&status.stdout, QUEUE)[..8],
        &[QUEUE, "0", "0", "0", "0", "3", "0", "1"],
        "{}",
        status.stdout
    );
    cli(&url, &["locks"])
        .await
        .ok()
        .shows(&["no locks held and no live job claims a resource"]);

    // a graceful stop deregisters the worker
    worker.shutdown().await;
    let v = cli(&url, &["workers", "--json"]).await.ok().json();
    assert_eq!(v[0]["live"], json!([]), "{v:#}");
    cli(&url, &["workers"])
        .await
        .ok()
        .shows(&["no live workers"]);
}

// ---- a dead worker --------------------------------------------------------------

/// A worker dies abruptly with two jobs RUNNING: their leases are forced to
/// expire, `sweep --dry-run` reports the moves and changes nothing, `sweep`
/// makes them STALE (each keeping its lock), `retry --resume` requeues one and
/// a replacement worker completes it after the last completed step, and
/// `resolve` ends the other, whose cleanup hook the replacement runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_workers_jobs_are_swept_stale_then_retried_or_resolved() {
    let srv = RedisServer::start();
    let url = srv.url();
    let q = queue(&srv).await;
    let base = q.keys().base().to_owned();
    let retried = enqueue(&url, json!({"n": 5, "slow": true}), Some("shop:e")).await;
    let resolved = enqueue(&url, json!({"n": 6, "slow": true}), Some("shop:f")).await;

    let cleanups = Cleanups::default();
    let doomed = DoomedWorker::start(
        &url,
        Sync {
            hold: true,
            cleanups: cleanups.clone(),
        },
    )
    .await;
    let dead = doomed.id.clone();
    for id in [&retried, &resolved] {
        until(&format!("job {id} runs `load`"), || async {
            let job = q.job(id).await.unwrap().unwrap();
            job.state == JobState::Running && job.step.as_deref() == Some("load")
        })
        .await;
    }
    let fence_of = |v: &Value| v["job"]["fence"].as_u64().expect("a fence");
    let first_fence = fence_of(
        &cli(&url, &["show", retried.as_str(), "--json"])
            .await
            .ok()
            .json(),
    );

    // the worker dies mid-step: it is still listed until its registration
    // expires unrenewed, then `workers` prunes it (that also proves no
    // heartbeat of it is still in flight: none ran for 3 renew intervals)
    doomed.kill();
    let v = cli_until(
        &url,
        &["workers", "--json"],
        "the dead worker's registration expired",
        |v| v[0]["live"] == json!([]),
    )
    .await;
    assert_eq!(v[0]["pruned"], json!([dead]), "{v:#}");
    cli(&url, &["workers"])
        .await
        .ok()
        .shows(&["no live workers"]);

    // its leases would expire in 30 s: force them now, in the index the sweeper
    // and `show` read (`<base>:leases`, scored by deadline)
    for id in [&retried, &resolved] {
        srv.cmd(&["ZADD", &format!("{base}:leases"), "XX", "0", id.as_str()]);
    }
    let v = cli(&url, &["status", "--json"]).await.ok().json();
    assert_eq!(v[0]["expired_leases"], json!(2), "{v:#}");
    assert_eq!(v[0]["counts"]["running"], json!(2), "{v:#}");
    cli(&url, &["status"])
        .await
        .ok()
        .shows(&["expired leases not swept yet: 2", "workers: none live"]);
    cli(&url, &["show", retried.as_str()]).await.ok().shows(&[
        &format!("held by {dead} (fence {first_fence})"),
        "EXPIRED",
        "the worker is probably gone",
    ]);

    // sweep --dry-run reports the moves and changes nothing
    let before = srv.dump("*");
    cli(&url, &["sweep", "--dry-run"]).await.ok().shows(&[
        &format!("{QUEUE} (dry run: nothing changed): 0 requeued, 0 cancelled, 2 STALE"),
        &format!("{retried}  RUNNING -> STALE"),
        &format!("{resolved}  RUNNING -> STALE"),
    ]);
    let v = cli(&url, &["sweep", "--dry-run", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(
        (&v[0]["dry_run"], &v[0]["stale"], &v[0]["requeued"]),
        (&json!(true), &json!(2), &json!(0)),
        "{v:#}"
    );
    assert_eq!(before, srv.dump("*"), "a dry run changed Redis");
    assert_eq!(state_of(&q, &retried).await, JobState::Running);

    // sweep: RUNNING + expired lease -> STALE, the locks kept for the operator
    cli(&url, &["sweep"]).await.ok().shows(&[
        &format!("{QUEUE}: 0 requeued, 0 cancelled, 2 STALE"),
        &format!("{retried}  RUNNING -> STALE"),
    ]);
    for id in [&retried, &resolved] {
        assert_eq!(state_of(&q, id).await, JobState::Stale);
    }
    let status = cli(&url, &["status"]).await.ok().shows(&[
        "STALE jobs needing a decision: 2",
        "decide: leasehold retry JOB",
    ]);
    let r = row(&status.stdout, retried.as_str());
    // JOB PIPELINE STEP-CUT-OFF LAST-DONE WORKER STALE-FOR LOCK
    assert_eq!(
        (r[1], r[2], r[3], r[4]),
        (PIPELINE, "load", "fetch", dead.as_str()),
        "{}",
        status.stdout
    );
    assert!(
        status.stdout.contains("holds shop:e") && status.stdout.contains("holds shop:f"),
        "{}",
        status.stdout
    );
    let locks = cli(&url, &["locks"]).await.ok();
    let l = row(&locks.stdout, QUEUE);
    assert_eq!(
        &l[1..4],
        &["shop:e", retried.as_str(), "STALE"],
        "{}",
        locks.stdout
    );
    assert!(
        locks.stdout.contains("persisted (STALE holder)"),
        "{}",
        locks.stdout
    );
    cli(&url, &["show", retried.as_str()]).await.ok().shows(&[
        "state      STALE (attempt 1",
        "verdict    needs a decision: the worker died while running step load",
        "step       load (last completed: fetch)",
        &format!("none: expired while RUNNING on {dead} (fence {first_fence}), STALE since"),
        "shop:e held by this job, persisted (STALE holder)",
        "went STALE: lease expired while running step load",
    ]);

    // a STALE job cannot be cancelled: the operator decides with retry or resolve
    let run = cli(&url, &["cancel", resolved.as_str(), "--reason", "stop"])
        .await
        .code(4);
    assert!(run.stderr.contains("it is STALE"), "{run:#?}");

    cli(
        &url,
        &[
            "retry",
            retried.as_str(),
            "--resume",
            "--reason",
            "load is idempotent per window",
        ],
    )
    .await
    .ok()
    .shows(&[&format!(
        "job {retried} queued again as attempt 2, resuming after the last completed step"
    )]);
    cli(
        &url,
        &[
            "resolve",
            resolved.as_str(),
            "--as",
            "failed",
            "--reason",
            "rows checked by hand",
        ],
    )
    .await
    .ok()
    .shows(&[&format!("job {resolved} resolved as FAILED")]);
    // resolve is for STALE jobs only; the retried one is QUEUED now
    let run = cli(
        &url,
        &[
            "resolve",
            retried.as_str(),
            "--as",
            "succeeded",
            "--reason",
            "x",
        ],
    )
    .await
    .code(4);
    assert!(run.stderr.contains("it is QUEUED"), "{run:#?}");
    // both decisions released the locks
    cli(&url, &["locks"])
        .await
        .ok()
        .shows(&["no locks held and no live job claims a resource"]);
    assert_eq!(state_of(&q, &retried).await, JobState::Queued);
    assert_eq!(state_of(&q, &resolved).await, JobState::Failed);

    // a replacement worker completes the retried job and runs the cleanup hook
    let replacement = LiveWorker::start(
        &url,
        Sync {
            hold: false,
            cleanups: cleanups.clone(),
        },
    )
    .await;
    let wid = replacement.id.clone();
    until_state(&q, &retried, JobState::Succeeded).await;
    until("the cleanup hook of the resolved job ran", || async {
        cleanups.lock().unwrap().iter().any(|(id, reason, last)| {
            id == &resolved
                && matches!(reason, CleanupReason::ResolvedAfterStale { reason } if reason.contains("rows checked by hand"))
                && *last == Some("fetch")
        })
    })
    .await;

    // the retried job's story: attempt 1 STALE with the decision, attempt 2 resumed at `load`
    cli(&url, &["show", retried.as_str()]).await.ok().shows(&[
        "state      SUCCEEDED (attempt 2",
        &format!("#1 STALE  worker {dead}  fence {first_fence}"),
        "operator retry by tester: load is idempotent per window",
        &format!("#2 SUCCEEDED  worker {wid}"),
        "decision on the STALE attempt: operator retry by tester: load is idempotent per window",
    ]);
    let v = cli(&url, &["show", retried.as_str(), "--json"])
        .await
        .ok()
        .json();
    let attempts = v["job"]["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 2, "{v:#}");
    let steps = |a: &Value| -> Vec<String> {
        a["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| s(&x["step"]).to_owned())
            .collect()
    };
    assert_eq!(steps(&attempts[0]), ["fetch"]);
    assert_eq!(
        steps(&attempts[1]),
        ["load", "aggregate"],
        "resumed after fetch"
    );
    assert_eq!(attempts[0]["resolution"]["action"], json!("retry"));
    assert_eq!(attempts[1]["worker"], json!(wid));
    assert!(
        attempts[1]["fence"].as_u64().unwrap() > first_fence,
        "the new lease has a higher fence: {v:#}"
    );
    // `load` of attempt 2 saw the new fence; `fetch`'s output was reused
    assert_eq!(v["job"]["outputs"]["load"]["loaded"], json!(50));
    assert_eq!(
        v["job"]["outputs"]["load"]["fence"], attempts[1]["fence"],
        "{v:#}"
    );
    let v = cli(&url, &["events", "--job", retried.as_str(), "--json"])
        .await
        .ok()
        .json();
    assert_eq!(
        moves(&v),
        [
            mv("enqueue", "->QUEUED", ""),
            mv("start", "QUEUED->RUNNING", &dead),
            mv("sweep", "RUNNING->STALE", &dead),
            mv("retry", "STALE->QUEUED", "tester"),
            mv("lease", "QUEUED->LEASED", &wid),
            mv("start", "LEASED->RUNNING", &wid),
            mv("finish", "RUNNING->SUCCEEDED", &wid),
        ],
        "{v:#}"
    );
    assert_eq!(
        v[2]["reason"],
        json!(format!("lease expired (worker {dead})"))
    );
    assert_eq!(
        v[3]["reason"],
        json!("resume: load is idempotent per window")
    );

    // the resolved job: FAILED by the operator's decision, reason recorded
    cli(&url, &["show", resolved.as_str()]).await.ok().shows(&[
        "state      FAILED (attempt 1",
        "operator resolve by tester: rows checked by hand",
        "shop:f free",
    ]);
    let v = cli(&url, &["events", "--job", resolved.as_str(), "--json"])
        .await
        .ok()
        .json();
    let tail: Vec<_> = moves(&v).into_iter().skip(2).collect();
    assert_eq!(
        tail,
        [
            mv("sweep", "RUNNING->STALE", &dead),
            mv("resolve", "STALE->FAILED", "tester"),
        ],
        "{v:#}"
    );

    replacement.shutdown().await;
}
