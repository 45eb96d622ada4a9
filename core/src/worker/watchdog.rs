//! The lease deadline watchdog: stops a held job whose lease passed its local
//! deadline without a confirmed renewal.
//!
//! Each held lease has a local deadline on the worker's monotonic clock (see
//! `ActiveJob::local_deadline`: when the last call that confirmed it was sent,
//! plus the TTL, minus a margin), which comes before Redis's own deadline for
//! it. A worker cut off from Redis (its calls hang or fail) cannot know whether
//! its leases were swept; past that local deadline it must assume so. The
//! watchdog is a task of its own, so no call in flight (a renewal hanging on a
//! stalled connection, a registration, a sweep) delays it: at the earliest
//! local deadline it fires the job's cancellation token with a `Lost` reason,
//! and the step's cancel grace and hard stop follow (`step.rs`); the attempt
//! then ends without writing anything more (`attempt/`), and the worker goes
//! on with its other jobs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::active::{deadline_margin, ActiveJob};
use super::shared::Shared;
use crate::metrics::QueueLabels;
use crate::pipeline::StopWhy;

/// The reason a job's step is given when its lease's local deadline passed.
pub(crate) const DEADLINE_PASSED: &str =
    "lease deadline passed without a confirmed renewal (cut off from Redis?)";

/// Longest the watchdog sleeps with no lease held.
const IDLE_SLEEP: Duration = Duration::from_secs(1);

/// Runs the watchdog until `stop` fires.
pub(crate) async fn run(shared: Arc<Shared>, stop: CancellationToken) {
    loop {
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        for job in shared.active.snapshot() {
            // a job whose final operation is on its way has no step left to stop
            if job.is_lost() || job.is_ending() {
                continue;
            }
            if job.expired_locally(now) {
                expire(&job, now);
            } else {
                let deadline = job.local_deadline();
                next = Some(next.map_or(deadline, |n| n.min(deadline)));
            }
        }
        // A renewal only moves deadlines later, so waking at an old one is
        // harmless. While jobs are held, a new job's deadline (its lease call's
        // sending + TTL − margin) is no earlier than the held ones' by more than
        // a call's duration, well inside the margin, so the watchdog does not
        // wake for every job leased (that cost a wake-up and a snapshot per
        // job); with nothing held it looks again when a job arrives.
        let idle = next.is_none();
        let wake = next.unwrap_or(now + IDLE_SLEEP);
        tokio::select! {
            _ = tokio::time::sleep_until(tokio::time::Instant::from_std(wake)) => {}
            _ = shared.active.added(), if idle => {}
            _ = stop.cancelled() => return,
        }
    }
}

/// Stops `job`, whose local deadline passed at `now`: its lease is surely
/// (or soon) swept.
pub(crate) fn expire(job: &ActiveJob, now: Instant) {
    let since = now.saturating_duration_since(job.confirmed_at());
    warn!(
        job = %job.lease.job,
        queue = %job.queue,
        since_confirmed = ?since,
        ttl = ?job.lease.ttl,
        margin = ?deadline_margin(job.lease.ttl),
        "{DEADLINE_PASSED}: cancelling the running step (dropped after the cancel grace); the attempt writes nothing more"
    );
    job.metrics
        .leases_lost
        .get_or_create(&QueueLabels {
            queue: job.queue.clone(),
        })
        .inc();
    job.stop(StopWhy::Lost(format!(
        "{DEADLINE_PASSED}: {} ms since the last confirmed renewal (lease TTL {} ms)",
        since.as_millis(),
        job.lease.ttl.as_millis()
    )));
}
