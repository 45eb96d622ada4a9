//! `pause.lua`: pauses or resumes a pipeline, or every pipeline of a queue.

use deadpool_redis::redis::Value;

use super::ScriptOp;
use crate::answers::PauseChange;
use crate::error::{Error, Result};
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// A pause or resume (`action`) of scope `scope` (`pipeline` or `queue`)
/// named `name`, applied to `pipelines`.
pub(crate) struct Pause<'a> {
    pub(crate) action: &'a str,
    pub(crate) scope: &'a str,
    pub(crate) name: &'a str,
    pub(crate) pipelines: &'a [String],
    pub(crate) by: &'a str,
    pub(crate) reason: &'a str,
}

impl ScriptOp for Pause<'_> {
    type Output = PauseChange;

    fn script(&self) -> &'static LuaScript {
        &scripts::PAUSE
    }

    /// KEYS: ready and wake of each pipeline; ARGV: action, scope, name, who, reason.
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        for p in self.pipelines {
            call.key(keys.ready(p)).key(keys.wake(p));
        }
        call.arg(self.action)
            .arg(self.scope)
            .arg(self.name)
            .arg(self.by)
            .arg(self.reason);
    }

    /// `{'OK', change}`.
    fn decode(&self, _keys: &QueueKeys, reply: Value) -> Result<PauseChange> {
        let mut reply = Reply::new("pause", reply)?;
        let _ok = reply.text()?;
        match reply.text()?.as_str() {
            "PAUSED" => Ok(PauseChange::Paused),
            "ALREADY_PAUSED" => Ok(PauseChange::AlreadyPaused),
            "RESUMED" => Ok(PauseChange::Resumed),
            "NOT_PAUSED" => Ok(PauseChange::NotPaused),
            other => Err(Error::Protocol {
                script: "pause",
                detail: format!("unknown reply {other:?}"),
            }),
        }
    }
}
