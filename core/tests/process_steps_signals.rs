//! Process steps with real processes, how a step ends: signals on cancel and
//! at the end of the grace, a time limit, and exit codes as outcomes (a
//! retryable exit resumes at its step with the earlier outputs).
//!
//! The scripts are small `sh` and `python3` programs written by each test into
//! a temporary directory (`support/process.rs`). Every wait is on a condition
//! with a generous deadline.

mod support;

use std::time::Duration;

use leasehold_core::process::{CutWhy, DeclaredPipeline, ProcessStep, StepOutcome};
use leasehold_core::{JobState, PipelineOptions, RetryPolicy};
use leasehold_testkit::{wait_until_async, RedisServer};
use serde_json::json;
use support::connect;
use support::process::*;

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
