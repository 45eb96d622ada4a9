//! `GET /jobs`: jobs by state, with filters and paging. A list of one queue
//! and one state also acts on many: a checkbox per row, and the actions that
//! state allows (retry, cancel, resolve, delete) for the rows checked or for
//! every job matching the filter (with its count); both go to `/bulk`'s
//! confirm page, which runs them through the same scripts as single actions.

use axum::extract::{Query, State};
use axum::routing::get;
use axum::{Json, Router};
use leasehold_core::{JobPage, JobState, Millis};
use maud::{html, Markup};

use super::data::JobsParams;
use super::error::ApiError;
use super::html::{badge, job_url, opt, query, when, Nav, Page};
use super::state::Shared;

/// The routes of the jobs list.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/jobs", get(jobs))
        .route("/api/jobs", get(api_jobs))
}

/// One page of jobs as a table; with `select`, a checkbox per row belonging to
/// the form `#bulk-select`.
pub(super) fn jobs_table(page: &JobPage, now: Millis, select: bool) -> Markup {
    html! {
        table.grid.jobs {
            thead { tr {
                @if select { th.pick { input #pick-all type="checkbox" title="check every row of this page" aria-label="check every row"; } }
                th { "Job" } th { "Queue" } th { "Pipeline" } th { "State" } th { "Attempt" } th { "Step" }
                th { "Last done" } th { "Resource" } th { "Window" } th { "Worker" } th { "Created" } th { "Updated" }
                th { "Input" } th { "Why it ended" }
            } }
            tbody {
                @for j in &page.jobs {
                    tr data-job=(j.id) data-state=(j.state.as_str()) {
                        @if select { td.pick { input.pick type="checkbox" name="id" value=(j.id) form="bulk-select" aria-label={ "select " (j.id) }; } }
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

/// The bulk actions a list of `state` offers: (action, button label).
fn actions_for(state: JobState) -> &'static [(&'static str, &'static str)] {
    match state {
        JobState::Failed => &[("retry", "Retry"), ("delete", "Delete")],
        JobState::Queued => &[("cancel", "Cancel")],
        JobState::Stale => &[("resolve", "Resolve")],
        JobState::Succeeded | JobState::Cancelled => &[("delete", "Delete")],
        _ => &[],
    }
}

/// The action buttons of one bulk form (`as` for resolve beside them).
fn action_buttons(state: JobState, what: &str) -> Markup {
    html! {
        @if state == JobState::Stale {
            label { "as " select name="as" {
                option value="failed" { "FAILED" } option value="cancelled" { "CANCELLED" } option value="succeeded" { "SUCCEEDED" }
            } }
            " "
        }
        @for (action, label) in actions_for(state) {
            button type="submit" name="action" value=(*action) data-action=(*action) { (label) " " (what) }
            " "
        }
    }
}

/// `GET /jobs`: jobs by state, with filters and paging.
async fn jobs(State(app): State<Shared>, Query(params): Query<JobsParams>) -> Page {
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
    // acting on many needs one queue (given, or the only one) and one state
    let one_queue = if queue.is_empty() && queues.len() == 1 {
        queues[0].as_str()
    } else {
        queue
    };
    let bulk_state = q
        .filter
        .state
        .filter(|s| !actions_for(*s).is_empty() && !one_queue.is_empty());
    // how many jobs the filter matches (what "every job matching" touches)
    let matching = match bulk_state {
        Some(st) => {
            let sel = crate::bulk::Selection {
                pipeline: q.filter.pipeline.clone(),
                resource: q.filter.resource.clone(),
                worker: q.filter.worker.clone(),
                include_permanent: true,
                ..Default::default()
            };
            let action = match st {
                JobState::Failed => {
                    crate::bulk::BulkAction::Retry(leasehold_core::RetryMode::Resume)
                }
                JobState::Queued => crate::bulk::BulkAction::Cancel,
                JobState::Stale => crate::bulk::BulkAction::Resolve(JobState::Failed),
                other => crate::bulk::BulkAction::Delete(other),
            };
            let inspector = app.inspector(one_queue)?;
            let plan = crate::bulk::select(&inspector, action, &sel)
                .await
                .map_err(|e| app.fail(e))?;
            Some((plan.jobs.len(), plan.truncated))
        }
        None => None,
    };
    let filtered = !pipeline.is_empty() || !resource.is_empty() || !worker.is_empty();
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
            @if let (Some(st), Some((n, more))) = (bulk_state, matching) {
                section.card.bulk-bar #bulk-bar {
                    form #bulk-select method="get" action="/bulk" {
                        input type="hidden" name="picked" value="rows";
                        input type="hidden" name="queue" value=(one_queue);
                        input type="hidden" name="state" value=(st.as_str());
                        span.checked-count #checked-count { "With the rows checked: " }
                        (action_buttons(st, "checked"))
                    }
                    form #bulk-all method="get" action="/bulk" {
                        input type="hidden" name="queue" value=(one_queue);
                        input type="hidden" name="state" value=(st.as_str());
                        @if !pipeline.is_empty() { input type="hidden" name="pipeline" value=(pipeline); }
                        @if !resource.is_empty() { input type="hidden" name="resource" value=(resource); }
                        @if !worker.is_empty() { input type="hidden" name="worker" value=(worker); }
                        span #matching data-count=(n) {
                            "Every job matching this filter (" (crate::wording::jobs(n)) (if more { "+" } else { "" }) "): "
                        }
                        @if st == JobState::Queued && !filtered {
                            span.note { "filter by pipeline, resource or worker to cancel every match" }
                        } @else {
                            (action_buttons(st, "all"))
                        }
                    }
                    p.note { "Each goes to a confirm page that shows the jobs first; nothing changes until you confirm there, with a reason." }
                }
            } @else if !page.jobs.is_empty() {
                p.note #bulk-hint { "Choose a queue and a state (FAILED, QUEUED, STALE, SUCCEEDED, CANCELLED) to act on many jobs at once." }
            }
            div #jobs-list data-live=(if bulk_state.is_some() { "idle" } else { "" }) {
                p.summary {
                    @if page.jobs.is_empty() { "No jobs match." }
                    @else { "Jobs " (q.page.offset + 1) "–" (q.page.offset + page.jobs.len()) ", newest change first." }
                    @if q.page.offset > 0 { " " a.prev href=(link(q.page.offset.saturating_sub(q.page.limit))) { "← newer" } }
                    @if page.has_more { " " a.next href=(link(q.page.offset + page.jobs.len().max(1))) { "older →" } }
                }
                @if !page.jobs.is_empty() { (jobs_table(&page, now, bulk_state.is_some())) }
                @if page.truncated {
                    p.note.warn { "Stopped after reading " (page.examined) " index entries: narrow the filter (queue, state, pipeline)." }
                }
            }
        },
    ))
}

/// `GET /api/jobs`.
async fn api_jobs(
    State(app): State<Shared>,
    Query(p): Query<JobsParams>,
) -> Result<Json<JobPage>, ApiError> {
    let q = p.parse()?;
    Ok(Json(app.jobs(&q).await?))
}
