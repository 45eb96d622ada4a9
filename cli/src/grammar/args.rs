//! The option sets of `jobs`, `enqueue`, `dashboard` and `worker`, the values
//! of `--state`, `resolve --as` and `enqueue --on-parent-failure`, and the job
//! id of a command line.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use leasehold_core::{parse_duration, JobId, JobState};

use crate::failure::{Failure, Outcome};
use crate::time;

/// `enqueue --on-parent-failure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ParentFailureArg {
    /// Cancel the job.
    Cancel,
    /// Run it anyway.
    Run,
}

/// `jobs` options.
#[derive(Debug, Args)]
pub(crate) struct JobsArgs {
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
pub(crate) struct EnqueueArgs {
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
    /// The input, as JSON; `@FILE` reads it from a file, `-` from standard
    /// input (up to 10 MiB, as the HTTP enqueue; a command-line argument
    /// stops at 128 KiB on Linux).
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
    /// {from_ms} and {to_ms} (epoch ms) filled in per window; `@FILE` or `-`
    /// reads it as --input does.
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
pub(crate) enum ResolveAs {
    /// The attempt failed.
    Failed,
    /// The attempt is cancelled.
    Cancelled,
    /// The attempt's work is complete.
    Succeeded,
}

impl ResolveAs {
    /// The state.
    pub(crate) fn state(self) -> JobState {
        match self {
            ResolveAs::Failed => JobState::Failed,
            ResolveAs::Cancelled => JobState::Cancelled,
            ResolveAs::Succeeded => JobState::Succeeded,
        }
    }
}

/// What `jobs --state` selects: a state, or the quarantine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StateArg {
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

/// `dashboard` options.
#[derive(Debug, Args)]
pub(crate) struct DashboardArgs {
    /// Address to listen on (host:port). A non-loopback address needs --token.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub bind: String,
    /// Token that enables cancel, retry, resolve and enqueue (sent as `Authorization:
    /// Bearer` or typed into the action forms). Without it, actions are disabled.
    /// Prefer the environment variable: a command line is visible to other users.
    #[arg(long, env = "LEASEHOLD_DASHBOARD_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Only these queues (default: every queue found under the prefix, looked up
    /// again at most every 10 s).
    #[arg(long)]
    pub queue: Vec<String>,
    /// Host names accepted in the `Host` header besides loopback ones (e.g. the
    /// name of a reverse proxy in front of the dashboard).
    #[arg(long)]
    pub allow_host: Vec<String>,
    /// How long a login lasts, in hours.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=720))]
    pub session_hours: u64,
    /// When the session cookie is marked Secure: auto (behind an https proxy
    /// that sets X-Forwarded-Proto, or on a non-loopback address), always, never.
    #[arg(long, value_enum, default_value_t = CookieSecure::Auto)]
    pub cookie_secure: CookieSecure,
}

/// When the session cookie is marked `Secure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum CookieSecure {
    /// Behind an https proxy (`X-Forwarded-Proto: https`) or on a non-loopback address.
    Auto,
    /// Always (the dashboard is reached over https only).
    Always,
    /// Never (plain http on loopback, e.g. through an SSH tunnel).
    Never,
}

/// `worker` options.
#[derive(Debug, Args)]
pub(crate) struct WorkerArgs {
    /// The pipelines file (TOML): queues, pipelines and their steps as
    /// commands. See docs/operations.md, "Process steps".
    #[arg(long)]
    pub pipelines: PathBuf,
    /// Check the file, print what it declares and exit (no Redis needed).
    #[arg(long)]
    pub check: bool,
    /// Jobs run at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Lease time-to-live of pipelines that do not set one: 1s to 1d, the
    /// bounds of the pipelines' own lease_ttl.
    #[arg(long, default_value = "30s", value_parser = parse_lease_ttl)]
    pub lease_ttl: Duration,
    /// On SIGINT/SIGTERM, how long running steps may go on before they are
    /// cut off (process steps then get SIGTERM and their grace).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
    /// Serve the worker's Prometheus metrics on this address (GET /metrics),
    /// for example 127.0.0.1:9464. Off unless given.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// On a Redis Cluster, how long the worker waits at its start for the
    /// master of each served queue's slot to answer (a failover in
    /// progress), before it exits naming the master, the queue and the
    /// likely cause.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub startup_wait: Duration,
}

/// `--lease-ttl`: read by the one definition of the `lease_ttl` setting (the
/// `#[pipeline]` macro's and the pipelines file's), so it has their bounds
/// and their words.
pub(crate) fn parse_lease_ttl(
    s: &str,
) -> Result<Duration, leasehold_syntax::setting::SettingError> {
    leasehold_syntax::setting::LEASE_TTL.parse(s)
}

/// Parses a job id given on the command line.
pub(crate) fn job_id(s: &str) -> Outcome<JobId> {
    JobId::parse(s).map_err(|e| Failure::Usage(e.to_string()))
}

/// `backfill`'s arguments.
#[derive(Args, Debug)]
pub(crate) struct BackfillArgs {
    /// The scheduled pipeline.
    pub pipeline: String,
    /// Its queue (default: found from the pipeline's registration).
    #[arg(long)]
    pub queue: Option<String>,
    /// Which of its schedules (needed when it has several).
    #[arg(long)]
    pub schedule: Option<String>,
    /// The first window starts at or after this instant (RFC 3339, or a date: UTC midnight).
    #[arg(long, value_parser = time::parse_instant)]
    pub from: jiff::Timestamp,
    /// The last window ends at or before this instant.
    #[arg(long, value_parser = time::parse_instant)]
    pub to: jiff::Timestamp,
    /// Run windows that already SUCCEEDED again (a new job each).
    #[arg(long)]
    pub rerun: bool,
}
