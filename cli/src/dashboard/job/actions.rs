//! Cancel, retry, resolve, delete and run now (and repair and purge of a
//! quarantined job): `POST` only, by whom `auth` lets act, through the same
//! `Queue` scripts as the command line (each recorded as an event with
//! `by` = `dashboard:<operator>`); as a form (answered with a redirect) or
//! JSON (answered with an [`ActionResult`]).

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;
use axum::{Form, Json, Router};
use leasehold_core::{Error, JobId, JobState, RetryMode};
use serde::{Deserialize, Serialize};

use crate::dashboard::auth::{authorise, by, ActionBody};
use crate::dashboard::data::job_id;
use crate::dashboard::error::{ApiError, DashError, PageError, Res};
use crate::dashboard::html::path_segment;
use crate::dashboard::state::{App, Shared};
use crate::failure::is_refusal;
use crate::grammar::ResolveAs;
use crate::wording;

/// The routes of a job's actions: a form and a JSON endpoint each.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/jobs/{queue}/{id}/cancel", post(cancel_form))
        .route("/jobs/{queue}/{id}/retry", post(retry_form))
        .route("/jobs/{queue}/{id}/resolve", post(resolve_form))
        .route("/jobs/{queue}/{id}/delete", post(delete_form))
        .route("/jobs/{queue}/{id}/run-now", post(run_now_form))
        .route("/jobs/{queue}/{id}/repair", post(repair_form))
        .route("/jobs/{queue}/{id}/purge", post(purge_form))
        .route("/api/jobs/{queue}/{id}/cancel", post(cancel_api))
        .route("/api/jobs/{queue}/{id}/retry", post(retry_api))
        .route("/api/jobs/{queue}/{id}/resolve", post(resolve_api))
        .route("/api/jobs/{queue}/{id}/delete", post(delete_api))
        .route("/api/jobs/{queue}/{id}/run-now", post(run_now_api))
        .route("/api/jobs/{queue}/{id}/repair", post(repair_api))
        .route("/api/jobs/{queue}/{id}/purge", post(purge_api))
}

/// Longest reason accepted.
const MAX_REASON: usize = 2_000;

fn reason(text: Option<&str>, required: bool) -> Res<String> {
    let text = text.unwrap_or("").trim();
    if required && text.is_empty() {
        return Err(DashError::BadRequest("a reason is required".into()));
    }
    if text.chars().count() > MAX_REASON {
        return Err(DashError::BadRequest(format!(
            "the reason is longer than {MAX_REASON} characters"
        )));
    }
    Ok(text.to_owned())
}

/// What an action did.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ActionResult {
    /// The job.
    pub job: JobId,
    /// Its queue.
    pub queue: String,
    /// `cancel`, `retry` or `resolve`.
    pub action: String,
    /// `cancelled`, `requested`, `already_requested`, `retried`, `resolved`.
    pub outcome: String,
    /// The job's state after it (none after a purge: the job is gone).
    pub state: Option<JobState>,
    /// The new attempt (retry).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// Who acted, as recorded.
    pub by: String,
    /// A sentence for humans.
    pub message: String,
}

#[derive(Debug, Clone, Copy)]
enum Action {
    Cancel,
    Retry,
    Resolve,
    /// Re-validate a quarantined job and requeue it.
    Repair,
    /// Delete a quarantined job.
    Purge,
    /// Delete a terminal job now.
    Delete,
    /// Make a delayed QUEUED job due now.
    RunNow,
}

impl Action {
    fn name(self) -> &'static str {
        match self {
            Action::Cancel => "cancel",
            Action::Retry => "retry",
            Action::Resolve => "resolve",
            Action::Repair => "repair",
            Action::Purge => "purge",
            Action::Delete => "delete",
            Action::RunNow => "run now",
        }
    }
}

/// Why the state model refused, in the command line's words.
fn refused(action: Action, id: &JobId, queue: &str, e: Error) -> DashError {
    match wording::refused(action.name(), id, queue, e) {
        crate::failure::Failure::Refused(m) => DashError::Refused(m),
        other => DashError::Internal(other.message().to_owned()),
    }
}

/// Applies `action` to job `id` of `queue` after checking the token.
async fn act(
    app: &App,
    action: Action,
    queue: &str,
    id: &str,
    headers: &HeaderMap,
    body: &ActionBody,
) -> Res<ActionResult> {
    // the token first: nothing about the job is revealed without it
    authorise(app, headers, body.token.as_deref())?;
    let id = job_id(id)?;
    let q = app.queue(queue)?;
    let by = by(body.operator.as_deref());
    let fail = |e: Error| {
        if is_refusal(&e) {
            refused(action, &id, queue, e)
        } else {
            app.fail(e)
        }
    };
    let result = |outcome: &str, state: JobState, attempt, message: String| ActionResult {
        job: id.clone(),
        queue: queue.to_owned(),
        action: action.name().to_owned(),
        outcome: outcome.to_owned(),
        state: Some(state),
        attempt,
        by: by.clone(),
        message,
    };
    if let Action::Repair | Action::Purge = action {
        // the record may be unreadable: no `job` read first
        return quarantine_act(app, action, &q, &id, &by).await;
    }
    // a clear 404 rather than a script's refusal for a job that is not there
    if q.job(&id).await.map_err(|e| app.fail(e))?.is_none() {
        return Err(DashError::NotFound(format!(
            "job {id} not found in queue {queue}"
        )));
    }
    match action {
        Action::Cancel => {
            let reason = reason(body.reason.as_deref(), true)?;
            let done = q.cancel(&id, &reason, &by).await.map_err(fail)?;
            let (outcome, state, message) = wording::cancelled(&id, &done);
            Ok(result(outcome, state, None, message))
        }
        Action::Retry => {
            let reason = reason(body.reason.as_deref(), false)?;
            let mode = match body.mode.as_deref().map(str::trim) {
                None | Some("") | Some("resume") => RetryMode::Resume,
                Some("from_start") | Some("from-start") => RetryMode::FromStart,
                Some(other) => {
                    return Err(DashError::BadRequest(format!(
                        "retry mode {other:?} is not resume or from_start"
                    )))
                }
            };
            let attempt = q.retry(&id, mode, &by, &reason).await.map_err(fail)?;
            Ok(result(
                "retried",
                JobState::Queued,
                Some(attempt),
                wording::retried(&id, attempt, mode),
            ))
        }
        Action::Resolve => {
            let outcome = match body.outcome.as_deref().map(str::trim) {
                Some("failed") | Some("FAILED") => ResolveAs::Failed,
                Some("cancelled") | Some("CANCELLED") => ResolveAs::Cancelled,
                Some("succeeded") | Some("SUCCEEDED") => ResolveAs::Succeeded,
                other => {
                    return Err(DashError::BadRequest(format!(
                        "resolve needs \"as\": failed, cancelled or succeeded (got {other:?})"
                    )))
                }
            };
            let reason = reason(body.reason.as_deref(), true)?;
            let state = outcome.state();
            q.resolve(&id, state, &by, &reason).await.map_err(fail)?;
            Ok(result(
                "resolved",
                state,
                None,
                wording::resolved(&id, state),
            ))
        }
        Action::Delete => {
            let reason = reason(body.reason.as_deref(), true)?;
            let state = q.delete_job(&id, &by, &reason).await.map_err(fail)?;
            Ok(result(
                "deleted",
                state,
                None,
                format!("job {id} ({state}) deleted, with its attempt records"),
            ))
        }
        Action::RunNow => {
            let reason = reason(body.reason.as_deref(), false)?;
            let was = q.run_now(&id, &by, &reason).await.map_err(fail)?;
            Ok(result(
                "run_now",
                JobState::Queued,
                None,
                format!(
                    "job {id} is due now (it was delayed until {})",
                    crate::time::stamp(was)
                ),
            ))
        }
        Action::Repair | Action::Purge => quarantine_act(app, action, &q, &id, &by).await,
    }
}

/// Repairs or purges quarantined job `id` (the token was checked).
async fn quarantine_act(
    app: &App,
    action: Action,
    q: &leasehold_core::Queue,
    id: &JobId,
    by: &str,
) -> Res<ActionResult> {
    if q.quarantine_entry(id.as_str())
        .await
        .map_err(|e| app.fail(e))?
        .is_none()
    {
        return Err(DashError::NotFound(format!(
            "job {id} is not quarantined in queue {}",
            q.name()
        )));
    }
    let fail = |e: Error| match e {
        Error::Corrupt { field, problem, .. } => {
            DashError::Refused(format!("cannot repair job {id}: field {field} {problem}"))
        }
        other => app.fail(other),
    };
    let (outcome, state, message) = if let Action::Repair = action {
        let pipeline = q.repair_quarantined(id, by).await.map_err(fail)?;
        (
            "repaired",
            Some(JobState::Queued),
            format!("job {id} repaired: QUEUED again in the ready set of pipeline {pipeline}"),
        )
    } else {
        q.purge_quarantined(id, by).await.map_err(fail)?;
        ("purged", None, format!("job {id} deleted"))
    };
    Ok(ActionResult {
        job: id.clone(),
        queue: q.name().to_owned(),
        action: action.name().to_owned(),
        outcome: outcome.to_owned(),
        state,
        attempt: None,
        by: by.to_owned(),
        message,
    })
}

// ---- JSON ---------------------------------------------------------------------

/// A JSON body, or none at all (the token may come in the header alone).
async fn api(
    app: Shared,
    action: Action,
    (queue, id): (String, String),
    headers: HeaderMap,
    body: Option<Json<ActionBody>>,
) -> Result<Json<ActionResult>, ApiError> {
    let body = body.map(|Json(b)| b).unwrap_or_default();
    Ok(Json(act(&app, action, &queue, &id, &headers, &body).await?))
}

/// `POST /api/jobs/{queue}/{id}/cancel` `{"reason", "operator"}`.
async fn cancel_api(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    body: Option<Json<ActionBody>>,
) -> Result<Json<ActionResult>, ApiError> {
    api(app, Action::Cancel, p, headers, body).await
}

/// `POST /api/jobs/{queue}/{id}/retry` `{"mode": "resume"|"from_start", "reason", "operator"}`.
async fn retry_api(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    body: Option<Json<ActionBody>>,
) -> Result<Json<ActionResult>, ApiError> {
    api(app, Action::Retry, p, headers, body).await
}

/// `POST /api/jobs/{queue}/{id}/repair` `{"operator"}`: requeue a quarantined job once fixed.
async fn repair_api(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    body: Option<Json<ActionBody>>,
) -> Result<Json<ActionResult>, ApiError> {
    api(app, Action::Repair, p, headers, body).await
}

/// `POST /api/jobs/{queue}/{id}/purge` `{"operator"}`: delete a quarantined job.
async fn purge_api(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    body: Option<Json<ActionBody>>,
) -> Result<Json<ActionResult>, ApiError> {
    api(app, Action::Purge, p, headers, body).await
}

/// `POST /api/jobs/{queue}/{id}/delete` `{"reason", "operator"}`: delete a terminal job now.
async fn delete_api(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    body: Option<Json<ActionBody>>,
) -> Result<Json<ActionResult>, ApiError> {
    api(app, Action::Delete, p, headers, body).await
}

/// `POST /api/jobs/{queue}/{id}/run-now` `{"reason", "operator"}`: a delayed job becomes due now.
async fn run_now_api(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    body: Option<Json<ActionBody>>,
) -> Result<Json<ActionResult>, ApiError> {
    api(app, Action::RunNow, p, headers, body).await
}

/// `POST /jobs/{queue}/{id}/delete` (form: token, operator, reason).
async fn delete_form(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    Form(body): Form<ActionBody>,
) -> Result<Response, PageError> {
    form(app, Action::Delete, p, headers, body).await
}

/// `POST /jobs/{queue}/{id}/run-now` (form: token, operator, reason).
async fn run_now_form(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    Form(body): Form<ActionBody>,
) -> Result<Response, PageError> {
    form(app, Action::RunNow, p, headers, body).await
}

/// `POST /api/jobs/{queue}/{id}/resolve` `{"as": "failed"|"cancelled"|"succeeded", "reason", "operator"}`.
async fn resolve_api(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    body: Option<Json<ActionBody>>,
) -> Result<Json<ActionResult>, ApiError> {
    api(app, Action::Resolve, p, headers, body).await
}

// ---- forms --------------------------------------------------------------------

/// A form post: on success, back to the job page with a notice (303).
async fn form(
    app: Shared,
    action: Action,
    (queue, id): (String, String),
    headers: HeaderMap,
    body: ActionBody,
) -> Result<Response, PageError> {
    let done = act(&app, action, &queue, &id, &headers, &body).await?;
    if let Action::Repair | Action::Purge = action {
        // the queues page, where the quarantine is listed
        return Ok(Redirect::to(&format!("/?notice={}", done.outcome)).into_response());
    }
    if let Action::Delete = action {
        // the job is gone: its queue's list
        return Ok(Redirect::to(&format!("/jobs?queue={}", path_segment(&queue))).into_response());
    }
    let location = format!(
        "/jobs/{}/{}?notice={}",
        path_segment(&queue),
        path_segment(&id),
        done.outcome
    );
    Ok(Redirect::to(&location).into_response())
}

/// `POST /jobs/{queue}/{id}/cancel` (form: token, operator, reason).
async fn cancel_form(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    Form(body): Form<ActionBody>,
) -> Result<Response, PageError> {
    form(app, Action::Cancel, p, headers, body).await
}

/// `POST /jobs/{queue}/{id}/retry` (form: token, operator, reason, mode).
async fn retry_form(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    Form(body): Form<ActionBody>,
) -> Result<Response, PageError> {
    form(app, Action::Retry, p, headers, body).await
}

/// `POST /jobs/{queue}/{id}/repair` (form: token, operator).
async fn repair_form(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    Form(body): Form<ActionBody>,
) -> Result<Response, PageError> {
    form(app, Action::Repair, p, headers, body).await
}

/// `POST /jobs/{queue}/{id}/purge` (form: token, operator).
async fn purge_form(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    Form(body): Form<ActionBody>,
) -> Result<Response, PageError> {
    form(app, Action::Purge, p, headers, body).await
}

/// `POST /jobs/{queue}/{id}/resolve` (form: token, operator, reason, as).
async fn resolve_form(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    Form(body): Form<ActionBody>,
) -> Result<Response, PageError> {
    form(app, Action::Resolve, p, headers, body).await
}
