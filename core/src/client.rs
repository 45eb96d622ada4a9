//! A client for producers and operators: enqueue jobs of a pipeline type to its queue.

use std::marker::PhantomData;
use std::time::{Duration, SystemTime};

use crate::config::QueueConfig;
use crate::contract::{Contract, EnqueueOptions};
use crate::error::{Error, Result};
use crate::id::JobId;
use crate::job_spec::NewJob;
use crate::json_jobs::{jobs_from_json, JsonJob, Terms};
use crate::pipeline::{queue_of, Pipeline, PipelineSpec};
use crate::queue::{connect_pool, Enqueued, Queue};

/// Builds the [`NewJob`] for `input` of pipeline `P`: its name, resource and
/// input key from the input, max attempts from its retry policies, STALE lock policy.
pub fn job_for<P: Pipeline>(input: &P::Input) -> Result<NewJob> {
    let options = P::options();
    let max_attempts = crate::pipeline::max_attempts_of(&options, P::STEPS);
    let mut job = NewJob::new(P::NAME, input)?
        .max_attempts(max_attempts)
        .stale_lock(options.stale_lock);
    let resource = P::resource_key(input);
    match crate::flow::FlowSpec::of(&options.flow) {
        None => {
            if let Some(resource) = resource {
                job = job.resource(resource);
            }
        }
        Some(flow) => {
            let limiter = P::limiter_key(input);
            let (resource, gates) = flow.gates(P::NAME, resource.as_deref(), limiter.as_deref())?;
            if let Some(resource) = resource {
                job = job.resource(resource);
            }
            job = job.flow(gates);
        }
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

    /// A client over an existing queue client's pool and settings.
    pub fn from_queue(queue: Queue) -> Self {
        Client { queue }
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

    /// A job of pipeline `P` for `input`, to enqueue with options (delay,
    /// not-before, priority, max attempts, id): `client.enqueue_with::<P>(&input)
    /// .priority(5).delay(d).send().await`.
    pub fn enqueue_with<'c, P: Pipeline>(&'c self, input: &P::Input) -> Enqueue<'c, P> {
        Enqueue {
            client: self,
            job: job_for::<P>(input),
            not_before: None,
            _pipeline: PhantomData,
        }
    }

    /// The queues in which a worker registered `pipeline`, with the spec it
    /// published there (one `SCAN` for the queues' spec hashes, then one `HGET`
    /// per queue). Sorted by queue.
    pub async fn find_pipeline(&self, pipeline: &str) -> Result<Vec<(String, PipelineSpec)>> {
        let queues =
            crate::inspect::discover_queues(self.queue.pool(), self.queue.config()).await?;
        let mut found = Vec::new();
        for name in queues {
            let q = self.queue(&name)?;
            if let Some(spec) = q.pipeline_spec(pipeline).await? {
                found.push((name, spec));
            }
        }
        Ok(found)
    }

    /// The contract of `pipeline` and the queue its jobs go to: the spec
    /// published in `queue` when given, else the one queue that has it.
    pub async fn contract(&self, pipeline: &str, queue: Option<&str>) -> Result<(Queue, Contract)> {
        let (name, spec) = match queue {
            Some(q) => {
                let spec = self.queue(q)?.pipeline_spec(pipeline).await?;
                match spec {
                    Some(spec) => (q.to_owned(), spec),
                    None => {
                        return Err(Error::UnregisteredPipeline {
                            pipeline: pipeline.to_owned(),
                            queue: Some(q.to_owned()),
                        })
                    }
                }
            }
            None => {
                let mut found = self.find_pipeline(pipeline).await?;
                match found.len() {
                    0 => {
                        return Err(Error::UnregisteredPipeline {
                            pipeline: pipeline.to_owned(),
                            queue: None,
                        })
                    }
                    1 => found.remove(0),
                    _ => {
                        let names: Vec<&str> = found.iter().map(|(q, _)| q.as_str()).collect();
                        return Err(Error::InvalidArgument(format!(
                            "pipeline {pipeline} is registered in several queues ({}): name one",
                            names.join(", ")
                        )));
                    }
                }
            }
        };
        // the spec says which queue its jobs go to; the queue it was found in is that one
        let queue = self.queue(spec.queue.as_deref().unwrap_or(&name))?;
        Ok((queue, Contract::new(spec)?))
    }

    /// Enqueues a job of `pipeline` with `input` (JSON text) from outside
    /// Rust's types: the pipeline's published contract is applied (input
    /// checked against its schema, resource and input key from its templates,
    /// its policies, its queue; see [`jobs_from_json`]). A pipeline no worker
    /// registered is refused unless `options.unregistered` says so and names
    /// the queue.
    pub async fn enqueue_json(
        &self,
        pipeline: &str,
        input: &str,
        options: &EnqueueOptions,
    ) -> Result<Enqueued> {
        let mut out = self.enqueue_json_many(pipeline, &[input], options).await?;
        out.pop().ok_or(Error::Protocol {
            script: "enqueue",
            detail: "empty reply".into(),
        })
    }

    /// [`Client::enqueue_json`] for many inputs of one pipeline, validated
    /// all before anything is written; replies in order.
    pub async fn enqueue_json_many(
        &self,
        pipeline: &str,
        inputs: &[&str],
        options: &EnqueueOptions,
    ) -> Result<Vec<Enqueued>> {
        let asked: Vec<JsonJob> = inputs
            .iter()
            .map(|input| JsonJob::new(*input, options.clone()))
            .collect();
        let (queue, built) = if options.unregistered {
            let Some(q) = options.queue.as_deref() else {
                return Err(Error::InvalidArgument(format!(
                    "an enqueue for unregistered pipeline {pipeline} needs its queue"
                )));
            };
            let built = jobs_from_json(Terms::Unregistered(pipeline), &asked);
            (self.queue(q)?, built)
        } else {
            let (queue, contract) = self.contract(pipeline, options.queue.as_deref()).await?;
            (queue, jobs_from_json(Terms::Published(&contract), &asked))
        };
        let jobs = built.map_err(|bad| Error::from(bad.problem))?.jobs;
        queue.enqueue_bulk(jobs).await
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

/// A job of pipeline `P` being enqueued with options (see
/// [`Client::enqueue_with`]); nothing is sent until [`Enqueue::send`].
#[must_use = "nothing is enqueued until `.send().await`"]
#[derive(Debug)]
pub struct Enqueue<'c, P: Pipeline> {
    client: &'c Client,
    job: Result<NewJob>,
    not_before: Option<SystemTime>,
    _pipeline: PhantomData<fn() -> P>,
}

impl<P: Pipeline> Enqueue<'_, P> {
    fn map(mut self, f: impl FnOnce(NewJob) -> NewJob) -> Self {
        self.job = self.job.map(f);
        self
    }

    /// Not leased before `delay` has passed (measured on Redis's clock from the enqueue).
    pub fn delay(self, delay: Duration) -> Self {
        self.map(|j| j.delay(delay))
    }

    /// Not leased before `at`. Turned into a delay on this machine's clock when
    /// sent (Redis's clock then counts it): prefer [`Enqueue::delay`] where the
    /// clocks may disagree.
    pub fn not_before(mut self, at: SystemTime) -> Self {
        self.not_before = Some(at);
        self
    }

    /// Higher runs first (0 by default).
    pub fn priority(self, priority: u8) -> Self {
        self.map(|j| j.priority(priority))
    }

    /// Overrides the attempts the pipeline's retry policies allow (at least 1).
    pub fn max_attempts(self, max_attempts: u32) -> Self {
        self.map(|j| j.max_attempts(max_attempts))
    }

    /// Asks for a re-run: a new job even when the input key's latest job SUCCEEDED.
    pub fn rerun(self) -> Self {
        self.map(|j| j.rerun(true))
    }

    /// Uses `id` instead of a new one (an enqueue under an existing id returns that job).
    pub fn id(self, id: JobId) -> Self {
        self.map(|j| j.id(id))
    }

    /// Makes the job a child of group `name` (see `Queue::create_group`).
    pub fn group(self, name: impl Into<String>) -> Self {
        self.map(|j| j.group(name))
    }

    /// Makes the job wait until `parent` (a job or a group) SUCCEEDED.
    pub fn depends_on(self, parent: impl Into<crate::group::Dependency>) -> Self {
        self.map(|j| j.depends_on(parent))
    }

    /// What a parent ending FAILED or CANCELLED does to the job.
    pub fn on_parent_failure(self, policy: crate::group::ParentFailure) -> Self {
        self.map(|j| j.on_parent_failure(policy))
    }

    /// Enqueues the job (idempotent on its input key, if it has one).
    pub async fn send(self) -> Result<Enqueued> {
        let mut job = self.job?;
        if let Some(at) = self.not_before {
            let wait = at
                .duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO);
            let delay = job.delay.max(wait);
            job = job.delay(delay);
        }
        self.client.queue_for::<P>()?.enqueue(job).await
    }
}
