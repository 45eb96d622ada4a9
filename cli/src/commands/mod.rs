//! The commands: each reads through `leasehold_core::inspect` or acts through
//! the `Queue` client (the same Lua scripts the workers use). One module per
//! family: [`views`] read, [`actions`] act on one job, [`enqueue`] adds jobs,
//! [`upkeep`] sweeps and purges.

mod actions;
mod enqueue;
mod upkeep;
mod views;

use serde::Serialize;

use crate::context::Ctx;
use crate::{job_id, Command, Failure, Outcome};

fn print_json(value: &impl Serialize) -> Outcome {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Failure::Other(format!("cannot write JSON: {e}")))?;
    println!("{text}");
    Ok(())
}

fn print_json_line(value: &impl Serialize) -> Outcome {
    let text = serde_json::to_string(value)
        .map_err(|e| Failure::Other(format!("cannot write JSON: {e}")))?;
    println!("{text}");
    Ok(())
}

/// Runs one command.
pub async fn dispatch(ctx: &Ctx, command: Command) -> Outcome {
    match command {
        Command::Status { queue } => views::status(ctx, &queue).await,
        Command::Jobs(args) => views::jobs(ctx, args).await,
        Command::Show { job, queue } => views::show(ctx, &job_id(&job)?, queue.as_deref()).await,
        Command::Cancel { job, queue, reason } => {
            actions::cancel(ctx, &job_id(&job)?, queue.as_deref(), &reason).await
        }
        Command::Retry {
            job,
            queue,
            resume: _,
            from_start,
            reason,
        } => {
            let mode = if from_start {
                leasehold_core::RetryMode::FromStart
            } else {
                leasehold_core::RetryMode::Resume
            };
            actions::retry(ctx, &job_id(&job)?, queue.as_deref(), mode, &reason).await
        }
        Command::Resolve {
            job,
            queue,
            outcome,
            reason,
        } => {
            actions::resolve(
                ctx,
                &job_id(&job)?,
                queue.as_deref(),
                outcome.state(),
                &reason,
            )
            .await
        }
        Command::Enqueue(args) => enqueue::enqueue(ctx, args).await,
        Command::Locks { queue } => views::locks(ctx, queue).await,
        Command::Workers { queue } => views::workers(ctx, queue).await,
        Command::Events {
            queue,
            job,
            follow,
            limit,
        } => views::events(ctx, queue, job, follow, limit).await,
        Command::Sweep {
            queue,
            dry_run,
            batch,
        } => upkeep::sweep(ctx, queue, dry_run, batch).await,
        Command::Purge { queue, batch } => upkeep::purge(ctx, queue, batch).await,
        Command::Dashboard(args) => crate::dashboard::run(ctx, args).await,
    }
}

/// The queue given, as the list of queues to read (empty: every queue).
fn one(queue: Option<String>) -> Vec<String> {
    queue.into_iter().collect()
}
