//! The enqueue contract: what a pipeline's published spec ([`PipelineSpec`])
//! makes every enqueue path apply when it cannot run the pipeline's Rust code
//! (the CLI, the HTTP endpoint, [`crate::Client::enqueue_json`], all through
//! [`crate::json_jobs::jobs_from_json`]): the input is
//! checked against the input type's JSON Schema (the error names the JSON path
//! of the offending value), the resource and input key are computed from the
//! pipeline's templates, and the job gets the pipeline's max attempts and STALE
//! lock policy. A pipeline no worker registered is refused unless the caller
//! says so and gives what the spec would have. What can be wrong with one job
//! asked for ([`JobProblem`], naming a [`ComputedKey`] given) is defined here,
//! beside the rules that find it; `json_jobs` reports it with the job's index.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::group::{Dependency, ParentFailure};
use crate::id::JobId;
use crate::job_spec::NewJob;
use crate::pipeline_spec::PipelineSpec;
use crate::template::KeyTemplate;

/// What a caller may add to (or, for an unregistered pipeline, must give
/// instead of) the pipeline's spec.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct EnqueueOptions {
    /// The queue; the pipeline's own (from its spec) when `None`.
    pub queue: Option<String>,
    /// Create a new job even when the input key's latest job SUCCEEDED.
    pub rerun: bool,
    /// Priority (higher first).
    pub priority: Option<u8>,
    /// Not leased before this much time has passed.
    pub delay: Option<Duration>,
    /// Overrides the pipeline's max attempts.
    pub max_attempts: Option<u32>,
    /// The job's id (a new one when `None`).
    pub id: Option<JobId>,
    /// The resource, for a pipeline without a resource template (one with a
    /// template computes it, and refuses one given).
    pub resource: Option<String>,
    /// The input key, for a pipeline without an input-key template.
    pub input_key: Option<String>,
    /// Enqueue for a pipeline no worker registered: `queue` must be given,
    /// and `resource` / `input_key` are taken as given.
    pub unregistered: bool,
    /// The group the job joins (see `Queue::create_group`).
    pub group: Option<String>,
    /// Parents the job waits for (jobs or groups) until they SUCCEEDED.
    pub depends_on: Vec<Dependency>,
    /// What a parent ending FAILED or CANCELLED does to the job (cancel it
    /// when `None`).
    pub on_parent_failure: Option<ParentFailure>,
}

impl EnqueueOptions {
    /// Options with nothing set.
    pub fn new() -> Self {
        Self::default()
    }
}

/// A pipeline's spec made ready to check many inputs (a backfill): its schema
/// compiled and its templates parsed once.
pub struct Contract {
    spec: PipelineSpec,
    #[cfg(feature = "validate")]
    validator: Option<jsonschema::Validator>,
    resource: Option<KeyTemplate>,
    input_key: Option<KeyTemplate>,
    limiter: Option<KeyTemplate>,
}

impl std::fmt::Debug for Contract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Contract")
            .field("pipeline", &self.spec.name)
            .field("schema_checked", &self.unchecked_note().is_none())
            .finish_non_exhaustive()
    }
}

/// The error for a bad part of the spec itself (a worker published it).
fn bad_spec(spec: &PipelineSpec, what: &str, problem: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!(
        "the published spec of pipeline {} has a bad {what}: {problem}",
        spec.name
    ))
}

impl Contract {
    /// Prepares `spec`'s checks.
    pub fn new(spec: PipelineSpec) -> Result<Self> {
        #[cfg(feature = "validate")]
        let validator = match &spec.input_schema {
            Some(schema) => Some(
                jsonschema::validator_for(schema)
                    .map_err(|e| bad_spec(&spec, "input schema", e))?,
            ),
            None => None,
        };
        let template = |t: &Option<String>, what: &str| {
            t.as_deref()
                .map(KeyTemplate::parse)
                .transpose()
                .map_err(|e| bad_spec(&spec, what, e))
        };
        let resource = template(&spec.resource_template, "resource template")?;
        let input_key = template(&spec.input_key_template, "input key template")?;
        let limiter = template(
            &spec.flow.as_ref().and_then(|f| f.limiter_template.clone()),
            "limiter template",
        )?;
        Ok(Contract {
            spec,
            #[cfg(feature = "validate")]
            validator,
            resource,
            input_key,
            limiter,
        })
    }

    /// The spec.
    pub fn spec(&self) -> &PipelineSpec {
        &self.spec
    }

    /// Why inputs are not checked against a schema, when they are not: the
    /// pipeline publishes none (`#[pipeline(input_schema = false)]`, or a
    /// process pipeline without `input_schema`). Enqueue paths print it.
    pub fn unchecked_note(&self) -> Option<String> {
        #[cfg(feature = "validate")]
        if self.validator.is_some() {
            return None;
        }
        Some(match &self.spec.input_schema {
            None => format!(
                "input not checked: pipeline {} publishes no input schema",
                self.spec.name
            ),
            Some(_) => format!(
                "input not checked: pipeline {} publishes an input schema, but this program was \
                 built without leasehold's `validate` feature",
                self.spec.name
            ),
        })
    }

    /// Checks `input` (JSON text) against the input schema: the error names
    /// the JSON path of the first offending value (`/window/start`; `/` for
    /// the whole input). Without the `validate` feature nothing is checked
    /// ([`Contract::unchecked_note`] says so).
    #[cfg(not(feature = "validate"))]
    pub fn check_input(&self, _input: &serde_json::Value) -> Result<()> {
        Ok(())
    }

    /// Checks `input` (JSON text) against the input schema: the error names
    /// the JSON path of the first offending value (`/window/start`; `/` for
    /// the whole input).
    #[cfg(feature = "validate")]
    pub fn check_input(&self, input: &serde_json::Value) -> Result<()> {
        let Some(validator) = &self.validator else {
            return Ok(());
        };
        if let Some(e) = validator.iter_errors(input).next() {
            let path = e.instance_path.to_string();
            return Err(Error::InvalidInput {
                pipeline: self.spec.name.clone(),
                path: if path.is_empty() { "/".into() } else { path },
                problem: e.to_string(),
            });
        }
        Ok(())
    }

    /// The first key `options` gives that the pipeline computes from its input
    /// (its published template), as the problem every enqueue path answers
    /// with; `None` when there is none. The one rule for a given resource or
    /// input key: taken as given when the pipeline has no template for it,
    /// refused when it has one.
    pub fn computed_given(&self, options: &EnqueueOptions) -> Option<JobProblem> {
        [
            (&options.resource, &self.resource, ComputedKey::Resource),
            (&options.input_key, &self.input_key, ComputedKey::InputKey),
        ]
        .into_iter()
        .find_map(|(given, template, key)| match (given, template) {
            (Some(_), Some(t)) => Some(JobProblem::Computed {
                pipeline: self.spec.name.clone(),
                key,
                template: t.as_str().to_owned(),
            }),
            _ => None,
        })
    }

    /// The job for `input` (JSON text) with `options`: checked, its resource
    /// and input key computed from the templates, the spec's policies applied.
    pub fn job(&self, input: &str, options: &EnqueueOptions) -> Result<NewJob> {
        let value: serde_json::Value =
            serde_json::from_str(input).map_err(|e| Error::InvalidInput {
                pipeline: self.spec.name.clone(),
                path: "/".into(),
                problem: format!("not JSON: {e}"),
            })?;
        self.check_input(&value)?;
        if let Some(problem) = self.computed_given(options) {
            return Err(problem.into());
        }
        let render = |t: &KeyTemplate, what: &str| {
            t.render(&value).map_err(|e| Error::InvalidInput {
                pipeline: self.spec.name.clone(),
                path: "/".into(),
                problem: format!("its {what}: {e}"),
            })
        };
        let mut job = NewJob::from_json(&self.spec.name, input)
            .max_attempts(self.spec.max_attempts)
            .stale_lock(self.spec.stale_lock);
        // from the templates; a pipeline without one takes what the caller gives
        match (&self.resource, &options.resource) {
            (Some(t), _) => job = job.resource(render(t, "resource")?),
            (None, Some(r)) => job = job.resource(r.clone()),
            (None, None) => {}
        }
        match (&self.input_key, &options.input_key) {
            (Some(t), _) => job = job.input_key(render(t, "input key")?),
            (None, Some(k)) => job = job.input_key(k.clone()),
            (None, None) => {}
        }
        if let Some(flow) = &self.spec.flow {
            let limiter = self
                .limiter
                .as_ref()
                .map(|t| render(t, "limiter"))
                .transpose()?;
            let (resource, gates) =
                flow.gates(&self.spec.name, job.resource.as_deref(), limiter.as_deref())?;
            job.resource = resource;
            job = job.flow(gates);
        }
        Ok(apply(job, options))
    }
}

/// A key the pipeline computes from its input (its published template).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComputedKey {
    /// The resource.
    Resource,
    /// The input key.
    InputKey,
}

impl ComputedKey {
    /// Its name in words (`resource`, `input key`).
    pub fn words(self) -> &'static str {
        match self {
            ComputedKey::Resource => "resource",
            ComputedKey::InputKey => "input key",
        }
    }

    /// Its field name in JSON (`resource`, `input_key`).
    pub fn field(self) -> &'static str {
        match self {
            ComputedKey::Resource => "resource",
            ComputedKey::InputKey => "input_key",
        }
    }
}

/// What is wrong with one job asked for.
#[derive(Debug, thiserror::Error)]
pub enum JobProblem {
    /// A key the pipeline computes from its input was given.
    #[error("invalid argument: pipeline {pipeline} computes its {} from its input (template {template:?}); it cannot be given", key.words())]
    Computed {
        /// The pipeline.
        pipeline: String,
        /// Which key.
        key: ComputedKey,
        /// The template that computes it.
        template: String,
    },
    /// The input does not fit (`Error::InvalidInput`), an option is bad
    /// (`Error::InvalidArgument`), or the job as built is refused.
    #[error(transparent)]
    Job(#[from] Error),
}

impl From<JobProblem> for Error {
    fn from(p: JobProblem) -> Self {
        match p {
            JobProblem::Computed { .. } => {
                let text = p.to_string();
                let text = text.strip_prefix("invalid argument: ").unwrap_or(&text);
                Error::InvalidArgument(text.to_owned())
            }
            JobProblem::Job(e) => e,
        }
    }
}

/// The job for a pipeline no worker registered: everything as the caller gave it.
pub fn unregistered_job(pipeline: &str, input: &str, options: &EnqueueOptions) -> Result<NewJob> {
    serde_json::from_str::<serde::de::IgnoredAny>(input).map_err(|e| Error::InvalidInput {
        pipeline: pipeline.to_owned(),
        path: "/".into(),
        problem: format!("not JSON: {e}"),
    })?;
    let mut job = NewJob::from_json(pipeline, input);
    if let Some(r) = &options.resource {
        job = job.resource(r.clone());
    }
    if let Some(k) = &options.input_key {
        job = job.input_key(k.clone());
    }
    Ok(apply(job, options))
}

/// The caller's options on top of the job.
fn apply(mut job: NewJob, options: &EnqueueOptions) -> NewJob {
    if let Some(p) = options.priority {
        job = job.priority(p);
    }
    if let Some(d) = options.delay {
        job = job.delay(d);
    }
    if let Some(n) = options.max_attempts {
        job = job.max_attempts(n);
    }
    if let Some(id) = &options.id {
        job = job.id(id.clone());
    }
    if let Some(g) = &options.group {
        job = job.group(g);
    }
    for parent in &options.depends_on {
        job = job.depends_on(parent.clone());
    }
    if let Some(policy) = options.on_parent_failure {
        job = job.on_parent_failure(policy);
    }
    job.rerun(options.rerun)
}
