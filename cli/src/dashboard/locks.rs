//! `GET /locks`, and the locks table the queue cards show too.

use axum::extract::{Query, State};
use axum::routing::get;
use axum::{Json, Router};
use leasehold_core::LockInfo;
use maud::{html, Markup};

use super::data::{QueueLock, QueueParam};
use super::error::ApiError;
use super::html::{badge, job_url, jobs_url, Nav, Page};
use super::state::Shared;
use crate::wording::lock_ttl;

/// The routes of the locks.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/locks", get(locks))
        .route("/api/locks", get(api_locks))
}

/// Locks with their holder, time left, parked jobs and live claims (`with_queue`: a queue column).
pub(super) fn locks_table(rows: &[(&str, &LockInfo)], with_queue: bool) -> Markup {
    html! {
        table.grid.locks {
            thead { tr {
                @if with_queue { th { "Queue" } }
                th { "Resource" } th { "Holder" } th { "Holder state" } th { "Time left" } th { "Parked" } th { "Live jobs on it" }
            } }
            tbody {
                @for (q, l) in rows {
                    tr.warn[l.claims.len() > 1] {
                        @if with_queue { td { a href=(jobs_url(q, "")) { (q) } } }
                        td.mono { (l.resource) }
                        td.mono { @match &l.holder { Some(h) => a href=(job_url(q, h.as_str())) { (h) }, None => "-" } }
                        td { @match (&l.holder, l.holder_state) { (Some(_), Some(s)) => (badge(s)), (Some(_), None) => "gone", (None, _) => "-" } }
                        td { (lock_ttl(l)) }
                        td { (l.parked) }
                        td {
                            @for c in &l.claims { a.mono href=(job_url(q, c.job.as_str())) { (c.job) } " " (badge(c.state)) " " }
                            @if l.claims.len() > 1 { br; strong { "claimed by " (l.claims.len()) " live jobs: may be processed twice" } }
                        }
                    }
                }
            }
        }
    }
}

/// `GET /locks`.
async fn locks(State(app): State<Shared>, Query(p): Query<QueueParam>) -> Page {
    let all: Vec<QueueLock> = app.locks(p.queue().as_deref()).await?;
    let rows: Vec<(&str, &LockInfo)> = all.iter().map(|l| (l.queue.as_str(), &l.lock)).collect();
    Ok(app.page(
        "Locks",
        Nav::Locks,
        html! {
            h1 { "Locks" }
            div #locks-list data-live {
                @if rows.is_empty() { p.empty { "No locks held and no live job claims a resource." } }
                @else { (locks_table(&rows, true)) }
            }
        },
    ))
}

/// `GET /api/locks`.
async fn api_locks(
    State(app): State<Shared>,
    Query(p): Query<QueueParam>,
) -> Result<Json<Vec<QueueLock>>, ApiError> {
    Ok(Json(app.locks(p.queue().as_deref()).await?))
}
