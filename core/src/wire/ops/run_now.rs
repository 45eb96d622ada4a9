//! `run_now.lua`: makes a delayed QUEUED job due now.

use deadpool_redis::redis::Value;

use super::{action_reply, ScriptOp};
use crate::error::{Error, Result};
use crate::id::JobId;
use crate::state::JobState;
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// Makes delayed `job` (of `pipeline`) due now.
pub(crate) struct RunNow<'a> {
    pub(crate) job: &'a JobId,
    pub(crate) pipeline: &'a str,
    pub(crate) by: &'a str,
    pub(crate) reason: &'a str,
}

impl ScriptOp for RunNow<'_> {
    /// The not-before the job had (ms).
    type Output = i64;

    fn script(&self) -> &'static LuaScript {
        &scripts::RUN_NOW
    }

    /// KEYS: job, delayed, wake; ARGV: who, reason.
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        call.key(keys.job(self.job.as_str()))
            .key(keys.delayed(self.pipeline))
            .key(keys.wake(self.pipeline));
        call.arg(self.by).arg(self.reason);
    }

    /// `{'OK', not_before}`, `{'NOT_DELAYED'}`, or a refusal.
    fn decode(&self, keys: &QueueKeys, reply: Value) -> Result<i64> {
        let mut reply = Reply::new("run_now", reply)?;
        match reply.text()?.as_str() {
            "OK" => {
                let was = reply.text()?;
                was.parse().map_err(|_| Error::Protocol {
                    script: "run_now",
                    detail: format!("not a time: {was:?}"),
                })
            }
            "NOT_DELAYED" => Err(Error::ActionRefused {
                job: self.job.to_string(),
                state: JobState::Queued,
                action: "run now",
                why: "it is not delayed: it is due already",
            }),
            status => {
                let status = status.to_owned();
                action_reply(
                    keys,
                    "run_now",
                    "run now",
                    self.job,
                    &status,
                    &mut reply,
                    "only a delayed QUEUED job is run now",
                )
                .map(|_| 0)
            }
        }
    }
}
