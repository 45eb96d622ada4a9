//! `cancel.lua`: cancels a job at once when QUEUED, or records a cancel
//! request its holder honours when LEASED or RUNNING.

use deadpool_redis::redis::Value;

use super::ScriptOp;
use crate::error::Result;
use crate::id::JobId;
use crate::lease::Cancelled;
use crate::state::JobState;
use crate::transitions::Op;
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::refusal::{refusal, reply_state};
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// A cancel of `job` (whose pipeline and resource name its keys).
pub(crate) struct Cancel<'a> {
    pub(crate) job: &'a JobId,
    pub(crate) pipeline: &'a str,
    pub(crate) resource: Option<&'a str>,
    pub(crate) reason: &'a str,
    pub(crate) by: &'a str,
}

impl ScriptOp for Cancel<'_> {
    type Output = Cancelled;

    fn script(&self) -> &'static LuaScript {
        &scripts::CANCEL
    }

    /// KEYS: job, ready, delayed, parked (the job key without a resource);
    /// ARGV: reason, who, resource.
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        let job = keys.job(self.job.as_str());
        call.key(&job)
            .key(keys.ready(self.pipeline))
            .key(keys.delayed(self.pipeline))
            .key(match self.resource {
                Some(r) => keys.parked(r),
                None => job,
            });
        call.arg(self.reason)
            .arg(self.by)
            .arg(self.resource.unwrap_or(""));
    }

    /// `{'CANCELLED'}`, `{'REQUESTED', state}`, `{'ALREADY_REQUESTED', state,
    /// reason}`, or a refusal.
    fn decode(&self, keys: &QueueKeys, reply: Value) -> Result<Cancelled> {
        let mut reply = Reply::new("cancel", reply)?;
        match reply.text()?.as_str() {
            "CANCELLED" => Ok(Cancelled::Now),
            "REQUESTED" => Ok(Cancelled::Requested {
                state: reply_state("cancel", &mut reply)?,
            }),
            "ALREADY_REQUESTED" => Ok(Cancelled::AlreadyRequested {
                state: reply_state("cancel", &mut reply)?,
                reason: reply.text()?,
            }),
            status => Err(refusal(
                keys,
                "cancel",
                Op::Cancel,
                self.job.as_str(),
                Some(JobState::Cancelled),
                status,
                &mut reply,
            )),
        }
    }
}
