//! Cancel, retry and resolve (and repair and purge of a quarantined job): `POST` only, with the dashboard's token, through
//! the same `Queue` scripts as the command line (each recorded as an event with
//! `by` = `dashboard:<operator>`).
//!
//! A request may act with the token, in an `Authorization: Bearer` header or a
//! `token` field (compared in constant time), or with a logged-in session whose
//! CSRF value the session layer checked (`session`): then the operator is the
//! name given at login. A page on another site cannot make a browser act: it
//! knows neither the token nor the session's CSRF value, and the cookie is
//! `SameSite=Strict`.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Form, Json};
use leasehold_core::{Error, JobId, JobState, RetryMode};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use super::data::{job_id, Res};
use super::error::{ApiError, DashError, PageError};
use super::html::path_segment;
use super::{session, App, Shared};
use crate::failure::is_refusal;
use crate::grammar::ResolveAs;
use crate::wording;

/// Longest reason accepted.
const MAX_REASON: usize = 2_000;
/// Longest operator name kept.
const MAX_OPERATOR: usize = 64;

/// The secret that enables actions.
pub(crate) struct Token(Vec<u8>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(****)")
    }
}

impl Token {
    /// Checks a configured token: not empty, no spaces or control characters.
    pub(crate) fn new(token: &str) -> Result<Token, String> {
        if token.is_empty() {
            return Err("the dashboard token must not be empty".into());
        }
        if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("the dashboard token must not contain spaces or control characters".into());
        }
        Ok(Token(token.as_bytes().to_vec()))
    }

    /// Whether `given` is the token, in time independent of where they differ.
    /// (The length may leak; the content does not.)
    pub(crate) fn matches(&self, given: &str) -> bool {
        bool::from(self.0.as_slice().ct_eq(given.as_bytes()))
    }
}

/// The token sent: `Authorization: Bearer <token>`, else the body's field.
fn presented<'a>(headers: &'a HeaderMap, field: Option<&'a str>) -> Option<&'a str> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        });
    bearer.or(field).filter(|t| !t.is_empty())
}

/// Lets the request act, or says why not: 403 without a configured token, 401
/// for a missing or wrong one (a logged-in session whose CSRF value was checked
/// needs none).
pub(super) fn authorise(app: &App, headers: &HeaderMap, field: Option<&str>) -> Res<()> {
    let Some(token) = &app.token else {
        return Err(DashError::Disabled);
    };
    match presented(headers, field) {
        None if session::current().checked => Ok(()),
        None => Err(DashError::Unauthorized(
            "this action needs a login (/login) or the dashboard token (Authorization: Bearer, or the token field)"
                .into(),
        )),
        Some(given) if token.matches(given) => Ok(()),
        Some(_) => Err(DashError::Unauthorized(
            "wrong token: the action was not applied".into(),
        )),
    }
}

/// An operator name cleaned of control characters and cut short; `None` when empty.
pub(super) fn operator_name(operator: Option<&str>) -> Option<String> {
    let name: String = operator
        .unwrap_or("")
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_OPERATOR)
        .collect();
    let name = name.trim();
    (!name.is_empty()).then(|| name.to_owned())
}

/// `dashboard:<operator>`: the name given at login when the request acts
/// through its session, else `operator` (cleaned), else `operator`.
pub(super) fn by(operator: Option<&str>) -> String {
    let cur = session::current();
    let name = match (&cur.operator, cur.checked) {
        (Some(logged_in), true) => operator_name(Some(logged_in)),
        _ => operator_name(operator),
    };
    format!("dashboard:{}", name.as_deref().unwrap_or("operator"))
}

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

/// The fields of an action, from a form or a JSON body.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct ActionBody {
    /// The token (when not in `Authorization`).
    pub token: Option<String>,
    /// Who acts (recorded as `dashboard:<operator>`).
    pub operator: Option<String>,
    /// Why.
    pub reason: Option<String>,
    /// Retry: `resume` (default) or `from_start`.
    pub mode: Option<String>,
    /// Resolve: `failed`, `cancelled` or `succeeded`.
    #[serde(rename = "as")]
    pub outcome: Option<String>,
}

/// What an action did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct ActionResult {
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
pub(super) async fn cancel_api(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    body: Option<Json<ActionBody>>,
) -> Result<Json<ActionResult>, ApiError> {
    api(app, Action::Cancel, p, headers, body).await
}

/// `POST /api/jobs/{queue}/{id}/retry` `{"mode": "resume"|"from_start", "reason", "operator"}`.
pub(super) async fn retry_api(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    body: Option<Json<ActionBody>>,
) -> Result<Json<ActionResult>, ApiError> {
    api(app, Action::Retry, p, headers, body).await
}

/// `POST /api/jobs/{queue}/{id}/repair` `{"operator"}`: requeue a quarantined job once fixed.
pub(super) async fn repair_api(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    body: Option<Json<ActionBody>>,
) -> Result<Json<ActionResult>, ApiError> {
    api(app, Action::Repair, p, headers, body).await
}

/// `POST /api/jobs/{queue}/{id}/purge` `{"operator"}`: delete a quarantined job.
pub(super) async fn purge_api(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    body: Option<Json<ActionBody>>,
) -> Result<Json<ActionResult>, ApiError> {
    api(app, Action::Purge, p, headers, body).await
}

/// `POST /api/jobs/{queue}/{id}/delete` `{"reason", "operator"}`: delete a terminal job now.
pub(super) async fn delete_api(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    body: Option<Json<ActionBody>>,
) -> Result<Json<ActionResult>, ApiError> {
    api(app, Action::Delete, p, headers, body).await
}

/// `POST /api/jobs/{queue}/{id}/run-now` `{"reason", "operator"}`: a delayed job becomes due now.
pub(super) async fn run_now_api(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    body: Option<Json<ActionBody>>,
) -> Result<Json<ActionResult>, ApiError> {
    api(app, Action::RunNow, p, headers, body).await
}

/// `POST /jobs/{queue}/{id}/delete` (form: token, operator, reason).
pub(super) async fn delete_form(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    Form(body): Form<ActionBody>,
) -> Result<Response, PageError> {
    form(app, Action::Delete, p, headers, body).await
}

/// `POST /jobs/{queue}/{id}/run-now` (form: token, operator, reason).
pub(super) async fn run_now_form(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    Form(body): Form<ActionBody>,
) -> Result<Response, PageError> {
    form(app, Action::RunNow, p, headers, body).await
}

/// `POST /api/jobs/{queue}/{id}/resolve` `{"as": "failed"|"cancelled"|"succeeded", "reason", "operator"}`.
pub(super) async fn resolve_api(
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
pub(super) async fn cancel_form(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    Form(body): Form<ActionBody>,
) -> Result<Response, PageError> {
    form(app, Action::Cancel, p, headers, body).await
}

/// `POST /jobs/{queue}/{id}/retry` (form: token, operator, reason, mode).
pub(super) async fn retry_form(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    Form(body): Form<ActionBody>,
) -> Result<Response, PageError> {
    form(app, Action::Retry, p, headers, body).await
}

/// `POST /jobs/{queue}/{id}/repair` (form: token, operator).
pub(super) async fn repair_form(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    Form(body): Form<ActionBody>,
) -> Result<Response, PageError> {
    form(app, Action::Repair, p, headers, body).await
}

/// `POST /jobs/{queue}/{id}/purge` (form: token, operator).
pub(super) async fn purge_form(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    Form(body): Form<ActionBody>,
) -> Result<Response, PageError> {
    form(app, Action::Purge, p, headers, body).await
}

/// `POST /jobs/{queue}/{id}/resolve` (form: token, operator, reason, as).
pub(super) async fn resolve_form(
    State(app): State<Shared>,
    Path(p): Path<(String, String)>,
    headers: HeaderMap,
    Form(body): Form<ActionBody>,
) -> Result<Response, PageError> {
    form(app, Action::Resolve, p, headers, body).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn tokens_compare_whole() {
        let t = Token::new("s3cret-token").unwrap();
        assert!(t.matches("s3cret-token"));
        assert!(!t.matches("s3cret-tokeN"));
        assert!(!t.matches("s3cret-toke"));
        assert!(!t.matches("s3cret-token2"));
        assert!(!t.matches(""));
        assert!(Token::new("").is_err());
        assert!(Token::new("a b").is_err());
        assert_eq!(format!("{t:?}"), "Token(****)");
    }

    #[test]
    fn the_bearer_header_wins_over_the_field() {
        let mut h = HeaderMap::new();
        assert_eq!(presented(&h, Some("f")), Some("f"));
        assert_eq!(presented(&h, Some("")), None);
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer  abc "),
        );
        assert_eq!(presented(&h, Some("f")), Some("abc"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(presented(&h, None), None);
    }

    #[test]
    fn operator_names_are_cleaned() {
        assert_eq!(by(None), "dashboard:operator");
        assert_eq!(by(Some("  ")), "dashboard:operator");
        assert_eq!(by(Some("alice\n\u{7}")), "dashboard:alice");
        assert_eq!(by(Some(&"x".repeat(100))).len(), "dashboard:".len() + 64);
    }
}
