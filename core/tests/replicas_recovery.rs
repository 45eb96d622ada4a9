//! Recovery with real worker replicas (separate OS processes, see
//! `support/replica.rs`): a replica killed with SIGKILL between lease and start
//! or while RUNNING, a step three times longer than the lease under sweeps, and
//! Redis restarted under running replicas.
//!
//! Every wait is on an observable condition with a generous deadline. The
//! tests run one at a time (they are timing-sensitive: leases of 1 s renewed
//! every 250 ms).

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use leasehold_core::redis;
use leasehold_core::{JobId, JobState, Queue, RetryMode};
use leasehold_testkit::{wait_until_async, RedisServer};
use serde_json::json;
use support::redis_now;
use support::replica::*;

// ---- 1. a replica dies between lease and start ----------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_jobs_of_a_killed_replica_are_requeued_by_a_sweeper_and_completed() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let mut ids = Vec::new();
    for i in 0..4 {
        let resource = if i < 2 {
            Some(format!("shop-{i}"))
        } else {
            None
        };
        ids.push(
            enqueue(
                &queue,
                &format!("j{i}"),
                resource.as_deref(),
                quick_steps(20),
            )
            .await,
        );
    }

    let mut holder = Replica::spawn(
        "lease-only",
        "lease-only",
        &[
            ("url", srv.url()),
            ("lease-count", "4".into()),
            ("lease-ttl-ms", "1000".into()),
        ],
    );
    let holder_id = holder.ready().await;
    for (i, id) in ids.iter().enumerate() {
        let j = job(&queue, id).await;
        assert_eq!(j.state, JobState::Leased, "{j:?}");
        assert_eq!(j.lease.as_ref().unwrap().worker, holder_id);
        if i < 2 {
            let lock: Option<String> = query(
                &queue,
                redis::cmd("GET").arg(queue.keys().lock(&format!("shop-{i}"))),
            )
            .await;
            assert_eq!(
                lock.as_deref(),
                Some(id.as_str()),
                "the lease took the resource lock"
            );
        }
    }

    let mut replica = Replica::worker("replica-a", &srv.url(), &[]);
    let replica_id = replica.ready().await;
    holder.kill9();

    wait_all(&queue, &ids, JobState::Succeeded).await;
    let all_events = events(&queue).await;
    for id in &ids {
        let evs: Vec<&Event> = all_events.iter().filter(|e| e.job == id.as_str()).collect();
        let ops: Vec<(&str, &str, &str)> = evs
            .iter()
            .map(|e| (e.op.as_str(), e.from.as_str(), e.to.as_str()))
            .collect();
        let sweep = evs
            .iter()
            .position(|e| e.op == "sweep")
            .unwrap_or_else(|| panic!("no sweep event for {id}: {ops:?}"));
        assert_eq!(
            (evs[sweep].from.as_str(), evs[sweep].to.as_str()),
            ("LEASED", "QUEUED"),
            "{ops:?}"
        );
        assert_eq!(evs[sweep].by, holder_id, "the sweep names the dead holder");
        assert_eq!(
            evs[sweep].attempt, 1,
            "requeueing an unstarted lease is not a new attempt"
        );
        assert!(
            evs[..sweep].iter().all(|e| e.op != "start"),
            "the holder never started it: {ops:?}"
        );
        let after: Vec<(&str, &str)> = evs[sweep + 1..]
            .iter()
            .map(|e| (e.op.as_str(), e.by.as_str()))
            .collect();
        assert_eq!(
            after,
            [
                // the replica leases it into a free run slot: started in that call
                ("start", replica_id.as_str()),
                ("finish", replica_id.as_str())
            ],
            "{ops:?}"
        );
        let j = job(&queue, id).await;
        assert_eq!(j.attempt, 1);
        assert_eq!(j.attempts.len(), 1);
        assert_eq!(j.attempts[0].state, JobState::Succeeded);
        assert_eq!(j.attempts[0].worker, replica_id);
        assert_eq!(
            step_names(&j, 0),
            ["fetch", "validate", "load", "aggregate"]
        );
    }
    let sp = spans(&queue).await;
    assert!(
        sp.iter().all(|s| s.worker == replica_id),
        "only the live replica ran steps"
    );
    assert_eq!(
        sp.iter()
            .filter(|s| s.ev == "end" && s.outcome == "done")
            .count(),
        16
    );
    for i in 0..2 {
        let exists: i64 = query(
            &queue,
            redis::cmd("EXISTS").arg(queue.keys().lock(&format!("shop-{i}"))),
        )
        .await;
        assert_eq!(exists, 0, "locks are released");
    }
    let leases: i64 = query(&queue, redis::cmd("ZCARD").arg(queue.keys().leases())).await;
    assert_eq!(leases, 0);
    replica.stop_cleanly(WAIT).await;
}

// ---- 2. a replica dies while RUNNING -----------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_job_of_a_killed_replica_goes_stale_holds_its_lock_and_resumes_after_retry() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let mut a = Replica::worker("replica-a", &srv.url(), &[("concurrency", "2")]);
    let a_id = a.ready().await;

    let slow = enqueue(
        &queue,
        "slow",
        Some("shop-a"),
        json!({
            "fetch": {"ms": 20}, "validate": {"ms": 20},
            "load": {"ms": 60000, "ms_on_attempt": {"2": 50}},
            "aggregate": {"ms": 20},
        }),
    )
    .await;
    wait_span(&queue, "load of the slow job begins on replica-a", |s| {
        s.job == slow.as_str() && s.step == "load" && s.ev == "begin"
    })
    .await;
    let j = job(&queue, &slow).await;
    assert_eq!(j.state, JobState::Running);
    assert_eq!(j.last_step.as_deref(), Some("validate"));
    assert_eq!(
        j.steps.iter().map(|s| s.step.as_str()).collect::<Vec<_>>(),
        ["fetch", "validate"]
    );
    assert_eq!(j.worker.as_deref(), Some(a_id.as_str()));

    // a second job on the same resource: leased, found locked, parked
    let parked = enqueue(&queue, "parked", Some("shop-a"), quick_steps(20)).await;
    let parked_key = queue.keys().parked("shop-a");
    wait_until_async(WAIT, "the second job is parked on shop-a", || {
        let (queue, parked_key, parked) = (&queue, &parked_key, &parked);
        async move {
            let score: Option<f64> = query(
                queue,
                redis::cmd("ZSCORE").arg(parked_key).arg(parked.as_str()),
            )
            .await;
            score.is_some()
        }
    })
    .await;

    let mut b = Replica::worker("replica-b", &srv.url(), &[("concurrency", "2")]);
    let b_id = b.ready().await;
    a.kill9();

    // the sweeper (replica-b's, every 200 ms; the test sweeps too) finds the expired lease
    wait_until_async(WAIT, "the slow job is STALE", || {
        let (queue, slow) = (&queue, &slow);
        async move {
            queue.sweep(100).await.expect("sweep");
            state(queue, slow).await == JobState::Stale
        }
    })
    .await;
    let lock_key = queue.keys().lock("shop-a");
    let j = job(&queue, &slow).await;
    assert!(j.lease.is_none(), "the token is gone: {j:?}");
    assert_eq!(
        j.worker.as_deref(),
        Some(a_id.as_str()),
        "the dead worker is kept for the operator"
    );
    assert_eq!(j.last_step.as_deref(), Some("validate"));
    let sweep_ev = events_of(&queue, &slow)
        .await
        .into_iter()
        .find(|e| e.op == "sweep")
        .expect("a sweep event");
    assert_eq!(
        (sweep_ev.from.as_str(), sweep_ev.to.as_str()),
        ("RUNNING", "STALE")
    );

    // STALE holds the lock (no TTL), and the parked job stays parked, across sweeps
    let quiet_until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < quiet_until {
        queue.sweep(100).await.expect("sweep");
        let lock: Option<String> = query(&queue, redis::cmd("GET").arg(&lock_key)).await;
        assert_eq!(
            lock.as_deref(),
            Some(slow.as_str()),
            "the STALE job holds shop-a"
        );
        let pttl: i64 = query(&queue, redis::cmd("PTTL").arg(&lock_key)).await;
        assert_eq!(pttl, -1, "a STALE job's lock does not expire");
        assert_eq!(state(&queue, &parked).await, JobState::Queued);
        let score: Option<f64> = query(
            &queue,
            redis::cmd("ZSCORE").arg(&parked_key).arg(parked.as_str()),
        )
        .await;
        assert!(score.is_some(), "the second job stays parked");
        assert_eq!(state(&queue, &slow).await, JobState::Stale);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        spans_of(&queue, &parked).await.is_empty(),
        "the parked job never ran"
    );

    // the operator resumes it
    let retried_at = redis_now(&queue).await;
    let n = queue
        .retry(
            &slow,
            RetryMode::Resume,
            "operator",
            "sink checked: resume after validate",
        )
        .await
        .expect("retry");
    assert_eq!(n, 2);
    wait_all(&queue, &[slow.clone(), parked.clone()], JobState::Succeeded).await;

    let j = job(&queue, &slow).await;
    assert_eq!(j.attempts.len(), 2);
    assert_eq!(j.attempts[0].state, JobState::Stale);
    assert_eq!(j.attempts[0].worker, a_id);
    assert_eq!(step_names(&j, 0), ["fetch", "validate"]);
    let resolution = j.attempts[0]
        .resolution
        .as_ref()
        .expect("the retry decision is recorded");
    assert_eq!(
        (resolution.action.as_str(), resolution.by.as_str()),
        ("retry", "operator")
    );
    assert_eq!(j.attempts[1].state, JobState::Succeeded);
    assert_eq!(j.attempts[1].worker, b_id);
    assert_eq!(step_names(&j, 1), ["load", "aggregate"]);
    assert!(
        j.attempts[1].fence > j.attempts[0].fence,
        "the new lease has a higher fence"
    );

    let sp = spans_of(&queue, &slow).await;
    let second: BTreeSet<&str> = sp
        .iter()
        .filter(|s| s.attempt == 2)
        .map(|s| s.step.as_str())
        .collect();
    assert_eq!(
        second,
        BTreeSet::from(["load", "aggregate"]),
        "attempt 2 resumed at load: {sp:?}"
    );
    assert!(sp
        .iter()
        .filter(|s| s.attempt == 2)
        .all(|s| s.worker == b_id));
    let first: Vec<(&str, &str)> = sp
        .iter()
        .filter(|s| s.attempt == 1)
        .map(|s| (s.step.as_str(), s.ev.as_str()))
        .collect();
    assert_eq!(
        first,
        [
            ("fetch", "begin"),
            ("fetch", "end"),
            ("validate", "begin"),
            ("validate", "end"),
            ("load", "begin")
        ],
        "attempt 1 died in load"
    );

    // the parked job ran only after the retry released the lock, never alongside the resumed job
    let p = spans_of(&queue, &parked).await;
    let p_begin = p.iter().map(|s| s.t).min().unwrap();
    let p_end = p
        .iter()
        .filter(|s| s.ev == "end")
        .map(|s| s.t)
        .max()
        .unwrap();
    assert!(
        p_begin as i64 / 1000 >= retried_at - 5,
        "the parked job waited for the operator"
    );
    let s2: Vec<&Span> = sp.iter().filter(|s| s.attempt == 2).collect();
    let s_begin = s2.iter().map(|s| s.t).min().unwrap();
    let s_end = s2
        .iter()
        .filter(|s| s.ev == "end")
        .map(|s| s.t)
        .max()
        .unwrap();
    assert!(
        p_end <= s_begin || s_end <= p_begin,
        "jobs on shop-a overlapped"
    );
    let exists: i64 = query(&queue, redis::cmd("EXISTS").arg(&lock_key)).await;
    assert_eq!(exists, 0);
    b.stop_cleanly(WAIT).await;
}

// ---- 4. a step longer than the lease --------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_three_times_the_lease_ttl_stays_running_under_sweeps() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let mut w = Replica::worker("replica-a", &srv.url(), &[("sweep-ms", "100")]);
    let w_id = w.ready().await;
    let id = enqueue(&queue, "long", None, json!({ "load": {"ms": 3000} })).await;

    let mut seen: Vec<JobState> = Vec::new();
    let mut test_sweeps = 0;
    let started = Instant::now();
    loop {
        // sweeps from the test as well as the replica's own, every 100 ms
        let report = queue.sweep(100).await.expect("sweep");
        test_sweeps += 1;
        assert!(
            report.moves.iter().all(|m| m.job != id),
            "a live job was swept: {report:?}"
        );
        let s = state(&queue, &id).await;
        if seen.last() != Some(&s) {
            seen.push(s);
        }
        if s == JobState::Succeeded {
            break;
        }
        assert!(
            started.elapsed() < WAIT,
            "the long job did not finish: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let running_from = seen
        .iter()
        .position(|s| *s == JobState::Running)
        .expect("seen RUNNING");
    assert_eq!(
        &seen[running_from..],
        [JobState::Running, JobState::Succeeded],
        "{seen:?}"
    );
    assert!(test_sweeps > 20, "sweeps ran meanwhile ({test_sweeps})");

    let load = spans_of(&queue, &id)
        .await
        .into_iter()
        .find(|s| s.step == "load" && s.ev == "end")
        .unwrap();
    assert_eq!(load.outcome, "done");
    assert!(
        load.t - load.begin >= 3_000_000,
        "load ran 3 lease TTLs: {load:?}"
    );
    let j = job(&queue, &id).await;
    assert_eq!(j.attempt, 1);
    assert_eq!(j.attempts.len(), 1, "a single attempt");
    assert_eq!(j.attempts[0].worker, w_id);
    assert_eq!(
        step_names(&j, 0),
        ["fetch", "validate", "load", "aggregate"]
    );
    assert!(events_of(&queue, &id).await.iter().all(|e| e.op != "sweep"));
    w.stop_cleanly(WAIT).await;
}

// ---- 6. Redis restarts under running replicas ------------------------------------------------------------

/// How long Redis stays down.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Outage {
    /// Stop and start again at once: leases normally survive.
    Brief,
    /// Stay down until every lease taken before the stop has expired.
    PastTheLeases,
}

/// Two replicas run 8 jobs; Redis (AOF, fsync always) is stopped and started
/// again mid-run. Returns how many jobs went STALE and were retried.
async fn run_through_a_restart(outage: Outage) -> usize {
    let mut srv = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let queue = client(&srv.url()).await;
    let mut a = Replica::worker("replica-a", &srv.url(), &[("concurrency", "3")]);
    let mut b = Replica::worker("replica-b", &srv.url(), &[("concurrency", "3")]);
    a.ready().await;
    b.ready().await;
    let mut ids = Vec::new();
    for i in 0..8 {
        let resource = (i % 2 == 0).then(|| format!("part-{}", i % 4));
        ids.push(
            enqueue(
                &queue,
                &format!("j{i}"),
                resource.as_deref(),
                quick_steps(300),
            )
            .await,
        );
    }
    // mid-run: some steps completed, some running
    wait_until_async(WAIT, "jobs are mid-run", || {
        let (queue, ids) = (&queue, &ids);
        async move {
            let mut running = 0;
            for id in ids {
                let j = job(queue, id).await;
                if j.state == JobState::Running && !j.steps.is_empty() {
                    running += 1;
                }
            }
            running >= 2
        }
    })
    .await;
    let last_deadline: Vec<(String, f64)> = query(
        &queue,
        redis::cmd("ZRANGE")
            .arg(queue.keys().leases())
            .arg(-1)
            .arg(-1)
            .arg("WITHSCORES"),
    )
    .await;
    let last_deadline = last_deadline.first().map_or(0, |(_, ms)| *ms as u64);

    tokio::task::block_in_place(|| srv.stop());
    if outage == Outage::PastTheLeases {
        // Redis's clock is this machine's wall clock: wait until it passed every lease deadline
        let wall_ms = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64
        };
        wait_until_async(
            WAIT,
            "every lease ran out while Redis was down",
            || async move { wall_ms() > last_deadline + 500 },
        )
        .await;
    }
    tokio::task::block_in_place(|| srv.restart());
    assert!(a.alive() && b.alive(), "the replicas survived the outage");

    // every job settles: SUCCEEDED, STALE when a lease ran out while Redis was away,
    // or QUEUED behind the lock a STALE job holds; nothing stays LEASED/RUNNING with
    // an expired lease once swept
    let settled = |queue: Queue, ids: Vec<JobId>| async move {
        queue.sweep(100).await.ok()?;
        let now = redis_now(&queue).await;
        let mut stale = Vec::new();
        for id in &ids {
            let j = queue.job(id).await.ok()??;
            match j.state {
                JobState::Succeeded => {}
                JobState::Stale => stale.push(id.clone()),
                JobState::Queued => {
                    let resource = j.resource.as_deref()?;
                    let holder: Option<String> =
                        query(&queue, redis::cmd("GET").arg(queue.keys().lock(resource))).await;
                    let holder = JobId::parse(&holder?).ok()?;
                    if queue.job(&holder).await.ok()??.state != JobState::Stale {
                        return None;
                    }
                }
                JobState::Leased | JobState::Running => {
                    let deadline = j.lease.as_ref().map_or(0, |l| l.deadline);
                    // (renewals may land between the sweep and this read: allow one TTL of slack)
                    assert!(
                        deadline > now - 1000,
                        "{id} is {} with an expired lease after a sweep",
                        j.state
                    );
                    return None;
                }
                _ => return None,
            }
        }
        Some(stale)
    };
    let stale = wait_for("every job is SUCCEEDED or STALE", || {
        settled(queue.clone(), ids.clone())
    })
    .await;
    for id in &stale {
        let j = job(&queue, id).await;
        assert!(j.lease.is_none() && j.stale_at.is_some(), "{j:?}");
        queue
            .retry(id, RetryMode::Resume, "operator", "after the Redis restart")
            .await
            .expect("retry");
    }
    wait_all(&queue, &ids, JobState::Succeeded).await;

    let order = ["fetch", "validate", "load", "aggregate"];
    let sp = spans(&queue).await;
    for id in &ids {
        let j = job(&queue, id).await;
        assert_eq!(
            j.attempts.len() as u32,
            j.attempt,
            "every attempt is recorded: {j:?}"
        );
        let mut done: Vec<String> = Vec::new();
        for (i, a) in j.attempts.iter().enumerate() {
            assert_eq!(a.n as usize, i + 1);
            if i + 1 == j.attempts.len() {
                assert_eq!(a.state, JobState::Succeeded);
            } else {
                assert_eq!(a.state, JobState::Stale, "{j:?}");
                assert_eq!(
                    a.resolution.as_ref().map(|r| r.action.as_str()),
                    Some("retry")
                );
                assert!(stale.contains(id));
            }
            // a resumed attempt runs no step an earlier attempt completed
            for s in sp
                .iter()
                .filter(|s| s.job == id.as_str() && s.attempt == a.n && s.ev == "begin")
            {
                assert!(
                    !done.contains(&s.step),
                    "attempt {} of {id} re-ran {}: {j:?}",
                    a.n,
                    s.step
                );
            }
            done.extend(a.steps.iter().map(|s| s.step.clone()));
        }
        assert_eq!(
            done, order,
            "each step completed once, in order, across attempts: {j:?}"
        );
        assert!(j.lease.is_none());
    }
    let leases: i64 = query(&queue, redis::cmd("ZCARD").arg(queue.keys().leases())).await;
    assert_eq!(leases, 0);
    assert!(a.alive() && b.alive());
    a.stop_cleanly(WAIT).await;
    b.stop_cleanly(WAIT).await;
    stale.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_survive_a_redis_restart_and_every_job_ends_truthfully() {
    let _serial = SERIAL.lock().await;
    let stale = run_through_a_restart(Outage::Brief).await;
    eprintln!("{stale} jobs went STALE across a brief restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_whose_leases_ran_out_during_an_outage_go_stale_and_resume_after_retry() {
    let _serial = SERIAL.lock().await;
    let stale = run_through_a_restart(Outage::PastTheLeases).await;
    assert!(
        stale >= 2,
        "the jobs running at the stop went STALE ({stale})"
    );
}
