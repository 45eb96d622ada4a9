//! The settler handle: how a job task asks its lease group's loop (see
//! `lease_loop.rs`) to perform a holder operation in the loop's next `settle`
//! batch, and waits for the operation's own reply. The typed calls (start,
//! checkpoint, finish, release) are those of [`Holder`], written once for
//! this handle and for `Queue` alike. A worker's checkpoint is sent without
//! waiting ([`Settler::append`]): the loop keeps each job's operations in
//! order across its calls, and the reply is acted on where it arrives (a
//! cancel or a lost lease stops the job; a failed send is sent again).

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit};

use tracing::warn;

use crate::error::{Error, Result};
use crate::lease::{Finished, Lease, Outcome};
use crate::pipeline::StopWhy;
use crate::settle::{Holder, HolderCall, HolderOp, HolderReply};
use crate::worker::active::ActiveJob;

/// How many times an append whose send failed is sent again before its job
/// is stopped as cut off (each after the loop's backoff of a failed call).
const APPEND_TRIES: u8 = 8;

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

/// Where a request's reply goes.
enum ReplyTo {
    /// To the job task, which waits for it.
    Task(oneshot::Sender<Result<HolderReply>>),
    /// Acted on by the loop (an append the job task did not wait for): a
    /// cancel or a lost lease stops the job; `tries` counts the sends.
    Watch { active: Arc<ActiveJob>, tries: u8 },
}

/// A request on its way to the settler, with where its reply goes.
pub(crate) struct Pending {
    lease: Arc<Lease>,
    request: Request,
    reply: ReplyTo,
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

    /// The attempt it belongs to, as a key: the address of its lease, which
    /// every request of one attempt shares and which is not reused while a
    /// request holds it.
    pub(crate) fn attempt_key(&self) -> usize {
        Arc::as_ptr(&self.lease) as usize
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

    /// Sends the operation's reply to the job task waiting for it, or acts
    /// on it (an append's: a cancel or a lost lease stops the job). An append
    /// whose send failed comes back, to be sent again in order.
    pub(crate) fn answer(self, reply: Result<HolderReply>) -> Option<Pending> {
        let Pending {
            lease,
            request,
            reply: to,
            slot,
        } = self;
        match to {
            ReplyTo::Task(tx) => {
                let _ = tx.send(reply);
                None
            }
            ReplyTo::Watch { active, tries } => match reply {
                Ok(HolderReply::Checkpointed(Some(reason))) => {
                    active.stop(StopWhy::Cancel(reason));
                    None
                }
                Ok(_) => None,
                Err(e) if e.is_lease_lost() => {
                    warn!(job = %lease.job, error = %e, "checkpoint: the lease is gone; stopping this attempt without writing");
                    active.stop(StopWhy::Lost(e.to_string()));
                    None
                }
                Err(e) if tries < APPEND_TRIES && !active.is_lost() => {
                    warn!(job = %lease.job, error = %e, "checkpoint failed; sending it again");
                    Some(Pending {
                        lease,
                        request,
                        reply: ReplyTo::Watch {
                            active,
                            tries: tries + 1,
                        },
                        slot,
                    })
                }
                Err(e) => {
                    warn!(job = %lease.job, error = %e, "checkpoint failed {APPEND_TRIES} times; stopping this attempt without writing");
                    active.stop(StopWhy::Lost(format!(
                        "a checkpoint could not be written: {e}"
                    )));
                    None
                }
            },
        }
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
            reply: ReplyTo::Task(reply),
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
    /// Checkpoints `step` of `active`'s attempt (its `output`, and the step
    /// that runs next) without waiting: the append goes in the loop's next
    /// batch, ahead of every later operation of the attempt, and its reply is
    /// acted on there (see [`Pending::answer`]).
    pub(crate) fn append(
        &self,
        active: &Arc<ActiveJob>,
        step: &'static str,
        output: String,
        next_step: Option<&'static str>,
    ) -> Result<()> {
        let pending = Pending {
            lease: active.lease.clone(),
            request: Request::Checkpoint {
                step,
                output,
                next_step,
            },
            reply: ReplyTo::Watch {
                active: active.clone(),
                tries: 1,
            },
            slot: None,
        };
        self.tx
            .send(pending)
            .map_err(|_| Error::Pool("the worker's settler has stopped".into()))
    }

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
