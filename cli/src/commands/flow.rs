//! `pause` and `resume`: stop leasing a pipeline's (or a whole queue's) jobs
//! and start again. Jobs already leased or running go on; the pause is
//! recorded (who, since when, why) and shown by `status`, and both are events.

use leasehold_core::{PauseChange, PauseScope};
use serde_json::json;

use super::print_json;
use crate::context::Ctx;
use crate::failure::Outcome;

/// `pause` (`resume` when `resume`).
pub(crate) async fn pause(
    ctx: &Ctx,
    queue: &str,
    pipeline: Option<&str>,
    reason: &str,
    resume: bool,
) -> Outcome {
    let q = ctx.queue(queue)?;
    ctx.known_queue(queue).await?;
    if let Some(p) = pipeline {
        ctx.known_pipeline(&[leasehold_core::Inspector::new(q.clone())], p)
            .await?;
    }
    let scope = match pipeline {
        Some(p) => PauseScope::Pipeline(p.to_owned()),
        None => PauseScope::Queue,
    };
    let change = if resume {
        q.resume(&scope, &ctx.by, reason).await
    } else {
        q.pause(&scope, &ctx.by, reason).await
    }
    .map_err(|e| ctx.fail(e))?;
    let what = match pipeline {
        Some(p) => format!("pipeline {p} of queue {queue}"),
        None => format!("queue {queue} (every pipeline)"),
    };
    let (outcome, text) = match change {
        PauseChange::Paused => (
            "paused",
            format!("paused {what}: its jobs are not leased until `leasehold resume`; jobs running go on"),
        ),
        PauseChange::AlreadyPaused => ("already_paused", format!("{what} was already paused")),
        PauseChange::Resumed => ("resumed", format!("resumed {what}: its idle workers were woken")),
        PauseChange::NotPaused => ("not_paused", format!("{what} was not paused")),
    };
    if ctx.json {
        return print_json(&json!({
            "queue": queue,
            "pipeline": pipeline,
            "outcome": outcome,
            "by": ctx.by,
            "reason": reason,
        }));
    }
    println!("{text}");
    Ok(())
}
