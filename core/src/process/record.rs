//! What a process step leaves with its attempt: how the child ended (exit
//! code or signal, or why and when the worker cut it off), its progress and
//! the tails of its stdout and stderr. Kept in the hash `<base>:proc:<job id>`
//! (field `<attempt>:<step>`), beside the job and not in its hash, written only
//! by process steps and only while the attempt holds its lease; retention
//! deletes it with the job.

use serde::{Deserialize, Serialize};

use crate::error::Result;
#[cfg(unix)]
use crate::lease::Lease;
use crate::queue::Queue;
use crate::record::Millis;
#[cfg(unix)]
use crate::wire::ops::process_log::ProcessLog;

/// Why the worker cut a process step off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CutWhy {
    /// An operator cancelled the job while the step ran.
    Cancel,
    /// The lease was lost, or its local deadline passed without a renewal.
    LeaseLost,
    /// The step ran past its time limit.
    Timeout,
    /// The worker shut down and its grace period ran out.
    Shutdown,
}

impl CutWhy {
    /// The word shown for it.
    pub fn as_str(self) -> &'static str {
        match self {
            CutWhy::Cancel => "cancel",
            CutWhy::LeaseLost => "lease_lost",
            CutWhy::Timeout => "timeout",
            CutWhy::Shutdown => "shutdown",
        }
    }
}

/// How and when the worker cut a process step off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CutOff {
    /// Why.
    pub why: CutWhy,
    /// The reason given (the cancel's, the lost lease's, ...).
    pub reason: String,
    /// When SIGTERM went to the process group (worker's clock, ms since the epoch).
    pub at: Millis,
    /// Whether the group ignored SIGTERM for its grace and was killed (SIGKILL).
    pub killed: bool,
}

/// A process step's record within its attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessRecord {
    /// The attempt.
    pub attempt: u32,
    /// The step.
    pub step: String,
    /// The program's pid (not its monitor's): `kill <pid>` reaches it.
    #[serde(default)]
    pub pid: Option<u32>,
    /// The program's process group (its pid: the program leads it), which
    /// its children join unless they call `setsid`; `kill -- -<pgid>`
    /// reaches them all. Absent in records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pgid: Option<u32>,
    /// When the child was spawned (worker's clock, ms).
    pub started_at: Millis,
    /// When it was reaped; `None` while it runs (a progress report).
    #[serde(default)]
    pub ended_at: Option<Millis>,
    /// Its exit code, when it exited.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    #[serde(default)]
    pub signal: Option<i32>,
    /// How the step ended; [`StepOutcome::Running`] for a progress report.
    pub outcome: StepOutcome,
    /// Why and when the worker cut it off, if it did.
    #[serde(default)]
    pub cut_off: Option<CutOff>,
    /// The last progress it reported (0 to 100).
    #[serde(default)]
    pub progress: Option<f64>,
    /// The last bytes of its stdout (progress lines left out).
    #[serde(default)]
    pub stdout_tail: String,
    /// The last bytes of its stderr.
    #[serde(default)]
    pub stderr_tail: String,
    /// Bytes written to stdout in all.
    #[serde(default)]
    pub stdout_bytes: u64,
    /// Bytes written to stderr in all.
    #[serde(default)]
    pub stderr_bytes: u64,
}

/// How a process step ended, as its record says (`outcome` in the JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepOutcome {
    /// Still running: the record is a progress report.
    Running,
    /// Exited 0 and its output (if any) was read.
    Succeeded,
    /// Failed in a way a new attempt may fix.
    Retryable,
    /// Failed in a way a new attempt will not fix.
    Permanent,
    /// The worker cut it off (cancel, timeout, lost lease, shutdown).
    CutOff,
    /// A word this version does not know (a newer worker wrote it).
    #[serde(other)]
    Unknown,
}

impl StepOutcome {
    /// The word stored in the record.
    pub fn as_str(self) -> &'static str {
        match self {
            StepOutcome::Running => "running",
            StepOutcome::Succeeded => "succeeded",
            StepOutcome::Retryable => "retryable",
            StepOutcome::Permanent => "permanent",
            StepOutcome::CutOff => "cut_off",
            StepOutcome::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for StepOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ProcessRecord {
    /// The record's field in the hash: `<attempt>:<step>`.
    pub fn field(&self) -> String {
        format!("{}:{}", self.attempt, self.step)
    }

    /// When the worker running this step was lost: for a record still
    /// "running" whose attempt went STALE (its worker died or was cut off
    /// and the sweep found the lease expired), the time it went STALE.
    /// `None` for an ended record, or an attempt that did not go STALE.
    pub fn worker_lost_at(&self, job: &crate::record::Job) -> Option<Millis> {
        if self.ended_at.is_some() {
            return None;
        }
        let stale_now = job.stale_attempt_from_hash();
        job.attempts
            .iter()
            .chain(stale_now.as_ref())
            .find(|a| a.n == self.attempt && a.state == crate::state::JobState::Stale)
            .map(|a| a.ended_at)
    }
}

/// Writes `record` for the attempt holding `lease` (token compared: nothing is
/// written once the lease is gone); true when written.
#[cfg(unix)]
pub(crate) async fn write(queue: &Queue, lease: &Lease, record: &ProcessRecord) -> Result<bool> {
    let id = lease.job.to_string();
    let json = serde_json::to_string(record)
        .map_err(|e| crate::error::Error::InvalidArgument(format!("process record: {e}")))?;
    queue
        .run(&ProcessLog {
            job: &id,
            token: &lease.token,
            field: &record.field(),
            json: &json,
        })
        .await
}

/// Reads the process records of job `id` (none for a job without process
/// steps), by attempt then in the order the steps ran.
pub async fn read(queue: &Queue, id: &str) -> Result<Vec<ProcessRecord>> {
    let mut conn = queue.pool().get().await?;
    let fields: Vec<(String, String)> = crate::redis::cmd("HGETALL")
        .arg(queue.keys().process_log(id))
        .query_async(&mut conn)
        .await?;
    let mut records: Vec<ProcessRecord> = fields
        .into_iter()
        .filter_map(|(_, json)| serde_json::from_str(&json).ok())
        .collect();
    records.sort_by_key(|r| (r.attempt, r.started_at));
    Ok(records)
}
