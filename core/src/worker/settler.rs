//! The settler handle: how a job task asks its lease group's loop (see
//! `lease_loop.rs`) to perform a holder operation in the loop's next `settle`
//! batch, and waits for the operation's own reply. The typed calls (start,
//! checkpoint, finish, release) are those of [`Holder`], written once for
//! this handle and for `Queue` alike.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit};

use crate::error::{Error, Result};
use crate::lease::{Finished, Lease, Outcome};
use crate::settle::{Holder, HolderCall, HolderOp, HolderReply};

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
        /// Whether the attempt may have appended step outputs, which the
        /// finish seals.
        appended: bool,
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
            Request::Finish {
                outcome, last_step, ..
            } => HolderOp::Finish {
                lease,
                outcome,
                last_step: last_step.as_ref().map(|(s, o)| (*s, o.as_str())),
            },
            Request::Release => HolderOp::Release { lease },
        }
    }

    /// Whether the operation's holder may have appended step outputs (a
    /// finish seals them).
    pub(crate) fn appended(&self) -> bool {
        match &self.request {
            Request::Finish { appended, .. } => *appended,
            _ => false,
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
}

impl Settler {
    /// Ends the attempt on `lease` with `outcome`, after checkpointing
    /// `last_step` when given, as [`Holder::finish`] does, told whether the
    /// attempt appended step outputs (`appended`: the finish seals them; one
    /// that appended none spares the read).
    pub(crate) async fn finish_sealing(
        &self,
        lease: &Arc<Lease>,
        outcome: &Outcome,
        last_step: Option<(&'static str, &str)>,
        slot: Option<OwnedSemaphorePermit>,
        appended: bool,
    ) -> Result<Finished> {
        let request = Request::Finish {
            outcome: outcome.clone(),
            last_step: last_step.map(|(s, o)| (s, o.to_owned())),
            appended,
        };
        match self.call(lease, request, slot).await? {
            HolderReply::Finished(finished) => Ok(finished),
            other => Err(Error::Protocol {
                script: "settle",
                detail: format!("finish: unexpected reply {other:?}"),
            }),
        }
    }
}

/// The worker's holder calls: each a request in the lease loop's next batch.
impl Holder<'static> for Settler {
    type Lease = Arc<Lease>;
    type Slot = Option<OwnedSemaphorePermit>;

    fn perform<'a>(
        &'a self,
        lease: &'a Arc<Lease>,
        call: HolderCall<'static, 'a>,
        slot: Option<OwnedSemaphorePermit>,
    ) -> impl Future<Output = Result<HolderReply>> + Send + 'a
    where
        'static: 'a,
    {
        // the request owns what it carries (it waits in the batch)
        let request = match call {
            HolderCall::Start { first_step } => Request::Start { first_step },
            HolderCall::Checkpoint {
                step,
                output,
                next_step,
            } => Request::Checkpoint {
                step,
                output: output.to_owned(),
                next_step,
            },
            HolderCall::Finish { outcome, last_step } => Request::Finish {
                outcome: outcome.clone(),
                last_step: last_step.map(|(s, o)| (s, o.to_owned())),
                appended: true,
            },
            HolderCall::Release => Request::Release,
        };
        self.call(lease, request, slot)
    }
}
