//! The process step itself: its settings, the child's files and
//! environment, supervising it until it ends or is cut off, and its outcome.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio::process::Command;
use tracing::{info, warn};

use super::exit_codes::ExitCodes;
use super::logs::{pump, Captured, Sink, Stream};
use super::record::{CutOff, CutWhy, ProcessRecord, StepOutcome};
use super::report::{finish_readers, progress_labels, read_output, report_progress, save_final};
use super::supervisor::{Deadline, Link, Supervised};
use super::work_dirs::WorkDir;
use crate::pipeline::StopWhy;
use crate::pipeline::{StepContext, StepError};
use crate::record::Millis;

/// The default grace between SIGTERM and SIGKILL.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);
/// The default bytes kept of each of stdout and stderr.
pub const DEFAULT_TAIL_BYTES: usize = 16 * 1024;

/// A step that runs a program (see the module documentation).
#[derive(Debug, Clone)]
pub struct ProcessStep {
    program: OsString,
    args: Vec<OsString>,
    /// The shell form: its script gets no placeholders (only the variables).
    shell: bool,
    env: Vec<(OsString, OsString)>,
    current_dir: Option<PathBuf>,
    timeout: Option<Duration>,
    grace: Duration,
    exit_codes: ExitCodes,
    tail_bytes: usize,
}

/// Wall-clock milliseconds since the epoch.
fn now_ms() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as Millis)
}

/// The name of a signal, for messages.
fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        libc::SIGBUS => "SIGBUS",
        _ => return format!("signal {signal}"),
    };
    format!("{name} ({signal})")
}

/// The last non-empty line of a tail, shortened, for an error message.
fn last_line(tail: &str) -> Option<String> {
    let line = tail.lines().rev().find(|l| !l.trim().is_empty())?.trim();
    let mut short: String = line.chars().take(200).collect();
    if short.len() < line.len() {
        short.push('…');
    }
    Some(short)
}

/// The reason recorded for a child the monitor cut off on its own.
const MONITOR_CUT: &str = "the lease's local deadline passed with no renewal reaching the step (the worker frozen or cut off): its monitor stopped the process group";

/// Tells the monitor each new local deadline of the lease, after each
/// confirmed renewal; never returns (pending for ever without a link or a lease).
async fn forward_deadlines(ctx: &StepContext, link: Option<&Link>) {
    let clock = ctx.lease_clock();
    let (Some(link), Some(mut sent)) = (link, clock.local_deadline()) else {
        return std::future::pending().await;
    };
    loop {
        let changed = clock.changed().notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if let Some(deadline) = clock.local_deadline() {
            if deadline != sent {
                if let Err(e) = link.send_deadline(deadline) {
                    warn!(job = %ctx.job(), step = ctx.step(), error = %e, "the step's monitor was not told the lease's new deadline");
                }
                sent = deadline;
            }
        }
        changed.await;
    }
}

/// Writes the step's files (the job's input, the previous step's output: up
/// to 64 MiB each) on a blocking thread, not on the runtime's.
async fn write_files(files: Vec<(PathBuf, String)>) -> Result<(), StepError> {
    let written = tokio::task::spawn_blocking(move || {
        for (path, text) in &files {
            std::fs::write(path, text)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        Ok::<(), String>(())
    })
    .await
    .unwrap_or_else(|e| Err(format!("cannot write its files: {e}")));
    written.map_err(|e| StepError::retryable(e).with_kind("spawn"))
}

/// How the child ended, before it becomes a step's result.
struct Ended {
    status: std::process::ExitStatus,
    cut: Option<CutOff>,
}

impl ProcessStep {
    /// Runs `program` (found on `PATH` unless it is a path), with no arguments yet.
    pub fn new(program: impl Into<OsString>) -> Self {
        ProcessStep {
            program: program.into(),
            args: Vec::new(),
            shell: false,
            env: Vec::new(),
            current_dir: None,
            timeout: None,
            grace: DEFAULT_GRACE,
            exit_codes: ExitCodes::default(),
            tail_bytes: DEFAULT_TAIL_BYTES,
        }
    }

    /// Runs `script` with `/bin/sh -c`: the shell form, for when a shell is
    /// really wanted (pipes, globs, expansions). Extra arguments become `$0`, `$1`, ...
    pub fn shell(script: impl Into<OsString>) -> Self {
        let mut step = ProcessStep::new("/bin/sh").arg("-c").arg(script.into());
        step.shell = true;
        step
    }

    /// Adds an argument, passed as one argument (never through a shell).
    /// Placeholders in it (`{source}`, `{window.start}`,
    /// `{window.start:%Y-%m-%dT%H}`) are filled from the job's input when the
    /// step runs; any other `{` stays as written (see `docs/operations.md`,
    /// "Arguments from the job"). The shell form fills none.
    #[must_use]
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    #[must_use]
    pub fn args<I: IntoIterator<Item = A>, A: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable for the child (on top of the worker's).
    #[must_use]
    pub fn env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Sets the child's working directory (default: the worker's).
    #[must_use]
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.current_dir = Some(dir.into());
        self
    }

    /// Sets the step's time limit: past it the group gets SIGTERM, then SIGKILL
    /// after the grace, and the step fails retryable with kind `timeout`.
    #[must_use]
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }

    /// Sets the grace between SIGTERM and SIGKILL (default 10 s).
    #[must_use]
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Sets how exit codes map to outcomes.
    #[must_use]
    pub fn exit_codes(mut self, codes: ExitCodes) -> Self {
        self.exit_codes = codes;
        self
    }

    /// Sets the bytes kept of each of stdout and stderr (default 16 KiB).
    #[must_use]
    pub fn tail_bytes(mut self, bytes: usize) -> Self {
        self.tail_bytes = bytes;
        self
    }

    /// The step's time limit, if it has one.
    pub fn time_limit(&self) -> Option<Duration> {
        self.timeout
    }

    /// The program.
    pub fn program(&self) -> &OsStr {
        &self.program
    }

    /// The arguments.
    pub fn arguments(&self) -> &[OsString] {
        &self.args
    }

    /// Runs the program as step `ctx.step()` of the job, given the previous
    /// step's output; returns the step's output (the JSON the child wrote to
    /// `LEASEHOLD_OUTPUT`, `null` when it wrote none).
    pub async fn run(
        &self,
        ctx: &StepContext,
        previous: Option<&str>,
    ) -> Result<String, StepError> {
        self.run_keyed(ctx, previous, None).await
    }

    /// [`ProcessStep::run`], telling the child the job's input key (`LEASEHOLD_INPUT_KEY`).
    pub async fn run_keyed(
        &self,
        ctx: &StepContext,
        previous: Option<&str>,
        input_key: Option<&str>,
    ) -> Result<String, StepError> {
        let input = ctx.lease().map_or("{}", |l| l.input.as_str());
        self.run_inner(ctx, input, None, previous, input_key, &[])
            .await
    }

    /// Runs the program with `input` as the job's input (`value`: the same
    /// parsed, when the caller has it) and `extra` variables (a cleanup
    /// command, run outside a step).
    pub(crate) async fn run_inner(
        &self,
        ctx: &StepContext,
        input: &str,
        value: Option<&Value>,
        previous: Option<&str>,
        input_key: Option<&str>,
        extra: &[(&str, String)],
    ) -> Result<String, StepError> {
        ctx.check_cancelled()?;
        let step = ctx.step();
        let dir = WorkDir::create().map_err(|e| {
            StepError::retryable(format!("cannot make its work directory: {e}")).with_kind("spawn")
        })?;
        let input_path = dir.path().join("input.json");
        let previous_path = dir.path().join("previous.json");
        let output_path = dir.path().join("output.json");
        let mut files = vec![(input_path.clone(), input.to_owned())];
        if let Some(previous) = previous {
            files.push((previous_path.clone(), previous.to_owned()));
        }
        write_files(files).await?;
        let mut command = self.command(ctx, input, value, input_key)?;
        command
            .env("LEASEHOLD_INPUT", &input_path)
            .env("LEASEHOLD_OUTPUT", &output_path)
            .env("LEASEHOLD_WORK_DIR", dir.path());
        if previous.is_some() {
            command.env("LEASEHOLD_PREVIOUS", &previous_path);
        } else {
            command.env_remove("LEASEHOLD_PREVIOUS");
        }
        for (name, value) in extra {
            command.env(name, value);
        }
        for (name, value) in &self.env {
            command.env(name, value);
        }
        // a process step gets its kill grace before the worker drops it
        ctx.request_grace(self.grace);
        // the last moment to refuse: a cancelled job, or a lease past its local
        // deadline or known lost (checked synchronously, whatever the watchdog
        // has done yet), spawns nothing
        ctx.check_cancelled()?;
        if !ctx.lease_valid() {
            return Err(StepError::retryable(
                "not started: the lease is past its local deadline or lost",
            )
            .with_kind("lease_lost"));
        }
        // the monitor keeps the lease's local deadline on its own: SIGTERM
        // then, SIGKILL after the grace capped as on a lost lease
        let deadline = ctx.lease_clock().local_deadline().map(|term_at| Deadline {
            term_at,
            kill_after: self.lease_lost_grace(ctx),
        });
        let started_at = now_ms();
        let (mut child, link, stdout, stderr) =
            Supervised::spawn(command, deadline).await.map_err(|e| {
                let error = format!("cannot run {:?}: {e}", self.program);
                match e.kind() {
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => {
                        StepError::permanent(error)
                    }
                    _ => StepError::retryable(error),
                }
                .with_kind("spawn")
            })?;
        let job = ctx.job().to_string();
        let pid = child.pid();
        info!(job = %job, step, pid, pgid = pid, program = ?self.program, "process step started");
        let captured = Captured::new(self.tail_bytes);
        let stop_readers = tokio_util::sync::CancellationToken::new();
        let out = tokio::spawn(pump(
            stdout,
            Sink {
                stream: Stream::Stdout,
                job: job.clone(),
                step,
                captured: captured.clone(),
            },
            stop_readers.clone(),
        ));
        let err = tokio::spawn(pump(
            stderr,
            Sink {
                stream: Stream::Stderr,
                job: job.clone(),
                step,
                captured: captured.clone(),
            },
            stop_readers.clone(),
        ));
        let reporter = tokio::spawn(report_progress(
            ctx.clone(),
            captured.clone(),
            started_at,
            pid,
        ));
        let ended = tokio::select! {
            ended = self.supervise(ctx, &mut child, link.as_ref()) => ended,
            () = forward_deadlines(ctx, link.as_ref()) => unreachable!("forwarding deadlines never ends"),
        };
        // the end is when the program exited, not when its pipes closed
        let ended_at = now_ms();
        // whatever the program left in its group goes now: the pipes close
        child.signal_group(libc::SIGKILL);
        reporter.abort();
        if let (Some(metrics), Some(labels)) = (ctx.metrics(), progress_labels(ctx)) {
            metrics.step_progress.remove(&labels);
        }
        finish_readers(out, err, &stop_readers).await;
        let kept = captured.snapshot();
        drop(child);
        drop(link);
        let ended = match ended {
            Ok(ended) => ended,
            Err(e) => {
                return Err(
                    StepError::retryable(format!("lost track of its child: {e}"))
                        .with_kind("spawn"),
                )
            }
        };
        let mut record = ProcessRecord {
            attempt: ctx.attempt(),
            step: step.to_owned(),
            pid: Some(pid),
            pgid: Some(pid),
            started_at,
            ended_at: Some(ended_at),
            exit_code: ended.status.code(),
            signal: std::os::unix::process::ExitStatusExt::signal(&ended.status),
            outcome: StepOutcome::Running,
            cut_off: ended.cut.clone(),
            progress: kept.progress,
            stdout_tail: kept.stdout_tail,
            stderr_tail: kept.stderr_tail,
            stdout_bytes: kept.stdout_bytes,
            stderr_bytes: kept.stderr_bytes,
        };
        let result = self.outcome(&ended, &record, &output_path).await;
        record.outcome = match (&ended.cut, &result) {
            (Some(_), _) => StepOutcome::CutOff,
            (None, Ok(_)) => StepOutcome::Succeeded,
            (None, Err(e)) if e.retryable => StepOutcome::Retryable,
            (None, Err(_)) => StepOutcome::Permanent,
        };
        info!(
            job = %job,
            step,
            exit_code = record.exit_code,
            signal = record.signal,
            outcome = %record.outcome,
            cut_off = record.cut_off.as_ref().map(|c| c.why.as_str()),
            "process step ended"
        );
        save_final(ctx, &record).await;
        // the next step of the attempt asks for its own grace, if any
        ctx.request_grace(Duration::ZERO);
        // its files (up to 64 MiB each) are removed off the runtime's threads
        let _ = tokio::task::spawn_blocking(move || drop(dir)).await;
        result
    }

    /// Whether the arguments or the job's variables need the input parsed.
    fn needs_value(&self, input: &str) -> bool {
        (!self.shell && super::argv::templated(&self.args)) || input.contains("\"window\"")
    }

    /// The child's command: the program, its arguments filled from the job's
    /// input, its directory and the job's variables. The input is parsed at
    /// most once, here, and only when the caller has no `value` and an
    /// argument or the window variables need it; the parsed value is dropped
    /// before the child runs.
    fn command(
        &self,
        ctx: &StepContext,
        input: &str,
        value: Option<&Value>,
        input_key: Option<&str>,
    ) -> Result<Command, StepError> {
        let parsed: Option<Result<Value, String>> = match value {
            Some(_) => None,
            None => self.needs_value(input).then(|| {
                serde_json::from_str(input).map_err(|e| format!("the input is not JSON: {e}"))
            }),
        };
        let value: Result<&Value, &str> = match (value, &parsed) {
            (Some(value), _) | (None, Some(Ok(value))) => Ok(value),
            (None, Some(Err(e))) => Err(e),
            // nothing needs it
            (None, None) => Err("the input was not read"),
        };
        let mut command = Command::new(&self.program);
        if self.shell {
            command.args(&self.args);
        } else {
            command.args(super::argv::render(&self.args, value).map_err(|e| {
                StepError::permanent(format!(
                    "cannot fill the arguments of {:?}: {e}",
                    self.program
                ))
                .with_kind("input")
            })?);
        }
        if let Some(cwd) = &self.current_dir {
            command.current_dir(cwd);
        }
        self.job_env(&mut command, ctx, value.ok(), input_key);
        Ok(command)
    }

    /// Sets the job's environment variables on `command` (`value`: the job's
    /// input parsed, when it was).
    fn job_env(
        &self,
        command: &mut Command,
        ctx: &StepContext,
        value: Option<&Value>,
        input_key: Option<&str>,
    ) {
        let lease = ctx.lease();
        let optional = |command: &mut Command, name: &str, value: Option<&str>| match value {
            Some(v) => {
                command.env(name, v);
            }
            None => {
                command.env_remove(name);
            }
        };
        command
            .env("LEASEHOLD_JOB_ID", ctx.job().as_str())
            .env("LEASEHOLD_STEP", ctx.step())
            .env("LEASEHOLD_ATTEMPT", ctx.attempt().to_string())
            .env("LEASEHOLD_FENCE", ctx.fence().to_string())
            .env("LEASEHOLD_WORKER", ctx.worker());
        optional(command, "LEASEHOLD_QUEUE", ctx.queue().map(|q| q.name()));
        optional(
            command,
            "LEASEHOLD_PIPELINE",
            lease.map(|l| l.pipeline.as_str()),
        );
        optional(
            command,
            "LEASEHOLD_RESOURCE",
            lease.and_then(|l| l.resource.as_deref()),
        );
        optional(command, "LEASEHOLD_INPUT_KEY", input_key);
        let window = value.and_then(|v| v.get("window"));
        let bound = |name: &str| {
            window
                .and_then(|w| w.get(name))
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        };
        optional(command, "LEASEHOLD_WINDOW_START", bound("start").as_deref());
        optional(command, "LEASEHOLD_WINDOW_END", bound("end").as_deref());
    }

    /// The kill grace on a lost lease (the worker's) or at the lease's local
    /// deadline (the monitor's): the step's grace, at most half the deadline
    /// margin, so the group is dead before Redis's own deadline for the lease.
    fn lease_lost_grace(&self, ctx: &StepContext) -> Duration {
        match ctx.lease() {
            Some(lease) => self
                .grace
                .min(crate::lease_clock::deadline_margin(lease.ttl) / 2),
            None => self.grace,
        }
    }

    /// Waits for the child, or cuts it off: SIGTERM to its group when the
    /// job's token fires or the time limit passes, SIGKILL after the grace.
    /// A child the monitor cut off on its own (at the lease's local deadline,
    /// the worker not running) is reported as such.
    async fn supervise(
        &self,
        ctx: &StepContext,
        child: &mut Supervised,
        link: Option<&Link>,
    ) -> std::io::Result<Ended> {
        let limit = async {
            match self.timeout {
                Some(limit) => tokio::time::sleep(limit).await,
                None => std::future::pending().await,
            }
        };
        let (why, reason) = tokio::select! {
            status = child.wait() => {
                let cut = link.and_then(Link::cut).map(|cut| CutOff {
                    why: CutWhy::LeaseLost,
                    reason: MONITOR_CUT.to_owned(),
                    at: cut.at,
                    killed: cut.killed,
                });
                return Ok(Ended { status: status?, cut });
            }
            () = ctx.cancelled() => {
                let reason = ctx.cancel_reason().unwrap_or_else(|| "cancelled".to_owned());
                match ctx.stop_why() {
                    Some(StopWhy::Lost(r)) => (CutWhy::LeaseLost, r),
                    Some(StopWhy::Shutdown) => (CutWhy::Shutdown, reason),
                    _ => (CutWhy::Cancel, reason),
                }
            }
            () = limit => (CutWhy::Timeout, format!("time limit of {:?} passed", self.timeout.unwrap_or_default())),
        };
        let at = now_ms();
        child.signal_group(libc::SIGTERM);
        let grace = match why {
            // the child must be dead before Redis's own deadline for the lease
            CutWhy::LeaseLost => self.lease_lost_grace(ctx),
            _ => self.grace,
        };
        warn!(job = %ctx.job(), step = ctx.step(), why = why.as_str(), %reason, ?grace, "process step cut off: SIGTERM sent to its process group");
        let mut killed = false;
        let status = tokio::select! {
            status = child.wait() => status?,
            () = tokio::time::sleep(grace) => {
                warn!(job = %ctx.job(), step = ctx.step(), ?grace, "the process group outlived its grace: SIGKILL");
                child.signal_group(libc::SIGKILL);
                killed = true;
                child.wait().await?
            }
        };
        Ok(Ended {
            status,
            cut: Some(CutOff {
                why,
                reason,
                at,
                killed,
            }),
        })
    }

    /// The step's result from how the child ended.
    async fn outcome(
        &self,
        ended: &Ended,
        record: &ProcessRecord,
        output_path: &std::path::Path,
    ) -> Result<String, StepError> {
        use std::os::unix::process::ExitStatusExt;
        let program = self.program.to_string_lossy();
        let detail = last_line(&record.stderr_tail).map_or(String::new(), |l| format!(": {l}"));
        if let Some(cut) = &ended.cut {
            let how = if cut.killed {
                "killed (SIGKILL) after its grace"
            } else {
                "stopped by SIGTERM"
            };
            let message = format!(
                "{program} cut off ({}: {}), {how}",
                cut.why.as_str(),
                cut.reason
            );
            return Err(match cut.why {
                // the worker may hold the lease still (a renewal confirmed at
                // the last moment): another attempt may run it
                CutWhy::LeaseLost if cut.reason == MONITOR_CUT => {
                    StepError::retryable(message).with_kind("lease_lost")
                }
                CutWhy::Timeout => StepError::retryable(message).with_kind("timeout"),
                CutWhy::Shutdown => StepError::retryable(message).with_kind("interrupted"),
                CutWhy::Cancel | CutWhy::LeaseLost => {
                    StepError::permanent(message).with_kind("cancelled")
                }
            });
        }
        if let Some(signal) = ended.status.signal() {
            // not sent by the worker (it sends none unless it cuts the step off)
            return Err(StepError::retryable(format!(
                "{program} was killed by {}{detail}",
                signal_name(signal)
            ))
            .with_kind("signal"));
        }
        match ended.status.code() {
            Some(0) => read_output(output_path.to_owned()).await,
            Some(code) => {
                let verdict = self.exit_codes.verdict(code);
                let message = format!("{program} exited with code {code} ({verdict}){detail}");
                Err(if verdict.retryable {
                    StepError::retryable(message)
                } else {
                    StepError::permanent(message)
                }
                .with_kind("exit"))
            }
            None => Err(
                StepError::retryable(format!("{program} ended without an exit code"))
                    .with_kind("exit"),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::JobId;

    /// The last check before the spawn: a step whose lease is already lost
    /// when it is called (the worker's own check before the step passed an
    /// instant earlier) runs nothing and fails retryable with `lease_lost`.
    #[test]
    fn a_step_whose_lease_is_lost_spawns_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("spawned");
        let step = ProcessStep::new("sh")
            .arg("-c")
            .arg("echo ran > \"$1\"")
            .arg("sh")
            .arg(&marker);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();

        let ctx = StepContext::detached(JobId::new(), 1, 1, "load");
        ctx.mark_lease_lost();
        let err = runtime.block_on(step.run(&ctx, None)).unwrap_err();
        assert_eq!(err.kind, "lease_lost", "{err:?}");
        assert!(err.retryable, "{err:?}");
        assert!(!marker.exists(), "the program ran");

        // the same step on a valid lease runs the program (the test can see a spawn)
        let ctx = StepContext::detached(JobId::new(), 1, 1, "load");
        runtime.block_on(step.run(&ctx, None)).unwrap();
        assert_eq!(std::fs::read_to_string(&marker).unwrap(), "ran\n");
    }
}
