//! `GET /`: every queue at a glance (counts per state, what waits, workers,
//! locks, STALE jobs, quarantined jobs with their repair and purge forms).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use leasehold_core::{JobState, QueueStatus};
use maud::{html, Markup};

use super::error::ApiError;
use super::html::{auth_fields, job_url, jobs_url, opt, Nav, Page};
use super::locks::locks_table;
use super::state::Shared;
use crate::context::queue_entries;
use crate::time::human;

/// The routes of the overview.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/", get(overview))
        .route("/api/queues", get(queues))
}

/// A state's count as a tile linking to its jobs.
fn count_tile(queue: &str, state: JobState, n: u64, mark: &str) -> Markup {
    html! {
        a class={ "tile st-" (state.as_str()) } href=(jobs_url(queue, state.as_str()))
            data-state=(state.as_str()) {
            span.n { (n) (mark) }
            span.l { (state.as_str()) }
        }
    }
}

/// One queue's card.
fn queue_card(s: &QueueStatus, actions: bool) -> Markup {
    let c = &s.counts;
    let sampled = c.terminal_sampled < c.terminal;
    let mark = if sampled { "*" } else { "" };
    let q = s.queue.as_str();
    html! {
        section.card.queue data-queue=(q) {
            h2 { a href=(jobs_url(q, "")) { (q) } }
            div.tiles {
                (count_tile(q, JobState::Queued, c.queued, ""))
                (count_tile(q, JobState::Leased, c.leased, if c.leases_unclassified > 0 { "+" } else { "" }))
                (count_tile(q, JobState::Running, c.running, ""))
                (count_tile(q, JobState::Stale, c.stale, ""))
                (count_tile(q, JobState::Succeeded, c.succeeded, mark))
                (count_tile(q, JobState::Failed, c.failed, mark))
                (count_tile(q, JobState::Cancelled, c.cancelled, mark))
            }
            @if sampled {
                p.note { "* among the newest " (c.terminal_sampled) " of " (c.terminal) " terminal jobs kept" }
            }
            @if c.leases_unclassified > 0 {
                p.note { "+ " (c.leases_unclassified) " leases beyond the classification limit" }
            }
            dl.facts {
                dt { "Oldest waiting" }
                dd {
                    @match &s.oldest_waiting {
                        Some(o) => { (human(o.age_ms)) " — " a.mono href=(job_url(q, o.job.as_str())) { (o.job) } " (" (o.pipeline) ")" },
                        None => "nothing waiting",
                    }
                }
                dt { "Waiting" }
                dd {
                    @if s.pipelines.is_empty() && s.parked == 0 { "-" }
                    @for p in &s.pipelines {
                        span.pill { (p.pipeline) ": " (p.ready) " ready"
                            @if p.delayed > 0 { ", " (p.delayed) " delayed (" (p.due) " due)" } }
                        " "
                    }
                    @if s.parked > 0 { span.pill { (s.parked) " parked on locked resources" } }
                    @for g in &s.gates {
                        " " span.pill.gate { (g.waiting) " waiting: "
                            @match g.kind.as_str() {
                                "slots" => { "resource " (g.name) " at limit " (g.held) "/" (g.limit) },
                                "running" => { "pipeline " (g.name) " at max_running " (g.held) "/" (g.limit) },
                                _ => { (g.gate) },
                            } }
                    }
                }
                @if !s.pauses.is_empty() {
                    dt.warn { "Paused" }
                    dd.warn.paused {
                        @for p in &s.pauses {
                            span.pill {
                                @match &p.scope {
                                    leasehold_core::PauseScope::Queue => "the whole queue",
                                    leasehold_core::PauseScope::Pipeline(name) => { "pipeline " (name) },
                                }
                                " since " (human(s.now - p.since)) " ago by " (p.by)
                                @if !p.reason.is_empty() { ": " (p.reason) }
                            }
                            " "
                        }
                    }
                }
                dt { "Live workers" }
                dd.workers-count { (s.workers.len())
                    @for w in &s.workers {
                        " " span.pill.mono { (w.id)
                            @if let (Some(a), Some(n)) = (w.active, w.concurrency) { " (" (a) "/" (n) " busy)" }
                            @if w.shutting_down { " (shutting down)" } }
                    }
                }
                dt { "Locks held" }
                dd { (s.locks.len()) }
                @if s.cleanups_waiting + s.cleanups_claimed > 0 {
                    dt { "Cleanup hooks" }
                    dd { (s.cleanups_waiting) " waiting, " (s.cleanups_claimed) " claimed (resolved STALE jobs)" }
                }
                @if s.expired_leases > 0 {
                    dt.warn { "Expired leases" }
                    dd.warn { (s.expired_leases) " not swept yet (their workers are probably gone; the next sweep recovers them)" }
                }
            }
            @if !s.locks.is_empty() {
                h3 { "Locks" }
                (locks_table(&s.locks.iter().map(|l| (q, l)).collect::<Vec<_>>(), false))
            }
            @if c.stale > 0 {
                h3.warn { "STALE: " (crate::wording::jobs(usize::try_from(c.stale).unwrap_or(usize::MAX))) (if c.stale == 1 { " needs" } else { " need" }) " a decision" }
                table.grid.stale {
                    thead { tr { th { "Job" } th { "Pipeline" } th { "Step cut off" } th { "Last done" } th { "Worker" } th { "STALE for" } th { "Lock" } } }
                    tbody {
                        @for j in &s.stale {
                            tr {
                                td { a.mono href=(job_url(q, j.job.id.as_str())) { (j.job.id) } }
                                td { (j.job.pipeline) }
                                td { (opt(j.job.step.as_deref())) }
                                td { (opt(j.job.last_step.as_deref())) }
                                td.mono { (opt(j.job.worker.as_deref())) }
                                td { (human(s.now - j.stale_at)) }
                                td { @match (&j.job.resource, j.holds_lock) {
                                    (Some(r), Some(true)) => { "holds " (r) },
                                    (Some(r), _) => { (r) " (not held)" },
                                    (None, _) => "-",
                                } }
                            }
                        }
                    }
                }
                @if (s.stale.len() as u64) < c.stale {
                    p.note { a href=(jobs_url(q, "STALE")) { "all STALE jobs" } }
                }
            }
            @for f in &s.failing_schedules {
                p.warn.failing-schedule {
                    strong { "Schedule " a href=(format!("schedules#{}", f.name)) { (f.name) } " FAILING" }
                    ": " (f.failing.failures) " failed ticks; last error: " (f.failing.last_error)
                }
            }
            (quarantine_section(s, actions))
            @if actions { (pause_forms(s)) }
        }
    }
}

/// Pause and resume forms of a queue (the whole queue, or the pipeline named).
fn pause_forms(s: &QueueStatus) -> Markup {
    let q = s.queue.as_str();
    let form = |what: &str, label: &str| {
        html! {
            form class={ "action-" (what) } method="post" action=(format!("/queues/{}/{what}", crate::dashboard::html::path_segment(q))) {
                input type="text" name="pipeline" placeholder="pipeline (all when empty)" maxlength="200";
                input type="text" name="reason" placeholder="reason" maxlength="2000";
                (auth_fields())
                button type="submit" { (label) }
            }
        }
    };
    html! {
        details.flow-actions {
            summary { "Pause / resume" }
            p.note { "A paused queue or pipeline leases nothing; jobs already running go on. Both are recorded as events." }
            (form("pause", "Pause"))
            (form("resume", "Resume"))
        }
    }
}

/// The quarantined (unreadable) jobs of a queue, with repair and purge forms
/// when actions are enabled, and what the status could not read.
fn quarantine_section(s: &QueueStatus, actions: bool) -> Markup {
    let q = s.queue.as_str();
    let c = &s.counts;
    let form = |id: &str, what: &str, label: &str| {
        html! {
            form class={ "action-" (what) } method="post" action=(format!("{}/{what}", job_url(q, id))) {
                (auth_fields())
                button type="submit" { (label) }
            }
        }
    };
    html! {
        @if c.quarantined > 0 {
            h3.warn.quarantine { "Quarantined: " (crate::wording::count(usize::try_from(c.quarantined).unwrap_or(usize::MAX), "unreadable job", "unreadable jobs")) }
            table.grid.quarantine {
                thead { tr { th { "Job" } th { "Field" } th { "Problem" } th { "Found in" } th { "Since" }
                    @if actions { th { "Act" } } } }
                tbody {
                    @for e in &s.quarantined {
                        tr data-job=(e.id) {
                            td { a.mono href=(job_url(q, &e.id)) { (e.id) } }
                            td.mono { (e.field) }
                            td { (e.reason) }
                            td.mono { (e.from_index) }
                            td { (human(s.now - e.at)) " ago" }
                            @if actions { td {
                                (form(&e.id, "repair", "Repair (fix the field first)"))
                                (form(&e.id, "purge", "Purge"))
                            } }
                        }
                    }
                }
            }
            p.note { "Inspect with " code { "leasehold show ID" } "; fix the field, then repair requeues the job, or purge deletes it. Both are recorded as events." }
        }
        @if c.unreadable > 0 {
            h3.warn { "Unreadable: " (c.unreadable) " (not counted in any state)" }
            ul.unreadable {
                @for u in &s.unreadable {
                    li { code { (u.key) } " field " code { (u.field) } ": " (u.problem) }
                }
            }
        }
    }
}

/// `GET /`: every queue at a glance.
/// The table of every queue, like asynqmon's: counts per state (each links to
/// its list), jobs processed (ended SUCCEEDED) and failed this UTC day, the
/// oldest waiting job's age, and whether it or a pipeline of it is paused.
fn overview_table(all: &[QueueStatus], today: &[(u64, u64)]) -> Markup {
    let states = [
        JobState::Queued,
        JobState::Leased,
        JobState::Running,
        JobState::Stale,
        JobState::Succeeded,
        JobState::Failed,
        JobState::Cancelled,
    ];
    html! {
        table.grid.overview #overview-table {
            thead { tr {
                th { "Queue" }
                @for st in &states { th { (st.as_str()) } }
                th title="jobs that ended SUCCEEDED since 00:00 UTC" { "Processed today" }
                th title="jobs that ended FAILED since 00:00 UTC" { "Failed today" }
                th { "Oldest waiting" }
                th { "Paused" }
            } }
            tbody {
                @for (s, (ok, failed)) in all.iter().zip(today) {
                    @let c = &s.counts;
                    @let q = s.queue.as_str();
                    tr data-queue=(q) {
                        td { a href=(jobs_url(q, "")) { (q) } }
                        @for st in &states {
                            @let n = match st {
                                JobState::Queued => c.queued,
                                JobState::Leased => c.leased,
                                JobState::Running => c.running,
                                JobState::Stale => c.stale,
                                JobState::Succeeded => c.succeeded,
                                JobState::Failed => c.failed,
                                _ => c.cancelled,
                            };
                            td.n data-state=(st.as_str()) { a href=(jobs_url(q, st.as_str())) { (n) } }
                        }
                        td.n.processed-today { (ok) }
                        td.n.failed-today { (failed) }
                        td.oldest { @match &s.oldest_waiting { Some(o) => (human(o.age_ms)), None => "-" } }
                        td.paused {
                            @if s.pauses.is_empty() { "no" } @else {
                                @for p in &s.pauses {
                                    span.pill.warn { @match &p.scope {
                                        leasehold_core::PauseScope::Queue => "queue",
                                        leasehold_core::PauseScope::Pipeline(name) => { (name) },
                                    } } " "
                                }
                            }
                        }
                    }
                }
            }
        }
        @if all.iter().any(|s| s.counts.terminal_sampled < s.counts.terminal) {
            p.note { "SUCCEEDED, FAILED and CANCELLED count among the newest terminal jobs kept (see each queue below); processed and failed today count from the per-minute counters." }
        }
    }
}

async fn overview(State(app): State<Shared>) -> Page {
    let overview = app.overview().await?;
    let all = &overview.queues;
    let mut today = Vec::with_capacity(all.len());
    for s in all {
        today.push(app.today(&s.queue).await?);
    }
    Ok(app.page(
        "Queues",
        Nav::Queues,
        html! {
            h1 { "Queues" }
            div #queues data-live {
                @if !overview.unreachable.is_empty() {
                    div.unreachable {
                        h3.warn { "Not every queue could be read (Redis Cluster): " (all.len()) " shown" }
                        ul {
                            @for lost in &overview.unreachable { li { (lost.line) } }
                        }
                    }
                }
                @if all.is_empty() && overview.unreachable.is_empty() {
                    p.empty { "No queues found under key prefix " code { (app.config.prefix) } " (a queue appears once it has had a job)." }
                } @else {
                    (overview_table(all, &today))
                }
                @for s in all { (queue_card(s, app.token.is_some())) }
            }
        },
    ))
}

/// `GET /api/queues`: one entry per queue: the status of each queue read
/// (`"reachable": true`) and, on a Redis Cluster with a master down, one
/// entry per queue that could not be read (`"reachable": false`, its
/// `master` and the `error` line the queues page shows) or per master whose
/// queues could not even be listed (`"queue": null`). The same lines are in
/// the header `x-leasehold-unreachable` (joined by "; ").
async fn queues(State(app): State<Shared>) -> Result<Response, ApiError> {
    let overview = app.overview().await?;
    let entries = queue_entries(&overview.queues, &overview.unreachable);
    let mut response = Json(entries).into_response();
    if !overview.unreachable.is_empty() {
        let lines = overview
            .unreachable
            .iter()
            .map(|l| l.line.as_str())
            .collect::<Vec<_>>()
            .join("; ")
            .replace(['\r', '\n'], " ");
        if let Ok(v) = axum::http::HeaderValue::from_str(&lines) {
            response.headers_mut().insert("x-leasehold-unreachable", v);
        }
    }
    Ok(response)
}
