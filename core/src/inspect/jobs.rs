//! Jobs by state (paged listings) and one job's full story.

use std::collections::HashSet;

use deadpool_redis::redis;

use super::LockInfo;
use super::{
    cancel_status, verdicts, Inspector, JobDetail, JobFilter, JobPage, JobSummary, LockClaim, Page,
    CHUNK, MAX_EXAMINED,
};
use crate::error::Result;
use crate::flow::{describe_wait, PauseScope};
use crate::id::JobId;
use crate::state::JobState;

impl Inspector {
    /// Jobs matching `filter`, newest first (by `updated_at`; for terminal jobs
    /// that is the end time), paged. Reads only the indexes for the states asked
    /// for: `ready`/`delayed`/`parked` for QUEUED (only those of `filter.pipeline`
    /// or `filter.resource` when given), `leases` for LEASED and RUNNING, `stale`
    /// for STALE, and `done` newest first for terminal states, stopping once the
    /// page is full. At most [`MAX_EXAMINED`] entries are read.
    pub async fn list_jobs(&self, filter: &JobFilter, page: Page) -> Result<JobPage> {
        let mut conn = self.conn().await?;
        let keys = self.keys();
        let wants = |s: JobState| filter.state.is_none_or(|f| f == s);
        let matches = |s: &JobSummary| {
            wants(s.state)
                && filter.pipeline.as_ref().is_none_or(|p| *p == s.pipeline)
                && filter
                    .resource
                    .as_ref()
                    .is_none_or(|r| s.resource.as_ref() == Some(r))
                && filter
                    .worker
                    .as_ref()
                    .is_none_or(|w| s.worker.as_ref() == Some(w))
        };
        let mut truncated = false;
        let mut budget = MAX_EXAMINED;
        // jobs that cannot be read are left out and reported
        let mut bad = Vec::new();

        // live jobs: every index entry, since their indexes are not ordered by time
        let mut index_keys = Vec::new();
        if wants(JobState::Queued) && filter.worker.is_none() {
            let pipelines = match &filter.pipeline {
                Some(p) => vec![p.clone()],
                None => self.pipelines_on(&mut conn, &mut bad).await?,
            };
            for p in &pipelines {
                index_keys.push(keys.ready(p));
                index_keys.push(keys.delayed(p));
            }
            let resources: Vec<String> = match &filter.resource {
                Some(r) => vec![r.clone()],
                None => {
                    self.timed(
                        redis::cmd("SMEMBERS")
                            .arg(keys.parked_resources())
                            .query_async(&mut conn),
                    )
                    .await?
                }
            };
            for r in &resources {
                index_keys.push(keys.parked(r));
            }
            // jobs waiting for a flow-control slot (of the resource asked for, or all)
            let gates: Vec<String> = match &filter.resource {
                Some(r) => vec![format!("slots:{r}")],
                None => {
                    self.timed(
                        redis::cmd("SMEMBERS")
                            .arg(format!("{}:waiting", keys.base()))
                            .query_async(&mut conn),
                    )
                    .await?
                }
            };
            for g in &gates {
                index_keys.push(format!("{}:waiting:{g}", keys.base()));
            }
        }
        if wants(JobState::Leased) || wants(JobState::Running) {
            index_keys.push(keys.leases());
        }
        if wants(JobState::Stale) {
            index_keys.push(keys.stale());
        }
        let mut seen = HashSet::new();
        let mut live_ids = Vec::new();
        for key in &index_keys {
            let (ids, more) = self.zrange_capped(&mut conn, key, budget).await?;
            budget -= ids.len();
            truncated |= more;
            for id in ids {
                // a pause marker heading a ready set is not a job
                if !id.starts_with('{') && seen.insert(id.clone()) {
                    live_ids.push(id);
                }
            }
        }
        let mut examined = MAX_EXAMINED - budget;
        let mut jobs: Vec<JobSummary> = self
            .summaries(&mut conn, &live_ids, &mut bad)
            .await?
            .into_iter()
            .filter(|s| !s.state.is_terminal() && matches(s))
            .collect();

        // terminal jobs: walk `done` from the newest until the page is full
        let need = page.offset.saturating_add(page.limit);
        let mut terminal_exhausted = true;
        if JobState::ALL.iter().any(|s| s.is_terminal() && wants(*s)) {
            terminal_exhausted = false;
            let mut rank = 0usize;
            let mut found = 0usize;
            while found < need {
                if examined >= MAX_EXAMINED {
                    truncated = true;
                    break;
                }
                let n = CHUNK.min(MAX_EXAMINED - examined);
                let ids: Vec<String> = self
                    .timed(
                        redis::cmd("ZREVRANGE")
                            .arg(keys.done())
                            .arg(rank)
                            .arg(rank + n - 1)
                            .query_async(&mut conn),
                    )
                    .await?;
                rank += ids.len();
                examined += ids.len();
                let fresh: Vec<String> = ids
                    .iter()
                    .filter(|id| seen.insert((*id).clone()))
                    .cloned()
                    .collect();
                for s in self.summaries(&mut conn, &fresh, &mut bad).await? {
                    if s.state.is_terminal() && matches(&s) {
                        found += 1;
                        jobs.push(s);
                    }
                }
                if ids.len() < n {
                    terminal_exhausted = true;
                    break;
                }
            }
        }

        jobs.sort_by(|a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| b.id.cmp(&a.id))
        });
        let total = jobs.len();
        let jobs: Vec<JobSummary> = jobs
            .into_iter()
            .skip(page.offset)
            .take(page.limit)
            .collect();
        let quarantined: u64 = if filter.state.is_none() {
            self.timed(
                redis::cmd("ZCARD")
                    .arg(keys.quarantine())
                    .query_async(&mut conn),
            )
            .await?
        } else {
            0
        };
        Ok(JobPage {
            jobs,
            examined,
            has_more: total > need || !terminal_exhausted,
            truncated,
            unreadable: bad,
            quarantined,
        })
    }

    /// Everything about one job (`None` when it does not exist): the record
    /// with every attempt (a STALE attempt's built from the hash, as
    /// [`Job::stale_attempt_from_hash`](crate::Job::stale_attempt_from_hash)
    /// says), the lock of its resource, what became of a cancel request, the
    /// verdicts, and its events.
    pub async fn job_detail(&self, id: &JobId) -> Result<Option<JobDetail>> {
        let Some(mut job) = self.queue().job(id).await? else {
            return Ok(None);
        };
        // a STALE attempt's record, as it will be kept once an operator decides
        if let Some(stale) = job.stale_attempt_from_hash() {
            job.attempts.push(stale);
        }
        let mut conn = self.conn().await?;
        let now = self.now_on(&mut conn).await?;
        let lock = match &job.resource {
            Some(r) => {
                let claims = if matches!(
                    job.state,
                    JobState::Leased | JobState::Running | JobState::Stale
                ) {
                    vec![LockClaim {
                        job: job.id.clone(),
                        state: job.state,
                    }]
                } else {
                    Vec::new()
                };
                self.lock_infos(&mut conn, vec![(r.clone(), claims)])
                    .await?
                    .pop()
            }
            None => None,
        };
        let (flow, waiting_field): (Option<String>, Option<String>) = redis::cmd("HMGET")
            .arg(self.keys().job(id.as_str()))
            .arg("flow")
            .arg("waiting")
            .query_async(&mut conn)
            .await?;
        drop(conn);
        let waiting = if job.state == JobState::Queued {
            self.why_waiting(&job, lock.as_ref(), waiting_field.as_deref(), now)
                .await?
        } else {
            None
        };
        let events = self.events_of(id, Some(job.created_at)).await?;
        let quarantine = self.queue().quarantine_entry(id.as_str()).await?;
        Ok(Some(JobDetail {
            now,
            cancel: cancel_status(&job),
            verdicts: verdicts(&job),
            job,
            lock,
            events,
            quarantine,
            flow,
            waiting,
        }))
    }

    /// Why QUEUED `job` is not running, in words (see [`JobDetail::waiting`]).
    async fn why_waiting(
        &self,
        job: &crate::record::Job,
        lock: Option<&LockInfo>,
        waiting: Option<&str>,
        now: i64,
    ) -> Result<Option<String>> {
        for p in self.queue().pauses().await? {
            let hit = match &p.scope {
                PauseScope::Queue => true,
                PauseScope::Pipeline(name) => *name == job.pipeline,
            };
            if hit {
                let what = match &p.scope {
                    PauseScope::Queue => format!("queue {}", self.queue().name()),
                    PauseScope::Pipeline(name) => format!("pipeline {name}"),
                };
                return Ok(Some(format!(
                    "paused ({what}) since {} by {}{}",
                    p.since,
                    p.by,
                    if p.reason.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", p.reason)
                    }
                )));
            }
        }
        if let Some(l) = lock {
            if let Some(h) = l.holder.as_ref().filter(|h| **h != job.id) {
                return Ok(Some(format!("locked by job {h} (resource {})", l.resource)));
            }
        }
        if let Some(w) = waiting {
            return Ok(Some(describe_wait(w, Some(now))));
        }
        if job.not_before > now {
            return Ok(Some(format!("delayed until {}", job.not_before)));
        }
        Ok(None)
    }
}
