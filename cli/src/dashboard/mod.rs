//! `leasehold dashboard`: a web dashboard for operators, over the same read API
//! as the other commands (`leasehold_core::inspect`) and acting through the same
//! `Queue` scripts, so every action is an event (`by` = `dashboard:<operator>`).
//!
//! * Pages (server-rendered HTML, escaped by `maud`): `/` queues, `/jobs`,
//!   `/jobs/{queue}/{id}`, `/workers`, `/locks`, `/events`, `/schedules`,
//!   `/groups` and `/groups/{queue}/{name}` (see `groups`). `/static/app.js`
//!   refreshes the live parts of a page every 2 s by fetching the same URL and
//!   swapping the elements marked `data-live` (so the HTML is rendered, and
//!   escaped, in one place only).
//! * JSON under `/api/...`, mirroring the pages with the core's serde types.
//! * Enqueue: `POST /api/queues/{queue}/pipelines/{pipeline}/jobs`, one job or
//!   a batch under the pipeline's published contract, with the same token as
//!   the actions (see `enqueue`).
//! * `/charts` (jobs per minute and waiting jobs over the last hour or day,
//!   drawn with the vendored uPlot; `charts`), `/search` (find jobs by input
//!   key, resource, input window, id prefix; `search`) and `/bulk` (bulk retry,
//!   cancel, resolve with a confirm page showing the count; `bulk`).
//! * Actions (cancel, retry, resolve; a schedule's pause, resume and
//!   trigger, in `schedule_actions`; bulk actions): `POST` only, by a logged-in
//!   operator (`/login` with the token once: a session cookie, every form
//!   carrying the session's CSRF value; see `session`) or with the token the
//!   dashboard was started with (`Authorization: Bearer` or a `token` form or
//!   JSON field, compared in constant time). Without a configured token every
//!   action answers 403.
//! * `/metrics`: Prometheus text read from Redis on each scrape (see `metrics`).
//!
//! Binding to a non-loopback address needs a token (exit 2 otherwise). While
//! bound to loopback, requests must name a loopback host (or an `--allow-host`)
//! in `Host`: a page on another site cannot read the dashboard through DNS
//! rebinding.

mod actions;
mod api;
mod bulk;
mod charts;
mod data;
mod enqueue;
mod error;
mod flow;
mod groups;
mod html;
mod metrics;
mod pages;
mod schedule_actions;
mod search;
mod session;

use std::collections::BTreeSet;
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use leasehold_core::{Queue, QueueConfig};
use tokio::sync::Mutex;

use crate::context::Ctx;
use crate::failure::{Failure, Outcome};

use crate::grammar::DashboardArgs;
pub(crate) use actions::Token;

/// How long the list of discovered queues is reused.
const QUEUE_CACHE: Duration = Duration::from_secs(10);

/// A discovery: when, the queues found, and one line per cluster master that
/// did not answer.
pub(crate) type Discovered = (Instant, Vec<String>, Vec<String>);

/// What every handler shares.
pub(crate) struct App {
    /// A client whose pool every queue client shares.
    pub base: Queue,
    /// Queue settings (prefix, timeouts).
    pub config: QueueConfig,
    /// The Redis URL for messages (password redacted).
    pub shown_url: String,
    /// `--queue`, if given.
    pub pinned: Vec<String>,
    /// Discovered queues and when, with a line per cluster master that did
    /// not answer (its queues are not listed).
    pub discovered: Mutex<Option<Discovered>>,
    /// The action token, if configured.
    pub token: Option<Token>,
    /// Serialises scrapes (each reads every queue's status).
    pub scrape: Mutex<()>,
    /// The logged-in operators.
    pub sessions: session::Sessions,
    /// Accepted `Host` names; `None`: any.
    pub hosts: Option<BTreeSet<String>>,
}

/// The state every handler gets.
pub(crate) type Shared = Arc<App>;

/// Resolves `--bind`: every address it names, and whether all are loopback.
fn resolve_bind(bind: &str) -> Outcome<Vec<SocketAddr>> {
    if let Ok(addr) = bind.parse::<SocketAddr>() {
        return Ok(vec![addr]);
    }
    let addrs: Vec<SocketAddr> = bind
        .to_socket_addrs()
        .map_err(|e| {
            Failure::Usage(format!(
                "--bind {bind:?} is not an address host:port (e.g. 127.0.0.1:8080): {e}"
            ))
        })?
        .collect();
    if addrs.is_empty() {
        return Err(Failure::Usage(format!("--bind {bind:?} names no address")));
    }
    Ok(addrs)
}

/// Lower-case host names (and IP literals) accepted in `Host` when bound to loopback.
fn allowed_hosts(bound: &SocketAddr, extra: &[String]) -> BTreeSet<String> {
    let mut hosts: BTreeSet<String> = ["localhost", "127.0.0.1", "::1"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    hosts.insert(bound.ip().to_string());
    hosts.extend(extra.iter().map(|h| h.trim().to_ascii_lowercase()));
    hosts
}

/// The host part of a `Host` header value, lower-case, without brackets or port.
fn host_of(value: &str) -> String {
    let v = value.trim().to_ascii_lowercase();
    if let Some(rest) = v.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("").to_owned();
    }
    match v.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h.to_owned(),
        _ => v,
    }
}

fn host_allowed(hosts: &BTreeSet<String>, value: &str) -> bool {
    let host = host_of(value);
    if hosts.contains(&host) {
        return true;
    }
    // any 127.0.0.0/8 literal
    host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Rejects requests whose `Host` is not accepted (DNS rebinding), and adds
/// security headers to every response.
async fn guard(State(app): State<Shared>, req: Request, next: Next) -> Response {
    if let Some(hosts) = &app.hosts {
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !host_allowed(hosts, host) {
            return (
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "this dashboard answers only to loopback host names, not Host {host:?}; \
                     start it with --allow-host NAME to accept another name\n"
                ),
            )
                .into_response();
        }
    }
    let zone = zone_chosen(req.headers());
    let mut resp = crate::time::in_zone(zone, next.run(req)).await;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
             img-src 'self' data:; connect-src 'self'; form-action 'self'; \
             frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    resp
}

/// The cookie holding the operator's choice of clock: `utc` or `local`.
pub(crate) const ZONE_COOKIE: &str = "leasehold_tz";

/// The zone a request's cookie chose, else the dashboard's default.
/// (The live refresh fetches without cookies and names the page's zone in
/// `X-Leasehold-Tz`.)
fn zone_chosen(headers: &axum::http::HeaderMap) -> crate::time::Zone {
    let named = headers
        .get("x-leasehold-tz")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let chosen = named.or_else(|| {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|kv| kv.trim().split_once('='))
            .find(|(k, _)| *k == ZONE_COOKIE)
            .map(|(_, v)| v.trim().to_owned())
    });
    match chosen.as_deref() {
        Some("local") => crate::time::Zone::Local,
        Some("utc") => crate::time::Zone::Utc,
        _ => crate::time::default_zone(),
    }
}

/// `?zone=utc|local&back=/path` of `GET /settings/time`.
#[derive(Debug, Default, serde::Deserialize)]
struct ZoneParams {
    zone: Option<String>,
    back: Option<String>,
}

/// `GET /settings/time?zone=utc|local`: remembers the operator's clock in a
/// cookie (a display preference: it changes nothing in Redis) and goes back
/// to the page it came from (a path on this dashboard only).
async fn time_setting(axum::extract::Query(p): axum::extract::Query<ZoneParams>) -> Response {
    let zone = match p.zone.as_deref() {
        Some("local") => "local",
        Some("utc") => "utc",
        other => {
            return (
                StatusCode::BAD_REQUEST,
                format!("zone {other:?} is not utc or local\n"),
            )
                .into_response()
        }
    };
    let back = p
        .back
        .filter(|b| b.starts_with('/') && !b.starts_with("//") && !b.contains('\\'))
        .unwrap_or_else(|| "/".into());
    let mut resp = axum::response::Redirect::to(&back).into_response();
    if let Ok(v) = HeaderValue::from_str(&format!(
        "{ZONE_COOKIE}={zone}; Path=/; SameSite=Strict; Max-Age=31536000"
    )) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

const APP_CSS: &str = include_str!("assets/app.css");
const APP_JS: &str = include_str!("assets/app.js");

async fn app_css() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        APP_CSS,
    )
        .into_response()
}

async fn app_js() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        APP_JS,
    )
        .into_response()
}

/// The dashboard's routes.
pub(crate) fn router(app: Shared) -> Router {
    Router::new()
        .route("/", get(pages::overview))
        .route("/jobs", get(pages::jobs))
        .route("/jobs/{queue}/{id}", get(pages::job))
        .route("/jobs/{queue}/{id}/cancel", post(actions::cancel_form))
        .route("/jobs/{queue}/{id}/retry", post(actions::retry_form))
        .route("/jobs/{queue}/{id}/resolve", post(actions::resolve_form))
        .route("/jobs/{queue}/{id}/delete", post(actions::delete_form))
        .route("/jobs/{queue}/{id}/run-now", post(actions::run_now_form))
        .route("/jobs/{queue}/{id}/repair", post(actions::repair_form))
        .route("/jobs/{queue}/{id}/purge", post(actions::purge_form))
        .route("/queues/{queue}/pause", post(flow::pause_form))
        .route("/queues/{queue}/resume", post(flow::resume_form))
        .route("/api/queues/{queue}/pause", post(flow::pause_api))
        .route("/api/queues/{queue}/resume", post(flow::resume_api))
        .route("/find", get(pages::find))
        .route("/workers", get(pages::workers))
        .route("/locks", get(pages::locks))
        .route("/events", get(pages::events))
        .route("/groups", get(groups::groups_page))
        .route("/groups/{queue}/{name}", get(groups::group_page))
        .route("/groups/{queue}/{name}/cancel", post(groups::cancel_form))
        .route("/groups/{queue}/{name}/retry", post(groups::retry_form))
        .route("/api/groups", get(groups::groups_api))
        .route("/api/groups/{queue}", post(groups::create_api))
        .route("/api/groups/{queue}/{name}", get(groups::group_api))
        .route("/api/groups/{queue}/{name}/seal", post(groups::seal_api))
        .route(
            "/api/groups/{queue}/{name}/cancel",
            post(groups::cancel_api),
        )
        .route("/api/groups/{queue}/{name}/retry", post(groups::retry_api))
        .route("/schedules", get(pages::schedules))
        .route(
            "/schedules/{queue}/{name}/{action}",
            post(schedule_actions::schedule_form),
        )
        .route("/api/schedules", get(pages::schedules_api))
        .route(
            "/api/schedules/{queue}/{name}/{action}",
            post(schedule_actions::schedule_api),
        )
        .route("/api/queues", get(api::queues))
        .route("/api/jobs", get(api::jobs))
        .route("/api/jobs/{queue}/{id}", get(api::job))
        .route("/api/jobs/{queue}/{id}/events", get(api::job_events))
        .route("/api/jobs/{queue}/{id}/cancel", post(actions::cancel_api))
        .route("/api/jobs/{queue}/{id}/retry", post(actions::retry_api))
        .route("/api/jobs/{queue}/{id}/resolve", post(actions::resolve_api))
        .route("/api/jobs/{queue}/{id}/delete", post(actions::delete_api))
        .route("/api/jobs/{queue}/{id}/run-now", post(actions::run_now_api))
        .route("/api/jobs/{queue}/{id}/repair", post(actions::repair_api))
        .route("/api/jobs/{queue}/{id}/purge", post(actions::purge_api))
        .route(
            "/api/queues/{queue}/pipelines/{pipeline}/jobs",
            post(enqueue::enqueue).layer(DefaultBodyLimit::max(enqueue::MAX_BODY)),
        )
        .route("/api/workers", get(api::workers))
        .route("/api/locks", get(api::locks))
        .route("/api/events", get(api::events))
        .route("/metrics", get(api::metrics))
        .route("/static/app.css", get(app_css))
        .route("/static/app.js", get(app_js))
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .route("/login", get(session::login_get).post(session::login_post))
        .route("/logout", post(session::logout))
        .route("/settings/time", get(time_setting))
        .route("/charts", get(charts::charts_page))
        .route("/api/history", get(charts::history_api))
        .route("/search", get(search::search_page))
        .route("/api/search", get(search::search_api))
        .route("/bulk", get(bulk::bulk_page).post(bulk::bulk_form))
        .route("/api/bulk", post(bulk::bulk_api))
        .route("/static/uplot.min.js", get(charts::uplot_js))
        .route("/static/uplot.min.css", get(charts::uplot_css))
        .route("/static/uplot.LICENSE", get(charts::uplot_license))
        .route("/static/charts.js", get(charts::charts_js))
        .fallback(error::not_found)
        .layer(middleware::from_fn_with_state(app.clone(), session::layer))
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

/// Runs the dashboard until SIGINT or SIGTERM.
pub(crate) async fn run(ctx: &Ctx, args: DashboardArgs) -> Outcome {
    let token = match args.token.as_deref() {
        None => None,
        Some(t) => Some(Token::new(t).map_err(Failure::Usage)?),
    };
    for q in &args.queue {
        ctx.base
            .sibling(q)
            .map_err(|e| Failure::Usage(format!("--queue {q:?}: {e}")))?;
    }
    let addrs = resolve_bind(&args.bind)?;
    let loopback = addrs.iter().all(|a| a.ip().is_loopback());
    if !loopback && token.is_none() {
        return Err(Failure::Usage(format!(
            "refusing to serve the dashboard on {} (not a loopback address) without a token: \
             set --token or LEASEHOLD_DASHBOARD_TOKEN, or bind 127.0.0.1",
            args.bind
        )));
    }
    let listener = tokio::net::TcpListener::bind(addrs.as_slice())
        .await
        .map_err(|e| Failure::Other(format!("cannot listen on {}: {e}", args.bind)))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Failure::Other(format!("cannot listen on {}: {e}", args.bind)))?;
    let hosts = if loopback || !args.allow_host.is_empty() {
        Some(allowed_hosts(&bound, &args.allow_host))
    } else {
        None
    };
    let actions = if token.is_some() {
        "actions enabled (token required)"
    } else {
        "read-only: actions disabled (no --token)"
    };
    let app = Arc::new(App {
        base: ctx.base.clone(),
        config: ctx.config.clone(),
        shown_url: ctx.shown_url.clone(),
        pinned: args.queue.clone(),
        discovered: Mutex::new(None),
        token,
        scrape: Mutex::new(()),
        sessions: session::Sessions::new(
            Duration::from_secs(args.session_hours * 3600),
            args.cookie_secure,
            !loopback,
        ),
        hosts,
    });
    let shown = if bound.is_ipv6() {
        format!("http://[{}]:{}/", bound.ip(), bound.port())
    } else {
        format!("http://{bound}/")
    };
    println!(
        "leasehold dashboard: serving {shown} for Redis {} ({actions})",
        ctx.shown_url
    );
    let _ = std::io::stdout().flush();
    axum::serve(listener, router(app))
        .with_graceful_shutdown(leasehold_core::shutdown_signal())
        .await
        .map_err(|e| Failure::Other(format!("the dashboard server stopped: {e}")))?;
    eprintln!("leasehold dashboard: stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_are_checked_without_port_or_brackets() {
        let bound: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let hosts = allowed_hosts(&bound, &["Dash.Example".into()]);
        for ok in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST",
            "[::1]:8080",
            "127.0.0.2:1",
            "dash.example:443",
        ] {
            assert!(host_allowed(&hosts, ok), "{ok}");
        }
        for bad in [
            "evil.example:8080",
            "",
            "10.0.0.1:8080",
            "localhost.evil:80",
        ] {
            assert!(!host_allowed(&hosts, bad), "{bad}");
        }
    }

    #[test]
    fn bind_addresses_resolve() {
        assert_eq!(
            resolve_bind("127.0.0.1:0").unwrap(),
            vec!["127.0.0.1:0".parse().unwrap()]
        );
        assert!(resolve_bind("nonsense").is_err());
        assert!(resolve_bind("0.0.0.0:1")
            .unwrap()
            .iter()
            .all(|a| !a.ip().is_loopback()));
    }
}
