//! The queue client's settle calls: [`Queue::settle`] (many holder
//! operations and the next lease in one round trip), the settle call of one
//! that every single holder operation is, and [`Holder`] for [`Queue`]. The
//! strategy-neutral parts (the operations, [`Holder`]'s typed calls) live in
//! [`crate::settle`], below the client.

use std::collections::HashSet;
use std::future::Future;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::lease::{Lease, Leased};
use crate::queue::Queue;
use crate::settle::{Holder, HolderCall, HolderOp, HolderReply, LeaseRequest, Settled};
use crate::wire::append;
use crate::wire::ops::settle::Settle;

impl Queue {
    /// Performs many holder operations and takes new leases in one round trip.
    /// `ttl` is the lease time-to-live of the new leases. Each operation is
    /// compared by its own lease token and is refused (its reply is an error)
    /// without affecting the others. Jobs leased whose fields cannot be read
    /// are reported in [`Leased::unreadable`].
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
        self.settle_sealing(ops, None, lease, ttl, lenient).await
    }

    /// [`Queue::settle_with`], told for each operation whether its holder may
    /// have appended step outputs (`appended`, one flag per operation; `None`:
    /// all may have). A finish seals what was appended; one whose holder
    /// appended nothing spares the read (the worker knows; other callers
    /// cannot, and pay it).
    ///
    /// Checkpoints are not part of the `settle` script: they are appended with
    /// plain commands sent in the same pipeline, before it (`wire/append.rs`),
    /// so a job's checkpoints and its finish (a worker's usual batch) go in
    /// one round trip, the finish sealing them; a call where a checkpoint
    /// follows a scripted operation of its job runs them in the operations'
    /// order instead (`settle_in_order`).
    pub(crate) async fn settle_sealing(
        &self,
        ops: &[HolderOp<'_>],
        appended: Option<&[bool]>,
        lease: Option<LeaseRequest<'_>>,
        ttl: Duration,
        lenient: bool,
    ) -> Result<Settled> {
        for op in ops {
            op.validate()?;
        }
        let lease_request = lease.filter(LeaseRequest::wants_any);
        if let Some(l) = &lease_request {
            l.validate()?;
        }
        // the script's operations, and the appends grouped by job (see
        // `append::Appends`), each with its place in `ops`
        let mut scripted: Vec<HolderOp<'_>> = Vec::with_capacity(ops.len());
        let mut sealing: Vec<bool> = Vec::with_capacity(ops.len());
        let mut appends = append::Appends::default();
        let mut scripted_jobs: HashSet<&str> = HashSet::new();
        for (i, op) in ops.iter().enumerate() {
            if let HolderOp::Checkpoint { lease, .. } = op {
                if scripted_jobs.contains(lease.job.as_str()) {
                    // an append after a scripted operation of its job: the
                    // appends go ahead of the script, so calls in turn
                    return self
                        .settle_in_order(ops, appended, lease_request, ttl, lenient)
                        .await;
                }
                appends.add(op);
            } else {
                scripted_jobs.insert(op.lease().job.as_str());
                let seals = appended.and_then(|a| a.get(i).copied()).unwrap_or(true);
                appends.followed_by(scripted.len(), op, seals);
                scripted.push(*op);
                sealing.push(seals);
            }
        }
        let lease = lease_request;
        if appends.is_empty() {
            if scripted.is_empty() && lease.is_none() {
                return Ok(Settled {
                    replies: Vec::new(),
                    leased: Leased::default(),
                });
            }
            return self
                .run(&Settle {
                    ops: &scripted,
                    appended: &sealing,
                    lease,
                    ttl,
                    lenient,
                })
                .await;
        }
        // the appends first, then the script, in one round trip: a lease in
        // the call sees the jobs as the appends left them
        let pipe = appends.encode(self.keys());
        let (append_replies, settled) = if scripted.is_empty() && lease.is_none() {
            let values = self.pipeline(&pipe).await?;
            let none = Settled {
                replies: Vec::new(),
                leased: Leased::default(),
            };
            (values, none)
        } else {
            let settle = Settle {
                ops: &scripted,
                appended: &sealing,
                lease,
                ttl,
                lenient,
            };
            // boxed: unboxed, the future makes a type too deep for the
            // compiler to check in callers that nest it further
            Box::pin(self.run_after(pipe, &settle)).await?
        };
        let leased = settled.leased;
        let mut append_replies = appends
            .decode(self.keys(), append_replies, &settled.replies)
            .into_iter();
        let mut script_replies = settled.replies.into_iter();
        let mut replies = Vec::with_capacity(ops.len());
        for op in ops {
            let reply = match op {
                HolderOp::Checkpoint { .. } => append_replies.next(),
                _ => script_replies.next(),
            };
            replies.push(reply.unwrap_or_else(|| {
                Err(Error::Protocol {
                    script: "settle",
                    detail: "no reply to the operation".into(),
                })
            }));
        }
        Ok(Settled { replies, leased })
    }

    /// [`Queue::settle_sealing`] of a call where a job has a checkpoint and a
    /// scripted operation: each run of appends or of scripted operations in
    /// turn, in the operations' order, the lease last.
    async fn settle_in_order(
        &self,
        ops: &[HolderOp<'_>],
        appended: Option<&[bool]>,
        lease: Option<LeaseRequest<'_>>,
        ttl: Duration,
        lenient: bool,
    ) -> Result<Settled> {
        let is_append = |op: &HolderOp<'_>| matches!(op, HolderOp::Checkpoint { .. });
        let mut replies = Vec::with_capacity(ops.len());
        let mut start = 0;
        while start < ops.len() {
            let kind = is_append(&ops[start]);
            let end = ops[start..]
                .iter()
                .position(|op| is_append(op) != kind)
                .map_or(ops.len(), |n| start + n);
            let flags = appended.and_then(|a| a.get(start..end));
            // one kind only: never back here
            let run = Box::pin(self.settle_sealing(&ops[start..end], flags, None, ttl, lenient));
            replies.extend(run.await?.replies);
            start = end;
        }
        let leased = match lease {
            Some(l) => {
                Box::pin(self.settle_sealing(&[], None, Some(l), ttl, lenient))
                    .await?
                    .leased
            }
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
