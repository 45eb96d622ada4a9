//! `quarantine_repair.lua`: re-validates a quarantined job and requeues it.

use deadpool_redis::redis::Value;

use super::{not_quarantined, ScriptOp};
use crate::error::{Error, Result};
use crate::id::JobId;
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// Repairs quarantined `job`.
pub(crate) struct QuarantineRepair<'a> {
    pub(crate) job: &'a JobId,
    pub(crate) by: &'a str,
}

impl ScriptOp for QuarantineRepair<'_> {
    /// The job's pipeline.
    type Output = String;

    fn script(&self) -> &'static LuaScript {
        &scripts::QUARANTINE_REPAIR
    }

    /// KEYS: job; ARGV: id, who.
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        call.key(keys.job(self.job.as_str()))
            .arg(self.job.as_str())
            .arg(self.by);
    }

    /// `{'OK', pipeline}`, `{'INVALID', problem, field}`, `{'NOT_FOUND'}`,
    /// `{'NOT_QUARANTINED'}`.
    fn decode(&self, keys: &QueueKeys, reply: Value) -> Result<String> {
        let mut reply = Reply::new("quarantine_repair", reply)?;
        match reply.text()?.as_str() {
            "OK" => reply.text(),
            "INVALID" => {
                let problem = reply.text()?;
                let field = reply.text()?;
                Err(Error::Corrupt {
                    key: keys.job(self.job.as_str()),
                    field,
                    problem: format!("{problem}: fix it first (the job stays quarantined)"),
                })
            }
            "NOT_FOUND" => Err(Error::NotFound {
                queue: keys.queue().to_owned(),
                job: self.job.to_string(),
            }),
            status => Err(not_quarantined(keys, "quarantine_repair", self.job, status)),
        }
    }
}
