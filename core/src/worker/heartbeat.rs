//! The heartbeat: the worker's background task for its held leases and its
//! registration.
//!
//! Duties:
//! - at each renewal interval, renews every held lease in one call per queue
//!   (500 leases a call at most), moving each job's local deadline on;
//! - tells job tasks what a renewal found: a cancel request (phase B) or a
//!   lost lease stops the job's running step;
//! - a lease that passes its local deadline without a confirmed renewal is
//!   not this task's to stop: its calls may hang for as long as Redis is out
//!   of reach, so the watchdog (`watchdog.rs`) does it on its own;
//! - registers the worker (its id, pipelines, concurrency, active jobs,
//!   draining or not) after each renewal and at once when shutdown begins, and
//!   deregisters it when the task stops;
//! - drives the sweeper (`sweeper.rs`) at the sweep interval until shutdown
//!   begins, side by side with the renewals, so a long sweep never delays one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_redis::redis;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::shared::Shared;
use super::sweeper::Sweeper;
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
    /// The renewal interval.
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
    // renewals and sweeps run side by side: a long sweep never delays a renewal
    // (a lease not renewed in time is given up at its local deadline)
    tokio::join!(renewals(&hb, started), sweeps(&hb));
    deregister(&hb).await;
}

/// Renews the held leases and registers the worker at each renewal interval,
/// and once more when shutdown begins, until `hb.stop` fires.
async fn renewals(hb: &Heartbeat, started: u128) {
    let mut tick = tokio::time::interval(hb.every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut announced = false;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                renew_all(hb).await;
                register(hb, started).await;
            }
            // tell operators at once that this worker is draining
            _ = hb.shared.stop_leasing.cancelled(), if !announced => {
                announced = true;
                register(hb, started).await;
            }
            _ = hb.stop.cancelled() => return,
        }
    }
}

/// Drives the sweeper at its own interval until shutdown begins.
async fn sweeps(hb: &Heartbeat) {
    let mut sweep_tick = tokio::time::interval(hb.sweeper.every);
    sweep_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = sweep_tick.tick() => hb.sweeper.sweep_all().await,
            _ = hb.shared.stop_leasing.cancelled() => return,
            _ = hb.stop.cancelled() => return,
        }
    }
}

/// Renews every held lease, telling job tasks of cancels and lost leases.
async fn renew_all(hb: &Heartbeat) {
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
                Err(e) => warn!(queue = %queue.name(), error = %e, "lease renewal failed"),
            }
        }
    }
}

/// Registers the worker in every served queue, for `hb.every` × 3 (1 s at least).
async fn register(hb: &Heartbeat, started: u128) {
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

/// Removes the worker's registration from every served queue.
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
