//! Reading job hashes in bulk for the views: summaries (`HMGET` of
//! [`SUMMARY_FIELDS`]) and states. A job that cannot be read (a key of the
//! wrong type, a field that is not UTF-8 or does not parse) is left out and
//! reported as [`Unreadable`], naming its key and field: one bad job never
//! fails a listing. The pipelined commands run with `ignore_errors`, so a
//! WRONGTYPE reply is one item's problem, not the whole pipeline's.

use crate::pool::RedisConn;
use deadpool_redis::redis::{self, RedisResult};

use std::collections::{BTreeSet, HashMap};

use super::{retryable, Ending, Inspector, JobSummary, Unreadable, CHUNK};
use crate::error::{Error, Result};
use crate::id::JobId;
use crate::keys::QueueKeys;
use crate::pipeline_spec::PipelineSpec;
use crate::queue::escape_bytes;
use crate::record::{appended, last_entry_step, AttemptRecord, Fields, Selected};
use crate::state::JobState;

/// The fields of a job hash a [`JobSummary`] is built from.
const SUMMARY_FIELDS: [&str; 21] = [
    "id",
    "pipeline",
    "state",
    "attempt",
    "step",
    "last_step",
    "resource",
    "input_key",
    "worker",
    "fence",
    "priority",
    "created_at",
    "updated_at",
    "lease_deadline",
    "stale_at",
    "cancel_reason",
    "waiting",
    "flow",
    "window",
    "input",
    "steps",
];

/// The place of `lease_deadline` in [`SUMMARY_FIELDS`]: always the lease
/// index's score (a job hash written before the deadline left it may still
/// hold an old one, never read).
const LEASE_DEADLINE: usize = 13;

/// Characters of the input a summary shows when the job has no input key.
const INPUT_CHARS: usize = 60;

/// What a job processes, in short: its input key, else the first
/// [`INPUT_CHARS`] characters of its input.
fn input_summary(input_key: Option<&str>, input: Option<&str>) -> String {
    if let Some(k) = input_key {
        return k.to_owned();
    }
    let input = input.unwrap_or("");
    match input.char_indices().nth(INPUT_CHARS) {
        Some((at, _)) => format!("{}…", &input[..at]),
        None => input.to_owned(),
    }
}

/// The step after `last` in `steps` (the first when `last` is none): the one
/// an attempt that completed `last` was in when it ended.
fn step_after(steps: &[String], last: Option<&str>) -> Option<String> {
    match last {
        None => steps.first().cloned(),
        Some(l) => {
            let i = steps.iter().position(|s| s == l)?;
            steps.get(i + 1).cloned()
        }
    }
}

/// The summary of job `id` whose [`SUMMARY_FIELDS`] `row` holds (a hash may
/// leave out its `id`, and any field at its default: see [`crate::Job::from_fields`]).
fn summary(row: &Fields<'_, Selected<'_>>, queue: &str, id: &str) -> Result<JobSummary> {
    // a hash that names another job is never listed as that job
    if let Some(named) = row.text("id")?.filter(|named| *named != id) {
        return Err(row.corrupt(
            "id",
            format!("names job {named:?}, but the key is job {id:?}'s"),
        ));
    }
    Ok(JobSummary {
        id: JobId::parse(id).map_err(|e| row.corrupt("id", e.to_string()))?,
        queue: queue.to_owned(),
        pipeline: row.required("pipeline")?.to_owned(),
        state: row.parsed_required("state")?,
        attempt: row.parsed_required("attempt")?,
        step: row.non_empty("step")?,
        last_step: match row.non_empty("last_step")? {
            // a plain success keeps its last step as the last entry of `steps`
            None if row.text("state")? == Some("SUCCEEDED") => row
                .text("steps")?
                .and_then(last_entry_step)
                .map(str::to_owned),
            s => s,
        },
        resource: row
            .non_empty("resource")?
            .or(slots_resource(row.non_empty("flow")?.as_deref())),
        input_key: row.non_empty("input_key")?,
        worker: row.non_empty("worker")?,
        fence: row.parsed("fence")?,
        priority: row.parsed("priority")?.unwrap_or(0),
        created_at: row.parsed_required("created_at")?,
        updated_at: row.parsed_required("updated_at")?,
        lease_deadline: row.parsed("lease_deadline")?,
        stale_at: row.parsed("stale_at")?,
        cancel_reason: row.non_empty("cancel_reason")?,
        waiting: row.non_empty("waiting")?,
        window: row.non_empty("window")?,
        input: input_summary(row.non_empty("input_key")?.as_deref(), row.text("input")?),
        ended: None,
    })
    .map(|mut s| {
        // a STALE job's worker died mid-step: no record yet
        if s.state == JobState::Stale {
            s.ended = Some(Ending {
                step: s.step.clone(),
                kind: "stale".into(),
                message: format!(
                    "worker {} died: lease expired while running step {}",
                    s.worker.as_deref().unwrap_or("?"),
                    s.step.as_deref().unwrap_or("?")
                ),
                retryable: true,
            });
        }
        s
    })
}

/// Why a FAILED or CANCELLED job's attempt ended, from its record; `steps`
/// are its pipeline's published steps (empty when none was published).
fn ending(s: &JobSummary, rec: &AttemptRecord, steps: &[String]) -> Option<Ending> {
    let retryable = retryable(s.state, rec.error.as_ref()).unwrap_or(false);
    let step = step_after(steps, s.last_step.as_deref());
    if let Some(r) = &rec.resolution {
        // resolved from STALE: the worker died in its cut-off step
        return Some(Ending {
            step: rec.cut_step.clone().or(step),
            kind: "stale".into(),
            message: format!("resolved as {} by {}: {}", s.state, r.by, r.reason),
            retryable,
        });
    }
    match s.state {
        JobState::Failed => Some(match &rec.error {
            Some(e) => Ending {
                step,
                kind: e.kind.clone(),
                message: e.message.clone(),
                retryable,
            },
            None => Ending {
                step,
                kind: "unknown".into(),
                message: rec.reason.clone().unwrap_or_default(),
                retryable,
            },
        }),
        JobState::Cancelled => Some(Ending {
            // cancelled before it ran: no step
            step: rec.started_at.and(step),
            kind: "cancelled".into(),
            message: rec
                .cancel
                .as_ref()
                .map(|c| c.reason.clone())
                .or_else(|| rec.reason.clone())
                .unwrap_or_default(),
            retryable,
        }),
        _ => None,
    }
}

/// The resource a flow text counts in slots (`slots:<N>:<resource>`), if any.
pub(crate) fn slots_resource(flow: Option<&str>) -> Option<String> {
    flow?
        .split_whitespace()
        .find_map(|g| g.strip_prefix("slots:"))
        .and_then(|rest| rest.split_once(':'))
        .map(|(_, res)| res.to_owned())
}

/// The values of one `HMGET` reply as text, or the problem of the first
/// field that is not UTF-8 (or of the key, for a WRONGTYPE error).
fn texts(
    key: &str,
    names: &[&str],
    reply: RedisResult<Vec<Option<Vec<u8>>>>,
) -> std::result::Result<Vec<Option<String>>, Unreadable> {
    let values = reply.map_err(|e| Unreadable::key_error(key, &e))?;
    let mut out = Vec::with_capacity(values.len());
    for (name, value) in names.iter().zip(values) {
        out.push(match value {
            None => None,
            Some(bytes) => Some(String::from_utf8(bytes).map_err(|e| Unreadable {
                key: key.to_owned(),
                field: (*name).to_owned(),
                problem: format!("not UTF-8: {}", escape_bytes(e.as_bytes())),
            })?),
        });
    }
    Ok(out)
}

impl Unreadable {
    /// The problem of a key whose command failed (e.g. WRONGTYPE: not a hash).
    pub(super) fn key_error(key: &str, e: &redis::RedisError) -> Unreadable {
        let problem = if e.code() == Some("WRONGTYPE") {
            "the key holds the wrong kind of value (not a hash)".to_owned()
        } else {
            e.to_string()
        };
        Unreadable {
            key: key.to_owned(),
            field: "(key)".to_owned(),
            problem,
        }
    }

    /// The problem an [`Error::Corrupt`] names; other errors are the problem of `key`.
    pub(super) fn from_error(key: &str, e: &Error) -> Unreadable {
        match e {
            Error::Corrupt {
                key,
                field,
                problem,
            } => Unreadable {
                key: key.clone(),
                field: field.clone(),
                problem: problem.clone(),
            },
            other => Unreadable {
                key: key.to_owned(),
                field: String::new(),
                problem: other.to_string(),
            },
        }
    }
}

impl Inspector {
    /// Summaries of `ids` (missing jobs are left out), in the order given;
    /// jobs that cannot be read are left out and added to `bad`.
    /// Terminal jobs get their worker from their last attempt record.
    pub(super) async fn summaries(
        &self,
        conn: &mut RedisConn,
        ids: &[String],
        bad: &mut Vec<Unreadable>,
    ) -> Result<Vec<JobSummary>> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for id in chunk {
                pipe.cmd("HMGET")
                    .arg(self.keys().job(id))
                    .arg(&SUMMARY_FIELDS[..]);
            }
            let rows: Vec<RedisResult<Vec<Option<Vec<u8>>>>> =
                self.timed(pipe.query_async(conn)).await?;
            // the lease deadlines: the lease index's scores (the job hash keeps none)
            let deadlines: Vec<Option<String>> = self
                .timed(
                    redis::cmd("ZMSCORE")
                        .arg(self.keys().leases())
                        .arg(chunk)
                        .query_async(conn),
                )
                .await?;
            let mut chunk_out = Vec::with_capacity(chunk.len());
            for ((id, reply), deadline) in chunk.iter().zip(rows).zip(deadlines) {
                let key = self.keys().job(id);
                let mut values = match texts(&key, &SUMMARY_FIELDS, reply) {
                    Ok(values) => values,
                    Err(u) => {
                        bad.push(u);
                        continue;
                    }
                };
                if values.iter().all(Option::is_none) {
                    continue; // purged (or a stale index entry)
                }
                values[LEASE_DEADLINE] = deadline;
                let row = Fields::new(
                    &key,
                    Selected {
                        names: &SUMMARY_FIELDS,
                        values: &values,
                    },
                );
                match summary(&row, self.queue().name(), id) {
                    Ok(s) => chunk_out.push(s),
                    Err(e) => bad.push(Unreadable::from_error(&key, &e)),
                }
            }
            self.lay_appended(conn, &mut chunk_out).await?;
            // terminal jobs: the worker and fence of their last attempt, and
            // why a FAILED or CANCELLED one ended
            let bad_end =
                |s: &JobSummary| matches!(s.state, JobState::Failed | JobState::Cancelled);
            let ended: Vec<usize> = chunk_out
                .iter()
                .enumerate()
                .filter(|(_, s)| s.state.is_terminal() && (s.worker.is_none() || bad_end(s)))
                .map(|(i, _)| i)
                .collect();
            let steps = self
                .published_steps(
                    conn,
                    ended.iter().map(|&i| &chunk_out[i]).filter(|s| bad_end(s)),
                )
                .await?;
            if !ended.is_empty() {
                let mut pipe = redis::pipe();
                for &i in &ended {
                    let s = &chunk_out[i];
                    pipe.cmd("HGET")
                        .arg(self.keys().attempts())
                        .arg(QueueKeys::attempt_field(s.id.as_str(), s.attempt));
                }
                let records: Vec<Option<Vec<u8>>> = self.timed(pipe.query_async(conn)).await?;
                for (&i, record) in ended.iter().zip(records) {
                    let Some(text) = record else { continue };
                    let s = &mut chunk_out[i];
                    let rec: AttemptRecord = match serde_json::from_slice(&text) {
                        Ok(rec) => rec,
                        Err(e) => {
                            // the summary stays listed, without its last worker
                            bad.push(Unreadable {
                                key: self.keys().attempts(),
                                field: QueueKeys::attempt_field(s.id.as_str(), s.attempt),
                                problem: format!("not an attempt record: {e}"),
                            });
                            continue;
                        }
                    };
                    if bad_end(s) {
                        let published = steps.get(&s.pipeline).map_or(&[][..], Vec::as_slice);
                        s.ended = ending(s, &rec, published);
                    }
                    if s.worker.is_none() && !rec.worker.is_empty() {
                        s.worker = Some(rec.worker);
                        s.fence = (rec.fence > 0).then_some(rec.fence);
                    }
                }
            }
            out.extend(chunk_out);
        }
        Ok(out)
    }

    /// The published steps of the pipelines of `rows` (one `HMGET` of the
    /// specs), by pipeline; a pipeline no worker published, or whose spec
    /// cannot be read, is left out (its rows get no step).
    async fn published_steps<'a>(
        &self,
        conn: &mut RedisConn,
        rows: impl Iterator<Item = &'a JobSummary>,
    ) -> Result<HashMap<String, Vec<String>>> {
        let names: BTreeSet<&str> = rows.map(|s| s.pipeline.as_str()).collect();
        if names.is_empty() {
            return Ok(HashMap::new());
        }
        let specs: Vec<Option<String>> = self
            .timed(
                redis::cmd("HMGET")
                    .arg(self.keys().pipelines())
                    .arg(names.iter().collect::<Vec<_>>())
                    .query_async(conn),
            )
            .await?;
        Ok(names
            .into_iter()
            .zip(specs)
            .filter_map(|(name, spec)| {
                let spec: PipelineSpec = serde_json::from_str(&spec?).ok()?;
                Some((name.to_owned(), spec.steps))
            })
            .collect())
    }

    /// The `state` field of each job (`None` for a missing job, and for one
    /// whose state cannot be read: that one is added to `bad`).
    pub(super) async fn states(
        &self,
        conn: &mut RedisConn,
        ids: &[String],
        bad: &mut Vec<Unreadable>,
    ) -> Result<Vec<Option<JobState>>> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for id in chunk {
                pipe.cmd("HMGET").arg(self.keys().job(id)).arg("state");
            }
            let states: Vec<RedisResult<Vec<Option<Vec<u8>>>>> =
                self.timed(pipe.query_async(conn)).await?;
            for (id, reply) in chunk.iter().zip(states) {
                let key = self.keys().job(id);
                let state = match texts(&key, &["state"], reply) {
                    Ok(mut v) => v.pop().flatten(),
                    Err(u) => {
                        bad.push(u);
                        out.push(None);
                        continue;
                    }
                };
                if state.is_none() {
                    out.push(None);
                    continue;
                }
                let row = Fields::new(
                    &key,
                    Selected {
                        names: &["state"],
                        values: std::slice::from_ref(&state),
                    },
                );
                match row.state("state") {
                    Ok(s) => out.push(Some(s)),
                    Err(e) => {
                        bad.push(Unreadable::from_error(&key, &e));
                        out.push(None);
                    }
                }
            }
        }
        Ok(out)
    }
}

impl Inspector {
    /// The current and last completed step of each RUNNING job of `rows`
    /// from the latest entry of its outputs list (its live attempt's
    /// checkpoints are there until the seal, `record/appended.rs`); a list
    /// that cannot be read changes nothing.
    async fn lay_appended(&self, conn: &mut RedisConn, rows: &mut [JobSummary]) -> Result<()> {
        let running: Vec<usize> = (0..rows.len())
            .filter(|&i| rows[i].state == JobState::Running && rows[i].fence.is_some())
            .collect();
        if running.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for &i in &running {
            pipe.cmd("LRANGE")
                .arg(self.keys().outputs(rows[i].id.as_str()))
                .arg(-2)
                .arg(-1);
        }
        let latest: Vec<redis::Value> = self.timed(pipe.query_async(conn)).await?;
        for (&i, latest) in running.iter().zip(&latest) {
            let s = &mut rows[i];
            if let Some((step, last)) = s.fence.and_then(|f| appended::current(latest, f)) {
                s.step = step;
                s.last_step = Some(last);
            }
        }
        Ok(())
    }
}
