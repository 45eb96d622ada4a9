//! Pause, resume and trigger a schedule from the dashboard: `POST` with the
//! dashboard's token, through the same scripts as `leasehold schedules`
//! (recorded in the schedule's ticks stream with `by` = `dashboard:<operator>`).

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;
use axum::{Form, Json, Router};
use serde::{Deserialize, Serialize};

use crate::dashboard::auth::{authorise, by};
use crate::dashboard::error::{ApiError, DashError, PageError, Res};
use crate::dashboard::html::query;
use crate::dashboard::state::{App, Shared};

/// The routes of a schedule's pause, resume and trigger.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/schedules/{queue}/{name}/{action}", post(schedule_form))
        .route("/api/schedules/{queue}/{name}/{action}", post(schedule_api))
}

/// The fields of a schedule action, from a form or a JSON body.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct ScheduleBody {
    /// The token (when not in `Authorization`).
    pub token: Option<String>,
    /// Who acts.
    pub operator: Option<String>,
    /// Why (pause, resume).
    pub reason: Option<String>,
    /// Trigger: the window's start (RFC 3339); the latest due window when empty.
    pub window: Option<String>,
    /// Trigger: run a window whose job SUCCEEDED again (`1` or `true`).
    pub rerun: Option<String>,
}

/// What a schedule action did.
#[derive(Debug, Clone, Serialize)]
pub(super) struct ScheduleResult {
    /// The queue.
    pub queue: String,
    /// The schedule.
    pub schedule: String,
    /// `pause`, `resume` or `trigger`.
    pub action: String,
    /// In words.
    pub outcome: String,
    /// The triggered window's job.
    pub job: Option<String>,
}

async fn act(
    app: &App,
    (queue, name, action): (String, String, String),
    headers: &HeaderMap,
    body: &ScheduleBody,
) -> Res<ScheduleResult> {
    authorise(app, headers, body.token.as_deref())?;
    let q = app.queue(&queue)?;
    let who = by(body.operator.as_deref());
    let reason: String = body
        .reason
        .clone()
        .unwrap_or_default()
        .chars()
        .take(2000)
        .collect();
    let (outcome, job) = match action.as_str() {
        "pause" | "resume" => {
            let pause = action == "pause";
            let was = q
                .set_schedule_paused(&name, pause, &who, reason.trim())
                .await
                .map_err(|e| app.fail(e))?;
            let said = match (pause, was) {
                (true, true) | (false, false) => "unchanged",
                (true, false) => "paused",
                (false, true) => "resumed",
            };
            (said.to_owned(), None)
        }
        "trigger" => {
            let start = match body
                .window
                .as_deref()
                .map(str::trim)
                .filter(|w| !w.is_empty())
            {
                Some(w) => Some(crate::time::parse_instant(w).map_err(DashError::BadRequest)?),
                None => None,
            };
            let rerun = matches!(body.rerun.as_deref(), Some("1" | "true" | "on"));
            let (w, t) = q
                .trigger_registered(&name, start, rerun, &who)
                .await
                .map_err(|e| app.fail(e))?;
            let status = t.status.map(|s| s.as_str()).unwrap_or("none");
            (
                format!("window {} .. {}: {status}", w.start, w.end),
                t.job.map(|j| j.to_string()),
            )
        }
        other => return Err(DashError::NotFound(format!("no schedule action {other:?}"))),
    };
    Ok(ScheduleResult {
        queue,
        schedule: name,
        action,
        outcome,
        job,
    })
}

/// `POST /schedules/{queue}/{name}/{action}` (form): back to the page with a notice.
async fn schedule_form(
    State(app): State<Shared>,
    Path(p): Path<(String, String, String)>,
    headers: HeaderMap,
    Form(body): Form<ScheduleBody>,
) -> Result<Response, PageError> {
    let done = act(&app, p, &headers, &body).await?;
    let notice = format!("{} {}: {}", done.action, done.schedule, done.outcome);
    let location = format!("/schedules{}", query(&[("notice", &notice)]));
    Ok(Redirect::to(&location).into_response())
}

/// `POST /api/schedules/{queue}/{name}/{action}` `{"operator", "reason", "window", "rerun"}`.
async fn schedule_api(
    State(app): State<Shared>,
    Path(p): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Option<Json<ScheduleBody>>,
) -> Result<Json<ScheduleResult>, ApiError> {
    let body = body.map(|Json(b)| b).unwrap_or_default();
    Ok(Json(act(&app, p, &headers, &body).await?))
}
