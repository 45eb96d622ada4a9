//! The dashboard session: an operator logs in once with the dashboard token and
//! a name (`/login`), and gets a cookie naming a random session id (32 random
//! bytes, hex) that this process keeps in memory with the operator's name, a
//! CSRF value and an expiry (`--session-hours`, 8 by default). The cookie is
//! `HttpOnly`, `SameSite=Strict`, `Path=/`, with `Max-Age`, and `Secure` as
//! `--cookie-secure` says (`auto`: when the request came through an https proxy,
//! `X-Forwarded-Proto: https`, or the dashboard is bound to a non-loopback
//! address). `POST /logout` forgets the session. Restarting the dashboard
//! forgets every session (operators log in again); several dashboard processes
//! behind one name need sticky sessions.
//!
//! CSRF: every state-changing request that carries the session cookie and no
//! `Authorization: Bearer` must carry the session's CSRF value (synchronizer
//! token: the `csrf` field every form renders, or an `X-CSRF-Token` header),
//! checked here, in constant time, before any handler runs; without it the
//! answer is 403 and nothing is done. The API keeps the bearer token
//! (`Authorization: Bearer`), which needs no session and no CSRF value.
//!
//! The request's session is handed to the handlers and the page layout as a
//! task-local [`current`]: who is logged in, the CSRF value the forms render,
//! and whether this request's CSRF value was checked (then it may act, recorded
//! as `dashboard:<operator>` with the name given at login).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Form, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;

use crate::grammar::CookieSecure;
use serde::Deserialize;
use subtle::ConstantTimeEq;

use super::error::{ApiError, DashError, PageError};
use super::Shared;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "leasehold_session";
/// Most sessions kept; the oldest goes when a login would exceed it.
const MAX_SESSIONS: usize = 10_000;
/// Largest form body read for its CSRF field.
const MAX_FORM: usize = 256 * 1024;

/// One logged-in operator.
#[derive(Debug, Clone)]
struct Session {
    operator: String,
    csrf: String,
    expires: Instant,
}

/// The sessions of this dashboard process.
#[derive(Debug)]
pub(crate) struct Sessions {
    ttl: Duration,
    secure: CookieSecure,
    non_loopback: bool,
    map: Mutex<HashMap<String, Session>>,
}

/// What a request knows of its session (see [`current`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Current {
    /// The operator logged in, if any.
    pub operator: Option<String>,
    /// The session's CSRF value, which forms render.
    pub csrf: Option<String>,
    /// This request carried the right CSRF value with its session: it may act.
    pub checked: bool,
}

tokio::task_local! {
    static CURRENT: Current;
}

/// The session of the request being handled (none outside a request).
pub(crate) fn current() -> Current {
    CURRENT.try_with(Current::clone).unwrap_or_default()
}

/// `n` random bytes as hex.
fn random_hex(n: usize) -> Result<String, DashError> {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf)
        .map_err(|e| DashError::Internal(format!("no randomness for a session id: {e}")))?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

impl Sessions {
    /// Sessions lasting `ttl`, cookies marked as `secure` says.
    pub(crate) fn new(ttl: Duration, secure: CookieSecure, non_loopback: bool) -> Sessions {
        Sessions {
            ttl,
            secure,
            non_loopback,
            map: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        // a panic while holding the map cannot leave it inconsistent (single inserts/removes)
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new session of `operator`: its id.
    fn create(&self, operator: &str) -> Result<String, DashError> {
        let id = random_hex(32)?;
        let session = Session {
            operator: operator.to_owned(),
            csrf: random_hex(32)?,
            expires: Instant::now() + self.ttl,
        };
        let mut map = self.lock();
        let now = Instant::now();
        map.retain(|_, s| s.expires > now);
        if map.len() >= MAX_SESSIONS {
            if let Some(oldest) = map
                .iter()
                .min_by_key(|(_, s)| s.expires)
                .map(|(k, _)| k.clone())
            {
                map.remove(&oldest);
            }
        }
        map.insert(id.clone(), session);
        Ok(id)
    }

    /// The live session `id`.
    fn get(&self, id: &str) -> Option<Session> {
        let mut map = self.lock();
        match map.get(id) {
            Some(s) if s.expires > Instant::now() => Some(s.clone()),
            Some(_) => {
                map.remove(id);
                None
            }
            None => None,
        }
    }

    fn remove(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Whether the cookie of a response to a request with `headers` is `Secure`.
    fn secure(&self, headers: &HeaderMap) -> bool {
        match self.secure {
            CookieSecure::Always => true,
            CookieSecure::Never => false,
            CookieSecure::Auto => {
                self.non_loopback
                    || headers
                        .get("x-forwarded-proto")
                        .and_then(|v| v.to_str().ok())
                        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
            }
        }
    }

    /// The `Set-Cookie` value for session `id` (`None`: clear the cookie).
    fn cookie(&self, headers: &HeaderMap, id: Option<&str>) -> HeaderValue {
        let secure = if self.secure(headers) { "; Secure" } else { "" };
        let text = match id {
            Some(id) => format!(
                "{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
                self.ttl.as_secs()
            ),
            None => format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{secure}"),
        };
        // hex ids and fixed text only: always a valid header value
        HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

/// The session id in the request's `Cookie` headers.
fn cookie_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

fn has_bearer(headers: &HeaderMap) -> bool {
    headers.contains_key(header::AUTHORIZATION)
}

fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim()
                .to_ascii_lowercase()
                .starts_with("application/x-www-form-urlencoded")
        })
}

fn refuse(path: &str, why: &str) -> Response {
    let e = DashError::Csrf(format!("{why}: nothing was done"));
    if path.starts_with("/api/") {
        ApiError(e).into_response()
    } else {
        PageError(e).into_response()
    }
}

/// Finds the request's session, checks the CSRF value of a state-changing
/// request that carries it, and runs the rest of the request with [`current`] set.
pub(crate) async fn layer(State(app): State<Shared>, req: Request, next: Next) -> Response {
    let session = cookie_id(req.headers()).and_then(|id| app.sessions.get(&id));
    let Some(session) = session else {
        return CURRENT.scope(Current::default(), next.run(req)).await;
    };
    let mut current = Current {
        operator: Some(session.operator.clone()),
        csrf: Some(session.csrf.clone()),
        checked: false,
    };
    let mut req = req;
    let changes_state = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if changes_state && !has_bearer(req.headers()) && req.uri().path() != "/login" {
        let path = req.uri().path().to_owned();
        let mut given = req
            .headers()
            .get("x-csrf-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if given.is_none() && is_form(req.headers()) {
            let (parts, body) = req.into_parts();
            let Ok(bytes) = axum::body::to_bytes(body, MAX_FORM).await else {
                return refuse(&path, "the form is too large to check");
            };
            let pairs: Vec<(String, String)> =
                serde_urlencoded::from_bytes(&bytes).unwrap_or_default();
            given = pairs.into_iter().find(|(k, _)| k == "csrf").map(|(_, v)| v);
            req = Request::from_parts(parts, Body::from(bytes));
        }
        let ok = given.is_some_and(|g| bool::from(g.as_bytes().ct_eq(session.csrf.as_bytes())));
        if !ok {
            return refuse(
                &path,
                "this form's CSRF check value is missing or not this session's",
            );
        }
        current.checked = true;
    }
    CURRENT.scope(current, next.run(req)).await
}

/// `GET /login` parameters.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct LoginParams {
    notice: Option<String>,
}

/// The login form's fields.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct LoginForm {
    token: Option<String>,
    operator: Option<String>,
}

fn login_page(app: &Shared, message: Option<&str>, notice: Option<&str>) -> maud::Markup {
    let cur = current();
    app.page(
        "Log in",
        super::html::Nav::None,
        html! {
            h1 { "Log in" }
            @if let Some(n) = notice { p.notice { (n) } }
            @if let Some(m) = message { p.message.warn #login-error { (m) } }
            @if app.token.is_none() {
                p.note { (super::error::DISABLED) }
            } @else {
                @if let Some(op) = &cur.operator {
                    p #logged-in { "Logged in as " strong { (op) } "." }
                }
                form.login method="post" action="/login" {
                    label { "Your name " input type="text" name="operator" required maxlength="64" autocomplete="username" placeholder="recorded with every action"; }
                    label { "Token " input type="password" name="token" required autocomplete="current-password"; }
                    button type="submit" { "Log in" }
                }
                p.note { "The session lasts " (app.sessions.ttl.as_secs() / 3600) " h; actions are recorded as " code { "dashboard:<your name>" } "." }
            }
        },
    )
}

/// `GET /login`.
pub(crate) async fn login_get(State(app): State<Shared>, Query(p): Query<LoginParams>) -> Response {
    let notice = match p.notice.as_deref() {
        Some("logged_out") => Some("Logged out."),
        _ => None,
    };
    login_page(&app, None, notice).into_response()
}

/// `POST /login` (form: token, operator): a session cookie and back to the queues.
pub(crate) async fn login_post(
    State(app): State<Shared>,
    headers: HeaderMap,
    Form(f): Form<LoginForm>,
) -> Result<Response, PageError> {
    let Some(token) = &app.token else {
        return Err(DashError::Disabled.into());
    };
    let operator = super::actions::operator_name(f.operator.as_deref());
    let given = f.token.as_deref().unwrap_or("");
    if given.is_empty() || !token.matches(given) {
        let mut resp = login_page(&app, Some("Wrong token: not logged in."), None).into_response();
        *resp.status_mut() = axum::http::StatusCode::UNAUTHORIZED;
        return Ok(resp);
    }
    let Some(operator) = operator else {
        let mut resp = login_page(
            &app,
            Some("Give your name: it is recorded with every action."),
            None,
        )
        .into_response();
        *resp.status_mut() = axum::http::StatusCode::BAD_REQUEST;
        return Ok(resp);
    };
    let id = app.sessions.create(&operator)?;
    let mut resp = Redirect::to("/?notice=logged_in").into_response();
    resp.headers_mut()
        .insert(header::SET_COOKIE, app.sessions.cookie(&headers, Some(&id)));
    Ok(resp)
}

/// `POST /logout` (form: csrf): forgets the session and clears the cookie.
pub(crate) async fn logout(State(app): State<Shared>, headers: HeaderMap) -> Response {
    if let Some(id) = cookie_id(&headers) {
        app.sessions.remove(&id);
    }
    let mut resp = Redirect::to("/login?notice=logged_out").into_response();
    resp.headers_mut()
        .insert(header::SET_COOKIE, app.sessions.cookie(&headers, None));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; leasehold_session=abc ; b=2"),
        );
        assert_eq!(cookie_id(&h), Some("abc".into()));
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("leasehold_session="),
        );
        assert_eq!(cookie_id(&h), None);
    }

    #[test]
    fn sessions_expire_and_cookies_say_so() {
        let s = Sessions::new(Duration::from_secs(3600), CookieSecure::Auto, false);
        let id = s.create("alice").unwrap();
        assert_eq!(id.len(), 64);
        assert_eq!(s.get(&id).unwrap().operator, "alice");
        let h = HeaderMap::new();
        let c = s.cookie(&h, Some(&id));
        let c = c.to_str().unwrap();
        assert!(
            c.contains("HttpOnly") && c.contains("SameSite=Strict") && c.contains("Max-Age=3600")
        );
        assert!(!c.contains("Secure"));
        let mut https = HeaderMap::new();
        https.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        assert!(s
            .cookie(&https, Some(&id))
            .to_str()
            .unwrap()
            .ends_with("; Secure"));
        s.remove(&id);
        assert!(s.get(&id).is_none());
        let short = Sessions::new(Duration::ZERO, CookieSecure::Always, false);
        let id = short.create("bob").unwrap();
        assert!(short.get(&id).is_none(), "expired at once");
        assert!(short
            .cookie(&h, None)
            .to_str()
            .unwrap()
            .contains("Max-Age=0; Secure"));
    }
}
