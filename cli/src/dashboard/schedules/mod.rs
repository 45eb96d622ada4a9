//! `GET /schedules`: every schedule with its next due time, last window, last
//! job and its state, paused flag, counts and latest ticks, and (with the
//! token) pause, resume and trigger forms; `GET /api/schedules` as JSON.

use axum::extract::{Query, State};
use axum::routing::get;
use axum::{Json, Router};
use leasehold_core::queue::{ScheduleInfo, TickEntry};
use maud::{html, Markup};
use serde::{Deserialize, Serialize};

mod actions;

use crate::dashboard::error::{ApiError, Res};
use crate::dashboard::html::{auth_fields, badge, job_url, path_segment, when, Nav, Page};
use crate::dashboard::state::{App, Shared};
use crate::time::{human, stamp};

/// The routes of the schedules: the page, its JSON, and the actions.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/schedules", get(schedules))
        .route("/api/schedules", get(schedules_api))
        .merge(actions::routes())
}

/// Ticks shown per schedule.
const TICKS_SHOWN: usize = 8;

/// One schedule with its queue and latest ticks.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ScheduleRow {
    /// Its queue.
    pub queue: String,
    /// The schedule as registered.
    pub schedule: ScheduleInfo,
    /// Its latest ticks, newest first.
    pub ticks: Vec<TickEntry>,
}

/// `?notice=` after an action.
#[derive(Debug, Deserialize)]
pub(crate) struct Notice {
    notice: Option<String>,
}

impl App {
    /// Every schedule of the queues shown.
    async fn schedules(&self) -> Res<Vec<ScheduleRow>> {
        let mut out = Vec::new();
        for name in self.queues().await? {
            let q = self.queue(&name)?;
            for info in q.schedule_infos().await.map_err(|e| self.fail(e))? {
                let ticks = q
                    .schedule_ticks(&info.name, TICKS_SHOWN)
                    .await
                    .map_err(|e| self.fail(e))?;
                out.push(ScheduleRow {
                    queue: name.clone(),
                    schedule: info,
                    ticks,
                });
            }
        }
        Ok(out)
    }
}

/// `GET /api/schedules`.
async fn schedules_api(State(app): State<Shared>) -> Result<Json<Vec<ScheduleRow>>, ApiError> {
    Ok(Json(app.schedules().await?))
}

fn cadence(i: &ScheduleInfo) -> String {
    match &i.definition {
        Some(d) => match (&d.cron, d.every_ms) {
            (Some(c), _) => format!("cron \"{c}\" in {}", d.zone),
            (None, Some(ms)) => format!("every {}", human(ms as i64)),
            _ => "?".into(),
        },
        None => format!("unreadable: {}", i.problem.clone().unwrap_or_default()),
    }
}

fn forms(row: &ScheduleRow, enabled: bool) -> Markup {
    let base = format!(
        "/schedules/{}/{}",
        path_segment(&row.queue),
        path_segment(&row.schedule.name)
    );
    let fields = auth_fields();
    html! {
        @if enabled {
            div.actions {
                @if row.schedule.paused {
                    form method="post" action=(format!("{base}/resume")) { (fields) button type="submit" { "Resume" } }
                } @else {
                    form method="post" action=(format!("{base}/pause")) {
                        (fields) input type="text" name="reason" placeholder="reason";
                        button type="submit" { "Pause" }
                    }
                }
                form method="post" action=(format!("{base}/trigger")) {
                    (fields) input type="text" name="window" placeholder="window start (default: latest due)";
                    label { input type="checkbox" name="rerun" value="1"; " re-run" }
                    button type="submit" { "Trigger" }
                }
            }
        }
    }
}

/// `GET /schedules`.
async fn schedules(State(app): State<Shared>, Query(n): Query<Notice>) -> Page {
    let rows = app.schedules().await?;
    let now = app.now().await?;
    let enabled = app.token.is_some();
    Ok(app.page(
        "Schedules",
        Nav::Schedules,
        html! {
            h1 { "Schedules" }
            @if let Some(notice) = &n.notice { p.notice { (notice) } }
            div #schedules-list data-live {
                @if rows.is_empty() {
                    p.summary { "No schedules: a worker serving a scheduled pipeline registers its schedules on start." }
                }
                @for row in &rows {
                    @let i = &row.schedule;
                    section.schedule {
                        h2 { (i.name) " " span.muted { "pipeline " (i.pipeline) ", queue " (row.queue) } }
                        table.grid {
                            tbody {
                                tr { th { "When" } td { (cadence(i)) } }
                                tr { th { "Status" } td { @if i.paused { strong { "PAUSED" } (i.paused_by.as_ref().map(|b| format!(" by {b}")).unwrap_or_default()) } @else if i.failing.is_some() { strong.warn { "FAILING" } } @else { "active" } } }
                                @if let Some(f) = &i.failing {
                                    tr.warn { th { "Failing" } td {
                                        (f.failures) " failed ticks"
                                        @if let Some(ms) = f.since_ms { " since " (stamp(ms)) }
                                        "; last error: " span.mono { (f.last_error) }
                                    } }
                                }
                                tr { th { "Next due" } td { @match i.next_due_ms { Some(ms) => { (stamp(ms)) " (" (when(now, ms)) ")" }, None => "ended" } } }
                                tr { th { "Last window" } td { @match i.last_window { Some((s, e)) => { (stamp(s)) " .. " (stamp(e)) }, None => "-" } } }
                                tr { th { "Last job" } td {
                                    @match &i.last_job {
                                        Some(j) => { a.mono href=(job_url(&row.queue, j)) { (j) } " " @if let Some(s) = i.last_job_state { (badge(s)) } @else { "(deleted by retention)" } },
                                        None => "-",
                                    }
                                } }
                                tr { th { "Ticks" } td {
                                    @for (k, v) in &i.counts { (k.replace('_', " ")) " " (v) "; " }
                                    @if let Some(l) = i.last_lag_ms { "last lag " (human(l)) }
                                } }
                            }
                        }
                        (forms(row, enabled))
                        @if !row.ticks.is_empty() {
                            table.grid.ticks {
                                thead { tr { th { "At" } th { "Outcome" } th { "Window" } th { "Job" } th { "Lag" } th { "By" } th { "Reason" } } }
                                tbody {
                                    @for t in &row.ticks {
                                        tr {
                                            td { (when(now, t.at)) }
                                            td { (t.outcome) }
                                            td { @match t.window { Some((s, e)) => { (stamp(s)) " .. " (stamp(e)) }, None => "-" } }
                                            td { @match &t.job { Some(j) => { a.mono href=(job_url(&row.queue, j)) { (j) } }, None => "-" } }
                                            td { @match t.lag_ms { Some(l) => (human(l)), None => "-" } }
                                            td { (t.by) }
                                            td { (t.reason) }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        },
    ))
}
