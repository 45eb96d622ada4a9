//! The visual attempt/step timeline of a job: one row per attempt, a bar
//! per wait, lease and step, drawn on the job's page.

use leasehold_core::{Job, JobState, Millis};
use maud::{html, Markup};

use crate::dashboard::html::{badge, opt};
use crate::time::{human, stamp};

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
