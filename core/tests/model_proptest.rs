//! Model-based property test: random interleavings of every operation by three
//! simulated workers (and an operator) over a handful of jobs, run against one
//! private `redis-server` and against a pure-Rust model that decides what must
//! happen with `leasehold_core::transitions::{rows, allowed, op_allowed, TRANSITIONS}`.
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
//! each path ran.

mod support;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use leasehold_core::redis::{self, AsyncCommands};
use leasehold_core::transitions::Op;
use leasehold_core::transitions::{allowed, TRANSITIONS};
use leasehold_core::{
    Cancelled, EnqueueStatus, JobId, JobState, NewJob, Queue, QueueConfig, RetryMode,
};
use leasehold_core::{Lease, Renewal};
use leasehold_testkit::RedisServer;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use support::model::*;
use support::model_holder::*;

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
            let job = leasehold_core::Job::from_fields(&keys.job(&id), bytes)
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
            // a STALE attempt an operator resolved keeps its facts as they
            // stood (state STALE), the decision beside them
            let ended_as = if rec["resolution"].is_object() {
                rec["state"] == "STALE" && rec["resolution"]["to"] == j.state.as_str()
            } else {
                rec["state"] == j.state.as_str()
            };
            ensure(ended_as && rec["n"] == j.attempt, || {
                format!(
                    "job {i}: final record {rec} for a {} attempt {}",
                    j.state, j.attempt
                )
            })?;
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
