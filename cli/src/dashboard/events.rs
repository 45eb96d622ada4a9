//! `GET /events`: the event feed, newest first; and the events table the job
//! page shows too.

use axum::extract::{Query, State};
use axum::routing::get;
use axum::{Json, Router};
use leasehold_core::{Event, Millis};
use maud::{html, Markup};

use super::data::EventsParams;
use super::error::ApiError;
use super::html::{badge, job_url, when, Nav, Page};
use super::state::Shared;
use crate::time::stamp;

/// The routes of the event feed.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/events", get(events))
        .route("/api/events", get(api_events))
}

/// Events as a table (`with_job`: a job column).
pub(super) fn events_table(events: &[Event], now: Millis, with_job: bool) -> Markup {
    html! {
        table.grid.events {
            thead { tr { th { "Time" } th { "Queue" } @if with_job { th { "Job" } } th { "Attempt" } th { "Op" } th { "Move" } th { "By" } th { "Reason" } } }
            tbody {
                @for e in events {
                    tr data-op=(e.op) {
                        td { span title=(stamp(e.at)) { (stamp(e.at)) } " " small { (when(now, e.at)) } }
                        td { (e.queue) }
                        @if with_job { td { a.mono href=(job_url(&e.queue, e.job.as_str())) { (e.job) } } }
                        td { (e.attempt) }
                        td { (e.op) }
                        td { @if let Some(f) = e.from { (badge(f)) " → " } (badge(e.to)) }
                        td.mono { (e.by) }
                        td.reason { (e.reason) }
                    }
                }
            }
        }
    }
}

/// `GET /events`: the event feed, newest first.
async fn events(State(app): State<Shared>, Query(p): Query<EventsParams>) -> Page {
    let q = p.parse()?;
    let queues = app.queues().await?;
    let events = app.events(&q).await?;
    let now = app.now().await?;
    let queue = q.queue.as_deref().unwrap_or("");
    Ok(app.page(
        "Events",
        Nav::Events,
        html! {
            h1 { "Events" }
            form.filters method="get" action="/events" {
                label { "Queue " select name="queue" {
                    option value="" selected[queue.is_empty()] { "all" }
                    @for name in &queues { option value=(name) selected[name == queue] { (name) } }
                } }
                label { "Job " input type="text" name="job" value=(q.job.as_deref().unwrap_or("")); }
                label { "Latest " input type="number" name="limit" min="1" max="1000" value=(q.limit); }
                button type="submit" { "Show" }
            }
            div #events-list data-live {
                @if events.is_empty() { p.empty { "No events." } }
                @else { (events_table(&events, now, true)) }
            }
        },
    ))
}

/// `GET /api/events`.
async fn api_events(
    State(app): State<Shared>,
    Query(p): Query<EventsParams>,
) -> Result<Json<Vec<Event>>, ApiError> {
    let q = p.parse()?;
    Ok(Json(app.events(&q).await?))
}
