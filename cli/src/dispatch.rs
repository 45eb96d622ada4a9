//! From a parsed command line to its command: the connection set-up shared
//! by every command that talks to Redis, then one arm per command.

use std::time::Duration;

use leasehold_core::{connect_pool, GroupPolicy, Queue, QueueConfig, Retention, RetryMode};

use crate::commands;
use crate::context::{redact, Ctx};
use crate::dashboard;
use crate::failure::{self, classify, Failure, Outcome};
use crate::grammar::*;

pub(crate) async fn run(cli: Cli) -> Outcome {
    // a pipelines file is read and checked whole, once, before anything
    // connects; the worker serves what was read here
    #[cfg(unix)]
    let mut declared = None;
    #[cfg(unix)]
    if let Command::Worker(args) = &cli.command {
        let pipelines = commands::worker::load(args)?;
        if args.check {
            return commands::out(&commands::worker::describe(args, &pipelines));
        }
        declared = Some(pipelines);
    }
    let url = cli
        .redis_url
        .clone()
        .or_else(|| std::env::var("REDIS_URL").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
    let shown_url = redact(&url);
    let config = QueueConfig::default()
        .prefix(cli.prefix.clone())
        .retention(Retention::new(cli.keep_count, cli.keep_age))
        .events_max_len(cli.events_max_len)
        .connect_timeout(cli.timeout)
        .response_timeout(cli.timeout.max(Duration::from_secs(1)));
    // the prefix must be a valid key part before anything is read
    leasehold_core::QueueKeys::new(&config.prefix, "x").map_err(|e| classify(&shown_url, e))?;
    let pool = connect_pool(&url, &config)
        .map_err(|e| Failure::Usage(format!("invalid --redis-url {shown_url}: {e}")))?;
    // one round trip proves Redis answers (and the credentials work)
    let probe =
        Queue::with_pool(pool.clone(), "x", config.clone()).map_err(|e| classify(&shown_url, e))?;
    if let Err(e) = probe.ping().await {
        let failure = if failure::is_auth_failure(&e) {
            classify(&shown_url, e)
        } else {
            Failure::Unreachable(format!("cannot reach Redis at {shown_url}: {e}"))
        };
        // the dashboard starts anyway: its pages answer 503 until Redis is back
        if !matches!(cli.command, Command::Dashboard(_)) {
            return Err(failure);
        }
        eprintln!("leasehold dashboard: warning: {}", failure.message());
    }
    let by = cli
        .by
        .clone()
        .or_else(|| std::env::var("USER").ok())
        .or_else(|| std::env::var("LOGNAME").ok())
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    let ctx = Ctx {
        url,
        shown_url,
        base: probe,
        config,
        json: cli.json,
        by,
    };
    // the worker serves the pipelines read above
    #[cfg(unix)]
    if let (Command::Worker(args), Some(pipelines)) = (&cli.command, declared) {
        return commands::worker::run(&ctx, args, pipelines).await;
    }
    dispatch(&ctx, cli.command).await
}

/// Runs one command.
async fn dispatch(ctx: &Ctx, command: Command) -> Outcome {
    match command {
        Command::Status { queue } => commands::status(ctx, &queue).await,
        Command::Jobs(args) => commands::jobs(ctx, args).await,
        Command::Show { job, queue } => commands::show(ctx, &job_id(&job)?, queue.as_deref()).await,
        Command::Cancel { job, queue, reason } => {
            commands::cancel(ctx, &job_id(&job)?, queue.as_deref(), &reason).await
        }
        Command::Pause {
            queue,
            pipeline,
            reason,
        } => commands::pause(ctx, &queue, pipeline.as_deref(), &reason, false).await,
        Command::Resume {
            queue,
            pipeline,
            reason,
        } => commands::pause(ctx, &queue, pipeline.as_deref(), &reason, true).await,
        Command::Retry {
            job,
            queue,
            resume: _,
            from_start,
            reason,
        } => {
            let mode = if from_start {
                RetryMode::FromStart
            } else {
                RetryMode::Resume
            };
            commands::retry(ctx, &job_id(&job)?, queue.as_deref(), mode, &reason).await
        }
        Command::Resolve {
            job,
            queue,
            outcome,
            reason,
        } => {
            commands::resolve(
                ctx,
                &job_id(&job)?,
                queue.as_deref(),
                outcome.state(),
                &reason,
            )
            .await
        }
        Command::Delete { job, queue, reason } => {
            commands::delete(ctx, &job_id(&job)?, queue.as_deref(), &reason).await
        }
        Command::RunNow { job, queue, reason } => {
            commands::run_now(ctx, &job_id(&job)?, queue.as_deref(), &reason).await
        }
        Command::Enqueue(args) => commands::enqueue(ctx, *args).await,
        Command::Backfill(args) => commands::backfill(ctx, args).await,
        Command::Locks { queue } => commands::locks(ctx, queue).await,
        Command::Workers { queue } => commands::workers(ctx, queue).await,
        Command::Events {
            queue,
            job,
            follow,
            limit,
        } => commands::events(ctx, queue, job, follow, limit).await,
        Command::Sweep {
            queue,
            dry_run,
            batch,
        } => commands::sweep(ctx, queue, dry_run, batch).await,
        Command::Bulk(cmd) => commands::bulk(ctx, cmd).await,
        Command::Purge { queue, batch } => commands::purge(ctx, queue, batch).await,
        Command::Groups { queue } => commands::groups::list(ctx, queue).await,
        Command::Group(GroupCommand::Show { name, queue, watch }) => {
            commands::groups::show(ctx, &name, queue.as_deref(), watch).await
        }
        Command::Group(GroupCommand::Create {
            name,
            queue,
            completion,
            completion_input,
            policy,
        }) => {
            let policy = match policy {
                PolicyArg::AllSucceeded => GroupPolicy::AllSucceeded,
                PolicyArg::AllTerminal => GroupPolicy::AllTerminal,
            };
            commands::groups::create(
                ctx,
                commands::groups::CreateArgs {
                    name,
                    queue,
                    completion,
                    completion_input,
                    policy,
                },
            )
            .await
        }
        Command::Group(GroupCommand::Seal { name, queue }) => {
            commands::groups::seal(ctx, &name, queue.as_deref()).await
        }
        Command::Group(GroupCommand::Cancel {
            name,
            queue,
            reason,
        }) => commands::groups::cancel(ctx, &name, queue.as_deref(), &reason).await,
        Command::Group(GroupCommand::Retry {
            name,
            queue,
            from_start,
            reason,
        }) => {
            let mode = if from_start {
                RetryMode::FromStart
            } else {
                RetryMode::Resume
            };
            commands::groups::retry(ctx, &name, queue.as_deref(), mode, &reason).await
        }
        Command::Quarantine(QuarantineCommand::List { queue }) => {
            commands::quarantine::list(ctx, &queue.into_iter().collect::<Vec<_>>()).await
        }
        Command::Quarantine(QuarantineCommand::Repair { job, queue }) => {
            commands::quarantine::repair(ctx, &job_id(&job)?, queue.as_deref()).await
        }
        Command::Quarantine(QuarantineCommand::Purge { job, queue }) => {
            commands::quarantine::purge(ctx, &job_id(&job)?, queue.as_deref()).await
        }
        Command::Schedules { action, queue } => match action.unwrap_or(ScheduleCommand::List) {
            ScheduleCommand::List => commands::schedules::list(ctx, queue).await,
            ScheduleCommand::Ticks { name, limit } => {
                commands::schedules::ticks(ctx, &name, queue, limit).await
            }
            ScheduleCommand::Pause { name, reason } => {
                commands::schedules::set_paused(ctx, &name, queue, true, &reason).await
            }
            ScheduleCommand::Resume { name, reason } => {
                commands::schedules::set_paused(ctx, &name, queue, false, &reason).await
            }
            ScheduleCommand::Trigger {
                name,
                window,
                rerun,
            } => commands::schedules::trigger(ctx, &name, queue, window, rerun).await,
        },
        Command::Dashboard(args) => dashboard::run(ctx, args).await,
        #[cfg(unix)]
        // `run` reads the file before it connects and serves it from there
        Command::Worker(args) => {
            let pipelines = commands::worker::load(&args)?;
            commands::worker::run(ctx, &args, pipelines).await
        }
        Command::Completions { shell } => commands::docs::completions(shell),
        Command::Man { dir } => commands::docs::man(dir.as_deref()),
    }
}
