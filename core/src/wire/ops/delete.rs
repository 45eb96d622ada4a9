//! `delete.lua`: deletes a terminal job now, as retention would later.

use deadpool_redis::redis::Value;

use super::{action_reply, ScriptOp};
use crate::error::Result;
use crate::id::JobId;
use crate::state::JobState;
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// Deletes terminal `job`.
pub(crate) struct Delete<'a> {
    pub(crate) job: &'a JobId,
    pub(crate) by: &'a str,
    pub(crate) reason: &'a str,
}

impl ScriptOp for Delete<'_> {
    /// The state the job had.
    type Output = JobState;

    fn script(&self) -> &'static LuaScript {
        &scripts::DELETE
    }

    /// KEYS: job; ARGV: who, reason.
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        call.key(keys.job(self.job.as_str()));
        call.arg(self.by).arg(self.reason);
    }

    /// `{'OK', state}`, or a refusal.
    fn decode(&self, keys: &QueueKeys, reply: Value) -> Result<JobState> {
        let mut reply = Reply::new("delete", reply)?;
        let status = reply.text()?;
        action_reply(
            keys,
            "delete",
            "delete",
            self.job,
            &status,
            &mut reply,
            "only a SUCCEEDED, FAILED or CANCELLED job is deleted; cancel it, or wait for it to end",
        )
    }
}
