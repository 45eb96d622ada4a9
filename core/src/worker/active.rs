//! The jobs a worker holds right now, shared between their tasks and the heartbeat.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{Notify, OwnedSemaphorePermit};
use tokio_util::sync::CancellationToken;

use crate::id::JobId;
use crate::lease::Lease;
pub(crate) use crate::lease_clock::deadline_margin;
use crate::lease_clock::LeaseClock;
use crate::metrics::{Metrics, PipelineLabels};
use crate::pipeline::{StepShared, StopWhy};

/// One held job.
#[derive(Debug)]
pub(crate) struct ActiveJob {
    /// The job's lease.
    pub(crate) lease: Arc<Lease>,
    /// The name of the queue it was leased from.
    pub(crate) queue: String,
    /// What the job's steps see of it (cancel token and reason, why it
    /// must stop, fence).
    pub(crate) shared: Arc<StepShared>,
    /// Set once the job's final operation (finish or release) is sent: a renewal
    /// that then finds the lease gone is racing that operation, not losing the job.
    ending: AtomicBool,
    /// Set once a checkpoint of the attempt was sent: its finish seals the
    /// outputs appended (one that appended none spares the read).
    appended: AtomicBool,
    /// The job's run slot while it runs (see `Shared::run_slots`).
    run_permit: Mutex<Option<OwnedSemaphorePermit>>,
    /// The job's lease slot (see `LeaseLoop::slots`) until its final operation is sent.
    lease_permit: Mutex<Option<OwnedSemaphorePermit>>,
    /// The process's metrics.
    pub(crate) metrics: Arc<Metrics>,
}

impl ActiveJob {
    /// A job just leased, held by `worker` from `queue`; `leased_at` is when
    /// the call that leased it was sent.
    pub(crate) fn new(
        lease: Lease,
        queue: String,
        worker: &str,
        leased_at: Instant,
        metrics: Arc<Metrics>,
        limits: Option<(crate::queue::Queue, Option<crate::flow::Rate>)>,
    ) -> Arc<Self> {
        let lease = Arc::new(lease);
        let shared = Arc::new(StepShared {
            job: lease.job.clone(),
            attempt: lease.attempt,
            fence: lease.fence,
            worker: worker.to_owned(),
            cancel: CancellationToken::new(),
            cancel_reason: Mutex::new(None),
            limits,
            lease: Some(lease.clone()),
            why: Mutex::new(None),
            grace_ms: std::sync::atomic::AtomicU64::new(0),
            metrics: Some(metrics.clone()),
            lease_clock: LeaseClock::new(lease.ttl, leased_at),
        });
        Arc::new(ActiveJob {
            lease,
            queue,
            shared,
            appended: AtomicBool::new(false),
            ending: AtomicBool::new(false),
            run_permit: Mutex::new(None),
            lease_permit: Mutex::new(None),
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
        if let Ok(mut slot) = self.shared.why.lock() {
            let replace = match (&*slot, &why) {
                (None, _) => true,
                (Some(StopWhy::Lost(_)), _) => false,
                (Some(_), StopWhy::Lost(_)) => true,
                _ => false,
            };
            if replace {
                if matches!(why, StopWhy::Lost(_)) {
                    self.shared.lease_clock.mark_lost();
                }
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
        self.shared.why.lock().ok().and_then(|w| w.clone())
    }

    /// Keeps the job's run slot until its final operation is sent.
    pub(crate) fn hold_run_slot(&self, permit: Option<OwnedSemaphorePermit>) {
        if let Ok(mut p) = self.run_permit.lock() {
            *p = permit;
        }
    }

    /// Keeps the job's lease slot until its final operation is sent.
    pub(crate) fn hold_lease_slot(&self, permit: Option<OwnedSemaphorePermit>) {
        if let Ok(mut p) = self.lease_permit.lock() {
            *p = permit;
        }
    }

    /// Records that a checkpoint of the attempt is being sent.
    pub(crate) fn mark_appended(&self) {
        self.appended.store(true, Ordering::Relaxed);
    }

    /// Whether a checkpoint of the attempt was sent (see `mark_appended`).
    pub(crate) fn appended(&self) -> bool {
        self.appended.load(Ordering::Relaxed)
    }

    /// Records that the job's final operation is being sent, and frees its run
    /// slot: a prefetched job can start in the same round trip.
    pub(crate) fn mark_ending(&self) {
        self.ending.store(true, Ordering::Relaxed);
        if let Ok(mut p) = self.run_permit.lock() {
            p.take();
        }
    }

    /// The job's lease slot, handed to its final operation's request: the
    /// lease loop frees it once the request is in its batch, so that the call
    /// carrying the operation leases (and starts) the next job in that slot.
    pub(crate) fn take_lease_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.lease_permit.lock().ok().and_then(|mut p| p.take())
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

    /// Moves the local deadline on after a call sent at `sent_at` confirmed
    /// the lease (a renewal).
    pub(crate) fn renewed(&self, sent_at: Instant) {
        self.shared.lease_clock.renewed(sent_at);
    }

    /// When the last call that confirmed the lease was sent.
    pub(crate) fn confirmed_at(&self) -> Instant {
        self.shared.lease_clock.confirmed_at()
    }

    /// The lease's local deadline on this worker's monotonic clock: when the
    /// last confirming call was sent, plus the TTL, minus [`deadline_margin`].
    /// Redis's own deadline for the lease is later, whatever the calls' latency.
    pub(crate) fn local_deadline(&self) -> Instant {
        let ttl = self.lease.ttl;
        self.confirmed_at() + ttl - deadline_margin(ttl)
    }

    /// True when the local deadline has passed without a confirmed renewal.
    pub(crate) fn expired_locally(&self, now: Instant) -> bool {
        self.shared.lease_clock.expired_at(now)
    }
}

/// Every job the worker holds, by id.
#[derive(Debug, Default)]
pub(crate) struct ActiveJobs {
    /// The jobs, by id.
    jobs: Mutex<HashMap<JobId, Arc<ActiveJob>>>,
    /// Notified when a job is added (the deadline watchdog looks again).
    added: Notify,
}

impl ActiveJobs {
    /// Adds a job the worker now holds.
    pub(crate) fn insert(&self, job: Arc<ActiveJob>) {
        if let Ok(mut map) = self.jobs.lock() {
            map.insert(job.lease.job.clone(), job);
        }
        self.added.notify_one();
    }

    /// Completes once a job was added since the last call returned.
    pub(crate) async fn added(&self) {
        self.added.notified().await
    }

    /// Removes a job whose task ended.
    pub(crate) fn remove(&self, id: &JobId) {
        if let Ok(mut map) = self.jobs.lock() {
            map.remove(id);
        }
    }

    /// The job `id`, if it is held right now.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<ActiveJob>> {
        let map = self.jobs.lock().ok()?;
        map.iter()
            .find(|(k, _)| k.as_str() == id)
            .map(|(_, j)| j.clone())
    }

    /// The jobs held right now.
    pub(crate) fn snapshot(&self) -> Vec<Arc<ActiveJob>> {
        self.jobs
            .lock()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// How many jobs are held right now.
    pub(crate) fn len(&self) -> usize {
        self.jobs.lock().map(|m| m.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::{deadline_margin, ActiveJob};
    use crate::id::JobId;
    use crate::lease::Lease;

    fn held(ttl: Duration, leased_at: Instant) -> Arc<ActiveJob> {
        let lease = Lease {
            job: JobId::new(),
            token: "t".into(),
            fence: 1,
            attempt: 1,
            pipeline: "p".into(),
            input: "{}".into(),
            resource: None,
            last_step: None,
            last_output: None,
            ttl,
            not_before: 0,
            traceparent: None,
            started: false,
        };
        ActiveJob::new(lease, "q".into(), "w", leased_at, Arc::default(), None)
    }

    #[test]
    fn the_margin_is_a_tenth_of_the_ttl_at_least_300ms_at_most_a_quarter() {
        let ms = Duration::from_millis;
        assert_eq!(deadline_margin(Duration::from_secs(30)), ms(3000));
        assert_eq!(deadline_margin(Duration::from_secs(3)), ms(300));
        assert_eq!(deadline_margin(Duration::from_secs(1)), ms(250));
        assert_eq!(deadline_margin(ms(400)), ms(100));
    }

    #[test]
    fn the_local_deadline_counts_from_the_sending_of_the_last_confirming_call() {
        let ttl = Duration::from_secs(3);
        let leased_at = Instant::now();
        let job = held(ttl, leased_at);
        assert_eq!(
            job.local_deadline(),
            leased_at + Duration::from_millis(2700)
        );
        assert!(!job.expired_locally(leased_at + Duration::from_millis(2699)));
        assert!(job.expired_locally(leased_at + Duration::from_millis(2700)));
        let renewed_at = leased_at + Duration::from_secs(1);
        job.renewed(renewed_at);
        assert_eq!(
            job.local_deadline(),
            renewed_at + Duration::from_millis(2700)
        );
        // a confirmation of an older call (one sent before the renewal) never moves it back
        job.renewed(leased_at);
        assert_eq!(job.confirmed_at(), renewed_at);
    }
}
