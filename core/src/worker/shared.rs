//! What a worker's parts share: the runtime state its loops and job tasks all
//! hold (`Shared`) and where its Redis is (`RedisSource`).

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
    /// The queues whose lease loops fail, by master (one log line a spell).
    pub(crate) failing_masters: super::masters::FailingMasters,
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
