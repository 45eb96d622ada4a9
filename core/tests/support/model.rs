//! The model of `model_proptest.rs`: the job templates, the generated
//! commands and their strategy, and the pure-Rust model of jobs, leases, locks
//! and inputs that decides with `leasehold_core::transitions` what each
//! command must do, with the snapshots a refused call is compared against.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::time::Duration;

use leasehold_core::transitions::Op;
use leasehold_core::transitions::{allowed, op_allowed, rows, Kind, TRANSITIONS};
use leasehold_core::Error;
use leasehold_core::{AttemptError, JobId, JobState, StaleLock};
use leasehold_core::{Lease, Outcome};
use leasehold_testkit::RedisServer;
use proptest::prelude::*;

pub(crate) const QUEUE: &str = "m";
pub(crate) const PATTERN: &str = "leasehold:{m}:*";
pub(crate) const PIPELINE: &str = "etl";
pub(crate) const TTL: Duration = Duration::from_secs(600);
pub(crate) const WORKERS: [&str; 3] = ["w0", "w1", "w2"];
pub(crate) const MAX_JOBS: usize = 8;
pub(crate) const STEPS: [&str; 4] = ["fetch", "validate", "load", "aggregate"];
pub(crate) const RESOURCES: [&str; 2] = ["r1", "r2"];
pub(crate) const DEFAULT_CASES: u32 = 32;
/// From this many cases on, a run must have exercised both paths (see the test).
pub(crate) const MIN_CASES_FOR_PATHS: u32 = 16;
pub(crate) const DEFAULT_SEED: u64 = 0x1ea5_e401_d5ee_d001;

pub(crate) struct Template {
    pub(crate) resource: Option<&'static str>,
    pub(crate) input_key: Option<&'static str>,
    pub(crate) max_attempts: u32,
    pub(crate) stale_lock: StaleLock,
}

pub(crate) const TEMPLATES: [Template; 6] = [
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
pub(crate) enum How {
    Succeeded,
    FailedRetryable,
    FailedPermanent,
    Cancelled,
    Interrupted,
}

#[derive(Debug, Clone)]
pub(crate) enum Cmd {
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

pub(crate) fn cmd_strategy() -> impl Strategy<Value = Cmd> {
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
pub(crate) enum Refusal {
    Refused(JobState, Op),
    LeaseLost(JobState, Op),
    AlreadyTerminal(JobState),
    /// `Error::InputKeyTaken`: another non-terminal job (this id) holds the input key.
    InputKeyTaken(JobId),
}

pub(crate) type Checked = Result<(), String>;

pub(crate) fn ensure(cond: bool, what: impl FnOnce() -> String) -> Checked {
    if cond {
        Ok(())
    } else {
        Err(what())
    }
}

/// Compares a client result with the model's verdict. `Ok(Some(v))` when both
/// agree it succeeded, `Ok(None)` when both agree it was refused.
pub(crate) fn verdict<T: Debug>(
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
pub(crate) struct MJob {
    pub(crate) id: JobId,
    pub(crate) template: usize,
    pub(crate) state: JobState,
    pub(crate) attempt: u32,
    /// The live lease's token (LEASED/RUNNING only).
    pub(crate) token: Option<String>,
    /// A pending cancel request's reason.
    pub(crate) cancel: Option<String>,
    /// The last completed step and its output (what a resumed attempt continues after).
    pub(crate) last: Option<(String, String)>,
    /// Steps checkpointed under the current lease (the job's `steps` field,
    /// emptied by each lease): a step checkpointed again only renews the lease,
    /// its first output stands.
    pub(crate) steps: BTreeSet<&'static str>,
    /// Attempt records seen so far, verbatim.
    pub(crate) records: BTreeMap<u32, String>,
    /// Whether a worker's finish ended it SUCCEEDED (no record: the job hash
    /// describes that attempt), rather than an operator's resolve.
    pub(crate) finished_ok: bool,
}

impl MJob {
    pub(crate) fn template(&self) -> &'static Template {
        &TEMPLATES[self.template]
    }

    pub(crate) fn holds_lock(&self) -> bool {
        self.template().resource.is_some()
            && (self.state.is_leased()
                || (self.state == JobState::Stale && self.template().stale_lock == StaleLock::Hold))
    }
}

#[derive(Default)]
pub(crate) struct Model {
    pub(crate) jobs: Vec<MJob>,
    /// input key → job index (mirrors `<base>:inputs`).
    pub(crate) inputs: BTreeMap<String, usize>,
    /// input key → (its latest ended job, whether that job SUCCEEDED by its
    /// worker rather than by an operator's decision) (mirrors `<base>:outcomes`).
    pub(crate) outcomes: BTreeMap<String, (usize, bool)>,
    /// Every lease each worker ever took, live or not.
    pub(crate) held: [Vec<Lease>; 3],
    pub(crate) last_fence: u64,
    pub(crate) checkpoints: u64,
    /// How many times each table row was exercised (both paths).
    pub(crate) covered: Vec<usize>,
    /// How many of those were by an operation of a `Queue::settle` call.
    pub(crate) covered_by_settle: Vec<usize>,
    /// Set while the operations of a settle call are planned.
    pub(crate) settling: bool,
}

impl Model {
    pub(crate) fn new() -> Model {
        Model {
            covered: vec![0; TRANSITIONS.len()],
            covered_by_settle: vec![0; TRANSITIONS.len()],
            ..Model::default()
        }
    }

    pub(crate) fn index_of(&self, id: &JobId) -> usize {
        self.jobs
            .iter()
            .position(|j| &j.id == id)
            .expect("every leased job is in the model")
    }

    pub(crate) fn holder_of(&self, resource: &str) -> Option<usize> {
        self.jobs
            .iter()
            .position(|j| j.template().resource == Some(resource) && j.holds_lock())
    }

    pub(crate) fn leasable(&self) -> Vec<usize> {
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

    pub(crate) fn is_live(&self, lease: &Lease) -> bool {
        let j = &self.jobs[self.index_of(&lease.job)];
        j.token.as_deref() == Some(lease.token.as_str())
    }

    /// A lease for a holder operation, by `pick % 8`: 0, a zombie's (a lease
    /// whose job is now held under another token); 1, any lease no longer
    /// live (swept, re-leased or ended); otherwise a live one, of `worker` if
    /// it has any, else of whichever worker has one (that worker acts). When
    /// the wanted kind does not exist, the next kind is tried, then any lease.
    pub(crate) fn pick_lease(&self, worker: usize, pick: u8) -> Option<Lease> {
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
    pub(crate) fn pick_job(&self, pick: u8, op: Op) -> Option<usize> {
        if self.jobs.is_empty() {
            return None;
        }
        // (a checkpoint, no move of the table, fits a RUNNING job)
        let fits = |state: JobState| match op {
            Op::Checkpoint => state == JobState::Running,
            _ => op_allowed(op, state),
        };
        let fitting: Vec<usize> = (0..self.jobs.len())
            .filter(|&i| fits(self.jobs[i].state))
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
    pub(crate) fn holder_verdict(
        &self,
        lease: &Lease,
        op: Op,
        to: JobState,
    ) -> Result<(), Refusal> {
        let j = &self.jobs[self.index_of(&lease.job)];
        // a checkpoint is no move of the table: an append the holder of a
        // RUNNING job may make (its seal decides what counts)
        let may = if op == Op::Checkpoint {
            j.state == JobState::Running
        } else {
            allowed(op, j.state, to)
        };
        if !may {
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
    pub(crate) fn record_step(&mut self, i: usize, step: &'static str, output: &str) {
        let job = &mut self.jobs[i];
        if job.steps.insert(step) {
            job.last = Some((step.to_owned(), output.to_owned()));
        }
    }

    /// Applies the table row `(op, from, to)` to job `i`.
    pub(crate) fn transition(&mut self, i: usize, op: Op, to: JobState) {
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

pub(crate) fn outcome(how: How) -> Outcome {
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
pub(crate) fn snapshot(
    srv: &RedisServer,
    expected: &Result<(), Refusal>,
) -> Option<BTreeMap<String, String>> {
    expected.is_err().then(|| srv.dump_but_outputs(PATTERN))
}

/// A refused operation changed nothing: every key is byte-for-byte the same.
pub(crate) fn unchanged(srv: &RedisServer, before: Option<BTreeMap<String, String>>) -> Checked {
    let Some(before) = before else {
        return Ok(());
    };
    unchanged_between(before, srv.dump_but_outputs(PATTERN))
}

/// Two dumps of the queue's keys are the same; else the keys that differ.
pub(crate) fn unchanged_between(
    before: BTreeMap<String, String>,
    after: BTreeMap<String, String>,
) -> Checked {
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

pub(crate) fn redis_err(e: impl std::fmt::Display) -> String {
    format!("redis: {e}")
}
