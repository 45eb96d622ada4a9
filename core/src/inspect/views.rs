//! The view types the inspector returns: job summaries and listings, counts,
//! workers, locks, STALE jobs, a queue's status and a job's full story.

use serde::{Deserialize, Serialize};

use super::{CancelStatus, Event, Verdicts};
use crate::id::JobId;
use crate::queue::{QuarantineEntry, ScheduleFailing};
use crate::record::{Job, Millis, StaleLock};
use crate::state::JobState;

/// One line about a job: what a listing shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSummary {
    /// Id.
    pub id: JobId,
    /// Queue.
    pub queue: String,
    /// Pipeline.
    pub pipeline: String,
    /// State of the current attempt.
    pub state: JobState,
    /// Current attempt number.
    pub attempt: u32,
    /// The step running or next to run (kept while STALE: the step cut off).
    pub step: Option<String>,
    /// The last completed step.
    pub last_step: Option<String>,
    /// The resource whose lock the job takes.
    pub resource: Option<String>,
    /// The idempotency key.
    pub input_key: Option<String>,
    /// The worker holding the lease (LEASED, RUNNING), that held it (STALE), or
    /// that ran the last attempt (terminal jobs: from the job hash for a success,
    /// else from the attempt record).
    pub worker: Option<String>,
    /// That lease's fencing number.
    pub fence: Option<u64>,
    /// Priority (0–255, higher first).
    pub priority: u8,
    /// Created (ms).
    pub created_at: Millis,
    /// Last state change or checkpoint (ms); for terminal jobs, the end time.
    pub updated_at: Millis,
    /// The lease deadline, while LEASED or RUNNING.
    pub lease_deadline: Option<Millis>,
    /// When the job went STALE.
    pub stale_at: Option<Millis>,
    /// The reason of a recorded cancel request.
    pub cancel_reason: Option<String>,
    /// Why a QUEUED job of a flow-controlled pipeline waits, as its last lease
    /// attempt recorded it (`slots wh 3/3`, `running p 2/2`, `rate api until <ms>`;
    /// see [`crate::flow::describe_wait`]).
    #[serde(default)]
    pub waiting: Option<String>,
    /// The input window the job processes, `<start>/<end>` (its input's
    /// `window` object, or its `from` and `to` fields), as enqueue recorded it.
    #[serde(default)]
    pub window: Option<String>,
    /// What the job processes, in short: its input key, else the first
    /// characters of its input (JSON), so that rows of one pipeline differ.
    #[serde(default)]
    pub input: String,
    /// Why a FAILED, STALE or CANCELLED job ended (its current attempt).
    #[serde(default)]
    pub ended: Option<Ending>,
}

/// Why a job's current attempt ended badly, for a listing row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ending {
    /// The step it failed, was cut off or cancelled in, when known (a FAILED
    /// attempt's: the step after the last completed one in the pipeline's
    /// published steps).
    pub step: Option<String>,
    /// The error kind; `stale` for a worker that died (also once resolved),
    /// `cancelled` for a cancel.
    pub kind: String,
    /// The error message, the cancel reason, or what happened.
    pub message: String,
    /// Whether retrying may help ([`verdicts`](crate::inspect::verdicts) says
    /// the same): the step's verdict for a failure; yes for STALE and CANCELLED.
    pub retryable: bool,
}

/// A key or field a listing could not read (a key of the wrong Redis type, a
/// field that is not UTF-8 or does not parse, a key name that is not UTF-8):
/// left out of the listing, which lists everything else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unreadable {
    /// The key (escaped as `\xNN` where it is not UTF-8).
    pub key: String,
    /// The field (`(key)` for the key itself, `(name)` for its name).
    pub field: String,
    /// What is wrong.
    pub problem: String,
}

/// Which jobs [`Inspector::list_jobs`](super::Inspector::list_jobs) returns; every field given must match.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobFilter {
    /// Only jobs in this state (the index read depends on it).
    pub state: Option<JobState>,
    /// Only jobs of this pipeline.
    pub pipeline: Option<String>,
    /// Only jobs with this resource.
    pub resource: Option<String>,
    /// Only jobs whose current or last attempt ran on this worker (QUEUED jobs never match).
    pub worker: Option<String>,
}

/// Which part of a listing to return.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    /// Matching jobs to skip.
    pub offset: usize,
    /// Most jobs to return.
    pub limit: usize,
}

impl Default for Page {
    fn default() -> Self {
        Page {
            offset: 0,
            limit: 50,
        }
    }
}

/// One page of a job listing, newest first: ordered by `updated_at`
/// descending (for terminal jobs that is their end time, the `done` score).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobPage {
    /// The jobs.
    pub jobs: Vec<JobSummary>,
    /// Index entries read to build the page.
    pub examined: usize,
    /// More matching jobs may follow this page.
    pub has_more: bool,
    /// The call stopped at [`MAX_EXAMINED`](super::MAX_EXAMINED) entries: the page may miss jobs.
    pub truncated: bool,
    /// Jobs (and keys) that could not be read, left out of the page.
    #[serde(default)]
    pub unreadable: Vec<Unreadable>,
    /// Jobs in the quarantine (not listed here: `state` quarantined lists them).
    #[serde(default)]
    pub quarantined: u64,
}

/// Waiting jobs of one pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipelineWaiting {
    /// Pipeline.
    pub pipeline: String,
    /// Leasable now (`ready:<pipeline>`).
    pub ready: u64,
    /// Waiting for their not-before time (`delayed:<pipeline>`).
    pub delayed: u64,
    /// Delayed jobs already due (promoted by the next lease call).
    pub due: u64,
}

/// Job counts per state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateCounts {
    /// Ready + delayed + parked.
    pub queued: u64,
    /// LEASED (classified leases).
    pub leased: u64,
    /// RUNNING (classified leases).
    pub running: u64,
    /// Leases beyond [`MAX_LEASES`](super::MAX_LEASES), not classified as LEASED or RUNNING.
    pub leases_unclassified: u64,
    /// STALE: waiting for an operator.
    pub stale: u64,
    /// Every terminal job still kept (the `done` index).
    pub terminal: u64,
    /// SUCCEEDED among the `terminal_sampled` newest terminal jobs.
    pub succeeded: u64,
    /// FAILED among the `terminal_sampled` newest terminal jobs.
    pub failed: u64,
    /// CANCELLED among the `terminal_sampled` newest terminal jobs.
    pub cancelled: u64,
    /// How many of the newest terminal jobs were classified; equals `terminal`
    /// when the three counts above are exact.
    pub terminal_sampled: u64,
    /// Jobs in the quarantine (set aside as unreadable by the scripts).
    #[serde(default)]
    pub quarantined: u64,
    /// Jobs and keys found in an index that could not be read (see
    /// [`QueueStatus::unreadable`]), not counted in any state.
    #[serde(default)]
    pub unreadable: u64,
}

/// The job that has waited longest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OldestWaiting {
    /// Id.
    pub job: JobId,
    /// Pipeline.
    pub pipeline: String,
    /// Created (ms).
    pub created_at: Millis,
    /// `now - created_at` (ms).
    pub age_ms: i64,
}

/// A worker's registration (`<base>:worker:<id>`, JSON written by its heartbeat).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerInfo {
    /// Worker instance id.
    pub id: String,
    /// Process id.
    #[serde(default)]
    pub pid: Option<u32>,
    /// When the worker started (ms, the worker's clock).
    #[serde(default)]
    pub started_at: Option<Millis>,
    /// Pipelines it serves.
    #[serde(default)]
    pub pipelines: Vec<String>,
    /// The spec version of each pipeline it serves (a digest of its published
    /// spec: two versions of one pipeline live at once are two builds).
    #[serde(default)]
    pub versions: std::collections::BTreeMap<String, String>,
    /// Jobs it runs at once.
    #[serde(default)]
    pub concurrency: Option<u64>,
    /// Jobs it holds now.
    #[serde(default)]
    pub active: Option<u64>,
    /// It is shutting down (leases nothing new).
    #[serde(default)]
    pub shutting_down: bool,
    /// Time left before the registration expires unless renewed (ms).
    #[serde(default)]
    pub expires_in_ms: Option<i64>,
    /// Any other fields of the registration.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// The workers registered with a queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workers {
    /// Workers whose registration is live, by id.
    pub live: Vec<WorkerInfo>,
    /// Ids whose registration had expired, removed from `<base>:workers` by this call.
    pub pruned: Vec<String>,
}

/// A job that claims a resource (LEASED, RUNNING or STALE).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockClaim {
    /// Job.
    pub job: JobId,
    /// Its state.
    pub state: JobState,
}

/// A resource lock (`<base>:lock:<resource>`) and who wants it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockInfo {
    /// Resource.
    pub resource: String,
    /// The lock key.
    pub key: String,
    /// The job holding the lock; `None` when the lock is free.
    pub holder: Option<JobId>,
    /// The holder's state, if it still exists.
    pub holder_state: Option<JobState>,
    /// Time left on the lock key (ms); `-1` when persisted for a STALE holder.
    /// While its holder runs this is not what governs the lock: the key lives
    /// an hour past the lease as a safety net (see `holder_lease_ms`).
    pub ttl_ms: Option<i64>,
    /// Time left on the holder's lease (ms, negative once it expired), which
    /// governs the lock: when it expires the sweeper decides what becomes of
    /// the lock. `None` when the holder holds no lease (STALE, ended, gone).
    #[serde(default)]
    pub holder_lease_ms: Option<i64>,
    /// QUEUED jobs parked until the lock is free.
    pub parked: u64,
    /// LEASED, RUNNING and STALE jobs with this resource. More than one means
    /// the resource may be processed twice (a STALE job whose lock was released
    /// or expired, and a new holder).
    pub claims: Vec<LockClaim>,
}

/// A flow-control gate that has waiting jobs: a resource at its limit
/// (`slots`) or a pipeline at max_running (`running`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateStatus {
    /// `<kind>:<name>`.
    pub gate: String,
    /// `slots` or `running`.
    pub kind: String,
    /// The resource or pipeline.
    pub name: String,
    /// Its limit, as the last waiting job declared it.
    pub limit: u64,
    /// Jobs holding a slot (a STALE holder keeps its slot).
    pub held: u64,
    /// Jobs waiting for a slot.
    pub waiting: u64,
}

/// A STALE job waiting for an operator's decision (retry or resolve).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleJob {
    /// The job.
    pub job: JobSummary,
    /// When it went STALE (ms).
    pub stale_at: Millis,
    /// What the sweep did with its lock.
    pub stale_lock: StaleLock,
    /// Whether it still holds its resource's lock (`None` without a resource).
    pub holds_lock: Option<bool>,
    /// The flow-control gates whose slot it still holds (`slots:<name>`,
    /// `running:<pipeline>`): a STALE job keeps them until an operator decides.
    #[serde(default)]
    pub holds_slots: Vec<String>,
    /// What it stalls: pipeline → QUEUED jobs of that pipeline waiting for
    /// its lock (parked) or one of its slots (among the first
    /// [`STALL_SAMPLE`](super::STALL_SAMPLE) waiting behind each). Empty when
    /// nothing waits for what it holds.
    #[serde(default)]
    pub stalls: std::collections::BTreeMap<String, u64>,
}

impl StaleJob {
    /// Whether it holds its lock or a flow-control slot.
    pub fn holds_something(&self) -> bool {
        self.holds_lock == Some(true) || !self.holds_slots.is_empty()
    }
}

/// A queue at a glance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueStatus {
    /// Queue.
    pub queue: String,
    /// Redis `TIME` when read (ms).
    pub now: Millis,
    /// Counts per state.
    pub counts: StateCounts,
    /// Waiting jobs per pipeline.
    pub pipelines: Vec<PipelineWaiting>,
    /// QUEUED jobs parked on a locked resource.
    pub parked: u64,
    /// QUEUED jobs waiting for a slot of a flow-control gate (resource limit, max_running).
    #[serde(default)]
    pub flow_waiting: u64,
    /// The flow-control gates with waiting jobs.
    #[serde(default)]
    pub gates: Vec<GateStatus>,
    /// The pauses in force.
    #[serde(default)]
    pub pauses: Vec<crate::flow::Pause>,
    /// The job waiting longest (by creation time), if any is waiting.
    pub oldest_waiting: Option<OldestWaiting>,
    /// Leases past their deadline that no sweep has handled yet (their worker is probably gone).
    pub expired_leases: u64,
    /// Cleanup hooks of resolved STALE jobs waiting for a worker that serves their pipeline.
    #[serde(default)]
    pub cleanups_waiting: u64,
    /// Cleanup hooks a worker has claimed and not finished (running, or their worker died
    /// and the claim has not expired yet).
    #[serde(default)]
    pub cleanups_claimed: u64,
    /// Live workers.
    pub workers: Vec<WorkerInfo>,
    /// Worker ids whose registration had expired (removed from the set).
    pub pruned_workers: Vec<String>,
    /// Locks held now.
    pub locks: Vec<LockInfo>,
    /// The STALE jobs waiting longest for a decision (at most [`STATUS_STALE_LIMIT`](super::STATUS_STALE_LIMIT); `counts.stale` has them all).
    pub stale: Vec<StaleJob>,
    /// The oldest quarantined jobs (at most [`STATUS_STALE_LIMIT`](super::STATUS_STALE_LIMIT); `counts.quarantined` has them all).
    #[serde(default)]
    pub quarantined: Vec<QuarantineEntry>,
    /// What could not be read (at most [`STATUS_STALE_LIMIT`](super::STATUS_STALE_LIMIT) listed; `counts.unreadable` has them all).
    #[serde(default)]
    pub unreadable: Vec<Unreadable>,
    /// The schedules whose ticks fail, by name.
    #[serde(default)]
    pub failing_schedules: Vec<FailingSchedule>,
}

/// A schedule whose ticks fail, as `status` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailingSchedule {
    /// The schedule's name.
    pub name: String,
    /// Its failed ticks, since when, and the last error.
    #[serde(flatten)]
    pub failing: ScheduleFailing,
}

/// Everything about one job: the record with every attempt, its lock, the
/// fate of any cancel request, and its events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobDetail {
    /// Redis `TIME` when read (ms).
    pub now: Millis,
    /// The record.
    pub job: Job,
    /// The lock of its resource, if it has one.
    pub lock: Option<LockInfo>,
    /// The cancel request and what became of it.
    pub cancel: Option<CancelStatus>,
    /// Cleanup needed, retryable, cancel honoured: worked out once
    /// ([`verdicts`](crate::inspect::verdicts)), said the same by every view.
    #[serde(default)]
    pub verdicts: Verdicts,
    /// Its events still in the stream, oldest first.
    pub events: Vec<Event>,
    /// Why it is quarantined, if it is.
    #[serde(default)]
    pub quarantine: Option<QuarantineEntry>,
    /// Its flow-control gates (the `flow` field: `slots:3:wh running:2:p rate:100:api`).
    #[serde(default)]
    pub flow: Option<String>,
    /// Why a QUEUED job is not running, in words: paused, locked by job X,
    /// resource at its limit, pipeline at max_running, rate limited until T,
    /// delayed until T; `None` when it is ready (or not QUEUED).
    #[serde(default)]
    pub waiting: Option<String>,
}

/// A job's key as Redis holds it, for a job whose record cannot be read:
/// its type and, for a hash, every field with its value (escaped as `\xNN`
/// where it is not UTF-8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawJob {
    /// The key.
    pub key: String,
    /// Its Redis type (`hash`, `string`, ..., `none` when it does not exist).
    pub key_type: String,
    /// Its fields, sorted by name (empty unless a hash).
    pub fields: Vec<(String, String)>,
    /// Why it is quarantined, if it is.
    pub quarantine: Option<QuarantineEntry>,
}

impl QueueStatus {
    /// Pipelines that live workers serve in more than one version (different
    /// builds publishing different specs): pipeline → version → worker ids.
    pub fn mixed_versions(
        &self,
    ) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, Vec<String>>> {
        let mut by: std::collections::BTreeMap<
            String,
            std::collections::BTreeMap<String, Vec<String>>,
        > = std::collections::BTreeMap::new();
        for w in &self.workers {
            for (pipeline, version) in &w.versions {
                by.entry(pipeline.clone())
                    .or_default()
                    .entry(version.clone())
                    .or_default()
                    .push(w.id.clone());
            }
        }
        by.retain(|_, versions| versions.len() > 1);
        by
    }
}
