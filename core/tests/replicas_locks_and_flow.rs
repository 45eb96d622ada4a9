//! Resource locks and flow control across real worker replicas (separate OS
//! processes, see `support/replica.rs`): jobs on one resource never overlap,
//! a resource limit of three overlaps exactly three, a killed holder frees its
//! slot at lease expiry, pause and resume, limits and pauses across a Redis
//! restart, and a rate held over thirty seconds.
//!
//! Every wait is on an observable condition with a generous deadline. The
//! tests run one at a time (they are timing-sensitive: leases of 1 s renewed
//! every 250 ms).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use leasehold_core::redis;
use leasehold_core::{FlowSpec, JobId, JobState, NewJob, PauseScope, Queue};
use leasehold_testkit::RedisServer;
use serde_json::{json, Value};
use support::redis_now;
use support::replica::*;

// ---- 5. resource locks across replicas ------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_on_one_resource_never_overlap_across_replicas() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let mut a = Replica::worker("replica-a", &srv.url(), &[]);
    let mut b = Replica::worker("replica-b", &srv.url(), &[]);
    a.ready().await;
    b.ready().await;

    let inputs: Vec<NewJob> = (0..12)
        .map(|i| {
            let resource = format!("res-{}", i % 3);
            let input =
                json!({ "label": format!("j{i}"), "resource": resource, "steps": quick_steps(60) });
            NewJob::new("etl", &input)
                .unwrap()
                .resource(resource)
                .max_attempts(3)
        })
        .collect();
    let ids: Vec<JobId> = queue
        .enqueue_bulk(inputs)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    wait_all(&queue, &ids, JobState::Succeeded).await;

    // each job's interval: from its first step's start to its last step's end
    let sp = spans(&queue).await;
    let mut intervals: BTreeMap<String, (String, u64, u64)> = BTreeMap::new();
    for s in &sp {
        let res = s.resource.clone().expect("every job has a resource");
        let e = intervals.entry(s.job.clone()).or_insert((res, u64::MAX, 0));
        let (from, to) = if s.ev == "begin" {
            (s.t, s.t)
        } else {
            (s.begin, s.t)
        };
        e.1 = e.1.min(from);
        e.2 = e.2.max(to);
    }
    assert_eq!(intervals.len(), 12);
    let list: Vec<(&String, &(String, u64, u64))> = intervals.iter().collect();
    let mut cross_overlaps = 0;
    for (i, (ja, (ra, a0, a1))) in list.iter().enumerate() {
        for (jb, (rb, b0, b1)) in &list[i + 1..] {
            let overlap = a0 < b1 && b0 < a1;
            if ra == rb {
                assert!(
                    !overlap,
                    "{ja} and {jb} both held {ra} at once: {a0}..{a1} vs {b0}..{b1}"
                );
            } else if overlap {
                cross_overlaps += 1;
            }
        }
    }
    assert!(
        cross_overlaps > 0,
        "jobs on different resources ran in parallel"
    );
    for r in 0..3 {
        let exists: i64 = query(
            &queue,
            redis::cmd("EXISTS").arg(queue.keys().lock(&format!("res-{r}"))),
        )
        .await;
        assert_eq!(exists, 0);
    }
    let parked: i64 = query(
        &queue,
        redis::cmd("SCARD").arg(queue.keys().parked_resources()),
    )
    .await;
    assert_eq!(parked, 0);
    a.stop_cleanly(WAIT).await;
    b.stop_cleanly(WAIT).await;
}

// ---- 7. flow control across replicas ------------------------------------------------------

/// An `etl` job under `flow` (the gates `job_for` and the enqueue contract compute).
async fn enqueue_flowed(
    queue: &Queue,
    label: &str,
    resource: Option<&str>,
    steps: Value,
    flow: &FlowSpec,
) -> JobId {
    let input = json!({ "label": label, "resource": resource, "steps": steps });
    let (resource, gates) = flow.gates("etl", resource, None).expect("gates");
    let mut new = NewJob::new("etl", &input)
        .unwrap()
        .max_attempts(3)
        .flow(gates);
    if let Some(r) = resource {
        new = new.resource(r);
    }
    queue.enqueue(new).await.expect("enqueue").id
}

/// Each job's interval (first step's begin to last step's end, wall-clock µs) by job.
fn job_intervals(sp: &[Span]) -> BTreeMap<String, (u64, u64)> {
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for s in sp {
        let e = out.entry(s.job.clone()).or_insert((u64::MAX, 0));
        let (from, to) = if s.ev == "begin" {
            (s.t, s.t)
        } else {
            (s.begin, s.t)
        };
        e.0 = e.0.min(from);
        e.1 = e.1.max(to);
    }
    out
}

/// The most intervals open at once.
fn max_overlap<'a>(intervals: impl Iterator<Item = &'a (u64, u64)>) -> usize {
    let mut edges: Vec<(u64, i32)> = Vec::new();
    for (a, b) in intervals {
        edges.push((*a, 1));
        edges.push((*b, -1));
    }
    // an end and a begin at the same instant do not overlap
    edges.sort();
    let (mut open, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        open += d;
        most = most.max(open);
    }
    most as usize
}

fn resource_limit(n: u32) -> FlowSpec {
    FlowSpec {
        resource_limit: Some(n),
        ..FlowSpec::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_replicas_under_a_resource_limit_of_three_overlap_exactly_three() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let mut replicas: Vec<Replica> = (0..4)
        .map(|i| {
            Replica::worker(
                &format!("replica-{i}"),
                &srv.url(),
                &[("concurrency", "3"), ("resource-limit", "3")],
            )
        })
        .collect();
    for r in &mut replicas {
        r.ready().await;
    }
    let mut ids = Vec::new();
    for i in 0..18 {
        ids.push(
            enqueue_flowed(
                &queue,
                &format!("j{i}"),
                Some("wh"),
                quick_steps(40),
                &resource_limit(3),
            )
            .await,
        );
    }
    // a job on another resource is not held back by wh's limit
    let other = enqueue_flowed(
        &queue,
        "other",
        Some("wh-2"),
        quick_steps(40),
        &resource_limit(3),
    )
    .await;
    ids.push(other.clone());
    wait_all(&queue, &ids, JobState::Succeeded).await;
    let sp = spans(&queue).await;
    let intervals = job_intervals(&sp);
    let on_wh: Vec<&(u64, u64)> = intervals
        .iter()
        .filter(|(j, _)| **j != other.as_str())
        .map(|(_, i)| i)
        .collect();
    assert_eq!(on_wh.len(), 18);
    assert_eq!(
        max_overlap(on_wh.into_iter()),
        3,
        "at most three jobs hold wh at once, and three do"
    );
    let by_replica: BTreeSet<&str> = sp.iter().map(|s| s.label.as_str()).collect();
    assert!(
        by_replica.len() >= 2,
        "the work spread over replicas: {by_replica:?}"
    );
    let base = queue.keys().base().to_owned();
    let holders: i64 = query(&queue, redis::cmd("ZCARD").arg(format!("{base}:slots:wh"))).await;
    assert_eq!(holders, 0, "every slot was given back");
    let lock: i64 = query(&queue, redis::cmd("EXISTS").arg(queue.keys().lock("wh"))).await;
    assert_eq!(lock, 0, "a limit above 1 takes no lock");
    for r in &mut replicas {
        r.stop_cleanly(WAIT).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_holder_frees_its_slot_at_lease_expiry() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let limit = resource_limit(2);
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(
            enqueue_flowed(
                &queue,
                &format!("j{i}"),
                Some("wh"),
                quick_steps(20),
                &limit,
            )
            .await,
        );
    }
    // a replica leases both slots and dies before starting either
    let mut dead = Replica::spawn(
        "lease-only",
        "lease-only",
        &[
            ("url", srv.url()),
            ("lease-count", "2".into()),
            ("lease-ttl-ms", "1000".into()),
        ],
    );
    dead.ready().await;
    let base = queue.keys().base().to_owned();
    let holders: i64 = query(&queue, redis::cmd("ZCARD").arg(format!("{base}:slots:wh"))).await;
    assert_eq!(holders, 2);
    dead.kill9();
    let killed_at = redis_now(&queue).await;
    let mut b = Replica::worker("replica-b", &srv.url(), &[("resource-limit", "2")]);
    b.ready().await;
    wait_all(&queue, &ids, JobState::Succeeded).await;
    // the third job could only start once a dead holder's lease ran out (1 s)
    let first_start = spans(&queue)
        .await
        .iter()
        .filter(|s| s.ev == "begin")
        .map(|s| s.t / 1000)
        .min()
        .unwrap() as i64;
    assert!(
        first_start >= killed_at,
        "nothing ran before the dead replica's leases expired"
    );
    let sweeps = events(&queue)
        .await
        .into_iter()
        .filter(|e| e.op == "sweep" && e.to == "QUEUED")
        .count();
    assert_eq!(sweeps, 2, "both dead leases were swept back to QUEUED");
    assert!(max_overlap(job_intervals(&spans(&queue).await).values()) <= 2);
    b.stop_cleanly(WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_lets_running_jobs_finish_and_leases_nothing_until_resume() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let mut a = Replica::worker("replica-a", &srv.url(), &[("concurrency", "2")]);
    let worker_id = a.ready().await;
    let mut ids = Vec::new();
    for i in 0..6 {
        ids.push(enqueue(&queue, &format!("j{i}"), None, quick_steps(150)).await);
    }
    wait_span(&queue, "two jobs are running", |s| s.ev == "begin").await;
    let scope = PauseScope::Pipeline("etl".into());
    queue.pause(&scope, "ops", "test").await.unwrap();
    let running: Vec<JobId> = wait_for("two jobs leased", || {
        let queue = &queue;
        let ids = &ids;
        async move {
            let mut held = Vec::new();
            for id in ids {
                if matches!(state(queue, id).await, JobState::Leased | JobState::Running) {
                    held.push(id.clone());
                }
            }
            (!held.is_empty()).then_some(held)
        }
    })
    .await;
    // the jobs running when the pause came finish
    wait_all(&queue, &running, JobState::Succeeded).await;
    // the worker has free slots and holds nothing: it is the pause that holds the rest
    let key = queue.keys().worker(&worker_id);
    wait_for("the worker reports no job held", || {
        let (queue, key) = (&queue, &key);
        async move {
            let reg: Option<String> = query(queue, redis::cmd("GET").arg(key)).await;
            let reg: Value = serde_json::from_str(&reg?).ok()?;
            (reg["active"] == 0).then_some(())
        }
    })
    .await;
    let rest: Vec<JobId> = ids
        .iter()
        .filter(|i| !running.contains(i))
        .cloned()
        .collect();
    assert!(!rest.is_empty());
    for id in &rest {
        assert_eq!(
            state(&queue, id).await,
            JobState::Queued,
            "{id} waits while paused"
        );
        assert!(spans_of(&queue, id).await.is_empty(), "{id} never started");
    }
    let pauses = queue.pauses().await.unwrap();
    assert_eq!(pauses[0].scope, scope);
    queue.resume(&scope, "ops", "test over").await.unwrap();
    wait_all(&queue, &ids, JobState::Succeeded).await;
    let ops: Vec<String> = events(&queue)
        .await
        .into_iter()
        .filter(|e| e.op == "pause" || e.op == "resume")
        .map(|e| e.op)
        .collect();
    assert_eq!(ops, ["pause", "resume"]);
    a.stop_cleanly(WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_and_pauses_survive_a_redis_restart_with_aof() {
    let _serial = SERIAL.lock().await;
    let mut srv = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let queue = client(&srv.url()).await;
    let limit = resource_limit(2);
    let mut ids = Vec::new();
    for i in 0..8 {
        ids.push(
            enqueue_flowed(
                &queue,
                &format!("j{i}"),
                Some("wh"),
                quick_steps(100),
                &limit,
            )
            .await,
        );
    }
    // a paused pipeline stays paused through the restart
    let scope = PauseScope::Pipeline("etl".into());
    queue.pause(&scope, "ops", "before restart").await.unwrap();
    tokio::task::block_in_place(|| srv.stop());
    tokio::task::block_in_place(|| srv.restart());
    // a client of its own after the restart (the old one's connection broke)
    let queue = client(&srv.url()).await;
    assert_eq!(queue.pauses().await.unwrap().len(), 1);
    let mut a = Replica::worker("replica-a", &srv.url(), &[("resource-limit", "2")]);
    let mut b = Replica::worker("replica-b", &srv.url(), &[("resource-limit", "2")]);
    a.ready().await;
    b.ready().await;
    let leased = queue
        .lease("probe", &["etl"], 8, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(leased.leases.is_empty(), "paused after the restart");
    queue.resume(&scope, "ops", "go").await.unwrap();
    // mid-run: both slots held, then Redis restarts under the replicas
    let base = queue.keys().base().to_owned();
    wait_for("both slots are held", || {
        let (queue, base) = (&queue, &base);
        async move {
            let n: i64 = query(queue, redis::cmd("ZCARD").arg(format!("{base}:slots:wh"))).await;
            (n == 2).then_some(())
        }
    })
    .await;
    tokio::task::block_in_place(|| srv.stop());
    tokio::task::block_in_place(|| srv.restart());
    let queue = client(&srv.url()).await;
    let holders: i64 = query(&queue, redis::cmd("ZCARD").arg(format!("{base}:slots:wh"))).await;
    assert!(
        holders <= 2,
        "the holders came back with the data: {holders}"
    );
    wait_all(&queue, &ids, JobState::Succeeded).await;
    assert!(
        max_overlap(job_intervals(&spans(&queue).await).values()) <= 2,
        "the limit held through the restart"
    );
    a.stop_cleanly(WAIT).await;
    b.stop_cleanly(WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_of_ten_per_second_holds_over_thirty_seconds_and_is_reached() {
    let _serial = SERIAL.lock().await;
    let srv = RedisServer::start();
    let queue = client(&srv.url()).await;
    let flow = FlowSpec {
        rate: Some("10/s".into()),
        ..FlowSpec::default()
    };
    let jobs: Vec<NewJob> = (0..320)
        .map(|i| {
            let input = json!({ "label": format!("r{i}"), "steps": {} });
            let (_, gates) = flow.gates("etl", None, None).unwrap();
            NewJob::new("etl", &input).unwrap().flow(gates)
        })
        .collect();
    let ids: Vec<JobId> = queue
        .enqueue_bulk(jobs)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    let mut replicas: Vec<Replica> = (0..2)
        .map(|i| Replica::worker(&format!("replica-{i}"), &srv.url(), &[("rate", "10/s")]))
        .collect();
    for r in &mut replicas {
        r.ready().await;
    }
    // 30 s of starts, measured on Redis's clock (each job's leased_at)
    let started = Instant::now();
    loop {
        let done: u64 = query(&queue, redis::cmd("ZCARD").arg(queue.keys().done())).await;
        if done >= 301 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "only {done} done after 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut leased_at = Vec::new();
    for id in &ids {
        let t: Option<i64> = query(
            &queue,
            redis::cmd("HGET")
                .arg(queue.keys().job(id.as_str()))
                .arg("leased_at"),
        )
        .await;
        leased_at.extend(t);
    }
    leased_at.sort();
    let t0 = leased_at[0];
    for (i, t) in leased_at.iter().enumerate() {
        let in_window = leased_at[i..].iter().take_while(|u| **u < t + 1000).count();
        assert!(in_window <= 10, "{in_window} starts in the second from {t}");
    }
    let in_30s = leased_at.iter().filter(|t| **t < t0 + 30_000).count();
    let busiest = (0..leased_at.len())
        .map(|i| {
            leased_at[i..]
                .iter()
                .take_while(|u| **u < leased_at[i] + 1000)
                .count()
        })
        .max()
        .unwrap_or(0);
    eprintln!("rate 10/s: {in_30s} starts in the first 30 s, at most {busiest} in any 1 s window");
    assert!(
        in_30s >= 270,
        "{in_30s} starts in 30 s: at least 9 per second"
    );
    for r in &mut replicas {
        r.stop_cleanly(WAIT).await;
    }
}
