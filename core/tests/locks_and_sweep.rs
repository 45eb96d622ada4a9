//! Resource locks and the recovery sweeper, against a real private
//! `redis-server` per test.

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use leasehold_core::redis;
use leasehold_core::Error;
use leasehold_core::{Cancelled, JobId, JobState, Queue, StaleLock};
use leasehold_core::{Finished, Lease, Outcome, Renewal, Started, SweepReport, SweptJob};
use leasehold_testkit::{wait_until_async, RedisServer};
use support::server::{
    connect, enqueue, events, eventually, force_expire, get, job, lease_one, read, zmembers,
    zscore, TTL, WAIT,
};

// ---- helpers ----------------------------------------------------------------

fn exists(srv: &RedisServer, key: &str) -> bool {
    get::<i64>(srv, &["EXISTS", key]) == 1
}

fn pttl(srv: &RedisServer, key: &str) -> i64 {
    get(srv, &["PTTL", key])
}

fn lock_holder(srv: &RedisServer, q: &Queue, res: &str) -> Option<String> {
    get(srv, &["GET", &q.keys().lock(res)])
}

fn last_event(srv: &RedisServer, q: &Queue, id: &JobId) -> BTreeMap<String, String> {
    events(srv, q)
        .into_iter()
        .rev()
        .find(|e| e["job"] == id.as_str())
        .expect("the job has events")
}

async fn lease(q: &Queue, worker: &str, n: usize) -> Vec<Lease> {
    q.lease(worker, &["p"], n, TTL).await.expect("lease").leases
}

async fn state(q: &Queue, id: &JobId) -> JobState {
    q.job(id).await.unwrap().expect("job exists").state
}

fn force_expire_all(srv: &RedisServer, q: &Queue, ids: &[&JobId]) {
    let mut con = srv.connection();
    let mut pipe = redis::pipe();
    for id in ids {
        pipe.cmd("ZADD")
            .arg(q.keys().leases())
            .arg("XX")
            .arg(0)
            .arg(id.as_str())
            .ignore();
    }
    pipe.query::<()>(&mut con).unwrap();
}

fn swept(job: &JobId, from: JobState, to: JobState) -> SweptJob {
    SweptJob {
        job: job.clone(),
        from,
        to,
    }
}

// ---- resource locks ------------------------------------------------------------

#[tokio::test]
async fn one_job_per_resource_the_other_is_parked_not_polled() {
    let srv = RedisServer::start();
    let q = connect(&srv, "locks").await;
    let k = q.keys().clone();
    let a1 = enqueue(&q, job("p", 1).resource("shop:a")).await;
    let a2 = enqueue(&q, job("p", 2).resource("shop:a")).await;
    let b1 = enqueue(&q, job("p", 3).resource("shop:b")).await;
    let free = enqueue(&q, job("p", 4)).await;

    let ttl = Duration::from_secs(20);
    let leased = q.lease("w1", &["p"], 10, ttl).await.unwrap().leases;
    let ids: Vec<&JobId> = leased.iter().map(|l| &l.job).collect();
    assert_eq!(ids, [&a1, &b1, &free], "different resources lease together");
    assert_eq!(
        lock_holder(&srv, &q, "shop:a").as_deref(),
        Some(a1.as_str())
    );
    assert_eq!(
        lock_holder(&srv, &q, "shop:b").as_deref(),
        Some(b1.as_str())
    );
    let t = pttl(&srv, &k.lock("shop:a"));
    assert!(t > 20_000, "the lock outlives the lease: {t} ms");

    // a2 is parked on shop:a: out of the ready set, QUEUED, indexed by resource.
    assert_eq!(state(&q, &a2).await, JobState::Queued);
    let parked_score = zscore(&srv, &k.parked("shop:a"), a2.as_str()).expect("parked");
    assert!(zmembers(&srv, &k.ready("p")).is_empty());
    assert_eq!(
        get::<i64>(&srv, &["SISMEMBER", &k.parked_resources(), "shop:a"]),
        1
    );

    // Another lease call does not see it at all, and changes nothing.
    let before = srv.dump(&format!("{}:parked*", k.base()));
    assert!(lease(&q, "w2", 10).await.is_empty());
    assert_eq!(before, srv.dump(&format!("{}:parked*", k.base())));
    assert_eq!(state(&q, &a2).await, JobState::Queued);

    // The holder finishes: the lock goes, a2 is ready again with its old place.
    let _ = q.start(&leased[0], "s").await.unwrap();
    q.finish(&leased[0], &Outcome::Succeeded).await.unwrap();
    assert!(!exists(&srv, &k.lock("shop:a")));
    assert_eq!(zscore(&srv, &k.ready("p"), a2.as_str()), Some(parked_score));
    assert!(!exists(&srv, &k.parked("shop:a")));
    assert_eq!(
        get::<i64>(&srv, &["SISMEMBER", &k.parked_resources(), "shop:a"]),
        0
    );
    let l = lease_one(&q, "w2", "p").await;
    assert_eq!(l.job, a2);
    assert_eq!(
        lock_holder(&srv, &q, "shop:a").as_deref(),
        Some(a2.as_str())
    );
}

#[tokio::test]
async fn release_or_cancel_of_the_holder_unparks_the_waiters() {
    let srv = RedisServer::start();
    let q = connect(&srv, "unpark").await;
    let k = q.keys().clone();
    let j1 = enqueue(&q, job("p", 1).resource("r")).await;
    let j2 = enqueue(&q, job("p", 2).resource("r")).await;
    let l1 = lease_one(&q, "w", "p").await;
    assert_eq!(l1.job, j1);
    assert!(lease(&q, "w", 5).await.is_empty(), "j2 parks");

    // Release (LEASED -> QUEUED): both ready again, in their original order.
    assert_eq!(q.release(&l1).await.unwrap(), JobState::Queued);
    let j = read(&q, &j1).await;
    assert_eq!(
        (j.state, j.lease.clone(), j.attempt),
        (JobState::Queued, None, 1)
    );
    assert!(j.attempts.is_empty(), "a release ends no attempt");
    assert!(!exists(&srv, &k.lock("r")));
    assert_eq!(zmembers(&srv, &k.ready("p")), [j1.as_str(), j2.as_str()]);
    assert_eq!(zscore(&srv, &k.leases(), j1.as_str()), None);
    let ev = last_event(&srv, &q, &j1);
    assert_eq!(
        (
            ev["op"].as_str(),
            ev["from"].as_str(),
            ev["to"].as_str(),
            ev["by"].as_str()
        ),
        ("release", "LEASED", "QUEUED", "w")
    );
    // The old lease cannot release twice.
    let err = q.release(&l1).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Refused {
                state: JobState::Queued,
                ..
            }
        ),
        "{err:?}"
    );

    // Lease again: j1 first; j2 parks again. Cancel j1 before it starts.
    let l1 = lease_one(&q, "w", "p").await;
    assert_eq!(l1.job, j1);
    assert!(lease(&q, "w", 5).await.is_empty());
    assert!(matches!(
        q.cancel(&j1, "stop", "op").await.unwrap(),
        Cancelled::Requested { .. }
    ));
    assert!(matches!(
        q.start(&l1, "s").await.unwrap(),
        Started::Cancelled { .. }
    ));
    assert!(!exists(&srv, &k.lock("r")));
    let l2 = lease_one(&q, "w", "p").await;
    assert_eq!(l2.job, j2);

    // A release with a cancel pending ends the job CANCELLED and unparks too.
    let j4 = enqueue(&q, job("p", 4).resource("r4")).await;
    let j5 = enqueue(&q, job("p", 5).resource("r4")).await;
    let l4 = q.lease("w", &["p"], 5, TTL).await.unwrap().leases;
    assert_eq!(l4.len(), 1);
    assert_eq!(l4[0].job, j4);
    q.cancel(&j4, "abandon", "op").await.unwrap();
    assert_eq!(q.release(&l4[0]).await.unwrap(), JobState::Cancelled);
    let j = read(&q, &j4).await;
    assert_eq!(j.state, JobState::Cancelled);
    assert_eq!(j.attempts[0].state, JobState::Cancelled);
    assert!(!exists(&srv, &k.lock("r4")));
    assert_eq!(lease_one(&q, "w", "p").await.job, j5);

    // A RUNNING holder cannot release; finishing as CANCELLED unparks the next one.
    let j3 = enqueue(&q, job("p", 3).resource("r")).await;
    assert!(lease(&q, "w", 5).await.is_empty());
    let _ = q.start(&l2, "s").await.unwrap();
    let err = q.release(&l2).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Refused {
                state: JobState::Running,
                ..
            }
        ),
        "{err:?}"
    );
    q.finish(
        &l2,
        &Outcome::Cancelled {
            reason: "operator".into(),
            cleanup_needed: false,
        },
    )
    .await
    .unwrap();
    assert_eq!(lease_one(&q, "w", "p").await.job, j3);
}

#[tokio::test]
async fn lock_ttl_is_renewed_by_renew_not_by_a_checkpoint() {
    let srv = RedisServer::start();
    let q = connect(&srv, "ttl").await;
    let k = q.keys().clone();
    enqueue(&q, job("p", 1).resource("r")).await;
    let plain = enqueue(&q, job("p", 2)).await;
    let ttl = Duration::from_secs(5);
    let ls = q.lease("w", &["p"], 2, ttl).await.unwrap().leases;
    let (l, lp) = (&ls[0], &ls[1]);
    let lock = k.lock("r");
    let t = pttl(&srv, &lock);
    assert!(t > 5_000, "the lock outlives the lease: {t} ms");

    let _: i64 = get(&srv, &["PEXPIRE", &lock, "2000"]);
    assert_eq!(
        q.renew(&[l, lp]).await.unwrap(),
        [Renewal::Held, Renewal::Held]
    );
    assert!(pttl(&srv, &lock) > 5_000, "renew extends the lock");
    // A lock that vanished (evicted, expired) with nobody else on the resource is re-taken.
    let _: i64 = get(&srv, &["DEL", &lock]);
    assert_eq!(q.renew(&[l]).await.unwrap(), [Renewal::Held]);
    assert_eq!(lock_holder(&srv, &q, "r").as_deref(), Some(l.job.as_str()));
    assert!(pttl(&srv, &lock) > 5_000);

    let _ = q.start(l, "s").await.unwrap();
    let _: i64 = get(&srv, &["PEXPIRE", &lock, "2000"]);
    // a checkpoint is an append: the heartbeat's renewal alone extends the lock
    q.checkpoint(l, "s", "{}", None).await.unwrap();
    assert!(
        pttl(&srv, &lock) <= 2_000,
        "a checkpoint does not touch the lock"
    );

    // A job without a resource has no lock, and its hash never gets a TTL.
    assert_eq!(pttl(&srv, &k.job(plain.as_str())), -1);
    assert_eq!(pttl(&srv, &k.job(l.job.as_str())), -1);
    assert_eq!(get::<i64>(&srv, &["EXISTS", &k.lock("")]), 0);
}

#[tokio::test]
async fn a_holder_whose_lock_was_taken_by_another_job_cannot_renew_it() {
    // The lock vanished while its holder still held a live lease (it outlived
    // its TTL with no sweep, or memory pressure evicted it) and another job on
    // the resource took it. The holder must learn it lost the resource rather
    // than extend the other job's lock.
    let srv = RedisServer::start();
    let q = connect(&srv, "steal").await;
    let k = q.keys().clone();
    enqueue(&q, job("p", 1).resource("r")).await;
    let l1 = lease_one(&q, "w1", "p").await;
    let _ = q.start(&l1, "s").await.unwrap();
    let _: i64 = get(&srv, &["PEXPIRE", &k.lock("r"), "1"]);
    wait_until_async(WAIT, "the lock expired", || async {
        !exists(&srv, &k.lock("r"))
    })
    .await;
    let j2 = enqueue(&q, job("p", 2).resource("r")).await;
    let l2 = lease_one(&q, "w2", "p").await;
    assert_eq!(l2.job, j2);
    assert_eq!(lock_holder(&srv, &q, "r").as_deref(), Some(j2.as_str()));

    let _: i64 = get(&srv, &["PEXPIRE", &k.lock("r"), "3000"]);
    let r = q.renew(&[&l1]).await.unwrap();
    assert!(matches!(r[0], Renewal::Lost { .. }), "{r:?}");
    // j1 still holds its job's lease (RUNNING under its token): its
    // checkpoint is an append, accepted, which touches no lock; j1's worker
    // learnt from the renewal that it lost the resource and stops
    let before = srv.dump_but_outputs("*");
    assert_eq!(q.checkpoint(&l1, "s", "{}", None).await.unwrap(), None);
    assert_eq!(
        before,
        srv.dump_but_outputs("*"),
        "a checkpoint writes nothing but its append"
    );
    assert!(
        pttl(&srv, &k.lock("r")) <= 3000,
        "j2's lock was not touched by j1"
    );
    assert_eq!(lock_holder(&srv, &q, "r").as_deref(), Some(j2.as_str()));
    // j2's own renewal is fine.
    assert_eq!(q.renew(&[&l2]).await.unwrap(), [Renewal::Held]);
    // j1, no longer renewed, goes STALE (it ran: an operator decides) without touching j2's lock.
    force_expire(&srv, &q, &l1.job);
    assert_eq!(q.sweep(10).await.unwrap().stale, 1);
    assert_eq!(lock_holder(&srv, &q, "r").as_deref(), Some(j2.as_str()));
    assert!(pttl(&srv, &k.lock("r")) > 0);
}

// ---- sweep ----------------------------------------------------------------------

#[tokio::test]
async fn sweep_requeues_an_expired_leased_job_and_unparks_its_waiters() {
    let srv = RedisServer::start();
    let q = connect(&srv, "sw1").await;
    let k = q.keys().clone();
    let j1 = enqueue(&q, job("p", 1).resource("r")).await;
    let j2 = enqueue(&q, job("p", 2).resource("r")).await;
    let old = lease_one(&q, "w-dead", "p").await;
    assert!(lease(&q, "w", 5).await.is_empty(), "j2 parks");
    force_expire(&srv, &q, &j1);

    let report = q.sweep(100).await.unwrap();
    assert_eq!(
        report,
        SweepReport {
            requeued: 1,
            moves: vec![swept(&j1, JobState::Leased, JobState::Queued)],
            ..SweepReport::default()
        }
    );
    let j = read(&q, &j1).await;
    assert_eq!(
        (j.state, j.attempt, j.lease.clone(), j.worker.clone()),
        (JobState::Queued, 1, None, None)
    );
    assert!(j.attempts.is_empty(), "nothing ran: no attempt ended");
    assert!(!exists(&srv, &k.lock("r")));
    assert_eq!(zmembers(&srv, &k.ready("p")), [j1.as_str(), j2.as_str()]);
    assert_eq!(zscore(&srv, &k.leases(), j1.as_str()), None);
    let ev = last_event(&srv, &q, &j1);
    assert_eq!(
        (
            ev["op"].as_str(),
            ev["from"].as_str(),
            ev["to"].as_str(),
            ev["by"].as_str()
        ),
        ("sweep", "LEASED", "QUEUED", "w-dead")
    );
    assert!(ev["reason"].contains("lease expired"), "{ev:?}");

    // The old holder is refused; after a re-lease, it has lost the lease.
    let err = q.start(&old, "s").await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Refused {
                state: JobState::Queued,
                ..
            }
        ),
        "{err:?}"
    );
    let new = lease_one(&q, "w-new", "p").await;
    assert_eq!(new.job, j1);
    assert!(new.fence > old.fence);
    let err = q.start(&old, "s").await.unwrap_err();
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
    assert_eq!(
        q.renew(&[&old]).await.unwrap(),
        [Renewal::Lost {
            state: Some(JobState::Leased)
        }]
    );
    // Nothing left to sweep.
    assert_eq!(q.sweep(100).await.unwrap(), SweepReport::default());
}

#[tokio::test]
async fn sweep_cancels_an_expired_leased_job_with_a_cancel_request() {
    let srv = RedisServer::start();
    let q = connect(&srv, "sw2").await;
    let k = q.keys().clone();
    let id = enqueue(&q, job("p", 1).resource("r").input_key("key")).await;
    let waiter = enqueue(&q, job("p", 2).resource("r")).await;
    let old = lease_one(&q, "w-dead", "p").await;
    assert!(lease(&q, "w", 5).await.is_empty());
    q.cancel(&id, "not needed", "op").await.unwrap();
    force_expire(&srv, &q, &id);

    let report = q.sweep(100).await.unwrap();
    assert_eq!(report.cancelled, 1);
    assert_eq!(
        report.moves,
        [swept(&id, JobState::Leased, JobState::Cancelled)]
    );
    let j = read(&q, &id).await;
    assert_eq!(j.state, JobState::Cancelled);
    let rec = &j.attempts[0];
    assert_eq!(rec.state, JobState::Cancelled);
    assert!(rec.reason.as_deref().unwrap().contains("lease expired"));
    assert_eq!(rec.cancel.as_ref().unwrap().reason, "not needed");
    assert!(!exists(&srv, &k.lock("r")));
    assert!(zscore(&srv, &k.done(), id.as_str()).is_some());
    assert_eq!(
        get::<Option<String>>(&srv, &["HGET", &k.inputs(), "key"]),
        None
    );
    let ev = last_event(&srv, &q, &id);
    assert_eq!(
        (ev["op"].as_str(), ev["to"].as_str()),
        ("sweep", "CANCELLED")
    );
    let err = q.start(&old, "s").await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Refused {
                state: JobState::Cancelled,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(lease_one(&q, "w", "p").await.job, waiter);
}

#[tokio::test]
async fn sweep_makes_an_expired_running_job_stale_and_holds_its_lock() {
    let srv = RedisServer::start();
    let q = connect(&srv, "sw3").await;
    let k = q.keys().clone();
    let id = enqueue(&q, job("p", 1).resource("r")).await;
    let waiter = enqueue(&q, job("p", 2).resource("r")).await;
    let old = lease_one(&q, "w-dead", "p").await;
    let _ = q.start(&old, "fetch").await.unwrap();
    q.checkpoint(&old, "fetch", r#"{"rows":1}"#, Some("load"))
        .await
        .unwrap();
    assert!(lease(&q, "w", 5).await.is_empty());
    force_expire(&srv, &q, &id);

    let report = q.sweep(100).await.unwrap();
    assert_eq!(report.stale, 1);
    assert_eq!(
        report.moves,
        [swept(&id, JobState::Running, JobState::Stale)]
    );
    let j = read(&q, &id).await;
    assert_eq!(j.state, JobState::Stale);
    assert!(j.stale_at.is_some());
    assert_eq!(j.lease, None, "the token is gone");
    assert_eq!(j.worker.as_deref(), Some("w-dead"), "who ran it is kept");
    assert_eq!(j.fence, Some(old.fence));
    assert_eq!(j.steps.len(), 1);
    assert_eq!(j.last_step.as_deref(), Some("fetch"));
    assert!(j.attempts.is_empty(), "the operator ends the attempt");
    assert!(zscore(&srv, &k.stale(), id.as_str()).is_some());
    assert_eq!(lock_holder(&srv, &q, "r").as_deref(), Some(id.as_str()));
    assert_eq!(
        pttl(&srv, &k.lock("r")),
        -1,
        "a STALE job's lock never expires by default"
    );
    assert!(zscore(&srv, &k.parked("r"), waiter.as_str()).is_some());
    assert!(lease(&q, "w", 5).await.is_empty());
    let ev = last_event(&srv, &q, &id);
    assert_eq!(
        (ev["op"].as_str(), ev["from"].as_str(), ev["to"].as_str()),
        ("sweep", "RUNNING", "STALE")
    );

    // The old holder is refused everything.
    let before = srv.dump_but_outputs("*");
    let err = q.checkpoint(&old, "load", "{}", None).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Refused {
                state: JobState::Stale,
                ..
            }
        ),
        "{err:?}"
    );
    let err = q.finish(&old, &Outcome::Succeeded).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Refused {
                state: JobState::Stale,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        q.renew(&[&old]).await.unwrap(),
        [Renewal::Lost {
            state: Some(JobState::Stale)
        }]
    );
    assert_eq!(
        q.sweep(100).await.unwrap(),
        SweepReport::default(),
        "nothing more to do"
    );
    assert_eq!(before, srv.dump_but_outputs("*"));

    // The operator's decision frees the resource.
    q.resolve(&id, JobState::Failed, "op", "partial load rolled back")
        .await
        .unwrap();
    assert!(!exists(&srv, &k.lock("r")));
    assert_eq!(lease_one(&q, "w", "p").await.job, waiter);
}

#[tokio::test]
async fn sweep_releases_the_lock_of_a_stale_job_whose_policy_says_release() {
    let srv = RedisServer::start();
    let q = connect(&srv, "sw4").await;
    let k = q.keys().clone();
    let id = enqueue(&q, job("p", 1).resource("r").stale_lock(StaleLock::Release)).await;
    let waiter = enqueue(&q, job("p", 2).resource("r")).await;
    let old = lease_one(&q, "w-dead", "p").await;
    let _ = q.start(&old, "s").await.unwrap();
    assert!(lease(&q, "w", 5).await.is_empty());
    force_expire(&srv, &q, &id);
    assert_eq!(q.sweep(100).await.unwrap().stale, 1);
    assert_eq!(state(&q, &id).await, JobState::Stale);
    assert!(!exists(&srv, &k.lock("r")));
    assert!(!exists(&srv, &k.parked("r")));
    assert_eq!(lease_one(&q, "w", "p").await.job, waiter);
}

#[tokio::test]
async fn sweep_handles_at_most_batch_expired_leases_per_call() {
    let srv = RedisServer::start();
    let q = connect(&srv, "batch").await;
    q.enqueue_bulk((0..50).map(|n| job("p", n)).collect())
        .await
        .unwrap();
    let ls = lease(&q, "w", 50).await;
    assert_eq!(ls.len(), 50);
    let ids: Vec<&JobId> = ls.iter().map(|l| &l.job).collect();
    force_expire_all(&srv, &q, &ids);
    let mut sizes = Vec::new();
    for _ in 0..4 {
        let r = q.sweep(20).await.unwrap();
        assert_eq!(r.requeued as usize, r.moves.len());
        sizes.push(r.moves.len());
    }
    assert_eq!(sizes, [20, 20, 10, 0]);
    assert_eq!(get::<u64>(&srv, &["ZCARD", &q.keys().ready("p")]), 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_sweeps_recover_each_expired_lease_exactly_once() {
    let srv = RedisServer::start();
    let q = connect(&srv, "conc").await;
    let out = q
        .enqueue_bulk((0..200).map(|n| job("p", n)).collect())
        .await
        .unwrap();
    assert_eq!(out.len(), 200);
    let ls = lease(&q, "w-dead", 200).await;
    assert_eq!(ls.len(), 200);
    // 100 stay LEASED, 50 LEASED with a cancel request, 50 RUNNING.
    let mut expect: HashMap<JobId, JobState> = HashMap::new();
    for (i, l) in ls.iter().enumerate() {
        let to = match i % 4 {
            0 | 1 => JobState::Queued,
            2 => {
                q.cancel(&l.job, "stop", "op").await.unwrap();
                JobState::Cancelled
            }
            _ => {
                let _ = q.start(l, "s").await.unwrap();
                JobState::Stale
            }
        };
        expect.insert(l.job.clone(), to);
    }
    let ids: Vec<&JobId> = ls.iter().map(|l| &l.job).collect();
    force_expire_all(&srv, &q, &ids);

    let barrier = Arc::new(tokio::sync::Barrier::new(8));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let q = q.clone();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut reports = Vec::new();
            loop {
                let r = q.sweep(7).await.expect("sweep");
                if r.moves.is_empty() {
                    return reports;
                }
                reports.push(r);
            }
        }));
    }
    let mut total = SweepReport::default();
    for t in tasks {
        for r in t.await.unwrap() {
            total.requeued += r.requeued;
            total.cancelled += r.cancelled;
            total.stale += r.stale;
            total.moves.extend(r.moves);
        }
    }
    assert_eq!(
        (total.requeued, total.cancelled, total.stale),
        (100, 50, 50)
    );
    assert_eq!(total.moves.len(), 200);
    let distinct: HashSet<&JobId> = total.moves.iter().map(|m| &m.job).collect();
    assert_eq!(distinct.len(), 200, "no job was recovered twice");
    for m in &total.moves {
        assert_eq!(expect[&m.job], m.to, "{m:?}");
        assert_eq!(state(&q, &m.job).await, m.to);
    }
    let mut sweep_events: HashMap<String, usize> = HashMap::new();
    for e in events(&srv, &q).into_iter().filter(|e| e["op"] == "sweep") {
        *sweep_events.entry(e["job"].clone()).or_default() += 1;
    }
    assert_eq!(sweep_events.len(), 200);
    assert!(
        sweep_events.values().all(|&n| n == 1),
        "one sweep event per job"
    );
    assert_eq!(get::<u64>(&srv, &["ZCARD", &q.keys().leases()]), 0);
}

#[tokio::test]
async fn sweep_unparks_waiters_of_a_lock_that_expired_on_its_own() {
    let srv = RedisServer::start();
    let q = connect(&srv, "exp").await;
    let k = q.keys().clone();
    enqueue(&q, job("p", 1).resource("r")).await;
    let w1 = enqueue(&q, job("p", 2).resource("r")).await;
    let w2 = enqueue(&q, job("p", 3).resource("r")).await;
    let holder = lease_one(&q, "w", "p").await;
    assert!(lease(&q, "w", 5).await.is_empty());
    assert_eq!(get::<u64>(&srv, &["ZCARD", &k.parked("r")]), 2);

    let _: i64 = get(&srv, &["PEXPIRE", &k.lock("r"), "1"]);
    wait_until_async(WAIT, "the lock expired", || async {
        !exists(&srv, &k.lock("r"))
    })
    .await;
    let report = q.sweep(100).await.unwrap();
    // fair hand-off: the first waiter (priority, then age) gets the resource,
    // the others keep waiting for their turn
    assert_eq!(report.unparked, 1);
    assert!(report.moves.is_empty(), "the holder's lease is still valid");
    assert_eq!(zmembers(&srv, &k.ready("p")), [w1.as_str()]);
    assert_eq!(zmembers(&srv, &k.parked("r")), [w2.as_str()]);
    assert_eq!(
        get::<i64>(&srv, &["SISMEMBER", &k.parked_resources(), "r"]),
        1
    );
    let next = lease_one(&q, "w", "p").await;
    assert_eq!(next.job, w1);
    assert_eq!(state(&q, &holder.job).await, JobState::Leased);
    // when w1 ends, w2 is handed the resource, and the index forgets it
    let _ = q.start(&next, "s").await.unwrap();
    q.finish(&next, &Outcome::Succeeded).await.unwrap();
    assert_eq!(zmembers(&srv, &k.ready("p")), [w2.as_str()]);
    assert!(!exists(&srv, &k.parked("r")));
    assert_eq!(
        get::<i64>(&srv, &["SISMEMBER", &k.parked_resources(), "r"]),
        0
    );
}

#[tokio::test]
async fn sweep_dry_run_reports_the_same_moves_and_changes_nothing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "dry").await;
    let k = q.keys().clone();
    let a = enqueue(&q, job("p", 1).resource("r")).await;
    enqueue(&q, job("p", 2).resource("r")).await; // parked behind a
    let b = enqueue(&q, job("p", 3)).await;
    let c = enqueue(&q, job("p", 4)).await;
    enqueue(&q, job("p", 5).resource("r2")).await; // holds r2, lease kept
    enqueue(&q, job("p", 6).resource("r2")).await; // parked behind it
    let ls = lease(&q, "w-dead", 10).await;
    assert_eq!(ls.len(), 4);
    q.cancel(&b, "stop", "op").await.unwrap();
    let _ = q.start(&ls[2], "s").await.unwrap();
    assert_eq!(ls[2].job, c);
    force_expire_all(&srv, &q, &[&a, &b, &c]);
    let _: i64 = get(&srv, &["PEXPIRE", &k.lock("r2"), "1"]);
    wait_until_async(WAIT, "the r2 lock expired", || async {
        !exists(&srv, &k.lock("r2"))
    })
    .await;

    let before = srv.dump("*");
    let dry = q.sweep_dry_run(100).await.unwrap();
    assert_eq!(before, srv.dump("*"), "a dry run writes nothing");
    let dry_again = q.sweep_dry_run(100).await.unwrap();
    assert_eq!(dry, dry_again);
    assert_eq!(
        (
            dry.requeued,
            dry.cancelled,
            dry.stale,
            dry.unparked,
            dry.purged
        ),
        (1, 1, 1, 1, 0)
    );
    let real = q.sweep(100).await.unwrap();
    assert_eq!(real, dry, "the real sweep does what the dry run said");
    assert_eq!(
        real.moves,
        [
            swept(&a, JobState::Leased, JobState::Queued),
            swept(&b, JobState::Leased, JobState::Cancelled),
            swept(&c, JobState::Running, JobState::Stale),
        ]
    );
    assert_ne!(before, srv.dump("*"));
}

#[tokio::test]
async fn an_unrenewed_lease_really_expires_and_is_recovered() {
    let srv = RedisServer::start();
    let q = connect(&srv, "real").await;
    let k = q.keys().clone();
    let id = enqueue(&q, job("p", 1).resource("r")).await;
    let waiter = enqueue(&q, job("p", 2).resource("r")).await;
    let ls = q
        .lease("w-dead", &["p"], 5, Duration::from_millis(300))
        .await
        .unwrap()
        .leases;
    assert_eq!(ls.len(), 1);
    let t = pttl(&srv, &k.lock("r"));
    assert!(t > 300, "the lock outlives the lease: {t} ms");
    // No renewal: the sweeper recovers it once its deadline passes.
    let report = eventually("the sweeper recovers the expired lease", || async {
        let r = q.sweep(10).await.unwrap();
        (!r.moves.is_empty()).then_some(r)
    })
    .await;
    assert_eq!(
        report.moves,
        [swept(&id, JobState::Leased, JobState::Queued)]
    );
    let j = read(&q, &id).await;
    assert_eq!(j.state, JobState::Queued);
    assert!(!exists(&srv, &k.lock("r")));
    let next = lease(&q, "w", 5).await;
    let ids: Vec<&JobId> = next.iter().map(|l| &l.job).collect();
    assert_eq!(
        ids,
        [&id],
        "the recovered job goes first; the waiter parks again"
    );
    assert!(zscore(&srv, &k.parked("r"), waiter.as_str()).is_some());
    // Its old holder finds out at its next call.
    let err = q.start(&ls[0], "s").await.unwrap_err();
    assert!(err.is_lease_lost(), "{err:?}");
    let _ = q.start(&next[0], "s").await.unwrap();
    assert_eq!(
        q.finish(&next[0], &Outcome::Succeeded).await.unwrap(),
        Finished::Ended(JobState::Succeeded)
    );
}

#[tokio::test]
async fn a_retried_stale_job_keeps_its_place_ahead_of_the_jobs_parked_behind_it() {
    let srv = RedisServer::start();
    let q = connect(&srv, "q").await;
    let first = enqueue(&q, job("p", 1).resource("r")).await;
    let held = lease_one(&q, "w1", "p").await;
    assert_eq!(held.job, first);
    let _ = q.start(&held, "a").await.expect("start");
    // later jobs of the same resource park behind the holder
    let second = enqueue(&q, job("p", 2).resource("r")).await;
    let third = enqueue(&q, job("p", 3).resource("r")).await;
    assert!(lease(&q, "w2", 2).await.is_empty());
    force_expire(&srv, &q, &first);
    q.sweep(10).await.expect("sweep");
    assert_eq!(state(&q, &first).await, JobState::Stale);
    q.retry(
        &first,
        leasehold_core::RetryMode::Resume,
        "op",
        "worker died",
    )
    .await
    .expect("retry");
    // the retry releases the lock and unparks the others; the retried job goes first
    let next = lease(&q, "w3", 3).await;
    assert_eq!(next.len(), 1, "one job holds the resource");
    assert_eq!(next[0].job, first);
    let _ = (second, third);
}
