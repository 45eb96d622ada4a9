//! Process steps with real processes: signals on cancel and at the end of the
//! grace, a time limit, exit codes as outcomes (a retryable exit resumes at its
//! step with the earlier outputs), bounded log tails, progress lines, and
//! hostile arguments and inputs reaching the child unchanged.
//!
//! The scripts are small `sh` and `python3` programs written by each test into
//! a temporary directory. Every wait is on a condition with a generous deadline.

mod support;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leasehold_core::process::{
    read_records, CutWhy, DeclaredPipeline, ProcessRecord, ProcessStep, StepOutcome,
};
use leasehold_core::{JobId, JobState, PipelineOptions, Queue, QueueConfig, RetryPolicy, Worker};
use leasehold_testkit::{wait_until_async, RedisServer};
use serde_json::{json, Value};
use support::{connect, redis_now, wait_for_held_settle};

/// Deadline of every wait.
const WAIT: Duration = Duration::from_secs(30);
/// The python interpreter the scripts run with.
const PYTHON: &str = "python3";

/// Wall-clock milliseconds since the epoch.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Writes `text` to `dir/name` and returns its path.
fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet).
fn gone(pid: i32) -> bool {
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
async fn serve(
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

async fn stop(
    worker: (
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<()>,
    ),
) {
    let _ = worker.0.send(());
    tokio::time::timeout(WAIT, worker.1).await.unwrap().unwrap();
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

/// Waits until `path` exists; returns its text.
async fn file(path: &Path) -> String {
    wait_until_async(WAIT, &format!("{} exists", path.display()), || {
        let done = std::fs::read_to_string(path).is_ok_and(|t| t.ends_with('\n'));
        async move { done }
    })
    .await;
    std::fs::read_to_string(path).unwrap()
}

/// The process record of `step` in attempt `attempt` of job `id`.
async fn record(queue: &Queue, id: &JobId, attempt: u32, step: &str) -> ProcessRecord {
    read_records(queue, id.as_str())
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.attempt == attempt && r.step == step)
        .unwrap_or_else(|| panic!("no record of {attempt}:{step}"))
}

/// Enqueues a job of `pipeline` as tools other than Rust do: through the
/// spec the worker published (max attempts, resource and input key templates).
async fn enqueue(url: &str, pipeline: &str, input: &Value) -> JobId {
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
/// (`tests/fixture/process_worker.rs`), ended by PID when dropped.
#[cfg(target_os = "linux")]
struct Fixture {
    child: std::process::Child,
    stdout: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

#[cfg(target_os = "linux")]
impl Fixture {
    /// Starts the fixture serving `pipeline` on `url` with `flags` (the options
    /// before `--`) and the step `program args...`; returns once it printed
    /// `READY`, with the lines it writes to stderr as they come (also echoed
    /// to the test's stderr).
    fn start(
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
    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends `signal` to the fixture.
    fn signal(&self, signal: i32) {
        // SAFETY: the fixture is this test's own child, not reaped yet
        unsafe { libc::kill(self.pid(), signal) };
    }

    /// The fixture worker's metrics, as Prometheus text.
    fn metrics(&mut self) -> String {
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
    fn memory(&self) -> (u64, u64) {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_reaches_the_script_as_sigterm_within_200ms() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let term = dir.path().join("term");
    let body = format!(
        r#"
import os, signal, sys, time
def on_term(signum, frame):
    with open({term:?}, "w") as f:
        f.write("%d\n" % int(time.time() * 1000))
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
with open({ready:?}, "w") as f:
    f.write("%d\n" % os.getpid())
while True:
    time.sleep(0.01)
"#,
        term = term.to_str().unwrap(),
        ready = ready.to_str().unwrap()
    );
    let path = script(dir.path(), "long.py", &body);
    let pipeline = DeclaredPipeline::new("cancelme").step(
        "work",
        ProcessStep::new(PYTHON)
            .arg(&path)
            .grace(Duration::from_secs(5)),
    );
    let worker = serve(&srv.url(), pipeline).await;
    let q = connect(&srv.url(), "cancelme").await;
    let id = enqueue(&srv.url(), "cancelme", &json!({})).await;
    let pid: i32 = file(&ready).await.trim().parse().unwrap();
    let cancel_at = now_ms();
    q.cancel(&id, "operator said stop", "test").await.unwrap();
    let term_at: i64 = file(&term).await.trim().parse().unwrap();
    let job = ended(&q, &id).await;
    assert_eq!(job.state, JobState::Cancelled, "{job:?}");
    let rec = record(&q, &id, 1, "work").await;
    let cut = rec.cut_off.clone().expect("a cut-off is recorded");
    assert_eq!(cut.why, CutWhy::Cancel, "{rec:?}");
    assert!(cut.reason.contains("operator said stop"), "{rec:?}");
    assert!(!cut.killed, "{rec:?}");
    assert_eq!(rec.outcome, StepOutcome::CutOff);
    // the worker saw the cancel on a renewal (every 100 ms) and signalled at once
    assert!(
        cut.at >= cancel_at - 5,
        "cut at {} before the cancel at {cancel_at}",
        cut.at
    );
    assert!(
        term_at - cut.at <= 200,
        "SIGTERM reached the script {} ms after the worker saw the cancel",
        term_at - cut.at
    );
    wait_until_async(WAIT, "the script is gone", || async move { gone(pid) }).await;
    stop(worker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_ignoring_sigterm_is_killed_at_the_end_of_its_grace() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let body = format!(
        "trap '' TERM\necho $$ > '{}.tmp'; mv '{0}.tmp' '{0}'\nwhile true; do sleep 0.05; done\n",
        ready.display()
    );
    let path = script(dir.path(), "stubborn.sh", &body);
    let grace = Duration::from_millis(1500);
    let pipeline = DeclaredPipeline::new("stubborn")
        .step("work", ProcessStep::new("sh").arg(&path).grace(grace));
    let worker = serve(&srv.url(), pipeline).await;
    let q = connect(&srv.url(), "stubborn").await;
    let id = enqueue(&srv.url(), "stubborn", &json!({})).await;
    wait_until_async(WAIT, "the script started", || {
        let ok = ready.exists();
        async move { ok }
    })
    .await;
    let pid: i32 = std::fs::read_to_string(&ready)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    q.cancel(&id, "stop", "test").await.unwrap();
    let job = ended(&q, &id).await;
    assert_eq!(job.state, JobState::Cancelled, "{job:?}");
    assert!(gone(pid), "the script outlived its grace");
    let rec = record(&q, &id, 1, "work").await;
    let cut = rec.cut_off.clone().unwrap();
    assert!(cut.killed, "{rec:?}");
    assert_eq!(rec.signal, Some(libc::SIGKILL), "{rec:?}");
    let ended_at = rec.ended_at.unwrap();
    assert!(ended_at - cut.at >= grace.as_millis() as i64 - 5, "{rec:?}");
    assert!(
        ended_at - cut.at < grace.as_millis() as i64 + 5000,
        "{rec:?}"
    );
    // the attempt's record says it was cut and why
    let attempt = &job.attempts[0];
    assert!(attempt.cleanup_needed, "{attempt:?}");
    stop(worker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_past_its_time_limit_is_cut_off_and_fails_retryable() {
    let srv = RedisServer::start();
    let pipeline = DeclaredPipeline::new("slow")
        .step(
            "work",
            ProcessStep::new("sleep")
                .arg("30")
                .timeout(Duration::from_millis(300))
                .grace(Duration::from_millis(500)),
        )
        .options(PipelineOptions::new().retry(RetryPolicy::NONE));
    let worker = serve(&srv.url(), pipeline).await;
    let q = connect(&srv.url(), "slow").await;
    let id = enqueue(&srv.url(), "slow", &json!({})).await;
    let job = ended(&q, &id).await;
    assert_eq!(job.state, JobState::Failed, "{job:?}");
    let error = job.attempts[0].error.clone().unwrap();
    assert_eq!(error.kind, "timeout", "{error:?}");
    let rec = record(&q, &id, 1, "work").await;
    assert_eq!(
        rec.cut_off.as_ref().map(|c| c.why),
        Some(CutWhy::Timeout),
        "{rec:?}"
    );
    assert_eq!(rec.signal, Some(libc::SIGTERM), "{rec:?}");
    stop(worker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retryable_exit_resumes_at_its_step_with_the_earlier_outputs() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let first = script(
        dir.path(),
        "first.sh",
        &format!(
            "echo first >> '{}'\nprintf '{{\"n\": 41}}' > \"$LEASEHOLD_OUTPUT\"\n",
            runs.display()
        ),
    );
    let second = script(
        dir.path(),
        "second.py",
        r#"
import json, os, sys
if os.environ["LEASEHOLD_ATTEMPT"] == "1":
    print("upstream busy", file=sys.stderr)
    sys.exit(75)
previous = json.load(open(os.environ["LEASEHOLD_PREVIOUS"]))
json.dump({"n": previous["n"] + 1, "attempt": os.environ["LEASEHOLD_ATTEMPT"]}, open(os.environ["LEASEHOLD_OUTPUT"], "w"))
"#,
    );
    let third = script(
        dir.path(),
        "third.py",
        r#"
import json, os
json.dump({"seen": json.load(open(os.environ["LEASEHOLD_PREVIOUS"]))}, open(os.environ["LEASEHOLD_OUTPUT"], "w"))
"#,
    );
    let pipeline = DeclaredPipeline::new("retrying")
        .step("first", ProcessStep::new("sh").arg(&first))
        .step("second", ProcessStep::new(PYTHON).arg(&second))
        .step("third", ProcessStep::new(PYTHON).arg(&third))
        .options(
            PipelineOptions::new()
                .retry(RetryPolicy::exponential(3).initial_backoff(Duration::from_millis(20))),
        );
    let worker = serve(&srv.url(), pipeline).await;
    let q = connect(&srv.url(), "retrying").await;
    let id = enqueue(&srv.url(), "retrying", &json!({})).await;
    let job = ended(&q, &id).await;
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");
    assert_eq!(job.attempt, 2);
    let error = job.attempts[0].error.clone().unwrap();
    assert_eq!(error.kind, "exit");
    assert!(error.retryable, "{error:?}");
    assert!(
        error.message.contains("exited with code 75 (retryable")
            && error.message.ends_with(": upstream busy"),
        "{error:?}"
    );
    // the second attempt resumed at `second`, with `first`'s output
    let resumed: Vec<&str> = job.attempts[1]
        .steps
        .iter()
        .map(|s| s.step.as_str())
        .collect();
    assert_eq!(resumed, ["second", "third"]);
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "first\n");
    assert_eq!(job.outputs["second"], json!({"n": 42, "attempt": "2"}));
    assert_eq!(
        job.outputs["third"],
        json!({"seen": {"n": 42, "attempt": "2"}})
    );
    let failed = record(&q, &id, 1, "second").await;
    assert_eq!(
        (failed.exit_code, failed.outcome.as_str()),
        (Some(75), "retryable")
    );
    assert_eq!(failed.stderr_tail, "upstream busy\n");
    stop(worker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_map_to_outcomes_per_step() {
    let srv = RedisServer::start();
    let pipeline = DeclaredPipeline::new("codes")
        .step("bad", ProcessStep::shell("exit 65"))
        .options(
            PipelineOptions::new()
                .retry(RetryPolicy::exponential(3).initial_backoff(Duration::from_millis(10))),
        );
    let worker = serve(&srv.url(), pipeline).await;
    let q = connect(&srv.url(), "codes").await;
    let id = enqueue(&srv.url(), "codes", &json!({})).await;
    let job = ended(&q, &id).await;
    // 65 (EX_DATAERR) is permanent by default: no second attempt, and the
    // verdict names the code and the setting that decided
    assert_eq!((job.state, job.attempt), (JobState::Failed, 1), "{job:?}");
    let error = job.attempts[0].error.as_ref().unwrap();
    assert!(!error.retryable);
    assert!(
        error
            .message
            .contains("exited with code 65 (permanent: listed in permanent_exit_codes)"),
        "{error:?}"
    );
    stop(worker).await;

    // an ordinary failure (a Python exception, a `set -e` script: exit 1) is
    // retried by default
    let pipeline = DeclaredPipeline::new("codes1")
        .step(
            "flaky",
            ProcessStep::shell("[ \"$LEASEHOLD_ATTEMPT\" = 2 ] || exit 1"),
        )
        .options(
            PipelineOptions::new()
                .retry(RetryPolicy::exponential(3).initial_backoff(Duration::from_millis(10))),
        );
    let worker = serve(&srv.url(), pipeline).await;
    let q = connect(&srv.url(), "codes1").await;
    let id = enqueue(&srv.url(), "codes1", &json!({})).await;
    let job = ended(&q, &id).await;
    assert_eq!(
        (job.state, job.attempt),
        (JobState::Succeeded, 2),
        "{job:?}"
    );
    let error = job.attempts[0].error.as_ref().unwrap();
    assert!(error.retryable, "{error:?}");
    assert!(
        error
            .message
            .contains("exited with code 1 (retryable: other_exits = \"retryable\")"),
        "{error:?}"
    );
    stop(worker).await;

    let pipeline = DeclaredPipeline::new("codes2")
        .step(
            "bad",
            ProcessStep::shell("[ \"$LEASEHOLD_ATTEMPT\" = 2 ] || exit 3")
                .exit_codes(leasehold_core::process::ExitCodes::default().retryable([3])),
        )
        .step(
            "killed",
            ProcessStep::shell("[ \"$LEASEHOLD_ATTEMPT\" = 3 ] || kill -9 $$"),
        )
        .options(
            PipelineOptions::new()
                .retry(RetryPolicy::exponential(3).initial_backoff(Duration::from_millis(10))),
        );
    let worker = serve(&srv.url(), pipeline).await;
    let q = connect(&srv.url(), "codes2").await;
    let id = enqueue(&srv.url(), "codes2", &json!({})).await;
    let job = ended(&q, &id).await;
    // 3 retryable for this step; a signal the worker did not send is retryable
    assert_eq!(
        (job.state, job.attempt),
        (JobState::Succeeded, 3),
        "{job:?}"
    );
    assert_eq!(
        job.attempts[1].error.as_ref().unwrap().kind,
        "signal",
        "{job:?}"
    );
    let killed = record(&q, &id, 2, "killed").await;
    assert_eq!(
        (killed.signal, killed.exit_code),
        (Some(libc::SIGKILL), None)
    );
    stop(worker).await;
}

/// The most the worker's peak resident memory may grow while its step writes
/// 10 MB to stdout. The worker reads the pipes in chunks and keeps a 16 KiB
/// tail per stream, so what it holds does not depend on how much the child
/// writes; 4 MiB leaves room for allocator arenas and tokio's buffers on a
/// loaded machine and is still far below the 10.3 MB a worker that buffered
/// the output (or a tenth of it twice over) would add.
#[cfg(target_os = "linux")]
const FLAT_MEMORY_BOUND: u64 = 4 * 1024 * 1024;

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_megabytes_of_stdout_keep_the_stored_tail_bounded_and_progress_is_reported() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let body = format!(
        r#"
import os, sys, time
print("::progress 40", flush=True)
while not os.path.exists({go:?}):
    time.sleep(0.01)
line = "x" * 99 + "\n"
for _ in range(100 * 1024):
    sys.stdout.write(line)
sys.stdout.write("y" * (300 * 1024))
sys.stdout.write("\nlast line\n")
sys.stderr.write("warning: something\n")
"#,
        go = go.to_str().unwrap()
    );
    let path = script(dir.path(), "loud.py", &body);
    // the worker in its own process, so its memory is its own in /proc
    let (mut worker, _) = Fixture::start(&srv.url(), "loud", &[], PYTHON, &[path.as_os_str()]);
    let q = connect(&srv.url(), "loud").await;
    let id = enqueue(&srv.url(), "loud", &json!({})).await;
    wait_until_async(WAIT, "the progress is recorded", || {
        let q = q.clone();
        let id = id.clone();
        async move {
            read_records(&q, id.as_str()).await.is_ok_and(|r| {
                r.iter()
                    .any(|r| r.progress == Some(40.0) && r.outcome == StepOutcome::Running)
            })
        }
    })
    .await;
    let series = format!(
        "leasehold_step_progress_percent{{queue=\"loud\",pipeline=\"loud\",step=\"run\",job=\"{id}\"}} 40.0"
    );
    let metrics = worker.metrics();
    assert!(metrics.contains(&series), "{metrics}");
    // the step runs, its child waits for `go`: the worker is fully set up
    let (rss_before, peak_before) = worker.memory();
    std::fs::write(&go, "").unwrap();
    let job = ended(&q, &id).await;
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");
    let (rss_after, peak_after) = worker.memory();
    eprintln!(
        "worker memory: VmRSS {rss_before} -> {rss_after} B, VmHWM {peak_before} -> {peak_after} B"
    );
    assert!(
        peak_after.saturating_sub(peak_before) < FLAT_MEMORY_BOUND,
        "the worker's peak memory grew by {} B while its child wrote 10 MB",
        peak_after - peak_before
    );
    assert!(
        rss_after.saturating_sub(rss_before) < FLAT_MEMORY_BOUND,
        "the worker's memory grew by {} B while its child wrote 10 MB",
        rss_after - rss_before
    );
    let rec = record(&q, &id, 1, "run").await;
    assert_eq!(rec.stdout_bytes, 100 * 1024 * 100 + 300 * 1024 + 11);
    assert!(
        rec.stdout_tail.len() <= 16 * 1024,
        "{}",
        rec.stdout_tail.len()
    );
    // the 300 KiB line without a newline was cut into pieces, and the tail starts at a line
    assert_eq!(rec.stdout_tail, "last line\n");
    assert_eq!(rec.stderr_tail, "warning: something\n");
    assert_eq!(rec.progress, Some(40.0));
    // the series goes with the step
    let metrics = worker.metrics();
    assert!(
        !metrics.contains("leasehold_step_progress_percent{"),
        "{metrics}"
    );
    // what Redis keeps for it
    let mut conn = q.pool().get().await.unwrap();
    let bytes: i64 = leasehold_core::redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(q.keys().process_log(id.as_str()))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(bytes < 64 * 1024, "{bytes}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_arguments_inputs_and_file_names_reach_the_child_unchanged() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("pwned");
    let weird_name = OsString::from_vec(b"odd \xff\xfe name $(x).txt".to_vec());
    let weird_path = dir.path().join(&weird_name);
    std::fs::write(&weird_path, b"content\n").unwrap();
    let dump = script(
        dir.path(),
        "dump.py",
        r#"
import json, os, sys
env = {k: v for k, v in os.environ.items() if k.startswith("LEASEHOLD_")}
out = {
    "argv": [os.fsencode(a).hex() for a in sys.argv[1:]],
    "input": open(os.environ["LEASEHOLD_INPUT"], "rb").read().hex(),
    "env": env,
    "file": open(os.fsencode(sys.argv[-1]), "rb").read().decode(),
}
json.dump(out, open(os.environ["LEASEHOLD_OUTPUT"], "w"))
"#,
    );
    let args: Vec<OsString> = vec![
        "it's \"quoted\"".into(),
        "two words".into(),
        "line one\nline two".into(),
        format!("$(touch {})", marker.display()).into(),
        "`touch x`; rm -rf /nonexistent".into(),
        OsString::from_vec(b"bytes \xff\x80 here".to_vec()),
        weird_path.clone().into_os_string(),
    ];
    let pipeline = DeclaredPipeline::new("hostile")
        .step(
            "dump",
            ProcessStep::new(PYTHON).arg(&dump).args(args.clone()),
        )
        .resource_template("shop:{shop}")
        .unwrap()
        .input_key_template("{shop}:{window.start}")
        .unwrap();
    let worker = serve(&srv.url(), pipeline).await;
    let q = connect(&srv.url(), "hostile").await;
    let input = json!({
        "shop": "acme",
        "note": "a \"b\" $(c) `d`\n'e' ünïcödé \u{0000} \\ tab\t",
        "window": {"start": "2026-01-01T10:00:00Z", "end": "2026-01-01T11:00:00Z"},
    });
    let id = enqueue(&srv.url(), "hostile", &input).await;
    let job = ended(&q, &id).await;
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");
    let out: &Value = &job.outputs["dump"];
    let hex = |b: &[u8]| b.iter().map(|c| format!("{c:02x}")).collect::<String>();
    let expected: Vec<String> = args.iter().map(|a| hex(a.as_encoded_bytes())).collect();
    assert_eq!(out["argv"], json!(expected));
    assert_eq!(out["file"], "content\n");
    assert!(!marker.exists(), "a shell interpreted an argument");
    let input_text = String::from_utf8(
        (0..out["input"].as_str().unwrap().len() / 2)
            .map(|i| {
                u8::from_str_radix(&out["input"].as_str().unwrap()[2 * i..2 * i + 2], 16).unwrap()
            })
            .collect(),
    )
    .unwrap();
    assert_eq!(serde_json::from_str::<Value>(&input_text).unwrap(), input);
    let env = &out["env"];
    assert_eq!(env["LEASEHOLD_JOB_ID"], id.as_str());
    assert_eq!(env["LEASEHOLD_QUEUE"], "hostile");
    assert_eq!(env["LEASEHOLD_PIPELINE"], "hostile");
    assert_eq!(env["LEASEHOLD_STEP"], "dump");
    assert_eq!(env["LEASEHOLD_ATTEMPT"], "1");
    assert_eq!(env["LEASEHOLD_FENCE"], job.attempts[0].fence.to_string());
    assert_eq!(
        env["LEASEHOLD_RESOURCE"],
        format!("shop:{}", input["shop"].as_str().unwrap())
    );
    assert_eq!(
        env["LEASEHOLD_INPUT_KEY"],
        format!("{}:2026-01-01T10:00:00Z", input["shop"].as_str().unwrap())
    );
    assert_eq!(env["LEASEHOLD_WINDOW_START"], "2026-01-01T10:00:00Z");
    assert_eq!(env["LEASEHOLD_WINDOW_END"], "2026-01-01T11:00:00Z");
    assert!(env.get("LEASEHOLD_PREVIOUS").is_none());
    stop(worker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_take_the_jobs_fields_and_window_each_as_one_argument() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("pwned");
    let dump = script(
        dir.path(),
        "argv.py",
        "import json, os, sys\njson.dump(sys.argv[1:], open(os.environ['LEASEHOLD_OUTPUT'], 'w'))\n",
    );
    let pipeline = DeclaredPipeline::new("argv")
        .step(
            "dump",
            ProcessStep::new(PYTHON).arg(&dump).args([
                "{note}",
                "--hour={window.start:%Y-%m-%dT%H}",
                "{window.end}",
                "{\"literal\": 1}",
                "{{.Go}}",
            ]),
        )
        .options(PipelineOptions::new().retry(RetryPolicy::exponential(3)));
    let worker = serve(&srv.url(), pipeline).await;
    let q = connect(&srv.url(), "argv").await;
    let note = format!("a b; $(touch {}) `x`", marker.display());
    let input = json!({
        "note": note,
        "window": {"start": "2026-01-01T10:00:00Z", "end": "2026-01-01T11:00:00Z"},
    });
    let id = enqueue(&srv.url(), "argv", &input).await;
    let job = ended(&q, &id).await;
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");
    assert_eq!(
        job.outputs["dump"],
        json!([
            note,
            "--hour=2026-01-01T10",
            "2026-01-01T11:00:00Z",
            "{\"literal\": 1}",
            "{{.Go}}"
        ])
    );
    assert!(!marker.exists(), "a shell interpreted a field");
    // a field the input lacks: a permanent failure that names the argument,
    // and nothing runs
    let id = enqueue(&srv.url(), "argv", &json!({"window": input["window"]})).await;
    let job = ended(&q, &id).await;
    assert_eq!((job.state, job.attempt), (JobState::Failed, 1), "{job:?}");
    let error = job.attempts[0].error.as_ref().unwrap();
    assert_eq!(error.kind, "input", "{error:?}");
    assert!(!error.retryable);
    assert!(
        error
            .message
            .contains("argument 2 (\"{note}\"): the input has no field `note`"),
        "{error:?}"
    );
    stop(worker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_cut_off_from_redis_kills_its_script_before_the_lease_deadline() {
    let srv = RedisServer::start_tcp();
    let target: std::net::SocketAddr = format!("127.0.0.1:{}", srv.port().unwrap())
        .parse()
        .unwrap();
    let proxy = leasehold_testkit::TcpProxy::start(target);
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let body = format!(
        "trap '' TERM\necho $$ > '{0}.tmp'; mv '{0}.tmp' '{0}'\nwhile true; do sleep 0.05; done\n",
        ready.display()
    );
    let path = script(dir.path(), "stubborn.sh", &body);
    let pipeline = DeclaredPipeline::new("cutoff")
        .step("work", ProcessStep::new("sh").arg(&path))
        .options(PipelineOptions::new().lease_ttl(Duration::from_secs(5)));
    let worker = serve(&proxy.url(), pipeline).await;
    let q = connect(&srv.url(), "cutoff").await;
    let id = enqueue(&srv.url(), "cutoff", &json!({})).await;
    wait_until_async(WAIT, "the script started", || {
        let ok = ready.exists();
        async move { ok }
    })
    .await;
    let pid: i32 = std::fs::read_to_string(&ready)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    proxy.stall();
    // the renewals hang from now on: Redis keeps the last deadline they set
    wait_until_async(WAIT, "the script is gone", || async move { gone(pid) }).await;
    let dead_at = now_ms();
    let job = q.job(&id).await.unwrap().unwrap();
    let deadline = job
        .lease
        .as_ref()
        .map(|l| l.deadline)
        .expect("still leased in Redis");
    assert!(
        dead_at < deadline,
        "the script was still alive {} ms past the lease deadline",
        dead_at - deadline
    );
    // the cut-off attempt wrote nothing (no record, the job still RUNNING until swept)
    assert!(read_records(&q, id.as_str()).await.unwrap().is_empty());
    proxy.resume();
    stop(worker).await;
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_worker_leaves_no_child_alive() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let path = script(
        dir.path(),
        "orphan.sh",
        // a script that starts a program of its own (a grandchild of the
        // worker, which a parent-death signal alone would leave running)
        &format!(
            "sleep 600 &\necho \"$$ $!\" > '{0}.tmp'; mv '{0}.tmp' '{0}'\nwait\n",
            ready.display()
        ),
    );
    let (mut fixture, _) = Fixture::start(&srv.url(), "orphan", &[], "sh", &[path.as_os_str()]);
    enqueue(&srv.url(), "orphan", &json!({})).await;
    wait_until_async(WAIT, "the script started", || {
        let ok = ready.exists();
        async move { ok }
    })
    .await;
    let pids: Vec<i32> = std::fs::read_to_string(&ready)
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    let (script_pid, grandchild) = (pids[0], pids[1]);
    assert!(!gone(script_pid) && !gone(grandchild));
    fixture.signal(libc::SIGKILL);
    let _ = fixture.child.wait();
    wait_until_async(WAIT, "the worker's child died with it", || async move {
        gone(script_pid)
    })
    .await;
    wait_until_async(
        WAIT,
        "the program the script started died with it",
        || async move { gone(grandchild) },
    )
    .await;
}

/// A worker frozen (SIGSTOP) with its lease-and-start call in flight: the call
/// is held in a stalled proxy (the job is enqueued meanwhile) until the worker
/// is stopped, then let through, so Redis leases and starts the job (its first step a process step) for a
/// worker that cannot run yet. When the lease has run out and the job was
/// swept STALE, the woken worker gives the attempt up before the step: the
/// script never runs and Redis is not written to.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_woken_after_its_job_was_swept_spawns_no_process() {
    let srv = RedisServer::start_tcp();
    let proxy = leasehold_testkit::TcpProxy::start(
        format!("127.0.0.1:{}", srv.port().unwrap())
            .parse()
            .unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("spawned");
    let path = script(
        dir.path(),
        "marker.sh",
        &format!("echo $$ > '{}'\n", marker.display()),
    );
    let (worker, logs) = Fixture::start(
        &proxy.url(),
        "frozen",
        &[
            "--lease-ttl-ms",
            "1000",
            // the worker's own sweeper stays out of it (the test sweeps)
            "--sweep-ms",
            "60000",
            "--concurrency",
            "1",
            // idle lease calls every 100 ms, slept between (no blocking wait)
            "--max-idle-ms",
            "100",
        ],
        "sh",
        &[path.as_os_str()],
    );
    let q = connect(&srv.url(), "frozen").await;
    // hold one of the worker's idle lease calls (sent while no job is
    // queued; Redis runs it only when the proxy lets it through). A stall that
    // caught a call already on its way to Redis holds its reply instead, and
    // the worker's next call waits on that connection: let it go and try again.
    let started = std::time::Instant::now();
    loop {
        proxy.stall();
        let held = wait_for_held_settle(&proxy, Duration::from_secs(3)).await;
        if held {
            break;
        }
        assert!(
            started.elapsed() < WAIT,
            "no lease call of the worker was held"
        );
        proxy.resume();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let id = enqueue(&srv.url(), "frozen", &json!({})).await;
    worker.signal(libc::SIGSTOP);
    proxy.resume();
    wait_until_async(WAIT, "the job is started for the frozen worker", || {
        let (q, id) = (&q, &id);
        async move { matches!(q.job(id).await, Ok(Some(j)) if j.state == JobState::Running) }
    })
    .await;
    assert_eq!(q.job(&id).await.unwrap().unwrap().attempt, 1);

    // the lease runs out while the worker is frozen, and the job is swept
    let deadline = q
        .job(&id)
        .await
        .unwrap()
        .unwrap()
        .lease
        .expect("a live lease")
        .deadline;
    wait_until_async(WAIT, "the lease's deadline passes", || {
        let q = &q;
        async move { redis_now(q).await > deadline + 50 }
    })
    .await;
    wait_until_async(WAIT, "the job is swept STALE", || {
        let (q, id) = (&q, &id);
        async move {
            q.sweep(100).await.expect("sweep");
            matches!(q.job(id).await, Ok(Some(j)) if j.state == JobState::Stale)
        }
    })
    .await;
    let job_key = q.keys().job(id.as_str());
    let snapshot = srv.dump(&job_key);
    worker.signal(libc::SIGCONT);

    // it reads the lease reply only now, past the lease's local deadline
    wait_until_async(WAIT, "the woken worker gives the attempt up", || {
        let found = logs
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("abandoned before step run began"));
        async move { found }
    })
    .await;
    drop(worker);
    assert!(!marker.exists(), "the step's script ran");
    assert!(read_records(&q, id.as_str()).await.unwrap().is_empty());
    assert_eq!(
        srv.dump(&job_key),
        snapshot,
        "the woken worker wrote nothing"
    );
    assert_eq!(q.job(&id).await.unwrap().unwrap().state, JobState::Stale);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_deletes_the_process_records_with_their_job() {
    let srv = RedisServer::start();
    let pipeline = DeclaredPipeline::new("kept").step("say", ProcessStep::shell("echo hello"));
    let worker = serve(&srv.url(), pipeline).await;
    let q = connect(&srv.url(), "kept").await;
    let first = enqueue(&srv.url(), "kept", &json!({"n": 1})).await;
    assert_eq!(ended(&q, &first).await.state, JobState::Succeeded);
    assert_eq!(record(&q, &first, 1, "say").await.stdout_tail, "hello\n");
    let second = enqueue(&srv.url(), "kept", &json!({"n": 2})).await;
    assert_eq!(ended(&q, &second).await.state, JobState::Succeeded);
    stop(worker).await;
    // keep one terminal job: the older one goes, with its process records
    let purging = Queue::connect(
        &srv.url(),
        "kept",
        QueueConfig::default().retention(leasehold_core::Retention::new(1, Duration::ZERO)),
    )
    .await
    .unwrap();
    assert_eq!(purging.purge(100).await.unwrap(), 1);
    assert!(q.job(&first).await.unwrap().is_none());
    let mut conn = q.pool().get().await.unwrap();
    let exists: (bool, bool) = leasehold_core::redis::pipe()
        .exists(q.keys().process_log(first.as_str()))
        .exists(q.keys().process_log(second.as_str()))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, (false, true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cleanup_command_learns_that_a_step_was_cut_off() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let told = dir.path().join("told");
    let long = script(
        dir.path(),
        "long.sh",
        &format!(
            "echo $$ > '{0}.tmp'; mv '{0}.tmp' '{0}'\nexec sleep 600\n",
            ready.display()
        ),
    );
    let cleanup = script(
        dir.path(),
        "cleanup.sh",
        &format!(
            "printf '%s|%s|%s|%s|%s\\n' \"$LEASEHOLD_CLEANUP_REASON\" \"$LEASEHOLD_CUT_MID_STEP\" \"$LEASEHOLD_LAST_STEP\" \"$LEASEHOLD_CLEANUP_DETAIL\" \"$(cat \"$LEASEHOLD_INPUT\")\" > '{0}.tmp'; mv '{0}.tmp' '{0}'\n",
            told.display()
        ),
    );
    let pipeline = DeclaredPipeline::new("cleaned")
        .step("first", ProcessStep::shell("true"))
        .step("long", ProcessStep::new("sh").arg(&long))
        .cleanup(ProcessStep::new("sh").arg(&cleanup));
    let worker = serve(&srv.url(), pipeline).await;
    let q = connect(&srv.url(), "cleaned").await;
    let id = enqueue(&srv.url(), "cleaned", &json!({"table": "sales"})).await;
    file(&ready).await;
    q.cancel(&id, "wrong table", "test").await.unwrap();
    assert_eq!(ended(&q, &id).await.state, JobState::Cancelled);
    let text = file(&told).await;
    assert_eq!(
        text,
        "cancelled|1|first|wrong table|{\"table\":\"sales\"}\n"
    );
    stop(worker).await;
}

/// The lines of `path` (none while it does not exist).
fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Waits for a record of attempt `attempt` of `step` that `ok` accepts; returns it.
async fn record_when(
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

/// A worker frozen by SIGSTOP while its script writes: the step's monitor,
/// with no help from the worker, sends the group SIGTERM at the lease's local
/// deadline and SIGKILL after the capped grace (the script ignores SIGTERM),
/// so the script's last write comes before Redis's deadline for the lease.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_workers_script_dies_before_its_lease_does() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let writes = dir.path().join("writes");
    let path = script(
        dir.path(),
        "writer.py",
        &format!(
            "import os, signal, time\n\
             signal.signal(signal.SIGTERM, signal.SIG_IGN)\n\
             with open('{}', 'a') as f:\n\
             \x20   f.write('pid %d\\n' % os.getpid()); f.flush()\n\
             \x20   while True:\n\
             \x20       f.write('%d\\n' % int(time.time() * 1000)); f.flush()\n\
             \x20       time.sleep(0.01)\n",
            writes.display()
        ),
    );
    let (fixture, _logs) = Fixture::start(
        &srv.url(),
        "freeze",
        &["--lease-ttl-ms", "3000", "--concurrency", "1"],
        PYTHON,
        &[path.as_os_str()],
    );
    let q = connect(&srv.url(), "freeze").await;
    let id = enqueue(&srv.url(), "freeze", &json!({})).await;
    wait_until_async(WAIT, "the script writes", || {
        let n = lines(&writes).len();
        async move { n > 5 }
    })
    .await;
    let pid: i32 = lines(&writes)[0]
        .strip_prefix("pid ")
        .unwrap()
        .parse()
        .unwrap();
    fixture.signal(libc::SIGSTOP);
    wait_until_async(WAIT, "the frozen worker's script is dead", || async move {
        gone(pid)
    })
    .await;
    let died_by_redis = redis_now(&q).await;
    // the worker is still frozen: the monitor did it on its own
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", fixture.pid())).unwrap();
    let state = stat.rsplit(')').next().unwrap().trim_start().chars().next();
    assert_eq!(state, Some('T'), "the worker was not frozen: {stat}");
    // no renewal since the freeze: the deadline Redis holds now is the last
    let job = q.job(&id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Running);
    let deadline = job.lease.expect("the frozen worker's lease").deadline;
    let last: i64 = lines(&writes).last().unwrap().parse().unwrap();
    eprintln!(
        "last write {} ms before the lease deadline; script gone {} ms before it",
        deadline - last,
        deadline - died_by_redis
    );
    assert!(
        last < deadline,
        "the script wrote at {last}, after the lease deadline {deadline}"
    );
    assert!(died_by_redis < deadline, "the script outlived the lease");
    fixture.signal(libc::SIGCONT);
    drop(fixture);
}

/// The reported pid is the program's, and it leads its own process group: an
/// operator's `kill <pid>` ends the program (the record says by which signal).
/// The running record carries the output's tails and the progress.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reported_pid_is_the_programs_and_kill_reaches_it() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let path = script(
        dir.path(),
        "pid.py",
        &format!(
            "import os, sys, time\n\
             print('hello from the script'); print('::progress 46'); sys.stdout.flush()\n\
             open('{0}.tmp', 'w').write('%d %d\\n' % (os.getpid(), os.getpgrp()))\n\
             os.rename('{0}.tmp', '{0}')\n\
             time.sleep(600)\n",
            ready.display()
        ),
    );
    let pipeline = DeclaredPipeline::new("pids")
        .options(PipelineOptions::new().retry(RetryPolicy::NONE))
        .step("run", ProcessStep::new(PYTHON).arg(&path));
    let worker = serve(&srv.url(), pipeline).await;
    let q = connect(&srv.url(), "pids").await;
    let id = enqueue(&srv.url(), "pids", &json!({})).await;
    let ids: Vec<u32> = file(&ready)
        .await
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    let (pid, pgrp) = (ids[0], ids[1]);
    assert_eq!(pgrp, pid, "the program leads its own process group");
    let running = record_when(&q, &id, 1, "run", "the running record with its tail", |r| {
        r.stdout_tail.contains("hello from the script") && r.progress.is_some()
    })
    .await;
    assert_eq!(running.outcome, StepOutcome::Running);
    assert_eq!(running.pid, Some(pid));
    assert_eq!(running.pgid, Some(pid));
    assert_eq!(running.progress, Some(46.0));
    // an operator's kill of the reported pid
    // SAFETY: a plain kill(2) of the pid the record names
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let job = ended(&q, &id).await;
    assert_eq!(job.state, JobState::Failed);
    let done = record(&q, &id, 1, "run").await;
    assert_eq!(done.signal, Some(libc::SIGTERM), "{done:?}");
    assert_eq!(done.pid, Some(pid));
    assert!(done.stdout_tail.contains("hello from the script"));
    stop(worker).await;
}

/// A step that leaves a `setsid` child holding its stdout and stderr: what
/// was read is kept (tails, byte counts, the error's last line), and the end
/// recorded is when the program exited, not when the pipes closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detached_child_holding_the_pipes_does_not_wipe_the_record() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let detached = dir.path().join("detached");
    let path = script(
        dir.path(),
        "detach.sh",
        &format!(
            "setsid sh -c 'echo $$ > \"$1\"; exec sleep 60' sh '{}' &\n\
             echo 'a line on stdout'\n\
             echo \"the error's last line\" >&2\n\
             exit 3\n",
            detached.display()
        ),
    );
    let pipeline = DeclaredPipeline::new("detach")
        .options(PipelineOptions::new().retry(RetryPolicy::NONE))
        .step("run", ProcessStep::new("sh").arg(&path));
    let worker = serve(&srv.url(), pipeline).await;
    let q = connect(&srv.url(), "detach").await;
    let id = enqueue(&srv.url(), "detach", &json!({})).await;
    let job = ended(&q, &id).await;
    let sleeper: i32 = file(&detached).await.trim().parse().unwrap();
    // the test ends what its script started outside the group
    // SAFETY: kill(2) of the detached child's pid
    unsafe { libc::kill(sleeper, libc::SIGKILL) };
    assert_eq!(job.state, JobState::Failed);
    let r = record(&q, &id, 1, "run").await;
    assert_eq!(r.exit_code, Some(3));
    assert!(r.stdout_tail.contains("a line on stdout"), "{r:?}");
    assert!(r.stderr_tail.contains("the error's last line"), "{r:?}");
    assert!(r.stdout_bytes > 0 && r.stderr_bytes > 0, "{r:?}");
    let ran = r.ended_at.unwrap() - r.started_at;
    assert!(ran < 900, "the end was recorded {ran} ms after the start");
    let error = job.attempts.last().and_then(|a| a.error.clone()).unwrap();
    assert!(error.message.contains("the error's last line"), "{error:?}");
    stop(worker).await;
}

/// `kill -9` of the worker mid-step: the record it flushed while the step ran
/// keeps the output's last lines and the progress, and once the attempt is
/// swept STALE the record says when the worker was lost.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_workers_step_keeps_its_tail_and_says_when_the_worker_was_lost() {
    let srv = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let path = script(
        dir.path(),
        "talk.sh",
        "echo 'first line'\necho '::progress 46'\necho 'last words before the end'\n\
         echo 'a warning' >&2\nexec sleep 600\n",
    );
    let (mut fixture, _logs) = Fixture::start(
        &srv.url(),
        "lost",
        &["--lease-ttl-ms", "1000", "--sweep-ms", "60000"],
        "sh",
        &[path.as_os_str()],
    );
    let q = connect(&srv.url(), "lost").await;
    let id = enqueue(&srv.url(), "lost", &json!({})).await;
    let running = record_when(&q, &id, 1, "run", "the tails flushed while running", |r| {
        r.stdout_tail.contains("last words before the end") && r.stderr_tail.contains("a warning")
    })
    .await;
    assert_eq!(running.progress, Some(46.0));
    fixture.signal(libc::SIGKILL);
    let _ = fixture.child.wait();
    wait_until_async(WAIT, "the job is swept STALE", || {
        let (q, id) = (&q, &id);
        async move {
            q.sweep(100).await.expect("sweep");
            matches!(q.job(id).await, Ok(Some(j)) if j.state == JobState::Stale)
        }
    })
    .await;
    let job = q.job(&id).await.unwrap().unwrap();
    let r = record(&q, &id, 1, "run").await;
    assert_eq!(r.outcome, StepOutcome::Running);
    assert!(r.stdout_tail.contains("last words before the end"), "{r:?}");
    assert_eq!(r.worker_lost_at(&job), job.stale_at);
    assert!(job.stale_at.is_some());
}

/// A step that ends while Redis is out of reach: the final process record's
/// write is retried, and lands once Redis answers again (within the lease).
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_ending_while_redis_is_out_of_reach_keeps_its_record() {
    let srv = RedisServer::start_tcp();
    let proxy = leasehold_testkit::TcpProxy::start(
        format!("127.0.0.1:{}", srv.port().unwrap())
            .parse()
            .unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let (ready, go) = (dir.path().join("ready"), dir.path().join("go"));
    let path = script(
        dir.path(),
        "late.sh",
        &format!(
            "echo started > '{0}'\nwhile [ ! -e '{1}' ]; do sleep 0.02; done\n\
             echo 'the last line before Redis came back'\n",
            ready.display(),
            go.display()
        ),
    );
    let (fixture, logs) = Fixture::start(
        &proxy.url(),
        "outage",
        &["--lease-ttl-ms", "20000", "--concurrency", "1"],
        "sh",
        &[path.as_os_str()],
    );
    let q = connect(&srv.url(), "outage").await;
    let id = enqueue(&srv.url(), "outage", &json!({})).await;
    file(&ready).await;
    proxy.block();
    std::fs::write(&go, "").unwrap();
    wait_until_async(WAIT, "the record's write failed and is retried", || {
        let found = logs
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("process record not written; retrying"));
        async move { found }
    })
    .await;
    proxy.unblock();
    let job = ended(&q, &id).await;
    assert_eq!(job.state, JobState::Succeeded);
    let r = record(&q, &id, 1, "run").await;
    assert_eq!(r.outcome, StepOutcome::Succeeded);
    assert!(
        r.stdout_tail
            .contains("the last line before Redis came back"),
        "{r:?}"
    );
    drop(fixture);
}
