//! `/login` and `/logout`: an operator logs in once with the dashboard token
//! and a name, and gets the session cookie (see `session`); `POST /logout`
//! forgets the session.

use axum::extract::{Form, Query, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use maud::html;
use serde::Deserialize;

use super::auth::operator_name;
use super::error::{DashError, PageError, DISABLED};
use super::html::Nav;
use super::session::{cookie_id, current};
use super::state::Shared;

/// The routes of logging in and out.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/login", get(login_get).post(login_post))
        .route("/logout", post(logout))
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
        Nav::None,
        html! {
            h1 { "Log in" }
            @if let Some(n) = notice { p.notice { (n) } }
            @if let Some(m) = message { p.message.warn #login-error { (m) } }
            @if app.token.is_none() {
                p.note { (DISABLED) }
            } @else {
                @if let Some(op) = &cur.operator {
                    p #logged-in { "Logged in as " strong { (op) } "." }
                }
                form.login method="post" action="/login" {
                    label { "Your name " input type="text" name="operator" required maxlength="64" autocomplete="username" placeholder="recorded with every action"; }
                    label { "Token " input type="password" name="token" required autocomplete="current-password"; }
                    button type="submit" { "Log in" }
                }
                p.note { "The session lasts " (app.sessions.ttl().as_secs() / 3600) " h; actions are recorded as " code { "dashboard:<your name>" } "." }
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
    let operator = operator_name(f.operator.as_deref());
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
