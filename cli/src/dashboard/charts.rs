//! `GET /charts`: jobs processed, failed and STALE per point, and the waiting
//! jobs with the oldest one's age, for the last hour or day (per minute), 7
//! days (per hour) or 90 days (per UTC day), per queue and pipeline, drawn in
//! the browser by uPlot (vendored under `assets/uplot/`, MIT, served by the
//! dashboard itself: no CDN) from `GET /api/history`, which reads the counters
//! the scripts keep and their roll-ups (`Inspector::history_at`).
//! Waiting and oldest waiting count every QUEUED job (ready, delayed, parked
//! behind a lock, waiting for a flow-control slot), as `status` and `/metrics`
//! do; each queue also carries those two read live (`waiting_now`,
//! `oldest_now_s`, from the same `Inspector::status` as `/metrics`).
//! Axes and the table are in the page's clock (UTC unless the operator chose
//! local time). The page also lists the totals of the range as a table (no
//! script needed).

use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use leasehold_core::inspect::{Granularity, History};
use maud::html;
use serde::{Deserialize, Serialize};

use super::error::{ApiError, DashError, PageError, Res};
use super::html::{query, Nav};
use super::state::Shared;

/// The routes of the charts: the page, its JSON, and its static files.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/charts", get(charts_page))
        .route("/api/history", get(history_api))
        .route("/static/uplot.min.js", get(uplot_js))
        .route("/static/uplot.min.css", get(uplot_css))
        .route("/static/uplot.LICENSE", get(uplot_license))
        .route("/static/charts.js", get(charts_js))
}

const UPLOT_JS: &str = include_str!("assets/uplot/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("assets/uplot/uPlot.min.css");
const UPLOT_LICENSE: &str = include_str!("assets/uplot/LICENSE");
const CHARTS_JS: &str = include_str!("assets/charts.js");

/// `?queue&pipeline&range` of `/charts` and `/api/history`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct ChartParams {
    /// Only this queue.
    pub queue: Option<String>,
    /// Only this pipeline.
    pub pipeline: Option<String>,
    /// `1h` (default), `24h`, `7d` or `90d` (`hour` and `day` also name 1h and 24h).
    pub range: Option<String>,
}

fn given(v: &Option<String>) -> Option<String> {
    v.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

impl ChartParams {
    /// The range's name, its granularity and its points.
    fn range(&self) -> Res<(&'static str, Granularity, usize)> {
        match self.range.as_deref().map(str::trim) {
            None | Some("") | Some("hour") | Some("1h") => Ok(("1h", Granularity::Minute, 60)),
            Some("day") | Some("24h") => Ok(("24h", Granularity::Minute, 1440)),
            Some("7d") => Ok(("7d", Granularity::Hour, 168)),
            Some("90d") => Ok(("90d", Granularity::Day, 90)),
            Some(other) => Err(DashError::BadRequest(format!(
                "range {other:?} is not 1h, 24h, 7d or 90d"
            ))),
        }
    }
}

/// One pipeline's series: one value per point, `null` where not sampled
/// (counts are summed over a point; in an hourly or daily point the gauges are
/// the largest sample).
#[derive(Debug, Clone, Default, Serialize)]
pub(super) struct Series {
    /// Jobs that ended SUCCEEDED per minute.
    pub succeeded: Vec<u64>,
    /// Jobs that ended FAILED per minute.
    pub failed: Vec<u64>,
    /// Jobs made STALE per minute.
    pub stale: Vec<u64>,
    /// Jobs that ended CANCELLED per minute.
    pub cancelled: Vec<u64>,
    /// Automatic retries per minute.
    pub retried: Vec<u64>,
    /// This pipeline's ready and delayed jobs when sampled.
    pub waiting: Vec<Option<u64>>,
    /// Age of this pipeline's oldest ready job when sampled (s).
    pub oldest_s: Vec<Option<f64>>,
}

/// One queue's charts.
#[derive(Debug, Clone, Serialize)]
pub(super) struct QueueChart {
    /// Queue.
    pub queue: String,
    /// Point starts (s since the epoch), oldest first.
    pub t: Vec<i64>,
    /// Every QUEUED job of the queue when sampled (ready, delayed, parked,
    /// waiting for a flow-control slot), per point.
    pub waiting: Vec<Option<u64>>,
    /// Age of the queue's oldest QUEUED job when sampled (s), per point.
    pub oldest_s: Vec<Option<f64>>,
    /// Every QUEUED job now, as `status` and `/metrics` count them.
    pub waiting_now: u64,
    /// Age of the oldest QUEUED job now (s; 0 when none waits), as `status`
    /// and `/metrics` compute it.
    pub oldest_now_s: f64,
    /// Redis time of the live reading (ms).
    pub now_ms: i64,
    /// Pipelines with any data in the range, in name order.
    pub pipelines: Vec<String>,
    /// Their series.
    pub series: std::collections::BTreeMap<String, Series>,
}

/// `/api/history`'s answer.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Charts {
    /// `1h`, `24h`, `7d` or `90d`.
    pub range: String,
    /// `minute`, `hour` or `day`.
    pub granularity: Granularity,
    /// The clock the page shows times in: `utc` or `local`.
    pub zone: &'static str,
    /// Seconds per point.
    pub step_s: u32,
    /// Per queue.
    pub queues: Vec<QueueChart>,
}

/// `h` as series per pipeline (only `pipeline` when given), with the queue's
/// live waiting jobs from `now`.
fn columns(h: &History, pipeline: Option<&str>, now: &leasehold_core::QueueStatus) -> QueueChart {
    let mut names: std::collections::BTreeSet<String> = h
        .minutes
        .iter()
        .flat_map(|m| m.pipelines.keys().cloned())
        .collect();
    if let Some(p) = pipeline {
        names.retain(|n| n == p);
    }
    let mut series = std::collections::BTreeMap::new();
    for name in &names {
        let mut s = Series::default();
        for m in &h.minutes {
            let c = m.pipelines.get(name).cloned().unwrap_or_default();
            s.succeeded.push(c.succeeded);
            s.failed.push(c.failed);
            s.stale.push(c.stale);
            s.cancelled.push(c.cancelled);
            s.retried.push(c.retried);
            // a sampled minute without the pipeline: nothing waited
            s.waiting.push(c.waiting.or(m.sampled.then_some(0)));
            s.oldest_s.push(
                c.oldest_ms
                    .map(|ms| ms as f64 / 1000.0)
                    .or(m.sampled.then_some(0.0)),
            );
        }
        series.insert(name.clone(), s);
    }
    QueueChart {
        queue: h.queue.clone(),
        t: h.minutes.iter().map(|m| m.at / 1000).collect(),
        waiting: h
            .minutes
            .iter()
            .map(|m| m.waiting.or(m.sampled.then_some(0)))
            .collect(),
        oldest_s: h
            .minutes
            .iter()
            .map(|m| {
                m.oldest_ms
                    .map(|ms| ms as f64 / 1000.0)
                    .or(m.sampled.then_some(0.0))
            })
            .collect(),
        waiting_now: now.counts.queued,
        oldest_now_s: now
            .oldest_waiting
            .as_ref()
            .map_or(0.0, |o| o.age_ms.max(0) as f64 / 1000.0),
        now_ms: now.now,
        pipelines: names.into_iter().collect(),
        series,
    }
}

impl super::state::App {
    /// The charts asked for.
    async fn charts(&self, p: &ChartParams) -> Res<Charts> {
        let (range, granularity, points) = p.range()?;
        let queue = given(&p.queue);
        let pipeline = given(&p.pipeline);
        let names = match &queue {
            Some(q) => vec![q.clone()],
            None => self.queues().await?,
        };
        let mut queues = Vec::new();
        for q in names {
            let inspector = self.inspector(&q)?;
            let h = inspector
                .history_at(granularity, points)
                .await
                .map_err(|e| self.fail(e))?;
            let now = inspector.status().await.map_err(|e| self.fail(e))?;
            queues.push(columns(&h, pipeline.as_deref(), &now));
        }
        Ok(Charts {
            range: range.to_owned(),
            granularity,
            zone: crate::time::zone().as_str(),
            step_s: u32::try_from(granularity.ms() / 1000).unwrap_or(u32::MAX),
            queues,
        })
    }
}

/// `GET /api/history?queue&pipeline&range=1h|24h|7d|90d`.
async fn history_api(
    State(app): State<Shared>,
    Query(p): Query<ChartParams>,
) -> Result<Json<Charts>, ApiError> {
    Ok(Json(app.charts(&p).await?))
}

/// `GET /charts`.
async fn charts_page(
    State(app): State<Shared>,
    Query(p): Query<ChartParams>,
) -> Result<Response, PageError> {
    let charts = app.charts(&p).await?;
    let queues = app.queues().await?;
    // the pipelines offered: those a name may refer to, and those with data here
    let mut pipelines: Vec<String> = app.known_pipelines(&queues).await?;
    for q in &charts.queues {
        pipelines.extend(q.pipelines.iter().cloned());
    }
    pipelines.sort();
    pipelines.dedup();
    let queue = given(&p.queue).unwrap_or_default();
    let pipeline = given(&p.pipeline).unwrap_or_default();
    let range = charts.range.clone();
    let src = format!(
        "/api/history{}",
        query(&[
            ("queue", &queue),
            ("pipeline", &pipeline),
            ("range", &range)
        ])
    );
    let link = |r: &str| {
        format!(
            "/charts{}",
            query(&[("queue", &queue), ("pipeline", &pipeline), ("range", r)])
        )
    };
    let body = html! {
        link rel="stylesheet" href="/static/uplot.min.css";
        script src="/static/uplot.min.js" defer {}
        script src="/static/charts.js" defer {}
        h1 { "Charts: the last " (range) }
        form.filters method="get" action="/charts" {
            label { "Queue " select name="queue" {
                option value="" selected[queue.is_empty()] { "all" }
                @for name in &queues { option value=(name) selected[*name == queue] { (name) } }
            } }
            label { "Pipeline " select name="pipeline" {
                option value="" selected[pipeline.is_empty()] { "all" }
                @for name in &pipelines { option value=(name) selected[*name == pipeline] { (name) } }
                @if !pipeline.is_empty() && !pipelines.contains(&pipeline) { option value=(pipeline) selected { (pipeline) } }
            } }
            label { "Range " select name="range" {
                @for (r, label) in [("1h", "last hour"), ("24h", "last 24 hours"), ("7d", "last 7 days"), ("90d", "last 90 days")] {
                    option value=(r) selected[range == r] { (label) }
                }
            } }
            button type="submit" { "Show" }
            @for r in ["1h", "24h", "7d", "90d"] {
                " " a.range href=(link(r)) class=[(range == r).then_some("active")] { (r) }
            }
        }
        p.note { "Per " (match charts.granularity { Granularity::Minute => "minute", Granularity::Hour => "hour", Granularity::Day => "UTC day" })
            ", from counters the scripts keep in Redis (per minute for 25 hours, rolled up per hour for 8 days and per UTC day for 92 days): jobs that ended SUCCEEDED (processed), FAILED, or were made STALE. Waiting counts every QUEUED job (ready, delayed, parked behind a lock, waiting for a flow-control slot), as status and /metrics do, sampled once a minute by a worker's sweep (an hour or a day shows its largest sample). Times in "
            (if charts.zone == "local" { "local time" } else { "UTC" }) "." }
        table.grid.chart-now #waiting-now {
            thead { tr { th { "Queue" } th { "Waiting now" } th { "Oldest waiting now" } th { "Read at" } } }
            tbody {
                @for q in &charts.queues {
                    tr data-queue=(q.queue) {
                        td { (q.queue) }
                        td.waiting-now { (q.waiting_now) }
                        td.oldest-now data-seconds=(q.oldest_now_s) { (if q.waiting_now == 0 { "-".to_owned() } else { crate::time::human((q.oldest_now_s * 1000.0) as i64) }) }
                        td { (crate::time::stamp(q.now_ms)) }
                    }
                }
            }
        }
        div #charts data-src=(src) {}
        table.grid.chart-totals {
            thead { tr { th { "Queue" } th { "Pipeline" } th { "Processed" } th { "Failed" } th { "STALE" } th { "Cancelled" } th { "Retried" } th { "Ready + delayed (last sample)" } } }
            tbody {
                @for q in &charts.queues {
                    @for name in &q.pipelines {
                        @let s = &q.series[name];
                        tr data-queue=(q.queue) data-pipeline=(name) {
                            td { (q.queue) } td { (name) }
                            td.processed { (s.succeeded.iter().sum::<u64>()) }
                            td.failed { (s.failed.iter().sum::<u64>()) }
                            td.stale { (s.stale.iter().sum::<u64>()) }
                            td { (s.cancelled.iter().sum::<u64>()) }
                            td { (s.retried.iter().sum::<u64>()) }
                            td { (s.waiting.iter().rev().find_map(|w| *w).map(|w| w.to_string()).unwrap_or_else(|| "-".into())) }
                        }
                    }
                }
            }
        }
        @if charts.queues.iter().all(|q| q.pipelines.is_empty()) {
            p.note #no-history { "Nothing recorded in this range yet." }
        }
        p.note { "Charts drawn with " a href="/static/uplot.LICENSE" { "uPlot (MIT)" } ", served by this dashboard." }
    };
    Ok(app.page("Charts", Nav::Charts, body).into_response())
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        body,
    )
        .into_response()
}

/// `/static/uplot.min.js`.
async fn uplot_js() -> Response {
    asset("text/javascript; charset=utf-8", UPLOT_JS)
}

/// `/static/uplot.min.css`.
async fn uplot_css() -> Response {
    asset("text/css; charset=utf-8", UPLOT_CSS)
}

/// `/static/uplot.LICENSE`.
async fn uplot_license() -> Response {
    asset("text/plain; charset=utf-8", UPLOT_LICENSE)
}

/// `/static/charts.js`.
async fn charts_js() -> Response {
    asset("text/javascript; charset=utf-8", CHARTS_JS)
}
