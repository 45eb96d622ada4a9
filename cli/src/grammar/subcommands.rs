//! The subcommands of `schedules`, `groups`, `bulk` and `quarantine`, and their value types.

use clap::{Subcommand, ValueEnum};

use crate::time;

use super::args::ResolveAs;

/// `schedules` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum ScheduleCommand {
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
pub(crate) enum GroupCommand {
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
        /// The completion job's input (JSON; default {}; `@FILE` or `-` reads
        /// it as enqueue's --input does).
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
    /// in-flight cancel, pushed to their workers at once as `cancel` does), and
    /// its completion job never runs.
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
pub(crate) enum PolicyArg {
    /// When every child SUCCEEDED.
    AllSucceeded,
    /// When every child ended, whatever the outcome.
    AllTerminal,
}

/// `bulk` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum BulkCommand {
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
pub(crate) enum QuarantineCommand {
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
