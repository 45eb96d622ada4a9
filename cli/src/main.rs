//! `leasehold`: the operator's command-line tool. It answers the operator
//! questions of `docs/design.md` from Redis alone (what is waiting, which worker took
//! it, what is running, is a resource processed twice, was the cancel honoured,
//! how was a dead worker's job recovered, is this failure retryable) and acts
//! through the same Lua scripts as workers, so every action is an event.
//!
//! Exit codes: 0 ok, 1 other error, 2 bad arguments, 3 unknown job,
//! 4 refused move, 5 Redis unreachable, 6 Redis authentication failed.

mod bulk;
mod commands;
mod context;
mod dashboard;
mod dispatch;
mod examples;
mod failure;
mod grammar;
mod input_arg;
mod names;
#[cfg(unix)]
mod pipelines_file;
mod progress;
mod render;
mod style;
mod table;
mod time;
mod wording;

use clap::FromArgMatches as _;
use std::process::ExitCode;

use failure::Failure;
use grammar::{Cli, Command};

fn main() -> ExitCode {
    let cli = match examples::command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    style::init();
    time::set_default_zone(if cli.local_time {
        time::Zone::Local
    } else {
        time::Zone::Utc
    });
    // what needs no Redis
    let generated = match &cli.command {
        Command::Completions { shell } => Some(commands::docs::completions(*shell)),
        Command::Man { dir } => Some(commands::docs::man(dir.as_deref())),
        _ => None,
    };
    if let Some(result) = generated {
        return match result {
            Ok(()) | Err(Failure::Closed) => ExitCode::SUCCESS,
            Err(failure) => {
                eprintln!("leasehold: {}", leasehold_core::visible(failure.message()));
                ExitCode::from(failure.code())
            }
        };
    }
    // rediss:// needs a rustls crypto provider; an error only means one is installed already
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("leasehold: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(dispatch::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        // stdout's reader went away (`| head`): end quietly
        Err(Failure::Closed) => ExitCode::SUCCESS,
        // Ctrl-C: end quietly, with the exit status a shell gives SIGINT
        Err(Failure::Interrupted) => ExitCode::from(130),
        Err(failure) => {
            eprintln!("leasehold: {}", leasehold_core::visible(failure.message()));
            ExitCode::from(failure.code())
        }
    }
}
