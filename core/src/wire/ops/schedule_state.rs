//! `schedule_state.lua`: pauses or resumes a schedule.

use deadpool_redis::redis::Value;

use super::{schedule_keys, ScriptOp};
use crate::error::{Error, Result};
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// Pauses (`pause`) or resumes schedule `name`.
pub(crate) struct ScheduleState<'a> {
    pub(crate) name: &'a str,
    pub(crate) pause: bool,
    pub(crate) by: &'a str,
    pub(crate) reason: &'a str,
}

impl ScriptOp for ScheduleState<'_> {
    /// Whether the schedule is paused after.
    type Output = bool;

    fn script(&self) -> &'static LuaScript {
        &scripts::SCHEDULE_STATE
    }

    /// KEYS: the schedule's; ARGV: name, `pause` | `resume`, who, reason.
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        schedule_keys(keys, call, self.name);
        call.arg(self.name)
            .arg(if self.pause { "pause" } else { "resume" })
            .arg(self.by)
            .arg(self.reason);
    }

    /// `{'OK', paused flag}` or `{'NOT_FOUND'}`.
    fn decode(&self, keys: &QueueKeys, reply: Value) -> Result<bool> {
        let mut reply = Reply::new("schedule_state", reply)?;
        match reply.text()?.as_str() {
            "OK" => Ok(reply.text()? == "1"),
            "NOT_FOUND" => Err(Error::UnknownSchedule {
                queue: keys.queue().to_owned(),
                schedule: self.name.to_owned(),
            }),
            other => Err(Error::Protocol {
                script: "schedule_state",
                detail: format!("unknown status {other:?}"),
            }),
        }
    }
}
