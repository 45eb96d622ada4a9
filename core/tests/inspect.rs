//! The operator's read APIs (`leasehold_core::inspect`) against a real, private
//! `redis-server`, populated through the `Queue` client (no worker runtime).

use std::time::Duration;

use leasehold_core::redis::{self, FromRedisValue, Value};
use leasehold_core::{
    discover_queues, AttemptError, CancelOutcome, Error, EventFollower, Inspector, JobFilter,
    JobId, JobState, Lease, NewJob, Outcome, Page, Queue, QueueConfig, StaleLock, Started,
};
use leasehold_testkit::RedisServer;
use serde_json::json;

const TTL: Duration = Duration::from_secs(60);

#[track_caller]
fn get<T: FromRedisValue>(srv: &RedisServer, args: &[&str]) -> T {
    let reply = srv.cmd(args);
    if let Value::ServerError(e) = &reply {
        panic!("{args:?} failed: {e:?}");
    }
    redis::from_redis_value(reply).unwrap_or_else(|e| panic!("{args:?}: cannot convert: {e}"))
}

async fn queue(srv: &RedisServer, name: &str) -> Queue {
    Queue::connect(&srv.url(), name, QueueConfig::default())
        .await
        .expect("connect")
}

async fn enqueue(q: &Queue, job: NewJob) -> JobId {
    q.enqueue(job).await.expect("enqueue").id
}

fn job(pipeline: &str, n: u32) -> NewJob {
    NewJob::new(pipeline, &json!({ "n": n })).unwrap()
}

/// Leases exactly one job of `pipeline` (the next in line) for `worker`.
async fn lease_one(q: &Queue, worker: &str, pipeline: &str, ttl: Duration) -> Lease {
    let mut leased = q.lease(worker, &[pipeline], 1, ttl).await.expect("lease");
    assert_eq!(leased.leases.len(), 1, "expected one lease of {pipeline}");
    leased.leases.pop().unwrap()
}

async fn run(q: &Queue, lease: &Lease) {
    assert_eq!(q.start(lease, "fetch").await.unwrap(), Started::Running);
}

/// Makes a RUNNING job STALE: a short lease that expires, then a sweep.
async fn make_stale(q: &Queue, worker: &str, pipeline: &str) -> Lease {
    let lease = lease_one(q, worker, pipeline, Duration::from_millis(1000)).await;
    run(q, &lease).await;
    q.checkpoint(&lease, "fetch", "{\"rows\":1}", Some("load"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let report = q.sweep(100).await.unwrap();
    assert_eq!(report.stale, 1, "{report:?}");
    lease
}

fn register_worker(srv: &RedisServer, q: &Queue, id: &str, body: &str) {
    srv.cmd(&["SET", &q.keys().worker(id), body, "PX", "60000"]);
    srv.cmd(&["SADD", &q.keys().workers(), id]);
}

#[tokio::test]
async fn status_counts_every_state_and_names_locks_workers_and_stale_jobs() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    let ins = Inspector::new(q.clone());

    // an empty queue
    let empty = ins.status().await.unwrap();
    assert_eq!(empty.counts.queued, 0);
    assert!(empty.oldest_waiting.is_none());
    assert!(empty.workers.is_empty() && empty.locks.is_empty() && empty.stale.is_empty());

    // STALE, holding its lock (stale_lock = hold)
    let stale_id = enqueue(&q, job("sync", 1).resource("shop:s")).await;
    make_stale(&q, "w-dead", "sync").await;
    // terminal: one of each
    let ok = enqueue(&q, job("sync", 2)).await;
    let l = lease_one(&q, "w1", "sync", TTL).await;
    run(&q, &l).await;
    q.finish(&l, &Outcome::Succeeded).await.unwrap();
    let failed = enqueue(&q, job("sync", 3)).await;
    let l = lease_one(&q, "w1", "sync", TTL).await;
    run(&q, &l).await;
    let error = AttemptError {
        kind: "validation".into(),
        message: "bad rows".into(),
        retryable: false,
        retries_exhausted: false,
    };
    q.finish(
        &l,
        &Outcome::Failed {
            error,
            backoff: Duration::ZERO,
            cleanup_needed: false,
        },
    )
    .await
    .unwrap();
    let cancelled = enqueue(&q, job("sync", 4)).await;
    q.cancel(&cancelled, "not needed", "alice").await.unwrap();
    // RUNNING on shop:a, LEASED without a resource
    let running_id = enqueue(&q, job("sync", 5).resource("shop:a")).await;
    let running = lease_one(&q, "w1", "sync", TTL).await;
    assert_eq!(running.job, running_id);
    run(&q, &running).await;
    let leased_id = enqueue(&q, job("sync", 6)).await;
    let leased = lease_one(&q, "w2", "sync", TTL).await;
    assert_eq!(leased.job, leased_id);
    // QUEUED: parked on shop:a, ready in two pipelines, delayed
    let parked_id = enqueue(&q, job("sync", 7).resource("shop:a")).await;
    assert!(q
        .lease("w2", &["sync"], 1, TTL)
        .await
        .unwrap()
        .leases
        .is_empty());
    let ready_sync = enqueue(&q, job("sync", 8)).await;
    let ready_other = enqueue(&q, job("report", 9).priority(9)).await;
    let delayed = enqueue(&q, job("report", 10).delay(Duration::from_secs(3600))).await;

    // workers: two live, one expired
    register_worker(
        &srv,
        &q,
        "w1",
        r#"{"id":"w1","pid":42,"started_at":1,"pipelines":["sync"],"concurrency":4,"active":1,"shutting_down":false,"host":"box"}"#,
    );
    register_worker(&srv, &q, "w2", r#"{"id":"w2","pipelines":["sync"]}"#);
    srv.cmd(&["SADD", &q.keys().workers(), "w-dead"]);

    let st = ins.status().await.unwrap();
    assert_eq!(st.queue, "orders");
    let c = &st.counts;
    assert_eq!(c.queued, 4, "{c:?}");
    assert_eq!(
        (c.leased, c.running, c.leases_unclassified),
        (1, 1, 0),
        "{c:?}"
    );
    assert_eq!(c.stale, 1);
    assert_eq!(c.terminal, 3);
    assert_eq!(
        (c.succeeded, c.failed, c.cancelled, c.terminal_sampled),
        (1, 1, 1, 3)
    );
    assert_eq!(st.parked, 1);
    let report = st
        .pipelines
        .iter()
        .find(|p| p.pipeline == "report")
        .unwrap();
    assert_eq!((report.ready, report.delayed, report.due), (1, 1, 0));
    let sync = st.pipelines.iter().find(|p| p.pipeline == "sync").unwrap();
    assert_eq!((sync.ready, sync.delayed), (1, 0));
    // the parked job was created before the other waiting ones
    let oldest = st.oldest_waiting.as_ref().unwrap();
    assert_eq!(oldest.job, parked_id);
    assert!(oldest.age_ms >= 0);
    assert_eq!(st.expired_leases, 0);
    // workers: live ones parsed, the dead id pruned from the set
    let ids: Vec<&str> = st.workers.iter().map(|w| w.id.as_str()).collect();
    assert_eq!(ids, ["w1", "w2"]);
    let w1 = &st.workers[0];
    assert_eq!(
        (w1.pid, w1.concurrency, w1.active),
        (Some(42), Some(4), Some(1))
    );
    assert_eq!(w1.extra.get("host"), Some(&json!("box")));
    assert!(w1.expires_in_ms.is_some_and(|t| t > 0 && t <= 60_000));
    assert_eq!(st.pruned_workers, ["w-dead"]);
    let members: Vec<String> = get(&srv, &["SMEMBERS", &q.keys().workers()]);
    assert!(!members.contains(&"w-dead".to_owned()));
    // locks held: shop:a by the RUNNING job (one parked), shop:s by the STALE job, persisted
    assert_eq!(st.locks.len(), 2, "{:?}", st.locks);
    let a = st.locks.iter().find(|l| l.resource == "shop:a").unwrap();
    assert_eq!(a.holder.as_ref(), Some(&running_id));
    assert_eq!(a.holder_state, Some(JobState::Running));
    assert_eq!(a.parked, 1);
    assert!(a.ttl_ms.is_some_and(|t| t > 0));
    let s = st.locks.iter().find(|l| l.resource == "shop:s").unwrap();
    assert_eq!(s.holder.as_ref(), Some(&stale_id));
    assert_eq!(s.holder_state, Some(JobState::Stale));
    assert_eq!(s.ttl_ms, Some(-1), "a STALE holder's lock is persisted");
    // the STALE job needing a decision
    assert_eq!(st.stale.len(), 1);
    let sj = &st.stale[0];
    assert_eq!(sj.job.id, stale_id);
    assert_eq!(sj.job.worker.as_deref(), Some("w-dead"));
    assert_eq!(sj.job.step.as_deref(), Some("load"));
    assert_eq!(sj.job.last_step.as_deref(), Some("fetch"));
    assert_eq!(sj.stale_lock, StaleLock::Hold);
    assert_eq!(sj.holds_lock, Some(true));
    assert!(sj.stale_at > 0);

    // the whole status serialises (the CLI prints it with --json)
    let v = serde_json::to_value(&st).unwrap();
    assert_eq!(v["counts"]["queued"], 4);

    let _ = (ok, failed, ready_sync, ready_other, delayed, leased);
}

#[tokio::test]
async fn oldest_waiting_looks_past_priority_levels() {
    let srv = RedisServer::start();
    let q = queue(&srv, "q").await;
    let old_low = enqueue(&q, job("p", 1).priority(0)).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    enqueue(&q, job("p", 2).priority(200)).await;
    enqueue(&q, job("p", 3).priority(100)).await;
    let st = Inspector::new(q).status().await.unwrap();
    assert_eq!(st.oldest_waiting.unwrap().job, old_low);
}

#[tokio::test]
async fn list_jobs_filters_by_state_pipeline_resource_and_worker_newest_first() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    let ins = Inspector::new(q.clone());

    let mut done = Vec::new();
    for n in 0..5 {
        let id = enqueue(&q, job("sync", n).resource(format!("shop:{n}"))).await;
        let l = lease_one(&q, if n % 2 == 0 { "even" } else { "odd" }, "sync", TTL).await;
        run(&q, &l).await;
        q.finish(&l, &Outcome::Succeeded).await.unwrap();
        done.push(id);
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let running_id = enqueue(&q, job("sync", 10).resource("shop:r")).await;
    let running = lease_one(&q, "even", "sync", TTL).await;
    run(&q, &running).await;
    tokio::time::sleep(Duration::from_millis(3)).await;
    let q1 = enqueue(&q, job("sync", 11)).await;
    tokio::time::sleep(Duration::from_millis(3)).await;
    let q2 = enqueue(&q, job("report", 12).resource("shop:r")).await;

    let all = |state: Option<JobState>| JobFilter {
        state,
        ..JobFilter::default()
    };
    let big = Page {
        offset: 0,
        limit: 100,
    };

    // everything, newest change first: the two queued, the running, then terminal by end time
    let page = ins.list_jobs(&all(None), big).await.unwrap();
    let ids: Vec<&JobId> = page.jobs.iter().map(|j| &j.id).collect();
    let mut want: Vec<&JobId> = vec![&q2, &q1];
    // the running job changed (start) before q1 was enqueued
    want.push(&running_id);
    want.extend(done.iter().rev());
    assert_eq!(ids, want);
    assert!(!page.has_more && !page.truncated);

    // by state
    let queued = ins
        .list_jobs(&all(Some(JobState::Queued)), big)
        .await
        .unwrap();
    assert_eq!(
        queued.jobs.iter().map(|j| &j.id).collect::<Vec<_>>(),
        [&q2, &q1]
    );
    let running_page = ins
        .list_jobs(&all(Some(JobState::Running)), big)
        .await
        .unwrap();
    assert_eq!(running_page.jobs.len(), 1);
    let r = &running_page.jobs[0];
    assert_eq!(
        (r.worker.as_deref(), r.state, r.step.as_deref()),
        (Some("even"), JobState::Running, Some("fetch"))
    );
    assert!(r.lease_deadline.is_some() && r.fence.is_some());
    assert!(ins
        .list_jobs(&all(Some(JobState::Failed)), big)
        .await
        .unwrap()
        .jobs
        .is_empty());

    // paging over terminal jobs: newest first, offset and limit, has_more
    let succeeded = all(Some(JobState::Succeeded));
    let p1 = ins
        .list_jobs(
            &succeeded,
            Page {
                offset: 0,
                limit: 2,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        p1.jobs.iter().map(|j| &j.id).collect::<Vec<_>>(),
        [&done[4], &done[3]]
    );
    assert!(p1.has_more);
    let p3 = ins
        .list_jobs(
            &succeeded,
            Page {
                offset: 4,
                limit: 2,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        p3.jobs.iter().map(|j| &j.id).collect::<Vec<_>>(),
        [&done[0]]
    );
    assert!(!p3.has_more);

    // terminal jobs carry the worker of their last attempt; filter by it
    let by_odd = ins
        .list_jobs(
            &JobFilter {
                worker: Some("odd".into()),
                ..JobFilter::default()
            },
            big,
        )
        .await
        .unwrap();
    assert_eq!(
        by_odd.jobs.iter().map(|j| &j.id).collect::<Vec<_>>(),
        [&done[3], &done[1]]
    );
    let by_even = ins
        .list_jobs(
            &JobFilter {
                worker: Some("even".into()),
                ..JobFilter::default()
            },
            big,
        )
        .await
        .unwrap();
    assert_eq!(by_even.jobs.len(), 4, "3 succeeded + the running one");

    // by pipeline and by resource
    let report = ins
        .list_jobs(
            &JobFilter {
                pipeline: Some("report".into()),
                ..JobFilter::default()
            },
            big,
        )
        .await
        .unwrap();
    assert_eq!(report.jobs.iter().map(|j| &j.id).collect::<Vec<_>>(), [&q2]);
    let shop_r = ins
        .list_jobs(
            &JobFilter {
                resource: Some("shop:r".into()),
                ..JobFilter::default()
            },
            big,
        )
        .await
        .unwrap();
    assert_eq!(
        shop_r.jobs.iter().map(|j| &j.id).collect::<Vec<_>>(),
        [&q2, &running_id]
    );
    let none = ins
        .list_jobs(
            &JobFilter {
                pipeline: Some("nope".into()),
                ..JobFilter::default()
            },
            big,
        )
        .await
        .unwrap();
    assert!(none.jobs.is_empty());
}

#[tokio::test]
async fn job_detail_tells_whether_a_cancel_was_honoured_and_lists_the_jobs_events() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    let ins = Inspector::new(q.clone());

    let id = enqueue(&q, job("sync", 1).resource("shop:a")).await;
    let other = enqueue(&q, job("sync", 2)).await;
    let lease = lease_one(&q, "w1", "sync", TTL).await;
    assert_eq!(lease.job, id);
    run(&q, &lease).await;
    q.checkpoint(&lease, "fetch", "{\"rows\":3}", Some("load"))
        .await
        .unwrap();
    q.cancel(&id, "shop migrating", "alice").await.unwrap();

    let d = ins.job_detail(&id).await.unwrap().unwrap();
    let cancel = d.cancel.as_ref().unwrap();
    assert_eq!(cancel.outcome, CancelOutcome::Pending);
    assert_eq!(cancel.request.by, "alice");
    let lock = d.lock.as_ref().unwrap();
    assert_eq!(lock.holder.as_ref(), Some(&id));
    assert_eq!(d.job.steps.len(), 1);
    let ops: Vec<&str> = d.events.iter().map(|e| e.op.as_str()).collect();
    assert_eq!(ops, ["enqueue", "lease", "start", "cancel"]);
    assert!(d.events.iter().all(|e| e.job == id));
    assert!(d.events.windows(2).all(|w| w[0].at <= w[1].at));

    q.finish(
        &lease,
        &Outcome::Cancelled {
            reason: "shop migrating".into(),
            cleanup_needed: true,
        },
    )
    .await
    .unwrap();
    let d = ins.job_detail(&id).await.unwrap().unwrap();
    assert_eq!(d.cancel.unwrap().outcome, CancelOutcome::Honoured);
    assert!(d.lock.unwrap().holder.is_none(), "the lock was released");
    let last = d.events.last().unwrap();
    assert_eq!(
        (last.op.as_str(), last.from, last.to),
        ("finish", Some(JobState::Running), JobState::Cancelled)
    );
    assert_eq!(last.by, "w1");

    // the other job's events, alone
    let events = ins.job_events(&other).await.unwrap();
    assert_eq!(
        events.iter().map(|e| e.op.as_str()).collect::<Vec<_>>(),
        ["enqueue"]
    );
    assert!(ins
        .job_detail(&JobId::parse("nope").unwrap())
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn events_page_and_follow() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    let ins = Inspector::new(q.clone());
    let a = enqueue(&q, job("sync", 1)).await;
    let b = enqueue(&q, job("sync", 2)).await;
    let c = enqueue(&q, job("sync", 3)).await;

    let last_two = ins.events(None, 2).await.unwrap();
    assert_eq!(
        last_two.iter().map(|e| &e.job).collect::<Vec<_>>(),
        [&b, &c]
    );
    let first = ins.events(None, 100).await.unwrap();
    assert_eq!(first.len(), 3);
    let after = ins.events(Some(&first[0].id), 100).await.unwrap();
    assert_eq!(after.iter().map(|e| &e.job).collect::<Vec<_>>(), [&b, &c]);
    assert_eq!(first[0].job, a);
    assert_eq!(first[0].from, None);
    assert_eq!(first[0].to, JobState::Queued);

    let mut follower = EventFollower::connect(
        &srv.url(),
        q.config(),
        &["orders".to_owned(), "other".to_owned()],
        Duration::from_millis(200),
    )
    .await
    .unwrap();
    assert!(
        follower.next_batch(10).await.unwrap().is_empty(),
        "starts after the existing events"
    );
    let other = q.sibling("other").unwrap();
    let d = enqueue(&other, job("sync", 4)).await;
    q.cancel(&c, "no", "bob").await.unwrap();
    let mut got = Vec::new();
    for _ in 0..20 {
        got.extend(follower.next_batch(10).await.unwrap());
        if got.len() >= 2 {
            break;
        }
    }
    assert_eq!(got.len(), 2, "{got:?}");
    // two streams are read together: their events come per stream, not in one global order
    let from_other = got
        .iter()
        .find(|e| e.queue == "other")
        .expect("the other queue's event");
    assert_eq!(&from_other.job, &d);
    let cancel = got
        .iter()
        .find(|e| e.queue == "orders")
        .expect("the orders queue's event");
    assert_eq!((&cancel.job, cancel.op.as_str()), (&c, "cancel"));
    assert_eq!(cancel.by, "bob");
}

#[tokio::test]
async fn queues_are_discovered_by_their_fence_and_events_keys() {
    let srv = RedisServer::start();
    let a = queue(&srv, "alpha").await;
    let b = a.sibling("beta*[x]").unwrap();
    enqueue(&a, job("p", 1)).await;
    enqueue(&b, job("p", 1)).await;
    // another prefix is not ours
    let cfg = QueueConfig::default().prefix("elsewhere");
    let c = Queue::connect(&srv.url(), "gamma", cfg).await.unwrap();
    enqueue(&c, job("p", 1)).await;
    let found = discover_queues(a.pool(), a.config()).await.unwrap();
    assert_eq!(found, ["alpha", "beta*[x]"]);
    let pipelines = Inspector::new(a).pipelines().await.unwrap();
    assert_eq!(pipelines, ["p"]);
}

#[tokio::test]
async fn corrupt_values_are_typed_errors_naming_key_and_field() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    let ins = Inspector::new(q.clone());
    let id = enqueue(&q, job("sync", 1)).await;
    let key = q.keys().job(id.as_str());
    let good = enqueue(&q, job("sync", 2)).await;
    srv.cmd(&["HSET", &key, "attempt", "many"]);
    // the listing names the bad job's key and field, and lists the rest
    let page = ins
        .list_jobs(&JobFilter::default(), Page::default())
        .await
        .unwrap();
    assert_eq!(page.jobs.len(), 1);
    assert_eq!(page.jobs[0].id, good);
    assert_eq!(page.unreadable.len(), 1, "{:?}", page.unreadable);
    assert_eq!(page.unreadable[0].key, key);
    assert_eq!(page.unreadable[0].field, "attempt");
    assert!(
        page.unreadable[0].problem.contains("many"),
        "{:?}",
        page.unreadable
    );
    srv.cmd(&["HSET", &key, "attempt", "1", "state", "SLEEPING"]);
    let page = ins
        .list_jobs(&JobFilter::default(), Page::default())
        .await
        .unwrap();
    assert_eq!(page.jobs.len(), 1);
    assert_eq!(page.unreadable[0].field, "state");

    register_worker(&srv, &q, "w9", "not json");
    match ins.workers().await {
        Err(Error::Corrupt { key, .. }) => assert_eq!(key, q.keys().worker("w9")),
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[tokio::test]
async fn expired_leases_are_counted_before_the_sweep() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    enqueue(&q, job("sync", 1)).await;
    let _lease = lease_one(&q, "w1", "sync", Duration::from_millis(50)).await;
    tokio::time::sleep(Duration::from_millis(120)).await;
    let st = Inspector::new(q).status().await.unwrap();
    assert_eq!(st.expired_leases, 1);
    assert_eq!(st.counts.leased, 1);
}

/// A job hash leaves out the fields at their default (`queue`, an empty input
/// key, resource, step and last step, priority 0, `max_attempts` 1, STALE lock
/// policy hold, `cleanup_needed` 0) and may leave out its `id`; a hash written before, with
/// every field present and the defaults spelled out, reads the same.
#[tokio::test]
async fn absent_fields_read_as_their_defaults_and_old_hashes_still_read() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    let ins = Inspector::new(q.clone());
    let id = enqueue(&q, job("sync", 1)).await;
    let l = lease_one(&q, "w1", "sync", TTL).await;
    run(&q, &l).await;
    q.finish(&l, &Outcome::Succeeded).await.unwrap();
    let key = q.keys().job(id.as_str());
    let fields: Vec<String> = get(&srv, &["HKEYS", &key]);
    for absent in [
        "queue",
        "input_key",
        "resource",
        "priority",
        "max_attempts",
        "stale_lock",
        "step",
        "last_step",
        "cleanup_needed",
    ] {
        assert!(
            !fields.iter().any(|f| f == absent),
            "{absent} written: {fields:?}"
        );
    }

    let check = |j: &leasehold_core::Job, why: &str| {
        assert_eq!(j.id, id, "{why}");
        assert_eq!(j.queue, "orders", "{why}");
        assert_eq!(j.pipeline, "sync", "{why}");
        assert_eq!(j.state, JobState::Succeeded, "{why}");
        assert_eq!(
            (j.input_key.as_deref(), j.resource.as_deref(), j.priority),
            (None, None, 0),
            "{why}"
        );
        assert_eq!(
            (j.step.as_deref(), j.last_step.as_deref()),
            (None, None),
            "{why}"
        );
        assert_eq!(j.stale_lock, StaleLock::Hold, "{why}");
        assert_eq!(j.max_attempts, 1, "{why}");
        assert!(!j.cleanup_needed, "{why}");
        assert_eq!(j.not_before, j.created_at, "{why}");
        assert_eq!(j.attempts.len(), 1, "{why}: the plain success's attempt");
        assert_eq!(j.attempts[0].worker, "w1", "{why}");
    };
    async fn summary(ins: &Inspector, id: &JobId, why: &str) {
        let page = ins
            .list_jobs(&JobFilter::default(), Page::default())
            .await
            .unwrap();
        assert!(page.unreadable.is_empty(), "{why}: {:?}", page.unreadable);
        let s = page.jobs.iter().find(|s| &s.id == id).expect(why);
        assert_eq!((s.queue.as_str(), s.priority), ("orders", 0), "{why}");
        assert_eq!(
            (s.step.as_deref(), s.resource.as_deref()),
            (None, None),
            "{why}"
        );
    }
    check(&q.job(&id).await.unwrap().unwrap(), "as written");
    summary(&ins, &id, "as written").await;

    // without its id and not-before: the key names the job, not-before is the enqueue time
    srv.cmd(&["HDEL", &key, "id", "not_before"]);
    check(&q.job(&id).await.unwrap().unwrap(), "no id");
    summary(&ins, &id, "no id").await;

    // the layout written before: every field present, the defaults spelled out
    let created: String = get(&srv, &["HGET", &key, "created_at"]);
    srv.cmd(&[
        "HSET",
        &key,
        "id",
        id.as_str(),
        "queue",
        "orders",
        "input_key",
        "",
        "resource",
        "",
        "priority",
        "0",
        "max_attempts",
        "1",
        "stale_lock",
        "hold",
        "step",
        "",
        "last_step",
        "",
        "cleanup_needed",
        "0",
        "not_before",
        &created,
    ]);
    check(&q.job(&id).await.unwrap().unwrap(), "old layout");
    summary(&ins, &id, "old layout").await;
}
