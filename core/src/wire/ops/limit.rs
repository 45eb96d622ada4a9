//! `limit.lua`: takes tokens from a named rate limiter.

use deadpool_redis::redis::Value;

use super::ScriptOp;
use crate::error::Result;
use crate::flow::Rate;
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// Takes `n` tokens from limiter `name` (one per `rate` period).
pub(crate) struct Limit<'a> {
    pub(crate) name: &'a str,
    pub(crate) rate: Rate,
    pub(crate) n: u32,
}

impl ScriptOp for Limit<'_> {
    /// How long to wait before asking again (ms); 0 once taken.
    type Output = u64;

    fn script(&self) -> &'static LuaScript {
        &scripts::LIMIT
    }

    /// ARGV: name, period (ms), n.
    fn encode(&self, _keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        call.arg(self.name).arg(self.rate.period_ms()).arg(self.n);
    }

    /// `{wait_ms}`.
    fn decode(&self, _keys: &QueueKeys, reply: Value) -> Result<u64> {
        Reply::new("limit", reply)?.int()
    }
}
