//! Functional tests of the core client's transition scripts against a real,
//! private `redis-server` (one per test), the operator's moves: cancel (at
//! once for a queued job, a request for a leased or running one), operator
//! retry and resolve of a STALE job, and cleanup claims.

mod support;

use std::time::Duration;

use leasehold_core::Error;
use leasehold_core::{Cancelled, JobId, JobState, Queue, RetryMode};
use leasehold_core::{Finished, Lease, Outcome, Renewal, Started};
use leasehold_testkit::{wait_until_async, RedisServer};
use support::client_scripts::*;
use support::server::{
    connect, enqueue, force_expire, get, job, lease_one, read, zmembers, zscore, TTL, WAIT,
};

// ---- cancel -----------------------------------------------------------------

#[tokio::test]
async fn cancel_of_a_queued_job_is_immediate_wherever_it_waits() {
    let srv = RedisServer::start();
    let q = connect(&srv, "cq").await;
    let k = q.keys().clone();
    let ready = enqueue(&q, job("p", 1).input_key("ready-key")).await;
    let delayed = enqueue(&q, job("p", 2).delay(Duration::from_secs(3600))).await;
    let holder = enqueue(&q, job("p", 3).resource("r")).await;
    let parked = enqueue(&q, job("p", 4).resource("r")).await;
    // Lease the holder and park the waiter (cancel `ready` first so it is not leased).
    assert_eq!(
        q.cancel(&ready, "duplicate", "op:alice").await.unwrap(),
        Cancelled::Now
    );
    let leased = q.lease("w", &["p"], 2, TTL).await.unwrap().leases;
    assert_eq!(leased.len(), 1);
    assert_eq!(leased[0].job, holder);
    assert!(zscore(&srv, &k.parked("r"), parked.as_str()).is_some());

    assert_eq!(
        q.cancel(&delayed, "not needed", "op:bob").await.unwrap(),
        Cancelled::Now
    );
    assert_eq!(
        q.cancel(&parked, "superseded", "op:carol").await.unwrap(),
        Cancelled::Now
    );

    for (id, reason, by) in [
        (&ready, "duplicate", "op:alice"),
        (&delayed, "not needed", "op:bob"),
        (&parked, "superseded", "op:carol"),
    ] {
        let j = read(&q, id).await;
        assert_eq!(j.state, JobState::Cancelled);
        let c = j.cancel.as_ref().unwrap();
        assert_eq!((c.reason.as_str(), c.by.as_str()), (reason, by));
        assert_eq!(j.attempts.len(), 1);
        assert_eq!(j.attempts[0].state, JobState::Cancelled);
        assert_eq!(j.attempts[0].cancel.as_ref().unwrap().reason, reason);
        assert!(zscore(&srv, &k.done(), id.as_str()).is_some());
        let ev = events_of(&srv, &q, id);
        let last = ev.last().unwrap();
        assert_eq!(
            (
                last["op"].as_str(),
                last["from"].as_str(),
                last["to"].as_str()
            ),
            ("cancel", "QUEUED", "CANCELLED")
        );
        assert_eq!((last["by"].as_str(), last["reason"].as_str()), (by, reason));
    }
    assert!(zmembers(&srv, &k.ready("p")).is_empty());
    assert!(zmembers(&srv, &k.delayed("p")).is_empty());
    assert_eq!(get::<i64>(&srv, &["EXISTS", &k.parked("r")]), 0);
    assert_eq!(
        get::<i64>(&srv, &["SISMEMBER", &k.parked_resources(), "r"]),
        0
    );
    assert_eq!(
        get::<Option<String>>(&srv, &["HGET", &k.inputs(), "ready-key"]),
        None
    );

    // Terminal: a second cancel is refused, writing nothing.
    let before = srv.dump("*");
    let err = q.cancel(&ready, "again", "op").await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::AlreadyTerminal {
                state: JobState::Cancelled,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(matches!(
        q.cancel(&JobId::new(), "x", "op").await.unwrap_err(),
        Error::NotFound { .. }
    ));
    assert!(matches!(
        q.cancel(&holder, "", "op").await.unwrap_err(),
        Error::InvalidArgument(_)
    ));
    assert_eq!(before, srv.dump("*"));
}

#[tokio::test]
async fn cancel_of_leased_or_running_job_is_a_request_its_holder_sees() {
    let srv = RedisServer::start();
    let q = connect(&srv, "cl").await;
    let k = q.keys().clone();
    let running = enqueue(&q, job("p", 1)).await;
    let leased = enqueue(&q, job("p", 2).resource("r2")).await;
    let waiter = enqueue(&q, job("p", 3).resource("r2")).await;
    let ls = q.lease("w", &["p"], 3, TTL).await.unwrap().leases;
    assert_eq!(ls.len(), 2, "the waiter is parked behind r2");
    let (lr, ll) = (&ls[0], &ls[1]);
    let _ = q.start(lr, "fetch").await.unwrap();

    assert_eq!(
        q.cancel(&running, "customer asked", "op:a").await.unwrap(),
        Cancelled::Requested {
            state: JobState::Running
        }
    );
    assert_eq!(
        q.cancel(&leased, "window closed", "op:b").await.unwrap(),
        Cancelled::Requested {
            state: JobState::Leased
        }
    );
    assert_eq!(
        q.cancel(&running, "second thoughts", "op:c").await.unwrap(),
        Cancelled::AlreadyRequested {
            state: JobState::Running,
            reason: "customer asked".into()
        }
    );
    let j = read(&q, &running).await;
    assert_eq!(
        j.state,
        JobState::Running,
        "a request is not a cancellation"
    );
    let c = j.cancel.unwrap();
    assert_eq!(
        (c.reason.as_str(), c.by.as_str()),
        ("customer asked", "op:a")
    );
    assert!(c.at.is_some());
    let ev = events_of(&srv, &q, &running);
    let last = ev.last().unwrap();
    assert_eq!(
        (
            last["op"].as_str(),
            last["from"].as_str(),
            last["to"].as_str()
        ),
        ("cancel", "RUNNING", "RUNNING")
    );
    assert!(last["reason"].contains("customer asked"));

    // Seen by renew and checkpoint.
    assert_eq!(
        q.renew(&[lr, ll]).await.unwrap(),
        [
            Renewal::CancelRequested {
                reason: "customer asked".into()
            },
            Renewal::CancelRequested {
                reason: "window closed".into()
            },
        ]
    );
    assert_eq!(
        q.checkpoint(lr, "fetch", "{}", Some("load"))
            .await
            .unwrap()
            .as_deref(),
        Some("customer asked")
    );

    // A LEASED job with a pending cancel is cancelled by its start; its lock goes.
    assert_eq!(
        q.start(ll, "fetch").await.unwrap(),
        Started::Cancelled {
            reason: "window closed".into()
        }
    );
    let j = read(&q, &leased).await;
    assert_eq!(j.state, JobState::Cancelled);
    assert_eq!(j.attempts[0].state, JobState::Cancelled);
    assert_eq!(
        j.attempts[0].cancel.as_ref().unwrap().reason,
        "window closed"
    );
    assert_eq!(j.attempts[0].started_at, None, "it never ran");
    assert_eq!(zscore(&srv, &k.leases(), leased.as_str()), None);
    assert_eq!(get::<i64>(&srv, &["EXISTS", &k.lock("r2")]), 0);
    assert!(
        zscore(&srv, &k.ready("p"), waiter.as_str()).is_some(),
        "waiter unparked"
    );
    assert_eq!(
        moves(&events_of(&srv, &q, &leased)).last().unwrap(),
        &mv("start", "LEASED", "CANCELLED")
    );

    // The RUNNING holder honours it.
    assert_eq!(
        q.finish(
            lr,
            &Outcome::Cancelled {
                reason: "customer asked".into(),
                cleanup_needed: true
            }
        )
        .await
        .unwrap(),
        Finished::Ended(JobState::Cancelled)
    );
    let j = read(&q, &running).await;
    assert_eq!(j.state, JobState::Cancelled);
    let rec = &j.attempts[0];
    assert_eq!(rec.state, JobState::Cancelled);
    assert!(rec.cleanup_needed);
    assert_eq!(rec.reason.as_deref(), Some("customer asked"));
    assert_eq!(rec.steps.len(), 1);
    assert!(j.cleanup_needed);

    let err = q.cancel(&running, "again", "op").await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::AlreadyTerminal {
                state: JobState::Cancelled,
                ..
            }
        ),
        "{err:?}"
    );
    // The waiter is leasable now.
    assert_eq!(lease_one(&q, "w", "p").await.job, waiter);
}

// ---- operator retry and resolve -----------------------------------------------

/// Leases, starts and checkpoints one job, then lets the sweeper make it STALE.
async fn make_stale(srv: &RedisServer, q: &Queue, id: &JobId, pipeline: &str) -> Lease {
    let l = lease_one(q, "w-dead", pipeline).await;
    assert_eq!(&l.job, id);
    let _ = q.start(&l, "fetch").await.unwrap();
    q.checkpoint(&l, "fetch", r#"{"n":1}"#, Some("load"))
        .await
        .unwrap();
    force_expire(srv, q, id);
    let report = q.sweep(100).await.unwrap();
    assert_eq!(report.stale, 1);
    assert_eq!(read(q, id).await.state, JobState::Stale);
    l
}

#[tokio::test]
async fn operator_retry_resumes_or_starts_over_and_keeps_history() {
    let srv = RedisServer::start();
    let q = connect(&srv, "op").await;
    let k = q.keys().clone();
    let a = enqueue(&q, job("p", 1).resource("r")).await;
    make_stale(&srv, &q, &a, "p").await;
    assert!(zscore(&srv, &k.stale(), a.as_str()).is_some());
    let stale_at = read(&q, &a).await.stale_at.expect("stale_at");

    assert_eq!(
        q.retry(&a, RetryMode::Resume, "op:alice", "no writes happened")
            .await
            .unwrap(),
        2
    );
    let j = read(&q, &a).await;
    assert_eq!((j.state, j.attempt), (JobState::Queued, 2));
    assert_eq!(j.stale_at, None);
    assert_eq!(j.last_step.as_deref(), Some("fetch"));
    let rec = &j.attempts[0];
    assert_eq!((rec.n, rec.state), (1, JobState::Stale));
    assert_eq!(rec.ended_at, stale_at, "it ended when it went STALE");
    assert_eq!(rec.cut_step.as_deref(), Some("load"), "the cut-off step");
    let res = rec.resolution.as_ref().unwrap();
    assert_eq!(
        (res.action.as_str(), res.by.as_str(), res.reason.as_str()),
        ("retry", "op:alice", "no writes happened")
    );
    assert_eq!(
        (res.to, res.mode.as_deref()),
        (Some(JobState::Queued), Some("resume"))
    );
    assert_eq!(zscore(&srv, &k.stale(), a.as_str()), None);
    assert_eq!(
        get::<i64>(&srv, &["EXISTS", &k.lock("r")]),
        0,
        "STALE lock released"
    );
    let ev = events_of(&srv, &q, &a);
    let last = ev.last().unwrap();
    assert_eq!(
        (
            last["op"].as_str(),
            last["from"].as_str(),
            last["to"].as_str(),
            last["by"].as_str()
        ),
        ("retry", "STALE", "QUEUED", "op:alice")
    );
    assert!(last["reason"].contains("no writes happened"));
    let l = lease_one(&q, "w2", "p").await;
    assert_eq!((l.job.clone(), l.attempt), (a.clone(), 2));
    assert_eq!(l.last_step.as_deref(), Some("fetch"));
    assert_eq!(l.last_output.as_deref(), Some(r#"{"n":1}"#));

    // From the start: outputs cleared. From FAILED, too.
    let b = enqueue(&q, job("p", 2)).await;
    let lb = lease_one(&q, "w", "p").await;
    let _ = q.start(&lb, "fetch").await.unwrap();
    q.checkpoint(&lb, "fetch", "{}", Some("load"))
        .await
        .unwrap();
    q.finish(&lb, &failed("bug", "fixed in v2", false, Duration::ZERO))
        .await
        .unwrap();
    assert!(zscore(&srv, &k.done(), b.as_str()).is_some());
    assert_eq!(
        q.retry(&b, RetryMode::FromStart, "op:bob", "after deploy")
            .await
            .unwrap(),
        2
    );
    let j = read(&q, &b).await;
    assert_eq!((j.state, j.attempt), (JobState::Queued, 2));
    assert!(j.outputs.is_empty());
    assert_eq!(j.last_step, None);
    assert_eq!(j.attempts.len(), 1);
    assert_eq!(
        j.attempts[0].state,
        JobState::Failed,
        "the failed attempt stays FAILED"
    );
    assert_eq!(
        zscore(&srv, &k.done(), b.as_str()),
        None,
        "not terminal any more"
    );
    let l = lease_one(&q, "w", "p").await;
    assert_eq!((l.job.clone(), l.attempt), (b.clone(), 2));
    assert_eq!((l.last_step, l.last_output), (None, None));

    // Only FAILED, CANCELLED and STALE may be retried.
    let before = srv.dump("*");
    let err = q
        .retry(&b, RetryMode::Resume, "op", "why")
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Refused {
                state: JobState::Leased,
                op: leasehold_core::transitions::Op::Retry,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(matches!(
        q.retry(&JobId::new(), RetryMode::Resume, "op", "why")
            .await
            .unwrap_err(),
        Error::NotFound { .. }
    ));
    assert_eq!(before, srv.dump("*"));
    // A retry that would run the same input twice is refused.
    let d = enqueue(&q, job("p", 4).input_key("window:7")).await;
    q.cancel(&d, "paused", "op").await.unwrap();
    let e = enqueue(&q, job("p", 5).input_key("window:7")).await;
    let before = srv.dump("*");
    let err = q
        .retry(&d, RetryMode::Resume, "op", "why")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InputKeyTaken { job, holder } if job == d.as_str() && holder == e.as_str()),
        "{err:?}"
    );
    assert_eq!(before, srv.dump("*"));
    // A cancelled job may be retried.
    let c = enqueue(&q, job("p", 3)).await;
    q.cancel(&c, "oops", "op").await.unwrap();
    assert_eq!(
        q.retry(&c, RetryMode::FromStart, "op", "undo")
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        read(&q, &c).await.cancel,
        None,
        "the cancel request belonged to attempt 1"
    );
}

#[tokio::test]
async fn resolve_moves_stale_to_each_terminal_state_with_a_mandatory_reason() {
    let srv = RedisServer::start();
    let q = connect(&srv, "res").await;
    let k = q.keys().clone();
    let mut stale = Vec::new();
    for (i, res) in ["r1", "r2", "r3"].into_iter().enumerate() {
        let id = enqueue(&q, job("p", i as u64).resource(res)).await;
        make_stale(&srv, &q, &id, "p").await;
        stale.push(id);
    }
    let before = srv.dump("*");
    for reason in ["", "   "] {
        let err = q
            .resolve(&stale[0], JobState::Failed, "op", reason)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    }
    let err = q
        .resolve(&stale[0], JobState::Queued, "op", "why")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert_eq!(before, srv.dump("*"), "rejected resolves write nothing");

    for ((id, res), state) in stale.iter().zip(["r1", "r2", "r3"]).zip([
        JobState::Succeeded,
        JobState::Failed,
        JobState::Cancelled,
    ]) {
        assert_eq!(
            get::<i64>(&srv, &["PTTL", &k.lock(res)]),
            -1,
            "STALE holds its lock"
        );
        let reason = format!("checked the sink: {state}");
        let stale_at = read(&q, id).await.stale_at.expect("stale_at");
        q.resolve(id, state, "op:dana", &reason).await.unwrap();
        let j = read(&q, id).await;
        assert_eq!(j.state, state);
        assert_eq!(j.lease, None);
        // the attempt is recorded as it went STALE, the decision beside it
        let rec = &j.attempts[0];
        assert_eq!(rec.state, JobState::Stale);
        assert_eq!(rec.ended_at, stale_at, "it ended when it went STALE");
        assert_eq!(rec.cut_step.as_deref(), Some("load"), "the cut-off step");
        assert_eq!(rec.reason, None);
        let r = rec.resolution.as_ref().unwrap();
        assert_eq!(
            (r.action.as_str(), r.by.as_str(), r.reason.as_str(), r.to),
            ("resolve", "op:dana", reason.as_str(), Some(state))
        );
        assert!(r.at.is_some_and(|at| at >= stale_at), "{r:?}");
        assert_eq!(rec.worker, "w-dead", "who ran it stays on record");
        assert_eq!(
            get::<i64>(&srv, &["EXISTS", &k.lock(res)]),
            0,
            "lock released"
        );
        assert!(zscore(&srv, &k.done(), id.as_str()).is_some());
        let ev = events_of(&srv, &q, id);
        let last = ev.last().unwrap();
        assert_eq!(
            (
                last["op"].as_str(),
                last["from"].as_str(),
                last["to"].as_str(),
                last["by"].as_str(),
                last["reason"].as_str()
            ),
            (
                "resolve",
                "STALE",
                state.as_str(),
                "op:dana",
                reason.as_str()
            )
        );
    }
    assert!(zmembers(&srv, &k.stale()).is_empty());

    // Resolving anything but a STALE job is refused.
    let queued = enqueue(&q, job("p", 9)).await;
    let before = srv.dump("*");
    let err = q
        .resolve(&queued, JobState::Failed, "op", "why")
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Refused {
                state: JobState::Queued,
                op: leasehold_core::transitions::Op::Resolve,
                ..
            }
        ),
        "{err:?}"
    );
    let err = q
        .resolve(&stale[0], JobState::Failed, "op", "again")
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Refused {
                state: JobState::Succeeded,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(before, srv.dump("*"));
}

/// Cleanup hooks of resolved STALE jobs are claimed, not popped: a claim its
/// worker never marks done (it died mid-hook) goes back on the list when it
/// expires, so every hook runs at least once; jobs of pipelines a worker does not
/// serve stay for others; a purged job is dropped.
#[tokio::test]
async fn cleanup_claims_run_every_hook_at_least_once() {
    let srv = RedisServer::start();
    let q = connect(&srv, "cl").await;
    let k = q.keys().clone();
    let a = enqueue(&q, job("p", 1)).await;
    make_stale(&srv, &q, &a, "p").await;
    let b = enqueue(&q, job("other", 2)).await;
    make_stale(&srv, &q, &b, "other").await;
    q.resolve(&a, JobState::Failed, "op", "rolled back")
        .await
        .unwrap();
    q.resolve(&b, JobState::Cancelled, "op", "dropped")
        .await
        .unwrap();
    let list =
        |srv: &RedisServer| -> Vec<String> { get(srv, &["LRANGE", &k.cleanup(), "0", "-1"]) };
    assert_eq!(list(&srv), [a.to_string(), b.to_string()]);
    let inspector = leasehold_core::inspect::Inspector::new(q.clone());
    let status = inspector.status().await.unwrap();
    assert_eq!((status.cleanups_waiting, status.cleanups_claimed), (2, 0));

    // a worker serving only `p` claims a, and leaves b for a worker serving `other`
    // (a claim of 2 s: long enough for the checks below on a loaded machine)
    let short = Duration::from_secs(2);
    let claimed = q.claim_cleanups(16, &["p"], short).await.unwrap();
    assert_eq!(claimed, [a.to_string()]);
    assert_eq!(list(&srv), [b.to_string()]);
    assert_eq!(zmembers(&srv, &k.cleaning()), [a.to_string()]);
    // while the claim holds, nobody else gets a
    assert!(q
        .claim_cleanups(16, &["p"], short)
        .await
        .unwrap()
        .is_empty());
    let status = inspector.status().await.unwrap();
    assert_eq!((status.cleanups_waiting, status.cleanups_claimed), (1, 1));

    // the claimer never says done: once its claim expires, a is handed out again
    wait_until_async(WAIT, "the expired claim handed out again", || async {
        q.claim_cleanups(16, &["p"], TTL).await.unwrap() == [a.to_string()]
    })
    .await;
    q.cleanup_done(a.as_str()).await.unwrap();
    assert!(zmembers(&srv, &k.cleaning()).is_empty());
    assert_eq!(list(&srv), [b.to_string()]);

    // a job purged before its hook ran leaves nothing to clean up: dropped
    let _: i64 = get(&srv, &["DEL", &k.job(b.as_str())]);
    assert!(q
        .claim_cleanups(16, &["other"], TTL)
        .await
        .unwrap()
        .is_empty());
    assert!(list(&srv).is_empty());
    assert!(zmembers(&srv, &k.cleaning()).is_empty());
}
