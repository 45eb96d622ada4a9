//! Settling: many holder operations and the next lease in one round trip
//! (`settle.lua`), so a busy worker pays one call per batch, not per job. The
//! single-operation entry points (`Queue::start`, `Queue::checkpoint`,
//! `Queue::finish`, `Queue::release`, `Queue::lease`) are settle calls of
//! one, made by `Queue::settle` (in `queue/settle.rs`, above this module);
//! the operations' encodings live in [`crate::wire`].
//!
//! The typed holder calls (start, checkpoint, finish, release) are written
//! once, as the provided methods of [`Holder`], over the one operation each
//! way of settling performs: a settle call of one (the queue client), or a
//! place in a lease loop's next batch (the worker's settler). One completion path,
//! several strategies.

use std::future::Future;

use crate::error::{Error, Result};
use crate::lease::{Finished, Lease, Outcome, Started};
use crate::state::JobState;

pub use crate::wire::ops::settle::Settled;

pub use crate::wire::holder::{HolderOp, HolderReply};
pub use crate::wire::lease::LeaseRequest;

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
/// here once, for the queue client (a settle call of one) and for the worker's
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

    /// Records `step` as completed with `output` (JSON text), an append the
    /// attempt's end seals (it does not renew the lease); the reply is a
    /// pending cancel request's reason, if any.
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
