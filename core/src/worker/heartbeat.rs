//! The heartbeat: one batched renewal per queue per interval, reporting lost
//! leases and cancel requests to the job tasks; the worker's registration; and
//! the sweeper at its own interval.

use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_redis::redis;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, error, info, warn};

use super::active::StopWhy;
use super::job;
use super::runner::Runner;
use super::Shared;
use crate::id::JobId;
use crate::lease::{Lease, Renewal};
use crate::metrics::{QueueLabels, RecoveryLabels};
use crate::queue::Queue;

pub(crate) struct Heartbeat {
    pub(crate) shared: Arc<Shared>,
    pub(crate) queues: Vec<Queue>,
    pub(crate) every: Duration,
    pub(crate) sweep_every: Duration,
    pub(crate) sweep_batch: usize,
    pub(crate) pipelines: Vec<String>,
    /// Served pipelines by queue name, for cleanup hooks of resolved STALE jobs.
    pub(crate) runners: Vec<(String, Arc<dyn Runner>)>,
    pub(crate) tasks: TaskTracker,
    pub(crate) concurrency: usize,
    pub(crate) stop: CancellationToken,
}

pub(crate) async fn run(hb: Heartbeat) {
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let mut tick = tokio::time::interval(hb.every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // the sweeper keeps its own interval, independent of the renewal tick
    let mut sweep_tick = tokio::time::interval(hb.sweep_every);
    sweep_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut announced = false;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                renew_all(&hb).await;
                register(&hb, started).await;
            }
            _ = sweep_tick.tick(), if !hb.shared.stop_leasing.is_cancelled() => sweep_all(&hb).await,
            // tell operators at once that this worker is draining
            _ = hb.shared.stop_leasing.cancelled(), if !announced => {
                announced = true;
                register(&hb, started).await;
            }
            _ = hb.stop.cancelled() => break,
        }
    }
    deregister(&hb).await;
}

/// One sweep of every served queue, then the cleanup hooks of resolved STALE jobs.
async fn sweep_all(hb: &Heartbeat) {
    for queue in &hb.queues {
        match queue.sweep(hb.sweep_batch).await {
            Ok(r) if !r.moves.is_empty() || r.unparked > 0 => {
                for (to, n) in [
                    ("QUEUED", r.requeued),
                    ("CANCELLED", r.cancelled),
                    ("STALE", r.stale),
                ] {
                    if n > 0 {
                        hb.shared
                            .metrics
                            .sweeper_recoveries
                            .get_or_create(&RecoveryLabels {
                                queue: queue.name().to_owned(),
                                to: to.to_owned(),
                            })
                            .inc_by(n);
                    }
                }
                for m in &r.moves {
                    hb.shared
                        .metrics
                        .transition(queue.name(), "", m.from.as_str(), m.to.as_str());
                }
                info!(
                    queue = %queue.name(), requeued = r.requeued, cancelled = r.cancelled,
                    stale = r.stale, unparked = r.unparked, "sweeper recovered expired leases"
                )
            }
            Ok(_) => {}
            Err(e) => debug!(queue = %queue.name(), error = %e, "sweep failed"),
        }
        take_cleanups(hb, queue).await;
    }
}

async fn renew_all(hb: &Heartbeat) {
    let active = hb.shared.active.snapshot();
    for queue in &hb.queues {
        let mine: Vec<_> = active
            .iter()
            .filter(|a| a.queue == queue.name() && !a.is_lost())
            .collect();
        for chunk in mine.chunks(500) {
            let leases: Vec<&Lease> = chunk.iter().map(|a| a.lease.as_ref()).collect();
            let sent_at = Instant::now();
            match queue.renew(&leases).await {
                Ok(statuses) => {
                    let labels = QueueLabels {
                        queue: queue.name().to_owned(),
                    };
                    let metrics = &hb.shared.metrics;
                    for (job, status) in chunk.iter().zip(statuses) {
                        if matches!(status, Renewal::Lost { .. }) && job.is_ending() {
                            // the job's finish or release landed first: its own reply reports it
                            debug!(job = %job.lease.job, "lease already ended by the job's final operation");
                            continue;
                        }
                        match &status {
                            Renewal::Lost { .. } => {
                                metrics.leases_lost.get_or_create(&labels).inc()
                            }
                            _ => metrics.lease_renewals.get_or_create(&labels).inc(),
                        };
                        match status {
                            Renewal::Held => job.renewed(sent_at),
                            Renewal::CancelRequested { reason } => {
                                job.renewed(sent_at);
                                if job.why().is_none() {
                                    info!(job = %job.lease.job, %reason, "cancel requested: interrupting the running step (phase B)");
                                }
                                job.stop(StopWhy::Cancel(reason));
                            }
                            Renewal::Lost { state } => {
                                warn!(job = %job.lease.job, ?state, "lease lost: stopping the attempt, writing nothing more");
                                job.stop(StopWhy::Lost(format!(
                                    "lease lost (job is now {})",
                                    state.map_or("gone".to_owned(), |s| s.to_string())
                                )));
                            }
                        }
                    }
                }
                Err(e) => warn!(queue = %queue.name(), error = %e, "lease renewal failed"),
            }
        }
    }
    // cut off from Redis past a lease's deadline: it is surely swept; stop the step
    let now = Instant::now();
    for job in active {
        if !job.is_lost() && job.expired_locally(now) {
            warn!(job = %job.lease.job, "no renewal before the lease deadline: assuming it lost");
            hb.shared
                .metrics
                .leases_lost
                .get_or_create(&QueueLabels {
                    queue: job.queue.clone(),
                })
                .inc();
            job.stop(StopWhy::Lost(
                "lease expired without a renewal (cut off from Redis)".into(),
            ));
        }
    }
}

async fn register(hb: &Heartbeat, started: u128) {
    let info = serde_json::json!({
        "id": hb.shared.id,
        "pid": std::process::id(),
        "started_at": started as u64,
        "pipelines": hb.pipelines,
        "concurrency": hb.concurrency,
        "active": hb.shared.active.len(),
        "shutting_down": hb.shared.stop_leasing.is_cancelled(),
    })
    .to_string();
    let ttl = u64::try_from((hb.every * 3).as_millis())
        .unwrap_or(u64::MAX)
        .max(1000);
    for queue in &hb.queues {
        let Ok(mut conn) = queue.pool().get().await else {
            continue;
        };
        let result: redis::RedisResult<()> = redis::pipe()
            .cmd("SET")
            .arg(queue.keys().worker(&hb.shared.id))
            .arg(&info)
            .arg("PX")
            .arg(ttl)
            .ignore()
            .cmd("SADD")
            .arg(queue.keys().workers())
            .arg(&hb.shared.id)
            .ignore()
            .query_async(&mut conn)
            .await;
        if let Err(e) = result {
            debug!(error = %e, "worker registration failed");
        }
    }
}

async fn deregister(hb: &Heartbeat) {
    for queue in &hb.queues {
        let Ok(mut conn) = queue.pool().get().await else {
            continue;
        };
        let _: redis::RedisResult<()> = redis::pipe()
            .cmd("DEL")
            .arg(queue.keys().worker(&hb.shared.id))
            .ignore()
            .cmd("SREM")
            .arg(queue.keys().workers())
            .arg(&hb.shared.id)
            .ignore()
            .query_async(&mut conn)
            .await;
    }
}

/// Runs cleanup hooks of STALE jobs resolved by an operator, for served pipelines:
/// claims them (at most 16 per tick), runs each hook in a task of its own, and
/// marks the claim done after it. A claim left behind by a worker that died
/// expires and the hook runs again elsewhere.
async fn take_cleanups(hb: &Heartbeat, queue: &Queue) {
    let served: Vec<&str> = hb
        .runners
        .iter()
        .filter(|(q, _)| q == queue.name())
        .map(|(_, r)| r.name())
        .collect();
    let ids = match queue.claim_cleanups(16, &served, job::CLEANUP_CLAIM).await {
        Ok(ids) => ids,
        Err(e) => {
            debug!(queue = %queue.name(), error = %e, "cannot claim from the cleanup list");
            return;
        }
    };
    for raw in ids {
        let id = match JobId::parse(&raw) {
            Ok(id) => id,
            Err(e) => {
                error!(queue = %queue.name(), job = %raw, error = %e, "the cleanup list holds a malformed job id; dropped");
                let _ = queue.cleanup_done(&raw).await;
                continue;
            }
        };
        // read once: the hook gets this copy
        let job = match queue.job(&id).await {
            Ok(Some(job)) => job,
            Ok(None) => {
                let _ = queue.cleanup_done(&raw).await;
                continue;
            }
            Err(e) if e.is_transient() => {
                warn!(job = %id, error = %e, "cannot read a resolved job; its cleanup will be tried again");
                continue;
            }
            Err(e) => {
                error!(job = %id, error = %e, "a resolved job cannot be read: its cleanup hook cannot run");
                let _ = queue.cleanup_done(&raw).await;
                continue;
            }
        };
        let pipeline = job.pipeline.as_str();
        let Some(runner) = hb
            .runners
            .iter()
            .find(|(q, r)| q == queue.name() && r.name() == pipeline)
            .map(|(_, r)| r.clone())
        else {
            // claimed for a pipeline this worker serves: cannot happen unless the
            // job's pipeline field changed since; leave the claim to expire
            continue;
        };
        let queue = queue.clone();
        hb.tasks.spawn(async move {
            job::cleanup_after_resolve(runner.as_ref(), job).await;
            if let Err(e) = queue.cleanup_done(&raw).await {
                warn!(job = %id, error = %e, "cannot end the cleanup claim; the hook may run again after it expires");
            }
        });
    }
}
