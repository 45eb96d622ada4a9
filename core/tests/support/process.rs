//! Process steps with real processes, for the `process_steps_*` tests: the
//! scripts each test writes into a temporary directory (small `sh` and
//! `python3` programs), a worker serving one process step in the test process
//! or as its own OS process (`leasehold-process-fixture`, the binary built
//! from `bin/process_worker.rs`, ended by PID when dropped), and reading the
//! process records and the files a script wrote.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leasehold_core::process::{read_records, DeclaredPipeline, ProcessRecord};
use leasehold_core::{JobId, Queue, QueueConfig, Worker};
use leasehold_testkit::wait_until_async;
use serde_json::Value;

/// Deadline of every wait.
pub(crate) const WAIT: Duration = Duration::from_secs(30);
/// The python interpreter the scripts run with.
pub(crate) const PYTHON: &str = "python3";

/// Wall-clock milliseconds since the epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Writes `text` to `dir/name` and returns its path.
pub(crate) fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet).
pub(crate) fn gone(pid: i32) -> bool {
    // SAFETY: signal 0 only checks the pid
    if unsafe { libc::kill(pid, 0) } != 0 {
        return true;
    }
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(true)
}

/// A worker serving `pipeline` on `url`, until the returned sender is dropped.
pub(crate) async fn serve(
    url: &str,
    pipeline: DeclaredPipeline,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let worker = Worker::builder(url)
        .declared(pipeline)
        .unwrap()
        .concurrency(4)
        .lease_ttl(Duration::from_secs(5))
        .renew_interval(Duration::from_millis(100))
        .cancel_grace(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
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

pub(crate) async fn stop(
    worker: (
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<()>,
    ),
) {
    let _ = worker.0.send(());
    tokio::time::timeout(WAIT, worker.1).await.unwrap().unwrap();
}

/// Waits until job `id` is in a terminal state; returns it.
pub(crate) async fn ended(queue: &Queue, id: &JobId) -> leasehold_core::Job {
    wait_until_async(WAIT, "the job ended", || {
        let queue = queue.clone();
        let id = id.clone();
        async move { matches!(queue.job(&id).await, Ok(Some(job)) if job.state.is_terminal()) }
    })
    .await;
    queue.job(id).await.unwrap().unwrap()
}

/// Waits until `path` exists; returns its text.
pub(crate) async fn file(path: &Path) -> String {
    wait_until_async(WAIT, &format!("{} exists", path.display()), || {
        let done = std::fs::read_to_string(path).is_ok_and(|t| t.ends_with('\n'));
        async move { done }
    })
    .await;
    std::fs::read_to_string(path).unwrap()
}

/// The process record of `step` in attempt `attempt` of job `id`.
pub(crate) async fn record(queue: &Queue, id: &JobId, attempt: u32, step: &str) -> ProcessRecord {
    read_records(queue, id.as_str())
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.attempt == attempt && r.step == step)
        .unwrap_or_else(|| panic!("no record of {attempt}:{step}"))
}

/// Enqueues a job of `pipeline` as tools other than Rust do: through the
/// spec the worker published (max attempts, resource and input key templates).
pub(crate) async fn enqueue(url: &str, pipeline: &str, input: &Value) -> JobId {
    let client = leasehold_core::Client::connect(url, QueueConfig::default())
        .await
        .unwrap();
    client
        .enqueue_json(
            pipeline,
            &input.to_string(),
            &leasehold_core::EnqueueOptions::default(),
        )
        .await
        .unwrap()
        .id
}

/// A worker serving one process step in its own OS process
/// (`tests/support/bin/process_worker.rs`), ended by PID when dropped.
#[cfg(target_os = "linux")]
pub(crate) struct Fixture {
    pub(crate) child: std::process::Child,
    pub(crate) stdout: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

#[cfg(target_os = "linux")]
impl Fixture {
    /// Starts the fixture serving `pipeline` on `url` with `flags` (the options
    /// before `--`) and the step `program args...`; returns once it printed
    /// `READY`, with the lines it writes to stderr as they come (also echoed
    /// to the test's stderr).
    pub(crate) fn start(
        url: &str,
        pipeline: &str,
        flags: &[&str],
        program: &str,
        args: &[&std::ffi::OsStr],
    ) -> (Fixture, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
        use std::io::BufRead as _;
        use std::os::unix::process::CommandExt as _;
        use std::process::{Command, Stdio};
        let mut child = Command::new(env!("CARGO_BIN_EXE_leasehold-process-fixture"))
            .arg(url)
            .arg(pipeline)
            .args(flags)
            .arg("--")
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let logs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let sink = logs.clone();
        std::thread::spawn(move || {
            for line in stderr.lines() {
                let Ok(line) = line else { break };
                eprintln!("[fixture] {line}");
                sink.lock().unwrap().push(line);
            }
        });
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        assert_eq!(stdout.next().unwrap().unwrap(), "READY");
        (Fixture { child, stdout }, logs)
    }

    /// The fixture's PID.
    pub(crate) fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends `signal` to the fixture.
    pub(crate) fn signal(&self, signal: i32) {
        if signal == libc::SIGSTOP {
            // returns once every thread of it is stopped, not merely signalled
            leasehold_testkit::freeze::freeze(self.child.id());
            return;
        }
        // SAFETY: the fixture is this test's own child, not reaped yet
        unsafe { libc::kill(self.pid(), signal) };
    }

    /// The fixture worker's metrics, as Prometheus text.
    pub(crate) fn metrics(&mut self) -> String {
        use std::io::Write as _;
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "metrics").unwrap();
        stdin.flush().unwrap();
        let mut text = String::new();
        for line in self.stdout.by_ref() {
            let line = line.unwrap();
            if line == "END" {
                break;
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    }

    /// `(VmRSS, VmHWM)` of the fixture in bytes, from `/proc/<pid>/status`.
    pub(crate) fn memory(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .unwrap_or_else(|| panic!("no {name} in {status}"))
                * 1024
        };
        (field("VmRSS:"), field("VmHWM:"))
    }
}

#[cfg(target_os = "linux")]
impl Drop for Fixture {
    fn drop(&mut self) {
        // ended by its PID, unless a test already reaped it
        if let Ok(None) = self.child.try_wait() {
            self.signal(libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// The lines of `path` (none while it does not exist).
pub(crate) fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Waits for a record of attempt `attempt` of `step` that `ok` accepts; returns it.
pub(crate) async fn record_when(
    queue: &Queue,
    id: &JobId,
    attempt: u32,
    step: &str,
    what: &str,
    ok: impl Fn(&ProcessRecord) -> bool,
) -> ProcessRecord {
    let found = std::sync::Mutex::new(None);
    wait_until_async(WAIT, what, || async {
        let records = read_records(queue, id.as_str()).await.unwrap_or_default();
        let hit = records
            .into_iter()
            .find(|r| r.attempt == attempt && r.step == step && ok(r));
        let done = hit.is_some();
        *found.lock().unwrap() = hit;
        done
    })
    .await;
    found.into_inner().unwrap().unwrap()
}
