//! Model-based property test: random interleavings of every operation by three
//! simulated workers (and an operator) over a handful of jobs, run against one
//! private `redis-server` and against a pure-Rust model that decides what must
//! happen with `leasehold::transitions::{rows, allowed, op_allowed, TRANSITIONS}`.
//!
//! Jobs come from fixed templates: two share resource `r1` (lock held while
//! STALE), two share `r2` (lock released when STALE), some have input keys (two
//! templates share one), some allow two attempts. Workers keep every lease they
//! ever took, so they keep trying with tokens that were swept, re-leased or
//! finished. Lease expiry is forced with `ZADD <base>:leases XX 0 <id>` and a
//! sweep, never by waiting.
//!
//! Both paths a holder takes are driven in every case. Each generated command
//! carries whether it joins a settle batch: a run of consecutive holder
//! commands (start, checkpoint, finish, release) that join becomes one
//! `Queue::settle` call, as a worker builds it, together with a joining lease
//! command right after them as the call's lease request (a joining lease after
//! no batch is a settle call that only leases); every other command, holder
//! commands that do not join included, goes through its own entry point
//! (`Queue::start`, `checkpoint`, `finish`, `release`, `lease`). A finish in a
//! settle call may carry its last step (`HolderOp::Finish::last_step`). The
//! model plans a batch in order, each operation seeing the ones before it (as
//! the script runs them), and each reply is checked on its own. Shrinking turns
//! batches back into single calls where the failure does not need them. A run
//! of at least `MIN_CASES_FOR_PATHS` cases fails unless both paths were
//! exercised (each holder op through both, settle ops accepted and refused,
//! batches of two or more, jobs leased by settle calls).
//!
//! After every call:
//! (a) success or refusal (with its exact typed error) matches the model, per
//!     operation of a settle call too;
//! (b) every job's state (and attempt, token, pending cancel) in Redis equals the model's;
//! (c) no attempt record (`attempt:<n>` field) once seen was rewritten, and the
//!     records present are exactly those of the ended attempts;
//! (d) per resource, at most one job is LEASED/RUNNING (or STALE with the hold
//!     policy), the lock key `<base>:lock:<resource>` names it, and no lock
//!     exists without such a holder;
//! (e) no job's attempt number decreased;
//! and the queue's indexes agree with the states: the leases zset holds exactly
//! the LEASED/RUNNING jobs, the stale zset the STALE ones, the done zset the
//! terminal ones, every QUEUED job sits in exactly one of ready/delayed/parked,
//! and the inputs hash equals the model's. A refused single call changes no key;
//! a settle call whose operations were all refused (and asked for no lease)
//! changes no key; otherwise the hash of a job that only refused operations
//! named is unchanged.
//!
//! Size and seed: the case count is `DEFAULT_CASES` (32, what CI runs: 2-3 s
//! of test time in a debug build) unless `PROPTEST_CASES` is set; the seed is
//! `DEFAULT_SEED` unless `PROPTEST_RNG_SEED` (a u64, read by proptest itself)
//! is set. The long run, 2,000 cases on three seeds (about a minute per seed
//! in a release build):
//!
//! ```text
//! for seed in 1 2 3; do
//!   PROPTEST_CASES=2000 PROPTEST_RNG_SEED=$seed cargo test --release --test model_proptest -- --nocapture
//! done
//! ```
//!
//! `MODEL_DEBUG=1` prints every case's history; `--nocapture` shows how often
//! each table row was exercised (in all, and by settle calls) and how often
//! each path ran.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Debug;
use std::time::Duration;

use leasehold::lease::{
    Finished, HolderOp, HolderReply, Lease, LeaseRequest, Leased, Outcome, Renewal, Started,
};
use leasehold::queue::{
    AttemptError, Cancelled, EnqueueStatus, JobId, JobState, NewJob, Queue, QueueConfig, RetryMode,
    StaleLock,
};
use leasehold::redis::{self, AsyncCommands};
use leasehold::transitions::Op;
use leasehold::transitions::{allowed, op_allowed, rows, Kind, TRANSITIONS};
use leasehold::Error;
use leasehold_testkit::RedisServer;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};

const QUEUE: &str = "m";
const PATTERN: &str = "leasehold:{m}:*";
const PIPELINE: &str = "etl";
const TTL: Duration = Duration::from_secs(600);
const WORKERS: [&str; 3] = ["w0", "w1", "w2"];
const MAX_JOBS: usize = 8;
const STEPS: [&str; 4] = ["fetch", "validate", "load", "aggregate"];
const RESOURCES: [&str; 2] = ["r1", "r2"];
const DEFAULT_CASES: u32 = 32;
/// From this many cases on, a run must have exercised both paths (see the test).
const MIN_CASES_FOR_PATHS: u32 = 16;
const DEFAULT_SEED: u64 = 0x1ea5_e401_d5ee_d001;

struct Template {
    resource: Option<&'static str>,
    input_key: Option<&'static str>,
    max_attempts: u32,
    stale_lock: StaleLock,
}

const TEMPLATES: [Template; 6] = [
    Template {
        resource: Some("r1"),
        input_key: None,
        max_attempts: 1,
        stale_lock: StaleLock::Hold,
    },
    Template {
        resource: Some("r1"),
        input_key: Some("k1"),
        max_attempts: 2,
        stale_lock: StaleLock::Hold,
    },
    Template {
        resource: None,
        input_key: Some("k2"),
        max_attempts: 2,
        stale_lock: StaleLock::Hold,
    },
    Template {
        resource: Some("r2"),
        input_key: None,
        max_attempts: 1,
        stale_lock: StaleLock::Release,
    },
    Template {
        resource: None,
        input_key: Some("k2"),
        max_attempts: 1,
        stale_lock: StaleLock::Hold,
    },
    Template {
        resource: Some("r2"),
        input_key: Some("k3"),
        max_attempts: 2,
        stale_lock: StaleLock::Release,
    },
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    Succeeded,
    FailedRetryable,
    FailedPermanent,
    Cancelled,
    Interrupted,
}

#[derive(Debug, Clone)]
enum Cmd {
    /// One bulk enqueue of these templates.
    Enqueue {
        templates: Vec<usize>,
    },
    Lease {
        worker: usize,
        n: usize,
    },
    Start {
        worker: usize,
        pick: u8,
    },
    Checkpoint {
        worker: usize,
        pick: u8,
        step: usize,
    },
    Renew {
        worker: usize,
    },
    Finish {
        worker: usize,
        pick: u8,
        how: How,
        /// A step the finish checkpoints first (`HolderOp::Finish::last_step`),
        /// as a worker folds its last step into the finish. Settle path only:
        /// `Queue::finish` has no last step, so a single finish ignores it.
        last: Option<usize>,
    },
    Release {
        worker: usize,
        pick: u8,
    },
    Cancel {
        pick: u8,
    },
    ExpireAndSweep {
        pick: u8,
    },
    Retry {
        pick: u8,
        resume: bool,
    },
    Resolve {
        pick: u8,
        to: JobState,
    },
}

fn cmd_strategy() -> impl Strategy<Value = Cmd> {
    let worker = 0..WORKERS.len();
    let how = prop_oneof![
        Just(How::Succeeded),
        Just(How::FailedRetryable),
        Just(How::FailedPermanent),
        Just(How::Cancelled),
        Just(How::Interrupted),
    ];
    prop_oneof![
        3 => proptest::collection::vec(0..TEMPLATES.len(), 1..=2)
            .prop_map(|templates| Cmd::Enqueue { templates }),
        5 => (worker.clone(), 1..=3usize).prop_map(|(worker, n)| Cmd::Lease { worker, n }),
        5 => (worker.clone(), any::<u8>()).prop_map(|(worker, pick)| Cmd::Start { worker, pick }),
        3 => (worker.clone(), any::<u8>(), 0..STEPS.len())
            .prop_map(|(worker, pick, step)| Cmd::Checkpoint { worker, pick, step }),
        2 => worker.clone().prop_map(|worker| Cmd::Renew { worker }),
        5 => (worker.clone(), any::<u8>(), how, proptest::option::of(0..STEPS.len()))
            .prop_map(|(worker, pick, how, last)| Cmd::Finish { worker, pick, how, last }),
        1 => (worker, any::<u8>()).prop_map(|(worker, pick)| Cmd::Release { worker, pick }),
        1 => any::<u8>().prop_map(|pick| Cmd::Cancel { pick }),
        3 => any::<u8>().prop_map(|pick| Cmd::ExpireAndSweep { pick }),
        2 => (any::<u8>(), any::<bool>()).prop_map(|(pick, resume)| Cmd::Retry { pick, resume }),
        2 => (
            any::<u8>(),
            prop_oneof![
                Just(JobState::Succeeded),
                Just(JobState::Failed),
                Just(JobState::Cancelled)
            ]
        )
            .prop_map(|(pick, to)| Cmd::Resolve { pick, to }),
    ]
}

/// A refusal, as the client reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Refusal {
    Refused(JobState, Op),
    LeaseLost(JobState, Op),
    AlreadyTerminal(JobState),
    /// `Error::InputKeyTaken`: another non-terminal job (this id) holds the input key.
    InputKeyTaken(JobId),
}

type Checked = Result<(), String>;

fn ensure(cond: bool, what: impl FnOnce() -> String) -> Checked {
    if cond {
        Ok(())
    } else {
        Err(what())
    }
}

/// Compares a client result with the model's verdict. `Ok(Some(v))` when both
/// agree it succeeded, `Ok(None)` when both agree it was refused.
fn verdict<T: Debug>(
    got: Result<T, Error>,
    expected: &Result<(), Refusal>,
    job: &JobId,
) -> Result<Option<T>, String> {
    match (got, expected) {
        (Ok(v), Ok(())) => Ok(Some(v)),
        (Ok(v), Err(r)) => Err(format!("accepted ({v:?}) but the model refuses: {r:?}")),
        (Err(e), Ok(())) => Err(format!("refused ({e}) but the model allows it")),
        (Err(e), Err(r)) => {
            let display = e.to_string();
            let (got_refusal, got_job) = match e {
                Error::Refused { job, state, op, .. } => (Refusal::Refused(state, op), job),
                Error::LeaseLost { job, state, op } => (Refusal::LeaseLost(state, op), job),
                Error::AlreadyTerminal { job, state, .. } => (Refusal::AlreadyTerminal(state), job),
                Error::InputKeyTaken { job, holder } => (
                    Refusal::InputKeyTaken(JobId::parse(&holder).map_err(|e| e.to_string())?),
                    job,
                ),
                other => return Err(format!("unexpected error {other:?}, model says {r:?}")),
            };
            ensure(&got_refusal == r, || {
                format!("refused as {got_refusal:?}, the model says {r:?} ({display})")
            })?;
            ensure(got_job == job.as_str(), || {
                format!("refusal names job {got_job}, expected {job}")
            })?;
            ensure(display.contains(job.as_str()), || {
                format!("{display:?} does not name the job")
            })?;
            Ok(None)
        }
    }
}

#[derive(Debug)]
struct MJob {
    id: JobId,
    template: usize,
    state: JobState,
    attempt: u32,
    /// The live lease's token (LEASED/RUNNING only).
    token: Option<String>,
    /// A pending cancel request's reason.
    cancel: Option<String>,
    /// The last completed step and its output (what a resumed attempt continues after).
    last: Option<(String, String)>,
    /// Steps checkpointed under the current lease (the job's `steps` field,
    /// emptied by each lease): a step checkpointed again only renews the lease,
    /// its first output stands.
    steps: BTreeSet<&'static str>,
    /// Attempt records seen so far, verbatim.
    records: BTreeMap<u32, String>,
    /// Whether a worker's finish ended it SUCCEEDED (no record: the job hash
    /// describes that attempt), rather than an operator's resolve.
    finished_ok: bool,
}

impl MJob {
    fn template(&self) -> &'static Template {
        &TEMPLATES[self.template]
    }

    fn holds_lock(&self) -> bool {
        self.template().resource.is_some()
            && (self.state.is_leased()
                || (self.state == JobState::Stale && self.template().stale_lock == StaleLock::Hold))
    }
}

#[derive(Default)]
struct Model {
    jobs: Vec<MJob>,
    /// input key → job index (mirrors `<base>:inputs`).
    inputs: BTreeMap<String, usize>,
    /// input key → (its latest ended job, whether that job SUCCEEDED by its
    /// worker rather than by an operator's decision) (mirrors `<base>:outcomes`).
    outcomes: BTreeMap<String, (usize, bool)>,
    /// Every lease each worker ever took, live or not.
    held: [Vec<Lease>; 3],
    last_fence: u64,
    checkpoints: u64,
    /// How many times each table row was exercised (both paths).
    covered: Vec<usize>,
    /// How many of those were by an operation of a `Queue::settle` call.
    covered_by_settle: Vec<usize>,
    /// Set while the operations of a settle call are planned.
    settling: bool,
}

impl Model {
    fn new() -> Model {
        Model {
            covered: vec![0; TRANSITIONS.len()],
            covered_by_settle: vec![0; TRANSITIONS.len()],
            ..Model::default()
        }
    }

    fn index_of(&self, id: &JobId) -> usize {
        self.jobs
            .iter()
            .position(|j| &j.id == id)
            .expect("every leased job is in the model")
    }

    fn holder_of(&self, resource: &str) -> Option<usize> {
        self.jobs
            .iter()
            .position(|j| j.template().resource == Some(resource) && j.holds_lock())
    }

    fn leasable(&self) -> Vec<usize> {
        (0..self.jobs.len())
            .filter(|&i| {
                let j = &self.jobs[i];
                op_allowed(Op::Lease, j.state)
                    && j.template()
                        .resource
                        .is_none_or(|r| self.holder_of(r).is_none())
            })
            .collect()
    }

    fn is_live(&self, lease: &Lease) -> bool {
        let j = &self.jobs[self.index_of(&lease.job)];
        j.token.as_deref() == Some(lease.token.as_str())
    }

    /// A lease for a holder operation, by `pick % 8`: 0, a zombie's (a lease
    /// whose job is now held under another token); 1, any lease no longer
    /// live (swept, re-leased or ended); otherwise a live one, of `worker` if
    /// it has any, else of whichever worker has one (that worker acts). When
    /// the wanted kind does not exist, the next kind is tried, then any lease.
    fn pick_lease(&self, worker: usize, pick: u8) -> Option<Lease> {
        let k = usize::from(pick / 8);
        let own: Vec<&Lease> = self.held[worker].iter().collect();
        let all: Vec<&Lease> = self.held.iter().flatten().collect();
        let zombie =
            |l: &&Lease| !self.is_live(l) && self.jobs[self.index_of(&l.job)].state.is_leased();
        let dead = |l: &&Lease| !self.is_live(l);
        let live = |l: &&Lease| self.is_live(l);
        let filter = |pool: &[&Lease], f: &dyn Fn(&&Lease) -> bool| -> Vec<Lease> {
            pool.iter().filter(|l| f(l)).map(|l| (*l).clone()).collect()
        };
        let mut candidates: Vec<Vec<Lease>> = Vec::new();
        let live_first = [filter(&own, &live), filter(&all, &live)];
        match pick % 8 {
            0 => {
                candidates.push(filter(&all, &zombie));
                candidates.push(filter(&all, &dead));
                candidates.extend(live_first);
            }
            1 => {
                candidates.push(filter(&own, &dead));
                candidates.push(filter(&all, &dead));
                candidates.extend(live_first);
            }
            _ => candidates.extend(live_first),
        }
        candidates.push(all.iter().map(|l| (*l).clone()).collect());
        candidates
            .into_iter()
            .find(|c| !c.is_empty())
            .map(|c| c[k % c.len()].clone())
    }

    /// A job: half the time among those `op` may act on (if any), else any.
    fn pick_job(&self, pick: u8, op: Op) -> Option<usize> {
        if self.jobs.is_empty() {
            return None;
        }
        let fitting: Vec<usize> = (0..self.jobs.len())
            .filter(|&i| op_allowed(op, self.jobs[i].state))
            .collect();
        let k = usize::from(pick / 2);
        Some(if pick.is_multiple_of(2) && !fitting.is_empty() {
            fitting[k % fitting.len()]
        } else {
            k % self.jobs.len()
        })
    }

    /// The table's verdict for a holder operation `op` towards `to` with `lease`:
    /// the state is checked first, then the token (as the scripts do).
    fn holder_verdict(&self, lease: &Lease, op: Op, to: JobState) -> Result<(), Refusal> {
        let j = &self.jobs[self.index_of(&lease.job)];
        if !allowed(op, j.state, to) {
            return Err(Refusal::Refused(j.state, op));
        }
        if j.token.as_deref() != Some(lease.token.as_str()) {
            return Err(Refusal::LeaseLost(j.state, op));
        }
        Ok(())
    }

    /// A RUNNING job `i` completes `step` with `output` (a checkpoint, or the
    /// last step a finish records): the first completion of a step under a
    /// lease is what a resumed attempt continues after; a repeat changes nothing.
    fn record_step(&mut self, i: usize, step: &'static str, output: &str) {
        let job = &mut self.jobs[i];
        if job.steps.insert(step) {
            job.last = Some((step.to_owned(), output.to_owned()));
        }
    }

    /// Applies the table row `(op, from, to)` to job `i`.
    fn transition(&mut self, i: usize, op: Op, to: JobState) {
        let from = self.jobs[i].state;
        let (index, row) = TRANSITIONS
            .iter()
            .enumerate()
            .find(|(_, t)| t.op == op && t.from == from && t.to == to)
            .expect("the caller checked the move is allowed");
        debug_assert!(rows(op, from).any(|t| t == row));
        self.covered[index] += 1;
        if self.settling {
            self.covered_by_settle[index] += 1;
        }
        let job = &mut self.jobs[i];
        if row.kind == Kind::NewAttempt {
            job.attempt += 1;
            job.cancel = None;
        }
        job.state = to;
        if !to.is_leased() {
            job.token = None;
        }
        if to.is_terminal() {
            if let Some(key) = TEMPLATES[job.template].input_key {
                if self.inputs.get(key) == Some(&i) {
                    self.inputs.remove(key);
                    let succeeded = to == JobState::Succeeded && op != Op::Resolve;
                    self.outcomes.insert(key.to_owned(), (i, succeeded));
                }
            }
        }
    }
}

fn outcome(how: How) -> Outcome {
    let failed = |retryable| Outcome::Failed {
        error: AttemptError {
            kind: "model".into(),
            message: "step failed".into(),
            retryable,
            retries_exhausted: false,
        },
        backoff: Duration::ZERO,
        cleanup_needed: false,
    };
    match how {
        How::Succeeded => Outcome::Succeeded,
        How::FailedRetryable => failed(true),
        How::FailedPermanent => failed(false),
        How::Cancelled => Outcome::Cancelled {
            reason: "honouring a cancel".into(),
            cleanup_needed: false,
        },
        How::Interrupted => Outcome::Interrupted {
            reason: "worker shutting down".into(),
            cleanup_needed: false,
        },
    }
}

/// A dump of the queue's keys, taken when the model expects a refusal.
fn snapshot(srv: &RedisServer, expected: &Result<(), Refusal>) -> Option<BTreeMap<String, String>> {
    expected.is_err().then(|| srv.dump(PATTERN))
}

/// A refused operation changed nothing: every key is byte-for-byte the same.
fn unchanged(srv: &RedisServer, before: Option<BTreeMap<String, String>>) -> Checked {
    let Some(before) = before else {
        return Ok(());
    };
    unchanged_between(before, srv.dump(PATTERN))
}

/// Two dumps of the queue's keys are the same; else the keys that differ.
fn unchanged_between(before: BTreeMap<String, String>, after: BTreeMap<String, String>) -> Checked {
    if before == after {
        return Ok(());
    }
    let mut diff = String::new();
    for key in before.keys().chain(after.keys()).collect::<BTreeSet<_>>() {
        let (b, a) = (before.get(key), after.get(key));
        if b != a {
            diff += &format!("\n  {key}:\n    before {b:?}\n    after  {a:?}");
        }
    }
    Err(format!("refused, but keys changed:{diff}"))
}

fn redis_err(e: impl std::fmt::Display) -> String {
    format!("redis: {e}")
}

/// What the model says a lease call may take, read before the call (for a
/// settle call: after its operations, which run first).
struct LeasePlan {
    /// The jobs it may lease.
    leasable: Vec<usize>,
    /// How many of them one call can take: one per job without a resource,
    /// one per free resource.
    groups: usize,
}

impl LeasePlan {
    fn new(model: &Model) -> LeasePlan {
        let leasable = model.leasable();
        let mut free_resources = BTreeSet::new();
        let mut groups = 0;
        for &i in &leasable {
            match model.jobs[i].template().resource {
                None => groups += 1,
                Some(r) => {
                    if free_resources.insert(r) {
                        groups += 1;
                    }
                }
            }
        }
        LeasePlan { leasable, groups }
    }
}

/// Checks the jobs a lease call (of `worker`, for `n` jobs) took against the
/// model, and applies the leases to it.
fn check_leased(
    model: &mut Model,
    worker: usize,
    n: usize,
    plan: &LeasePlan,
    got: Leased,
) -> Result<String, String> {
    let LeasePlan { leasable, groups } = plan;
    ensure(got.unreadable.is_empty(), || {
        format!("unreadable leases {:?}", got.unreadable)
    })?;
    ensure(got.leases.len() == n.min(*groups), || {
        format!(
            "leased {} jobs, the model expects {} (leasable {leasable:?})",
            got.leases.len(),
            n.min(*groups)
        )
    })?;
    let mut taken_resources = BTreeSet::new();
    let mut line = String::from("leased");
    for lease in got.leases {
        let i = model
            .jobs
            .iter()
            .position(|j| j.id == lease.job)
            .ok_or_else(|| format!("leased unknown job {}", lease.job))?;
        ensure(leasable.contains(&i), || {
            format!("leased job {i}, which the model says is not leasable")
        })?;
        let j = &model.jobs[i];
        if let Some(r) = j.template().resource {
            ensure(taken_resources.insert(r), || {
                format!("one lease call took two jobs of resource {r}")
            })?;
        }
        ensure(lease.resource.as_deref() == j.template().resource, || {
            format!("lease resource {:?}", lease.resource)
        })?;
        ensure(lease.attempt == j.attempt, || {
            format!("lease attempt {} vs model {}", lease.attempt, j.attempt)
        })?;
        ensure(lease.fence > model.last_fence, || {
            format!("fence {} not above {}", lease.fence, model.last_fence)
        })?;
        let expected_last = j.last.clone();
        let got_last = lease.last_step.clone().zip(lease.last_output.clone());
        ensure(got_last == expected_last, || {
            format!("lease resumes after {got_last:?}, the model says {expected_last:?}")
        })?;
        model.last_fence = lease.fence;
        model.transition(i, Op::Lease, JobState::Leased);
        model.jobs[i].token = Some(lease.token.clone());
        model.jobs[i].steps.clear();
        line += &format!(" {i}");
        model.held[worker].push(lease);
    }
    Ok(line)
}

/// What a holder operation carries, as the model planned it.
#[derive(Debug)]
enum Carried {
    Start,
    Checkpoint {
        step: &'static str,
        output: String,
        next: Option<&'static str>,
    },
    Finish {
        how: How,
        outcome: Outcome,
        /// The step checkpointed by the finish (settle only) and its output.
        last_step: Option<(&'static str, String)>,
    },
    Release,
}

/// The reply the model expects from an accepted holder operation.
#[derive(Debug)]
enum Expect {
    Started(Started),
    /// A checkpoint reports the pending cancel request.
    Checkpointed(Option<String>),
    /// The finish ends the attempt in `to` (QUEUED: a new attempt), from attempt `attempt`.
    Finished {
        to: JobState,
        attempt: u32,
    },
    Released(JobState),
}

/// A holder operation (start, checkpoint, finish, release) planned against the
/// model before it runs: the job and lease it acts on, what it carries, and
/// the model's verdict. An accepted operation is already applied to the model.
#[derive(Debug)]
struct Planned {
    job: usize,
    lease: Lease,
    carried: Carried,
    expected: Result<Expect, Refusal>,
}

impl Planned {
    /// The verdict without the reply: what `verdict` compares.
    fn verdict(&self) -> Result<(), Refusal> {
        self.expected.as_ref().map(|_| ()).map_err(Clone::clone)
    }

    /// The operation as part of a `Queue::settle` call.
    fn holder_op(&self) -> HolderOp<'_> {
        let lease = &self.lease;
        match &self.carried {
            Carried::Start => HolderOp::Start {
                lease,
                first_step: STEPS[0],
            },
            Carried::Checkpoint { step, output, next } => HolderOp::Checkpoint {
                lease,
                step,
                output,
                next_step: *next,
            },
            Carried::Finish {
                outcome, last_step, ..
            } => HolderOp::Finish {
                lease,
                outcome,
                last_step: last_step.as_ref().map(|(s, o)| (*s, o.as_str())),
            },
            Carried::Release => HolderOp::Release { lease },
        }
    }

    /// A line for the history.
    fn line(&self) -> String {
        let i = self.job;
        let verdict = self.verdict();
        match &self.carried {
            Carried::Finish { how, last_step, .. } => match last_step {
                Some((step, _)) => format!("job {i} {how:?} after {step}: {verdict:?}"),
                None => format!("job {i} {how:?}: {verdict:?}"),
            },
            _ => format!("job {i}: {verdict:?}"),
        }
    }
}

/// Plans a holder command against the model (`None`: no lease to act with).
/// `settling`: it is part of a `Queue::settle` call (a finish may carry a last step).
fn plan_holder(model: &mut Model, cmd: &Cmd, settling: bool) -> Option<Planned> {
    let (worker, pick) = match *cmd {
        Cmd::Start { worker, pick }
        | Cmd::Checkpoint { worker, pick, .. }
        | Cmd::Finish { worker, pick, .. }
        | Cmd::Release { worker, pick } => (worker, pick),
        _ => unreachable!("not a holder command: {cmd:?}"),
    };
    let lease = model.pick_lease(worker, pick)?;
    let i = model.index_of(&lease.job);
    let (carried, expected) = match *cmd {
        Cmd::Start { .. } => {
            let j = &model.jobs[i];
            // a repeated start of a RUNNING job by its holder stays RUNNING
            let to = if j.cancel.is_some() && j.state != JobState::Running {
                JobState::Cancelled
            } else {
                JobState::Running
            };
            let expected = model.holder_verdict(&lease, Op::Start, to).map(|()| {
                let want = match &model.jobs[i].cancel {
                    Some(reason) if to == JobState::Cancelled => Started::Cancelled {
                        reason: reason.clone(),
                    },
                    _ => Started::Running,
                };
                model.transition(i, Op::Start, to);
                Expect::Started(want)
            });
            (Carried::Start, expected)
        }
        Cmd::Checkpoint { step, .. } => {
            model.checkpoints += 1;
            let name = STEPS[step];
            let output = format!(r#"{{"step":"{name}","n":{}}}"#, model.checkpoints);
            let next = STEPS.get(step + 1).copied();
            let expected = model
                .holder_verdict(&lease, Op::Checkpoint, JobState::Running)
                .map(|()| {
                    let cancel = model.jobs[i].cancel.clone();
                    model.transition(i, Op::Checkpoint, JobState::Running);
                    model.record_step(i, name, &output);
                    Expect::Checkpointed(cancel)
                });
            let carried = Carried::Checkpoint {
                step: name,
                output,
                next,
            };
            (carried, expected)
        }
        Cmd::Finish { how, last, .. } => {
            let j = &model.jobs[i];
            let retry_allowed = j.cancel.is_none();
            let to = match how {
                How::Succeeded => JobState::Succeeded,
                How::FailedPermanent => JobState::Failed,
                How::FailedRetryable if retry_allowed && j.attempt < j.template().max_attempts => {
                    JobState::Queued
                }
                How::FailedRetryable => JobState::Failed,
                // a shutdown with a cancel pending honours it, from LEASED too
                How::Interrupted if retry_allowed => JobState::Queued,
                How::Interrupted => JobState::Cancelled,
                How::Cancelled => JobState::Cancelled,
            };
            let (from, attempt) = (j.state, j.attempt);
            let last_step = last.filter(|_| settling).map(|s| {
                model.checkpoints += 1;
                let name = STEPS[s];
                (
                    name,
                    format!(r#"{{"step":"{name}","n":{}}}"#, model.checkpoints),
                )
            });
            let expected = model.holder_verdict(&lease, Op::Finish, to).map(|()| {
                // the last step is recorded as its checkpoint would be, when RUNNING
                if let (JobState::Running, Some((name, output))) = (from, &last_step) {
                    model.record_step(i, name, output);
                }
                model.transition(i, Op::Finish, to);
                model.jobs[i].finished_ok = to == JobState::Succeeded;
                Expect::Finished { to, attempt }
            });
            let carried = Carried::Finish {
                how,
                outcome: outcome(how),
                last_step,
            };
            (carried, expected)
        }
        Cmd::Release { .. } => {
            let to = if model.jobs[i].cancel.is_some() {
                JobState::Cancelled
            } else {
                JobState::Queued
            };
            let expected = model.holder_verdict(&lease, Op::Release, to).map(|()| {
                model.transition(i, Op::Release, to);
                Expect::Released(to)
            });
            (Carried::Release, expected)
        }
        _ => unreachable!(),
    };
    Some(Planned {
        job: i,
        lease,
        carried,
        expected,
    })
}

/// Compares a holder operation's reply (by either path) with the plan: the
/// verdict, then the reply itself. True when it was accepted.
fn check_holder(planned: &Planned, got: Result<HolderReply, Error>) -> Result<bool, String> {
    let Some(reply) = verdict(got, &planned.verdict(), &planned.lease.job)? else {
        return Ok(false);
    };
    let Ok(expect) = &planned.expected else {
        unreachable!("verdict accepts only what the model allows")
    };
    match (expect, reply) {
        (Expect::Started(want), HolderReply::Started(started)) => {
            ensure(&started == want, || {
                format!("start: {started:?}, expected {want:?}")
            })?;
        }
        (Expect::Checkpointed(want), HolderReply::Checkpointed(cancel)) => {
            ensure(&cancel == want, || {
                format!("checkpoint reports cancel {cancel:?}, model {want:?}")
            })?;
        }
        (Expect::Finished { to, attempt }, HolderReply::Finished(finished)) => {
            let (to, attempt) = (*to, *attempt);
            let as_expected = match &finished {
                Finished::Retrying { attempt: next, .. } => {
                    to == JobState::Queued && *next == attempt + 1
                }
                Finished::Ended(state) => *state == to && to != JobState::Queued,
            };
            ensure(as_expected, || {
                format!("finish: {finished:?}, the model expects {to} from attempt {attempt}")
            })?;
        }
        (Expect::Released(to), HolderReply::Released(state)) => {
            ensure(state == *to, || {
                format!("release: now {state}, expected {to}")
            })?;
        }
        (expect, reply) => return Err(format!("replied {reply:?}, expected {expect:?}")),
    }
    Ok(true)
}

/// Runs one holder command through its own single-operation entry point
/// (`Queue::start`, `checkpoint`, `finish`, `release`).
async fn holder_single(
    srv: &RedisServer,
    model: &mut Model,
    queue: &Queue,
    cmd: &Cmd,
) -> Result<String, String> {
    let Some(planned) = plan_holder(model, cmd, false) else {
        return Ok("no lease".into());
    };
    let before = snapshot(srv, &planned.verdict());
    let lease = &planned.lease;
    let got = match &planned.carried {
        Carried::Start => queue.start(lease, STEPS[0]).await.map(HolderReply::Started),
        Carried::Checkpoint { step, output, next } => queue
            .checkpoint(lease, step, output, *next)
            .await
            .map(HolderReply::Checkpointed),
        Carried::Finish { outcome, .. } => queue
            .finish(lease, outcome)
            .await
            .map(HolderReply::Finished),
        Carried::Release => queue.release(lease).await.map(HolderReply::Released),
    };
    if !check_holder(&planned, got)? {
        unchanged(srv, before)?;
    }
    Ok(planned.line())
}

/// How often each path ran, over a whole test run: both must be exercised.
#[derive(Debug, Default)]
struct Paths {
    /// Single-operation calls, per holder op (start, checkpoint, finish, release).
    single: [u64; 4],
    /// Operations run by settle calls, per holder op.
    settled: [u64; 4],
    /// Settle operations accepted and refused.
    settled_accepted: u64,
    settled_refused: u64,
    /// Settle calls; those with two operations or more; those with a lease request;
    /// jobs leased by settle calls.
    settle_calls: u64,
    settle_batches: u64,
    settle_leases: u64,
    settle_leased_jobs: u64,
}

/// The index of a holder command in `Paths`' arrays.
fn holder_index(cmd: &Cmd) -> usize {
    match cmd {
        Cmd::Start { .. } => 0,
        Cmd::Checkpoint { .. } => 1,
        Cmd::Finish { .. } => 2,
        Cmd::Release { .. } => 3,
        _ => unreachable!("not a holder command: {cmd:?}"),
    }
}

/// Whether a command is a holder operation a settle call can carry.
fn settles(cmd: &Cmd) -> bool {
    matches!(
        cmd,
        Cmd::Start { .. } | Cmd::Checkpoint { .. } | Cmd::Finish { .. } | Cmd::Release { .. }
    )
}

/// One call of a generated program.
#[derive(Debug)]
enum Call {
    /// A command on its own (holder commands through their single-op entry points).
    Single(Cmd),
    /// Consecutive holder commands in one `Queue::settle` call, with the lease
    /// request (worker, n) of a lease command that joined them.
    Settle {
        ops: Vec<Cmd>,
        lease: Option<(usize, usize)>,
    },
}

/// Groups a program into calls: a run of consecutive holder commands that
/// join a batch becomes one settle call, together with a joining lease command
/// right after them (a joining lease after no batch is a settle call of its
/// own, leasing only); every other command runs on its own.
fn group(cmds: Vec<(Cmd, bool)>) -> Vec<Call> {
    let mut calls = Vec::new();
    let mut batch: Vec<Cmd> = Vec::new();
    for (cmd, joins) in cmds {
        match cmd {
            ref c if joins && settles(c) => batch.push(cmd),
            Cmd::Lease { worker, n } if joins => calls.push(Call::Settle {
                ops: std::mem::take(&mut batch),
                lease: Some((worker, n)),
            }),
            cmd => {
                if !batch.is_empty() {
                    calls.push(Call::Settle {
                        ops: std::mem::take(&mut batch),
                        lease: None,
                    });
                }
                calls.push(Call::Single(cmd));
            }
        }
    }
    if !batch.is_empty() {
        calls.push(Call::Settle {
            ops: batch,
            lease: None,
        });
    }
    calls
}

/// Runs holder commands (and a lease request) in one `Queue::settle` call, as
/// a worker does: the model plans them in order (each sees the ones before it,
/// as the script runs them), then each reply is checked on its own.
async fn settle_call(
    srv: &RedisServer,
    model: &mut Model,
    queue: &Queue,
    ops: &[Cmd],
    lease: Option<(usize, usize)>,
    paths: &mut Paths,
) -> Result<String, String> {
    model.settling = true;
    let mut planned = Vec::new();
    let mut lines = Vec::new();
    for cmd in ops {
        match plan_holder(model, cmd, true) {
            Some(p) => {
                paths.settled[holder_index(cmd)] += 1;
                planned.push(p);
            }
            None => lines.push("no lease".to_owned()),
        }
    }
    let lease_plan = lease.map(|_| LeasePlan::new(model));
    model.settling = false;
    if planned.is_empty() && lease.is_none() {
        return Ok(format!("[{}]", lines.join("; ")));
    }
    let refusals = planned.iter().filter(|p| p.expected.is_err()).count();
    let before = (refusals > 0).then(|| srv.dump(PATTERN));
    let holder_ops: Vec<HolderOp<'_>> = planned.iter().map(Planned::holder_op).collect();
    let pipelines = [PIPELINE];
    let request = lease.map(|(worker, n)| LeaseRequest {
        worker: WORKERS[worker],
        pipelines: &pipelines,
        n,
        start: 0,
        first_steps: &[],
    });
    let settled = queue
        .settle(&holder_ops, request, TTL)
        .await
        .map_err(|e| format!("settle: {e}"))?;
    paths.settle_calls += 1;
    paths.settle_batches += u64::from(planned.len() >= 2);
    ensure(settled.replies.len() == planned.len(), || {
        format!(
            "settle gave {} replies to {} operations",
            settled.replies.len(),
            planned.len()
        )
    })?;
    let mut accepted_jobs = BTreeSet::new();
    let mut refused_jobs = BTreeSet::new();
    for (k, (p, reply)) in planned.iter().zip(settled.replies).enumerate() {
        let accepted =
            check_holder(p, reply).map_err(|e| format!("settle operation {k} ({p:?}): {e}"))?;
        if accepted {
            paths.settled_accepted += 1;
            accepted_jobs.insert(p.job);
        } else {
            paths.settled_refused += 1;
            refused_jobs.insert(p.job);
        }
        lines.push(p.line());
    }
    if let (Some((worker, n)), Some(plan)) = (lease, &lease_plan) {
        paths.settle_leases += 1;
        paths.settle_leased_jobs += settled.leased.leases.len() as u64;
        for l in &settled.leased.leases {
            accepted_jobs.insert(model.index_of(&l.job));
        }
        model.settling = true;
        let line = check_leased(model, worker, n, plan, settled.leased);
        model.settling = false;
        let line = line.map_err(|e| format!("settle lease (worker {worker}, n {n}): {e}"))?;
        lines.push(format!("w{worker} {line}"));
    }
    // A refused operation changed nothing: when every operation was refused and
    // no lease was asked for, no key changed at all; else (a lease request may
    // also park waiting jobs) the hash of every job that only refused
    // operations named is byte-for-byte the same. The indexes are checked
    // against the model after the call.
    if let Some(before) = before {
        let after = srv.dump(PATTERN);
        if accepted_jobs.is_empty() && lease.is_none() {
            unchanged_between(before, after)?;
        } else {
            for &i in refused_jobs.difference(&accepted_jobs) {
                let key = queue.keys().job(model.jobs[i].id.as_str());
                ensure(before.get(&key) == after.get(&key), || {
                    format!(
                        "job {i}: only refused operations named it, but its hash changed:\n  before {:?}\n  after  {:?}",
                        before.get(&key),
                        after.get(&key)
                    )
                })?;
            }
        }
    }
    Ok(format!("[{}]", lines.join("; ")))
}

/// Runs one command against Redis and the model; returns a line for the history.
async fn step(
    srv: &RedisServer,
    model: &mut Model,
    queue: &Queue,
    cmd: &Cmd,
) -> Result<String, String> {
    match *cmd {
        Cmd::Enqueue { ref templates } => {
            let room = MAX_JOBS.saturating_sub(model.jobs.len());
            let templates = &templates[..templates.len().min(room)];
            if templates.is_empty() {
                return Ok("skipped (job cap)".into());
            }
            let jobs: Vec<NewJob> = templates
                .iter()
                .map(|&template| {
                    let t = &TEMPLATES[template];
                    let mut job =
                        NewJob::from_json(PIPELINE, format!(r#"{{"template":{template}}}"#))
                            .max_attempts(t.max_attempts)
                            .stale_lock(t.stale_lock);
                    if let Some(r) = t.resource {
                        job = job.resource(r);
                    }
                    if let Some(k) = t.input_key {
                        job = job.input_key(k);
                    }
                    job
                })
                .collect();
            let got = queue
                .enqueue_bulk(jobs)
                .await
                .map_err(|e| format!("enqueue: {e}"))?;
            ensure(got.len() == templates.len(), || {
                format!("enqueue of {} jobs replied {got:?}", templates.len())
            })?;
            let mut line = String::new();
            // One script call, in order: a later job sees an earlier one's input key.
            for (&template, got) in templates.iter().zip(got) {
                let t = &TEMPLATES[template];
                match t.input_key.and_then(|k| model.inputs.get(k).copied()) {
                    Some(i) => {
                        ensure(!got.created && got.id == model.jobs[i].id, || {
                            format!(
                                "expected the existing job {}, got {got:?}",
                                model.jobs[i].id
                            )
                        })?;
                        line += &format!(" existing {i}");
                    }
                    None if t
                        .input_key
                        .and_then(|k| model.outcomes.get(k))
                        .is_some_and(|&(_, succeeded)| succeeded) =>
                    {
                        let (i, _) = model.outcomes[t.input_key.unwrap_or_default()];
                        ensure(
                            !got.created
                                && got.status == EnqueueStatus::Succeeded
                                && got.id == model.jobs[i].id,
                            || {
                                format!(
                                    "expected the succeeded job {}, got {got:?}",
                                    model.jobs[i].id
                                )
                            },
                        )?;
                        line += &format!(" succeeded {i}");
                    }
                    None => {
                        ensure(got.created, || format!("expected a new job, got {got:?}"))?;
                        let previous = t
                            .input_key
                            .and_then(|k| model.outcomes.get(k))
                            .map(|&(p, _)| model.jobs[p].id.clone());
                        ensure(got.previous == previous, || {
                            format!("expected previous {previous:?}, got {got:?}")
                        })?;
                        ensure(model.jobs.iter().all(|j| j.id != got.id), || {
                            "a created job reuses an id".into()
                        })?;
                        let i = model.jobs.len();
                        model.jobs.push(MJob {
                            id: got.id,
                            template,
                            state: JobState::Queued,
                            attempt: 1,
                            token: None,
                            cancel: None,
                            last: None,
                            steps: BTreeSet::new(),
                            records: BTreeMap::new(),
                            finished_ok: false,
                        });
                        if let Some(k) = t.input_key {
                            model.inputs.insert(k.to_owned(), i);
                        }
                        line += &format!(" created {i}");
                    }
                }
            }
            Ok(line)
        }

        Cmd::Lease { worker, n } => {
            let plan = LeasePlan::new(model);
            let got = queue
                .lease(WORKERS[worker], &[PIPELINE], n, TTL)
                .await
                .map_err(|e| format!("lease: {e}"))?;
            check_leased(model, worker, n, &plan, got)
        }

        Cmd::Start { .. } | Cmd::Checkpoint { .. } | Cmd::Finish { .. } | Cmd::Release { .. } => {
            holder_single(srv, model, queue, cmd).await
        }

        Cmd::Renew { worker } => {
            let leases = model.held[worker].clone();
            if leases.is_empty() {
                return Ok("no lease".into());
            }
            let refs: Vec<&Lease> = leases.iter().collect();
            let got = queue
                .renew(&refs)
                .await
                .map_err(|e| format!("renew: {e}"))?;
            ensure(got.len() == leases.len(), || {
                format!("renew replied {got:?}")
            })?;
            let mut stays = Vec::new();
            for (lease, renewal) in leases.iter().zip(&got) {
                let i = model.index_of(&lease.job);
                let j = &model.jobs[i];
                let want = match model.holder_verdict(lease, Op::Renew, j.state) {
                    Ok(()) => {
                        stays.push(i);
                        match &j.cancel {
                            Some(reason) => Renewal::CancelRequested {
                                reason: reason.clone(),
                            },
                            None => Renewal::Held,
                        }
                    }
                    Err(_) => Renewal::Lost {
                        state: Some(j.state),
                    },
                };
                ensure(renewal == &want, || {
                    format!("renewal of job {i}: {renewal:?}, expected {want:?}")
                })?;
            }
            for i in stays {
                let state = model.jobs[i].state;
                model.transition(i, Op::Renew, state);
            }
            Ok(format!("{got:?}"))
        }

        Cmd::Cancel { pick } => {
            let Some(i) = model.pick_job(pick, Op::Cancel) else {
                return Ok("no job".into());
            };
            let j = &model.jobs[i];
            let from = j.state;
            let to = if from == JobState::Queued {
                JobState::Cancelled
            } else {
                from
            };
            let expected = if allowed(Op::Cancel, from, to) {
                Ok(())
            } else if from.is_terminal() {
                Err(Refusal::AlreadyTerminal(from))
            } else {
                Err(Refusal::Refused(from, Op::Cancel))
            };
            let reason = format!("operator cancel #{}", model.checkpoints);
            let before = snapshot(srv, &expected);
            let got = queue.cancel(&j.id, &reason, "operator").await;
            if let Some(c) = verdict(got, &expected, &j.id)? {
                let want = match (&j.cancel, from) {
                    (_, JobState::Queued) => Cancelled::Now,
                    (Some(earlier), state) => Cancelled::AlreadyRequested {
                        state,
                        reason: earlier.clone(),
                    },
                    (None, state) => Cancelled::Requested { state },
                };
                ensure(c == want, || format!("cancel: {c:?}, expected {want:?}"))?;
                if from != JobState::Queued && j.cancel.is_none() {
                    model.jobs[i].cancel = Some(reason);
                }
                model.transition(i, Op::Cancel, to);
            } else {
                unchanged(srv, before)?;
            }
            Ok(format!("job {i}: {expected:?}"))
        }

        Cmd::ExpireAndSweep { pick } => {
            let Some(i) = model.pick_job(pick, Op::Sweep) else {
                return Ok("no job".into());
            };
            let j = &model.jobs[i];
            let from = j.state;
            let to = match from {
                JobState::Leased if j.cancel.is_some() => JobState::Cancelled,
                JobState::Leased => JobState::Queued,
                JobState::Running => JobState::Stale,
                other => other,
            };
            let moves = allowed(Op::Sweep, from, to);
            let mut conn = queue.pool().get().await.map_err(redis_err)?;
            let _: i64 = redis::cmd("ZADD")
                .arg(queue.keys().leases())
                .arg("XX")
                .arg(0)
                .arg(j.id.as_str())
                .query_async(&mut conn)
                .await
                .map_err(redis_err)?;
            drop(conn);
            // All but the per-minute counters: the first sweep of a minute
            // samples the waiting jobs into them whatever it moves
            // (telemetry, not state).
            let state_keys = || {
                let mut keys = srv.dump(PATTERN);
                keys.retain(|k, _| !k.contains(":stats:"));
                keys
            };
            let before = (!moves).then(state_keys);
            let report = queue.sweep(100).await.map_err(|e| format!("sweep: {e}"))?;
            if let Some(before) = before {
                unchanged_between(before, state_keys())?;
            }
            let expected: Vec<(JobId, JobState, JobState)> = if moves {
                vec![(j.id.clone(), from, to)]
            } else {
                Vec::new()
            };
            let got: Vec<(JobId, JobState, JobState)> = report
                .moves
                .iter()
                .map(|m| (m.job.clone(), m.from, m.to))
                .collect();
            ensure(got == expected, || {
                format!("sweep moved {got:?}, the model expects {expected:?}")
            })?;
            let count = |s| u64::from(moves && to == s);
            ensure(
                report.requeued == count(JobState::Queued)
                    && report.cancelled == count(JobState::Cancelled)
                    && report.stale == count(JobState::Stale)
                    // a resource free with jobs parked on it (its next waiter was
                    // handed it and waits in the ready set) is handed on by the
                    // sweep's pass once more: at most one job per resource
                    && report.unparked <= RESOURCES.len() as u64
                    && report.purged == 0,
                || format!("sweep report {report:?}"),
            )?;
            if moves {
                model.transition(i, Op::Sweep, to);
            }
            Ok(format!("job {i}: {from}→{to} moved={moves}"))
        }

        Cmd::Retry { pick, resume } => {
            let Some(i) = model.pick_job(pick, Op::Retry) else {
                return Ok("no job".into());
            };
            let j = &model.jobs[i];
            let from = j.state;
            let key_holder = j
                .template()
                .input_key
                .and_then(|k| model.inputs.get(k).copied())
                .filter(|&holder| holder != i);
            let expected = if !allowed(Op::Retry, from, JobState::Queued) {
                Err(Refusal::Refused(from, Op::Retry))
            } else if let Some(holder) = key_holder {
                // Two non-terminal jobs for one input would process it twice.
                Err(Refusal::InputKeyTaken(model.jobs[holder].id.clone()))
            } else {
                Ok(())
            };
            let before = snapshot(srv, &expected);
            let mode = if resume {
                RetryMode::Resume
            } else {
                RetryMode::FromStart
            };
            let got = queue.retry(&j.id, mode, "operator", "try again").await;
            let Some(n) = verdict(got, &expected, &j.id)? else {
                unchanged(srv, before)?;
                return Ok(format!("job {i}: {expected:?}"));
            };
            {
                ensure(n == j.attempt + 1, || {
                    format!("retry made attempt {n}, expected {}", j.attempt + 1)
                })?;
                model.transition(i, Op::Retry, JobState::Queued);
                let job = &mut model.jobs[i];
                if !resume {
                    job.last = None;
                }
                if let Some(key) = job.template().input_key {
                    model.inputs.insert(key.to_owned(), i);
                }
            }
            Ok(format!("job {i}: {expected:?}"))
        }

        Cmd::Resolve { pick, to } => {
            let Some(i) = model.pick_job(pick, Op::Resolve) else {
                return Ok("no job".into());
            };
            let j = &model.jobs[i];
            let from = j.state;
            let expected = if allowed(Op::Resolve, from, to) {
                Ok(())
            } else {
                Err(Refusal::Refused(from, Op::Resolve))
            };
            let before = snapshot(srv, &expected);
            let got = queue
                .resolve(&j.id, to, "operator", "checked the sink by hand")
                .await;
            if verdict(got, &expected, &j.id)?.is_some() {
                model.transition(i, Op::Resolve, to);
            } else {
                unchanged(srv, before)?;
            }
            Ok(format!("job {i} → {to}: {expected:?}"))
        }
    }
}

fn field<'a>(map: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    map.get(name).map(String::as_str).filter(|s| !s.is_empty())
}

/// Checks every invariant of the queue against the model.
async fn check(model: &mut Model, queue: &Queue) -> Checked {
    let keys = queue.keys();
    let mut conn = queue.pool().get().await.map_err(redis_err)?;
    let zset = |key: String| {
        let mut cmd = redis::cmd("ZRANGE");
        cmd.arg(key).arg(0).arg(-1);
        cmd
    };
    let leases: BTreeSet<String> = zset(keys.leases())
        .query_async(&mut conn)
        .await
        .map_err(redis_err)?;
    let stale: BTreeSet<String> = zset(keys.stale())
        .query_async(&mut conn)
        .await
        .map_err(redis_err)?;
    let done: BTreeSet<String> = zset(keys.done())
        .query_async(&mut conn)
        .await
        .map_err(redis_err)?;
    let ready: Vec<String> = zset(keys.ready(PIPELINE))
        .query_async(&mut conn)
        .await
        .map_err(redis_err)?;
    let delayed: Vec<String> = zset(keys.delayed(PIPELINE))
        .query_async(&mut conn)
        .await
        .map_err(redis_err)?;
    let parked_set: BTreeSet<String> = conn
        .smembers(keys.parked_resources())
        .await
        .map_err(redis_err)?;
    let inputs: BTreeMap<String, String> = conn.hgetall(keys.inputs()).await.map_err(redis_err)?;

    // Every place a QUEUED job may wait; each must hold it exactly once.
    let mut waiting: Vec<String> = ready.iter().cloned().chain(delayed).collect();

    // (d) one holder per resource, named by the lock key.
    for r in RESOURCES {
        let holders: Vec<usize> = (0..model.jobs.len())
            .filter(|&i| model.jobs[i].template().resource == Some(r) && model.jobs[i].holds_lock())
            .collect();
        ensure(holders.len() <= 1, || {
            format!("resource {r} is held by jobs {holders:?}")
        })?;
        let lock: Option<String> = conn.get(keys.lock(r)).await.map_err(redis_err)?;
        let want = holders.first().map(|&i| model.jobs[i].id.to_string());
        ensure(lock == want, || {
            format!("lock of {r} names {lock:?}, the holder is {want:?} ({holders:?})")
        })?;
        let parked: Vec<String> = zset(keys.parked(r))
            .query_async(&mut conn)
            .await
            .map_err(redis_err)?;
        ensure(parked.is_empty() != parked_set.contains(r), || {
            format!("parked set and parked:{r} disagree: {parked_set:?} / {parked:?}")
        })?;
        // a release hands the resource to the next waiter only: while that job
        // waits in the ready set to be leased, the others stay parked
        let handed = ready.iter().any(|id| {
            model
                .jobs
                .iter()
                .any(|j| j.id.to_string() == *id && j.template().resource == Some(r))
        });
        ensure(parked.is_empty() || lock.is_some() || handed, || {
            format!(
                "jobs {parked:?} are parked on {r}, which nobody holds and no job of which is ready"
            )
        })?;
        waiting.extend(parked);
    }

    let mut model_inputs = BTreeMap::new();
    for (k, &i) in &model.inputs {
        model_inputs.insert(k.clone(), model.jobs[i].id.to_string());
    }
    ensure(inputs == model_inputs, || {
        format!("inputs hash {inputs:?}, the model has {model_inputs:?}")
    })?;

    let all_records: HashMap<String, String> =
        conn.hgetall(keys.attempts()).await.map_err(redis_err)?;
    for (i, j) in model.jobs.iter_mut().enumerate() {
        let id = j.id.to_string();
        let hash: HashMap<String, String> = conn.hgetall(keys.job(&id)).await.map_err(redis_err)?;
        let state: Option<JobState> = field(&hash, "state").and_then(|s| s.parse().ok());
        // (b)
        ensure(state == Some(j.state), || {
            format!("job {i} is {state:?} in redis, {} in the model", j.state)
        })?;
        let attempt: Option<u32> = field(&hash, "attempt").and_then(|s| s.parse().ok());
        // (e): the model's attempt only grows, and redis must match it.
        ensure(attempt == Some(j.attempt), || {
            format!(
                "job {i} attempt {attempt:?} in redis, {} in the model",
                j.attempt
            )
        })?;
        ensure(field(&hash, "token") == j.token.as_deref(), || {
            format!(
                "job {i} token {:?}, model {:?}",
                field(&hash, "token"),
                j.token
            )
        })?;
        if !j.state.is_terminal() {
            ensure(field(&hash, "cancel_reason") == j.cancel.as_deref(), || {
                format!(
                    "job {i} cancel request {:?}, model {:?}",
                    field(&hash, "cancel_reason"),
                    j.cancel
                )
            })?;
        }
        // (c) attempt records (in the queue's attempts hash, `<id>:<n>`) are
        // append-only and exactly those of ended attempts, but for the last
        // attempt of a success (the model's finishes give no reason), which the
        // job hash itself describes.
        let mut numbers = BTreeSet::new();
        ensure(
            !hash.keys().any(|name| name.starts_with("attempt:")),
            || format!("job {i}: an attempt record in the job hash"),
        )?;
        let prefix = format!("{id}:");
        for (name, value) in &all_records {
            let Some(n) = name.strip_prefix(&prefix) else {
                continue;
            };
            let n: u32 = n
                .parse()
                .map_err(|_| format!("job {i}: bad record field {name}"))?;
            numbers.insert(n);
            if let Some(seen) = j.records.get(&n) {
                ensure(seen == value, || {
                    format!("job {i}: record {n} rewritten:\n  was {seen}\n  now {value}")
                })?;
            }
            j.records.insert(n, value.clone());
        }
        for n in j.records.keys() {
            ensure(numbers.contains(n), || {
                format!("job {i}: record {n} deleted")
            })?;
        }
        let plain_success = j.state == JobState::Succeeded && j.finished_ok;
        let ended = if j.state.is_terminal() && !plain_success {
            j.attempt
        } else {
            j.attempt - 1
        };
        let want: BTreeSet<u32> = (1..=ended).collect();
        ensure(numbers == want, || {
            format!(
                "job {i} ({}, attempt {}): records {numbers:?}",
                j.state, j.attempt
            )
        })?;
        if plain_success {
            let bytes: HashMap<String, Vec<u8>> = hash
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
                .collect();
            let job = leasehold::queue::Job::from_fields(&keys.job(&id), bytes)
                .map_err(|e| format!("job {i}: {e}"))?;
            let rec = job
                .final_attempt_from_hash()
                .ok_or_else(|| format!("job {i}: no final attempt in the job hash"))?;
            ensure(
                rec.n == j.attempt
                    && !rec.worker.is_empty()
                    && rec.fence > 0
                    && rec.leased_at.is_some(),
                || format!("job {i}: final attempt from the hash {rec:?}"),
            )?;
        } else if j.state.is_terminal() {
            let rec: serde_json::Value = serde_json::from_str(&j.records[&j.attempt])
                .map_err(|e| format!("job {i}: record not JSON: {e}"))?;
            ensure(
                rec["state"] == j.state.as_str() && rec["n"] == j.attempt,
                || {
                    format!(
                        "job {i}: final record {rec} for a {} attempt {}",
                        j.state, j.attempt
                    )
                },
            )?;
        }
        // Indexes.
        ensure(leases.contains(&id) == j.state.is_leased(), || {
            format!(
                "job {i} ({}): in leases zset = {}",
                j.state,
                leases.contains(&id)
            )
        })?;
        ensure(stale.contains(&id) == (j.state == JobState::Stale), || {
            format!(
                "job {i} ({}): in stale zset = {}",
                j.state,
                stale.contains(&id)
            )
        })?;
        ensure(done.contains(&id) == j.state.is_terminal(), || {
            format!(
                "job {i} ({}): in done zset = {}",
                j.state,
                done.contains(&id)
            )
        })?;
        let places = waiting.iter().filter(|w| **w == id).count();
        let want_places = usize::from(j.state == JobState::Queued);
        ensure(places == want_places, || {
            format!("job {i} ({}) waits in {places} places", j.state)
        })?;
    }
    ensure(
        waiting.len()
            == model
                .jobs
                .iter()
                .filter(|j| j.state == JobState::Queued)
                .count(),
        || format!("unknown or duplicate ids wait: {waiting:?}"),
    )?;
    let ids: BTreeSet<String> = model.jobs.iter().map(|j| j.id.to_string()).collect();
    for (name, index) in [("leases", &leases), ("stale", &stale), ("done", &done)] {
        ensure(index.is_subset(&ids), || {
            format!(
                "unknown ids in the {name} zset: {:?}",
                index.difference(&ids)
            )
        })?;
    }
    Ok(())
}

fn run_case(
    srv: &RedisServer,
    initial: Vec<usize>,
    cmds: Vec<(Cmd, bool)>,
    covered: &RefCell<Covered>,
) -> Checked {
    srv.flush();
    let calls: Vec<Call> = std::iter::once(Call::Single(Cmd::Enqueue { templates: initial }))
        .chain(group(cmds))
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    rt.block_on(async {
        let queue = Queue::connect(&srv.url(), QUEUE, QueueConfig::default())
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let mut model = Model::new();
        let mut paths = Paths::default();
        let mut history: Vec<String> = Vec::new();
        let mut seen_attempts: Vec<u32> = Vec::new();
        for (n, call) in calls.iter().enumerate() {
            let line = match call {
                Call::Single(cmd) => {
                    if settles(cmd) {
                        paths.single[holder_index(cmd)] += 1;
                    }
                    step(srv, &mut model, &queue, cmd).await
                }
                Call::Settle { ops, lease } => {
                    settle_call(srv, &mut model, &queue, ops, *lease, &mut paths).await
                }
            };
            let line = line.map_err(|e| {
                format!(
                    "op #{n} {}: {e}\nhistory:\n{}",
                    name(call),
                    history.join("\n")
                )
            })?;
            history.push(format!("#{n} {} -> {line}", name(call)));
            check(&mut model, &queue).await.map_err(|e| {
                format!(
                    "after op #{n} {}: {e}\nhistory:\n{}",
                    name(call),
                    history.join("\n")
                )
            })?;
            // (e) attempt numbers never decrease.
            seen_attempts.resize(model.jobs.len(), 0);
            for (i, j) in model.jobs.iter().enumerate() {
                ensure(j.attempt >= seen_attempts[i], || {
                    format!(
                        "job {i}: attempt went from {} to {}",
                        seen_attempts[i], j.attempt
                    )
                })?;
                seen_attempts[i] = j.attempt;
            }
        }
        if std::env::var_os("MODEL_DEBUG").is_some() {
            eprintln!("---- case\n{}", history.join("\n"));
        }
        covered.borrow_mut().add(&model, &paths);
        Ok(())
    })
}

/// A call as the history and failure messages name it.
fn name(call: &Call) -> String {
    match call {
        Call::Single(cmd) => format!("{cmd:?}"),
        Call::Settle { ops, lease } => format!("Settle {{ ops: {ops:?}, lease: {lease:?} }}"),
    }
}

/// What the cases of one run exercised.
struct Covered {
    /// Per table row: by any path, and by settle calls.
    rows: Vec<usize>,
    rows_by_settle: Vec<usize>,
    paths: Paths,
}

impl Covered {
    fn new() -> Covered {
        Covered {
            rows: vec![0; TRANSITIONS.len()],
            rows_by_settle: vec![0; TRANSITIONS.len()],
            paths: Paths::default(),
        }
    }

    /// Adds the counts of one passed case.
    fn add(&mut self, model: &Model, paths: &Paths) {
        for (total, n) in self.rows.iter_mut().zip(&model.covered) {
            *total += n;
        }
        for (total, n) in self.rows_by_settle.iter_mut().zip(&model.covered_by_settle) {
            *total += n;
        }
        let p = &mut self.paths;
        for k in 0..4 {
            p.single[k] += paths.single[k];
            p.settled[k] += paths.settled[k];
        }
        p.settled_accepted += paths.settled_accepted;
        p.settled_refused += paths.settled_refused;
        p.settle_calls += paths.settle_calls;
        p.settle_batches += paths.settle_batches;
        p.settle_leases += paths.settle_leases;
        p.settle_leased_jobs += paths.settle_leased_jobs;
    }
}

#[test]
fn redis_follows_the_model_under_random_interleavings() {
    let srv = RedisServer::start();
    let defaults = Config::default();
    let cases = if std::env::var_os("PROPTEST_CASES").is_some() {
        defaults.cases
    } else {
        DEFAULT_CASES
    };
    let rng_seed = match defaults.rng_seed {
        RngSeed::Random => RngSeed::Fixed(DEFAULT_SEED),
        fixed => fixed,
    };
    let config = Config {
        cases,
        failure_persistence: None,
        rng_seed,
        max_shrink_iters: 400,
        ..defaults
    };
    let mut runner = TestRunner::new(config);
    let covered = RefCell::new(Covered::new());
    // A first bulk enqueue of a few jobs, then up to 40 operations, each with
    // whether it joins a settle batch (holder operations and leases only).
    let strategy = (
        proptest::collection::vec(0..TEMPLATES.len(), 2..=5),
        proptest::collection::vec((cmd_strategy(), any::<bool>()), 10..=40),
    );
    let result = runner.run(&strategy, |(initial, cmds)| {
        run_case(&srv, initial, cmds, &covered).map_err(TestCaseError::fail)
    });
    if let Err(e) = result {
        panic!("{e} (seed {rng_seed:?})");
    }
    let Covered {
        rows,
        rows_by_settle,
        paths,
    } = covered.into_inner();
    let report: Vec<String> = TRANSITIONS
        .iter()
        .zip(rows.iter().zip(&rows_by_settle))
        .map(|(t, (n, by_settle))| format!("{n:>5} {by_settle:>5}  {} {}→{}", t.op, t.from, t.to))
        .collect();
    eprintln!(
        "table rows exercised over {cases} cases (seed {rng_seed:?}; all, by settle calls):\n{}\n{paths:?}",
        report.join("\n")
    );
    // Both paths in every run of a useful size: each holder operation through
    // its own entry point and inside settle calls, accepted and refused there,
    // batches of several operations, and leases taken by settle calls.
    if cases >= MIN_CASES_FOR_PATHS {
        for (k, op) in ["start", "checkpoint", "finish", "release"]
            .iter()
            .enumerate()
        {
            assert!(paths.single[k] > 0, "no single-op {op} ran: {paths:?}");
            assert!(
                paths.settled[k] > 0,
                "no {op} ran in a settle call: {paths:?}"
            );
        }
        assert!(
            paths.settled_accepted > 0
                && paths.settled_refused > 0
                && paths.settle_batches > 0
                && paths.settle_leased_jobs > 0,
            "the settle path was not fully exercised: {paths:?}"
        );
    }
}
