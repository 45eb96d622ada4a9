//! The holder operations on the wire: what a lease holder may do to its job
//! (start, checkpoint, finish, release), each with its one argument builder and
//! its one reply reader. `settle.lua` runs them, many per call or one.

use super::call::ScriptCall;

use crate::error::{Error, Result};
use crate::lease::{Finished, Lease, Outcome, Started};
use crate::name::check_name;
use crate::record::AttemptError;
use crate::state::JobState;
use crate::transitions::Op;
use crate::wire::args::{bool_arg, millis};
use crate::wire::keys::QueueKeys;
use crate::wire::refusal::{refusal, reply_state};
use crate::wire::reply::Reply;

/// One operation of a lease holder, as part of a [`Queue::settle`](crate::Queue::settle) call.
#[derive(Debug, Clone, Copy)]
pub enum HolderOp<'a> {
    /// LEASED → RUNNING (see [`Queue::start`](crate::Queue::start)).
    Start {
        /// The lease.
        lease: &'a Lease,
        /// The first step to run.
        first_step: &'a str,
    },
    /// A completed step (see [`Queue::checkpoint`](crate::Queue::checkpoint)).
    Checkpoint {
        /// The lease.
        lease: &'a Lease,
        /// The step completed.
        step: &'a str,
        /// Its output, JSON text.
        output: &'a str,
        /// The step that runs next.
        next_step: Option<&'a str>,
    },
    /// Ends the attempt (see [`Queue::finish`](crate::Queue::finish)), after
    /// checkpointing its last step when `last_step` is given (step name and output).
    Finish {
        /// The lease.
        lease: &'a Lease,
        /// How the attempt ends.
        outcome: &'a Outcome,
        /// The last completed step and its output, checkpointed first.
        last_step: Option<(&'a str, &'a str)>,
    },
    /// LEASED → QUEUED (see [`Queue::release`](crate::Queue::release)).
    Release {
        /// The lease.
        lease: &'a Lease,
    },
}

/// The reply to one [`HolderOp`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HolderReply {
    /// Reply to a start.
    Started(Started),
    /// Reply to a checkpoint: a pending cancel request's reason, if any.
    Checkpointed(Option<String>),
    /// Reply to a finish.
    Finished(Finished),
    /// Reply to a release: the job's new state.
    Released(JobState),
}

impl<'a> HolderOp<'a> {
    /// The lease the operation acts on.
    pub fn lease(&self) -> &'a Lease {
        match self {
            HolderOp::Start { lease, .. }
            | HolderOp::Checkpoint { lease, .. }
            | HolderOp::Finish { lease, .. }
            | HolderOp::Release { lease } => lease,
        }
    }

    /// The operation's name in the transition table.
    pub fn op(&self) -> Op {
        match self {
            HolderOp::Start { .. } => Op::Start,
            HolderOp::Checkpoint { .. } => Op::Checkpoint,
            HolderOp::Finish { .. } => Op::Finish,
            HolderOp::Release { .. } => Op::Release,
        }
    }

    /// Checks what the client can check before anything is sent: step names
    /// and that step outputs are JSON.
    pub(crate) fn validate(&self) -> Result<()> {
        match self {
            HolderOp::Checkpoint { step, output, .. }
            | HolderOp::Finish {
                last_step: Some((step, output)),
                ..
            } => check_step(step, output),
            _ => Ok(()),
        }
    }

    /// Appends the operation's KEYS and ARGV to a settle invocation: the job
    /// key, the lock and parked keys when it has a resource, then the keys its
    /// kind needs; kind, token, resource, then its values (see `settle.lua`);
    /// a finish ends with `appended`, whether its holder may have appended step
    /// outputs for it to seal. A checkpoint is no operation of the script (it
    /// is appended, `wire/append.rs`): the caller never gives one.
    pub(crate) fn encode(&self, keys: &QueueKeys, inv: &mut ScriptCall<'_>, appended: bool) {
        let l = self.lease();
        let resource = l.resource.as_deref().filter(|r| !r.is_empty());
        inv.key(keys.job(l.job.as_str()));
        if let Some(res) = resource {
            inv.key(keys.lock(res)).key(keys.parked(res));
        }
        inv.arg(self.op().as_str())
            .arg(&l.token)
            .arg(resource.unwrap_or(""));
        match self {
            HolderOp::Start { first_step, .. } => {
                inv.arg(*first_step);
            }
            HolderOp::Checkpoint { .. } => {}
            HolderOp::Finish {
                outcome, last_step, ..
            } => {
                let (last, last_output) = last_step.unwrap_or(("", ""));
                inv.arg(outcome.state().as_str()).arg(last).arg(last_output);
                if let Some(rest) = outcome_values(outcome) {
                    requeue_keys(keys, l, inv);
                    for v in &rest {
                        inv.arg(v.as_str());
                    }
                }
                inv.arg(bool_arg(appended));
            }
            HolderOp::Release { .. } => requeue_keys(keys, l, inv),
        }
    }

    /// Reads the operation's reply (one item of a settle reply).
    pub(crate) fn decode(&self, keys: &QueueKeys, reply: &mut Reply) -> Result<HolderReply> {
        let job = self.lease().job.as_str();
        let status = reply.text()?;
        let refused = |reply: &mut Reply, to: JobState| {
            Err(refusal(
                keys,
                "settle",
                self.op(),
                job,
                Some(to),
                &status,
                reply,
            ))
        };
        match self {
            HolderOp::Start { .. } => match status.as_str() {
                "OK" => match reply.text()?.as_str() {
                    "RUNNING" => Ok(HolderReply::Started(Started::Running)),
                    "CANCELLED" => Ok(HolderReply::Started(Started::Cancelled {
                        reason: reply.text()?,
                    })),
                    other => Err(Error::Protocol {
                        script: "settle",
                        detail: format!("start: unknown state {other:?}"),
                    }),
                },
                _ => refused(reply, JobState::Running),
            },
            HolderOp::Checkpoint { .. } => match status.as_str() {
                "OK" => reply.opt_text().map(HolderReply::Checkpointed),
                _ => refused(reply, JobState::Running),
            },
            HolderOp::Finish { outcome, .. } => match status.as_str() {
                "OK" => reply_state("settle", reply)
                    .map(|state| HolderReply::Finished(Finished::Ended(state))),
                "RETRY" => Ok(HolderReply::Finished(Finished::Retrying {
                    attempt: reply.int()?,
                    not_before: reply.int()?,
                })),
                _ => refused(reply, outcome.state()),
            },
            HolderOp::Release { .. } => match status.as_str() {
                "OK" => reply_state("settle", reply).map(HolderReply::Released),
                _ => refused(reply, JobState::Queued),
            },
        }
    }
}

/// The ready, delayed and wake keys of the lease's pipeline: a release and a
/// finish that may queue the job again need them.
fn requeue_keys(keys: &QueueKeys, lease: &Lease, inv: &mut ScriptCall<'_>) {
    inv.key(keys.ready(&lease.pipeline))
        .key(keys.delayed(&lease.pipeline))
        .key(keys.wake(&lease.pipeline));
}

/// A failure's verdict as `finish` reads it: `"1"` retryable, `"used_up"`
/// retryable but the caller's automatic retries are used up (no new attempt,
/// recorded as such), `"0"` not retryable.
fn retryable_arg(error: &AttemptError) -> &'static str {
    match (error.retryable, error.retries_exhausted) {
        (false, _) => "0",
        (true, true) => "used_up",
        (true, false) => "1",
    }
}

/// The values of a finish after its outcome and last step, unless it is a
/// success: error kind, message, retryable, backoff ms, cleanup needed, reason,
/// interrupted.
fn outcome_values(outcome: &Outcome) -> Option<[String; 7]> {
    let s = |v: &str| v.to_owned();
    match outcome {
        Outcome::Succeeded => None,
        Outcome::Failed {
            error,
            backoff,
            cleanup_needed,
        } => Some([
            s(&error.kind),
            s(&error.message),
            s(retryable_arg(error)),
            millis(*backoff).to_string(),
            s(bool_arg(*cleanup_needed)),
            String::new(),
            s(bool_arg(false)),
        ]),
        Outcome::Interrupted {
            reason,
            cleanup_needed,
        } => Some([
            s("interrupted"),
            s(reason),
            s(bool_arg(true)),
            s("0"),
            s(bool_arg(*cleanup_needed)),
            s(reason),
            s(bool_arg(true)),
        ]),
        Outcome::Cancelled {
            reason,
            cleanup_needed,
        } => Some([
            String::new(),
            String::new(),
            s(bool_arg(false)),
            s("0"),
            s(bool_arg(*cleanup_needed)),
            s(reason),
            s(bool_arg(false)),
        ]),
    }
}

/// A step's name and output as a checkpoint may record them.
fn check_step(step: &str, output: &str) -> Result<()> {
    check_name("step name", step)?;
    if step.contains(',') || step.contains('@') {
        return Err(Error::InvalidArgument(format!(
            "step name {step:?} must not contain ',' or '@'"
        )));
    }
    serde_json::from_str::<serde::de::IgnoredAny>(output)
        .map_err(|e| Error::InvalidArgument(format!("output of step {step} is not JSON: {e}")))?;
    Ok(())
}
