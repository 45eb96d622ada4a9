//! The runtime's promises, proved with real worker replicas: each replica is a
//! separate OS process (`leasehold-replica-fixture`, see `tests/fixture/replica.rs`)
//! talking to a private `redis-server`, killed with SIGKILL, stopped with
//! SIGTERM, or cut off from Redis by a TCP proxy.
//!
//! Every wait is on an observable condition with a generous deadline; every
//! child process is SIGKILLed and reaped when its handle drops (and, should the
//! whole test process die, the fixture exits when its stdin closes). The tests
//! run one at a time (they are timing-sensitive: leases of 1 s renewed every
//! 250 ms), and on failure each replica's output is printed.

mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold_core::redis;
use leasehold_core::{
    Cancelled, Error, FlowSpec, Job, JobId, JobState, Lease, NewJob, Outcome, PauseScope, Queue,
    QueueConfig, Renewal, RetryMode,
};
use leasehold_testkit::{wait_until_async, RedisServer, TcpProxy};
use serde::Deserialize;
use serde_json::{json, Value};
use support::{redis_now, settle_held};

const FIXTURE: &str = env!("CARGO_BIN_EXE_leasehold-replica-fixture");
/// Deadline of every wait.
const WAIT: Duration = Duration::from_secs(30);
/// The queue of the fixture's pipeline `etl`.
const QUEUE: &str = "etl";

/// One test at a time: the scenarios measure leases of 1 s on what may be a
/// loaded 2-core machine; running them side by side would only add noise.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// ---- replicas ------------------------------------------------------------------------

/// A fixture process. Dropping it SIGKILLs and reaps it; if the test is
/// failing, its output is printed.
struct Replica {
    name: String,
    child: Option<Child>,
    pid: u32,
    lines: Arc<Mutex<Vec<String>>>,
    readers: Vec<std::thread::JoinHandle<()>>,
    id: String,
}

impl Replica {
    fn spawn(name: &str, mode: &str, flags: &[(&str, String)]) -> Replica {
        let mut command = Command::new(FIXTURE);
        command.arg(mode).args(["--label", name]);
        for (flag, value) in flags {
            command.arg(format!("--{flag}")).arg(value);
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {FIXTURE}: {e}"));
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let mut readers = Vec::new();
        for (stream, tag) in [
            (Box::new(stdout) as Box<dyn std::io::Read + Send>, "out"),
            (Box::new(stderr), "err"),
        ] {
            let lines = lines.clone();
            readers.push(std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    lines.lock().unwrap().push(format!("{tag}| {line}"));
                }
            }));
        }
        Replica {
            name: name.to_owned(),
            pid: child.id(),
            child: Some(child),
            lines,
            readers,
            id: String::new(),
        }
    }

    /// A `worker` replica with the scenario defaults (lease 1 s, renew 250 ms,
    /// sweep 200 ms) and `overrides`.
    fn worker(name: &str, url: &str, overrides: &[(&str, &str)]) -> Replica {
        let mut flags: BTreeMap<&str, String> = [
            ("url", url.to_owned()),
            ("concurrency", "4".into()),
            ("lease-ttl-ms", "1000".into()),
            ("renew-ms", "250".into()),
            ("sweep-ms", "200".into()),
            ("cancel-grace-ms", "1000".into()),
            ("shutdown-grace-ms", "10000".into()),
            ("max-idle-ms", "500".into()),
        ]
        .into_iter()
        .collect();
        for (k, v) in overrides {
            flags.insert(k, (*v).to_owned());
        }
        let flags: Vec<(&str, String)> = flags.into_iter().collect();
        Replica::spawn(name, "worker", &flags)
    }

    fn output(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    fn has_line(&self, prefix: &str) -> Option<String> {
        self.output().into_iter().find_map(|l| {
            l.strip_prefix("out| ")
                .filter(|l| l.starts_with(prefix))
                .map(str::to_owned)
        })
    }

    /// Waits for the `READY <id>` line and returns the worker id.
    async fn ready(&mut self) -> String {
        let name = self.name.clone();
        let mut exited = None;
        wait_until_async(WAIT, &format!("replica {name} is ready"), || {
            let ready = self.has_line("READY ").is_some();
            if !ready {
                if let Some(status) = self
                    .child
                    .as_mut()
                    .and_then(|c| c.try_wait().ok().flatten())
                {
                    exited = Some(status);
                }
            }
            async move { ready || exited.is_some() }
        })
        .await;
        if let Some(status) = exited {
            panic!(
                "replica {name} exited with {status} before it was ready:\n{}",
                self.output().join("\n")
            );
        }
        self.id = self.has_line("READY ").unwrap()["READY ".len()..]
            .trim()
            .to_owned();
        self.id.clone()
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// SIGKILL: the process dies at once, holding whatever it held.
    fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("SIGKILL a replica");
            child.wait().expect("reap a replica");
        }
    }

    /// Sends `signal` to the process.
    fn signal(&self, signal: libc::c_int) {
        assert!(
            self.child.is_some(),
            "replica {} was already killed",
            self.name
        );
        // SAFETY: a plain kill(2) on a child we have not reaped.
        let rc = unsafe { libc::kill(self.pid as libc::pid_t, signal) };
        assert_eq!(rc, 0, "signal {signal} to replica {}", self.name);
    }

    /// SIGTERM: the worker shuts down gracefully.
    fn sigterm(&self) {
        self.signal(libc::SIGTERM);
    }

    /// Waits for the process to exit and returns its status.
    async fn exit_status(&mut self, deadline: Duration) -> ExitStatus {
        let started = Instant::now();
        loop {
            let child = self.child.as_mut().expect("the replica was not killed");
            if let Some(status) = child.try_wait().expect("poll a replica") {
                // the process is gone: read what it wrote to the end
                for reader in self.readers.drain(..) {
                    let _ = reader.join();
                }
                return status;
            }
            assert!(
                started.elapsed() < deadline,
                "replica {} did not exit within {deadline:?}",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGTERM, then asserts a clean exit (status 0) within `deadline`.
    async fn stop_cleanly(&mut self, deadline: Duration) {
        self.sigterm();
        let status = self.exit_status(deadline).await;
        assert!(
            status.success(),
            "replica {} exited with {status}:\n{}",
            self.name,
            self.output().join("\n")
        );
        assert!(
            self.has_line("EXIT ok").is_some(),
            "replica {} did not report a clean exit",
            self.name
        );
        assert!(
            !self.output().iter().any(|l| l.contains("panicked")),
            "replica {} panicked",
            self.name
        );
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        if std::thread::panicking() {
            eprintln!(
                "---- replica {} (pid {}, id {}) ----",
                self.name, self.pid, self.id
            );
            for line in self.output() {
                eprintln!("{line}");
            }
        }
    }
}

// ---- reading Redis ---------------------------------------------------------------------

async fn query<T: redis::FromRedisValue>(queue: &Queue, cmd: &mut redis::Cmd) -> T {
    let mut conn = queue
        .pool()
        .get()
        .await
        .expect("a connection to the test redis");
    cmd.query_async(&mut conn)
        .await
        .expect("a query on the test redis")
}

/// A step record from `fixture:spans`.
#[derive(Debug, Clone, Deserialize)]
#[allow(dead_code)]
struct Span {
    ev: String,
    job: String,
    step: String,
    index: usize,
    attempt: u32,
    fence: u64,
    resource: Option<String>,
    worker: String,
    pid: u32,
    label: String,
    t: u64,
    #[serde(default)]
    begin: u64,
    #[serde(default)]
    outcome: String,
    #[serde(default)]
    detail: String,
    /// `ctx.lease_valid()` as the step ended (end records of finished steps).
    #[serde(default)]
    lease_valid: Option<bool>,
}

async fn spans(queue: &Queue) -> Vec<Span> {
    let raw: Vec<String> = query(
        queue,
        redis::cmd("LRANGE").arg("fixture:spans").arg(0).arg(-1),
    )
    .await;
    raw.iter()
        .map(|s| serde_json::from_str(s).unwrap_or_else(|e| panic!("bad span {s}: {e}")))
        .collect()
}

async fn spans_of(queue: &Queue, job: &JobId) -> Vec<Span> {
    spans(queue)
        .await
        .into_iter()
        .filter(|s| s.job == job.as_str())
        .collect()
}

async fn cleanups_of(queue: &Queue, job: &JobId) -> Vec<Value> {
    let raw: Vec<String> = query(
        queue,
        redis::cmd("LRANGE").arg("fixture:cleanups").arg(0).arg(-1),
    )
    .await;
    raw.iter()
        .map(|s| serde_json::from_str::<Value>(s).unwrap())
        .filter(|v| v["job"] == job.as_str())
        .collect()
}

/// One entry of the queue's event stream.
#[derive(Debug, Clone)]
#[allow(dead_code)]
struct Event {
    id: String,
    op: String,
    job: String,
    attempt: u32,
    from: String,
    to: String,
    by: String,
    reason: String,
}

async fn events(queue: &Queue) -> Vec<Event> {
    let raw: Vec<(String, Vec<String>)> = query(
        queue,
        redis::cmd("XRANGE")
            .arg(queue.keys().events())
            .arg("-")
            .arg("+"),
    )
    .await;
    let mut out = Vec::new();
    for (id, flat) in raw {
        let f: HashMap<String, String> = flat
            .chunks(2)
            .map(|c| (c[0].clone(), c[1].clone()))
            .collect();
        let get = |k: &str| f.get(k).cloned().unwrap_or_default();
        out.push(Event {
            id: id.clone(),
            op: get("op"),
            job: get("job"),
            attempt: get("attempt").parse().unwrap_or(0),
            from: get("from"),
            to: get("to"),
            by: get("by"),
            reason: get("reason"),
        });
        // a settle call's further happy-path events: five words each in `more`
        let more = get("more");
        let words: Vec<&str> = more.split_whitespace().collect();
        for w in words.chunks(5) {
            out.push(Event {
                id: id.clone(),
                op: w[0].to_owned(),
                job: w[1].to_owned(),
                attempt: w[2].parse().unwrap_or(0),
                from: w[3].to_owned(),
                to: w[4].to_owned(),
                by: get("by"),
                reason: String::new(),
            });
        }
    }
    out
}

async fn events_of(queue: &Queue, job: &JobId) -> Vec<Event> {
    events(queue)
        .await
        .into_iter()
        .filter(|e| e.job == job.as_str())
        .collect()
}

async fn job(queue: &Queue, id: &JobId) -> Job {
    queue
        .job(id)
        .await
        .expect("read a job")
        .expect("the job exists")
}

async fn state(queue: &Queue, id: &JobId) -> JobState {
    job(queue, id).await.state
}

async fn wait_state(queue: &Queue, id: &JobId, want: JobState) {
    wait_until_async(WAIT, &format!("job {id} is {want}"), || async move {
        queue
            .job(id)
            .await
            .ok()
            .flatten()
            .is_some_and(|j| j.state == want)
    })
    .await;
}

async fn wait_all(queue: &Queue, ids: &[JobId], want: JobState) {
    wait_until_async(
        WAIT,
        &format!("all {} jobs are {want}", ids.len()),
        || async move {
            for id in ids {
                let now = queue.job(id).await.ok().flatten().map(|j| j.state);
                if now != Some(want) {
                    return false;
                }
            }
            true
        },
    )
    .await;
}

/// Polls `probe` every 20 ms until it yields a value; panics naming `what` after [`WAIT`].
async fn wait_for<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            started.elapsed() < WAIT,
            "timed out after {WAIT:?} waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until a step record matching `pred` exists.
async fn wait_span(queue: &Queue, what: &str, pred: impl Fn(&Span) -> bool) -> Span {
    let pred = &pred;
    wait_for(what, || async move {
        spans(queue).await.into_iter().find(|s| pred(s))
    })
    .await
}

fn step_names(job: &Job, attempt: usize) -> Vec<String> {
    job.attempts[attempt]
        .steps
        .iter()
        .map(|s| s.step.clone())
        .collect()
}

// ---- setting up -------------------------------------------------------------------------

async fn client(url: &str) -> Queue {
    Queue::connect(url, QUEUE, QueueConfig::default())
        .await
        .expect("connect to the test redis")
}

/// An `etl` job: `steps` maps step names to plans (`{"ms": .., "ignore_cancel": ..,
/// "ms_on_attempt": {"2": ..}, "fail_retryable_on": [..]}`).
async fn enqueue(queue: &Queue, label: &str, resource: Option<&str>, steps: Value) -> JobId {
    let input = json!({ "label": label, "resource": resource, "steps": steps });
    let mut new = NewJob::new("etl", &input).unwrap().max_attempts(3);
    if let Some(r) = resource {
        new = new.resource(r);
    }
    queue.enqueue(new).await.expect("enqueue").id
}

fn quick_steps(ms: u64) -> Value {
    json!({ "fetch": {"ms": ms}, "validate": {"ms": ms}, "load": {"ms": ms}, "aggregate": {"ms": ms} })
}

// ---- 1. a replica dies between lease and start ----------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_jobs_of_a_killed_replica_are_requeued_by_a_sweeper_and_completed() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let mut ids = Vec::new();
    for i in 0..4 {
        let resource = if i < 2 {
            Some(format!("shop-{i}"))
        } else {
            None
        };
        ids.push(
            enqueue(
                &queue,
                &format!("j{i}"),
                resource.as_deref(),
                quick_steps(20),
            )
            .await,
        );
    }

    let mut holder = Replica::spawn(
        "lease-only",
        "lease-only",
        &[
            ("url", srv.url()),
            ("lease-count", "4".into()),
            ("lease-ttl-ms", "1000".into()),
        ],
    );
    let holder_id = holder.ready().await;
    for (i, id) in ids.iter().enumerate() {
        let j = job(&queue, id).await;
        assert_eq!(j.state, JobState::Leased, "{j:?}");
        assert_eq!(j.lease.as_ref().unwrap().worker, holder_id);
        if i < 2 {
            let lock: Option<String> = query(
                &queue,
                redis::cmd("GET").arg(queue.keys().lock(&format!("shop-{i}"))),
            )
            .await;
            assert_eq!(
                lock.as_deref(),
                Some(id.as_str()),
                "the lease took the resource lock"
            );
        }
    }

    let mut replica = Replica::worker("replica-a", &srv.url(), &[]);
    let replica_id = replica.ready().await;
    holder.kill9();

    wait_all(&queue, &ids, JobState::Succeeded).await;
    let all_events = events(&queue).await;
    for id in &ids {
        let evs: Vec<&Event> = all_events.iter().filter(|e| e.job == id.as_str()).collect();
        let ops: Vec<(&str, &str, &str)> = evs
            .iter()
            .map(|e| (e.op.as_str(), e.from.as_str(), e.to.as_str()))
            .collect();
        let sweep = evs
            .iter()
            .position(|e| e.op == "sweep")
            .unwrap_or_else(|| panic!("no sweep event for {id}: {ops:?}"));
        assert_eq!(
            (evs[sweep].from.as_str(), evs[sweep].to.as_str()),
            ("LEASED", "QUEUED"),
            "{ops:?}"
        );
        assert_eq!(evs[sweep].by, holder_id, "the sweep names the dead holder");
        assert_eq!(
            evs[sweep].attempt, 1,
            "requeueing an unstarted lease is not a new attempt"
        );
        assert!(
            evs[..sweep].iter().all(|e| e.op != "start"),
            "the holder never started it: {ops:?}"
        );
        let after: Vec<(&str, &str)> = evs[sweep + 1..]
            .iter()
            .map(|e| (e.op.as_str(), e.by.as_str()))
            .collect();
        assert_eq!(
            after,
            [
                // the replica leases it into a free run slot: started in that call
                ("start", replica_id.as_str()),
                ("finish", replica_id.as_str())
            ],
            "{ops:?}"
        );
        let j = job(&queue, id).await;
        assert_eq!(j.attempt, 1);
        assert_eq!(j.attempts.len(), 1);
        assert_eq!(j.attempts[0].state, JobState::Succeeded);
        assert_eq!(j.attempts[0].worker, replica_id);
        assert_eq!(
            step_names(&j, 0),
            ["fetch", "validate", "load", "aggregate"]
        );
    }
    let sp = spans(&queue).await;
    assert!(
        sp.iter().all(|s| s.worker == replica_id),
        "only the live replica ran steps"
    );
    assert_eq!(
        sp.iter()
            .filter(|s| s.ev == "end" && s.outcome == "done")
            .count(),
        16
    );
    for i in 0..2 {
        let exists: i64 = query(
            &queue,
            redis::cmd("EXISTS").arg(queue.keys().lock(&format!("shop-{i}"))),
        )
        .await;
        assert_eq!(exists, 0, "locks are released");
    }
    let leases: i64 = query(&queue, redis::cmd("ZCARD").arg(queue.keys().leases())).await;
    assert_eq!(leases, 0);
    replica.stop_cleanly(WAIT).await;
}

// ---- 2. a replica dies while RUNNING -----------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_job_of_a_killed_replica_goes_stale_holds_its_lock_and_resumes_after_retry() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let mut a = Replica::worker("replica-a", &srv.url(), &[("concurrency", "2")]);
    let a_id = a.ready().await;

    let slow = enqueue(
        &queue,
        "slow",
        Some("shop-a"),
        json!({
            "fetch": {"ms": 20}, "validate": {"ms": 20},
            "load": {"ms": 60000, "ms_on_attempt": {"2": 50}},
            "aggregate": {"ms": 20},
        }),
    )
    .await;
    wait_span(&queue, "load of the slow job begins on replica-a", |s| {
        s.job == slow.as_str() && s.step == "load" && s.ev == "begin"
    })
    .await;
    let j = job(&queue, &slow).await;
    assert_eq!(j.state, JobState::Running);
    assert_eq!(j.last_step.as_deref(), Some("validate"));
    assert_eq!(
        j.steps.iter().map(|s| s.step.as_str()).collect::<Vec<_>>(),
        ["fetch", "validate"]
    );
    assert_eq!(j.worker.as_deref(), Some(a_id.as_str()));

    // a second job on the same resource: leased, found locked, parked
    let parked = enqueue(&queue, "parked", Some("shop-a"), quick_steps(20)).await;
    let parked_key = queue.keys().parked("shop-a");
    wait_until_async(WAIT, "the second job is parked on shop-a", || {
        let (queue, parked_key, parked) = (&queue, &parked_key, &parked);
        async move {
            let score: Option<f64> = query(
                queue,
                redis::cmd("ZSCORE").arg(parked_key).arg(parked.as_str()),
            )
            .await;
            score.is_some()
        }
    })
    .await;

    let mut b = Replica::worker("replica-b", &srv.url(), &[("concurrency", "2")]);
    let b_id = b.ready().await;
    a.kill9();

    // the sweeper (replica-b's, every 200 ms; the test sweeps too) finds the expired lease
    wait_until_async(WAIT, "the slow job is STALE", || {
        let (queue, slow) = (&queue, &slow);
        async move {
            queue.sweep(100).await.expect("sweep");
            state(queue, slow).await == JobState::Stale
        }
    })
    .await;
    let lock_key = queue.keys().lock("shop-a");
    let j = job(&queue, &slow).await;
    assert!(j.lease.is_none(), "the token is gone: {j:?}");
    assert_eq!(
        j.worker.as_deref(),
        Some(a_id.as_str()),
        "the dead worker is kept for the operator"
    );
    assert_eq!(j.last_step.as_deref(), Some("validate"));
    let sweep_ev = events_of(&queue, &slow)
        .await
        .into_iter()
        .find(|e| e.op == "sweep")
        .expect("a sweep event");
    assert_eq!(
        (sweep_ev.from.as_str(), sweep_ev.to.as_str()),
        ("RUNNING", "STALE")
    );

    // STALE holds the lock (no TTL), and the parked job stays parked, across sweeps
    let quiet_until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < quiet_until {
        queue.sweep(100).await.expect("sweep");
        let lock: Option<String> = query(&queue, redis::cmd("GET").arg(&lock_key)).await;
        assert_eq!(
            lock.as_deref(),
            Some(slow.as_str()),
            "the STALE job holds shop-a"
        );
        let pttl: i64 = query(&queue, redis::cmd("PTTL").arg(&lock_key)).await;
        assert_eq!(pttl, -1, "a STALE job's lock does not expire");
        assert_eq!(state(&queue, &parked).await, JobState::Queued);
        let score: Option<f64> = query(
            &queue,
            redis::cmd("ZSCORE").arg(&parked_key).arg(parked.as_str()),
        )
        .await;
        assert!(score.is_some(), "the second job stays parked");
        assert_eq!(state(&queue, &slow).await, JobState::Stale);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        spans_of(&queue, &parked).await.is_empty(),
        "the parked job never ran"
    );

    // the operator resumes it
    let retried_at = redis_now(&queue).await;
    let n = queue
        .retry(
            &slow,
            RetryMode::Resume,
            "operator",
            "sink checked: resume after validate",
        )
        .await
        .expect("retry");
    assert_eq!(n, 2);
    wait_all(&queue, &[slow.clone(), parked.clone()], JobState::Succeeded).await;

    let j = job(&queue, &slow).await;
    assert_eq!(j.attempts.len(), 2);
    assert_eq!(j.attempts[0].state, JobState::Stale);
    assert_eq!(j.attempts[0].worker, a_id);
    assert_eq!(step_names(&j, 0), ["fetch", "validate"]);
    let resolution = j.attempts[0]
        .resolution
        .as_ref()
        .expect("the retry decision is recorded");
    assert_eq!(
        (resolution.action.as_str(), resolution.by.as_str()),
        ("retry", "operator")
    );
    assert_eq!(j.attempts[1].state, JobState::Succeeded);
    assert_eq!(j.attempts[1].worker, b_id);
    assert_eq!(step_names(&j, 1), ["load", "aggregate"]);
    assert!(
        j.attempts[1].fence > j.attempts[0].fence,
        "the new lease has a higher fence"
    );

    let sp = spans_of(&queue, &slow).await;
    let second: BTreeSet<&str> = sp
        .iter()
        .filter(|s| s.attempt == 2)
        .map(|s| s.step.as_str())
        .collect();
    assert_eq!(
        second,
        BTreeSet::from(["load", "aggregate"]),
        "attempt 2 resumed at load: {sp:?}"
    );
    assert!(sp
        .iter()
        .filter(|s| s.attempt == 2)
        .all(|s| s.worker == b_id));
    let first: Vec<(&str, &str)> = sp
        .iter()
        .filter(|s| s.attempt == 1)
        .map(|s| (s.step.as_str(), s.ev.as_str()))
        .collect();
    assert_eq!(
        first,
        [
            ("fetch", "begin"),
            ("fetch", "end"),
            ("validate", "begin"),
            ("validate", "end"),
            ("load", "begin")
        ],
        "attempt 1 died in load"
    );

    // the parked job ran only after the retry released the lock, never alongside the resumed job
    let p = spans_of(&queue, &parked).await;
    let p_begin = p.iter().map(|s| s.t).min().unwrap();
    let p_end = p
        .iter()
        .filter(|s| s.ev == "end")
        .map(|s| s.t)
        .max()
        .unwrap();
    assert!(
        p_begin as i64 / 1000 >= retried_at - 5,
        "the parked job waited for the operator"
    );
    let s2: Vec<&Span> = sp.iter().filter(|s| s.attempt == 2).collect();
    let s_begin = s2.iter().map(|s| s.t).min().unwrap();
    let s_end = s2
        .iter()
        .filter(|s| s.ev == "end")
        .map(|s| s.t)
        .max()
        .unwrap();
    assert!(
        p_end <= s_begin || s_end <= p_begin,
        "jobs on shop-a overlapped"
    );
    let exists: i64 = query(&queue, redis::cmd("EXISTS").arg(&lock_key)).await;
    assert_eq!(exists, 0);
    b.stop_cleanly(WAIT).await;
}

// ---- 3. cancel during a step ----------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_during_fetch_interrupts_it_and_nothing_after_runs() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let mut w = Replica::worker("replica-a", &srv.url(), &[]);
    let w_id = w.ready().await;
    let id = enqueue(&queue, "cancel-me", None, json!({ "fetch": {"ms": 30000} })).await;
    wait_span(&queue, "fetch begins", |s| {
        s.job == id.as_str() && s.step == "fetch" && s.ev == "begin"
    })
    .await;

    let reason = "operator: wrong input window";
    let requested = queue.cancel(&id, reason, "operator").await.expect("cancel");
    assert_eq!(
        requested,
        Cancelled::Requested {
            state: JobState::Running
        }
    );
    wait_state(&queue, &id, JobState::Cancelled).await;
    wait_until_async(WAIT, "the cleanup hook ran", || {
        let (queue, id) = (&queue, &id);
        async move { !cleanups_of(queue, id).await.is_empty() }
    })
    .await;

    wait_span(&queue, "fetch ends", |s| {
        s.job == id.as_str() && s.step == "fetch" && s.ev == "end"
    })
    .await;
    let sp = spans_of(&queue, &id).await;
    let steps: Vec<(&str, &str, &str)> = sp
        .iter()
        .map(|s| (s.step.as_str(), s.ev.as_str(), s.outcome.as_str()))
        .collect();
    assert_eq!(
        steps,
        [("fetch", "begin", ""), ("fetch", "end", "cancelled")],
        "validate never started"
    );
    assert!(
        sp[1].t - sp[1].begin < 15_000_000,
        "fetch stopped early (phase B): {:?}",
        sp[1]
    );
    assert_eq!(sp[1].detail, reason, "the step saw the cancel reason");

    let j = job(&queue, &id).await;
    assert_eq!(j.state, JobState::Cancelled);
    assert_eq!(j.last_step, None, "no step completed");
    assert!(j.cleanup_needed);
    assert_eq!(j.cancel.as_ref().map(|c| c.reason.as_str()), Some(reason));
    assert_eq!(j.attempts.len(), 1);
    let a = &j.attempts[0];
    assert_eq!(a.state, JobState::Cancelled);
    assert_eq!(a.worker, w_id);
    assert!(a.steps.is_empty());
    assert!(a.cleanup_needed, "fetch was cut mid-way");
    let cancel = a
        .cancel
        .as_ref()
        .expect("the attempt keeps the cancel request");
    assert_eq!(
        (cancel.reason.as_str(), cancel.by.as_str()),
        (reason, "operator")
    );
    assert_eq!(a.reason.as_deref(), Some(reason));

    let cleanups = cleanups_of(&queue, &id).await;
    assert_eq!(cleanups.len(), 1, "{cleanups:?}");
    let c = &cleanups[0];
    assert_eq!(c["reason"], "cancelled");
    assert_eq!(c["text"], reason);
    assert_eq!(c["last_completed_step"], Value::Null);
    assert_eq!(c["cut_mid_step"], true);

    let evs: Vec<(String, String, String)> = events_of(&queue, &id)
        .await
        .into_iter()
        .map(|e| (e.op, e.from, e.to))
        .collect();
    let want: Vec<(String, String, String)> = [
        ("enqueue", "", "QUEUED"),
        // leased into a free run slot: started in the same call
        ("start", "QUEUED", "RUNNING"),
        ("cancel", "RUNNING", "RUNNING"),
        ("finish", "RUNNING", "CANCELLED"),
    ]
    .iter()
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    .collect();
    assert_eq!(evs, want);
    w.stop_cleanly(WAIT).await;
}

// ---- 4. a step longer than the lease --------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_three_times_the_lease_ttl_stays_running_under_sweeps() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let mut w = Replica::worker("replica-a", &srv.url(), &[("sweep-ms", "100")]);
    let w_id = w.ready().await;
    let id = enqueue(&queue, "long", None, json!({ "load": {"ms": 3000} })).await;

    let mut seen: Vec<JobState> = Vec::new();
    let mut test_sweeps = 0;
    let started = Instant::now();
    loop {
        // sweeps from the test as well as the replica's own, every 100 ms
        let report = queue.sweep(100).await.expect("sweep");
        test_sweeps += 1;
        assert!(
            report.moves.iter().all(|m| m.job != id),
            "a live job was swept: {report:?}"
        );
        let s = state(&queue, &id).await;
        if seen.last() != Some(&s) {
            seen.push(s);
        }
        if s == JobState::Succeeded {
            break;
        }
        assert!(
            started.elapsed() < WAIT,
            "the long job did not finish: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let running_from = seen
        .iter()
        .position(|s| *s == JobState::Running)
        .expect("seen RUNNING");
    assert_eq!(
        &seen[running_from..],
        [JobState::Running, JobState::Succeeded],
        "{seen:?}"
    );
    assert!(test_sweeps > 20, "sweeps ran meanwhile ({test_sweeps})");

    let load = spans_of(&queue, &id)
        .await
        .into_iter()
        .find(|s| s.step == "load" && s.ev == "end")
        .unwrap();
    assert_eq!(load.outcome, "done");
    assert!(
        load.t - load.begin >= 3_000_000,
        "load ran 3 lease TTLs: {load:?}"
    );
    let j = job(&queue, &id).await;
    assert_eq!(j.attempt, 1);
    assert_eq!(j.attempts.len(), 1, "a single attempt");
    assert_eq!(j.attempts[0].worker, w_id);
    assert_eq!(
        step_names(&j, 0),
        ["fetch", "validate", "load", "aggregate"]
    );
    assert!(events_of(&queue, &id).await.iter().all(|e| e.op != "sweep"));
    w.stop_cleanly(WAIT).await;
}

// ---- 5. resource locks across replicas ------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_on_one_resource_never_overlap_across_replicas() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let mut a = Replica::worker("replica-a", &srv.url(), &[]);
    let mut b = Replica::worker("replica-b", &srv.url(), &[]);
    a.ready().await;
    b.ready().await;

    let inputs: Vec<NewJob> = (0..12)
        .map(|i| {
            let resource = format!("res-{}", i % 3);
            let input =
                json!({ "label": format!("j{i}"), "resource": resource, "steps": quick_steps(60) });
            NewJob::new("etl", &input)
                .unwrap()
                .resource(resource)
                .max_attempts(3)
        })
        .collect();
    let ids: Vec<JobId> = queue
        .enqueue_bulk(inputs)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    wait_all(&queue, &ids, JobState::Succeeded).await;

    // each job's interval: from its first step's start to its last step's end
    let sp = spans(&queue).await;
    let mut intervals: BTreeMap<String, (String, u64, u64)> = BTreeMap::new();
    for s in &sp {
        let res = s.resource.clone().expect("every job has a resource");
        let e = intervals.entry(s.job.clone()).or_insert((res, u64::MAX, 0));
        let (from, to) = if s.ev == "begin" {
            (s.t, s.t)
        } else {
            (s.begin, s.t)
        };
        e.1 = e.1.min(from);
        e.2 = e.2.max(to);
    }
    assert_eq!(intervals.len(), 12);
    let list: Vec<(&String, &(String, u64, u64))> = intervals.iter().collect();
    let mut cross_overlaps = 0;
    for (i, (ja, (ra, a0, a1))) in list.iter().enumerate() {
        for (jb, (rb, b0, b1)) in &list[i + 1..] {
            let overlap = a0 < b1 && b0 < a1;
            if ra == rb {
                assert!(
                    !overlap,
                    "{ja} and {jb} both held {ra} at once: {a0}..{a1} vs {b0}..{b1}"
                );
            } else if overlap {
                cross_overlaps += 1;
            }
        }
    }
    assert!(
        cross_overlaps > 0,
        "jobs on different resources ran in parallel"
    );
    for r in 0..3 {
        let exists: i64 = query(
            &queue,
            redis::cmd("EXISTS").arg(queue.keys().lock(&format!("res-{r}"))),
        )
        .await;
        assert_eq!(exists, 0);
    }
    let parked: i64 = query(
        &queue,
        redis::cmd("SCARD").arg(queue.keys().parked_resources()),
    )
    .await;
    assert_eq!(parked, 0);
    a.stop_cleanly(WAIT).await;
    b.stop_cleanly(WAIT).await;
}

// ---- 6. Redis restarts under running replicas ------------------------------------------------------------

/// How long Redis stays down.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Outage {
    /// Stop and start again at once: leases normally survive.
    Brief,
    /// Stay down until every lease taken before the stop has expired.
    PastTheLeases,
}

/// Two replicas run 8 jobs; Redis (AOF, fsync always) is stopped and started
/// again mid-run. Returns how many jobs went STALE and were retried.
async fn run_through_a_restart(outage: Outage) -> usize {
    let mut srv = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let queue = client(&srv.url()).await;
    let mut a = Replica::worker("replica-a", &srv.url(), &[("concurrency", "3")]);
    let mut b = Replica::worker("replica-b", &srv.url(), &[("concurrency", "3")]);
    a.ready().await;
    b.ready().await;
    let mut ids = Vec::new();
    for i in 0..8 {
        let resource = (i % 2 == 0).then(|| format!("part-{}", i % 4));
        ids.push(
            enqueue(
                &queue,
                &format!("j{i}"),
                resource.as_deref(),
                quick_steps(300),
            )
            .await,
        );
    }
    // mid-run: some steps completed, some running
    wait_until_async(WAIT, "jobs are mid-run", || {
        let (queue, ids) = (&queue, &ids);
        async move {
            let mut running = 0;
            for id in ids {
                let j = job(queue, id).await;
                if j.state == JobState::Running && !j.steps.is_empty() {
                    running += 1;
                }
            }
            running >= 2
        }
    })
    .await;
    let last_deadline: Vec<(String, f64)> = query(
        &queue,
        redis::cmd("ZRANGE")
            .arg(queue.keys().leases())
            .arg(-1)
            .arg(-1)
            .arg("WITHSCORES"),
    )
    .await;
    let last_deadline = last_deadline.first().map_or(0, |(_, ms)| *ms as u64);

    tokio::task::block_in_place(|| srv.stop());
    if outage == Outage::PastTheLeases {
        // Redis's clock is this machine's wall clock: wait until it passed every lease deadline
        let wall_ms = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64
        };
        wait_until_async(
            WAIT,
            "every lease ran out while Redis was down",
            || async move { wall_ms() > last_deadline + 500 },
        )
        .await;
    }
    tokio::task::block_in_place(|| srv.restart());
    assert!(a.alive() && b.alive(), "the replicas survived the outage");

    // every job settles: SUCCEEDED, STALE when a lease ran out while Redis was away,
    // or QUEUED behind the lock a STALE job holds; nothing stays LEASED/RUNNING with
    // an expired lease once swept
    let settled = |queue: Queue, ids: Vec<JobId>| async move {
        queue.sweep(100).await.ok()?;
        let now = redis_now(&queue).await;
        let mut stale = Vec::new();
        for id in &ids {
            let j = queue.job(id).await.ok()??;
            match j.state {
                JobState::Succeeded => {}
                JobState::Stale => stale.push(id.clone()),
                JobState::Queued => {
                    let resource = j.resource.as_deref()?;
                    let holder: Option<String> =
                        query(&queue, redis::cmd("GET").arg(queue.keys().lock(resource))).await;
                    let holder = JobId::parse(&holder?).ok()?;
                    if queue.job(&holder).await.ok()??.state != JobState::Stale {
                        return None;
                    }
                }
                JobState::Leased | JobState::Running => {
                    let deadline = j.lease.as_ref().map_or(0, |l| l.deadline);
                    // (renewals may land between the sweep and this read: allow one TTL of slack)
                    assert!(
                        deadline > now - 1000,
                        "{id} is {} with an expired lease after a sweep",
                        j.state
                    );
                    return None;
                }
                _ => return None,
            }
        }
        Some(stale)
    };
    let stale = wait_for("every job is SUCCEEDED or STALE", || {
        settled(queue.clone(), ids.clone())
    })
    .await;
    for id in &stale {
        let j = job(&queue, id).await;
        assert!(j.lease.is_none() && j.stale_at.is_some(), "{j:?}");
        queue
            .retry(id, RetryMode::Resume, "operator", "after the Redis restart")
            .await
            .expect("retry");
    }
    wait_all(&queue, &ids, JobState::Succeeded).await;

    let order = ["fetch", "validate", "load", "aggregate"];
    let sp = spans(&queue).await;
    for id in &ids {
        let j = job(&queue, id).await;
        assert_eq!(
            j.attempts.len() as u32,
            j.attempt,
            "every attempt is recorded: {j:?}"
        );
        let mut done: Vec<String> = Vec::new();
        for (i, a) in j.attempts.iter().enumerate() {
            assert_eq!(a.n as usize, i + 1);
            if i + 1 == j.attempts.len() {
                assert_eq!(a.state, JobState::Succeeded);
            } else {
                assert_eq!(a.state, JobState::Stale, "{j:?}");
                assert_eq!(
                    a.resolution.as_ref().map(|r| r.action.as_str()),
                    Some("retry")
                );
                assert!(stale.contains(id));
            }
            // a resumed attempt runs no step an earlier attempt completed
            for s in sp
                .iter()
                .filter(|s| s.job == id.as_str() && s.attempt == a.n && s.ev == "begin")
            {
                assert!(
                    !done.contains(&s.step),
                    "attempt {} of {id} re-ran {}: {j:?}",
                    a.n,
                    s.step
                );
            }
            done.extend(a.steps.iter().map(|s| s.step.clone()));
        }
        assert_eq!(
            done, order,
            "each step completed once, in order, across attempts: {j:?}"
        );
        assert!(j.lease.is_none());
    }
    let leases: i64 = query(&queue, redis::cmd("ZCARD").arg(queue.keys().leases())).await;
    assert_eq!(leases, 0);
    assert!(a.alive() && b.alive());
    a.stop_cleanly(WAIT).await;
    b.stop_cleanly(WAIT).await;
    stale.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_survive_a_redis_restart_and_every_job_ends_truthfully() {
    let _serial = SERIAL.lock().await;
    let stale = run_through_a_restart(Outage::Brief).await;
    eprintln!("{stale} jobs went STALE across a brief restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_whose_leases_ran_out_during_an_outage_go_stale_and_resume_after_retry() {
    let _serial = SERIAL.lock().await;
    let stale = run_through_a_restart(Outage::PastTheLeases).await;
    assert!(
        stale >= 2,
        "the jobs running at the stop went STALE ({stale})"
    );
}

// ---- 7. a replica cut off from Redis --------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_replica_stops_its_step_and_its_late_writes_are_refused() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start_tcp();
    let proxy = TcpProxy::start(
        format!("127.0.0.1:{}", srv.port().unwrap())
            .parse()
            .unwrap(),
    );
    let queue = client(&srv.url()).await;
    let mut w = Replica::worker(
        "cut-off",
        &proxy.url(),
        &[
            ("spans-url", &srv.url()),
            ("sweep-ms", "60000"),
            ("cancel-grace-ms", "2000"),
        ],
    );
    let w_id = w.ready().await;
    let id = enqueue(
        &queue,
        "cut",
        Some("shop-z"),
        json!({ "fetch": {"ms": 20}, "validate": {"ms": 20}, "load": {"ms": 20000} }),
    )
    .await;
    let load = wait_span(&queue, "load begins", |s| {
        s.job == id.as_str() && s.step == "load" && s.ev == "begin"
    })
    .await;
    let before = job(&queue, &id).await;
    assert_eq!(before.state, JobState::Running);
    let held = before.lease.clone().expect("a live lease");

    proxy.block();
    let worker_key = format!("{}:worker:{w_id}", queue.keys().base());
    wait_until_async(WAIT, "the job is swept STALE", || {
        let (queue, id) = (&queue, &id);
        async move {
            queue.sweep(100).await.expect("sweep");
            state(queue, id).await == JobState::Stale
        }
    })
    .await;
    let evs = events(&queue).await;
    let sweep = evs
        .iter()
        .rposition(|e| e.op == "sweep" && e.job == id.as_str())
        .expect("the sweep event");
    assert_eq!(
        (evs[sweep].from.as_str(), evs[sweep].to.as_str()),
        ("RUNNING", "STALE")
    );
    let sweep_id = evs[sweep].id.clone();

    // the replica saw it lost the lease and stopped the step early (its spans go straight to Redis)
    let end = wait_span(&queue, "the cut-off step ends", |s| {
        s.job == id.as_str() && s.step == "load" && s.ev == "end"
    })
    .await;
    assert_eq!(end.outcome, "cancelled", "{end:?}");
    assert_eq!(
        end.lease_valid,
        Some(false),
        "the step's own lease check says the lease ran out: {end:?}"
    );
    assert!(
        end.t - load.t < 15_000_000,
        "stopped well before its 20 s of work: {end:?}"
    );
    assert!(end.detail.contains("lease"), "{end:?}");
    let job_key = queue.keys().job(id.as_str());
    let snapshot = srv.dump(&job_key);
    assert!(!w.output().iter().any(|l| l.contains("panicked")));

    // reconnect: the replica registers itself again once the proxy lets it through
    wait_until_async(
        WAIT,
        "the replica's registration expired while cut off",
        || {
            let (queue, key) = (&queue, &worker_key);
            async move { query::<i64>(queue, redis::cmd("EXISTS").arg(key)).await == 0 }
        },
    )
    .await;
    proxy.unblock();
    wait_until_async(WAIT, "the replica reconnected", || {
        let (queue, key) = (&queue, &worker_key);
        async move { query::<i64>(queue, redis::cmd("EXISTS").arg(key)).await == 1 }
    })
    .await;

    // the zombie's own token is refused for every late write
    let zombie = Lease {
        job: id.clone(),
        token: held.token.clone(),
        fence: held.fence,
        attempt: 1,
        pipeline: "etl".into(),
        input: before.input.to_string(),
        resource: Some("shop-z".into()),
        last_step: None,
        last_output: None,
        ttl: Duration::from_secs(1),
        not_before: before.not_before,
        traceparent: None,
        started: false,
    };
    let refused = |r: &Result<_, Error>| {
        matches!(
            r,
            Err(e @ (Error::LeaseLost { state: JobState::Stale, .. } | Error::Refused { state: JobState::Stale, .. }))
                if e.is_lease_lost()
        )
    };
    let late = queue
        .checkpoint(&zombie, "load", "{\"rows\":1}", Some("aggregate"))
        .await
        .map(|_| ());
    assert!(refused(&late), "a late checkpoint: {late:?}");
    let late = queue.finish(&zombie, &Outcome::Succeeded).await.map(|_| ());
    assert!(refused(&late), "a late finish: {late:?}");
    let renewal = queue.renew(&[&zombie]).await.unwrap();
    assert_eq!(
        renewal,
        [Renewal::Lost {
            state: Some(JobState::Stale)
        }]
    );

    // a few heartbeats of the reconnected replica later, nothing of the job changed
    let mark = Instant::now();
    wait_until_async(WAIT, "a few heartbeats passed", || async move {
        mark.elapsed() > Duration::from_millis(750)
    })
    .await;
    assert_eq!(
        srv.dump(&job_key),
        snapshot,
        "the cut-off replica wrote nothing after the sweep"
    );
    let j = job(&queue, &id).await;
    assert_eq!(j.state, JobState::Stale);
    assert!(
        j.attempts.is_empty(),
        "no attempt record was written by the zombie: {j:?}"
    );
    assert_eq!(j.last_step.as_deref(), Some("validate"));
    let later: Vec<Event> = events(&queue)
        .await
        .into_iter()
        .filter(|e| e.id > sweep_id && (e.job == id.as_str() || e.by == w_id))
        .collect();
    assert!(later.is_empty(), "events after the sweep: {later:?}");
    let lock: Option<String> =
        query(&queue, redis::cmd("GET").arg(queue.keys().lock("shop-z"))).await;
    assert_eq!(
        lock.as_deref(),
        Some(id.as_str()),
        "the STALE job keeps its lock"
    );
    w.stop_cleanly(WAIT).await;
}

// ---- 7b. a replica paused past its lease -----------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_replica_wakes_up_to_refusals_and_writes_nothing() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let mut w = Replica::worker("paused", &srv.url(), &[("sweep-ms", "60000")]);
    let w_id = w.ready().await;
    let id = enqueue(
        &queue,
        "paused",
        Some("shop-p"),
        json!({ "fetch": {"ms": 20}, "validate": {"ms": 20}, "load": {"ms": 1500} }),
    )
    .await;
    let load = wait_span(&queue, "load begins", |s| {
        s.job == id.as_str() && s.step == "load" && s.ev == "begin"
    })
    .await;

    // a stop-the-world pause (GC, VM freeze): the process keeps its lease in memory
    w.signal(libc::SIGSTOP);
    wait_until_async(WAIT, "the job is swept STALE", || {
        let (queue, id) = (&queue, &id);
        async move {
            queue.sweep(100).await.expect("sweep");
            state(queue, id).await == JobState::Stale
        }
    })
    .await;
    let sweep_id = events_of(&queue, &id)
        .await
        .into_iter()
        .rfind(|e| e.op == "sweep")
        .expect("a sweep event")
        .id;
    let job_key = queue.keys().job(id.as_str());
    let snapshot = srv.dump(&job_key);
    // resume once the step's work is due, so it wakes up wanting to checkpoint
    let wall_us = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros() as u64
    };
    wait_until_async(WAIT, "the paused step's work is due", || async move {
        wall_us() > load.t + 1_600_000
    })
    .await;
    w.signal(libc::SIGCONT);

    // it is told the lease is gone (a renewal, a checkpoint), or it gives the
    // lease up by itself first: its local deadline passed during the pause
    wait_until_async(WAIT, "the paused replica learns its lease is gone", || {
        let out = w.output();
        async move {
            out.iter().any(|l| {
                ((l.contains("lease lost") || l.contains("lease is gone"))
                    && (l.contains("Stale") || l.contains("STALE")))
                    || l.contains("lease deadline passed without a confirmed renewal")
            })
        }
    })
    .await;
    wait_span(&queue, "the paused step ends", |s| {
        s.job == id.as_str() && s.step == "load" && s.ev == "end"
    })
    .await;
    w.stop_cleanly(WAIT).await;

    assert_eq!(
        srv.dump(&job_key),
        snapshot,
        "the paused replica wrote nothing after the sweep"
    );
    let j = job(&queue, &id).await;
    assert_eq!(j.state, JobState::Stale);
    assert!(j.attempts.is_empty(), "{j:?}");
    assert_eq!(j.last_step.as_deref(), Some("validate"));
    let later: Vec<Event> = events(&queue)
        .await
        .into_iter()
        .filter(|e| e.id > sweep_id && (e.job == id.as_str() || e.by == w_id))
        .collect();
    assert!(later.is_empty(), "events after the sweep: {later:?}");
    assert!(
        spans_of(&queue, &id)
            .await
            .iter()
            .all(|s| s.step != "aggregate"),
        "no step after the lost one started"
    );
}

/// A replica whose lease-and-start call is in flight when it is frozen
/// (SIGSTOP): the call is held in a stalled proxy until the replica is
/// stopped, then let through, so Redis leases and starts the job for a
/// replica that cannot run yet. Returns once the job is RUNNING under that
/// lease; the replica is still frozen.
async fn frozen_holding_a_started_lease(
    srv: &RedisServer,
    queue: &Queue,
    proxy: &TcpProxy,
) -> (Replica, JobId) {
    let mut w = Replica::worker(
        "frozen",
        &proxy.url(),
        &[
            ("spans-url", &srv.url()),
            // the replica's own sweeper stays out of it (the test sweeps)
            ("sweep-ms", "60000"),
            ("concurrency", "1"),
            // idle lease calls every 100 ms, slept between (no blocking wait)
            ("max-idle-ms", "100"),
        ],
    );
    w.ready().await;
    // hold one of the replica's idle lease calls (sent while no job is queued;
    // Redis runs it only when the proxy lets it through). A stall that caught a
    // call already on its way to Redis holds its reply instead, and the
    // replica's next call waits for it: let it go and try again.
    let started = Instant::now();
    loop {
        proxy.stall();
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut held = false;
        while !held && Instant::now() < deadline {
            held = settle_held(proxy);
            if !held {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        if held {
            break;
        }
        assert!(
            started.elapsed() < WAIT,
            "no lease call of the replica was held"
        );
        proxy.resume();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let id = enqueue(queue, "frozen", Some("shop-f"), quick_steps(20)).await;
    w.signal(libc::SIGSTOP);
    proxy.resume();
    wait_state(queue, &id, JobState::Running).await;
    let j = job(queue, &id).await;
    assert_eq!(j.attempt, 1);
    assert!(spans_of(queue, &id).await.is_empty(), "nothing ran yet");
    (w, id)
}

/// Waits until Redis's own deadline for the job's lease has passed.
async fn wait_past_lease_deadline(queue: &Queue, id: &JobId) {
    let deadline = job(queue, id).await.lease.expect("a live lease").deadline;
    wait_until_async(WAIT, "the lease's deadline passes", || async move {
        redis_now(queue).await > deadline + 50
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_woken_after_its_job_was_swept_starts_no_step() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start_tcp();
    let proxy = TcpProxy::start(
        format!("127.0.0.1:{}", srv.port().unwrap())
            .parse()
            .unwrap(),
    );
    let queue = client(&srv.url()).await;
    let (mut w, id) = frozen_holding_a_started_lease(&srv, &queue, &proxy).await;

    // the lease runs out while the replica is frozen, and the job is swept
    wait_past_lease_deadline(&queue, &id).await;
    wait_until_async(WAIT, "the job is swept STALE", || {
        let (queue, id) = (&queue, &id);
        async move {
            queue.sweep(100).await.expect("sweep");
            state(queue, id).await == JobState::Stale
        }
    })
    .await;
    let job_key = queue.keys().job(id.as_str());
    let snapshot = srv.dump(&job_key);
    w.signal(libc::SIGCONT);

    // it reads the lease reply only now, past the lease's local deadline
    wait_until_async(WAIT, "the woken replica gives the attempt up", || {
        let out = w.output();
        async move {
            out.iter()
                .any(|l| l.contains("abandoned before step fetch began"))
        }
    })
    .await;
    w.stop_cleanly(WAIT).await;
    assert!(
        spans_of(&queue, &id).await.is_empty(),
        "no step of the swept job began"
    );
    assert_eq!(
        srv.dump(&job_key),
        snapshot,
        "the woken replica wrote nothing"
    );
    assert_eq!(state(&queue, &id).await, JobState::Stale);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_woken_past_its_lease_deadline_records_the_abandoned_attempt() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start_tcp();
    let proxy = TcpProxy::start(
        format!("127.0.0.1:{}", srv.port().unwrap())
            .parse()
            .unwrap(),
    );
    let queue = client(&srv.url()).await;
    let (mut w, id) = frozen_holding_a_started_lease(&srv, &queue, &proxy).await;

    // past the lease's deadline, but nobody swept: Redis still holds the lease
    // for this attempt, so the replica's one try to record why lands
    wait_past_lease_deadline(&queue, &id).await;
    assert_eq!(state(&queue, &id).await, JobState::Running);
    w.signal(libc::SIGCONT);

    wait_state(&queue, &id, JobState::Succeeded).await;
    w.stop_cleanly(WAIT).await;
    let j = job(&queue, &id).await;
    assert_eq!(j.attempt, 2, "{j:?}");
    let first = &j.attempts[0];
    assert_eq!(first.n, 1);
    assert_eq!(first.state, JobState::Failed);
    let error = first.error.as_ref().expect("the abandoned attempt's error");
    assert_eq!(error.kind, "interrupted");
    assert!(
        error.message.contains("abandoned before step fetch began")
            && error.message.contains("no step ran"),
        "{error:?}"
    );
    // the new attempt's retry event says what happened: no worker shut down
    let events = leasehold_core::Inspector::new(queue.clone())
        .job_events(&id)
        .await
        .unwrap();
    let retry = events
        .iter()
        .find(|e| e.op == "retry")
        .expect("a retry event for the new attempt");
    assert!(
        retry.reason.contains("abandoned before step fetch began")
            && !retry.reason.contains("shut"),
        "{retry:?}"
    );
    let spans = spans_of(&queue, &id).await;
    assert!(
        spans.iter().all(|s| s.attempt == 2),
        "no step of the abandoned attempt began: {spans:?}"
    );
    assert_eq!(
        spans.iter().filter(|s| s.ev == "begin").count(),
        4,
        "the new attempt ran every step: {spans:?}"
    );
    assert!(
        spans
            .iter()
            .filter(|s| s.ev == "end")
            .all(|s| s.lease_valid == Some(true)),
        "every step of the new attempt saw its lease valid: {spans:?}"
    );
}

// ---- 8. graceful shutdown -----------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_step_finish_and_another_replica_resumes_after_it() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let mut a = Replica::worker("replica-a", &srv.url(), &[("shutdown-grace-ms", "20000")]);
    let a_id = a.ready().await;
    let id = enqueue(
        &queue,
        "graceful",
        None,
        json!({ "validate": {"ms": 2500} }),
    )
    .await;
    wait_span(&queue, "validate begins on replica-a", |s| {
        s.job == id.as_str() && s.step == "validate" && s.ev == "begin"
    })
    .await;
    let mut b = Replica::worker("replica-b", &srv.url(), &[]);
    let b_id = b.ready().await;

    a.sigterm();
    let status = a.exit_status(WAIT).await;
    assert!(status.success(), "replica-a exited with {status}");
    wait_state(&queue, &id, JobState::Succeeded).await;

    let sp = spans_of(&queue, &id).await;
    let validate = sp
        .iter()
        .find(|s| s.step == "validate" && s.ev == "end")
        .unwrap();
    assert_eq!(
        (validate.outcome.as_str(), validate.attempt),
        ("done", 1),
        "the step completed"
    );
    assert!(validate.t - validate.begin >= 2_500_000);
    let second: Vec<&str> = sp
        .iter()
        .filter(|s| s.attempt == 2 && s.ev == "begin")
        .map(|s| s.step.as_str())
        .collect();
    assert_eq!(
        second,
        ["load", "aggregate"],
        "attempt 2 resumed after validate"
    );
    assert!(sp
        .iter()
        .filter(|s| s.attempt == 2)
        .all(|s| s.worker == b_id));

    let j = job(&queue, &id).await;
    assert_eq!(j.attempts.len(), 2);
    let first = &j.attempts[0];
    assert_eq!(first.state, JobState::Failed);
    assert_eq!(first.worker, a_id);
    let error = first.error.as_ref().expect("an error");
    assert_eq!(error.kind, "interrupted");
    assert!(error.retryable);
    assert!(!first.cleanup_needed, "stopped at a step boundary");
    assert_eq!(step_names(&j, 0), ["fetch", "validate"]);
    assert_eq!(j.attempts[1].state, JobState::Succeeded);
    assert_eq!(j.attempts[1].worker, b_id);
    assert_eq!(step_names(&j, 1), ["load", "aggregate"]);
    assert!(cleanups_of(&queue, &id).await.is_empty(), "nothing was cut");
    let evs: Vec<(String, String, String)> = events_of(&queue, &id)
        .await
        .into_iter()
        .filter(|e| e.op == "finish" || e.op == "retry")
        .map(|e| (e.op, e.from, e.to))
        .collect();
    assert_eq!(
        evs.iter()
            .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
            .collect::<Vec<_>>(),
        [
            ("finish", "RUNNING", "FAILED"),
            ("retry", "FAILED", "QUEUED"),
            ("finish", "RUNNING", "SUCCEEDED")
        ]
    );
    b.stop_cleanly(WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_a_short_grace_cuts_a_step_that_ignores_cancellation() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let mut a = Replica::worker(
        "replica-a",
        &srv.url(),
        &[("shutdown-grace-ms", "300"), ("cancel-grace-ms", "300")],
    );
    let a_id = a.ready().await;
    let id = enqueue(
        &queue,
        "stubborn",
        None,
        json!({ "validate": {"ms": 30000, "ms_on_attempt": {"2": 20}, "ignore_cancel": true} }),
    )
    .await;
    wait_span(&queue, "validate begins on replica-a", |s| {
        s.job == id.as_str() && s.step == "validate" && s.ev == "begin"
    })
    .await;
    let mut b = Replica::worker("replica-b", &srv.url(), &[]);
    let b_id = b.ready().await;

    let signalled = Instant::now();
    a.sigterm();
    let status = a.exit_status(WAIT).await;
    assert!(status.success(), "replica-a exited with {status}");
    assert!(
        signalled.elapsed() < Duration::from_secs(15),
        "it did not wait for the 30 s step"
    );
    wait_state(&queue, &id, JobState::Succeeded).await;

    let sp = spans_of(&queue, &id).await;
    let cut = sp
        .iter()
        .find(|s| s.step == "validate" && s.ev == "end" && s.attempt == 1)
        .expect("a record of the cut step");
    assert_eq!(cut.outcome, "dropped", "the step was hard-stopped: {cut:?}");
    let second: Vec<&str> = sp
        .iter()
        .filter(|s| s.attempt == 2 && s.ev == "begin")
        .map(|s| s.step.as_str())
        .collect();
    assert_eq!(
        second,
        ["validate", "load", "aggregate"],
        "attempt 2 re-ran the cut step"
    );

    let j = job(&queue, &id).await;
    assert_eq!(j.attempts.len(), 2);
    let first = &j.attempts[0];
    assert_eq!(first.state, JobState::Failed);
    assert_eq!(first.worker, a_id);
    assert_eq!(
        first.error.as_ref().map(|e| e.kind.as_str()),
        Some("interrupted")
    );
    assert!(first.cleanup_needed, "a step was cut: cleanup is needed");
    assert_eq!(step_names(&j, 0), ["fetch"]);
    assert_eq!(j.attempts[1].state, JobState::Succeeded);
    assert_eq!(j.attempts[1].worker, b_id);

    let cleanups = cleanups_of(&queue, &id).await;
    assert_eq!(cleanups.len(), 1, "the cleanup hook was told: {cleanups:?}");
    let c = &cleanups[0];
    assert_eq!(
        (
            c["attempt"].as_u64(),
            c["reason"].as_str(),
            c["kind"].as_str()
        ),
        (Some(1), Some("failed"), Some("interrupted"))
    );
    assert_eq!(c["last_completed_step"], "fetch");
    assert_eq!(c["cut_mid_step"], true);
    b.stop_cleanly(WAIT).await;
}

// ---- 7. flow control across replicas ------------------------------------------------------

/// An `etl` job under `flow` (the gates `job_for` and the enqueue contract compute).
async fn enqueue_flowed(
    queue: &Queue,
    label: &str,
    resource: Option<&str>,
    steps: Value,
    flow: &FlowSpec,
) -> JobId {
    let input = json!({ "label": label, "resource": resource, "steps": steps });
    let (resource, gates) = flow.gates("etl", resource, None).expect("gates");
    let mut new = NewJob::new("etl", &input)
        .unwrap()
        .max_attempts(3)
        .flow(gates);
    if let Some(r) = resource {
        new = new.resource(r);
    }
    queue.enqueue(new).await.expect("enqueue").id
}

/// Each job's interval (first step's begin to last step's end, wall-clock µs) by job.
fn job_intervals(sp: &[Span]) -> BTreeMap<String, (u64, u64)> {
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for s in sp {
        let e = out.entry(s.job.clone()).or_insert((u64::MAX, 0));
        let (from, to) = if s.ev == "begin" {
            (s.t, s.t)
        } else {
            (s.begin, s.t)
        };
        e.0 = e.0.min(from);
        e.1 = e.1.max(to);
    }
    out
}

/// The most intervals open at once.
fn max_overlap<'a>(intervals: impl Iterator<Item = &'a (u64, u64)>) -> usize {
    let mut edges: Vec<(u64, i32)> = Vec::new();
    for (a, b) in intervals {
        edges.push((*a, 1));
        edges.push((*b, -1));
    }
    // an end and a begin at the same instant do not overlap
    edges.sort();
    let (mut open, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        open += d;
        most = most.max(open);
    }
    most as usize
}

fn resource_limit(n: u32) -> FlowSpec {
    FlowSpec {
        resource_limit: Some(n),
        ..FlowSpec::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_replicas_under_a_resource_limit_of_three_overlap_exactly_three() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let mut replicas: Vec<Replica> = (0..4)
        .map(|i| {
            Replica::worker(
                &format!("replica-{i}"),
                &srv.url(),
                &[("concurrency", "3"), ("resource-limit", "3")],
            )
        })
        .collect();
    for r in &mut replicas {
        r.ready().await;
    }
    let mut ids = Vec::new();
    for i in 0..18 {
        ids.push(
            enqueue_flowed(
                &queue,
                &format!("j{i}"),
                Some("wh"),
                quick_steps(40),
                &resource_limit(3),
            )
            .await,
        );
    }
    // a job on another resource is not held back by wh's limit
    let other = enqueue_flowed(
        &queue,
        "other",
        Some("wh-2"),
        quick_steps(40),
        &resource_limit(3),
    )
    .await;
    ids.push(other.clone());
    wait_all(&queue, &ids, JobState::Succeeded).await;
    let sp = spans(&queue).await;
    let intervals = job_intervals(&sp);
    let on_wh: Vec<&(u64, u64)> = intervals
        .iter()
        .filter(|(j, _)| **j != other.as_str())
        .map(|(_, i)| i)
        .collect();
    assert_eq!(on_wh.len(), 18);
    assert_eq!(
        max_overlap(on_wh.into_iter()),
        3,
        "at most three jobs hold wh at once, and three do"
    );
    let by_replica: BTreeSet<&str> = sp.iter().map(|s| s.label.as_str()).collect();
    assert!(
        by_replica.len() >= 2,
        "the work spread over replicas: {by_replica:?}"
    );
    let base = queue.keys().base().to_owned();
    let holders: i64 = query(&queue, redis::cmd("ZCARD").arg(format!("{base}:slots:wh"))).await;
    assert_eq!(holders, 0, "every slot was given back");
    let lock: i64 = query(&queue, redis::cmd("EXISTS").arg(queue.keys().lock("wh"))).await;
    assert_eq!(lock, 0, "a limit above 1 takes no lock");
    for r in &mut replicas {
        r.stop_cleanly(WAIT).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_holder_frees_its_slot_at_lease_expiry() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let limit = resource_limit(2);
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(
            enqueue_flowed(
                &queue,
                &format!("j{i}"),
                Some("wh"),
                quick_steps(20),
                &limit,
            )
            .await,
        );
    }
    // a replica leases both slots and dies before starting either
    let mut dead = Replica::spawn(
        "lease-only",
        "lease-only",
        &[
            ("url", srv.url()),
            ("lease-count", "2".into()),
            ("lease-ttl-ms", "1000".into()),
        ],
    );
    dead.ready().await;
    let base = queue.keys().base().to_owned();
    let holders: i64 = query(&queue, redis::cmd("ZCARD").arg(format!("{base}:slots:wh"))).await;
    assert_eq!(holders, 2);
    dead.kill9();
    let killed_at = redis_now(&queue).await;
    let mut b = Replica::worker("replica-b", &srv.url(), &[("resource-limit", "2")]);
    b.ready().await;
    wait_all(&queue, &ids, JobState::Succeeded).await;
    // the third job could only start once a dead holder's lease ran out (1 s)
    let first_start = spans(&queue)
        .await
        .iter()
        .filter(|s| s.ev == "begin")
        .map(|s| s.t / 1000)
        .min()
        .unwrap() as i64;
    assert!(
        first_start >= killed_at,
        "nothing ran before the dead replica's leases expired"
    );
    let sweeps = events(&queue)
        .await
        .into_iter()
        .filter(|e| e.op == "sweep" && e.to == "QUEUED")
        .count();
    assert_eq!(sweeps, 2, "both dead leases were swept back to QUEUED");
    assert!(max_overlap(job_intervals(&spans(&queue).await).values()) <= 2);
    b.stop_cleanly(WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_lets_running_jobs_finish_and_leases_nothing_until_resume() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let mut a = Replica::worker("replica-a", &srv.url(), &[("concurrency", "2")]);
    let worker_id = a.ready().await;
    let mut ids = Vec::new();
    for i in 0..6 {
        ids.push(enqueue(&queue, &format!("j{i}"), None, quick_steps(150)).await);
    }
    wait_span(&queue, "two jobs are running", |s| s.ev == "begin").await;
    let scope = PauseScope::Pipeline("etl".into());
    queue.pause(&scope, "ops", "test").await.unwrap();
    let running: Vec<JobId> = wait_for("two jobs leased", || {
        let queue = &queue;
        let ids = &ids;
        async move {
            let mut held = Vec::new();
            for id in ids {
                if matches!(state(queue, id).await, JobState::Leased | JobState::Running) {
                    held.push(id.clone());
                }
            }
            (!held.is_empty()).then_some(held)
        }
    })
    .await;
    // the jobs running when the pause came finish
    wait_all(&queue, &running, JobState::Succeeded).await;
    // the worker has free slots and holds nothing: it is the pause that holds the rest
    let key = queue.keys().worker(&worker_id);
    wait_for("the worker reports no job held", || {
        let (queue, key) = (&queue, &key);
        async move {
            let reg: Option<String> = query(queue, redis::cmd("GET").arg(key)).await;
            let reg: Value = serde_json::from_str(&reg?).ok()?;
            (reg["active"] == 0).then_some(())
        }
    })
    .await;
    let rest: Vec<JobId> = ids
        .iter()
        .filter(|i| !running.contains(i))
        .cloned()
        .collect();
    assert!(!rest.is_empty());
    for id in &rest {
        assert_eq!(
            state(&queue, id).await,
            JobState::Queued,
            "{id} waits while paused"
        );
        assert!(spans_of(&queue, id).await.is_empty(), "{id} never started");
    }
    let pauses = queue.pauses().await.unwrap();
    assert_eq!(pauses[0].scope, scope);
    queue.resume(&scope, "ops", "test over").await.unwrap();
    wait_all(&queue, &ids, JobState::Succeeded).await;
    let ops: Vec<String> = events(&queue)
        .await
        .into_iter()
        .filter(|e| e.op == "pause" || e.op == "resume")
        .map(|e| e.op)
        .collect();
    assert_eq!(ops, ["pause", "resume"]);
    a.stop_cleanly(WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_and_pauses_survive_a_redis_restart_with_aof() {
    let _serial = SERIAL.lock().await;
    let mut srv = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let queue = client(&srv.url()).await;
    let limit = resource_limit(2);
    let mut ids = Vec::new();
    for i in 0..8 {
        ids.push(
            enqueue_flowed(
                &queue,
                &format!("j{i}"),
                Some("wh"),
                quick_steps(100),
                &limit,
            )
            .await,
        );
    }
    // a paused pipeline stays paused through the restart
    let scope = PauseScope::Pipeline("etl".into());
    queue.pause(&scope, "ops", "before restart").await.unwrap();
    tokio::task::block_in_place(|| srv.stop());
    tokio::task::block_in_place(|| srv.restart());
    // a client of its own after the restart (the old one's connection broke)
    let queue = client(&srv.url()).await;
    assert_eq!(queue.pauses().await.unwrap().len(), 1);
    let mut a = Replica::worker("replica-a", &srv.url(), &[("resource-limit", "2")]);
    let mut b = Replica::worker("replica-b", &srv.url(), &[("resource-limit", "2")]);
    a.ready().await;
    b.ready().await;
    let leased = queue
        .lease("probe", &["etl"], 8, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(leased.leases.is_empty(), "paused after the restart");
    queue.resume(&scope, "ops", "go").await.unwrap();
    // mid-run: both slots held, then Redis restarts under the replicas
    let base = queue.keys().base().to_owned();
    wait_for("both slots are held", || {
        let (queue, base) = (&queue, &base);
        async move {
            let n: i64 = query(queue, redis::cmd("ZCARD").arg(format!("{base}:slots:wh"))).await;
            (n == 2).then_some(())
        }
    })
    .await;
    tokio::task::block_in_place(|| srv.stop());
    tokio::task::block_in_place(|| srv.restart());
    let queue = client(&srv.url()).await;
    let holders: i64 = query(&queue, redis::cmd("ZCARD").arg(format!("{base}:slots:wh"))).await;
    assert!(
        holders <= 2,
        "the holders came back with the data: {holders}"
    );
    wait_all(&queue, &ids, JobState::Succeeded).await;
    assert!(
        max_overlap(job_intervals(&spans(&queue).await).values()) <= 2,
        "the limit held through the restart"
    );
    a.stop_cleanly(WAIT).await;
    b.stop_cleanly(WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_of_ten_per_second_holds_over_thirty_seconds_and_is_reached() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let flow = FlowSpec {
        rate: Some("10/s".into()),
        ..FlowSpec::default()
    };
    let jobs: Vec<NewJob> = (0..320)
        .map(|i| {
            let input = json!({ "label": format!("r{i}"), "steps": {} });
            let (_, gates) = flow.gates("etl", None, None).unwrap();
            NewJob::new("etl", &input).unwrap().flow(gates)
        })
        .collect();
    let ids: Vec<JobId> = queue
        .enqueue_bulk(jobs)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    let mut replicas: Vec<Replica> = (0..2)
        .map(|i| Replica::worker(&format!("replica-{i}"), &srv.url(), &[("rate", "10/s")]))
        .collect();
    for r in &mut replicas {
        r.ready().await;
    }
    // 30 s of starts, measured on Redis's clock (each job's leased_at)
    let started = Instant::now();
    loop {
        let done: u64 = query(&queue, redis::cmd("ZCARD").arg(queue.keys().done())).await;
        if done >= 301 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "only {done} done after 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut leased_at = Vec::new();
    for id in &ids {
        let t: Option<i64> = query(
            &queue,
            redis::cmd("HGET")
                .arg(queue.keys().job(id.as_str()))
                .arg("leased_at"),
        )
        .await;
        leased_at.extend(t);
    }
    leased_at.sort();
    let t0 = leased_at[0];
    for (i, t) in leased_at.iter().enumerate() {
        let in_window = leased_at[i..].iter().take_while(|u| **u < t + 1000).count();
        assert!(in_window <= 10, "{in_window} starts in the second from {t}");
    }
    let in_30s = leased_at.iter().filter(|t| **t < t0 + 30_000).count();
    let busiest = (0..leased_at.len())
        .map(|i| {
            leased_at[i..]
                .iter()
                .take_while(|u| **u < leased_at[i] + 1000)
                .count()
        })
        .max()
        .unwrap_or(0);
    eprintln!("rate 10/s: {in_30s} starts in the first 30 s, at most {busiest} in any 1 s window");
    assert!(
        in_30s >= 270,
        "{in_30s} starts in 30 s: at least 9 per second"
    );
    for r in &mut replicas {
        r.stop_cleanly(WAIT).await;
    }
}
