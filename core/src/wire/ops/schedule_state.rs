//! `schedule_state.lua`: pauses or resumes a schedule, or records a failed tick.

use deadpool_redis::redis::Value;

use super::{schedule_keys, ScriptOp};
use crate::error::{Error, Result};
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// What [`ScheduleState`] does to a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScheduleAction {
    /// An operator pauses it.
    Pause,
    /// An operator resumes it.
    Resume,
    /// A worker's tick failed (the reason is the error).
    Failing,
}

/// Pauses or resumes schedule `name`, or records a failed tick of it.
pub(crate) struct ScheduleState<'a> {
    pub(crate) name: &'a str,
    pub(crate) action: ScheduleAction,
    pub(crate) by: &'a str,
    pub(crate) reason: &'a str,
}

impl ScriptOp for ScheduleState<'_> {
    /// Pause and resume: whether it was paused before (`1` / `0`); failing:
    /// the failures counted since the last claimed tick.
    type Output = u64;

    fn script(&self) -> &'static LuaScript {
        &scripts::SCHEDULE_STATE
    }

    /// KEYS: the schedule's; ARGV: name, `pause` | `resume`, who, reason.
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        schedule_keys(keys, call, self.name);
        call.arg(self.name)
            .arg(match self.action {
                ScheduleAction::Pause => "pause",
                ScheduleAction::Resume => "resume",
                ScheduleAction::Failing => "failing",
            })
            .arg(self.by)
            .arg(self.reason);
    }

    /// `{'OK', paused flag or failures}` or `{'NOT_FOUND'}`.
    fn decode(&self, keys: &QueueKeys, reply: Value) -> Result<u64> {
        let mut reply = Reply::new("schedule_state", reply)?;
        match reply.text()?.as_str() {
            "OK" => {
                let n = reply.text()?;
                n.parse().map_err(|_| Error::Protocol {
                    script: "schedule_state",
                    detail: format!("not a count: {n:?}"),
                })
            }
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
