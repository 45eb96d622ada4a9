//! HTML building blocks: the page layout (and [`App::page`] around it),
//! state badges, times, URLs, the fields of a form that acts, and the page of
//! a failed request ([`PageError`] as a response).
//!
//! Every value interpolated with `maud`'s `(...)` is HTML-escaped; nothing in
//! this module uses `PreEscaped` on data. URL parts are percent-encoded with
//! [`path_segment`] and [`query`] before maud escapes the attribute. Every
//! page passes through [`layout`], which shows the control characters of the
//! whole page visibly (`leasehold_core::visible`; the page's own markup has
//! none), so a script's output reaches neither the browser nor a terminal
//! that fetched the page as a control.

use std::fmt::Write as _;

use axum::response::{IntoResponse, Response};
use leasehold_core::{JobState, Millis};
use maud::{html, Markup, PreEscaped, DOCTYPE};

use super::error::{DashError, PageError};
use super::session;
use super::state::App;
use crate::time::{human, stamp};

/// A page handler's answer: the page, or an error page.
pub(super) type Page = Result<Markup, PageError>;

/// Which navigation entry is current.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Nav {
    /// `/`.
    Queues,
    /// `/jobs` and a job's page.
    Jobs,
    /// `/workers`.
    Workers,
    /// `/locks`.
    Locks,
    /// `/events`.
    Events,
    /// `/groups` and a group's page.
    Groups,
    /// `/schedules`.
    Schedules,
    /// `/charts`.
    Charts,
    /// `/search`.
    Search,
    /// `/bulk`.
    Bulk,
    /// No entry (error and find pages).
    None,
}

/// Percent-encodes `s` for one URL path segment or query value (everything
/// but RFC 3986's unreserved characters).
pub(super) fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// `?k=v&...` of the pairs whose value is not empty (empty string when none).
pub(super) fn query(pairs: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (k, v) in pairs.iter().filter(|(_, v)| !v.is_empty()) {
        out.push(if out.is_empty() { '?' } else { '&' });
        out.push_str(&path_segment(k));
        out.push('=');
        out.push_str(&path_segment(v));
    }
    out
}

/// The URL of a job's page.
pub(super) fn job_url(queue: &str, id: &str) -> String {
    format!("/jobs/{}/{}", path_segment(queue), path_segment(id))
}

/// The URL of the job list with these filters.
pub(super) fn jobs_url(queue: &str, state: &str) -> String {
    format!("/jobs{}", query(&[("queue", queue), ("state", state)]))
}

/// A state as a coloured badge.
pub(super) fn badge(state: JobState) -> Markup {
    html! { span class={ "badge st-" (state.as_str()) } { (state.as_str()) } }
}

/// An absolute time with the time since `now` on hover and beside it.
pub(super) fn when(now: Millis, at: Millis) -> Markup {
    let rel = if at <= now {
        format!("{} ago", human(now - at))
    } else {
        format!("in {}", human(at - now))
    };
    html! { time datetime=(stamp(at)) title=(stamp(at)) { (rel) } }
}

/// `-` for nothing.
pub(super) fn opt(s: Option<&str>) -> &str {
    s.filter(|s| !s.is_empty()).unwrap_or("-")
}

/// The fields every form that acts carries: the session's CSRF value when
/// logged in, else the operator's name and the token.
pub(super) fn auth_fields() -> Markup {
    let cur = session::current();
    html! {
        @if let Some(csrf) = &cur.csrf {
            input type="hidden" name="csrf" value=(csrf);
        } @else {
            input type="text" name="operator" placeholder="operator" maxlength="64" autocomplete="username";
            input type="password" name="token" placeholder="token" required autocomplete="current-password";
        }
    }
}

/// The whole page around `body`, its control characters (which only data
/// can hold) shown visibly.
pub(super) fn layout(
    title: &str,
    nav: Nav,
    actions_enabled: Option<bool>,
    footer: &str,
    body: Markup,
) -> Markup {
    let page = page_markup(title, nav, actions_enabled, footer, body).into_string();
    PreEscaped(leasehold_core::visible(&page).into_owned())
}

/// The page's markup, as maud builds it.
fn page_markup(
    title: &str,
    nav: Nav,
    actions_enabled: Option<bool>,
    footer: &str,
    body: Markup,
) -> Markup {
    let cur = session::current();
    let item = |href: &str, label: &str, me: Nav| {
        html! { a href=(href) class=[(nav == me).then_some("active")] { (label) } }
    };
    html! {
        (DOCTYPE)
        html lang="en" data-tz=(crate::time::zone().as_str()) {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · leasehold" }
                link rel="stylesheet" href="/static/app.css";
                script src="/static/app.js" defer {}
            }
            body {
                header.top {
                    a.brand href="/" { "leasehold" }
                    nav {
                        (item("/", "Queues", Nav::Queues))
                        (item("/jobs", "Jobs", Nav::Jobs))
                        (item("/workers", "Workers", Nav::Workers))
                        (item("/locks", "Locks", Nav::Locks))
                        (item("/events", "Events", Nav::Events))
                        (item("/groups", "Groups", Nav::Groups))
                        (item("/schedules", "Schedules", Nav::Schedules))
                        (item("/charts", "Charts", Nav::Charts))
                        (item("/bulk", "Bulk", Nav::Bulk))
                    }
                    form.find action="/search" method="get" {
                        input type="search" name="q" placeholder="id, input key, resource, window" aria-label="search jobs";
                        button type="submit" { "Find" }
                    }
                    @if let Some(enabled) = actions_enabled {
                        span.mode.on[enabled].off[!enabled]
                            title=(if enabled { "cancel, retry and resolve need the dashboard token" } else { "start the dashboard with --token to enable actions" }) {
                            (if enabled { "actions: token required" } else { "read-only" })
                        }
                    }
                    @if let Some(op) = &cur.operator {
                        span.who #session-user { "logged in as " strong { (op) } }
                        form.logout method="post" action="/logout" {
                            (auth_fields())
                            button type="submit" #logout { "Log out" }
                        }
                    } @else if actions_enabled == Some(true) {
                        a.login #login-link href="/login" { "Log in" }
                    }
                    span.tz #tz-switch title="the clock every time on these pages is shown in" {
                        @let zone = crate::time::zone();
                        a.tz-choice.active[zone == crate::time::Zone::Utc] href="/settings/time?zone=utc" { "UTC" }
                        " · "
                        a.tz-choice.active[zone == crate::time::Zone::Local] href="/settings/time?zone=local" { "local" }
                    }
                    label.live-toggle {
                        input #live-toggle type="checkbox" checked;
                        " live"
                    }
                    span #live-status {}
                }
                main { (body) }
                footer { (footer) }
            }
        }
    }
}

impl App {
    /// The footer line: Redis, key prefix, version.
    fn footer(&self) -> String {
        format!(
            "Redis {} · key prefix {} · leasehold {}",
            self.shown_url,
            self.config.prefix,
            env!("CARGO_PKG_VERSION")
        )
    }

    /// The whole page around `body`, with the action mode shown.
    pub(super) fn page(&self, title: &str, nav: Nav, body: Markup) -> Markup {
        layout(title, nav, Some(self.token.is_some()), &self.footer(), body)
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        self.0.log();
        let page = error_page(&self.0);
        self.0.finish(page.into_response())
    }
}

/// The page for a failed request.
fn error_page(e: &DashError) -> Markup {
    let hint = match e {
        DashError::Unavailable(_) => Some(
            "The dashboard keeps running and shows data again as soon as Redis answers; this page retries by itself.",
        ),
        DashError::Unauthorized(_) => Some("Log in with the dashboard token (or go back, type it into the form) and submit again."),
        DashError::Csrf(_) => Some("Go back, reload the page (its forms carry this session's check value) and submit again."),
        _ => None,
    };
    layout(
        e.title(),
        Nav::None,
        None,
        "",
        html! {
            section.error data-status=(e.status().as_u16()) {
                h1 { (e.status().as_u16()) " " (e.title()) }
                p.message { (e.message()) }
                @if let Some(h) = hint { p { (h) } }
                p { a href="/" { "Queues" } " · " a href="/jobs" { "Jobs" } }
            }
        },
    )
}

/// Any other path: 404.
pub(super) async fn not_found() -> Response {
    PageError(DashError::NotFound("no such page".into())).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_percent_encoded() {
        assert_eq!(path_segment("a/b?c#d e%"), "a%2Fb%3Fc%23d%20e%25");
        assert_eq!(path_segment("Ok-1._~"), "Ok-1._~");
        assert_eq!(path_segment("é"), "%C3%A9");
        assert_eq!(
            query(&[("queue", "q&x"), ("state", ""), ("w", "<b>")]),
            "?queue=q%26x&w=%3Cb%3E"
        );
        assert_eq!(query(&[("a", "")]), "");
    }

    #[test]
    fn interpolated_text_is_escaped() {
        let evil = "<script>alert('x')</script>\"&";
        let page = layout(evil, Nav::None, Some(false), evil, html! { p { (evil) } }).into_string();
        assert!(!page.contains("<script>alert"), "{page}");
        assert!(page.contains("&lt;script&gt;alert('x')&lt;/script&gt;&quot;&amp;"));
    }

    #[test]
    fn control_characters_of_data_are_shown_visibly() {
        let evil = "\x1b[2J\x1b]0;title\x07\u{9b}31m\r\x7f";
        let body = html! { pre { (evil) "\nnext line" } };
        let page = layout(evil, Nav::None, Some(false), evil, body).into_string();
        assert!(
            !page.chars().any(|c| c.is_control() && c != '\n'),
            "{page:?}"
        );
        assert!(page.contains("<pre>\\x1b[2J\\x1b]0;title\\x07\\x9b31m\\r\\x7f\nnext line</pre>"));
    }
}
