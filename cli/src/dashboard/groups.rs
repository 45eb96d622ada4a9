//! Groups of jobs on the dashboard: `GET /groups` (every group with its
//! progress and counts per state), `GET /groups/{queue}/{name}` (counts, what
//! holds it, the children list), their JSON under `/api/groups`, and the
//! actions (with the token): create and seal (`POST /api/groups/{queue}`,
//! `.../{name}/seal`), cancel and retry the failed children (API and forms),
//! through the same scripts as the command line.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use leasehold_core::{
    jobs_from_json, Contract, EnqueueOptions, GroupInfo, GroupPolicy, GroupStatus, GroupView,
    JsonJob, NewGroup, RetryMode, Terms,
};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth::{authorise, by, ActionBody};
use super::error::{ApiError, DashError, PageError, Res};
use super::html::{auth_fields, badge, job_url, path_segment, Nav};
use super::state::{App, Shared};

/// The routes of groups: the pages, their JSON, and the actions.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/groups", get(groups_page))
        .route("/groups/{queue}/{name}", get(group_page))
        .route("/groups/{queue}/{name}/cancel", post(cancel_form))
        .route("/groups/{queue}/{name}/retry", post(retry_form))
        .route("/api/groups", get(groups_api))
        .route("/api/groups/{queue}", post(create_api))
        .route("/api/groups/{queue}/{name}", get(group_api))
        .route("/api/groups/{queue}/{name}/seal", post(seal_api))
        .route("/api/groups/{queue}/{name}/cancel", post(cancel_api))
        .route("/api/groups/{queue}/{name}/retry", post(retry_api))
}

fn group_url(queue: &str, name: &str) -> String {
    format!("/groups/{}/{}", path_segment(queue), path_segment(name))
}

impl App {
    /// Every group of every queue shown.
    async fn all_groups(&self) -> Res<Vec<GroupInfo>> {
        let mut all = Vec::new();
        for q in self.queues().await? {
            let queue = self.queue(&q)?;
            all.extend(queue.groups().await.map_err(|e| self.fail(e))?);
        }
        Ok(all)
    }

    /// Group `name` of `queue` with its children.
    async fn group_view(&self, queue: &str, name: &str) -> Res<GroupView> {
        let q = self.queue(queue)?;
        self.known_queue(queue).await?;
        match q.group_view(name).await.map_err(|e| self.fail(e))? {
            Some(view) => Ok(view),
            None => {
                let mut known: Vec<String> = q
                    .groups()
                    .await
                    .map_err(|e| self.fail(e))?
                    .into_iter()
                    .map(|g| g.name)
                    .collect();
                known.sort();
                Err(DashError::NotFound(crate::names::unknown(
                    "group",
                    name,
                    &format!("in queue {queue}"),
                    &known,
                )))
            }
        }
    }
}

fn progress(info: &GroupInfo) -> Markup {
    let pct = (info.ended() * 100).checked_div(info.total).unwrap_or(100);
    html! {
        progress max=(info.total.max(1)) value=(info.ended()) {}
        " " (pct) "% (" (info.ended()) "/" (info.total) ")"
    }
}

fn counts_table(rows: &[GroupInfo]) -> Markup {
    html! {
        table.grid.groups {
            thead { tr {
                th { "Queue" } th { "Group" } th { "Status" } th { "Progress" }
                th { "Queued" } th { "Leased" } th { "Running" }
                th { "Succeeded" } th { "Failed" } th { "Cancelled" } th { "Stale" } th { "Quarantined" }
            } }
            tbody {
                @for g in rows {
                    tr.warn[g.failed + g.cancelled + g.stale + g.quarantined > 0] {
                        td { (g.queue) }
                        td { a href=(group_url(&g.queue, &g.name)) { (g.name) } }
                        td { (g.status.as_str()) }
                        td { (progress(g)) }
                        td { (g.queued) } td { (g.leased) } td { (g.running) }
                        td { (g.succeeded) } td { (g.failed) } td { (g.cancelled) } td { (g.stale) }
                        td { (g.quarantined) }
                    }
                }
            }
        }
    }
}

/// `GET /groups`.
async fn groups_page(State(app): State<Shared>) -> Result<Markup, PageError> {
    let all = app.all_groups().await?;
    Ok(app.page(
        "Groups",
        Nav::Groups,
        html! {
            h1 { "Groups" }
            div #groups-list data-live {
                @if all.is_empty() { p.empty { "No groups." } }
                @else { (counts_table(&all)) }
            }
        },
    ))
}

/// `GET /groups/{queue}/{name}`.
async fn group_page(
    State(app): State<Shared>,
    Path((queue, name)): Path<(String, String)>,
) -> Result<Markup, PageError> {
    let view = app.group_view(&queue, &name).await?;
    let info = &view.info;
    let actions = app.token.is_some();
    let action_url = |what: &str| format!("{}/{what}", group_url(&queue, &name));
    Ok(app.page(
        &format!("Group {name}"),
        Nav::Groups,
        html! {
            h1 { "Group " (name) }
            div #group-detail data-live {
                p { "Queue " (queue) " · " (info.status.as_str()) " · policy " (info.policy.as_str()) " · " (progress(info)) }
                @if let Some(why) = view.why() { p.warn { (why) } }
                @if let (Some(id), true) = (&info.completion, info.fired) {
                    p { "Completion job " a.mono href=(job_url(&queue, id.as_str())) { (id) } " enqueued." }
                } @else if let Some(p) = &info.completion_pipeline {
                    p { "Completion job (" (p) ") not enqueued yet." }
                }
                (counts_table(std::slice::from_ref(info)))
                h2 { "Children" }
                table.grid.children {
                    thead { tr { th { "Job" } th { "State" } th { "Pipeline" } } }
                    tbody {
                        @for c in &view.children {
                            tr {
                                td.mono { a href=(job_url(&queue, c.id.as_str())) { (c.id) } }
                                td {
                                    @match c.state { Some(s) => (badge(s)), None => "deleted" }
                                    @if c.waiting { " waiting for its parents" }
                                }
                                td { (c.pipeline.as_deref().unwrap_or("")) }
                            }
                        }
                    }
                }
            }
            @if actions {
                h2 { "Actions" }
                // a completed group is settled (its completion job fired) and a
                // cancelled one is cancelled already: neither can be cancelled
                @if matches!(info.status, GroupStatus::Open | GroupStatus::Sealed | GroupStatus::Blocked) {
                    form.group-cancel method="post" action=(action_url("cancel")) {
                        (auth_fields())
                        input type="text" name="reason" placeholder="reason (required)";
                        button type="submit" { "Cancel the group" }
                    }
                } @else {
                    p.note { "A " (info.status.as_str()) " group cannot be cancelled." }
                }
                @if info.failed + info.cancelled > 0 {
                    form.group-retry method="post" action=(action_url("retry")) {
                        (auth_fields())
                        input type="text" name="reason" placeholder="reason";
                        button type="submit" { "Retry its failed children" }
                    }
                }
            }
        },
    ))
}

/// `GET /api/groups`.
async fn groups_api(State(app): State<Shared>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(app.all_groups().await?)))
}

/// `GET /api/groups/{queue}/{name}`.
async fn group_api(
    State(app): State<Shared>,
    Path((queue, name)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let view = app.group_view(&queue, &name).await?;
    Ok(Json(json!({
        "group": view.info,
        "why": view.why(),
        "failed": view.failed,
        "cancelled": view.cancelled,
        "stale": view.stale,
        "quarantined": view.quarantined,
        "children": view.children,
    })))
}

/// `POST /api/groups/{queue}` body: a group to create.
#[derive(Debug, Deserialize)]
pub(super) struct CreateBody {
    token: Option<String>,
    operator: Option<String>,
    name: String,
    #[serde(default)]
    policy: Option<String>,
    /// The completion job's pipeline and input (JSON value).
    completion: Option<String>,
    #[serde(default)]
    completion_input: Option<Value>,
    /// The completion pipeline is one no worker registered in the queue: its
    /// job is taken as given (as the enqueue endpoint's `unregistered`).
    #[serde(default)]
    unregistered: bool,
}

/// `POST /api/groups/{queue}` `{"name", "policy", "completion", "completion_input",
/// "unregistered"}`: the completion job is built under its pipeline's
/// published contract (input checked against its schema, resource and input
/// key from its templates, its max attempts, STALE lock policy and flow
/// gates), as an enqueue of that pipeline is; a pipeline no worker registered
/// in the queue is refused unless `"unregistered": true`.
async fn create_api(
    State(app): State<Shared>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    Json(body): Json<CreateBody>,
) -> Result<Json<Value>, ApiError> {
    authorise(&app, &headers, body.token.as_deref())?;
    let q = app.queue(&queue)?;
    let policy = match body.policy.as_deref() {
        None | Some("all_succeeded") => GroupPolicy::AllSucceeded,
        Some("all_terminal") => GroupPolicy::AllTerminal,
        Some(other) => {
            return Err(DashError::BadRequest(format!(
                "policy {other:?}: all_succeeded or all_terminal"
            ))
            .into())
        }
    };
    let mut group = NewGroup::new(&body.name).policy(policy);
    if let Some(p) = &body.completion {
        let input = body
            .completion_input
            .clone()
            .unwrap_or_else(|| json!({}))
            .to_string();
        let mut options = EnqueueOptions::new();
        options.queue = Some(queue.clone());
        let contract = match q.pipeline_spec(p).await.map_err(|e| app.fail(e))? {
            Some(spec) => Some(Contract::new(spec).map_err(|e| app.fail(e))?),
            None if body.unregistered => {
                options.unregistered = true;
                None
            }
            None => {
                return Err(DashError::NotFound(format!(
                    "completion pipeline {p} is not registered in queue {queue}: no worker \
                     serving it has started there, so its input type and policies are unknown; \
                     start a worker, or send \"unregistered\": true"
                ))
                .into())
            }
        };
        let terms = match &contract {
            Some(c) => Terms::Published(c),
            None => Terms::Unregistered(p),
        };
        let built = jobs_from_json(terms, &[JsonJob::new(input, options)])
            .map_err(|bad| app.fail(bad.problem.into()))?;
        let Some(job) = built.into_first() else {
            return Err(DashError::Internal("no completion job was built".into()).into());
        };
        group = group.completion(job);
    }
    let created = q
        .create_group(&group, &by(body.operator.as_deref()))
        .await
        .map_err(|e| app.fail(e))?;
    Ok(Json(
        json!({"queue": queue, "group": body.name, "created": created}),
    ))
}

/// `POST /api/groups/{queue}/{name}/seal`.
async fn seal_api(
    State(app): State<Shared>,
    Path((queue, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Option<Json<ActionBody>>,
) -> Result<Json<Value>, ApiError> {
    let body = body.map(|b| b.0).unwrap_or_default();
    authorise(&app, &headers, body.token.as_deref())?;
    let status = app
        .queue(&queue)?
        .seal_group(&name, &by(body.operator.as_deref()))
        .await
        .map_err(|e| app.fail(e))?;
    Ok(Json(
        json!({"queue": queue, "group": name, "status": status}),
    ))
}

async fn cancel(app: &App, queue: &str, name: &str, h: &HeaderMap, b: &ActionBody) -> Res<Value> {
    authorise(app, h, b.token.as_deref())?;
    let reason = b.reason.as_deref().unwrap_or("").trim();
    if reason.is_empty() {
        return Err(DashError::BadRequest("a reason is required".into()));
    }
    let done = app
        .queue(queue)?
        .cancel_group(name, reason, &by(b.operator.as_deref()))
        .await
        .map_err(|e| app.fail(e))?;
    Ok(json!({"queue": queue, "group": name, "action": "cancel", "children": done}))
}

async fn retry(app: &App, queue: &str, name: &str, h: &HeaderMap, b: &ActionBody) -> Res<Value> {
    authorise(app, h, b.token.as_deref())?;
    let mode = match b.mode.as_deref() {
        Some("from_start") => RetryMode::FromStart,
        _ => RetryMode::Resume,
    };
    let (retried, refused) = app
        .queue(queue)?
        .retry_group(
            name,
            mode,
            &by(b.operator.as_deref()),
            b.reason.as_deref().unwrap_or(""),
        )
        .await
        .map_err(|e| app.fail(e))?;
    let refused: Vec<Value> = refused
        .iter()
        .map(|(id, e)| json!({"id": id, "error": e.to_string()}))
        .collect();
    Ok(
        json!({"queue": queue, "group": name, "action": "retry", "retried": retried, "refused": refused}),
    )
}

/// `POST /api/groups/{queue}/{name}/cancel` `{"reason", "operator"}`.
async fn cancel_api(
    State(app): State<Shared>,
    Path((queue, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Option<Json<ActionBody>>,
) -> Result<Json<Value>, ApiError> {
    let body = body.map(|b| b.0).unwrap_or_default();
    Ok(Json(cancel(&app, &queue, &name, &headers, &body).await?))
}

/// `POST /api/groups/{queue}/{name}/retry` `{"mode", "reason", "operator"}`.
async fn retry_api(
    State(app): State<Shared>,
    Path((queue, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Option<Json<ActionBody>>,
) -> Result<Json<Value>, ApiError> {
    let body = body.map(|b| b.0).unwrap_or_default();
    Ok(Json(retry(&app, &queue, &name, &headers, &body).await?))
}

/// `POST /groups/{queue}/{name}/cancel` (form), back to the group's page.
async fn cancel_form(
    State(app): State<Shared>,
    Path((queue, name)): Path<(String, String)>,
    headers: HeaderMap,
    Form(body): Form<ActionBody>,
) -> Result<Response, PageError> {
    cancel(&app, &queue, &name, &headers, &body).await?;
    Ok(Redirect::to(&group_url(&queue, &name)).into_response())
}

/// `POST /groups/{queue}/{name}/retry` (form), back to the group's page.
async fn retry_form(
    State(app): State<Shared>,
    Path((queue, name)): Path<(String, String)>,
    headers: HeaderMap,
    Form(body): Form<ActionBody>,
) -> Result<Response, PageError> {
    retry(&app, &queue, &name, &headers, &body).await?;
    Ok(Redirect::to(&group_url(&queue, &name)).into_response())
}
