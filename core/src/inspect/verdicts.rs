//! The verdicts an operator reads off a job: whether cleanup is needed,
//! whether it may be retried, and whether a cancel request was honoured.
//! Worked out once, here, from the job's record; `show`, `show --json`, the
//! dashboard and its API all say what [`verdicts`] says.

use serde::{Deserialize, Serialize};

use super::cancel::{cancel_status, CancelOutcome};
use crate::record::{AttemptError, AttemptRecord, Job};
use crate::state::JobState;

/// Whether a job's side effects need cleaning up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cleanup {
    /// No step was cut mid-way.
    #[default]
    NotNeeded,
    /// A step was cut mid-way (the worker said so, or an operator resolved a
    /// STALE job as FAILED or CANCELLED: its cleanup hook is queued).
    Needed,
    /// STALE: the worker died while a step was running; side effects may
    /// exist. Resolving it as FAILED or CANCELLED runs the cleanup hook.
    Possible,
}

impl Cleanup {
    /// Its name in JSON: `not_needed`, `needed` or `possible`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Cleanup::NotNeeded => "not_needed",
            Cleanup::Needed => "needed",
            Cleanup::Possible => "possible",
        }
    }

    /// A short sentence for humans.
    pub fn explain(self) -> &'static str {
        match self {
            Cleanup::NotNeeded => "not needed",
            Cleanup::Needed => "needed (a step was cut mid-way)",
            Cleanup::Possible => {
                "probably needed: the worker died while a step was running (check the sink); \
                 resolving as failed or cancelled runs the cleanup hook"
            }
        }
    }
}

/// The verdicts on one job, computed once (see [`verdicts`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Verdicts {
    /// Whether cleanup is needed.
    pub cleanup: Cleanup,
    /// For a FAILED, STALE or CANCELLED job: whether retrying may help (the
    /// failing step's verdict; a STALE or CANCELLED job did not fail, so yes).
    /// `None` for a job in another state.
    pub retryable: Option<bool>,
    /// For a FAILED job whose failure was retryable: the automatic retries are
    /// used up (the job's `max_attempts` or the step's own policy).
    #[serde(default)]
    pub retries_exhausted: bool,
    /// Whether the latest cancel request was honoured (the attempt ended
    /// CANCELLED); `None` when none was made.
    pub cancel_honoured: Option<bool>,
}

/// Whether a job in `state` whose current attempt failed with `error` (if
/// any) may be retried to good effect: the step's verdict for a FAILED job
/// (yes when no error was recorded); yes for a STALE or CANCELLED job, which
/// did not fail; `None` in any other state. Listings and [`verdicts`] both
/// say what this says.
pub fn retryable(state: JobState, error: Option<&AttemptError>) -> Option<bool> {
    match state {
        JobState::Failed => Some(error.is_none_or(|e| e.retryable)),
        JobState::Stale | JobState::Cancelled => Some(true),
        _ => None,
    }
}

/// The record of the job's current attempt, if it has one.
fn current(job: &Job) -> Option<&AttemptRecord> {
    job.attempts.iter().rev().find(|a| a.n == job.attempt)
}

/// The verdicts on `job`, read with its attempt records
/// ([`Queue::job`](crate::Queue::job)).
pub fn verdicts(job: &Job) -> Verdicts {
    let record = current(job);
    let resolved_from_stale = record.is_some_and(|a| a.resolution.is_some())
        && matches!(job.state, JobState::Failed | JobState::Cancelled);
    let cleanup = if job.state == JobState::Stale {
        Cleanup::Possible
    } else if job.cleanup_needed
        || resolved_from_stale
        || (job.state.is_terminal() && record.is_some_and(|a| a.cleanup_needed))
    {
        Cleanup::Needed
    } else {
        Cleanup::NotNeeded
    };
    let error = record.and_then(|a| a.error.as_ref());
    let retryable = retryable(job.state, error);
    let retries_exhausted =
        job.state == JobState::Failed && error.is_some_and(|e| e.retryable && e.retries_exhausted);
    let cancel_honoured = cancel_status(job).map(|c| matches!(c.outcome, CancelOutcome::Honoured));
    Verdicts {
        cleanup,
        retryable,
        retries_exhausted,
        cancel_honoured,
    }
}
