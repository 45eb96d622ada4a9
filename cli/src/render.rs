//! Human output: tables and reports. (`--json` prints the core types instead.)

use std::fmt::Write as _;

use leasehold_core::{
    Event, Job, JobDetail, JobPage, JobState, LockInfo, Millis, QueueStatus, Workers,
};
use serde::Serialize;

use crate::table::Table;
use crate::time::{human, stamp};

fn opt(s: Option<&str>) -> String {
    s.unwrap_or("-").to_owned()
}

fn ttl(lock: &LockInfo) -> String {
    match (lock.holder.as_ref(), lock.ttl_ms) {
        (None, _) => "free".into(),
        (Some(_), Some(-1)) => "persisted (STALE holder)".into(),
        (Some(_), Some(t)) if t >= 0 => human(t),
        (Some(_), _) => "?".into(),
    }
}

fn claims(lock: &LockInfo) -> String {
    if lock.claims.is_empty() {
        return "-".into();
    }
    lock.claims
        .iter()
        .map(|c| format!("{} ({})", c.job, c.state))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `status`.
pub fn status(all: &[QueueStatus]) -> String {
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
        t.row(vec![
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
        ]);
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
            let mut t = Table::new(&["RESOURCE", "HOLDER", "STATE", "TTL", "PARKED"]);
            for l in &s.locks {
                t.row(vec![
                    l.resource.clone(),
                    l.holder.as_ref().map_or("-".into(), ToString::to_string),
                    l.holder_state.map_or("gone".into(), |s| s.to_string()),
                    ttl(l),
                    l.parked.to_string(),
                ]);
            }
            out.push_str(&t.render("    "));
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
            let _ = writeln!(
                out,
                "    decide: leasehold retry JOB [--resume|--from-start] --reason ...  or  leasehold resolve JOB --as failed|cancelled|succeeded --reason ..."
            );
        }
    }
    out
}

/// `jobs`.
pub fn jobs(page: &JobPage, offset: usize) -> String {
    let mut out = String::new();
    if page.jobs.is_empty() {
        out.push_str("no jobs match\n");
    } else {
        let mut t = Table::new(&[
            "ID",
            "QUEUE",
            "PIPELINE",
            "STATE",
            "ATTEMPT",
            "STEP",
            "LAST DONE",
            "RESOURCE",
            "WORKER",
            "CREATED",
            "UPDATED",
        ]);
        for j in &page.jobs {
            let mut state = j.state.to_string();
            if j.cancel_reason.is_some() && !j.state.is_terminal() {
                state.push_str(" (cancel requested)");
            }
            t.row(vec![
                j.id.to_string(),
                j.queue.clone(),
                j.pipeline.clone(),
                state,
                j.attempt.to_string(),
                opt(j.step.as_deref()),
                opt(j.last_step.as_deref()),
                opt(j.resource.as_deref()),
                opt(j.worker.as_deref()),
                stamp(j.created_at),
                stamp(j.updated_at),
            ]);
        }
        out.push_str(&t.render(""));
        let _ = write!(out, "{} jobs (offset {offset})", page.jobs.len());
        if page.has_more {
            let _ = write!(
                out,
                "; more may match: --offset {}",
                offset + page.jobs.len()
            );
        }
        out.push('\n');
    }
    if page.truncated {
        let _ = writeln!(
            out,
            "note: stopped after reading {} index entries; narrow the filter (--queue, --state, --pipeline)",
            page.examined
        );
    }
    out
}

/// One moment of a job's step timeline.
#[derive(Debug, Clone, Serialize)]
pub struct Moment {
    /// When (ms).
    pub at: Millis,
    /// The attempt.
    pub attempt: u32,
    /// What happened.
    pub what: String,
}

/// The step timeline of every attempt, from the records and the current attempt's fields.
pub fn timeline(job: &Job) -> Vec<Moment> {
    let mut out = vec![Moment {
        at: job.created_at,
        attempt: 1,
        what: "enqueued".into(),
    }];
    let mut cancels = Vec::new();
    for a in &job.attempts {
        if let Some(at) = a.leased_at {
            out.push(Moment {
                at,
                attempt: a.n,
                what: format!("leased by {} (fence {})", a.worker, a.fence),
            });
        }
        if let Some(at) = a.started_at {
            out.push(Moment {
                at,
                attempt: a.n,
                what: "started".into(),
            });
        }
        for s in &a.steps {
            out.push(Moment {
                at: s.at,
                attempt: a.n,
                what: format!("step {} completed", s.step),
            });
        }
        if let Some(c) = &a.cancel {
            cancels.push((c.clone(), a.n));
        }
        let mut what = format!("ended {}", a.state);
        if let Some(e) = &a.error {
            let _ = write!(
                what,
                ": {}: {} (retryable: {})",
                e.kind,
                e.message,
                if e.retryable { "yes" } else { "no" }
            );
        } else if let Some(r) = a.reason.as_deref().filter(|r| !r.is_empty()) {
            let _ = write!(what, ": {r}");
        }
        if let Some(r) = &a.resolution {
            let _ = write!(what, " [operator {} by {}: {}]", r.action, r.by, r.reason);
        }
        out.push(Moment {
            at: a.ended_at,
            attempt: a.n,
            what,
        });
    }
    let recorded = job.attempts.iter().any(|a| a.n == job.attempt);
    if !recorded {
        if let Some(at) = job.leased_at {
            out.push(Moment {
                at,
                attempt: job.attempt,
                what: format!(
                    "leased by {} (fence {})",
                    opt(job.worker.as_deref()),
                    job.fence.unwrap_or(0)
                ),
            });
        }
        if let Some(at) = job.started_at {
            out.push(Moment {
                at,
                attempt: job.attempt,
                what: "started".into(),
            });
        }
        for s in &job.steps {
            out.push(Moment {
                at: s.at,
                attempt: job.attempt,
                what: format!("step {} completed", s.step),
            });
        }
        if let Some(at) = job.stale_at {
            out.push(Moment {
                at,
                attempt: job.attempt,
                what: format!(
                    "went STALE: lease expired while running step {}",
                    opt(job.step.as_deref())
                ),
            });
        }
    }
    if let Some(c) = &job.cancel {
        cancels.push((c.clone(), job.attempt));
    }
    cancels.dedup_by(|a, b| a.0 == b.0);
    for (c, n) in cancels {
        if let Some(at) = c.at {
            out.push(Moment {
                at,
                attempt: n,
                what: format!("cancel requested by {}: {}", c.by, c.reason),
            });
        }
    }
    out.sort_by_key(|m| m.at);
    out
}

/// What an operator should know about the job's state: whether a failure is
/// retryable, whether a retry is pending, whether a decision is needed.
pub(crate) fn verdict(j: &Job) -> Option<String> {
    let last_failed = j
        .attempts
        .iter()
        .rev()
        .find(|a| a.state == JobState::Failed);
    match j.state {
        JobState::Failed => {
            let a = j.attempts.iter().find(|a| a.n == j.attempt)?;
            Some(match &a.error {
                Some(e) if !e.retryable => format!(
                    "not retryable: the step said retrying won't help ({}); `leasehold retry` starts a new attempt anyway",
                    e.kind
                ),
                Some(_) => format!(
                    "retryable, but automatic retries are used up (attempt {} of {}); `leasehold retry` starts a new attempt",
                    j.attempt, j.max_attempts
                ),
                None => "failed without an error record; `leasehold retry` starts a new attempt".into(),
            })
        }
        JobState::Queued if j.attempt > 1 => match last_failed.and_then(|a| a.error.as_ref().map(|e| (a.n, e))) {
            Some((n, e)) if n + 1 == j.attempt => Some(format!(
                "automatic retry pending after attempt {n} failed ({}: {})",
                e.kind, e.message
            )),
            _ => Some(format!("attempt {} waiting (an operator retry)", j.attempt)),
        },
        JobState::Stale => Some(format!(
            "needs a decision: the worker died while running step {}; side effects may exist. \
             `leasehold retry {id} [--resume|--from-start]` or `leasehold resolve {id} --as failed|cancelled|succeeded --reason ...`",
            opt(j.step.as_deref()),
            id = j.id
        )),
        _ => None,
    }
}

/// `show`.
pub fn show(d: &JobDetail, timeline: &[Moment]) -> String {
    let j = &d.job;
    let mut out = String::new();
    let ago = |ms: Millis| format!("{} ({} ago)", stamp(ms), human(d.now - ms));
    let _ = writeln!(out, "job {}", j.id);
    let mut head = Table::new(&["", ""]);
    let mut kv = |k: &str, v: String| head.row(vec![k.to_owned(), v]);
    kv("queue", j.queue.clone());
    kv("pipeline", j.pipeline.clone());
    kv(
        "state",
        format!(
            "{} (attempt {}; automatic retries stop at attempt {})",
            j.state, j.attempt, j.max_attempts
        ),
    );
    if let Some(v) = verdict(j) {
        kv("verdict", v);
    }
    kv("input", j.input.to_string());
    kv("input key", opt(j.input_key.as_deref()));
    kv("resource", opt(j.resource.as_deref()));
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
    kv(
        "cleanup",
        if j.cleanup_needed {
            "needed (a step was cut mid-way)".into()
        } else if j.state == JobState::Stale {
            "probably needed: the worker died while a step was running (check the sink)".into()
        } else {
            "not needed".into()
        },
    );
    // the header row of this key/value table is empty: skip it
    let rendered = head.render("  ");
    out.extend(rendered.lines().skip(1).map(|l| format!("{l}\n")));

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
            Some(h) if *h == j.id => format!("held by this job, {}", ttl(l)),
            Some(h) => format!(
                "held by job {h} ({}), {}",
                l.holder_state.map_or("gone".into(), |s| s.to_string()),
                ttl(l)
            ),
        };
        let _ = writeln!(
            out,
            "lock\n  {} {holder}; {} jobs parked on it",
            l.resource, l.parked
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
        let _ = writeln!(
            out,
            "  #{} {}  worker {}  fence {}  leased {}  started {}  ended {}{}",
            a.n,
            a.state,
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
                "     error: {}: {}  (retryable: {})",
                e.kind,
                e.message,
                if e.retryable { "yes" } else { "no" }
            );
        }
        if let Some(r) = a.reason.as_deref().filter(|r| !r.is_empty()) {
            let _ = writeln!(out, "     reason: {r}");
        }
        if let Some(c) = &a.cancel {
            let _ = writeln!(out, "     cancel request: {:?} by {}", c.reason, c.by);
        }
        if a.cleanup_needed {
            let _ = writeln!(out, "     cleanup needed");
        }
        if let Some(r) = &a.resolution {
            let _ = writeln!(out, "     operator {} by {}: {}", r.action, r.by, r.reason);
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

fn events_table(events: &[Event]) -> Table {
    let mut t = Table::new(&[
        "TIME", "QUEUE", "JOB", "ATTEMPT", "OP", "MOVE", "BY", "REASON",
    ]);
    for e in events {
        t.row(vec![
            stamp(e.at),
            e.queue.clone(),
            e.job.to_string(),
            e.attempt.to_string(),
            e.op.clone(),
            format!(
                "{}->{}",
                e.from.map_or(String::new(), |s| s.to_string()),
                e.to
            ),
            e.by.clone(),
            e.reason.clone(),
        ]);
    }
    t
}

/// `events`.
pub fn events(events: &[Event]) -> String {
    events_table(events).render("")
}

/// One event on one line, for `events --follow`.
pub fn event_line(e: &Event) -> String {
    let mv = format!(
        "{}->{}",
        e.from.map_or(String::new(), |s| s.to_string()),
        e.to
    );
    let mut line = format!(
        "{}  {}  {}  #{}  {:<8} {:<20}",
        stamp(e.at),
        e.queue,
        e.job,
        e.attempt,
        e.op,
        mv
    );
    if !e.by.is_empty() {
        let _ = write!(line, "  by {}", e.by);
    }
    if !e.reason.is_empty() {
        let _ = write!(line, "  {}", e.reason.replace('\n', " "));
    }
    line.trim_end().to_owned()
}

/// `locks`.
pub fn locks(rows: &[(String, LockInfo)]) -> String {
    if rows.is_empty() {
        return "no locks held and no live job claims a resource\n".into();
    }
    let mut out = String::new();
    let mut t = Table::new(&[
        "QUEUE",
        "RESOURCE",
        "HOLDER",
        "STATE",
        "TTL",
        "PARKED",
        "LIVE JOBS ON IT",
    ]);
    for (q, l) in rows {
        t.row(vec![
            q.clone(),
            l.resource.clone(),
            l.holder.as_ref().map_or("-".into(), ToString::to_string),
            l.holder.as_ref().map_or("-".into(), |_| {
                l.holder_state.map_or("gone".into(), |s| s.to_string())
            }),
            ttl(l),
            l.parked.to_string(),
            claims(l),
        ]);
    }
    out.push_str(&t.render(""));
    for (q, l) in rows.iter().filter(|(_, l)| l.claims.len() > 1) {
        let _ = writeln!(
            out,
            "warning: resource {} in queue {q} is claimed by {} live jobs ({}): it may be processed twice; sinks can reject the lower fence",
            l.resource,
            l.claims.len(),
            claims(l)
        );
    }
    out
}

/// `workers`.
pub fn workers(rows: &[(String, Workers)]) -> String {
    let mut out = String::new();
    let mut t = Table::new(&[
        "QUEUE",
        "WORKER",
        "PID",
        "PIPELINES",
        "BUSY",
        "STARTED",
        "EXPIRES IN",
        "STATUS",
    ]);
    for (q, w) in rows {
        for info in &w.live {
            t.row(vec![
                q.clone(),
                info.id.clone(),
                info.pid.map_or("-".into(), |p| p.to_string()),
                if info.pipelines.is_empty() {
                    "-".into()
                } else {
                    info.pipelines.join(",")
                },
                match (info.active, info.concurrency) {
                    (Some(a), Some(c)) => format!("{a}/{c}"),
                    (Some(a), None) => a.to_string(),
                    _ => "-".into(),
                },
                info.started_at.map_or("-".into(), stamp),
                info.expires_in_ms.map_or("-".into(), human),
                if info.shutting_down {
                    "shutting down".into()
                } else {
                    "live".into()
                },
            ]);
        }
    }
    if t.is_empty() {
        out.push_str("no live workers\n");
    } else {
        out.push_str(&t.render(""));
    }
    for (q, w) in rows.iter().filter(|(_, w)| !w.pruned.is_empty()) {
        let _ = writeln!(
            out,
            "{q}: pruned expired registrations: {}",
            w.pruned.join(", ")
        );
    }
    out
}
