//! `group_create.lua`: creates a named group of jobs, with an optional
//! completion job enqueued once when the group settles.

use deadpool_redis::redis::Value;

use super::{group_key, groups_key, ScriptOp};
use crate::error::{Error, Result};
use crate::id::JobId;
use crate::job_spec::NewGroup;
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::new_job::push_new_job;
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

    /// KEYS: group, groups; ARGV: name, group id, policy, who, the
    /// completion job's pipeline ('' for none), then (with one) its values as
    /// every new job's are written (`new_job.rs`): its flow-control gates,
    /// resource and trace context among them.
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        let group = self.group;
        call.key(group_key(keys, &group.name)).key(groups_key(keys));
        call.arg(&group.name)
            .arg(JobId::new().as_str())
            .arg(group.policy.as_str())
            .arg(self.by);
        match &group.completion {
            Some(job) => {
                call.arg(&job.pipeline);
                push_new_job(call, &job.id.clone().unwrap_or_default(), job);
            }
            None => {
                call.arg("");
            }
        }
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
