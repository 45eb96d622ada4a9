//! How long a cancel takes to reach a running step, from the cancel's reply
//! to the step seeing it, for 200 cancels across 3 worker replicas against a
//! private redis-server: p50, p99 and max, for Rust steps (the step's token
//! fires) and for process steps (the script's SIGTERM handler runs).
//!
//! `cargo bench --bench cancel_latency [-- --quick]` (`--quick`: 50 cancels
//! of each kind). The replicas share this process and use the default 30 s
//! lease (renewed every 10 s), so the renewal could deliver a cancel only
//! seconds later: what is measured is the push (`cancel` publishes on the
//! queue's cancel channel, the holder's listener stops the step). A step may
//! see its cancel before the client reads the reply (the message leaves Redis
//! with the script's run); such a delay counts as 0. Times are wall-clock
//! milliseconds on the one machine (the scripts write theirs with
//! `time.time()`). See BENCHMARKS.md.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leasehold_core::process::{DeclaredPipeline, ProcessStep};
use leasehold_core::{
    BoxFuture, Client, EnqueueOptions, JobId, Pipeline, PipelineOptions, Queue, QueueConfig,
    StepContext, StepError, StepSpec, Worker,
};
use leasehold_testkit::{wait_until_async, RedisServer};
use serde::{Deserialize, Serialize};

/// Deadline of every wait.
const WAIT: Duration = Duration::from_secs(60);
/// Jobs running at once on each replica.
const CONCURRENCY: usize = 10;
/// Replicas.
const REPLICAS: usize = 3;

leasehold_testkit::step_enum!(Step, "hold"; Wait = "wait");

/// Job id → wall-clock ms its step saw the cancel (`None` while running).
static SEEN: Mutex<Vec<(String, Option<f64>)>> = Mutex::new(Vec::new());

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Input {
    n: u32,
}

/// One step that waits for its cancel.
struct Hold;

impl Pipeline for Hold {
    type Input = Input;
    type Step = Step;
    const NAME: &'static str = "hold";
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
            if let Ok(mut seen) = SEEN.lock() {
                seen.push((job.clone(), None));
            }
            ctx.cancelled().await;
            let at = now_ms();
            if let Ok(mut seen) = SEEN.lock() {
                for s in seen.iter_mut().filter(|s| s.0 == job) {
                    s.1 = Some(at);
                }
            }
            ctx.check_cancelled()?;
            Ok(String::new())
        })
    }
}

/// Wall-clock milliseconds since the epoch.
fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

/// A running worker, stopped through its sender.
type Running = (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
);

fn start(worker: Worker) -> Running {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        let _ = worker
            .run_until(async {
                let _ = rx.await;
            })
            .await;
    });
    (tx, handle)
}

async fn stop_all(workers: Vec<Running>) {
    for (tx, handle) in workers {
        let _ = tx.send(());
        let _ = tokio::time::timeout(WAIT, handle).await;
    }
}

/// p50, p99 and max of `ms` (sorted here).
fn summary(ms: &mut [f64]) -> String {
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() as f64 * q).ceil() as usize).clamp(1, ms.len()) - 1];
    format!(
        "n={} p50={:.1} ms p99={:.1} ms max={:.1} ms",
        ms.len(),
        at(0.50),
        at(0.99),
        ms[ms.len() - 1]
    )
}

/// Cancels `total` Rust steps, a round of `REPLICAS × CONCURRENCY` at a time.
async fn rust_steps(url: &str, total: usize) -> Vec<f64> {
    let mut workers = Vec::new();
    for _ in 0..REPLICAS {
        let worker = Worker::builder(url)
            .pipeline(Hold)
            .concurrency(CONCURRENCY)
            .build()
            .await
            .expect("a worker");
        workers.push(start(worker));
    }
    let client = Client::connect(url, QueueConfig::default())
        .await
        .expect("a client");
    let queue = Queue::connect(url, "hold", QueueConfig::default())
        .await
        .expect("a queue");
    let mut delays = Vec::new();
    while delays.len() < total {
        let round = (total - delays.len()).min(REPLICAS * CONCURRENCY);
        SEEN.lock().expect("seen").clear();
        let mut ids = Vec::new();
        for n in 0..round {
            let id = client
                .enqueue::<Hold>(&Input { n: n as u32 })
                .await
                .expect("enqueue")
                .id;
            ids.push(id);
        }
        wait_until_async(WAIT, "every step runs", || async {
            SEEN.lock().expect("seen").len() == round
        })
        .await;
        let mut replied = HashMap::new();
        for id in &ids {
            queue.cancel(id, "bench", "bench").await.expect("cancel");
            replied.insert(id.as_str().to_owned(), now_ms());
        }
        wait_until_async(WAIT, "every step saw its cancel", || async {
            SEEN.lock().expect("seen").iter().all(|s| s.1.is_some())
        })
        .await;
        for (job, at) in SEEN.lock().expect("seen").iter() {
            let at = at.unwrap_or(0.0);
            delays.push((at - replied[job]).max(0.0));
        }
        ended(&queue, &ids).await;
    }
    stop_all(workers).await;
    delays
}

/// Waits until every job of `ids` is terminal.
async fn ended(queue: &Queue, ids: &[JobId]) {
    for id in ids {
        wait_until_async(WAIT, "the job ended", || {
            let queue = queue.clone();
            let id = id.clone();
            async move { matches!(queue.job(&id).await, Ok(Some(job)) if job.state.is_terminal()) }
        })
        .await;
    }
}

/// Cancels `total` process steps (python scripts that write the time of
/// their SIGTERM), a round of `REPLICAS × CONCURRENCY` at a time.
async fn process_steps(url: &str, total: usize, dir: &Path) -> Vec<f64> {
    let body = format!(
        r#"
import json, os, signal, sys, time
n = json.load(open(os.environ["LEASEHOLD_INPUT"]))["n"]
base = os.path.join({dir:?}, str(n))
def on_term(signum, frame):
    with open(base + ".term", "w") as f:
        f.write("%.3f\n" % (time.time() * 1000))
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
with open(base + ".ready", "w") as f:
    f.write("%d\n" % os.getpid())
while True:
    time.sleep(0.01)
"#,
        dir = dir.to_str().expect("a UTF-8 temporary directory")
    );
    let script = dir.join("hold.py");
    std::fs::write(&script, body).expect("the script");
    let mut workers = Vec::new();
    for _ in 0..REPLICAS {
        let pipeline = DeclaredPipeline::new("holdproc").step(
            "work",
            ProcessStep::new("python3")
                .arg(&script)
                .grace(Duration::from_secs(5)),
        );
        let worker = Worker::builder(url)
            .declared(pipeline)
            .expect("a declared pipeline")
            .concurrency(CONCURRENCY)
            .build()
            .await
            .expect("a worker");
        workers.push(start(worker));
    }
    let client = Client::connect(url, QueueConfig::default())
        .await
        .expect("a client");
    let queue = Queue::connect(url, "holdproc", QueueConfig::default())
        .await
        .expect("a queue");
    let mut delays = Vec::new();
    let mut next = 0usize;
    while delays.len() < total {
        let round = (total - delays.len()).min(REPLICAS * CONCURRENCY);
        let mut jobs = Vec::new();
        for n in next..next + round {
            let id = client
                .enqueue_json(
                    "holdproc",
                    &format!("{{\"n\":{n}}}"),
                    &EnqueueOptions::default(),
                )
                .await
                .expect("enqueue")
                .id;
            jobs.push((n, id));
        }
        next += round;
        for (n, _) in &jobs {
            let ready = dir.join(format!("{n}.ready"));
            wait_until_async(WAIT, "the script runs", || {
                let there = ready.exists();
                async move { there }
            })
            .await;
        }
        let mut replied = Vec::new();
        for (n, id) in &jobs {
            queue.cancel(id, "bench", "bench").await.expect("cancel");
            replied.push((*n, now_ms()));
        }
        for (n, at) in replied {
            let term = dir.join(format!("{n}.term"));
            wait_until_async(WAIT, "the script got SIGTERM", || {
                let done = std::fs::read_to_string(&term).is_ok_and(|t| t.ends_with('\n'));
                async move { done }
            })
            .await;
            let signalled: f64 = std::fs::read_to_string(&term)
                .expect("the term file")
                .trim()
                .parse()
                .expect("a time");
            delays.push((signalled - at).max(0.0));
        }
        let ids: Vec<JobId> = jobs.into_iter().map(|(_, id)| id).collect();
        ended(&queue, &ids).await;
    }
    stop_all(workers).await;
    delays
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let total = if quick { 50 } else { 200 };
    let srv = RedisServer::start();
    let url = srv.url();
    // the scripts' files, in a directory of this run's own, removed at the end
    let dir = std::env::temp_dir().join(format!("leasehold-cancel-latency-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let mut rust = rust_steps(&url, total).await;
    let mut process = process_steps(&url, total, &dir).await;
    let _ = std::fs::remove_dir_all(&dir);
    println!("cancel reply -> step sees it, {REPLICAS} replicas x concurrency {CONCURRENCY}, 30 s lease (renewal every 10 s)");
    println!("rust steps (token fires):      {}", summary(&mut rust));
    println!("process steps (SIGTERM seen):  {}", summary(&mut process));
}
