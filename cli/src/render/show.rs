//! `show`: everything about one job, from its record, lease, lock, cancel
//! request, attempts, timeline and events. Text outside the tables is shown
//! with its control characters made visible, as the tables' cells are.

use std::fmt::Write as _;

use leasehold_core::{visible, JobDetail, JobState, Millis};

use super::events::events_table;
use crate::table::Table;
use crate::time::{human, stamp};
use crate::wording::{
    holder_state, lock_ttl, opt, resolution, retry_flag, stale_end, verdict, yes_no, Moment,
};

/// `show`.
pub(crate) fn show(d: &JobDetail, timeline: &[Moment]) -> String {
    let j = &d.job;
    let mut out = String::new();
    let ago = |ms: Millis| format!("{} ({} ago)", stamp(ms), human(d.now - ms));
    let _ = writeln!(out, "job {}", j.id);
    if let Some(e) = &d.quarantine {
        out.push_str(&super::quarantine_section(e));
    }
    let mut out = visible(&out).into_owned();
    let mut head = Table::new(&["", ""]);
    head.row(vec!["queue".to_owned(), j.queue.clone()]);
    head.row(vec!["pipeline".to_owned(), j.pipeline.clone()]);
    head.painted_row(
        vec![
            "state".to_owned(),
            format!(
                "{} (attempt {}; automatic retries stop at attempt {})",
                j.state.as_str(),
                j.attempt,
                j.max_attempts
            ),
        ],
        &[(1, crate::style::of_state(j.state))],
    );
    let mut kv = |k: &str, v: String| head.row(vec![k.to_owned(), v]);
    if let Some(v) = verdict(j) {
        kv("verdict", v);
    }
    kv("input", j.input.to_string());
    kv("input key", opt(j.input_key.as_deref()));
    if let Some(p) = &j.previous {
        kv(
            "re-run of",
            format!("{p} (the input key's previous job; `leasehold show {p}`)"),
        );
    }
    kv("resource", opt(j.resource.as_deref()));
    if let Some(flow) = &d.flow {
        kv("flow control", flow.clone());
    }
    if let Some(why) = &d.waiting {
        kv("waiting", why.clone());
    }
    kv("priority", j.priority.to_string());
    kv("created", ago(j.created_at));
    kv("updated", ago(j.updated_at));
    if j.not_before > d.now {
        kv(
            "not before",
            format!(
                "{} (in {})",
                stamp(j.not_before),
                human(j.not_before - d.now)
            ),
        );
    }
    kv(
        "step",
        match (&j.step, &j.last_step) {
            (Some(s), Some(l)) => format!("{s} (last completed: {l})"),
            (Some(s), None) => s.clone(),
            (None, Some(l)) => format!("- (last completed: {l})"),
            (None, None) => "-".into(),
        },
    );
    kv("cleanup", d.verdicts.cleanup.explain().to_owned());
    if let Some(r) = d.verdicts.retryable {
        kv(
            "retryable",
            format!(
                "{}{}",
                yes_no(r),
                if d.verdicts.retries_exhausted {
                    "; automatic retries used up"
                } else {
                    ""
                }
            ),
        );
    }

    // the header row of this key/value table is empty: skip it
    let rendered = head.render("  ");
    out.extend(rendered.lines().skip(1).map(|l| format!("{l}\n")));
    // from here to the timeline: free text, made visible as one piece
    let free_text = out.len();

    let _ = writeln!(out, "\nlease");
    match &j.lease {
        Some(l) => {
            let _ = writeln!(
                out,
                "  held by {} (fence {}), deadline {} ({})",
                l.worker,
                l.fence,
                stamp(l.deadline),
                if l.deadline >= d.now {
                    format!("in {}", human(l.deadline - d.now))
                } else {
                    format!(
                        "EXPIRED {} ago: the worker is probably gone; the next sweep recovers it",
                        human(d.now - l.deadline)
                    )
                }
            );
        }
        None if j.state == JobState::Stale => {
            let _ = writeln!(
                out,
                "  none: expired while RUNNING on {} (fence {}), STALE since {}",
                opt(j.worker.as_deref()),
                j.fence.unwrap_or(0),
                j.stale_at.map_or("?".into(), ago)
            );
        }
        None => {
            let _ = writeln!(out, "  none");
        }
    }
    if let Some(l) = &d.lock {
        let holder = match &l.holder {
            None => "free".to_owned(),
            Some(h) if *h == j.id => format!("held by this job, {}", lock_ttl(l)),
            Some(h) => format!("held by job {h} ({}), {}", holder_state(l), lock_ttl(l)),
        };
        let _ = writeln!(
            out,
            "lock\n  {} {holder}; {} parked on it",
            l.resource,
            crate::wording::jobs(l.parked as usize)
        );
    }
    let _ = writeln!(out, "\ncancel");
    match &d.cancel {
        None => {
            let _ = writeln!(out, "  none requested");
        }
        Some(c) => {
            let _ = writeln!(
                out,
                "  requested by {} at {}: {:?}\n  {}",
                if c.request.by.is_empty() {
                    "?"
                } else {
                    &c.request.by
                },
                c.request.at.map_or("?".into(), stamp),
                c.request.reason,
                c.explain()
            );
        }
    }

    if !j.outputs.is_empty() {
        let _ = writeln!(out, "\noutputs");
        for (step, value) in &j.outputs {
            let _ = writeln!(out, "  {step}: {value}");
        }
    }

    let _ = writeln!(out, "\nattempts");
    for a in &j.attempts {
        let awaiting = a.n == j.attempt && j.state == JobState::Stale;
        let _ = writeln!(
            out,
            "  #{} {}{}  worker {}  fence {}  leased {}  started {}  ended {}{}",
            a.n,
            a.state,
            if awaiting { " (current)" } else { "" },
            if a.worker.is_empty() { "-" } else { &a.worker },
            a.fence,
            a.leased_at.map_or("-".into(), stamp),
            a.started_at.map_or("-".into(), stamp),
            stamp(a.ended_at),
            a.started_at.map_or(String::new(), |s| format!(
                " (ran {})",
                human(a.ended_at - s)
            ))
        );
        if !a.steps.is_empty() {
            let steps: Vec<String> = a
                .steps
                .iter()
                .map(|s| format!("{} at {}", s.step, stamp(s.at)))
                .collect();
            let _ = writeln!(out, "     steps completed: {}", steps.join(", "));
        }
        if let Some(e) = &a.error {
            let _ = writeln!(
                out,
                "     error: {}: {}  ({})",
                e.kind,
                e.message,
                retry_flag(e)
            );
        }
        if let Some(r) = a.reason.as_deref().filter(|r| !r.is_empty()) {
            let _ = writeln!(out, "     reason: {r}");
        }
        if let Some(end) = stale_end(a) {
            let _ = writeln!(out, "     went STALE: {end}");
        }
        if let Some(c) = &a.cancel {
            let _ = writeln!(out, "     cancel request: {:?} by {}", c.reason, c.by);
        }
        if a.cleanup_needed {
            let _ = writeln!(out, "     cleanup needed");
        }
        if let Some(r) = &a.resolution {
            let _ = writeln!(out, "     {}", resolution(r));
        }
    }
    if !j.attempts.iter().any(|a| a.n == j.attempt) {
        let _ = writeln!(
            out,
            "  #{} {} (current){}",
            j.attempt,
            j.state,
            j.worker.as_deref().map_or(String::new(), |w| format!(
                "  worker {w}  fence {}",
                j.fence.unwrap_or(0)
            ))
        );
        if !j.steps.is_empty() {
            let steps: Vec<String> = j
                .steps
                .iter()
                .map(|s| format!("{} at {}", s.step, stamp(s.at)))
                .collect();
            let _ = writeln!(out, "     steps completed: {}", steps.join(", "));
        }
    }

    let free = out.split_off(free_text);
    out.push_str(&visible(&free));

    let _ = writeln!(out, "\ntimeline");
    let mut t = Table::new(&["TIME", "ATTEMPT", "WHAT"]);
    for m in timeline {
        t.row(vec![stamp(m.at), m.attempt.to_string(), m.what.clone()]);
    }
    out.push_str(&t.render("  "));

    let _ = writeln!(out, "\nevents");
    if d.events.is_empty() {
        let _ = writeln!(out, "  none left in the stream");
    } else {
        out.push_str(&events_table(&d.events).render("  "));
    }
    out
}
