//! `purge.lua`: deletes terminal jobs beyond the retention policy.

use deadpool_redis::redis::Value;

use super::ScriptOp;
use crate::error::{Error, Result};
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::scripts::{self, LuaScript};

/// A purge of up to `batch` jobs.
pub(crate) struct Purge {
    pub(crate) batch: usize,
}

impl ScriptOp for Purge {
    /// How many jobs were deleted.
    type Output = u64;

    fn script(&self) -> &'static LuaScript {
        &scripts::PURGE
    }

    /// ARGV: batch (at least 1).
    fn encode(&self, _keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        call.arg(self.batch.max(1));
    }

    /// An integer.
    fn decode(&self, _keys: &QueueKeys, reply: Value) -> Result<u64> {
        match reply {
            Value::Int(n) => Ok(u64::try_from(n).unwrap_or(0)),
            other => Err(Error::Protocol {
                script: "purge",
                detail: format!("expected an integer, got {other:?}"),
            }),
        }
    }
}
