//! Job and attempt records as read back from Redis, with typed errors for
//! anything leasehold did not write.
//!
//! The fields of a job hash are read by one reader, `fields::Fields`, which the
//! inspector's bulk reads share.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::id::JobId;
use crate::state::JobState;

pub(crate) mod appended;
mod fields;

pub(crate) use fields::{last_entry_step, Fields, Selected};

/// Milliseconds since the Unix epoch, from Redis `TIME`.
pub type Millis = i64;

/// Instant `ms` as UTC RFC 3339 with milliseconds (`2026-05-06T00:00:00.000Z`),
/// for logs and messages; `<ms> ms since the epoch` when out of range.
pub fn utc(ms: Millis) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(t) => format!("{t:.3}"),
        Err(_) => format!("{ms} ms since the epoch"),
    }
}

/// What happens to a job's resource lock when it goes STALE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StaleLock {
    /// Keep the lock until an operator retries or resolves the job (the default).
    #[default]
    Hold,
    /// Release it at once; other jobs on the resource may run.
    Release,
}

impl StaleLock {
    /// The value stored in Redis.
    pub const fn as_str(self) -> &'static str {
        match self {
            StaleLock::Hold => "hold",
            StaleLock::Release => "release",
        }
    }
}

/// The setting's word (`stale_lock = "release"`), read by its one definition
/// (`leasehold_syntax::setting::STALE_LOCK`): the macro and the pipelines file
/// accept the same words and refuse others in the same words.
impl std::str::FromStr for StaleLock {
    type Err = leasehold_syntax::setting::SettingError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let word = leasehold_syntax::setting::STALE_LOCK.parse(s)?;
        Ok(if word == StaleLock::Release.as_str() {
            StaleLock::Release
        } else {
            StaleLock::Hold
        })
    }
}

/// A recorded cancel request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelRequest {
    /// Why.
    pub reason: String,
    /// When it was recorded (ms).
    #[serde(default)]
    pub at: Option<Millis>,
    /// Who asked.
    #[serde(default)]
    pub by: String,
}

/// The live lease on a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseInfo {
    /// The holder's secret; only the holder can move the job.
    pub token: String,
    /// The fencing number (grows per queue; sinks reject lower ones).
    pub fence: u64,
    /// The worker instance holding it.
    pub worker: String,
    /// When it expires unless renewed (ms).
    pub deadline: Millis,
}

/// A completed step of an attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepDone {
    /// Step name.
    pub step: String,
    /// When its checkpoint was recorded (ms).
    pub at: Millis,
}

/// Why an attempt failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptError {
    /// A short machine-readable kind (`timeout`, `panic`, `validation`, ...).
    pub kind: String,
    /// The message.
    pub message: String,
    /// The step's verdict: whether retrying may help. Kept as the step gave it,
    /// also when no automatic attempt is left (see `retries_exhausted`).
    pub retryable: bool,
    /// Retryable, but no automatic retry was made because the automatic
    /// attempts are used up: the job's `max_attempts`, or the failing step's own
    /// retry policy. Given to `finish`, it ends the attempt FAILED even when the
    /// job has attempts left (the worker sets it when the step's policy is spent).
    /// Absent (false) in records written before it existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retries_exhausted: bool,
}

/// An operator's decision on a STALE attempt, recorded beside the attempt's
/// facts (which it never changes: the attempt still ended when it went STALE,
/// in its cut-off step).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolution {
    /// `retry` or `resolve`.
    pub action: String,
    /// Who decided.
    pub by: String,
    /// Why.
    pub reason: String,
    /// When it was decided (ms); absent in records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Millis>,
    /// The job's state the decision gave: QUEUED for a retry, the resolved
    /// state for a resolve; absent in records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<JobState>,
    /// A retry's mode (`resume` or `start`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

/// The final, append-only record of one attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// Attempt number, from 1.
    pub n: u32,
    /// How it ended: STALE for an attempt whose worker died mid-step (the
    /// operator's decision on it is in `resolution`; records written before
    /// that say the resolved state here).
    pub state: JobState,
    /// The worker that held it ('' if never leased).
    #[serde(default)]
    pub worker: String,
    /// Its fencing number (0 if never leased).
    #[serde(default)]
    pub fence: u64,
    /// When it was leased.
    #[serde(default)]
    pub leased_at: Option<Millis>,
    /// When its first step started.
    #[serde(default)]
    pub started_at: Option<Millis>,
    /// When it ended (for a STALE attempt, when it went STALE: the sweep
    /// found its lease expired).
    pub ended_at: Millis,
    /// Steps completed in this attempt, in order.
    #[serde(default)]
    pub steps: Vec<StepDone>,
    /// The error, for a failed attempt.
    #[serde(default)]
    pub error: Option<AttemptError>,
    /// The reason given when it ended, if any.
    #[serde(default)]
    pub reason: Option<String>,
    /// The cancel request it honoured, if any.
    #[serde(default)]
    pub cancel: Option<CancelRequest>,
    /// Whether a step was cut mid-way and cleanup is needed.
    #[serde(default)]
    pub cleanup_needed: bool,
    /// The step that was running when a STALE attempt's worker died (cut off
    /// mid-way; absent in records written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_step: Option<String>,
    /// The operator's decision, for an attempt that went STALE.
    #[serde(default)]
    pub resolution: Option<Resolution>,
}

/// A job as stored in Redis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Id (time-sortable).
    pub id: JobId,
    /// Queue.
    pub queue: String,
    /// Pipeline name.
    pub pipeline: String,
    /// The fixed input boundary, as JSON.
    pub input: serde_json::Value,
    /// Idempotency key: one non-terminal job per key.
    pub input_key: Option<String>,
    /// Resource whose lock the job takes.
    pub resource: Option<String>,
    /// Higher runs first (0–255).
    pub priority: u8,
    /// Not leased before this time (ms).
    pub not_before: Millis,
    /// Automatic retries stop after this many attempts.
    pub max_attempts: u32,
    /// What happens to the lock when the job goes STALE.
    pub stale_lock: StaleLock,
    /// Created (ms).
    pub created_at: Millis,
    /// Last changed (ms).
    pub updated_at: Millis,
    /// Current attempt number, from 1.
    pub attempt: u32,
    /// State of the current attempt.
    pub state: JobState,
    /// The step running or next to run, if any.
    pub step: Option<String>,
    /// The last completed step (a resumed attempt continues after it).
    pub last_step: Option<String>,
    /// Outputs of completed steps, by step name (JSON null for a completed
    /// step of the current attempt, or the last one, that returned nothing:
    /// no output is stored for those).
    pub outputs: BTreeMap<String, serde_json::Value>,
    /// The cancel request, if one was made.
    pub cancel: Option<CancelRequest>,
    /// A step was cut mid-way: cleanup is needed.
    pub cleanup_needed: bool,
    /// The live lease, if any.
    pub lease: Option<LeaseInfo>,
    /// The worker that holds or last held the current attempt (kept while STALE).
    pub worker: Option<String>,
    /// The fencing number of the current attempt's lease (kept while STALE).
    pub fence: Option<u64>,
    /// When the current attempt was leased.
    pub leased_at: Option<Millis>,
    /// When the current attempt started running.
    pub started_at: Option<Millis>,
    /// Steps completed in the current attempt.
    pub steps: Vec<StepDone>,
    /// When the job went STALE.
    pub stale_at: Option<Millis>,
    /// The job this one re-runs: the previous latest job of its input key.
    pub previous: Option<JobId>,
    /// Records of ended attempts, by number.
    pub attempts: Vec<AttemptRecord>,
}

impl Job {
    /// The record of a plain success's attempt, built from the job hash: `finish`
    /// writes no record for a SUCCEEDED attempt ended without a reason, because
    /// the hash keeps everything it would hold (worker, fence, leased_at,
    /// started_at, steps, a cancel request that came too late; the end time is
    /// `updated_at`). `None` for any other job, or when attempt `attempt` has a
    /// record already.
    pub fn final_attempt_from_hash(&self) -> Option<AttemptRecord> {
        if self.state != JobState::Succeeded || self.attempts.iter().any(|a| a.n == self.attempt) {
            return None;
        }
        Some(AttemptRecord {
            n: self.attempt,
            state: JobState::Succeeded,
            worker: self.worker.clone().unwrap_or_default(),
            fence: self.fence.unwrap_or(0),
            leased_at: self.leased_at,
            started_at: self.started_at,
            ended_at: self.updated_at,
            steps: self.steps.clone(),
            error: None,
            reason: None,
            cancel: self.cancel.clone(),
            cleanup_needed: self.cleanup_needed,
            cut_step: None,
            resolution: None,
        })
    }

    /// The record of a STALE attempt awaiting an operator's decision, built
    /// from the job hash: the facts as they stood when it went STALE (ended
    /// then, the running step cut off). `retry` and `resolve` write the same
    /// record with the decision added beside it (lib/stale.lua
    /// `stale_record`). `None` for any other job, or when attempt `attempt`
    /// has a record already.
    pub fn stale_attempt_from_hash(&self) -> Option<AttemptRecord> {
        if self.state != JobState::Stale || self.attempts.iter().any(|a| a.n == self.attempt) {
            return None;
        }
        Some(AttemptRecord {
            n: self.attempt,
            state: JobState::Stale,
            worker: self.worker.clone().unwrap_or_default(),
            fence: self.fence.unwrap_or(0),
            leased_at: self.leased_at,
            started_at: self.started_at,
            ended_at: self.stale_at.unwrap_or(self.updated_at),
            steps: self.steps.clone(),
            error: None,
            reason: None,
            cancel: self.cancel.clone(),
            cleanup_needed: self.cleanup_needed,
            cut_step: self.step.clone(),
            resolution: None,
        })
    }

    /// Builds a job from the fields of its hash (`HGETALL`). `key` names the hash in errors.
    /// A field at its default may be absent (the scripts leave those out): the
    /// id and the queue are then the ones `key` names (`<prefix>:{<queue>}:job:<id>`),
    /// `not_before` is `created_at`, and the input key, resource, step and last
    /// step are none, the priority 0, `max_attempts` 1, the STALE lock policy hold and
    /// `cleanup_needed` false; an empty value reads the same. A job past
    /// LEASED without `started_at` started when it was leased (its lease call
    /// started it), and a SUCCEEDED one without `last_step` has the last
    /// entry of `steps` as its last step. The lease
    /// deadline is the lease index's score, not a field of the hash: the
    /// caller adds it to `map` as `lease_deadline` ([`Queue::job`](crate::Queue::job) does).
    /// Attempt records live in the queue's attempts hash and are added by
    /// [`Queue::job`](crate::Queue::job), with the one of a plain success (see
    /// [`Job::final_attempt_from_hash`]); `attempt:<n>` fields of the hash itself
    /// (the layout before that hash existed) are still read.
    pub fn from_fields(key: &str, map: HashMap<String, Vec<u8>>) -> Result<Job, Error> {
        let f = Fields::new(key, map);
        let input_text = f.required("input")?;
        let input = serde_json::from_str(input_text)
            .map_err(|e| f.corrupt("input", format!("not JSON: {e}")))?;
        let stale_lock = f.stale_lock("stale_lock")?;
        let mut outputs = BTreeMap::new();
        let mut attempts = Vec::new();
        for (name, value) in f.values() {
            if let Some(step) = name.strip_prefix("out:") {
                let text = f.required(name)?;
                let value = serde_json::from_str(text)
                    .map_err(|e| f.corrupt(name, format!("output is not JSON: {e}")))?;
                outputs.insert(step.to_owned(), value);
            } else if name.starts_with("attempt:") {
                let record: AttemptRecord = serde_json::from_slice(value)
                    .map_err(|e| f.corrupt(name, format!("not an attempt record: {e}")))?;
                attempts.push(record);
            }
        }
        attempts.sort_by_key(|a| a.n);
        let cancel = match f.non_empty("cancel_reason")? {
            None => None,
            Some(reason) => Some(CancelRequest {
                reason,
                at: f.parsed("cancel_at")?,
                by: f.non_empty("cancel_by")?.unwrap_or_default(),
            }),
        };
        let lease = match f.non_empty("token")? {
            None => None,
            Some(token) => Some(LeaseInfo {
                token,
                fence: f.parsed_required("fence")?,
                worker: f.required("worker")?.to_owned(),
                deadline: f.parsed_required("lease_deadline")?,
            }),
        };
        let state = f.state("state")?;
        let (key_queue, key_id) = names_of_job_key(key).unwrap_or_default();
        let id = match f.text("id")? {
            // a hash that names another job than its key is never read as that job
            Some(id) if !key_id.is_empty() && id != key_id => {
                return Err(f.corrupt(
                    "id",
                    format!("names job {id:?}, but the key is job {key_id:?}'s"),
                ))
            }
            Some(id) => id,
            None if !key_id.is_empty() => key_id,
            None => return Err(f.corrupt("id", "missing")),
        };
        let created_at = f.parsed_required("created_at")?;
        let leased_at = f.parsed("leased_at")?;
        // a job started by its lease call has no `started_at` (lease.lua): past
        // LEASED, it started when it was leased
        let started_at = match f.parsed("started_at")? {
            None if !matches!(state, JobState::Queued | JobState::Leased) => leased_at,
            s => s,
        };
        // a plain success keeps no `last_step` when its attempt completed a
        // step: the last entry of `steps` (finish.lua)
        let steps = f.steps("steps", started_at)?;
        let last_step = match f.non_empty("last_step")? {
            None if state == JobState::Succeeded => steps.last().map(|s| s.step.clone()),
            s => s,
        };
        // a completed step's output is written only when it returned something:
        // one without it returned JSON null
        for step in steps.iter().map(|s| &s.step).chain(last_step.as_ref()) {
            outputs
                .entry(step.clone())
                .or_insert(serde_json::Value::Null);
        }
        Ok(Job {
            id: JobId::parse(id).map_err(|e| f.corrupt("id", e.to_string()))?,
            queue: match f.non_empty("queue")? {
                Some(queue) => queue,
                None if !key_queue.is_empty() => key_queue.to_owned(),
                None => return Err(f.corrupt("queue", "missing")),
            },
            pipeline: f.required("pipeline")?.to_owned(),
            input,
            input_key: f.non_empty("input_key")?,
            resource: f.non_empty("resource")?,
            priority: f.parsed("priority")?.unwrap_or(0),
            not_before: f.parsed("not_before")?.unwrap_or(created_at),
            max_attempts: f.parsed("max_attempts")?.unwrap_or(1),
            stale_lock,
            created_at,
            updated_at: f.parsed_required("updated_at")?,
            attempt: f.parsed_required("attempt")?,
            state,
            step: f.non_empty("step")?,
            last_step,
            outputs,
            cancel,
            cleanup_needed: f.text("cleanup_needed")? == Some("1"),
            lease,
            worker: f.non_empty("worker")?,
            fence: f.parsed("fence")?,
            leased_at,
            started_at,
            steps,
            stale_at: f.parsed("stale_at")?,
            previous: f
                .non_empty("previous")?
                .map(|p| JobId::parse(&p).map_err(|e| f.corrupt("previous", e.to_string())))
                .transpose()?,
            attempts,
        })
    }
}

/// The queue and the id a job key `<prefix>:{<queue>}:job:<id>` names (a
/// prefix and a queue name never hold braces), or `None` for another key.
pub(crate) fn names_of_job_key(key: &str) -> Option<(&str, &str)> {
    let (_, rest) = key.split_once('{')?;
    let (queue, rest) = rest.split_once('}')?;
    let id = rest.strip_prefix(":job:")?;
    Some((queue, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(extra: &[(&str, &str)]) -> HashMap<String, Vec<u8>> {
        let mut map: HashMap<String, Vec<u8>> = [
            ("id", "01a22d2f-872a-758b-a797-ff7590ecd27c"),
            ("queue", "q"),
            ("pipeline", "p"),
            ("input", "{}"),
            ("created_at", "1000"),
            ("updated_at", "2000"),
            ("attempt", "1"),
            ("state", "SUCCEEDED"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect();
        for (k, v) in extra {
            map.insert(k.to_string(), v.as_bytes().to_vec());
        }
        map
    }

    #[test]
    fn step_times_count_from_the_start_or_are_absolute() {
        let job = Job::from_fields(
            "k",
            fields(&[
                ("started_at", "1500"),
                ("steps", "fetch@+5,load@1600,save@+0"),
                ("worker", "w1"),
                ("fence", "7"),
                ("leased_at", "1400"),
            ]),
        )
        .expect("readable");
        let at: Vec<(&str, Millis)> = job.steps.iter().map(|s| (s.step.as_str(), s.at)).collect();
        assert_eq!(at, [("fetch", 1505), ("load", 1600), ("save", 1500)]);
        // a success without a record: its last attempt comes from the hash
        let last = job.final_attempt_from_hash().expect("built from the hash");
        assert_eq!((last.n, last.worker.as_str(), last.fence), (1, "w1", 7));
        assert_eq!(
            (last.leased_at, last.started_at, last.ended_at),
            (Some(1400), Some(1500), 2000)
        );
        assert_eq!(last.steps, job.steps);
    }

    #[test]
    fn a_relative_step_time_without_a_start_is_a_typed_error() {
        for (steps, started) in [
            ("fetch@+5", None),
            ("fetch@+x", Some("1500")),
            ("fetch", Some("1500")),
        ] {
            let mut extra = vec![("steps", steps)];
            if let Some(s) = started {
                extra.push(("started_at", s));
            }
            match Job::from_fields("k", fields(&extra)) {
                Err(Error::Corrupt { field, .. }) => assert_eq!(field, "steps", "{steps}"),
                other => panic!("{steps}: {other:?}"),
            }
        }
    }

    /// The words the `stale_lock` setting's definition accepts are the values stored.
    #[test]
    fn the_stale_lock_words_are_the_stored_names() {
        for word in leasehold_syntax::setting::STALE_LOCK.words {
            assert_eq!(word.parse::<StaleLock>().map(StaleLock::as_str), Ok(*word));
        }
    }
}
