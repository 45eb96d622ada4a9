//! What a worker's parts share: the runtime state its loops and job tasks all
//! hold (`Shared`) and where its Redis is (`RedisSource`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::active::ActiveJobs;
use crate::metrics::Metrics;

/// State shared by a worker's loops and job tasks.
pub(crate) struct Shared {
    /// This worker instance's unique id.
    pub(crate) id: String,
    /// The jobs this worker holds right now.
    pub(crate) active: ActiveJobs,
    /// Fired first on shutdown: no more leases; unstarted jobs are handed back.
    pub(crate) stop_leasing: CancellationToken,
    /// Fired with `stop_leasing`: running jobs stop at their next step boundary.
    pub(crate) stop_at_boundary: CancellationToken,
    /// How long a step may keep running after its cancellation token fired.
    pub(crate) cancel_grace: Duration,
    /// The process's metrics.
    pub(crate) metrics: Arc<Metrics>,
    /// One permit per job allowed to run at once (the concurrency); a leased job
    /// takes one before it starts and gives it back when it sends its final operation.
    pub(crate) run_slots: Arc<Semaphore>,
    /// Moving average of how long a job runs (start to final operation), in
    /// µs; `u64::MAX` until one has run. Automatic prefetch uses it.
    pub(crate) job_run_us: AtomicU64,
}

/// Jobs that run shorter than this on average are prefetched by default.
pub(crate) const SHORT_JOB: Duration = Duration::from_millis(25);

impl Shared {
    /// Adds one job's run time to the moving average.
    pub(crate) fn record_run(&self, ran: Duration) {
        let sample = ran.as_micros().min(u64::MAX as u128 - 1) as u64;
        let old = self.job_run_us.load(Ordering::Relaxed);
        let new = if old == u64::MAX {
            sample
        } else {
            old - old / 8 + sample / 8
        };
        self.job_run_us.store(new, Ordering::Relaxed);
    }

    /// Whether jobs have been short enough, on average, to lease ahead of free slots.
    pub(crate) fn jobs_are_short(&self) -> bool {
        self.job_run_us.load(Ordering::Relaxed) < SHORT_JOB.as_micros() as u64
    }
}

/// Where a worker's Redis is.
#[derive(Clone)]
pub(crate) enum RedisSource {
    /// A URL (one server or a cluster): the worker builds its pool and opens
    /// its blocking connections.
    Url(String),
    /// A pool of the caller's; blocking connections are made by it, outside it.
    Pool(crate::pool::RedisPool),
}
