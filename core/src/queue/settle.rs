//! The queue client's settle calls: [`Queue::settle`] (many holder
//! operations and the next lease in one round trip), the settle call of one
//! that every single holder operation is, and [`Holder`] for [`Queue`]. The
//! strategy-neutral parts (the operations, [`Holder`]'s typed calls) live in
//! [`crate::settle`], below the client.

use std::future::Future;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::lease::{Lease, Leased};
use crate::queue::Queue;
use crate::settle::{Holder, HolderCall, HolderOp, HolderReply, LeaseRequest, Settled};
use crate::wire::ops::settle::Settle;

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
        self.run(&Settle {
            ops,
            lease,
            ttl,
            lenient,
        })
        .await
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

/// The client's holder calls: each a settle call of one.
impl<'s> Holder<'s> for Queue {
    type Lease = Lease;
    type Slot = ();

    fn perform<'a>(
        &'a self,
        lease: &'a Lease,
        call: HolderCall<'s, 'a>,
        _slot: (),
    ) -> impl Future<Output = Result<HolderReply>> + Send + 'a
    where
        's: 'a,
    {
        self.settle_one(call.on(lease))
    }
}
