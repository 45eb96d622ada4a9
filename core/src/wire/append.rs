//! Checkpoints on the wire: a completed step's output is appended to the job's
//! outputs list with plain commands, not a script, and counts once the next
//! script that ends the attempt seals it (`core/lua/lib/outputs.lua`). A
//! call's checkpoints of one job are two commands of its pipeline (many jobs
//! share it): `RPUSH <base>:out:<id>` of an entry
//! `<F>@<token>@<ms>@<next>@<step> <output>` per checkpoint (`ms` the
//! holder's clock), then `HMGET` of the job's state, token, cancel request
//! and id. The `HMGET` runs after the append, so a checkpoint answered as
//! accepted landed while its attempt was live: it counts. When the call's
//! script finishes the same attempt after the appends (a worker's usual batch
//! at a job's end), the finish answers for them and the `HMGET` is left out:
//! a finish accepted sealed them, so they count; a finish refused refuses
//! them too. Either answer reads the job after the append, as the `HMGET`
//! would have.

use std::collections::HashMap;

use deadpool_redis::redis::{self, Value};

use crate::error::{Error, Result};
use crate::lease::{Lease, Outcome};
use crate::state::JobState;
use crate::transitions::Op;
use crate::wire::holder::{HolderOp, HolderReply};
use crate::wire::keys::QueueKeys;

/// The job fields a checkpoint reads back, in `HMGET` order.
const READ_BACK: [&str; 4] = ["state", "token", "cancel_reason", "id"];

/// The checkpoints of one call, grouped by job in the order they came: each
/// job's entries go in one `RPUSH`, then one `HMGET` reads the job back for
/// all of them (a worker's batch often holds a job's checkpoints and its
/// finish: three steps' outputs cost two commands, not six).
#[derive(Default)]
pub(crate) struct Appends<'o> {
    groups: Vec<Group<'o>>,
    /// Each checkpoint's group, in the order of the call's operations.
    order: Vec<usize>,
    /// Where each job's group is in `groups`.
    by_job: HashMap<&'o str, usize>,
}

/// One job's checkpoints in a call.
struct Group<'o> {
    /// The first checkpoint's lease: the job and its keys.
    job: &'o str,
    /// The checkpoints, in order.
    ops: Vec<&'o HolderOp<'o>>,
    /// The index, among the call's scripted operations, of the finish of the
    /// same attempt that seals these checkpoints: it answers for them.
    sealed_by: Option<usize>,
}

impl<'o> Appends<'o> {
    /// Adds checkpoint `op`, after those added before; any other operation
    /// is ignored.
    pub(crate) fn add(&mut self, op: &'o HolderOp<'o>) {
        let HolderOp::Checkpoint { lease, .. } = op else {
            return;
        };
        let job = lease.job.as_str();
        let g = match self.by_job.get(job) {
            Some(g) => *g,
            None => {
                self.groups.push(Group {
                    job,
                    ops: Vec::new(),
                    sealed_by: None,
                });
                self.by_job.insert(job, self.groups.len() - 1);
                self.groups.len() - 1
            }
        };
        self.groups[g].ops.push(op);
        self.order.push(g);
    }

    /// Notes that `op`, the `index`-th operation of the call's script, runs
    /// after the appends; `seals` when the script reads the outputs it ends
    /// (see `Settle::appended`). A finish that seals the attempt of a job's
    /// checkpoints (same fence and token for all of them; SUCCEEDED or FAILED,
    /// which only a RUNNING attempt can reach) answers for them.
    pub(crate) fn followed_by(&mut self, index: usize, op: &HolderOp<'_>, seals: bool) {
        let HolderOp::Finish { lease, outcome, .. } = op else {
            return;
        };
        // only a finish accepted from RUNNING alone (SUCCEEDED, FAILED) seals:
        // one that may end a LEASED job (CANCELLED, an interruption) would
        // answer for appends to an attempt that never ran
        if !seals || !matches!(outcome, Outcome::Succeeded | Outcome::Failed { .. }) {
            return;
        }
        let Some(&g) = self.by_job.get(lease.job.as_str()) else {
            return;
        };
        let Some(group) = self.groups.get_mut(g) else {
            return;
        };
        let same_attempt = |c: &&HolderOp<'_>| {
            let l = c.lease();
            l.fence == lease.fence && l.token == lease.token
        };
        if group.sealed_by.is_none() && group.ops.iter().all(same_attempt) {
            group.sealed_by = Some(index);
        }
    }

    /// Whether there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The pipeline of the appends: per job, the `RPUSH` of its entries, then
    /// the read of its state, token and cancel request unless a finish in the
    /// call answers for them. Errors are replies.
    pub(crate) fn encode(&self, keys: &QueueKeys) -> redis::Pipeline {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        for group in &self.groups {
            let push = pipe.cmd("RPUSH").arg(keys.outputs(group.job));
            for op in &group.ops {
                if let HolderOp::Checkpoint {
                    lease,
                    step,
                    output,
                    next_step,
                } = op
                {
                    let head = format!(
                        "{}@{}@{now_ms}@{}@{step}",
                        lease.fence,
                        lease.token,
                        next_step.unwrap_or("")
                    );
                    push.arg(head).arg(*output);
                }
            }
            if group.sealed_by.is_none() {
                pipe.cmd("HMGET")
                    .arg(keys.job(group.job))
                    .arg(&READ_BACK[..]);
            }
        }
        pipe
    }

    /// Each checkpoint's reply, in the order they were added, from the
    /// pipeline's replies (two per job, one where a finish answers) and the
    /// replies of the call's script (`script`, in its operations' order).
    pub(crate) fn decode(
        &self,
        keys: &QueueKeys,
        values: Vec<Value>,
        script: &[Result<HolderReply>],
    ) -> Vec<Result<HolderReply>> {
        let mut per_group: Vec<(Value, Answer<'_>)> = Vec::with_capacity(self.groups.len());
        let mut values = values.into_iter();
        for group in &self.groups {
            let Some(added) = values.next() else { break };
            let answer = match group.sealed_by {
                Some(i) => Answer::Finish(script.get(i)),
                None => match values.next() {
                    Some(read) => Answer::ReadBack(read),
                    None => break,
                },
            };
            per_group.push((added, answer));
        }
        let mut seen = vec![0usize; self.groups.len()];
        self.order
            .iter()
            .map(|&g| {
                let i = seen[g];
                seen[g] += 1;
                let (Some(group), Some((added, answer))) = (self.groups.get(g), per_group.get(g))
                else {
                    return Err(Error::Protocol {
                        script: "checkpoint",
                        detail: format!("expected {REPLIES} replies per job's checkpoints"),
                    });
                };
                match group.ops.get(i) {
                    Some(op) => match answer {
                        Answer::ReadBack(read) => {
                            decode(keys, op.lease(), added.clone(), read.clone())
                        }
                        Answer::Finish(finish) => answered_by_finish(op.lease(), added, *finish),
                    },
                    None => Err(Error::Protocol {
                        script: "checkpoint",
                        detail: "a checkpoint without its group".into(),
                    }),
                }
            })
            .collect()
    }
}

/// What answers a job's checkpoints besides their append's reply.
enum Answer<'r> {
    /// The read-back of the job's fields.
    ReadBack(Value),
    /// The reply to the finish that sealed them (`None`: the script gave none).
    Finish(Option<&'r Result<HolderReply>>),
}

/// The number of replies a job's checkpoints add to a pipeline at most.
pub(crate) const REPLIES: usize = 2;

/// A checkpoint's reply from its append's and from that of the finish of its
/// attempt that followed in the same call: accepted, the finish sealed it
/// (it counts); refused, so is the checkpoint, for the same reason.
fn answered_by_finish(
    lease: &Lease,
    appended: &Value,
    finish: Option<&Result<HolderReply>>,
) -> Result<HolderReply> {
    if let Value::ServerError(e) = appended {
        return Err(Error::Redis(e.clone().into()));
    }
    let job = lease.job.as_str().to_owned();
    match finish {
        Some(Ok(HolderReply::Finished(_))) => Ok(HolderReply::Checkpointed(None)),
        Some(Err(Error::LeaseLost { state, .. } | Error::AlreadyTerminal { state, .. })) => {
            Err(Error::LeaseLost {
                job,
                state: *state,
                op: Op::Checkpoint,
            })
        }
        Some(Err(Error::Refused { state, .. })) => Err(Error::Refused {
            job,
            state: *state,
            op: Op::Checkpoint,
            to: Some(JobState::Running),
        }),
        Some(Err(Error::NotFound { queue, job })) => Err(Error::NotFound {
            queue: queue.clone(),
            job: job.clone(),
        }),
        Some(Err(Error::Corrupt {
            key,
            field,
            problem,
        })) => Err(Error::Corrupt {
            key: key.clone(),
            field: field.clone(),
            problem: problem.clone(),
        }),
        Some(Err(e)) => Err(Error::Protocol {
            script: "checkpoint",
            detail: format!("the finish that was to seal it failed: {e}"),
        }),
        Some(Ok(other)) => Err(Error::Protocol {
            script: "checkpoint",
            detail: format!("a finish answered {other:?}"),
        }),
        None => Err(Error::Protocol {
            script: "checkpoint",
            detail: "no reply from the finish that was to seal it".into(),
        }),
    }
}

/// Reads one checkpoint's replies (the append's, then the read-back's): the
/// pending cancel request, or the refusal a script would have given. The
/// entry of a refused checkpoint counts for no one.
pub(crate) fn decode(
    keys: &QueueKeys,
    lease: &Lease,
    appended: Value,
    read_back: Value,
) -> Result<HolderReply> {
    let job = lease.job.as_str();
    if let Value::ServerError(e) = appended {
        return Err(Error::Redis(e.into()));
    }
    let fields = match read_back {
        Value::Array(items) if items.len() == READ_BACK.len() => items,
        Value::ServerError(e) => return Err(Error::Redis(e.into())),
        other => {
            return Err(Error::Protocol {
                script: "checkpoint",
                detail: format!("expected the job's {READ_BACK:?}, got {other:?}"),
            })
        }
    };
    let mut texts = fields.into_iter().map(|v| text_of(keys, job, v));
    let mut next = |name: &'static str| -> Result<Option<String>> {
        texts.next().unwrap_or_else(|| {
            Err(Error::Protocol {
                script: "checkpoint",
                detail: format!("no {name} in the reply"),
            })
        })
    };
    let (state, token, cancel, id) = (
        next("state")?,
        next("token")?,
        next("cancel_reason")?,
        next("id")?,
    );
    let Some(state) = state else {
        return Err(Error::NotFound {
            queue: keys.queue().to_owned(),
            job: job.to_owned(),
        });
    };
    let state: JobState = state.parse().map_err(|_| Error::Corrupt {
        key: keys.job(job),
        field: "state".into(),
        problem: format!("unknown state {state:?}"),
    })?;
    // a hash that names another job is never taken for this one (the seal
    // refuses it too)
    if let Some(named) = id.filter(|named| named != job) {
        return Err(Error::Corrupt {
            key: keys.job(job),
            field: "id".into(),
            problem: format!("names another job: {named:?} (the key names {job:?})"),
        });
    }
    if state != JobState::Running {
        return Err(Error::Refused {
            job: job.to_owned(),
            state,
            op: Op::Checkpoint,
            to: Some(JobState::Running),
        });
    }
    if token.as_deref() != Some(lease.token.as_str()) {
        return Err(Error::LeaseLost {
            job: job.to_owned(),
            state,
            op: Op::Checkpoint,
        });
    }
    Ok(HolderReply::Checkpointed(cancel.filter(|c| !c.is_empty())))
}

/// A field of the read-back as text (`None` when absent).
fn text_of(keys: &QueueKeys, job: &str, v: Value) -> Result<Option<String>> {
    match v {
        Value::Nil => Ok(None),
        Value::BulkString(b) => String::from_utf8(b).map(Some).map_err(|_| Error::Corrupt {
            key: keys.job(job),
            field: "(a field a checkpoint reads)".into(),
            problem: "not UTF-8".into(),
        }),
        Value::SimpleString(s) => Ok(Some(s)),
        other => Err(Error::Protocol {
            script: "checkpoint",
            detail: format!("unexpected field value {other:?}"),
        }),
    }
}
