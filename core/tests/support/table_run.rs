//! Running the transition-table cases (`transition_table*.rs`): one case
//! judged against `TRANSITIONS` (the job's state and indexes after an allowed
//! move, every key unchanged after a refused one), the same holder operations
//! batched through `Queue::settle`, and the exhaustive run of every action on
//! every setup with the rows it covered.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::table::*;
use leasehold_core::redis::Value;
use leasehold_core::transitions::{self, Kind};
use leasehold_core::transitions::{Op, TRANSITIONS};
use leasehold_core::Error;
use leasehold_core::{Finished, HolderOp, HolderReply, Lease, LeaseRequest, Outcome, Started};
use leasehold_core::{Job, JobId, JobState, NewJob, Queue, QueueConfig, StaleLock};
use leasehold_testkit::RedisServer;

/// Runs one (flavor, setup, action) case; returns the index of the table row
/// it exercised, if the move was allowed.
pub(crate) async fn run_case(
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
pub(crate) struct Case<'a> {
    pub(crate) names: &'a Names,
    pub(crate) setup: Setup,
    pub(crate) action: Action,
    pub(crate) id: &'a JobId,
    /// The lease its holder took (the operation's, unless it was an intruder).
    pub(crate) lease: &'a Lease,
    /// The job as read before the operation.
    pub(crate) before_job: &'a Job,
}

/// Checks what an action did to one job against the table, for both paths: an
/// allowed move ends in its target with the attempt, records and indexes that
/// go with it; a refusal is the documented one and `before` equals `after`
/// (what a refusal must leave as it was: every key for a single call, the
/// job's footprint for an operation of a settle call). Returns the index of
/// the row exercised, if the move was allowed.
pub(crate) async fn judge(
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
pub(crate) fn state_keys(srv: &RedisServer, action: Action) -> BTreeMap<String, String> {
    // (a checkpoint is no move: it appends to the outputs list, which counts
    // for no one until a seal, so the streams are left out)
    let mut keys = srv.dump_but_outputs(PATTERN);
    if matches!(action, Action::Lease | Action::LeaseAndStart) {
        keys.retain(|k, _| !k.contains(":wake:"));
    }
    if action == Action::Sweep {
        keys.retain(|k, _| !k.contains(":stats:"));
    }
    keys
}

pub(crate) fn diff(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> String {
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
pub(crate) const SIDE_PIPELINE: &str = "side";
/// Jobs waiting in it when a batch runs.
pub(crate) const SIDE_JOBS: usize = 2;
/// They have no resource and no input key.
pub(crate) const SIDE_NAMES: Names = Names {
    resource: None,
    input_key: None,
    stale_lock: StaleLock::Hold,
};

/// Whether `Queue::settle` carries this action (start, checkpoint, finish, release).
pub(crate) fn settles(action: Action) -> bool {
    matches!(
        action.op(),
        Op::Start | Op::Checkpoint | Op::Finish | Op::Release
    )
}

/// The last step a settle finish checkpoints first, as a worker folds its
/// last step into the finish, and its output.
pub(crate) const LAST_STEP: (&str, &str) = ("aggregate", r#"{"total":9}"#);

/// `action` as one operation of a settle call, with `lease`.
pub(crate) fn holder_op<'a>(
    action: Action,
    lease: &'a Lease,
    outcome: Option<&'a Outcome>,
) -> HolderOp<'a> {
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
pub(crate) fn classify_reply(reply: Result<HolderReply, Error>) -> Applied {
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
pub(crate) fn strings(value: Value, out: &mut Vec<String>) {
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
pub(crate) fn footprint(
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
pub(crate) struct BatchJob {
    pub(crate) setup: Setup,
    pub(crate) names: Names,
    pub(crate) id: JobId,
    pub(crate) lease: Lease,
    pub(crate) before_job: Job,
}

/// Runs `action` through `Queue::settle` on one job in each setup at once, as
/// a worker's batch does, and judges each operation as the single path does.
/// Two calls: first an intruder's (a wrong token) for every job whose move the
/// table allows, all refused as `LeaseLost` and changing no key at all; then
/// the holders' own operations, one per job, with a lease request for the
/// jobs waiting in the side pipeline in the same call. Returns the rows
/// exercised and the failures (one line each).
pub(crate) async fn settle_batch(
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
    let before = srv.dump_but_outputs(PATTERN);
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
    let after = srv.dump_but_outputs(PATTERN);
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

pub(crate) async fn exhaustive(flavor: Flavor) {
    let srv = RedisServer::start();
    exhaustive_on(&srv, &srv.url(), flavor).await;
}

/// [`exhaustive`] through `url`, reading and comparing keys on `srv` (the
/// node that holds the queue).
pub(crate) async fn exhaustive_on(srv: &RedisServer, url: &str, flavor: Flavor) {
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
