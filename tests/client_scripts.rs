//! Functional tests of the core client's transition scripts against a real,
//! private `redis-server` (one per test): enqueue, lease, start, checkpoint,
//! renew, finish, cancel, operator retry and resolve.

mod support;

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use leasehold::lease::{Finished, Lease, Outcome, Renewal, Started};
use leasehold::queue::{
    AttemptError, Cancelled, JobId, JobState, NewJob, Queue, RetryMode, StaleLock,
};
use leasehold::redis;
use leasehold::Error;
use leasehold_testkit::{wait_until_async, RedisServer};
use serde_json::json;
use support::{
    command_calls, connect, enqueue, events, eventually, force_expire, get, job, lease_one, read,
    script_calls, zmembers, zscore, TTL, WAIT,
};

// ---- helpers ----------------------------------------------------------------

fn redis_now_ms(srv: &RedisServer) -> i64 {
    let (secs, micros): (i64, i64) = get(srv, &["TIME"]);
    secs * 1000 + micros / 1000
}

/// The events of one job, oldest first.
fn events_of(srv: &RedisServer, q: &Queue, id: &JobId) -> Vec<BTreeMap<String, String>> {
    events(srv, q)
        .into_iter()
        .filter(|e| e["job"] == id.as_str())
        .collect()
}

/// `(op, from, to)` of each event.
fn moves(events: &[BTreeMap<String, String>]) -> Vec<(String, String, String)> {
    events
        .iter()
        .map(|e| (e["op"].clone(), e["from"].clone(), e["to"].clone()))
        .collect()
}

fn mv(op: &str, from: &str, to: &str) -> (String, String, String) {
    (op.to_owned(), from.to_owned(), to.to_owned())
}

fn failed(kind: &str, message: &str, retryable: bool, backoff: Duration) -> Outcome {
    Outcome::Failed {
        error: AttemptError {
            kind: kind.into(),
            message: message.into(),
            retryable,
            retries_exhausted: false,
        },
        backoff,
        cleanup_needed: false,
    }
}

/// Resets command statistics after making sure every script is cached.
async fn reset_stats(srv: &RedisServer, q: &Queue) {
    q.load_scripts().await.expect("load scripts");
    assert_eq!(get::<String>(srv, &["CONFIG", "RESETSTAT"]), "OK");
}

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
        (
            a.id.clone(),
            false,
            leasehold::queue::EnqueueStatus::Existing
        )
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
            leasehold::queue::EnqueueStatus::Succeeded
        )
    );
    let b = q
        .enqueue(job("sync", 5).input_key(key).rerun(true))
        .await
        .unwrap();
    assert!(b.created);
    assert_ne!(b.id, a.id);
    assert_eq!(b.status, leasehold::queue::EnqueueStatus::Rerun);
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
                op: leasehold::transitions::Op::Retry,
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
                op: leasehold::transitions::Op::Resolve,
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
    let inspector = leasehold::inspect::Inspector::new(q.clone());
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
