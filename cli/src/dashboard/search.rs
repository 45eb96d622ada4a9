//! `GET /search`: find jobs by what they processed (`Inspector::search_jobs`,
//! through the queue's search index). The header's box sends free text `q`:
//! an exact job id opens that job; otherwise each term (split at commas and
//! spaces) must be a prefix of the job's input key, resource or input window
//! (or of its id, for 6 or more hex digits and dashes), so "shop:a, 2026-05-06"
//! finds shop A's jobs of that day. The page's
//! form takes the fields one by one too. `GET /api/search` answers the same as
//! a `JobPage`.

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Json, Router};
use leasehold_core::inspect::{JobSearch, SEARCH_CAP};
use leasehold_core::{JobId, JobPage, JobState, Page};
use maud::html;
use serde::Deserialize;

use super::data::MAX_LIMIT;
use super::error::{ApiError, DashError, PageError, Res};
use super::html::{job_url, Nav};
use super::jobs::jobs_table;
use super::state::Shared;
use crate::context::{search_jobs_across, unknown_pipeline};

/// The routes of the search.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/search", get(search_page))
        .route("/api/search", get(search_api))
}

/// `?q&queue&input_key&resource&window&id_prefix&state&pipeline&limit`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct SearchParams {
    q: Option<String>,
    queue: Option<String>,
    input_key: Option<String>,
    resource: Option<String>,
    window: Option<String>,
    id_prefix: Option<String>,
    state: Option<String>,
    pipeline: Option<String>,
    limit: Option<String>,
}

fn given(v: &Option<String>) -> Option<String> {
    v.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

impl SearchParams {
    fn search(&self) -> Res<JobSearch> {
        let state = match given(&self.state) {
            None => None,
            Some(s) => Some(
                s.parse::<JobState>()
                    .map_err(|_| DashError::BadRequest(format!("state {s:?} is not a state")))?,
            ),
        };
        let terms = self
            .q
            .as_deref()
            .unwrap_or("")
            .split([',', ' ', '\t'])
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect();
        Ok(JobSearch {
            input_key: given(&self.input_key),
            resource: given(&self.resource),
            window: given(&self.window),
            id_prefix: given(&self.id_prefix),
            terms,
            state,
            pipeline: given(&self.pipeline),
            ..Default::default()
        })
    }

    fn limit(&self) -> Res<usize> {
        match given(&self.limit) {
            None => Ok(100),
            Some(s) => s
                .parse::<usize>()
                .map(|n| n.clamp(1, MAX_LIMIT))
                .map_err(|_| DashError::BadRequest(format!("limit {s:?} is not a number"))),
        }
    }
}

impl super::state::App {
    async fn search(&self, p: &SearchParams) -> Res<JobPage> {
        let search = p.search()?;
        let names = match given(&p.queue) {
            Some(q) => {
                self.known_queue(&q).await?;
                vec![q]
            }
            None => self.queues().await?,
        };
        let inspectors = names
            .iter()
            .map(|q| self.inspector(q))
            .collect::<Res<Vec<_>>>()?;
        let page = search_jobs_across(
            &inspectors,
            &search,
            Page {
                offset: 0,
                limit: p.limit()?,
            },
        )
        .await
        .map_err(|e| self.fail(e))?;
        if let (true, Some(pipeline)) = (page.jobs.is_empty(), &search.pipeline) {
            if let Some(message) = unknown_pipeline(&inspectors, pipeline)
                .await
                .map_err(|e| self.fail(e))?
            {
                return Err(DashError::NotFound(message));
            }
        }
        Ok(page)
    }
}

/// `GET /api/search`.
async fn search_api(
    State(app): State<Shared>,
    Query(p): Query<SearchParams>,
) -> Result<Json<JobPage>, ApiError> {
    Ok(Json(app.search(&p).await?))
}

/// `GET /search`.
async fn search_page(
    State(app): State<Shared>,
    Query(p): Query<SearchParams>,
) -> Result<Response, PageError> {
    let q = given(&p.q).unwrap_or_default();
    // an exact id found in one queue: its page
    if !q.is_empty() && JobId::parse(&q).is_ok() {
        let found = app.locate(&q).await?;
        if let [queue] = found.as_slice() {
            return Ok(Redirect::to(&job_url(queue, &q)).into_response());
        }
    }
    let search = p.search()?;
    let page = if search.is_empty() {
        None
    } else {
        Some(app.search(&p).await?)
    };
    let now = app.now().await?;
    let v = |f: &Option<String>| given(f).unwrap_or_default();
    let body = html! {
        h1 { "Find jobs" }
        form.filters.search method="get" action="/search" {
            label { "Text " input type="search" name="q" value=(q) placeholder="shop:a, 2026-05-06"; }
            label { "Input key (prefix) " input type="text" name="input_key" value=(v(&p.input_key)); }
            label { "Resource " input type="text" name="resource" value=(v(&p.resource)); }
            label { "Window (prefix) " input type="text" name="window" value=(v(&p.window)) placeholder="2026-05-06"; }
            label { "Id prefix " input type="text" name="id_prefix" value=(v(&p.id_prefix)); }
            label { "Pipeline " input type="text" name="pipeline" value=(v(&p.pipeline)); }
            label { "State " select name="state" {
                option value="" { "any" }
                @for s in JobState::ALL { option value=(s.as_str()) selected[v(&p.state) == s.as_str()] { (s.as_str()) } }
            } }
            button type="submit" { "Search" }
        }
        p.note { "Each text term must start the job's input key, resource or input window (" code { "<start>/<end>" } "), or its id (6 or more hex digits and dashes). Found through the queue's search index, written at enqueue; an id prefix scans the job keys." }
        @match &page {
            None => { p { "Give a term or a field." } }
            Some(page) => {
                div #search-results {
                    p.summary { (crate::wording::jobs(page.jobs.len())) @if page.has_more { " (more match: narrow the search)" } "." }
                    @if page.truncated { p.note.warn { "A criterion matched more than " (SEARCH_CAP) " index entries: narrow it." } }
                    @if !page.jobs.is_empty() { (jobs_table(page, now, false)) }
                }
            }
        }
    };
    Ok(app.page("Find jobs", Nav::Search, body).into_response())
}
