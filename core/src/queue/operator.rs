//! What operators (and the sweeper) do to jobs they do not hold: cancel,
//! recover expired leases, retry, resolve a STALE job, and purge.

use deadpool_redis::redis::{self, Value};

use crate::error::{Error, Result};
use crate::id::JobId;
use crate::lease::{Cancelled, RetryMode, SweepReport, SweptJob};
use crate::name::check_name;
use crate::queue::Queue;
use crate::state::JobState;
use crate::transitions::Op;
use crate::wire::args::bool_arg;
use crate::wire::reply::Reply;
use crate::wire::scripts;

impl Queue {
    /// The lock and parked-set keys of `resource`, or the job key twice when it has none.
    fn lock_keys(&self, job: &str, resource: Option<&str>) -> [String; 2] {
        match resource {
            Some(res) => [self.keys.lock(res), self.keys.parked(res)],
            None => [self.keys.job(job), self.keys.job(job)],
        }
    }

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
        let mut inv = self.invocation(&scripts::CANCEL);
        inv.key(self.keys.job(job.as_str()))
            .key(self.keys.ready(&pipeline))
            .key(self.keys.delayed(&pipeline))
            .key(match &resource {
                Some(r) => self.keys.parked(r),
                None => self.keys.job(job.as_str()),
            });
        inv.arg(reason)
            .arg(by)
            .arg(resource.as_deref().unwrap_or(""));
        let mut reply = Reply::new("cancel", self.invoke(&inv).await?)?;
        let parse_state = |reply: &mut Reply| -> Result<JobState> {
            let s = reply.text()?;
            s.parse().map_err(|_| Error::Protocol {
                script: "cancel",
                detail: format!("unknown state {s:?}"),
            })
        };
        match reply.text()?.as_str() {
            "CANCELLED" => Ok(Cancelled::Now),
            "REQUESTED" => Ok(Cancelled::Requested {
                state: parse_state(&mut reply)?,
            }),
            "ALREADY_REQUESTED" => Ok(Cancelled::AlreadyRequested {
                state: parse_state(&mut reply)?,
                reason: reply.text()?,
            }),
            status => Err(self.refusal(
                "cancel",
                Op::Cancel,
                job.as_str(),
                Some(JobState::Cancelled),
                status,
                &mut reply,
            )),
        }
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
        let mut inv = self.invocation(&scripts::SWEEP);
        inv.arg(batch.max(1)).arg(bool_arg(dry_run));
        let mut reply = Reply::new("sweep", self.invoke(&inv).await?)?;
        let mut report = SweepReport {
            requeued: reply.int()?,
            cancelled: reply.int()?,
            stale: reply.int()?,
            unparked: reply.int()?,
            purged: reply.int()?,
            moves: Vec::new(),
        };
        while reply.remaining() > 0 {
            let job = JobId::parse(&reply.text()?)?;
            let mut state = || -> Result<JobState> {
                let s = reply.text()?;
                s.parse().map_err(|_| Error::Protocol {
                    script: "sweep",
                    detail: format!("unknown state {s:?}"),
                })
            };
            let from = state()?;
            let to = state()?;
            report.moves.push(SweptJob { job, from, to });
        }
        Ok(report)
    }

    /// Operator retry: a new attempt in QUEUED for a FAILED, CANCELLED or STALE job.
    /// Returns the new attempt's number.
    pub async fn retry(&self, job: &JobId, mode: RetryMode, by: &str, reason: &str) -> Result<u32> {
        let (pipeline, resource) = self.routing(job.as_str()).await?;
        let mut inv = self.invocation(&scripts::RETRY);
        let [lock, parked] = self.lock_keys(job.as_str(), resource.as_deref());
        inv.key(self.keys.job(job.as_str()))
            .key(self.keys.ready(&pipeline))
            .key(self.keys.wake(&pipeline))
            .key(lock)
            .key(parked);
        inv.arg(match mode {
            RetryMode::Resume => "resume",
            RetryMode::FromStart => "start",
        })
        .arg(by)
        .arg(reason)
        .arg(resource.as_deref().unwrap_or(""));
        let mut reply = Reply::new("retry", self.invoke(&inv).await?)?;
        match reply.text()?.as_str() {
            "OK" => reply.int(),
            "INPUT_KEY_TAKEN" => Err(Error::InputKeyTaken {
                job: job.to_string(),
                holder: reply.text()?,
            }),
            status => Err(self.refusal(
                "retry",
                Op::Retry,
                job.as_str(),
                Some(JobState::Queued),
                status,
                &mut reply,
            )),
        }
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
        let mut inv = self.invocation(&scripts::RESOLVE);
        let [lock, parked] = self.lock_keys(job.as_str(), resource.as_deref());
        inv.key(self.keys.job(job.as_str()))
            .key(self.keys.cleanup())
            .key(lock)
            .key(parked);
        inv.arg(as_state.as_str())
            .arg(by)
            .arg(reason)
            .arg(resource.as_deref().unwrap_or(""));
        let mut reply = Reply::new("resolve", self.invoke(&inv).await?)?;
        match reply.text()?.as_str() {
            "OK" => Ok(()),
            status => Err(self.refusal(
                "resolve",
                Op::Resolve,
                job.as_str(),
                Some(as_state),
                status,
                &mut reply,
            )),
        }
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
        let mut inv = self.invocation(&scripts::DELETE);
        inv.key(self.keys.job(job.as_str()));
        inv.arg(by).arg(reason);
        let mut reply = Reply::new("delete", self.invoke(&inv).await?)?;
        let status = reply.text()?;
        self.action_reply("delete", job, &status, &mut reply, "only a SUCCEEDED, FAILED or CANCELLED job is deleted; cancel it, or wait for it to end")
    }

    /// Makes a delayed QUEUED job due now: the next lease takes it as any due
    /// job (its flow gates and resource lock still apply) and idle workers of
    /// its pipeline are woken. Recorded as a `run_now` event with `by` and
    /// `reason`. Returns the not-before it had (ms); a job that is not QUEUED
    /// or not delayed is refused ([`Error::ActionRefused`]).
    pub async fn run_now(&self, job: &JobId, by: &str, reason: &str) -> Result<i64> {
        let (pipeline, _) = self.routing(job.as_str()).await?;
        let mut inv = self.invocation(&scripts::RUN_NOW);
        inv.key(self.keys.job(job.as_str()))
            .key(self.keys.delayed(&pipeline))
            .key(self.keys.wake(&pipeline));
        inv.arg(by).arg(reason);
        let mut reply = Reply::new("run_now", self.invoke(&inv).await?)?;
        match reply.text()?.as_str() {
            "OK" => {
                let was = reply.text()?;
                was.parse().map_err(|_| Error::Protocol {
                    script: "run_now",
                    detail: format!("not a time: {was:?}"),
                })
            }
            "NOT_DELAYED" => Err(Error::ActionRefused {
                job: job.to_string(),
                state: JobState::Queued,
                action: "run now",
                why: "it is not delayed: it is due already",
            }),
            status => {
                let status = status.to_owned();
                self.action_reply(
                    "run now",
                    job,
                    &status,
                    &mut reply,
                    "only a delayed QUEUED job is run now",
                )
                .map(|_| 0)
            }
        }
    }

    /// The answer of an operator action outside the state model (`delete`,
    /// `run now`): `{'OK', state}`, or its refusal as an error.
    fn action_reply(
        &self,
        action: &'static str,
        job: &JobId,
        status: &str,
        reply: &mut Reply,
        why: &'static str,
    ) -> Result<JobState> {
        let state = |reply: &mut Reply| -> Result<JobState> {
            let text = reply.text()?;
            text.parse().map_err(|_| Error::Corrupt {
                key: self.keys.job(job.as_str()),
                field: "state".into(),
                problem: format!("unknown state {text:?}"),
            })
        };
        match status {
            "OK" => state(reply),
            "REFUSED" => Err(Error::ActionRefused {
                job: job.to_string(),
                state: state(reply)?,
                action,
                why,
            }),
            // NOT_FOUND and CORRUPT as every operator script answers them (the
            // op is named only by refusals, which are ActionRefused here)
            status => {
                let script = if action == "delete" {
                    "delete"
                } else {
                    "run_now"
                };
                Err(self.refusal(script, Op::Cancel, job.as_str(), None, status, reply))
            }
        }
    }

    /// Deletes up to `batch` terminal jobs beyond the retention policy; returns how many.
    pub async fn purge(&self, batch: usize) -> Result<u64> {
        let mut inv = self.invocation(&scripts::PURGE);
        inv.arg(batch.max(1));
        match self.invoke(&inv).await? {
            Value::Int(n) => Ok(u64::try_from(n).unwrap_or(0)),
            other => Err(Error::Protocol {
                script: "purge",
                detail: format!("expected an integer, got {other:?}"),
            }),
        }
    }
}
