//! Resource locks: holders, time left, parked jobs and claimants.

use std::collections::BTreeMap;

use crate::pool::RedisConn;
use deadpool_redis::redis;

use super::{Inspector, LockClaim, LockInfo, CHUNK, MAX_LEASES};
use crate::error::{Error, Result};
use crate::id::JobId;
use crate::record::{Fields, Selected};
use crate::state::JobState;

/// The fields of a job hash that say which resource it claims, and how.
const CLAIM_FIELDS: [&str; 2] = ["resource", "state"];

impl Inspector {
    /// Resource locks: the resources of the LEASED, RUNNING (at most
    /// [`MAX_LEASES`]) and STALE jobs and those with parked jobs, each with its
    /// holder, time left and claimants. There is no index of lock keys, so a
    /// lock whose holder is in none of these indexes is not seen. Sorted by resource.
    pub async fn locks(&self) -> Result<Vec<LockInfo>> {
        let mut conn = self.conn().await?;
        let keys = self.keys();
        let (mut ids, _) = self
            .zrange_capped(&mut conn, &keys.leases(), MAX_LEASES)
            .await?;
        let stale_ids: Vec<String> = self
            .timed(
                redis::cmd("ZRANGE")
                    .arg(keys.stale())
                    .arg(0)
                    .arg(-1)
                    .query_async(&mut conn),
            )
            .await?;
        ids.extend(stale_ids);
        let mut claims: BTreeMap<String, Vec<LockClaim>> = BTreeMap::new();
        for chunk in ids.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            for id in chunk {
                pipe.cmd("HMGET").arg(keys.job(id)).arg(&CLAIM_FIELDS[..]);
            }
            let rows: Vec<Vec<Option<String>>> = self.timed(pipe.query_async(&mut conn)).await?;
            for (id, values) in chunk.iter().zip(&rows) {
                let key = keys.job(id);
                let row = Fields::new(
                    &key,
                    Selected {
                        names: &CLAIM_FIELDS,
                        values,
                    },
                );
                let (Some(resource), Some(_)) = (row.non_empty("resource")?, row.text("state")?)
                else {
                    continue;
                };
                let state = row.state("state")?;
                if matches!(
                    state,
                    JobState::Leased | JobState::Running | JobState::Stale
                ) {
                    claims.entry(resource).or_default().push(LockClaim {
                        job: JobId::parse(id).map_err(|e| row.corrupt("id", e.to_string()))?,
                        state,
                    });
                }
            }
        }
        let parked: Vec<String> = self
            .timed(
                redis::cmd("SMEMBERS")
                    .arg(keys.parked_resources())
                    .query_async(&mut conn),
            )
            .await?;
        for r in parked {
            claims.entry(r).or_default();
        }
        self.lock_infos(&mut conn, claims.into_iter().collect())
            .await
    }

    /// The locks of `resources`, each with the jobs known to claim it; pipelined.
    pub(super) async fn lock_infos(
        &self,
        conn: &mut RedisConn,
        resources: Vec<(String, Vec<LockClaim>)>,
    ) -> Result<Vec<LockInfo>> {
        let keys = self.keys();
        let mut out = Vec::with_capacity(resources.len());
        for chunk in resources.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            for (resource, _) in chunk {
                pipe.cmd("GET").arg(keys.lock(resource));
                pipe.cmd("PTTL").arg(keys.lock(resource));
                pipe.cmd("ZCARD").arg(keys.parked(resource));
            }
            let replies: Vec<(Option<String>, i64, u64)> =
                self.timed(pipe.query_async(conn)).await?;
            let mut locks = Vec::with_capacity(chunk.len());
            for ((resource, claims), (holder, pttl, parked)) in chunk.iter().zip(replies) {
                let key = keys.lock(resource);
                let holder = match holder {
                    None => None,
                    Some(h) => Some(JobId::parse(&h).map_err(|e| Error::Corrupt {
                        key: key.clone(),
                        field: "(value)".into(),
                        problem: e.to_string(),
                    })?),
                };
                let holder_state = holder
                    .as_ref()
                    .and_then(|h| claims.iter().find(|c| c.job == *h))
                    .map(|c| c.state);
                locks.push(LockInfo {
                    resource: resource.clone(),
                    ttl_ms: holder.as_ref().map(|_| pttl),
                    key,
                    holder,
                    holder_state,
                    holder_lease_ms: None,
                    parked,
                    claims: claims.clone(),
                });
            }
            self.holder_leases(conn, &mut locks).await?;
            // holders that are not among the claimants (e.g. a job that just ended)
            let unknown: Vec<usize> = locks
                .iter()
                .enumerate()
                .filter(|(_, l)| l.holder.is_some() && l.holder_state.is_none())
                .map(|(i, _)| i)
                .collect();
            if !unknown.is_empty() {
                let ids: Vec<String> = unknown
                    .iter()
                    .filter_map(|&i| locks[i].holder.as_ref().map(|h| h.as_str().to_owned()))
                    .collect();
                let states = self.states(conn, &ids, &mut Vec::new()).await?;
                for (&i, state) in unknown.iter().zip(states) {
                    locks[i].holder_state = state;
                }
            }
            out.extend(locks);
        }
        Ok(out)
    }

    /// Sets each held lock's `holder_lease_ms` from its holder's lease
    /// deadline (its score in the lease index, one `ZMSCORE`) and Redis
    /// `TIME`. A holder without a lease leaves it `None`.
    async fn holder_leases(&self, conn: &mut RedisConn, locks: &mut [LockInfo]) -> Result<()> {
        let held: Vec<usize> = (0..locks.len())
            .filter(|&i| locks[i].holder.is_some())
            .collect();
        if held.is_empty() {
            return Ok(());
        }
        let mut cmd = redis::cmd("ZMSCORE");
        cmd.arg(self.keys().leases());
        for &i in &held {
            if let Some(h) = &locks[i].holder {
                cmd.arg(h.as_str());
            }
        }
        let deadlines: Vec<Option<String>> = self.timed(cmd.query_async(conn)).await?;
        let now = self.now_on(conn).await?;
        for (&i, deadline) in held.iter().zip(deadlines) {
            locks[i].holder_lease_ms = deadline
                .and_then(|d| d.parse::<i64>().ok())
                .map(|d| d - now);
        }
        Ok(())
    }
}
