//! `resolve.lua`: an operator's decision on a STALE job (FAILED, CANCELLED
//! or SUCCEEDED).

use deadpool_redis::redis::Value;

use super::{lock_keys, ScriptOp};
use crate::error::Result;
use crate::id::JobId;
use crate::state::JobState;
use crate::transitions::Op;
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::refusal::refusal;
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// Resolves STALE `job` (whose resource names its lock keys) as `to`.
pub(crate) struct Resolve<'a> {
    pub(crate) job: &'a JobId,
    pub(crate) resource: Option<&'a str>,
    pub(crate) to: JobState,
    pub(crate) by: &'a str,
    pub(crate) reason: &'a str,
}

impl ScriptOp for Resolve<'_> {
    type Output = ();

    fn script(&self) -> &'static LuaScript {
        &scripts::RESOLVE
    }

    /// KEYS: job, cleanup, lock, parked; ARGV: state, who, reason, resource.
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        let job = self.job.as_str();
        let [lock, parked] = lock_keys(keys, job, self.resource);
        call.key(keys.job(job))
            .key(keys.cleanup())
            .key(lock)
            .key(parked);
        call.arg(self.to.as_str())
            .arg(self.by)
            .arg(self.reason)
            .arg(self.resource.unwrap_or(""));
    }

    /// `{'OK'}`, or a refusal.
    fn decode(&self, keys: &QueueKeys, reply: Value) -> Result<()> {
        let mut reply = Reply::new("resolve", reply)?;
        match reply.text()?.as_str() {
            "OK" => Ok(()),
            status => Err(refusal(
                keys,
                "resolve",
                Op::Resolve,
                self.job.as_str(),
                Some(self.to),
                status,
                &mut reply,
            )),
        }
    }
}
