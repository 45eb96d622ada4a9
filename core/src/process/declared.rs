//! A pipeline whose steps are process steps, declared at run time (by a
//! pipelines file, or by code) instead of with `#[pipeline]`: the worker
//! serves it like any other, and it publishes the same spec.

use std::sync::Arc;

use serde_json::Value;

use super::ProcessStep;
use crate::error::{Error, Result};
use crate::flow::Rate;
use crate::pipeline::runner::{AnyInput, Runner};
use crate::pipeline::RetryPolicy;
use crate::pipeline::{
    max_attempts_of, BoxFuture, CleanupContext, CleanupReason, PipelineOptions, PipelineSpec,
    StepContext, StepError, StepSpec,
};
use crate::schedule::{Schedule, ScheduleError};
use crate::template::KeyTemplate;

/// A pipeline of process steps, built at run time.
///
/// ```
/// use leasehold_core::process::{DeclaredPipeline, ProcessStep};
///
/// let pipeline = DeclaredPipeline::new("nightly")
///     .step("fetch", ProcessStep::new("python3").arg("fetch.py"))
///     .step("load", ProcessStep::new("./load.sh"))
///     .resource_template("source:{source}")
///     .unwrap();
/// assert_eq!(pipeline.spec().steps, ["fetch", "load"]);
/// ```
#[derive(Debug, Clone)]
pub struct DeclaredPipeline {
    name: String,
    steps: Vec<(StepSpec, ProcessStep)>,
    options: PipelineOptions,
    resource: Option<KeyTemplate>,
    input_key: Option<KeyTemplate>,
    input_schema: Option<Value>,
    schedules: Vec<Schedule>,
    cleanup: Option<ProcessStep>,
    notify: Option<crate::notify::Notify>,
}

/// A string kept for the life of the process (a declared pipeline's names
/// are read once, when the worker is configured): the one place a declared
/// pipeline's queue, step names, rate and limiter become `'static`, each once.
fn forever(text: &str) -> &'static str {
    Box::leak(text.to_owned().into_boxed_str())
}

impl DeclaredPipeline {
    /// Pipeline `name`, with no steps yet and the default options.
    pub fn new(name: &str) -> Self {
        DeclaredPipeline {
            name: name.to_owned(),
            steps: Vec::new(),
            options: PipelineOptions::new(),
            resource: None,
            input_key: None,
            input_schema: None,
            schedules: Vec::new(),
            cleanup: None,
            notify: None,
        }
    }

    /// Adds step `name`, running `command`.
    #[must_use]
    pub fn step(self, name: &str, command: ProcessStep) -> Self {
        self.step_with(StepSpec::new(forever(name)), command)
    }

    /// Adds a step with its spec (its own retry policy); a time limit in the
    /// spec is ignored: give it to the [`ProcessStep`], which cuts the child
    /// off with SIGTERM and its grace instead of dropping it.
    #[must_use]
    pub fn step_with(mut self, mut spec: StepSpec, command: ProcessStep) -> Self {
        let command = match spec.timeout.take() {
            Some(limit) if command.time_limit().is_none() => command.timeout(limit),
            _ => command,
        };
        self.steps.push((spec, command));
        self
    }

    /// Sets the options (queue, lease TTL, retry policy, STALE lock policy, flow control).
    #[must_use]
    pub fn options(mut self, options: PipelineOptions) -> Self {
        self.options = options;
        self
    }

    /// Sets the queue (default: the pipeline's name).
    #[must_use]
    pub fn queue(mut self, queue: &str) -> Self {
        self.options.queue = Some(forever(queue));
        self
    }

    /// Adds step `name`, running `command`, with its own retry policy.
    #[must_use]
    pub fn step_retrying(self, name: &str, retry: RetryPolicy, command: ProcessStep) -> Self {
        self.step_with(StepSpec::new(forever(name)).retry(retry), command)
    }

    /// Sets the start rate of the flow control (`"10/s"`, already read).
    #[must_use]
    pub fn rate(mut self, rate: Rate) -> Self {
        self.options.flow.rate = Some(forever(&rate.to_string()));
        self
    }

    /// Sets the named rate limiter's key template (already read).
    #[must_use]
    pub fn limiter(mut self, template: &KeyTemplate) -> Self {
        self.options.flow.limiter = Some(forever(template.as_str()));
        self
    }

    /// Sets the resource template (`source:{source}`).
    pub fn resource_template(mut self, template: &str) -> Result<Self> {
        self.resource = Some(parse_template("resource", template)?);
        Ok(self)
    }

    /// Sets the input-key template.
    pub fn input_key_template(mut self, template: &str) -> Result<Self> {
        self.input_key = Some(parse_template("input key", template)?);
        Ok(self)
    }

    /// Sets the input's JSON Schema (checked on enqueues that do not come
    /// from Rust). With the `validate` feature a schema that does not compile
    /// is refused here; without it, it is published unchecked.
    pub fn input_schema(mut self, schema: Value) -> Result<Self> {
        #[cfg(feature = "validate")]
        jsonschema::validator_for(&schema).map_err(|e| {
            Error::InvalidArgument(format!("pipeline {}: bad input schema: {e}", self.name))
        })?;
        self.input_schema = Some(schema);
        Ok(self)
    }

    /// Adds a schedule (its jobs carry their window as the input's `window`).
    #[must_use]
    pub fn schedule(mut self, schedule: Schedule) -> Self {
        self.schedules.push(schedule);
        self
    }

    /// Sets the notice hook: run when a job ends FAILED, goes STALE, or a
    /// schedule starts failing (see [`crate::notify`]).
    #[must_use]
    pub fn notify(mut self, hook: crate::notify::Notify) -> Self {
        self.notify = Some(hook);
        self
    }

    /// The notice hook, if set.
    pub fn notify_hook(&self) -> Option<&crate::notify::Notify> {
        self.notify.as_ref()
    }

    /// Sets the cleanup command: run after a failed or cancelled attempt (and
    /// after an operator resolves a STALE job), with the job's input and
    /// `LEASEHOLD_CLEANUP_REASON` (`failed`, `cancelled`,
    /// `resolved_after_stale`), `LEASEHOLD_CLEANUP_DETAIL` (the error or
    /// reason), `LEASEHOLD_CUT_MID_STEP` (`1` when a step was cut off
    /// mid-way) and `LEASEHOLD_LAST_STEP` (the last completed step, if any).
    #[must_use]
    pub fn cleanup(mut self, command: ProcessStep) -> Self {
        self.cleanup = Some(command);
        self
    }

    /// The pipeline's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The queue its jobs go to.
    pub fn queue_name(&self) -> &str {
        self.options.queue.unwrap_or(&self.name)
    }

    /// The spec the worker publishes for it.
    pub fn spec(&self) -> PipelineSpec {
        let steps: Vec<StepSpec> = self.steps.iter().map(|(s, _)| *s).collect();
        let mut spec = PipelineSpec {
            name: self.name.clone(),
            queue: Some(self.queue_name().to_owned()),
            steps: steps.iter().map(|s| s.name.to_owned()).collect(),
            max_attempts: max_attempts_of(&self.options, &steps),
            stale_lock: self.options.stale_lock,
            resource_template: self.resource.as_ref().map(|t| t.as_str().to_owned()),
            input_key_template: self.input_key.as_ref().map(|t| t.as_str().to_owned()),
            input_schema: self.input_schema.clone(),
            flow: crate::flow::FlowSpec::of(&self.options.flow),
            version: String::new(),
        };
        spec.version = spec.digest();
        spec
    }

    /// Checks what the worker's build would refuse: no steps, a step named
    /// twice, a bad name, a schedule that cannot be evaluated.
    pub fn check(&self) -> Result<()> {
        crate::name::check_name("pipeline", &self.name)?;
        crate::name::check_name("queue", self.queue_name())?;
        for schedule in &self.schedules {
            schedule.check()?;
        }
        if self.steps.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "pipeline {} has no steps",
                self.name
            )));
        }
        for (i, (spec, _)) in self.steps.iter().enumerate() {
            if spec.name.is_empty() || spec.name.contains([',', '@']) {
                return Err(Error::InvalidArgument(format!(
                    "pipeline {}: step name {:?} must be non-empty without ',' or '@'",
                    self.name, spec.name
                )));
            }
            if self.steps[..i].iter().any(|(s, _)| s.name == spec.name) {
                return Err(Error::InvalidArgument(format!(
                    "pipeline {}: step {} is declared twice",
                    self.name, spec.name
                )));
            }
        }
        Ok(())
    }

    /// The pipeline as the worker runs it.
    pub(crate) fn into_runner(self) -> Result<Arc<dyn Runner>> {
        self.check()?;
        let spec = self.spec();
        let specs: Vec<StepSpec> = self.steps.iter().map(|(s, _)| *s).collect();
        let mut options = self.options;
        if options.queue.is_none() {
            options.queue = Some(forever(&self.name));
        }
        Ok(Arc::new(DeclaredRunner {
            name: forever(&self.name),
            specs: Box::leak(specs.into_boxed_slice()),
            commands: self.steps.into_iter().map(|(_, c)| c).collect(),
            spec,
            options,
            input_key: self.input_key,
            schedules: self.schedules,
            cleanup: self.cleanup,
        }))
    }
}

fn parse_template(what: &str, text: &str) -> Result<KeyTemplate> {
    KeyTemplate::parse(text)
        .map_err(|e| Error::InvalidArgument(format!("bad {what} template {text:?}: {e}")))
}

/// A declared pipeline's job input, decoded once per attempt: its text
/// exactly as enqueued (the child's input file) and its JSON value (the input
/// key, the arguments' placeholders and the window variables read it), so no
/// step parses the input again.
struct DeclaredInput {
    text: String,
    value: Value,
}

/// A declared pipeline as a [`Runner`].
struct DeclaredRunner {
    name: &'static str,
    specs: &'static [StepSpec],
    commands: Vec<ProcessStep>,
    spec: PipelineSpec,
    options: PipelineOptions,
    input_key: Option<KeyTemplate>,
    schedules: Vec<Schedule>,
    cleanup: Option<ProcessStep>,
}

impl Runner for DeclaredRunner {
    fn name(&self) -> &'static str {
        self.name
    }

    fn steps(&self) -> &'static [StepSpec] {
        self.specs
    }

    fn options(&self) -> PipelineOptions {
        self.options
    }

    fn spec(&self) -> PipelineSpec {
        self.spec.clone()
    }

    fn schedules(&self) -> std::result::Result<Vec<Schedule>, ScheduleError> {
        Ok(self.schedules.clone())
    }

    fn decode(&self, input: &str) -> std::result::Result<Box<AnyInput>, String> {
        // the child gets the input's text exactly as enqueued; the steps read
        // the value parsed here
        serde_json::from_str::<Value>(input)
            .map(|value| {
                Box::new(DeclaredInput {
                    text: input.to_owned(),
                    value,
                }) as Box<AnyInput>
            })
            .map_err(|e| format!("input of pipeline {} is not JSON: {e}", self.name))
    }

    fn run_step<'a>(
        &'a self,
        index: usize,
        ctx: &'a StepContext,
        input: &'a AnyInput,
        previous: Option<&'a str>,
    ) -> BoxFuture<'a, std::result::Result<String, StepError>> {
        Box::pin(async move {
            let Some(command) = self.commands.get(index) else {
                return Err(crate::pipeline::no_such_step(
                    self.name,
                    index,
                    self.commands.len(),
                ));
            };
            let Some(input) = input.downcast_ref::<DeclaredInput>() else {
                // not decoded by `decode` (never so): the lease's text, parsed by the step
                return command.run_keyed(ctx, previous, None).await;
            };
            let input_key = self
                .input_key
                .as_ref()
                .and_then(|template| template.render(&input.value).ok());
            command
                .run_inner(
                    ctx,
                    &input.text,
                    Some(&input.value),
                    previous,
                    input_key.as_deref(),
                    &[],
                )
                .await
        })
    }

    fn cleanup<'a>(&'a self, ctx: &'a CleanupContext, input: &'a AnyInput) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Some(command) = &self.cleanup else {
                return;
            };
            let (reason, detail) = match &ctx.reason {
                CleanupReason::Failed(error) => ("failed", error.to_string()),
                CleanupReason::Cancelled { reason } => ("cancelled", reason.clone()),
                CleanupReason::ResolvedAfterStale { reason } => {
                    ("resolved_after_stale", reason.clone())
                }
            };
            let extra = [
                ("LEASEHOLD_PIPELINE", self.name.to_owned()),
                ("LEASEHOLD_CLEANUP_REASON", reason.to_owned()),
                ("LEASEHOLD_CLEANUP_DETAIL", detail),
                (
                    "LEASEHOLD_CUT_MID_STEP",
                    u8::from(ctx.cut_mid_step).to_string(),
                ),
                (
                    "LEASEHOLD_LAST_STEP",
                    ctx.last_completed_step.unwrap_or("").to_owned(),
                ),
            ];
            // the hook runs after the attempt ended: no lease, nothing recorded in Redis
            let step = StepContext::detached(ctx.job.clone(), ctx.attempt, 0, "cleanup");
            let (text, value) = match input.downcast_ref::<DeclaredInput>() {
                Some(input) => (input.text.as_str(), Some(&input.value)),
                None => ("{}", None),
            };
            if let Err(error) = command
                .run_inner(&step, text, value, None, None, &extra)
                .await
            {
                tracing::warn!(job = %ctx.job, %error, "cleanup command failed");
            }
        })
    }
}
