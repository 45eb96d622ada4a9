//! What a caller gives to create a job ([`NewJob`]) or a group ([`NewGroup`]).

use std::time::Duration;

use serde::Serialize;

use crate::error::Error;
use crate::group::{check_group_name, Dependency, GroupPolicy, ParentFailure};
use crate::id::JobId;
use crate::name::check_name;
use crate::record::StaleLock;

/// A job to enqueue.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct NewJob {
    /// The id to use; a new time-sortable id when `None`.
    pub id: Option<JobId>,
    /// Pipeline name.
    pub pipeline: String,
    /// The fixed input boundary, as JSON text.
    pub input: String,
    /// Idempotency key: while a job with this key is not terminal, enqueue returns it instead.
    pub input_key: Option<String>,
    /// Resource to lock while the job holds its lease.
    pub resource: Option<String>,
    /// Higher runs first.
    pub priority: u8,
    /// Not leased before this much time has passed.
    pub delay: Duration,
    /// Attempts allowed to automatic retries.
    pub max_attempts: u32,
    /// What happens to the lock when the job goes STALE.
    pub stale_lock: StaleLock,
    /// Create a new job even when the input key's latest job SUCCEEDED (a
    /// re-run, linked to that job); without it, that job is the answer.
    pub rerun: bool,
    /// The group the job joins (it must exist and be open: see `Queue::create_group`).
    pub group: Option<String>,
    /// Jobs and groups that must SUCCEED before this job may be leased: it
    /// waits, QUEUED, out of every ready set until then. They must exist.
    pub depends_on: Vec<Dependency>,
    /// What a parent ending FAILED or CANCELLED does to this job.
    pub on_parent_failure: ParentFailure,
    /// The flow-control gates its lease must pass (the `flow` field, see
    /// [`crate::flow::FlowSpec::gates`]); `None` for a job under none.
    pub flow: Option<String>,
    /// The W3C `traceparent` of the trace that enqueued the job: the job's
    /// spans join that trace (the `otel` feature fills it in from the current
    /// span when it is `None`); stored only when set.
    pub traceparent: Option<String>,
}

impl NewJob {
    /// A job of `pipeline` with `input` serialised to JSON.
    pub fn new(pipeline: impl Into<String>, input: &impl Serialize) -> Result<Self, Error> {
        let input = serde_json::to_string(input)
            .map_err(|e| Error::InvalidArgument(format!("input is not serialisable: {e}")))?;
        Ok(Self::from_json(pipeline, input))
    }

    /// A job of `pipeline` with input already in JSON text (checked at enqueue).
    pub fn from_json(pipeline: impl Into<String>, input: impl Into<String>) -> Self {
        NewJob {
            id: None,
            pipeline: pipeline.into(),
            input: input.into(),
            input_key: None,
            resource: None,
            priority: 0,
            delay: Duration::ZERO,
            max_attempts: 1,
            stale_lock: StaleLock::Hold,
            rerun: false,
            group: None,
            depends_on: Vec::new(),
            on_parent_failure: ParentFailure::Cancel,
            flow: None,
            traceparent: None,
        }
    }

    /// Sets the idempotency key.
    #[must_use]
    pub fn input_key(mut self, key: impl Into<String>) -> Self {
        self.input_key = Some(key.into());
        self
    }

    /// Sets the resource to lock.
    #[must_use]
    pub fn resource(mut self, resource: impl Into<String>) -> Self {
        self.resource = Some(resource.into());
        self
    }

    /// Sets the priority (higher first).
    #[must_use]
    pub fn priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }

    /// Delays the job.
    #[must_use]
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Sets the attempts allowed to automatic retries (at least 1).
    #[must_use]
    pub fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// Sets the STALE lock policy.
    #[must_use]
    pub fn stale_lock(mut self, policy: StaleLock) -> Self {
        self.stale_lock = policy;
        self
    }

    /// Asks for a re-run: a new job even when the input key's latest job
    /// SUCCEEDED (the new job names it as `previous`).
    #[must_use]
    pub fn rerun(mut self, rerun: bool) -> Self {
        self.rerun = rerun;
        self
    }

    /// Makes the job a child of group `name` (created and still open).
    #[must_use]
    pub fn group(mut self, name: impl Into<String>) -> Self {
        self.group = Some(name.into());
        self
    }

    /// Makes the job wait until `parent` (a job, or a whole group) SUCCEEDED.
    #[must_use]
    pub fn depends_on(mut self, parent: impl Into<Dependency>) -> Self {
        self.depends_on.push(parent.into());
        self
    }

    /// Sets what a parent ending FAILED or CANCELLED does (cancel this job, the
    /// default, or run it anyway).
    #[must_use]
    pub fn on_parent_failure(mut self, policy: ParentFailure) -> Self {
        self.on_parent_failure = policy;
        self
    }

    /// Sets the flow-control gates (see [`crate::flow::FlowSpec::gates`]).
    #[must_use]
    pub fn flow(mut self, flow: Option<String>) -> Self {
        self.flow = flow;
        self
    }

    /// Sets the trace context the job's spans join: a W3C `traceparent`
    /// (`00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`).
    #[must_use]
    pub fn traceparent(mut self, traceparent: impl Into<String>) -> Self {
        self.traceparent = Some(traceparent.into());
        self
    }

    /// Sets the id.
    #[must_use]
    pub fn id(mut self, id: JobId) -> Self {
        self.id = Some(id);
        self
    }

    /// Checks everything a script cannot check cheaply (`enqueue` does it for
    /// every job before the first write; a caller may check each job of a batch
    /// first to say which one is bad).
    pub fn validate(&self) -> Result<(), Error> {
        check_name("pipeline name", &self.pipeline)?;
        if let Some(id) = &self.id {
            // an id is checked when it is built; checked again here because the
            // job is written under it: nothing may be written for a bad one
            JobId::parse(id.as_str())?;
        }
        if let Some(resource) = &self.resource {
            check_name("resource", resource)?;
        }
        if let Some(flow) = &self.flow {
            if flow.is_empty() || flow.chars().any(|c| c == '{' || c == '}' || c.is_control()) {
                return Err(Error::InvalidArgument(format!(
                    "flow {flow:?} lists no gates"
                )));
            }
        }
        if let Some(tp) = &self.traceparent {
            crate::trace::check_traceparent(tp)?;
        }
        if let Some(key) = &self.input_key {
            if key.is_empty() {
                return Err(Error::InvalidArgument("input key is empty".into()));
            }
        }
        if self.max_attempts == 0 {
            return Err(Error::InvalidArgument(
                "max_attempts must be at least 1".into(),
            ));
        }
        if let Some(group) = &self.group {
            check_group_name(group)?;
        }
        for parent in &self.depends_on {
            if let Dependency::Group(g) = parent {
                check_group_name(g)?;
            }
        }
        serde_json::from_str::<serde::de::IgnoredAny>(&self.input)
            .map_err(|e| Error::InvalidArgument(format!("input is not JSON: {e}")))?;
        Ok(())
    }
}

impl NewJob {
    /// Whether the job joins a group or waits for parents (enqueue then sends the link values).
    pub(crate) fn has_links(&self) -> bool {
        self.group.is_some() || !self.depends_on.is_empty()
    }

    /// Whether two jobs have the same links (one enqueue call carries one set).
    pub(crate) fn same_links(&self, other: &NewJob) -> bool {
        self.group == other.group
            && self.depends_on == other.depends_on
            && (!self.has_links() || self.on_parent_failure == other.on_parent_failure)
    }
}

/// A group to create.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct NewGroup {
    /// Its name, unique in the queue.
    pub name: String,
    /// When the completion job runs.
    pub policy: GroupPolicy,
    /// The job enqueued once, by the script that settles the last child (its
    /// input key, resource, delay and links are not used).
    pub completion: Option<NewJob>,
}

impl NewGroup {
    /// A group without a completion job, policy all-succeeded.
    pub fn new(name: impl Into<String>) -> Self {
        NewGroup {
            name: name.into(),
            policy: GroupPolicy::AllSucceeded,
            completion: None,
        }
    }

    /// Sets the policy.
    #[must_use]
    pub fn policy(mut self, policy: GroupPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Sets the completion job.
    #[must_use]
    pub fn completion(mut self, job: NewJob) -> Self {
        self.completion = Some(job);
        self
    }
}
