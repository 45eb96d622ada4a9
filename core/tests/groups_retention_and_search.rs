//! A group's keys and its completion job in the queue's indexes, through the
//! `Queue` client against a private `redis-server`: retention deletes a
//! settled group's keys with its children and its completion job, and the
//! completion job is found by search as an enqueued job is (and retention
//! unindexes it).

mod support;

use std::time::Duration;

use leasehold_core::inspect::{Inspector, JobSearch, Page};
use leasehold_core::Outcome;
use leasehold_core::{GroupStatus, NewGroup};
use leasehold_core::{JobId, JobState, NewJob, Queue, QueueConfig, Retention};
use leasehold_testkit::RedisServer;
use support::groups::*;
use support::server::{enqueue, get, job, read};

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
    support::server::eventually("the children purged", || async {
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
    support::server::eventually("the group deleted", || async {
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
    support::server::eventually("both jobs purged", || async {
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
