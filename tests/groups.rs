//! Groups and dependencies through the `Queue` client against a private
//! `redis-server`, the holder's moves made by hand (lease, start, finish) so
//! every count is checked after the exact move that changes it: counts per
//! state, sealing, the completion job enqueued once, a failed child blocking
//! an all-succeeded group (and a retry unblocking it), a STALE child holding
//! it, an automatic retry counted once, cancelling a group mid-run, and
//! dependents that wait out of the ready sets (chain, diamond, a failed
//! parent, parents that must exist).

mod support;

use std::time::Duration;

use leasehold::group::{Dependency, GroupPolicy, GroupStatus, NewGroup, ParentFailure};
use leasehold::lease::Outcome;
use leasehold::queue::{AttemptError, JobId, JobState, Queue, RetryMode};
use leasehold::Error;
use leasehold_testkit::RedisServer;
use support::{connect, enqueue, force_expire, get, job, lease_one, read, TTL};

fn failed(retryable: bool) -> Outcome {
    Outcome::Failed {
        error: AttemptError {
            kind: "test".into(),
            message: "it broke".into(),
            retryable,
            retries_exhausted: false,
        },
        backoff: Duration::ZERO,
        cleanup_needed: false,
    }
}

/// Leases one job of `pipeline`, starts it and finishes it with `outcome`; returns its id.
async fn run_one(q: &Queue, pipeline: &str, outcome: Outcome) -> JobId {
    let lease = lease_one(q, "w1", pipeline).await;
    let _ = q.start(&lease, "only").await.expect("start");
    q.finish(&lease, &outcome).await.expect("finish");
    lease.job
}

/// The ids of the queue's ready set of `pipeline`.
fn ready(srv: &RedisServer, q: &Queue, pipeline: &str) -> Vec<String> {
    get(srv, &["ZRANGE", &q.keys().ready(pipeline), "0", "-1"])
}

fn completion_events(srv: &RedisServer, q: &Queue) -> usize {
    support::events(srv, q)
        .iter()
        .filter(|e| {
            e.get("reason")
                .is_some_and(|r| r.starts_with("completion of group"))
        })
        .count()
}

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
async fn dependents_wait_out_of_the_ready_set_until_their_parents_succeeded() {
    let srv = RedisServer::start();
    let q = connect(&srv, "g").await;
    // diamond: a -> b, a -> c, b + c -> d
    let a = enqueue(&q, job("pa", 1)).await;
    let b = enqueue(&q, job("pb", 2).depends_on(&a)).await;
    let c = enqueue(&q, job("pc", 3).depends_on(&a)).await;
    let d = enqueue(&q, job("pd", 4).depends_on(&b).depends_on(&c)).await;
    for (p, id) in [("pb", &b), ("pc", &c), ("pd", &d)] {
        assert!(ready(&srv, &q, p).is_empty(), "{p} is not leasable");
        assert_eq!(read(&q, id).await.state, JobState::Queued);
    }
    assert_eq!(
        q.waiting_for(&d).await.unwrap(),
        vec![Dependency::Job(b.clone()), Dependency::Job(c.clone())]
    );
    run_one(&q, "pa", Outcome::Succeeded).await;
    assert_eq!(ready(&srv, &q, "pb"), vec![b.to_string()]);
    assert_eq!(ready(&srv, &q, "pc"), vec![c.to_string()]);
    assert!(ready(&srv, &q, "pd").is_empty());
    run_one(&q, "pb", Outcome::Succeeded).await;
    assert!(ready(&srv, &q, "pd").is_empty(), "d still waits for c");
    assert_eq!(
        q.waiting_for(&d).await.unwrap(),
        vec![Dependency::Job(c.clone())]
    );
    run_one(&q, "pc", Outcome::Succeeded).await;
    assert_eq!(ready(&srv, &q, "pd"), vec![d.to_string()]);
    assert_eq!(run_one(&q, "pd", Outcome::Succeeded).await, d);
    let waiting: u64 = get(&srv, &["ZCARD", &q.awaiting_key()]);
    assert_eq!(waiting, 0);
}

#[tokio::test]
async fn a_failed_parent_cancels_its_dependents_in_a_cascade_or_lets_them_run_by_policy() {
    let srv = RedisServer::start();
    let q = connect(&srv, "g").await;
    let a = enqueue(&q, job("pa", 1)).await;
    let b = enqueue(&q, job("pb", 2).depends_on(&a)).await;
    let c = enqueue(&q, job("pc", 3).depends_on(&b)).await;
    let anyway = enqueue(
        &q,
        job("pd", 4)
            .depends_on(&a)
            .on_parent_failure(ParentFailure::Run),
    )
    .await;
    run_one(&q, "pa", failed(false)).await;
    let jb = read(&q, &b).await;
    assert_eq!(jb.state, JobState::Cancelled);
    let reason = jb.cancel.map(|c| c.reason).unwrap_or_default();
    assert!(
        reason.contains(a.as_str()) && reason.contains("FAILED"),
        "{reason}"
    );
    assert_eq!(read(&q, &c).await.state, JobState::Cancelled, "the cascade");
    assert_eq!(ready(&srv, &q, "pd"), vec![anyway.to_string()]);
    // a parent that ended is refused at enqueue; a missing one too (no cycle can be built)
    assert!(matches!(
        q.enqueue(job("pb", 9).depends_on(&a)).await,
        Err(Error::ParentEnded { .. })
    ));
    assert!(matches!(
        q.enqueue(job("pb", 10).depends_on(JobId::new())).await,
        Err(Error::ParentNotFound { .. })
    ));
    assert!(matches!(
        q.enqueue(job("pb", 11).depends_on(Dependency::Group("nope".into())))
            .await,
        Err(Error::ParentNotFound { .. })
    ));
}

#[tokio::test]
async fn a_job_may_depend_on_a_whole_group() {
    let srv = RedisServer::start();
    let q = connect(&srv, "g").await;
    q.create_group(&NewGroup::new("day"), "t").await.unwrap();
    for n in 0..2 {
        enqueue(&q, job("win", n).group("day")).await;
    }
    let after = enqueue(
        &q,
        job("agg", 0).depends_on(Dependency::Group("day".into())),
    )
    .await;
    q.seal_group("day", "t").await.unwrap();
    run_one(&q, "win", Outcome::Succeeded).await;
    assert!(ready(&srv, &q, "agg").is_empty());
    run_one(&q, "win", Outcome::Succeeded).await;
    assert_eq!(ready(&srv, &q, "agg"), vec![after.to_string()]);
    let _ = TTL;
}
