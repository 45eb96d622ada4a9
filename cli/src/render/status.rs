//! `status`: per queue, counts per state, what waits, workers, locks held and
//! the STALE jobs needing a decision.

use std::fmt::Write as _;

use anstyle::Style;
use leasehold_core::{visible, visible_line, QueueStatus};

use crate::table::Table;
use crate::time::{human, stamp};
use crate::wording::{holder_state, lock_ttl, opt};

/// `status`.
pub(crate) fn status(all: &[QueueStatus]) -> String {
    let mut out = String::new();
    let mut t = Table::new(&[
        "QUEUE",
        "QUEUED",
        "LEASED",
        "RUNNING",
        "STALE",
        "SUCCEEDED",
        "FAILED",
        "CANCELLED",
        "OLDEST WAITING",
        "WORKERS",
        "LOCKS",
    ]);
    let mut sampled = false;
    for s in all {
        let c = &s.counts;
        let partial = c.terminal_sampled < c.terminal;
        sampled |= partial;
        let mark = if partial { "*" } else { "" };
        let leased = if c.leases_unclassified > 0 {
            format!("{} (+{} unclassified)", c.leased, c.leases_unclassified)
        } else {
            c.leased.to_string()
        };
        let paint: Vec<(usize, Style)> = [(4, c.stale), (6, c.failed)]
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(column, _)| (column, crate::style::WARN))
            .collect();
        t.painted_row(
            vec![
                s.queue.clone(),
                c.queued.to_string(),
                leased,
                c.running.to_string(),
                c.stale.to_string(),
                format!("{}{mark}", c.succeeded),
                format!("{}{mark}", c.failed),
                format!("{}{mark}", c.cancelled),
                s.oldest_waiting
                    .as_ref()
                    .map_or("-".into(), |o| human(o.age_ms)),
                s.workers.len().to_string(),
                s.locks.len().to_string(),
            ],
            &paint,
        );
    }
    out.push_str(&t.render(""));
    if sampled {
        for s in all
            .iter()
            .filter(|s| s.counts.terminal_sampled < s.counts.terminal)
        {
            let _ = writeln!(
                out,
                "* {}: among the newest {} of {} terminal jobs kept",
                s.queue, s.counts.terminal_sampled, s.counts.terminal
            );
        }
    }
    for s in all {
        let _ = writeln!(out, "\n{} (Redis time {})", s.queue, stamp(s.now));
        let waiting: Vec<String> = s
            .pipelines
            .iter()
            .map(|p| {
                let mut text = format!("{}: {} ready", p.pipeline, p.ready);
                if p.delayed > 0 {
                    let _ = write!(text, ", {} delayed ({} due)", p.delayed, p.due);
                }
                text
            })
            .chain((s.parked > 0).then(|| format!("{} parked on locked resources", s.parked)))
            .chain(s.gates.iter().map(|g| {
                let what = match g.kind.as_str() {
                    "slots" => format!("resource {} at limit {}/{}", g.name, g.held, g.limit),
                    "running" => {
                        format!("pipeline {} at max_running {}/{}", g.name, g.held, g.limit)
                    }
                    _ => format!("{} {}/{}", g.gate, g.held, g.limit),
                };
                format!("{} waiting: {what}", g.waiting)
            }))
            .collect();
        let _ = writeln!(
            out,
            "  waiting: {}",
            if waiting.is_empty() {
                "nothing".to_owned()
            } else {
                waiting.join("; ")
            }
        );
        for p in &s.pauses {
            let what = match &p.scope {
                leasehold_core::PauseScope::Queue => "the whole queue".to_owned(),
                leasehold_core::PauseScope::Pipeline(name) => format!("pipeline {name}"),
            };
            let _ = writeln!(
                out,
                "  PAUSED: {what} since {} ({} ago) by {}{}",
                stamp(p.since),
                human(s.now - p.since),
                visible(&p.by),
                if p.reason.is_empty() {
                    String::new()
                } else {
                    format!(": {}", visible(&p.reason))
                }
            );
        }
        if let Some(o) = &s.oldest_waiting {
            let _ = writeln!(
                out,
                "  oldest waiting: job {} ({}), created {} ({} ago)",
                o.job,
                o.pipeline,
                stamp(o.created_at),
                human(o.age_ms)
            );
        }
        if s.expired_leases > 0 {
            let _ = writeln!(
                out,
                "  expired leases not swept yet: {} (their workers are probably gone; `leasehold sweep` recovers them)",
                s.expired_leases
            );
        }
        if s.cleanups_waiting + s.cleanups_claimed > 0 {
            let _ = writeln!(
                out,
                "  cleanup hooks of resolved STALE jobs: {} waiting for a worker serving their pipeline, {} claimed",
                s.cleanups_waiting, s.cleanups_claimed
            );
        }
        let workers: Vec<String> = s
            .workers
            .iter()
            .map(|w| {
                let mut text = w.id.clone();
                if let (Some(a), Some(c)) = (w.active, w.concurrency) {
                    let _ = write!(text, " ({a}/{c} busy)");
                }
                if w.shutting_down {
                    text.push_str(" (shutting down)");
                }
                text
            })
            .collect();
        let _ = writeln!(
            out,
            "  workers: {}",
            if workers.is_empty() {
                "none live".to_owned()
            } else {
                workers.join(", ")
            }
        );
        for (pipeline, versions) in s.mixed_versions() {
            let list: Vec<String> = versions
                .iter()
                .map(|(v, ids)| format!("{v} on {}", ids.join(", ")))
                .collect();
            let _ = writeln!(
                out,
                "  WARNING: pipeline {pipeline} runs in {} versions at once (different builds): {}",
                versions.len(),
                visible(&list.join("; "))
            );
        }
        if !s.pruned_workers.is_empty() {
            let _ = writeln!(
                out,
                "  pruned expired worker registrations: {}",
                s.pruned_workers.join(", ")
            );
        }
        if s.locks.is_empty() {
            let _ = writeln!(out, "  locks held: none");
        } else {
            let _ = writeln!(out, "  locks held:");
            let mut t = Table::new(&["RESOURCE", "HOLDER", "STATE", "TIME LEFT", "PARKED"]);
            for l in &s.locks {
                t.row(vec![
                    l.resource.clone(),
                    l.holder.as_ref().map_or("-".into(), ToString::to_string),
                    holder_state(l).to_owned(),
                    lock_ttl(l),
                    l.parked.to_string(),
                ]);
            }
            out.push_str(&t.render("    "));
        }
        for f in &s.failing_schedules {
            let _ = writeln!(
                out,
                "  schedule {} FAILING: {} failed ticks since {} (`leasehold schedules`); last error: {}",
                visible_line(&f.name),
                f.failing.failures,
                f.failing
                    .since_ms
                    .map_or("-".into(), crate::time::stamp),
                visible_line(&f.failing.last_error)
            );
        }
        if s.counts.quarantined > 0 {
            let _ = writeln!(
                out,
                "  quarantined (unreadable) jobs: {} (`leasehold quarantine list`; the oldest below)",
                s.counts.quarantined
            );
            for e in &s.quarantined {
                let line = format!(
                    "    {} field {}: {} (found in {})",
                    e.id, e.field, e.reason, e.from_index
                );
                let _ = writeln!(out, "{}", visible(&line));
            }
        }
        if s.counts.unreadable > 0 {
            let _ = writeln!(
                out,
                "  unreadable, not counted in any state: {}",
                s.counts.unreadable
            );
            out.push_str(&super::unreadable(&s.unreadable, "    "));
        }
        if s.counts.stale == 0 {
            let _ = writeln!(out, "  STALE jobs needing a decision: none");
        } else {
            let _ = writeln!(
                out,
                "  STALE jobs needing a decision: {}{}",
                s.counts.stale,
                if (s.stale.len() as u64) < s.counts.stale {
                    format!(
                        " (the {} waiting longest below; `leasehold jobs --state stale` lists all)",
                        s.stale.len()
                    )
                } else {
                    String::new()
                }
            );
            let mut t = Table::new(&[
                "JOB",
                "PIPELINE",
                "STEP CUT OFF",
                "LAST DONE",
                "WORKER",
                "STALE FOR",
                "LOCK",
            ]);
            for j in &s.stale {
                let lock = match (&j.job.resource, j.holds_lock) {
                    (Some(r), Some(true)) => format!("holds {r}"),
                    (Some(r), _) => format!("{r} not held"),
                    (None, _) => "-".into(),
                };
                t.row(vec![
                    j.job.id.to_string(),
                    j.job.pipeline.clone(),
                    opt(j.job.step.as_deref()),
                    opt(j.job.last_step.as_deref()),
                    opt(j.job.worker.as_deref()),
                    human(s.now - j.stale_at),
                    lock,
                ]);
            }
            out.push_str(&t.render("    "));
            for j in s.stale.iter().filter(|j| !j.stalls.is_empty()) {
                let mut held: Vec<String> = Vec::new();
                if let (Some(r), Some(true)) = (&j.job.resource, j.holds_lock) {
                    held.push(format!("lock {r}"));
                }
                held.extend(j.holds_slots.iter().map(|g| format!("slot {g}")));
                let stalled: Vec<String> = j
                    .stalls
                    .iter()
                    .map(|(p, n)| format!("{p} ({n} waiting)"))
                    .collect();
                let _ = writeln!(
                    out,
                    "    {}",
                    crate::style::warn(&visible(&format!(
                        "STALE job {} stalls pipeline {}: it holds {} (STALE for {})",
                        j.job.id,
                        stalled.join(", "),
                        held.join(", "),
                        human(s.now - j.stale_at)
                    )))
                );
            }
            let _ = writeln!(
                out,
                "    decide: leasehold retry JOB [--resume|--from-start] --reason ...  or  leasehold resolve JOB --as failed|cancelled|succeeded --reason ..."
            );
        }
    }
    out
}
