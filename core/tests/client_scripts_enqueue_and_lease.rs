//! Functional tests of the core client's transition scripts against a real,
//! private `redis-server` (one per test), a job's way in: enqueue (every
//! documented field, idempotence on the input key, bulk chunks, priority and
//! FIFO order, delays) and lease (up to n, increasing fences, only the
//! requested pipelines).

mod support;

use std::collections::HashSet;
use std::time::Duration;

use leasehold_core::redis;
use leasehold_core::{Cancelled, JobId, JobState, NewJob, StaleLock};
use leasehold_core::{Lease, Outcome, Started};
use leasehold_testkit::RedisServer;
use serde_json::json;
use support::client_scripts::*;
use support::server::{
    command_calls, connect, enqueue, eventually, get, job, lease_one, read, script_calls, zmembers,
    zscore, TTL,
};

// ---- enqueue ----------------------------------------------------------------

#[tokio::test]
async fn enqueue_creates_a_queued_job_with_every_documented_field() {
    let srv = RedisServer::start();
    let q = connect(&srv, "orders").await;
    let t0 = redis_now_ms(&srv);
    let input = json!({"shop": "a", "from": "2026-05-06T00:00Z", "to": "2026-05-06T01:00Z"});
    let e = q
        .enqueue(
            NewJob::new("orders_sync", &input)
                .unwrap()
                .input_key("shop:a:2026-05-06T00")
                .resource("shop:a")
                .priority(7)
                .max_attempts(3)
                .stale_lock(StaleLock::Release),
        )
        .await
        .unwrap();
    let t1 = redis_now_ms(&srv);
    assert!(e.created);

    let j = read(&q, &e.id).await;
    assert_eq!(j.id, e.id);
    assert_eq!(j.queue, "orders");
    assert_eq!(j.pipeline, "orders_sync");
    assert_eq!(j.input, input);
    assert_eq!(j.input_key.as_deref(), Some("shop:a:2026-05-06T00"));
    assert_eq!(j.resource.as_deref(), Some("shop:a"));
    assert_eq!(j.priority, 7);
    assert_eq!(j.max_attempts, 3);
    assert_eq!(j.stale_lock, StaleLock::Release);
    assert!(
        t0 <= j.created_at && j.created_at <= t1,
        "created_at from Redis TIME"
    );
    assert_eq!(j.updated_at, j.created_at);
    assert_eq!(j.not_before, j.created_at, "no delay: due at once");
    assert_eq!(j.attempt, 1);
    assert_eq!(j.state, JobState::Queued);
    assert_eq!(j.step, None);
    assert_eq!(j.last_step, None);
    assert!(j.outputs.is_empty());
    assert_eq!(j.cancel, None);
    assert!(!j.cleanup_needed);
    assert_eq!(j.lease, None);
    assert_eq!(j.worker, None);
    assert_eq!(j.fence, None);
    assert_eq!(j.leased_at, None);
    assert_eq!(j.started_at, None);
    assert!(j.steps.is_empty());
    assert_eq!(j.stale_at, None);
    assert!(j.attempts.is_empty());

    // Indexes: ready (not delayed), input key mapped, one enqueue event.
    let k = q.keys();
    assert!(zscore(&srv, &k.ready("orders_sync"), e.id.as_str()).is_some());
    assert!(zmembers(&srv, &k.delayed("orders_sync")).is_empty());
    let mapped: Option<String> = get(&srv, &["HGET", &k.inputs(), "shop:a:2026-05-06T00"]);
    assert_eq!(mapped.as_deref(), Some(e.id.as_str()));
    assert_eq!(
        moves(&events_of(&srv, &q, &e.id)),
        [mv("enqueue", "", "QUEUED")]
    );

    // Defaults, a caller-chosen id, and a delay.
    let id = JobId::parse("nightly-2026-05-06").unwrap();
    let e2 = q
        .enqueue(
            NewJob::from_json("compact", "[1,2,3]")
                .id(id.clone())
                .delay(Duration::from_secs(5)),
        )
        .await
        .unwrap();
    assert_eq!(e2.id, id);
    let j2 = read(&q, &id).await;
    assert_eq!(j2.input, json!([1, 2, 3]));
    assert_eq!((j2.input_key, j2.resource), (None, None));
    assert_eq!(j2.priority, 0);
    assert_eq!(j2.max_attempts, 1);
    assert_eq!(j2.stale_lock, StaleLock::Hold);
    assert_eq!(j2.not_before, j2.created_at + 5000);
    assert_eq!(
        zscore(&srv, &k.delayed("compact"), id.as_str()),
        Some(j2.not_before as f64)
    );
    assert!(zmembers(&srv, &k.ready("compact")).is_empty());
    // A caller-chosen id is idempotent too: the existing job is never overwritten.
    let again = q
        .enqueue(NewJob::from_json("compact", "{\"other\":1}").id(id.clone()))
        .await
        .unwrap();
    assert_eq!((again.id, again.created), (id.clone(), false));
    assert_eq!(read(&q, &id).await.input, json!([1, 2, 3]));

    // A job that does not exist reads as None.
    assert!(q.job(&JobId::new()).await.unwrap().is_none());
}

#[tokio::test]
async fn enqueue_is_idempotent_on_input_key_until_the_job_is_terminal() {
    let srv = RedisServer::start();
    let q = connect(&srv, "q").await;
    let key = "shop:a:hour:0";
    let a = q.enqueue(job("sync", 1).input_key(key)).await.unwrap();
    assert!(a.created);

    // Same key while QUEUED: the existing job, nothing new written.
    let again = q.enqueue(job("sync", 2).input_key(key)).await.unwrap();
    assert_eq!(
        (again.id.clone(), again.created, again.status),
        (a.id.clone(), false, leasehold_core::EnqueueStatus::Existing)
    );
    assert_eq!(
        read(&q, &a.id).await.input,
        json!({"n": 1}),
        "input untouched"
    );
    assert_eq!(zmembers(&srv, &q.keys().ready("sync")), [a.id.as_str()]);
    assert_eq!(srv.dump(&format!("{}:job:*", q.keys().base())).len(), 1);

    // Still the same job while LEASED and RUNNING.
    let l = lease_one(&q, "w1", "sync").await;
    let again = q.enqueue(job("sync", 3).input_key(key)).await.unwrap();
    assert_eq!((again.id.clone(), again.created), (a.id.clone(), false));
    assert_eq!(q.start(&l, "fetch").await.unwrap(), Started::Running);
    let again = q.enqueue(job("sync", 4).input_key(key)).await.unwrap();
    assert_eq!((again.id, again.created), (a.id.clone(), false));

    // SUCCEEDED: the key is free of live jobs, but its latest job succeeded:
    // that job is the answer until a re-run is asked for.
    q.finish(&l, &Outcome::Succeeded).await.unwrap();
    let inputs = q.keys().inputs();
    assert_eq!(get::<Option<String>>(&srv, &["HGET", &inputs, key]), None);
    let same = q.enqueue(job("sync", 5).input_key(key)).await.unwrap();
    assert_eq!(
        (same.id.clone(), same.created, same.status),
        (
            a.id.clone(),
            false,
            leasehold_core::EnqueueStatus::Succeeded
        )
    );
    let b = q
        .enqueue(job("sync", 5).input_key(key).rerun(true))
        .await
        .unwrap();
    assert!(b.created);
    assert_ne!(b.id, a.id);
    assert_eq!(b.status, leasehold_core::EnqueueStatus::Rerun);
    assert_eq!(b.previous.as_ref(), Some(&a.id));
    assert_eq!(read(&q, &b.id).await.previous.as_ref(), Some(&a.id));
    assert_eq!(
        get::<Option<String>>(&srv, &["HGET", &inputs, key]).as_deref(),
        Some(b.id.as_str())
    );

    // A cancelled job frees its key too.
    assert_eq!(
        q.cancel(&b.id, "wrong window", "op").await.unwrap(),
        Cancelled::Now
    );
    // after a CANCELLED (or FAILED) job, a new job is created, linked to it
    let c = q.enqueue(job("sync", 6).input_key(key)).await.unwrap();
    assert!(c.created);
    assert!(c.id != a.id && c.id != b.id);
    assert_eq!(c.previous.as_ref(), Some(&b.id));

    // Within one bulk call, the second job with a key gets the first's id.
    let out = q
        .enqueue_bulk(vec![
            job("sync", 7).input_key("k2"),
            job("sync", 8).input_key("k2"),
            job("sync", 9).input_key(key),
        ])
        .await
        .unwrap();
    assert!(out[0].created);
    assert_eq!(
        (out[1].id.clone(), out[1].created),
        (out[0].id.clone(), false)
    );
    assert_eq!((out[2].id.clone(), out[2].created), (c.id.clone(), false));
}

#[tokio::test]
async fn bulk_enqueue_is_chunked_one_script_call_per_chunk_and_replies_in_order() {
    let srv = RedisServer::start();
    let q = connect(&srv, "bulk").await;
    reset_stats(&srv, &q).await;

    let jobs: Vec<NewJob> = (0..2500).map(|i| job("load", i)).collect();
    let out = q.enqueue_bulk(jobs).await.unwrap();
    assert_eq!(out.len(), 2500);
    assert!(out.iter().all(|e| e.created));
    assert_eq!(
        script_calls(&srv),
        3,
        "2,500 jobs are 3 chunks of at most 1,000: 3 script calls\n{}",
        srv.info("commandstats")
    );
    assert_eq!(command_calls(&srv, "eval"), 0);
    let distinct: HashSet<&JobId> = out.iter().map(|e| &e.id).collect();
    assert_eq!(distinct.len(), 2500);

    // Reply i is the job made from input i.
    let mut con = srv.connection();
    let mut pipe = redis::pipe();
    for e in &out {
        pipe.cmd("HGET")
            .arg(q.keys().job(e.id.as_str()))
            .arg("input");
    }
    let inputs: Vec<String> = pipe.query(&mut con).unwrap();
    for (i, text) in inputs.iter().enumerate() {
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(v, json!({ "n": i }), "reply {i} names the job of input {i}");
    }
    assert_eq!(get::<u64>(&srv, &["ZCARD", &q.keys().ready("load")]), 2500);
    assert_eq!(get::<u64>(&srv, &["XLEN", &q.keys().events()]), 2500);
    // FIFO among equal priority: leasing returns them in enqueue order.
    let leased = q.lease("w", &["load"], 10, TTL).await.unwrap();
    let first: Vec<&JobId> = leased.leases.iter().map(|l| &l.job).collect();
    let expected: Vec<&JobId> = out[..10].iter().map(|e| &e.id).collect();
    assert_eq!(first, expected);

    // Jobs of two pipelines in one bulk: one call per pipeline, replies in the order given.
    reset_stats(&srv, &q).await;
    let mixed: Vec<NewJob> = (0..10)
        .map(|i| job(if i % 2 == 0 { "even" } else { "odd" }, i))
        .collect();
    let out = q.enqueue_bulk(mixed).await.unwrap();
    assert_eq!(script_calls(&srv), 2);
    for (i, e) in out.iter().enumerate() {
        let j = read(&q, &e.id).await;
        assert_eq!(j.input, json!({ "n": i }));
        assert_eq!(j.pipeline, if i % 2 == 0 { "even" } else { "odd" });
    }
    assert_eq!(q.enqueue_bulk(Vec::new()).await.unwrap(), Vec::new());
}

#[tokio::test]
async fn higher_priority_is_leased_first_and_fifo_within_a_priority() {
    let srv = RedisServer::start();
    let q = connect(&srv, "prio").await;
    let low1 = enqueue(&q, job("p", 1)).await;
    let high1 = enqueue(&q, job("p", 2).priority(10)).await;
    let mid = enqueue(&q, job("p", 3).priority(5)).await;
    let high2 = enqueue(&q, job("p", 4).priority(10)).await;
    let low2 = enqueue(&q, job("p", 5)).await;
    let max = enqueue(&q, job("p", 6).priority(255)).await;

    // One at a time...
    let mut order = Vec::new();
    for _ in 0..3 {
        order.push(lease_one(&q, "w", "p").await.job);
    }
    // ...and the rest in one call: the same order either way.
    let rest = q.lease("w", &["p"], 10, TTL).await.unwrap();
    order.extend(rest.leases.into_iter().map(|l| l.job));
    assert_eq!(order, [max, high1, high2, mid, low1, low2]);

    // Across pipelines served by one call, priority then age decides.
    let x1 = enqueue(&q, job("x", 1).priority(1)).await;
    let y1 = enqueue(&q, job("y", 2).priority(3)).await;
    let x2 = enqueue(&q, job("x", 3).priority(3)).await;
    let y2 = enqueue(&q, job("y", 4)).await;
    let leased = q.lease("w", &["x", "y"], 10, TTL).await.unwrap();
    let order: Vec<JobId> = leased.leases.into_iter().map(|l| l.job).collect();
    assert_eq!(order, [y1, x2, x1, y2]);
}

#[tokio::test]
async fn delayed_job_is_not_leased_before_it_is_due() {
    let srv = RedisServer::start();
    let q = connect(&srv, "delay").await;
    let soon = enqueue(&q, job("p", 1).delay(Duration::from_millis(300))).await;
    let later = enqueue(&q, job("p", 2).delay(Duration::from_secs(3600))).await;
    let soon_due = read(&q, &soon).await.not_before;
    let later_due = read(&q, &later).await.not_before;
    assert!(soon_due < later_due);

    let first = q.lease("w", &["p"], 10, TTL).await.unwrap();
    assert!(first.leases.iter().all(|l| l.job != later), "an hour early");
    if first.leases.is_empty() {
        assert_eq!(
            first.next_due,
            Some(soon_due),
            "next_due names the earliest delayed job"
        );
    }
    let got = if first.leases.is_empty() {
        eventually("the delayed job is leased once due", || async {
            let mut l = q.lease("w", &["p"], 10, TTL).await.unwrap();
            assert!(l.leases.iter().all(|l| l.job != later));
            l.leases.pop()
        })
        .await
    } else {
        // The machine stalled for 300 ms between enqueue and lease: still valid.
        first.leases.into_iter().next().unwrap()
    };
    assert_eq!(got.job, soon);
    let j = read(&q, &soon).await;
    assert!(
        j.leased_at.unwrap() >= soon_due,
        "leased at {:?}, due at {soon_due}",
        j.leased_at
    );
    let after = q.lease("w", &["p"], 10, TTL).await.unwrap();
    assert!(after.leases.is_empty());
    assert_eq!(after.next_due, Some(later_due));
    assert_eq!(zmembers(&srv, &q.keys().delayed("p")), [later.as_str()]);
    // Nothing delayed: next_due is None.
    let other = q.lease("w", &["empty"], 1, TTL).await.unwrap();
    assert!(other.leases.is_empty());
    assert_eq!(other.next_due, None);
}

// ---- lease ------------------------------------------------------------------

#[tokio::test]
async fn lease_takes_up_to_n_with_increasing_fences_and_only_requested_pipelines() {
    let srv = RedisServer::start();
    let q = connect(&srv, "lease").await;
    let a: Vec<JobId> = q
        .enqueue_bulk((0..5).map(|i| job("a", i)).collect())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    let b: Vec<JobId> = q
        .enqueue_bulk((0..2).map(|i| job("b", i)).collect())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();

    let ttl = Duration::from_secs(45);
    let l1 = q.lease("w1", &["a"], 3, ttl).await.unwrap().leases;
    let l2 = q.lease("w2", &["a"], 3, ttl).await.unwrap().leases;
    let l3 = q.lease("w1", &["a"], 3, ttl).await.unwrap().leases;
    assert_eq!((l1.len(), l2.len(), l3.len()), (3, 2, 0));
    // "b" was not asked for: untouched.
    assert_eq!(get::<u64>(&srv, &["ZCARD", &q.keys().ready("b")]), 2);
    for id in &b {
        assert_eq!(read(&q, id).await.state, JobState::Queued);
    }
    let l4 = q.lease("w3", &["b"], 10, ttl).await.unwrap().leases;
    assert_eq!(l4.len(), 2);

    let all: Vec<(&str, &Lease)> = l1
        .iter()
        .map(|l| ("w1", l))
        .chain(l2.iter().map(|l| ("w2", l)))
        .chain(l4.iter().map(|l| ("w3", l)))
        .collect();
    let fences: Vec<u64> = all.iter().map(|(_, l)| l.fence).collect();
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fences strictly increase across calls and workers: {fences:?}"
    );
    let tokens: HashSet<&str> = all.iter().map(|(_, l)| l.token.as_str()).collect();
    assert_eq!(tokens.len(), all.len(), "every lease has its own token");
    let leased_a: Vec<&JobId> = l1.iter().chain(&l2).map(|l| &l.job).collect();
    assert_eq!(leased_a, a.iter().collect::<Vec<_>>());

    for (worker, l) in &all {
        let j = read(&q, &l.job).await;
        assert_eq!(j.state, JobState::Leased);
        let info = j.lease.expect("live lease");
        assert_eq!(info.token, l.token);
        assert_eq!(info.fence, l.fence);
        assert_eq!(&info.worker, worker);
        assert_eq!(info.deadline, j.leased_at.unwrap() + 45_000);
        assert_eq!(
            zscore(&srv, &q.keys().leases(), l.job.as_str()),
            Some(info.deadline as f64),
            "deadline indexed in <base>:leases"
        );
        assert_eq!(l.attempt, 1);
        assert_eq!(l.ttl, ttl);
        assert_eq!(l.resource, None);
        assert_eq!((l.last_step.as_ref(), l.last_output.as_ref()), (None, None));
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&l.input).unwrap(),
            j.input
        );
        assert_eq!(l.pipeline, j.pipeline);
        let ev = events_of(&srv, &q, &l.job);
        let last = ev.last().unwrap();
        assert_eq!(
            (
                last["op"].as_str(),
                last["from"].as_str(),
                last["to"].as_str(),
                last["by"].as_str()
            ),
            ("lease", "QUEUED", "LEASED", *worker)
        );
    }
    assert_eq!(
        get::<String>(&srv, &["GET", &q.keys().fence()]),
        l4.last().unwrap().fence.to_string()
    );
    // n = 0 and no pipelines lease nothing.
    assert!(q
        .lease("w", &["a"], 0, ttl)
        .await
        .unwrap()
        .leases
        .is_empty());
    assert!(q.lease("w", &[], 5, ttl).await.unwrap().leases.is_empty());
}
