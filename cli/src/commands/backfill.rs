//! `backfill PIPELINE --from T --to T`: the windows of a scheduled pipeline
//! between two instants, enqueued as its schedule's ticks would have (the
//! same input, window and input key), so a window the schedule already ran is
//! not enqueued again (`--rerun` runs a succeeded one again).

use leasehold_core::{Client, EnqueueOptions, JsonJob, Schedule, Terms};
use serde_json::json;

use super::enqueue::{enqueue_windows, WindowsEnqueued};
use super::print_json;
use crate::context::Ctx;
use crate::failure::{Failure, Outcome};
use crate::grammar::BackfillArgs;
use crate::input_arg::Source;

/// The most windows one backfill enqueues.
const MAX_WINDOWS: usize = 100_000;

/// `backfill`.
pub(crate) async fn backfill(ctx: &Ctx, args: BackfillArgs) -> Outcome {
    if args.from >= args.to {
        return Err(Failure::Usage(format!(
            "--from {} must be before --to {}",
            args.from, args.to
        )));
    }
    let client = Client::from_queue(ctx.base.clone());
    let (q, contract) = client
        .contract(&args.pipeline, args.queue.as_deref())
        .await
        .map_err(|e| ctx.fail(e))?;
    // the pipeline's schedules, as its workers registered them
    let mut mine = Vec::new();
    for name in q.schedule_names().await.map_err(|e| ctx.fail(e))? {
        if let Some(info) = q.schedule_info(&name).await.map_err(|e| ctx.fail(e))? {
            if info.pipeline == args.pipeline {
                mine.push(info);
            }
        }
    }
    let names = || {
        mine.iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let info = match (&args.schedule, mine.len()) {
        (_, 0) => {
            return Err(Failure::Usage(format!(
                "pipeline {} has no registered schedule in queue {} (a worker serving it registers them on start); `leasehold enqueue --input-template` backfills any pipeline",
                args.pipeline,
                q.name()
            )))
        }
        (Some(name), _) => mine.iter().find(|i| &i.name == name).ok_or_else(|| {
            Failure::Usage(format!(
                "pipeline {} has no schedule {name:?}: it has {}",
                args.pipeline,
                names()
            ))
        })?,
        (None, 1) => &mine[0],
        (None, _) => {
            return Err(Failure::Usage(format!(
                "pipeline {} has several schedules ({}): name one with --schedule",
                args.pipeline,
                names()
            )))
        }
    };
    let definition = info.definition.as_ref().ok_or_else(|| {
        Failure::Other(format!(
            "schedule {} cannot be read: {}",
            info.name,
            info.problem.clone().unwrap_or_default()
        ))
    })?;
    // a backfill may reach before the schedule's start and past its end: the
    // same cadence without them (an interval keeps its anchor, moved back a
    // whole number of intervals)
    let mut definition = definition.clone();
    definition.end_ms = None;
    if let Some(start) = definition.start_ms {
        let from = args.from.as_millisecond();
        match definition.every_ms.and_then(|ms| i64::try_from(ms).ok()) {
            Some(step) if step > 0 && from < start => {
                definition.start_ms = Some(start - (start - from + step - 1) / step * step);
            }
            Some(_) => {}
            None => definition.start_ms = None,
        }
    }
    let schedule = Schedule::from_definition(&definition)
        .map_err(|e| Failure::Other(format!("schedule {}: {e}", info.name)))?;
    // the ticks in [from, to): each a window [tick, next tick), ended by `to`
    let mut windows = Vec::new();
    let mut tick = match schedule.latest_at_or_before(args.from) {
        Some(t) if t == args.from => Some(t),
        _ => schedule.next_after(args.from),
    };
    while let Some(start) = tick {
        let Some(w) = schedule.window_from(start) else {
            break;
        };
        if w.end > args.to {
            break;
        }
        if windows.len() == MAX_WINDOWS {
            return Err(Failure::Usage(format!(
                "more than {MAX_WINDOWS} windows from {} to {}: backfill a shorter range at a time",
                args.from, args.to
            )));
        }
        tick = Some(w.end);
        windows.push(w);
    }
    if windows.is_empty() {
        return Err(Failure::Usage(format!(
            "no whole window of schedule {} lies between {} and {}",
            info.name, args.from, args.to
        )));
    }
    let keyed = contract.spec().input_key_template.is_none();
    let asked: Vec<JsonJob> = windows
        .iter()
        .map(|w| {
            let mut o = EnqueueOptions::new();
            o.queue = Some(q.name().to_owned());
            o.rerun = args.rerun;
            // the schedule's own input key when the pipeline computes none
            o.input_key = keyed.then(|| schedule.input_key_for(w));
            JsonJob::new(schedule.input_for(w).to_string(), o)
        })
        .collect();
    let labels: Vec<(String, String)> = windows
        .iter()
        .map(|w| (w.start.to_string(), w.end.to_string()))
        .collect();
    let WindowsEnqueued {
        counts,
        listed,
        input_checked,
    } = enqueue_windows(
        ctx,
        &q,
        Terms::Published(&contract),
        &labels,
        asked,
        &Source::Argument,
    )
    .await?;
    if ctx.json {
        return print_json(&json!({
            "queue": q.name(),
            "pipeline": args.pipeline,
            "schedule": info.name,
            "windows": listed.len(),
            "created": counts.created,
            "rerun": counts.rerun,
            "existing": counts.running,
            "succeeded": counts.succeeded,
            "input_checked": input_checked,
            "jobs": listed,
        }));
    }
    outln!(
        "{} windows of schedule {} ({}) from {} to {} in queue {}: {}",
        listed.len(),
        info.name,
        args.pipeline,
        args.from,
        args.to,
        q.name(),
        counts.line()
    );
    Ok(())
}
