//! STALE jobs waiting for an operator's decision.

use std::collections::{BTreeMap, HashMap};

use deadpool_redis::redis;

use super::{Inspector, JobSummary, StaleJob, STALL_SAMPLE};
use crate::error::Result;
use crate::pool::RedisConn;
use crate::record::{Fields, Millis, Selected};
use crate::state::JobState;

/// A STALE job's `stale_lock` and `flow` fields.
type PolicyAndFlow = (Option<String>, Option<String>);

impl Inspector {
    /// STALE jobs waiting for an operator, the longest-waiting first, at most
    /// `limit`, each with the lock and flow-control slots it still holds and
    /// the pipelines whose jobs wait for them.
    pub async fn stale(&self, limit: usize) -> Result<Vec<StaleJob>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut conn = self.conn().await?;
        let keys = self.keys();
        let entries: Vec<(String, f64)> = self
            .timed(
                redis::cmd("ZRANGE")
                    .arg(keys.stale())
                    .arg(0)
                    .arg(limit - 1)
                    .arg("WITHSCORES")
                    .query_async(&mut conn),
            )
            .await?;
        let ids: Vec<String> = entries.iter().map(|(id, _)| id.clone()).collect();
        let scores: HashMap<String, f64> = entries.into_iter().collect();
        let summaries: Vec<JobSummary> = self
            .summaries(&mut conn, &ids, &mut Vec::new())
            .await?
            .into_iter()
            .filter(|s| s.state == JobState::Stale)
            .collect();
        let mut pipe = redis::pipe();
        for s in &summaries {
            pipe.cmd("HMGET")
                .arg(keys.job(s.id.as_str()))
                .arg("stale_lock")
                .arg("flow");
            match &s.resource {
                Some(r) => pipe.cmd("GET").arg(keys.lock(r)),
                None => pipe.cmd("ECHO").arg(""),
            };
        }
        let extra: Vec<(PolicyAndFlow, Option<String>)> = if summaries.is_empty() {
            Vec::new()
        } else {
            self.timed(pipe.query_async(&mut conn)).await?
        };
        let mut out = Vec::with_capacity(summaries.len());
        for (s, ((policy, flow), holder)) in summaries.into_iter().zip(extra) {
            let key = keys.job(s.id.as_str());
            let row = Fields::new(
                &key,
                Selected {
                    names: &["stale_lock"],
                    values: std::slice::from_ref(&policy),
                },
            );
            let stale_lock = row.stale_lock("stale_lock")?;
            let stale_at = s
                .stale_at
                .or_else(|| scores.get(s.id.as_str()).map(|v| *v as Millis))
                .unwrap_or(s.updated_at);
            let holds_lock = s
                .resource
                .as_ref()
                .map(|_| holder.as_deref() == Some(s.id.as_str()));
            let holds_slots = self
                .held_slots(&mut conn, s.id.as_str(), flow.as_deref())
                .await?;
            let mut behind: Vec<String> = Vec::new();
            if let (Some(r), Some(true)) = (&s.resource, holds_lock) {
                behind.push(keys.parked(r));
            }
            behind.extend(
                holds_slots
                    .iter()
                    .map(|g| format!("{}:waiting:{g}", keys.base())),
            );
            let stalls = self.pipelines_waiting(&mut conn, &behind).await?;
            out.push(StaleJob {
                job: s,
                stale_at,
                stale_lock,
                holds_lock,
                holds_slots,
                stalls,
            });
        }
        Ok(out)
    }

    /// The concurrency gates (`slots:…`, `running:…`) of job `id`'s `flow`
    /// field that still count it among their holders.
    async fn held_slots(
        &self,
        conn: &mut RedisConn,
        id: &str,
        flow: Option<&str>,
    ) -> Result<Vec<String>> {
        let gates: Vec<String> = flow
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|word| {
                let (kind, rest) = word.split_once(':')?;
                let (_, name) = rest.split_once(':')?;
                (kind == "slots" || kind == "running").then(|| format!("{kind}:{name}"))
            })
            .collect();
        if gates.is_empty() {
            return Ok(gates);
        }
        let mut pipe = redis::pipe();
        for g in &gates {
            pipe.cmd("ZSCORE")
                .arg(format!("{}:{g}", self.keys().base()))
                .arg(id);
        }
        let scores: Vec<Option<f64>> = self.timed(pipe.query_async(conn)).await?;
        Ok(gates
            .into_iter()
            .zip(scores)
            .filter_map(|(g, s)| s.map(|_| g))
            .collect())
    }

    /// Pipeline → jobs waiting in the sets `waiting_sets` (the first
    /// [`STALL_SAMPLE`] of each), read from their hashes.
    async fn pipelines_waiting(
        &self,
        conn: &mut RedisConn,
        waiting_sets: &[String],
    ) -> Result<BTreeMap<String, u64>> {
        let mut out = BTreeMap::new();
        for set in waiting_sets {
            let ids: Vec<String> = self
                .timed(
                    redis::cmd("ZRANGE")
                        .arg(set)
                        .arg(0)
                        .arg(STALL_SAMPLE - 1)
                        .query_async(conn),
                )
                .await?;
            if ids.is_empty() {
                continue;
            }
            let mut pipe = redis::pipe();
            for id in &ids {
                pipe.cmd("HGET").arg(self.keys().job(id)).arg("pipeline");
            }
            // a job that cannot be read is the listings' to report
            let pipelines: Vec<Option<String>> =
                self.timed(pipe.query_async(conn)).await.unwrap_or_default();
            for p in pipelines.into_iter().flatten() {
                *out.entry(p).or_insert(0) += 1;
            }
        }
        Ok(out)
    }
}
