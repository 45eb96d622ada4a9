//! Settling: many holder operations and the next lease in one round trip
//! (`settle.lua`), so a busy worker pays one call per batch, not per job. The
//! single-operation entry points ([`Queue::start`], [`Queue::checkpoint`],
//! [`Queue::finish`], [`Queue::release`], [`Queue::lease`]) are settle calls of
//! one; the operations' encodings live in [`crate::wire`].

use std::time::Duration;

use deadpool_redis::redis::Value;

use crate::error::{Error, Result};
use crate::lease::Leased;
use crate::queue::Queue;
use crate::wire::args::{lock_ttl, millis};
use crate::wire::lease::read_leased;
use crate::wire::reply::Reply;
use crate::wire::scripts;

pub use crate::wire::holder::{HolderOp, HolderReply};
pub use crate::wire::lease::LeaseRequest;

/// What a [`Queue::settle`] call did.
#[derive(Debug)]
pub struct Settled {
    /// One reply per operation, in order: each succeeds or is refused on its own.
    pub replies: Vec<Result<HolderReply>>,
    /// The jobs leased.
    pub leased: Leased,
}

impl Queue {
    /// Performs many holder operations and takes new leases in one round trip.
    /// `ttl` is the lease time-to-live used for renewals by checkpoints and for
    /// the new leases. Each operation is compared by its own lease token and is
    /// refused (its reply is an error) without affecting the others. Jobs
    /// leased whose fields cannot be read are reported in [`Leased::unreadable`].
    pub async fn settle(
        &self,
        ops: &[HolderOp<'_>],
        lease: Option<LeaseRequest<'_>>,
        ttl: Duration,
    ) -> Result<Settled> {
        self.settle_with(ops, lease, ttl, true).await
    }

    /// [`Queue::settle`]; with `lenient` false, an unreadable leased job fails
    /// the call instead of being reported apart.
    pub(crate) async fn settle_with(
        &self,
        ops: &[HolderOp<'_>],
        lease: Option<LeaseRequest<'_>>,
        ttl: Duration,
        lenient: bool,
    ) -> Result<Settled> {
        for op in ops {
            op.validate()?;
        }
        let lease = lease.filter(LeaseRequest::wants_any);
        if let Some(l) = &lease {
            l.validate()?;
        }
        if ops.is_empty() && lease.is_none() {
            return Ok(Settled {
                replies: Vec::new(),
                leased: Leased::default(),
            });
        }
        let keys = self.keys();
        let mut inv = self.invocation(&scripts::SETTLE);
        let (worker, n_pipelines, n) =
            lease.map_or(("", 0, 0), |l| (l.worker, l.pipelines.len(), l.n));
        inv.arg(worker)
            .arg(millis(ttl))
            .arg(lock_ttl(ttl))
            .arg(ops.len())
            .arg(n_pipelines)
            .arg(n);
        for op in ops {
            op.encode(keys, &mut inv);
        }
        if let Some(l) = &lease {
            l.encode_keys(keys, &mut inv);
            l.encode_tokens(&mut inv);
        }
        let items = match self.invoke(&inv).await? {
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
            Some(item) => read_leased(&mut Reply::new("settle", item)?, ttl, lenient)?,
            None => Leased::default(),
        };
        Ok(Settled { replies, leased })
    }

    /// One holder operation as a settle call of one; its reply.
    pub(crate) async fn settle_one(&self, op: HolderOp<'_>) -> Result<HolderReply> {
        let settled = self.settle_with(&[op], None, op.lease().ttl, false).await?;
        settled.replies.into_iter().next().unwrap_or_else(|| {
            Err(Error::Protocol {
                script: "settle",
                detail: "no reply to the operation".into(),
            })
        })
    }
}
