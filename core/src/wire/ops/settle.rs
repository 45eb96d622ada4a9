//! `settle.lua`: many holder operations (each encoded and read by
//! `wire/holder.rs`) and the next lease (`wire/lease.rs`) in one call.

use std::time::Duration;

use deadpool_redis::redis::Value;

use super::ScriptOp;
use crate::error::{Error, Result};
use crate::lease::Leased;
use crate::wire::args::{lock_ttl, millis};
use crate::wire::call::ScriptCall;
use crate::wire::holder::{HolderOp, HolderReply};
use crate::wire::keys::QueueKeys;
use crate::wire::lease::{read_leased, LeaseRequest};
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// What a `Queue::settle` call did.
#[derive(Debug)]
pub struct Settled {
    /// One reply per operation, in order: each succeeds or is refused on its own.
    pub replies: Vec<Result<HolderReply>>,
    /// The jobs leased.
    pub leased: Leased,
}

/// A settle call: `ops` (validated, no checkpoint: those are appends, see
/// `wire/append.rs`), then `lease` (validated, asking for something) when
/// given; `ttl` is the new leases'. With `lenient` false, an unreadable leased
/// job fails the call.
pub(crate) struct Settle<'a> {
    pub(crate) ops: &'a [HolderOp<'a>],
    /// For each of `ops`: whether its holder may have appended step outputs
    /// (a finish seals them).
    pub(crate) appended: &'a [bool],
    pub(crate) lease: Option<LeaseRequest<'a>>,
    pub(crate) ttl: Duration,
    pub(crate) lenient: bool,
}

impl ScriptOp for Settle<'_> {
    type Output = Settled;

    fn script(&self) -> &'static LuaScript {
        &scripts::SETTLE
    }

    /// ARGV: worker, lease ttl (ms), lock ttl (ms), operation count,
    /// pipeline count, lease count; then each operation's KEYS and ARGV, then
    /// the lease's.
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        let (worker, n_pipelines, n) = self
            .lease
            .map_or(("", 0, 0), |l| (l.worker, l.pipelines.len(), l.n));
        call.arg(worker)
            .arg(millis(self.ttl))
            .arg(lock_ttl(self.ttl))
            .arg(self.ops.len())
            .arg(n_pipelines)
            .arg(n);
        for (i, op) in self.ops.iter().enumerate() {
            op.encode(keys, call, self.appended.get(i).copied().unwrap_or(true));
        }
        if let Some(l) = &self.lease {
            l.encode_keys(keys, call);
            l.encode_tokens(call);
        }
    }

    /// One reply per operation, then the lease's reply.
    fn decode(&self, keys: &QueueKeys, reply: Value) -> Result<Settled> {
        let ops = self.ops;
        let items = match reply {
            Value::Array(items) if items.len() == ops.len() + 1 => items,
            other => {
                return Err(Error::Protocol {
                    script: "settle",
                    detail: format!("expected {} replies, got {other:?}", ops.len() + 1),
                })
            }
        };
        let mut items = items.into_iter();
        let mut replies = Vec::with_capacity(ops.len());
        for op in ops {
            let item = items.next().unwrap_or(Value::Nil);
            replies.push(Reply::new("settle", item).and_then(|mut r| op.decode(keys, &mut r)));
        }
        let leased = match items.next() {
            Some(Value::Array(a)) if a.is_empty() => Leased::default(),
            Some(item) => read_leased(&mut Reply::new("settle", item)?, self.ttl, self.lenient)?,
            None => Leased::default(),
        };
        Ok(Settled { replies, leased })
    }
}
