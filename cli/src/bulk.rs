//! Bulk actions, shared by `leasehold bulk` and the dashboard: retry the FAILED
//! jobs of a pipeline (optionally of one error kind, or ended within a time
//! range), cancel the QUEUED jobs of a pipeline or of a backfill range (input
//! windows starting within it), resolve a set of STALE jobs with one reason,
//! delete terminal jobs of one state. The dashboard's lists select jobs for
//! these by id (checked rows) or by the list's filter (pipeline, resource,
//! worker).
//!
//! [`select`] reads which jobs an action would touch (the dry run shows that
//! count); [`run`] applies it job by job through the same scripts as the single
//! actions (`Queue::retry`, `cancel`, `resolve`, `delete_job`: each job gets its own event and
//! attempt record, with the actor), in batches of [`BATCH`], calling back after
//! each batch. A job whose state changed in between is refused by its script,
//! counted and listed, and the rest go on.

use leasehold_core::inspect::JobSearch;
use leasehold_core::{Error, Inspector, JobFilter, JobId, JobState, Millis, Page, RetryMode};
use serde::Serialize;

/// Most jobs one bulk action touches (run it again for the rest).
pub(crate) const MAX_JOBS: usize = 10_000;
/// Jobs per batch (one progress callback each).
pub(crate) const BATCH: usize = 100;

/// What a bulk action does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BulkAction {
    /// Retry FAILED jobs.
    Retry(RetryMode),
    /// Cancel QUEUED jobs.
    Cancel,
    /// Resolve STALE jobs as this terminal state.
    Resolve(JobState),
    /// Delete terminal jobs in this state (SUCCEEDED, FAILED or CANCELLED).
    Delete(JobState),
}

impl BulkAction {
    /// `retry`, `cancel`, `resolve` or `delete`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            BulkAction::Retry(_) => "retry",
            BulkAction::Cancel => "cancel",
            BulkAction::Resolve(_) => "resolve",
            BulkAction::Delete(_) => "delete",
        }
    }

    /// Whether a run needs a reason (all but retry).
    pub(crate) fn needs_reason(self) -> bool {
        !matches!(self, BulkAction::Retry(_))
    }

    /// The state of the jobs it touches.
    pub(crate) fn source_state(self) -> JobState {
        match self {
            BulkAction::Retry(_) => JobState::Failed,
            BulkAction::Cancel => JobState::Queued,
            BulkAction::Resolve(_) => JobState::Stale,
            BulkAction::Delete(state) => state,
        }
    }
}

/// Which jobs of one queue a bulk action touches (in the action's state).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Selection {
    /// Only jobs of this pipeline.
    pub pipeline: Option<String>,
    /// Only jobs of this resource (a list's filter).
    pub resource: Option<String>,
    /// Only jobs last leased by this worker (a list's filter).
    pub worker: Option<String>,
    /// Retry: only jobs whose last attempt failed with this error kind.
    pub error_kind: Option<String>,
    /// Only jobs whose last change (for FAILED jobs: their end) is at or after this (ms).
    pub since: Option<Millis>,
    /// …and before this (ms).
    pub until: Option<Millis>,
    /// Only jobs whose input window starts at or after this (RFC 3339)…
    pub window_from: Option<String>,
    /// …and before this.
    pub window_to: Option<String>,
    /// Only these jobs (empty: any).
    pub ids: Vec<JobId>,
    /// Retry: also the jobs whose failure the step called permanent (not
    /// retryable); by default they are counted apart and left out.
    pub include_permanent: bool,
}

/// The jobs an action would touch.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Plan {
    /// Queue.
    pub queue: String,
    /// `retry`, `cancel` or `resolve`.
    pub action: String,
    /// The jobs, newest change first.
    pub jobs: Vec<JobId>,
    /// Retry: how many of the jobs matched failed retryably (or did not say).
    pub retryable: usize,
    /// Retry: the jobs matched whose failure the step called permanent; left
    /// out of `jobs` unless the selection includes them.
    pub permanent: Vec<JobId>,
    /// More matched than [`MAX_JOBS`] (or than a listing reads): run it again afterwards.
    pub truncated: bool,
}

/// What a run did.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Report {
    /// Jobs the action was applied to.
    pub done: usize,
    /// Jobs refused (their state changed since the selection), with why.
    pub refused: Vec<(JobId, String)>,
}

/// The jobs of `inspector`'s queue that `action` would touch under `sel`.
pub(crate) async fn select(
    inspector: &Inspector,
    action: BulkAction,
    sel: &Selection,
) -> Result<Plan, Error> {
    let state = action.source_state();
    let all = Page {
        offset: 0,
        limit: MAX_JOBS,
    };
    let page = if sel.window_from.is_some() || sel.window_to.is_some() {
        let search = JobSearch {
            window_from: sel.window_from.clone(),
            window_to: sel.window_to.clone(),
            state: Some(state),
            pipeline: sel.pipeline.clone(),
            resource: sel.resource.clone(),
            ..Default::default()
        };
        inspector.search_jobs(&search, all).await?
    } else {
        let filter = JobFilter {
            state: Some(state),
            pipeline: sel.pipeline.clone(),
            resource: sel.resource.clone(),
            worker: sel.worker.clone(),
        };
        inspector.list_jobs(&filter, all).await?
    };
    let mut truncated = page.truncated || page.has_more;
    let mut jobs = Vec::new();
    let (mut retryable, mut permanent) = (0, Vec::new());
    for j in page.jobs {
        if !sel.ids.is_empty() && !sel.ids.contains(&j.id) {
            continue;
        }
        if sel.since.is_some_and(|t| j.updated_at < t)
            || sel.until.is_some_and(|t| j.updated_at >= t)
        {
            continue;
        }
        if let Some(kind) = &sel.error_kind {
            let Some(job) = inspector.queue().job(&j.id).await? else {
                continue;
            };
            let last = job.attempts.iter().rev().find(|a| a.n == job.attempt);
            if last
                .and_then(|a| a.error.as_ref())
                .is_none_or(|e| e.kind != *kind)
            {
                continue;
            }
        }
        if jobs.len() == MAX_JOBS {
            truncated = true;
            break;
        }
        if let BulkAction::Retry(_) = action {
            // the step said retrying won't help: counted apart, left out unless asked
            if j.ended.as_ref().is_some_and(|e| !e.retryable) {
                permanent.push(j.id.clone());
                if !sel.include_permanent {
                    continue;
                }
            } else {
                retryable += 1;
            }
        }
        jobs.push(j.id);
    }
    Ok(Plan {
        queue: inspector.queue().name().to_owned(),
        action: action.name().to_owned(),
        jobs,
        retryable,
        permanent,
        truncated,
    })
}

/// Applies `action` to the jobs of `plan` as `by` with `reason`, in batches of
/// [`BATCH`]; `progress(done so far, total)` after each batch. A refusal is
/// recorded in the report; any other error stops the run (the jobs before it stay done).
pub(crate) async fn run(
    inspector: &Inspector,
    action: BulkAction,
    plan: &Plan,
    by: &str,
    reason: &str,
    mut progress: impl FnMut(usize, usize),
) -> Result<Report, Error> {
    let q = inspector.queue();
    let total = plan.jobs.len();
    let reason = if reason.trim().is_empty() {
        format!("bulk {} of {}", action.name(), crate::wording::jobs(total))
    } else {
        format!(
            "{reason} (bulk {} of {})",
            action.name(),
            crate::wording::jobs(total)
        )
    };
    let mut report = Report::default();
    for (b, batch) in plan.jobs.chunks(BATCH).enumerate() {
        for id in batch {
            let result = match action {
                BulkAction::Retry(mode) => q.retry(id, mode, by, &reason).await.map(|_| ()),
                BulkAction::Cancel => q.cancel(id, &reason, by).await.map(|_| ()),
                BulkAction::Resolve(state) => q.resolve(id, state, by, &reason).await,
                BulkAction::Delete(_) => q.delete_job(id, by, &reason).await.map(|_| ()),
            };
            match result {
                Ok(()) => report.done += 1,
                Err(e) if crate::failure::is_refusal(&e) => {
                    report.refused.push((id.clone(), e.to_string()))
                }
                Err(e) => return Err(e),
            }
        }
        progress((b * BATCH + batch.len()).min(total), total);
    }
    Ok(report)
}
