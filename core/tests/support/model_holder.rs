//! The holder's paths in `model_proptest.rs`: leases checked against the
//! model's plan, holder operations planned in order (each seeing the ones
//! before it, as the settle script runs them) and checked one by one, through
//! their single entry points or batched into one `Queue::settle` call.

use std::collections::BTreeSet;
use std::fmt::Debug;

use super::model::*;
use leasehold_core::transitions::Op;
use leasehold_core::Error;
use leasehold_core::{
    Finished, HolderOp, HolderReply, Lease, LeaseRequest, Leased, Outcome, Started,
};
use leasehold_core::{JobState, Queue};
use leasehold_testkit::RedisServer;

/// What the model says a lease call may take, read before the call (for a
/// settle call: after its operations, which run first).
pub(crate) struct LeasePlan {
    /// The jobs it may lease.
    pub(crate) leasable: Vec<usize>,
    /// How many of them one call can take: one per job without a resource,
    /// one per free resource.
    pub(crate) groups: usize,
}

impl LeasePlan {
    pub(crate) fn new(model: &Model) -> LeasePlan {
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
pub(crate) fn check_leased(
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
pub(crate) enum Carried {
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
pub(crate) enum Expect {
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
pub(crate) struct Planned {
    pub(crate) job: usize,
    pub(crate) lease: Lease,
    pub(crate) carried: Carried,
    pub(crate) expected: Result<Expect, Refusal>,
}

impl Planned {
    /// The verdict without the reply: what `verdict` compares.
    pub(crate) fn verdict(&self) -> Result<(), Refusal> {
        self.expected.as_ref().map(|_| ()).map_err(Clone::clone)
    }

    /// The operation as part of a `Queue::settle` call.
    pub(crate) fn holder_op(&self) -> HolderOp<'_> {
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
    pub(crate) fn line(&self) -> String {
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
pub(crate) fn plan_holder(model: &mut Model, cmd: &Cmd, settling: bool) -> Option<Planned> {
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
pub(crate) fn check_holder(
    planned: &Planned,
    got: Result<HolderReply, Error>,
) -> Result<bool, String> {
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
pub(crate) async fn holder_single(
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
pub(crate) struct Paths {
    /// Single-operation calls, per holder op (start, checkpoint, finish, release).
    pub(crate) single: [u64; 4],
    /// Operations run by settle calls, per holder op.
    pub(crate) settled: [u64; 4],
    /// Settle operations accepted and refused.
    pub(crate) settled_accepted: u64,
    pub(crate) settled_refused: u64,
    /// Settle calls; those with two operations or more; those with a lease request;
    /// jobs leased by settle calls.
    pub(crate) settle_calls: u64,
    pub(crate) settle_batches: u64,
    pub(crate) settle_leases: u64,
    pub(crate) settle_leased_jobs: u64,
}

/// The index of a holder command in `Paths`' arrays.
pub(crate) fn holder_index(cmd: &Cmd) -> usize {
    match cmd {
        Cmd::Start { .. } => 0,
        Cmd::Checkpoint { .. } => 1,
        Cmd::Finish { .. } => 2,
        Cmd::Release { .. } => 3,
        _ => unreachable!("not a holder command: {cmd:?}"),
    }
}

/// Whether a command is a holder operation a settle call can carry.
pub(crate) fn settles(cmd: &Cmd) -> bool {
    matches!(
        cmd,
        Cmd::Start { .. } | Cmd::Checkpoint { .. } | Cmd::Finish { .. } | Cmd::Release { .. }
    )
}

/// One call of a generated program.
#[derive(Debug)]
pub(crate) enum Call {
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
pub(crate) fn group(cmds: Vec<(Cmd, bool)>) -> Vec<Call> {
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
pub(crate) async fn settle_call(
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
    let before = (refusals > 0).then(|| srv.dump_but_outputs(PATTERN));
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
        let after = srv.dump_but_outputs(PATTERN);
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
