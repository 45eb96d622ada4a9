//! What the queue's operations answer: an enqueue's [`Enqueued`] and
//! [`EnqueueStatus`], a pause's [`PauseChange`], a group cancel's
//! [`GroupCancelled`] and retry's [`GroupRetried`], a schedule tick's
//! [`TickReply`] and [`TickedWindow`]. They sit below the wire, which reads
//! them from the scripts' replies, and the queue, which returns them.

use serde::Serialize;

use crate::error::Error;
use crate::id::JobId;

/// The reply to `enqueue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enqueued {
    /// The job's id (an existing job's, when `created` is false).
    pub id: JobId,
    /// Whether a job was created (`status` is `Created` or `Rerun`).
    pub created: bool,
    /// What the enqueue did.
    pub status: EnqueueStatus,
    /// For a re-run: the input key's previous latest job.
    pub previous: Option<JobId>,
}

/// What an enqueue did with one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EnqueueStatus {
    /// A new job (no earlier job had its input key within the input window).
    Created,
    /// A new job, linked to the key's previous job (which ended FAILED,
    /// CANCELLED or resolved by an operator, or SUCCEEDED and a re-run was asked).
    Rerun,
    /// A job with the same input key (or id) is not finished: that job is the answer.
    Existing,
    /// The key's latest job SUCCEEDED: that job is the answer (ask for a re-run to run it again).
    Succeeded,
}

impl EnqueueStatus {
    /// The status as the enqueue script names it.
    pub fn as_str(self) -> &'static str {
        match self {
            EnqueueStatus::Created => "created",
            EnqueueStatus::Rerun => "rerun",
            EnqueueStatus::Existing => "existing",
            EnqueueStatus::Succeeded => "succeeded",
        }
    }
}

/// What cancelling a group did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GroupCancelled {
    /// QUEUED children cancelled at once.
    pub cancelled: usize,
    /// LEASED or RUNNING children given a cancel request their holders honour.
    pub requested: usize,
    /// Children that ended meanwhile (nothing to do).
    pub skipped: usize,
}

/// What one `group_retry` call did.
#[derive(Debug)]
pub struct GroupRetried {
    /// Children given a new attempt.
    pub retried: Vec<JobId>,
    /// Children refused, with the reason.
    pub refused: Vec<(JobId, Error)>,
    /// Whether every child was handled (no batch is left).
    pub done: bool,
}

/// What a pause or resume call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseChange {
    /// Paused now.
    Paused,
    /// It was paused already (the marker is applied again to every pipeline given).
    AlreadyPaused,
    /// Resumed now.
    Resumed,
    /// It was not paused.
    NotPaused,
}

/// One window a tick claimed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TickedWindow {
    /// The window's start (ms).
    pub start_ms: i64,
    /// `enqueued`, `caught_up`, `skipped`, `missed` or `triggered`.
    pub outcome: String,
    /// The window's job (created now, or the one its input key already had).
    pub job: Option<JobId>,
    /// What the enqueue did, for a window with a job.
    pub status: Option<EnqueueStatus>,
}

/// The reply of a tick claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TickReply {
    /// Windows were claimed (`waiting`: the overlap policy holds the next one).
    Claimed {
        /// The cursor after the call (ms).
        cursor: i64,
        /// The next due time (ms), `None` when the schedule ended.
        next_due: Option<i64>,
        /// Redis TIME at the call (ms).
        now: i64,
        /// Whether a window is held by the `wait` overlap policy.
        waiting: bool,
        /// The claimed windows, oldest first.
        windows: Vec<TickedWindow>,
    },
    /// No window was due yet on Redis time.
    Early {
        /// Redis TIME at the call (ms).
        now: i64,
    },
    /// Another replica moved the cursor: recompute from this one.
    Moved {
        /// The cursor Redis holds (ms).
        cursor: i64,
    },
    /// Redis has no such schedule (flushed): register it again.
    Unregistered,
    /// Redis holds another definition of the schedule (another build registered last).
    Version {
        /// The digest Redis holds.
        digest: String,
    },
}
