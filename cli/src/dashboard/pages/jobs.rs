//! `GET /jobs`: jobs by state, with filters and paging.

use axum::extract::{Query, State};
use leasehold_core::{JobPage, JobState, Millis};
use maud::{html, Markup};

use super::Page;
use crate::dashboard::data::JobsParams;
use crate::dashboard::html::{badge, job_url, opt, query, when, Nav};
use crate::dashboard::Shared;

/// One page of jobs as a table.
pub(crate) fn jobs_table(page: &JobPage, now: Millis) -> Markup {
    html! {
        table.grid.jobs {
            thead { tr {
                th { "Job" } th { "Queue" } th { "Pipeline" } th { "State" } th { "Attempt" } th { "Step" }
                th { "Last done" } th { "Resource" } th { "Window" } th { "Worker" } th { "Created" } th { "Updated" }
                th { "Input" } th { "Why it ended" }
            } }
            tbody {
                @for j in &page.jobs {
                    tr data-job=(j.id) data-state=(j.state.as_str()) {
                        td { a.mono href=(job_url(&j.queue, j.id.as_str())) { (j.id) } }
                        td { (j.queue) }
                        td { (j.pipeline) }
                        td { (badge(j.state))
                            @if j.cancel_reason.is_some() && !j.state.is_terminal() { " " span.pill.warn { "cancel requested" } } }
                        td { (j.attempt) }
                        td { (opt(j.step.as_deref())) }
                        td { (opt(j.last_step.as_deref())) }
                        td.mono { (opt(j.resource.as_deref())) }
                        td.mono.window { (opt(j.window.as_deref())) }
                        td.mono { (opt(j.worker.as_deref())) }
                        td { (when(now, j.created_at)) }
                        td { (when(now, j.updated_at)) }
                        td.mono.input title=(j.input) { (j.input) }
                        td.ended {
                            @if let Some(e) = &j.ended {
                                span.pill.(if e.retryable { "retryable" } else { "permanent" }) data-retryable=(crate::wording::yes_no(e.retryable)) {
                                    (if e.retryable { "retryable" } else { "permanent" })
                                }
                                " " (crate::wording::ending(e))
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `GET /jobs`: jobs by state, with filters and paging.
pub(crate) async fn jobs(State(app): State<Shared>, Query(params): Query<JobsParams>) -> Page {
    let q = params.parse()?;
    let queues = app.queues().await?;
    let page = app.jobs(&q).await?;
    let now = app.now().await?;
    let state = q.filter.state.map(|s| s.as_str()).unwrap_or("");
    let queue = q.queue.as_deref().unwrap_or("");
    let pipeline = q.filter.pipeline.as_deref().unwrap_or("");
    let resource = q.filter.resource.as_deref().unwrap_or("");
    let worker = q.filter.worker.as_deref().unwrap_or("");
    let limit = q.page.limit.to_string();
    let link = |offset: usize| {
        let offset = offset.to_string();
        format!(
            "/jobs{}",
            query(&[
                ("queue", queue),
                ("state", state),
                ("pipeline", pipeline),
                ("resource", resource),
                ("worker", worker),
                ("offset", if offset == "0" { "" } else { &offset }),
                ("limit", if limit == "50" { "" } else { &limit }),
            ])
        )
    };
    let title = if state.is_empty() {
        "Jobs".to_owned()
    } else {
        format!("{state} jobs")
    };
    Ok(app.page(
        &title,
        Nav::Jobs,
        html! {
            h1 { (title) }
            form.filters method="get" action="/jobs" {
                label { "Queue " select name="queue" {
                    option value="" selected[queue.is_empty()] { "all" }
                    @for name in &queues { option value=(name) selected[name == queue] { (name) } }
                    @if !queue.is_empty() && !queues.iter().any(|n| n == queue) { option value=(queue) selected { (queue) } }
                } }
                label { "State " select name="state" {
                    option value="" selected[state.is_empty()] { "any" }
                    @for s in JobState::ALL { option value=(s.as_str()) selected[s.as_str() == state] { (s.as_str()) } }
                } }
                label { "Pipeline " input type="text" name="pipeline" value=(pipeline); }
                label { "Resource " input type="text" name="resource" value=(resource); }
                label { "Worker " input type="text" name="worker" value=(worker); }
                label { "Per page " input type="number" name="limit" min="1" max="500" value=(limit); }
                button type="submit" { "Filter" }
                " " a href="/jobs" { "reset" }
            }
            div #jobs-list data-live {
                p.summary {
                    @if page.jobs.is_empty() { "No jobs match." }
                    @else { "Jobs " (q.page.offset + 1) "–" (q.page.offset + page.jobs.len()) ", newest change first." }
                    @if q.page.offset > 0 { " " a.prev href=(link(q.page.offset.saturating_sub(q.page.limit))) { "← newer" } }
                    @if page.has_more { " " a.next href=(link(q.page.offset + page.jobs.len().max(1))) { "older →" } }
                }
                @if !page.jobs.is_empty() { (jobs_table(&page, now)) }
                @if page.truncated {
                    p.note.warn { "Stopped after reading " (page.examined) " index entries: narrow the filter (queue, state, pipeline)." }
                }
            }
        },
    ))
}
