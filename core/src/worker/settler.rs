//! The settler handle: how a job task asks its lease group's loop (see
//! `lease_loop.rs`) to perform a holder operation in the loop's next `settle`
//! batch, and waits for the operation's own reply.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit};

use crate::error::{Error, Result};
use crate::lease::{Finished, Lease, Outcome, Started};
use crate::settle::{HolderOp, HolderReply};
use crate::state::JobState;

/// A holder operation a job task asks its group's settler to perform.
pub(crate) enum Request {
    /// LEASED → RUNNING, at this step.
    Start {
        /// The step to run first.
        first_step: &'static str,
    },
    /// A completed step and the one that runs next.
    Checkpoint {
        /// The step completed.
        step: &'static str,
        /// Its output, JSON text.
        output: String,
        /// The step that runs next.
        next_step: Option<&'static str>,
    },
    /// The end of the attempt.
    Finish {
        /// How the attempt ends.
        outcome: Outcome,
        /// The last step's name and output, checkpointed first when given.
        last_step: Option<(&'static str, String)>,
    },
    /// Hands an unstarted job back.
    Release,
}

/// A request on its way to the settler, with where its reply goes.
pub(crate) struct Pending {
    lease: Arc<Lease>,
    request: Request,
    reply: oneshot::Sender<Result<HolderReply>>,
    /// The job's lease slot, sent with its final operation (see `free_slot`).
    slot: Option<OwnedSemaphorePermit>,
}

impl Pending {
    /// Frees the lease slot the request carries (a final operation's), now
    /// that the request is in the lease loop's next batch: a lease in that
    /// batch can take the slot.
    pub(crate) fn free_slot(mut self) -> Self {
        self.slot.take();
        self
    }

    /// Whether it is the start of a job.
    pub(crate) fn is_start(&self) -> bool {
        matches!(self.request, Request::Start { .. })
    }

    /// The request as an operation of a `settle` call.
    pub(crate) fn as_op(&self) -> HolderOp<'_> {
        let lease = self.lease.as_ref();
        match &self.request {
            Request::Start { first_step } => HolderOp::Start { lease, first_step },
            Request::Checkpoint {
                step,
                output,
                next_step,
            } => HolderOp::Checkpoint {
                lease,
                step,
                output,
                next_step: *next_step,
            },
            Request::Finish { outcome, last_step } => HolderOp::Finish {
                lease,
                outcome,
                last_step: last_step.as_ref().map(|(s, o)| (*s, o.as_str())),
            },
            Request::Release => HolderOp::Release { lease },
        }
    }

    /// Sends the operation's reply to the job task waiting for it.
    pub(crate) fn answer(self, reply: Result<HolderReply>) {
        let _ = self.reply.send(reply);
    }
}

/// The handle job tasks use to reach their group's settler.
#[derive(Clone)]
pub(crate) struct Settler {
    tx: mpsc::UnboundedSender<Pending>,
}

impl Settler {
    /// A new handle and the receiving end its requests arrive on.
    pub(crate) fn channel() -> (Settler, mpsc::UnboundedReceiver<Pending>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Settler { tx }, rx)
    }

    /// Performs `request` on `lease` in the settler's next batch.
    async fn call(
        &self,
        lease: &Arc<Lease>,
        request: Request,
        slot: Option<OwnedSemaphorePermit>,
    ) -> Result<HolderReply> {
        let (reply, rx) = oneshot::channel();
        let pending = Pending {
            lease: lease.clone(),
            request,
            reply,
            slot,
        };
        if self.tx.send(pending).is_err() {
            return Err(Error::Pool("the worker's settler has stopped".into()));
        }
        rx.await
            .unwrap_or_else(|_| Err(Error::Pool("the worker's settler dropped a request".into())))
    }

    /// LEASED → RUNNING, at `first_step`.
    pub(crate) async fn start(
        &self,
        lease: &Arc<Lease>,
        first_step: &'static str,
    ) -> Result<Started, Error> {
        match self
            .call(lease, Request::Start { first_step }, None)
            .await?
        {
            HolderReply::Started(s) => Ok(s),
            other => Err(mismatch("start", &other)),
        }
    }

    /// Records a completed step; the reply is a pending cancel request's reason.
    pub(crate) async fn checkpoint(
        &self,
        lease: &Arc<Lease>,
        step: &'static str,
        output: &str,
        next_step: Option<&'static str>,
    ) -> Result<Option<String>, Error> {
        let request = Request::Checkpoint {
            step,
            output: output.to_owned(),
            next_step,
        };
        match self.call(lease, request, None).await? {
            HolderReply::Checkpointed(c) => Ok(c),
            other => Err(mismatch("checkpoint", &other)),
        }
    }

    /// Ends the attempt, after checkpointing `last_step` (name and output) if
    /// given; `slot` is the job's lease slot, freed once the request is batched.
    pub(crate) async fn finish(
        &self,
        lease: &Arc<Lease>,
        outcome: &Outcome,
        last_step: Option<(&'static str, String)>,
        slot: Option<OwnedSemaphorePermit>,
    ) -> Result<Finished, Error> {
        let request = Request::Finish {
            outcome: outcome.clone(),
            last_step,
        };
        match self.call(lease, request, slot).await? {
            HolderReply::Finished(f) => Ok(f),
            other => Err(mismatch("finish", &other)),
        }
    }

    /// Hands an unstarted job back; the reply is its new state.
    pub(crate) async fn release(&self, lease: &Arc<Lease>) -> Result<JobState, Error> {
        match self.call(lease, Request::Release, None).await? {
            HolderReply::Released(state) => Ok(state),
            other => Err(mismatch("release", &other)),
        }
    }
}

/// The error for a reply of another operation's kind.
fn mismatch(what: &str, reply: &HolderReply) -> Error {
    Error::Protocol {
        script: "settle",
        detail: format!("a {what} got the reply {reply:?}"),
    }
}
