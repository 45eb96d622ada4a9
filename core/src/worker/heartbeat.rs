//! The heartbeat: the worker's background task for its held leases and its
//! registration.
//!
//! Duties:
//! - at each renewal interval, renews every held lease in one call per queue
//!   (500 leases a call at most), moving each job's local deadline on; the
//!   queues of each master are renewed apart from the others' and
//!   concurrently (`masters.rs`), each master's run bounded by the renewal
//!   interval, so a master that does not answer costs only its own leases;
//! - tells job tasks what a renewal found: a cancel request (phase B) or a
//!   lost lease stops the job's running step;
//! - a lease that passes its local deadline without a confirmed renewal is
//!   not this task's to stop: its calls may hang for as long as Redis is out
//!   of reach, so the watchdog (`watchdog.rs`) does it on its own;
//! - registers the worker (its id, pipelines, concurrency, active jobs,
//!   draining or not) after each master's renewal and at once when shutdown
//!   begins, and deregisters it when the task stops;
//! - drives the sweeper (`sweeper.rs`) at the sweep interval until shutdown
//!   begins, side by side with the renewals, so a long sweep never delays one;
//!   per master too, with the same bound.

use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_redis::redis;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::active::ActiveJob;
use super::masters::PerMaster;
use super::shared::Shared;
use super::sweeper::Sweeper;
use crate::error::Result;
use crate::lease::{Lease, Renewal};
use crate::metrics::QueueLabels;
use crate::pipeline::StopWhy;
use crate::queue::Queue;

/// Settings and handles of a worker's heartbeat task.
pub(crate) struct Heartbeat {
    /// The worker's shared state.
    pub(crate) shared: Arc<Shared>,
    /// The served queues.
    pub(crate) queues: Vec<Queue>,
    /// The renewal interval, also the longest one master's renewal or sweep
    /// may take (a third of the shortest lease TTL by default: well under the
    /// renewal margin).
    pub(crate) every: Duration,
    /// The served pipelines' names, for the registration.
    pub(crate) pipelines: Vec<String>,
    /// The spec version of each served pipeline, for the registration (two
    /// live versions of one pipeline are reported by `status`).
    pub(crate) versions: std::collections::BTreeMap<String, String>,
    /// Jobs run at once, for the registration.
    pub(crate) concurrency: usize,
    /// The sweeper, run at its own interval.
    pub(crate) sweeper: Sweeper,
    /// Fired when the worker has stopped: the task deregisters and ends.
    pub(crate) stop: CancellationToken,
}

/// Runs the heartbeat task until `hb.stop` fires.
pub(crate) async fn run(hb: Heartbeat) {
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let hb = Arc::new(hb);
    // renewals and sweeps run side by side: a long sweep never delays a renewal
    // (a lease not renewed in time is given up at its local deadline)
    tokio::join!(renewals(&hb, started), sweeps(&hb));
    deregister(&hb).await;
}

/// Starts the renewal and registration of every master's queues whose
/// previous one ended.
async fn renew_masters(hb: &Arc<Heartbeat>, renewers: &mut PerMaster, started: u128) {
    let active = Arc::new(expire_past_deadline(hb));
    renewers
        .tick(|queues| {
            let (hb, active) = (hb.clone(), active.clone());
            async move {
                renew_queues(&hb, &queues, &active).await?;
                register(&hb, &queues, started).await
            }
        })
        .await;
}

/// Renews the held leases and registers the worker at each renewal interval,
/// and once more when shutdown begins, until `hb.stop` fires.
async fn renewals(hb: &Arc<Heartbeat>, started: u128) {
    let mut tick = tokio::time::interval(hb.every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut renewers = PerMaster::new("lease renewal", hb.queues.clone(), hb.every);
    let mut announced = false;
    loop {
        tokio::select! {
            _ = tick.tick() => renew_masters(hb, &mut renewers, started).await,
            // tell operators at once that this worker is draining
            _ = hb.shared.stop_leasing.cancelled(), if !announced => {
                announced = true;
                renew_masters(hb, &mut renewers, started).await;
            }
            _ = hb.stop.cancelled() => break,
        }
    }
    renewers.finish().await;
}

/// Drives the sweeper at its own interval until shutdown begins.
async fn sweeps(hb: &Arc<Heartbeat>) {
    let mut sweep_tick = tokio::time::interval(hb.sweeper.every);
    sweep_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sweepers = PerMaster::new("sweep", hb.queues.clone(), hb.every);
    loop {
        tokio::select! {
            _ = sweep_tick.tick() => sweepers.tick(|queues| {
                let hb = hb.clone();
                async move { hb.sweeper.sweep_group(&queues).await }
            }).await,
            _ = hb.shared.stop_leasing.cancelled() => break,
            _ = hb.stop.cancelled() => break,
        }
    }
    sweepers.finish().await;
}

/// The held leases, after giving up those past their local deadline.
fn expire_past_deadline(hb: &Heartbeat) -> Vec<Arc<ActiveJob>> {
    let active = hb.shared.active.snapshot();
    // a lease past its local deadline is given up here too, not renewed: a
    // renewal that Redis would still accept must not revive, after a freeze, a
    // lease the job's task (or the watchdog) may already have given up
    let now = Instant::now();
    for job in &active {
        if !job.is_lost() && !job.is_ending() && job.expired_locally(now) {
            super::watchdog::expire(job, now);
        }
    }
    active
}

/// Renews the held leases of `queues` (one master's), telling job tasks of
/// cancels and lost leases; the first failed call ends it.
async fn renew_queues(hb: &Heartbeat, queues: &[Queue], active: &[Arc<ActiveJob>]) -> Result<()> {
    for queue in queues {
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
                        if job.is_lost() {
                            // given up meanwhile (its local deadline passed while this
                            // call hung): already stopped, logged and counted
                            if let Renewal::Lost { state } = &status {
                                info!(job = %job.lease.job, ?state, "lease lost, as assumed at its local deadline");
                            } else {
                                debug!(job = %job.lease.job, ?status, "renewal answered for a lease already given up");
                            }
                            continue;
                        }
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
                Err(e) => {
                    debug!(queue = %queue.name(), error = %e, "lease renewal failed");
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

/// Registers the worker in `queues`, for `hb.every` × 3 (1 s at least).
async fn register(hb: &Heartbeat, queues: &[Queue], started: u128) -> Result<()> {
    let info = serde_json::json!({
        "id": hb.shared.id,
        "pid": std::process::id(),
        "started_at": started as u64,
        "pipelines": hb.pipelines,
        "versions": hb.versions,
        "concurrency": hb.concurrency,
        "active": hb.shared.active.len(),
        "shutting_down": hb.shared.stop_leasing.is_cancelled(),
    })
    .to_string();
    let ttl = u64::try_from((hb.every * 3).as_millis())
        .unwrap_or(u64::MAX)
        .max(1000);
    for queue in queues {
        let mut conn = queue.pool().get().await?;
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
            return Err(e.into());
        }
    }
    Ok(())
}

/// Removes the worker's registration from every served queue, all at once,
/// each bounded by the renewal interval (a master that does not answer keeps
/// it until it expires).
async fn deregister(hb: &Heartbeat) {
    let each = hb.queues.iter().map(|queue| async move {
        let removed = async {
            let mut conn = queue.pool().get().await?;
            redis::pipe()
                .cmd("DEL")
                .arg(queue.keys().worker(&hb.shared.id))
                .ignore()
                .cmd("SREM")
                .arg(queue.keys().workers())
                .arg(&hb.shared.id)
                .ignore()
                .query_async::<()>(&mut conn)
                .await?;
            Ok::<(), crate::error::Error>(())
        };
        let _ = tokio::time::timeout(hb.every, removed).await;
    });
    futures_util::future::join_all(each).await;
}
