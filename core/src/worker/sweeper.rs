//! The sweeper: recovers expired leases of the served queues.
//!
//! Duties, at each sweep interval (driven by the heartbeat task, see
//! `heartbeat.rs`), for every served queue, once per master and concurrently
//! (`masters.rs`: a master that does not answer delays only its own queues):
//! - one `sweep` call: expired leases go back to QUEUED, to CANCELLED or to
//!   STALE, and parked jobs whose lock came free are unparked;
//! - counts the recoveries and the transitions in the metrics and logs them;
//! - hands the queue to the cleanup claimer (`cleanup_claims.rs`), which runs
//!   the cleanup hooks of STALE jobs an operator resolved.
//!
//! [`sweep_queues`] is the same sweep, callable on its own.

use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, info};

use super::cleanup_claims::CleanupClaimer;
use super::shared::Shared;
use crate::error::Result;
use crate::lease::SweepReport;
use crate::metrics::RecoveryLabels;
use crate::queue::Queue;

/// The sweeper of one worker.
pub(crate) struct Sweeper {
    /// The worker's shared state (its metrics).
    pub(crate) shared: Arc<Shared>,
    /// How often it sweeps.
    pub(crate) every: Duration,
    /// Most expired leases handled per sweep call.
    pub(crate) batch: usize,
    /// Runs cleanup hooks of resolved STALE jobs after each queue's sweep.
    pub(crate) cleanups: CleanupClaimer,
}

impl Sweeper {
    /// One sweep of `queues` (one master's), each followed by the cleanup
    /// hooks of its resolved STALE jobs; the first failed sweep ends it (the
    /// master's other queues would wait on it too).
    pub(crate) async fn sweep_group(&self, queues: &[Queue]) -> Result<()> {
        for queue in queues {
            match queue.sweep(self.batch).await {
                Ok(r) if !r.moves.is_empty() || r.unparked > 0 => self.record(queue, &r),
                Ok(_) => {}
                Err(e) => {
                    debug!(queue = %queue.name(), error = %e, "sweep failed");
                    return Err(e);
                }
            }
            self.cleanups.claim_and_run(queue).await;
        }
        Ok(())
    }

    /// Counts and logs what one sweep of `queue` recovered.
    fn record(&self, queue: &Queue, r: &SweepReport) {
        for (to, n) in [
            ("QUEUED", r.requeued),
            ("CANCELLED", r.cancelled),
            ("STALE", r.stale),
        ] {
            if n > 0 {
                self.shared
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
            self.shared
                .metrics
                .transition(queue.name(), "", m.from.as_str(), m.to.as_str());
        }
        info!(
            queue = %queue.name(), requeued = r.requeued, cancelled = r.cancelled,
            stale = r.stale, unparked = r.unparked, "sweeper recovered expired leases"
        )
    }
}

/// Runs the sweeper once over every queue of the given pipelines: what a
/// worker does at each sweep interval, callable on its own.
pub async fn sweep_queues(queues: &[Queue], batch: usize) -> Result<SweepReport> {
    let mut total = SweepReport::default();
    for queue in queues {
        let r = queue.sweep(batch).await?;
        total.requeued += r.requeued;
        total.cancelled += r.cancelled;
        total.stale += r.stale;
        total.unparked += r.unparked;
        total.purged += r.purged;
        total.moves.extend(r.moves);
    }
    Ok(total)
}
