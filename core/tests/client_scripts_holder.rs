//! Functional tests of the core client's transition scripts against a real,
//! private `redis-server` (one per test), the holder's moves: start,
//! checkpoint and finish on the happy path, a wrong token refused, renew, and
//! failures (a retryable one queues a new attempt that resumes after the last
//! step; a permanent one is terminal; a pending cancel stops automatic
//! retry).

mod support;

use std::time::Duration;

use leasehold_core::Error;
use leasehold_core::{AttemptError, Cancelled, JobId, JobState};
use leasehold_core::{Finished, Lease, Outcome, Renewal, Started};
use leasehold_testkit::RedisServer;
use serde_json::json;
use support::client_scripts::*;
use support::server::{
    connect, enqueue, eventually, get, job, lease_one, read, script_calls, zmembers, zscore, TTL,
};

// ---- start / checkpoint / finish ---------------------------------------------

#[tokio::test]
async fn happy_path_records_outputs_steps_attempt_and_one_event_per_transition() {
    let srv = RedisServer::start();
    let q = connect(&srv, "etl").await;
    let id = enqueue(&q, job("etl", 1).resource("db:main").input_key("day:1")).await;
    let l = lease_one(&q, "worker-7", "etl").await;
    assert_eq!(l.resource.as_deref(), Some("db:main"));

    assert_eq!(q.start(&l, "fetch").await.unwrap(), Started::Running);
    let j = read(&q, &id).await;
    assert_eq!(j.state, JobState::Running);
    assert_eq!(j.step.as_deref(), Some("fetch"));
    let started_at = j.started_at.expect("started_at");

    let steps = [
        ("fetch", json!({"rows": 3}), Some("validate")),
        ("validate", json!({"valid": 3, "rejected": 0}), Some("load")),
        ("load", json!({"loaded": 3}), None),
    ];
    for (step, output, next) in &steps {
        let cancel = q
            .checkpoint(&l, step, &output.to_string(), *next)
            .await
            .unwrap();
        assert_eq!(cancel, None);
        let j = read(&q, &id).await;
        assert_eq!(j.last_step.as_deref(), Some(*step));
        assert_eq!(j.step.as_deref(), *next);
        assert_eq!(&j.outputs[*step], output);
        assert_eq!(j.state, JobState::Running);
    }
    let j = read(&q, &id).await;
    let names: Vec<&str> = j.steps.iter().map(|s| s.step.as_str()).collect();
    assert_eq!(names, ["fetch", "validate", "load"]);

    assert_eq!(
        q.finish(&l, &Outcome::Succeeded).await.unwrap(),
        Finished::Ended(JobState::Succeeded)
    );
    let j = read(&q, &id).await;
    assert_eq!(j.state, JobState::Succeeded);
    assert_eq!(j.lease, None);
    assert_eq!(j.step, None);
    assert_eq!(j.outputs.len(), 3, "outputs stay readable after the end");
    assert_eq!(j.attempts.len(), 1);
    let rec = &j.attempts[0];
    assert_eq!(rec.n, 1);
    assert_eq!(rec.state, JobState::Succeeded);
    assert_eq!(rec.worker, "worker-7");
    assert_eq!(rec.fence, l.fence);
    assert_eq!(rec.started_at, Some(started_at));
    assert!(rec.leased_at.unwrap() <= started_at);
    let rec_names: Vec<&str> = rec.steps.iter().map(|s| s.step.as_str()).collect();
    assert_eq!(rec_names, ["fetch", "validate", "load"]);
    let mut prev = started_at;
    for s in &rec.steps {
        assert!(s.at >= prev, "step times are ordered");
        prev = s.at;
    }
    assert!(rec.ended_at >= prev);
    assert_eq!(rec.error, None);
    assert!(!rec.cleanup_needed);

    // Indexes: no lease, no lock, in the retention index, key freed.
    let k = q.keys();
    assert_eq!(zscore(&srv, &k.leases(), id.as_str()), None);
    assert_eq!(get::<i64>(&srv, &["EXISTS", &k.lock("db:main")]), 0);
    assert_eq!(
        zscore(&srv, &k.done(), id.as_str()),
        Some(rec.ended_at as f64)
    );
    assert_eq!(
        get::<Option<String>>(&srv, &["HGET", &k.inputs(), "day:1"]),
        None
    );

    let ev = events_of(&srv, &q, &id);
    assert_eq!(
        moves(&ev),
        [
            mv("enqueue", "", "QUEUED"),
            mv("lease", "QUEUED", "LEASED"),
            mv("start", "LEASED", "RUNNING"),
            mv("finish", "RUNNING", "SUCCEEDED"),
        ]
    );
    for e in &ev {
        for field in ["op", "job", "attempt", "from", "to", "by"] {
            assert!(e.contains_key(field), "event {e:?} lacks {field}");
        }
        // an empty reason is left out of the entry (readers take it as '')
        assert!(
            e.get("reason").is_none_or(|r| !r.is_empty()),
            "event {e:?} keeps an empty reason"
        );
        assert_eq!(e["attempt"], "1");
    }
    assert!(ev[1..].iter().all(|e| e["by"] == "worker-7"));

    // The finished lease moves nothing any more.
    let err = q.checkpoint(&l, "again", "{}", None).await.unwrap_err();
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
    let err = q.finish(&l, &Outcome::Succeeded).await.unwrap_err();
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
    assert_eq!(
        q.renew(&[&l]).await.unwrap(),
        [Renewal::Lost {
            state: Some(JobState::Succeeded)
        }]
    );
    // A start on a job that is not LEASED is refused without writing.
    let before = srv.dump("*");
    let err = q.start(&l, "fetch").await.unwrap_err();
    assert!(err.is_lease_lost(), "{err:?}");
    assert_eq!(before, srv.dump("*"));
}

#[tokio::test]
async fn wrong_token_is_refused_as_lease_lost_and_changes_nothing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "tok").await;
    enqueue(&q, job("p", 1)).await;
    let l = lease_one(&q, "w", "p").await;
    let mut forged = l.clone();
    forged.token = "not-the-token".into();
    let before = srv.dump("*");
    let err = q.start(&forged, "fetch").await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::LeaseLost {
                state: JobState::Leased,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(matches!(
        q.release(&forged).await.unwrap_err(),
        Error::LeaseLost { .. }
    ));
    assert!(matches!(
        q.finish(
            &forged,
            &Outcome::Cancelled {
                reason: "x".into(),
                cleanup_needed: false
            }
        )
        .await
        .unwrap_err(),
        Error::LeaseLost { .. }
    ));
    assert_eq!(before, srv.dump("*"), "refusals write nothing");
    let _ = q.start(&l, "fetch").await.unwrap();
    let err = q
        .checkpoint(&forged, "fetch", "{}", None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::LeaseLost {
                state: JobState::Running,
                ..
            }
        ),
        "{err:?}"
    );
    let err = q.finish(&forged, &Outcome::Succeeded).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::LeaseLost {
                state: JobState::Running,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(read(&q, &l.job).await.state, JobState::Running);
}

// ---- renew ------------------------------------------------------------------

#[tokio::test]
async fn renew_reports_held_cancel_requested_and_lost_per_lease_in_one_call() {
    let srv = RedisServer::start();
    let q = connect(&srv, "renew").await;
    for i in 0..4 {
        enqueue(&q, job("p", i)).await;
    }
    let ttl = Duration::from_secs(5);
    let ls = q.lease("w", &["p"], 4, ttl).await.unwrap().leases;
    assert_eq!(ls.len(), 4);
    let (running, leased, cancelled, finished) = (&ls[0], &ls[1], &ls[2], &ls[3]);
    let _ = q.start(running, "s").await.unwrap();
    let _ = q.start(cancelled, "s").await.unwrap();
    let _ = q.start(finished, "s").await.unwrap();
    assert!(matches!(
        q.cancel(&cancelled.job, "operator says stop", "op")
            .await
            .unwrap(),
        Cancelled::Requested {
            state: JobState::Running
        }
    ));
    q.finish(finished, &Outcome::Succeeded).await.unwrap();
    let mut forged = running.clone();
    forged.token = "forged".into();
    let mut gone = running.clone();
    gone.job = JobId::new();

    let before: Vec<i64> = {
        let mut v = Vec::new();
        for l in [running, leased, cancelled] {
            v.push(read(&q, &l.job).await.lease.unwrap().deadline);
        }
        v
    };
    // Renew for longer than the original TTL, so the deadlines must move forward.
    let longer = |l: &Lease| Lease {
        ttl: Duration::from_secs(120),
        ..l.clone()
    };
    let (r, le, c, f) = (
        longer(running),
        longer(leased),
        longer(cancelled),
        longer(finished),
    );
    reset_stats(&srv, &q).await;
    let replies = q.renew(&[&r, &le, &c, &f, &forged, &gone]).await.unwrap();
    assert_eq!(script_calls(&srv), 1, "one script call for the whole batch");
    assert_eq!(
        replies,
        [
            Renewal::Held,
            Renewal::Held,
            Renewal::CancelRequested {
                reason: "operator says stop".into()
            },
            Renewal::Lost {
                state: Some(JobState::Succeeded)
            },
            Renewal::Lost {
                state: Some(JobState::Running)
            },
            Renewal::Lost { state: None },
        ]
    );
    for (l, old) in [running, leased, cancelled].into_iter().zip(before) {
        let j = read(&q, &l.job).await;
        let new = j.lease.unwrap().deadline;
        assert!(
            new > old + 100_000,
            "deadline moved forward: {old} -> {new}"
        );
        assert_eq!(
            zscore(&srv, &q.keys().leases(), l.job.as_str()),
            Some(new as f64)
        );
    }
    assert_eq!(
        read(&q, &leased.job).await.state,
        JobState::Leased,
        "renew keeps the state"
    );
    assert_eq!(
        zscore(&srv, &q.keys().leases(), finished.job.as_str()),
        None
    );
    assert_eq!(q.renew(&[]).await.unwrap(), Vec::new());
}

// ---- failures and retries ------------------------------------------------------

#[tokio::test]
async fn retryable_failure_queues_a_new_attempt_that_resumes_after_the_last_step() {
    let srv = RedisServer::start();
    let q = connect(&srv, "retry").await;
    let id = enqueue(
        &q,
        job("p", 1).max_attempts(3).resource("api").input_key("k"),
    )
    .await;
    let l1 = lease_one(&q, "w1", "p").await;
    let _ = q.start(&l1, "fetch").await.unwrap();
    q.checkpoint(&l1, "fetch", r#"{"cursor":42}"#, Some("load"))
        .await
        .unwrap();
    let outcome = Outcome::Failed {
        error: AttemptError {
            kind: "timeout".into(),
            message: "upstream took too long".into(),
            retryable: true,
            retries_exhausted: false,
        },
        backoff: Duration::from_millis(300),
        cleanup_needed: true,
    };
    let Finished::Retrying {
        attempt,
        not_before,
    } = q.finish(&l1, &outcome).await.unwrap()
    else {
        panic!("a retryable failure with attempts left is retried");
    };
    assert_eq!(attempt, 2);

    let j = read(&q, &id).await;
    assert_eq!(j.state, JobState::Queued);
    assert_eq!(j.attempt, 2);
    assert_eq!(j.not_before, not_before);
    assert!(not_before >= j.attempts[0].ended_at + 300);
    assert_eq!(j.lease, None);
    assert_eq!(j.worker, None);
    assert!(!j.cleanup_needed, "the new attempt starts clean");
    assert_eq!(j.last_step.as_deref(), Some("fetch"));
    assert_eq!(j.outputs["fetch"], json!({"cursor": 42}));
    assert_eq!(j.attempts.len(), 1);
    let rec = &j.attempts[0];
    assert_eq!((rec.n, rec.state), (1, JobState::Failed));
    assert_eq!(
        rec.error,
        Some(AttemptError {
            kind: "timeout".into(),
            message: "upstream took too long".into(),
            retryable: true,
            retries_exhausted: false,
        })
    );
    assert!(rec.cleanup_needed);
    assert_eq!(rec.steps.len(), 1);
    let k = q.keys();
    assert_eq!(
        zscore(&srv, &k.delayed("p"), id.as_str()),
        Some(not_before as f64)
    );
    assert_eq!(zscore(&srv, &k.ready("p"), id.as_str()), None);
    assert_eq!(
        get::<i64>(&srv, &["EXISTS", &k.lock("api")]),
        0,
        "lock released"
    );
    assert_eq!(
        get::<Option<String>>(&srv, &["HGET", &k.inputs(), "k"]).as_deref(),
        Some(id.as_str()),
        "still not terminal: the input key stays taken"
    );
    let ev = events_of(&srv, &q, &id);
    let tail: Vec<_> = moves(&ev).into_iter().rev().take(2).rev().collect();
    assert_eq!(
        tail,
        [
            mv("finish", "RUNNING", "FAILED"),
            mv("retry", "FAILED", "QUEUED")
        ]
    );
    assert_eq!(ev.last().unwrap()["attempt"], "2");

    // Attempt 2 comes due after the backoff and resumes after "fetch".
    let l2 = eventually("attempt 2 is leased after its backoff", || async {
        q.lease("w2", &["p"], 1, TTL).await.unwrap().leases.pop()
    })
    .await;
    assert!(read(&q, &id).await.leased_at.unwrap() >= not_before);
    assert_eq!(l2.attempt, 2);
    assert!(l2.fence > l1.fence);
    assert_eq!(l2.last_step.as_deref(), Some("fetch"));
    let out: serde_json::Value = serde_json::from_str(l2.last_output.as_deref().unwrap()).unwrap();
    assert_eq!(out, json!({"cursor": 42}));

    // Attempt 2 fails without backoff: attempt 3 is ready at once.
    let _ = q.start(&l2, "load").await.unwrap();
    let r = q
        .finish(&l2, &failed("io", "disk full", true, Duration::ZERO))
        .await
        .unwrap();
    assert!(matches!(r, Finished::Retrying { attempt: 3, .. }), "{r:?}");
    assert!(zscore(&srv, &k.ready("p"), id.as_str()).is_some());
    let l3 = lease_one(&q, "w3", "p").await;
    assert_eq!(l3.attempt, 3);
    let _ = q.start(&l3, "load").await.unwrap();
    // Attempts exhausted: FAILED is terminal even though retryable.
    assert_eq!(
        q.finish(&l3, &failed("io", "disk full again", true, Duration::ZERO))
            .await
            .unwrap(),
        Finished::Ended(JobState::Failed)
    );
    let j = read(&q, &id).await;
    assert_eq!((j.state, j.attempt), (JobState::Failed, 3));
    let states: Vec<(u32, JobState, &str)> = j
        .attempts
        .iter()
        .map(|a| (a.n, a.state, a.worker.as_str()))
        .collect();
    assert_eq!(
        states,
        [
            (1, JobState::Failed, "w1"),
            (2, JobState::Failed, "w2"),
            (3, JobState::Failed, "w3")
        ]
    );
    assert!(zscore(&srv, &k.done(), id.as_str()).is_some());
    assert_eq!(
        get::<Option<String>>(&srv, &["HGET", &k.inputs(), "k"]),
        None
    );
    assert!(q
        .lease("w", &["p"], 5, TTL)
        .await
        .unwrap()
        .leases
        .is_empty());
}

#[tokio::test]
async fn permanent_failure_is_terminal_at_once() {
    let srv = RedisServer::start();
    let q = connect(&srv, "perm").await;
    let id = enqueue(&q, job("p", 1).max_attempts(5)).await;
    let l = lease_one(&q, "w", "p").await;
    let _ = q.start(&l, "validate").await.unwrap();
    // The message survives the trip through Lua's cjson: quotes, newlines, slashes, non-ASCII.
    let message = "금액이 음수입니다: \"-3\"\n  at row 7 / file a\\b.csv";
    assert_eq!(
        q.finish(
            &l,
            &failed("validation", message, false, Duration::from_secs(1))
        )
        .await
        .unwrap(),
        Finished::Ended(JobState::Failed)
    );
    let j = read(&q, &id).await;
    assert_eq!(
        (j.state, j.attempt, j.attempts.len()),
        (JobState::Failed, 1, 1)
    );
    let err = j.attempts[0].error.as_ref().unwrap();
    assert_eq!((err.kind.as_str(), err.retryable), ("validation", false));
    assert_eq!(err.message, message);
    assert!(zmembers(&srv, &q.keys().delayed("p")).is_empty());
    assert!(zmembers(&srv, &q.keys().ready("p")).is_empty());
    // SUCCEEDED and FAILED need a RUNNING job: a LEASED one is refused.
    enqueue(&q, job("p", 2)).await;
    let l2 = lease_one(&q, "w", "p").await;
    let err = q.finish(&l2, &Outcome::Succeeded).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Refused {
                state: JobState::Leased,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn pending_cancel_request_stops_automatic_retry() {
    let srv = RedisServer::start();
    let q = connect(&srv, "cr").await;
    let id = enqueue(&q, job("p", 1).max_attempts(3)).await;
    let l = lease_one(&q, "w", "p").await;
    let _ = q.start(&l, "fetch").await.unwrap();
    q.cancel(&id, "bad input window", "op").await.unwrap();
    // The step failed (e.g. because it was interrupted): the cancel must still win.
    let r = q
        .finish(&l, &failed("interrupted", "step cut", true, Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(
        r,
        Finished::Ended(JobState::Failed),
        "no new attempt after a cancel request"
    );
    let j = read(&q, &id).await;
    assert_eq!((j.state, j.attempt), (JobState::Failed, 1));
    let rec = &j.attempts[0];
    assert_eq!(rec.cancel.as_ref().unwrap().reason, "bad input window");
    assert!(q
        .lease("w", &["p"], 5, TTL)
        .await
        .unwrap()
        .leases
        .is_empty());
}
