//! HTML building blocks: the page layout, state badges, times, URLs, and the
//! visual attempt/step timeline of a job.
//!
//! Every value interpolated with `maud`'s `(...)` is HTML-escaped; nothing in
//! this module uses `PreEscaped` on data. URL parts are percent-encoded with
//! [`path_segment`] and [`query`] before maud escapes the attribute.

use std::fmt::Write as _;

use leasehold_core::{Job, JobState, Millis};
use maud::{html, Markup, DOCTYPE};

use super::session;
use crate::time::{human, stamp};

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

/// The whole page around `body`.
pub(super) fn layout(
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

/// One bar of the timeline.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Segment {
    /// CSS class: `wait`, `leased`, `step`, `running`, `cut`, `end`.
    pub kind: &'static str,
    /// Text on the bar.
    pub label: String,
    /// Start (ms).
    pub from: Millis,
    /// End (ms).
    pub to: Millis,
}

/// One attempt's row of the timeline.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct AttemptRow {
    /// Attempt number.
    pub n: u32,
    /// Its state (ended, or current).
    pub state: JobState,
    /// Worker, if leased.
    pub worker: Option<String>,
    /// Fence, if leased.
    pub fence: Option<u64>,
    /// Still going (not recorded yet).
    pub current: bool,
    /// Its bars, in time order.
    pub segments: Vec<Segment>,
}

fn wait(from: Millis, to: Millis) -> Segment {
    Segment {
        kind: "wait",
        label: "waiting".into(),
        from,
        to,
    }
}

/// Bars for one attempt: waiting, leased, each completed step (from the
/// previous checkpoint), then `tail`: how it ended, or what it is doing now.
fn segments(
    queued_from: Millis,
    leased_at: Option<Millis>,
    started_at: Option<Millis>,
    steps: &[leasehold_core::StepDone],
    tail: Option<(Millis, &'static str, String)>,
) -> Vec<Segment> {
    let mut out = Vec::new();
    let Some(leased) = leased_at else {
        // never leased: it waited until it ended (or until now)
        if let Some((to, _, _)) = tail {
            out.push(wait(queued_from, to));
        }
        return out;
    };
    out.push(wait(queued_from, leased));
    if let Some(started) = started_at {
        out.push(Segment {
            kind: "leased",
            label: "leased".into(),
            from: leased,
            to: started,
        });
    }
    let mut prev = started_at.unwrap_or(leased);
    for s in steps {
        out.push(Segment {
            kind: "step",
            label: s.step.clone(),
            from: prev,
            to: s.at,
        });
        prev = s.at;
    }
    if let Some((to, kind, label)) = tail {
        if to > prev || steps.is_empty() {
            out.push(Segment {
                kind,
                label,
                from: prev,
                to,
            });
        }
    }
    out
}

/// The timeline rows of every attempt of `job`, as of `now`.
pub(super) fn attempt_rows(job: &Job, now: Millis) -> Vec<AttemptRow> {
    let mut rows = Vec::new();
    let mut queued_from = job.created_at;
    for a in &job.attempts {
        let tail = (a.state != JobState::Succeeded || a.leased_at.is_none()).then(|| {
            let label = match (&a.cut_step, a.state) {
                // a STALE attempt keeps its cut-off step, decided or not
                (Some(step), JobState::Stale) => format!("{step} (cut off: STALE)"),
                _ => format!("→ {}", a.state),
            };
            (a.ended_at, "cut", label)
        });
        rows.push(AttemptRow {
            n: a.n,
            state: a.state,
            worker: (!a.worker.is_empty()).then(|| a.worker.clone()),
            fence: (a.fence > 0).then_some(a.fence),
            current: a.n == job.attempt && job.state == JobState::Stale,
            segments: segments(queued_from, a.leased_at, a.started_at, &a.steps, tail),
        });
        queued_from = a.ended_at;
    }
    if !job.attempts.iter().any(|a| a.n == job.attempt) {
        let step = job.step.clone().unwrap_or_else(|| "?".into());
        let tail = match job.state {
            JobState::Stale => (
                job.stale_at.unwrap_or(now),
                "cut",
                format!("{step} (cut off: STALE)"),
            ),
            JobState::Running => (now, "running", format!("{step} (running)")),
            JobState::Leased => (now, "leased", "leased".to_owned()),
            _ => (now, "wait", "waiting".to_owned()),
        };
        rows.push(AttemptRow {
            n: job.attempt,
            state: job.state,
            worker: job.worker.clone(),
            fence: job.fence,
            current: true,
            segments: segments(
                queued_from,
                job.leased_at,
                job.started_at,
                &job.steps,
                Some(tail),
            ),
        });
    }
    rows
}

/// The visual timeline: one track per attempt on a common time scale.
pub(super) fn timeline(job: &Job, now: Millis) -> Markup {
    let rows = attempt_rows(job, now);
    let t0 = job.created_at;
    let t1 = rows
        .iter()
        .flat_map(|r| r.segments.iter().map(|s| s.to))
        .chain(std::iter::once(if job.state.is_terminal() {
            job.updated_at
        } else if job.state == JobState::Stale {
            // nothing runs after a job went STALE: the axis ends there
            job.stale_at.unwrap_or(now)
        } else {
            now
        }))
        .max()
        .unwrap_or(t0)
        .max(t0 + 1);
    let pct = |t: Millis| ((t - t0) as f64 / (t1 - t0) as f64 * 100.0).clamp(0.0, 100.0);
    html! {
        div.tl {
            div.tl-axis {
                span { (stamp(t0)) }
                span { (human(t1 - t0)) " in all" }
                span { (stamp(t1)) }
            }
            @for r in &rows {
                div.tl-row {
                    div.tl-label {
                        strong { "#" (r.n) } " " (badge(r.state))
                        @if r.current { " " small.cur { "current" } }
                        br;
                        small {
                            (opt(r.worker.as_deref()))
                            @if let Some(f) = r.fence { " · fence " (f) }
                        }
                    }
                    div.tl-track {
                        @for s in &r.segments {
                            @let left = pct(s.from);
                            @let width = (pct(s.to) - left).max(0.4);
                            div class={ "tl-seg seg-" (s.kind) }
                                style=(format!("left:{left:.3}%;width:{width:.3}%"))
                                title=(format!("{}: {} → {} ({})", s.label, stamp(s.from), stamp(s.to), human(s.to - s.from))) {
                                span { (s.label) }
                            }
                        }
                    }
                }
                @let steps: Vec<&Segment> = r.segments.iter().filter(|s| s.kind != "wait").collect();
                @if !steps.is_empty() {
                    ol.tl-steps {
                        @for s in steps {
                            li {
                                span class={ "sw seg-" (s.kind) } {}
                                span.name { (s.label) }
                                " " (stamp(s.from)) " → " (stamp(s.to))
                                " (" (human(s.to - s.from)) ")"
                            }
                        }
                    }
                }
            }
            div.tl-legend {
                span.seg-wait { "waiting" } span.seg-leased { "leased" } span.seg-step { "step completed" }
                span.seg-running { "running" } span.seg-cut { "ended / cut off" }
            }
        }
    }
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

    fn job(value: serde_json::Value) -> Job {
        let mut base = serde_json::json!({
            "id": "j", "queue": "q", "pipeline": "p", "input": {}, "input_key": null, "resource": null,
            "priority": 0, "not_before": 0, "max_attempts": 1, "stale_lock": "hold", "created_at": 1000,
            "updated_at": 1000, "attempt": 1, "state": "QUEUED", "step": null, "last_step": null,
            "outputs": {}, "cancel": null, "cleanup_needed": false,
            "lease": null, "worker": null, "fence": null, "leased_at": null, "started_at": null,
            "steps": [], "stale_at": null, "attempts": []
        });
        for (k, v) in value.as_object().unwrap() {
            base[k] = v.clone();
        }
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn a_running_attempt_shows_its_steps_and_the_open_one() {
        let j = job(serde_json::json!({
            "state": "RUNNING", "worker": "w1", "fence": 7, "leased_at": 1100, "started_at": 1200,
            "step": "load", "steps": [{"step": "fetch", "at": 1500}]
        }));
        let rows = attempt_rows(&j, 2000);
        assert_eq!(rows.len(), 1);
        let kinds: Vec<(&str, &str, Millis, Millis)> = rows[0]
            .segments
            .iter()
            .map(|s| (s.kind, s.label.as_str(), s.from, s.to))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("wait", "waiting", 1000, 1100),
                ("leased", "leased", 1100, 1200),
                ("step", "fetch", 1200, 1500),
                ("running", "load (running)", 1500, 2000),
            ]
        );
        assert!(rows[0].current);
        let html = timeline(&j, 2000).into_string();
        assert!(html.contains("load (running)"));
    }

    #[test]
    fn ended_attempts_come_from_their_records() {
        let j = job(serde_json::json!({
            "state": "QUEUED", "attempt": 2, "updated_at": 3000,
            "attempts": [{"n": 1, "state": "FAILED", "worker": "w1", "fence": 3, "leased_at": 1100,
                          "started_at": 1150, "ended_at": 2000, "steps": [{"step": "fetch", "at": 1500}]}]
        }));
        let rows = attempt_rows(&j, 4000);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].segments.last().unwrap().label, "→ FAILED");
        assert_eq!(rows[0].segments.last().unwrap().from, 1500);
        assert_eq!(
            rows[1].segments,
            vec![Segment {
                kind: "wait",
                label: "waiting".into(),
                from: 2000,
                to: 4000
            }]
        );
    }
}
