//! Retention keeps pace with a sustained run: a worker at concurrency 50 ends
//! jobs in batches, and each `settle` call deletes at least as many terminal
//! jobs beyond the policy as it ended (up to its cap, docs/redis-keys.md
//! "Retention"), so the kept count never exceeds `keep_count` while the run
//! lasts. Also reports the Redis commands per job of a run with nothing to purge.

mod support;

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};
use leasehold::queue::{NewJob, Queue, QueueConfig, Retention};
use leasehold::worker::Worker;
use leasehold::{schemars, JsonSchema};
use leasehold_testkit::RedisServer;
use serde::{Deserialize, Serialize};
use support::get;

const QUEUE: &str = "pace";
/// Terminal jobs kept at most beyond `keep_count` after any call, as documented
/// (zero while no single call ends more than settle's per-call cap of 256 jobs;
/// a worker's call ends at most its concurrency's worth).
const SLACK: i64 = 0;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Item {
    i: u64,
}

/// A one-step pipeline that does nothing.
#[derive(Clone)]
struct Noop;

#[pipeline(name = "noop", queue = "pace", max_attempts = 1)]
impl Noop {
    #[step]
    async fn run(&self, _ctx: &StepContext, _input: &Item) -> Result<(), StepError> {
        Ok(())
    }
}

fn config(keep_count: u64) -> QueueConfig {
    QueueConfig::default().retention(Retention::new(
        keep_count,
        Duration::from_secs(7 * 24 * 3600),
    ))
}

/// Enqueues `n` no-op jobs in bulk.
async fn enqueue(q: &Queue, n: u64) {
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| NewJob::new("noop", &Item { i }).expect("input"))
        .collect();
    for chunk in jobs.chunks(5_000) {
        q.enqueue_bulk(chunk.to_vec()).await.expect("enqueue");
    }
}

/// Runs a worker (concurrency 50) until every job of the queue has ended:
/// nothing ready and nothing leased.
async fn run_to_the_end(srv: &RedisServer, q: &Queue, keep_count: u64) {
    let worker = Worker::builder(srv.url())
        .config(config(keep_count))
        .concurrency(50)
        .pipeline(Noop)
        .build()
        .await
        .expect("worker");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    let k = q.keys();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        // ZCOUNT, which no script and no worker sends: not counted as theirs
        let ready: i64 = get(srv, &["ZCOUNT", &k.ready("noop"), "-inf", "+inf"]);
        let leased: i64 = get(srv, &["ZCOUNT", &k.leases(), "-inf", "+inf"]);
        if ready == 0 && leased == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the run did not end: {ready} ready, {leased} leased"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let _ = stop.send(());
    run.await.expect("join").expect("worker ran");
}

/// 300,000 jobs at concurrency 50 kept 207,989 of them with a keep count of
/// 100,000 when settle purged 8 per call: here 12,000 jobs with a keep count of
/// 1,000, the done index sampled (by a thread of its own) all along.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_terminal_jobs_stay_within_keep_count_during_a_sustained_run() {
    const JOBS: u64 = 12_000;
    const KEEP: u64 = 1_000;
    let srv = RedisServer::start();
    let q = Queue::connect(&srv.url(), QUEUE, config(KEEP))
        .await
        .expect("connect");
    enqueue(&q, JOBS).await;

    let done_key = q.keys().done();
    let most = Arc::new(AtomicI64::new(0));
    let samples = Arc::new(AtomicI64::new(0));
    let running = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (most, samples, running) = (most.clone(), samples.clone(), running.clone());
        let mut con = srv.connection();
        std::thread::spawn(move || {
            while running.load(Ordering::SeqCst) {
                let n: i64 = leasehold::redis::cmd("ZCARD")
                    .arg(&done_key)
                    .query(&mut con)
                    .expect("ZCARD");
                most.fetch_max(n, Ordering::SeqCst);
                samples.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    run_to_the_end(&srv, &q, KEEP).await;
    running.store(false, Ordering::SeqCst);
    sampler.join().expect("sampler");

    let kept: i64 = get(&srv, &["ZCARD", &q.keys().done()]);
    let most = most.load(Ordering::SeqCst);
    let samples = samples.load(Ordering::SeqCst);
    println!("{JOBS} jobs, keep {KEEP}: most kept while running {most}, at the end {kept}, {samples} samples");
    assert!(samples > 100, "too few samples ({samples}) to say anything");
    assert_eq!(
        kept, KEEP as i64,
        "retention keeps exactly keep_count at the end"
    );
    assert!(
        most <= KEEP as i64 + SLACK,
        "{most} terminal jobs kept at one point, more than keep_count {KEEP} + {SLACK}"
    );
    // every job ended, and each one beyond the policy is gone with its hash
    let jobs = srv.dump(&format!("leasehold:{{{QUEUE}}}:job:*")).len();
    assert_eq!(jobs, KEEP as usize, "job hashes left");
}

/// Sum of `calls=` over the commands of `INFO commandstats` but the test's own
/// (`ZCOUNT`, `INFO`, `CONFIG`).
fn total_calls(srv: &RedisServer) -> u64 {
    srv.info("commandstats")
        .lines()
        .filter(|l| l.starts_with("cmdstat_"))
        .filter(|l| {
            !["cmdstat_zcount:", "cmdstat_info:", "cmdstat_config"]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .filter_map(|l| l.split("calls=").nth(1))
        .filter_map(|s| s.split(',').next())
        .filter_map(|n| n.parse::<u64>().ok())
        .sum()
}

/// A W1-like run (no-op jobs at concurrency 50) with nothing to purge: the
/// Redis commands per job processed (script calls and the commands the scripts
/// run, from `INFO commandstats`), printed for comparison between versions.
/// Bounded loosely, so that a per-job command added to the happy path shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_per_job_of_a_run_with_nothing_to_purge() {
    const JOBS: u64 = 4_000;
    let srv = RedisServer::start();
    let q = Queue::connect(&srv.url(), QUEUE, QueueConfig::default())
        .await
        .expect("connect");
    enqueue(&q, JOBS).await;
    let _: () = get(&srv, &["CONFIG", "RESETSTAT"]);
    let before = total_calls(&srv);
    run_to_the_end(&srv, &q, QueueConfig::default().retention.keep_count).await;
    let stats = srv.info("commandstats");
    let evalsha = support::script_calls(&srv);
    let total = total_calls(&srv) - before;
    println!(
        "{JOBS} jobs: {total} commands in all ({:.2}/job), {evalsha} script calls ({:.3}/job)\n{stats}",
        total as f64 / JOBS as f64,
        evalsha as f64 / JOBS as f64
    );
    let kept: i64 = get(&srv, &["ZCARD", &q.keys().done()]);
    assert_eq!(kept, JOBS as i64, "nothing purged below keep_count");
    assert!(
        (total as f64) / (JOBS as f64) < 40.0,
        "{total} commands for {JOBS} jobs"
    );
}
