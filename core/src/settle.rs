//! Settling: many holder operations and the next lease in one round trip
//! (`settle.lua`), so a busy worker pays one call per batch, not per job.

use std::time::Duration;

use deadpool_redis::redis::Value;

use crate::error::{Error, Result};
use crate::keys::check_name;
use crate::lease::{Finished, Lease, Leased, Outcome, Started};
use crate::queue::{bool_arg, lock_ttl, millis, read_leased, Queue};
use crate::reply::Reply;
use crate::scripts;
use crate::state::JobState;

/// One operation of a lease holder, as part of a [`Queue::settle`] call.
#[derive(Debug, Clone, Copy)]
pub enum HolderOp<'a> {
    /// LEASED → RUNNING (see [`Queue::start`]).
    Start {
        /// The lease.
        lease: &'a Lease,
        /// The first step to run.
        first_step: &'a str,
    },
    /// A completed step (see [`Queue::checkpoint`]).
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
    /// Ends the attempt (see [`Queue::finish`]), after checkpointing its last
    /// step when `last_step` is given (step name and output).
    Finish {
        /// The lease.
        lease: &'a Lease,
        /// How the attempt ends.
        outcome: &'a Outcome,
        /// The last completed step and its output, checkpointed first.
        last_step: Option<(&'a str, &'a str)>,
    },
    /// LEASED → QUEUED (see [`Queue::release`]).
    Release {
        /// The lease.
        lease: &'a Lease,
    },
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

/// The lease part of a [`Queue::settle`] call.
#[derive(Debug, Clone, Copy)]
pub struct LeaseRequest<'a> {
    /// The worker taking the leases.
    pub worker: &'a str,
    /// The pipelines it serves in this queue.
    pub pipelines: &'a [&'a str],
    /// How many jobs at most.
    pub n: usize,
}

/// What a [`Queue::settle`] call did.
#[derive(Debug)]
pub struct Settled {
    /// One reply per operation, in order: each succeeds or is refused on its own.
    pub replies: Vec<Result<HolderReply>>,
    /// The jobs leased.
    pub leased: Leased,
}

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

impl Queue {
    /// Performs many holder operations and takes new leases in one round trip.
    /// `ttl` is the lease time-to-live used for renewals by checkpoints and for
    /// the new leases. Each operation is compared by its own lease token and is
    /// refused (its reply is an error) without affecting the others.
    pub async fn settle(
        &self,
        ops: &[HolderOp<'_>],
        lease: Option<LeaseRequest<'_>>,
        ttl: Duration,
    ) -> Result<Settled> {
        for op in ops {
            match op {
                HolderOp::Checkpoint { step, output, .. } => check_step(step, output)?,
                HolderOp::Finish {
                    last_step: Some((step, output)),
                    ..
                } => check_step(step, output)?,
                _ => {}
            }
        }
        let lease = lease.filter(|l| l.n > 0 && !l.pipelines.is_empty());
        if let Some(l) = &lease {
            check_name("worker id", l.worker)?;
            for p in l.pipelines {
                check_name("pipeline name", p)?;
            }
        }
        if ops.is_empty() && lease.is_none() {
            return Ok(Settled {
                replies: Vec::new(),
                leased: Leased::default(),
            });
        }
        let keys = self.keys();
        let mut inv = self.invocation(&scripts::SETTLE);
        let (worker, pipelines, n) =
            lease.map_or(("", &[][..], 0), |l| (l.worker, l.pipelines, l.n));
        inv.arg(worker)
            .arg(millis(ttl))
            .arg(lock_ttl(ttl))
            .arg(ops.len())
            .arg(pipelines.len())
            .arg(n);
        for op in ops {
            let l = op.lease();
            let job = l.job.as_str();
            let resource = l.resource.as_deref().filter(|r| !r.is_empty());
            let backoff_ms;
            // only the keys and values this kind of operation needs (see settle.lua)
            inv.key(keys.job(job));
            if let Some(res) = resource {
                inv.key(keys.lock(res)).key(keys.parked(res));
            }
            inv.arg(match op {
                HolderOp::Start { .. } => "start",
                HolderOp::Checkpoint { .. } => "checkpoint",
                HolderOp::Finish { .. } => "finish",
                HolderOp::Release { .. } => "release",
            })
            .arg(&l.token)
            .arg(resource.unwrap_or(""));
            match op {
                HolderOp::Start { first_step, .. } => {
                    inv.arg(*first_step);
                }
                HolderOp::Checkpoint {
                    step,
                    output,
                    next_step,
                    ..
                } => {
                    inv.arg(*step).arg(*output).arg(next_step.unwrap_or(""));
                }
                HolderOp::Finish {
                    outcome, last_step, ..
                } => {
                    let (last, last_output) = last_step.unwrap_or(("", ""));
                    inv.arg(outcome.state().as_str()).arg(last).arg(last_output);
                    // kind, message, retryable, backoff ms, cleanup needed, reason, interrupted
                    let rest: Option<[&str; 7]> = match outcome {
                        Outcome::Succeeded => None,
                        Outcome::Failed {
                            error,
                            backoff,
                            cleanup_needed,
                        } => {
                            backoff_ms = millis(*backoff).to_string();
                            Some([
                                &error.kind,
                                &error.message,
                                bool_arg(error.retryable),
                                &backoff_ms,
                                bool_arg(*cleanup_needed),
                                "",
                                "",
                            ])
                        }
                        Outcome::Interrupted {
                            reason,
                            cleanup_needed,
                        } => Some([
                            "interrupted",
                            reason,
                            "1",
                            "0",
                            bool_arg(*cleanup_needed),
                            reason,
                            "1",
                        ]),
                        Outcome::Cancelled {
                            reason,
                            cleanup_needed,
                        } => Some(["", "", "", "0", bool_arg(*cleanup_needed), reason, ""]),
                    };
                    if let Some(rest) = rest {
                        inv.key(keys.ready(&l.pipeline))
                            .key(keys.delayed(&l.pipeline))
                            .key(keys.wake(&l.pipeline));
                        for v in rest {
                            inv.arg(v);
                        }
                    }
                }
                HolderOp::Release { .. } => {
                    inv.key(keys.ready(&l.pipeline))
                        .key(keys.delayed(&l.pipeline))
                        .key(keys.wake(&l.pipeline));
                }
            }
        }
        for p in pipelines {
            inv.key(keys.ready(p))
                .key(keys.delayed(p))
                .key(keys.wake(p));
        }
        for _ in 0..n {
            inv.arg(uuid::Uuid::new_v4().simple().to_string());
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
            let reply = Reply::new("settle", item).and_then(|mut r| match op {
                HolderOp::Start { lease, .. } => {
                    self.read_started(lease, &mut r).map(HolderReply::Started)
                }
                HolderOp::Checkpoint { lease, .. } => self
                    .read_checkpointed(lease, &mut r)
                    .map(HolderReply::Checkpointed),
                HolderOp::Finish { lease, outcome, .. } => self
                    .read_finished(lease, outcome, &mut r)
                    .map(HolderReply::Finished),
                HolderOp::Release { lease } => {
                    self.read_released(lease, &mut r).map(HolderReply::Released)
                }
            });
            replies.push(reply);
        }
        let leased = match items.next() {
            Some(Value::Array(a)) if a.is_empty() => Leased::default(),
            Some(item) => read_leased(&mut Reply::new("settle", item)?, ttl, true)?,
            None => Leased::default(),
        };
        Ok(Settled { replies, leased })
    }
}
