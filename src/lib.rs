//! leasehold: operable long-running data jobs on Redis.
//!
//! A job is a pipeline of async steps over a fixed input boundary. Workers
//! lease jobs from Redis, run their steps, checkpoint each step's output, renew
//! their leases with a heartbeat, honour cancel requests, and record every
//! attempt; every state change is an atomic Lua script compared by lease token
//! (see the state model in the README and `docs/redis-keys.md`).
//!
//! The [`pipeline`](macro@pipeline) attribute turns an impl block of async
//! methods into a [`Pipeline`](pipeline::Pipeline); a
//! [`Client`](queue::Client) enqueues its jobs; a [`Worker`](worker::Worker)
//! runs them. [`prelude`] brings those in; the rest is grouped by concept,
//! each module with an example: [`pipeline`](mod@pipeline) (steps, errors,
//! retries), [`queue`] (jobs in Redis and their states), [`worker`],
//! [`inspect`] (reading queues), [`schedule`], [`flow`] (limits, rates,
//! pauses), [`group`] (groups and dependencies), [`lease`] (the holder
//! protocol without the worker) and [`transitions`] (the state model's table).
//! Durations written as text (`"30s"`, `"1h30m"`, `"2d"`) are read by
//! [`parse_duration`], the one parser the attribute and the `leasehold`
//! command line use too.
//!
//! ```
//! use std::time::Duration;
//! use leasehold::prelude::*;
//! use serde::{Deserialize, Serialize};
//!
//! /// The fixed input boundary of one job. Its JSON Schema (the derive,
//! /// from the prelude) is published with the pipeline: the CLI and HTTP
//! /// enqueue check every input against it. `InputFields` lets the macro
//! /// report a template naming a field it lacks, with its fields.
//! #[derive(Serialize, Deserialize, JsonSchema, InputFields)]
//! struct Window { shop_id: String, hour: u32 }
//!
//! struct HourlySales;
//!
//! #[pipeline(resource = "shop:{shop_id}", input_key = "sales:{shop_id}:{hour}", max_attempts = 3)]
//! impl HourlySales {
//!     #[step(timeout = "30s")]
//!     async fn fetch(&self, _ctx: &StepContext, input: &Window) -> Result<Vec<i64>, StepError> {
//!         Ok(vec![1200, 350, i64::from(input.hour)])
//!     }
//!
//!     #[step]
//!     async fn aggregate(&self, ctx: &StepContext, orders: Vec<i64>) -> Result<i64, StepError> {
//!         ctx.check_cancelled()?; // a cheap phase-B check between units of work
//!         Ok(orders.iter().sum())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let redis = leasehold_testkit::RedisServer::start();
//! # let url = redis.url();
//! // `url` names a Redis you may write to, e.g. "redis://127.0.0.1:6379"
//! let client = Client::connect(&url, QueueConfig::default()).await?;
//! let job = client.enqueue::<HourlySales>(&Window { shop_id: "a".into(), hour: 7 }).await?;
//!
//! let worker = Worker::builder(url.as_str()).pipeline(HourlySales).concurrency(4).build().await?;
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let running = tokio::spawn(worker.run_until(async { let _ = stopped.await; }));
//!
//! let queue = client.queue_for::<HourlySales>()?;
//! let done = loop {
//!     match queue.job(&job.id).await? {
//!         Some(j) if j.state.is_terminal() => break j,
//!         _ => tokio::time::sleep(Duration::from_millis(10)).await,
//!     }
//! };
//! assert_eq!(done.state, JobState::Succeeded);
//! assert_eq!(done.outputs["aggregate"], serde_json::json!(1557));
//! let _ = stop.send(());
//! running.await??;
//! # Ok(())
//! # }
//! ```
//!
//! # Cargo features
//!
//! None is on by default: a program that only runs Rust workers builds no
//! HTTP server and no JSON-Schema validator.
//!
//! | feature | what it adds | pulls in |
//! |---|---|---|
//! | `metrics-server` | `WorkerBuilder::metrics_addr`: the worker serves Prometheus metrics at `/metrics` (the metrics are recorded without it; `Metrics::encode` gives the text for a server of your own) | axum, hyper |
//! | `validate` | inputs checked against the pipeline's published JSON Schema on enqueues that do not come from typed Rust (`Client::enqueue_json`, a schedule's JSON `input`); without it they are checked as JSON only | jsonschema |
//! | `otel` | OTLP export of step spans, trace contexts carried into jobs ([`otel`](crate::otel)) | opentelemetry |
//!
//! Publishing a pipeline's input schema needs no feature: the `leasehold`
//! CLI and its HTTP enqueue (built with `validate`) check every input against
//! it whatever the worker was built with.

pub use leasehold_macros::pipeline;
/// Lists an input's field names, so `#[pipeline]` reports a key template's
/// unknown field (or a schedule's missing `window`) with the input's fields.
pub use leasehold_macros::InputFields;

pub use leasehold_core::{parse_duration, DurationError, Error, Result};

/// The time library of schedules' windows ([`schedule::Window`] holds `jiff::Timestamp`s).
pub use leasehold_core::jiff;
/// The `redis` crate leasehold uses (re-exported from `deadpool-redis`).
pub use leasehold_core::redis;
/// The JSON Schema library of pipeline inputs. Its derive expands to paths
/// under `schemars::`, so with this module in scope (`use leasehold::prelude::*;`
/// or `use leasehold::schemars;`) `#[derive(JsonSchema)]` needs no
/// `#[schemars(crate = ...)]` line and no dependency of your own.
pub use leasehold_core::schemars;
/// The derive (and trait) of an input's JSON Schema, which `#[pipeline]`
/// publishes so the CLI and HTTP enqueue check every input against it.
pub use leasehold_core::JsonSchema;

/// What most programs need: `use leasehold::prelude::*;` brings the
/// [`pipeline`](macro@crate::pipeline) attribute, the step types, the
/// [`Client`](crate::queue::Client) that enqueues, the
/// [`Worker`](crate::worker::Worker) that runs, and a job's id, state and
/// schedule window, and the `JsonSchema` derive (with the `schemars` path
/// it expands to) that every pipeline input carries, and the `InputFields`
/// derive that makes a template's unknown field a clear compile error.
pub mod prelude {
    pub use crate::pipeline;
    pub use crate::pipeline::{CleanupContext, CleanupReason, Pipeline, StepContext, StepError};
    pub use crate::queue::{Client, JobId, JobState, QueueConfig};
    pub use crate::schedule::Window;
    pub use crate::worker::Worker;
    pub use crate::{schemars, InputFields, JsonSchema};
}

/// Defining pipelines: the trait `#[pipeline]` implements, what a step is
/// given (its context) and may return (a [`StepError`](crate::pipeline::StepError)),
/// retry policies and cleanup hooks.
///
/// ```
/// use std::time::Duration;
/// use leasehold::pipeline;
/// use leasehold::pipeline::{Pipeline, RetryPolicy, StepContext, StepError, Steps};
///
/// struct Import;
///
/// #[pipeline(max_attempts = 5, initial_backoff = "2s")]
/// impl Import {
///     #[step(timeout = "1m")]
///     async fn fetch(&self, _ctx: &StepContext, day: &String) -> Result<Vec<u32>, StepError> {
///         Ok(vec![day.len() as u32])
///     }
///
///     #[step]
///     async fn load(&self, _ctx: &StepContext, rows: Vec<u32>) -> Result<u32, StepError> {
///         rows.first().copied().ok_or_else(|| StepError::permanent("no rows"))
///     }
/// }
///
/// let names: Vec<&str> = Import::STEPS.iter().map(|s| s.name).collect();
/// assert_eq!(names, ["fetch", "load"]);
/// assert_eq!(Import::STEPS[0].timeout, Some(Duration::from_secs(60)));
/// assert_eq!(
///     Import::options().retry,
///     RetryPolicy::exponential(5).initial_backoff(Duration::from_secs(2))
/// );
/// assert_eq!(<Import as Pipeline>::Step::ALL.len(), 2);
/// ```
pub mod pipeline {
    pub use leasehold_core::pipeline::{
        max_attempts_of, queue_of, spec_of, BoxFuture, CleanupContext, CleanupReason, Limiter,
        Pipeline, PipelineOptions, PipelineSpec, RetryPolicy, StepContext, StepError, StepSpec,
        Steps, UnknownStep,
    };
}

/// Jobs in Redis: the [`Client`](crate::queue::Client) that enqueues a
/// pipeline's jobs, the lower-level [`Queue`](crate::queue::Queue) of one
/// queue, the job records they read, and the job states.
///
/// ```
/// use leasehold::queue::{JobState, NewJob, Queue, QueueConfig};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), leasehold::Error> {
/// # let redis = leasehold_testkit::RedisServer::start();
/// # let url = redis.url();
/// let queue = Queue::connect(&url, "orders", QueueConfig::default()).await?;
/// let job = NewJob::new("sync", &serde_json::json!({"shop": "a"}))?
///     .input_key("sync:a:2026-05-06")
///     .resource("shop:a");
/// let first = queue.enqueue(job.clone()).await?;
/// let again = queue.enqueue(job).await?; // idempotent on the input key
/// assert_eq!(first.id, again.id);
/// let stored = queue.job(&first.id).await?.expect("the job");
/// assert_eq!(stored.state, JobState::Queued);
/// # Ok(())
/// # }
/// ```
pub mod queue {
    pub use leasehold_core::client::{job_for, Client, Enqueue};
    pub use leasehold_core::config::{QueueConfig, Retention};
    pub use leasehold_core::contract::{Contract, EnqueueOptions};
    pub use leasehold_core::id::JobId;
    pub use leasehold_core::job_spec::NewJob;
    pub use leasehold_core::keys::QueueKeys;
    pub use leasehold_core::lease::{Cancelled, RetryMode};
    pub use leasehold_core::pool::{
        cluster_seed_urls, is_cluster_url, Master, RedisConn, RedisPool,
    };
    pub use leasehold_core::queue::{
        connect_pool, escape_bytes, EnqueueStatus, Enqueued, QuarantineEntry, Queue,
    };
    pub use leasehold_core::record::{
        AttemptError, AttemptRecord, CancelRequest, Job, LeaseInfo, Millis, Resolution, StaleLock,
        StepDone,
    };
    pub use leasehold_core::state::JobState;
    pub use leasehold_core::template::{KeyTemplate, TemplateError};
}

/// Groups of jobs and dependencies between jobs: a group's completion job
/// runs once its children settle; a job may wait for others.
pub mod group {
    pub use leasehold_core::group::{
        check_group_name, Dependency, GroupPolicy, GroupStatus, ParentFailure,
    };
    pub use leasehold_core::inspect::{GroupChild, GroupInfo, GroupView};
    pub use leasehold_core::job_spec::NewGroup;
    pub use leasehold_core::queue::GroupCancelled;
}

/// The holder's side of the protocol, for code that drives jobs without the
/// [`Worker`](crate::worker::Worker): leases, step starts, renewals, outcomes.
pub mod lease {
    pub use leasehold_core::lease::{
        Finished, FlowWaits, Lease, Leased, Outcome, Renewal, Started, SweepReport, SweptJob,
        UnreadableLease,
    };
    pub use leasehold_core::settle::{HolderOp, HolderReply, LeaseRequest, Settled};
}

/// The transition table: every move of the state model, as the scripts
/// enforce it (`docs/design.md`).
pub mod transitions {
    pub use leasehold_core::transitions::*;
}

/// Running pipelines: the [`Worker`](crate::worker::Worker) runtime and its
/// builder, the sweeper, metrics, and the shutdown signal.
///
/// ```no_run
/// // no_run: it serves until SIGINT or SIGTERM.
/// use leasehold::prelude::*;
///
/// struct Nightly;
///
/// #[pipeline]
/// impl Nightly {
///     #[step]
///     async fn run(&self, _ctx: &StepContext, day: &String) -> Result<usize, StepError> {
///         Ok(day.len())
///     }
/// }
///
/// # #[tokio::main]
/// # async fn main() -> Result<(), leasehold::Error> {
/// let worker = Worker::builder("redis://127.0.0.1:6379")
///     .pipeline(Nightly)
///     .concurrency(8)
///     .build()
///     .await?;
/// worker.run_until(leasehold::worker::shutdown_signal()).await?;
/// # Ok(())
/// # }
/// ```
pub mod worker {
    pub use leasehold_core::metrics::Metrics;
    pub use leasehold_core::worker::{shutdown_signal, sweep_queues, Worker, WorkerBuilder};
}

/// Reading queues without changing them: status per queue, job pages, one
/// job's detail, workers, locks, the event stream, discovery.
///
/// ```
/// use leasehold::inspect::Inspector;
/// use leasehold::queue::{NewJob, Queue, QueueConfig};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), leasehold::Error> {
/// # let redis = leasehold_testkit::RedisServer::start();
/// # let url = redis.url();
/// let queue = Queue::connect(&url, "orders", QueueConfig::default()).await?;
/// queue.enqueue(NewJob::new("sync", &1)?).await?;
/// let status = Inspector::new(queue).status().await?;
/// assert_eq!(status.counts.queued, 1);
/// assert!(status.oldest_waiting.is_some());
/// # Ok(())
/// # }
/// ```
pub mod inspect {
    pub use leasehold_core::inspect::*;
    pub use leasehold_core::queue::QuarantineEntry;
}

/// Schedules: cron expressions or fixed intervals that enqueue one job per
/// window, with catch-up and overlap policies.
///
/// ```
/// use std::time::Duration;
/// use leasehold::schedule::{CatchUp, Overlap, Schedule};
///
/// let hourly = Schedule::cron("hourly-sales", "0 * * * *")
///     .unwrap()
///     .catch_up(CatchUp::Latest)
///     .overlap(Overlap::Skip);
/// let every = Schedule::every("refresh", Duration::from_secs(300)).unwrap();
/// assert!(Schedule::cron("bad", "61 * * * *").is_err());
/// # let _ = (hourly, every);
/// ```
pub mod schedule {
    pub use leasehold_core::queue::{ScheduleInfo, TickEntry, TickReply, TickedWindow};
    pub use leasehold_core::schedule::{
        Cadence, CatchUp, DueWindows, Overlap, Schedule, ScheduleDefinition, ScheduleError, Window,
    };
}

/// Flow control: limits on concurrent jobs per resource or pipeline, start
/// rates, and pausing queues or pipelines.
///
/// ```
/// use leasehold::flow::{FlowOptions, Rate};
///
/// const LIMITS: FlowOptions = FlowOptions::new().max_running(4).rate("10/s");
/// assert_eq!(LIMITS.max_running, Some(4));
/// assert!("10/s".parse::<Rate>().is_ok());
/// assert!("10/fortnight".parse::<Rate>().is_err());
/// ```
pub mod flow {
    pub use leasehold_core::flow::{FlowOptions, FlowSpec, Pause, PauseScope, Rate};
    pub use leasehold_core::queue::PauseChange;
}

/// OpenTelemetry export of the spans (the `otel` feature): an OTLP layer
/// and the crates it is built from. Jobs enqueued inside a span carry its
/// trace context, and their `job` and `step` spans join that trace.
#[cfg(feature = "otel")]
pub mod otel {
    pub use leasehold_core::otel::*;
}

/// Re-exports for code generated by `#[pipeline]`; not a public API.
#[doc(hidden)]
pub mod __private {
    /// The core, under paths the generated code names whatever the facade's
    /// layout.
    pub use leasehold_core as core;
    pub use leasehold_core::__private::*;
}
