//! leasehold speaking the peer benchmark's protocol (`shared/peers/README.md`),
//! so it can be measured in the same run as BullMQ, Sidekiq, apalis, RQ, arq
//! and Celery, with the same driver:
//!
//! ```text
//! bench_peer enqueue --n N --mode single|bulk --workload w1|w2   # prints {"n":N,"seconds":S,...}
//! bench_peer worker  --concurrency C --workload w1|w2            # runs until SIGTERM/SIGINT
//! ```
//!
//! Redis: `REDIS_URL`, else `REDIS_PORT` (→ `redis://127.0.0.1:PORT`), else
//! `redis://127.0.0.1:6390` (the harness's port).
//!
//! Workloads, matching the peers' (`node/bench.js`, `apalis-bench/src/main.rs`):
//! * `w1`: a 1-step pipeline whose step does nothing. The job input is `{"i":<n>}`
//!   (BullMQ's `{ i }`, apalis's `u64`).
//! * `w2`: a 4-step pipeline; each step returns its progress (25, 50, 75, 100),
//!   which the runtime persists in Redis with a checkpoint after every step (the
//!   peers call `updateProgress`/`HSET` after each of their 4 "steps").
//!
//! Not in the peers' protocol (none of the peers has per-resource locks in its
//! open-source edition), a workload like this project's users':
//! * `w3`: a 4-step pipeline whose steps each return a 1 KB output (a JSON
//!   string of 1,024 bytes, checkpointed after every step, the next step's
//!   input), every job holding the lock of one resource drawn from 100
//!   (`r0`..`r99`, job `n` takes `r{n % 100}`);
//! * `w3n`: the same without the resource lock (what the lock costs).
//!
//! Every job goes to queue `bench`; completion is counted by the queue's
//! terminal-jobs index: `PEER_EXT_DONE="ZCARD leasehold:{bench}:done"`. The
//! default retention (100,000 terminal jobs, 7 days) keeps every job of a
//! 20,000-job run, so nothing is purged during a run. The harness's
//! `PEER_EXT_FAILED` takes a two-word command (`CMD key`) and leasehold keeps no
//! per-state index, so leave it unset; `bench_peer failed-check` prints an
//! `EVAL` for `redis-cli` that counts the terminal jobs that did not succeed
//! (`benches/workloads.rs` runs it after every run).
//!
//! Not part of the peers' protocol, used by `benches/workloads.rs`:
//! * workload `lat`: a 1-step pipeline whose step returns the microseconds
//!   between the enqueue call (the input's `t_us`, wall clock) and the step's
//!   start, persisted as the step's output (`out:probe` in the job hash);
//! * workload `one`: W1 with every job on the one resource `one` (the
//!   hand-off benchmark: a backlog behind one lock);
//! * workload `lim`: W1 under `max_running = 100000` (a gate that never binds:
//!   the cost per job of a declared limit);
//! * workload `hold`: a 1-step pipeline whose step sleeps `BENCH_HOLD_MS`
//!   (default 600000), so its jobs hold their leases (recovery test);
//! * `BENCH_PREFETCH`: jobs leased ahead of free slots (`WorkerBuilder::prefetch`,
//!   default 0: a job is leased when a run slot frees and starts in that call);
//! * `BENCH_LEASE_TTL_MS`, `BENCH_SWEEP_MS`: the worker's lease TTL and sweep
//!   interval (defaults: the runtime's, 30 s and 5 s);
//! * `BENCH_QUEUE_POOL`: the connection pool size (default: the runtime's);
//! * `BENCH_TOKIO=current_thread`: a single-threaded tokio runtime (default: multi-thread).
//!
//! Logging: warnings and errors only (`RUST_LOG` overrides), as for the peers.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};
use leasehold::queue::{Client, QueueConfig};
use leasehold::worker::Worker;
use leasehold::{schemars, JsonSchema};
use serde::{Deserialize, Serialize};

/// The job input of `w1`, `w2` and `hold`: the peers' `{ i }`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Item {
    i: u64,
}

/// The job input of `lat`: the wall-clock time of the enqueue call.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Stamped {
    i: u64,
    t_us: u64,
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// W1: one no-op step.
struct W1;

#[pipeline(name = "w1", queue = "bench", max_attempts = 1)]
impl W1 {
    #[step]
    async fn noop(&self, _ctx: &StepContext, _input: &Item) -> Result<(), StepError> {
        Ok(())
    }
}

/// `one`: W1 with every job on one resource (`one`): a backlog queued behind
/// one lock, run one job at a time (the hand-off benchmark).
struct One;

#[pipeline(name = "one", queue = "bench", max_attempts = 1, resource = "one")]
impl One {
    #[step]
    async fn noop(&self, _ctx: &StepContext, _input: &Item) -> Result<(), StepError> {
        Ok(())
    }
}

/// `lim`: W1 under a declared limit that never binds (`max_running` far above
/// the worker's concurrency): the cost per job of a flow gate.
struct Lim;

#[pipeline(name = "lim", queue = "bench", max_attempts = 1, max_running = 100000)]
impl Lim {
    #[step]
    async fn noop(&self, _ctx: &StepContext, _input: &Item) -> Result<(), StepError> {
        Ok(())
    }
}

/// W2: four steps, progress persisted after each (by the runtime's checkpoint).
struct W2;

#[pipeline(name = "w2", queue = "bench", max_attempts = 1)]
impl W2 {
    #[step]
    async fn step1(&self, _ctx: &StepContext, _input: &Item) -> Result<u32, StepError> {
        Ok(25)
    }
    #[step]
    async fn step2(&self, _ctx: &StepContext, progress: u32) -> Result<u32, StepError> {
        Ok(progress + 25)
    }
    #[step]
    async fn step3(&self, _ctx: &StepContext, progress: u32) -> Result<u32, StepError> {
        Ok(progress + 25)
    }
    #[step]
    async fn step4(&self, _ctx: &StepContext, progress: u32) -> Result<u32, StepError> {
        Ok(progress + 25)
    }
}

/// The job input of `w3` and `w3n`: the resource (`r{r}`) is `i % 100`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Res {
    i: u64,
    r: u64,
}

/// Resources `w3` draws its jobs' locks from.
const W3_RESOURCES: u64 = 100;

/// A step output of `w3`: 1,024 bytes of JSON (a string of 1,022 characters).
fn kb_output(step: u8) -> String {
    let mut s = String::with_capacity(1022);
    while s.len() < 1022 {
        s.push(char::from(b'a' + (s.len() as u8 + step) % 26));
    }
    s
}

/// W3: four steps with 1 KB outputs, each job holding the lock of its resource.
struct W3;

#[pipeline(name = "w3", queue = "bench", max_attempts = 1, resource = "r{r}")]
impl W3 {
    #[step]
    async fn s1(&self, _ctx: &StepContext, _input: &Res) -> Result<String, StepError> {
        Ok(kb_output(1))
    }
    #[step]
    async fn s2(&self, _ctx: &StepContext, _prev: String) -> Result<String, StepError> {
        Ok(kb_output(2))
    }
    #[step]
    async fn s3(&self, _ctx: &StepContext, _prev: String) -> Result<String, StepError> {
        Ok(kb_output(3))
    }
    #[step]
    async fn s4(&self, _ctx: &StepContext, _prev: String) -> Result<String, StepError> {
        Ok(kb_output(4))
    }
}

/// W3 without the resource lock.
struct W3n;

#[pipeline(name = "w3n", queue = "bench", max_attempts = 1)]
impl W3n {
    #[step]
    async fn s1(&self, _ctx: &StepContext, _input: &Res) -> Result<String, StepError> {
        Ok(kb_output(1))
    }
    #[step]
    async fn s2(&self, _ctx: &StepContext, _prev: String) -> Result<String, StepError> {
        Ok(kb_output(2))
    }
    #[step]
    async fn s3(&self, _ctx: &StepContext, _prev: String) -> Result<String, StepError> {
        Ok(kb_output(3))
    }
    #[step]
    async fn s4(&self, _ctx: &StepContext, _prev: String) -> Result<String, StepError> {
        Ok(kb_output(4))
    }
}

/// Pickup-latency probe: one step returning µs since the enqueue call.
struct Lat;

#[pipeline(name = "lat", queue = "bench", max_attempts = 1)]
impl Lat {
    #[step]
    async fn probe(&self, _ctx: &StepContext, input: &Stamped) -> Result<u64, StepError> {
        Ok(now_us().saturating_sub(input.t_us))
    }
}

/// Recovery probe: one step that sleeps, holding its lease.
struct Hold;

#[pipeline(name = "hold", queue = "bench", max_attempts = 1)]
impl Hold {
    #[step]
    async fn sleep(&self, ctx: &StepContext, _input: &Item) -> Result<(), StepError> {
        let ms = env_u64("BENCH_HOLD_MS").unwrap_or(600_000);
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
            _ = ctx.cancelled() => {}
        }
        Ok(())
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

fn redis_url() -> String {
    if let Ok(url) = std::env::var("REDIS_URL") {
        return url;
    }
    let port = std::env::var("REDIS_PORT").unwrap_or_else(|_| "6390".to_owned());
    format!("redis://127.0.0.1:{port}")
}

fn config() -> QueueConfig {
    let mut config = QueueConfig::default();
    if let Some(n) = env_u64("BENCH_QUEUE_POOL") {
        config.pool_size = n as usize;
    }
    config
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn enqueue(args: &[String]) -> Result<(), BoxError> {
    let n: u64 = arg(args, "--n", "20000").parse()?;
    let mode = arg(args, "--mode", "single");
    let workload = arg(args, "--workload", "w1");
    let client = Client::connect(&redis_url(), config()).await?;
    // connect first (and load the enqueue script), time only the enqueue loop
    client.queue("bench")?.load_scripts().await?;
    let t0 = Instant::now();
    match (workload.as_str(), mode.as_str()) {
        ("w1", "bulk") => bulk::<W1>(&client, n).await?,
        ("w2", "bulk") => bulk::<W2>(&client, n).await?,
        ("hold", "bulk") => bulk::<Hold>(&client, n).await?,
        ("one", "bulk") => bulk::<One>(&client, n).await?,
        ("lim", "bulk") => bulk::<Lim>(&client, n).await?,
        ("w3", _) => bulk_res::<W3>(&client, n).await?,
        ("w3n", _) => bulk_res::<W3n>(&client, n).await?,
        ("w1", _) => single::<W1>(&client, n).await?,
        ("w2", _) => single::<W2>(&client, n).await?,
        ("hold", _) => single::<Hold>(&client, n).await?,
        ("lat", _) => {
            for i in 0..n {
                client
                    .enqueue::<Lat>(&Stamped { i, t_us: now_us() })
                    .await?;
            }
        }
        (other, _) => return Err(format!("unknown workload {other}").into()),
    }
    let secs = t0.elapsed().as_secs_f64();
    println!("{{\"n\":{n},\"seconds\":{secs},\"mode\":\"{mode}\",\"workload\":\"{workload}\"}}");
    Ok(())
}

async fn single<P: leasehold::pipeline::Pipeline<Input = Item>>(
    client: &Client,
    n: u64,
) -> Result<(), BoxError> {
    for i in 0..n {
        client.enqueue::<P>(&Item { i }).await?;
    }
    Ok(())
}

async fn bulk<P: leasehold::pipeline::Pipeline<Input = Item>>(
    client: &Client,
    n: u64,
) -> Result<(), BoxError> {
    let chunk = 1000u64;
    let mut i = 0;
    while i < n {
        let end = (i + chunk).min(n);
        let items: Vec<Item> = (i..end).map(|i| Item { i }).collect();
        client.enqueue_many::<P>(&items).await?;
        i = end;
    }
    Ok(())
}

/// Bulk enqueue of `w3`/`w3n` jobs (chunks of 1,000), job `i` on resource `r{i % 100}`.
async fn bulk_res<P: leasehold::pipeline::Pipeline<Input = Res>>(
    client: &Client,
    n: u64,
) -> Result<(), BoxError> {
    let chunk = 1000u64;
    let mut i = 0;
    while i < n {
        let end = (i + chunk).min(n);
        let items: Vec<Res> = (i..end)
            .map(|i| Res {
                i,
                r: i % W3_RESOURCES,
            })
            .collect();
        client.enqueue_many::<P>(&items).await?;
        i = end;
    }
    Ok(())
}

async fn worker(args: &[String]) -> Result<(), BoxError> {
    let concurrency: usize = arg(args, "--concurrency", "10").parse()?;
    let workload = arg(args, "--workload", "w1");
    let mut builder = Worker::builder(redis_url())
        .config(config())
        .concurrency(concurrency);
    if let Some(n) = env_u64("BENCH_PREFETCH") {
        builder = builder.prefetch(n as usize);
    }
    if let Some(ms) = env_u64("BENCH_LEASE_TTL_MS") {
        builder = builder.lease_ttl(Duration::from_millis(ms));
    }
    if let Some(ms) = env_u64("BENCH_SWEEP_MS") {
        builder = builder.sweep_interval(Duration::from_millis(ms));
    }
    builder = match workload.as_str() {
        "w1" => builder.pipeline(W1),
        "w2" => builder.pipeline(W2),
        "lat" => builder.pipeline(Lat),
        "hold" => builder.pipeline(Hold),
        "one" => builder.pipeline(One),
        "lim" => builder.pipeline(Lim),
        "w3" => builder.pipeline(W3),
        "w3n" => builder.pipeline(W3n),
        other => return Err(format!("unknown workload {other}").into()),
    };
    let worker = builder.build().await?;
    eprintln!(
        "worker {} serving {workload}, concurrency {concurrency}",
        worker.id()
    );
    worker.run_until_signal().await?;
    Ok(())
}

/// A Lua one-liner for `PEER_EXT_FAILED`: terminal jobs of queue `bench` that did not succeed.
const FAILED_CHECK: &str = "local n=0 for _,id in ipairs(redis.call('ZRANGE',KEYS[1],0,-1)) do \
if redis.call('HGET','leasehold:{bench}:job:'..id,'state')~='SUCCEEDED' then n=n+1 end end return n";

fn main() {
    // BENCH_TOKIO=current_thread runs everything on one thread (default: the
    // multi-thread runtime, one worker thread per core, as `#[tokio::main]`).
    let runtime = match std::env::var("BENCH_TOKIO").as_deref() {
        Ok("current_thread") => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        _ => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    };
    runtime.expect("tokio runtime").block_on(run());
}

async fn run() {
    let args: Vec<String> = std::env::args().collect();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let result = match args.get(1).map(String::as_str) {
        Some("enqueue") => enqueue(&args).await,
        Some("worker") => worker(&args).await,
        Some("failed-check") => {
            // shell-quoted for PEER_EXT_FAILED
            println!("EVAL \"{FAILED_CHECK}\" 1 leasehold:{{bench}}:done");
            Ok(())
        }
        _ => Err(
            "usage: bench_peer enqueue --n N --mode single|bulk --workload w1|w2 \
                  | worker --concurrency C --workload w1|w2 | failed-check"
                .into(),
        ),
    };
    if let Err(e) = result {
        eprintln!("bench_peer: {e}");
        std::process::exit(1);
    }
}
