//! `process_log.lua`: a process step's record (exit, cut-off, progress, log
//! tails), written only while the lease is held.

use deadpool_redis::redis::Value;

use super::ScriptOp;
use crate::error::Result;
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// Writes `json` as field `field` of job `job`'s process log, under lease `token`.
pub(crate) struct ProcessLog<'a> {
    pub(crate) job: &'a str,
    pub(crate) token: &'a str,
    pub(crate) field: &'a str,
    pub(crate) json: &'a str,
}

impl ScriptOp for ProcessLog<'_> {
    /// Whether the record was written.
    type Output = bool;

    fn script(&self) -> &'static LuaScript {
        &scripts::PROCESS_LOG
    }

    /// KEYS: job, process log; ARGV: token, field, record (JSON).
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        call.key(keys.job(self.job))
            .key(keys.process_log(self.job))
            .arg(self.token)
            .arg(self.field)
            .arg(self.json);
    }

    /// `{1}` when written, `{0}` when the lease is gone.
    fn decode(&self, _keys: &QueueKeys, reply: Value) -> Result<bool> {
        let mut reply = Reply::new("process_log", reply)?;
        Ok(reply.int::<i64>()? == 1)
    }
}
