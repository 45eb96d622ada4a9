//! Checkpoints on the wire: a completed step's output is appended to the job's
//! outputs list with plain commands, not a script, and counts once the next
//! script that ends the attempt seals it (`core/lua/lib/outputs.lua`). A
//! call's checkpoints of one job are two commands of its pipeline (many jobs
//! share it): `RPUSH <base>:out:<id>` of an entry
//! `<F>@<token>@<ms>@<next>@<step> <output>` per checkpoint (`ms` the
//! holder's clock), then `HMGET` of the job's state, token, cancel request
//! and id. The `HMGET` runs after the append, so a checkpoint answered as
//! accepted landed while its attempt was live: it counts.

use std::collections::HashMap;

use deadpool_redis::redis::{self, Value};

use crate::error::{Error, Result};
use crate::lease::Lease;
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
                });
                self.by_job.insert(job, self.groups.len() - 1);
                self.groups.len() - 1
            }
        };
        self.groups[g].ops.push(op);
        self.order.push(g);
    }

    /// Whether there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The pipeline of the appends: per job, the `RPUSH` of its entries, then
    /// the read of its state, token and cancel request. Errors are replies.
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
            pipe.cmd("HMGET")
                .arg(keys.job(group.job))
                .arg(&READ_BACK[..]);
        }
        pipe
    }

    /// Each checkpoint's reply, in the order they were added, from the
    /// pipeline's replies (two per job).
    pub(crate) fn decode(&self, keys: &QueueKeys, values: Vec<Value>) -> Vec<Result<HolderReply>> {
        let mut per_group: Vec<(Value, Value)> = Vec::with_capacity(self.groups.len());
        let mut values = values.into_iter();
        for _ in &self.groups {
            match (values.next(), values.next()) {
                (Some(a), Some(r)) => per_group.push((a, r)),
                _ => break,
            }
        }
        let mut seen = vec![0usize; self.groups.len()];
        self.order
            .iter()
            .map(|&g| {
                let i = seen[g];
                seen[g] += 1;
                let (Some(group), Some((added, read))) = (self.groups.get(g), per_group.get(g))
                else {
                    return Err(Error::Protocol {
                        script: "checkpoint",
                        detail: format!("expected {REPLIES} replies per job's checkpoints"),
                    });
                };
                match group.ops.get(i) {
                    Some(op) => decode(keys, op.lease(), added.clone(), read.clone()),
                    None => Err(Error::Protocol {
                        script: "checkpoint",
                        detail: "a checkpoint without its group".into(),
                    }),
                }
            })
            .collect()
    }
}

/// The number of replies a job's checkpoints add to a pipeline.
pub(crate) const REPLIES: usize = 2;

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
