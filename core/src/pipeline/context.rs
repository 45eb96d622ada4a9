//! What a running step sees of its job: the context (id, attempt, fence,
//! cancellation, the lease's local deadline, limits), the cleanup hook's
//! context, and why a step must stop.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::id::JobId;

use super::step_error::StepError;

/// Why a cleanup hook runs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CleanupReason {
    /// The attempt failed.
    Failed(StepError),
    /// The attempt was cancelled.
    Cancelled {
        /// The cancel reason.
        reason: String,
    },
    /// An operator resolved a STALE job.
    ResolvedAfterStale {
        /// The operator's reason.
        reason: String,
    },
}

/// What a cleanup hook is told.
#[derive(Debug, Clone)]
pub struct CleanupContext {
    /// The job.
    pub job: JobId,
    /// The attempt.
    pub attempt: u32,
    /// Why the hook runs.
    pub reason: CleanupReason,
    /// The last step that completed, if any.
    pub last_completed_step: Option<&'static str>,
    /// Whether a step was cut mid-way.
    pub cut_mid_step: bool,
}

/// Shared state behind a [`StepContext`].
#[derive(Debug)]
pub(crate) struct StepShared {
    pub(crate) job: JobId,
    pub(crate) attempt: u32,
    pub(crate) fence: u64,
    pub(crate) worker: String,
    pub(crate) cancel: CancellationToken,
    pub(crate) cancel_reason: std::sync::Mutex<Option<String>>,
    /// The job's queue and its pipeline's declared rate, for `limit` (none when detached).
    pub(crate) limits: Option<(crate::queue::Queue, Option<crate::flow::Rate>)>,
    /// The job's lease (pipeline, resource, input, TTL, token), when a worker holds it.
    pub(crate) lease: Option<Arc<crate::lease::Lease>>,
    /// Why the job must stop, once it must (set with the cancellation token).
    pub(crate) why: std::sync::Mutex<Option<StopWhy>>,
    /// The cancel grace the running step asked for, in ms (0: the worker's):
    /// a process step's kill grace, so the worker does not drop it first.
    pub(crate) grace_ms: std::sync::atomic::AtomicU64,
    /// The worker's metrics (a process step's progress), when a worker holds the job.
    pub(crate) metrics: Option<Arc<crate::metrics::Metrics>>,
    /// The lease's local clock, for [`StepContext::lease_valid`].
    pub(crate) lease_clock: crate::lease_clock::LeaseClock,
}

/// A named rate limiter as a step uses it (see [`StepContext::limit`]).
#[derive(Debug)]
pub struct Limiter<'a> {
    ctx: &'a StepContext,
    name: String,
    rate: Option<crate::flow::Rate>,
}

impl Limiter<'_> {
    /// Uses `rate` instead of the pipeline's declared rate.
    #[must_use]
    pub fn at(mut self, rate: crate::flow::Rate) -> Self {
        self.rate = Some(rate);
        self
    }

    /// Takes `n` tokens, waiting (on Redis time) until the limiter allows
    /// them; a cancel of the job ends the wait with an error.
    pub async fn acquire(&self, n: u32) -> crate::error::Result<()> {
        let Some((queue, declared)) = &self.ctx.shared.limits else {
            return Err(crate::error::Error::InvalidArgument(
                "a detached step context has no rate limiter".into(),
            ));
        };
        let rate = self.rate.or(*declared).ok_or_else(|| {
            crate::error::Error::InvalidArgument(format!(
                "limiter {}: the pipeline declares no rate (use .at(rate))",
                self.name
            ))
        })?;
        tokio::select! {
            r = queue.acquire_rate(&self.name, rate, n) => r,
            () = self.ctx.cancelled() => Err(crate::error::Error::InvalidArgument(format!(
                "limiter {}: the job was cancelled while waiting",
                self.name
            ))),
        }
    }
}

/// What a running step can see: its job, its fence for sinks, and its cancellation.
#[derive(Debug, Clone)]
pub struct StepContext {
    shared: Arc<StepShared>,
    step: &'static str,
}

impl StepContext {
    /// A context for tests and for running a step outside a worker.
    pub fn detached(job: JobId, attempt: u32, fence: u64, step: &'static str) -> Self {
        StepContext {
            shared: Arc::new(StepShared {
                job,
                attempt,
                fence,
                worker: "detached".into(),
                cancel: CancellationToken::new(),
                cancel_reason: std::sync::Mutex::new(None),
                limits: None,
                lease: None,
                why: std::sync::Mutex::new(None),
                grace_ms: std::sync::atomic::AtomicU64::new(0),
                metrics: None,
                lease_clock: crate::lease_clock::LeaseClock::detached(),
            }),
            step,
        }
    }

    /// The rate limiter `name` (for example `shop-api:acme`), at the rate the
    /// pipeline declares (`#[pipeline(rate = "10/s")]`): the same limiter that
    /// rate-limits starts of jobs naming it, so a step that makes many calls
    /// to one quota takes its tokens from it.
    ///
    /// ```no_run
    /// # async fn step(ctx: &leasehold_core::StepContext) -> Result<(), leasehold_core::StepError> {
    /// for page in 0..5 {
    ///     ctx.limit("shop-api:acme")
    ///         .acquire(1)
    ///         .await
    ///         .map_err(leasehold_core::StepError::retryable)?;
    ///     // ... one call to the API
    /// #   let _ = page;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn limit(&self, name: &str) -> Limiter<'_> {
        Limiter {
            ctx: self,
            name: name.to_owned(),
            rate: None,
        }
    }

    pub(crate) fn new(shared: Arc<StepShared>, step: &'static str) -> Self {
        StepContext { shared, step }
    }

    /// The job's lease, when a worker holds it (none when detached).
    pub(crate) fn lease(&self) -> Option<&Arc<crate::lease::Lease>> {
        self.shared.lease.as_ref()
    }

    /// The job's queue, when a worker holds it.
    pub(crate) fn queue(&self) -> Option<&crate::queue::Queue> {
        self.shared.limits.as_ref().map(|(queue, _)| queue)
    }

    /// The worker's metrics, when a worker holds the job.
    pub(crate) fn metrics(&self) -> Option<&Arc<crate::metrics::Metrics>> {
        self.shared.metrics.as_ref()
    }

    /// Why the job must stop, once it must.
    pub(crate) fn stop_why(&self) -> Option<StopWhy> {
        self.shared.why.lock().ok().and_then(|w| w.clone())
    }

    /// The lease's local clock (its deadline and renewals).
    pub(crate) fn lease_clock(&self) -> &crate::lease_clock::LeaseClock {
        &self.shared.lease_clock
    }

    /// Asks the worker for `grace` between the cancellation token firing and
    /// the step being dropped (the worker's cancel grace when longer).
    pub(crate) fn request_grace(&self, grace: Duration) {
        let ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        self.shared
            .grace_ms
            .store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// The cancel grace the running step asked for, if any.
    pub(crate) fn requested_grace(&self) -> Option<Duration> {
        match self
            .shared
            .grace_ms
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    /// The job.
    pub fn job(&self) -> &JobId {
        &self.shared.job
    }
    /// The attempt number.
    pub fn attempt(&self) -> u32 {
        self.shared.attempt
    }
    /// The fencing number of this attempt's lease: pass it to sinks, which must
    /// reject writes with a lower fence than one they already accepted.
    pub fn fence(&self) -> u64 {
        self.shared.fence
    }
    /// True while this attempt's lease is valid by the worker's own clock:
    /// not known lost, and not past its local deadline (the sending of the
    /// last call that confirmed the lease, plus its TTL, minus the safety
    /// margin the worker's cut-off check uses), read now on the monotonic
    /// clock. No Redis call: cheap enough to call right before every side
    /// effect. A detached context is always valid.
    ///
    /// It does not prove the lease is still held (a worker frozen just after
    /// this call may wake past its deadline): pair it with the
    /// [fence](StepContext::fence) in the write itself, as
    /// [`StepContext::fence_while_valid`] shows.
    ///
    /// ```
    /// use leasehold_core::{JobId, StepContext};
    ///
    /// // a context outside a worker holds no real lease: it is always valid
    /// let ctx = StepContext::detached(JobId::new(), 1, 7, "load");
    /// assert!(ctx.lease_valid());
    /// assert_eq!(ctx.fence_while_valid().ok(), Some(7));
    /// ```
    pub fn lease_valid(&self) -> bool {
        self.shared.lease_clock.valid_now()
    }

    /// Marks the lease lost, as the watchdog does (for unit tests of what a
    /// step does then).
    #[cfg(test)]
    pub(crate) fn mark_lease_lost(&self) {
        self.shared.lease_clock.mark_lost();
    }

    /// The fence, only while [`lease_valid`](StepContext::lease_valid) holds:
    /// hand it to a fenced sink in the same breath as the write. Past the
    /// local deadline (or once the lease is known lost) it fails with a
    /// `lease_lost` error, which ends the step; nothing the step returns
    /// after its lease is lost is recorded.
    ///
    /// A fenced sink stores the highest fence it accepted per resource and
    /// refuses a write with a lower one. It does **not** refuse a late write
    /// of an old holder as long as no newer holder has written yet: this check,
    /// taken just before the write, is what keeps a holder whose lease ran out
    /// from writing at all.
    ///
    /// ```no_run
    /// # use leasehold_core::{StepContext, StepError};
    /// # async fn upsert(_fence: u64, _rows: &[u8]) -> Result<(), std::io::Error> { Ok(()) }
    /// # async fn step(ctx: &StepContext, rows: &[u8]) -> Result<(), StepError> {
    /// let fence = ctx.fence_while_valid()?;
    /// // the sink refuses the write if it already holds one with a higher fence
    /// upsert(fence, rows).await.map_err(StepError::retryable)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn fence_while_valid(&self) -> Result<u64, StepError> {
        if self.lease_valid() {
            Ok(self.shared.fence)
        } else {
            Err(StepError::retryable(
                "the lease is past its local deadline or lost: no write may be made under it",
            )
            .with_kind("lease_lost"))
        }
    }

    /// The worker instance running the step.
    pub fn worker(&self) -> &str {
        &self.shared.worker
    }
    /// The step's name.
    pub fn step(&self) -> &'static str {
        self.step
    }
    /// True once a cancel was requested or the lease was lost.
    pub fn is_cancelled(&self) -> bool {
        self.shared.cancel.is_cancelled()
    }
    /// Completes when a cancel is requested or the lease is lost: select on it
    /// to stop long work early (phase B).
    ///
    /// What the step returns after it fired decides the outcome. Returning an
    /// error (for example [`StepContext::check_cancelled`]'s) honours the cancel:
    /// the attempt ends CANCELLED. Returning `Ok` means the step finished its
    /// work anyway: the worker checkpoints it, and if it was the last step the job
    /// ends SUCCEEDED with the cancel request kept but not honoured — `show`, the
    /// dashboard and the `finish` event say "the job completed first". (A step
    /// that is not the last is stopped at its checkpoint and the attempt ends
    /// CANCELLED.) Return `Ok` after a cancel only when the work is complete and
    /// its results should stand; when the lease was lost instead, nothing the
    /// step returns is recorded.
    pub async fn cancelled(&self) {
        self.shared.cancel.cancelled().await
    }
    /// The cancellation token itself, for passing down.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.shared.cancel.clone()
    }
    /// Why the step is being cancelled, once it is.
    pub fn cancel_reason(&self) -> Option<String> {
        self.shared
            .cancel_reason
            .lock()
            .map(|r| r.clone())
            .unwrap_or(None)
    }
    /// Fails with a `cancelled` error if a cancel is pending: a cheap check between units of work.
    pub fn check_cancelled(&self) -> Result<(), StepError> {
        if self.is_cancelled() {
            Err(
                StepError::permanent(self.cancel_reason().unwrap_or_else(|| "cancelled".into()))
                    .with_kind("cancelled"),
            )
        } else {
            Ok(())
        }
    }
}

/// Why a job's cancellation token fired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StopWhy {
    /// An operator asked to cancel (phase B).
    Cancel(String),
    /// The lease is gone (swept, re-leased, or we were cut off past its deadline): write nothing more.
    Lost(String),
    /// The worker's shutdown grace period ran out.
    Shutdown,
}
