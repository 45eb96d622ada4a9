//! `claim_cleanup.lua`: claims cleanup hooks to run (STALE jobs resolved as
//! FAILED or CANCELLED) of some pipelines, for a time.

use std::time::Duration;

use deadpool_redis::redis::Value;

use super::ScriptOp;
use crate::error::Result;
use crate::wire::args::millis;
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// Claims up to `n` cleanups of `pipelines` for `ttl`.
pub(crate) struct ClaimCleanup<'a> {
    pub(crate) n: usize,
    pub(crate) pipelines: &'a [&'a str],
    pub(crate) ttl: Duration,
}

impl ScriptOp for ClaimCleanup<'_> {
    /// The ids claimed, as Redis holds them.
    type Output = Vec<String>;

    fn script(&self) -> &'static LuaScript {
        &scripts::CLAIM_CLEANUP
    }

    /// KEYS: cleanup, cleaning; ARGV: n (at least 1), ttl (ms), the pipelines.
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        call.key(keys.cleanup())
            .key(keys.cleaning())
            .arg(self.n.max(1))
            .arg(millis(self.ttl));
        for p in self.pipelines {
            call.arg(*p);
        }
    }

    /// One id per claim.
    fn decode(&self, _keys: &QueueKeys, reply: Value) -> Result<Vec<String>> {
        let mut reply = Reply::new("claim_cleanup", reply)?;
        let mut ids = Vec::with_capacity(reply.remaining());
        while reply.remaining() > 0 {
            ids.push(reply.text()?);
        }
        Ok(ids)
    }
}
