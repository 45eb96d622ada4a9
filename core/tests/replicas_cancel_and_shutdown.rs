//! Stopping work with real worker replicas (separate OS processes, see
//! `support/replica.rs`): a cancel during a step, and graceful shutdown on
//! SIGTERM (the step finishes and another replica resumes after it; a short
//! grace cuts a step that ignores cancellation).
//!
//! Every wait is on an observable condition with a generous deadline. The
//! tests run one at a time (they are timing-sensitive: leases of 1 s renewed
//! every 250 ms).

mod support;

use std::time::{Duration, Instant};

use leasehold_core::{Cancelled, JobState};
use leasehold_testkit::{wait_until_async, RedisServer};
use serde_json::{json, Value};
use support::replica::*;

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
