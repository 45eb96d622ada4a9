//! Read-only views of queues for operators: counts per state, the oldest
//! waiting job, live workers, resource locks, STALE jobs waiting for a
//! decision, paged job listings, a job's full story, and the event stream.
//!
//! Everything here reads Redis only, and reads the indexes the scripts keep
//! (see `docs/redis-keys.md`), so the cost of a call is proportional to the
//! index it reads, never to the number of keys in Redis:
//!
//! | View | Reads |
//! |---|---|
//! | counts per state | `ZCARD` of `ready:<p>`, `delayed:<p>`, `parked:<r>`, `leases`, `stale`, `done`; one `HGET state` per lease (at most [`MAX_LEASES`]); the state of the newest [`TERMINAL_SAMPLE`] terminal jobs |
//! | oldest waiting job | per ready/parked set, one `ZRANGE … LIMIT 0 1` per priority level present; the head of each delayed set |
//! | jobs by state | `ready`/`delayed`/`parked` for QUEUED, `leases` for LEASED and RUNNING, `stale` for STALE, `done` (newest end time first) for terminal states, with one `HMGET` per entry read (at most [`MAX_EXAMINED`] per call) |
//! | locks | the resources of LEASED, RUNNING and STALE jobs and the `parked` set; `GET`/`PTTL` of their lock keys |
//! | workers | the `workers` set and each member's registration key |
//! | a job's events | the event stream, backwards from its end, in pages, stopping at the job's `enqueue` event or creation time |
//!
//! `SCAN` is used only where no index exists, and costs time proportional to
//! the number of keys in the database (in Redis Cluster it sees one node):
//!
//! * [`discover_queues`]: every queue that ever leased a job has a
//!   `<prefix>:{<queue>}:fence` key, and every queue that ever had a job has an
//!   `<prefix>:{<queue>}:events` stream; both are scanned for.
//! * [`Inspector::pipelines`]: the pipelines with waiting jobs are the names of
//!   the queue's `ready:<pipeline>` and `delayed:<pipeline>` keys (Redis
//!   deletes empty sorted sets, so pipelines with nothing waiting are not found).
//!
//! The only write is in [`Inspector::workers`] (and so [`Inspector::status`]):
//! ids in `<base>:workers` whose registration key has expired are removed from
//! the set (a dead worker's id would otherwise stay forever).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::str::FromStr;
use std::time::Duration;

use deadpool_redis::redis::{self, RedisResult};
use deadpool_redis::{Connection, Pool};
use serde::{Deserialize, Serialize};

use crate::config::QueueConfig;
use crate::error::{Error, Result};
use crate::id::JobId;
use crate::keys::{check_name, QueueKeys};
use crate::queue::Queue;
use crate::record::{AttemptRecord, CancelRequest, Job, Millis, StaleLock};
use crate::state::JobState;

/// Most index entries one [`Inspector::list_jobs`] call reads before it stops
/// and reports [`JobPage::truncated`].
pub const MAX_EXAMINED: usize = 100_000;
/// Most leases [`Inspector::status`] and [`Inspector::locks`] classify; beyond
/// it the remainder is reported as unclassified.
pub const MAX_LEASES: usize = 10_000;
/// How many of the newest terminal jobs [`Inspector::status`] reads the state of.
pub const TERMINAL_SAMPLE: usize = 1_000;
/// Most stream entries [`Inspector::job_events`] reads back.
pub const MAX_EVENTS_SCANNED: usize = 200_000;
/// How many STALE jobs [`Inspector::status`] lists (all are counted).
pub const STATUS_STALE_LIMIT: usize = 20;

/// Entries per pipelined round trip.
const CHUNK: usize = 500;
/// `SCAN … COUNT`.
const SCAN_COUNT: usize = 1_000;
/// Stream entries per `XREVRANGE` page.
const EVENT_PAGE: usize = 1_000;
/// Ready-set scores: `(255 - priority) * PRIORITY_SPAN + t` (see `prelude.lua`).
const PRIORITY_SPAN: i64 = 4_398_046_511_104;
/// Slack between the stream's clock and `TIME` when bounding a job's events by its creation time.
const CLOCK_SLACK_MS: i64 = 5_000;

// ---- connections ------------------------------------------------------------

async fn pooled(pool: &Pool, config: &QueueConfig) -> Result<Connection> {
    pool.get().await.map_err(|e| match e {
        deadpool_redis::PoolError::Backend(e) => Error::Redis(e),
        deadpool_redis::PoolError::Timeout(_) => Error::Timeout(config.connect_timeout),
        other => Error::Pool(other.to_string()),
    })
}

async fn timed<T>(config: &QueueConfig, fut: impl Future<Output = RedisResult<T>>) -> Result<T> {
    match tokio::time::timeout(config.response_timeout, fut).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(Error::Timeout(config.response_timeout)),
    }
}

/// Escapes Redis glob metacharacters so `s` matches itself in `SCAN MATCH`.
fn escape_glob(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

async fn scan_keys(
    conn: &mut Connection,
    config: &QueueConfig,
    pattern: &str,
) -> Result<BTreeSet<String>> {
    let mut cursor: u64 = 0;
    let mut out = BTreeSet::new();
    loop {
        let (next, keys): (u64, Vec<String>) = timed(
            config,
            redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(SCAN_COUNT)
                .query_async(conn),
        )
        .await?;
        out.extend(keys);
        cursor = next;
        if cursor == 0 {
            return Ok(out);
        }
    }
}

/// Finds the queues under `config.prefix` by `SCAN`ning for their
/// `<prefix>:{<queue>}:fence` and `<prefix>:{<queue>}:events` keys (there is
/// no index of queues). Sorted by name.
///
/// Cost: two `SCAN`s of the whole database; in Redis Cluster, of one node.
/// A queue that never had a job is not found.
pub async fn discover_queues(pool: &Pool, config: &QueueConfig) -> Result<Vec<String>> {
    check_name("key prefix", &config.prefix)?;
    let head = format!("{}:{{", config.prefix);
    let mut conn = pooled(pool, config).await?;
    let mut queues = BTreeSet::new();
    for suffix in [":fence", ":events"] {
        let pattern = format!("{}*}}{suffix}", escape_glob(&head));
        for key in scan_keys(&mut conn, config, &pattern).await? {
            let Some(rest) = key.strip_prefix(&head) else {
                continue;
            };
            let Some((queue, tail)) = rest.split_once('}') else {
                continue;
            };
            if tail == suffix && check_name("queue name", queue).is_ok() {
                queues.insert(queue.to_owned());
            }
        }
    }
    Ok(queues.into_iter().collect())
}

// ---- public types -----------------------------------------------------------

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
}

/// Which jobs [`Inspector::list_jobs`] returns; every field given must match.
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
    /// The call stopped at [`MAX_EXAMINED`] entries: the page may miss jobs.
    pub truncated: bool,
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
    /// Leases beyond [`MAX_LEASES`], not classified as LEASED or RUNNING.
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
    /// Time left on the lock (ms); `-1` when persisted for a STALE holder.
    pub ttl_ms: Option<i64>,
    /// QUEUED jobs parked until the lock is free.
    pub parked: u64,
    /// LEASED, RUNNING and STALE jobs with this resource. More than one means
    /// the resource may be processed twice (a STALE job whose lock was released
    /// or expired, and a new holder).
    pub claims: Vec<LockClaim>,
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
    /// The STALE jobs waiting longest for a decision (at most [`STATUS_STALE_LIMIT`]; `counts.stale` has them all).
    pub stale: Vec<StaleJob>,
}

/// One entry of a queue's event stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Queue.
    pub queue: String,
    /// Stream entry id (`<ms>-<seq>`).
    pub id: String,
    /// When (ms, from the entry id).
    pub at: Millis,
    /// Operation: `enqueue`, `lease`, `start`, `finish`, `retry`, `release`, `cancel`, `sweep`, `resolve`.
    pub op: String,
    /// Job.
    pub job: JobId,
    /// The attempt concerned.
    pub attempt: u32,
    /// State before (`None` for `enqueue`).
    pub from: Option<JobState>,
    /// State after (equal to `from` for a cancel request).
    pub to: JobState,
    /// Worker or operator (see `docs/redis-keys.md`).
    pub by: String,
    /// Reason, if any.
    pub reason: String,
}

/// What became of a cancel request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum CancelOutcome {
    /// The attempt ended CANCELLED.
    Honoured,
    /// LEASED or RUNNING: the holder sees it at its next renewal, checkpoint or start.
    Pending,
    /// QUEUED: the holder released the job first; the next start cancels it.
    PendingNextStart,
    /// The attempt ended the other way before the request was honoured.
    NotHonoured {
        /// How it ended.
        ended: JobState,
    },
    /// STALE: its worker died; an operator must retry or resolve it.
    Stale,
}

/// A cancel request and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelStatus {
    /// The request.
    pub request: CancelRequest,
    /// The attempt it concerned.
    pub attempt: u32,
    /// What became of it.
    #[serde(flatten)]
    pub outcome: CancelOutcome,
}

impl CancelStatus {
    /// A sentence for humans.
    pub fn explain(&self) -> String {
        match self.outcome {
            CancelOutcome::Honoured => {
                format!("honoured: attempt {} ended CANCELLED", self.attempt)
            }
            CancelOutcome::Pending => {
                "pending: the holder sees it at its next renewal, checkpoint or start".into()
            }
            CancelOutcome::PendingNextStart => {
                "pending: the job was handed back before honouring it; the next start cancels it"
                    .into()
            }
            CancelOutcome::NotHonoured { ended } => format!(
                "not honoured: attempt {} ended {ended} before the request was honoured",
                self.attempt
            ),
            CancelOutcome::Stale => {
                "not honoured: the worker died while RUNNING (STALE); retry or resolve the job"
                    .into()
            }
        }
    }
}

/// The cancel request of `job`'s current attempt, or the latest one recorded in
/// an ended attempt, with what became of it.
pub fn cancel_status(job: &Job) -> Option<CancelStatus> {
    if let Some(request) = &job.cancel {
        let outcome = match job.state {
            JobState::Cancelled => CancelOutcome::Honoured,
            JobState::Leased | JobState::Running => CancelOutcome::Pending,
            JobState::Queued => CancelOutcome::PendingNextStart,
            JobState::Stale => CancelOutcome::Stale,
            ended @ (JobState::Succeeded | JobState::Failed) => {
                CancelOutcome::NotHonoured { ended }
            }
        };
        return Some(CancelStatus {
            request: request.clone(),
            attempt: job.attempt,
            outcome,
        });
    }
    job.attempts.iter().rev().find_map(|a| {
        let request = a.cancel.clone()?;
        let outcome = match a.state {
            JobState::Cancelled => CancelOutcome::Honoured,
            ended => CancelOutcome::NotHonoured { ended },
        };
        Some(CancelStatus {
            request,
            attempt: a.n,
            outcome,
        })
    })
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
    /// Its events still in the stream, oldest first.
    pub events: Vec<Event>,
}

// ---- parsing ------------------------------------------------------------------

const SUMMARY_FIELDS: [&str; 16] = [
    "id",
    "pipeline",
    "state",
    "attempt",
    "step",
    "last_step",
    "resource",
    "input_key",
    "worker",
    "fence",
    "priority",
    "created_at",
    "updated_at",
    "lease_deadline",
    "stale_at",
    "cancel_reason",
];

/// One `HMGET` reply of [`SUMMARY_FIELDS`], with errors naming key and field.
struct Row<'a> {
    key: &'a str,
    values: &'a [Option<String>],
}

impl Row<'_> {
    fn corrupt(&self, field: &str, problem: impl Into<String>) -> Error {
        Error::Corrupt {
            key: self.key.to_owned(),
            field: field.to_owned(),
            problem: problem.into(),
        }
    }

    fn get(&self, field: &str) -> Option<&str> {
        let i = SUMMARY_FIELDS.iter().position(|f| *f == field)?;
        self.values.get(i)?.as_deref()
    }

    fn non_empty(&self, field: &str) -> Option<String> {
        self.get(field).filter(|s| !s.is_empty()).map(str::to_owned)
    }

    fn required(&self, field: &str) -> Result<&str> {
        self.get(field)
            .ok_or_else(|| self.corrupt(field, "missing"))
    }

    fn parsed<T: FromStr>(&self, field: &str) -> Result<Option<T>>
    where
        T::Err: std::fmt::Display,
    {
        match self.get(field) {
            None | Some("") => Ok(None),
            Some(s) => s
                .parse()
                .map(Some)
                .map_err(|e| self.corrupt(field, format!("{s:?}: {e}"))),
        }
    }

    fn parsed_required<T: FromStr>(&self, field: &str) -> Result<T>
    where
        T::Err: std::fmt::Display,
    {
        self.parsed(field)?
            .ok_or_else(|| self.corrupt(field, "missing"))
    }

    fn summary(&self, queue: &str) -> Result<JobSummary> {
        let id = self.required("id")?;
        Ok(JobSummary {
            id: JobId::parse(id).map_err(|e| self.corrupt("id", e.to_string()))?,
            queue: queue.to_owned(),
            pipeline: self.required("pipeline")?.to_owned(),
            state: self.parsed_required("state")?,
            attempt: self.parsed_required("attempt")?,
            step: self.non_empty("step"),
            last_step: self.non_empty("last_step"),
            resource: self.non_empty("resource"),
            input_key: self.non_empty("input_key"),
            worker: self.non_empty("worker"),
            fence: self.parsed("fence")?,
            priority: self.parsed("priority")?.unwrap_or(0),
            created_at: self.parsed_required("created_at")?,
            updated_at: self.parsed_required("updated_at")?,
            lease_deadline: self.parsed("lease_deadline")?,
            stale_at: self.parsed("stale_at")?,
            cancel_reason: self.non_empty("cancel_reason"),
        })
    }
}

fn parse_state(key: &str, field: &str, text: &str) -> Result<JobState> {
    text.parse().map_err(|e| Error::Corrupt {
        key: key.to_owned(),
        field: field.to_owned(),
        problem: format!("{e}"),
    })
}

/// The millisecond part of a stream entry id.
fn entry_ms(key: &str, id: &str) -> Result<Millis> {
    id.split_once('-')
        .and_then(|(ms, _)| ms.parse().ok())
        .ok_or_else(|| Error::Corrupt {
            key: key.to_owned(),
            field: "entry id".into(),
            problem: format!("{id:?} is not <ms>-<seq>"),
        })
}

fn parse_event(queue: &str, key: &str, id: String, flat: Vec<String>) -> Result<Event> {
    let mut map: HashMap<String, String> = HashMap::new();
    let mut it = flat.into_iter();
    while let Some(name) = it.next() {
        map.insert(name, it.next().unwrap_or_default());
    }
    let corrupt = |field: &str, problem: String| Error::Corrupt {
        key: key.to_owned(),
        field: format!("{field} (entry {id})"),
        problem,
    };
    let take = |map: &mut HashMap<String, String>, field: &str| {
        map.remove(field)
            .ok_or_else(|| corrupt(field, "missing".into()))
    };
    let op = take(&mut map, "op")?;
    let job_text = take(&mut map, "job")?;
    let job = JobId::parse(&job_text).map_err(|e| corrupt("job", e.to_string()))?;
    let attempt_text = take(&mut map, "attempt")?;
    let attempt = attempt_text
        .parse()
        .map_err(|_| corrupt("attempt", format!("{attempt_text:?} is not a number")))?;
    let state = |map: &mut HashMap<String, String>, field: &str| -> Result<Option<JobState>> {
        match map.remove(field).as_deref() {
            None | Some("") => Ok(None),
            Some(s) => s
                .parse()
                .map(Some)
                .map_err(|e| corrupt(field, format!("{e}"))),
        }
    };
    let from = state(&mut map, "from")?;
    let to = state(&mut map, "to")?.ok_or_else(|| corrupt("to", "missing".into()))?;
    Ok(Event {
        queue: queue.to_owned(),
        at: entry_ms(key, &id)?,
        op,
        job,
        attempt,
        from,
        to,
        by: map.remove("by").unwrap_or_default(),
        reason: map.remove("reason").unwrap_or_default(),
        id,
    })
}

type RawEntries = Vec<(String, Vec<String>)>;

// ---- the inspector ------------------------------------------------------------

/// Read-only views of one queue. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Inspector {
    queue: Queue,
}

impl From<Queue> for Inspector {
    fn from(queue: Queue) -> Self {
        Inspector::new(queue)
    }
}

impl Inspector {
    /// Views of the queue that `queue` is a client of, over its connection pool.
    pub fn new(queue: Queue) -> Self {
        Inspector { queue }
    }

    /// The inspector of another queue over the same pool and settings.
    pub fn sibling(&self, queue: &str) -> Result<Self> {
        Ok(Inspector::new(self.queue.sibling(queue)?))
    }

    /// The queue client.
    pub fn queue(&self) -> &Queue {
        &self.queue
    }

    fn keys(&self) -> &QueueKeys {
        self.queue.keys()
    }

    fn config(&self) -> &QueueConfig {
        self.queue.config()
    }

    async fn conn(&self) -> Result<Connection> {
        pooled(self.queue.pool(), self.config()).await
    }

    async fn timed<T>(&self, fut: impl Future<Output = RedisResult<T>>) -> Result<T> {
        timed(self.config(), fut).await
    }

    /// Every queue under the same prefix (see [`discover_queues`]).
    pub async fn discover_queues(&self) -> Result<Vec<String>> {
        discover_queues(self.queue.pool(), self.config()).await
    }

    /// Redis `TIME` in ms.
    pub async fn now(&self) -> Result<Millis> {
        let mut conn = self.conn().await?;
        now_ms(self, &mut conn).await
    }

    /// Pipelines with waiting jobs: the names of the queue's `ready:*` and
    /// `delayed:*` keys, found by `SCAN` (no index of pipelines exists). Sorted.
    pub async fn pipelines(&self) -> Result<Vec<String>> {
        let mut conn = self.conn().await?;
        self.pipelines_on(&mut conn).await
    }

    async fn pipelines_on(&self, conn: &mut Connection) -> Result<Vec<String>> {
        let mut out = BTreeSet::new();
        for kind in ["ready", "delayed"] {
            let head = format!("{}:{kind}:", self.keys().base());
            let pattern = format!("{}*", escape_glob(&head));
            for key in scan_keys(conn, self.config(), &pattern).await? {
                if let Some(p) = key.strip_prefix(&head) {
                    if check_name("pipeline name", p).is_ok() {
                        out.insert(p.to_owned());
                    }
                }
            }
        }
        Ok(out.into_iter().collect())
    }

    /// Summaries of `ids` (missing jobs are left out), in the order given.
    /// Terminal jobs get their worker from their last attempt record.
    async fn summaries(&self, conn: &mut Connection, ids: &[String]) -> Result<Vec<JobSummary>> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            for id in chunk {
                pipe.cmd("HMGET")
                    .arg(self.keys().job(id))
                    .arg(&SUMMARY_FIELDS[..]);
            }
            let rows: Vec<Vec<Option<String>>> = self.timed(pipe.query_async(conn)).await?;
            let mut chunk_out = Vec::with_capacity(chunk.len());
            for (id, values) in chunk.iter().zip(&rows) {
                if values.iter().all(Option::is_none) {
                    continue; // purged (or a stale index entry)
                }
                let key = self.keys().job(id);
                chunk_out.push(Row { key: &key, values }.summary(self.queue.name())?);
            }
            // terminal jobs: the worker and fence of their last attempt
            let ended: Vec<usize> = chunk_out
                .iter()
                .enumerate()
                .filter(|(_, s)| s.state.is_terminal() && s.worker.is_none())
                .map(|(i, _)| i)
                .collect();
            if !ended.is_empty() {
                let mut pipe = redis::pipe();
                for &i in &ended {
                    let s = &chunk_out[i];
                    pipe.cmd("HGET")
                        .arg(self.keys().attempts())
                        .arg(QueueKeys::attempt_field(s.id.as_str(), s.attempt));
                }
                let records: Vec<Option<String>> = self.timed(pipe.query_async(conn)).await?;
                for (&i, record) in ended.iter().zip(records) {
                    let Some(text) = record else { continue };
                    let s = &mut chunk_out[i];
                    let rec: AttemptRecord =
                        serde_json::from_str(&text).map_err(|e| Error::Corrupt {
                            key: self.keys().attempts(),
                            field: QueueKeys::attempt_field(s.id.as_str(), s.attempt),
                            problem: format!("not an attempt record: {e}"),
                        })?;
                    if !rec.worker.is_empty() {
                        s.worker = Some(rec.worker);
                        s.fence = (rec.fence > 0).then_some(rec.fence);
                    }
                }
            }
            out.extend(chunk_out);
        }
        Ok(out)
    }

    /// Up to `max` members of a sorted set, lowest score first, and whether more exist.
    async fn zrange_capped(
        &self,
        conn: &mut Connection,
        key: &str,
        max: usize,
    ) -> Result<(Vec<String>, bool)> {
        if max == 0 {
            let n: u64 = self
                .timed(redis::cmd("ZCARD").arg(key).query_async(conn))
                .await?;
            return Ok((Vec::new(), n > 0));
        }
        let mut ids: Vec<String> = self
            .timed(
                redis::cmd("ZRANGE")
                    .arg(key)
                    .arg(0)
                    .arg(max)
                    .query_async(conn),
            )
            .await?;
        let more = ids.len() > max;
        ids.truncate(max);
        Ok((ids, more))
    }

    /// Jobs matching `filter`, newest first (by `updated_at`; for terminal jobs
    /// that is the end time), paged. Reads only the indexes for the states asked
    /// for: `ready`/`delayed`/`parked` for QUEUED (only those of `filter.pipeline`
    /// or `filter.resource` when given), `leases` for LEASED and RUNNING, `stale`
    /// for STALE, and `done` newest first for terminal states, stopping once the
    /// page is full. At most [`MAX_EXAMINED`] entries are read.
    pub async fn list_jobs(&self, filter: &JobFilter, page: Page) -> Result<JobPage> {
        let mut conn = self.conn().await?;
        let keys = self.keys();
        let wants = |s: JobState| filter.state.is_none_or(|f| f == s);
        let matches = |s: &JobSummary| {
            wants(s.state)
                && filter.pipeline.as_ref().is_none_or(|p| *p == s.pipeline)
                && filter
                    .resource
                    .as_ref()
                    .is_none_or(|r| s.resource.as_ref() == Some(r))
                && filter
                    .worker
                    .as_ref()
                    .is_none_or(|w| s.worker.as_ref() == Some(w))
        };
        let mut truncated = false;
        let mut budget = MAX_EXAMINED;

        // live jobs: every index entry, since their indexes are not ordered by time
        let mut index_keys = Vec::new();
        if wants(JobState::Queued) && filter.worker.is_none() {
            let pipelines = match &filter.pipeline {
                Some(p) => vec![p.clone()],
                None => self.pipelines_on(&mut conn).await?,
            };
            for p in &pipelines {
                index_keys.push(keys.ready(p));
                index_keys.push(keys.delayed(p));
            }
            let resources: Vec<String> = match &filter.resource {
                Some(r) => vec![r.clone()],
                None => {
                    self.timed(
                        redis::cmd("SMEMBERS")
                            .arg(keys.parked_resources())
                            .query_async(&mut conn),
                    )
                    .await?
                }
            };
            for r in &resources {
                index_keys.push(keys.parked(r));
            }
        }
        if wants(JobState::Leased) || wants(JobState::Running) {
            index_keys.push(keys.leases());
        }
        if wants(JobState::Stale) {
            index_keys.push(keys.stale());
        }
        let mut seen = HashSet::new();
        let mut live_ids = Vec::new();
        for key in &index_keys {
            let (ids, more) = self.zrange_capped(&mut conn, key, budget).await?;
            budget -= ids.len();
            truncated |= more;
            for id in ids {
                if seen.insert(id.clone()) {
                    live_ids.push(id);
                }
            }
        }
        let mut examined = MAX_EXAMINED - budget;
        let mut jobs: Vec<JobSummary> = self
            .summaries(&mut conn, &live_ids)
            .await?
            .into_iter()
            .filter(|s| !s.state.is_terminal() && matches(s))
            .collect();

        // terminal jobs: walk `done` from the newest until the page is full
        let need = page.offset.saturating_add(page.limit);
        let mut terminal_exhausted = true;
        if JobState::ALL.iter().any(|s| s.is_terminal() && wants(*s)) {
            terminal_exhausted = false;
            let mut rank = 0usize;
            let mut found = 0usize;
            while found < need {
                if examined >= MAX_EXAMINED {
                    truncated = true;
                    break;
                }
                let n = CHUNK.min(MAX_EXAMINED - examined);
                let ids: Vec<String> = self
                    .timed(
                        redis::cmd("ZREVRANGE")
                            .arg(keys.done())
                            .arg(rank)
                            .arg(rank + n - 1)
                            .query_async(&mut conn),
                    )
                    .await?;
                rank += ids.len();
                examined += ids.len();
                let fresh: Vec<String> = ids
                    .iter()
                    .filter(|id| seen.insert((*id).clone()))
                    .cloned()
                    .collect();
                for s in self.summaries(&mut conn, &fresh).await? {
                    if s.state.is_terminal() && matches(&s) {
                        found += 1;
                        jobs.push(s);
                    }
                }
                if ids.len() < n {
                    terminal_exhausted = true;
                    break;
                }
            }
        }

        jobs.sort_by(|a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| b.id.cmp(&a.id))
        });
        let total = jobs.len();
        let jobs: Vec<JobSummary> = jobs
            .into_iter()
            .skip(page.offset)
            .take(page.limit)
            .collect();
        Ok(JobPage {
            jobs,
            examined,
            has_more: total > need || !terminal_exhausted,
            truncated,
        })
    }

    /// Counts per state, waiting jobs per pipeline, the oldest waiting job,
    /// expired leases, live workers (pruning dead ones), held locks and the
    /// STALE jobs waiting for a decision.
    pub async fn status(&self) -> Result<QueueStatus> {
        let mut conn = self.conn().await?;
        let keys = self.keys().clone();
        let now = now_ms(self, &mut conn).await?;
        let pipelines = self.pipelines_on(&mut conn).await?;

        let mut pipe = redis::pipe();
        for p in &pipelines {
            pipe.cmd("ZCARD").arg(keys.ready(p));
            pipe.cmd("ZCARD").arg(keys.delayed(p));
            pipe.cmd("ZCOUNT").arg(keys.delayed(p)).arg("-inf").arg(now);
        }
        pipe.cmd("ZCARD").arg(keys.leases());
        pipe.cmd("ZCOUNT").arg(keys.leases()).arg("-inf").arg(now);
        pipe.cmd("ZCARD").arg(keys.stale());
        pipe.cmd("ZCARD").arg(keys.done());
        pipe.cmd("LLEN").arg(keys.cleanup());
        pipe.cmd("ZCARD").arg(keys.cleaning());
        let numbers: Vec<u64> = self.timed(pipe.query_async(&mut conn)).await?;
        let mut it = numbers.into_iter();
        let mut next = || it.next().unwrap_or(0);
        let mut waiting = Vec::with_capacity(pipelines.len());
        for p in &pipelines {
            waiting.push(PipelineWaiting {
                pipeline: p.clone(),
                ready: next(),
                delayed: next(),
                due: next(),
            });
        }
        let leases_total = next();
        let expired_leases = next();
        let stale_total = next();
        let terminal_total = next();
        let cleanups_waiting = next();
        let cleanups_claimed = next();

        let parked_resources: Vec<String> = self
            .timed(
                redis::cmd("SMEMBERS")
                    .arg(keys.parked_resources())
                    .query_async(&mut conn),
            )
            .await?;
        let mut parked = 0;
        for chunk in parked_resources.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            for r in chunk {
                pipe.cmd("ZCARD").arg(keys.parked(r));
            }
            let n: Vec<u64> = self.timed(pipe.query_async(&mut conn)).await?;
            parked += n.iter().sum::<u64>();
        }

        let mut counts = StateCounts {
            queued: waiting.iter().map(|w| w.ready + w.delayed).sum::<u64>() + parked,
            stale: stale_total,
            terminal: terminal_total,
            ..StateCounts::default()
        };
        let (lease_ids, _) = self
            .zrange_capped(&mut conn, &keys.leases(), MAX_LEASES)
            .await?;
        for state in self
            .states(&mut conn, &lease_ids)
            .await?
            .into_iter()
            .flatten()
        {
            match state {
                JobState::Leased => counts.leased += 1,
                JobState::Running => counts.running += 1,
                _ => {} // moved on since the index was read
            }
        }
        counts.leases_unclassified = leases_total.saturating_sub(lease_ids.len() as u64);
        let sample: Vec<String> = self
            .timed(
                redis::cmd("ZREVRANGE")
                    .arg(keys.done())
                    .arg(0)
                    .arg(TERMINAL_SAMPLE - 1)
                    .query_async(&mut conn),
            )
            .await?;
        for state in self.states(&mut conn, &sample).await?.into_iter().flatten() {
            let count = match state {
                JobState::Succeeded => &mut counts.succeeded,
                JobState::Failed => &mut counts.failed,
                JobState::Cancelled => &mut counts.cancelled,
                _ => continue, // retried since the index was read
            };
            *count += 1;
            counts.terminal_sampled += 1;
        }

        let oldest_waiting = self
            .oldest_waiting(&mut conn, now, &pipelines, &parked_resources)
            .await?;
        drop(conn);
        let workers = self.workers().await?;
        let locks = self
            .locks()
            .await?
            .into_iter()
            .filter(|l| l.holder.is_some())
            .collect();
        let stale = self.stale(STATUS_STALE_LIMIT).await?;
        Ok(QueueStatus {
            queue: self.queue.name().to_owned(),
            now,
            counts,
            pipelines: waiting,
            parked,
            oldest_waiting,
            expired_leases,
            cleanups_waiting,
            cleanups_claimed,
            workers: workers.live,
            pruned_workers: workers.pruned,
            locks,
            stale,
        })
    }

    /// The `state` field of each job (`None` for a missing job).
    async fn states(&self, conn: &mut Connection, ids: &[String]) -> Result<Vec<Option<JobState>>> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            for id in chunk {
                pipe.cmd("HGET").arg(self.keys().job(id)).arg("state");
            }
            let states: Vec<Option<String>> = self.timed(pipe.query_async(conn)).await?;
            for (id, state) in chunk.iter().zip(states) {
                out.push(match state {
                    None => None,
                    Some(s) => Some(parse_state(&self.keys().job(id), "state", &s)?),
                });
            }
        }
        Ok(out)
    }

    /// The waiting job created first. Candidates: the head of every priority
    /// level of each ready and parked set (one bounded `ZRANGE` per level), and
    /// the head of each delayed set.
    async fn oldest_waiting(
        &self,
        conn: &mut Connection,
        now: Millis,
        pipelines: &[String],
        parked_resources: &[String],
    ) -> Result<Option<OldestWaiting>> {
        let keys = self.keys();
        let mut candidates: Vec<String> = Vec::new();
        let banded = pipelines
            .iter()
            .map(|p| keys.ready(p))
            .chain(parked_resources.iter().map(|r| keys.parked(r)));
        for key in banded {
            let mut min = "-inf".to_owned();
            // at most 256 priority levels
            for _ in 0..=256 {
                let head: Vec<(String, f64)> = self
                    .timed(
                        redis::cmd("ZRANGE")
                            .arg(&key)
                            .arg(&min)
                            .arg("+inf")
                            .arg("BYSCORE")
                            .arg("LIMIT")
                            .arg(0)
                            .arg(1)
                            .arg("WITHSCORES")
                            .query_async(conn),
                    )
                    .await?;
                let Some((id, score)) = head.into_iter().next() else {
                    break;
                };
                candidates.push(id);
                let band = (score as i64).div_euclid(PRIORITY_SPAN);
                min = ((band + 1) * PRIORITY_SPAN).to_string();
            }
        }
        for p in pipelines {
            let head: Vec<String> = self
                .timed(
                    redis::cmd("ZRANGE")
                        .arg(keys.delayed(p))
                        .arg(0)
                        .arg(0)
                        .query_async(conn),
                )
                .await?;
            candidates.extend(head);
        }
        let mut best: Option<OldestWaiting> = None;
        for s in self.summaries(conn, &candidates).await? {
            if s.state != JobState::Queued {
                continue;
            }
            if best
                .as_ref()
                .is_none_or(|b| (s.created_at, &s.id) < (b.created_at, &b.job))
            {
                best = Some(OldestWaiting {
                    job: s.id,
                    pipeline: s.pipeline,
                    created_at: s.created_at,
                    age_ms: now - s.created_at,
                });
            }
        }
        Ok(best)
    }

    /// Workers registered with the queue: members of `<base>:workers` whose
    /// `<base>:worker:<id>` key still exists. Ids whose key has expired are
    /// removed from the set (and put back if the worker re-registered meanwhile).
    pub async fn workers(&self) -> Result<Workers> {
        let mut conn = self.conn().await?;
        let keys = self.keys();
        let ids: BTreeSet<String> = self
            .timed(
                redis::cmd("SMEMBERS")
                    .arg(keys.workers())
                    .query_async(&mut conn),
            )
            .await?;
        let ids: Vec<String> = ids.into_iter().collect();
        let mut live = Vec::new();
        let mut dead = Vec::new();
        for chunk in ids.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            for id in chunk {
                pipe.cmd("GET").arg(keys.worker(id));
                pipe.cmd("PTTL").arg(keys.worker(id));
            }
            let replies: Vec<(Option<String>, i64)> =
                self.timed(pipe.query_async(&mut conn)).await?;
            for (id, (value, pttl)) in chunk.iter().zip(replies) {
                let Some(text) = value else {
                    dead.push(id.clone());
                    continue;
                };
                let key = keys.worker(id);
                let mut info: WorkerInfo = serde_json::from_str::<serde_json::Value>(&text)
                    .ok()
                    .filter(serde_json::Value::is_object)
                    .map(|mut v| {
                        // the set member is the authority on the id
                        v["id"] = serde_json::Value::String(id.clone());
                        v
                    })
                    .and_then(|v| serde_json::from_value(v).ok())
                    .ok_or_else(|| Error::Corrupt {
                        key,
                        field: "(value)".into(),
                        problem: format!("not a worker registration: {text:?}"),
                    })?;
                info.expires_in_ms = (pttl >= 0).then_some(pttl);
                live.push(info);
            }
        }
        let mut pruned = Vec::new();
        if !dead.is_empty() {
            let mut pipe = redis::pipe();
            for id in &dead {
                pipe.cmd("SREM").arg(keys.workers()).arg(id).ignore();
                pipe.cmd("EXISTS").arg(keys.worker(id));
            }
            let exists: Vec<u64> = self.timed(pipe.query_async(&mut conn)).await?;
            let mut back = redis::pipe();
            let mut any_back = false;
            for (id, e) in dead.into_iter().zip(exists) {
                if e > 0 {
                    // registered again between our GET and SREM
                    back.cmd("SADD").arg(keys.workers()).arg(&id).ignore();
                    any_back = true;
                } else {
                    pruned.push(id);
                }
            }
            if any_back {
                let _: () = self.timed(back.query_async(&mut conn)).await?;
            }
        }
        Ok(Workers { live, pruned })
    }

    /// Resource locks: the resources of the LEASED, RUNNING (at most
    /// [`MAX_LEASES`]) and STALE jobs and those with parked jobs, each with its
    /// holder, time left and claimants. There is no index of lock keys, so a
    /// lock whose holder is in none of these indexes is not seen. Sorted by resource.
    pub async fn locks(&self) -> Result<Vec<LockInfo>> {
        let mut conn = self.conn().await?;
        let keys = self.keys();
        let (mut ids, _) = self
            .zrange_capped(&mut conn, &keys.leases(), MAX_LEASES)
            .await?;
        let stale_ids: Vec<String> = self
            .timed(
                redis::cmd("ZRANGE")
                    .arg(keys.stale())
                    .arg(0)
                    .arg(-1)
                    .query_async(&mut conn),
            )
            .await?;
        ids.extend(stale_ids);
        let mut claims: BTreeMap<String, Vec<LockClaim>> = BTreeMap::new();
        for chunk in ids.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            for id in chunk {
                pipe.cmd("HMGET")
                    .arg(keys.job(id))
                    .arg("resource")
                    .arg("state");
            }
            let rows: Vec<(Option<String>, Option<String>)> =
                self.timed(pipe.query_async(&mut conn)).await?;
            for (id, (resource, state)) in chunk.iter().zip(rows) {
                let (Some(resource), Some(state)) = (resource, state) else {
                    continue;
                };
                if resource.is_empty() {
                    continue;
                }
                let state = parse_state(&keys.job(id), "state", &state)?;
                if matches!(
                    state,
                    JobState::Leased | JobState::Running | JobState::Stale
                ) {
                    claims.entry(resource).or_default().push(LockClaim {
                        job: JobId::parse(id).map_err(|e| Error::Corrupt {
                            key: keys.job(id),
                            field: "id".into(),
                            problem: e.to_string(),
                        })?,
                        state,
                    });
                }
            }
        }
        let parked: Vec<String> = self
            .timed(
                redis::cmd("SMEMBERS")
                    .arg(keys.parked_resources())
                    .query_async(&mut conn),
            )
            .await?;
        for r in parked {
            claims.entry(r).or_default();
        }
        self.lock_infos(&mut conn, claims.into_iter().collect())
            .await
    }

    /// The locks of `resources`, each with the jobs known to claim it; pipelined.
    async fn lock_infos(
        &self,
        conn: &mut Connection,
        resources: Vec<(String, Vec<LockClaim>)>,
    ) -> Result<Vec<LockInfo>> {
        let keys = self.keys();
        let mut out = Vec::with_capacity(resources.len());
        for chunk in resources.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            for (resource, _) in chunk {
                pipe.cmd("GET").arg(keys.lock(resource));
                pipe.cmd("PTTL").arg(keys.lock(resource));
                pipe.cmd("ZCARD").arg(keys.parked(resource));
            }
            let replies: Vec<(Option<String>, i64, u64)> =
                self.timed(pipe.query_async(conn)).await?;
            let mut locks = Vec::with_capacity(chunk.len());
            for ((resource, claims), (holder, pttl, parked)) in chunk.iter().zip(replies) {
                let key = keys.lock(resource);
                let holder = match holder {
                    None => None,
                    Some(h) => Some(JobId::parse(&h).map_err(|e| Error::Corrupt {
                        key: key.clone(),
                        field: "(value)".into(),
                        problem: e.to_string(),
                    })?),
                };
                let holder_state = holder
                    .as_ref()
                    .and_then(|h| claims.iter().find(|c| c.job == *h))
                    .map(|c| c.state);
                locks.push(LockInfo {
                    resource: resource.clone(),
                    ttl_ms: holder.as_ref().map(|_| pttl),
                    key,
                    holder,
                    holder_state,
                    parked,
                    claims: claims.clone(),
                });
            }
            // holders that are not among the claimants (e.g. a job that just ended)
            let unknown: Vec<usize> = locks
                .iter()
                .enumerate()
                .filter(|(_, l)| l.holder.is_some() && l.holder_state.is_none())
                .map(|(i, _)| i)
                .collect();
            if !unknown.is_empty() {
                let ids: Vec<String> = unknown
                    .iter()
                    .filter_map(|&i| locks[i].holder.as_ref().map(|h| h.as_str().to_owned()))
                    .collect();
                let states = self.states(conn, &ids).await?;
                for (&i, state) in unknown.iter().zip(states) {
                    locks[i].holder_state = state;
                }
            }
            out.extend(locks);
        }
        Ok(out)
    }

    /// STALE jobs waiting for an operator, the longest-waiting first, at most `limit`.
    pub async fn stale(&self, limit: usize) -> Result<Vec<StaleJob>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut conn = self.conn().await?;
        let keys = self.keys();
        let entries: Vec<(String, f64)> = self
            .timed(
                redis::cmd("ZRANGE")
                    .arg(keys.stale())
                    .arg(0)
                    .arg(limit - 1)
                    .arg("WITHSCORES")
                    .query_async(&mut conn),
            )
            .await?;
        let ids: Vec<String> = entries.iter().map(|(id, _)| id.clone()).collect();
        let scores: HashMap<String, f64> = entries.into_iter().collect();
        let summaries: Vec<JobSummary> = self
            .summaries(&mut conn, &ids)
            .await?
            .into_iter()
            .filter(|s| s.state == JobState::Stale)
            .collect();
        let mut pipe = redis::pipe();
        for s in &summaries {
            pipe.cmd("HGET")
                .arg(keys.job(s.id.as_str()))
                .arg("stale_lock");
            match &s.resource {
                Some(r) => pipe.cmd("GET").arg(keys.lock(r)),
                None => pipe.cmd("ECHO").arg(""),
            };
        }
        let extra: Vec<(Option<String>, Option<String>)> = if summaries.is_empty() {
            Vec::new()
        } else {
            self.timed(pipe.query_async(&mut conn)).await?
        };
        let mut out = Vec::with_capacity(summaries.len());
        for (s, (policy, holder)) in summaries.into_iter().zip(extra) {
            let stale_lock = match policy.as_deref() {
                None | Some("") | Some("hold") => StaleLock::Hold,
                Some("release") => StaleLock::Release,
                Some(other) => {
                    return Err(Error::Corrupt {
                        key: keys.job(s.id.as_str()),
                        field: "stale_lock".into(),
                        problem: format!("unknown policy {other:?}"),
                    })
                }
            };
            let stale_at = s
                .stale_at
                .or_else(|| scores.get(s.id.as_str()).map(|v| *v as Millis))
                .unwrap_or(s.updated_at);
            let holds_lock = s
                .resource
                .as_ref()
                .map(|_| holder.as_deref() == Some(s.id.as_str()));
            out.push(StaleJob {
                job: s,
                stale_at,
                stale_lock,
                holds_lock,
            });
        }
        Ok(out)
    }

    /// Everything about one job (`None` when it does not exist): the record
    /// with every attempt, the lock of its resource, what became of a cancel
    /// request, and its events.
    pub async fn job_detail(&self, id: &JobId) -> Result<Option<JobDetail>> {
        let Some(job) = self.queue.job(id).await? else {
            return Ok(None);
        };
        let mut conn = self.conn().await?;
        let now = now_ms(self, &mut conn).await?;
        let lock = match &job.resource {
            Some(r) => {
                let claims = if matches!(
                    job.state,
                    JobState::Leased | JobState::Running | JobState::Stale
                ) {
                    vec![LockClaim {
                        job: job.id.clone(),
                        state: job.state,
                    }]
                } else {
                    Vec::new()
                };
                self.lock_infos(&mut conn, vec![(r.clone(), claims)])
                    .await?
                    .pop()
            }
            None => None,
        };
        drop(conn);
        let events = self.events_of(id, Some(job.created_at)).await?;
        Ok(Some(JobDetail {
            now,
            cancel: cancel_status(&job),
            job,
            lock,
            events,
        }))
    }

    /// The events of job `id` still in the stream, oldest first. Reads the
    /// stream backwards in pages and stops at the job's `enqueue` event, at
    /// entries older than its creation, or after [`MAX_EVENTS_SCANNED`] entries.
    pub async fn job_events(&self, id: &JobId) -> Result<Vec<Event>> {
        let mut conn = self.conn().await?;
        let created: Option<String> = self
            .timed(
                redis::cmd("HGET")
                    .arg(self.keys().job(id.as_str()))
                    .arg("created_at")
                    .query_async(&mut conn),
            )
            .await?;
        let created = created.and_then(|s| s.parse().ok());
        drop(conn);
        self.events_of(id, created).await
    }

    async fn events_of(&self, id: &JobId, created_at: Option<Millis>) -> Result<Vec<Event>> {
        let mut conn = self.conn().await?;
        let key = self.keys().events();
        let floor = created_at.map(|c| c - CLOCK_SLACK_MS);
        let mut end = "+".to_owned();
        let mut scanned = 0usize;
        let mut out = Vec::new();
        'pages: while scanned < MAX_EVENTS_SCANNED {
            let page: RawEntries = self
                .timed(
                    redis::cmd("XREVRANGE")
                        .arg(&key)
                        .arg(&end)
                        .arg("-")
                        .arg("COUNT")
                        .arg(EVENT_PAGE)
                        .query_async(&mut conn),
                )
                .await?;
            let len = page.len();
            for (entry, flat) in page {
                scanned += 1;
                if floor.is_some_and(|f| entry_ms(&key, &entry).is_ok_and(|ms| ms < f)) {
                    break 'pages;
                }
                end = format!("({entry}");
                // cheap filter before parsing the whole entry
                if !flat
                    .chunks(2)
                    .any(|kv| kv[0] == "job" && kv.get(1).map(String::as_str) == Some(id.as_str()))
                {
                    continue;
                }
                let event = parse_event(self.queue.name(), &key, entry, flat)?;
                let first = event.op == "enqueue";
                out.push(event);
                if first {
                    break 'pages;
                }
            }
            if len < EVENT_PAGE {
                break;
            }
        }
        out.reverse();
        Ok(out)
    }

    /// Up to `count` events, oldest first: those after stream entry `since`
    /// (exclusive), or, without `since`, the last `count` events.
    pub async fn events(&self, since: Option<&str>, count: usize) -> Result<Vec<Event>> {
        let mut conn = self.conn().await?;
        let key = self.keys().events();
        let raw: RawEntries = match since {
            Some(since) => {
                self.timed(
                    redis::cmd("XRANGE")
                        .arg(&key)
                        .arg(format!("({since}"))
                        .arg("+")
                        .arg("COUNT")
                        .arg(count.max(1))
                        .query_async(&mut conn),
                )
                .await?
            }
            None => {
                let mut raw: RawEntries = self
                    .timed(
                        redis::cmd("XREVRANGE")
                            .arg(&key)
                            .arg("+")
                            .arg("-")
                            .arg("COUNT")
                            .arg(count.max(1))
                            .query_async(&mut conn),
                    )
                    .await?;
                raw.reverse();
                raw
            }
        };
        raw.into_iter()
            .map(|(id, flat)| parse_event(self.queue.name(), &key, id, flat))
            .collect()
    }
}

async fn now_ms(inspector: &Inspector, conn: &mut Connection) -> Result<Millis> {
    let (secs, micros): (i64, i64) = inspector
        .timed(redis::cmd("TIME").query_async(conn))
        .await?;
    Ok(secs * 1000 + micros / 1000)
}

// ---- following the stream ---------------------------------------------------

/// Follows the event streams of one or more queues with `XREAD BLOCK` on a
/// dedicated connection (pooled connections time out long before a block ends).
/// The streams are read in one call, so in Redis Cluster all must be on one
/// node; follow one queue per follower there.
pub struct EventFollower {
    conn: redis::aio::MultiplexedConnection,
    streams: Vec<(String, String, String)>,
    block: Duration,
    response_timeout: Duration,
}

impl std::fmt::Debug for EventFollower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventFollower")
            .field("streams", &self.streams)
            .field("block", &self.block)
            .finish_non_exhaustive()
    }
}

impl EventFollower {
    /// Connects to `url` and positions after the current last event of each of `queues`.
    /// Each read blocks at most `block` waiting for new events.
    pub async fn connect(
        url: &str,
        config: &QueueConfig,
        queues: &[String],
        block: Duration,
    ) -> Result<Self> {
        let client = redis::Client::open(url)?;
        let response_timeout = block + config.response_timeout;
        let conn_config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(config.connect_timeout))
            .set_response_timeout(Some(response_timeout));
        let mut conn = match tokio::time::timeout(
            config.connect_timeout + config.response_timeout,
            client.get_multiplexed_async_connection_with_config(&conn_config),
        )
        .await
        {
            Ok(conn) => conn?,
            Err(_) => return Err(Error::Timeout(config.connect_timeout)),
        };
        let mut streams = Vec::with_capacity(queues.len());
        for queue in queues {
            let keys = QueueKeys::new(&config.prefix, queue)?;
            let last: RawEntries = timed(
                config,
                redis::cmd("XREVRANGE")
                    .arg(keys.events())
                    .arg("+")
                    .arg("-")
                    .arg("COUNT")
                    .arg(1)
                    .query_async(&mut conn),
            )
            .await?;
            let position = last
                .into_iter()
                .next()
                .map_or_else(|| "0-0".to_owned(), |(id, _)| id);
            streams.push((queue.clone(), keys.events(), position));
        }
        Ok(EventFollower {
            conn,
            streams,
            block,
            response_timeout,
        })
    }

    /// Continues `queue`'s stream after entry `id` (exclusive) instead.
    pub fn resume_after(&mut self, queue: &str, id: &str) {
        for (q, _, position) in &mut self.streams {
            if q == queue {
                *position = id.to_owned();
            }
        }
    }

    /// The next events (at most `count` per queue), oldest first; empty when
    /// none arrived within the block time.
    pub async fn next_batch(&mut self, count: usize) -> Result<Vec<Event>> {
        if self.streams.is_empty() {
            tokio::time::sleep(self.block).await;
            return Ok(Vec::new());
        }
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT")
            .arg(count.max(1))
            .arg("BLOCK")
            .arg(u64::try_from(self.block.as_millis()).unwrap_or(u64::MAX))
            .arg("STREAMS");
        for (_, key, _) in &self.streams {
            cmd.arg(key);
        }
        for (_, _, position) in &self.streams {
            cmd.arg(position);
        }
        let reply: Option<Vec<(String, RawEntries)>> = match tokio::time::timeout(
            self.response_timeout,
            cmd.query_async(&mut self.conn),
        )
        .await
        {
            Ok(r) => r?,
            Err(_) => return Err(Error::Timeout(self.response_timeout)),
        };
        let mut out = Vec::new();
        for (key, entries) in reply.unwrap_or_default() {
            let Some(stream) = self.streams.iter_mut().find(|(_, k, _)| *k == key) else {
                continue;
            };
            for (id, flat) in entries {
                stream.2 = id.clone();
                out.push(parse_event(&stream.0, &key, id, flat)?);
            }
        }
        out.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.id.cmp(&b.id)));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_metacharacters_are_escaped() {
        assert_eq!(escape_glob("a*b?c[d]e\\f{g}"), "a\\*b\\?c\\[d\\]e\\\\f{g}");
    }

    #[test]
    fn event_entries_parse_and_corrupt_ones_name_the_field() {
        let flat = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .flat_map(|(k, v)| [k.to_string(), v.to_string()])
                .collect::<Vec<_>>()
        };
        let ok = parse_event(
            "q",
            "p:{q}:events",
            "1796035961436-0".into(),
            flat(&[
                ("op", "enqueue"),
                ("job", "j1"),
                ("attempt", "1"),
                ("from", ""),
                ("to", "QUEUED"),
                ("by", ""),
                ("reason", ""),
            ]),
        )
        .unwrap();
        assert_eq!(ok.at, 1_796_035_961_436);
        assert_eq!(ok.from, None);
        assert_eq!(ok.to, JobState::Queued);
        let bad = parse_event(
            "q",
            "p:{q}:events",
            "1-0".into(),
            flat(&[
                ("op", "lease"),
                ("job", "j1"),
                ("attempt", "x"),
                ("to", "LEASED"),
            ]),
        )
        .unwrap_err();
        match bad {
            Error::Corrupt { key, field, .. } => {
                assert_eq!(key, "p:{q}:events");
                assert_eq!(field, "attempt (entry 1-0)");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn cancel_status_follows_the_state() {
        let mut job: Job = serde_json::from_value(serde_json::json!({
            "id": "j", "queue": "q", "pipeline": "p", "input": {}, "input_key": null, "resource": null,
            "priority": 0, "not_before": 0, "max_attempts": 1, "stale_lock": "hold", "created_at": 1,
            "updated_at": 1, "attempt": 1, "state": "RUNNING", "step": null, "last_step": null,
            "outputs": {}, "cancel": {"reason": "stop", "at": 2, "by": "alice"}, "cleanup_needed": false,
            "lease": null, "worker": null, "fence": null, "leased_at": null, "started_at": null,
            "steps": [], "stale_at": null, "attempts": []
        }))
        .unwrap();
        assert_eq!(cancel_status(&job).unwrap().outcome, CancelOutcome::Pending);
        job.state = JobState::Cancelled;
        assert_eq!(
            cancel_status(&job).unwrap().outcome,
            CancelOutcome::Honoured
        );
        job.state = JobState::Succeeded;
        assert_eq!(
            cancel_status(&job).unwrap().outcome,
            CancelOutcome::NotHonoured {
                ended: JobState::Succeeded
            }
        );
        job.cancel = None;
        assert_eq!(cancel_status(&job), None);
    }
}
