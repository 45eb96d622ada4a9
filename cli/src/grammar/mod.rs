//! The command line's grammar: every command, subcommand and option as clap
//! declares them, and the parsers of their values. The dispatch is
//! `dispatch.rs`; each command's work is under `commands/` (the dashboard's
//! under `dashboard/`).

mod args;
mod subcommands;

pub(crate) use args::*;
pub(crate) use subcommands::*;

use std::time::Duration;

use clap::{Parser, Subcommand};
use leasehold_core::{QueueConfig, Retention};

use crate::time;

/// Operate leasehold queues: see what waits, runs and is stuck, and act on jobs.
#[derive(Debug, Parser)]
#[command(name = "leasehold", version, propagate_version = true)]
pub(crate) struct Cli {
    /// Redis URL: redis://[user:password@]host:port[/db], rediss:// for TLS,
    /// redis+unix:///path; a Redis Cluster: redis+cluster://[user:password@]host:port[,host:port...]
    /// (rediss+cluster:// for TLS). Falls back to $REDIS_URL, then redis://127.0.0.1:6379.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "LEASEHOLD_REDIS_URL",
        hide_env_values = true
    )]
    pub redis_url: Option<String>,
    /// First part of every key.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "LEASEHOLD_PREFIX",
        default_value = "leasehold"
    )]
    pub prefix: String,
    /// Print JSON instead of tables (`events --follow`: one object per line).
    #[arg(long, global = true, help_heading = "Global options")]
    pub json: bool,
    /// Show clock times in the host's local time zone, with their offset
    /// (default: UTC, `...Z`). The dashboard also has a UTC/local switch.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "LEASEHOLD_LOCAL_TIME"
    )]
    pub local_time: bool,
    /// Who is acting, recorded with cancel, retry and resolve (default: $USER).
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "LEASEHOLD_BY"
    )]
    pub by: Option<String>,
    /// How long to wait to connect to Redis and for each reply.
    #[arg(long, global = true, help_heading = "Global options", default_value = "5s", value_parser = time::parse_duration)]
    pub timeout: Duration,
    /// Retention passed to the scripts (terminal jobs kept per queue; 0 = no limit).
    /// Use your workers' setting: actions and `purge` delete terminal jobs beyond it.
    #[arg(long, global = true, help_heading = "Global options", env = "LEASEHOLD_KEEP_COUNT", default_value_t = Retention::default().keep_count)]
    pub keep_count: u64,
    /// Retention passed to the scripts (maximum age of terminal jobs; 0s = no limit).
    #[arg(long, global = true, help_heading = "Global options", env = "LEASEHOLD_KEEP_AGE", default_value = "7d", value_parser = time::parse_duration)]
    pub keep_age: Duration,
    /// Approximate cap of each queue's event stream, applied when an action adds an event.
    #[arg(long, global = true, help_heading = "Global options", env = "LEASEHOLD_EVENTS_MAX_LEN", default_value_t = QueueConfig::default().events_max_len)]
    pub events_max_len: u64,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Per queue: counts per state, the oldest waiting job, live workers, locks held, STALE jobs needing a decision.
    Status {
        /// Only these queues (default: every queue found under the prefix).
        #[arg(long)]
        queue: Vec<String>,
    },
    /// List jobs, newest change first.
    Jobs(JobsArgs),
    /// Everything about one job: input, attempts, step timeline, lease, lock, cancel, events.
    Show {
        /// The job id.
        job: String,
        /// Its queue (default: search every queue found under the prefix).
        #[arg(long)]
        queue: Option<String>,
    },
    /// Cancel a job: at once when QUEUED, a request its worker honours when LEASED or RUNNING.
    ///
    /// The worker holding a LEASED or RUNNING job is told as the request is
    /// recorded (the queue's cancel channel, pub/sub) and stops the running
    /// step at once: measured from this command's reply, p50 0.1 ms and p99
    /// 3 ms for a Rust step, p50 0.4 ms and p99 23 ms for a process step
    /// (BENCHMARKS.md); expect a quarter second at most on a loaded machine.
    /// A Rust step's cancellation token fires; a process step's process
    /// group gets SIGTERM, then SIGKILL after its grace. When
    /// the worker missed the message (its subscription was reconnecting), its
    /// next lease renewal delivers the request: a third of the lease TTL at
    /// worst (10 s with the default 30 s lease).
    Cancel {
        /// The job id.
        job: String,
        /// Its queue (default: search every queue).
        #[arg(long)]
        queue: Option<String>,
        /// Why (recorded).
        #[arg(long)]
        reason: String,
    },
    /// Pause a queue (every pipeline) or one pipeline: its jobs are not leased
    /// until `resume`; jobs running go on.
    Pause {
        /// The queue.
        queue: String,
        /// Only this pipeline of the queue.
        #[arg(long)]
        pipeline: Option<String>,
        /// Why (recorded).
        #[arg(long)]
        reason: String,
    },
    /// Resume a paused queue or pipeline and wake its idle workers.
    Resume {
        /// The queue.
        queue: String,
        /// Only this pipeline of the queue.
        #[arg(long)]
        pipeline: Option<String>,
        /// Why (recorded).
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Start a new attempt of a FAILED, CANCELLED or STALE job.
    Retry {
        /// The job id.
        job: String,
        /// Its queue (default: search every queue).
        #[arg(long)]
        queue: Option<String>,
        /// Resume after the last completed step, reusing its output (the default).
        #[arg(long, conflicts_with = "from_start")]
        resume: bool,
        /// Start over from the first step; step outputs are cleared.
        #[arg(long)]
        from_start: bool,
        /// Why (recorded).
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Decide the outcome of a STALE job (its worker died while RUNNING).
    Resolve {
        /// The job id.
        job: String,
        /// Its queue (default: search every queue).
        #[arg(long)]
        queue: Option<String>,
        /// The outcome.
        #[arg(long = "as", value_enum)]
        outcome: ResolveAs,
        /// Why (recorded; required).
        #[arg(long)]
        reason: String,
    },
    /// Delete a terminal job (SUCCEEDED, FAILED or CANCELLED) now, with its
    /// attempt records, rather than at retention; recorded as an event.
    Delete {
        /// The job id.
        job: String,
        /// Its queue (default: search every queue).
        #[arg(long)]
        queue: Option<String>,
        /// Why (recorded; required).
        #[arg(long)]
        reason: String,
    },
    /// Run a delayed QUEUED job now: it becomes due at once (its resource
    /// lock and flow limits still apply); recorded as an event.
    RunNow {
        /// The job id.
        job: String,
        /// Its queue (default: search every queue).
        #[arg(long)]
        queue: Option<String>,
        /// Why (recorded).
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Enqueue one job, or one job per time window of a range (a backfill).
    Enqueue(Box<EnqueueArgs>),
    /// Enqueue the windows of a scheduled pipeline between two instants, as
    /// its schedule's ticks would have (same input and input key: windows it
    /// already ran are not enqueued again).
    #[command(
        after_help = "Examples:\n  leasehold backfill hourly_sales --from 2026-05-01T00:00:00Z --to 2026-05-02T00:00:00Z\n  leasehold backfill hourly_sales --schedule hourly --from 2026-05-01 --to 2026-05-08 --rerun"
    )]
    Backfill(BackfillArgs),
    /// Resource locks: holder, time left, parked jobs, and every live job claiming the resource.
    Locks {
        /// Only this queue (default: every queue).
        #[arg(long)]
        queue: Option<String>,
    },
    /// Live workers (expired registrations are pruned).
    Workers {
        /// Only this queue (default: every queue).
        #[arg(long)]
        queue: Option<String>,
    },
    /// The event stream: every transition, oldest first.
    Events {
        /// Only this queue (default: every queue).
        #[arg(long)]
        queue: Option<String>,
        /// Only this job's events.
        #[arg(long)]
        job: Option<String>,
        /// Keep printing new events until interrupted.
        #[arg(long, short = 'f')]
        follow: bool,
        /// How many of the latest events to print first.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Recover expired leases now (the recovery rules of docs/design.md).
    Sweep {
        /// Only this queue (default: every queue).
        #[arg(long)]
        queue: Option<String>,
        /// Report what would move; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Most expired leases handled per queue.
        #[arg(long, default_value_t = 1000)]
        batch: usize,
    },
    /// Serve the web dashboard: queues, jobs, job timelines, workers, locks,
    /// events, JSON under /api, Prometheus /metrics, and (with --token) actions.
    Dashboard(crate::grammar::DashboardArgs),
    /// Run a worker serving the pipelines a TOML file declares, their steps as
    /// commands (scripts you keep): the way in without Rust. SIGINT or SIGTERM
    /// stops it gracefully; SIGHUP reloads the file (checked whole first: a
    /// refused file keeps the running pipelines).
    #[cfg(unix)]
    Worker(WorkerArgs),
    /// Jobs set aside as unreadable (a key of the wrong type, a corrupt field):
    /// list them with why, requeue one once fixed, or delete one.
    #[command(subcommand)]
    Quarantine(QuarantineCommand),
    /// Act on many jobs at once: retry the FAILED jobs of a pipeline, cancel the
    /// QUEUED jobs of a pipeline or a backfill range, resolve STALE jobs with one
    /// reason, delete terminal jobs of one state. Says how many jobs it touches
    /// first (--dry-run: only that).
    #[command(subcommand)]
    Bulk(BulkCommand),
    /// Groups of jobs (a backfill, or any set with a completion job): status and progress.
    Groups {
        /// Only this queue (default: every queue).
        #[arg(long)]
        queue: Option<String>,
    },
    /// One group: show it (progress bar, ETA, children), create, seal or
    /// cancel it, retry its failed children.
    #[command(subcommand)]
    Group(GroupCommand),
    /// Schedules the workers registered: next due, last window, last job and
    /// its state, paused, counts; pause, resume, trigger a window, recent ticks.
    Schedules {
        /// What to do (default: list).
        #[command(subcommand)]
        action: Option<ScheduleCommand>,
        /// Only this queue (default: every queue).
        #[arg(long, global = true)]
        queue: Option<String>,
    },
    /// Delete terminal jobs beyond the retention policy (--keep-count, --keep-age).
    Purge {
        /// Only this queue (default: every queue).
        #[arg(long)]
        queue: Option<String>,
        /// Most jobs deleted per queue.
        #[arg(long, default_value_t = 10_000)]
        batch: usize,
    },
    /// Print the shell completion script for `shell` (generated from these
    /// definitions; needs no Redis).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) of leasehold, or write one page per command
    /// into --dir (needs no Redis).
    Man {
        /// Write `leasehold.1`, `leasehold-status.1`, ... into this directory.
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
