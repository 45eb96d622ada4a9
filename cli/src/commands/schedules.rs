//! `schedules`: list the schedules workers registered (next due, last window,
//! last job and its state, paused, counts), show one's recent ticks, pause or
//! resume one, and trigger one window now. Every action goes through a script
//! (`schedule_state`, `schedule_tick` in trigger mode) and is recorded in the
//! schedule's ticks stream with who acted.

use leasehold_core::queue::ScheduleInfo;
use leasehold_core::Queue;
use serde_json::json;

use super::{one, out, print_json};
use crate::context::Ctx;
use crate::failure::{Failure, Outcome};
use crate::time;

/// The queue holding schedule `name` (the one given, or the first found).
async fn locate(ctx: &Ctx, name: &str, queue: Option<&str>) -> Outcome<(Queue, ScheduleInfo)> {
    let names = ctx.queues(&one(queue.map(str::to_owned))).await?;
    let mut known = Vec::new();
    for q in names {
        let q = ctx.queue(&q)?;
        if let Some(info) = q.schedule_info(name).await.map_err(|e| ctx.fail(e))? {
            return Ok((q, info));
        }
        known.extend(q.schedule_names().await.map_err(|e| ctx.fail(e))?);
    }
    known.sort();
    known.dedup();
    Err(Failure::UnknownJob(crate::names::unknown(
        "schedule",
        name,
        &queue.map_or_else(|| "in any queue".to_owned(), |q| format!("in queue {q}")),
        &known,
    )))
}

fn cadence(info: &ScheduleInfo) -> String {
    match &info.definition {
        Some(d) => match (&d.cron, d.every_ms) {
            (Some(c), _) => format!("cron {c:?} {}", d.zone),
            (None, Some(ms)) => format!("every {}", time::human(ms as i64)),
            _ => "?".into(),
        },
        None => format!("unreadable: {}", info.problem.clone().unwrap_or_default()),
    }
}

/// `schedules` (list).
pub(crate) async fn list(ctx: &Ctx, queue: Option<String>) -> Outcome {
    let names = ctx.queues(&one(queue)).await?;
    let mut rows = Vec::new();
    for q in names {
        let q = ctx.queue(&q)?;
        for info in q.schedule_infos().await.map_err(|e| ctx.fail(e))? {
            rows.push((q.name().to_owned(), info));
        }
    }
    if ctx.json {
        let list: Vec<_> = rows
            .iter()
            .map(|(q, i)| json!({ "queue": q, "schedule": i }))
            .collect();
        return print_json(&list);
    }
    if rows.is_empty() {
        return out("no schedules (a worker serving a scheduled pipeline registers its schedules on start)\n");
    }
    let mut text = String::new();
    for (q, i) in &rows {
        let last = match i.last_window {
            Some((s, e)) => format!("{} .. {}", time::stamp(s), time::stamp(e)),
            None => "-".into(),
        };
        let job = match (&i.last_job, i.last_job_state) {
            (Some(j), Some(s)) => format!("{j} {s}"),
            (Some(j), None) => format!("{j} (deleted by retention)"),
            _ => "-".into(),
        };
        let paused = if i.paused {
            format!(
                "PAUSED{}",
                i.paused_by
                    .as_ref()
                    .map(|b| format!(" by {b}"))
                    .unwrap_or_default()
            )
        } else if let Some(f) = &i.failing {
            format!(
                "FAILING ({} failed ticks since {}; last error: {})",
                f.failures,
                f.since_ms.map_or("-".into(), time::stamp),
                f.last_error
            )
        } else {
            "active".into()
        };
        let next = match i.next_due_ms {
            Some(ms) => time::stamp(ms),
            None => "ended".into(),
        };
        let c = &i.counts;
        text.push_str(&format!(
            "{name} (pipeline {pipeline}, queue {q}) {cadence}, {paused}\n  next due      {next}\n  last window   {last}\n  last job      {job}\n  ticks {t}: enqueued {en}, caught up {cu}, skipped {sk}, missed {mi}, delayed {de}, triggered {tr}{lag}\n",
            name = i.name,
            pipeline = i.pipeline,
            cadence = cadence(i),
            t = c.get("ticks").unwrap_or(&0),
            en = c.get("enqueued").unwrap_or(&0),
            cu = c.get("caught_up").unwrap_or(&0),
            sk = c.get("skipped").unwrap_or(&0),
            mi = c.get("missed").unwrap_or(&0),
            de = c.get("delayed").unwrap_or(&0),
            tr = c.get("triggered").unwrap_or(&0),
            lag = i
                .last_lag_ms
                .map(|l| format!("; last lag {}", time::human(l)))
                .unwrap_or_default(),
        ));
    }
    out(&leasehold_core::visible(&text))
}

/// `schedules ticks NAME`: the latest tick records.
pub(crate) async fn ticks(ctx: &Ctx, name: &str, queue: Option<String>, limit: usize) -> Outcome {
    let (q, _) = locate(ctx, name, queue.as_deref()).await?;
    let ticks = q
        .schedule_ticks(name, limit)
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.json {
        return print_json(&ticks);
    }
    let mut text = String::new();
    for t in ticks.iter().rev() {
        let window = t
            .window
            .map(|(s, e)| format!(" [{} .. {})", time::stamp(s), time::stamp(e)))
            .unwrap_or_default();
        let job = t
            .job
            .as_ref()
            .map(|j| format!(" job {j}"))
            .unwrap_or_default();
        let lag = t
            .lag_ms
            .map(|l| format!(" lag {}", time::human(l)))
            .unwrap_or_default();
        text.push_str(&format!(
            "{} {}{window}{job}{lag} by {} {}\n",
            time::stamp(t.at),
            t.outcome,
            t.by,
            t.reason
        ));
    }
    out(&leasehold_core::visible(&text))
}

/// `schedules pause|resume NAME`.
pub(crate) async fn set_paused(
    ctx: &Ctx,
    name: &str,
    queue: Option<String>,
    pause: bool,
    reason: &str,
) -> Outcome {
    let (q, _) = locate(ctx, name, queue.as_deref()).await?;
    let was = q
        .set_schedule_paused(name, pause, &ctx.by, reason)
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.json {
        return print_json(
            &json!({ "queue": q.name(), "schedule": name, "paused": pause, "was_paused": was }),
        );
    }
    let what = match (pause, was) {
        (true, true) => "was already paused",
        (true, false) => "paused: its ticks are recorded as skipped until it is resumed",
        (false, false) => "was not paused",
        (false, true) => {
            "resumed: windows due while it was paused stay skipped (trigger or backfill them)"
        }
    };
    out(&format!("schedule {name} (queue {}) {what}\n", q.name()))
}

/// `schedules trigger NAME [--window START] [--rerun]`.
pub(crate) async fn trigger(
    ctx: &Ctx,
    name: &str,
    queue: Option<String>,
    window: Option<String>,
    rerun: bool,
) -> Outcome {
    let (q, _) = locate(ctx, name, queue.as_deref()).await?;
    let start = window
        .as_deref()
        .map(time::parse_instant)
        .transpose()
        .map_err(Failure::Usage)?;
    let (w, t) = q
        .trigger_registered(name, start, rerun, &ctx.by)
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.json {
        return print_json(&json!({
            "queue": q.name(), "schedule": name,
            "window": { "start": w.start.to_string(), "end": w.end.to_string() },
            "job": t.job, "status": t.status,
        }));
    }
    let job = t.job.map(|j| j.to_string()).unwrap_or_default();
    let said = match t.status.map(|s| s.as_str()) {
        Some("created") | Some("rerun") => format!("created job {job}"),
        Some("existing") => {
            format!("job {job} of this window is not finished yet; nothing created")
        }
        Some("succeeded") => {
            format!("job {job} of this window already SUCCEEDED; nothing created (use --rerun)")
        }
        _ => "nothing enqueued".into(),
    };
    out(&format!(
        "schedule {name} window {} .. {}: {said} (queue {})\n",
        w.start,
        w.end,
        q.name()
    ))
}

#[cfg(test)]
mod tests {
    use leasehold_core::jiff::Timestamp;
    use leasehold_core::Schedule;

    #[test]
    fn trigger_windows_are_real_windows() {
        let s = Schedule::every("h", std::time::Duration::from_secs(3600)).unwrap();
        let now: Timestamp = "2026-05-06T10:20:00Z".parse().unwrap();
        let w = s.window_at(None, now).unwrap();
        assert_eq!(w.start.to_string(), "2026-05-06T09:00:00Z");
        assert_eq!(w.end.to_string(), "2026-05-06T10:00:00Z");
        let w = s
            .window_at(Some("2026-05-01T03:00:00Z".parse().unwrap()), now)
            .unwrap();
        assert_eq!(w.end.to_string(), "2026-05-01T04:00:00Z");
        assert!(s
            .window_at(Some("2026-05-01T03:30:00Z".parse().unwrap()), now)
            .is_err());
    }
}
