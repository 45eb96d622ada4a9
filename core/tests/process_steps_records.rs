//! Process steps' records: deleted by retention with their job, a cut-off
//! step told to the cleanup command, the reported PID being the program's
//! (and `kill` reaching it), and a detached child holding the pipes that does
//! not wipe the record.
//!
//! The scripts are small `sh` and `python3` programs written by each test into
//! a temporary directory (`support/process.rs`). Every wait is on a condition
//! with a generous deadline.

mod support;

use std::time::Duration;

use leasehold_core::process::{DeclaredPipeline, ProcessStep, StepOutcome};
use leasehold_core::{JobState, PipelineOptions, Queue, QueueConfig, RetryPolicy};
use leasehold_testkit::RedisServer;
use serde_json::json;
use support::connect;
use support::process::*;

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
