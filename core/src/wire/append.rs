//! Checkpoints on the wire: a completed step's output is appended to the job's
//! outputs list with plain commands, not a script, and counts once the next
//! script that ends the attempt seals it (`core/lua/lib/outputs.lua`). Each
//! checkpoint is two commands of one pipeline (many checkpoints share it):
//! `RPUSH <base>:out:<id> <F>@<token>@<ms>@<next>@<step> <output>` (`ms` the
//! holder's clock), then `HMGET` of the job's state, token, cancel request and id. The `HMGET` runs after the
//! append, so a checkpoint answered as accepted landed while its attempt was
//! live: it counts.

use deadpool_redis::redis::{self, Value};

use crate::error::{Error, Result};
use crate::lease::Lease;
use crate::state::JobState;
use crate::transitions::Op;
use crate::wire::holder::HolderReply;
use crate::wire::keys::QueueKeys;

/// The job fields a checkpoint reads back, in `HMGET` order.
const READ_BACK: [&str; 4] = ["state", "token", "cancel_reason", "id"];

/// Appends one checkpoint's two commands to `pipe`: the entry, then the read of
/// the job's state, token and cancel request.
pub(crate) fn encode(
    keys: &QueueKeys,
    pipe: &mut redis::Pipeline,
    lease: &Lease,
    step: &str,
    output: &str,
    next_step: Option<&str>,
) {
    let job = lease.job.as_str();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let head = format!(
        "{}@{}@{now_ms}@{}@{step}",
        lease.fence,
        lease.token,
        next_step.unwrap_or("")
    );
    pipe.cmd("RPUSH")
        .arg(keys.outputs(job))
        .arg(head)
        .arg(output);
    pipe.cmd("HMGET").arg(keys.job(job)).arg(&READ_BACK[..]);
}

/// The number of replies [`encode`] adds to a pipeline.
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
