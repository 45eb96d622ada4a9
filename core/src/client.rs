//! A client for producers and operators: enqueue jobs of a pipeline type to its queue.

use crate::config::QueueConfig;
use crate::error::{Error, Result};
use crate::job_spec::NewJob;
use crate::pipeline::{queue_of, Pipeline};
use crate::queue::{connect_pool, Enqueued, Queue};

/// Builds the [`NewJob`] for `input` of pipeline `P`: its name, resource and
/// input key from the input, max attempts from its retry policies, STALE lock policy.
pub fn job_for<P: Pipeline>(input: &P::Input) -> Result<NewJob> {
    let options = P::options();
    let max_attempts = crate::pipeline::max_attempts_of(&options, P::STEPS);
    let mut job = NewJob::new(P::NAME, input)?
        .max_attempts(max_attempts)
        .stale_lock(options.stale_lock);
    if let Some(resource) = P::resource_key(input) {
        job = job.resource(resource);
    }
    if let Some(key) = P::input_key(input) {
        job = job.input_key(key);
    }
    Ok(job)
}

/// A connection to Redis for enqueueing and reading jobs of any queue.
#[derive(Clone, Debug)]
pub struct Client {
    queue: Queue,
}

impl Client {
    /// Connects to `url` and checks that Redis answers.
    pub async fn connect(url: &str, config: QueueConfig) -> Result<Self> {
        let pool = connect_pool(url, &config)?;
        let queue = Queue::with_pool(pool, "default", config)?;
        queue.ping().await?;
        Ok(Client { queue })
    }

    /// The client of queue `name`.
    pub fn queue(&self, name: &str) -> Result<Queue> {
        self.queue.sibling(name)
    }

    /// The client of the queue pipeline `P` uses.
    pub fn queue_for<P: Pipeline>(&self) -> Result<Queue> {
        self.queue(queue_of::<P>())
    }

    /// Enqueues a job of pipeline `P` (idempotent on its input key, if it has one).
    pub async fn enqueue<P: Pipeline>(&self, input: &P::Input) -> Result<Enqueued> {
        self.queue_for::<P>()?.enqueue(job_for::<P>(input)?).await
    }

    /// Enqueues many jobs of pipeline `P` in bulk.
    pub async fn enqueue_many<P: Pipeline>(&self, inputs: &[P::Input]) -> Result<Vec<Enqueued>> {
        let jobs = inputs
            .iter()
            .map(job_for::<P>)
            .collect::<Result<Vec<_>, Error>>()?;
        self.queue_for::<P>()?.enqueue_bulk(jobs).await
    }
}
