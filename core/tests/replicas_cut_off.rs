//! Replicas that lose Redis or time, with real worker replicas (separate OS
//! processes, see `support/replica.rs`): one cut off from Redis by a TCP proxy
//! stops its step and its late writes are refused; one paused (SIGSTOP) past
//! its lease wakes up to refusals, starts no step of a swept job, and records
//! the abandoned attempt.
//!
//! Every wait is on an observable condition with a generous deadline. The
//! tests run one at a time (they are timing-sensitive: leases of 1 s renewed
//! every 250 ms).

mod support;

use std::time::{Duration, Instant};

use leasehold_core::redis;
use leasehold_core::{Error, JobId, JobState, Lease, Outcome, Queue, Renewal};
use leasehold_testkit::{wait_until_async, RedisServer, TcpProxy};
use serde_json::json;
use support::replica::*;
use support::{redis_now, settle_held};

// ---- 7. a replica cut off from Redis --------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_replica_stops_its_step_and_its_late_writes_are_refused() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start_tcp();
    let proxy = TcpProxy::start(
        format!("127.0.0.1:{}", srv.port().unwrap())
            .parse()
            .unwrap(),
    );
    let queue = client(&srv.url()).await;
    let mut w = Replica::worker(
        "cut-off",
        &proxy.url(),
        &[
            ("spans-url", &srv.url()),
            ("sweep-ms", "60000"),
            ("cancel-grace-ms", "2000"),
        ],
    );
    let w_id = w.ready().await;
    let id = enqueue(
        &queue,
        "cut",
        Some("shop-z"),
        json!({ "fetch": {"ms": 20}, "validate": {"ms": 20}, "load": {"ms": 20000} }),
    )
    .await;
    let load = wait_span(&queue, "load begins", |s| {
        s.job == id.as_str() && s.step == "load" && s.ev == "begin"
    })
    .await;
    let before = job(&queue, &id).await;
    assert_eq!(before.state, JobState::Running);
    let held = before.lease.clone().expect("a live lease");

    proxy.block();
    let worker_key = format!("{}:worker:{w_id}", queue.keys().base());
    wait_until_async(WAIT, "the job is swept STALE", || {
        let (queue, id) = (&queue, &id);
        async move {
            queue.sweep(100).await.expect("sweep");
            state(queue, id).await == JobState::Stale
        }
    })
    .await;
    let evs = events(&queue).await;
    let sweep = evs
        .iter()
        .rposition(|e| e.op == "sweep" && e.job == id.as_str())
        .expect("the sweep event");
    assert_eq!(
        (evs[sweep].from.as_str(), evs[sweep].to.as_str()),
        ("RUNNING", "STALE")
    );
    let sweep_id = evs[sweep].id.clone();

    // the replica saw it lost the lease and stopped the step early (its spans go straight to Redis)
    let end = wait_span(&queue, "the cut-off step ends", |s| {
        s.job == id.as_str() && s.step == "load" && s.ev == "end"
    })
    .await;
    assert_eq!(end.outcome, "cancelled", "{end:?}");
    assert_eq!(
        end.lease_valid,
        Some(false),
        "the step's own lease check says the lease ran out: {end:?}"
    );
    assert!(
        end.t - load.t < 15_000_000,
        "stopped well before its 20 s of work: {end:?}"
    );
    assert!(end.detail.contains("lease"), "{end:?}");
    let job_key = queue.keys().job(id.as_str());
    let snapshot = srv.dump(&job_key);
    assert!(!w.output().iter().any(|l| l.contains("panicked")));

    // reconnect: the replica registers itself again once the proxy lets it through
    wait_until_async(
        WAIT,
        "the replica's registration expired while cut off",
        || {
            let (queue, key) = (&queue, &worker_key);
            async move { query::<i64>(queue, redis::cmd("EXISTS").arg(key)).await == 0 }
        },
    )
    .await;
    proxy.unblock();
    wait_until_async(WAIT, "the replica reconnected", || {
        let (queue, key) = (&queue, &worker_key);
        async move { query::<i64>(queue, redis::cmd("EXISTS").arg(key)).await == 1 }
    })
    .await;

    // the zombie's own token is refused for every late write
    let zombie = Lease {
        job: id.clone(),
        token: held.token.clone(),
        fence: held.fence,
        attempt: 1,
        pipeline: "etl".into(),
        input: before.input.to_string(),
        resource: Some("shop-z".into()),
        last_step: None,
        last_output: None,
        ttl: Duration::from_secs(1),
        not_before: before.not_before,
        traceparent: None,
        started: false,
    };
    let refused = |r: &Result<_, Error>| {
        matches!(
            r,
            Err(e @ (Error::LeaseLost { state: JobState::Stale, .. } | Error::Refused { state: JobState::Stale, .. }))
                if e.is_lease_lost()
        )
    };
    let late = queue
        .checkpoint(&zombie, "load", "{\"rows\":1}", Some("aggregate"))
        .await
        .map(|_| ());
    assert!(refused(&late), "a late checkpoint: {late:?}");
    let late = queue.finish(&zombie, &Outcome::Succeeded).await.map(|_| ());
    assert!(refused(&late), "a late finish: {late:?}");
    let renewal = queue.renew(&[&zombie]).await.unwrap();
    assert_eq!(
        renewal,
        [Renewal::Lost {
            state: Some(JobState::Stale)
        }]
    );

    // a few heartbeats of the reconnected replica later, nothing of the job changed
    let mark = Instant::now();
    wait_until_async(WAIT, "a few heartbeats passed", || async move {
        mark.elapsed() > Duration::from_millis(750)
    })
    .await;
    assert_eq!(
        srv.dump(&job_key),
        snapshot,
        "the cut-off replica wrote nothing after the sweep"
    );
    let j = job(&queue, &id).await;
    assert_eq!(j.state, JobState::Stale);
    assert!(
        j.attempts.is_empty(),
        "no attempt record was written by the zombie: {j:?}"
    );
    assert_eq!(j.last_step.as_deref(), Some("validate"));
    let later: Vec<Event> = events(&queue)
        .await
        .into_iter()
        .filter(|e| e.id > sweep_id && (e.job == id.as_str() || e.by == w_id))
        .collect();
    assert!(later.is_empty(), "events after the sweep: {later:?}");
    let lock: Option<String> =
        query(&queue, redis::cmd("GET").arg(queue.keys().lock("shop-z"))).await;
    assert_eq!(
        lock.as_deref(),
        Some(id.as_str()),
        "the STALE job keeps its lock"
    );
    w.stop_cleanly(WAIT).await;
}

// ---- 7b. a replica paused past its lease -----------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_replica_wakes_up_to_refusals_and_writes_nothing() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let mut w = Replica::worker("paused", &srv.url(), &[("sweep-ms", "60000")]);
    let w_id = w.ready().await;
    let id = enqueue(
        &queue,
        "paused",
        Some("shop-p"),
        json!({ "fetch": {"ms": 20}, "validate": {"ms": 20}, "load": {"ms": 1500} }),
    )
    .await;
    let load = wait_span(&queue, "load begins", |s| {
        s.job == id.as_str() && s.step == "load" && s.ev == "begin"
    })
    .await;

    // a stop-the-world pause (GC, VM freeze): the process keeps its lease in memory
    w.signal(libc::SIGSTOP);
    wait_until_async(WAIT, "the job is swept STALE", || {
        let (queue, id) = (&queue, &id);
        async move {
            queue.sweep(100).await.expect("sweep");
            state(queue, id).await == JobState::Stale
        }
    })
    .await;
    let sweep_id = events_of(&queue, &id)
        .await
        .into_iter()
        .rfind(|e| e.op == "sweep")
        .expect("a sweep event")
        .id;
    let job_key = queue.keys().job(id.as_str());
    let snapshot = srv.dump(&job_key);
    // resume once the step's work is due, so it wakes up wanting to checkpoint
    let wall_us = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros() as u64
    };
    wait_until_async(WAIT, "the paused step's work is due", || async move {
        wall_us() > load.t + 1_600_000
    })
    .await;
    w.signal(libc::SIGCONT);

    // it is told the lease is gone (a renewal, a checkpoint), or it gives the
    // lease up by itself first: its local deadline passed during the pause
    wait_until_async(WAIT, "the paused replica learns its lease is gone", || {
        let out = w.output();
        async move {
            out.iter().any(|l| {
                ((l.contains("lease lost") || l.contains("lease is gone"))
                    && (l.contains("Stale") || l.contains("STALE")))
                    || l.contains("lease deadline passed without a confirmed renewal")
            })
        }
    })
    .await;
    wait_span(&queue, "the paused step ends", |s| {
        s.job == id.as_str() && s.step == "load" && s.ev == "end"
    })
    .await;
    w.stop_cleanly(WAIT).await;

    assert_eq!(
        srv.dump(&job_key),
        snapshot,
        "the paused replica wrote nothing after the sweep"
    );
    let j = job(&queue, &id).await;
    assert_eq!(j.state, JobState::Stale);
    assert!(j.attempts.is_empty(), "{j:?}");
    assert_eq!(j.last_step.as_deref(), Some("validate"));
    let later: Vec<Event> = events(&queue)
        .await
        .into_iter()
        .filter(|e| e.id > sweep_id && (e.job == id.as_str() || e.by == w_id))
        .collect();
    assert!(later.is_empty(), "events after the sweep: {later:?}");
    assert!(
        spans_of(&queue, &id)
            .await
            .iter()
            .all(|s| s.step != "aggregate"),
        "no step after the lost one started"
    );
}

/// A replica whose lease-and-start call is in flight when it is frozen
/// (SIGSTOP): the call is held in a stalled proxy until the replica is
/// stopped, then let through, so Redis leases and starts the job for a
/// replica that cannot run yet. Returns once the job is RUNNING under that
/// lease; the replica is still frozen.
async fn frozen_holding_a_started_lease(
    srv: &RedisServer,
    queue: &Queue,
    proxy: &TcpProxy,
) -> (Replica, JobId) {
    let mut w = Replica::worker(
        "frozen",
        &proxy.url(),
        &[
            ("spans-url", &srv.url()),
            // the replica's own sweeper stays out of it (the test sweeps)
            ("sweep-ms", "60000"),
            ("concurrency", "1"),
            // idle lease calls every 100 ms, slept between (no blocking wait)
            ("max-idle-ms", "100"),
        ],
    );
    w.ready().await;
    // hold one of the replica's idle lease calls (sent while no job is queued;
    // Redis runs it only when the proxy lets it through). A stall that caught a
    // call already on its way to Redis holds its reply instead, and the
    // replica's next call waits for it: let it go and try again.
    let started = Instant::now();
    loop {
        proxy.stall();
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut held = false;
        while !held && Instant::now() < deadline {
            held = settle_held(proxy);
            if !held {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        if held {
            break;
        }
        assert!(
            started.elapsed() < WAIT,
            "no lease call of the replica was held"
        );
        proxy.resume();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let id = enqueue(queue, "frozen", Some("shop-f"), quick_steps(20)).await;
    w.signal(libc::SIGSTOP);
    proxy.resume();
    wait_state(queue, &id, JobState::Running).await;
    let j = job(queue, &id).await;
    assert_eq!(j.attempt, 1);
    let spans = spans_of(queue, &id).await;
    assert!(spans.is_empty(), "nothing ran yet: {spans:?}");
    (w, id)
}

/// Waits until Redis's own deadline for the job's lease has passed.
async fn wait_past_lease_deadline(queue: &Queue, id: &JobId) {
    let deadline = job(queue, id).await.lease.expect("a live lease").deadline;
    wait_until_async(WAIT, "the lease's deadline passes", || async move {
        redis_now(queue).await > deadline + 50
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_woken_after_its_job_was_swept_starts_no_step() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start_tcp();
    let proxy = TcpProxy::start(
        format!("127.0.0.1:{}", srv.port().unwrap())
            .parse()
            .unwrap(),
    );
    let queue = client(&srv.url()).await;
    let (mut w, id) = frozen_holding_a_started_lease(&srv, &queue, &proxy).await;

    // the lease runs out while the replica is frozen, and the job is swept
    wait_past_lease_deadline(&queue, &id).await;
    wait_until_async(WAIT, "the job is swept STALE", || {
        let (queue, id) = (&queue, &id);
        async move {
            queue.sweep(100).await.expect("sweep");
            state(queue, id).await == JobState::Stale
        }
    })
    .await;
    let job_key = queue.keys().job(id.as_str());
    let snapshot = srv.dump(&job_key);
    w.signal(libc::SIGCONT);

    // it reads the lease reply only now, past the lease's local deadline
    wait_until_async(WAIT, "the woken replica gives the attempt up", || {
        let out = w.output();
        async move {
            out.iter()
                .any(|l| l.contains("abandoned before step fetch began"))
        }
    })
    .await;
    w.stop_cleanly(WAIT).await;
    assert!(
        spans_of(&queue, &id).await.is_empty(),
        "no step of the swept job began"
    );
    assert_eq!(
        srv.dump(&job_key),
        snapshot,
        "the woken replica wrote nothing"
    );
    assert_eq!(state(&queue, &id).await, JobState::Stale);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_woken_past_its_lease_deadline_records_the_abandoned_attempt() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start_tcp();
    let proxy = TcpProxy::start(
        format!("127.0.0.1:{}", srv.port().unwrap())
            .parse()
            .unwrap(),
    );
    let queue = client(&srv.url()).await;
    let (mut w, id) = frozen_holding_a_started_lease(&srv, &queue, &proxy).await;

    // past the lease's deadline, but nobody swept: Redis still holds the lease
    // for this attempt, so the replica's one try to record why lands
    wait_past_lease_deadline(&queue, &id).await;
    assert_eq!(state(&queue, &id).await, JobState::Running);
    w.signal(libc::SIGCONT);

    wait_state(&queue, &id, JobState::Succeeded).await;
    w.stop_cleanly(WAIT).await;
    let j = job(&queue, &id).await;
    assert_eq!(j.attempt, 2, "{j:?}");
    let first = &j.attempts[0];
    assert_eq!(first.n, 1);
    assert_eq!(first.state, JobState::Failed);
    let error = first.error.as_ref().expect("the abandoned attempt's error");
    assert_eq!(error.kind, "interrupted");
    assert!(
        error.message.contains("abandoned before step fetch began")
            && error.message.contains("no step ran"),
        "{error:?}"
    );
    // the new attempt's retry event says what happened: no worker shut down
    let events = leasehold_core::Inspector::new(queue.clone())
        .job_events(&id)
        .await
        .unwrap();
    let retry = events
        .iter()
        .find(|e| e.op == "retry")
        .expect("a retry event for the new attempt");
    assert!(
        retry.reason.contains("abandoned before step fetch began")
            && !retry.reason.contains("shut"),
        "{retry:?}"
    );
    let spans = spans_of(&queue, &id).await;
    assert!(
        spans.iter().all(|s| s.attempt == 2),
        "no step of the abandoned attempt began: {spans:?}"
    );
    assert_eq!(
        spans.iter().filter(|s| s.ev == "begin").count(),
        4,
        "the new attempt ran every step: {spans:?}"
    );
    assert!(
        spans
            .iter()
            .filter(|s| s.ev == "end")
            .all(|s| s.lease_valid == Some(true)),
        "every step of the new attempt saw its lease valid: {spans:?}"
    );
}
