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
//! After every operation:
//! (a) success or refusal (with its exact typed error) matches the model;
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
//! and the inputs hash equals the model's.
//!
//! The seed is fixed (override with `PROPTEST_RNG_SEED`), as is the case count
//! (override with `PROPTEST_CASES`). `MODEL_DEBUG=1` prints every case's history;
//! `--nocapture` shows how often each table row was exercised.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Debug;
use std::time::Duration;

use leasehold::redis::{self, AsyncCommands};
use leasehold::transitions::{allowed, op_allowed, rows, Kind, TRANSITIONS};
use leasehold::{
    AttemptError, Cancelled, Error, Finished, JobId, JobState, Lease, NewJob, Op, Outcome, Queue,
    QueueConfig, Renewal, RetryMode, StaleLock, Started,
};
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
        5 => (worker.clone(), any::<u8>(), how)
            .prop_map(|(worker, pick, how)| Cmd::Finish { worker, pick, how }),
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
    /// Every lease each worker ever took, live or not.
    held: [Vec<Lease>; 3],
    last_fence: u64,
    checkpoints: u64,
    /// How many times each table row was exercised.
    covered: Vec<usize>,
}

impl Model {
    fn new() -> Model {
        Model {
            covered: vec![0; TRANSITIONS.len()],
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
    let after = srv.dump(PATTERN);
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
                    None => {
                        ensure(got.created, || format!("expected a new job, got {got:?}"))?;
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
            let got = queue
                .lease(WORKERS[worker], &[PIPELINE], n, TTL)
                .await
                .map_err(|e| format!("lease: {e}"))?;
            ensure(got.leases.len() == n.min(groups), || {
                format!(
                    "leased {} jobs, the model expects {} (leasable {leasable:?})",
                    got.leases.len(),
                    n.min(groups)
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
                line += &format!(" {i}");
                model.held[worker].push(lease);
            }
            Ok(line)
        }

        Cmd::Start { worker, pick } => {
            let Some(lease) = model.pick_lease(worker, pick) else {
                return Ok("no lease".into());
            };
            let i = model.index_of(&lease.job);
            // a repeated start of a RUNNING job by its holder stays RUNNING
            let to = if model.jobs[i].cancel.is_some() && model.jobs[i].state != JobState::Running {
                JobState::Cancelled
            } else {
                JobState::Running
            };
            let expected = model.holder_verdict(&lease, Op::Start, to);
            let before = snapshot(srv, &expected);
            let got = queue.start(&lease, STEPS[0]).await;
            if let Some(started) = verdict(got, &expected, &lease.job)? {
                let want = match &model.jobs[i].cancel {
                    Some(reason) if to == JobState::Cancelled => Started::Cancelled {
                        reason: reason.clone(),
                    },
                    _ => Started::Running,
                };
                ensure(started == want, || {
                    format!("start: {started:?}, expected {want:?}")
                })?;
                model.transition(i, Op::Start, to);
            } else {
                unchanged(srv, before)?;
            }
            Ok(format!("job {i}: {expected:?}"))
        }

        Cmd::Checkpoint { worker, pick, step } => {
            let Some(lease) = model.pick_lease(worker, pick) else {
                return Ok("no lease".into());
            };
            let i = model.index_of(&lease.job);
            let expected = model.holder_verdict(&lease, Op::Checkpoint, JobState::Running);
            model.checkpoints += 1;
            let name = STEPS[step];
            let output = format!(r#"{{"step":"{name}","n":{}}}"#, model.checkpoints);
            let next = STEPS.get(step + 1).copied();
            let before = snapshot(srv, &expected);
            let got = queue.checkpoint(&lease, name, &output, next).await;
            if let Some(cancel) = verdict(got, &expected, &lease.job)? {
                ensure(cancel == model.jobs[i].cancel, || {
                    format!(
                        "checkpoint reports cancel {cancel:?}, model {:?}",
                        model.jobs[i].cancel
                    )
                })?;
                model.transition(i, Op::Checkpoint, JobState::Running);
                model.jobs[i].last = Some((name.to_owned(), output));
            } else {
                unchanged(srv, before)?;
            }
            Ok(format!("job {i}: {expected:?}"))
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

        Cmd::Finish { worker, pick, how } => {
            let Some(lease) = model.pick_lease(worker, pick) else {
                return Ok("no lease".into());
            };
            let i = model.index_of(&lease.job);
            let j = &model.jobs[i];
            let retry_allowed = j.cancel.is_none();
            let to = match how {
                How::Succeeded => JobState::Succeeded,
                How::FailedPermanent => JobState::Failed,
                How::FailedRetryable if retry_allowed && j.attempt < j.template().max_attempts => {
                    JobState::Queued
                }
                How::FailedRetryable => JobState::Failed,
                How::Interrupted if retry_allowed => JobState::Queued,
                How::Interrupted => JobState::Cancelled,
                How::Cancelled => JobState::Cancelled,
            };
            let expected = model.holder_verdict(&lease, Op::Finish, to);
            let attempt = j.attempt;
            let before = snapshot(srv, &expected);
            let got = queue.finish(&lease, &outcome(how)).await;
            if let Some(finished) = verdict(got, &expected, &lease.job)? {
                let as_expected = match &finished {
                    Finished::Retrying { attempt: next, .. } => {
                        to == JobState::Queued && *next == attempt + 1
                    }
                    Finished::Ended(state) => *state == to && to != JobState::Queued,
                };
                ensure(as_expected, || {
                    format!("finish: {finished:?}, the model expects {to} from attempt {attempt}")
                })?;
                model.transition(i, Op::Finish, to);
                model.jobs[i].finished_ok = to == JobState::Succeeded;
            } else {
                unchanged(srv, before)?;
            }
            Ok(format!("job {i} {how:?}: {expected:?}"))
        }

        Cmd::Release { worker, pick } => {
            let Some(lease) = model.pick_lease(worker, pick) else {
                return Ok("no lease".into());
            };
            let i = model.index_of(&lease.job);
            let to = if model.jobs[i].cancel.is_some() {
                JobState::Cancelled
            } else {
                JobState::Queued
            };
            let expected = model.holder_verdict(&lease, Op::Release, to);
            let before = snapshot(srv, &expected);
            let got = queue.release(&lease).await;
            match verdict(got, &expected, &lease.job)? {
                Some(state) => {
                    ensure(state == to, || {
                        format!("release: now {state}, expected {to}")
                    })?;
                    model.transition(i, Op::Release, to);
                }
                None => unchanged(srv, before)?,
            }
            Ok(format!("job {i}: {expected:?}"))
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
            let before = (!moves).then(|| srv.dump(PATTERN));
            let report = queue.sweep(100).await.map_err(|e| format!("sweep: {e}"))?;
            unchanged(srv, before)?;
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
                    && report.unparked == 0
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
    let mut waiting: Vec<String> = ready.into_iter().chain(delayed).collect();

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
        ensure(parked.is_empty() || lock.is_some(), || {
            format!("jobs {parked:?} are parked on {r}, which nobody holds")
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
            let job = leasehold::Job::from_fields(&keys.job(&id), bytes)
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
    cmds: Vec<Cmd>,
    covered: &RefCell<Vec<usize>>,
) -> Checked {
    srv.flush();
    let cmds: Vec<Cmd> = std::iter::once(Cmd::Enqueue { templates: initial })
        .chain(cmds)
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
        let mut history: Vec<String> = Vec::new();
        let mut seen_attempts: Vec<u32> = Vec::new();
        for (n, cmd) in cmds.iter().enumerate() {
            let line = step(srv, &mut model, &queue, cmd)
                .await
                .map_err(|e| format!("op #{n} {cmd:?}: {e}\nhistory:\n{}", history.join("\n")))?;
            history.push(format!("#{n} {cmd:?} -> {line}"));
            check(&mut model, &queue).await.map_err(|e| {
                format!(
                    "after op #{n} {cmd:?}: {e}\nhistory:\n{}",
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
        let mut covered = covered.borrow_mut();
        for (total, n) in covered.iter_mut().zip(&model.covered) {
            *total += n;
        }
        Ok(())
    })
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
    let covered = RefCell::new(vec![0usize; TRANSITIONS.len()]);
    // A first bulk enqueue of a few jobs, then up to 40 operations.
    let strategy = (
        proptest::collection::vec(0..TEMPLATES.len(), 2..=5),
        proptest::collection::vec(cmd_strategy(), 10..=40),
    );
    let result = runner.run(&strategy, |(initial, cmds)| {
        run_case(&srv, initial, cmds, &covered).map_err(TestCaseError::fail)
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let covered = covered.into_inner();
    let report: Vec<String> = TRANSITIONS
        .iter()
        .zip(&covered)
        .map(|(t, n)| format!("{:>5}  {} {}→{}", n, t.op, t.from, t.to))
        .collect();
    eprintln!(
        "table rows exercised over {cases} cases:\n{}",
        report.join("\n")
    );
}
