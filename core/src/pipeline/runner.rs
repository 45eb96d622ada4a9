//! A pipeline with its input type erased, so one worker can serve many.

use std::any::Any;
use std::sync::Arc;

use super::{
    BoxFuture, CleanupContext, Pipeline, PipelineOptions, PipelineSpec, StepContext, StepError,
    StepSpec,
};

/// A decoded job input.
pub(crate) type AnyInput = dyn Any + Send + Sync;

/// What the worker needs of a pipeline.
pub(crate) trait Runner: Send + Sync + 'static {
    /// The pipeline's name.
    fn name(&self) -> &'static str;
    /// Its steps, in order.
    fn steps(&self) -> &'static [StepSpec];
    /// Its options (queue, lease TTL, retry policy).
    fn options(&self) -> PipelineOptions;
    /// What the queue registers of it.
    fn spec(&self) -> PipelineSpec;
    /// Its declared schedules.
    fn schedules(&self) -> Result<Vec<crate::schedule::Schedule>, crate::schedule::ScheduleError>;
    /// Its declared notice hook.
    fn notify(&self) -> Option<crate::notify::Notify> {
        None
    }
    /// Decodes a job's input (JSON text).
    fn decode(&self, input: &str) -> Result<Box<AnyInput>, String>;
    /// Runs step `index` on `input`, given the previous step's output.
    fn run_step<'a>(
        &'a self,
        index: usize,
        ctx: &'a StepContext,
        input: &'a AnyInput,
        previous: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, StepError>>;
    /// Runs the pipeline's cleanup hook.
    fn cleanup<'a>(&'a self, ctx: &'a CleanupContext, input: &'a AnyInput) -> BoxFuture<'a, ()>;
}

/// A pipeline as a [`Runner`].
pub(crate) struct PipelineRunner<P>(pub(crate) Arc<P>);

impl<P: Pipeline> Runner for PipelineRunner<P> {
    fn name(&self) -> &'static str {
        P::NAME
    }

    fn steps(&self) -> &'static [StepSpec] {
        P::STEPS
    }

    fn options(&self) -> PipelineOptions {
        P::options()
    }

    fn spec(&self) -> PipelineSpec {
        crate::pipeline::spec_of::<P>()
    }

    fn schedules(&self) -> Result<Vec<crate::schedule::Schedule>, crate::schedule::ScheduleError> {
        P::schedules()
    }

    fn notify(&self) -> Option<crate::notify::Notify> {
        P::notify()
    }

    fn decode(&self, input: &str) -> Result<Box<AnyInput>, String> {
        serde_json::from_str::<P::Input>(input)
            .map(|i| Box::new(i) as Box<AnyInput>)
            .map_err(|e| format!("input does not match pipeline {}: {e}", P::NAME))
    }

    fn run_step<'a>(
        &'a self,
        index: usize,
        ctx: &'a StepContext,
        input: &'a AnyInput,
        previous: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, StepError>> {
        match input.downcast_ref::<P::Input>() {
            Some(input) => self.0.run_step(index, ctx, input, previous),
            None => Box::pin(async {
                Err(StepError::permanent("input of another pipeline").with_kind("input"))
            }),
        }
    }

    fn cleanup<'a>(&'a self, ctx: &'a CleanupContext, input: &'a AnyInput) -> BoxFuture<'a, ()> {
        match input.downcast_ref::<P::Input>() {
            Some(input) => self.0.cleanup(ctx, input),
            None => Box::pin(async {}),
        }
    }
}
