//! Upkeep: `sweep` recovers expired leases now, `purge` deletes terminal jobs
//! beyond the retention policy.

use std::collections::BTreeMap;

use serde_json::json;

use super::{one, print_json};
use crate::context::Ctx;
use crate::failure::Outcome;
use crate::progress::Progress;
use crate::time::human_duration;

/// `sweep`.
pub(crate) async fn sweep(
    ctx: &Ctx,
    queue: Option<String>,
    dry_run: bool,
    batch: usize,
) -> Outcome {
    let mut reports = Vec::new();
    for name in ctx.queues(&one(queue)).await? {
        let q = ctx.queue(&name)?;
        let r = if dry_run {
            q.sweep_dry_run(batch).await
        } else {
            q.sweep(batch).await
        }
        .map_err(|e| ctx.fail(e))?;
        reports.push(json!({
            "queue": name,
            "dry_run": dry_run,
            "requeued": r.requeued,
            "cancelled": r.cancelled,
            "stale": r.stale,
            "unparked": r.unparked,
            "purged": r.purged,
            "moves": r.moves.iter().map(|m| json!({"job": m.job, "from": m.from, "to": m.to})).collect::<Vec<_>>(),
        }));
    }
    if ctx.json {
        return print_json(&reports);
    }
    if reports.is_empty() {
        outln!("no queues found under prefix {:?}", ctx.config.prefix);
    }
    for r in &reports {
        outln!(
            "{}{}: {} requeued, {} cancelled, {} STALE, {} unparked, {}",
            r["queue"].as_str().unwrap_or(""),
            if dry_run {
                " (dry run: nothing changed)"
            } else {
                ""
            },
            r["requeued"],
            r["cancelled"],
            r["stale"],
            r["unparked"],
            if dry_run {
                "retention not evaluated".to_owned()
            } else {
                format!("{} purged", r["purged"])
            }
        );
        for m in r["moves"].as_array().into_iter().flatten() {
            outln!(
                "  {}  {} -> {}",
                m["job"].as_str().unwrap_or(""),
                m["from"].as_str().unwrap_or(""),
                m["to"].as_str().unwrap_or("")
            );
        }
    }
    Ok(())
}

/// Most deletions per `purge` script call.
const PURGE_CHUNK: usize = 1_000;

/// `purge`.
pub(crate) async fn purge(ctx: &Ctx, queue: Option<String>, batch: usize) -> Outcome {
    let mut out = BTreeMap::new();
    let queues = ctx.queues(&one(queue)).await?;
    let progress = Progress::new(ctx.json, queues.len() as u64);
    for (i, name) in queues.into_iter().enumerate() {
        let q = ctx.queue(&name)?;
        // in calls of at most PURGE_CHUNK deletions: each script stays short,
        // and the bar moves while a large queue is purged
        let mut n = 0u64;
        while (n as usize) < batch {
            let want = (batch - n as usize).min(PURGE_CHUNK);
            let deleted = q.purge(want).await.map_err(|e| ctx.fail(e))?;
            n += deleted;
            progress.update(i as u64, &format!("{name}: {n} purged"));
            if (deleted as usize) < want {
                break;
            }
        }
        progress.update(i as u64 + 1, &format!("{name}: {n} purged"));
        out.insert(name, n);
    }
    progress.finish();
    let retention = &ctx.config.retention;
    if ctx.json {
        let rows: Vec<_> = out
            .iter()
            .map(|(q, n)| json!({"queue": q, "purged": n, "keep_count": retention.keep_count, "keep_age_ms": retention.keep_age.as_millis() as u64}))
            .collect();
        return print_json(&rows);
    }
    if out.is_empty() {
        outln!("no queues found under prefix {:?}", ctx.config.prefix);
    }
    for (q, n) in &out {
        outln!(
            "{q}: purged {n} terminal {} beyond retention (keep {}, at most {} old)",
            if *n == 1 { "job" } else { "jobs" },
            crate::wording::jobs(usize::try_from(retention.keep_count).unwrap_or(usize::MAX)),
            human_duration(retention.keep_age)
        );
    }
    Ok(())
}
