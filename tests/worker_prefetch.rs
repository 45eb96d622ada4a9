//! Prefetch and starts in the lease: by default a worker leases a job when a
//! run slot frees and starts it in that call (one `start` event, QUEUED ->
//! RUNNING); it leases jobs ahead of its free slots only when told to, never
//! runs more than its concurrency at once, and hands prefetched jobs back when
//! it shuts down.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};
use leasehold::queue::{Client, JobId, JobState, QueueConfig};
use leasehold::worker::{Worker, WorkerBuilder};
use leasehold::{schemars, JsonSchema};
use leasehold_testkit::{wait_until_async, RedisServer};
use serde::{Deserialize, Serialize};
use support::get;

const WAIT: Duration = Duration::from_secs(30);
const LEASES: &str = "leasehold:{pf}:leases";

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Item {
    i: u64,
}

/// Steps running now and the most seen at once.
#[derive(Default)]
struct Gauge {
    now: AtomicUsize,
    max: AtomicUsize,
}

/// One step that sleeps `ms`, counting how many run at once.
#[derive(Clone)]
struct Sleepy {
    ms: u64,
    gauge: Arc<Gauge>,
}

#[pipeline(name = "sleepy", queue = "pf", max_attempts = 1)]
impl Sleepy {
    #[step]
    async fn nap(&self, _ctx: &StepContext, _input: &Item) -> Result<(), StepError> {
        let now = self.gauge.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.gauge.max.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(self.ms)).await;
        self.gauge.now.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

fn held(redis: &RedisServer) -> i64 {
    get(redis, &["ZCARD", LEASES])
}

async fn enqueue(client: &Client, n: u64) -> Vec<JobId> {
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(
            client
                .enqueue::<Sleepy>(&Item { i })
                .await
                .expect("enqueue")
                .id,
        );
    }
    ids
}

async fn states(client: &Client, ids: &[JobId]) -> Vec<(JobState, usize)> {
    let queue = client.queue_for::<Sleepy>().expect("queue");
    let mut out = Vec::new();
    for id in ids {
        let job = queue.job(id).await.expect("read").expect("job exists");
        out.push((job.state, job.attempts.len()));
    }
    out
}

async fn all_succeeded(client: &Client, ids: &[JobId]) -> bool {
    states(client, ids)
        .await
        .iter()
        .all(|(s, _)| *s == JobState::Succeeded)
}

/// A worker of `Sleepy` jobs of `ms` ms, set up by `tune`, running in a task.
struct Running {
    gauge: Arc<Gauge>,
    stop: tokio::sync::oneshot::Sender<()>,
    run: tokio::task::JoinHandle<leasehold::Result<()>>,
}

async fn start_worker(
    redis: &RedisServer,
    ms: u64,
    tune: impl FnOnce(WorkerBuilder) -> WorkerBuilder,
) -> Running {
    let gauge = Arc::new(Gauge::default());
    let builder = Worker::builder(redis.url()).pipeline(Sleepy {
        ms,
        gauge: gauge.clone(),
    });
    let worker = tune(builder).build().await.expect("worker");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    Running { gauge, stop, run }
}

impl Running {
    /// Stops the worker gracefully and waits for it.
    async fn stop(self) {
        let _ = self.stop.send(());
        self.run.await.expect("join").expect("worker ran");
    }
}

async fn connect(redis: &RedisServer) -> Client {
    Client::connect(&redis.url(), QueueConfig::default())
        .await
        .expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_jobs_are_not_prefetched_by_default() {
    let redis = RedisServer::start();
    let client = connect(&redis).await;
    let ids = enqueue(&client, 8).await;
    let worker = start_worker(&redis, 120, |b| b.concurrency(2)).await;
    let gauge = worker.gauge.clone();
    // watch the lease index while the jobs run: never more held than slots
    let mut most = 0;
    let deadline = std::time::Instant::now() + WAIT;
    while !all_succeeded(&client, &ids).await {
        most = most.max(held(&redis));
        assert!(std::time::Instant::now() < deadline, "jobs did not finish");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    worker.stop().await;
    assert!(most >= 1, "the sampler never saw a held job");
    assert!(
        most <= 2,
        "a worker of 120 ms jobs held {most} jobs with 2 slots (prefetched)"
    );
    assert!(gauge.max.load(Ordering::SeqCst) <= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_prefetch_holds_ahead_but_runs_at_most_concurrency() {
    let redis = RedisServer::start();
    let client = connect(&redis).await;
    let ids = enqueue(&client, 8).await;
    let worker = start_worker(&redis, 150, |b| b.concurrency(2).prefetch(2)).await;
    let gauge = worker.gauge.clone();
    // four held: two running, two waiting LEASED for a slot
    wait_until_async(WAIT, "4 jobs held", || async { held(&redis) == 4 }).await;
    let snapshot = states(&client, &ids).await;
    let leased = snapshot
        .iter()
        .filter(|(s, _)| *s == JobState::Leased)
        .count();
    let running = snapshot
        .iter()
        .filter(|(s, _)| *s == JobState::Running)
        .count();
    assert!(running <= 2, "{running} running with 2 slots: {snapshot:?}");
    assert!(
        leased >= 1,
        "no prefetched job waits LEASED while 4 are held: {snapshot:?}"
    );
    wait_until_async(WAIT, "all jobs succeeded", || all_succeeded(&client, &ids)).await;
    worker.stop().await;
    assert_eq!(gauge.max.load(Ordering::SeqCst), 2, "steps running at once");
    for (state, attempts) in states(&client, &ids).await {
        assert_eq!((state, attempts), (JobState::Succeeded, 1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_hands_back_prefetched_jobs_unstarted() {
    let redis = RedisServer::start();
    let client = connect(&redis).await;
    let ids = enqueue(&client, 3).await;
    let worker = start_worker(&redis, 400, |b| {
        b.concurrency(1)
            .prefetch(2)
            .shutdown_grace(Duration::from_secs(10))
    })
    .await;
    let gauge = worker.gauge.clone();
    wait_until_async(WAIT, "one running and two prefetched", || async {
        held(&redis) == 3 && gauge.now.load(Ordering::SeqCst) == 1
    })
    .await;
    worker.stop().await;
    let after = states(&client, &ids).await;
    // the prefetched two never started: back in line, attempt 1, no attempt record
    let handed_back = after
        .iter()
        .filter(|(s, attempts)| *s == JobState::Queued && *attempts == 0)
        .count();
    assert_eq!(handed_back, 2, "{after:?}");
    assert_eq!(gauge.max.load(Ordering::SeqCst), 1);
    assert_eq!(held(&redis), 0, "leases left behind: {after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_start_in_their_lease_call_by_default() {
    let redis = RedisServer::start();
    let client = connect(&redis).await;
    let ids = enqueue(&client, 60).await;
    let worker = start_worker(&redis, 0, |b| b.concurrency(2)).await;
    let gauge = worker.gauge.clone();
    // never more held than slots: a lease takes a slot only once the finish
    // that freed it is in the same call, which Redis applies first
    let mut most = 0;
    let deadline = std::time::Instant::now() + WAIT;
    while !all_succeeded(&client, &ids).await {
        most = most.max(held(&redis));
        assert!(std::time::Instant::now() < deadline, "jobs did not finish");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    worker.stop().await;
    assert!(most <= 2, "{most} jobs held with 2 slots and no prefetch");
    assert!(
        gauge.max.load(Ordering::SeqCst) <= 2,
        "steps running at once"
    );
    // each job: enqueue, start QUEUED->RUNNING (leased and started in one
    // call), finish; no lease event of its own
    let events: Vec<(String, Vec<(String, String)>)> =
        get(&redis, &["XRANGE", "leasehold:{pf}:events", "-", "+"]);
    let field = |fields: &[(String, String)], name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    // every event as (op, job, from, to): an entry's own, then those a settle
    // call gathered into its `more` field (five words each)
    let mut all: Vec<[String; 4]> = Vec::new();
    for (_, f) in &events {
        all.push([
            field(f, "op"),
            field(f, "job"),
            field(f, "from"),
            field(f, "to"),
        ]);
        let more = field(f, "more");
        let words: Vec<&str> = more.split_whitespace().collect();
        assert!(words.len().is_multiple_of(5), "more: {more:?}");
        for w in words.chunks(5) {
            all.push([w[0].into(), w[1].into(), w[3].into(), w[4].into()]);
        }
    }
    for id in &ids {
        let moves: Vec<String> = all
            .iter()
            .filter(|[_, job, _, _]| job == id.as_str())
            .map(|[op, _, from, to]| format!("{op} {from}->{to}"))
            .collect();
        assert_eq!(
            moves,
            [
                "enqueue ->QUEUED",
                "start QUEUED->RUNNING",
                "finish RUNNING->SUCCEEDED"
            ],
            "events of {id}"
        );
        // LEASED and RUNNING both recorded, at the same instant: a job started
        // by its lease call keeps `leased_at` only, read as its start too
        let key = format!("leasehold:{{pf}}:job:{id}");
        let times: Vec<Option<String>> = get(&redis, &["HMGET", &key, "leased_at", "started_at"]);
        assert!(times[0].is_some(), "{id} has no leased_at");
        assert_eq!(times[1], None, "{id}: started_at kept beside leased_at");
    }
}
