//! `GET /jobs/{queue}/{id}`: everything about one job, with its action forms;
//! `GET /find?id=`: the job's page, wherever it is.

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Json, Router};
use leasehold_core::{CancelOutcome, Event, JobDetail, JobState};
use maud::{html, Markup};
use serde::{Deserialize, Serialize};

mod actions;
mod timeline;

use self::timeline::timeline;
use crate::dashboard::data::job_id;
use crate::dashboard::error::{ApiError, DashError, PageError, DISABLED};
use crate::dashboard::events::events_table;
use crate::dashboard::html::{auth_fields, badge, job_url, jobs_url, opt, when, Nav, Page};
use crate::dashboard::state::{App, Shared};
use crate::time::{human, stamp};
use crate::wording::{
    self, attempt_error, holder_state, lock_ttl, resolution, stale_end, yes_no, Moment,
};

/// The routes of one job: its page, `/find`, its JSON and its actions.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/jobs/{queue}/{id}", get(job))
        .route("/find", get(find))
        .route("/api/jobs/{queue}/{id}", get(api_job))
        .route("/api/jobs/{queue}/{id}/events", get(job_events))
        .merge(actions::routes())
}

/// `?notice=` after an action.
#[derive(Debug, Default, Deserialize)]
struct JobParams {
    notice: Option<String>,
}

/// The notice shown after an action, by its outcome code.
fn notice_text(code: &str) -> Option<&'static str> {
    Some(match code {
        "cancelled" => "Cancelled: the job was QUEUED and is now CANCELLED.",
        "requested" => "Cancel requested: its worker is told at once and stops the running step, usually within a quarter second (at worst at its next renewal). The cancel section below tells when it is honoured.",
        "already_requested" => "A cancel request was already recorded; it stands.",
        "retried" => "Retried: a new attempt is QUEUED.",
        "resolved" => "Resolved: the STALE attempt is decided.",
        "run_now" => "Due now: the next free worker of its pipeline takes it (its resource lock and flow limits still apply).",
        _ => return None,
    })
}

/// The cancel request and what became of it.
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
                        CancelOutcome::CompletedFirst => ("no", "completed first"),
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

/// The lease and the lock.
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
                            Some(h) => { a.mono href=(job_url(&j.queue, h.as_str())) { (h) } " (" (holder_state(l)) ")" },
                        }
                    }
                    dt { "Time left" } dd { (lock_ttl(l)) }
                    dt { "Parked on it" } dd { (l.parked) }
                },
            }
        }
    }
}

/// Every attempt, the current one last.
fn attempts_table(d: &JobDetail) -> Markup {
    let j = &d.job;
    html! {
        table.grid.attempts {
            thead { tr { th { "#" } th { "State" } th { "Worker" } th { "Fence" } th { "Leased" } th { "Started" } th { "Ended" } th { "Ran" } th { "Steps completed" } th { "Error / reason" } } }
            tbody {
                @for a in &j.attempts {
                    // a STALE attempt waiting for a decision is the current one
                    @let awaiting = a.n == j.attempt && j.state == JobState::Stale;
                    tr.current[awaiting] {
                        td { (a.n) }
                        td { (badge(a.state)) @if awaiting { " " small { "current" } } }
                        td.mono { (opt(Some(a.worker.as_str()))) }
                        td { (a.fence) }
                        td { @if let Some(t) = a.leased_at { (stamp(t)) } @else { "-" } }
                        td { @if let Some(t) = a.started_at { (stamp(t)) } @else { "-" } }
                        td { (stamp(a.ended_at)) }
                        td { @if let Some(s) = a.started_at {
                            (human(a.ended_at - s)) @if a.state == JobState::Stale { " (until STALE)" }
                        } @else { "-" } }
                        td { @for s in &a.steps { span.pill title=(stamp(s.at)) { (s.step) } " " } }
                        td.reason {
                            @if let Some(e) = &a.error { (attempt_error(e)) br; }
                            @if let Some(r) = a.reason.as_deref().filter(|r| !r.is_empty()) { "reason: " (r) br; }
                            @if let Some(c) = &a.cancel { "cancel request by " (c.by) ": " (c.reason) br; }
                            @if let Some(end) = stale_end(a) { span.stale-end { "went STALE: " (end) } br; }
                            @if a.cleanup_needed { "cleanup needed" br; }
                            @if let Some(r) = &a.resolution { span.decision { (resolution(r)) } }
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
                        // a STALE attempt ended when it went STALE: its run time stops there
                        @let stale_end = j.stale_at.filter(|_| j.state == JobState::Stale);
                        td { @if let Some(t) = stale_end { (stamp(t)) " (STALE)" } @else { "-" } }
                        td { @match (j.started_at, stale_end) {
                            (Some(s), Some(t)) => { (human(t - s)) " (until STALE)" },
                            (Some(s), None) => { (human(d.now - s)) " so far" },
                            (None, _) => "-",
                        } }
                        td { @for s in &j.steps { span.pill title=(stamp(s.at)) { (s.step) } " " }
                             @if let (Some(s), JobState::Running) = (&j.step, j.state) { span.pill.running { (s) " …" } } }
                        td { @if j.cleanup_needed { "cleanup needed" } }
                    }
                }
            }
        }
    }
}

/// The cancel, retry and resolve forms that apply to the job's state.
fn action_forms(app: &App, d: &JobDetail) -> Markup {
    let j = &d.job;
    let action = |what: &str| format!("{}/{what}", job_url(&j.queue, j.id.as_str()));
    let who = auth_fields();
    let can_cancel = matches!(
        j.state,
        JobState::Queued | JobState::Leased | JobState::Running
    );
    let can_retry = matches!(
        j.state,
        JobState::Failed | JobState::Cancelled | JobState::Stale
    );
    let can_resolve = j.state == JobState::Stale;
    let can_delete = j.state.is_terminal();
    let can_run_now = j.state == JobState::Queued && j.not_before > d.now;
    html! {
        section.card.actions #job-actions data-live="idle" {
            h2 { "Actions" }
            @if app.token.is_none() {
                p.note { (DISABLED) }
            } @else if !(can_cancel || can_retry || can_resolve || can_delete) {
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
                    @if can_run_now {
                        form.action-run-now method="post" action=(action("run-now")) {
                            h3 { "Run now" }
                            p.note { "Delayed until " (crate::time::stamp(j.not_before)) "; run it now instead." }
                            label { "Reason " textarea name="reason" rows="2" maxlength="2000" {} }
                            (who)
                            button type="submit" { "Run now" }
                        }
                    }
                    @if can_delete {
                        form.action-delete method="post" action=(action("delete")) {
                            h3 { "Delete" }
                            p.note { "Deletes the job and its attempt records now, as retention would later; the event keeps who and why." }
                            label { "Reason " textarea name="reason" required rows="2" maxlength="2000" {} }
                            (who)
                            button.danger type="submit" { "Delete job" }
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
async fn job(
    State(app): State<Shared>,
    Path((queue, id)): Path<(String, String)>,
    Query(params): Query<JobParams>,
) -> Page {
    let d = app.job(&queue, &id).await?;
    let processes = app.process_steps(&queue, &id).await?;
    let j = &d.job;
    let input = serde_json::to_string_pretty(&j.input).unwrap_or_else(|_| j.input.to_string());
    let moments = wording::timeline(j);
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
            @if let Some(e) = &d.quarantine {
                p.verdict-box.quarantine { "Quarantined since " (crate::time::stamp(e.at)) ": field " code { (e.field) } " " (e.reason)
                    " (found in " (e.from_index) "). Fix the field, then repair or purge it from the queues page or with "
                    code { "leasehold quarantine repair|purge" } "." }
            }
            div #job-live data-live {
                @if let Some(v) = wording::verdict(j) { p.verdict-box { (v) } }
                div.cols {
                    section.card.facts-card {
                        h2 { "Job" }
                        dl.facts {
                            dt { "State" } dd { (badge(j.state)) }
                            dt { "Step" } dd { (opt(j.step.as_deref())) }
                            dt { "Last completed" } dd { (opt(j.last_step.as_deref())) }
                            dt { "Input key" } dd.mono { (opt(j.input_key.as_deref())) }
                            dt { "Resource" } dd.mono { (opt(j.resource.as_deref())) }
                            @if let Some(flow) = &d.flow {
                                dt { "Flow control" } dd.mono { (flow) }
                            }
                            @if let Some(why) = &d.waiting {
                                dt.warn { "Waiting" } dd.waiting { (why) }
                            }
                            dt { "Priority" } dd { (j.priority) }
                            dt { "Created" } dd { (stamp(j.created_at)) " (" (when(d.now, j.created_at)) ")" }
                            dt { "Updated" } dd { (stamp(j.updated_at)) " (" (when(d.now, j.updated_at)) ")" }
                            @if j.not_before > d.now { dt { "Not before" } dd { (when(d.now, j.not_before)) } }
                            dt { "Cleanup" } dd #job-cleanup data-cleanup=(d.verdicts.cleanup.as_str()) { (d.verdicts.cleanup.explain()) }
                            @if let Some(r) = d.verdicts.retryable {
                                dt { "Retryable" } dd #job-retryable data-retryable=(yes_no(r)) {
                                    (yes_no(r)) @if d.verdicts.retries_exhausted { "; automatic retries used up" }
                                }
                            }
                            @if let Some(h) = d.verdicts.cancel_honoured {
                                dt { "Cancel honoured" } dd #job-cancel-honoured data-honoured=(yes_no(h)) { (yes_no(h)) }
                            }
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
                        details #step-outputs {
                            summary { "Step outputs (" (j.outputs.len()) ")" }
                            @for (step, value) in &j.outputs {
                                h3 { (step) }
                                pre.json { (serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())) }
                            }
                        }
                    }
                }
                @if !processes.is_empty() {
                    section.card #process-steps {
                        h2 { "Process steps" }
                        @for r in &processes {
                            h3 { "Attempt " (r.attempt) " · " (r.step) }
                            p {
                                (crate::render::process_ending(r, j))
                                @if let Some(pid) = r.pid { " · pid " (pid) @if let Some(g) = r.pgid { " (process group " (g) ")" } }
                                @if let Some(p) = r.progress { " · progress " (p) "%" }
                                @if let Some(end) = r.ended_at { " · ran " (crate::time::human(end - r.started_at)) }
                            }
                            @if let Some(cut) = &r.cut_off {
                                p.verdict-box { "Cut off by the worker (" (cut.why.as_str()) ") at " (stamp(cut.at)) ": " (cut.reason) "; "
                                    (if cut.killed { "SIGTERM, then SIGKILL at the end of its grace" } else { "SIGTERM; it ended within its grace" }) }
                            }
                            @for (name, tail, total) in [("stdout", &r.stdout_tail, r.stdout_bytes), ("stderr", &r.stderr_tail, r.stderr_bytes)] {
                                @if !tail.is_empty() {
                                    details id=(tail_id(r.attempt, &r.step, name)) {
                                        summary { (name) " (" (total) " bytes in all; the last " (tail.len()) " kept)" }
                                        pre.json { (tail) }
                                    }
                                }
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
struct FindParams {
    id: Option<String>,
}

/// `GET /find?id=`: the job's page, wherever it is.
async fn find(
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

/// A job's detail with its step timeline.
#[derive(Debug, Serialize)]
struct JobView {
    /// The detail.
    #[serde(flatten)]
    pub detail: JobDetail,
    /// Every moment of every attempt, oldest first.
    pub timeline: Vec<Moment>,
    /// What became of a cancel request, in words.
    pub cancel_explained: Option<String>,
}

/// `GET /api/jobs/{queue}/{id}`.
async fn api_job(
    State(app): State<Shared>,
    Path((queue, id)): Path<(String, String)>,
) -> Result<Json<JobView>, ApiError> {
    let detail = app.job(&queue, &id).await?;
    Ok(Json(JobView {
        timeline: wording::timeline(&detail.job),
        cancel_explained: detail.cancel.as_ref().map(|c| c.explain()),
        detail,
    }))
}

/// `GET /api/jobs/{queue}/{id}/events`: the job's events, oldest first.
async fn job_events(
    State(app): State<Shared>,
    Path((queue, id)): Path<(String, String)>,
) -> Result<Json<Vec<Event>>, ApiError> {
    let jid = job_id(&id)?;
    let inspector = app.inspector(&queue)?;
    let events = inspector.job_events(&jid).await.map_err(|e| app.fail(e))?;
    if events.is_empty()
        && inspector
            .queue()
            .job(&jid)
            .await
            .map_err(|e| app.fail(e))?
            .is_none()
    {
        return Err(DashError::NotFound(format!("job {id} not found in queue {queue}")).into());
    }
    Ok(Json(events))
}

/// The id of a process step's log tail section (kept open across the live
/// refresh): attempt, step (its characters other than letters, digits, `-`
/// and `_` as their code points) and stream.
fn tail_id(attempt: u32, step: &str, stream: &str) -> String {
    let step: String = step
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_string()
            } else {
                format!(".{:x}.", u32::from(c))
            }
        })
        .collect();
    format!("tail-{attempt}-{step}-{stream}")
}
