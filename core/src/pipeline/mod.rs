//! What a pipeline is to the runtime: the trait the `#[pipeline]` macro
//! implements and the spec it publishes. The parts: the published spec and
//! retry policies (plain data, defined below the queue client in
//! `crate::pipeline_spec` and re-exported here), the step context
//! ([`context`]), step errors ([`step_error`]), and a pipeline with its input
//! type erased (`runner`), which is how the worker and declared pipelines
//! serve one.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use serde::de::DeserializeOwned;
use serde::Serialize;

mod context;
pub(crate) mod runner;
mod step_error;

pub use crate::pipeline_spec::{
    max_attempts_of, PipelineOptions, PipelineSpec, RetryPolicy, StepSpec,
};
pub use context::{CleanupContext, CleanupReason, Limiter, StepContext};
pub(crate) use context::{StepShared, StopWhy};
#[doc(hidden)]
pub use step_error::no_such_step;
pub use step_error::StepError;

/// A boxed, sendable future, as the generated glue returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A name that is not one of a pipeline's steps.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown step {name:?} of pipeline {pipeline}")]
pub struct UnknownStep {
    /// The pipeline.
    pub pipeline: &'static str,
    /// The name that matched no step.
    pub name: String,
}

/// The ordered steps of a pipeline: the step enum `#[pipeline]` generates.
pub trait Steps:
    Copy
    + Eq
    + Ord
    + fmt::Debug
    + fmt::Display
    + std::str::FromStr<Err = UnknownStep>
    + Send
    + Sync
    + 'static
{
    /// Every step, in order.
    const ALL: &'static [Self];
    /// The step's name (its function's name).
    fn name(self) -> &'static str;
    /// Its position, from 0.
    fn index(self) -> usize;
    /// The step at `index`.
    fn from_index(index: usize) -> Option<Self> {
        Self::ALL.get(index).copied()
    }
    /// The step after this one.
    fn next(self) -> Option<Self> {
        Self::from_index(self.index() + 1)
    }
    /// The step before this one.
    fn prev(self) -> Option<Self> {
        self.index().checked_sub(1).and_then(Self::from_index)
    }
    /// The first step.
    fn first() -> Self {
        Self::ALL[0]
    }
    /// The last step.
    fn last() -> Self {
        Self::ALL[Self::ALL.len() - 1]
    }
}

/// A pipeline of steps, implemented by `#[pipeline]`.
///
/// Step outputs travel as JSON text: `run_step` receives the previous step's
/// output (or `None` for the first step) and returns its own.
pub trait Pipeline: Send + Sync + 'static {
    /// The job input: the fixed input boundary.
    type Input: Serialize + DeserializeOwned + Send + Sync + 'static;

    /// The step enum.
    type Step: Steps;

    /// The pipeline's name (jobs record it; workers lease by it).
    const NAME: &'static str;

    /// The steps, in order.
    const STEPS: &'static [StepSpec];

    /// The pipeline's options.
    fn options() -> PipelineOptions {
        PipelineOptions::default()
    }

    /// The resource template as declared (`#[pipeline(resource = "...")]`),
    /// published in the spec so tools that cannot run this code compute the
    /// same resource from the input's JSON.
    const RESOURCE_TEMPLATE: Option<&'static str> = None;

    /// The input-key template as declared, published in the spec.
    const INPUT_KEY_TEMPLATE: Option<&'static str> = None;

    /// The rate limiter's key, built from the input
    /// (`#[pipeline(limiter = "shop-api:{shop}")]`).
    fn limiter_key(_input: &Self::Input) -> Option<String> {
        None
    }

    /// The JSON Schema of the input type, published in the spec and checked on
    /// enqueues that do not come from Rust. `#[pipeline]` publishes the input
    /// type's `schemars::JsonSchema` (re-exported as `leasehold::schemars`),
    /// and `None` with `#[pipeline(input_schema = false)]`.
    fn input_schema() -> Option<serde_json::Value> {
        None
    }

    /// The pipeline's schedules (`#[pipeline(schedule(...))]`): every worker
    /// serving it registers them on start and runs their ticks. An error
    /// (a bad zone, a bad static input) fails the worker's build.
    fn schedules() -> Result<Vec<crate::schedule::Schedule>, crate::schedule::ScheduleError> {
        Ok(Vec::new())
    }

    /// The pipeline's notice hook (`#[pipeline(notify(...))]`): run when a
    /// job ends FAILED, goes STALE, or a schedule starts failing.
    fn notify() -> Option<crate::notify::Notify> {
        None
    }

    /// The resource whose lock the job takes, built from the input.
    fn resource_key(_input: &Self::Input) -> Option<String> {
        None
    }

    /// The idempotency key, built from the input.
    fn input_key(_input: &Self::Input) -> Option<String> {
        None
    }

    /// Runs step number `index` (0-based) with the previous step's output.
    fn run_step<'a>(
        &'a self,
        index: usize,
        ctx: &'a StepContext,
        input: &'a Self::Input,
        previous: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, StepError>>;

    /// Runs after a failed or cancelled attempt, or after a STALE job is resolved.
    fn cleanup<'a>(
        &'a self,
        _ctx: &'a CleanupContext,
        _input: &'a Self::Input,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// The spec of pipeline `P`.
pub fn spec_of<P: Pipeline>() -> PipelineSpec {
    let options = P::options();
    let mut spec = PipelineSpec {
        name: P::NAME.to_owned(),
        queue: Some(queue_of::<P>().to_owned()),
        steps: P::STEPS.iter().map(|s| s.name.to_owned()).collect(),
        max_attempts: max_attempts_of(&options, P::STEPS),
        stale_lock: options.stale_lock,
        resource_template: P::RESOURCE_TEMPLATE.map(str::to_owned),
        input_key_template: P::INPUT_KEY_TEMPLATE.map(str::to_owned),
        input_schema: P::input_schema(),
        flow: crate::flow::FlowSpec::of(&options.flow),
        version: String::new(),
    };
    spec.version = spec.digest();
    spec
}

/// The name of the queue a pipeline's jobs go to.
pub fn queue_of<P: Pipeline>() -> &'static str {
    P::options().queue.unwrap_or(P::NAME)
}
