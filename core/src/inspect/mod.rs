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
//! | quarantined jobs | the `quarantine` zset and `quarantine:why` hash |
//! | search (input key, resource, window, id prefix) | `ZRANGEBYLEX` of the `search` index per criterion (at most [`SEARCH_CAP`]), one `HMGET` per match |
//! | charts | one `HGETALL` per minute of the `stats:<minute>` counters |
//! | a job's events | the event stream, backwards from its end, in pages, stopping at the job's `enqueue` event or creation time |
//!
//! `SCAN` is used only where no index exists, and costs time proportional to
//! the number of keys in the database (in Redis Cluster it sees one node):
//!
//! * [`discover_queues`]: every queue that ever leased a job has a
//!   `<prefix>:{<queue>}:fence` key, every queue that ever had a job has an
//!   `<prefix>:{<queue>}:events` stream, and every queue a worker serves has
//!   its `:workers` set and `:pipelines` specs; one `SCAN` finds them all.
//! * [`Inspector::pipelines`]: the pipelines with waiting jobs are the names of
//!   the queue's `ready:<pipeline>` and `delayed:<pipeline>` keys (Redis
//!   deletes empty sorted sets, so pipelines with nothing waiting are not found).
//!
//! A job or key that cannot be read is never a reason to fail a view: it is
//! left out and reported as [`Unreadable`] (key, field, problem), and the
//! view lists everything else. Key names that are not UTF-8 are skipped by
//! `SCAN` and reported by their escaped name.
//!
//! The only write is in [`Inspector::workers`] (and so [`Inspector::status`]):
//! ids in `<base>:workers` whose registration key has expired are removed from
//! the set (a dead worker's id would otherwise stay forever).
//!
//! The views live one per file: [`Inspector`] and the plumbing they share in
//! `inspector`, `SCAN`-based discovery in `discover`, bulk reads of job hashes
//! in `rows`, and `status`, `jobs`, `workers`, `locks`, `stale` and `events`
//! for what each answers; the returned types are in `views` and `cancel`, and
//! [`EventFollower`] in `follower`. Job hash fields are read with the same
//! reader as [`Job::from_fields`](crate::Job::from_fields) uses.

mod cancel;
pub(crate) mod conn;
mod discover;
pub(crate) mod events;
mod follower;
pub(crate) mod groups;
mod history;
mod inspector;
mod jobs;
mod locks;
mod quarantine;
mod rows;
mod search;
mod stale;
mod status;
mod verdicts;
mod views;
mod workers;
mod wrong_type;

pub use cancel::{cancel_status, CancelOutcome, CancelStatus};
pub use discover::{
    discover_queues, discover_reachable_queues, DiscoveredQueues, UnreachableMaster,
};
pub use events::Event;
pub use follower::EventFollower;
pub use groups::{GroupChild, GroupInfo, GroupView};
pub use history::{Granularity, History, Minute, MinuteCounts, HISTORY_MAX_MINUTES};
pub use inspector::Inspector;
pub use search::{JobSearch, SEARCH_CAP};
pub use verdicts::{retryable, verdicts, Cleanup, Verdicts};
pub use views::{
    Ending, FailingSchedule, GateStatus, JobDetail, JobFilter, JobPage, JobSummary, LockClaim,
    LockInfo, OldestWaiting, Page, PipelineWaiting, QueueStatus, RawJob, StaleJob, StateCounts,
    Unreadable, WorkerInfo, Workers,
};

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
/// Jobs read behind each lock or slot a STALE job holds, to say which
/// pipelines it stalls.
pub const STALL_SAMPLE: usize = 100;
const CHUNK: usize = 500;
