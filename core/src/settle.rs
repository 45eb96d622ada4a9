//! Settling: many holder operations and the next lease in one round trip
//! (`settle.lua`), so a busy worker pays one call per batch, not per job. The
//! single-operation entry points ([`Queue::start`], [`Queue::checkpoint`],
//! [`Queue::finish`], [`Queue::release`], [`Queue::lease`]) are settle calls of
//! one; the operations' encodings live in [`crate::wire`].
//!
//! The typed holder calls (start, checkpoint, finish, release) are written
//! once, as the provided methods of [`Holder`], over the one operation each
//! way of settling performs: a settle call of one ([`Queue`]), or a place in a
//! lease loop's next batch (the worker's settler). One completion path,
//! several strategies.

use std::future::Future;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::lease::{Finished, Lease, Leased, Outcome, Started};
use crate::queue::Queue;
use crate::state::JobState;
use crate::wire::ops::settle::Settle;

pub use crate::wire::ops::settle::Settled;

pub use crate::wire::holder::{HolderOp, HolderReply};
pub use crate::wire::lease::LeaseRequest;

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

/// One holder operation without its lease: what a holder gives to
/// [`Holder::perform`]. Step names live for `'s` (the worker's are
/// `'static`: its requests keep them without a copy), the rest for `'a`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum HolderCall<'s, 'a> {
    /// LEASED → RUNNING, at this step.
    Start { first_step: &'s str },
    /// A completed step, its output (JSON text) and the step that runs next.
    Checkpoint {
        step: &'s str,
        output: &'a str,
        next_step: Option<&'s str>,
    },
    /// The end of the attempt, after checkpointing `last_step` (name and
    /// output) when given.
    Finish {
        outcome: &'a Outcome,
        last_step: Option<(&'s str, &'a str)>,
    },
    /// Hands an unstarted job back.
    Release,
}

impl<'s, 'a> HolderCall<'s, 'a> {
    /// The operation on `lease`, as a settle call carries it.
    pub(crate) fn on<'x>(self, lease: &'x Lease) -> HolderOp<'x>
    where
        's: 'x,
        'a: 'x,
    {
        match self {
            HolderCall::Start { first_step } => HolderOp::Start { lease, first_step },
            HolderCall::Checkpoint {
                step,
                output,
                next_step,
            } => HolderOp::Checkpoint {
                lease,
                step,
                output,
                next_step,
            },
            HolderCall::Finish { outcome, last_step } => HolderOp::Finish {
                lease,
                outcome,
                last_step,
            },
            HolderCall::Release => HolderOp::Release { lease },
        }
    }
}

/// A way of performing a lease holder's operations. Each implementation
/// performs one operation ([`Holder::perform`]); the typed calls are written
/// here once, for [`Queue`] (a settle call of one) and for the worker's
/// settler (a place in its lease loop's next batch) alike.
pub(crate) trait Holder<'s>: Sync {
    /// The lease as the implementation holds it.
    type Lease: Sync;
    /// What the final operation (a finish) carries beside its values: the
    /// worker's lease slot, freed once the operation is batched; nothing for
    /// a call of one.
    type Slot: Default + Send;

    /// Performs `call` on `lease`; its reply.
    fn perform<'a>(
        &'a self,
        lease: &'a Self::Lease,
        call: HolderCall<'s, 'a>,
        slot: Self::Slot,
    ) -> impl Future<Output = Result<HolderReply>> + Send + 'a
    where
        's: 'a;

    /// LEASED → RUNNING at `first_step`, or → CANCELLED when a cancel was
    /// requested before the start.
    fn start<'a>(
        &'a self,
        lease: &'a Self::Lease,
        first_step: &'s str,
    ) -> impl Future<Output = Result<Started>> + Send + 'a
    where
        's: 'a,
    {
        let call = HolderCall::Start { first_step };
        let reply = self.perform(lease, call, Self::Slot::default());
        async move {
            match reply.await? {
                HolderReply::Started(started) => Ok(started),
                other => Err(mismatched("start", &other)),
            }
        }
    }

    /// Records `step` as completed with `output` (JSON text) and renews the
    /// lease; the reply is a pending cancel request's reason, if any.
    fn checkpoint<'a>(
        &'a self,
        lease: &'a Self::Lease,
        step: &'s str,
        output: &'a str,
        next_step: Option<&'s str>,
    ) -> impl Future<Output = Result<Option<String>>> + Send + 'a
    where
        's: 'a,
    {
        let call = HolderCall::Checkpoint {
            step,
            output,
            next_step,
        };
        let reply = self.perform(lease, call, Self::Slot::default());
        async move {
            match reply.await? {
                HolderReply::Checkpointed(cancel) => Ok(cancel),
                other => Err(mismatched("checkpoint", &other)),
            }
        }
    }

    /// Ends the attempt with `outcome`, after checkpointing `last_step` (name
    /// and output) when given.
    fn finish<'a>(
        &'a self,
        lease: &'a Self::Lease,
        outcome: &'a Outcome,
        last_step: Option<(&'s str, &'a str)>,
        slot: Self::Slot,
    ) -> impl Future<Output = Result<Finished>> + Send + 'a
    where
        's: 'a,
    {
        let call = HolderCall::Finish { outcome, last_step };
        let reply = self.perform(lease, call, slot);
        async move {
            match reply.await? {
                HolderReply::Finished(finished) => Ok(finished),
                other => Err(mismatched("finish", &other)),
            }
        }
    }

    /// LEASED → QUEUED: hands an unstarted job back (LEASED → CANCELLED when
    /// a cancel was requested meanwhile); the reply is its new state.
    fn release<'a>(
        &'a self,
        lease: &'a Self::Lease,
    ) -> impl Future<Output = Result<JobState>> + Send + 'a
    where
        's: 'a,
    {
        let reply = self.perform(lease, HolderCall::Release, Self::Slot::default());
        async move {
            match reply.await? {
                HolderReply::Released(state) => Ok(state),
                other => Err(mismatched("release", &other)),
            }
        }
    }
}

/// The error for a reply of another operation's kind (never sent by the script).
fn mismatched(op: &str, reply: &HolderReply) -> Error {
    Error::Protocol {
        script: "settle",
        detail: format!("{op}: unexpected reply {reply:?}"),
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
