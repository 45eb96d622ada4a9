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
mod examples;
mod failure;
mod names;
#[cfg(unix)]
mod pipelines_file;
mod progress;
mod render;
mod style;
mod table;
mod time;
mod wording;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, FromArgMatches as _, Parser, Subcommand, ValueEnum};
use leasehold_core::{
    connect_pool, GroupPolicy, JobId, JobState, Queue, QueueConfig, Retention, RetryMode,
};

use context::{redact, Ctx};
pub use failure::{classify, Failure, Outcome};

/// Operate leasehold queues: see what waits, runs and is stuck, and act on jobs.
#[derive(Debug, Parser)]
#[command(name = "leasehold", version, propagate_version = true)]
pub struct Cli {
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
pub enum Command {
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
    Dashboard(dashboard::DashboardArgs),
    /// Run a worker serving the pipelines a TOML file declares, their steps as
    /// commands (scripts you keep): the way in without Rust.
    #[cfg(unix)]
    Worker(commands::worker::WorkerArgs),
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

/// `schedules` subcommands.
#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Every schedule (the default).
    List,
    /// The latest tick records of one schedule: enqueued, caught up, skipped, missed, delayed, actions.
    Ticks {
        /// The schedule.
        name: String,
        /// How many.
        #[arg(long, default_value_t = 30)]
        limit: usize,
    },
    /// Pause a schedule: its ticks are recorded as skipped until it is resumed.
    Pause {
        /// The schedule.
        name: String,
        /// Why (recorded).
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Resume a paused schedule.
    Resume {
        /// The schedule.
        name: String,
        /// Why (recorded).
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Enqueue one window now: the latest due one, or the one starting at
    /// --window. Idempotent on the window's input key.
    Trigger {
        /// The schedule.
        name: String,
        /// The window's start (RFC 3339, or a UTC civil time).
        #[arg(long)]
        window: Option<String>,
        /// Run a window whose job SUCCEEDED again.
        #[arg(long)]
        rerun: bool,
    },
}

/// `group` subcommands.
#[derive(Debug, Subcommand)]
pub enum GroupCommand {
    /// The group: status, progress bar and ETA, what holds it, its children.
    Show {
        /// The group.
        name: String,
        /// Its queue (default: search every queue).
        #[arg(long)]
        queue: Option<String>,
        /// Draw a live progress bar until the group completes, is blocked or cancelled.
        #[arg(long)]
        watch: bool,
    },
    /// Create a group (open until sealed), with an optional completion job.
    Create {
        /// The group (letters, digits, '.', '_', '-').
        name: String,
        /// Its queue (its children must be enqueued into the same queue).
        #[arg(long)]
        queue: String,
        /// The completion job's pipeline: enqueued once, when the group settles.
        #[arg(long)]
        completion: Option<String>,
        /// The completion job's input (JSON; default {}).
        #[arg(long, requires = "completion")]
        completion_input: Option<String>,
        /// When the completion job runs.
        #[arg(long, value_enum, default_value = "all-succeeded")]
        policy: PolicyArg,
    },
    /// Seal a group: its last child was added, it may settle now.
    Seal {
        /// The group.
        name: String,
        /// Its queue (default: search every queue).
        #[arg(long)]
        queue: Option<String>,
    },
    /// Cancel a group: every unsettled child is cancelled (running ones get an
    /// in-flight cancel), and its completion job never runs.
    Cancel {
        /// The group.
        name: String,
        /// Its queue (default: search every queue).
        #[arg(long)]
        queue: Option<String>,
        /// Why (recorded).
        #[arg(long)]
        reason: String,
    },
    /// Retry every FAILED and CANCELLED child of a group.
    Retry {
        /// The group.
        name: String,
        /// Its queue (default: search every queue).
        #[arg(long)]
        queue: Option<String>,
        /// Start over from the first step (default: resume after the last completed one).
        #[arg(long)]
        from_start: bool,
        /// Why (recorded).
        #[arg(long, default_value = "")]
        reason: String,
    },
}

/// `group create --policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    /// When every child SUCCEEDED.
    AllSucceeded,
    /// When every child ended, whatever the outcome.
    AllTerminal,
}

/// `enqueue --on-parent-failure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ParentFailureArg {
    /// Cancel the job.
    Cancel,
    /// Run it anyway.
    Run,
}

/// `bulk` subcommands.
#[derive(Debug, Subcommand)]
pub enum BulkCommand {
    /// Retry the FAILED jobs of a queue (a new attempt each).
    Retry {
        /// The queue.
        #[arg(long)]
        queue: String,
        /// Only jobs of this pipeline.
        #[arg(long)]
        pipeline: Option<String>,
        /// Only jobs whose last attempt failed with this error kind (e.g. `timeout`).
        #[arg(long)]
        error_kind: Option<String>,
        /// Only jobs that ended at or after this time (RFC 3339; a date or time without offset is UTC).
        #[arg(long, value_parser = time::parse_instant)]
        since: Option<jiff::Timestamp>,
        /// Only jobs that ended before this time.
        #[arg(long, value_parser = time::parse_instant)]
        until: Option<jiff::Timestamp>,
        /// Start the new attempts from the first step instead of after the last completed one.
        #[arg(long)]
        from_start: bool,
        /// Also retry the jobs whose failure the step called permanent (not
        /// retryable); by default they are counted apart and left out.
        #[arg(long)]
        include_permanent: bool,
        /// Why (recorded with each job).
        #[arg(long, default_value = "")]
        reason: String,
        /// Only say how many jobs it would touch.
        #[arg(long)]
        dry_run: bool,
    },
    /// Cancel the QUEUED jobs of a queue: of a pipeline, or of a backfill range
    /// (jobs whose input window starts within --from .. --to).
    Cancel {
        /// The queue.
        #[arg(long)]
        queue: String,
        /// Only jobs of this pipeline.
        #[arg(long)]
        pipeline: Option<String>,
        /// Only jobs whose input window starts at or after this (RFC 3339).
        #[arg(long, value_parser = time::parse_instant)]
        from: Option<jiff::Timestamp>,
        /// Only jobs whose input window starts before this.
        #[arg(long, value_parser = time::parse_instant)]
        to: Option<jiff::Timestamp>,
        /// Why (recorded with each job; not needed with --dry-run).
        #[arg(long, required_unless_present = "dry_run")]
        reason: Option<String>,
        /// Only say how many jobs it would touch.
        #[arg(long)]
        dry_run: bool,
    },
    /// Resolve STALE jobs with one outcome and reason: the ids given, or every
    /// STALE job of the queue (of --pipeline).
    Resolve {
        /// The jobs (default: every STALE job of the queue or pipeline).
        jobs: Vec<String>,
        /// The queue.
        #[arg(long)]
        queue: String,
        /// Only jobs of this pipeline.
        #[arg(long)]
        pipeline: Option<String>,
        /// The outcome recorded for each.
        #[arg(long = "as", value_enum)]
        outcome: ResolveAs,
        /// Why (recorded with each job; not needed with --dry-run).
        #[arg(long, required_unless_present = "dry_run")]
        reason: Option<String>,
        /// Only say how many jobs it would touch.
        #[arg(long)]
        dry_run: bool,
    },
    /// Delete terminal jobs of one state and their records: the ids given, or
    /// every job of --state in the queue (of --pipeline, ended within
    /// --since/--until).
    Delete {
        /// The jobs (default: every job of --state matching the options).
        jobs: Vec<String>,
        /// The queue.
        #[arg(long)]
        queue: String,
        /// The state of the jobs deleted.
        #[arg(long, value_enum)]
        state: ResolveAs,
        /// Only jobs of this pipeline.
        #[arg(long)]
        pipeline: Option<String>,
        /// Only jobs that ended at or after this time (RFC 3339; a date or time without offset is UTC).
        #[arg(long, value_parser = time::parse_instant)]
        since: Option<jiff::Timestamp>,
        /// Only jobs that ended before this time.
        #[arg(long, value_parser = time::parse_instant)]
        until: Option<jiff::Timestamp>,
        /// Why (recorded in the queue's events; not needed with --dry-run).
        #[arg(long, required_unless_present = "dry_run")]
        reason: Option<String>,
        /// Only say how many jobs it would touch.
        #[arg(long)]
        dry_run: bool,
    },
}

/// `quarantine` subcommands.
#[derive(Debug, Subcommand)]
pub enum QuarantineCommand {
    /// The quarantined jobs: the field that cannot be read, why, where it was found, since when.
    List {
        /// Only this queue (default: every queue).
        #[arg(long)]
        queue: Option<String>,
    },
    /// Re-validate a quarantined job (fix its field first) and requeue it as QUEUED.
    Repair {
        /// The job id.
        job: String,
        /// Its queue (default: search every queue).
        #[arg(long)]
        queue: Option<String>,
    },
    /// Delete a quarantined job and its records.
    Purge {
        /// The job id.
        job: String,
        /// Its queue (default: search every queue).
        #[arg(long)]
        queue: Option<String>,
    },
}

/// `jobs` options.
#[derive(Debug, Args)]
pub struct JobsArgs {
    /// Only this queue (default: every queue).
    #[arg(long)]
    pub queue: Option<String>,
    /// Only jobs in this state, or `quarantined`: the jobs set aside as unreadable.
    #[arg(long, value_parser = parse_state_arg)]
    pub state: Option<StateArg>,
    /// Only jobs of this pipeline.
    #[arg(long)]
    pub pipeline: Option<String>,
    /// Only jobs with this resource (found through the search index unless
    /// --worker is given).
    #[arg(long)]
    pub resource: Option<String>,
    /// Only jobs whose current or last attempt ran on this worker.
    #[arg(long)]
    pub worker: Option<String>,
    /// Only jobs whose input key starts with this (search index).
    #[arg(long)]
    pub input_key: Option<String>,
    /// Only jobs whose input window (`<start>/<end>`) starts with this, e.g.
    /// `2026-05-06` or `2026-05-06T13` (search index).
    #[arg(long)]
    pub window: Option<String>,
    /// Only jobs whose id starts with this (search index).
    #[arg(long)]
    pub id_prefix: Option<String>,
    /// Most jobs to print.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    /// Matching jobs to skip.
    #[arg(long, default_value_t = 0)]
    pub offset: usize,
}

/// `enqueue` options.
#[derive(Debug, Args)]
pub struct EnqueueArgs {
    /// The pipeline.
    pub pipeline: String,
    /// The queue (default: the one the pipeline's published spec names; the
    /// pipeline must be registered by a worker unless --unregistered).
    #[arg(long)]
    pub queue: Option<String>,
    /// Run again even a window whose latest job SUCCEEDED (a new job linked to it).
    #[arg(long)]
    pub rerun: bool,
    /// The pipeline has no registered spec: enqueue with what is given
    /// (needs --queue; --resource and --input-key / --input-key-template as wanted).
    #[arg(long, requires = "queue")]
    pub unregistered: bool,
    /// The input, as JSON.
    #[arg(
        long,
        required_unless_present = "input_template",
        conflicts_with = "input_template"
    )]
    pub input: Option<String>,
    /// Idempotency key, for a pipeline without an input-key template (one
    /// with a template computes it from the input).
    #[arg(long, conflicts_with = "input_template")]
    pub input_key: Option<String>,
    /// Resource to lock while the job runs, for a pipeline without a resource
    /// template ({from}/{to} are filled in for a range).
    #[arg(long)]
    pub resource: Option<String>,
    /// Priority, 0–255 (higher first).
    #[arg(long)]
    pub priority: Option<u8>,
    /// Do not run before this much time has passed (e.g. 30s, 5m, 2h).
    #[arg(long, value_parser = time::parse_duration)]
    pub delay: Option<Duration>,
    /// Attempts allowed to automatic retries.
    #[arg(long)]
    pub max_attempts: Option<u32>,
    /// Range form: the input as a JSON template with {from} and {to} (RFC 3339),
    /// {from_ms} and {to_ms} (epoch ms) filled in per window.
    #[arg(long, requires_all = ["from", "to", "step"])]
    pub input_template: Option<String>,
    /// Range form: start of the first window (RFC 3339; a date or time without offset is UTC).
    #[arg(long, requires = "input_template", value_parser = time::parse_instant)]
    pub from: Option<jiff::Timestamp>,
    /// Range form: end of the last window, exclusive.
    #[arg(long, requires = "input_template", value_parser = time::parse_instant)]
    pub to: Option<jiff::Timestamp>,
    /// Range form: window length, e.g. 15m, 1h, 1d, 1mo (calendar units in UTC).
    #[arg(long, requires = "input_template", value_parser = time::parse_step)]
    pub step: Option<jiff::Span>,
    /// Range form: the input key template (same placeholders), for a pipeline
    /// without an input-key template of its own.
    #[arg(long, requires = "input_template")]
    pub input_key_template: Option<String>,
    /// Add the job(s) to this group (created when it does not exist), and seal
    /// it after the last one unless --keep-open.
    #[arg(long)]
    pub group: Option<String>,
    /// Leave the group open (more children will be added; `group seal` closes it).
    #[arg(long, requires = "group")]
    pub keep_open: bool,
    /// Wait until this job (an id) or group (`group:<name>`) SUCCEEDED; repeatable.
    #[arg(long)]
    pub depends_on: Vec<String>,
    /// What a parent ending FAILED or CANCELLED does to the job(s).
    #[arg(long, value_enum, default_value = "cancel")]
    pub on_parent_failure: ParentFailureArg,
}

/// Outcomes an operator may give a STALE job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ResolveAs {
    /// The attempt failed.
    Failed,
    /// The attempt is cancelled.
    Cancelled,
    /// The attempt's work is complete.
    Succeeded,
}

impl ResolveAs {
    /// The state.
    pub fn state(self) -> JobState {
        match self {
            ResolveAs::Failed => JobState::Failed,
            ResolveAs::Cancelled => JobState::Cancelled,
            ResolveAs::Succeeded => JobState::Succeeded,
        }
    }
}

/// What `jobs --state` selects: a state, or the quarantine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateArg {
    /// Jobs in this state.
    State(JobState),
    /// Jobs set aside as unreadable.
    Quarantined,
}

fn parse_state_arg(s: &str) -> Result<StateArg, String> {
    if s.eq_ignore_ascii_case("quarantined") {
        return Ok(StateArg::Quarantined);
    }
    s.parse().map(StateArg::State).map_err(|_| {
        let names: Vec<&str> = JobState::ALL.iter().map(|s| s.as_str()).collect();
        format!(
            "{s:?} is not a state; one of {} or QUARANTINED",
            names.join(", ")
        )
    })
}

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
                eprintln!("leasehold: {}", failure.message());
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
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        // stdout's reader went away (`| head`): end quietly
        Err(Failure::Closed) => ExitCode::SUCCESS,
        // Ctrl-C: end quietly, with the exit status a shell gives SIGINT
        Err(Failure::Interrupted) => ExitCode::from(130),
        Err(failure) => {
            eprintln!("leasehold: {}", failure.message());
            ExitCode::from(failure.code())
        }
    }
}

async fn run(cli: Cli) -> Outcome {
    // a pipelines file is checked whole before anything connects
    #[cfg(unix)]
    if let Command::Worker(args) = &cli.command {
        let described = commands::worker::describe(args)?;
        if args.check {
            return commands::out(&described);
        }
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
        Command::Worker(args) => commands::worker::run(ctx, args).await,
        Command::Completions { shell } => commands::docs::completions(shell),
        Command::Man { dir } => commands::docs::man(dir.as_deref()),
    }
}

/// Parses a job id given on the command line.
pub fn job_id(s: &str) -> Outcome<JobId> {
    JobId::parse(s).map_err(|e| Failure::Usage(e.to_string()))
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
