//! STALE jobs waiting for an operator's decision.

use std::collections::HashMap;

use deadpool_redis::redis;

use super::{Inspector, JobSummary, StaleJob};
use crate::error::Result;
use crate::record::{Fields, Millis, Selected};
use crate::state::JobState;

impl Inspector {
    /// STALE jobs waiting for an operator, the longest-waiting first, at most `limit`.
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
            pipe.cmd("HGET")
                .arg(keys.job(s.id.as_str()))
                .arg("stale_lock");
            match &s.resource {
                Some(r) => pipe.cmd("GET").arg(keys.lock(r)),
                None => pipe.cmd("ECHO").arg(""),
            };
        }
        let extra: Vec<(Option<String>, Option<String>)> = if summaries.is_empty() {
            Vec::new()
        } else {
            self.timed(pipe.query_async(&mut conn)).await?
        };
        let mut out = Vec::with_capacity(summaries.len());
        for (s, (policy, holder)) in summaries.into_iter().zip(extra) {
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
            out.push(StaleJob {
                job: s,
                stale_at,
                stale_lock,
                holds_lock,
            });
        }
        Ok(out)
    }
}
