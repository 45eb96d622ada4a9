//! What the pages and the JSON API show, read through `leasehold_core::inspect`.

use std::time::Instant;

use leasehold_core::{
    Event, Inspector, JobDetail, JobFilter, JobId, JobPage, JobState, LockInfo, Page, Queue,
    QueueStatus, Workers,
};
use serde::{Deserialize, Serialize};

use super::error::{DashError, Res};
use super::state::{App, QUEUE_CACHE};
use crate::context::{
    is_master_unreachable, list_jobs_across, reachable_queues, unknown_pipeline, unknown_queue,
    unreachable_queue, Unreachable,
};

/// Most jobs one listing page shows.
pub(super) const MAX_LIMIT: usize = 500;
/// Most events the event feed shows.
pub(super) const MAX_EVENTS: usize = 1_000;

/// What the queues page, `/api/queues` and the metrics show: the queues
/// read, and what could not be read.
pub(crate) struct Overview {
    /// The status of each queue read.
    pub queues: Vec<QueueStatus>,
    /// One entry per cluster master (or queue) that did not answer.
    pub unreachable: Vec<Unreachable>,
}

impl App {
    /// `e` as a request failure, naming the (redacted) Redis URL.
    pub(crate) fn fail(&self, e: leasehold_core::Error) -> DashError {
        DashError::from_core(&self.shown_url, e)
    }

    /// The client of queue `name`.
    pub(crate) fn queue(&self, name: &str) -> Res<Queue> {
        self.base.sibling(name).map_err(|e| self.fail(e))
    }

    /// The inspector of queue `name`.
    pub(crate) fn inspector(&self, name: &str) -> Res<Inspector> {
        Ok(Inspector::new(self.queue(name)?))
    }

    /// Redis `TIME` (ms).
    pub(crate) async fn now(&self) -> Res<leasehold_core::Millis> {
        Inspector::new(self.base.clone())
            .now()
            .await
            .map_err(|e| self.fail(e))
    }

    /// The queues shown: `--queue`, or those found under the prefix (cached briefly).
    pub(crate) async fn queues(&self) -> Res<Vec<String>> {
        Ok(self.reachable_queues().await?.0)
    }

    /// The queues shown, and on a Redis Cluster with a master down (its
    /// replica not promoted yet) one entry per master whose queues could not
    /// be listed: the queues of the masters that answer are still shown, as
    /// `status` shows them.
    pub(crate) async fn reachable_queues(&self) -> Res<(Vec<String>, Vec<Unreachable>)> {
        if !self.pinned.is_empty() {
            return Ok((self.pinned.clone(), Vec::new()));
        }
        let mut cache = self.discovered.lock().await;
        if let Some((at, names, lost)) = cache.as_ref() {
            if at.elapsed() < QUEUE_CACHE {
                return Ok((names.clone(), lost.clone()));
            }
        }
        let (names, lost) = reachable_queues(&self.base, &self.config)
            .await
            .map_err(|e| self.fail(e))?;
        // a listing missing a master's queues is not kept: the next request asks again
        if lost.is_empty() {
            *cache = Some((Instant::now(), names.clone(), lost.clone()));
        }
        Ok((names, lost))
    }

    /// Checks that queue `name` is one the dashboard shows: among `--queue`,
    /// or existing under the prefix; 404 naming the known ones otherwise.
    pub(crate) async fn known_queue(&self, name: &str) -> Res<()> {
        if !self.pinned.is_empty() {
            return match self.pinned.iter().any(|q| q == name) {
                true => Ok(()),
                false => Err(DashError::NotFound(crate::names::unknown(
                    "queue",
                    name,
                    "among the dashboard's --queue",
                    &self.pinned,
                ))),
            };
        }
        match unknown_queue(&self.base, &self.config, name).await {
            Ok(None) => Ok(()),
            Ok(Some(message)) => Err(DashError::NotFound(message)),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// `queue` if given (checked: 404 when unknown), else every queue shown.
    async fn queues_or(&self, queue: Option<&str>) -> Res<Vec<String>> {
        match queue {
            Some(q) => {
                self.queue(q)?;
                self.known_queue(q).await?;
                Ok(vec![q.to_owned()])
            }
            None => self.queues().await,
        }
    }

    /// Every queue at a glance: the status of each queue that can be read,
    /// and on a Redis Cluster with a master down one entry per master or
    /// queue that cannot ("master 127.0.0.1:6712 unreachable: failover in
    /// progress? ..."), as `status` names them. The queues are read at
    /// once, so a master that does not answer delays no other's queues.
    pub(crate) async fn overview(&self) -> Res<Overview> {
        let (names, mut unreachable) = self.reachable_queues().await?;
        let mut queues = Vec::with_capacity(names.len());
        // every queue at once: a queue whose master does not answer delays
        // no other queue's status (nor a scrape of /metrics)
        let mut inspectors = Vec::with_capacity(names.len());
        for q in &names {
            inspectors.push(self.inspector(q)?);
        }
        let read = inspectors.iter().map(|i| async move {
            match i.status().await {
                Ok(s) => Ok(Ok(s)),
                Err(e) if is_master_unreachable(&self.base, &e) => Ok(Err(unreachable_queue(
                    &self.base,
                    &self.config,
                    i.queue().name(),
                    &e,
                )
                .await)),
                Err(e) => Err(e),
            }
        });
        for status in futures_util::future::join_all(read).await {
            match status {
                Ok(Ok(s)) => queues.push(s),
                Ok(Err(lost)) => unreachable.push(lost),
                Err(e) => return Err(self.fail(e)),
            }
        }
        Ok(Overview {
            queues,
            unreachable,
        })
    }

    /// The pipelines of `queues` a name may refer to (`known_pipelines` of
    /// each: published by a worker, or with waiting jobs), sorted.
    pub(crate) async fn known_pipelines(&self, queues: &[String]) -> Res<Vec<String>> {
        let mut pipelines = std::collections::BTreeSet::new();
        for q in queues {
            pipelines.extend(
                self.inspector(q)?
                    .known_pipelines()
                    .await
                    .map_err(|e| self.fail(e))?,
            );
        }
        Ok(pipelines.into_iter().collect())
    }

    /// Jobs of `queue` that ended SUCCEEDED and FAILED this UTC day (the
    /// daily roll-up and the minutes not folded into it yet).
    pub(crate) async fn today(&self, queue: &str) -> Res<(u64, u64)> {
        let h = self
            .inspector(queue)?
            .history_at(leasehold_core::inspect::Granularity::Day, 1)
            .await
            .map_err(|e| self.fail(e))?;
        let counts = h.minutes.iter().flat_map(|m| m.pipelines.values());
        Ok(counts.fold((0, 0), |(ok, failed), c| {
            (ok + c.succeeded, failed + c.failed)
        }))
    }

    /// One page of jobs.
    pub(crate) async fn jobs(&self, query: &JobsQuery) -> Res<JobPage> {
        let names = self.queues_or(query.queue.as_deref()).await?;
        let inspectors = names
            .iter()
            .map(|q| self.inspector(q))
            .collect::<Res<Vec<_>>>()?;
        let page = list_jobs_across(&inspectors, &query.filter, query.page)
            .await
            .map_err(|e| self.fail(e))?;
        if let (true, Some(p)) = (page.jobs.is_empty(), &query.filter.pipeline) {
            if let Some(message) = unknown_pipeline(&inspectors, p)
                .await
                .map_err(|e| self.fail(e))?
            {
                return Err(DashError::NotFound(message));
            }
        }
        Ok(page)
    }

    /// A job's full story, with the lease token redacted; 404 when unknown.
    pub(crate) async fn job(&self, queue: &str, id: &str) -> Res<JobDetail> {
        let id = job_id(id)?;
        let mut detail = self
            .inspector(queue)?
            .job_detail(&id)
            .await
            .map_err(|e| self.fail(e))?
            .ok_or_else(|| DashError::NotFound(format!("job {id} not found in queue {queue}")))?;
        if let Some(lease) = &mut detail.job.lease {
            lease.token = "(redacted)".into();
        }
        Ok(detail)
    }

    /// The records of a job's process steps (exit, cut-off, progress, log
    /// tails); none for a job without process steps.
    pub(crate) async fn process_steps(
        &self,
        queue: &str,
        id: &str,
    ) -> Res<Vec<leasehold_core::process::ProcessRecord>> {
        leasehold_core::process::read_records(&self.queue(queue)?, id)
            .await
            .map_err(|e| self.fail(e))
    }

    /// The queues holding job `id`.
    pub(crate) async fn locate(&self, id: &str) -> Res<Vec<String>> {
        let id = job_id(id)?;
        let mut found = Vec::new();
        for q in self.queues().await? {
            if self
                .queue(&q)?
                .job(&id)
                .await
                .map_err(|e| self.fail(e))?
                .is_some()
            {
                found.push(q);
            }
        }
        Ok(found)
    }

    /// Live workers per queue.
    pub(crate) async fn workers(&self, queue: Option<&str>) -> Res<Vec<QueueWorkers>> {
        let mut out = Vec::new();
        for q in self.queues_or(queue).await? {
            let workers = self
                .inspector(&q)?
                .workers()
                .await
                .map_err(|e| self.fail(e))?;
            out.push(QueueWorkers { queue: q, workers });
        }
        Ok(out)
    }

    /// Locks per queue.
    pub(crate) async fn locks(&self, queue: Option<&str>) -> Res<Vec<QueueLock>> {
        let mut out = Vec::new();
        for q in self.queues_or(queue).await? {
            for lock in self
                .inspector(&q)?
                .locks()
                .await
                .map_err(|e| self.fail(e))?
            {
                out.push(QueueLock {
                    queue: q.clone(),
                    lock,
                });
            }
        }
        Ok(out)
    }

    /// The latest `limit` events, newest first: of one job (its queue given),
    /// or of the queues asked for.
    pub(crate) async fn events(&self, query: &EventsQuery) -> Res<Vec<Event>> {
        let limit = query.limit.clamp(1, MAX_EVENTS);
        let mut events = match &query.job {
            Some(id) => {
                let id = job_id(id)?;
                let queues = match &query.queue {
                    Some(q) => vec![q.clone()],
                    None => self.locate(id.as_str()).await?,
                };
                let mut events = Vec::new();
                for q in queues {
                    events.extend(
                        self.inspector(&q)?
                            .job_events(&id)
                            .await
                            .map_err(|e| self.fail(e))?,
                    );
                }
                events
            }
            None => {
                let mut events = Vec::new();
                for q in self.queues_or(query.queue.as_deref()).await? {
                    events.extend(
                        self.inspector(&q)?
                            .events(None, limit)
                            .await
                            .map_err(|e| self.fail(e))?,
                    );
                }
                events
            }
        };
        events.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| b.id.cmp(&a.id)));
        events.truncate(limit);
        Ok(events)
    }
}

/// Parses a job id from a URL.
pub(super) fn job_id(s: &str) -> Res<JobId> {
    JobId::parse(s).map_err(|e| DashError::BadRequest(e.to_string()))
}

/// Workers of one queue (the JSON of `leasehold workers --json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct QueueWorkers {
    /// Queue.
    pub queue: String,
    /// Its workers.
    #[serde(flatten)]
    pub workers: Workers,
}

/// A lock and its queue (the JSON of `leasehold locks --json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct QueueLock {
    /// Queue.
    pub queue: String,
    /// The lock.
    #[serde(flatten)]
    pub lock: LockInfo,
}

/// Query string of `/jobs` and `/api/jobs`; every field optional, empty means unset.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct JobsParams {
    /// Only this queue.
    pub queue: Option<String>,
    /// Only jobs in this state.
    pub state: Option<String>,
    /// Only jobs of this pipeline.
    pub pipeline: Option<String>,
    /// Only jobs with this resource.
    pub resource: Option<String>,
    /// Only jobs whose current or last attempt ran on this worker.
    pub worker: Option<String>,
    /// Matching jobs to skip.
    pub offset: Option<String>,
    /// Most jobs to show.
    pub limit: Option<String>,
}

/// A parsed job listing request.
#[derive(Debug, Clone)]
pub(crate) struct JobsQuery {
    /// Only this queue (default: every queue shown).
    pub queue: Option<String>,
    /// Which jobs.
    pub filter: JobFilter,
    /// Which of them.
    pub page: Page,
}

fn given(v: &Option<String>) -> Option<String> {
    v.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

fn number(name: &str, v: &Option<String>, default: usize) -> Res<usize> {
    match given(v) {
        None => Ok(default),
        Some(s) => s
            .parse()
            .map_err(|_| DashError::BadRequest(format!("{name} {s:?} is not a number"))),
    }
}

impl JobsParams {
    /// Checks and parses the parameters.
    pub(super) fn parse(&self) -> Res<JobsQuery> {
        let state = match given(&self.state) {
            None => None,
            Some(s) => Some(s.parse::<JobState>().map_err(|_| {
                let names: Vec<&str> = JobState::ALL.iter().map(|s| s.as_str()).collect();
                DashError::BadRequest(format!(
                    "state {s:?} is not a state; one of {}",
                    names.join(", ")
                ))
            })?),
        };
        Ok(JobsQuery {
            queue: given(&self.queue),
            filter: JobFilter {
                state,
                pipeline: given(&self.pipeline),
                resource: given(&self.resource),
                worker: given(&self.worker),
            },
            page: Page {
                offset: number("offset", &self.offset, 0)?,
                limit: number("limit", &self.limit, 50)?.clamp(1, MAX_LIMIT),
            },
        })
    }
}

/// Query string of `/events` and `/api/events`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct EventsParams {
    /// Only this queue.
    pub queue: Option<String>,
    /// Only this job's events.
    pub job: Option<String>,
    /// How many of the latest events.
    pub limit: Option<String>,
}

/// A parsed event feed request.
#[derive(Debug, Clone)]
pub(crate) struct EventsQuery {
    /// Only this queue (default: every queue shown).
    pub queue: Option<String>,
    /// Only this job's events.
    pub job: Option<String>,
    /// How many of the latest events.
    pub limit: usize,
}

impl EventsParams {
    /// Checks and parses the parameters.
    pub(super) fn parse(&self) -> Res<EventsQuery> {
        Ok(EventsQuery {
            queue: given(&self.queue),
            job: given(&self.job),
            limit: number("limit", &self.limit, 100)?.clamp(1, MAX_EVENTS),
        })
    }
}

/// Query string naming one queue.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct QueueParam {
    /// The queue.
    pub queue: Option<String>,
}

impl QueueParam {
    /// The queue, if given.
    pub(super) fn queue(&self) -> Option<String> {
        given(&self.queue)
    }
}
