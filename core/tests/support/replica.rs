//! Worker replicas as separate OS processes (`leasehold-replica-fixture`, the
//! binary built from `bin/replica.rs`) against a private `redis-server`: starting,
//! killing and stopping them, and reading what they recorded in Redis (step
//! spans, cleanup records, events, job states), for the `replicas_*` tests.
//!
//! Every child process is SIGKILLed and reaped when its handle drops (and,
//! should the whole test process die, the fixture exits when its stdin
//! closes). The tests of one file run one at a time ([`SERIAL`]), and on
//! failure each replica's output is printed.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold_core::redis;
use leasehold_core::{Job, JobId, JobState, NewJob, Queue, QueueConfig};
use leasehold_testkit::wait_until_async;
use serde::Deserialize;
use serde_json::{json, Value};

pub(crate) const FIXTURE: &str = env!("CARGO_BIN_EXE_leasehold-replica-fixture");
/// Deadline of every wait.
pub(crate) const WAIT: Duration = Duration::from_secs(30);
/// The queue of the fixture's pipeline `etl`.
pub(crate) const QUEUE: &str = "etl";

/// One test at a time: the scenarios measure leases of 1 s on what may be a
/// loaded 2-core machine; running them side by side would only add noise.
pub(crate) static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// ---- replicas ------------------------------------------------------------------------

/// A fixture process. Dropping it SIGKILLs and reaps it; if the test is
/// failing, its output is printed.
pub(crate) struct Replica {
    pub(crate) name: String,
    pub(crate) child: Option<Child>,
    pub(crate) pid: u32,
    pub(crate) lines: Arc<Mutex<Vec<String>>>,
    pub(crate) readers: Vec<std::thread::JoinHandle<()>>,
    pub(crate) id: String,
}

impl Replica {
    pub(crate) fn spawn(name: &str, mode: &str, flags: &[(&str, String)]) -> Replica {
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
    pub(crate) fn worker(name: &str, url: &str, overrides: &[(&str, &str)]) -> Replica {
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

    pub(crate) fn output(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    pub(crate) fn has_line(&self, prefix: &str) -> Option<String> {
        self.output().into_iter().find_map(|l| {
            l.strip_prefix("out| ")
                .filter(|l| l.starts_with(prefix))
                .map(str::to_owned)
        })
    }

    /// Waits for the `READY <id>` line and returns the worker id.
    pub(crate) async fn ready(&mut self) -> String {
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

    pub(crate) fn alive(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// SIGKILL: the process dies at once, holding whatever it held.
    pub(crate) fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("SIGKILL a replica");
            child.wait().expect("reap a replica");
        }
    }

    /// Sends `signal` to the process.
    pub(crate) fn signal(&self, signal: libc::c_int) {
        assert!(
            self.child.is_some(),
            "replica {} was already killed",
            self.name
        );
        if signal == libc::SIGSTOP {
            // returns once every thread of it is stopped, not merely signalled
            leasehold_testkit::freeze::freeze(self.pid);
            return;
        }
        // SAFETY: a plain kill(2) on a child we have not reaped.
        let rc = unsafe { libc::kill(self.pid as libc::pid_t, signal) };
        assert_eq!(rc, 0, "signal {signal} to replica {}", self.name);
    }

    /// SIGTERM: the worker shuts down gracefully.
    pub(crate) fn sigterm(&self) {
        self.signal(libc::SIGTERM);
    }

    /// Waits for the process to exit and returns its status.
    pub(crate) async fn exit_status(&mut self, deadline: Duration) -> ExitStatus {
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
    pub(crate) async fn stop_cleanly(&mut self, deadline: Duration) {
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

pub(crate) async fn query<T: redis::FromRedisValue>(queue: &Queue, cmd: &mut redis::Cmd) -> T {
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
pub(crate) struct Span {
    pub(crate) ev: String,
    pub(crate) job: String,
    pub(crate) step: String,
    pub(crate) index: usize,
    pub(crate) attempt: u32,
    pub(crate) fence: u64,
    pub(crate) resource: Option<String>,
    pub(crate) worker: String,
    pub(crate) pid: u32,
    pub(crate) label: String,
    pub(crate) t: u64,
    #[serde(default)]
    pub(crate) begin: u64,
    #[serde(default)]
    pub(crate) outcome: String,
    #[serde(default)]
    pub(crate) detail: String,
    /// `ctx.lease_valid()` as the step ended (end records of finished steps).
    #[serde(default)]
    pub(crate) lease_valid: Option<bool>,
}

pub(crate) async fn spans(queue: &Queue) -> Vec<Span> {
    let raw: Vec<String> = query(
        queue,
        redis::cmd("LRANGE").arg("fixture:spans").arg(0).arg(-1),
    )
    .await;
    raw.iter()
        .map(|s| serde_json::from_str(s).unwrap_or_else(|e| panic!("bad span {s}: {e}")))
        .collect()
}

pub(crate) async fn spans_of(queue: &Queue, job: &JobId) -> Vec<Span> {
    spans(queue)
        .await
        .into_iter()
        .filter(|s| s.job == job.as_str())
        .collect()
}

pub(crate) async fn cleanups_of(queue: &Queue, job: &JobId) -> Vec<Value> {
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
pub(crate) struct Event {
    pub(crate) id: String,
    pub(crate) op: String,
    pub(crate) job: String,
    pub(crate) attempt: u32,
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) by: String,
    pub(crate) reason: String,
}

pub(crate) async fn events(queue: &Queue) -> Vec<Event> {
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

pub(crate) async fn events_of(queue: &Queue, job: &JobId) -> Vec<Event> {
    events(queue)
        .await
        .into_iter()
        .filter(|e| e.job == job.as_str())
        .collect()
}

pub(crate) async fn job(queue: &Queue, id: &JobId) -> Job {
    queue
        .job(id)
        .await
        .expect("read a job")
        .expect("the job exists")
}

pub(crate) async fn state(queue: &Queue, id: &JobId) -> JobState {
    job(queue, id).await.state
}

pub(crate) async fn wait_state(queue: &Queue, id: &JobId, want: JobState) {
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

pub(crate) async fn wait_all(queue: &Queue, ids: &[JobId], want: JobState) {
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
pub(crate) async fn wait_for<T, F, Fut>(what: &str, mut probe: F) -> T
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
pub(crate) async fn wait_span(queue: &Queue, what: &str, pred: impl Fn(&Span) -> bool) -> Span {
    let pred = &pred;
    wait_for(what, || async move {
        spans(queue).await.into_iter().find(|s| pred(s))
    })
    .await
}

pub(crate) fn step_names(job: &Job, attempt: usize) -> Vec<String> {
    job.attempts[attempt]
        .steps
        .iter()
        .map(|s| s.step.clone())
        .collect()
}

// ---- setting up -------------------------------------------------------------------------

pub(crate) async fn client(url: &str) -> Queue {
    Queue::connect(url, QUEUE, QueueConfig::default())
        .await
        .expect("connect to the test redis")
}

/// An `etl` job: `steps` maps step names to plans (`{"ms": .., "ignore_cancel": ..,
/// "ms_on_attempt": {"2": ..}, "fail_retryable_on": [..]}`).
pub(crate) async fn enqueue(
    queue: &Queue,
    label: &str,
    resource: Option<&str>,
    steps: Value,
) -> JobId {
    let input = json!({ "label": label, "resource": resource, "steps": steps });
    let mut new = NewJob::new("etl", &input).unwrap().max_attempts(3);
    if let Some(r) = resource {
        new = new.resource(r);
    }
    queue.enqueue(new).await.expect("enqueue").id
}

pub(crate) fn quick_steps(ms: u64) -> Value {
    json!({ "fetch": {"ms": ms}, "validate": {"ms": ms}, "load": {"ms": ms}, "aggregate": {"ms": ms} })
}
