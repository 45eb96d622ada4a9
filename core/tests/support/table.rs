//! The cases of the transition-table tests (`transition_table*.rs`): the
//! flavours of job (plain, with a resource and an input key, each STALE lock
//! policy), the setups that bring a fresh job into each state, the actions (every
//! variant of every operation that acts on a job) and how each is applied
//! through the real client, with the errors a refusal must be.

use std::time::Duration;

use leasehold_core::redis::Value;
use leasehold_core::transitions::Op;
use leasehold_core::Error;
use leasehold_core::{
    AttemptError, Cancelled, JobId, JobState, NewJob, Queue, RetryMode, StaleLock,
};
use leasehold_core::{Finished, Lease, Outcome, Renewal, Started};
use leasehold_testkit::RedisServer;

pub(crate) const QUEUE: &str = "q";
pub(crate) const PATTERN: &str = "leasehold:{q}:*";
pub(crate) const PIPELINE: &str = "etl";
pub(crate) const TTL: Duration = Duration::from_secs(300);
pub(crate) const WRONG_TOKEN: &str = "00000000000000000000000000000000";

/// How the job under test is created.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Flavor {
    pub(crate) name: &'static str,
    pub(crate) resource: Option<&'static str>,
    pub(crate) input_key: Option<&'static str>,
    pub(crate) stale_lock: StaleLock,
}

impl Flavor {
    /// The names of one job of this flavor; `n` sets it apart from the other
    /// jobs of a settle batch (each its own resource and input key, so that
    /// jobs in every state can live side by side).
    pub(crate) fn names(&self, n: Option<usize>) -> Names {
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
pub(crate) struct Names {
    pub(crate) resource: Option<String>,
    pub(crate) input_key: Option<String>,
    pub(crate) stale_lock: StaleLock,
}

/// The state (and pending cancel request) a job is brought into before the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Setup {
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
    pub(crate) const ALL: [Setup; 9] = [
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

    pub(crate) fn state(self) -> JobState {
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

    pub(crate) fn cancel_requested(self) -> bool {
        matches!(
            self,
            Setup::LeasedCancelRequested | Setup::RunningCancelRequested
        )
    }
}

/// One operation, in one of its variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
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
    pub(crate) const ALL: [Action; 18] = [
        Action::Lease,
        Action::LeaseAndStart,
        Action::Start,
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

    pub(crate) fn op(self) -> Op {
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
    pub(crate) fn is_holder_op(self) -> bool {
        matches!(
            self.op(),
            Op::Start | Op::Checkpoint | Op::Renew | Op::Finish | Op::Release
        )
    }

    pub(crate) fn max_attempts(self) -> u32 {
        if self == Action::FinishFailedRetryable {
            2
        } else {
            1
        }
    }

    /// The state this variant of the operation aims at from `setup`. Whether
    /// it may get there is the table's business, not this function's.
    pub(crate) fn target(self, setup: Setup) -> JobState {
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

    pub(crate) fn outcome(self) -> Option<Outcome> {
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
pub(crate) enum Refusal {
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

pub(crate) type CaseResult = Result<(), String>;

pub(crate) fn ensure(cond: bool, what: impl FnOnce() -> String) -> CaseResult {
    if cond {
        Ok(())
    } else {
        Err(what())
    }
}

pub(crate) fn new_job(names: &Names, max_attempts: u32) -> NewJob {
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

pub(crate) fn failed_permanent() -> Outcome {
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

pub(crate) fn err(e: impl std::fmt::Debug) -> String {
    format!("{e:?}")
}

/// Rewrites the job's lease deadline to 0 so the next sweep sees it expired
/// (`XX`: a job without a lease entry is left alone).
pub(crate) fn force_expire(srv: &RedisServer, queue: &Queue, id: &JobId) {
    let reply = srv.cmd(&["ZADD", &queue.keys().leases(), "XX", "0", id.as_str()]);
    assert!(
        matches!(reply, Value::Int(_)),
        "ZADD XX on the leases zset answered {reply:?}"
    );
}

/// Brings a fresh job into `setup`; returns it and the lease its (last) holder
/// took. A QUEUED job is leased and handed back first, so that even there a
/// holder operation comes with a token that once was real.
pub(crate) async fn bring(
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

pub(crate) fn is_member(srv: &RedisServer, zset: &str, id: &JobId) -> bool {
    !matches!(srv.cmd(&["ZSCORE", zset, id.as_str()]), Value::Nil)
}

pub(crate) fn text(value: Value) -> Option<String> {
    match value {
        Value::BulkString(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        Value::SimpleString(s) => Some(s),
        Value::Nil => None,
        other => Some(format!("{other:?}")),
    }
}

/// The queue's indexes agree with the job being in `state`.
pub(crate) fn check_indexes(
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
pub(crate) enum Applied {
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

pub(crate) fn classify_error(e: Error) -> Applied {
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

pub(crate) async fn apply(
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
pub(crate) fn expected_refusal(action: Action, from: JobState) -> Refusal {
    match action.op() {
        Op::Lease | Op::Sweep => Refusal::NothingDone,
        Op::Renew => Refusal::RenewLost(from),
        Op::Cancel if from.is_terminal() => Refusal::AlreadyTerminal(from),
        op => Refusal::Refused(from, op),
    }
}

pub(crate) fn check_display(display: &str, id: &JobId, refusal: &Refusal) -> CaseResult {
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
