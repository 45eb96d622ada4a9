//! The states of a job's attempt.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The state of a job, which is the state of its current attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum JobState {
    /// Waiting to be leased (ready, delayed until its not-before time, or parked on a locked resource).
    Queued,
    /// Taken by a worker that has not started it yet.
    Leased,
    /// A worker is running its steps.
    Running,
    /// Every step completed. Terminal.
    Succeeded,
    /// A step failed. Terminal for the attempt.
    Failed,
    /// Cancelled before or while running. Terminal for the attempt.
    Cancelled,
    /// Its worker stopped renewing the lease while RUNNING: side effects may exist, an operator decides.
    Stale,
}

impl JobState {
    /// Every state, in the order of the lifecycle.
    pub const ALL: [JobState; 7] = [
        JobState::Queued,
        JobState::Leased,
        JobState::Running,
        JobState::Succeeded,
        JobState::Failed,
        JobState::Cancelled,
        JobState::Stale,
    ];

    /// The name stored in Redis (`QUEUED`, `LEASED`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "QUEUED",
            JobState::Leased => "LEASED",
            JobState::Running => "RUNNING",
            JobState::Succeeded => "SUCCEEDED",
            JobState::Failed => "FAILED",
            JobState::Cancelled => "CANCELLED",
            JobState::Stale => "STALE",
        }
    }

    /// True for SUCCEEDED, FAILED and CANCELLED: the attempt is over and is never rewritten.
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Succeeded | JobState::Failed | JobState::Cancelled
        )
    }

    /// True while a worker holds a lease on the job (LEASED or RUNNING).
    pub const fn is_leased(self) -> bool {
        matches!(self, JobState::Leased | JobState::Running)
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A state name that is not one of the seven.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown job state {0:?}")]
pub struct UnknownState(pub String);

impl FromStr for JobState {
    type Err = UnknownState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|state| state.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownState(s.to_owned()))
    }
}
