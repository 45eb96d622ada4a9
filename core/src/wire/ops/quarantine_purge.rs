//! `quarantine_purge.lua`: deletes a quarantined job and its records.

use deadpool_redis::redis::Value;

use super::{not_quarantined, ScriptOp};
use crate::error::Result;
use crate::id::JobId;
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// Purges quarantined `job`.
pub(crate) struct QuarantinePurge<'a> {
    pub(crate) job: &'a JobId,
    pub(crate) by: &'a str,
}

impl ScriptOp for QuarantinePurge<'_> {
    type Output = ();

    fn script(&self) -> &'static LuaScript {
        &scripts::QUARANTINE_PURGE
    }

    /// KEYS: job; ARGV: id, who.
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        call.key(keys.job(self.job.as_str()))
            .arg(self.job.as_str())
            .arg(self.by);
    }

    /// `{'OK'}` or `{'NOT_QUARANTINED'}`.
    fn decode(&self, keys: &QueueKeys, reply: Value) -> Result<()> {
        let mut reply = Reply::new("quarantine_purge", reply)?;
        match reply.text()?.as_str() {
            "OK" => Ok(()),
            status => Err(not_quarantined(keys, "quarantine_purge", self.job, status)),
        }
    }
}
