//! Records kept beside the jobs: published pipeline specs, cleanup-hook
//! claims, and reading a job with its attempt records.

use std::collections::HashMap;
use std::time::Duration;

use deadpool_redis::redis::{self, AsyncCommands, Value};

use crate::error::{Error, Result};
use crate::id::JobId;
use crate::pipeline_spec::PipelineSpec;
use crate::queue::Queue;
use crate::record::{appended, AttemptRecord, Job};
use crate::wire::keys::QueueKeys;
use crate::wire::ops::claim_cleanup::ClaimCleanup;

/// A job hash's fields and its lease deadline (the lease index's score).
type HashAndDeadline = (HashMap<String, Vec<u8>>, Option<String>);

impl Queue {
    /// Publishes what a worker serves about `spec`'s pipeline (see [`PipelineSpec`]).
    pub async fn register_pipeline(&self, spec: &PipelineSpec) -> Result<()> {
        let json = serde_json::to_string(spec)
            .map_err(|e| Error::InvalidArgument(format!("pipeline spec: {e}")))?;
        let mut conn = self.conn().await?;
        let _: i64 = self
            .timed(conn.hset(self.keys.pipelines(), &spec.name, json))
            .await?;
        drop(conn);
        // a queue paused before this pipeline was known pauses it too
        self.apply_queue_pause(&spec.name).await
    }

    /// The spec a worker published for `pipeline`, if any worker serving it ran.
    pub async fn pipeline_spec(&self, pipeline: &str) -> Result<Option<PipelineSpec>> {
        let mut conn = self.conn().await?;
        let key = self.keys.pipelines();
        let json: Option<String> = self.timed(conn.hget(&key, pipeline)).await?;
        json.map(|j| {
            serde_json::from_str(&j).map_err(|e| Error::Corrupt {
                key: key.clone(),
                field: pipeline.to_owned(),
                problem: format!("not a pipeline spec: {e}"),
            })
        })
        .transpose()
    }

    /// Claims up to `n` jobs from the cleanup list (STALE jobs resolved as FAILED
    /// or CANCELLED) whose pipeline is one of `pipelines`, for `ttl`. Mark each
    /// done with [`Queue::cleanup_done`] once its hook ran; a claim not marked
    /// done by then goes back on the list (its worker died), so a hook runs at
    /// least once. Ids come back as Redis holds them.
    pub async fn claim_cleanups(
        &self,
        n: usize,
        pipelines: &[&str],
        ttl: Duration,
    ) -> Result<Vec<String>> {
        if pipelines.is_empty() {
            return Ok(Vec::new());
        }
        self.run(&ClaimCleanup { n, pipelines, ttl }).await
    }

    /// Ends the claim on a job's cleanup hook (it ran, or can never run).
    pub async fn cleanup_done(&self, id: &str) -> Result<()> {
        let mut conn = self.conn().await?;
        let _: i64 = self.timed(conn.zrem(self.keys.cleaning(), id)).await?;
        Ok(())
    }

    /// Reads a job, with every attempt record (the last one of a plain success
    /// built from the job hash). `None` when it does not exist.
    pub async fn job(&self, id: &JobId) -> Result<Option<Job>> {
        let key = self.keys.job(id.as_str());
        let mut conn = self.conn().await?;
        // the hash and its lease deadline (the lease index's score: the hash
        // keeps none) in one round trip; not a transaction, which a cluster
        // client cannot follow to a slot's new owner (a MOVED inside MULTI
        // aborts it): a renewal between the two reads only moves the deadline
        let read: Result<HashAndDeadline> = self
            .timed(
                redis::pipe()
                    .hgetall(&key)
                    .zscore(self.keys.leases(), id.as_str())
                    .query_async(&mut conn),
            )
            .await;
        let (mut map, deadline) = match read {
            Ok(read) => read,
            Err(e) => {
                // WRONGTYPE names no key: the job's hash, unless it is one,
                // in which case the lease index is the key of the wrong kind
                let job_is_hash = self
                    .timed(
                        redis::cmd("TYPE")
                            .arg(&key)
                            .query_async::<String>(&mut conn),
                    )
                    .await
                    .is_ok_and(|t| t == "hash");
                return Err(if job_is_hash {
                    e.naming_key(&self.keys.leases(), "sorted set")
                } else {
                    e.naming_key(&key, "hash")
                });
            }
        };
        if map.is_empty() {
            return Ok(None);
        }
        // a live attempt's steps and outputs are in its outputs list until
        // its seal (a seal after the hash was read: the entries of an attempt
        // the hash still shows RUNNING; a list that cannot be read: none)
        if map.get("state").is_some_and(|s| s.as_slice() == b"RUNNING") {
            let list: Value = self
                .timed(
                    redis::cmd("LRANGE")
                        .arg(self.keys.outputs(id.as_str()))
                        .arg(0)
                        .arg(-1)
                        .query_async(&mut conn),
                )
                .await
                .or_else(|e| match e {
                    // a key of another type (written by hand): nothing in it counts
                    Error::Redis(re) if re.code() == Some("WRONGTYPE") => Ok(Value::Nil),
                    e => Err(e),
                })?;
            appended::overlay(&mut map, &appended::entries(&list));
        }
        // a hash written before the deadline left it may hold an old one: the index decides
        map.remove("lease_deadline");
        if let Some(d) = deadline {
            map.insert("lease_deadline".into(), d.into_bytes());
        }
        // the attempt records live in the queue's attempts hash, `<id>:<n>` for n = 1..attempt
        let attempt: u32 = map
            .get("attempt")
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|t| t.parse().ok())
            .unwrap_or(0);
        let mut job = Job::from_fields(&key, map)?;
        if attempt > 0 {
            let attempts_key = self.keys.attempts();
            let fields: Vec<String> = (1..=attempt.min(10_000))
                .map(|n| QueueKeys::attempt_field(id.as_str(), n))
                .collect();
            let texts: Vec<Option<Vec<u8>>> = self
                .timed(
                    redis::cmd("HMGET")
                        .arg(&attempts_key)
                        .arg(&fields)
                        .query_async(&mut conn),
                )
                .await?;
            for (field, text) in fields.iter().zip(texts) {
                let Some(text) = text else { continue };
                let record: AttemptRecord =
                    serde_json::from_slice(&text).map_err(|e| Error::Corrupt {
                        key: attempts_key.clone(),
                        field: field.clone(),
                        problem: format!("not an attempt record: {e}"),
                    })?;
                if !job.attempts.iter().any(|a| a.n == record.n) {
                    job.attempts.push(record);
                }
            }
        }
        // a plain success's last attempt is described by the job hash itself
        if let Some(last) = job.final_attempt_from_hash() {
            job.attempts.push(last);
        }
        job.attempts.sort_by_key(|a| a.n);
        Ok(Some(job))
    }
}
