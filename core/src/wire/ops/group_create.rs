//! `group_create.lua`: creates a named group of jobs, with an optional
//! completion job enqueued once when the group settles.

use deadpool_redis::redis::Value;

use super::{group_key, groups_key, ScriptOp};
use crate::error::{Error, Result};
use crate::id::JobId;
use crate::job_spec::NewGroup;
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// Creates `group` (checked by the caller, its completion job too).
pub(crate) struct GroupCreate<'a> {
    pub(crate) group: &'a NewGroup,
    pub(crate) by: &'a str,
}

impl ScriptOp for GroupCreate<'_> {
    /// True when created; false when a group of that name exists.
    type Output = bool;

    fn script(&self) -> &'static LuaScript {
        &scripts::GROUP_CREATE
    }

    /// KEYS: group, groups; ARGV: name, group id, policy, the completion
    /// job's id, pipeline, input, priority, max attempts and stale lock
    /// policy (empty values for none), who, then its flow-control gates and
    /// resource, as its pipeline's contract gave them.
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        let group = self.group;
        call.key(group_key(keys, &group.name)).key(groups_key(keys));
        call.arg(&group.name)
            .arg(JobId::new().as_str())
            .arg(group.policy.as_str());
        match &group.completion {
            Some(job) => {
                call.arg(job.id.clone().unwrap_or_default().as_str())
                    .arg(&job.pipeline)
                    .arg(&job.input)
                    .arg(job.priority)
                    .arg(job.max_attempts)
                    .arg(job.stale_lock.as_str());
            }
            None => {
                call.arg("").arg("").arg("").arg("0").arg("1").arg("hold");
            }
        }
        call.arg(self.by);
        let completion = group.completion.as_ref();
        call.arg(completion.and_then(|j| j.flow.as_deref()).unwrap_or(""))
            .arg(completion.and_then(|j| j.resource.as_deref()).unwrap_or(""));
    }

    /// `{'CREATED', id}` or `{'EXISTS', id, status}`.
    fn decode(&self, _keys: &QueueKeys, reply: Value) -> Result<bool> {
        let mut reply = Reply::new("group_create", reply)?;
        match reply.text()?.as_str() {
            "CREATED" => Ok(true),
            "EXISTS" => Ok(false),
            other => Err(Error::Protocol {
                script: "group_create",
                detail: format!("unknown status {other:?}"),
            }),
        }
    }
}
