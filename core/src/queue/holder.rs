//! What a lease holder does to its jobs, one operation per call: lease, start,
//! checkpoint, renew, finish, release. Each holder operation (and the lease) is
//! a settle call of one, encoded and read by [`crate::wire`] exactly as the
//! worker's batched calls are.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::lease::{Finished, Lease, Leased, Outcome, Renewal, Started};
use crate::name::check_name;
use crate::queue::Queue;
use crate::settle::{HolderOp, HolderReply, LeaseRequest};
use crate::state::JobState;
use crate::wire::args::{bool_arg, lock_ttl, millis};
use crate::wire::reply::Reply;
use crate::wire::scripts;

/// The error for a settle reply of the wrong kind (never sent by the script).
fn mismatched(op: &str, reply: &HolderReply) -> Error {
    Error::Protocol {
        script: "settle",
        detail: format!("{op}: unexpected reply {reply:?}"),
    }
}

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
    /// (`first_steps[i]` for `pipelines[i]`), with `leased_at` and `started_at`
    /// both recorded and one `start` event, and [`Lease::started`] set. A job
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
        match self
            .settle_one(HolderOp::Start { lease, first_step })
            .await?
        {
            HolderReply::Started(started) => Ok(started),
            other => Err(mismatched("start", &other)),
        }
    }

    /// Records `step` as completed with `output` (JSON text), renews the lease, and
    /// returns the reason of a pending cancel request, if any.
    pub async fn checkpoint(
        &self,
        lease: &Lease,
        step: &str,
        output: &str,
        next_step: Option<&str>,
    ) -> Result<Option<String>> {
        let op = HolderOp::Checkpoint {
            lease,
            step,
            output,
            next_step,
        };
        match self.settle_one(op).await? {
            HolderReply::Checkpointed(cancel) => Ok(cancel),
            other => Err(mismatched("checkpoint", &other)),
        }
    }

    /// Renews many leases in one call; one [`Renewal`] per lease, in order.
    pub async fn renew(&self, leases: &[&Lease]) -> Result<Vec<Renewal>> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let ttl = leases.iter().map(|l| l.ttl).max().unwrap_or_default();
        let mut inv = self.invocation(&scripts::RENEW);
        inv.arg(millis(ttl)).arg(lock_ttl(ttl));
        for lease in leases {
            inv.key(self.keys().job(lease.job.as_str()))
                .key(match &lease.resource {
                    Some(res) => self.keys().lock(res),
                    None => self.keys().job(lease.job.as_str()),
                });
            inv.arg(&lease.token)
                .arg(bool_arg(lease.resource.is_some()));
        }
        let mut reply = Reply::new("renew", self.invoke(&inv).await?)?;
        let mut out = Vec::with_capacity(leases.len());
        for lease in leases {
            let status = reply.text()?;
            let renewal = if status == "OK" {
                Renewal::Held
            } else if let Some(reason) = status.strip_prefix("CANCEL:") {
                Renewal::CancelRequested {
                    reason: reason.to_owned(),
                }
            } else if let Some(state) = status.strip_prefix("LOST:") {
                Renewal::Lost {
                    state: state.parse().ok(),
                }
            } else {
                return Err(Error::Protocol {
                    script: "renew",
                    detail: format!("unknown status {status:?} for job {}", lease.job),
                });
            };
            out.push(renewal);
        }
        Ok(out)
    }

    /// Ends the current attempt. A retryable failure with attempts left queues a new attempt,
    /// unless a cancel was requested: then the attempt ends FAILED and the request stands.
    pub async fn finish(&self, lease: &Lease, outcome: &Outcome) -> Result<Finished> {
        let op = HolderOp::Finish {
            lease,
            outcome,
            last_step: None,
        };
        match self.settle_one(op).await? {
            HolderReply::Finished(finished) => Ok(finished),
            other => Err(mismatched("finish", &other)),
        }
    }

    /// LEASED → QUEUED: hands an unstarted job back (graceful shutdown). When a
    /// cancel was requested meanwhile, LEASED → CANCELLED instead. Returns the new state.
    pub async fn release(&self, lease: &Lease) -> Result<JobState> {
        match self.settle_one(HolderOp::Release { lease }).await? {
            HolderReply::Released(state) => Ok(state),
            other => Err(mismatched("release", &other)),
        }
    }
}
