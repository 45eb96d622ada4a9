//! Groups and dependencies through the `Queue` client against a private
//! `redis-server`, the holder's moves made by hand (lease, start, finish) so
//! every count is checked after the exact move that changes it: counts per
//! state, sealing, the completion job enqueued once, a failed child blocking
//! an all-succeeded group (and a retry unblocking it), a STALE child holding
//! it, an automatic retry counted once, cancelling a group mid-run, and
//! dependents that wait out of the ready sets (chain, diamond, a failed
//! parent, parents that must exist); every move of a child counted in its
//! state (lease, prefetch, start, release, sweep, retries), the group's keys
//! deleted with its children by retention, a quarantined child, the
//! completion job under its pipeline's flow gates and found by the search
//! index as an enqueued job is, jobs that exist joining a
//! group, job ids spelled like refusal codes, cycles refused, and a large
//! group cancelled and retried a batch per call.

mod support;

use std::time::Duration;

use leasehold::group::{Dependency, GroupPolicy, GroupStatus, NewGroup, ParentFailure};
use leasehold::inspect::{Inspector, JobSearch, Page};
use leasehold::lease::Outcome;
use leasehold::pipeline::{StepContext, StepError};
use leasehold::queue::{
    AttemptError, EnqueueStatus, JobId, JobState, NewJob, Queue, QueueConfig, Retention, RetryMode,
};
use leasehold::{pipeline, Error};
use leasehold_testkit::RedisServer;
use support::{connect, enqueue, force_expire, get, group_count_errors, job, lease_one, read, TTL};

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

/// Asserts group `g`'s counts per state are exact (each child once, in the
/// state it is in) and returns the group.
async fn exact(srv: &RedisServer, q: &Queue, g: &str) -> leasehold::group::GroupInfo {
    let errors = group_count_errors(srv, q, g);
    assert!(errors.is_empty(), "group {g}: {errors:?}");
    let info = q.group(g).await.unwrap().unwrap();
    assert_eq!(info.counted(), info.total);
    info
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
async fn retention_deletes_a_settled_groups_keys_with_its_children_and_its_completion_job() {
    let srv = RedisServer::start();
    let config = QueueConfig::default().retention(Retention::new(0, Duration::from_millis(1)));
    let q = Queue::connect(&srv.url(), "g", config).await.unwrap();
    let done = JobId::new();
    q.create_group(
        &NewGroup::new("r").completion(job("agg", 0).id(done.clone())),
        "t",
    )
    .await
    .unwrap();
    let kept = q.create_group(&NewGroup::new("open"), "t").await.unwrap();
    assert!(kept);
    for n in 0..3 {
        enqueue(&q, job("win", n).group("r")).await;
    }
    q.seal_group("r", "t").await.unwrap();
    for _ in 0..3 {
        run_one(&q, "win", Outcome::Succeeded).await;
    }
    // the children are purged (settle and purge delete terminal jobs beyond
    // the policy); the group waits for its completion job
    support::eventually("the children purged", || async {
        q.purge(100).await.unwrap();
        let info = q.group("r").await.unwrap()?;
        (info.purged == 3).then_some(())
    })
    .await;
    assert_eq!(
        q.group("r").await.unwrap().unwrap().status,
        GroupStatus::Completed
    );
    run_one(&q, "agg", Outcome::Succeeded).await;
    support::eventually("the group deleted", || async {
        q.purge(100).await.unwrap();
        q.group("r").await.unwrap().is_none().then_some(())
    })
    .await;
    let left: Vec<String> = get(&srv, &["KEYS", "*group*"]);
    let left: Vec<&String> = left.iter().filter(|k| !k.contains(":group:open")).collect();
    // the index of groups is kept while a group is in it (`open` is)
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].ends_with(":groups"), "{left:?}");
    let names: Vec<String> = get(&srv, &["ZRANGE", left[0], "0", "-1"]);
    assert_eq!(names, vec!["open".to_owned()]);
    assert_eq!(q.groups().await.unwrap().len(), 1);
}

/// The ids of the jobs `search` finds in `q`.
async fn found(q: &Queue, search: JobSearch) -> Vec<String> {
    let page = Inspector::new(q.clone())
        .search_jobs(&search, Page::default())
        .await
        .expect("search");
    page.jobs.iter().map(|j| j.id.as_str().to_owned()).collect()
}

/// The members of the queue's search index that name job `id`.
fn index_members(srv: &RedisServer, q: &Queue, id: &JobId) -> Vec<String> {
    let members: Vec<Vec<u8>> = get(srv, &["ZRANGE", &q.keys().search(), "0", "-1"]);
    members
        .iter()
        .map(|m| String::from_utf8_lossy(m).into_owned())
        .filter(|m| m.ends_with(&format!("\0{}", id.as_str())))
        .collect()
}

/// A group's completion job is created as every new job is: the search finds
/// it by its resource and its input window as it finds an enqueued job with
/// them, and retention deletes its index entries with it.
#[tokio::test]
async fn the_completion_job_is_found_by_search_as_an_enqueued_job_is_and_retention_unindexes_it() {
    let srv = RedisServer::start();
    let config = QueueConfig::default().retention(Retention::new(0, Duration::from_millis(1)));
    let q = Queue::connect(&srv.url(), "gs", config).await.unwrap();
    let input = serde_json::json!({
        "window": {"start": "2026-05-06T00:00:00Z", "end": "2026-05-07T00:00:00Z"}
    });
    let agg = || {
        NewJob::new("agg", &input)
            .expect("serialisable input")
            .resource("shop:s")
    };
    let plain = enqueue(&q, agg()).await;
    let done = JobId::new();
    q.create_group(&NewGroup::new("s").completion(agg().id(done.clone())), "t")
        .await
        .unwrap();
    // no child: sealing it settles it, and its completion job is enqueued
    assert_eq!(
        q.seal_group("s", "t").await.unwrap(),
        GroupStatus::Completed
    );
    assert_eq!(read(&q, &done).await.state, JobState::Queued);
    for search in [
        JobSearch {
            resource: Some("shop:s".into()),
            ..JobSearch::default()
        },
        JobSearch {
            window: Some("2026-05-06".into()),
            ..JobSearch::default()
        },
        JobSearch {
            terms: vec!["shop:s".into()],
            ..JobSearch::default()
        },
    ] {
        let mut ids = found(&q, search.clone()).await;
        ids.sort();
        let mut want = vec![plain.as_str().to_owned(), done.as_str().to_owned()];
        want.sort();
        assert_eq!(ids, want, "{search:?}");
    }
    assert_eq!(
        index_members(&srv, &q, &done).len(),
        index_members(&srv, &q, &plain).len(),
        "the completion job is indexed as the enqueued job is"
    );
    // both finish; retention deletes them and their index entries
    run_one(&q, "agg", Outcome::Succeeded).await;
    run_one(&q, "agg", Outcome::Succeeded).await;
    support::eventually("both jobs purged", || async {
        q.purge(100).await.unwrap();
        let gone = q.job(&done).await.unwrap().is_none() && q.job(&plain).await.unwrap().is_none();
        gone.then_some(())
    })
    .await;
    assert!(index_members(&srv, &q, &done).is_empty());
    assert!(index_members(&srv, &q, &plain).is_empty());
    let search = JobSearch {
        resource: Some("shop:s".into()),
        ..JobSearch::default()
    };
    assert!(found(&q, search).await.is_empty());
    assert!(
        q.group("s").await.unwrap().is_none(),
        "the group is deleted"
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

/// A completion pipeline under flow control: at most one of its jobs runs.
struct LimitedAgg;

#[pipeline(name = "limited_agg", queue = "g", max_attempts = 3, max_running = 1)]
impl LimitedAgg {
    #[step]
    async fn run(&self, _ctx: &StepContext, _input: &serde_json::Value) -> Result<(), StepError> {
        Ok(())
    }
}

#[tokio::test]
async fn the_completion_job_carries_its_pipelines_flow_gates_and_policies() {
    let srv = RedisServer::start();
    let q = connect(&srv, "g").await;
    let done = JobId::new();
    let completion = leasehold::queue::job_for::<LimitedAgg>(&serde_json::json!({"day": 1}))
        .unwrap()
        .id(done.clone());
    q.create_group(&NewGroup::new("f").completion(completion), "t")
        .await
        .unwrap();
    enqueue(&q, job("win", 1).group("f")).await;
    q.seal_group("f", "t").await.unwrap();
    run_one(&q, "win", Outcome::Succeeded).await;
    let fields: Vec<Option<String>> = get(
        &srv,
        &[
            "HMGET",
            &q.keys().job(done.as_str()),
            "flow",
            "max_attempts",
            "state",
        ],
    );
    assert_eq!(
        fields,
        vec![
            Some("running:1:limited_agg".to_owned()),
            Some("3".to_owned()),
            Some("QUEUED".to_owned())
        ]
    );
    // and the gate holds when it is leased
    let l = lease_one(&q, "w1", "limited_agg").await;
    let holders: Vec<String> = get(
        &srv,
        &[
            "ZRANGE",
            &format!("{}:running:limited_agg", q.keys().base()),
            "0",
            "-1",
        ],
    );
    assert_eq!(holders, vec![l.job.to_string()]);
}

#[tokio::test]
async fn a_job_that_exists_joins_the_group_it_is_enqueued_into_or_is_refused_with_a_reason() {
    let srv = RedisServer::start();
    let q = connect(&srv, "g").await;
    q.create_group(&NewGroup::new("j"), "t").await.unwrap();
    q.create_group(&NewGroup::new("other"), "t").await.unwrap();
    // a job enqueued before the group, by id: the same enqueue into the group adds it
    let early = JobId::new();
    enqueue(&q, job("win", 1).id(early.clone())).await;
    let e = q
        .enqueue(job("win", 1).id(early.clone()).group("j"))
        .await
        .unwrap();
    assert_eq!(
        (e.status, e.id.clone()),
        (EnqueueStatus::Existing, early.clone())
    );
    // an idempotent repeat does not count it twice
    q.enqueue(job("win", 1).id(early.clone()).group("j"))
        .await
        .unwrap();
    let info = exact(&srv, &q, "j").await;
    assert_eq!((info.total, info.queued), (1, 1));
    // a window that already loaded (its input key's job SUCCEEDED) joins as SUCCEEDED
    let loaded = enqueue(&q, job("win", 2).input_key("day-1/h00")).await;
    assert_eq!(run_one(&q, "win", Outcome::Succeeded).await, early);
    assert_eq!(run_one(&q, "win", Outcome::Succeeded).await, loaded);
    let e = q
        .enqueue(job("win", 2).input_key("day-1/h00").group("j"))
        .await
        .unwrap();
    assert_eq!((e.status, e.id), (EnqueueStatus::Succeeded, loaded.clone()));
    let info = exact(&srv, &q, "j").await;
    assert_eq!((info.total, info.succeeded), (2, 2));
    // a child of another group is refused, and nothing is written
    let theirs = enqueue(&q, job("win", 3).group("other")).await;
    let err = q
        .enqueue(job("win", 3).id(theirs.clone()).group("j"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::CannotJoinGroup { job, group, reason }
            if *job == theirs.to_string() && group == "j" && reason.contains("other")),
        "{err}"
    );
    assert_eq!(q.group("j").await.unwrap().unwrap().total, 2);
    // once it SUCCEEDED it is counted too (it never moves again)
    assert_eq!(run_one(&q, "win", Outcome::Succeeded).await, theirs);
    let e = q
        .enqueue(job("win", 3).id(theirs.clone()).group("j"))
        .await
        .unwrap();
    assert_eq!(e.status, EnqueueStatus::Existing);
    let info = exact(&srv, &q, "j").await;
    assert_eq!((info.total, info.succeeded, info.purged), (3, 3, 0));
    let also: Option<String> = get(
        &srv,
        &["HGET", &q.keys().job(theirs.as_str()), "also_groups"],
    );
    assert_eq!(also.as_deref(), Some("j"));
    assert_eq!(q.group("other").await.unwrap().unwrap().succeeded, 1);
    // the group completes with them
    q.seal_group("j", "t").await.unwrap();
    assert_eq!(
        q.group("j").await.unwrap().unwrap().status,
        GroupStatus::Completed
    );
    // retention tells both groups of the job they share
    let purging = Queue::connect(
        &srv.url(),
        "g",
        QueueConfig::default().retention(Retention::new(0, Duration::from_millis(1))),
    )
    .await
    .unwrap();
    purging.purge(100).await.unwrap();
    assert!(q.job(&theirs).await.unwrap().is_none());
    assert!(
        q.group("j").await.unwrap().is_none(),
        "settled and every child deleted"
    );
    assert_eq!(q.group("other").await.unwrap().unwrap().purged, 1);
}

#[tokio::test]
async fn a_cycle_through_a_group_cannot_be_built() {
    let srv = RedisServer::start();
    let q = connect(&srv, "g").await;
    q.create_group(&NewGroup::new("cy"), "t").await.unwrap();
    enqueue(&q, job("win", 1).group("cy")).await;
    // y waits for the open group
    let y = enqueue(&q, job("agg", 1).depends_on(Dependency::Group("cy".into()))).await;
    // x would join the group and wait for y: cy -> x -> y -> cy
    let err = q
        .enqueue(job("win", 2).group("cy").depends_on(&y))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::GroupCycle { group, .. } if group == "cy"),
        "{err}"
    );
    // a child waiting for its own group
    q.create_group(&NewGroup::new("self"), "t").await.unwrap();
    let err = q
        .enqueue(
            job("win", 3)
                .group("self")
                .depends_on(Dependency::Group("self".into())),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::GroupCycle { .. }), "{err}");
    // y itself (it waits for the group) joining the group
    let err = q
        .enqueue(job("agg", 1).id(y.clone()).group("cy"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::GroupCycle { .. }), "{err}");
    assert_eq!(q.group("cy").await.unwrap().unwrap().total, 1);
    // children without parents still join; a job with parents joins a group without dependents
    enqueue(&q, job("win", 4).group("cy")).await;
    q.create_group(&NewGroup::new("free"), "t").await.unwrap();
    enqueue(&q, job("win", 5).group("free").depends_on(&y)).await;
}

#[tokio::test]
async fn job_ids_spelled_like_refusal_codes_are_jobs() {
    let srv = RedisServer::start();
    let q = connect(&srv, "g").await;
    q.create_group(&NewGroup::new("h"), "t").await.unwrap();
    let parent = enqueue(&q, job("win", 0)).await;
    for (n, name) in [
        "GROUP_SEALED",
        "GROUP_NOT_FOUND",
        "PARENT_NOT_FOUND",
        "PARENT_ENDED",
        "BAD_LINKS",
        "CYCLE",
        "CANNOT_JOIN",
        "refused",
    ]
    .into_iter()
    .enumerate()
    {
        let id = JobId::parse(name).unwrap();
        let e = q
            .enqueue(job("win", n as u64 + 1).id(id.clone()).group("h"))
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((e.id, e.status), (id.clone(), EnqueueStatus::Created));
        // and as the answer of an existing job
        let e = q
            .enqueue(
                job("win", n as u64 + 1)
                    .id(id.clone())
                    .group("h")
                    .depends_on(&parent),
            )
            .await
            .unwrap_or_else(|e| panic!("{name} again: {e}"));
        assert_eq!(e.status, EnqueueStatus::Existing);
    }
    assert_eq!(q.group("h").await.unwrap().unwrap().total, 8);
    // a real refusal is still one
    q.seal_group("h", "t").await.unwrap();
    assert!(matches!(
        q.enqueue(job("win", 50).group("h")).await,
        Err(Error::GroupClosed { .. })
    ));
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
    let retries = support::events(&srv, &q)
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
