//! `leasehold dashboard`: a web dashboard for operators, over the same read API
//! as the other commands (`leasehold_core::inspect`) and acting through the same
//! `Queue` scripts, so every action is an event (`by` = `dashboard:<operator>`).
//!
//! * Pages (server-rendered HTML, escaped by `maud`): `/` queues
//!   (`overview`), `/jobs`, `/jobs/{queue}/{id}` (`job`), `/workers`,
//!   `/locks`, `/events`, `/schedules`, `/groups` and
//!   `/groups/{queue}/{name}` (`groups`). `/static/app.js` refreshes the live
//!   parts of a page every 2 s by fetching the same URL and swapping the
//!   elements marked `data-live` (so the HTML is rendered, and escaped, in
//!   one place only).
//! * JSON under `/api/...`, mirroring the pages with the core's serde types;
//!   each beside its page:
//!
//!   | path | answer |
//!   |---|---|
//!   | `GET /api/queues` | `[QueueStatus + "reachable": true]`, and on a cluster with a master down `{queue, "reachable": false, master, error}` per queue (or master) not read (see `overview`) |
//!   | `GET /api/jobs?queue&state&pipeline&resource&worker&offset&limit` | `JobPage` |
//!   | `GET /api/jobs/{queue}/{id}` | `JobDetail` (lease token redacted) + `timeline` + `cancel_explained` |
//!   | `GET /api/jobs/{queue}/{id}/events` | `[Event]`, oldest first |
//!   | `GET /api/workers?queue` | `[{queue, live, pruned}]` |
//!   | `GET /api/locks?queue` | `[{queue, resource, ...}]` |
//!   | `GET /api/events?queue&job&limit` | `[Event]`, newest first |
//!   | `POST /api/jobs/{queue}/{id}/{cancel,retry,resolve,delete,run-now}` | `ActionResult` (see `job::actions`) |
//!   | `POST /api/queues/{queue}/pipelines/{pipeline}/jobs` | `EnqueueReply` (see `enqueue`) |
//!
//!   Failures: `{"error", "message", "status"}` with 400, 401, 403, 404, 409,
//!   503 or 500 (an enqueue adds `field`, `problem` and `job` where they
//!   apply, and 413, 422).
//! * Enqueue: `POST /api/queues/{queue}/pipelines/{pipeline}/jobs`, one job or
//!   a batch under the pipeline's published contract, with the same token as
//!   the actions (see `enqueue`).
//! * `/charts` (jobs per minute and waiting jobs over the last hour or day,
//!   drawn with the vendored uPlot; `charts`), `/search` (find jobs by input
//!   key, resource, input window, id prefix; `search`) and `/bulk` (bulk retry,
//!   cancel, resolve with a confirm page showing the count; `bulk`).
//! * Actions (cancel, retry, resolve; a schedule's pause, resume and
//!   trigger, in `schedules`; bulk actions): `POST` only, by a logged-in
//!   operator (`/login` with the token once: a session cookie, every form
//!   carrying the session's CSRF value; see `session` and `auth`) or with the token the
//!   dashboard was started with (`Authorization: Bearer` or a `token` form or
//!   JSON field, compared in constant time). Without a configured token every
//!   action answers 403.
//! * `/metrics`: Prometheus text read from Redis on each scrape (see `metrics`).
//!
//! Binding to a non-loopback address needs a token (exit 2 otherwise). While
//! bound to loopback, requests must name a loopback host (or an `--allow-host`)
//! in `Host`: a page on another site cannot read the dashboard through DNS
//! rebinding (`guard`).
//!
//! The modules stand in two layers. At the bottom, what every feature uses
//! and that imports no feature: `error`, `session` (the sessions and the
//! token), `state` (the [`App`] every handler shares), `auth` (who may act,
//! the CSRF layer), `html` (the layout and its helpers), `data` (the reads),
//! `guard`. Above them one module per feature, owning its routes (a
//! `routes()` merged here), its pages and its JSON.

// the bottom: imports no feature
mod auth;
mod data;
mod error;
mod guard;
mod html;
mod session;
mod state;

// the features, each with its routes
mod bulk;
mod charts;
mod enqueue;
mod events;
mod flow;
mod groups;
mod job;
mod jobs;
mod locks;
mod login;
mod metrics;
mod overview;
mod schedules;
mod search;
mod settings;
mod static_files;
mod workers;

use std::io::Write as _;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use axum::middleware;
use axum::Router;
use tokio::sync::Mutex;

use self::session::{Sessions, Token};
use self::state::{App, Shared};
use crate::context::Ctx;
use crate::failure::{Failure, Outcome};
use crate::grammar::DashboardArgs;

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

/// The dashboard's routes: every feature's, behind the session layer and
/// the guard.
pub(crate) fn router(app: Shared) -> Router {
    Router::new()
        .merge(overview::routes())
        .merge(jobs::routes())
        .merge(job::routes())
        .merge(workers::routes())
        .merge(locks::routes())
        .merge(events::routes())
        .merge(groups::routes())
        .merge(schedules::routes())
        .merge(flow::routes())
        .merge(enqueue::routes())
        .merge(charts::routes())
        .merge(search::routes())
        .merge(bulk::routes())
        .merge(metrics::routes())
        .merge(login::routes())
        .merge(settings::routes())
        .merge(static_files::routes())
        .fallback(html::not_found)
        .layer(middleware::from_fn_with_state(app.clone(), auth::layer))
        .layer(middleware::from_fn_with_state(app.clone(), guard::guard))
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
        Some(guard::allowed_hosts(&bound, &args.allow_host))
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
        sessions: Sessions::new(
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
