//! The jobs a worker holds right now, shared between their tasks and the heartbeat.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;

use crate::id::JobId;
use crate::lease::Lease;
use crate::metrics::{Metrics, PipelineLabels};
use crate::pipeline::StepShared;

/// Why a job's cancellation token fired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StopWhy {
    /// An operator asked to cancel (phase B).
    Cancel(String),
    /// The lease is gone (swept, re-leased, or we were cut off past its deadline): write nothing more.
    Lost(String),
    /// The worker's shutdown grace period ran out.
    Shutdown,
}

/// One held job.
#[derive(Debug)]
pub(crate) struct ActiveJob {
    /// The job's lease.
    pub(crate) lease: Arc<Lease>,
    /// The name of the queue it was leased from.
    pub(crate) queue: String,
    /// What the job's steps see of it (cancel token and reason, fence).
    pub(crate) shared: Arc<StepShared>,
    /// Why the job must stop, once it must.
    why: Mutex<Option<StopWhy>>,
    /// Set once the job's final operation (finish or release) is sent: a renewal
    /// that then finds the lease gone is racing that operation, not losing the job.
    ending: AtomicBool,
    /// The job's run slot while it runs (see `Shared::run_slots`).
    run_permit: Mutex<Option<OwnedSemaphorePermit>>,
    /// When the job started running (its start was accepted).
    running_since: Mutex<Option<Instant>>,
    /// Local (monotonic) time by which the lease is surely expired unless renewed.
    deadline: Mutex<Instant>,
    /// The process's metrics.
    pub(crate) metrics: Arc<Metrics>,
}

impl ActiveJob {
    /// A job just leased at `leased_at`, held by `worker` from `queue`.
    pub(crate) fn new(
        lease: Lease,
        queue: String,
        worker: &str,
        leased_at: Instant,
        metrics: Arc<Metrics>,
    ) -> Arc<Self> {
        let shared = Arc::new(StepShared {
            job: lease.job.clone(),
            attempt: lease.attempt,
            fence: lease.fence,
            worker: worker.to_owned(),
            cancel: CancellationToken::new(),
            cancel_reason: Mutex::new(None),
        });
        let deadline = leased_at + lease.ttl;
        Arc::new(ActiveJob {
            lease: Arc::new(lease),
            queue,
            shared,
            why: Mutex::new(None),
            ending: AtomicBool::new(false),
            run_permit: Mutex::new(None),
            running_since: Mutex::new(None),
            deadline: Mutex::new(deadline),
            metrics,
        })
    }

    /// Records why the job must stop and fires its token. A lost lease overrides
    /// anything; otherwise the first reason stands.
    pub(crate) fn stop(&self, why: StopWhy) {
        let reason = match &why {
            StopWhy::Cancel(r) | StopWhy::Lost(r) => r.clone(),
            StopWhy::Shutdown => "worker shutting down".to_owned(),
        };
        if let Ok(mut slot) = self.why.lock() {
            let replace = match (&*slot, &why) {
                (None, _) => true,
                (Some(StopWhy::Lost(_)), _) => false,
                (Some(_), StopWhy::Lost(_)) => true,
                _ => false,
            };
            if replace {
                *slot = Some(why);
                if let Ok(mut r) = self.shared.cancel_reason.lock() {
                    *r = Some(reason);
                }
            }
        }
        self.shared.cancel.cancel();
    }

    /// Why the job is stopping, if it is.
    pub(crate) fn why(&self) -> Option<StopWhy> {
        self.why.lock().ok().and_then(|w| w.clone())
    }

    /// Keeps the job's run slot until its final operation is sent.
    pub(crate) fn hold_run_slot(&self, permit: Option<OwnedSemaphorePermit>) {
        if let Ok(mut p) = self.run_permit.lock() {
            *p = permit;
        }
    }

    /// Records that the job is running from now.
    pub(crate) fn mark_running(&self) {
        if let Ok(mut t) = self.running_since.lock() {
            *t = Some(Instant::now());
        }
    }

    /// How long the job has been running, if it started.
    pub(crate) fn running_for(&self) -> Option<std::time::Duration> {
        self.running_since
            .lock()
            .ok()
            .and_then(|t| t.map(|t| t.elapsed()))
    }

    /// Records that the job's final operation is being sent, and frees its run
    /// slot: a prefetched job can start in the same round trip.
    pub(crate) fn mark_ending(&self) {
        self.ending.store(true, Ordering::Relaxed);
        if let Ok(mut p) = self.run_permit.lock() {
            p.take();
        }
    }

    /// True once the job's final operation has been sent.
    pub(crate) fn is_ending(&self) -> bool {
        self.ending.load(Ordering::Relaxed)
    }

    /// True once the lease is known to be gone.
    pub(crate) fn is_lost(&self) -> bool {
        matches!(self.why(), Some(StopWhy::Lost(_)))
    }

    /// Counts a transition of this job in the metrics.
    pub(crate) fn count(&self, from: &str, to: &str) {
        self.metrics
            .transition(&self.queue, &self.lease.pipeline, from, to);
    }

    /// The metric labels of this job.
    pub(crate) fn labels(&self) -> PipelineLabels {
        PipelineLabels {
            queue: self.queue.clone(),
            pipeline: self.lease.pipeline.clone(),
        }
    }

    /// The job's cancellation token, fired by [`ActiveJob::stop`].
    pub(crate) fn token(&self) -> &CancellationToken {
        &self.shared.cancel
    }

    /// Moves the local deadline after a successful renewal sent at `sent_at`.
    pub(crate) fn renewed(&self, sent_at: Instant) {
        if let Ok(mut d) = self.deadline.lock() {
            let next = sent_at + self.lease.ttl;
            if next > *d {
                *d = next;
            }
        }
    }

    /// True when the local deadline has passed without a renewal.
    pub(crate) fn expired_locally(&self, now: Instant) -> bool {
        self.deadline.lock().map(|d| now >= *d).unwrap_or(true)
    }
}

/// Every job the worker holds, by id.
#[derive(Debug, Default)]
pub(crate) struct ActiveJobs(Mutex<HashMap<JobId, Arc<ActiveJob>>>);

impl ActiveJobs {
    /// Adds a job the worker now holds.
    pub(crate) fn insert(&self, job: Arc<ActiveJob>) {
        if let Ok(mut map) = self.0.lock() {
            map.insert(job.lease.job.clone(), job);
        }
    }

    /// Removes a job whose task ended.
    pub(crate) fn remove(&self, id: &JobId) {
        if let Ok(mut map) = self.0.lock() {
            map.remove(id);
        }
    }

    /// The jobs held right now.
    pub(crate) fn snapshot(&self) -> Vec<Arc<ActiveJob>> {
        self.0
            .lock()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// How many jobs are held right now.
    pub(crate) fn len(&self) -> usize {
        self.0.lock().map(|m| m.len()).unwrap_or(0)
    }
}
