//! `sweep.lua`: recovers expired leases (or reports what it would do).

use deadpool_redis::redis::Value;

use super::ScriptOp;
use crate::error::Result;
use crate::id::JobId;
use crate::lease::{SweepReport, SweptJob};
use crate::wire::args::bool_arg;
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::refusal::reply_state;
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// A sweep of up to `batch` expired leases.
pub(crate) struct Sweep {
    pub(crate) batch: usize,
    pub(crate) dry_run: bool,
}

impl ScriptOp for Sweep {
    type Output = SweepReport;

    fn script(&self) -> &'static LuaScript {
        &scripts::SWEEP
    }

    /// ARGV: batch (at least 1), dry-run flag.
    fn encode(&self, _keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        call.arg(self.batch.max(1)).arg(bool_arg(self.dry_run));
    }

    /// Counts (requeued, cancelled, stale, unparked, purged), then id, from,
    /// to per job moved.
    fn decode(&self, _keys: &QueueKeys, reply: Value) -> Result<SweepReport> {
        let mut reply = Reply::new("sweep", reply)?;
        let mut report = SweepReport {
            requeued: reply.int()?,
            cancelled: reply.int()?,
            stale: reply.int()?,
            unparked: reply.int()?,
            purged: reply.int()?,
            moves: Vec::new(),
        };
        while reply.remaining() > 0 {
            let job = JobId::parse(&reply.text()?)?;
            let from = reply_state("sweep", &mut reply)?;
            let to = reply_state("sweep", &mut reply)?;
            report.moves.push(SweptJob { job, from, to });
        }
        Ok(report)
    }
}
