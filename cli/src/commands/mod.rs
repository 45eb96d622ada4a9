//! The commands: each reads through `leasehold_core::inspect` or acts through
//! the `Queue` client (the same Lua scripts the workers use). One module per
//! family: `views` read, `actions` act on one job, `enqueue` adds jobs,
//! `upkeep` sweeps and purges, `bulk` acts on many jobs at once, `flow` pauses and resumes queues and pipelines,
//! `groups` shows and acts on groups of jobs, `quarantine` lists, repairs and
//! purges unreadable jobs, `schedules` lists, pauses, resumes and triggers
//! schedules, `worker` runs a worker serving a pipelines file, `docs` prints
//! shell completions and man pages. (`main`
//! dispatches; `dashboard` is a command of its own.)

/// `println!` for command output: a reader that closed the pipe ends the
/// command quietly (see `out`) instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::commands::out(&format!("{}\n", format_args!($($arg)*)))?
    };
}

/// `print!` for command output, as [`outln`] without the newline.
macro_rules! outp {
    ($($arg:tt)*) => {
        $crate::commands::out(&format!($($arg)*))?
    };
}

mod actions;
mod backfill;
mod bulk;
pub(crate) mod docs;
mod enqueue;
mod flow;
pub(crate) mod groups;
pub(crate) mod quarantine;
pub(crate) mod schedules;
mod upkeep;
mod views;
#[cfg(unix)]
pub(crate) mod worker;

use serde::Serialize;

use crate::failure::{Failure, Outcome};

pub(crate) use actions::{cancel, delete, resolve, retry, run_now};
pub(crate) use backfill::backfill;
pub(crate) use bulk::bulk;
pub(crate) use enqueue::enqueue;
pub(crate) use flow::pause;
pub(crate) use upkeep::{purge, sweep};
pub(crate) use views::{events, jobs, locks, show, status, workers};

/// Writes `text` to stdout and flushes it. A reader that closed the pipe
/// (`leasehold ... | head`) ends the command quietly with [`Failure::Closed`]
/// (exit 0), as Unix tools do, instead of the panic of `println!`.
pub(crate) fn out(text: &str) -> Outcome {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Failure::Closed),
        Err(e) => Err(Failure::Other(format!("cannot write to stdout: {e}"))),
    }
}

/// Prints `value` as pretty JSON.
fn print_json(value: &impl Serialize) -> Outcome {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Failure::Other(format!("cannot write JSON: {e}")))?;
    out(&format!("{text}\n"))
}

/// Prints `value` as JSON on one line (`events --follow --json`).
fn print_json_line(value: &impl Serialize) -> Outcome {
    let text = serde_json::to_string(value)
        .map_err(|e| Failure::Other(format!("cannot write JSON: {e}")))?;
    out(&format!("{text}\n"))
}

/// The queue given, as the list of queues to read (empty: every queue).
fn one(queue: Option<String>) -> Vec<String> {
    queue.into_iter().collect()
}
