//! One attempt at a leased job, run as a job task of its own.
//!
//! Steps of an attempt:
//! - waits for a run slot (a prefetched job waits here, LEASED); a job not yet
//!   started when shutdown begins is handed back;
//! - starts the job (LEASED → RUNNING) at the step after its last completed
//!   one; a job cancelled before it started ends there (phase A). A job the
//!   lease call started already (into a free run slot) skips both;
//! - runs the steps in order (see `step.rs` for one step's time limit, panics
//!   and cancel grace), checkpointing each; the last step's checkpoint and the
//!   finish go in one operation;
//! - at each step boundary, honours a cancel, a lost lease or a shutdown;
//! - ends with a truthful finish: succeeded, failed (retried per the retry
//!   policy), cancelled or interrupted; writes nothing once the lease is lost;
//! - runs the pipeline's cleanup hook after a failed or cancelled attempt.
//!
//! Every holder operation goes through the lease group's `Settler` and is
//! retried on transient Redis failures while the lease may still be ours.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use tokio::sync::OwnedSemaphorePermit;
use tracing::{debug, info, info_span, warn, Instrument};

use super::active::ActiveJob;
use super::runner::{AnyInput, Runner};
use super::settler::Settler;
use super::shared::Shared;
use super::step::{run_step, StepRun};
use super::watchdog;
use crate::error::Error;
use crate::lease::{Finished, Lease, Outcome, Started};
use crate::metrics::StepLabels;
use crate::pipeline::StopWhy;
use crate::pipeline::{CleanupContext, CleanupReason, StepContext, StepError, StepSpec};
use crate::queue::Queue;
use crate::record::AttemptError;
use crate::settle::Holder as _;

/// A holder operation that could not be completed.
enum Gone {
    /// The lease is lost: the job moved on without us. Write nothing more.
    Lost,
}

/// Calls a holder operation, retrying transient Redis failures while the lease
/// may still be ours; sends nothing once the lease is lost (a renewal or a
/// refusal said so, or its local deadline passed: see `watchdog.rs`).
async fn holder_call<T, F, Fut>(active: &ActiveJob, what: &str, mut op: F) -> Result<T, Gone>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    let mut backoff = Duration::from_millis(50);
    // checked here, synchronously, not only by the watchdog's timer: a worker
    // that wakes from a freeze runs this before the watchdog has looked
    if !active.is_lost() && active.expired_locally(Instant::now()) {
        watchdog::expire(active, Instant::now());
    }
    if let Some(StopWhy::Lost(reason)) = active.why() {
        // the lease is gone or past its local deadline: a write now would be
        // refused at best (stale token), and could hang on a cut-off connection
        warn!(%reason, "{what} not sent: the lease is lost; the attempt writes nothing more");
        return Err(Gone::Lost);
    }
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
                if active.is_lost() || active.expired_locally(Instant::now()) {
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

/// How long an abandoned attempt waits for its one try to record why.
const ABANDON_RECORD_WAIT: Duration = Duration::from_secs(10);

/// A number in 0..1 for jitter.
fn unit_random() -> f64 {
    fastrand::f64()
}

/// The slots a leased job holds when its task begins.
pub(crate) struct Slots {
    /// Its lease slot, held until its final operation is sent.
    pub(crate) lease: Option<OwnedSemaphorePermit>,
    /// A run slot taken for it before the lease call (always, for a job that
    /// call started).
    pub(crate) run: Option<OwnedSemaphorePermit>,
}

/// Runs one attempt at a leased job, from its run slot to its final operation,
/// holding the job in the worker's active jobs meanwhile; `leased_at` is when
/// the call that leased it was sent (its local deadline counts from there).
pub(crate) async fn run(
    shared: Arc<Shared>,
    runner: Arc<dyn Runner>,
    queue: Queue,
    settler: Settler,
    lease: Lease,
    leased_at: Instant,
    slots: Slots,
) {
    let name = queue.name().to_owned();
    let rate = runner.options().flow.rate.and_then(|r| r.parse().ok());
    let active = ActiveJob::new(
        lease,
        name,
        &shared.id,
        leased_at,
        shared.metrics.clone(),
        Some((queue, rate)),
    );
    active.hold_lease_slot(slots.lease);
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
    // the job's spans join the trace that enqueued it (`otel` feature)
    if let Some(tp) = &active.lease.traceparent {
        crate::trace::join(&span, tp);
    }
    let attempt = Attempt {
        shared: &shared,
        runner: runner.as_ref(),
        settler: &settler,
        active: &active,
    };
    attempt.execute(slots.run).instrument(span).await;
    active.hold_run_slot(None);
    active.hold_lease_slot(None);
    gauge.dec();
    shared.active.remove(&active.lease.job);
}

/// What one attempt works with.
struct Attempt<'a> {
    /// The worker's shared state.
    shared: &'a Shared,
    /// The job's pipeline.
    runner: &'a dyn Runner,
    /// Where the attempt's holder operations go.
    settler: &'a Settler,
    /// The held job.
    active: &'a Arc<ActiveJob>,
}

/// Whether an attempt goes on after a step completed.
enum AfterStep {
    /// On to the next step, with this step's output.
    Next(String),
    /// The attempt has ended.
    Ended,
}

fn attempt_error(error: &StepError) -> AttemptError {
    AttemptError {
        kind: error.kind.clone(),
        message: error.message.clone(),
        retryable: error.retryable,
        retries_exhausted: false,
    }
}

impl Attempt<'_> {
    /// The attempt, from its run slot (`run_permit` when one was taken for it
    /// before the lease) to its final operation.
    async fn execute(&self, run_permit: Option<OwnedSemaphorePermit>) {
        let start_index = self.resume_index();
        let run_permit = if self.active.lease.started {
            // the lease call started it, at its first step, in the run slot taken for it
            self.active.count("LEASED", "RUNNING");
            run_permit
        } else {
            let run_permit = match run_permit {
                Some(p) => Some(p),
                None => self.wait_for_run_slot().await,
            };
            if self.shared.stop_leasing.is_cancelled() {
                // never started: hand it back
                self.hand_back().await;
                return;
            }
            let first = start_index
                .as_ref()
                .ok()
                .and_then(|i| self.runner.steps().get(*i))
                .map_or("", |s| s.name);
            if !self.start(first).await {
                return;
            }
            run_permit
        };
        self.hold_run_slot(run_permit).await;
        self.run_from(start_index).await;
    }

    /// Runs the started attempt from `start_index` (or fails it when that
    /// cannot be found, or its input cannot be read).
    async fn run_from(&self, start_index: Result<usize, String>) {
        let start_index = match start_index {
            Ok(i) => i,
            Err(message) => {
                self.fail_permanently(StepError::permanent(message).with_kind("resume"))
                    .await;
                return;
            }
        };
        let input = match self.runner.decode(&self.active.lease.input) {
            Ok(input) => input,
            Err(message) => {
                self.fail_permanently(StepError::permanent(message).with_kind("input"))
                    .await;
                return;
            }
        };
        self.run_steps(input.as_ref(), start_index).await;
    }

    /// A run slot first (a prefetched job waits here, LEASED); a shutdown hands
    /// the job back, and a cancel or a lost lease goes on to the start, which
    /// ends it. `None` when it stopped waiting without a slot.
    async fn wait_for_run_slot(&self) -> Option<OwnedSemaphorePermit> {
        tokio::select! {
            p = self.shared.run_slots.clone().acquire_owned() => p.ok(),
            _ = self.shared.stop_leasing.cancelled() => None,
            _ = self.active.token().cancelled() => None,
        }
    }

    /// Hands back a job that never started (the worker is shutting down).
    async fn hand_back(&self) {
        let lease = &self.active.lease;
        if let Ok(state) = holder_call(self.active, "release", || self.settler.release(lease)).await
        {
            self.active.count("LEASED", state.as_str());
            info!(%state, "handed back: worker shutting down");
        }
    }

    /// The index of the step to run first: the one after the last completed
    /// step, or an error if that step is not one of the pipeline's.
    fn resume_index(&self) -> Result<usize, String> {
        let steps = self.runner.steps();
        match &self.active.lease.last_step {
            None => Ok(0),
            Some(name) => steps
                .iter()
                .position(|s| s.name == name)
                .map(|i| i + 1)
                .ok_or_else(|| {
                    format!(
                        "the last completed step {name:?} is not a step of pipeline {}",
                        self.runner.name()
                    )
                }),
        }
    }

    /// LEASED → RUNNING at `first_step`; true when the job now runs. A job
    /// cancelled before it started ends here (phase A), after its cleanup hook.
    async fn start(&self, first_step: &'static str) -> bool {
        let active = self.active;
        let lease = &active.lease;
        match holder_call(active, "start", || self.settler.start(lease, first_step)).await {
            Err(Gone::Lost) => false,
            Ok(Started::Cancelled { reason }) => {
                active.count("LEASED", "CANCELLED");
                info!(%reason, "cancelled before it started (phase A)");
                // nothing ran in this attempt: cleanup only if an earlier attempt left work behind
                if let Ok(input) = self.runner.decode(&lease.input) {
                    self.run_cleanup(
                        input.as_ref(),
                        CleanupReason::Cancelled { reason },
                        None,
                        false,
                    )
                    .await;
                }
                false
            }
            Ok(Started::Running) => {
                active.count("LEASED", "RUNNING");
                true
            }
        }
    }

    /// Keeps the job's run slot (waiting for one if it started without) and
    /// records that it runs from now.
    async fn hold_run_slot(&self, run_permit: Option<OwnedSemaphorePermit>) {
        let run_permit = match run_permit {
            Some(permit) => Some(permit),
            None => self.shared.run_slots.clone().acquire_owned().await.ok(),
        };
        self.active.hold_run_slot(run_permit);
    }

    /// Ends the attempt FAILED, with no retry.
    async fn fail_permanently(&self, error: StepError) {
        self.finish(
            Outcome::Failed {
                error: attempt_error(&error),
                backoff: Duration::ZERO,
                cleanup_needed: false,
            },
            None,
        )
        .await;
    }

    /// Runs the steps from `start_index` on until the attempt ends.
    async fn run_steps(&self, input: &AnyInput, start_index: usize) {
        let steps = self.runner.steps();
        let mut previous = self.active.lease.last_output.clone();
        let mut last_completed: Option<&'static str> =
            start_index.checked_sub(1).map(|i| steps[i].name);
        for (index, spec) in steps.iter().enumerate().skip(start_index) {
            // the lease's local deadline, checked synchronously before anything
            // of the step runs (a worker woken from a freeze may get here before
            // its watchdog or heartbeat has looked; if they looked first, the
            // deadline has still passed)
            if self.active.expired_locally(Instant::now()) {
                self.abandon_before(spec.name, last_completed).await;
                return;
            }
            // phase A: check at the step boundary
            if self.stopped_at_boundary(input, last_completed).await {
                return;
            }
            let started = Instant::now();
            match self
                .run_step(index, spec, input, previous.as_deref(), started)
                .await
            {
                StepRun::Done(output) => match self.step_done(index, spec, output, started).await {
                    AfterStep::Next(output) => {
                        previous = Some(output);
                        last_completed = Some(spec.name);
                    }
                    AfterStep::Ended => return,
                },
                StepRun::Failed(error) => {
                    self.step_failed(spec, input, error, last_completed).await;
                    return;
                }
                StepRun::Stopped(why) => {
                    self.end_stopped(input, why, last_completed, true).await;
                    return;
                }
            }
        }
        self.finish(Outcome::Succeeded, None).await;
    }

    /// At a step boundary: ends the attempt if it was told to stop (cancel,
    /// lost lease) or the worker is shutting down; true when it ended.
    async fn stopped_at_boundary(
        &self,
        input: &AnyInput,
        last_completed: Option<&'static str>,
    ) -> bool {
        if let Some(why) = self.active.why() {
            self.end_stopped(input, why, last_completed, false).await;
            return true;
        }
        if self.shared.stop_at_boundary.is_cancelled() {
            let reason = match last_completed {
                Some(step) => {
                    format!("worker shutting down: stopped at the step boundary after {step}")
                }
                None => "worker shutting down: stopped before the first step".to_owned(),
            };
            self.finish(
                Outcome::Interrupted {
                    reason,
                    cleanup_needed: false,
                },
                None,
            )
            .await;
            return true;
        }
        false
    }

    /// Gives up the attempt before `step` began, its lease past the local
    /// deadline: nothing of the step runs. The lease is assumed lost from now
    /// on; one token-compared `finish` (interrupted, so the job gets a new
    /// attempt that resumes after `last_completed`) records why, if Redis
    /// still holds the lease for this attempt; otherwise Redis refuses it and
    /// writes nothing (the sweeper's STALE record stands), which is logged.
    async fn abandon_before(&self, step: &'static str, last_completed: Option<&'static str>) {
        let active = self.active;
        let now = Instant::now();
        let since = now.saturating_duration_since(active.confirmed_at());
        let reason = format!(
            "abandoned before step {step} began: the lease was past its local deadline \
             ({} ms since its last confirmation, TTL {} ms); no step ran in this attempt{}",
            since.as_millis(),
            active.lease.ttl.as_millis(),
            match last_completed {
                Some(s) => format!(" after {s}"),
                None => String::new(),
            }
        );
        if !active.is_lost() {
            watchdog::expire(active, now);
        }
        self.shared
            .metrics
            .steps_abandoned
            .get_or_create(&active.labels())
            .inc();
        let outcome = Outcome::Interrupted {
            reason: reason.clone(),
            cleanup_needed: false,
        };
        let lease = &active.lease;
        active.mark_ending();
        let sent = self.settler.finish(lease, &outcome, None, None);
        match tokio::time::timeout(ABANDON_RECORD_WAIT, sent).await {
            Ok(Ok(Finished::Retrying { attempt, .. })) => {
                active.count("RUNNING", "FAILED");
                active.count("FAILED", "QUEUED");
                warn!(step, next_attempt = attempt, %reason, "attempt abandoned and recorded; a new attempt is queued");
            }
            Ok(Ok(Finished::Ended(state))) => {
                active.count("RUNNING", state.as_str());
                warn!(step, %state, %reason, "attempt abandoned and recorded");
            }
            Ok(Err(e)) => {
                warn!(step, error = %e, %reason, "attempt abandoned; Redis no longer holds the lease for it, so nothing was written");
            }
            Err(_) => {
                warn!(step, %reason, "attempt abandoned; its record could not be written in time, so the sweeper decides");
            }
        }
    }

    /// Runs step `index` (started at `started`) in its span and records its
    /// run time; a step that failed after the job was told to stop counts as stopped.
    async fn run_step(
        &self,
        index: usize,
        spec: &StepSpec,
        input: &AnyInput,
        previous: Option<&str>,
        started: Instant,
    ) -> StepRun {
        let active = self.active;
        let ctx = StepContext::new(active.shared.clone(), spec.name);
        let step_span = info_span!("step", step = spec.name, index);
        let run = run_step(
            self.shared,
            self.runner,
            active,
            index,
            &ctx,
            input,
            previous,
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
        self.shared
            .metrics
            .step_seconds
            .get_or_create(&StepLabels {
                pipeline: active.lease.pipeline.clone(),
                step: spec.name.to_owned(),
                outcome: outcome.to_owned(),
            })
            .observe(started.elapsed().as_secs_f64());
        run
    }

    /// Checkpoints a completed step, or, for the last one, finishes the
    /// attempt with its checkpoint in the same operation.
    async fn step_done(
        &self,
        index: usize,
        spec: &StepSpec,
        output: String,
        started: Instant,
    ) -> AfterStep {
        let active = self.active;
        let lease = &active.lease;
        let next = self.runner.steps().get(index + 1).map(|s| s.name);
        if next.is_none() {
            // the last step: its checkpoint and the finish go in one operation
            debug!(step = spec.name, elapsed = ?started.elapsed(), "step completed");
            self.finish(Outcome::Succeeded, Some((spec.name, output)))
                .await;
            return AfterStep::Ended;
        }
        // a checkpoint renews the lease: its first sending is the (earliest) confirmation time
        let sent_at = Instant::now();
        match holder_call(active, "checkpoint", || {
            self.settler.checkpoint(lease, spec.name, &output, next)
        })
        .await
        {
            Err(Gone::Lost) => return AfterStep::Ended,
            Ok(Some(reason)) => {
                active.renewed(sent_at);
                active.stop(StopWhy::Cancel(reason))
            }
            Ok(None) => active.renewed(sent_at),
        }
        debug!(step = spec.name, elapsed = ?started.elapsed(), "step completed");
        AfterStep::Next(output)
    }

    /// Ends the attempt after a step failed on its own, retryable per the
    /// step's (or pipeline's) retry policy, then runs the cleanup hook.
    async fn step_failed(
        &self,
        spec: &StepSpec,
        input: &AnyInput,
        error: StepError,
        last_completed: Option<&'static str>,
    ) {
        let lease = &self.active.lease;
        let policy = spec.retry.unwrap_or(self.runner.options().retry);
        // the step's verdict is recorded as it gave it; whether the step's own
        // policy has an attempt left is recorded apart (finish also checks the
        // job's max_attempts)
        let retries_exhausted = error.retryable && lease.attempt >= policy.max_attempts;
        let backoff = policy.backoff(lease.attempt, unit_random());
        warn!(step = spec.name, %error, retries_exhausted, "step failed");
        let mut recorded = attempt_error(&error);
        recorded.retries_exhausted = retries_exhausted;
        recorded.message = format!("step {} failed: {}", spec.name, error.message);
        self.finish(
            Outcome::Failed {
                error: recorded,
                backoff,
                cleanup_needed: false,
            },
            None,
        )
        .await;
        self.run_cleanup(input, CleanupReason::Failed(error), last_completed, false)
            .await;
    }

    /// Ends an attempt that was told to stop: cancelled, lost, or shut down.
    async fn end_stopped(
        &self,
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
                        format!(
                            "worker shut down past its grace period; last completed step {step}"
                        )
                    }
                    None => "worker shut down past its grace period before any step completed"
                        .to_owned(),
                };
                self.finish(
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
                    self.run_cleanup(input, CleanupReason::Failed(error), last_completed, cut)
                        .await;
                }
            }
            StopWhy::Cancel(reason) => {
                info!(%reason, cut, "cancel honoured");
                self.finish(
                    Outcome::Cancelled {
                        reason: reason.clone(),
                        cleanup_needed: cut,
                    },
                    None,
                )
                .await;
                self.run_cleanup(
                    input,
                    CleanupReason::Cancelled { reason },
                    last_completed,
                    cut,
                )
                .await;
            }
        }
    }

    /// The attempt's final operation: ends it with `outcome`, after
    /// checkpointing `last_step` (name and output) when given.
    async fn finish(&self, outcome: Outcome, last_step: Option<(&'static str, String)>) {
        let active = self.active;
        let lease = &active.lease;
        // the lease slot goes with the first try: the call carrying it can lease the next job
        let slot = std::sync::Mutex::new(active.take_lease_slot());
        match holder_call(active, "finish", || {
            let slot = slot.lock().ok().and_then(|mut s| s.take());
            let last_step = last_step.as_ref().map(|(s, o)| (*s, o.as_str()));
            self.settler.finish(lease, &outcome, last_step, slot)
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
                    not_before = %crate::record::utc(not_before),
                    "attempt failed; a new attempt is queued"
                )
            }
            Err(Gone::Lost) => {}
        }
    }

    /// Runs the pipeline's cleanup hook for this attempt, for 300 s at most.
    async fn run_cleanup(
        &self,
        input: &AnyInput,
        reason: CleanupReason,
        last_completed: Option<&'static str>,
        cut: bool,
    ) {
        let ctx = CleanupContext {
            job: self.active.lease.job.clone(),
            attempt: self.active.lease.attempt,
            reason,
            last_completed_step: last_completed,
            cut_mid_step: cut,
        };
        let hook = AssertUnwindSafe(self.runner.cleanup(&ctx, input)).catch_unwind();
        match tokio::time::timeout(Duration::from_secs(300), hook).await {
            Ok(Ok(())) => debug!("cleanup hook ran"),
            Ok(Err(_)) => warn!("cleanup hook panicked"),
            Err(_) => warn!("cleanup hook did not finish within 300 s"),
        }
    }
}
