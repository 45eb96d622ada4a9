//! A cancel reaches the running step as it is recorded, whichever replica
//! holds the job: `cancel` publishes the job's id on the queue's cancel
//! channel and the holder's listener stops the step, without waiting for its
//! next renewal. The leases here are 60 s renewed every 20 s, so a renewal
//! (the fallback) cannot be what delivers the cancel within the bound.
//!
//! Three workers (replicas) share one process and one Redis; each job's step
//! records when it started and when it saw its cancellation token fire. A
//! group cancel reaches its running children the same way, and after a Redis
//! restart the workers subscribe again and cancels still arrive at once.

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use leasehold_core::process::{DeclaredPipeline, ProcessStep};
use leasehold_core::{
    BoxFuture, Cancelled, Client, JobId, JobState, NewGroup, NewJob, Pipeline, PipelineOptions,
    Queue, QueueConfig, StepContext, StepError, StepSpec, Worker,
};
use leasehold_testkit::{wait_until_async, RedisCluster, RedisServer};
use serde::{Deserialize, Serialize};
use support::connect;

/// Deadline of every wait.
const WAIT: Duration = Duration::from_secs(30);
/// The lease TTL of every worker: its renewals come every 20 s.
const TTL: Duration = Duration::from_secs(60);
/// The renewal interval: the first renewal is sent at once, the next 20 s later.
const RENEW: Duration = Duration::from_secs(20);
/// How long a pushed cancel may take to reach a step on a loaded 2-core
/// machine (the renewal would take up to 20 s).
const BOUND: Duration = Duration::from_secs(2);

leasehold_testkit::step_enum!(Step, "holdon"; Wait = "wait");

/// One Rust-step test at a time: they share [`SEEN`].
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What the steps saw: job id → (worker that ran it, when its token fired).
static SEEN: Mutex<Vec<(String, String, Option<Instant>)>> = Mutex::new(Vec::new());

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Input {
    n: u32,
}

/// One step that waits for its cancel.
struct HoldOn;

impl Pipeline for HoldOn {
    type Input = Input;
    type Step = Step;
    const NAME: &'static str = "holdon";
    const STEPS: &'static [StepSpec] = &[StepSpec::new("wait")];
    fn options() -> PipelineOptions {
        PipelineOptions::new()
    }
    fn run_step<'a>(
        &'a self,
        _index: usize,
        ctx: &'a StepContext,
        _input: &'a Input,
        _previous: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, StepError>> {
        Box::pin(async move {
            let job = ctx.job().as_str().to_owned();
            SEEN.lock()
                .unwrap()
                .push((job.clone(), ctx.worker().to_owned(), None));
            ctx.cancelled().await;
            let at = Instant::now();
            for seen in SEEN.lock().unwrap().iter_mut() {
                if seen.0 == job {
                    seen.2 = Some(at);
                }
            }
            ctx.check_cancelled()?;
            Ok(String::new())
        })
    }
}

/// A running worker, stopped through its sender.
type Running = (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
);

/// Starts `worker` until the returned sender fires.
fn start(worker: Worker) -> Running {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        worker
            .run_until(async {
                let _ = rx.await;
            })
            .await
            .unwrap();
    });
    (tx, handle)
}

/// Stops the workers and waits for them to end.
async fn stop_all(workers: Vec<Running>) {
    for (tx, handle) in workers {
        let _ = tx.send(());
        tokio::time::timeout(WAIT, handle).await.unwrap().unwrap();
    }
}

/// A replica serving `HoldOn` on `url` with the long lease.
async fn holdon_replica(url: &str) -> Worker {
    Worker::builder(url)
        .pipeline(HoldOn)
        .concurrency(4)
        .lease_ttl(TTL)
        .renew_interval(RENEW)
        .build()
        .await
        .unwrap()
}

/// Waits until job `id` is in a terminal state; returns it.
async fn ended(queue: &Queue, id: &JobId) -> leasehold_core::Job {
    wait_until_async(WAIT, "the job ended", || {
        let queue = queue.clone();
        let id = id.clone();
        async move { matches!(queue.job(&id).await, Ok(Some(job)) if job.state.is_terminal()) }
    })
    .await;
    queue.job(id).await.unwrap().unwrap()
}

/// Runs `jobs` HoldOn jobs on three replicas of `url`, cancels each once it
/// runs, and checks that every step saw its cancel within [`BOUND`] of the
/// cancel's reply, and that more than one replica ran them.
async fn cancels_reach_rust_steps_on_three_replicas(url: &str, jobs: u32) {
    let _serial = SERIAL.lock().await;
    SEEN.lock().unwrap().clear();
    let mut workers = Vec::new();
    for _ in 0..3 {
        workers.push(start(holdon_replica(url).await));
    }
    let client = Client::connect(url, QueueConfig::default()).await.unwrap();
    let queue = connect(url, "holdon").await;
    let mut ids = Vec::new();
    for n in 0..jobs {
        ids.push(client.enqueue::<HoldOn>(&Input { n }).await.unwrap().id);
    }
    wait_until_async(WAIT, "every step runs", || async {
        SEEN.lock().unwrap().len() == jobs as usize
    })
    .await;
    let mut replied = HashMap::new();
    for id in &ids {
        let cancelled = queue.cancel(id, "stop now", "test").await.unwrap();
        replied.insert(id.as_str().to_owned(), Instant::now());
        assert!(
            matches!(cancelled, Cancelled::Requested { .. }),
            "{cancelled:?}"
        );
    }
    wait_until_async(WAIT, "every step saw its cancel", || async {
        SEEN.lock().unwrap().iter().all(|s| s.2.is_some())
    })
    .await;
    let seen = SEEN.lock().unwrap().clone();
    for (job, _, at) in &seen {
        let took = at
            .unwrap()
            .saturating_duration_since(*replied.get(job).unwrap());
        assert!(
            took < BOUND,
            "job {job}: its step saw the cancel {took:?} after the cancel's reply"
        );
    }
    let replicas: std::collections::BTreeSet<&String> = seen.iter().map(|s| &s.1).collect();
    assert!(
        replicas.len() >= 2,
        "the jobs ran on {} replica(s) only",
        replicas.len()
    );
    for id in &ids {
        let job = ended(&queue, id).await;
        assert_eq!(job.state, JobState::Cancelled, "{job:?}");
    }
    stop_all(workers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_reaches_a_rust_step_on_any_of_three_replicas_before_any_renewal() {
    let srv = RedisServer::start();
    cancels_reach_rust_steps_on_three_replicas(&srv.url(), 9).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_reaches_a_rust_step_on_a_cluster_before_any_renewal() {
    let cluster = RedisCluster::start(3, 0);
    // the script's PUBLISH reaches the other masters too: a subscriber on a
    // master that does not own the queue's slot hears it
    let keys = leasehold_core::QueueKeys::new("leasehold", "holdon").unwrap();
    let owner = cluster.owner_of_key(keys.base());
    let other = cluster
        .masters()
        .into_iter()
        .find(|m| *m != owner)
        .expect("another master");
    let mut conn = cluster.node(other).connection();
    let channel = keys.cancels();
    let (subscribed_tx, subscribed_rx) = std::sync::mpsc::channel();
    let (heard_tx, heard_rx) = std::sync::mpsc::channel();
    let listener = std::thread::spawn(move || {
        conn.set_read_timeout(Some(WAIT)).unwrap();
        let mut pubsub = conn.as_pubsub();
        pubsub.subscribe(&channel).unwrap();
        subscribed_tx.send(()).unwrap();
        let heard: Option<String> = pubsub.get_message().ok().and_then(|m| m.get_payload().ok());
        let _ = heard_tx.send(heard);
    });
    subscribed_rx.recv_timeout(WAIT).unwrap();
    cancels_reach_rust_steps_on_three_replicas(&cluster.url(), 6).await;
    let heard = heard_rx.recv_timeout(WAIT).unwrap();
    assert!(
        heard.is_some_and(|id| !id.is_empty()),
        "master {other} (the queue is on {owner}) heard no cancel"
    );
    listener.join().unwrap();
    assert_eq!(cluster.error_count("CROSSSLOT"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_cancel_reaches_its_running_children_on_three_replicas_before_any_renewal() {
    let _serial = SERIAL.lock().await;
    SEEN.lock().unwrap().clear();
    let srv = RedisServer::start();
    let url = srv.url();
    let mut workers = Vec::new();
    for _ in 0..3 {
        workers.push(start(holdon_replica(&url).await));
    }
    let queue = connect(&url, "holdon").await;
    queue
        .create_group(&NewGroup::new("batch"), "test")
        .await
        .unwrap();
    let mut ids = Vec::new();
    for n in 0..6 {
        let job = NewJob::new("holdon", &Input { n }).unwrap().group("batch");
        ids.push(queue.enqueue(job).await.unwrap().id);
    }
    wait_until_async(WAIT, "every child runs", || async {
        SEEN.lock().unwrap().len() == ids.len()
    })
    .await;
    let report = queue
        .cancel_group("batch", "wrong day", "test")
        .await
        .unwrap();
    let replied = Instant::now();
    assert_eq!(report.requested, ids.len(), "{report:?}");
    wait_until_async(WAIT, "every child saw its cancel", || async {
        SEEN.lock().unwrap().iter().all(|s| s.2.is_some())
    })
    .await;
    for (job, _, at) in SEEN.lock().unwrap().iter() {
        let took = at.unwrap().saturating_duration_since(replied);
        assert!(
            took < BOUND,
            "child {job}: its step saw the group cancel {took:?} after the reply"
        );
    }
    for id in &ids {
        let job = ended(&queue, id).await;
        assert_eq!(job.state, JobState::Cancelled, "{job:?}");
    }
    stop_all(workers).await;
}

/// How many clients subscribe to `channel` on `srv`.
fn subscribers(srv: &RedisServer, channel: &str) -> i64 {
    let mut conn = srv.connection();
    let (_, n): (String, i64) = leasehold_core::redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query(&mut conn)
        .unwrap();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_redis_restart_the_worker_subscribes_again_and_cancels_still_arrive_at_once() {
    let _serial = SERIAL.lock().await;
    SEEN.lock().unwrap().clear();
    // the jobs survive the restart (append-only file, written at every command)
    let mut srv = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let url = srv.url();
    let worker = start(holdon_replica(&url).await);
    let queue = connect(&url, "holdon").await;
    let channel = queue.keys().cancels();
    let client = Client::connect(&url, QueueConfig::default()).await.unwrap();
    let id = client.enqueue::<HoldOn>(&Input { n: 0 }).await.unwrap().id;
    wait_until_async(WAIT, "the step runs", || async {
        SEEN.lock().unwrap().len() == 1
    })
    .await;
    srv.restart();
    wait_until_async(WAIT, "the worker subscribed again", || {
        let n = subscribers(&srv, &channel);
        async move { n == 1 }
    })
    .await;
    queue
        .cancel(&id, "after the restart", "test")
        .await
        .unwrap();
    let replied = Instant::now();
    wait_until_async(WAIT, "the step saw its cancel", || async {
        SEEN.lock().unwrap().iter().all(|s| s.2.is_some())
    })
    .await;
    let took = SEEN.lock().unwrap()[0]
        .2
        .unwrap()
        .saturating_duration_since(replied);
    assert!(
        took < BOUND,
        "the step saw the cancel {took:?} after the reply"
    );
    let job = ended(&queue, &id).await;
    assert_eq!(job.state, JobState::Cancelled, "{job:?}");
    stop_all(vec![worker]).await;
}

/// Wall-clock milliseconds since the epoch.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The text of `path` once it ends with a newline.
async fn file(path: &Path) -> String {
    wait_until_async(WAIT, &format!("{} exists", path.display()), || {
        let done = std::fs::read_to_string(path).is_ok_and(|t| t.ends_with('\n'));
        async move { done }
    })
    .await;
    std::fs::read_to_string(path).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_reaches_a_process_step_as_sigterm_before_any_renewal() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    // each job's script writes its pid to <dir>/<n>.ready and, on SIGTERM,
    // the wall-clock time to <dir>/<n>.term
    let body = format!(
        r#"
import json, os, signal, sys, time
n = json.load(open(os.environ["LEASEHOLD_INPUT"]))["n"]
base = os.path.join({dir:?}, str(n))
def on_term(signum, frame):
    with open(base + ".term", "w") as f:
        f.write("%d\n" % int(time.time() * 1000))
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
with open(base + ".ready", "w") as f:
    f.write("%d\n" % os.getpid())
while True:
    time.sleep(0.01)
"#,
        dir = dir.path().to_str().unwrap()
    );
    let path = dir.path().join("hold.py");
    std::fs::write(&path, body).unwrap();
    let mut workers = Vec::new();
    for _ in 0..3 {
        let pipeline = DeclaredPipeline::new("holdproc").step(
            "work",
            ProcessStep::new("python3")
                .arg(&path)
                .grace(Duration::from_secs(5)),
        );
        let worker = Worker::builder(srv.url())
            .declared(pipeline)
            .unwrap()
            .concurrency(2)
            .lease_ttl(TTL)
            .renew_interval(RENEW)
            .build()
            .await
            .unwrap();
        workers.push(start(worker));
    }
    let client = Client::connect(&srv.url(), QueueConfig::default())
        .await
        .unwrap();
    let queue = connect(&srv.url(), "holdproc").await;
    let mut ids = Vec::new();
    for n in 0..3 {
        let id = client
            .enqueue_json(
                "holdproc",
                &format!("{{\"n\":{n}}}"),
                &leasehold_core::EnqueueOptions::default(),
            )
            .await
            .unwrap()
            .id;
        ids.push(id);
    }
    for n in 0..3 {
        file(&dir.path().join(format!("{n}.ready"))).await;
    }
    for (n, id) in ids.iter().enumerate() {
        queue.cancel(id, "stop the script", "test").await.unwrap();
        let replied = now_ms();
        let term: i64 = file(&dir.path().join(format!("{n}.term")))
            .await
            .trim()
            .parse()
            .unwrap();
        assert!(
            term - replied < BOUND.as_millis() as i64,
            "job {n}: the script got SIGTERM {} ms after the cancel's reply",
            term - replied
        );
        let job = ended(&queue, id).await;
        assert_eq!(job.state, JobState::Cancelled, "{job:?}");
    }
    stop_all(workers).await;
}
