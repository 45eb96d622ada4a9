//! `bulk retry|cancel|resolve|delete`: one action on many jobs of a queue (see
//! `crate::bulk`): the count first (all of `--dry-run`), then the action in
//! batches with a count line on stderr after each, then what was done.

use leasehold_core::{Inspector, RetryMode};
use serde_json::json;

use super::print_json;
use crate::bulk::{self, BulkAction, Selection};
use crate::context::Ctx;
use crate::failure::{Failure, Outcome};
use crate::grammar::{job_id, BulkCommand};
use crate::progress::Progress;

/// `bulk ...`.
pub(crate) async fn bulk(ctx: &Ctx, cmd: BulkCommand) -> Outcome {
    let (queue, action, sel, reason, dry_run) = match cmd {
        BulkCommand::Retry {
            queue,
            pipeline,
            error_kind,
            since,
            until,
            from_start,
            include_permanent,
            reason,
            dry_run,
        } => {
            let mode = if from_start {
                RetryMode::FromStart
            } else {
                RetryMode::Resume
            };
            let sel = Selection {
                pipeline,
                error_kind,
                since: since.map(|t| t.as_millisecond()),
                until: until.map(|t| t.as_millisecond()),
                include_permanent,
                ..Default::default()
            };
            (queue, BulkAction::Retry(mode), sel, reason, dry_run)
        }
        BulkCommand::Cancel {
            queue,
            pipeline,
            from,
            to,
            reason,
            dry_run,
        } => {
            if pipeline.is_none() && from.is_none() && to.is_none() {
                return Err(Failure::Usage(
                    "bulk cancel needs --pipeline or a range (--from, --to)".into(),
                ));
            }
            let sel = Selection {
                pipeline,
                window_from: from.map(|t| t.to_string()),
                window_to: to.map(|t| t.to_string()),
                ..Default::default()
            };
            (
                queue,
                BulkAction::Cancel,
                sel,
                reason.unwrap_or_default(),
                dry_run,
            )
        }
        BulkCommand::Resolve {
            jobs,
            queue,
            pipeline,
            outcome,
            reason,
            dry_run,
        } => {
            let ids = jobs
                .iter()
                .map(|j| job_id(j))
                .collect::<Outcome<Vec<_>>>()?;
            let sel = Selection {
                pipeline,
                ids,
                ..Default::default()
            };
            (
                queue,
                BulkAction::Resolve(outcome.state()),
                sel,
                reason.unwrap_or_default(),
                dry_run,
            )
        }
        BulkCommand::Delete {
            jobs,
            queue,
            state,
            pipeline,
            since,
            until,
            reason,
            dry_run,
        } => {
            let ids = jobs
                .iter()
                .map(|j| job_id(j))
                .collect::<Outcome<Vec<_>>>()?;
            let sel = Selection {
                pipeline,
                since: since.map(|t| t.as_millisecond()),
                until: until.map(|t| t.as_millisecond()),
                ids,
                ..Default::default()
            };
            (
                queue,
                BulkAction::Delete(state.state()),
                sel,
                reason.unwrap_or_default(),
                dry_run,
            )
        }
    };
    // a dry run changes nothing, so it records no reason
    if !dry_run && action.needs_reason() && reason.trim().is_empty() {
        return Err(Failure::Usage("--reason must not be empty".into()));
    }
    let inspector: Inspector = ctx.inspector(&queue)?;
    ctx.known_queue(&queue).await?;
    let plan = bulk::select(&inspector, action, &sel)
        .await
        .map_err(|e| ctx.fail(e))?;
    if let (true, Some(p)) = (plan.jobs.is_empty(), &sel.pipeline) {
        ctx.known_pipeline(std::slice::from_ref(&inspector), p)
            .await?;
    }
    let n = plan.jobs.len();
    let state = action.source_state();
    // a retry says how many failed for good, and whether they are left out
    let apart = match (action, plan.permanent.len()) {
        (BulkAction::Retry(_), 0) => String::new(),
        (BulkAction::Retry(_), p) if sel.include_permanent => format!(
            " ({} retryable, {p} permanent: retried too, as --include-permanent asks)",
            plan.retryable
        ),
        (BulkAction::Retry(_), p) => format!(
            "; {} failed permanently (the step said retrying won't help) and {} left out: --include-permanent retries them too",
            crate::wording::jobs(p),
            if p == 1 { "is" } else { "are" }
        ),
        _ => String::new(),
    };
    let more = if plan.truncated {
        format!(
            " (more match: at most {} per run; run it again)",
            bulk::MAX_JOBS
        )
    } else {
        String::new()
    };
    if dry_run {
        if ctx.json {
            return print_json(&json!({"dry_run": true, "plan": plan}));
        }
        outln!(
            "bulk {} would touch {n} {state} {} of queue {queue}{apart}{more}",
            action.name(),
            if n == 1 { "job" } else { "jobs" }
        );
        for id in plan.jobs.iter().take(20) {
            outln!("  {id}");
        }
        if n > 20 {
            outln!("  … and {} more", n - 20);
        }
        return Ok(());
    }
    eprintln!(
        "bulk {}: {n} {state} {} of queue {queue}{apart}{more}",
        action.name(),
        if n == 1 { "job" } else { "jobs" }
    );
    let verb = match action {
        BulkAction::Retry(_) => "bulk retry:",
        BulkAction::Cancel => "bulk cancel:",
        BulkAction::Resolve(_) => "bulk resolve:",
        BulkAction::Delete(_) => "bulk delete:",
    };
    let progress = Progress::lines(ctx.json, n as u64, verb, "jobs");
    let report = bulk::run(
        &inspector,
        action,
        &plan,
        &ctx.by,
        &reason,
        |done, _total| {
            progress.update(done as u64, &format!("by {}", ctx.by));
        },
    )
    .await
    .map_err(|e| ctx.fail(e))?;
    progress.finish();
    if ctx.json {
        return print_json(&json!({
            "queue": queue, "action": action.name(), "matched": n, "done": report.done,
            "refused": report.refused.iter().map(|(id, why)| json!({"job": id, "why": why})).collect::<Vec<_>>(),
            "by": ctx.by,
        }));
    }
    outln!(
        "bulk {}: {} of {} done by {}",
        action.name(),
        report.done,
        crate::wording::jobs(n),
        ctx.by
    );
    for (id, why) in &report.refused {
        outln!("  refused {id}: {}", leasehold_core::visible(why));
    }
    Ok(())
}
