//! `retry.lua`: an operator's new attempt in QUEUED for a FAILED, CANCELLED
//! or STALE job.

use deadpool_redis::redis::Value;

use super::{lock_keys, retry_mode, ScriptOp};
use crate::error::{Error, Result};
use crate::id::JobId;
use crate::lease::RetryMode;
use crate::state::JobState;
use crate::transitions::Op;
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::refusal::refusal;
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// A retry of `job` (whose pipeline and resource name its keys).
pub(crate) struct Retry<'a> {
    pub(crate) job: &'a JobId,
    pub(crate) pipeline: &'a str,
    pub(crate) resource: Option<&'a str>,
    pub(crate) mode: RetryMode,
    pub(crate) by: &'a str,
    pub(crate) reason: &'a str,
}

impl ScriptOp for Retry<'_> {
    /// The new attempt's number.
    type Output = u32;

    fn script(&self) -> &'static LuaScript {
        &scripts::RETRY
    }

    /// KEYS: job, ready, wake, lock, parked; ARGV: mode, who, reason, resource.
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        let job = self.job.as_str();
        let [lock, parked] = lock_keys(keys, job, self.resource);
        call.key(keys.job(job))
            .key(keys.ready(self.pipeline))
            .key(keys.wake(self.pipeline))
            .key(lock)
            .key(parked);
        call.arg(retry_mode(self.mode))
            .arg(self.by)
            .arg(self.reason)
            .arg(self.resource.unwrap_or(""));
    }

    /// `{'OK', attempt}`, `{'INPUT_KEY_TAKEN', holder}`, or a refusal.
    fn decode(&self, keys: &QueueKeys, reply: Value) -> Result<u32> {
        let mut reply = Reply::new("retry", reply)?;
        match reply.text()?.as_str() {
            "OK" => reply.int(),
            "INPUT_KEY_TAKEN" => Err(Error::InputKeyTaken {
                job: self.job.to_string(),
                holder: reply.text()?,
            }),
            status => Err(refusal(
                keys,
                "retry",
                Op::Retry,
                self.job.as_str(),
                Some(JobState::Queued),
                status,
                &mut reply,
            )),
        }
    }
}
