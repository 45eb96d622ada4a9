//! Dependencies between jobs and groups through the `Queue` client against a
//! private `redis-server`: dependents that wait out of the ready sets (chain,
//! diamond, a failed parent, a whole group as parent), jobs that exist joining
//! a group (or refused with a reason), cycles refused, and job ids spelled like
//! refusal codes.

mod support;

use std::time::Duration;

use leasehold_core::Error;
use leasehold_core::Outcome;
use leasehold_core::{Dependency, GroupStatus, NewGroup, ParentFailure};
use leasehold_core::{EnqueueStatus, JobId, JobState, Queue, QueueConfig, Retention};
use leasehold_testkit::RedisServer;
use support::groups::*;
use support::server::{connect, enqueue, get, job, read, TTL};

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
