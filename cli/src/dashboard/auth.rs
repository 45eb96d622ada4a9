//! Authorisation: who may act, and as whom. A request may act with the
//! dashboard's token, in an `Authorization: Bearer` header or a `token` field
//! (compared in constant time), or with a logged-in session whose CSRF value
//! [`layer`] checked: then the operator is the name given at login. A page on
//! another site cannot make a browser act: it knows neither the token nor the
//! session's CSRF value, and the cookie is `SameSite=Strict`. Without a
//! configured token every action answers 403.
//!
//! CSRF: every state-changing request that carries the session cookie and no
//! `Authorization: Bearer` must carry the session's CSRF value (synchronizer
//! token: the `csrf` field every form renders, or an `X-CSRF-Token` header),
//! checked here, in constant time, before any handler runs; without it the
//! answer is 403 and nothing is done. The API keeps the bearer token
//! (`Authorization: Bearer`), which needs no session and no CSRF value.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use subtle::ConstantTimeEq;

use super::error::{ApiError, DashError, PageError, Res};
use super::session::{self, cookie_id, Current, CURRENT};
use super::state::{App, Shared};

/// Longest operator name kept.
const MAX_OPERATOR: usize = 64;
/// Largest form body read for its CSRF field.
const MAX_FORM: usize = 256 * 1024;

/// The token sent: `Authorization: Bearer <token>`, else the body's field.
fn presented<'a>(headers: &'a HeaderMap, field: Option<&'a str>) -> Option<&'a str> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        });
    bearer.or(field).filter(|t| !t.is_empty())
}

/// Lets the request act, or says why not: 403 without a configured token, 401
/// for a missing or wrong one (a logged-in session whose CSRF value was checked
/// needs none).
pub(super) fn authorise(app: &App, headers: &HeaderMap, field: Option<&str>) -> Res<()> {
    let Some(token) = &app.token else {
        return Err(DashError::Disabled);
    };
    match presented(headers, field) {
        None if session::current().checked => Ok(()),
        None => Err(DashError::Unauthorized(
            "this action needs a login (/login) or the dashboard token (Authorization: Bearer, or the token field)"
                .into(),
        )),
        Some(given) if token.matches(given) => Ok(()),
        Some(_) => Err(DashError::Unauthorized(
            "wrong token: the action was not applied".into(),
        )),
    }
}

/// An operator name cleaned of control characters and cut short; `None` when empty.
pub(super) fn operator_name(operator: Option<&str>) -> Option<String> {
    let name: String = operator
        .unwrap_or("")
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_OPERATOR)
        .collect();
    let name = name.trim();
    (!name.is_empty()).then(|| name.to_owned())
}

/// `dashboard:<operator>`: the name given at login when the request acts
/// through its session, else `operator` (cleaned), else `operator`.
pub(super) fn by(operator: Option<&str>) -> String {
    let cur = session::current();
    let name = match (&cur.operator, cur.checked) {
        (Some(logged_in), true) => operator_name(Some(logged_in)),
        _ => operator_name(operator),
    };
    format!("dashboard:{}", name.as_deref().unwrap_or("operator"))
}

/// The fields of an action, from a form or a JSON body.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct ActionBody {
    /// The token (when not in `Authorization`).
    pub token: Option<String>,
    /// Who acts (recorded as `dashboard:<operator>`).
    pub operator: Option<String>,
    /// Why.
    pub reason: Option<String>,
    /// Retry: `resume` (default) or `from_start`.
    pub mode: Option<String>,
    /// Resolve: `failed`, `cancelled` or `succeeded`.
    #[serde(rename = "as")]
    pub outcome: Option<String>,
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
/// request that carries it, and runs the rest of the request with
/// [`session::current`] set.
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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn the_bearer_header_wins_over_the_field() {
        let mut h = HeaderMap::new();
        assert_eq!(presented(&h, Some("f")), Some("f"));
        assert_eq!(presented(&h, Some("")), None);
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer  abc "),
        );
        assert_eq!(presented(&h, Some("f")), Some("abc"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(presented(&h, None), None);
    }

    #[test]
    fn operator_names_are_cleaned() {
        assert_eq!(by(None), "dashboard:operator");
        assert_eq!(by(Some("  ")), "dashboard:operator");
        assert_eq!(by(Some("alice\n\u{7}")), "dashboard:alice");
        assert_eq!(by(Some(&"x".repeat(100))).len(), "dashboard:".len() + 64);
    }
}
