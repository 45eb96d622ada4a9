//! The group scripts of a queue (`core/lua/lib/groups.lua`): creating,
//! sealing and cancelling a group and retrying its failed children, and the
//! refusals of the link values `enqueue` sends for a job's group and parents.
//! The model (names, policies, dependencies) is `crate::group`; the views of a
//! group are in `crate::inspect`.
//!
//! A group and its children live in one queue (one hash tag): every count is
//! updated by the script that moves the child, in the same call.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::group::{check_group_name, Dependency, GroupStatus};
use crate::id::JobId;
use crate::job_spec::NewGroup;
use crate::lease::RetryMode;
use crate::name::check_name;
use crate::queue::Queue;
use crate::wire::reply::Reply;
use crate::wire::scripts;

/// The first element of a refused enqueue's reply: no job id has braces, so
/// a refusal is never taken for a reply's first id (and a job named like a
/// refusal code is read as a job).
pub(crate) const REFUSED: &str = "{refused}";

/// Children a `group_cancel` or `group_retry` call acts on (one script call
/// per batch: each is bounded, and the group keeps the cursor between them).
const GROUP_BATCH: usize = 200;

/// What cancelling a group did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GroupCancelled {
    /// QUEUED children cancelled at once.
    pub cancelled: usize,
    /// LEASED or RUNNING children given a cancel request their holders honour.
    pub requested: usize,
    /// Children that ended meanwhile (nothing to do).
    pub skipped: usize,
}

impl Queue {
    /// The key of group `name` (its hash; the children, children's states and
    /// dependents keys add `:children`, `:states`, `:dependents`).
    pub(crate) fn group_key(&self, name: &str) -> String {
        format!("{}:group:{name}", self.keys.base())
    }

    pub(crate) fn groups_key(&self) -> String {
        format!("{}:groups", self.keys.base())
    }

    /// The queue's awaiting index: jobs QUEUED for their parents, not leasable.
    pub fn awaiting_key(&self) -> String {
        format!("{}:awaiting", self.keys.base())
    }

    /// Creates a group; false when one of that name exists (it is left as it is).
    pub async fn create_group(&self, group: &NewGroup, by: &str) -> Result<bool> {
        check_group_name(&group.name)?;
        let mut inv = self.invocation(&scripts::GROUP_CREATE);
        inv.key(self.group_key(&group.name)).key(self.groups_key());
        inv.arg(&group.name)
            .arg(JobId::new().as_str())
            .arg(group.policy.as_str());
        match &group.completion {
            Some(job) => {
                job.validate()?;
                check_name("pipeline name", &job.pipeline)?;
                inv.arg(job.id.clone().unwrap_or_default().as_str())
                    .arg(&job.pipeline)
                    .arg(&job.input)
                    .arg(job.priority)
                    .arg(job.max_attempts)
                    .arg(job.stale_lock.as_str());
            }
            None => {
                inv.arg("").arg("").arg("").arg("0").arg("1").arg("hold");
            }
        }
        inv.arg(by);
        // the completion job's flow gates and resource, as its pipeline's
        // contract gave them (crate::job_for, Contract::job)
        let completion = group.completion.as_ref();
        inv.arg(completion.and_then(|j| j.flow.as_deref()).unwrap_or(""))
            .arg(completion.and_then(|j| j.resource.as_deref()).unwrap_or(""));
        let mut reply = Reply::new("group_create", self.invoke(&inv).await?)?;
        match reply.text()?.as_str() {
            "CREATED" => Ok(true),
            "EXISTS" => Ok(false),
            other => Err(Error::Protocol {
                script: "group_create",
                detail: format!("unknown status {other:?}"),
            }),
        }
    }

    /// Seals a group (its last child was added): from now on it settles when
    /// its children have all ended. Returns its status after (a group whose
    /// children all ended already completes here).
    pub async fn seal_group(&self, name: &str, by: &str) -> Result<GroupStatus> {
        check_group_name(name)?;
        let mut inv = self.invocation(&scripts::GROUP_SEAL);
        inv.key(self.group_key(name));
        inv.arg(name).arg(by);
        let mut reply = Reply::new("group_seal", self.invoke(&inv).await?)?;
        let status = reply.text()?;
        match status.as_str() {
            "OK" | "ALREADY" => {
                let s = reply.text()?;
                GroupStatus::parse(&s).ok_or(Error::Protocol {
                    script: "group_seal",
                    detail: format!("unknown group status {s:?}"),
                })
            }
            "GROUP_NOT_FOUND" => Err(self.group_not_found(name)),
            other => Err(Error::Protocol {
                script: "group_seal",
                detail: format!("unknown status {other:?}"),
            }),
        }
    }

    fn group_not_found(&self, name: &str) -> Error {
        Error::GroupNotFound {
            queue: self.name().to_owned(),
            group: name.to_owned(),
        }
    }

    /// The error of an enqueue refused for its links: `reply` starts with
    /// [`REFUSED`], then the code and its values (`enqueue.lua`); `group` is
    /// the group the call named ('' for none).
    pub(crate) fn links_refusal(&self, reply: &mut Reply, group: &str) -> Error {
        let _ = reply.text();
        let code = reply.text().unwrap_or_default();
        let a = reply.text().unwrap_or_default();
        let b = reply.text().unwrap_or_default();
        let shown = |r: &str| {
            Dependency::decode(r)
                .map(|d| d.to_string())
                .unwrap_or_else(|| r.to_owned())
        };
        match code.as_str() {
            "GROUP_NOT_FOUND" => self.group_not_found(&a),
            "GROUP_SEALED" => Error::GroupClosed {
                group: a,
                status: b,
            },
            "PARENT_NOT_FOUND" => Error::ParentNotFound {
                queue: self.name().to_owned(),
                parent: shown(&a),
            },
            "PARENT_ENDED" => Error::ParentEnded {
                parent: shown(&a),
                state: b,
            },
            "CYCLE" => Error::GroupCycle {
                detail: if b.is_empty() {
                    format!("the job's parents include group {a}, or the group has dependents")
                } else {
                    format!("existing job {b} has parents and the group has dependents (or is one of them)")
                },
                group: a,
            },
            "CANNOT_JOIN" => Error::CannotJoinGroup {
                job: a,
                group: group.to_owned(),
                reason: b,
            },
            "BAD_LINKS" => Error::InvalidArgument(format!("enqueue refused its links: {a} {b:?}")),
            other => Error::Protocol {
                script: "enqueue",
                detail: format!("unknown refusal {other:?}"),
            },
        }
    }

    /// Cancels a group: it takes no more children and never fires its
    /// completion job; each unsettled child is cancelled (a QUEUED one at
    /// once, a LEASED or RUNNING one by an in-flight request its holder
    /// honours). STALE children are left to an operator. One `group_cancel`
    /// call per batch of children ([`Queue::cancel_group_batch`]), each
    /// atomic; the group keeps the cursor, so a cancel stopped midway (a
    /// crash) says so, and calling this again finishes it.
    pub async fn cancel_group(&self, name: &str, reason: &str, by: &str) -> Result<GroupCancelled> {
        let mut done = GroupCancelled::default();
        loop {
            let (step, finished) = self
                .cancel_group_batch(name, reason, by, GROUP_BATCH)
                .await?;
            done.cancelled += step.cancelled;
            done.requested += step.requested;
            done.skipped += step.skipped;
            if finished {
                return Ok(done);
            }
        }
    }

    /// One `group_cancel` call: the group marked cancelled (the first time)
    /// and up to `batch` of its children cancelled from the cursor the group
    /// keeps; true once every child was handled.
    pub async fn cancel_group_batch(
        &self,
        name: &str,
        reason: &str,
        by: &str,
        batch: usize,
    ) -> Result<(GroupCancelled, bool)> {
        check_group_name(name)?;
        if reason.is_empty() {
            return Err(Error::InvalidArgument("a cancel needs a reason".into()));
        }
        let mut inv = self.invocation(&scripts::GROUP_CANCEL);
        inv.key(self.group_key(name));
        inv.arg(name).arg(reason).arg(by).arg(batch.max(1));
        let mut reply = Reply::new("group_cancel", self.invoke(&inv).await?)?;
        match reply.text()?.as_str() {
            "OK" => {}
            "GROUP_NOT_FOUND" => return Err(self.group_not_found(name)),
            "SETTLED" => {
                return Err(Error::GroupClosed {
                    group: name.to_owned(),
                    status: reply.text()?,
                })
            }
            other => {
                return Err(Error::Protocol {
                    script: "group_cancel",
                    detail: format!("unknown status {other:?}"),
                })
            }
        }
        let step = GroupCancelled {
            cancelled: reply.int()?,
            requested: reply.int()?,
            skipped: reply.int()?,
        };
        Ok((step, reply.opt_text()?.is_none()))
    }

    /// Retries every FAILED and CANCELLED child of a group (each a new
    /// attempt with its event, as [`Queue::retry`] makes one); returns the
    /// children retried and those refused, with the reason. One `group_retry`
    /// call per batch of children ([`Queue::retry_group_batch`]), each atomic;
    /// the group keeps the cursor, so a retry stopped midway says so, and
    /// calling this again finishes it.
    pub async fn retry_group(
        &self,
        name: &str,
        mode: RetryMode,
        by: &str,
        reason: &str,
    ) -> Result<(Vec<JobId>, Vec<(JobId, Error)>)> {
        let mut retried = Vec::new();
        let mut refused = Vec::new();
        loop {
            let step = self
                .retry_group_batch(name, mode, by, reason, GROUP_BATCH)
                .await?;
            retried.extend(step.retried);
            refused.extend(step.refused);
            if step.done {
                return Ok((retried, refused));
            }
        }
    }

    /// One `group_retry` call: up to `batch` children from the cursor the
    /// group keeps, the FAILED and CANCELLED ones retried.
    pub async fn retry_group_batch(
        &self,
        name: &str,
        mode: RetryMode,
        by: &str,
        reason: &str,
        batch: usize,
    ) -> Result<GroupRetried> {
        check_group_name(name)?;
        let mode = match mode {
            RetryMode::Resume => "resume",
            RetryMode::FromStart => "start",
        };
        let mut inv = self.invocation(&scripts::GROUP_RETRY);
        inv.key(self.group_key(name));
        inv.arg(name)
            .arg(mode)
            .arg(by)
            .arg(reason)
            .arg(batch.max(1));
        let mut reply = Reply::new("group_retry", self.invoke(&inv).await?)?;
        match reply.text()?.as_str() {
            "OK" => {}
            "GROUP_NOT_FOUND" => return Err(self.group_not_found(name)),
            "SETTLED" => {
                return Err(Error::GroupClosed {
                    group: name.to_owned(),
                    status: reply.text()?,
                })
            }
            other => {
                return Err(Error::Protocol {
                    script: "group_retry",
                    detail: format!("unknown status {other:?}"),
                })
            }
        }
        let done = reply.opt_text()?.is_none();
        let mut out = GroupRetried {
            retried: Vec::new(),
            refused: Vec::new(),
            done,
        };
        while reply.remaining() > 0 {
            let id = JobId::parse(&reply.text()?)?;
            let verdict = reply.text()?;
            let detail = reply.text()?;
            match verdict.as_str() {
                "RETRIED" => out.retried.push(id),
                "INPUT_KEY_TAKEN" => out.refused.push((
                    id.clone(),
                    Error::InputKeyTaken {
                        job: id.to_string(),
                        holder: detail,
                    },
                )),
                _ => out.refused.push((
                    id.clone(),
                    Error::Corrupt {
                        key: self.keys.job(id.as_str()),
                        field: detail,
                        problem: "unreadable: the child was not retried".into(),
                    },
                )),
            }
        }
        Ok(out)
    }
}

/// What one `group_retry` call did.
#[derive(Debug)]
pub struct GroupRetried {
    /// Children given a new attempt.
    pub retried: Vec<JobId>,
    /// Children refused, with the reason.
    pub refused: Vec<(JobId, Error)>,
    /// Whether every child was handled (no batch is left).
    pub done: bool,
}
