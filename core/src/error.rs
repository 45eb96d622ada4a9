//! Errors of the core crate: [`Error`], and [`ScheduleError`] (why a schedule
//! cannot be declared or evaluated; public as `schedule::ScheduleError`),
//! which [`Error`] carries, so both sit at the bottom of the module layering.

use std::time::Duration;

use deadpool_redis::redis::RedisError;

use crate::state::JobState;
use crate::transitions::Op;

/// Everything that can go wrong talking to a queue.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Redis answered with an error or the connection failed.
    #[error("redis: {0}")]
    Redis(#[from] RedisError),
    /// No connection could be had from the pool.
    #[error("redis connection pool: {0}")]
    Pool(String),
    /// Redis did not answer in time.
    #[error("redis did not answer within {0:?}")]
    Timeout(Duration),
    /// The job does not exist (never did, or was purged by retention).
    #[error("job {job} not found in queue {queue}")]
    NotFound {
        /// The queue.
        queue: String,
        /// The job id asked for.
        job: String,
    },
    /// An operator action outside the state model was refused: `delete`
    /// applies to terminal jobs only, `run now` to delayed QUEUED jobs only.
    #[error("job {job} is {state}: {action} refused: {why}")]
    ActionRefused {
        /// The job.
        job: String,
        /// Its state when the action was refused.
        state: JobState,
        /// `delete` or `run now`.
        action: &'static str,
        /// What the action applies to.
        why: &'static str,
    },
    /// The transition table forbids the move from the job's current state.
    #[error(
        "job {job} is {state}: {op} refused, the transition table has no move from {state} for it"
    )]
    Refused {
        /// The job.
        job: String,
        /// Its state when the move was refused.
        state: JobState,
        /// The operation that was refused.
        op: Op,
        /// The state the caller wanted, when the operation names one.
        to: Option<JobState>,
    },
    /// The caller does not hold the job's lease: wrong token, or the lease was swept or re-leased.
    #[error("job {job} is {state}: {op} refused, the caller no longer holds its lease (wrong token, or the lease expired and was swept)")]
    LeaseLost {
        /// The job.
        job: String,
        /// Its state now.
        state: JobState,
        /// The operation that was refused.
        op: Op,
    },
    /// The job's attempt is already over.
    #[error("job {job} is already {state}: {op} refused, a finished attempt is never changed (retry it to start a new attempt)")]
    AlreadyTerminal {
        /// The job.
        job: String,
        /// Its terminal state.
        state: JobState,
        /// The operation that was refused.
        op: Op,
    },
    /// A retry was refused because another non-terminal job holds the job's input key.
    #[error("job {job} cannot be retried: job {holder} holds its input key and is not finished (the same input would be processed twice)")]
    InputKeyTaken {
        /// The job an operator tried to retry.
        job: String,
        /// The non-terminal job that holds the input key.
        holder: String,
    },
    /// The group does not exist in the queue.
    #[error("group {group} not found in queue {queue}")]
    GroupNotFound {
        /// The queue.
        queue: String,
        /// The group asked for.
        group: String,
    },
    /// The group takes no more children (it is sealed, settled or cancelled).
    #[error("group {group} is {status}: it takes no more children (a group is sealed when its last child is added)")]
    GroupClosed {
        /// The group.
        group: String,
        /// Its status.
        status: String,
    },
    /// A job named as a parent (`depends_on`) does not exist: parents must
    /// exist when their dependent is enqueued (so no cycle can be built).
    #[error("parent {parent} not found in queue {queue}: a dependency must exist before its dependent is enqueued")]
    ParentNotFound {
        /// The queue.
        queue: String,
        /// The parent (a job id, or `group:<name>`).
        parent: String,
    },
    /// A parent already ended without succeeding, and the dependent would be cancelled at once.
    #[error("parent {parent} already ended {state}: the dependent would never run (retry the parent first, or enqueue with on_parent_failure = run)")]
    ParentEnded {
        /// The parent (a job id, or `group:<name>`).
        parent: String,
        /// How it ended.
        state: String,
    },
    /// A job with parents may not join a group that has dependents (nor a
    /// group it waits for itself): the two together could close a cycle.
    #[error("a job with parents cannot join group {group}: {detail} (a cycle could be built; enqueue the group's dependents after its children)")]
    GroupCycle {
        /// The group.
        group: String,
        /// What would close the cycle.
        detail: String,
    },
    /// An enqueue with a group answered with a job that exists already (its
    /// id or input key), and that job cannot join the group.
    #[error("job {job} exists already and cannot join group {group}: {reason}")]
    CannotJoinGroup {
        /// The existing job.
        job: String,
        /// The group asked for.
        group: String,
        /// Why it cannot join.
        reason: String,
    },
    /// A value read back from Redis is not what leasehold writes.
    #[error("corrupt data in redis: key {key}, field {field}: {problem}")]
    Corrupt {
        /// The Redis key.
        key: String,
        /// The field (hash field, stream field, or reply position).
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A script call named a key that is not the one the script derives
    /// from its queue's base (KEYS[1]): a fixed key (the base and its fixed
    /// suffix), a job's key (the base, `:job:` and an id), or a key named by
    /// the job, pipeline, resource, group or schedule the call is about. The
    /// call (for settle: that operation) was refused before any write. Only
    /// a hand-built call (or a defect) sends one.
    #[error("script call refused before any write: KEYS[{position}] is {key}, not {expected}")]
    ForeignKey {
        /// The key's position in KEYS (from 1).
        position: usize,
        /// The key the call passed.
        key: String,
        /// The key the script expected there.
        expected: String,
    },
    /// A script replied in a shape this client does not understand.
    #[error("unexpected reply from the {script} script: {detail}")]
    Protocol {
        /// The script.
        script: &'static str,
        /// What was unexpected.
        detail: String,
    },
    /// No schedule by that name is registered in the queue.
    #[error("no schedule {schedule} in queue {queue} (a worker serving its pipeline registers it on start)")]
    UnknownSchedule {
        /// The queue.
        queue: String,
        /// The schedule.
        schedule: String,
    },
    /// A schedule could not be declared or evaluated.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// A worker starting on a Redis Cluster waited its startup wait for the
    /// master of a queue's slot to answer, and gave up (a failover in
    /// progress, most likely).
    #[error("{0}")]
    StartupUnanswered(Box<StartupUnanswered>),
    /// The caller passed something leasehold cannot accept.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A job's input does not fit its pipeline's input type (its JSON Schema).
    #[error("input of pipeline {pipeline} is invalid at {path}: {problem}")]
    InvalidInput {
        /// The pipeline.
        pipeline: String,
        /// The JSON path (JSON Pointer) of the offending value; `/` for the whole input.
        path: String,
        /// What is wrong there.
        problem: String,
    },
    /// No worker registered the pipeline (in the queue given, or in any queue).
    #[error("pipeline {pipeline} is not registered{}: no worker serving it has started, so its queue, keys and input type are unknown (start a worker, or enqueue with --unregistered giving --queue, --resource and --input-key)", queue.as_ref().map(|q| format!(" in queue {q}")).unwrap_or_default())]
    UnregisteredPipeline {
        /// The pipeline.
        pipeline: String,
        /// The queue looked in, when one was given.
        queue: Option<String>,
    },
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A `WRONGTYPE` reply to a command on `key` (which should hold a
    /// `expected`, e.g. "hash") as [`Error::Corrupt`] naming the key (field
    /// `(key)`); any other error as it is. Redis's own reply does not say
    /// which key holds the wrong kind of value.
    pub fn naming_key(self, key: &str, expected: &str) -> Error {
        match &self {
            Error::Redis(e)
                if e.code() == Some("WRONGTYPE") || batch_failed_with(e, &["wrongtype"]) =>
            {
                Error::Corrupt {
                    key: key.to_owned(),
                    field: "(key)".into(),
                    problem: format!("the key holds the wrong kind of value (not a {expected})"),
                }
            }
            _ => self,
        }
    }

    /// True when the error means this caller must stop working on the job:
    /// its lease is gone or the job moved on without it.
    pub fn is_lease_lost(&self) -> bool {
        matches!(
            self,
            Error::LeaseLost { .. } | Error::Refused { .. } | Error::NotFound { .. }
        )
    }

    /// True when Redis refused the credentials: the `AUTH` at connect failed
    /// (`WRONGPASS`), or a command was refused for want of one (`NOAUTH`).
    /// Not transient: retrying with the same credentials fails the same way.
    pub fn is_auth_failure(&self) -> bool {
        match self {
            Error::Redis(e) => {
                e.kind() == deadpool_redis::redis::ErrorKind::AuthenticationFailed
                    || matches!(e.code(), Some("NOAUTH" | "WRONGPASS"))
                    // a cluster client that could reach no node keeps only
                    // the text of why (an I/O error naming the refusal)
                    || (e.kind() == deadpool_redis::redis::ErrorKind::Io
                        && e.detail().is_some_and(|d| {
                            d.contains("AuthenticationFailed") || d.contains("WRONGPASS")
                        }))
            }
            _ => false,
        }
    }

    /// True for connection-level failures worth retrying after a backoff
    /// (on a cluster also: the cluster down, a slot in migration, a master
    /// being replaced, when the client's own retries ran out).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Timeout(_) | Error::Pool(_) => true,
            Error::Redis(e) => {
                e.is_io_error()
                    || e.is_connection_dropped()
                    || e.is_connection_refusal()
                    || e.is_timeout()
                    || matches!(e.code(), Some("CLUSTERDOWN" | "TRYAGAIN" | "MASTERDOWN"))
                    // a pipeline or transaction held while a slot moved or a
                    // master failed over
                    || batch_failed_with(e, &["tryagain", "clusterdown", "masterdown"])
            }
            _ => false,
        }
    }

    /// What to do about a Redis Cluster error, for messages: a server URL
    /// given for a cluster node (`MOVED`/`ASK`), the cluster down (`CLUSTERDOWN`:
    /// a master without a replica is gone), or keys of two slots in one command.
    pub fn cluster_hint(&self) -> Option<&'static str> {
        let Error::Redis(e) = self else {
            return None;
        };
        match e.code() {
            Some("MOVED" | "ASK") => Some(
                "this server is a Redis Cluster node: give a cluster URL, \
                 redis+cluster://host:port[,host:port...] (rediss+cluster:// for TLS)",
            ),
            Some("CLUSTERDOWN") => Some(
                "the cluster is down: a master serving some slots is unreachable and no \
                 replica took over; restart it (with its AOF) or give every master a replica \
                 (docs/operations.md, \"Redis Cluster\")",
            ),
            Some("CROSSSLOT") => Some(
                "a command named keys of two slots; leasehold keeps each queue in one slot, \
                 so this comes from keys written outside it",
            ),
            _ => None,
        }
    }
}

/// Whether `e` is the failure of a pipeline or transaction (`Pipeline failure:
/// [...]`, `Transaction aborted: [...]`) one of whose commands failed with an
/// error whose text holds one of `markers` (lowercase): the client reports
/// the commands' own errors only inside that text.
fn batch_failed_with(e: &RedisError, markers: &[&str]) -> bool {
    let text = e.to_string().to_ascii_lowercase();
    (text.contains("pipeline failure") || text.contains("transaction aborted"))
        && markers.iter().any(|m| text.contains(m))
}

/// What a worker that gave up starting on a Redis Cluster says (see
/// [`Error::StartupUnanswered`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the worker could not start queue {queue} (pipelines {}): master {master} of its slot did not answer within {waited:?}; likely cause: {cause}; last error: {last}", pipelines.join(", "))]
pub struct StartupUnanswered {
    /// The master of the queue's slot, as a reachable node names it.
    pub master: String,
    /// The queue.
    pub queue: String,
    /// The queue's pipelines this worker serves.
    pub pipelines: Vec<String>,
    /// How long the worker waited.
    pub waited: Duration,
    /// What most likely kept the master from answering.
    pub cause: String,
    /// The last failure, as Redis or the client said it.
    pub last: String,
}

/// Why a schedule cannot be declared or evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// The cron expression does not parse (or has other than 5 or 6 fields).
    #[error("schedule {schedule}: bad cron expression {expr:?}: {why}")]
    BadCron {
        /// The schedule.
        schedule: String,
        /// The expression as given.
        expr: String,
        /// What is wrong.
        why: String,
    },
    /// The time zone is not an IANA name the bundled database knows.
    #[error("schedule {schedule}: unknown time zone {zone:?}: {why}")]
    BadZone {
        /// The schedule.
        schedule: String,
        /// The zone as given.
        zone: String,
        /// What is wrong.
        why: String,
    },
    /// Some other setting is out of range (interval, start after end, static
    /// input that is not an object or has a `window` field, a bad name).
    #[error("schedule {schedule}: {why}")]
    Invalid {
        /// The schedule.
        schedule: String,
        /// What is wrong.
        why: String,
    },
}
