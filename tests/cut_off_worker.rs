//! A worker cut off from Redis by a stalled network (a TCP proxy that accepts
//! bytes and forwards nothing, so every call hangs rather than fails) stops its
//! steps at its own lease deadline: the step's cancellation fires before the
//! lease's deadline in Redis, the step is dropped within that deadline plus the
//! cancel grace, nothing is written by the cut-off attempt, the sweeper sees the
//! job STALE, and once traffic resumes the worker runs other jobs.
//!
//! The worker runs in this process, behind the proxy; the test reads and sweeps
//! Redis directly. Times are compared on the machine's wall clock, which is the
//! clock Redis stamps `lease_deadline` with (same machine).

mod support;

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};
use leasehold::queue::{Client, JobId, JobState, QueueConfig};
use leasehold::worker::Worker;
use leasehold::{schemars, JsonSchema};
use leasehold_testkit::{wait_until_async, RedisServer, TcpProxy};
use serde::{Deserialize, Serialize};
use support::get;

/// Deadline of every wait (the scenarios take a few seconds when they pass).
const WAIT: Duration = Duration::from_secs(20);
/// The lease TTL of the cut-off worker (renewed every second).
const TTL: Duration = Duration::from_secs(3);
/// How long a step may run on after its cancellation fired.
const GRACE: Duration = Duration::from_secs(1);
/// The worker's log line for a lease past its local deadline.
const DEADLINE_PASSED: &str = "lease deadline passed without a confirmed renewal";

/// One scenario at a time: they measure deadlines of a 3 s lease.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Milliseconds since the epoch, on the wall clock Redis uses too.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

// ---- the worker's log -----------------------------------------------------------

/// Everything the worker logged, shared by the tests of this file.
fn log() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let writer = LogWriter(buf.clone());
        let _ = tracing_subscriber::fmt()
            .with_env_filter("leasehold_core=info")
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .try_init();
        buf
    })
}

/// Appends log lines to the shared buffer (and stderr, shown on failure).
#[derive(Clone)]
struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl Write for LogWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        std::io::stderr().write_all(bytes)?;
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The log lines that mention `needle`.
fn log_lines(needle: &str) -> Vec<String> {
    let buf = log().lock().unwrap();
    String::from_utf8_lossy(&buf)
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_owned)
        .collect()
}

// ---- the pipeline -----------------------------------------------------------------

/// A job's input: how long its one step works.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Work {
    ms: u64,
}

/// What one job's step went through, in ms since the epoch.
#[derive(Debug, Clone, Default)]
struct Marks {
    begun: Option<i64>,
    cancelled: Option<(i64, String)>,
    hard_stopped: Option<i64>,
    /// When it completed its work and "wrote its sink".
    completed: Option<i64>,
}

type Journal = Arc<Mutex<HashMap<String, Marks>>>;

/// Records a hard stop when the step is dropped before it completed.
struct DropMark {
    journal: Journal,
    job: String,
    done: bool,
}

impl Drop for DropMark {
    fn drop(&mut self) {
        if !self.done {
            let mut j = self.journal.lock().unwrap();
            j.entry(self.job.clone()).or_default().hard_stopped = Some(now_ms());
        }
    }
}

/// One step that works for `input.ms` and ignores its cancellation (the worst
/// case: only the hard stop ends it), recording when the cancellation fired.
#[derive(Clone, Default)]
struct Stubborn {
    journal: Journal,
}

#[pipeline(name = "stubborn", queue = "cut", max_attempts = 1, lease_ttl = "3s")]
impl Stubborn {
    #[step]
    async fn load(&self, ctx: &StepContext, input: &Work) -> Result<(), StepError> {
        let job = ctx.job().as_str().to_owned();
        self.journal
            .lock()
            .unwrap()
            .entry(job.clone())
            .or_default()
            .begun = Some(now_ms());
        let mut mark = DropMark {
            journal: self.journal.clone(),
            job: job.clone(),
            done: false,
        };
        let work = tokio::time::sleep(Duration::from_millis(input.ms));
        tokio::pin!(work);
        tokio::select! {
            _ = &mut work => {}
            _ = ctx.cancelled() => {
                let reason = ctx.cancel_reason().unwrap_or_default();
                self.journal.lock().unwrap().entry(job.clone()).or_default().cancelled =
                    Some((now_ms(), reason));
                // told to stop, it carries on regardless
                work.await;
            }
        }
        mark.done = true;
        self.journal
            .lock()
            .unwrap()
            .entry(job)
            .or_default()
            .completed = Some(now_ms());
        Ok(())
    }
}

// ---- reading Redis directly ---------------------------------------------------------

/// The job's state and lease deadline (ms since epoch, Redis clock), read directly.
fn state_and_deadline(srv: &RedisServer, client: &Client, id: &JobId) -> (String, Option<i64>) {
    let queue = client.queue_for::<Stubborn>().expect("queue");
    let key = queue.keys().job(id.as_str());
    let state: Option<String> = get(srv, &["HGET", &key, "state"]);
    // the deadline is the lease index's score (the job hash keeps none)
    let deadline: Option<String> = get(srv, &["ZSCORE", &queue.keys().leases(), id.as_str()]);
    (
        state.unwrap_or_default(),
        deadline.and_then(|d| d.parse().ok()),
    )
}

// ---- the scenario -------------------------------------------------------------------------

/// Three RUNNING jobs of `step` steps on a worker behind a proxy; the proxy
/// stalls all traffic. Checks every promise of the cut-off worker.
async fn stalled_worker_stops_its_steps_by_its_deadline(step: Duration) {
    let _serial = SERIAL.lock().await;
    log();
    let srv = RedisServer::start_tcp();
    let proxy = TcpProxy::start(
        format!("127.0.0.1:{}", srv.port().unwrap())
            .parse()
            .unwrap(),
    );
    let direct = Client::connect(&srv.url(), QueueConfig::default())
        .await
        .expect("connect");
    let queue = direct.queue_for::<Stubborn>().expect("queue");
    let pipeline = Stubborn::default();
    let journal = pipeline.journal.clone();
    let worker = Worker::builder(proxy.url())
        .lease_ttl(TTL)
        .cancel_grace(GRACE)
        .concurrency(3)
        .prefetch(0)
        // the test sweeps; the cut-off worker must not matter for that
        .sweep_interval(Duration::from_secs(600))
        .pipeline(pipeline)
        .build()
        .await
        .expect("worker");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));

    let ms = step.as_millis() as u64;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(
            direct
                .enqueue::<Stubborn>(&Work { ms })
                .await
                .expect("enqueue")
                .id,
        );
    }
    wait_until_async(WAIT, "the three steps began", || {
        let journal = &journal;
        async move {
            journal
                .lock()
                .unwrap()
                .values()
                .filter(|m| m.begun.is_some())
                .count()
                == 3
        }
    })
    .await;
    for id in &ids {
        assert_eq!(state_and_deadline(&srv, &direct, id).0, "RUNNING");
    }

    proxy.stall();
    let stalled_at = now_ms();
    // the sweeper (here: the test, talking to Redis directly) sees each job
    // STALE once its lease deadline in Redis passed; the last deadline seen
    // while RUNNING is the lease's final one (no renewal gets through)
    let mut deadlines: HashMap<JobId, i64> = HashMap::new();
    wait_until_async(WAIT, "the sweeper sees the three jobs STALE", || {
        for id in &ids {
            if let (state, Some(d)) = state_and_deadline(&srv, &direct, id) {
                if state == "RUNNING" {
                    deadlines.insert(id.clone(), d);
                }
            }
        }
        let queue = &queue;
        let (srv, direct, ids) = (&srv, &direct, &ids);
        async move {
            queue.sweep(100).await.expect("sweep");
            ids.iter()
                .all(|id| state_and_deadline(srv, direct, id).0 == "STALE")
        }
    })
    .await;
    wait_until_async(WAIT, "the three cut-off steps were hard-stopped", || {
        let journal = &journal;
        async move {
            journal
                .lock()
                .unwrap()
                .values()
                .filter(|m| m.hard_stopped.is_some() || m.completed.is_some())
                .count()
                == 3
        }
    })
    .await;

    let marks = journal.lock().unwrap().clone();
    for id in &ids {
        let deadline = *deadlines
            .get(id)
            .unwrap_or_else(|| panic!("job {id} was seen RUNNING with a lease deadline"));
        let m = &marks[id.as_str()];
        let (cancelled, reason) = m
            .cancelled
            .clone()
            .unwrap_or_else(|| panic!("job {id}: the step was never told to stop: {m:?}"));
        eprintln!(
            "job {id}: stalled at {stalled_at}, cancelled {} ms before the lease deadline, hard-stopped {} ms after it",
            deadline - cancelled,
            m.hard_stopped.map_or(i64::MIN, |h| h - deadline),
        );
        assert!(
            cancelled >= stalled_at,
            "job {id}: cancelled only once cut off ({cancelled} < {stalled_at})"
        );
        assert!(
            cancelled < deadline,
            "job {id}: the cancellation fired {} ms past the lease deadline: {m:?}",
            cancelled - deadline
        );
        assert!(
            reason.contains(DEADLINE_PASSED),
            "job {id}: the step is told why: {reason:?}"
        );
        assert_eq!(
            m.completed, None,
            "job {id}: the cut-off step ran to its end and wrote its sink: {m:?}"
        );
        let hard = m.hard_stopped.expect("hard-stopped");
        assert!(
            hard <= deadline + GRACE.as_millis() as i64,
            "job {id}: hard stop {} ms past deadline + grace: {m:?}",
            hard - deadline - GRACE.as_millis() as i64
        );
        let warned = log_lines(id.as_str())
            .into_iter()
            .filter(|l| l.contains(DEADLINE_PASSED) && l.contains("since_confirmed"))
            .count();
        assert_eq!(
            warned, 1,
            "job {id}: one warning names the job and the time since its last confirmation"
        );
    }

    // traffic resumes: the cut-off attempts write nothing, the worker goes on
    let dumps: Vec<_> = ids
        .iter()
        .map(|id| srv.dump(&queue.keys().job(id.as_str())))
        .collect();
    proxy.resume();
    let quick = direct
        .enqueue::<Stubborn>(&Work { ms: 10 })
        .await
        .expect("enqueue")
        .id;
    wait_until_async(
        WAIT,
        "the worker runs a new job once traffic resumes",
        || {
            let (queue, quick) = (&queue, &quick);
            async move {
                queue.job(quick).await.ok().flatten().map(|j| j.state) == Some(JobState::Succeeded)
            }
        },
    )
    .await;
    for (id, dump) in ids.iter().zip(dumps) {
        assert_eq!(
            srv.dump(&queue.keys().job(id.as_str())),
            dump,
            "job {id}: the cut-off attempt wrote nothing once traffic resumed"
        );
        let j = queue.job(id).await.expect("read").expect("exists");
        assert_eq!(j.state, JobState::Stale);
    }
    let _ = stop.send(());
    run.await.expect("join").expect("worker ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_worker_stops_5s_steps_before_they_write_past_the_lease_deadline() {
    stalled_worker_stops_its_steps_by_its_deadline(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_worker_cancels_15s_steps_at_its_own_deadline_not_when_traffic_resumes() {
    stalled_worker_stops_its_steps_by_its_deadline(Duration::from_secs(15)).await;
}
