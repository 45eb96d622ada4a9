//! How an attempt ends: at a step boundary (a cancel, a lost lease, a
//! shutdown), abandoned before a step past its local deadline, stopped in
//! flight, failed for good, or finished; and the cleanup hook that follows a
//! failed or cancelled attempt. Each writes through one holder operation.

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use tracing::{debug, info, warn};

use super::{attempt_error, Attempt};
use crate::lease::{Finished, Outcome};
use crate::pipeline::runner::AnyInput;
use crate::pipeline::{CleanupContext, CleanupReason, StepError, StopWhy};
use crate::worker::holder_call::{holder_call, Gone};
use crate::worker::watchdog;

/// How long an abandoned attempt waits for its one try to record why.
const ABANDON_RECORD_WAIT: Duration = Duration::from_secs(10);

impl Attempt<'_> {
    /// Ends the attempt FAILED, with no retry.
    pub(super) async fn fail_permanently(&self, error: StepError) {
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

    /// At a step boundary: ends the attempt if it was told to stop (cancel,
    /// lost lease) or the worker is shutting down; true when it ended.
    pub(super) async fn stopped_at_boundary(
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
    pub(super) async fn abandon_before(
        &self,
        step: &'static str,
        last_completed: Option<&'static str>,
    ) {
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
        let sent = self
            .settler
            .finish_sealing(lease, &outcome, None, None, active.appended());
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

    /// Ends an attempt that was told to stop: cancelled, lost, or shut down.
    pub(super) async fn end_stopped(
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
    pub(super) async fn finish(&self, outcome: Outcome, last_step: Option<(&'static str, String)>) {
        let active = self.active;
        let lease = &active.lease;
        // the lease slot goes with the first try: the call carrying it can lease the next job
        let slot = std::sync::Mutex::new(active.take_lease_slot());
        match holder_call(active, "finish", || {
            let slot = slot.lock().ok().and_then(|mut s| s.take());
            let last_step = last_step.as_ref().map(|(s, o)| (*s, o.as_str()));
            self.settler
                .finish_sealing(lease, &outcome, last_step, slot, active.appended())
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
    pub(super) async fn run_cleanup(
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
