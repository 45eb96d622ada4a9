//! JSON to jobs: the one way every enqueue from outside Rust's types
//! ([`crate::Client::enqueue_json`], the CLI's `enqueue`, the dashboard's HTTP
//! endpoint) turns the JSON inputs of one job or a batch, each with its
//! [`EnqueueOptions`], into [`NewJob`]s: under the pipeline's published
//! [`Contract`], or as given for a pipeline no worker registered. Every job
//! is built and checked before the caller writes anything; the first bad one
//! is answered with its index and a typed problem, and the result says
//! whether the inputs were checked against a schema (and why not).

use crate::contract::{unregistered_job, Contract, EnqueueOptions};
use crate::job_spec::NewJob;

/// What is wrong with one job, and which computed key was given: defined
/// beside the [`Contract`] that finds them, read here as part of [`BadJob`].
pub use crate::contract::{ComputedKey, JobProblem};

/// The terms the jobs are built under.
#[derive(Debug, Clone, Copy)]
pub enum Terms<'c> {
    /// The contract the pipeline's worker published.
    Published(&'c Contract),
    /// No worker registered the pipeline (named here): its resource and
    /// input key are taken as the options give them, the input unchecked.
    Unregistered(&'c str),
}

/// One job asked for: its input as JSON text, and its options.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JsonJob {
    /// The input, as JSON text.
    pub input: String,
    /// Its options (the queue among them is not read here).
    pub options: EnqueueOptions,
}

impl JsonJob {
    /// A job of `input` (JSON text) with `options`.
    pub fn new(input: impl Into<String>, options: EnqueueOptions) -> Self {
        JsonJob {
            input: input.into(),
            options,
        }
    }
}

/// The jobs built, in the order asked.
#[derive(Debug, Clone)]
pub struct JsonJobs {
    /// One per job asked for.
    pub jobs: Vec<NewJob>,
    /// Why the inputs were not checked against an input schema, when they
    /// were not (no schema published, the `validate` feature off, or an
    /// unregistered pipeline): callers say it to whoever enqueued.
    pub unchecked: Option<String>,
}

impl JsonJobs {
    /// Whether the inputs were checked against the published input schema.
    pub fn input_checked(&self) -> bool {
        self.unchecked.is_none()
    }

    /// The first job: the only one of a request of one.
    pub fn into_first(self) -> Option<NewJob> {
        self.jobs.into_iter().next()
    }
}

/// The first job asked for that could not be built: its index and problem.
#[derive(Debug, thiserror::Error)]
#[error("job {index}: {problem}")]
pub struct BadJob {
    /// Its index among the jobs asked for.
    pub index: usize,
    /// What is wrong with it.
    pub problem: JobProblem,
}

/// The jobs of `asked` under `terms`: each input parsed (and checked against
/// the published schema, when there is one and the `validate` feature is on),
/// its resource and input key computed from the templates or taken as given,
/// the pipeline's policies and then the job's options applied, and the job
/// validated. All or nothing: the first bad job is the error.
pub fn jobs_from_json(terms: Terms<'_>, asked: &[JsonJob]) -> Result<JsonJobs, BadJob> {
    let mut jobs = Vec::with_capacity(asked.len());
    for (index, one) in asked.iter().enumerate() {
        let job = job_from_json(terms, one).map_err(|problem| BadJob { index, problem })?;
        jobs.push(job);
    }
    let unchecked = match terms {
        Terms::Published(contract) => contract.unchecked_note(),
        Terms::Unregistered(pipeline) => Some(format!(
            "input not checked: pipeline {pipeline} is enqueued unregistered"
        )),
    };
    Ok(JsonJobs { jobs, unchecked })
}

/// One job of [`jobs_from_json`].
fn job_from_json(terms: Terms<'_>, asked: &JsonJob) -> Result<NewJob, JobProblem> {
    let options = &asked.options;
    let job = match terms {
        Terms::Published(contract) => {
            // a key is refused only where the pipeline has a template for it
            if let Some(problem) = contract.computed_given(options) {
                return Err(problem);
            }
            contract.job(&asked.input, options)?
        }
        Terms::Unregistered(pipeline) => unregistered_job(pipeline, &asked.input, options)?,
    };
    job.validate()?;
    Ok(job)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::pipeline_spec::PipelineSpec;

    fn contract(resource_template: Option<&str>) -> Contract {
        let mut spec: PipelineSpec = serde_json::from_value(serde_json::json!({
            "name": "load", "steps": [], "max_attempts": 3, "stale_lock": "hold",
        }))
        .expect("a minimal spec");
        spec.resource_template = resource_template.map(str::to_owned);
        Contract::new(spec).expect("a contract")
    }

    #[test]
    fn a_computed_key_given_is_refused_with_its_index() {
        let c = contract(Some("shop:{shop}"));
        let mut o = EnqueueOptions::new();
        let good = JsonJob::new(r#"{"shop": "a"}"#, o.clone());
        o.resource = Some("shop:z".into());
        let bad = JsonJob::new(r#"{"shop": "a"}"#, o);
        let e = jobs_from_json(Terms::Published(&c), &[good.clone(), bad]).unwrap_err();
        assert_eq!(e.index, 1);
        assert!(matches!(
            e.problem,
            JobProblem::Computed {
                key: ComputedKey::Resource,
                ..
            }
        ));
        let built = jobs_from_json(Terms::Published(&c), &[good]).unwrap();
        assert_eq!(built.jobs[0].resource.as_deref(), Some("shop:a"));
    }

    #[test]
    fn a_key_without_a_template_is_taken_as_given() {
        let c = contract(Some("shop:{shop}"));
        let mut o = EnqueueOptions::new();
        o.input_key = Some("k:1".into());
        let built =
            jobs_from_json(Terms::Published(&c), &[JsonJob::new(r#"{"shop": "a"}"#, o)]).unwrap();
        assert_eq!(built.jobs[0].input_key.as_deref(), Some("k:1"));
        assert_eq!(built.jobs[0].resource.as_deref(), Some("shop:a"));
        let mut o = EnqueueOptions::new();
        o.resource = Some("box:1".into());
        let built =
            jobs_from_json(Terms::Published(&contract(None)), &[JsonJob::new("{}", o)]).unwrap();
        assert_eq!(built.jobs[0].resource.as_deref(), Some("box:1"));
    }

    #[test]
    fn a_published_schema_is_checked_only_with_the_validate_feature() {
        let mut spec = contract(None).spec().clone();
        spec.input_schema = Some(serde_json::json!({"type": "object"}));
        let c = Contract::new(spec).unwrap();
        let one = |input: &str| JsonJob::new(input, EnqueueOptions::new());
        let built = jobs_from_json(Terms::Published(&c), &[one("{}")]).unwrap();
        assert_eq!(built.input_checked(), cfg!(feature = "validate"));
        let wrong = jobs_from_json(Terms::Published(&c), &[one("{}"), one("3")]);
        if cfg!(feature = "validate") {
            assert_eq!(wrong.unwrap_err().index, 1);
        } else {
            let note = wrong.unwrap().unchecked.unwrap();
            assert!(
                note.contains("without leasehold's `validate` feature"),
                "{note}"
            );
        }
    }

    #[test]
    fn unregistered_jobs_say_they_were_not_checked() {
        let mut o = EnqueueOptions::new();
        o.group = Some("g".into());
        o.depends_on = vec!["group:h".parse().unwrap()];
        let built = jobs_from_json(Terms::Unregistered("adhoc"), &[JsonJob::new("1", o)]).unwrap();
        assert!(!built.input_checked());
        assert_eq!(built.jobs[0].group.as_deref(), Some("g"));
        assert_eq!(built.jobs[0].depends_on.len(), 1);
        let e = jobs_from_json(
            Terms::Unregistered("adhoc"),
            &[JsonJob::new("{", EnqueueOptions::new())],
        )
        .unwrap_err();
        assert!(matches!(
            e.problem,
            JobProblem::Job(Error::InvalidInput { .. })
        ));
    }
}
