//! What a lease holder does to its jobs, one operation per call: lease, start,
//! checkpoint, renew, finish, release. Each holder operation (and the lease) is
//! a settle call of one, encoded and read by [`crate::wire`] exactly as the
//! worker's batched calls are; the typed calls are those of
//! [`crate::settle::Holder`], which the worker's settler implements too.

use std::time::Duration;

use crate::error::Result;
use crate::lease::{Finished, Lease, Leased, Outcome, Renewal, Started};
use crate::name::check_name;
use crate::queue::Queue;
use crate::settle::{Holder, LeaseRequest};
use crate::state::JobState;
use crate::wire::ops::renew::Renew;

impl Queue {
    /// Leases up to `n` jobs of `pipelines` for `worker`, each for `ttl`. A job
    /// whose fields cannot be read fails the call (the worker's batched calls
    /// report it apart instead: see [`Leased::unreadable`]).
    pub async fn lease(
        &self,
        worker: &str,
        pipelines: &[&str],
        n: usize,
        ttl: Duration,
    ) -> Result<Leased> {
        self.lease_alone(
            LeaseRequest {
                worker,
                pipelines,
                n,
                start: 0,
                first_steps: &[],
            },
            ttl,
        )
        .await
    }

    /// Leases up to `n` jobs like [`Queue::lease`] and starts them in the same
    /// call: each goes QUEUED → RUNNING at the first step of its pipeline
    /// (`first_steps[i]` for `pipelines[i]`), with `leased_at` recorded (read as
    /// its start too: no `started_at` is written) and one `start` event, and
    /// [`Lease::started`] set. A job
    /// with a completed step to resume from is leased but not started: its
    /// holder finds its next step and calls [`Queue::start`]. A holder that dies
    /// before running the step leaves the job RUNNING, so it is swept STALE.
    pub async fn lease_and_start(
        &self,
        worker: &str,
        pipelines: &[&str],
        first_steps: &[&str],
        n: usize,
        ttl: Duration,
    ) -> Result<Leased> {
        self.lease_alone(
            LeaseRequest {
                worker,
                pipelines,
                n,
                start: n,
                first_steps,
            },
            ttl,
        )
        .await
    }

    /// A settle call of `request` alone, strict about unreadable jobs.
    async fn lease_alone(&self, request: LeaseRequest<'_>, ttl: Duration) -> Result<Leased> {
        check_name("worker id", request.worker)?;
        Ok(self
            .settle_with(&[], Some(request), ttl, false)
            .await?
            .leased)
    }

    /// LEASED → RUNNING, or → CANCELLED when a cancel was requested before the start.
    pub async fn start(&self, lease: &Lease, first_step: &str) -> Result<Started> {
        Holder::start(self, lease, first_step).await
    }

    /// Records `step` as completed with `output` (JSON text): appends it to the
    /// job's outputs list, where it counts once the attempt's end seals it
    /// (an accepted checkpoint always does). Returns the reason of a pending
    /// cancel request, if any. It does not renew the lease: [`Queue::renew`] does.
    pub async fn checkpoint(
        &self,
        lease: &Lease,
        step: &str,
        output: &str,
        next_step: Option<&str>,
    ) -> Result<Option<String>> {
        Holder::checkpoint(self, lease, step, output, next_step).await
    }

    /// Renews many leases in one call; one [`Renewal`] per lease, in order.
    pub async fn renew(&self, leases: &[&Lease]) -> Result<Vec<Renewal>> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        self.run(&Renew { leases }).await
    }

    /// Ends the current attempt. A retryable failure with attempts left queues a new attempt,
    /// unless a cancel was requested: then the attempt ends FAILED and the request stands.
    pub async fn finish(&self, lease: &Lease, outcome: &Outcome) -> Result<Finished> {
        Holder::finish(self, lease, outcome, None, ()).await
    }

    /// LEASED → QUEUED: hands an unstarted job back (graceful shutdown). When a
    /// cancel was requested meanwhile, LEASED → CANCELLED instead. Returns the new state.
    pub async fn release(&self, lease: &Lease) -> Result<JobState> {
        Holder::release(self, lease).await
    }
}
