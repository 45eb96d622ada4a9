//! The HTML pages. Parts marked `data-live` are refreshed in place by
//! `/static/app.js` every 2 s.

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use leasehold_core::{
    CancelOutcome, Event, JobDetail, JobPage, JobState, LockInfo, Millis, QueueStatus,
};
use maud::{html, Markup};
use serde::Deserialize;

use super::data::{EventsParams, JobsParams, QueueLock, QueueParam, QueueWorkers, Res};
use super::error::{DashError, PageError};
use super::html::{badge, job_url, jobs_url, layout, opt, query, timeline, when, Nav};
use super::{App, Shared};
use crate::render;
use crate::time::{human, stamp};

type Page = Result<Markup, PageError>;

impl App {
    fn footer(&self) -> String {
        format!(
            "Redis {} · key prefix {} · leasehold {}",
            self.shown_url,
            self.config.prefix,
            env!("CARGO_PKG_VERSION")
        )
    }

    fn page(&self, title: &str, nav: Nav, body: Markup) -> Markup {
        layout(title, nav, Some(self.token.is_some()), &self.footer(), body)
    }

    /// Redis `TIME` (ms).
    async fn now(&self) -> Res<Millis> {
        leasehold_core::Inspector::new(self.base.clone())
            .now()
            .await
            .map_err(|e| self.fail(e))
    }
}

/// The page for a failed request.
pub fn error_page(e: &DashError) -> Markup {
    let hint = match e {
        DashError::Unavailable(_) => Some(
            "The dashboard keeps running and shows data again as soon as Redis answers; this page retries by itself.",
        ),
        DashError::Unauthorized(_) => Some("Go back, type the dashboard token into the form, and submit again."),
        _ => None,
    };
    layout(
        e.title(),
        Nav::None,
        None,
        "",
        html! {
            section.error data-status=(e.status().as_u16()) {
                h1 { (e.status().as_u16()) " " (e.title()) }
                p.message { (e.message()) }
                @if let Some(h) = hint { p { (h) } }
                p { a href="/" { "Queues" } " · " a href="/jobs" { "Jobs" } }
            }
        },
    )
}

/// Any other path: 404.
pub async fn not_found() -> Response {
    PageError(DashError::NotFound("no such page".into())).into_response()
}

// ---- queues -------------------------------------------------------------------

fn count_tile(queue: &str, state: JobState, n: u64, mark: &str) -> Markup {
    html! {
        a class={ "tile st-" (state.as_str()) } href=(jobs_url(queue, state.as_str()))
            data-state=(state.as_str()) {
            span.n { (n) (mark) }
            span.l { (state.as_str()) }
        }
    }
}

fn lock_ttl(l: &LockInfo) -> String {
    match (l.holder.as_ref(), l.ttl_ms) {
        (None, _) => "free".into(),
        (Some(_), Some(-1)) => "persisted (STALE holder)".into(),
        (Some(_), Some(t)) if t >= 0 => human(t),
        (Some(_), _) => "?".into(),
    }
}

fn locks_table(rows: &[(&str, &LockInfo)], with_queue: bool) -> Markup {
    html! {
        table.grid.locks {
            thead { tr {
                @if with_queue { th { "Queue" } }
                th { "Resource" } th { "Holder" } th { "Holder state" } th { "TTL" } th { "Parked" } th { "Live jobs on it" }
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

fn queue_card(s: &QueueStatus) -> Markup {
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
                h3.warn { "STALE: " (c.stale) " job(s) need a decision" }
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
        }
    }
}

/// `GET /`: every queue at a glance.
pub async fn overview(State(app): State<Shared>) -> Page {
    let all = app.overview().await?;
    Ok(app.page(
        "Queues",
        Nav::Queues,
        html! {
            h1 { "Queues" }
            div #queues data-live {
                @if all.is_empty() {
                    p.empty { "No queues found under key prefix " code { (app.config.prefix) } " (a queue appears once it has had a job)." }
                }
                @for s in &all { (queue_card(s)) }
            }
        },
    ))
}

// ---- jobs ---------------------------------------------------------------------

fn jobs_table(page: &JobPage, now: Millis) -> Markup {
    html! {
        table.grid.jobs {
            thead { tr {
                th { "Job" } th { "Queue" } th { "Pipeline" } th { "State" } th { "Attempt" } th { "Step" }
                th { "Last done" } th { "Resource" } th { "Worker" } th { "Created" } th { "Updated" }
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
                        td.mono { (opt(j.worker.as_deref())) }
                        td { (when(now, j.created_at)) }
                        td { (when(now, j.updated_at)) }
                    }
                }
            }
        }
    }
}

/// `GET /jobs`: jobs by state, with filters and paging.
pub async fn jobs(State(app): State<Shared>, Query(params): Query<JobsParams>) -> Page {
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

// ---- one job ------------------------------------------------------------------

/// `?notice=` after an action.
#[derive(Debug, Default, Deserialize)]
pub struct JobParams {
    notice: Option<String>,
}

fn notice_text(code: &str) -> Option<&'static str> {
    Some(match code {
        "cancelled" => "Cancelled: the job was QUEUED and is now CANCELLED.",
        "requested" => "Cancel requested: its worker honours it at the next renewal, checkpoint or start. The cancel section below tells when it is honoured.",
        "already_requested" => "A cancel request was already recorded; it stands.",
        "retried" => "Retried: a new attempt is QUEUED.",
        "resolved" => "Resolved: the STALE attempt is decided.",
        _ => return None,
    })
}

fn cancel_section(d: &JobDetail) -> Markup {
    html! {
        section.card.cancel #cancel {
            h2 { "Cancel" }
            @match &d.cancel {
                None => p { "none requested" },
                Some(c) => {
                    @let (class, word) = match c.outcome {
                        CancelOutcome::Honoured => ("ok", "honoured"),
                        CancelOutcome::Pending | CancelOutcome::PendingNextStart => ("pending", "pending"),
                        CancelOutcome::NotHonoured { .. } | CancelOutcome::Stale => ("no", "not honoured"),
                    };
                    p { span class={ "verdict " (class) } data-outcome=(word) { (word) } " — " (c.explain()) }
                    dl.facts {
                        dt { "Requested by" } dd.mono { (if c.request.by.is_empty() { "?" } else { &c.request.by }) }
                        dt { "At" } dd { @match c.request.at { Some(at) => (when(d.now, at)), None => "?" } }
                        dt { "Reason" } dd.reason { (c.request.reason) }
                        dt { "Attempt" } dd { (c.attempt) }
                    }
                }
            }
        }
    }
}

fn lease_section(d: &JobDetail) -> Markup {
    let j = &d.job;
    html! {
        section.card.lease {
            h2 { "Lease" }
            @match &j.lease {
                Some(l) => dl.facts {
                    dt { "Held by" } dd.mono { (l.worker) }
                    dt { "Fence" } dd { (l.fence) }
                    dt { "Deadline" } dd {
                        (when(d.now, l.deadline))
                        @if l.deadline < d.now { " " span.pill.warn { "EXPIRED: the worker is probably gone; the next sweep recovers it" } }
                    }
                },
                None => p {
                    @if j.state == JobState::Stale {
                        "none: expired while RUNNING on " span.mono { (opt(j.worker.as_deref())) } " (fence " (j.fence.unwrap_or(0)) ")"
                        @if let Some(at) = j.stale_at { ", STALE since " (when(d.now, at)) }
                    } @else { "none" }
                },
            }
            h2 { "Lock" }
            @match (&j.resource, &d.lock) {
                (None, _) => p { "no resource" },
                (Some(r), None) => p { "resource " span.mono { (r) } },
                (Some(_), Some(l)) => dl.facts {
                    dt { "Resource" } dd.mono { (l.resource) }
                    dt { "Holder" } dd {
                        @match &l.holder {
                            None => "free",
                            Some(h) if *h == j.id => "this job",
                            Some(h) => { a.mono href=(job_url(&j.queue, h.as_str())) { (h) } " (" (l.holder_state.map_or("gone", |s| s.as_str())) ")" },
                        }
                    }
                    dt { "TTL" } dd { (lock_ttl(l)) }
                    dt { "Parked on it" } dd { (l.parked) }
                },
            }
        }
    }
}

fn attempts_table(d: &JobDetail) -> Markup {
    let j = &d.job;
    html! {
        table.grid.attempts {
            thead { tr { th { "#" } th { "State" } th { "Worker" } th { "Fence" } th { "Leased" } th { "Started" } th { "Ended" } th { "Ran" } th { "Steps completed" } th { "Error / reason" } } }
            tbody {
                @for a in &j.attempts {
                    tr {
                        td { (a.n) }
                        td { (badge(a.state)) }
                        td.mono { (opt(Some(a.worker.as_str()))) }
                        td { (a.fence) }
                        td { @if let Some(t) = a.leased_at { (stamp(t)) } @else { "-" } }
                        td { @if let Some(t) = a.started_at { (stamp(t)) } @else { "-" } }
                        td { (stamp(a.ended_at)) }
                        td { @if let Some(s) = a.started_at { (human(a.ended_at - s)) } @else { "-" } }
                        td { @for s in &a.steps { span.pill title=(stamp(s.at)) { (s.step) } " " } }
                        td.reason {
                            @if let Some(e) = &a.error { (e.kind) ": " (e.message) " (retryable: " (if e.retryable { "yes" } else { "no" }) ")" br; }
                            @if let Some(r) = a.reason.as_deref().filter(|r| !r.is_empty()) { "reason: " (r) br; }
                            @if let Some(c) = &a.cancel { "cancel request by " (c.by) ": " (c.reason) br; }
                            @if a.cleanup_needed { "cleanup needed" br; }
                            @if let Some(r) = &a.resolution { "operator " (r.action) " by " (r.by) ": " (r.reason) }
                        }
                    }
                }
                @if !j.attempts.iter().any(|a| a.n == j.attempt) {
                    tr.current {
                        td { (j.attempt) }
                        td { (badge(j.state)) " " small { "current" } }
                        td.mono { (opt(j.worker.as_deref())) }
                        td { @if let Some(f) = j.fence { (f) } @else { "-" } }
                        td { @if let Some(t) = j.leased_at { (stamp(t)) } @else { "-" } }
                        td { @if let Some(t) = j.started_at { (stamp(t)) } @else { "-" } }
                        td { "-" }
                        td { @if let Some(s) = j.started_at { (human(d.now - s)) " so far" } @else { "-" } }
                        td { @for s in &j.steps { span.pill title=(stamp(s.at)) { (s.step) } " " }
                             @if let (Some(s), JobState::Running) = (&j.step, j.state) { span.pill.running { (s) " …" } } }
                        td { @if j.cleanup_needed { "cleanup needed" } }
                    }
                }
            }
        }
    }
}

fn events_table(events: &[Event], now: Millis, with_job: bool) -> Markup {
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

fn action_forms(app: &App, d: &JobDetail) -> Markup {
    let j = &d.job;
    let action = |what: &str| format!("{}/{what}", job_url(&j.queue, j.id.as_str()));
    let who = html! {
        label { "Operator " input type="text" name="operator" placeholder="your name" maxlength="64" autocomplete="username"; }
        label { "Token " input type="password" name="token" required autocomplete="current-password"; }
    };
    let can_cancel = matches!(
        j.state,
        JobState::Queued | JobState::Leased | JobState::Running
    );
    let can_retry = matches!(
        j.state,
        JobState::Failed | JobState::Cancelled | JobState::Stale
    );
    let can_resolve = j.state == JobState::Stale;
    html! {
        section.card.actions #job-actions data-live="idle" {
            h2 { "Actions" }
            @if app.token.is_none() {
                p.note { (super::error::DISABLED) }
            } @else if !(can_cancel || can_retry || can_resolve) {
                p.note { "No action applies to a " (j.state.as_str()) " job: a terminal result is never rewritten." }
            } @else {
                p.note { "Actions go through the same scripts as the workers and are recorded as events by " code { "dashboard:<operator>" } "." }
                div.forms {
                    @if can_cancel {
                        form.action-cancel method="post" action=(action("cancel")) {
                            h3 { @if j.state == JobState::Queued { "Cancel" } @else { "Request cancel" } }
                            label { "Reason " textarea name="reason" required rows="2" maxlength="2000" {} }
                            (who)
                            button.danger type="submit" { "Cancel job" }
                        }
                    }
                    @if can_retry {
                        form.action-retry method="post" action=(action("retry")) {
                            h3 { "Retry" }
                            fieldset {
                                label { input type="radio" name="mode" value="resume" checked; " resume after the last completed step" @if let Some(l) = &j.last_step { " (" (l) ")" } }
                                label { input type="radio" name="mode" value="from_start"; " from the first step" }
                            }
                            label { "Reason " textarea name="reason" rows="2" maxlength="2000" {} }
                            (who)
                            button type="submit" { "Retry job" }
                        }
                    }
                    @if can_resolve {
                        form.action-resolve method="post" action=(action("resolve")) {
                            h3 { "Resolve" }
                            label { "As " select name="as" {
                                option value="failed" { "FAILED" }
                                option value="cancelled" { "CANCELLED" }
                                option value="succeeded" { "SUCCEEDED (the work is complete)" }
                            } }
                            label { "Reason " textarea name="reason" required rows="2" maxlength="2000" {} }
                            (who)
                            button.danger type="submit" { "Resolve job" }
                        }
                    }
                }
            }
        }
    }
}

/// `GET /jobs/{queue}/{id}`: everything about one job.
pub async fn job(
    State(app): State<Shared>,
    Path((queue, id)): Path<(String, String)>,
    Query(params): Query<JobParams>,
) -> Page {
    let d = app.job(&queue, &id).await?;
    let j = &d.job;
    let input = serde_json::to_string_pretty(&j.input).unwrap_or_else(|_| j.input.to_string());
    let moments = render::timeline(j);
    let notice = params.notice.as_deref().and_then(notice_text);
    Ok(app.page(
        &format!("Job {}", j.id),
        Nav::Jobs,
        html! {
            div #job-head data-live {
                h1 { "Job " span.mono #job-id { (j.id) } " " span #job-state data-state=(j.state.as_str()) { (badge(j.state)) } }
                p.sub { "queue " a href=(jobs_url(&j.queue, "")) { (j.queue) } " · pipeline " (j.pipeline)
                    " · attempt " (j.attempt) " (automatic retries stop at attempt " (j.max_attempts) ")" }
            }
            @if let Some(n) = notice { p.notice { (n) } }
            div #job-live data-live {
                @if let Some(v) = render::verdict(j) { p.verdict-box { (v) } }
                div.cols {
                    section.card.facts-card {
                        h2 { "Job" }
                        dl.facts {
                            dt { "State" } dd { (badge(j.state)) }
                            dt { "Step" } dd { (opt(j.step.as_deref())) }
                            dt { "Last completed" } dd { (opt(j.last_step.as_deref())) }
                            dt { "Input key" } dd.mono { (opt(j.input_key.as_deref())) }
                            dt { "Resource" } dd.mono { (opt(j.resource.as_deref())) }
                            dt { "Priority" } dd { (j.priority) }
                            dt { "Created" } dd { (stamp(j.created_at)) " (" (when(d.now, j.created_at)) ")" }
                            dt { "Updated" } dd { (stamp(j.updated_at)) " (" (when(d.now, j.updated_at)) ")" }
                            @if j.not_before > d.now { dt { "Not before" } dd { (when(d.now, j.not_before)) } }
                            dt { "Cleanup" } dd { (if j.cleanup_needed { "needed (a step was cut mid-way)" } else { "not needed" }) }
                            dt { "STALE lock policy" } dd { (j.stale_lock.as_str()) }
                        }
                        h3 { "Input" }
                        pre.json #job-input { (input) }
                    }
                    (lease_section(&d))
                    (cancel_section(&d))
                }
                section.card.timeline {
                    h2 { "Attempts and steps" }
                    (timeline(j, d.now))
                    (attempts_table(&d))
                }
                @if !j.outputs.is_empty() {
                    section.card {
                        details {
                            summary { "Step outputs (" (j.outputs.len()) ")" }
                            @for (step, value) in &j.outputs {
                                h3 { (step) }
                                pre.json { (serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())) }
                            }
                        }
                    }
                }
                section.card {
                    h2 { "Moments" }
                    table.grid.moments {
                        thead { tr { th { "Time" } th { "Attempt" } th { "What" } } }
                        tbody { @for m in &moments { tr { td { (stamp(m.at)) } td { (m.attempt) } td.reason { (m.what) } } } }
                    }
                }
                section.card {
                    h2 { "Events" }
                    @if d.events.is_empty() { p { "none left in the stream" } }
                    @else { (events_table(&d.events, d.now, false)) }
                }
            }
            (action_forms(&app, &d))
        },
    ))
}

/// `?id=` of the find box.
#[derive(Debug, Default, Deserialize)]
pub struct FindParams {
    id: Option<String>,
}

/// `GET /find?id=`: the job's page, wherever it is.
pub async fn find(
    State(app): State<Shared>,
    Query(p): Query<FindParams>,
) -> Result<Response, PageError> {
    let id = p.id.unwrap_or_default().trim().to_owned();
    if id.is_empty() {
        return Err(DashError::BadRequest("give a job id".into()).into());
    }
    let found = app.locate(&id).await?;
    match found.as_slice() {
        [q] => Ok(Redirect::to(&job_url(q, &id)).into_response()),
        [] => Err(DashError::NotFound(format!(
            "job {id} not found in any queue under key prefix {:?}; it may have been purged by retention",
            app.config.prefix
        ))
        .into()),
        many => Ok(app
            .page(
                "Find",
                Nav::None,
                html! {
                    h1 { "Job " (id) " is in several queues" }
                    ul { @for q in many { li { a href=(job_url(q, &id)) { (q) } } } }
                },
            )
            .into_response()),
    }
}

// ---- workers, locks, events ------------------------------------------------------

/// `GET /workers`.
pub async fn workers(State(app): State<Shared>, Query(p): Query<QueueParam>) -> Page {
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

/// `GET /locks`.
pub async fn locks(State(app): State<Shared>, Query(p): Query<QueueParam>) -> Page {
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

/// `GET /events`: the event feed, newest first.
pub async fn events(State(app): State<Shared>, Query(p): Query<EventsParams>) -> Page {
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
