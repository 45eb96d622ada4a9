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
//! retried on transient Redis failures while the lease may still be ours
//! (`holder_call.rs`). How an attempt ends (at a boundary, stopped, finished,
//! abandoned, its cleanup hook) is in `ending.rs`.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::OwnedSemaphorePermit;
use tracing::{debug, info, info_span, warn, Instrument};

mod ending;

use crate::lease::{Lease, Outcome, Started};
use crate::metrics::StepLabels;
use crate::pipeline::runner::{AnyInput, Runner};
use crate::pipeline::StopWhy;
use crate::pipeline::{CleanupReason, StepContext, StepError, StepSpec};
use crate::queue::Queue;
use crate::record::AttemptError;
use crate::settle::Holder as _;
use crate::worker::active::ActiveJob;
use crate::worker::holder_call::{holder_call, Gone};
use crate::worker::settler::Settler;
use crate::worker::shared::Shared;
use crate::worker::step::{run_step, StepRun};

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
        let next = self.runner.steps().get(index + 1).map(|s| s.name);
        if next.is_none() {
            // the last step: its checkpoint and the finish go in one operation
            debug!(step = spec.name, elapsed = ?started.elapsed(), "step completed");
            self.finish(Outcome::Succeeded, Some((spec.name, output)))
                .await;
            return AfterStep::Ended;
        }
        // an append, not a renewal: the heartbeat alone renews the lease; the
        // finish seals what the attempt appended. Sent without waiting: the
        // next step runs meanwhile, and the settler keeps the attempt's later
        // operations behind it; its reply stops the job on a cancel or a lost
        // lease (the next boundary, or the running step's token, sees it).
        // as `holder_call` checks before a send
        if !active.is_lost() && active.expired_locally(Instant::now()) {
            crate::worker::watchdog::expire(active, Instant::now());
        }
        if let Some(StopWhy::Lost(reason)) = active.why() {
            warn!(%reason, "checkpoint not sent: the lease is lost; the attempt writes nothing more");
            return AfterStep::Ended;
        }
        active.mark_appended();
        if let Err(e) = self.settler.append(active, spec.name, output.clone(), next) {
            warn!(error = %e, "checkpoint not sent; stopping this attempt without writing");
            active.stop(StopWhy::Lost(e.to_string()));
            return AfterStep::Ended;
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
        warn!(
            step = spec.name,
            error = %crate::visible::visible_line(&error.to_string()),
            retries_exhausted,
            "step failed"
        );
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
}
