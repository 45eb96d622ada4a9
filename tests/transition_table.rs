//! Proves that the Lua scripts and `leasehold::transitions::TRANSITIONS` agree, exhaustively.
//!
//! For every operation that acts on an existing job (in every variant: each
//! finish outcome, each resolve target, both retry modes, start and sweep with
//! and without a pending cancel request) and every state a job can be in, a
//! fresh job is brought into that state through the real client against a
//! private `redis-server`, the operation is applied with the job's lease token
//! (when it has one), and:
//!
//! * if the table has a row `(op, from, to)` the operation succeeds and the job
//!   ends in `to` (a new attempt in QUEUED for `Kind::NewAttempt` rows), with its
//!   indexes (leases, stale, done, ready, lock, inputs) consistent with `to`;
//! * otherwise the operation is refused with the typed error the client
//!   documents, whose `Display` names the job, its state and the operation, and
//!   every key of the queue is byte-for-byte unchanged.
//!
//! Holder operations that the table allows are first tried with a wrong token:
//! they must be refused as `LeaseLost` (renew: `Renewal::Lost`) and change
//! nothing. Finally every row of the table must have been exercised.
//!
//! Lease expiry is forced by rewriting the job's score in `<base>:leases` to 0
//! (`ZADD XX`), never by waiting.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use leasehold::lease::{
    Finished, HolderOp, HolderReply, Lease, LeaseRequest, Outcome, Renewal, Started,
};
use leasehold::queue::{
    AttemptError, Cancelled, Job, JobId, JobState, NewJob, Queue, QueueConfig, RetryMode, StaleLock,
};
use leasehold::redis::Value;
use leasehold::transitions::{self, Kind};
use leasehold::transitions::{Op, TRANSITIONS};
use leasehold::Error;
use leasehold_testkit::{RedisCluster, RedisServer};

const QUEUE: &str = "q";
const PATTERN: &str = "leasehold:{q}:*";
const PIPELINE: &str = "etl";
const TTL: Duration = Duration::from_secs(300);
const WRONG_TOKEN: &str = "00000000000000000000000000000000";

/// How the job under test is created.
#[derive(Debug, Clone, Copy)]
struct Flavor {
    name: &'static str,
    resource: Option<&'static str>,
    input_key: Option<&'static str>,
    stale_lock: StaleLock,
}

impl Flavor {
    /// The names of one job of this flavor; `n` sets it apart from the other
    /// jobs of a settle batch (each its own resource and input key, so that
    /// jobs in every state can live side by side).
    fn names(&self, n: Option<usize>) -> Names {
        let numbered = |name: &str| match n {
            Some(n) => format!("{name}-{n}"),
            None => name.to_owned(),
        };
        Names {
            resource: self.resource.map(numbered),
            input_key: self.input_key.map(numbered),
            stale_lock: self.stale_lock,
        }
    }
}

/// The resource and input key of one job under test.
#[derive(Debug, Clone)]
struct Names {
    resource: Option<String>,
    input_key: Option<String>,
    stale_lock: StaleLock,
}

/// The state (and pending cancel request) a job is brought into before the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Setup {
    Queued,
    Leased,
    LeasedCancelRequested,
    Running,
    RunningCancelRequested,
    Succeeded,
    Failed,
    Cancelled,
    Stale,
}

impl Setup {
    const ALL: [Setup; 9] = [
        Setup::Queued,
        Setup::Leased,
        Setup::LeasedCancelRequested,
        Setup::Running,
        Setup::RunningCancelRequested,
        Setup::Succeeded,
        Setup::Failed,
        Setup::Cancelled,
        Setup::Stale,
    ];

    fn state(self) -> JobState {
        match self {
            Setup::Queued => JobState::Queued,
            Setup::Leased | Setup::LeasedCancelRequested => JobState::Leased,
            Setup::Running | Setup::RunningCancelRequested => JobState::Running,
            Setup::Succeeded => JobState::Succeeded,
            Setup::Failed => JobState::Failed,
            Setup::Cancelled => JobState::Cancelled,
            Setup::Stale => JobState::Stale,
        }
    }

    fn cancel_requested(self) -> bool {
        matches!(
            self,
            Setup::LeasedCancelRequested | Setup::RunningCancelRequested
        )
    }
}

/// One operation, in one of its variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Lease,
    /// A lease that starts the job in the same call (a free run slot).
    LeaseAndStart,
    Start,
    Checkpoint,
    Renew,
    FinishSucceeded,
    FinishFailedPermanent,
    /// Retryable, with attempts left (max_attempts 2): a new attempt.
    FinishFailedRetryable,
    /// Retryable, but the last attempt (max_attempts 1): FAILED.
    FinishFailedRetryableExhausted,
    /// A worker shutdown cut the attempt: always a new attempt (max_attempts 1).
    FinishInterrupted,
    FinishCancelled,
    Release,
    Cancel,
    /// Force the lease expired (`ZADD XX 0`), then sweep.
    Sweep,
    RetryResume,
    RetryFromStart,
    ResolveSucceeded,
    ResolveFailed,
    ResolveCancelled,
}

impl Action {
    const ALL: [Action; 19] = [
        Action::Lease,
        Action::LeaseAndStart,
        Action::Start,
        Action::Checkpoint,
        Action::Renew,
        Action::FinishSucceeded,
        Action::FinishFailedPermanent,
        Action::FinishFailedRetryable,
        Action::FinishFailedRetryableExhausted,
        Action::FinishInterrupted,
        Action::FinishCancelled,
        Action::Release,
        Action::Cancel,
        Action::Sweep,
        Action::RetryResume,
        Action::RetryFromStart,
        Action::ResolveSucceeded,
        Action::ResolveFailed,
        Action::ResolveCancelled,
    ];

    fn op(self) -> Op {
        match self {
            Action::Lease | Action::LeaseAndStart => Op::Lease,
            Action::Start => Op::Start,
            Action::Checkpoint => Op::Checkpoint,
            Action::Renew => Op::Renew,
            Action::FinishSucceeded
            | Action::FinishFailedPermanent
            | Action::FinishFailedRetryable
            | Action::FinishFailedRetryableExhausted
            | Action::FinishInterrupted
            | Action::FinishCancelled => Op::Finish,
            Action::Release => Op::Release,
            Action::Cancel => Op::Cancel,
            Action::Sweep => Op::Sweep,
            Action::RetryResume | Action::RetryFromStart => Op::Retry,
            Action::ResolveSucceeded | Action::ResolveFailed | Action::ResolveCancelled => {
                Op::Resolve
            }
        }
    }

    /// Operations only the lease holder may perform (token-compared).
    fn is_holder_op(self) -> bool {
        matches!(
            self.op(),
            Op::Start | Op::Checkpoint | Op::Renew | Op::Finish | Op::Release
        )
    }

    fn max_attempts(self) -> u32 {
        if self == Action::FinishFailedRetryable {
            2
        } else {
            1
        }
    }

    /// The state this variant of the operation aims at from `setup`. Whether
    /// it may get there is the table's business, not this function's.
    fn target(self, setup: Setup) -> JobState {
        let from = setup.state();
        match self {
            Action::Lease => JobState::Leased,
            Action::LeaseAndStart => JobState::Running,
            // a repeated start of a RUNNING job by its holder stays RUNNING
            Action::Start if setup.cancel_requested() && from == JobState::Leased => {
                JobState::Cancelled
            }
            Action::Start => JobState::Running,
            Action::Checkpoint => JobState::Running,
            Action::Renew => from,
            Action::FinishSucceeded | Action::ResolveSucceeded => JobState::Succeeded,
            Action::FinishFailedPermanent
            | Action::FinishFailedRetryableExhausted
            | Action::ResolveFailed => JobState::Failed,
            // A pending cancel request suppresses the automatic retry: the
            // attempt ends FAILED (the request is kept in its record) rather
            // than silently dropping the operator's cancel.
            Action::FinishFailedRetryable if setup.cancel_requested() => JobState::Failed,
            // A shutdown with a cancel pending ends the attempt the way the
            // operator asked: CANCELLED, from RUNNING and from LEASED alike (the
            // row "the holder honoured a cancel before starting"). Without a
            // cancel pending, an interrupted attempt from LEASED aims at QUEUED,
            // which the table has no finish row for: refused.
            Action::FinishInterrupted if setup.cancel_requested() => JobState::Cancelled,
            Action::FinishFailedRetryable | Action::FinishInterrupted => JobState::Queued,
            Action::FinishCancelled | Action::ResolveCancelled => JobState::Cancelled,
            Action::Release if setup.cancel_requested() => JobState::Cancelled,
            Action::Release => JobState::Queued,
            Action::Cancel if from == JobState::Queued => JobState::Cancelled,
            Action::Cancel => from,
            Action::Sweep => match setup {
                Setup::Leased => JobState::Queued,
                Setup::LeasedCancelRequested => JobState::Cancelled,
                Setup::Running | Setup::RunningCancelRequested => JobState::Stale,
                _ => from,
            },
            Action::RetryResume | Action::RetryFromStart => JobState::Queued,
        }
    }

    fn outcome(self) -> Option<Outcome> {
        let failed = |retryable: bool| Outcome::Failed {
            error: AttemptError {
                kind: "test".into(),
                message: "step failed".into(),
                retryable,
                retries_exhausted: false,
            },
            backoff: Duration::ZERO,
            cleanup_needed: false,
        };
        match self {
            Action::FinishSucceeded => Some(Outcome::Succeeded),
            Action::FinishFailedPermanent => Some(failed(false)),
            Action::FinishFailedRetryable | Action::FinishFailedRetryableExhausted => {
                Some(failed(true))
            }
            Action::FinishInterrupted => Some(Outcome::Interrupted {
                reason: "worker shutting down".into(),
                cleanup_needed: false,
            }),
            Action::FinishCancelled => Some(Outcome::Cancelled {
                reason: "holder honours the cancel".into(),
                cleanup_needed: false,
            }),
            _ => None,
        }
    }
}

/// What a refusal must look like.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Refusal {
    /// `Error::Refused` naming the state and operation.
    Refused(JobState, Op),
    /// `Error::LeaseLost` naming the state and operation.
    LeaseLost(JobState, Op),
    /// `Error::AlreadyTerminal` naming the state.
    AlreadyTerminal(JobState),
    /// `Renewal::Lost` with the job's state.
    RenewLost(JobState),
    /// Lease returned nothing / sweep moved nothing.
    NothingDone,
}

type CaseResult = Result<(), String>;

fn ensure(cond: bool, what: impl FnOnce() -> String) -> CaseResult {
    if cond {
        Ok(())
    } else {
        Err(what())
    }
}

fn new_job(names: &Names, max_attempts: u32) -> NewJob {
    let mut job = NewJob::from_json(PIPELINE, r#"{"shop":"a","from":"00:00","to":"01:00"}"#)
        .max_attempts(max_attempts)
        .stale_lock(names.stale_lock);
    if let Some(resource) = &names.resource {
        job = job.resource(resource);
    }
    if let Some(key) = &names.input_key {
        job = job.input_key(key);
    }
    job
}

fn failed_permanent() -> Outcome {
    Outcome::Failed {
        error: AttemptError {
            kind: "setup".into(),
            message: "permanent failure".into(),
            retryable: false,
            retries_exhausted: false,
        },
        backoff: Duration::ZERO,
        cleanup_needed: false,
    }
}

fn err(e: impl std::fmt::Debug) -> String {
    format!("{e:?}")
}

/// Rewrites the job's lease deadline to 0 so the next sweep sees it expired
/// (`XX`: a job without a lease entry is left alone).
fn force_expire(srv: &RedisServer, queue: &Queue, id: &JobId) {
    let reply = srv.cmd(&["ZADD", &queue.keys().leases(), "XX", "0", id.as_str()]);
    assert!(
        matches!(reply, Value::Int(_)),
        "ZADD XX on the leases zset answered {reply:?}"
    );
}

/// Brings a fresh job into `setup`; returns it and the lease its (last) holder
/// took. A QUEUED job is leased and handed back first, so that even there a
/// holder operation comes with a token that once was real.
async fn bring(
    srv: &RedisServer,
    queue: &Queue,
    names: &Names,
    setup: Setup,
    max_attempts: u32,
) -> Result<(JobId, Lease), String> {
    let enqueued = queue
        .enqueue(new_job(names, max_attempts))
        .await
        .map_err(err)?;
    ensure(enqueued.created, || "enqueue did not create a job".into())?;
    let id = enqueued.id;
    let mut leased = queue
        .lease("worker-a", &[PIPELINE], 1, TTL)
        .await
        .map_err(err)?;
    ensure(leased.leases.len() == 1, || {
        format!("setup lease returned {leased:?}")
    })?;
    let lease = leased.leases.remove(0);
    ensure(lease.job == id, || "setup leased another job".into())?;
    if setup == Setup::Queued {
        // Handed back by its holder: QUEUED again, and that holder's token is dead.
        let state = queue.release(&lease).await.map_err(err)?;
        ensure(state == JobState::Queued, || {
            format!("setup release answered {state}")
        })?;
    }
    if setup == Setup::LeasedCancelRequested {
        let c = queue
            .cancel(&id, "operator wants it stopped", "operator:test")
            .await
            .map_err(err)?;
        ensure(
            c == Cancelled::Requested {
                state: JobState::Leased,
            },
            || format!("setup cancel answered {c:?}"),
        )?;
    }
    if !matches!(setup.state(), JobState::Queued | JobState::Leased) {
        let started = queue.start(&lease, "fetch").await.map_err(err)?;
        ensure(started == Started::Running, || {
            format!("setup start answered {started:?}")
        })?;
        queue
            .checkpoint(&lease, "fetch", r#"{"rows":3}"#, Some("load"))
            .await
            .map_err(err)?;
    }
    match setup {
        Setup::RunningCancelRequested => {
            let c = queue
                .cancel(&id, "operator wants it stopped", "operator:test")
                .await
                .map_err(err)?;
            ensure(
                c == Cancelled::Requested {
                    state: JobState::Running,
                },
                || format!("setup cancel answered {c:?}"),
            )?;
        }
        Setup::Succeeded => {
            queue
                .finish(&lease, &Outcome::Succeeded)
                .await
                .map_err(err)?;
        }
        Setup::Failed => {
            queue
                .finish(&lease, &failed_permanent())
                .await
                .map_err(err)?;
        }
        Setup::Cancelled => {
            queue
                .finish(
                    &lease,
                    &Outcome::Cancelled {
                        reason: "setup".into(),
                        cleanup_needed: false,
                    },
                )
                .await
                .map_err(err)?;
        }
        Setup::Stale => {
            force_expire(srv, queue, &id);
            let report = queue.sweep(100).await.map_err(err)?;
            ensure(report.stale == 1 && report.moves.len() == 1, || {
                format!("setup sweep answered {report:?}")
            })?;
        }
        _ => {}
    }
    let job = queue.job(&id).await.map_err(err)?.ok_or("job vanished")?;
    ensure(job.state == setup.state(), || {
        format!("setup reached {} instead of {}", job.state, setup.state())
    })?;
    check_indexes(srv, queue, names, &id, setup.state())?;
    Ok((id, lease))
}

fn is_member(srv: &RedisServer, zset: &str, id: &JobId) -> bool {
    !matches!(srv.cmd(&["ZSCORE", zset, id.as_str()]), Value::Nil)
}

fn text(value: Value) -> Option<String> {
    match value {
        Value::BulkString(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        Value::SimpleString(s) => Some(s),
        Value::Nil => None,
        other => Some(format!("{other:?}")),
    }
}

/// The queue's indexes agree with the job being in `state`.
fn check_indexes(
    srv: &RedisServer,
    queue: &Queue,
    names: &Names,
    id: &JobId,
    state: JobState,
) -> CaseResult {
    let keys = queue.keys();
    let leased = is_member(srv, &keys.leases(), id);
    ensure(leased == state.is_leased(), || {
        format!("{state} job: member of the leases zset = {leased}")
    })?;
    let stale = is_member(srv, &keys.stale(), id);
    ensure(stale == (state == JobState::Stale), || {
        format!("{state} job: member of the stale zset = {stale}")
    })?;
    let done = is_member(srv, &keys.done(), id);
    ensure(done == state.is_terminal(), || {
        format!("{state} job: member of the done zset = {done}")
    })?;
    let ready = is_member(srv, &keys.ready(PIPELINE), id);
    ensure(ready == (state == JobState::Queued), || {
        format!("{state} job: member of the ready zset = {ready}")
    })?;
    if let Some(resource) = &names.resource {
        let holds =
            state.is_leased() || (state == JobState::Stale && names.stale_lock == StaleLock::Hold);
        let lock = text(srv.cmd(&["GET", &keys.lock(resource)]));
        let expected = holds.then(|| id.as_str().to_owned());
        ensure(lock == expected, || {
            format!("{state} job: lock key holds {lock:?}, expected {expected:?}")
        })?;
    }
    if let Some(key) = &names.input_key {
        let owner = text(srv.cmd(&["HGET", &keys.inputs(), key]));
        let expected = (!state.is_terminal()).then(|| id.as_str().to_owned());
        ensure(owner == expected, || {
            format!("{state} job: inputs[{key}] = {owner:?}, expected {expected:?}")
        })?;
    }
    Ok(())
}

/// What an applied action returned, reduced to what the checks need.
enum Applied {
    /// It did something; the string describes the reply for messages, the
    /// state is what the reply itself claims the job moved to (if it says).
    Done {
        reply: String,
        claims: Option<JobState>,
    },
    Refused(Refusal, String),
    /// A reply that fits neither.
    Unexpected(String),
}

fn classify_error(e: Error) -> Applied {
    let display = e.to_string();
    match e {
        Error::Refused { state, op, .. } => Applied::Refused(Refusal::Refused(state, op), display),
        Error::LeaseLost { state, op, .. } => {
            Applied::Refused(Refusal::LeaseLost(state, op), display)
        }
        Error::AlreadyTerminal { state, .. } => {
            Applied::Refused(Refusal::AlreadyTerminal(state), display)
        }
        other => Applied::Unexpected(format!("error {other:?}")),
    }
}

async fn apply(
    srv: &RedisServer,
    queue: &Queue,
    action: Action,
    id: &JobId,
    lease: &Lease,
) -> Applied {
    match action {
        Action::Lease => match queue.lease("worker-b", &[PIPELINE], 1, TTL).await {
            Ok(leased) if leased.leases.is_empty() => {
                Applied::Refused(Refusal::NothingDone, String::new())
            }
            Ok(leased) if leased.leases.len() == 1 && &leased.leases[0].job == id => {
                Applied::Done {
                    reply: format!("{leased:?}"),
                    claims: None,
                }
            }
            Ok(other) => Applied::Unexpected(format!("{other:?}")),
            Err(e) => classify_error(e),
        },
        Action::LeaseAndStart => match queue
            .lease_and_start("worker-b", &[PIPELINE], &["fetch"], 1, TTL)
            .await
        {
            Ok(leased) if leased.leases.is_empty() => {
                Applied::Refused(Refusal::NothingDone, String::new())
            }
            Ok(leased)
                if leased.leases.len() == 1
                    && &leased.leases[0].job == id
                    && leased.leases[0].started =>
            {
                Applied::Done {
                    reply: format!("{leased:?}"),
                    claims: Some(JobState::Running),
                }
            }
            Ok(other) => Applied::Unexpected(format!("{other:?}")),
            Err(e) => classify_error(e),
        },
        Action::Start => match queue.start(lease, "fetch").await {
            Ok(Started::Running) => Applied::Done {
                reply: "Running".into(),
                claims: Some(JobState::Running),
            },
            Ok(Started::Cancelled { reason }) => Applied::Done {
                reply: format!("Cancelled({reason})"),
                claims: Some(JobState::Cancelled),
            },
            Err(e) => classify_error(e),
        },
        Action::Checkpoint => match queue
            .checkpoint(lease, "load", r#"{"rows":7}"#, Some("aggregate"))
            .await
        {
            Ok(cancel) => Applied::Done {
                reply: format!("cancel={cancel:?}"),
                claims: None,
            },
            Err(e) => classify_error(e),
        },
        Action::Renew => match queue.renew(&[lease]).await {
            Ok(r) if r.len() == 1 => match &r[0] {
                Renewal::Lost { state: Some(state) } => {
                    Applied::Refused(Refusal::RenewLost(*state), String::new())
                }
                Renewal::Lost { state: None } => Applied::Unexpected("Lost(None)".into()),
                other => Applied::Done {
                    reply: format!("{other:?}"),
                    claims: None,
                },
            },
            Ok(r) => Applied::Unexpected(format!("{r:?}")),
            Err(e) => classify_error(e),
        },
        Action::FinishSucceeded
        | Action::FinishFailedPermanent
        | Action::FinishFailedRetryable
        | Action::FinishFailedRetryableExhausted
        | Action::FinishInterrupted
        | Action::FinishCancelled => {
            let outcome = action.outcome().expect("a finish action has an outcome");
            match queue.finish(lease, &outcome).await {
                Ok(Finished::Ended(state)) => Applied::Done {
                    reply: format!("Ended({state})"),
                    claims: Some(state),
                },
                Ok(Finished::Retrying { attempt, .. }) => Applied::Done {
                    reply: format!("Retrying(attempt {attempt})"),
                    claims: Some(JobState::Queued),
                },
                Err(e) => classify_error(e),
            }
        }
        Action::Release => match queue.release(lease).await {
            Ok(state) => Applied::Done {
                reply: format!("released, now {state}"),
                claims: Some(state),
            },
            Err(e) => classify_error(e),
        },
        Action::Cancel => match queue.cancel(id, "stop it", "operator:test").await {
            Ok(Cancelled::Now) => Applied::Done {
                reply: "Now".into(),
                claims: Some(JobState::Cancelled),
            },
            Ok(Cancelled::Requested { state }) => Applied::Done {
                reply: format!("Requested({state})"),
                claims: Some(state),
            },
            Ok(Cancelled::AlreadyRequested { state, reason }) => Applied::Done {
                reply: format!("AlreadyRequested({state}, {reason})"),
                claims: Some(state),
            },
            Err(e) => classify_error(e),
        },
        Action::Sweep => {
            force_expire(srv, queue, id);
            match queue.sweep(100).await {
                Ok(report) if report.moves.is_empty() => {
                    if report == Default::default() {
                        Applied::Refused(Refusal::NothingDone, String::new())
                    } else {
                        Applied::Unexpected(format!("{report:?}"))
                    }
                }
                Ok(report)
                    if report.moves.len() == 1
                        && &report.moves[0].job == id
                        && report.unparked == 0
                        && report.purged == 0 =>
                {
                    Applied::Done {
                        reply: format!("{report:?}"),
                        claims: Some(report.moves[0].to),
                    }
                }
                Ok(other) => Applied::Unexpected(format!("{other:?}")),
                Err(e) => classify_error(e),
            }
        }
        Action::RetryResume | Action::RetryFromStart => {
            let mode = if action == Action::RetryResume {
                RetryMode::Resume
            } else {
                RetryMode::FromStart
            };
            match queue.retry(id, mode, "operator:test", "try again").await {
                Ok(n) => Applied::Done {
                    reply: format!("attempt {n}"),
                    claims: Some(JobState::Queued),
                },
                Err(e) => classify_error(e),
            }
        }
        Action::ResolveSucceeded | Action::ResolveFailed | Action::ResolveCancelled => {
            let target = action.target(Setup::Stale);
            match queue
                .resolve(id, target, "operator:test", "checked the sink")
                .await
            {
                Ok(()) => Applied::Done {
                    reply: "resolved".into(),
                    claims: Some(target),
                },
                Err(e) => classify_error(e),
            }
        }
    }
}

/// The refusal the client documents for `action` on a job in `from`.
fn expected_refusal(action: Action, from: JobState) -> Refusal {
    match action.op() {
        Op::Lease | Op::Sweep => Refusal::NothingDone,
        Op::Renew => Refusal::RenewLost(from),
        Op::Cancel if from.is_terminal() => Refusal::AlreadyTerminal(from),
        op => Refusal::Refused(from, op),
    }
}

fn check_display(display: &str, id: &JobId, refusal: &Refusal) -> CaseResult {
    let (state, op) = match refusal {
        Refusal::Refused(s, op) | Refusal::LeaseLost(s, op) => (*s, Some(*op)),
        Refusal::AlreadyTerminal(s) => (*s, None),
        Refusal::RenewLost(_) | Refusal::NothingDone => return Ok(()),
    };
    ensure(display.contains(id.as_str()), || {
        format!("error {display:?} does not name the job")
    })?;
    ensure(display.contains(state.as_str()), || {
        format!("error {display:?} does not name the state {state}")
    })?;
    if let Some(op) = op {
        ensure(display.contains(op.as_str()), || {
            format!("error {display:?} does not name the operation {op}")
        })?;
    }
    Ok(())
}

/// Runs one (flavor, setup, action) case; returns the index of the table row
/// it exercised, if the move was allowed.
async fn run_case(
    srv: &RedisServer,
    queue: &Queue,
    flavor: &Flavor,
    setup: Setup,
    action: Action,
) -> Result<Option<usize>, String> {
    srv.flush();
    let names = flavor.names(None);
    let (id, lease) = bring(srv, queue, &names, setup, action.max_attempts()).await?;
    let from = setup.state();
    let op = action.op();
    let to = action.target(setup);
    let row = TRANSITIONS
        .iter()
        .position(|t| t.op == op && t.from == from && t.to == to);
    debug_assert_eq!(row.is_some(), transitions::allowed(op, from, to));
    let before_job = queue
        .job(&id)
        .await
        .map_err(err)?
        .ok_or("job vanished before the operation")?;

    // A holder operation the table allows must still be refused to a caller
    // with the wrong token, changing nothing.
    if row.is_some() && action.is_holder_op() {
        let intruder = Lease {
            token: WRONG_TOKEN.into(),
            ..lease.clone()
        };
        let before = state_keys(srv, action);
        let applied = apply(srv, queue, action, &id, &intruder).await;
        let expected = if op == Op::Renew {
            Refusal::RenewLost(from)
        } else {
            Refusal::LeaseLost(from, op)
        };
        match applied {
            Applied::Refused(got, display) => {
                ensure(got == expected, || {
                    format!("wrong token: refused as {got:?}, expected {expected:?} ({display})")
                })?;
                check_display(&display, &id, &got)?;
            }
            Applied::Done { reply, .. } => {
                return Err(format!("wrong token: accepted, replied {reply}"))
            }
            Applied::Unexpected(what) => return Err(format!("wrong token: {what}")),
        }
        let after = state_keys(srv, action);
        ensure(before == after, || {
            format!(
                "wrong token: refused but changed keys:\n{}",
                diff(&before, &after)
            )
        })?;
    }

    let before = state_keys(srv, action);
    let applied = apply(srv, queue, action, &id, &lease).await;
    let after = state_keys(srv, action);
    let case = Case {
        names: &names,
        setup,
        action,
        id: &id,
        lease: &lease,
        before_job: &before_job,
    };
    judge(srv, queue, &case, applied, &before, &after).await
}

/// One job an action was applied to, and what the checks need to know of it.
struct Case<'a> {
    names: &'a Names,
    setup: Setup,
    action: Action,
    id: &'a JobId,
    /// The lease its holder took (the operation's, unless it was an intruder).
    lease: &'a Lease,
    /// The job as read before the operation.
    before_job: &'a Job,
}

/// Checks what an action did to one job against the table, for both paths: an
/// allowed move ends in its target with the attempt, records and indexes that
/// go with it; a refusal is the documented one and `before` equals `after`
/// (what a refusal must leave as it was: every key for a single call, the
/// job's footprint for an operation of a settle call). Returns the index of
/// the row exercised, if the move was allowed.
async fn judge(
    srv: &RedisServer,
    queue: &Queue,
    case: &Case<'_>,
    applied: Applied,
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> Result<Option<usize>, String> {
    let Case {
        names,
        setup,
        action,
        id,
        lease,
        before_job,
    } = *case;
    let from = setup.state();
    let op = action.op();
    let to = action.target(setup);
    let row = TRANSITIONS
        .iter()
        .position(|t| t.op == op && t.from == from && t.to == to);
    let job = queue
        .job(id)
        .await
        .map_err(err)?
        .ok_or("job vanished after the operation")?;

    match (row, applied) {
        (Some(index), Applied::Done { reply, claims }) => {
            let t = &TRANSITIONS[index];
            ensure(job.state == to, || {
                format!(
                    "allowed {op} {from}→{to}: job ended {} (reply {reply})",
                    job.state
                )
            })?;
            if let Some(claimed) = claims {
                ensure(claimed == to, || {
                    format!("allowed {op} {from}→{to}: reply claims {claimed} ({reply})")
                })?;
            }
            match t.kind {
                Kind::NewAttempt => {
                    ensure(to == JobState::Queued, || "new attempt not QUEUED".into())?;
                    ensure(job.attempt == before_job.attempt + 1, || {
                        format!(
                            "new attempt: attempt {} → {}",
                            before_job.attempt, job.attempt
                        )
                    })?;
                    let ended_as = if op == Op::Finish {
                        JobState::Failed
                    } else {
                        from
                    };
                    let record = job.attempts.iter().find(|a| a.n == before_job.attempt);
                    ensure(record.is_some_and(|r| r.state == ended_as), || {
                        format!(
                            "new attempt: record of attempt {} is {record:?}",
                            before_job.attempt
                        )
                    })?;
                }
                Kind::Stay | Kind::Move => {
                    ensure(job.attempt == before_job.attempt, || {
                        format!(
                            "{op} {from}→{to}: attempt {} → {}",
                            before_job.attempt, job.attempt
                        )
                    })?;
                    if t.kind == Kind::Stay {
                        ensure(from == to, || "a Stay row changes state".into())?;
                    }
                    if to.is_terminal() {
                        let record = job.attempts.iter().find(|a| a.n == job.attempt);
                        // an operator's resolve of a STALE attempt keeps the attempt as it
                        // went STALE and adds the decision beside it, naming where it went
                        let decided_stale = op == Op::Resolve && from == JobState::Stale;
                        ensure(
                            record.is_some_and(|r| {
                                if decided_stale {
                                    r.state == JobState::Stale
                                        && r.resolution.as_ref().is_some_and(|d| d.to == Some(to))
                                } else {
                                    r.state == to
                                }
                            }),
                            || format!("{op} {from}→{to}: attempt record {record:?}"),
                        )?;
                        // a success by its worker has no stored record: the one built from
                        // the job hash must still name the lease that ran it
                        if op == Op::Finish && to == JobState::Succeeded {
                            ensure(
                                record.is_some_and(|r| {
                                    r.worker == "worker-a"
                                        && r.fence == lease.fence
                                        && r.leased_at.is_some()
                                        && r.started_at.is_some()
                                }),
                                || format!("{op} {from}→{to}: record from the hash {record:?}"),
                            )?;
                        }
                    }
                }
            }
            // Records of earlier attempts are never rewritten.
            for old in &before_job.attempts {
                let now = job.attempts.iter().find(|a| a.n == old.n);
                ensure(now == Some(old), || {
                    format!("attempt record {} rewritten: {old:?} → {now:?}", old.n)
                })?;
            }
            if action == Action::Checkpoint || action == Action::Renew {
                let says_cancel = reply.contains("Some(") || reply.contains("CancelRequested");
                ensure(says_cancel == setup.cancel_requested(), || {
                    format!("{op} on {setup:?} replied {reply}")
                })?;
            }
            check_indexes(srv, queue, names, id, to)?;
            Ok(Some(index))
        }
        (Some(_), Applied::Refused(got, display)) => Err(format!(
            "table allows {op} {from}→{to} but it was refused: {got:?} {display}"
        )),
        (None, Applied::Refused(got, display)) => {
            let expected = expected_refusal(action, from);
            ensure(got == expected, || {
                format!("{op} from {from}: refused as {got:?}, expected {expected:?} ({display})")
            })?;
            check_display(&display, id, &got)?;
            ensure(job.state == from, || {
                format!("{op} from {from} refused but the job is {}", job.state)
            })?;
            ensure(before == after, || {
                format!(
                    "{op} from {from} refused but keys changed:\n{}",
                    diff(before, after)
                )
            })?;
            Ok(None)
        }
        (None, Applied::Done { reply, .. }) => Err(format!(
            "table has no row {op} {from}→{to} but it was accepted: {reply}; job is now {}",
            job.state
        )),
        (_, Applied::Unexpected(what)) => Err(format!("{op} from {from}: unexpected {what}")),
    }
}

/// Every key of the queue, around `action`; for a lease, all but the wake-up
/// lists: those hold hints, not state, and a lease that finds a pipeline's
/// ready set empty (a refused lease included) deletes its stale tokens; for a
/// sweep, all but the per-minute counters: the first sweep of a minute samples
/// the waiting jobs into them whatever it moves (telemetry, not state).
fn state_keys(srv: &RedisServer, action: Action) -> BTreeMap<String, String> {
    let mut keys = srv.dump(PATTERN);
    if matches!(action, Action::Lease | Action::LeaseAndStart) {
        keys.retain(|k, _| !k.contains(":wake:"));
    }
    if action == Action::Sweep {
        keys.retain(|k, _| !k.contains(":stats:"));
    }
    keys
}

fn diff(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    for (k, v) in before {
        match after.get(k) {
            None => {
                let _ = writeln!(out, "  - {k}: {v}");
            }
            Some(w) if w != v => {
                let _ = writeln!(out, "  ~ {k}:\n      {v}\n   => {w}");
            }
            _ => {}
        }
    }
    for (k, v) in after {
        if !before.contains_key(k) {
            let _ = writeln!(out, "  + {k}: {v}");
        }
    }
    out
}

/// The pipeline the lease request of a settle batch takes its jobs from: its
/// own, so that the lease does not touch the jobs the batch's operations act on.
const SIDE_PIPELINE: &str = "side";
/// Jobs waiting in it when a batch runs.
const SIDE_JOBS: usize = 2;
/// They have no resource and no input key.
const SIDE_NAMES: Names = Names {
    resource: None,
    input_key: None,
    stale_lock: StaleLock::Hold,
};

/// Whether `Queue::settle` carries this action (start, checkpoint, finish, release).
fn settles(action: Action) -> bool {
    matches!(
        action.op(),
        Op::Start | Op::Checkpoint | Op::Finish | Op::Release
    )
}

/// The last step a settle finish checkpoints first, as a worker folds its
/// last step into the finish, and its output.
const LAST_STEP: (&str, &str) = ("aggregate", r#"{"total":9}"#);

/// `action` as one operation of a settle call, with `lease`.
fn holder_op<'a>(action: Action, lease: &'a Lease, outcome: Option<&'a Outcome>) -> HolderOp<'a> {
    match action.op() {
        Op::Start => HolderOp::Start {
            lease,
            first_step: "fetch",
        },
        Op::Checkpoint => HolderOp::Checkpoint {
            lease,
            step: "load",
            output: r#"{"rows":7}"#,
            next_step: Some("aggregate"),
        },
        Op::Finish => HolderOp::Finish {
            lease,
            outcome: outcome.expect("a finish action has an outcome"),
            last_step: Some(LAST_STEP),
        },
        Op::Release => HolderOp::Release { lease },
        op => unreachable!("{op} is not a settle operation"),
    }
}

/// A settle reply, reduced as `apply` reduces the single-op replies.
fn classify_reply(reply: Result<HolderReply, Error>) -> Applied {
    match reply {
        Ok(HolderReply::Started(Started::Running)) => Applied::Done {
            reply: "Running".into(),
            claims: Some(JobState::Running),
        },
        Ok(HolderReply::Started(Started::Cancelled { reason })) => Applied::Done {
            reply: format!("Cancelled({reason})"),
            claims: Some(JobState::Cancelled),
        },
        Ok(HolderReply::Checkpointed(cancel)) => Applied::Done {
            reply: format!("cancel={cancel:?}"),
            claims: None,
        },
        Ok(HolderReply::Finished(Finished::Ended(state))) => Applied::Done {
            reply: format!("Ended({state})"),
            claims: Some(state),
        },
        Ok(HolderReply::Finished(Finished::Retrying { attempt, .. })) => Applied::Done {
            reply: format!("Retrying(attempt {attempt})"),
            claims: Some(JobState::Queued),
        },
        Ok(HolderReply::Released(state)) => Applied::Done {
            reply: format!("released, now {state}"),
            claims: Some(state),
        },
        Err(e) => classify_error(e),
    }
}

/// Every value of a reply, flattened.
fn strings(value: Value, out: &mut Vec<String>) {
    match value {
        Value::Array(items) => items.into_iter().for_each(|v| strings(v, out)),
        Value::Map(pairs) => pairs.into_iter().for_each(|(k, v)| {
            strings(k, out);
            strings(v, out);
        }),
        other => out.extend(text(other)),
    }
}

/// Everything of the queue that belongs to one job: its hash, its attempt
/// records, its entries in the shared indexes (with their scores), its
/// resource's lock and parked set, its input key's entry, and how many events
/// name it. What a refused operation of a settle call must leave as it was,
/// while the call's other operations change other jobs.
fn footprint(
    srv: &RedisServer,
    queue: &Queue,
    names: &Names,
    id: &JobId,
) -> BTreeMap<String, String> {
    let keys = queue.keys();
    let id_s = id.as_str();
    let mut out = BTreeMap::new();
    let job_key = keys.job(id_s);
    let dump = srv.dump(&job_key);
    out.insert("hash".to_owned(), format!("{:?}", dump.get(&job_key)));
    for (name, zset) in [
        ("leases", keys.leases()),
        ("stale", keys.stale()),
        ("done", keys.done()),
        ("ready", keys.ready(PIPELINE)),
        ("delayed", keys.delayed(PIPELINE)),
    ] {
        out.insert(
            name.to_owned(),
            format!("{:?}", text(srv.cmd(&["ZSCORE", &zset, id_s]))),
        );
    }
    let mut fields = Vec::new();
    strings(srv.cmd(&["HKEYS", &keys.attempts()]), &mut fields);
    for field in fields
        .into_iter()
        .filter(|f| f.starts_with(&format!("{id_s}:")))
    {
        let record = text(srv.cmd(&["HGET", &keys.attempts(), &field]));
        out.insert(format!("attempts[{field}]"), format!("{record:?}"));
    }
    if let Some(res) = &names.resource {
        out.insert(
            "lock".into(),
            format!("{:?}", text(srv.cmd(&["GET", &keys.lock(res)]))),
        );
        let parked = srv.dump(&keys.parked(res));
        out.insert("parked".into(), format!("{parked:?}"));
    }
    if let Some(key) = &names.input_key {
        out.insert(
            "input".into(),
            format!("{:?}", text(srv.cmd(&["HGET", &keys.inputs(), key]))),
        );
    }
    let mut events = Vec::new();
    strings(srv.cmd(&["XRANGE", &keys.events(), "-", "+"]), &mut events);
    let named = events.iter().filter(|v| v.as_str() == id_s).count();
    out.insert("events naming it".into(), named.to_string());
    out
}

/// One job of a settle batch: brought into its setup, with its own names.
struct BatchJob {
    setup: Setup,
    names: Names,
    id: JobId,
    lease: Lease,
    before_job: Job,
}

/// Runs `action` through `Queue::settle` on one job in each setup at once, as
/// a worker's batch does, and judges each operation as the single path does.
/// Two calls: first an intruder's (a wrong token) for every job whose move the
/// table allows, all refused as `LeaseLost` and changing no key at all; then
/// the holders' own operations, one per job, with a lease request for the
/// jobs waiting in the side pipeline in the same call. Returns the rows
/// exercised and the failures (one line each).
async fn settle_batch(
    srv: &RedisServer,
    queue: &Queue,
    flavor: &Flavor,
    action: Action,
) -> Result<(Vec<usize>, Vec<String>), String> {
    srv.flush();
    // QUEUED last: a job waiting in the ready set would be the next one leased
    // by the setup of the jobs after it.
    let setups = Setup::ALL
        .into_iter()
        .filter(|s| *s != Setup::Queued)
        .chain([Setup::Queued]);
    let mut jobs = Vec::new();
    for (n, setup) in setups.enumerate() {
        let names = flavor.names(Some(n));
        let (id, lease) = bring(srv, queue, &names, setup, action.max_attempts()).await?;
        let before_job = queue.job(&id).await.map_err(err)?.ok_or("job vanished")?;
        jobs.push(BatchJob {
            setup,
            names,
            id,
            lease,
            before_job,
        });
    }
    for _ in 0..SIDE_JOBS {
        queue
            .enqueue(NewJob::from_json(SIDE_PIPELINE, "{}"))
            .await
            .map_err(err)?;
    }
    let outcome = action.outcome();
    let op = action.op();
    let allowed =
        |job: &BatchJob| transitions::allowed(op, job.setup.state(), action.target(job.setup));
    let mut failures = Vec::new();

    // 1. Intruders: every one refused as LeaseLost, nothing changed.
    let intruders: Vec<(&BatchJob, Lease)> = jobs
        .iter()
        .filter(|job| allowed(job))
        .map(|job| {
            let lease = Lease {
                token: WRONG_TOKEN.into(),
                ..job.lease.clone()
            };
            (job, lease)
        })
        .collect();
    let ops: Vec<HolderOp<'_>> = intruders
        .iter()
        .map(|(_, lease)| holder_op(action, lease, outcome.as_ref()))
        .collect();
    let before = srv.dump(PATTERN);
    let settled = queue.settle(&ops, None, TTL).await.map_err(err)?;
    ensure(settled.replies.len() == ops.len(), || {
        format!(
            "intruders: {} replies to {} operations",
            settled.replies.len(),
            ops.len()
        )
    })?;
    for ((job, _), reply) in intruders.iter().zip(settled.replies) {
        let expected = Refusal::LeaseLost(job.setup.state(), op);
        let why = match classify_reply(reply) {
            Applied::Refused(got, display) if got == expected => {
                check_display(&display, &job.id, &got).err()
            }
            Applied::Refused(got, display) => Some(format!(
                "refused as {got:?}, expected {expected:?} ({display})"
            )),
            Applied::Done { reply, .. } => Some(format!("accepted, replied {reply}")),
            Applied::Unexpected(what) => Some(what),
        };
        if let Some(why) = why {
            failures.push(format!(
                "{:?}: wrong token in a settle call: {why}",
                job.setup
            ));
        }
    }
    let after = srv.dump(PATTERN);
    if before != after {
        failures.push(format!(
            "wrong tokens in a settle call: refused but changed keys:\n{}",
            diff(&before, &after)
        ));
    }

    // 2. The holders' own operations, and a lease in the same call.
    let ops: Vec<HolderOp<'_>> = jobs
        .iter()
        .map(|job| holder_op(action, &job.lease, outcome.as_ref()))
        .collect();
    let befores: Vec<_> = jobs
        .iter()
        .map(|job| footprint(srv, queue, &job.names, &job.id))
        .collect();
    let last_fence = jobs.iter().map(|job| job.lease.fence).max().unwrap_or(0);
    let request = LeaseRequest {
        worker: "worker-c",
        pipelines: &[SIDE_PIPELINE],
        n: SIDE_JOBS + 1,
        start: 0,
        first_steps: &[],
    };
    let settled = queue.settle(&ops, Some(request), TTL).await.map_err(err)?;
    ensure(settled.replies.len() == jobs.len(), || {
        format!(
            "{} replies to {} operations",
            settled.replies.len(),
            jobs.len()
        )
    })?;
    let mut rows = Vec::new();
    for ((job, reply), before) in jobs.iter().zip(settled.replies).zip(&befores) {
        let after = footprint(srv, queue, &job.names, &job.id);
        let case = Case {
            names: &job.names,
            setup: job.setup,
            action,
            id: &job.id,
            lease: &job.lease,
            before_job: &job.before_job,
        };
        let from = job.setup.state();
        let applied = classify_reply(reply);
        let accepted_from_running =
            matches!(applied, Applied::Done { .. }) && from == JobState::Running;
        match judge(srv, queue, &case, applied, before, &after).await {
            Ok(row) => rows.extend(row),
            Err(why) => failures.push(format!("{:?} in a settle call: {why}", job.setup)),
        }
        // a finish of a RUNNING job first records the last step it carries
        if op == Op::Finish && accepted_from_running {
            let now = queue
                .job(&job.id)
                .await
                .map_err(err)?
                .ok_or("job vanished")?;
            let want: serde_json::Value = serde_json::from_str(LAST_STEP.1).map_err(err)?;
            if now.last_step.as_deref() != Some(LAST_STEP.0)
                || now.outputs.get(LAST_STEP.0) != Some(&want)
            {
                failures.push(format!(
                    "{:?} in a settle call: the finish did not record its last step: {:?} {:?}",
                    job.setup, now.last_step, now.outputs
                ));
            }
        }
    }
    let leased = &settled.leased;
    let side_ok = leased.leases.len() == SIDE_JOBS
        && leased.unreadable.is_empty()
        && leased
            .leases
            .iter()
            .all(|l| l.pipeline == SIDE_PIPELINE && l.fence > last_fence && l.attempt == 1);
    if !side_ok {
        failures.push(format!(
            "the lease request of the settle call took {leased:?}, expected the {SIDE_JOBS} side jobs"
        ));
    }
    for l in &leased.leases {
        let job = queue
            .job(&l.job)
            .await
            .map_err(err)?
            .ok_or("side job vanished")?;
        let token = job.lease.as_ref().map(|info| info.token.as_str());
        if job.state != JobState::Leased || token != Some(l.token.as_str()) {
            failures.push(format!(
                "side job {} after the settle call's lease: {} with lease {:?}",
                l.job, job.state, job.lease
            ));
        }
        if let Err(why) = check_indexes(srv, queue, &SIDE_NAMES, &l.job, JobState::Leased) {
            failures.push(format!("side job {}: {why}", l.job));
        }
    }
    Ok((rows, failures))
}

async fn exhaustive(flavor: Flavor) {
    let srv = RedisServer::start();
    exhaustive_on(&srv, &srv.url(), flavor).await;
}

/// [`exhaustive`] through `url`, reading and comparing keys on `srv` (the
/// node that holds the queue).
async fn exhaustive_on(srv: &RedisServer, url: &str, flavor: Flavor) {
    let queue = Queue::connect(url, QUEUE, QueueConfig::default())
        .await
        .expect("connect to the private redis-server");
    let mut covered = vec![0usize; TRANSITIONS.len()];
    let mut failures = Vec::new();
    let mut cases = 0;
    for action in Action::ALL {
        for setup in Setup::ALL {
            cases += 1;
            match run_case(srv, &queue, &flavor, setup, action).await {
                Ok(Some(row)) => covered[row] += 1,
                Ok(None) => {}
                Err(why) => {
                    failures.push(format!("[{}] {action:?} on {setup:?}: {why}", flavor.name))
                }
            }
        }
    }
    // The same holder operations through Queue::settle, one batch per action.
    let mut covered_by_settle = vec![0usize; TRANSITIONS.len()];
    for action in Action::ALL.into_iter().filter(|a| settles(*a)) {
        cases += 1;
        match settle_batch(srv, &queue, &flavor, action).await {
            Ok((rows, why)) => {
                rows.into_iter().for_each(|row| covered_by_settle[row] += 1);
                failures.extend(
                    why.into_iter()
                        .map(|why| format!("[{}] settle {action:?}: {why}", flavor.name)),
                );
            }
            Err(why) => failures.push(format!("[{}] settle {action:?}: {why}", flavor.name)),
        }
    }
    let missing: Vec<String> = TRANSITIONS
        .iter()
        .zip(&covered)
        .filter(|(_, n)| **n == 0)
        .map(|(t, _)| format!("{} {}→{} ({:?})", t.op, t.from, t.to, t.kind))
        .collect();
    let missing_by_settle: Vec<String> = TRANSITIONS
        .iter()
        .zip(&covered_by_settle)
        .filter(|(t, n)| {
            matches!(t.op, Op::Start | Op::Checkpoint | Op::Finish | Op::Release) && **n == 0
        })
        .map(|(t, _)| format!("{} {}→{} ({:?})", t.op, t.from, t.to, t.kind))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {cases} cases disagree with the transition table:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        missing.is_empty(),
        "[{}] table rows never exercised: {missing:?}",
        flavor.name
    );
    assert!(
        missing_by_settle.is_empty(),
        "[{}] holder rows never exercised through Queue::settle: {missing_by_settle:?}",
        flavor.name
    );
}

#[test]
fn every_op_that_acts_on_a_job_is_covered() {
    let ops: Vec<Op> = Action::ALL.iter().map(|a| a.op()).collect();
    for op in [
        Op::Lease,
        Op::Start,
        Op::Checkpoint,
        Op::Renew,
        Op::Finish,
        Op::Release,
        Op::Cancel,
        Op::Sweep,
        Op::Retry,
        Op::Resolve,
    ] {
        assert!(ops.contains(&op), "{op} is not exercised");
    }
    for t in TRANSITIONS {
        assert!(
            t.op == Op::Enqueue || ops.contains(&t.op),
            "row {t:?} has no action"
        );
    }
}

#[tokio::test]
async fn scripts_agree_with_the_table_plain_job() {
    exhaustive(Flavor {
        name: "plain",
        resource: None,
        input_key: None,
        stale_lock: StaleLock::Hold,
    })
    .await;
}

#[tokio::test]
async fn scripts_agree_with_the_table_resource_held_when_stale() {
    exhaustive(Flavor {
        name: "resource+input key, stale holds lock",
        resource: Some("shop:a"),
        input_key: Some("shop:a:00"),
        stale_lock: StaleLock::Hold,
    })
    .await;
}

#[tokio::test]
async fn scripts_agree_with_the_table_resource_released_when_stale() {
    exhaustive(Flavor {
        name: "resource+input key, stale releases lock",
        resource: Some("shop:b"),
        input_key: Some("shop:b:00"),
        stale_lock: StaleLock::Release,
    })
    .await;
}

/// The same cases through a cluster client of a private 3-master cluster,
/// the keys compared on the master that holds queue `q`'s slot (not the
/// first seed, so the client is redirected there): every script's keys are in
/// the queue's slot, and no call meets CROSSSLOT.
#[tokio::test]
async fn scripts_agree_with_the_table_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let owner = cluster.owner_of_key(&format!("leasehold:{{{QUEUE}}}"));
    assert_ne!(
        owner, 0,
        "queue {QUEUE} lives on another node than the first seed"
    );
    exhaustive_on(
        cluster.node(owner),
        &cluster.url(),
        Flavor {
            name: "cluster: resource+input key, stale holds lock",
            resource: Some("shop:c"),
            input_key: Some("shop:c:00"),
            stale_lock: StaleLock::Hold,
        },
    )
    .await;
    assert_eq!(cluster.error_count("CROSSSLOT"), 0);
}
