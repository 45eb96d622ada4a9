//! The words the command line and the dashboard share for jobs, locks and
//! actions: a lock's time left, a job's step timeline, the verdict on its
//! state, an attempt's error and resolution, why the state model refused a
//! move, and what cancel, retry and resolve did.

use std::fmt::Write as _;

use leasehold_core::{
    AttemptError, AttemptRecord, Cancelled, Ending, Error, Job, JobId, JobState, LockInfo, Millis,
    Resolution, RetryMode,
};
use serde::Serialize;

use crate::failure::Failure;
use crate::time::{human, stamp};

/// `-` for nothing.
pub(crate) fn opt(s: Option<&str>) -> String {
    s.unwrap_or("-").to_owned()
}

/// A count with its noun: `1 job`, `0 jobs`, `2 jobs` (`many` unless one).
pub(crate) fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `n job(s)`: [`count`] of jobs.
pub(crate) fn jobs(n: usize) -> String {
    count(n, "job", "jobs")
}

/// Why a job's attempt ended badly, for a listing row: `in step S: KIND:
/// MESSAGE (retryable|permanent)`, the message cut at 100 characters.
pub(crate) fn ending(e: &Ending) -> String {
    let mut message: String = e.message.chars().take(100).collect();
    if message.len() < e.message.len() {
        message.push('…');
    }
    format!(
        "{}{}: {message} ({})",
        e.step
            .as_deref()
            .map_or(String::new(), |s| format!("in step {s}: ")),
        e.kind,
        if e.retryable {
            "retryable"
        } else {
            "permanent"
        }
    )
}

/// `yes` or `no`.
pub(crate) fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// The time a lock has left: `free`, `persisted (STALE holder)`, the holder's
/// lease (which governs the lock while it runs: `6s (holder's lease)`, or
/// `holder's lease expired 2s ago`), else the lock key's own TTL, or `?`.
pub(crate) fn lock_ttl(lock: &LockInfo) -> String {
    match (lock.holder.as_ref(), lock.ttl_ms, lock.holder_lease_ms) {
        (None, _, _) => "free".into(),
        (Some(_), Some(-1), _) => "persisted (STALE holder)".into(),
        (Some(_), _, Some(left)) if left >= 0 => format!("{} (holder's lease)", human(left)),
        (Some(_), _, Some(left)) => format!(
            "holder's lease expired {} ago (the next sweep decides)",
            human(-left)
        ),
        (Some(_), Some(t), None) if t >= 0 => format!("{} (lock key TTL)", human(t)),
        (Some(_), _, _) => "?".into(),
    }
}

/// The state of a lock's holder, or `gone` when its job record is gone.
pub(crate) fn holder_state(lock: &LockInfo) -> &'static str {
    lock.holder_state.map_or("gone", JobState::as_str)
}

/// The step's verdict on a failure and, apart from it, whether automatic
/// retries were used up: `retryable: yes|no`, or `retryable: yes; automatic
/// retries used up`.
pub(crate) fn retry_flag(e: &AttemptError) -> String {
    let mut out = format!("retryable: {}", yes_no(e.retryable));
    if e.retryable && e.retries_exhausted {
        out.push_str("; automatic retries used up");
    }
    out
}

/// An attempt's error: `kind: message (retryable: yes|no[; automatic retries used up])`.
pub(crate) fn attempt_error(e: &AttemptError) -> String {
    format!("{}: {} ({})", e.kind, e.message, retry_flag(e))
}

/// An operator's decision on a STALE attempt: `operator ACTION by WHO: REASON
/// (decided AT; what it did)`, the parenthesis as far as the record knows it.
pub(crate) fn resolution(r: &Resolution) -> String {
    let mut out = format!("operator {} by {}: {}", r.action, r.by, r.reason);
    let mut what = Vec::new();
    if let Some(at) = r.at {
        what.push(format!("decided {}", stamp(at)));
    }
    match (r.mode.as_deref(), r.to) {
        (Some("resume"), _) => what.push("resumed after the last completed step".into()),
        (Some("start"), _) => what.push("started over from the first step".into()),
        (_, Some(to)) if r.action == "resolve" => what.push(format!("resolved as {to}")),
        _ => {}
    }
    if !what.is_empty() {
        let _ = write!(out, " ({})", what.join("; "));
    }
    out
}

/// How a STALE attempt ended, as recorded when it went STALE: `lease expired
/// while running step S (cut off)`.
pub(crate) fn stale_end(a: &AttemptRecord) -> Option<String> {
    if a.state != JobState::Stale {
        return None;
    }
    Some(match &a.cut_step {
        Some(step) => format!("lease expired while running step {step} (cut off mid-way)"),
        None => "lease expired while running".to_owned(),
    })
}

/// One moment of a job's step timeline.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Moment {
    /// When (ms).
    pub at: Millis,
    /// The attempt.
    pub attempt: u32,
    /// What happened.
    pub what: String,
}

/// The step timeline of every attempt, from the records and the current attempt's fields.
pub(crate) fn timeline(job: &Job) -> Vec<Moment> {
    let mut out = vec![Moment {
        at: job.created_at,
        attempt: 1,
        what: "enqueued".into(),
    }];
    let mut cancels = Vec::new();
    for a in &job.attempts {
        if let Some(at) = a.leased_at {
            out.push(Moment {
                at,
                attempt: a.n,
                what: format!("leased by {} (fence {})", a.worker, a.fence),
            });
        }
        if let Some(at) = a.started_at {
            out.push(Moment {
                at,
                attempt: a.n,
                what: "started".into(),
            });
        }
        for s in &a.steps {
            out.push(Moment {
                at: s.at,
                attempt: a.n,
                what: format!("step {} completed", s.step),
            });
        }
        if let Some(c) = &a.cancel {
            cancels.push((c.clone(), a.n));
        }
        let mut what = format!("ended {}", a.state);
        if a.state == JobState::Succeeded && a.cancel.is_some() {
            what.push_str(": completed first, before the cancel request was honoured");
        } else if let Some(e) = &a.error {
            let _ = write!(what, ": {}", attempt_error(e));
        } else if let Some(r) = a.reason.as_deref().filter(|r| !r.is_empty()) {
            let _ = write!(what, ": {r}");
        } else if let Some(end) = stale_end(a) {
            let _ = write!(what, ": {end}");
        }
        if let Some(r) = &a.resolution {
            match r.at {
                // the decision is a moment of its own, after the attempt ended
                Some(at) => out.push(Moment {
                    at,
                    attempt: a.n,
                    what: format!("decision on the STALE attempt: {}", resolution(r)),
                }),
                // recorded before its time was kept
                None => {
                    let _ = write!(what, " [{}]", resolution(r));
                }
            }
        }
        out.push(Moment {
            at: a.ended_at,
            attempt: a.n,
            what,
        });
    }
    let recorded = job.attempts.iter().any(|a| a.n == job.attempt);
    if !recorded {
        if let Some(at) = job.leased_at {
            out.push(Moment {
                at,
                attempt: job.attempt,
                what: format!(
                    "leased by {} (fence {})",
                    opt(job.worker.as_deref()),
                    job.fence.unwrap_or(0)
                ),
            });
        }
        if let Some(at) = job.started_at {
            out.push(Moment {
                at,
                attempt: job.attempt,
                what: "started".into(),
            });
        }
        for s in &job.steps {
            out.push(Moment {
                at: s.at,
                attempt: job.attempt,
                what: format!("step {} completed", s.step),
            });
        }
        if let Some(at) = job.stale_at {
            out.push(Moment {
                at,
                attempt: job.attempt,
                what: format!(
                    "went STALE: lease expired while running step {}",
                    opt(job.step.as_deref())
                ),
            });
        }
    }
    if let Some(c) = &job.cancel {
        cancels.push((c.clone(), job.attempt));
    }
    cancels.dedup_by(|a, b| a.0 == b.0);
    for (c, n) in cancels {
        if let Some(at) = c.at {
            out.push(Moment {
                at,
                attempt: n,
                what: format!("cancel requested by {}: {}", c.by, c.reason),
            });
        }
    }
    out.sort_by_key(|m| m.at);
    out
}

/// What an operator should know about the job's state: whether a failure is
/// retryable, whether a retry is pending, whether a decision is needed.
pub(crate) fn verdict(j: &Job) -> Option<String> {
    // a STALE attempt an operator resolved: the decision is the verdict
    if let Some(r) = j
        .attempts
        .iter()
        .find(|a| a.n == j.attempt && j.state.is_terminal())
        .and_then(|a| a.resolution.as_ref())
    {
        return Some(format!(
            "resolved as {} after its worker died (STALE): {}",
            j.state,
            resolution(r)
        ));
    }
    let last_failed = j
        .attempts
        .iter()
        .rev()
        .find(|a| a.state == JobState::Failed);
    match j.state {
        JobState::Failed => {
            let a = j.attempts.iter().find(|a| a.n == j.attempt)?;
            Some(match &a.error {
                // a process step's exit names its code and the setting that decided
                Some(e) if !e.retryable && e.kind == "exit" => format!(
                    "not retryable: {}; `leasehold retry` starts a new attempt anyway",
                    e.message.lines().next().unwrap_or_default()
                ),
                Some(e) if !e.retryable => format!(
                    "not retryable: the step said retrying won't help ({}); `leasehold retry` starts a new attempt anyway",
                    e.kind
                ),
                // a cancel pending when a retryable step failed stops automatic retries
                Some(e) if !e.retries_exhausted && a.cancel.is_some() => format!(
                    "retryable ({}), but a cancel request was pending, so no automatic retry was made; `leasehold retry` starts a new attempt",
                    e.kind
                ),
                // the failing step's own retry policy may allow fewer attempts than the job
                Some(e) if j.attempt < j.max_attempts => format!(
                    "retryable ({}), but automatic retries are used up (attempt {}: the failing step's retry policy allows no more); `leasehold retry` starts a new attempt",
                    e.kind, j.attempt
                ),
                Some(e) => format!(
                    "retryable ({}), but automatic retries are used up ({} of {}); `leasehold retry` starts a new attempt",
                    e.kind, j.attempt, j.max_attempts
                ),
                None => "failed without an error record; `leasehold retry` starts a new attempt".into(),
            })
        }
        JobState::Queued if j.attempt > 1 => match last_failed.and_then(|a| a.error.as_ref().map(|e| (a.n, e))) {
            Some((n, e)) if n + 1 == j.attempt => Some(format!(
                "automatic retry pending after attempt {n} failed ({}: {})",
                e.kind, e.message
            )),
            _ => Some(format!("attempt {} waiting (an operator retry)", j.attempt)),
        },
        JobState::Succeeded => {
            let c = j.attempts.iter().find(|a| a.n == j.attempt)?.cancel.as_ref()?;
            Some(format!(
                "cancel requested at {} by {}, the job completed first: it SUCCEEDED before the request was honoured; its results stand",
                c.at.map_or("?".into(), stamp),
                if c.by.is_empty() { "?" } else { &c.by }
            ))
        }
        JobState::Stale => Some(format!(
            "needs a decision: the worker died while running step {}; side effects may exist. \
             `leasehold retry {id} [--resume|--from-start]` or `leasehold resolve {id} --as failed|cancelled|succeeded --reason ...`",
            opt(j.step.as_deref()),
            id = j.id
        )),
        _ => None,
    }
}

/// The refusal message for `op` (`cancel`, `retry`, `resolve`) on a job in
/// `state`; an error that is not a refusal stays as it is (`Failure::Other`).
pub(crate) fn refused(op: &str, id: &JobId, queue: &str, e: Error) -> Failure {
    let why = |state: JobState| -> String {
        match (op, state) {
            ("cancel", JobState::Stale) => "its worker died mid-step and side effects may exist; decide with `leasehold retry` or `leasehold resolve --as cancelled`".into(),
            ("cancel", s) if s.is_terminal() => "it has already ended; a terminal result is never rewritten".into(),
            ("retry", JobState::Succeeded) => "a SUCCEEDED result is never rewritten; enqueue a new job to run the input again".into(),
            ("retry", _) => "retry applies only to FAILED, CANCELLED and STALE jobs; cancel it first, or wait for it to end".into(),
            ("resolve", _) => "resolve applies only to STALE jobs (a worker died while RUNNING); use cancel or retry for other states".into(),
            _ => "the transition table has no such move".into(),
        }
    };
    match e {
        Error::Refused { state, .. } | Error::AlreadyTerminal { state, .. } | Error::LeaseLost { state, .. } => {
            Failure::Refused(format!("cannot {op} job {id} in queue {queue}: it is {state}; {}", why(state)))
        }
        e @ Error::ActionRefused { .. } => Failure::Refused(format!(
            "cannot {op} job {id} in queue {queue}: {e}"
        )),
        Error::InputKeyTaken { holder, .. } => Failure::Refused(format!(
            "cannot {op} job {id} in queue {queue}: job {holder} holds its input key and has not finished (the same input would be processed twice)"
        )),
        other => Failure::Other(other.to_string()),
    }
}

/// What a cancel did: its outcome (`cancelled`, `requested`,
/// `already_requested`), the job's state after it, and a sentence.
pub(crate) fn cancelled(id: &JobId, result: &Cancelled) -> (&'static str, JobState, String) {
    match result {
        Cancelled::Now => (
            "cancelled",
            JobState::Cancelled,
            format!("job {id} cancelled (it was QUEUED)"),
        ),
        Cancelled::Requested { state } => (
            "requested",
            *state,
            format!("cancel requested for job {id} ({state}): its worker is told at once and stops the running step, usually within a quarter second (at worst at its next renewal)"),
        ),
        Cancelled::AlreadyRequested { state, reason } => (
            "already_requested",
            *state,
            format!("job {id} ({state}) already has a cancel request ({reason:?}); it stands"),
        ),
    }
}

/// What a retry did: the job is queued again as attempt `attempt`.
pub(crate) fn retried(id: &JobId, attempt: u32, mode: RetryMode) -> String {
    let how = match mode {
        RetryMode::Resume => "resuming after the last completed step",
        RetryMode::FromStart => "from the first step",
    };
    format!("job {id} queued again as attempt {attempt}, {how}")
}

/// What a resolve did.
pub(crate) fn resolved(id: &JobId, state: JobState) -> String {
    format!("job {id} resolved as {state}")
}
