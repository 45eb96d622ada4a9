//! `/bulk`: bulk actions from the dashboard (see `crate::bulk`). `GET /bulk`
//! shows the forms (queues and pipelines chosen among the known ones); with
//! `action` and `queue` it is the confirm page: how many jobs the action would
//! touch (a dry run) and the form that runs it. The job lists send here the
//! rows checked (`id`, repeated) or their filter (`pipeline`, `resource`,
//! `worker`, `state`) with the action chosen under the list.
//! `POST /bulk` (session with CSRF value, or the token) selects again and runs
//! it in batches through the same scripts as the single actions, each job
//! recorded with `by` = `dashboard:<operator>`. `POST /api/bulk` takes the same
//! fields as JSON (`"dry_run": true` answers the plan only).

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use leasehold_core::{JobId, RetryMode};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth::{authorise, by};
use super::data::job_id;
use super::error::{ApiError, DashError, PageError, Res, DISABLED};
use super::html::{auth_fields, job_url, path_segment, Nav};
use super::state::Shared;
use crate::bulk::{self, BulkAction, Plan, Selection};
use crate::context::unknown_pipeline;
use crate::time::parse_instant;

/// The routes of bulk actions.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/bulk", get(bulk_page).post(bulk_form))
        .route("/api/bulk", post(bulk_api))
}

/// The fields of a bulk action (query string, form or JSON).
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct BulkParams {
    queue: Option<String>,
    /// `retry`, `cancel`, `resolve` or `delete`.
    action: Option<String>,
    pipeline: Option<String>,
    /// A list's filter: only jobs of this resource.
    resource: Option<String>,
    /// A list's filter: only jobs last leased by this worker.
    worker: Option<String>,
    /// Delete: the state of the jobs deleted (SUCCEEDED, FAILED or CANCELLED).
    state: Option<String>,
    error_kind: Option<String>,
    /// Ended at or after (RFC 3339).
    since: Option<String>,
    /// Ended before.
    until: Option<String>,
    /// Input window starts at or after (RFC 3339).
    from: Option<String>,
    /// Input window starts before.
    to: Option<String>,
    /// Job ids, separated by spaces, commas or new lines.
    ids: Option<String>,
    /// `rows`: the ids are a list's checked rows, so none checked is an
    /// error (not "every job").
    picked: Option<String>,
    /// Resolve: `failed`, `cancelled` or `succeeded`.
    #[serde(rename = "as")]
    outcome: Option<String>,
    /// Retry: `resume` (default) or `from_start`.
    mode: Option<String>,
    /// Retry: also the jobs that failed permanently (`on`, `true` or `1`).
    include_permanent: Option<String>,
    reason: Option<String>,
    token: Option<String>,
    operator: Option<String>,
    /// JSON only: answer the plan, change nothing.
    #[serde(default)]
    dry_run: bool,
}

fn given(v: &Option<String>) -> Option<String> {
    v.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

fn instant(name: &str, v: &Option<String>) -> Res<Option<leasehold_core::Millis>> {
    given(v)
        .map(|s| {
            parse_instant(&s)
                .map(|t| t.as_millisecond())
                .map_err(|e| DashError::BadRequest(format!("{name}: {e}")))
        })
        .transpose()
}

fn window_bound(name: &str, v: &Option<String>) -> Res<Option<String>> {
    given(v)
        .map(|s| {
            parse_instant(&s)
                .map(|t| t.to_string())
                .map_err(|e| DashError::BadRequest(format!("{name}: {e}")))
        })
        .transpose()
}

impl BulkParams {
    /// The queue, action and selection; `None` when no action is asked yet.
    fn parse(&self) -> Res<Option<(String, BulkAction, Selection)>> {
        let Some(name) = given(&self.action) else {
            return Ok(None);
        };
        let queue = given(&self.queue)
            .ok_or_else(|| DashError::BadRequest("a bulk action needs a queue".into()))?;
        let action = match name.as_str() {
            "retry" => BulkAction::Retry(match given(&self.mode).as_deref() {
                None | Some("resume") => RetryMode::Resume,
                Some("from_start") => RetryMode::FromStart,
                Some(m) => {
                    return Err(DashError::BadRequest(format!(
                        "retry mode {m:?} is not resume or from_start"
                    )))
                }
            }),
            "cancel" => BulkAction::Cancel,
            "resolve" => BulkAction::Resolve(match given(&self.outcome).as_deref() {
                Some("failed") => leasehold_core::JobState::Failed,
                Some("cancelled") => leasehold_core::JobState::Cancelled,
                Some("succeeded") => leasehold_core::JobState::Succeeded,
                other => {
                    return Err(DashError::BadRequest(format!(
                        "resolve needs as = failed, cancelled or succeeded (got {other:?})"
                    )))
                }
            }),
            "delete" => BulkAction::Delete(
                match given(&self.state)
                    .map(|s| s.to_ascii_uppercase())
                    .as_deref()
                {
                    Some("FAILED") => leasehold_core::JobState::Failed,
                    Some("CANCELLED") => leasehold_core::JobState::Cancelled,
                    Some("SUCCEEDED") => leasehold_core::JobState::Succeeded,
                    other => {
                        return Err(DashError::BadRequest(format!(
                            "delete needs state = SUCCEEDED, FAILED or CANCELLED (got {other:?})"
                        )))
                    }
                },
            ),
            other => {
                return Err(DashError::BadRequest(format!(
                    "bulk action {other:?} is not retry, cancel, resolve or delete"
                )))
            }
        };
        let ids = self
            .ids
            .as_deref()
            .unwrap_or("")
            .split([',', ' ', '\n', '\r', '\t'])
            .filter(|s| !s.is_empty())
            .map(job_id)
            .collect::<Res<Vec<JobId>>>()?;
        if ids.is_empty() && given(&self.picked).is_some() {
            return Err(DashError::BadRequest(
                "no rows were checked: check the jobs to act on, or use the action for every job matching the filter".into(),
            ));
        }
        let sel = Selection {
            pipeline: given(&self.pipeline),
            resource: given(&self.resource),
            worker: given(&self.worker),
            error_kind: given(&self.error_kind),
            since: instant("since", &self.since)?,
            until: instant("until", &self.until)?,
            window_from: window_bound("from", &self.from)?,
            window_to: window_bound("to", &self.to)?,
            ids,
            include_permanent: given(&self.include_permanent)
                .is_some_and(|v| matches!(v.as_str(), "on" | "true" | "1")),
        };
        if action == BulkAction::Cancel
            && sel.pipeline.is_none()
            && sel.resource.is_none()
            && sel.worker.is_none()
            && sel.window_from.is_none()
            && sel.window_to.is_none()
            && sel.ids.is_empty()
        {
            return Err(DashError::BadRequest(
                "bulk cancel needs a pipeline, a resource, a range (from, to) or ids".into(),
            ));
        }
        Ok(Some((queue, action, sel)))
    }

    /// The hidden fields repeating the selection in the confirm form.
    fn hidden(&self) -> Markup {
        html! {
            (self.hidden_selection())
            @if let Some(v) = given(&self.include_permanent) { input type="hidden" name="include_permanent" value=(v); }
        }
    }

    /// The hidden fields of the selection itself (without whether permanent
    /// failures are included).
    fn hidden_selection(&self) -> Markup {
        let fields = [
            ("queue", &self.queue),
            ("action", &self.action),
            ("pipeline", &self.pipeline),
            ("resource", &self.resource),
            ("worker", &self.worker),
            ("state", &self.state),
            ("error_kind", &self.error_kind),
            ("since", &self.since),
            ("until", &self.until),
            ("from", &self.from),
            ("to", &self.to),
            ("ids", &self.ids),
            ("picked", &self.picked),
            ("as", &self.outcome),
            ("mode", &self.mode),
        ];
        html! {
            @for (name, v) in fields {
                @if let Some(v) = given(v) { input type="hidden" name=(name) value=(v); }
            }
        }
    }
}

fn reason_of(action: BulkAction, p: &BulkParams) -> Res<String> {
    let reason = given(&p.reason).unwrap_or_default();
    if reason.chars().count() > 2000 {
        return Err(DashError::BadRequest(
            "the reason is longer than 2000 characters".into(),
        ));
    }
    if reason.is_empty() && action.needs_reason() {
        return Err(DashError::BadRequest(format!(
            "a bulk {} needs a reason",
            action.name()
        )));
    }
    Ok(reason)
}

impl super::state::App {
    /// The jobs `action` would touch; 404 for an unknown queue, or pipeline
    /// when none match (naming the known ones).
    async fn bulk_plan(&self, queue: &str, action: BulkAction, sel: &Selection) -> Res<Plan> {
        let inspector = self.inspector(queue)?;
        self.known_queue(queue).await?;
        let plan = bulk::select(&inspector, action, sel)
            .await
            .map_err(|e| self.fail(e))?;
        if let (true, Some(p)) = (plan.jobs.is_empty(), &sel.pipeline) {
            if let Some(message) = unknown_pipeline(std::slice::from_ref(&inspector), p)
                .await
                .map_err(|e| self.fail(e))?
            {
                return Err(DashError::NotFound(message));
            }
        }
        Ok(plan)
    }

    async fn bulk_run(
        &self,
        queue: &str,
        action: BulkAction,
        sel: &Selection,
        reason: &str,
        who: &str,
    ) -> Res<(Plan, bulk::Report)> {
        let inspector = self.inspector(queue)?;
        let plan = self.bulk_plan(queue, action, sel).await?;
        let report = bulk::run(&inspector, action, &plan, who, reason, |done, total| {
            eprintln!(
                "leasehold dashboard: bulk {} on {queue}: {done}/{total} by {who}",
                action.name()
            );
        })
        .await
        .map_err(|e| self.fail(e))?;
        Ok((plan, report))
    }
}

/// The three forms; the queue is chosen among `queues` and the pipeline
/// offered from `pipelines` (the known ones: a typo is a 404 anyway).
fn forms(queues: &[String], pipelines: &[String]) -> Markup {
    let queue = html! {
        label { "Queue " select name="queue" required {
            @for q in queues { option value=(q) { (q) } }
        } }
    };
    let pipeline = html! {
        label { "Pipeline " select name="pipeline" {
            option value="" { "any" }
            @for p in pipelines { option value=(p) { (p) } }
        } }
    };
    html! {
        section.card {
            h2 { "Retry FAILED jobs" }
            form.bulk-retry method="get" action="/bulk" {
                input type="hidden" name="action" value="retry";
                (queue)
                (pipeline)
                label { "Error kind " input type="text" name="error_kind" placeholder="e.g. timeout"; }
                label { "Ended since " input type="text" name="since" placeholder="2026-05-06T00:00Z"; }
                label { "until " input type="text" name="until"; }
                label { "Mode " select name="mode" { option value="resume" { "resume" } option value="from_start" { "from start" } } }
                button type="submit" { "Preview" }
            }
        }
        section.card {
            h2 { "Cancel QUEUED jobs" }
            form.bulk-cancel method="get" action="/bulk" {
                input type="hidden" name="action" value="cancel";
                (queue)
                (pipeline)
                label { "Backfill range: windows from " input type="text" name="from" placeholder="2026-05-06"; }
                label { "to " input type="text" name="to" placeholder="2026-05-07"; }
                button type="submit" { "Preview" }
            }
        }
        section.card {
            h2 { "Resolve STALE jobs" }
            form.bulk-resolve method="get" action="/bulk" {
                input type="hidden" name="action" value="resolve";
                (queue)
                (pipeline)
                label { "Job ids (all STALE when empty) " textarea name="ids" rows="2" {} }
                label { "As " select name="as" { option value="failed" { "FAILED" } option value="cancelled" { "CANCELLED" } option value="succeeded" { "SUCCEEDED" } } }
                button type="submit" { "Preview" }
            }
        }
        section.card {
            h2 { "Delete terminal jobs" }
            form.bulk-delete method="get" action="/bulk" {
                input type="hidden" name="action" value="delete";
                (queue)
                (pipeline)
                label { "State " select name="state" { option value="FAILED" { "FAILED" } option value="CANCELLED" { "CANCELLED" } option value="SUCCEEDED" { "SUCCEEDED" } } }
                label { "Ended since " input type="text" name="since" placeholder="2026-05-06T00:00Z"; }
                label { "until " input type="text" name="until"; }
                button type="submit" { "Preview" }
            }
        }
        p.note { "Or pick jobs in a list: " a href="/jobs" { "Jobs" } " has a checkbox per row and an action for every job matching its filter." }
    }
}

/// The values of every `id` field of a query string (the rows checked in a list).
fn checked_ids(raw: Option<&str>) -> Vec<String> {
    serde_urlencoded::from_str::<Vec<(String, String)>>(raw.unwrap_or(""))
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| k == "id")
        .map(|(_, v)| v)
        .filter(|v| !v.trim().is_empty())
        .collect()
}

/// `GET /bulk`: the forms, or the confirm page of the action asked for.
async fn bulk_page(
    State(app): State<Shared>,
    Query(mut p): Query<BulkParams>,
    axum::extract::RawQuery(raw): axum::extract::RawQuery,
) -> Result<Response, PageError> {
    let checked = checked_ids(raw.as_deref());
    if !checked.is_empty() {
        let mut all = given(&p.ids).into_iter().collect::<Vec<_>>();
        all.extend(checked);
        p.ids = Some(all.join(" "));
    }
    let Some((queue, action, sel)) = p.parse()? else {
        let queues = app.queues().await?;
        let pipelines = app.known_pipelines(&queues).await?;
        let body = html! {
            h1 { "Bulk actions" }
            p.note { "Each shows how many jobs it touches before it runs, then acts job by job through the same scripts as the single actions (every job gets its own event, with your name)." }
            (forms(&queues, &pipelines))
        };
        return Ok(app.page("Bulk actions", Nav::Bulk, body).into_response());
    };
    let plan = app.bulk_plan(&queue, action, &sel).await?;
    let n = plan.jobs.len();
    let state = action.source_state();
    let enabled = app.token.is_some();
    let body = html! {
        h1 { "Bulk " (action.name()) }
        p.summary #bulk-count data-count=(n) {
            "This will " (action.name()) " " strong { (n) } " " (state.as_str()) (if n == 1 { " job" } else { " jobs" }) " of queue " (queue) "."
            @if plan.truncated { " More match: at most " (bulk::MAX_JOBS) " per run; run it again afterwards." }
        }
        @if let (BulkAction::Retry(_), false) = (action, plan.permanent.is_empty() && plan.retryable == 0) {
            @let perm = plan.permanent.len();
            p.bulk-split #bulk-split data-retryable=(plan.retryable) data-permanent=(perm) {
                strong { (plan.retryable) } " failed retryably; " strong { (perm) } " failed permanently (the step said retrying won't help)"
                @if perm > 0 && !sel.include_permanent { ": those are left out." }
                @else if perm > 0 { ": retried too, as asked." }
                @else { "." }
            }
            @if perm > 0 {
                details.bulk-permanent {
                    summary { "The permanent failures" }
                    ul { @for id in plan.permanent.iter().take(50) { li { a.mono href=(job_url(&queue, id.as_str())) { (id) } } } }
                }
                form.bulk-include method="get" action="/bulk" {
                    (p.hidden_selection())
                    @if sel.include_permanent {
                        button type="submit" { "Leave the permanent failures out" }
                    } @else {
                        input type="hidden" name="include_permanent" value="on";
                        button type="submit" { "Include the " (crate::wording::count(perm, "permanent failure", "permanent failures")) }
                    }
                }
            }
        }
        @if !sel.ids.is_empty() && n < sel.ids.len() {
            p.note #bulk-not-matched { (crate::wording::jobs(sel.ids.len() - n)) " of those chosen " (if sel.ids.len() - n == 1 { "is" } else { "are" }) " no longer " (state.as_str()) " (or left out): not touched." }
        }
        @if n > 0 {
            ul.bulk-jobs {
                @for id in plan.jobs.iter().take(50) { li { a.mono href=(job_url(&queue, id.as_str())) { (id) } } }
                @if n > 50 { li { "… and " (n - 50) " more" } }
            }
            @if enabled {
                form.bulk-confirm method="post" action="/bulk" {
                    (p.hidden())
                    label { "Reason " textarea name="reason" rows="2" maxlength="2000" required[action.needs_reason()] {} }
                    (auth_fields())
                    button type="submit" { (action.name()) " " (crate::wording::jobs(n)) }
                }
            } @else {
                p.note { (DISABLED) }
            }
        }
        p { a href="/bulk" { "back" } }
    };
    Ok(app.page("Bulk", Nav::Bulk, body).into_response())
}

/// `POST /bulk` (form): runs the action.
async fn bulk_form(
    State(app): State<Shared>,
    headers: HeaderMap,
    Form(p): Form<BulkParams>,
) -> Result<Response, PageError> {
    authorise(&app, &headers, p.token.as_deref())?;
    let (queue, action, sel) = p
        .parse()?
        .ok_or_else(|| DashError::BadRequest("no bulk action given".into()))?;
    let reason = reason_of(action, &p)?;
    let who = by(p.operator.as_deref());
    let (plan, report) = app.bulk_run(&queue, action, &sel, &reason, &who).await?;
    let body = html! {
        h1 { "Bulk " (action.name()) " done" }
        p.summary #bulk-done data-done=(report.done) {
            (report.done) " of " (crate::wording::jobs(plan.jobs.len())) " of queue " (queue) " done by " (who) "."
        }
        @if !report.refused.is_empty() {
            h2 { "Refused (their state changed)" }
            ul { @for (id, why) in &report.refused { li { a.mono href=(job_url(&queue, id.as_str())) { (id) } ": " (why) } } }
        }
        p { a href="/bulk" { "More bulk actions" } " · " a href=(format!("/events?queue={}", path_segment(&queue))) { "Events" } }
    };
    Ok(app.page("Bulk done", Nav::Bulk, body).into_response())
}

/// `POST /api/bulk` (JSON, the same fields; `dry_run`).
async fn bulk_api(
    State(app): State<Shared>,
    headers: HeaderMap,
    Json(p): Json<BulkParams>,
) -> Result<Json<Value>, ApiError> {
    authorise(&app, &headers, p.token.as_deref())?;
    let (queue, action, sel) = p
        .parse()?
        .ok_or_else(|| DashError::BadRequest("no bulk action given".into()))?;
    if p.dry_run {
        let plan = app.bulk_plan(&queue, action, &sel).await?;
        return Ok(Json(
            json!({"dry_run": true, "count": plan.jobs.len(), "plan": plan}),
        ));
    }
    let reason = reason_of(action, &p)?;
    let who = by(p.operator.as_deref());
    let (plan, report) = app.bulk_run(&queue, action, &sel, &reason, &who).await?;
    Ok(Json(json!({
        "queue": queue, "action": action.name(), "matched": plan.jobs.len(), "done": report.done,
        "refused": report.refused.iter().map(|(id, why)| json!({"job": id, "why": why})).collect::<Vec<_>>(),
        "by": who,
    })))
}
