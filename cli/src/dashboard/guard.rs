//! What every request passes first ([`guard`]): while bound to loopback, the
//! `Host` it names must be a loopback name or an `--allow-host` (a page on
//! another site cannot read the dashboard through DNS rebinding); every
//! response gets the security headers; and the request runs in the clock
//! zone the operator chose (the [`ZONE_COOKIE`]).

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::session::cookie;
use super::state::Shared;

/// Lower-case host names (and IP literals) accepted in `Host` when bound to loopback.
pub(super) fn allowed_hosts(bound: &SocketAddr, extra: &[String]) -> BTreeSet<String> {
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
pub(super) async fn guard(State(app): State<Shared>, req: Request, next: Next) -> Response {
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
pub(super) const ZONE_COOKIE: &str = "leasehold_tz";

/// The zone a request's cookie chose, else the dashboard's default.
/// (The live refresh fetches without cookies and names the page's zone in
/// `X-Leasehold-Tz`.)
fn zone_chosen(headers: &axum::http::HeaderMap) -> crate::time::Zone {
    let named = headers
        .get("x-leasehold-tz")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let chosen = named.or_else(|| cookie(headers, ZONE_COOKIE));
    match chosen.as_deref() {
        Some("local") => crate::time::Zone::Local,
        Some("utc") => crate::time::Zone::Utc,
        _ => crate::time::default_zone(),
    }
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
}
