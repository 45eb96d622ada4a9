//! Flow control enforced by the lease script (resource limits, max_running,
//! rate limits, pauses, fair hand-off), against a real private `redis-server`
//! per test, driven through `Queue` calls so each step is observable.

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold::flow::{FlowSpec, PauseChange, PauseScope};
use leasehold::lease::{Lease, Outcome};
use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};
use leasehold::queue::{job_for, Client, JobId, JobState, NewJob, Queue, QueueConfig};
use leasehold::worker::Worker;
use leasehold::{schemars, JsonSchema};
use leasehold_testkit::RedisServer;
use support::{connect, events, force_expire, get, job, zmembers, zscore, TTL};

/// A job of `p` under `flow` (what `job_for` and the enqueue contract build).
fn flowed(p: &str, n: u64, flow: &FlowSpec, resource: Option<&str>) -> NewJob {
    let (resource, gates) = flow.gates(p, resource, None).expect("gates");
    let mut j = job(p, n).flow(gates);
    if let Some(r) = resource {
        j = j.resource(r);
    }
    j
}

fn limit(n: u32) -> FlowSpec {
    FlowSpec {
        resource_limit: Some(n),
        ..FlowSpec::default()
    }
}

async fn enqueue_all(q: &Queue, jobs: Vec<NewJob>) -> Vec<JobId> {
    q.enqueue_bulk(jobs)
        .await
        .expect("enqueue")
        .into_iter()
        .map(|e| e.id)
        .collect()
}

async fn lease(q: &Queue, worker: &str, n: usize) -> Vec<Lease> {
    q.lease(worker, &["p"], n, TTL).await.expect("lease").leases
}

async fn done(q: &Queue, l: &Lease) {
    let _ = q.start(l, "s").await.expect("start");
    q.finish(l, &Outcome::Succeeded).await.expect("finish");
}

#[tokio::test]
async fn a_resource_limit_of_three_admits_three_and_hands_each_freed_slot_to_the_next_waiter() {
    let srv = RedisServer::start();
    let q = connect(&srv, "slots").await;
    let base = q.keys().base().to_owned();
    let ids = enqueue_all(
        &q,
        (0..6)
            .map(|i| flowed("p", i, &limit(3), Some("wh")))
            .collect(),
    )
    .await;
    let leased = q.lease("w1", &["p"], 10, TTL).await.unwrap();
    let held: Vec<&JobId> = leased.leases.iter().map(|l| &l.job).collect();
    assert_eq!(
        held,
        [&ids[0], &ids[1], &ids[2]],
        "the three oldest hold the slots"
    );
    assert_eq!(leased.waits.resource_limit, 3);
    assert_eq!(leased.parked, 0, "a limit above 1 takes no lock");
    assert_eq!(get::<i64>(&srv, &["EXISTS", &q.keys().lock("wh")]), 0);
    assert_eq!(get::<u64>(&srv, &["ZCARD", &format!("{base}:slots:wh")]), 3);
    let waiting = format!("{base}:waiting:slots:wh");
    assert_eq!(
        zmembers(&srv, &waiting),
        [ids[3].as_str(), ids[4].as_str(), ids[5].as_str()]
    );
    let why: String = get(&srv, &["HGET", &q.keys().job(ids[3].as_str()), "waiting"]);
    assert_eq!(why, "slots wh 3/3");
    // a second worker finds nothing to take, and moves nothing
    assert!(lease(&q, "w2", 10).await.is_empty());

    // one holder ends: exactly one waiter (the oldest) goes back to ready
    done(&q, &leased.leases[1]).await;
    assert_eq!(zmembers(&srv, &q.keys().ready("p")), [ids[3].as_str()]);
    assert_eq!(zmembers(&srv, &waiting), [ids[4].as_str(), ids[5].as_str()]);
    let next = lease(&q, "w2", 10).await;
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].job, ids[3]);
    let job = q.job(&ids[3]).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Leased);
    assert_eq!(
        get::<Option<String>>(&srv, &["HGET", &q.keys().job(ids[3].as_str()), "waiting"]),
        None,
        "the reason it waited is gone once it runs"
    );
}

#[tokio::test]
async fn a_limit_of_one_is_the_plain_lock_with_its_key_layout() {
    let srv = RedisServer::start();
    let q = connect(&srv, "one").await;
    let a = q
        .enqueue(flowed("p", 1, &limit(1), Some("r")))
        .await
        .unwrap()
        .id;
    let b = q
        .enqueue(flowed("p", 2, &limit(1), Some("r")))
        .await
        .unwrap()
        .id;
    let leased = lease(&q, "w", 10).await;
    assert_eq!(leased.len(), 1);
    assert_eq!(
        get::<Option<String>>(&srv, &["GET", &q.keys().lock("r")]).as_deref(),
        Some(a.as_str())
    );
    assert_eq!(zmembers(&srv, &q.keys().parked("r")), [b.as_str()]);
    assert_eq!(
        get::<Option<String>>(&srv, &["HGET", &q.keys().job(a.as_str()), "flow"]),
        None,
        "no flow field: nothing but the lock"
    );
}

#[tokio::test]
async fn max_running_counts_every_worker_of_the_pipeline() {
    let srv = RedisServer::start();
    let q = connect(&srv, "maxrun").await;
    let flow = FlowSpec {
        max_running: Some(2),
        ..FlowSpec::default()
    };
    let ids = enqueue_all(&q, (0..5).map(|i| flowed("p", i, &flow, None)).collect()).await;
    let a = q.lease("w1", &["p"], 1, TTL).await.unwrap();
    let b = q.lease("w2", &["p"], 10, TTL).await.unwrap();
    assert_eq!(a.leases.len() + b.leases.len(), 2);
    assert_eq!(b.waits.max_running, 3);
    let why: String = get(&srv, &["HGET", &q.keys().job(ids[2].as_str()), "waiting"]);
    assert_eq!(why, "running p 2/2");
    // a retry (finish → QUEUED) frees the slot too
    done(&q, &a.leases[0]).await;
    let c = lease(&q, "w3", 10).await;
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].job, ids[2]);
}

#[tokio::test]
async fn a_rate_limit_gives_each_waiting_job_its_exact_start_time_once() {
    let srv = RedisServer::start();
    let q = connect(&srv, "rate").await;
    let flow = FlowSpec {
        rate: Some("10/s".into()),
        ..FlowSpec::default()
    };
    let ids = enqueue_all(&q, (0..5).map(|i| flowed("p", i, &flow, None)).collect()).await;
    let first = q.lease("w", &["p"], 10, TTL).await.unwrap();
    assert_eq!(first.leases.len(), 1);
    assert_eq!(first.waits.rate, 4);
    let t0 = first.now;
    // each later job is delayed to its own start time, 100 ms apart: set aside, not re-polled
    for (k, id) in ids[1..].iter().enumerate() {
        let at = zscore(&srv, &q.keys().delayed("p"), id.as_str()).expect("delayed") as i64;
        assert_eq!(at, t0 + 100 * (k as i64 + 1), "job {k}");
    }
    assert_eq!(first.next_due, Some(t0 + 100));
    // an early lease call takes nothing and changes no start time
    let early = q.lease("w", &["p"], 10, TTL).await.unwrap();
    if early.now < t0 + 100 {
        assert!(early.leases.is_empty());
        assert_eq!(early.waits.rate, 0, "nothing was looked at again");
    }
    // they start in order, each at (or after) its time
    let mut started = vec![(first.leases[0].job.clone(), first.now)];
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while started.len() < 5 && std::time::Instant::now() < deadline {
        let l = q.lease("w", &["p"], 10, TTL).await.unwrap();
        for lease in &l.leases {
            started.push((lease.job.clone(), l.now));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let order: Vec<&JobId> = started.iter().map(|(j, _)| j).collect();
    assert_eq!(order, ids.iter().collect::<Vec<_>>());
    for w in started.windows(2) {
        assert!(
            w[1].1 - w[0].1 >= 100,
            "starts {} ms apart",
            w[1].1 - w[0].1
        );
    }
}

#[tokio::test]
async fn a_paused_pipeline_leases_nothing_until_resumed_and_both_are_events() {
    let srv = RedisServer::start();
    let q = connect(&srv, "pause").await;
    let ids = enqueue_all(&q, (0..3).map(|i| job("p", i)).collect()).await;
    let running = lease(&q, "w", 1).await;
    assert_eq!(running.len(), 1);
    let scope = PauseScope::Pipeline("p".into());
    assert_eq!(
        q.pause(&scope, "ops", "warehouse maintenance")
            .await
            .unwrap(),
        PauseChange::Paused
    );
    assert_eq!(
        q.pause(&scope, "ops", "again").await.unwrap(),
        PauseChange::AlreadyPaused
    );
    let none = q.lease("w", &["p"], 10, TTL).await.unwrap();
    assert!(none.leases.is_empty());
    assert_eq!(none.waits.paused, 1);
    // the jobs stay ready, in order, behind the marker; the running one goes on
    let ready = zmembers(&srv, &q.keys().ready("p"));
    assert_eq!(ready, ["{paused}", ids[1].as_str(), ids[2].as_str()]);
    done(&q, &running[0]).await;
    let pauses = q.pauses().await.unwrap();
    assert_eq!(pauses.len(), 1);
    assert_eq!(pauses[0].scope, scope);
    assert_eq!(pauses[0].by, "ops");
    assert!(pauses[0].since > 0);

    // a queue pause holds every pipeline, a pipeline resume does not lift it
    q.pause(&PauseScope::Queue, "ops", "freeze").await.unwrap();
    q.resume(&scope, "ops", "done").await.unwrap();
    assert!(lease(&q, "w", 10).await.is_empty());
    assert_eq!(
        q.resume(&PauseScope::Queue, "ops", "thaw").await.unwrap(),
        PauseChange::Resumed
    );
    assert_eq!(lease(&q, "w", 10).await.len(), 2);
    assert!(q.pauses().await.unwrap().is_empty());
    let ops: Vec<String> = events(&srv, &q)
        .into_iter()
        .filter(|e| e["op"] == "pause" || e["op"] == "resume")
        .map(|e| format!("{} {}", e["op"], e["job"]))
        .collect();
    assert_eq!(
        ops,
        [
            "pause pipeline:p",
            "pause queue:pause",
            "resume pipeline:p",
            "resume queue:pause"
        ]
    );
}

#[tokio::test]
async fn a_holder_whose_lease_expired_frees_its_slot_and_a_stale_one_keeps_it_until_resolved() {
    let srv = RedisServer::start();
    let q = connect(&srv, "expiry").await;
    let base = q.keys().base().to_owned();
    let ids = enqueue_all(
        &q,
        (0..4)
            .map(|i| flowed("p", i, &limit(2), Some("wh")))
            .collect(),
    )
    .await;
    let held = lease(&q, "dead", 10).await;
    assert_eq!(held.len(), 2);
    // holder 0 never started (LEASED), holder 1 was running: both die
    let _ = q.start(&held[1], "s").await.unwrap();
    force_expire(&srv, &q, &held[0].job);
    force_expire(&srv, &q, &held[1].job);
    let report = q.sweep(100).await.unwrap();
    assert_eq!(report.moves.len(), 2);
    // the LEASED one went back to QUEUED and freed its slot; the waiter got it
    let slots = format!("{base}:slots:wh");
    assert_eq!(
        zscore(&srv, &slots, ids[1].as_str()),
        Some(1.0),
        "STALE keeps its slot"
    );
    assert_eq!(zscore(&srv, &slots, ids[0].as_str()), None);
    let next = lease(&q, "w", 10).await;
    assert_eq!(
        next.len(),
        1,
        "one slot free, the other held by the STALE job"
    );
    assert!(lease(&q, "w", 10).await.is_empty());
    // the operator resolves the STALE job: its slot goes to the next waiter
    q.resolve(&ids[1], JobState::Failed, "ops", "checked the warehouse")
        .await
        .unwrap();
    assert_eq!(zscore(&srv, &slots, ids[1].as_str()), None);
    assert_eq!(lease(&q, "w", 10).await.len(), 1);
}

#[tokio::test]
async fn a_cancelled_waiter_leaves_its_waiting_set_and_a_slot_is_never_stranded() {
    let srv = RedisServer::start();
    let q = connect(&srv, "strand").await;
    let base = q.keys().base().to_owned();
    let ids = enqueue_all(
        &q,
        (0..4)
            .map(|i| flowed("p", i, &limit(2), Some("wh")))
            .collect(),
    )
    .await;
    let held = lease(&q, "w", 10).await;
    q.cancel(&ids[3], "not needed", "ops").await.unwrap();
    let waiting = format!("{base}:waiting:slots:wh");
    assert_eq!(zmembers(&srv, &waiting), [ids[2].as_str()]);
    // the waiter handed the slot is cancelled before a worker leases it:
    // the sweeper hands the free slot on (here: nobody is left)
    done(&q, &held[0]).await;
    q.cancel(&ids[2], "not needed either", "ops").await.unwrap();
    let sweep = q.sweep(100).await.unwrap();
    assert_eq!(sweep.unparked, 0);
    assert_eq!(get::<u64>(&srv, &["SCARD", &format!("{base}:waiting")]), 0);
}

#[tokio::test]
async fn jobs_without_flow_control_write_no_flow_keys() {
    let srv = RedisServer::start();
    let q = connect(&srv, "plain").await;
    let ids = enqueue_all(&q, (0..3).map(|i| job("p", i).resource("r")).collect()).await;
    for _ in 0..3 {
        for l in lease(&q, "w", 10).await {
            done(&q, &l).await;
        }
    }
    for id in &ids {
        assert_eq!(q.job(id).await.unwrap().unwrap().state, JobState::Succeeded);
        assert_eq!(
            get::<Option<String>>(&srv, &["HGET", &q.keys().job(id.as_str()), "flow"]),
            None
        );
    }
    let base = q.keys().base();
    for kind in ["slots", "running", "rate", "waiting", "limits", "paused"] {
        let keys: Vec<String> = get(&srv, &["KEYS", &format!("{base}:{kind}*")]);
        assert!(keys.is_empty(), "{kind}: {keys:?}");
    }
}

// ---- declared in #[pipeline], run by a worker ------------------------------------

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, JsonSchema)]
struct Call {
    shop: String,
    i: u32,
}

/// Three calls to a shop's API per job, each taking a token of the shop's
/// limiter (the same limiter rate-limits the job starts).
struct ShopCalls {
    times: Arc<Mutex<Vec<(String, Instant)>>>,
}

#[pipeline(
    queue = "shops",
    rate = "20/s",
    limiter = "shop-api:{shop}",
    max_running = 4
)]
impl ShopCalls {
    #[step]
    async fn call(&self, ctx: &StepContext, input: &Call) -> Result<(), StepError> {
        for _ in 0..3 {
            ctx.limit(&format!("shop-api:{}", input.shop))
                .acquire(1)
                .await
                .map_err(StepError::retryable)?;
            self.times
                .lock()
                .unwrap()
                .push((input.shop.clone(), Instant::now()));
        }
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_flow_control_reaches_the_jobs_and_a_step_shares_its_limiter() {
    let srv = RedisServer::start();
    let client = Client::connect(&srv.url(), QueueConfig::default())
        .await
        .unwrap();
    let job = job_for::<ShopCalls>(&Call {
        shop: "acme".into(),
        i: 0,
    })
    .unwrap();
    assert_eq!(
        job.flow.as_deref(),
        Some("running:4:shop_calls rate:50:shop-api:acme")
    );
    let times = Arc::new(Mutex::new(Vec::new()));
    let worker = Worker::builder(srv.url())
        .pipeline(ShopCalls {
            times: times.clone(),
        })
        .concurrency(4)
        .build()
        .await
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    let mut ids = Vec::new();
    for i in 0..4 {
        for shop in ["acme", "zeta"] {
            ids.push(
                client
                    .enqueue::<ShopCalls>(&Call {
                        shop: shop.into(),
                        i,
                    })
                    .await
                    .unwrap()
                    .id,
            );
        }
    }
    let q = client.queue("shops").unwrap();
    leasehold_testkit::wait_until_async(Duration::from_secs(30), "every job succeeded", || {
        let (q, ids) = (&q, &ids);
        async move {
            for id in ids {
                if q.job(id).await.ok().flatten().map(|j| j.state) != Some(JobState::Succeeded) {
                    return false;
                }
            }
            true
        }
    })
    .await;
    let _ = stop.send(());
    run.await.unwrap().unwrap();
    // per shop, starts and in-step calls share one limiter: 50 ms apart at least
    // (4 starts + 12 calls per shop), while the two shops ran side by side
    let times = times.lock().unwrap().clone();
    for shop in ["acme", "zeta"] {
        let mine: Vec<Instant> = times
            .iter()
            .filter(|(s, _)| s == shop)
            .map(|(_, t)| *t)
            .collect();
        assert_eq!(mine.len(), 12);
        let span = *mine.last().unwrap() - mine[0];
        assert!(
            span >= Duration::from_millis(50 * 11 - 20),
            "{shop}: 12 calls in {span:?}"
        );
    }
}

#[tokio::test]
async fn a_sweep_that_requeues_a_holder_hands_its_resource_on_once() {
    let srv = RedisServer::start();
    let q = connect(&srv, "handonce").await;
    let ids = enqueue_all(&q, (0..3).map(|i| job("p", i).resource("r")).collect()).await;
    let held = lease(&q, "w", 10).await;
    assert_eq!(held.len(), 1);
    force_expire(&srv, &q, &ids[0]);
    let report = q.sweep(100).await.unwrap();
    assert_eq!(report.requeued, 1);
    assert_eq!(
        report.unparked, 0,
        "the release handed it on; the pass over parked did not again"
    );
    assert_eq!(
        zmembers(&srv, &q.keys().ready("p")),
        [ids[0].as_str(), ids[1].as_str()]
    );
    assert_eq!(zmembers(&srv, &q.keys().parked("r")), [ids[2].as_str()]);
}

/// A STALE job keeps its flow-control slot and its resource lock until an
/// operator decides; `status` says which pipelines it stalls and what it
/// holds, so a pipeline never stalls silently behind it.
#[tokio::test]
async fn status_names_the_stale_job_that_stalls_a_pipeline_and_what_it_holds() {
    let srv = RedisServer::start();
    let q = connect(&srv, "stalls").await;
    // the two slots of resource wh (limit 2) held by jobs gone STALE, a third job waiting
    let ids = enqueue_all(
        &q,
        (0..3)
            .map(|i| flowed("p", i, &limit(2), Some("wh")))
            .collect(),
    )
    .await;
    let held = lease(&q, "w1", 10).await;
    assert_eq!(held.len(), 2);
    for l in &held {
        let _ = q.start(l, "s").await.expect("start");
        force_expire(&srv, &q, &l.job);
    }
    q.sweep(10).await.expect("sweep");
    assert_eq!(
        q.job(&ids[0]).await.unwrap().unwrap().state,
        JobState::Stale
    );
    // a plain lock of resource shop:a, with a job of pipeline other parked on it
    let locked = q.enqueue(job("p", 10).resource("shop:a")).await.unwrap().id;
    let l = lease(&q, "w2", 1).await;
    assert_eq!(l[0].job, locked);
    let _ = q.start(&l[0], "s").await.expect("start");
    force_expire(&srv, &q, &locked);
    q.sweep(10).await.expect("sweep");
    for n in 0..3 {
        q.enqueue(job("other", 20 + n).resource("shop:a"))
            .await
            .unwrap();
    }
    let none = q.lease("w3", &["other"], 3, TTL).await.unwrap();
    assert!(none.leases.is_empty() && none.parked == 3, "{none:?}");

    let status = leasehold::inspect::Inspector::new(q.clone())
        .status()
        .await
        .expect("status");
    let of = |id: &JobId| {
        status
            .stale
            .iter()
            .find(|s| s.job.id == *id)
            .unwrap_or_else(|| panic!("{id} not listed STALE: {:?}", status.stale))
    };
    let slot = of(&ids[0]);
    assert!(
        slot.holds_slots.contains(&"slots:wh".to_owned()),
        "{slot:?}"
    );
    assert!(slot.holds_something());
    assert_eq!(slot.stalls.get("p"), Some(&1), "{slot:?}");
    let lock = of(&locked);
    assert_eq!(lock.holds_lock, Some(true));
    assert_eq!(lock.stalls.get("other"), Some(&3), "{lock:?}");
}
