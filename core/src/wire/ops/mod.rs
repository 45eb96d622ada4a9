//! One file per script clients call: each holds the script's argument builder
//! (its KEYS and ARGV, from typed inputs, after the fixed keys and the common
//! ARGV every call starts with) and its reply reader (a typed result, or the
//! refusal as an error), in the manner of one file per command. The client
//! ([`crate::Queue`]) only builds an operation and runs it
//! (`Queue::run`); it writes no key or argument of a script itself.
//!
//! `settle` is the exception in shape, not in kind: its operations are the
//! holder operations of `wire/holder.rs` and the lease of `wire/lease.rs`, and
//! `settle.rs` here puts them in one call.

use deadpool_redis::redis::Value;

use super::call::ScriptCall;
use super::keys::QueueKeys;
use super::scripts::LuaScript;
use crate::error::Result;

pub(crate) mod cancel;
pub(crate) mod claim_cleanup;
pub(crate) mod delete;
pub(crate) mod enqueue;
pub(crate) mod group_cancel;
pub(crate) mod group_create;
pub(crate) mod group_retry;
pub(crate) mod group_seal;
pub(crate) mod limit;
pub(crate) mod pause;
#[cfg(unix)]
pub(crate) mod process_log;
pub(crate) mod purge;
pub(crate) mod quarantine_purge;
pub(crate) mod quarantine_repair;
pub(crate) mod renew;
pub(crate) mod resolve;
pub(crate) mod retry;
pub(crate) mod run_now;
pub(crate) mod schedule_register;
pub(crate) mod schedule_state;
pub(crate) mod schedule_tick;
pub(crate) mod settle;
pub(crate) mod sweep;

/// One call of one script: what it sends and how its reply is read.
pub(crate) trait ScriptOp {
    /// What the reply reads as.
    type Output;

    /// The script called.
    fn script(&self) -> &'static LuaScript;

    /// Appends the script's own KEYS and ARGV to `call` (which holds the
    /// fixed keys and the common ARGV already).
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>);

    /// Reads the script's reply.
    fn decode(&self, keys: &QueueKeys, reply: Value) -> Result<Self::Output>;
}

/// The lock and parked-set keys of `resource`, or the job key twice when it
/// has none (`retry`, `resolve`).
fn lock_keys(keys: &QueueKeys, job: &str, resource: Option<&str>) -> [String; 2] {
    match resource {
        Some(res) => [keys.lock(res), keys.parked(res)],
        None => [keys.job(job), keys.job(job)],
    }
}

/// A retry mode as `retry` and `group_retry` read it.
fn retry_mode(mode: crate::lease::RetryMode) -> &'static str {
    match mode {
        crate::lease::RetryMode::Resume => "resume",
        crate::lease::RetryMode::FromStart => "start",
    }
}

/// The answer of an operator action outside the state model (`delete`,
/// `run_now`): `{'OK', state}`, or its refusal as an error.
fn action_reply(
    keys: &QueueKeys,
    script: &'static str,
    action: &'static str,
    job: &crate::id::JobId,
    status: &str,
    reply: &mut super::reply::Reply,
    why: &'static str,
) -> Result<crate::state::JobState> {
    use crate::error::Error;
    use crate::state::JobState;
    let state = |reply: &mut super::reply::Reply| -> Result<JobState> {
        let text = reply.text()?;
        text.parse().map_err(|_| Error::Corrupt {
            key: keys.job(job.as_str()),
            field: "state".into(),
            problem: format!("unknown state {text:?}"),
        })
    };
    match status {
        "OK" => state(reply),
        "REFUSED" => Err(Error::ActionRefused {
            job: job.to_string(),
            state: state(reply)?,
            action,
            why,
        }),
        // NOT_FOUND and CORRUPT as every operator script answers them (the
        // op is named only by refusals, which are ActionRefused here)
        status => Err(super::refusal::refusal(
            keys,
            script,
            crate::transitions::Op::Cancel,
            job.as_str(),
            None,
            status,
            reply,
        )),
    }
}

/// The error for a quarantine action (`quarantine_repair`,
/// `quarantine_purge`) on a job that is not quarantined, or for a status
/// the script never sends.
fn not_quarantined(
    keys: &QueueKeys,
    script: &'static str,
    job: &crate::id::JobId,
    status: &str,
) -> crate::error::Error {
    if status == "NOT_QUARANTINED" {
        return crate::error::Error::InvalidArgument(format!(
            "job {job} is not quarantined in queue {}",
            keys.queue()
        ));
    }
    crate::error::Error::Protocol {
        script,
        detail: format!("unexpected reply {status:?}"),
    }
}

/// The key of group `name` (its hash; its children, children's states and
/// dependents keys add `:children`, `:states`, `:dependents`).
pub(crate) fn group_key(keys: &QueueKeys, name: &str) -> String {
    format!("{}:group:{name}", keys.base())
}

/// The queue's index of groups.
pub(crate) fn groups_key(keys: &QueueKeys) -> String {
    format!("{}:groups", keys.base())
}

/// The error for group `name` not found.
pub(crate) fn group_not_found(keys: &QueueKeys, name: &str) -> crate::error::Error {
    crate::error::Error::GroupNotFound {
        queue: keys.queue().to_owned(),
        group: name.to_owned(),
    }
}

/// The status line of `group_cancel` and `group_retry`: `OK`, or the group
/// not found or settled already.
fn group_batch_status(
    keys: &QueueKeys,
    script: &'static str,
    name: &str,
    reply: &mut super::reply::Reply,
) -> Result<()> {
    use crate::error::Error;
    match reply.text()?.as_str() {
        "OK" => Ok(()),
        "GROUP_NOT_FOUND" => Err(group_not_found(keys, name)),
        "SETTLED" => Err(Error::GroupClosed {
            group: name.to_owned(),
            status: reply.text()?,
        }),
        other => Err(Error::Protocol {
            script,
            detail: format!("unknown status {other:?}"),
        }),
    }
}

/// Appends KEYS[10..12] of schedule `name`: its hash, the queue's schedules
/// index, its ticks stream (every schedule script's first keys).
fn schedule_keys(keys: &QueueKeys, call: &mut ScriptCall<'_>, name: &str) {
    call.key(keys.schedule(name))
        .key(keys.schedules())
        .key(keys.schedule_ticks(name));
}

/// A number of ms in a schedule script's reply.
fn ms_of(script: &'static str, text: &str, what: &str) -> Result<i64> {
    text.parse().map_err(|_| crate::error::Error::Protocol {
        script,
        detail: format!("{what} {text:?} is not a number"),
    })
}

/// An enqueue status as `lib/create` names it.
fn enqueue_status(text: &str) -> Option<crate::answers::EnqueueStatus> {
    use crate::answers::EnqueueStatus;
    match text {
        "created" => Some(EnqueueStatus::Created),
        "rerun" => Some(EnqueueStatus::Rerun),
        "existing" => Some(EnqueueStatus::Existing),
        "succeeded" => Some(EnqueueStatus::Succeeded),
        _ => None,
    }
}
