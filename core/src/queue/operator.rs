//! What operators (and the sweeper) do to jobs they do not hold: cancel,
//! recover expired leases, retry, resolve a STALE job, and purge.

use deadpool_redis::redis;

use crate::error::{Error, Result};
use crate::id::JobId;
use crate::lease::{Cancelled, RetryMode, SweepReport};
use crate::name::check_name;
use crate::queue::Queue;
use crate::state::JobState;
use crate::wire::ops::cancel::Cancel;
use crate::wire::ops::delete::Delete;
use crate::wire::ops::purge::Purge;
use crate::wire::ops::resolve::Resolve;
use crate::wire::ops::retry::Retry;
use crate::wire::ops::run_now::RunNow;
use crate::wire::ops::sweep::Sweep;

impl Queue {
    /// Reads the pipeline and resource of a job (immutable once created), to name its keys.
    async fn routing(&self, job: &str) -> Result<(String, Option<String>)> {
        let mut conn = self.conn().await?;
        let key = self.keys.job(job);
        let (pipeline, resource): (Option<String>, Option<String>) = self
            .timed(
                redis::cmd("HMGET")
                    .arg(&key)
                    .arg("pipeline")
                    .arg("resource")
                    .query_async(&mut conn),
            )
            .await?;
        let pipeline = pipeline.ok_or_else(|| Error::NotFound {
            queue: self.name().to_owned(),
            job: job.to_owned(),
        })?;
        check_name("pipeline name", &pipeline).map_err(|e| Error::Corrupt {
            key: key.clone(),
            field: "pipeline".into(),
            problem: e.to_string(),
        })?;
        Ok((pipeline, resource.filter(|r| !r.is_empty())))
    }

    /// Cancels a job: at once when QUEUED; a recorded request when LEASED or RUNNING.
    pub async fn cancel(&self, job: &JobId, reason: &str, by: &str) -> Result<Cancelled> {
        if reason.is_empty() {
            return Err(Error::InvalidArgument("a cancel needs a reason".into()));
        }
        let (pipeline, resource) = self.routing(job.as_str()).await?;
        self.run(&Cancel {
            job,
            pipeline: &pipeline,
            resource: resource.as_deref(),
            reason,
            by,
        })
        .await
    }

    /// Recovers up to `batch` expired leases (see docs/design.md, "Recovery").
    pub async fn sweep(&self, batch: usize) -> Result<SweepReport> {
        self.sweep_with(batch, false).await
    }

    /// Reports what a sweep would do, changing nothing.
    pub async fn sweep_dry_run(&self, batch: usize) -> Result<SweepReport> {
        self.sweep_with(batch, true).await
    }

    async fn sweep_with(&self, batch: usize, dry_run: bool) -> Result<SweepReport> {
        self.run(&Sweep { batch, dry_run }).await
    }

    /// Operator retry: a new attempt in QUEUED for a FAILED, CANCELLED or STALE job.
    /// Returns the new attempt's number.
    pub async fn retry(&self, job: &JobId, mode: RetryMode, by: &str, reason: &str) -> Result<u32> {
        let (pipeline, resource) = self.routing(job.as_str()).await?;
        self.run(&Retry {
            job,
            pipeline: &pipeline,
            resource: resource.as_deref(),
            mode,
            by,
            reason,
        })
        .await
    }

    /// Operator decision on a STALE job: FAILED, CANCELLED or SUCCEEDED, with a reason.
    pub async fn resolve(
        &self,
        job: &JobId,
        as_state: JobState,
        by: &str,
        reason: &str,
    ) -> Result<()> {
        if !as_state.is_terminal() {
            return Err(Error::InvalidArgument(format!(
                "a STALE job resolves to SUCCEEDED, FAILED or CANCELLED, not {as_state}"
            )));
        }
        if reason.trim().is_empty() {
            return Err(Error::InvalidArgument(
                "resolving a STALE job needs a reason".into(),
            ));
        }
        let (_, resource) = self.routing(job.as_str()).await?;
        self.run(&Resolve {
            job,
            resource: resource.as_deref(),
            to: as_state,
            by,
            reason,
        })
        .await
    }

    /// Deletes a terminal job (SUCCEEDED, FAILED or CANCELLED) now, as
    /// retention would later: its record, attempt records and index entries
    /// (a group child is counted purged). Recorded as a `delete` event with
    /// `by` and `reason` (not empty). Returns the state it had; a job in
    /// another state is refused ([`Error::ActionRefused`]).
    pub async fn delete_job(&self, job: &JobId, by: &str, reason: &str) -> Result<JobState> {
        if reason.trim().is_empty() {
            return Err(Error::InvalidArgument(
                "deleting a job needs a reason".into(),
            ));
        }
        self.run(&Delete { job, by, reason }).await
    }

    /// Makes a delayed QUEUED job due now: the next lease takes it as any due
    /// job (its flow gates and resource lock still apply) and idle workers of
    /// its pipeline are woken. Recorded as a `run_now` event with `by` and
    /// `reason`. Returns the not-before it had (ms); a job that is not QUEUED
    /// or not delayed is refused ([`Error::ActionRefused`]).
    pub async fn run_now(&self, job: &JobId, by: &str, reason: &str) -> Result<i64> {
        let (pipeline, _) = self.routing(job.as_str()).await?;
        self.run(&RunNow {
            job,
            pipeline: &pipeline,
            by,
            reason,
        })
        .await
    }

    /// Deletes up to `batch` terminal jobs beyond the retention policy; returns how many.
    pub async fn purge(&self, batch: usize) -> Result<u64> {
        self.run(&Purge { batch }).await
    }
}
