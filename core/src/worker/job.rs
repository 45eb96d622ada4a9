//! Running one leased job: start, steps with checkpoints, cancel phases A and B,
//! timeouts, panics, retries, cleanup, and a truthful finish.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tracing::{debug, error, info, info_span, warn, Instrument};

use super::active::{ActiveJob, StopWhy};
use super::lease_loop::{Request, Settler};
use super::runner::{AnyInput, Runner};
use super::Shared;
use crate::error::Error;
use crate::lease::{Finished, Lease, Outcome, Started};
use crate::pipeline::{CleanupContext, CleanupReason, StepContext, StepError};
use crate::queue::Queue;
use crate::record::AttemptError;
use crate::settle::HolderReply;

/// How a step run ended.
enum StepRun {
    /// It completed with this output.
    Done(String),
    /// It failed on its own (error, timeout, panic).
    Failed(StepError),
    /// It was stopped (cancel, lost lease, shutdown) before completing: it was cut mid-way.
    Stopped(StopWhy),
}

/// A holder operation that could not be completed.
enum Gone {
    /// The lease is lost: the job moved on without us. Write nothing more.
    Lost,
}

/// Calls a holder operation, retrying transient Redis failures while the lease
/// may still be ours.
async fn holder_call<T, F, Fut>(active: &ActiveJob, what: &str, mut op: F) -> Result<T, Gone>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    let mut backoff = Duration::from_millis(50);
    if what == "finish" || what == "release" {
        active.mark_ending();
    }
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if e.is_lease_lost() => {
                warn!(error = %e, "{what}: the lease is gone; stopping this attempt without writing");
                active.stop(StopWhy::Lost(e.to_string()));
                return Err(Gone::Lost);
            }
            Err(e) => {
                if active.is_lost() || active.expired_locally(std::time::Instant::now()) {
                    warn!(error = %e, "{what}: Redis unreachable past the lease deadline; giving up on this attempt");
                    active.stop(StopWhy::Lost(format!(
                        "cut off from Redis past the lease deadline: {e}"
                    )));
                    return Err(Gone::Lost);
                }
                warn!(error = %e, retry_in = ?backoff, "{what} failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }
}

/// A number in 0..1 for jitter.
fn unit_random() -> f64 {
    (uuid::Uuid::new_v4().as_u128() >> 75) as f64 / (1u64 << 53) as f64
}

pub(crate) async fn run(
    shared: Arc<Shared>,
    runner: Arc<dyn Runner>,
    queue: Queue,
    settler: Settler,
    lease: Lease,
) {
    let active = ActiveJob::new(
        lease,
        queue.name().to_owned(),
        &shared.id,
        std::time::Instant::now(),
        shared.metrics.clone(),
    );
    shared.active.insert(active.clone());
    let gauge = shared
        .metrics
        .jobs_active
        .get_or_create(&active.labels())
        .clone();
    gauge.inc();
    let span = info_span!(
        "job",
        job = %active.lease.job,
        attempt = active.lease.attempt,
        pipeline = %active.lease.pipeline,
        fence = active.lease.fence
    );
    execute(&shared, runner.as_ref(), &settler, &active)
        .instrument(span)
        .await;
    active.hold_run_slot(None);
    if let Some(ran) = active.running_for() {
        shared.record_run(ran);
    }
    gauge.dec();
    shared.active.remove(&active.lease.job);
}

async fn execute(shared: &Shared, runner: &dyn Runner, queue: &Settler, active: &Arc<ActiveJob>) {
    let lease = &active.lease;
    // a run slot first (a prefetched job waits here, LEASED); a shutdown hands it
    // back, and a cancel or a lost lease goes on to the start, which ends it
    let mut run_permit = tokio::select! {
        p = shared.run_slots.clone().acquire_owned() => p.ok(),
        _ = shared.stop_leasing.cancelled() => None,
        _ = active.token().cancelled() => None,
    };
    if shared.stop_leasing.is_cancelled() {
        // never started: hand it back
        if let Ok(state) = holder_call(active, "release", || queue.release(lease)).await {
            active.count("LEASED", state.as_str());
            info!(%state, "handed back: worker shutting down");
        }
        return;
    }
    let steps = runner.steps();
    let start_index = match &lease.last_step {
        None => Ok(0),
        Some(name) => steps
            .iter()
            .position(|s| s.name == name)
            .map(|i| i + 1)
            .ok_or_else(|| {
                format!(
                    "the last completed step {name:?} is not a step of pipeline {}",
                    runner.name()
                )
            }),
    };
    let first = start_index
        .as_ref()
        .ok()
        .and_then(|i| steps.get(*i))
        .map_or("", |s| s.name);
    match holder_call(active, "start", || queue.start(lease, first)).await {
        Err(Gone::Lost) => return,
        Ok(Started::Cancelled { reason }) => {
            active.count("LEASED", "CANCELLED");
            info!(%reason, "cancelled before it started (phase A)");
            // nothing ran in this attempt: cleanup only if an earlier attempt left work behind
            if let Ok(input) = runner.decode(&lease.input) {
                run_cleanup(
                    runner,
                    active,
                    input.as_ref(),
                    CleanupReason::Cancelled { reason },
                    None,
                    false,
                )
                .await;
            }
            return;
        }
        Ok(Started::Running) => active.count("LEASED", "RUNNING"),
    }
    if run_permit.is_none() {
        run_permit = shared.run_slots.clone().acquire_owned().await.ok();
    }
    active.hold_run_slot(run_permit);
    active.mark_running();
    let fail_permanently = |error: StepError| async move {
        finish(
            queue,
            active,
            Outcome::Failed {
                error: attempt_error(&error),
                backoff: Duration::ZERO,
                cleanup_needed: false,
            },
            None,
        )
        .await;
    };
    let start_index = match start_index {
        Ok(i) => i,
        Err(message) => {
            fail_permanently(StepError::permanent(message).with_kind("resume")).await;
            return;
        }
    };
    let input = match runner.decode(&lease.input) {
        Ok(input) => input,
        Err(message) => {
            fail_permanently(StepError::permanent(message).with_kind("input")).await;
            return;
        }
    };
    let mut previous = lease.last_output.clone();
    let mut last_completed: Option<&'static str> =
        start_index.checked_sub(1).map(|i| steps[i].name);

    for (index, spec) in steps.iter().enumerate().skip(start_index) {
        // phase A: check at the step boundary
        if let Some(why) = active.why() {
            end_stopped(
                runner,
                queue,
                active,
                input.as_ref(),
                why,
                last_completed,
                false,
            )
            .await;
            return;
        }
        if shared.stop_at_boundary.is_cancelled() {
            let reason = match last_completed {
                Some(step) => {
                    format!("worker shutting down: stopped at the step boundary after {step}")
                }
                None => "worker shutting down: stopped before the first step".to_owned(),
            };
            finish(
                queue,
                active,
                Outcome::Interrupted {
                    reason,
                    cleanup_needed: false,
                },
                None,
            )
            .await;
            return;
        }
        let ctx = StepContext::new(active.shared.clone(), spec.name);
        let step_span = info_span!("step", step = spec.name, index);
        let started = std::time::Instant::now();
        let run = run_step(
            shared,
            runner,
            active,
            index,
            &ctx,
            input.as_ref(),
            previous.as_deref(),
            spec.timeout,
        )
        .instrument(step_span)
        .await;
        // a step that gave up because it saw a cancel is a cancelled attempt, cut mid-way
        let run = match (run, active.why()) {
            (StepRun::Failed(_), Some(why)) => StepRun::Stopped(why),
            (run, _) => run,
        };
        let outcome = match &run {
            StepRun::Done(_) => "ok",
            StepRun::Failed(_) => "failed",
            StepRun::Stopped(_) => "stopped",
        };
        shared
            .metrics
            .step_seconds
            .get_or_create(&crate::metrics::StepLabels {
                pipeline: lease.pipeline.clone(),
                step: spec.name.to_owned(),
                outcome: outcome.to_owned(),
            })
            .observe(started.elapsed().as_secs_f64());
        match run {
            StepRun::Done(output) => {
                let next = steps.get(index + 1).map(|s| s.name);
                if next.is_none() {
                    // the last step: its checkpoint and the finish go in one operation
                    debug!(step = spec.name, elapsed = ?started.elapsed(), "step completed");
                    finish(queue, active, Outcome::Succeeded, Some((spec.name, output))).await;
                    return;
                }
                match holder_call(active, "checkpoint", || {
                    queue.checkpoint(lease, spec.name, &output, next)
                })
                .await
                {
                    Err(Gone::Lost) => return,
                    Ok(Some(reason)) => active.stop(StopWhy::Cancel(reason)),
                    Ok(None) => {}
                }
                debug!(step = spec.name, elapsed = ?started.elapsed(), "step completed");
                previous = Some(output);
                last_completed = Some(spec.name);
            }
            StepRun::Failed(error) => {
                let policy = spec.retry.unwrap_or(runner.options().retry);
                let retryable = error.retryable && lease.attempt < policy.max_attempts;
                let backoff = policy.backoff(lease.attempt, unit_random());
                warn!(step = spec.name, %error, retryable, "step failed");
                let mut recorded = attempt_error(&error);
                recorded.retryable = retryable;
                recorded.message = format!("step {} failed: {}", spec.name, error.message);
                finish(
                    queue,
                    active,
                    Outcome::Failed {
                        error: recorded,
                        backoff,
                        cleanup_needed: false,
                    },
                    None,
                )
                .await;
                run_cleanup(
                    runner,
                    active,
                    input.as_ref(),
                    CleanupReason::Failed(error),
                    last_completed,
                    false,
                )
                .await;
                return;
            }
            StepRun::Stopped(why) => {
                end_stopped(
                    runner,
                    queue,
                    active,
                    input.as_ref(),
                    why,
                    last_completed,
                    true,
                )
                .await;
                return;
            }
        }
    }
    finish(queue, active, Outcome::Succeeded, None).await;
}

fn attempt_error(error: &StepError) -> AttemptError {
    AttemptError {
        kind: error.kind.clone(),
        message: error.message.clone(),
        retryable: error.retryable,
    }
}

/// Ends an attempt that was told to stop: cancelled, lost, or shut down.
async fn end_stopped(
    runner: &dyn Runner,
    queue: &Settler,
    active: &ActiveJob,
    input: &AnyInput,
    why: StopWhy,
    last_completed: Option<&'static str>,
    cut: bool,
) {
    match why {
        StopWhy::Lost(reason) => {
            warn!(%reason, "lease lost: stopped the attempt and wrote nothing more");
        }
        StopWhy::Shutdown => {
            let reason = match last_completed {
                Some(step) => {
                    format!("worker shut down past its grace period; last completed step {step}")
                }
                None => {
                    "worker shut down past its grace period before any step completed".to_owned()
                }
            };
            finish(
                queue,
                active,
                Outcome::Interrupted {
                    reason: reason.clone(),
                    cleanup_needed: cut,
                },
                None,
            )
            .await;
            if cut {
                // a step was cut mid-way and the attempt ended FAILED (kind `interrupted`):
                // the cleanup hook is told, as after any failed attempt
                let error = StepError::retryable(reason).with_kind("interrupted");
                run_cleanup(
                    runner,
                    active,
                    input,
                    CleanupReason::Failed(error),
                    last_completed,
                    cut,
                )
                .await;
            }
        }
        StopWhy::Cancel(reason) => {
            info!(%reason, cut, "cancel honoured");
            finish(
                queue,
                active,
                Outcome::Cancelled {
                    reason: reason.clone(),
                    cleanup_needed: cut,
                },
                None,
            )
            .await;
            run_cleanup(
                runner,
                active,
                input,
                CleanupReason::Cancelled { reason },
                last_completed,
                cut,
            )
            .await;
        }
    }
}

async fn finish(
    queue: &Settler,
    active: &ActiveJob,
    outcome: Outcome,
    last_step: Option<(&'static str, String)>,
) {
    let lease = &active.lease;
    match holder_call(active, "finish", || {
        queue.finish(lease, &outcome, last_step.clone())
    })
    .await
    {
        Ok(Finished::Ended(state)) => {
            active.count("RUNNING", state.as_str());
            info!(%state, "attempt ended")
        }
        Ok(Finished::Retrying {
            attempt,
            not_before,
        }) => {
            active.count("RUNNING", "FAILED");
            active.count("FAILED", "QUEUED");
            info!(
                next_attempt = attempt,
                not_before, "attempt failed; a new attempt is queued"
            )
        }
        Err(Gone::Lost) => {}
    }
}

async fn run_cleanup(
    runner: &dyn Runner,
    active: &ActiveJob,
    input: &AnyInput,
    reason: CleanupReason,
    last_completed: Option<&'static str>,
    cut: bool,
) {
    let ctx = CleanupContext {
        job: active.lease.job.clone(),
        attempt: active.lease.attempt,
        reason,
        last_completed_step: last_completed,
        cut_mid_step: cut,
    };
    let hook = AssertUnwindSafe(runner.cleanup(&ctx, input)).catch_unwind();
    match tokio::time::timeout(Duration::from_secs(300), hook).await {
        Ok(Ok(())) => debug!("cleanup hook ran"),
        Ok(Err(_)) => warn!("cleanup hook panicked"),
        Err(_) => warn!("cleanup hook did not finish within 300 s"),
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".to_owned()
    }
}

/// Runs one step with its timeout, catching panics, and honouring the job's
/// cancellation token: once it fires, the step gets the cancel grace period to
/// return on its own, then it is dropped (phase B).
#[allow(clippy::too_many_arguments)]
async fn run_step(
    shared: &Shared,
    runner: &dyn Runner,
    active: &ActiveJob,
    index: usize,
    ctx: &StepContext,
    input: &AnyInput,
    previous: Option<&str>,
    timeout: Option<Duration>,
) -> StepRun {
    let step = AssertUnwindSafe(runner.run_step(index, ctx, input, previous)).catch_unwind();
    let timed = async {
        match timeout {
            Some(limit) => tokio::time::timeout(limit, step).await.ok(),
            None => Some(step.await),
        }
    };
    tokio::pin!(timed);
    let classify =
        |r: Option<Result<Result<String, StepError>, Box<dyn std::any::Any + Send>>>| match r {
            Some(Ok(Ok(output))) => StepRun::Done(output),
            Some(Ok(Err(error))) => StepRun::Failed(error),
            Some(Err(panic)) => StepRun::Failed(
                StepError::permanent(format!(
                    "step {} panicked: {}",
                    ctx.step(),
                    panic_message(panic.as_ref())
                ))
                .with_kind("panic"),
            ),
            None => StepRun::Failed(
                StepError::retryable(format!(
                    "step {} timed out after {:?}",
                    ctx.step(),
                    timeout.unwrap_or_default()
                ))
                .with_kind("timeout"),
            ),
        };
    tokio::select! {
        r = &mut timed => classify(r),
        _ = active.token().cancelled() => {
            let grace = tokio::time::sleep(shared.cancel_grace);
            tokio::pin!(grace);
            tokio::select! {
                r = &mut timed => match classify(r) {
                    // it finished its work anyway: keep the result, the boundary check handles the cancel
                    StepRun::Done(output) if !active.is_lost() => StepRun::Done(output),
                    _ => StepRun::Stopped(active.why().unwrap_or(StopWhy::Shutdown)),
                },
                _ = &mut grace => {
                    warn!(grace = ?shared.cancel_grace, "step ignored its cancellation: dropped");
                    StepRun::Stopped(active.why().unwrap_or(StopWhy::Shutdown))
                }
            }
        }
    }
}

/// How long a worker's claim on a cleanup hook lasts: longer than the hook may
/// run ([`CLEANUP_HOOK_LIMIT`]), so a live worker's hook never runs twice.
pub(crate) const CLEANUP_CLAIM: Duration = Duration::from_secs(600);

/// Longest a cleanup hook of a resolved STALE job may run.
const CLEANUP_HOOK_LIMIT: Duration = Duration::from_secs(300);

/// Runs the cleanup hook of a STALE job an operator resolved as FAILED or
/// CANCELLED, read by the caller.
pub(crate) async fn cleanup_after_resolve(runner: &dyn Runner, job: crate::record::Job) {
    let id = &job.id;
    let input = match runner.decode(&job.input.to_string()) {
        Ok(input) => input,
        Err(e) => {
            error!(job = %id, error = %e, "cannot decode a resolved job's input: its cleanup hook cannot run");
            return;
        }
    };
    let record = job.attempts.iter().rev().find(|a| a.resolution.is_some());
    let reason = record
        .and_then(|a| a.resolution.as_ref())
        .map(|r| format!("{} (resolved by {})", r.reason, r.by))
        .unwrap_or_else(|| "resolved after STALE".to_owned());
    let last_completed = job
        .last_step
        .as_deref()
        .and_then(|name| runner.steps().iter().find(|s| s.name == name))
        .map(|s| s.name);
    let ctx = CleanupContext {
        job: job.id.clone(),
        attempt: job.attempt,
        reason: CleanupReason::ResolvedAfterStale { reason },
        last_completed_step: last_completed,
        cut_mid_step: true,
    };
    let hook = AssertUnwindSafe(runner.cleanup(&ctx, input.as_ref())).catch_unwind();
    match tokio::time::timeout(CLEANUP_HOOK_LIMIT, hook).await {
        Ok(Ok(())) => info!(job = %id, "cleanup hook ran after the STALE job was resolved"),
        Ok(Err(_)) => warn!(job = %id, "cleanup hook panicked"),
        Err(_) => warn!(job = %id, "cleanup hook did not finish within 300 s"),
    }
}

impl Settler {
    async fn start(&self, lease: &Arc<Lease>, first_step: &'static str) -> Result<Started, Error> {
        match self.call(lease, Request::Start { first_step }).await? {
            HolderReply::Started(s) => Ok(s),
            other => Err(mismatch("start", &other)),
        }
    }

    async fn checkpoint(
        &self,
        lease: &Arc<Lease>,
        step: &'static str,
        output: &str,
        next_step: Option<&'static str>,
    ) -> Result<Option<String>, Error> {
        let request = Request::Checkpoint {
            step,
            output: output.to_owned(),
            next_step,
        };
        match self.call(lease, request).await? {
            HolderReply::Checkpointed(c) => Ok(c),
            other => Err(mismatch("checkpoint", &other)),
        }
    }

    async fn finish(
        &self,
        lease: &Arc<Lease>,
        outcome: &Outcome,
        last_step: Option<(&'static str, String)>,
    ) -> Result<Finished, Error> {
        let request = Request::Finish {
            outcome: outcome.clone(),
            last_step,
        };
        match self.call(lease, request).await? {
            HolderReply::Finished(f) => Ok(f),
            other => Err(mismatch("finish", &other)),
        }
    }

    async fn release(&self, lease: &Arc<Lease>) -> Result<crate::state::JobState, Error> {
        match self.call(lease, Request::Release).await? {
            HolderReply::Released(state) => Ok(state),
            other => Err(mismatch("release", &other)),
        }
    }
}

fn mismatch(what: &str, reply: &HolderReply) -> Error {
    Error::Protocol {
        script: "settle",
        detail: format!("a {what} got the reply {reply:?}"),
    }
}
