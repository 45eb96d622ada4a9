//! The commands that act on one job: `cancel`, `retry` and `resolve`, through
//! the same scripts as the workers (each recorded as an event by `--by`).

use leasehold_core::{Cancelled, Error, JobId, JobState, RetryMode};
use serde_json::json;

use super::print_json;
use crate::context::Ctx;
use crate::failure::is_refusal;
use crate::failure::{Failure, Outcome};
use crate::wording;

/// A failed action as a failure: a refusal in the operator's words, else as classified.
fn action_error(ctx: &Ctx, op: &str, id: &JobId, queue: &str, e: Error) -> Failure {
    if is_refusal(&e) {
        return wording::refused(op, id, queue, e);
    }
    ctx.fail(e)
}

/// `cancel`.
pub(crate) async fn cancel(ctx: &Ctx, id: &JobId, queue: Option<&str>, reason: &str) -> Outcome {
    if reason.trim().is_empty() {
        return Err(Failure::Usage("--reason must not be empty".into()));
    }
    let q = ctx.locate(id, queue).await?;
    let result = q
        .cancel(id, reason, &ctx.by)
        .await
        .map_err(|e| action_error(ctx, "cancel", id, q.name(), e))?;
    let (outcome, state, mut text) = wording::cancelled(id, &result);
    if let Cancelled::Requested { .. } = result {
        text.push_str(&format!(
            "; `leasehold show {id}` tells when it is honoured"
        ));
    }
    if ctx.json {
        return print_json(
            &json!({"job": id, "queue": q.name(), "outcome": outcome, "state": state, "by": ctx.by}),
        );
    }
    outln!("{text}");
    Ok(())
}

/// `retry`.
pub(crate) async fn retry(
    ctx: &Ctx,
    id: &JobId,
    queue: Option<&str>,
    mode: RetryMode,
    reason: &str,
) -> Outcome {
    let q = ctx.locate(id, queue).await?;
    let attempt = q
        .retry(id, mode, &ctx.by, reason)
        .await
        .map_err(|e| action_error(ctx, "retry", id, q.name(), e))?;
    let mode_name = match mode {
        RetryMode::Resume => "resume",
        RetryMode::FromStart => "from_start",
    };
    if ctx.json {
        return print_json(
            &json!({"job": id, "queue": q.name(), "attempt": attempt, "mode": mode_name, "state": JobState::Queued, "by": ctx.by}),
        );
    }
    outln!("{}", wording::retried(id, attempt, mode));
    Ok(())
}

/// `resolve`.
pub(crate) async fn resolve(
    ctx: &Ctx,
    id: &JobId,
    queue: Option<&str>,
    state: JobState,
    reason: &str,
) -> Outcome {
    if reason.trim().is_empty() {
        return Err(Failure::Usage("--reason must not be empty".into()));
    }
    let q = ctx.locate(id, queue).await?;
    q.resolve(id, state, &ctx.by, reason)
        .await
        .map_err(|e| action_error(ctx, "resolve", id, q.name(), e))?;
    if ctx.json {
        return print_json(
            &json!({"job": id, "queue": q.name(), "state": state, "by": ctx.by, "reason": reason}),
        );
    }
    outln!("{}", wording::resolved(id, state));
    Ok(())
}

/// `delete`: a terminal job, now rather than at retention.
pub(crate) async fn delete(ctx: &Ctx, id: &JobId, queue: Option<&str>, reason: &str) -> Outcome {
    if reason.trim().is_empty() {
        return Err(Failure::Usage("--reason must not be empty".into()));
    }
    let q = ctx.locate(id, queue).await?;
    let state = q
        .delete_job(id, &ctx.by, reason)
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.json {
        return print_json(
            &json!({"job": id, "queue": q.name(), "deleted": true, "state": state, "by": ctx.by, "reason": reason}),
        );
    }
    outln!(
        "job {id} ({state}) deleted from queue {}, with its attempt records; the `delete` event keeps who and why",
        q.name()
    );
    Ok(())
}

/// `run-now`: a delayed QUEUED job becomes due at once.
pub(crate) async fn run_now(ctx: &Ctx, id: &JobId, queue: Option<&str>, reason: &str) -> Outcome {
    let q = ctx.locate(id, queue).await?;
    let was = q
        .run_now(id, &ctx.by, reason)
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.json {
        return print_json(
            &json!({"job": id, "queue": q.name(), "was_not_before": was, "state": JobState::Queued, "by": ctx.by}),
        );
    }
    outln!(
        "job {id} is due now (it was delayed until {}); the next free worker of its pipeline takes it",
        crate::time::stamp(was)
    );
    Ok(())
}
