//! Pause and resume a queue or one of its pipelines from the dashboard: `POST`
//! only, with the dashboard's token (as the job actions), through the same
//! `Queue::pause` / `Queue::resume` as `leasehold pause` (recorded as events
//! with `by` = `dashboard:<operator>`).

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;
use axum::{Form, Json, Router};
use leasehold_core::{PauseChange, PauseScope};
use serde::{Deserialize, Serialize};

use super::auth::{authorise, by};
use super::error::{ApiError, DashError, PageError, Res};
use super::state::{App, Shared};

/// The routes of pausing and resuming.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/queues/{queue}/pause", post(pause_form))
        .route("/queues/{queue}/resume", post(resume_form))
        .route("/api/queues/{queue}/pause", post(pause_api))
        .route("/api/queues/{queue}/resume", post(resume_api))
}

/// The fields of a pause or resume, from a form or a JSON body.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct PauseBody {
    /// The token (when not in `Authorization`).
    pub token: Option<String>,
    /// Who acts (recorded as `dashboard:<operator>`).
    pub operator: Option<String>,
    /// Why.
    pub reason: Option<String>,
    /// Only this pipeline (the whole queue when empty or absent).
    pub pipeline: Option<String>,
}

/// What a pause or resume did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct PauseResult {
    /// The queue.
    pub queue: String,
    /// The pipeline, or none for the whole queue.
    pub pipeline: Option<String>,
    /// `paused`, `already_paused`, `resumed` or `not_paused`.
    pub outcome: String,
    /// Who acted, as recorded.
    pub by: String,
}

async fn apply(
    app: &App,
    queue: &str,
    resume: bool,
    headers: &HeaderMap,
    body: &PauseBody,
) -> Res<PauseResult> {
    authorise(app, headers, body.token.as_deref())?;
    let q = app.queue(queue)?;
    let pipeline = body
        .pipeline
        .as_deref()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned);
    let scope = match &pipeline {
        Some(p) => PauseScope::Pipeline(p.clone()),
        None => PauseScope::Queue,
    };
    let reason = body.reason.as_deref().unwrap_or("").trim().to_owned();
    if reason.chars().count() > 2_000 {
        return Err(DashError::BadRequest("the reason is too long".into()));
    }
    let who = by(body.operator.as_deref());
    let change = if resume {
        q.resume(&scope, &who, &reason).await
    } else {
        q.pause(&scope, &who, &reason).await
    }
    .map_err(|e| match e {
        leasehold_core::Error::InvalidArgument(m) => DashError::BadRequest(m),
        other => app.fail(other),
    })?;
    let outcome = match change {
        PauseChange::Paused => "paused",
        PauseChange::AlreadyPaused => "already_paused",
        PauseChange::Resumed => "resumed",
        PauseChange::NotPaused => "not_paused",
    };
    Ok(PauseResult {
        queue: queue.to_owned(),
        pipeline,
        outcome: outcome.to_owned(),
        by: who,
    })
}

/// `POST /api/queues/{queue}/pause` `{"pipeline"?, "reason", "operator"}`.
async fn pause_api(
    State(app): State<Shared>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    body: Option<Json<PauseBody>>,
) -> Result<Json<PauseResult>, ApiError> {
    let body = body.map(|Json(b)| b).unwrap_or_default();
    Ok(Json(apply(&app, &queue, false, &headers, &body).await?))
}

/// `POST /api/queues/{queue}/resume` `{"pipeline"?, "reason", "operator"}`.
async fn resume_api(
    State(app): State<Shared>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    body: Option<Json<PauseBody>>,
) -> Result<Json<PauseResult>, ApiError> {
    let body = body.map(|Json(b)| b).unwrap_or_default();
    Ok(Json(apply(&app, &queue, true, &headers, &body).await?))
}

/// `POST /queues/{queue}/pause` (form): back to the queues page with a notice.
async fn pause_form(
    State(app): State<Shared>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    Form(body): Form<PauseBody>,
) -> Result<Response, PageError> {
    let done = apply(&app, &queue, false, &headers, &body).await?;
    Ok(Redirect::to(&format!("/?notice={}", done.outcome)).into_response())
}

/// `POST /queues/{queue}/resume` (form).
async fn resume_form(
    State(app): State<Shared>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    Form(body): Form<PauseBody>,
) -> Result<Response, PageError> {
    let done = apply(&app, &queue, true, &headers, &body).await?;
    Ok(Redirect::to(&format!("/?notice={}", done.outcome)).into_response())
}
