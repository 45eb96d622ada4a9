//! The cleanup claimer: runs the cleanup hooks of STALE jobs an operator
//! resolved as FAILED or CANCELLED, for the pipelines this worker serves.
//!
//! Duties, after each queue's sweep (see `sweeper.rs`):
//! - claims resolved jobs from the queue's cleanup list (at most 16 a time),
//!   for a limited time ([`CLEANUP_CLAIM`]);
//! - reads each job once and runs its pipeline's cleanup hook in a task of its
//!   own, bounded by [`CLEANUP_HOOK_LIMIT`];
//! - marks the claim done after the hook, or at once for a job that is gone or
//!   cannot be read; a claim left behind by a worker that died expires and the
//!   hook runs again elsewhere.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio_util::task::TaskTracker;
use tracing::{debug, error, info, warn};

use crate::id::JobId;
use crate::pipeline::runner::Runner;
use crate::pipeline::{CleanupContext, CleanupReason};
use crate::queue::Queue;

/// Most resolved jobs claimed from one queue's cleanup list per sweep.
const CLAIMS_PER_SWEEP: usize = 16;

/// The cleanup claimer of one worker.
pub(crate) struct CleanupClaimer {
    /// Served pipelines by queue name.
    pub(crate) runners: Vec<(String, Arc<dyn Runner>)>,
    /// Where the hooks' tasks run (the worker's job tasks, waited for on shutdown).
    pub(crate) tasks: TaskTracker,
}

impl CleanupClaimer {
    /// Claims resolved STALE jobs of `queue`'s served pipelines and runs each
    /// one's cleanup hook in a task of its own, marking the claim done after it.
    pub(crate) async fn claim_and_run(&self, queue: &Queue) {
        let served: Vec<&str> = self
            .runners
            .iter()
            .filter(|(q, _)| q == queue.name())
            .map(|(_, r)| r.name())
            .collect();
        let ids = match queue
            .claim_cleanups(CLAIMS_PER_SWEEP, &served, CLEANUP_CLAIM)
            .await
        {
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
            let Some(runner) = self
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
            self.tasks.spawn(async move {
                cleanup_after_resolve(runner.as_ref(), job).await;
                if let Err(e) = queue.cleanup_done(&raw).await {
                    warn!(job = %id, error = %e, "cannot end the cleanup claim; the hook may run again after it expires");
                }
            });
        }
    }
}

/// How long a worker's claim on a cleanup hook lasts: longer than the hook may
/// run ([`CLEANUP_HOOK_LIMIT`]), so a live worker's hook never runs twice.
const CLEANUP_CLAIM: Duration = Duration::from_secs(600);

/// Longest a cleanup hook of a resolved STALE job may run.
const CLEANUP_HOOK_LIMIT: Duration = Duration::from_secs(300);

/// Runs the cleanup hook of a STALE job an operator resolved as FAILED or
/// CANCELLED, read by the caller.
async fn cleanup_after_resolve(runner: &dyn Runner, job: crate::record::Job) {
    let id = &job.id;
    let input = match runner.decode(&job.input.to_string()) {
        Ok(input) => input,
        Err(e) => {
            error!(job = %id, error = %e, "cannot decode a resolved job's input: its cleanup hook cannot run");
            return;
        }
    };
    let record = job.attempts.iter().rev().find(|a| a.resolution.is_some());
    let reason = record
        .and_then(|a| a.resolution.as_ref())
        .map(|r| format!("{} (resolved by {})", r.reason, r.by))
        .unwrap_or_else(|| "resolved after STALE".to_owned());
    let last_completed = job
        .last_step
        .as_deref()
        .and_then(|name| runner.steps().iter().find(|s| s.name == name))
        .map(|s| s.name);
    let ctx = CleanupContext {
        job: job.id.clone(),
        attempt: job.attempt,
        reason: CleanupReason::ResolvedAfterStale { reason },
        last_completed_step: last_completed,
        cut_mid_step: true,
    };
    let hook = AssertUnwindSafe(runner.cleanup(&ctx, input.as_ref())).catch_unwind();
    match tokio::time::timeout(CLEANUP_HOOK_LIMIT, hook).await {
        Ok(Ok(())) => info!(job = %id, "cleanup hook ran after the STALE job was resolved"),
        Ok(Err(_)) => warn!(job = %id, "cleanup hook panicked"),
        Err(_) => warn!(job = %id, "cleanup hook did not finish within 300 s"),
    }
}
