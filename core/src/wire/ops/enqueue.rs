//! `enqueue.lua`: creates jobs of one pipeline (and one set of links: group,
//! parents, policy), idempotent on their input keys and ids; and the
//! refusals of those links.

use deadpool_redis::redis::Value;

use super::{enqueue_status, group_not_found, ScriptOp};
use crate::answers::{EnqueueStatus, Enqueued};
use crate::error::{Error, Result};
use crate::group::{encode_dependencies, Dependency};
use crate::id::JobId;
use crate::job_spec::NewJob;
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::new_job::push_new_job;
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// The first element of a refused enqueue's reply: no job id has braces, so
/// a refusal is never taken for a reply's first id (and a job named like a
/// refusal code is read as a job).
pub(crate) const REFUSED: &str = "{refused}";

/// Enqueues `jobs` (validated, all of `pipeline` and with the same links)
/// under `ids`, one id per job.
pub(crate) struct Enqueue<'a> {
    pub(crate) pipeline: &'a str,
    pub(crate) jobs: &'a [&'a NewJob],
    pub(crate) ids: &'a [JobId],
}

impl ScriptOp for Enqueue<'_> {
    /// One reply per job, in order.
    type Output = Vec<Enqueued>;

    fn script(&self) -> &'static LuaScript {
        &scripts::ENQUEUE
    }

    /// KEYS: ready, delayed, wake, then one job key per job; ARGV: queue,
    /// pipeline, job count, each job's values (`new_job.rs`), then the links
    /// (group, dependencies, policy) when the jobs have any.
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        call.key(keys.ready(self.pipeline))
            .key(keys.delayed(self.pipeline))
            .key(keys.wake(self.pipeline));
        call.arg(keys.queue())
            .arg(self.pipeline)
            .arg(self.jobs.len());
        for (job, id) in self.jobs.iter().zip(self.ids) {
            call.key(keys.job(id.as_str()));
            push_new_job(call, id, job);
        }
        if let Some(first) = self.jobs.first() {
            if first.has_links() {
                call.arg(first.group.as_deref().unwrap_or(""))
                    .arg(encode_dependencies(&first.depends_on))
                    .arg(first.on_parent_failure.as_str());
            }
        }
    }

    /// Id, status, previous id ('' for none) per job; or [`REFUSED`], then
    /// the links' refusal.
    fn decode(&self, keys: &QueueKeys, reply: Value) -> Result<Vec<Enqueued>> {
        let mut reply = Reply::new("enqueue", reply)?;
        // a refusal starts with a marker no job id can be (ids have no braces)
        if reply.peek_text().as_deref() == Some(REFUSED) {
            let group = self.jobs.first().and_then(|j| j.group.as_deref());
            return Err(links_refusal(keys, &mut reply, group.unwrap_or("")));
        }
        let mut out = Vec::with_capacity(self.jobs.len());
        for _ in self.jobs {
            let id = JobId::parse(&reply.text()?)?;
            let text = reply.text()?;
            let status = enqueue_status(&text).ok_or_else(|| Error::Protocol {
                script: "enqueue",
                detail: format!("unknown status {text:?}"),
            })?;
            let previous = reply.opt_text()?.map(|p| JobId::parse(&p)).transpose()?;
            out.push(Enqueued {
                id,
                created: matches!(status, EnqueueStatus::Created | EnqueueStatus::Rerun),
                status,
                previous,
            });
        }
        Ok(out)
    }
}

/// The error of an enqueue refused for its links: `reply` starts with
/// [`REFUSED`], then the code and its values (`enqueue.lua`); `group` is
/// the group the call named ('' for none).
fn links_refusal(keys: &QueueKeys, reply: &mut Reply, group: &str) -> Error {
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
        "GROUP_NOT_FOUND" => group_not_found(keys, &a),
        "GROUP_SEALED" => Error::GroupClosed {
            group: a,
            status: b,
        },
        "PARENT_NOT_FOUND" => Error::ParentNotFound {
            queue: keys.queue().to_owned(),
            parent: shown(&a),
        },
        "PARENT_ENDED" => Error::ParentEnded {
            parent: shown(&a),
            state: b,
        },
        "CYCLE" => {
            Error::GroupCycle {
                detail: if b.is_empty() {
                    format!("the job's parents include group {a}, or the group has dependents")
                } else {
                    format!("existing job {b} has parents and the group has dependents (or is one of them)")
                },
                group: a,
            }
        }
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
