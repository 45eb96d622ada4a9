//! A lease held by a worker, and the replies of the holder's operations.

use std::time::Duration;

use crate::id::JobId;
use crate::record::{AttemptError, Millis};
use crate::state::JobState;

/// A job leased by a worker: what it needs to run it and to prove it holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The job.
    pub job: JobId,
    /// The secret that proves this holder may move the job.
    pub token: String,
    /// The fencing number: sinks reject writes carrying a lower one.
    pub fence: u64,
    /// The attempt number.
    pub attempt: u32,
    /// The pipeline.
    pub pipeline: String,
    /// The input, as JSON text.
    pub input: String,
    /// The locked resource, if any.
    pub resource: Option<String>,
    /// The last completed step of an earlier attempt (resume after it).
    pub last_step: Option<String>,
    /// That step's output, as JSON text.
    pub last_output: Option<String>,
    /// The lease time-to-live used for renewals.
    pub ttl: Duration,
    /// When the job became due (ms): its enqueue time, delay, or retry time.
    pub not_before: Millis,
    /// The W3C `traceparent` the job was enqueued under, if any.
    pub traceparent: Option<String>,
    /// Whether the lease call also started the job (RUNNING at its first step):
    /// asked for with [`LeaseRequest::start`](crate::settle::LeaseRequest::start).
    pub started: bool,
}

/// The reply to a lease call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Leased {
    /// The jobs now held.
    pub leases: Vec<Lease>,
    /// When the earliest delayed job comes due (ms), if any.
    pub next_due: Option<Millis>,
    /// Redis's clock when the leases were taken (ms).
    pub now: Millis,
    /// Jobs this call found waiting for a locked resource and parked.
    pub parked: u64,
    /// Jobs this call set aside by flow control, and paused pipelines it met.
    pub waits: FlowWaits,
    /// Jobs this call leased whose fields could not be read (corrupted in
    /// Redis). They stay LEASED, untouched, until their lease expires and the
    /// sweeper requeues them; `leasehold show` names the bad field. Only the
    /// worker's batched calls report these: [`Queue::lease`](crate::Queue::lease)
    /// answers such a call with the error itself.
    pub unreadable: Vec<UnreadableLease>,
}

/// What a lease call set aside by flow control, by cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowWaits {
    /// Jobs that found their resource at its limit (they wait for a slot).
    pub resource_limit: u64,
    /// Jobs that found their pipeline at max_running.
    pub max_running: u64,
    /// Jobs given a later start time by a rate limit (delayed until then).
    pub rate: u64,
    /// Served pipelines found paused (their jobs were left where they are).
    pub paused: u64,
}

/// A job leased by a batched call whose fields could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableLease {
    /// The job's id as Redis gave it.
    pub job: String,
    /// What could not be read.
    pub problem: String,
}

/// What `start` did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a job cancelled before its start must not run its step: check for `Started::Running`"]
pub enum Started {
    /// LEASED → RUNNING.
    Running,
    /// A cancel was requested before the start: LEASED → CANCELLED.
    Cancelled {
        /// The cancel reason.
        reason: String,
    },
}

/// The state of one lease after a renewal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renewal {
    /// Still held, extended.
    Held,
    /// Still held, extended, but a cancel was requested: honour it.
    CancelRequested {
        /// The cancel reason.
        reason: String,
    },
    /// Not held any more (swept, re-leased, finished, or purged): stop and write nothing.
    Lost {
        /// The job's state now, if it still exists.
        state: Option<JobState>,
    },
}

/// How the holder ends an attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every step completed.
    Succeeded,
    /// A step failed. Retryable errors with attempts left create a new attempt after `backoff`.
    Failed {
        /// The error.
        error: AttemptError,
        /// Delay before the next attempt, if one is made.
        backoff: Duration,
        /// A step was cut mid-way: cleanup is needed.
        cleanup_needed: bool,
    },
    /// The worker shut down at a step boundary (or cut a step after its grace
    /// period): the attempt ends FAILED with kind `interrupted`, and a new attempt
    /// is always queued, resuming after the last completed step.
    Interrupted {
        /// What happened.
        reason: String,
        /// A step was cut mid-way: cleanup is needed.
        cleanup_needed: bool,
    },
    /// The holder honoured a cancel.
    Cancelled {
        /// Why (usually the cancel request's reason).
        reason: String,
        /// A step was cut mid-way: cleanup is needed.
        cleanup_needed: bool,
    },
}

impl Outcome {
    /// The state the attempt ends in.
    pub fn state(&self) -> JobState {
        match self {
            Outcome::Succeeded => JobState::Succeeded,
            Outcome::Failed { .. } | Outcome::Interrupted { .. } => JobState::Failed,
            Outcome::Cancelled { .. } => JobState::Cancelled,
        }
    }
}

/// What `finish` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finished {
    /// The job ended in this terminal state.
    Ended(JobState),
    /// The attempt failed and a new attempt was queued.
    Retrying {
        /// The new attempt's number.
        attempt: u32,
        /// When it may be leased (ms).
        not_before: Millis,
    },
}

/// What `cancel` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancelled {
    /// The job was QUEUED and is now CANCELLED.
    Now,
    /// The job is LEASED or RUNNING; the request is recorded for its holder to honour.
    Requested {
        /// Its state.
        state: JobState,
    },
    /// A request was already recorded; it stands.
    AlreadyRequested {
        /// Its state.
        state: JobState,
        /// The earlier reason.
        reason: String,
    },
}

/// Where an operator retry starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryMode {
    /// After the last completed step, reusing its output.
    Resume,
    /// From the first step; outputs are cleared.
    FromStart,
}

/// One job moved by a sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweptJob {
    /// The job.
    pub job: JobId,
    /// Its state before.
    pub from: JobState,
    /// Its state after.
    pub to: JobState,
}

/// What a sweep found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// LEASED jobs with expired leases put back in QUEUED.
    pub requeued: u64,
    /// LEASED jobs with expired leases and a cancel request, now CANCELLED.
    pub cancelled: u64,
    /// RUNNING jobs with expired leases, now STALE.
    pub stale: u64,
    /// Jobs re-readied because the lock they waited for expired.
    pub unparked: u64,
    /// Terminal jobs deleted by retention.
    pub purged: u64,
    /// Each job moved (or, on a dry run, that would be moved).
    pub moves: Vec<SweptJob>,
}
