//! `schedule_register.lua`: a worker writes a schedule's definition on start
//! (idempotent: its paused flag and counters are never reset, and its cursor
//! only when its start changed).

use deadpool_redis::redis::Value;

use super::{ms_of, schedule_keys, ScriptOp};
use crate::error::Result;
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// What `schedule_register` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Registered {
    /// `created`, `redefined` or `same`.
    pub outcome: String,
    /// The cursor Redis holds (ms).
    pub cursor: i64,
    /// Redis TIME at the call (ms).
    pub now: i64,
}

/// Registers schedule `name` of `pipeline`.
pub(crate) struct ScheduleRegister<'a> {
    pub(crate) name: &'a str,
    pub(crate) pipeline: &'a str,
    /// The definition, JSON.
    pub(crate) definition: &'a str,
    pub(crate) digest: &'a str,
    /// The cursor of a new registration (ms).
    pub(crate) cursor: i64,
    /// The first window's due time (ms); `None` when there is none.
    pub(crate) next_due: Option<i64>,
    pub(crate) by: &'a str,
    /// The schedule's start (ms), if it has one: a changed start moves the cursor.
    pub(crate) start: Option<i64>,
}

impl ScriptOp for ScheduleRegister<'_> {
    type Output = Registered;

    fn script(&self) -> &'static LuaScript {
        &scripts::SCHEDULE_REGISTER
    }

    /// KEYS: the schedule's; ARGV: name, pipeline, definition, digest,
    /// cursor, next due ('' for none), who, start ('' for none).
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        schedule_keys(keys, call, self.name);
        call.arg(self.name)
            .arg(self.pipeline)
            .arg(self.definition)
            .arg(self.digest)
            .arg(self.cursor)
            .arg(self.next_due.map(|t| t.to_string()).unwrap_or_default())
            .arg(self.by)
            .arg(self.start.map(|t| t.to_string()).unwrap_or_default());
    }

    /// `{outcome, cursor, next due, now}`.
    fn decode(&self, _keys: &QueueKeys, reply: Value) -> Result<Registered> {
        let mut reply = Reply::new("schedule_register", reply)?;
        let outcome = reply.text()?;
        let cursor = ms_of("schedule_register", &reply.text()?, "cursor")?;
        let _next = reply.text()?;
        let now = ms_of("schedule_register", &reply.text()?, "now")?;
        Ok(Registered {
            outcome,
            cursor,
            now,
        })
    }
}
