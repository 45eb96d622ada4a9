//! Schedules with real processes: worker replicas are this test binary run
//! again as child processes (the ignored test `replica`, told what to serve by
//! environment variables), against a private `redis-server`.
//!
//! - three replicas racing for 20 ticks of a 1-second schedule: each window
//!   exactly once, contiguous, in order;
//! - a replica killed with SIGKILL around a due time while another runs;
//! - Redis restarted (empty) between ticks: the scheduler registers the
//!   schedule again and goes on;
//! - 5 missed ticks under each catch-up policy (`all`, `latest`, `none`);
//! - a schedule that fails at run time (a bad zone) is a typed error of the
//!   worker's build, and a bad cron expression one of `Schedule::cron`.
//!
//! Every wait is on a condition read from Redis, with a generous deadline.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};
use leasehold::queue::{Queue, QueueConfig};
use leasehold::schedule::Window;
use leasehold::worker::Worker;
use leasehold::{schemars, InputFields, JsonSchema};
use leasehold_testkit::RedisServer;
use serde::{Deserialize, Serialize};

/// The queue every test pipeline uses.
const QUEUE: &str = "sched";
/// Deadline of every wait.
const WAIT: Duration = Duration::from_secs(60);

// `InputFields`: the schedule's `window` is checked against the field list.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, InputFields)]
struct TickInput {
    window: Window,
    table: String,
}

/// Every second, catch-up all (the race, kill and restart tests).
struct Ticker;

#[pipeline(
    queue = "sched",
    max_attempts = 1,
    schedule(
        every = "1s",
        catch_up = "all",
        catch_up_max = 100,
        input = r#"{"table": "t"}"#
    )
)]
impl Ticker {
    #[step]
    async fn run(&self, _ctx: &StepContext, input: &TickInput) -> Result<u64, StepError> {
        Ok(input.window.end_ms() as u64)
    }
}

/// Every second, catch-up all.
struct CatchAll;

#[pipeline(
    queue = "sched",
    max_attempts = 1,
    schedule(
        every = "1s",
        catch_up = "all",
        catch_up_max = 50,
        input = r#"{"table": "a"}"#
    )
)]
impl CatchAll {
    #[step]
    async fn run(&self, _ctx: &StepContext, _input: &TickInput) -> Result<(), StepError> {
        Ok(())
    }
}

/// Every second, catch-up latest.
struct CatchLatest;

#[pipeline(
    queue = "sched",
    max_attempts = 1,
    schedule(every = "1s", catch_up = "latest", input = r#"{"table": "l"}"#)
)]
impl CatchLatest {
    #[step]
    async fn run(&self, _ctx: &StepContext, _input: &TickInput) -> Result<(), StepError> {
        Ok(())
    }
}

/// Every second, no catch-up (a window more than 300 ms late is missed).
struct CatchNone;

#[pipeline(
    queue = "sched",
    max_attempts = 1,
    schedule(
        every = "1s",
        catch_up = "none",
        grace = "300ms",
        input = r#"{"table": "n"}"#
    )
)]
impl CatchNone {
    #[step]
    async fn run(&self, _ctx: &StepContext, _input: &TickInput) -> Result<(), StepError> {
        Ok(())
    }
}

/// Every second, a job of 2.5 s, overlap skip.
struct SlowSkip;

#[pipeline(
    queue = "sched",
    max_attempts = 1,
    schedule(every = "1s", overlap = "skip", input = r#"{"table": "k"}"#)
)]
impl SlowSkip {
    #[step]
    async fn run(&self, _ctx: &StepContext, _input: &TickInput) -> Result<(), StepError> {
        tokio::time::sleep(Duration::from_millis(2500)).await;
        Ok(())
    }
}

/// Every second, a job of 2.5 s, overlap wait.
struct SlowWait;

#[pipeline(
    queue = "sched",
    max_attempts = 1,
    schedule(
        every = "1s",
        overlap = "wait",
        catch_up = "all",
        input = r#"{"table": "w"}"#
    )
)]
impl SlowWait {
    #[step]
    async fn run(&self, _ctx: &StepContext, _input: &TickInput) -> Result<(), StepError> {
        tokio::time::sleep(Duration::from_millis(2500)).await;
        Ok(())
    }
}

/// A schedule whose zone does not exist: the worker's build fails.
struct BadZone;

#[pipeline(
    queue = "sched",
    schedule(
        cron = "0 3 * * *",
        zone = "Mars/Olympus_Mons",
        input = r#"{"table": "z"}"#
    )
)]
impl BadZone {
    #[step]
    async fn run(&self, _ctx: &StepContext, _input: &TickInput) -> Result<(), StepError> {
        Ok(())
    }
}

/// Every second, under a pipeline concurrency limit: its scheduled jobs carry
/// the same flow gates as enqueued ones.
struct LimitedTicker;

#[pipeline(
    queue = "sched",
    max_running = 1,
    schedule(every = "1s", input = r#"{"table": "m"}"#)
)]
impl LimitedTicker {
    #[step]
    async fn run(&self, _ctx: &StepContext, _input: &TickInput) -> Result<(), StepError> {
        Ok(())
    }
}

// ---- the replica process ----------------------------------------------------

/// The replica: serves the pipeline named by `SCHED_PIPELINE` against
/// `SCHED_URL` until SIGTERM, printing `READY` once built. Exits when its
/// stdin closes (the test that spawned it is gone).
#[test]
#[ignore = "a worker replica the other tests spawn as a child process"]
fn replica() {
    let (Ok(url), Ok(which)) = (std::env::var("SCHED_URL"), std::env::var("SCHED_PIPELINE")) else {
        return;
    };
    std::thread::spawn(|| {
        let mut sink = String::new();
        while std::io::stdin()
            .read_line(&mut sink)
            .map(|n| n > 0)
            .unwrap_or(false)
        {}
        std::process::exit(0);
    });
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    rt.block_on(async move {
        let b = Worker::builder(url)
            .concurrency(4)
            .lease_ttl(Duration::from_secs(5))
            .sweep_interval(Duration::from_secs(1));
        let b = match which.as_str() {
            "ticker" => b.pipeline(Ticker),
            "all" => b.pipeline(CatchAll),
            "latest" => b.pipeline(CatchLatest),
            "none" => b.pipeline(CatchNone),
            "skip" => b.pipeline(SlowSkip),
            "wait" => b.pipeline(SlowWait),
            "limited" => b.pipeline(LimitedTicker),
            other => panic!("unknown pipeline {other}"),
        };
        let worker = b.build().await.expect("the worker builds");
        println!("READY {}", worker.id());
        worker.run_until_signal().await.expect("the worker runs");
    });
}

struct Replica {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Replica {
    fn spawn(url: &str, pipeline: &str) -> Replica {
        let mut child = Command::new(std::env::current_exe().expect("the test binary"))
            .args([
                "--ignored",
                "--exact",
                "replica",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("SCHED_URL", url)
            .env("SCHED_PIPELINE", pipeline)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn a replica");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().expect("stdout");
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Replica { child, lines }
    }

    async fn ready(&self) {
        let start = Instant::now();
        while !self
            .lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("READY "))
        {
            assert!(start.elapsed() < WAIT, "the replica did not start");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill9();
    }
}

// ---- reading what happened --------------------------------------------------

async fn client(srv: &RedisServer) -> Queue {
    Queue::connect(&srv.url(), QUEUE, QueueConfig::default())
        .await
        .expect("connect")
}

/// The jobs of pipeline `pipeline`, by input key: (id, window) each.
async fn windows_of(q: &Queue, pipeline: &str) -> BTreeMap<String, Vec<(String, Window)>> {
    let mut conn = q.pool().get().await.expect("a connection");
    let keys: Vec<String> = leasehold::redis::cmd("KEYS")
        .arg(format!("{}:job:*", q.keys().base()))
        .query_async(&mut conn)
        .await
        .expect("KEYS");
    let mut out: BTreeMap<String, Vec<(String, Window)>> = BTreeMap::new();
    for key in keys {
        let (p, input, input_key): (String, String, String) = leasehold::redis::cmd("HMGET")
            .arg(&key)
            .arg("pipeline")
            .arg("input")
            .arg("input_key")
            .query_async(&mut conn)
            .await
            .expect("HMGET");
        // the key names the job (its hash leaves the id out)
        let id = key.rsplit(":job:").next().unwrap_or_default().to_owned();
        if p != pipeline {
            continue;
        }
        let input: TickInput = serde_json::from_str(&input).expect("a tick input");
        out.entry(input_key).or_default().push((id, input.window));
    }
    out
}

/// Checks that every window has one job, its key is `<schedule>:<start>`, and
/// (with `contiguous`) that no window is missing between them; returns them in order.
fn one_job_per_window(
    name: &str,
    by_key: &BTreeMap<String, Vec<(String, Window)>>,
    contiguous: bool,
) -> Vec<Window> {
    let mut windows = Vec::new();
    for (key, jobs) in by_key {
        assert_eq!(
            jobs.len(),
            1,
            "window {key} has {} jobs: {jobs:?}",
            jobs.len()
        );
        let w = jobs[0].1;
        assert_eq!(
            key,
            &format!("{name}:{}", w.start),
            "the input key names the window"
        );
        windows.push(w);
    }
    windows.sort();
    for pair in windows.windows(2).filter(|_| contiguous) {
        assert_eq!(
            pair[0].end, pair[1].start,
            "windows are contiguous: {windows:?}"
        );
    }
    windows
}

async fn wait_windows(
    q: &Queue,
    pipeline: &str,
    n: usize,
) -> BTreeMap<String, Vec<(String, Window)>> {
    let start = Instant::now();
    loop {
        let got = windows_of(q, pipeline).await;
        if got.len() >= n {
            return got;
        }
        assert!(
            start.elapsed() < WAIT,
            "{pipeline}: {} of {n} windows after {WAIT:?}",
            got.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn cursor(q: &Queue, name: &str) -> i64 {
    q.schedule_info(name)
        .await
        .expect("read")
        .and_then(|i| i.cursor_ms)
        .expect("a cursor")
}

/// Waits until Redis's clock is at least `ms`.
async fn wait_redis_time(q: &Queue, ms: i64) {
    loop {
        let now = q.redis_time_ms().await.expect("TIME");
        if now >= ms {
            return;
        }
        tokio::time::sleep(Duration::from_millis(((ms - now) as u64).min(200))).await;
    }
}

// ---- the tests ----------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_racing_enqueue_each_window_exactly_once() {
    let srv = RedisServer::start();
    let q = client(&srv).await;
    let replicas: Vec<Replica> = (0..3)
        .map(|_| Replica::spawn(&srv.url(), "ticker"))
        .collect();
    for r in &replicas {
        r.ready().await;
    }
    let by_key = wait_windows(&q, "ticker", 20).await;
    let windows = one_job_per_window("ticker", &by_key, true);
    assert!(windows.len() >= 20);
    // each window was claimed once: one tick record per window in the stream
    let ticks = q.schedule_ticks("ticker", 1000).await.expect("ticks");
    let mut claimed: BTreeMap<i64, usize> = BTreeMap::new();
    for t in ticks.iter().filter(|t| t.job.is_some()) {
        *claimed.entry(t.window.expect("a window").0).or_default() += 1;
    }
    for w in &windows {
        assert_eq!(
            claimed.get(&w.start_ms()),
            Some(&1),
            "window {w:?}: {claimed:?}"
        );
    }
    // the claims were spread over the replicas (by is the worker id)
    let by: BTreeSet<&str> = ticks
        .iter()
        .filter(|t| t.job.is_some())
        .map(|t| t.by.as_str())
        .collect();
    assert!(!by.is_empty());
    // and on time: the lag a tick records is below the default grace
    let info = q.schedule_info("ticker").await.unwrap().unwrap();
    assert_eq!(info.counts["skipped"], 0);
    assert_eq!(info.counts["missed"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_around_a_due_time_loses_and_doubles_nothing() {
    let srv = RedisServer::start();
    let q = client(&srv).await;
    let survivor = Replica::spawn(&srv.url(), "ticker");
    survivor.ready().await;
    for _ in 0..3 {
        let mut victim = Replica::spawn(&srv.url(), "ticker");
        victim.ready().await;
        // kill it 20 ms before the next due time, on Redis's clock
        let c = cursor(&q, "ticker").await;
        wait_redis_time(&q, c + 1000 - 20).await;
        victim.kill9();
    }
    let now_windows = windows_of(&q, "ticker").await.len();
    let by_key = wait_windows(&q, "ticker", now_windows + 4).await;
    one_job_per_window("ticker", &by_key, true);
    drop(survivor);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restarted_between_ticks_gets_the_schedule_back() {
    let mut srv = RedisServer::start();
    let q = client(&srv).await;
    let replica = Replica::spawn(&srv.url(), "ticker");
    replica.ready().await;
    wait_windows(&q, "ticker", 2).await;
    srv.restart(); // comes back empty
    let q = client(&srv).await;
    // the scheduler finds the schedule gone, registers it again and goes on
    let by_key = wait_windows(&q, "ticker", 3).await;
    one_job_per_window("ticker", &by_key, true);
    let info = q
        .schedule_info("ticker")
        .await
        .unwrap()
        .expect("registered again");
    assert!(info.definition.is_some());
    let ticks = q.schedule_ticks("ticker", 100).await.unwrap();
    assert!(ticks.iter().any(|t| t.outcome == "registered"), "{ticks:?}");
    drop(replica);
}

/// Runs `pipeline` until two windows are enqueued, kills it for 5 ticks and
/// more, starts it again, and returns the cursor at the kill, the tick
/// records after it, and the jobs by input key.
async fn five_missed_ticks(
    kind: &str,
    pipeline: &str,
) -> (
    i64,
    Vec<leasehold::schedule::TickEntry>,
    BTreeMap<String, Vec<(String, Window)>>,
) {
    let srv = RedisServer::start();
    let q = client(&srv).await;
    let mut first = Replica::spawn(&srv.url(), kind);
    first.ready().await;
    wait_windows(&q, pipeline, 2).await;
    first.kill9();
    let c = cursor(&q, pipeline).await;
    // five windows fall due while no replica runs, and more than the grace passes
    wait_redis_time(&q, c + 5000 + 400).await;
    let second = Replica::spawn(&srv.url(), kind);
    second.ready().await;
    let start = Instant::now();
    while cursor(&q, pipeline).await < c + 5000 {
        assert!(
            start.elapsed() < WAIT,
            "the restarted replica did not claim the missed windows"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ticks = q.schedule_ticks(pipeline, 1000).await.unwrap();
    let after: Vec<_> = ticks
        .into_iter()
        .rev()
        .filter(|t| t.window.is_some_and(|(s, _)| s >= c && s < c + 5000))
        .collect();
    let jobs = windows_of(&q, pipeline).await;
    drop(second);
    (c, after, jobs)
}

/// The windows of the five missed ticks after cursor `c`.
fn missed(c: i64) -> Vec<i64> {
    (0..5).map(|k| c + k * 1000).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_missed_ticks_with_catch_up_all_enqueue_those_five_in_order() {
    let (c, ticks, jobs) = five_missed_ticks("all", "catch_all").await;
    let starts: Vec<i64> = ticks.iter().map(|t| t.window.unwrap().0).collect();
    assert_eq!(
        starts,
        missed(c),
        "each missed window once, oldest first: {ticks:?}"
    );
    // all five enqueued; those claimed with a later window due are "caught up"
    assert!(ticks.iter().all(|t| t.job.is_some()), "{ticks:?}");
    assert!(
        ticks[..4].iter().all(|t| t.outcome == "caught_up"),
        "{ticks:?}"
    );
    let windows = one_job_per_window("catch_all", &jobs, true);
    for s in missed(c) {
        assert!(
            windows.iter().any(|w| w.start_ms() == s),
            "window at {s} enqueued"
        );
    }
    // in order: the job ids (time-ordered) follow the windows
    let mut ids: Vec<(i64, String)> = jobs
        .values()
        .map(|j| (j[0].1.start_ms(), j[0].0.clone()))
        .filter(|(s, _)| missed(c).contains(s))
        .collect();
    ids.sort();
    assert!(
        ids.windows(2).all(|p| p[0].1 < p[1].1),
        "created oldest first: {ids:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_missed_ticks_with_catch_up_latest_enqueue_only_the_most_recent() {
    let (c, ticks, jobs) = five_missed_ticks("latest", "catch_latest").await;
    // one record for the older windows, superseded, then the latest due one enqueued
    assert_eq!(ticks[0].outcome, "skipped", "{ticks:?}");
    assert_eq!(ticks[0].window.unwrap().0, c, "{ticks:?}");
    let skipped_to = ticks[0].window.unwrap().1;
    assert!(
        skipped_to == c + 4000 || skipped_to == c + 5000,
        "{ticks:?}"
    );
    assert!(
        ticks[0]
            .reason
            .starts_with(&format!("{} windows", (skipped_to - c) / 1000)),
        "{ticks:?}"
    );
    let windows = one_job_per_window("catch_latest", &jobs, false);
    for s in missed(c).into_iter().filter(|s| *s < skipped_to) {
        assert!(
            !windows.iter().any(|w| w.start_ms() == s),
            "window at {s} not enqueued"
        );
    }
    assert!(
        windows.iter().any(|w| w.start_ms() == skipped_to),
        "the latest due window was enqueued: {windows:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_missed_ticks_with_catch_up_none_are_recorded_missed() {
    let (c, ticks, jobs) = five_missed_ticks("none", "catch_none").await;
    let starts: Vec<i64> = ticks.iter().map(|t| t.window.unwrap().0).collect();
    assert_eq!(starts, missed(c), "{ticks:?}");
    assert!(
        ticks
            .iter()
            .all(|t| t.outcome == "missed" && t.job.is_none()),
        "{ticks:?}"
    );
    let windows = one_job_per_window("catch_none", &jobs, false);
    for s in missed(c) {
        assert!(
            !windows.iter().any(|w| w.start_ms() == s),
            "window at {s} not enqueued"
        );
    }
}

/// Waits until `name`'s ticks stream has `n` entries with `outcome`; returns them all.
async fn wait_ticks(
    q: &Queue,
    name: &str,
    outcome: &str,
    n: usize,
) -> Vec<leasehold::schedule::TickEntry> {
    let start = Instant::now();
    loop {
        let ticks = q.schedule_ticks(name, 1000).await.unwrap();
        if ticks.iter().filter(|t| t.outcome == outcome).count() >= n {
            return ticks;
        }
        assert!(
            start.elapsed() < WAIT,
            "{name}: fewer than {n} {outcome} ticks: {ticks:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlap_skip_and_wait_record_the_windows_they_hold_back() {
    let srv = RedisServer::start();
    let q = client(&srv).await;
    let skip = Replica::spawn(&srv.url(), "skip");
    let wait = Replica::spawn(&srv.url(), "wait");
    skip.ready().await;
    wait.ready().await;
    // skip: windows due while the previous job runs are skipped, named
    let ticks = wait_ticks(&q, "slow_skip", "skipped", 2).await;
    assert!(
        ticks
            .iter()
            .filter(|t| t.outcome == "skipped")
            .all(|t| t.reason.starts_with("overlap: job ") && t.job.is_none()),
        "{ticks:?}"
    );
    // wait: a held window is recorded as delayed once, then enqueued after
    // the previous job ended; no window is skipped and none has two jobs
    let ticks = wait_ticks(&q, "slow_wait", "delayed", 2).await;
    let delayed: Vec<i64> = ticks
        .iter()
        .filter(|t| t.outcome == "delayed")
        .map(|t| t.window.unwrap().0)
        .collect();
    let unique: BTreeSet<i64> = delayed.iter().copied().collect();
    assert_eq!(
        unique.len(),
        delayed.len(),
        "each held window recorded once: {ticks:?}"
    );
    let start = Instant::now();
    loop {
        let by_key = windows_of(&q, "slow_wait").await;
        let windows = one_job_per_window("slow_wait", &by_key, true);
        if windows.iter().any(|w| w.start_ms() == delayed[0]) {
            break;
        }
        assert!(start.elapsed() < WAIT, "the held window was never enqueued");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ticks = q.schedule_ticks("slow_wait", 1000).await.unwrap();
    assert!(!ticks.iter().any(|t| t.outcome == "skipped"), "{ticks:?}");
    drop((skip, wait));
}

/// Two replicas of an `overlap = "wait"` schedule whose job (2.5 s) outlasts
/// its window (1 s): every held window is recorded as `delayed` exactly once,
/// in the ticks stream and in the counter, also when a tick claims one window
/// and holds the next in the same call (the `waiting` marker used to be
/// cleared by that call's cursor update, and the next tick recorded the held
/// window again), and every held window is enqueued later, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlap_wait_with_two_replicas_records_each_held_window_once() {
    let srv = RedisServer::start();
    let q = client(&srv).await;
    let a = Replica::spawn(&srv.url(), "wait");
    let b = Replica::spawn(&srv.url(), "wait");
    a.ready().await;
    b.ready().await;
    // four held windows: at least three of them held by a call that enqueued
    // the window before (a job ended, its successor is QUEUED at once)
    wait_ticks(&q, "slow_wait", "delayed", 4).await;
    drop((a, b));
    let ticks = q.schedule_ticks("slow_wait", 1000).await.unwrap();
    let delayed: Vec<i64> = ticks
        .iter()
        .filter(|t| t.outcome == "delayed")
        .map(|t| t.window.expect("a held window").0)
        .collect();
    let unique: BTreeSet<i64> = delayed.iter().copied().collect();
    assert_eq!(
        unique.len(),
        delayed.len(),
        "each held window recorded once: {ticks:?}"
    );
    let info = q.schedule_info("slow_wait").await.unwrap().unwrap();
    assert_eq!(
        info.counts.get("delayed").copied().unwrap_or(0),
        delayed.len() as u64,
        "the counter counts each held window once: {info:?}"
    );
    // no window skipped, none with two jobs; every held window that was
    // claimed since has its one job
    assert!(!ticks.iter().any(|t| t.outcome == "skipped"), "{ticks:?}");
    let by_key = windows_of(&q, "slow_wait").await;
    let windows = one_job_per_window("slow_wait", &by_key, true);
    let cursor = info.cursor_ms.expect("a cursor");
    for start in unique.iter().filter(|s| **s < cursor) {
        assert!(
            windows.iter().any(|w| w.start_ms() == *start),
            "held window {start} claimed but never enqueued: {ticks:?}"
        );
    }
}

#[tokio::test]
async fn a_scheduled_job_carries_its_pipelines_flow_gates() {
    let srv = RedisServer::start();
    let q = client(&srv).await;
    let replica = Replica::spawn(&srv.url(), "limited");
    replica.ready().await;
    let start = Instant::now();
    let id = loop {
        let by_key = windows_of(&q, "limited_ticker").await;
        if let Some((id, _)) = by_key.values().flatten().next() {
            break id.clone();
        }
        assert!(start.elapsed() < WAIT, "no window was enqueued");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut conn = q.pool().get().await.expect("a connection");
    let flow: Option<String> = leasehold::redis::cmd("HGET")
        .arg(q.keys().job(&id))
        .arg("flow")
        .query_async(&mut conn)
        .await
        .expect("HGET");
    assert_eq!(flow.as_deref(), Some("running:1:limited_ticker"));
    drop(replica);
}

#[tokio::test]
async fn bad_schedules_are_typed_errors() {
    assert!(matches!(
        leasehold::schedule::Schedule::cron("x", "0 25 * * *"),
        Err(leasehold::schedule::ScheduleError::BadCron { .. })
    ));
    let srv = RedisServer::start();
    let err = Worker::builder(srv.url())
        .pipeline(BadZone)
        .build()
        .await
        .expect_err("a bad zone fails the build");
    assert!(
        matches!(
            err,
            leasehold::Error::Schedule(leasehold::schedule::ScheduleError::BadZone { .. })
        ),
        "{err}"
    );
    // nothing was registered
    let q = client(&srv).await;
    assert!(q.schedule_infos().await.unwrap().is_empty());
}
