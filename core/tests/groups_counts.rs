//! Groups through the `Queue` client against a private `redis-server`, the
//! holder's moves made by hand (lease, start, finish) so every count is checked
//! after the exact move that changes it: counts per state, sealing, the
//! completion job enqueued once (with its trace context), a failed child
//! blocking an all-succeeded group (and a retry unblocking it), a STALE child
//! holding it, an automatic retry counted once, cancelling a group mid-run,
//! every move of a child counted in its state (lease, prefetch, start, release,
//! sweep, retries), a quarantined child, and a large group cancelled and
//! retried a batch per call.

mod support;

use leasehold_core::Error;
use leasehold_core::Outcome;
use leasehold_core::{GroupPolicy, GroupStatus, NewGroup};
use leasehold_core::{JobId, JobState, RetryMode};
use leasehold_testkit::RedisServer;
use support::groups::*;
use support::server::{connect, enqueue, force_expire, get, job, lease_one, read, TTL};

#[tokio::test]
async fn a_group_counts_its_children_and_enqueues_its_completion_once() {
    let srv = RedisServer::start();
    let q = connect(&srv, "g").await;
    let done = JobId::new();
    let group = NewGroup::new("day-1").completion(job("agg", 0).id(done.clone()));
    assert!(q.create_group(&group, "test").await.unwrap());
    assert!(
        !q.create_group(&group, "test").await.unwrap(),
        "a second create is a no-op"
    );
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(enqueue(&q, job("win", n).group("day-1")).await);
    }
    // open: every child ending does not complete it
    run_one(&q, "win", Outcome::Succeeded).await;
    run_one(&q, "win", Outcome::Succeeded).await;
    let info = q.group("day-1").await.unwrap().unwrap();
    assert_eq!(
        (info.total, info.succeeded, info.status),
        (3, 2, GroupStatus::Open)
    );
    assert_eq!(
        q.seal_group("day-1", "test").await.unwrap(),
        GroupStatus::Sealed
    );
    assert!(matches!(
        q.enqueue(job("win", 9).group("day-1")).await,
        Err(Error::GroupClosed { .. })
    ));
    assert!(
        q.job(&done).await.unwrap().is_none(),
        "not before the last child"
    );
    run_one(&q, "win", Outcome::Succeeded).await;
    let info = q.group("day-1").await.unwrap().unwrap();
    assert_eq!(info.status, GroupStatus::Completed);
    assert_eq!(info.outcome, Some(JobState::Succeeded));
    assert!(info.fired);
    let agg = read(&q, &done).await;
    assert_eq!(
        (agg.state, agg.pipeline.as_str()),
        (JobState::Queued, "agg")
    );
    assert_eq!(completion_events(&srv, &q), 1);
    // the completion job finishing changes nothing of the group; nothing fires twice
    run_one(&q, "agg", Outcome::Succeeded).await;
    assert_eq!(completion_events(&srv, &q), 1);
    let outputs = q.group_outputs("day-1").await.unwrap();
    assert_eq!(outputs.len(), 3);
}

/// A group's completion job is encoded as every new job is: its trace
/// context reaches the job the group fires (and a plain one has none).
#[tokio::test]
async fn a_completion_job_carries_its_trace_context() {
    const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let srv = RedisServer::start();
    let q = connect(&srv, "gt").await;
    let traced = JobId::new();
    let plain = JobId::new();
    let groups = [
        (
            "t",
            job("agg", 0).id(traced.clone()).traceparent(TRACEPARENT),
        ),
        ("p", job("agg", 1).id(plain.clone())),
    ];
    for (name, completion) in groups {
        let group = NewGroup::new(name).completion(completion);
        assert!(q.create_group(&group, "test").await.unwrap());
        // no child: sealing it settles it, and its completion job is enqueued
        assert_eq!(
            q.seal_group(name, "test").await.unwrap(),
            GroupStatus::Completed
        );
    }
    let field = |id: &JobId| -> Option<String> {
        get(&srv, &["HGET", &q.keys().job(id.as_str()), "trace"])
    };
    assert_eq!(field(&traced).as_deref(), Some(TRACEPARENT));
    assert_eq!(
        field(&plain),
        None,
        "a plain completion job has no trace field"
    );
    let first = lease_one(&q, "w", "agg").await;
    let second = lease_one(&q, "w", "agg").await;
    let (t, p) = if first.job == traced {
        (first, second)
    } else {
        (second, first)
    };
    assert_eq!(t.traceparent.as_deref(), Some(TRACEPARENT));
    assert_eq!(p.traceparent, None);
}

#[tokio::test]
async fn a_failed_child_blocks_an_all_succeeded_group_and_a_retry_moves_it_on() {
    let srv = RedisServer::start();
    let q = connect(&srv, "g").await;
    let done = JobId::new();
    q.create_group(
        &NewGroup::new("b").completion(job("agg", 0).id(done.clone())),
        "t",
    )
    .await
    .unwrap();
    // a child retried automatically counts once, by its final attempt
    let flaky = enqueue(&q, job("win", 1).group("b").max_attempts(2)).await;
    let bad = enqueue(&q, job("win", 2).group("b")).await;
    q.seal_group("b", "t").await.unwrap();
    assert_eq!(run_one(&q, "win", failed(true)).await, flaky);
    let info = q.group("b").await.unwrap().unwrap();
    assert_eq!(
        (info.failed, info.active()),
        (0, 2),
        "an automatic retry is not a failure"
    );
    assert_eq!(run_one(&q, "win", failed(false)).await, bad);
    assert_eq!(run_one(&q, "win", Outcome::Succeeded).await, flaky);
    let view = q.group_view("b").await.unwrap().unwrap();
    assert_eq!(view.info.status, GroupStatus::Blocked);
    assert_eq!((view.info.succeeded, view.info.failed), (1, 1));
    assert_eq!(view.failed, vec![bad.clone()]);
    let why = view.why().unwrap();
    assert!(
        why.contains("completion held") && why.contains(bad.as_str()),
        "{why}"
    );
    assert!(q.job(&done).await.unwrap().is_none(), "held by the failure");
    // retrying the group's failed children moves it on
    let (retried, refused) = q
        .retry_group("b", RetryMode::FromStart, "op", "fixed")
        .await
        .unwrap();
    assert_eq!((retried, refused.len()), (vec![bad.clone()], 0));
    let info = q.group("b").await.unwrap().unwrap();
    assert_eq!((info.status, info.failed), (GroupStatus::Sealed, 0));
    run_one(&q, "win", Outcome::Succeeded).await;
    assert_eq!(
        q.group("b").await.unwrap().unwrap().status,
        GroupStatus::Completed
    );
    assert_eq!(read(&q, &done).await.state, JobState::Queued);
    assert_eq!(completion_events(&srv, &q), 1);
}

#[tokio::test]
async fn all_terminal_fires_whatever_the_outcome_and_a_stale_child_holds_the_group() {
    let srv = RedisServer::start();
    let q = connect(&srv, "g").await;
    let done = JobId::new();
    q.create_group(
        &NewGroup::new("t")
            .policy(GroupPolicy::AllTerminal)
            .completion(job("agg", 0).id(done.clone())),
        "t",
    )
    .await
    .unwrap();
    let a = enqueue(&q, job("win", 1).group("t")).await;
    let b = enqueue(&q, job("win", 2).group("t")).await;
    q.seal_group("t", "t").await.unwrap();
    assert_eq!(run_one(&q, "win", failed(false)).await, a);
    // b's worker dies while RUNNING: STALE holds the group open
    let lease = lease_one(&q, "w1", "win").await;
    assert_eq!(lease.job, b);
    let _ = q.start(&lease, "only").await.unwrap();
    force_expire(&srv, &q, &b);
    q.sweep(10).await.unwrap();
    let view = q.group_view("t").await.unwrap().unwrap();
    assert_eq!(
        (view.info.stale, view.info.status),
        (1, GroupStatus::Sealed)
    );
    let why = view.why().unwrap();
    assert!(
        why.contains(&format!("waiting for an operator on job {b}")),
        "{why}"
    );
    assert!(q.job(&done).await.unwrap().is_none());
    q.resolve(&b, JobState::Succeeded, "op", "verified in the sink")
        .await
        .unwrap();
    let info = q.group("t").await.unwrap().unwrap();
    assert_eq!(
        (
            info.status,
            info.outcome,
            info.stale,
            info.succeeded,
            info.failed
        ),
        (GroupStatus::Completed, Some(JobState::Failed), 0, 1, 1)
    );
    assert_eq!(read(&q, &done).await.state, JobState::Queued);
}

#[tokio::test]
async fn cancelling_a_group_cancels_queued_children_and_asks_running_ones() {
    let srv = RedisServer::start();
    let q = connect(&srv, "g").await;
    let done = JobId::new();
    q.create_group(
        &NewGroup::new("c").completion(job("agg", 0).id(done.clone())),
        "t",
    )
    .await
    .unwrap();
    for n in 0..4 {
        enqueue(&q, job("win", n).group("c")).await;
    }
    q.seal_group("c", "t").await.unwrap();
    run_one(&q, "win", Outcome::Succeeded).await;
    let running = lease_one(&q, "w1", "win").await;
    let _ = q.start(&running, "only").await.unwrap();
    let report = q.cancel_group("c", "wrong day", "op").await.unwrap();
    assert_eq!((report.cancelled, report.requested), (2, 1));
    let job = read(&q, &running.job).await;
    assert_eq!(job.state, JobState::Running);
    assert!(
        job.cancel.is_some(),
        "the running child got its in-flight cancel"
    );
    q.finish(
        &running,
        &Outcome::Cancelled {
            reason: "honoured".into(),
            cleanup_needed: false,
        },
    )
    .await
    .unwrap();
    let info = q.group("c").await.unwrap().unwrap();
    assert_eq!(
        (info.status, info.succeeded, info.cancelled),
        (GroupStatus::Cancelled, 1, 3)
    );
    assert!(
        q.job(&done).await.unwrap().is_none(),
        "a cancelled group never completes"
    );
    assert!(ready(&srv, &q, "win").is_empty());
}

#[tokio::test]
async fn every_move_of_a_child_is_counted_in_its_state_and_the_counts_always_sum_to_the_total() {
    let srv = RedisServer::start();
    let q = connect(&srv, "g").await;
    q.create_group(&NewGroup::new("m"), "t").await.unwrap();
    for n in 0..5 {
        enqueue(&q, job("win", n).group("m").max_attempts(2)).await;
    }
    // a plain job of the same pipeline is not counted anywhere
    enqueue(&q, job("win", 99)).await;
    let info = exact(&srv, &q, "m").await;
    assert_eq!((info.total, info.queued), (5, 5));
    // prefetch: several leased in one call
    let mut leases = q.lease("w1", &["win"], 3, TTL).await.unwrap().leases;
    let info = exact(&srv, &q, "m").await;
    assert_eq!((info.queued, info.leased), (2, 3));
    let a = leases.pop().unwrap();
    let b = leases.pop().unwrap();
    let c = leases.pop().unwrap();
    let _ = q.start(&a, "only").await.unwrap();
    assert_eq!(exact(&srv, &q, "m").await.running, 1);
    // handed back unstarted
    q.release(&b).await.unwrap();
    let info = exact(&srv, &q, "m").await;
    assert_eq!((info.queued, info.leased, info.running), (3, 1, 1));
    // an automatic retry: QUEUED again, not FAILED
    q.finish(&a, &failed(true)).await.unwrap();
    let info = exact(&srv, &q, "m").await;
    assert_eq!((info.queued, info.running, info.failed), (4, 0, 0));
    // a lease that expires before its start is swept back to QUEUED
    force_expire(&srv, &q, &c.job);
    q.sweep(10).await.unwrap();
    assert_eq!(exact(&srv, &q, "m").await.queued, 5);
    // one RUNNING when its lease expires goes STALE; an operator's retry is QUEUED
    let d = lease_one(&q, "w1", "win").await;
    let _ = q.start(&d, "only").await.unwrap();
    force_expire(&srv, &q, &d.job);
    q.sweep(10).await.unwrap();
    assert_eq!(exact(&srv, &q, "m").await.stale, 1);
    q.retry(&d.job, RetryMode::Resume, "op", "checked")
        .await
        .unwrap();
    assert_eq!(exact(&srv, &q, "m").await.queued, 5);
    // a cancel of a QUEUED child, a cancel honoured by a LEASED one at start
    let e = lease_one(&q, "w1", "win").await;
    q.cancel(&e.job, "not needed", "op").await.unwrap();
    assert_eq!(exact(&srv, &q, "m").await.leased, 1);
    let _ = q.start(&e, "only").await.unwrap();
    let info = exact(&srv, &q, "m").await;
    assert_eq!((info.cancelled, info.leased, info.queued), (1, 0, 4));
    // the rest run to their end: each counted once, by its final attempt
    q.seal_group("m", "t").await.unwrap();
    let mut ended = 0;
    while ended < 6 {
        let l = q.lease("w1", &["win"], 1, TTL).await.unwrap().leases;
        let Some(l) = l.into_iter().next() else { break };
        let _ = q.start(&l, "only").await.unwrap();
        q.finish(&l, &Outcome::Succeeded).await.unwrap();
        exact(&srv, &q, "m").await;
        ended += 1;
    }
    let info = exact(&srv, &q, "m").await;
    assert_eq!(
        (info.succeeded, info.cancelled, info.status),
        (4, 1, GroupStatus::Blocked)
    );
}

#[tokio::test]
async fn a_quarantined_child_is_counted_and_named_and_its_repair_moves_the_group_on() {
    let srv = RedisServer::start();
    let q = connect(&srv, "g").await;
    let done = JobId::new();
    q.create_group(
        &NewGroup::new("qg").completion(job("agg", 0).id(done.clone())),
        "t",
    )
    .await
    .unwrap();
    let bad = enqueue(&q, job("win", 1).group("qg")).await;
    let good = enqueue(&q, job("win", 2).group("qg")).await;
    let gone = enqueue(&q, job("win", 3).group("qg")).await;
    q.seal_group("qg", "t").await.unwrap();
    // one child's attempt number is corrupted, another's key is overwritten
    let jk = q.keys().job(bad.as_str());
    let _: i64 = get(&srv, &["HSET", &jk, "attempt", "x"]);
    let _: String = get(&srv, &["SET", &q.keys().job(gone.as_str()), "oops"]);
    let leased = q.lease("w1", &["win"], 3, TTL).await.unwrap().leases;
    assert_eq!(leased.len(), 1);
    assert_eq!(leased[0].job, good);
    let _ = q.start(&leased[0], "only").await.unwrap();
    q.finish(&leased[0], &Outcome::Succeeded).await.unwrap();
    let view = q.group_view("qg").await.unwrap().unwrap();
    assert_eq!(
        (view.info.quarantined, view.info.succeeded, view.info.status),
        (2, 1, GroupStatus::Blocked),
        "the group does not wait for them forever"
    );
    let why = view.why().unwrap();
    assert!(
        why.contains(bad.as_str()) && why.contains(gone.as_str()) && why.contains("quarantine"),
        "{why}"
    );
    exact(&srv, &q, "qg").await;
    // a quarantined job cannot join another group
    q.create_group(&NewGroup::new("later"), "t").await.unwrap();
    let err = q
        .enqueue(job("win", 1).id(bad.clone()).group("later"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::CannotJoinGroup { reason, .. } if reason.contains("quarantine")),
        "{err}"
    );
    // the overwritten one is purged: the group keeps it as not succeeded
    q.purge_quarantined(&gone, "op").await.unwrap();
    let info = q.group("qg").await.unwrap().unwrap();
    assert_eq!((info.quarantined, info.purged), (2, 1));
    // the other is repaired: QUEUED again, the group is open for it, and it completes
    let _: i64 = get(&srv, &["HSET", &jk, "attempt", "1"]);
    q.repair_quarantined(&bad, "op").await.unwrap();
    let info = q.group("qg").await.unwrap().unwrap();
    assert_eq!(
        (info.quarantined, info.queued, info.status),
        (1, 1, GroupStatus::Sealed)
    );
    assert_eq!(run_one(&q, "win", Outcome::Succeeded).await, bad);
    let info = q.group("qg").await.unwrap().unwrap();
    assert_eq!(
        (info.succeeded, info.quarantined, info.status),
        (2, 1, GroupStatus::Blocked)
    );
    // with all_terminal the same group would have completed: a quarantined child is an end
    q.create_group(
        &NewGroup::new("qt")
            .policy(GroupPolicy::AllTerminal)
            .completion(job("agg", 1).id(JobId::new())),
        "t",
    )
    .await
    .unwrap();
    let lone = enqueue(&q, job("win", 7).group("qt")).await;
    q.seal_group("qt", "t").await.unwrap();
    let _: String = get(&srv, &["SET", &q.keys().job(lone.as_str()), "oops"]);
    assert!(q
        .lease("w1", &["win"], 1, TTL)
        .await
        .unwrap()
        .leases
        .is_empty());
    let info = q.group("qt").await.unwrap().unwrap();
    assert_eq!(
        (info.status, info.outcome, info.fired),
        (GroupStatus::Completed, Some(JobState::Failed), true)
    );
}

#[tokio::test]
async fn a_large_group_is_cancelled_and_retried_a_batch_per_call_and_says_so_midway() {
    let srv = RedisServer::start();
    let q = connect(&srv, "g").await;
    // retry: 450 cancelled children retried in batches
    q.create_group(&NewGroup::new("big"), "t").await.unwrap();
    let jobs: Vec<_> = (0..450).map(|n| job("win", n).group("big")).collect();
    let ids: Vec<JobId> = q
        .enqueue_bulk(jobs)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    q.seal_group("big", "t").await.unwrap();
    for id in &ids {
        q.cancel(id, "wrong day", "op").await.unwrap();
    }
    assert_eq!(exact(&srv, &q, "big").await.status, GroupStatus::Blocked);
    // one batch, then the caller stops (a crash): the group says a retry is under way
    let step = q
        .retry_group_batch("big", RetryMode::FromStart, "op", "right day", 200)
        .await
        .unwrap();
    assert_eq!((step.retried.len(), step.done), (200, false));
    let view = q.group_view("big").await.unwrap().unwrap();
    assert_eq!(view.info.retry_next, Some(200));
    assert!(view.why().unwrap().contains("retry under way: 200 of 450"));
    let info = exact(&srv, &q, "big").await;
    assert_eq!((info.queued, info.cancelled), (200, 250));
    // again: it goes on from the cursor
    let (retried, refused) = q
        .retry_group("big", RetryMode::FromStart, "op", "right day")
        .await
        .unwrap();
    assert_eq!((retried.len(), refused.len()), (250, 0));
    let info = exact(&srv, &q, "big").await;
    assert_eq!(
        (info.queued, info.retry_next, info.status),
        (450, None, GroupStatus::Sealed)
    );
    let retries = support::server::events(&srv, &q)
        .iter()
        .filter(|e| e.get("op").map(String::as_str) == Some("retry"))
        .count();
    assert_eq!(retries, 450, "one retry event per child, none twice");

    // cancel: a running child, then the caller stops after one batch
    let running = lease_one(&q, "w1", "win").await;
    let _ = q.start(&running, "only").await.unwrap();
    let (step, finished) = q
        .cancel_group_batch("big", "abandoned", "op", 200)
        .await
        .unwrap();
    assert!(!finished);
    assert_eq!(step.cancelled + step.requested, 200);
    let view = q.group_view("big").await.unwrap().unwrap();
    assert_eq!(view.info.status, GroupStatus::Cancelled);
    assert!(view.why().unwrap().contains("cancel under way: 200 of 450"));
    assert!(
        matches!(
            q.enqueue(job("win", 999).group("big")).await,
            Err(Error::GroupClosed { .. })
        ),
        "a cancelled group takes no children even midway"
    );
    let report = q.cancel_group("big", "abandoned", "op").await.unwrap();
    assert_eq!(
        step.cancelled + step.requested + report.cancelled + report.requested,
        450
    );
    assert_eq!(step.requested + report.requested, 1);
    let info = exact(&srv, &q, "big").await;
    assert_eq!(
        (info.cancelled, info.running, info.cancel_next),
        (449, 1, None)
    );
    assert!(read(&q, &running.job).await.cancel.is_some());
    // a second cancel finds nothing left to do
    let again = q.cancel_group("big", "abandoned", "op").await.unwrap();
    assert_eq!((again.cancelled, again.requested), (0, 0));
}
