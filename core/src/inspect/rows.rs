//! Reading job hashes in bulk for the views: summaries (`HMGET` of
//! [`SUMMARY_FIELDS`]) and states.

use deadpool_redis::redis;
use deadpool_redis::Connection;

use super::{Inspector, JobSummary, CHUNK};
use crate::error::{Error, Result};
use crate::id::JobId;
use crate::keys::QueueKeys;
use crate::record::{AttemptRecord, Fields, Selected};
use crate::state::JobState;

/// The fields of a job hash a [`JobSummary`] is built from.
const SUMMARY_FIELDS: [&str; 16] = [
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
];

/// The summary of the job whose [`SUMMARY_FIELDS`] `row` holds.
fn summary(row: &Fields<'_, Selected<'_>>, queue: &str) -> Result<JobSummary> {
    let id = row.required("id")?;
    Ok(JobSummary {
        id: JobId::parse(id).map_err(|e| row.corrupt("id", e.to_string()))?,
        queue: queue.to_owned(),
        pipeline: row.required("pipeline")?.to_owned(),
        state: row.parsed_required("state")?,
        attempt: row.parsed_required("attempt")?,
        step: row.non_empty("step")?,
        last_step: row.non_empty("last_step")?,
        resource: row.non_empty("resource")?,
        input_key: row.non_empty("input_key")?,
        worker: row.non_empty("worker")?,
        fence: row.parsed("fence")?,
        priority: row.parsed("priority")?.unwrap_or(0),
        created_at: row.parsed_required("created_at")?,
        updated_at: row.parsed_required("updated_at")?,
        lease_deadline: row.parsed("lease_deadline")?,
        stale_at: row.parsed("stale_at")?,
        cancel_reason: row.non_empty("cancel_reason")?,
    })
}

impl Inspector {
    /// Summaries of `ids` (missing jobs are left out), in the order given.
    /// Terminal jobs get their worker from their last attempt record.
    pub(super) async fn summaries(
        &self,
        conn: &mut Connection,
        ids: &[String],
    ) -> Result<Vec<JobSummary>> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            for id in chunk {
                pipe.cmd("HMGET")
                    .arg(self.keys().job(id))
                    .arg(&SUMMARY_FIELDS[..]);
            }
            let rows: Vec<Vec<Option<String>>> = self.timed(pipe.query_async(conn)).await?;
            let mut chunk_out = Vec::with_capacity(chunk.len());
            for (id, values) in chunk.iter().zip(&rows) {
                if values.iter().all(Option::is_none) {
                    continue; // purged (or a stale index entry)
                }
                let key = self.keys().job(id);
                let row = Fields::new(
                    &key,
                    Selected {
                        names: &SUMMARY_FIELDS,
                        values,
                    },
                );
                chunk_out.push(summary(&row, self.queue().name())?);
            }
            // terminal jobs: the worker and fence of their last attempt
            let ended: Vec<usize> = chunk_out
                .iter()
                .enumerate()
                .filter(|(_, s)| s.state.is_terminal() && s.worker.is_none())
                .map(|(i, _)| i)
                .collect();
            if !ended.is_empty() {
                let mut pipe = redis::pipe();
                for &i in &ended {
                    let s = &chunk_out[i];
                    pipe.cmd("HGET")
                        .arg(self.keys().attempts())
                        .arg(QueueKeys::attempt_field(s.id.as_str(), s.attempt));
                }
                let records: Vec<Option<String>> = self.timed(pipe.query_async(conn)).await?;
                for (&i, record) in ended.iter().zip(records) {
                    let Some(text) = record else { continue };
                    let s = &mut chunk_out[i];
                    let rec: AttemptRecord =
                        serde_json::from_str(&text).map_err(|e| Error::Corrupt {
                            key: self.keys().attempts(),
                            field: QueueKeys::attempt_field(s.id.as_str(), s.attempt),
                            problem: format!("not an attempt record: {e}"),
                        })?;
                    if !rec.worker.is_empty() {
                        s.worker = Some(rec.worker);
                        s.fence = (rec.fence > 0).then_some(rec.fence);
                    }
                }
            }
            out.extend(chunk_out);
        }
        Ok(out)
    }

    /// The `state` field of each job (`None` for a missing job).
    pub(super) async fn states(
        &self,
        conn: &mut Connection,
        ids: &[String],
    ) -> Result<Vec<Option<JobState>>> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            for id in chunk {
                pipe.cmd("HGET").arg(self.keys().job(id)).arg("state");
            }
            let states: Vec<Option<String>> = self.timed(pipe.query_async(conn)).await?;
            for (id, state) in chunk.iter().zip(&states) {
                if state.is_none() {
                    out.push(None);
                    continue;
                }
                let key = self.keys().job(id);
                let row = Fields::new(
                    &key,
                    Selected {
                        names: &["state"],
                        values: std::slice::from_ref(state),
                    },
                );
                out.push(Some(row.state("state")?));
            }
        }
        Ok(out)
    }
}
