//! `GET /workers`: live workers per queue, and pruned registrations.

use axum::extract::{Query, State};
use axum::routing::get;
use axum::{Json, Router};
use maud::html;

use super::data::{QueueParam, QueueWorkers};
use super::error::ApiError;
use super::html::{jobs_url, query, when, Nav, Page};
use super::state::Shared;
use crate::time::human;

/// The routes of the workers.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/workers", get(workers))
        .route("/api/workers", get(api_workers))
}

/// `GET /workers`.
async fn workers(State(app): State<Shared>, Query(p): Query<QueueParam>) -> Page {
    let all: Vec<QueueWorkers> = app.workers(p.queue().as_deref()).await?;
    let now = app.now().await?;
    let live: usize = all.iter().map(|w| w.workers.live.len()).sum();
    Ok(app.page(
        "Workers",
        Nav::Workers,
        html! {
            h1 { "Workers" }
            div #workers-list data-live {
                p.summary { (live) " live worker registration(s)" }
                @if live > 0 {
                    table.grid.workers {
                        thead { tr { th { "Queue" } th { "Worker" } th { "PID" } th { "Pipelines" } th { "Busy" } th { "Started" } th { "Expires in" } th { "Status" } } }
                        tbody {
                            @for qw in &all { @for w in &qw.workers.live {
                                tr {
                                    td { a href=(jobs_url(&qw.queue, "")) { (qw.queue) } }
                                    td.mono { a href=(format!("/jobs{}", query(&[("queue", &qw.queue), ("worker", &w.id)]))) { (w.id) } }
                                    td { @if let Some(p) = w.pid { (p) } @else { "-" } }
                                    td { (if w.pipelines.is_empty() { "-".to_owned() } else { w.pipelines.join(", ") }) }
                                    td { @match (w.active, w.concurrency) { (Some(a), Some(c)) => { (a) "/" (c) }, (Some(a), None) => (a), _ => "-" } }
                                    td { @if let Some(s) = w.started_at { (when(now, s)) } @else { "-" } }
                                    td { @if let Some(e) = w.expires_in_ms { (human(e)) } @else { "-" } }
                                    td { (if w.shutting_down { "shutting down" } else { "live" }) }
                                }
                            } }
                        }
                    }
                }
                @for qw in all.iter().filter(|w| !w.workers.pruned.is_empty()) {
                    p.note { (qw.queue) ": pruned expired registrations: " (qw.workers.pruned.join(", ")) }
                }
            }
        },
    ))
}

/// `GET /api/workers`.
async fn api_workers(
    State(app): State<Shared>,
    Query(p): Query<QueueParam>,
) -> Result<Json<Vec<QueueWorkers>>, ApiError> {
    Ok(Json(app.workers(p.queue().as_deref()).await?))
}
