//! The JSON API: the pages' data as the core's serde types, and `/metrics`.
//!
//! | path | answer |
//! |---|---|
//! | `GET /api/queues` | `[QueueStatus]` |
//! | `GET /api/jobs?queue&state&pipeline&resource&worker&offset&limit` | `JobPage` |
//! | `GET /api/jobs/{queue}/{id}` | `JobDetail` (lease token redacted) + `timeline` + `cancel_explained` |
//! | `GET /api/jobs/{queue}/{id}/events` | `[Event]`, oldest first |
//! | `GET /api/workers?queue` | `[{queue, live, pruned}]` |
//! | `GET /api/locks?queue` | `[{queue, resource, ...}]` |
//! | `GET /api/events?queue&job&limit` | `[Event]`, newest first |
//! | `POST /api/jobs/{queue}/{id}/{cancel,retry,resolve,delete,run-now}` | `ActionResult` (see `actions`) |
//! | `POST /api/queues/{queue}/pipelines/{pipeline}/jobs` | `EnqueueReply` (see `enqueue`) |
//!
//! Failures: `{"error", "message", "status"}` with 400, 401, 403, 404, 409, 503 or 500
//! (an enqueue adds `field`, `problem` and `job` where they apply, and 413, 422).

use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use leasehold_core::{Event, JobDetail, JobPage};
use serde::Serialize;

use super::data::{job_id, EventsParams, JobsParams, QueueLock, QueueParam, QueueWorkers};
use super::error::{ApiError, DashError};
use super::Shared;
use crate::wording::{self, Moment};

type Api<T> = Result<Json<T>, ApiError>;

/// `GET /api/queues`: the status of each queue read. On a Redis Cluster
/// with a master down, the queues of the masters that answer, and the
/// header `x-leasehold-unreachable` naming what could not be read (one
/// line per master or queue, joined by "; ").
pub(super) async fn queues(State(app): State<Shared>) -> Result<Response, ApiError> {
    let overview = app.overview().await?;
    let mut response = Json(overview.queues).into_response();
    if !overview.unreachable.is_empty() {
        let lines = overview.unreachable.join("; ").replace(['\r', '\n'], " ");
        if let Ok(v) = axum::http::HeaderValue::from_str(&lines) {
            response.headers_mut().insert("x-leasehold-unreachable", v);
        }
    }
    Ok(response)
}

/// `GET /api/jobs`.
pub(super) async fn jobs(State(app): State<Shared>, Query(p): Query<JobsParams>) -> Api<JobPage> {
    let q = p.parse()?;
    Ok(Json(app.jobs(&q).await?))
}

/// A job's detail with its step timeline.
#[derive(Debug, Serialize)]
pub(super) struct JobView {
    /// The detail.
    #[serde(flatten)]
    pub detail: JobDetail,
    /// Every moment of every attempt, oldest first.
    pub timeline: Vec<Moment>,
    /// What became of a cancel request, in words.
    pub cancel_explained: Option<String>,
}

/// `GET /api/jobs/{queue}/{id}`.
pub(super) async fn job(
    State(app): State<Shared>,
    Path((queue, id)): Path<(String, String)>,
) -> Api<JobView> {
    let detail = app.job(&queue, &id).await?;
    Ok(Json(JobView {
        timeline: wording::timeline(&detail.job),
        cancel_explained: detail.cancel.as_ref().map(|c| c.explain()),
        detail,
    }))
}

/// `GET /api/jobs/{queue}/{id}/events`: the job's events, oldest first.
pub(super) async fn job_events(
    State(app): State<Shared>,
    Path((queue, id)): Path<(String, String)>,
) -> Api<Vec<Event>> {
    let jid = job_id(&id)?;
    let inspector = app.inspector(&queue)?;
    let events = inspector.job_events(&jid).await.map_err(|e| app.fail(e))?;
    if events.is_empty()
        && inspector
            .queue()
            .job(&jid)
            .await
            .map_err(|e| app.fail(e))?
            .is_none()
    {
        return Err(DashError::NotFound(format!("job {id} not found in queue {queue}")).into());
    }
    Ok(Json(events))
}

/// `GET /api/workers`.
pub(super) async fn workers(
    State(app): State<Shared>,
    Query(p): Query<QueueParam>,
) -> Api<Vec<QueueWorkers>> {
    Ok(Json(app.workers(p.queue().as_deref()).await?))
}

/// `GET /api/locks`.
pub(super) async fn locks(
    State(app): State<Shared>,
    Query(p): Query<QueueParam>,
) -> Api<Vec<QueueLock>> {
    Ok(Json(app.locks(p.queue().as_deref()).await?))
}

/// `GET /api/events`.
pub(super) async fn events(
    State(app): State<Shared>,
    Query(p): Query<EventsParams>,
) -> Api<Vec<Event>> {
    let q = p.parse()?;
    Ok(Json(app.events(&q).await?))
}

/// `GET /metrics`: Prometheus text; `leasehold_jobs{queue,state}` read from Redis now.
pub(super) async fn metrics(State(app): State<Shared>) -> Response {
    match app.scrape().await {
        Ok(text) => (
            [(header::CONTENT_TYPE, leasehold_core::metrics::CONTENT_TYPE)],
            text,
        )
            .into_response(),
        Err(e) => {
            let status = e.status();
            eprintln!("leasehold dashboard: /metrics: {}", e.message());
            (status, format!("# {}\n", e.message().replace('\n', " "))).into_response()
        }
    }
}
