//! A queue at a glance: counts per state, waiting jobs, the oldest waiting
//! job, expired leases, workers, locks and STALE jobs.

use crate::pool::RedisConn;
use deadpool_redis::redis;

use super::GateStatus;
use super::{
    FailingSchedule, Inspector, OldestWaiting, PipelineWaiting, QueueStatus, StateCounts,
    Unreadable, CHUNK, MAX_LEASES, STATUS_STALE_LIMIT, TERMINAL_SAMPLE,
};
use crate::error::Result;
use crate::queue::ScheduleFailing;
use crate::record::Millis;
use crate::state::JobState;

/// Ready-set scores: `(255 - priority) * PRIORITY_SPAN + t` (see `prelude.lua`).
const PRIORITY_SPAN: i64 = 4_398_046_511_104;
/// Jobs read at the head of each priority level for the oldest waiting job:
/// the first, and those that stand in when it cannot be read.
const HEADS_PER_LEVEL: usize = 4;

impl Inspector {
    /// Counts per state, waiting jobs per pipeline, the oldest waiting job,
    /// expired leases, live workers (pruning dead ones), held locks and the
    /// STALE jobs waiting for a decision. A key of the wrong Redis type is
    /// named ([`crate::Error::Corrupt`], field `(key)`).
    pub async fn status(&self) -> Result<QueueStatus> {
        let status = self.status_of_keys().await;
        self.naming_wrong_type(status, None).await
    }

    /// [`Inspector::status`], a key of the wrong type failing it unnamed.
    async fn status_of_keys(&self) -> Result<QueueStatus> {
        let mut conn = self.conn().await?;
        let keys = self.keys().clone();
        let now = self.now_on(&mut conn).await?;
        // what cannot be read is left out of the counts and listed apart
        let mut bad = Vec::new();
        let pipelines = self.pipelines_on(&mut conn, &mut bad).await?;

        let mut pipe = redis::pipe();
        for p in &pipelines {
            // from score 0: a pause marker (scores -1, -2) is not a job
            pipe.cmd("ZCOUNT").arg(keys.ready(p)).arg(0).arg("+inf");
            pipe.cmd("ZCARD").arg(keys.delayed(p));
            pipe.cmd("ZCOUNT").arg(keys.delayed(p)).arg("-inf").arg(now);
        }
        pipe.cmd("ZCARD").arg(keys.leases());
        pipe.cmd("ZCOUNT").arg(keys.leases()).arg("-inf").arg(now);
        pipe.cmd("ZCARD").arg(keys.stale());
        pipe.cmd("ZCARD").arg(keys.done());
        pipe.cmd("LLEN").arg(keys.cleanup());
        pipe.cmd("ZCARD").arg(keys.cleaning());
        pipe.cmd("ZCARD").arg(keys.quarantine());
        let numbers: Vec<u64> = self.timed(pipe.query_async(&mut conn)).await?;
        let mut it = numbers.into_iter();
        let mut next = || it.next().unwrap_or(0);
        let mut waiting = Vec::with_capacity(pipelines.len());
        for p in &pipelines {
            waiting.push(PipelineWaiting {
                pipeline: p.clone(),
                ready: next(),
                delayed: next(),
                due: next(),
            });
        }
        let leases_total = next();
        let expired_leases = next();
        let stale_total = next();
        let terminal_total = next();
        let cleanups_waiting = next();
        let cleanups_claimed = next();
        let quarantined_total = next();

        let parked_resources: Vec<String> = self
            .timed(
                redis::cmd("SMEMBERS")
                    .arg(keys.parked_resources())
                    .query_async(&mut conn),
            )
            .await?;
        let mut parked = 0;
        for chunk in parked_resources.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            for r in chunk {
                pipe.cmd("ZCARD").arg(keys.parked(r));
            }
            let n: Vec<u64> = self.timed(pipe.query_async(&mut conn)).await?;
            parked += n.iter().sum::<u64>();
        }

        let gates = self.gates_on(&mut conn).await?;
        let flow_waiting: u64 = gates.iter().map(|g| g.waiting).sum();
        let mut counts = StateCounts {
            queued: waiting.iter().map(|w| w.ready + w.delayed).sum::<u64>()
                + parked
                + flow_waiting,
            stale: stale_total,
            terminal: terminal_total,
            quarantined: quarantined_total,
            ..StateCounts::default()
        };
        let (lease_ids, _) = self
            .zrange_capped(&mut conn, &keys.leases(), MAX_LEASES)
            .await?;
        for state in self
            .states(&mut conn, &lease_ids, &mut bad)
            .await?
            .into_iter()
            .flatten()
        {
            match state {
                JobState::Leased => counts.leased += 1,
                JobState::Running => counts.running += 1,
                _ => {} // moved on since the index was read
            }
        }
        counts.leases_unclassified = leases_total.saturating_sub(lease_ids.len() as u64);
        let sample: Vec<String> = self
            .timed(
                redis::cmd("ZREVRANGE")
                    .arg(keys.done())
                    .arg(0)
                    .arg(TERMINAL_SAMPLE - 1)
                    .query_async(&mut conn),
            )
            .await?;
        for state in self
            .states(&mut conn, &sample, &mut bad)
            .await?
            .into_iter()
            .flatten()
        {
            let count = match state {
                JobState::Succeeded => &mut counts.succeeded,
                JobState::Failed => &mut counts.failed,
                JobState::Cancelled => &mut counts.cancelled,
                _ => continue, // retried since the index was read
            };
            *count += 1;
            counts.terminal_sampled += 1;
        }

        let waiting_sets: Vec<String> = gates
            .iter()
            .map(|g| format!("{}:waiting:{}", keys.base(), g.gate))
            .collect();
        let oldest_waiting = self
            .oldest_waiting(
                &mut conn,
                now,
                &pipelines,
                &parked_resources,
                &waiting_sets,
                &mut bad,
            )
            .await?;
        let pauses = self.queue().pauses().await?;
        let failing_schedules = self.failing_schedules_on(&mut conn).await?;
        drop(conn);
        let workers = self.workers().await?;
        let locks = self
            .locks()
            .await?
            .into_iter()
            .filter(|l| l.holder.is_some())
            .collect();
        let stale = self.stale(STATUS_STALE_LIMIT).await?;
        let mut quarantined = self.queue().quarantined().await?;
        quarantined.truncate(STATUS_STALE_LIMIT);
        // one job may be unreadable to several reads: count it once
        let mut seen = std::collections::HashSet::new();
        bad.retain(|u| seen.insert((u.key.clone(), u.field.clone())));
        counts.unreadable = bad.len() as u64;
        bad.truncate(STATUS_STALE_LIMIT);
        Ok(QueueStatus {
            queue: self.queue().name().to_owned(),
            now,
            counts,
            pipelines: waiting,
            parked,
            flow_waiting,
            gates,
            pauses,
            oldest_waiting,
            expired_leases,
            cleanups_waiting,
            cleanups_claimed,
            workers: workers.live,
            pruned_workers: workers.pruned,
            locks,
            stale,
            quarantined,
            unreadable: bad,
            failing_schedules,
        })
    }

    /// The schedules whose ticks fail (a `failures` count in their hash).
    async fn failing_schedules_on(&self, conn: &mut RedisConn) -> Result<Vec<FailingSchedule>> {
        let keys = self.keys();
        let names: Vec<String> = self
            .timed(
                redis::cmd("ZRANGE")
                    .arg(keys.schedules())
                    .arg(0)
                    .arg(-1)
                    .query_async(conn),
            )
            .await?;
        let mut out = Vec::new();
        for chunk in names.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            for name in chunk {
                pipe.cmd("HMGET")
                    .arg(keys.schedule(name))
                    .arg("failures")
                    .arg("failing_since")
                    .arg("last_error")
                    .arg("last_error_at");
            }
            let rows: Vec<[Option<String>; 4]> = self.timed(pipe.query_async(conn)).await?;
            for (name, [failures, since, error, at]) in chunk.iter().zip(rows) {
                let int = |v: &Option<String>| v.as_deref().and_then(|v| v.parse::<i64>().ok());
                let Some(failures) = int(&failures).filter(|n| *n > 0) else {
                    continue;
                };
                out.push(FailingSchedule {
                    name: name.clone(),
                    failing: ScheduleFailing {
                        failures: failures as u64,
                        since_ms: int(&since),
                        last_error: error.unwrap_or_default(),
                        last_error_at_ms: int(&at),
                    },
                });
            }
        }
        Ok(out)
    }

    /// The flow-control gates with waiting jobs (the `waiting` index): limit,
    /// holders, waiters.
    async fn gates_on(&self, conn: &mut RedisConn) -> Result<Vec<GateStatus>> {
        let base = self.keys().base().to_owned();
        let mut names: Vec<String> = self
            .timed(
                redis::cmd("SMEMBERS")
                    .arg(format!("{base}:waiting"))
                    .query_async(conn),
            )
            .await?;
        names.sort();
        let mut out = Vec::new();
        for chunk in names.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            for g in chunk {
                pipe.cmd("HGET").arg(format!("{base}:limits")).arg(g);
                pipe.cmd("ZCARD").arg(format!("{base}:{g}"));
                pipe.cmd("ZCARD").arg(format!("{base}:waiting:{g}"));
            }
            let values: Vec<Option<u64>> = self.timed(pipe.query_async(conn)).await?;
            for (g, v) in chunk.iter().zip(values.chunks(3)) {
                let (kind, name) = g.split_once(':').unwrap_or((g.as_str(), ""));
                out.push(GateStatus {
                    gate: g.clone(),
                    kind: kind.to_owned(),
                    name: name.to_owned(),
                    limit: v.first().copied().flatten().unwrap_or(0),
                    held: v.get(1).copied().flatten().unwrap_or(0),
                    waiting: v.get(2).copied().flatten().unwrap_or(0),
                });
            }
        }
        Ok(out)
    }

    /// The waiting job created first. Candidates: the head of every priority
    /// level of each ready and parked set (one bounded `ZRANGE` per level, of
    /// [`HEADS_PER_LEVEL`] jobs), and
    /// the head of each delayed set.
    async fn oldest_waiting(
        &self,
        conn: &mut RedisConn,
        now: Millis,
        pipelines: &[String],
        parked_resources: &[String],
        waiting_sets: &[String],
        bad: &mut Vec<Unreadable>,
    ) -> Result<Option<OldestWaiting>> {
        let keys = self.keys();
        let mut candidates: Vec<String> = Vec::new();
        let banded = pipelines
            .iter()
            .map(|p| keys.ready(p))
            .chain(parked_resources.iter().map(|r| keys.parked(r)))
            .chain(waiting_sets.iter().cloned());
        for key in banded {
            // from score 0: a pause marker (scores -1, -2) is not a job
            let mut min = "0".to_owned();
            // at most 256 priority levels
            for _ in 0..=256 {
                let head: Vec<(String, f64)> = self
                    .timed(
                        redis::cmd("ZRANGE")
                            .arg(&key)
                            .arg(&min)
                            .arg("+inf")
                            .arg("BYSCORE")
                            .arg("LIMIT")
                            .arg(0)
                            .arg(HEADS_PER_LEVEL)
                            .arg("WITHSCORES")
                            .query_async(conn),
                    )
                    .await?;
                let Some(&(_, score)) = head.first() else {
                    break;
                };
                // the level's oldest, and a few behind it in case it is unreadable
                candidates.extend(head.into_iter().map(|(id, _)| id));
                let band = (score as i64).div_euclid(PRIORITY_SPAN);
                min = ((band + 1) * PRIORITY_SPAN).to_string();
            }
        }
        for p in pipelines {
            let head: Vec<String> = self
                .timed(
                    redis::cmd("ZRANGE")
                        .arg(keys.delayed(p))
                        .arg(0)
                        .arg(0)
                        .query_async(conn),
                )
                .await?;
            candidates.extend(head);
        }
        let mut best: Option<OldestWaiting> = None;
        for s in self.summaries(conn, &candidates, bad).await? {
            if s.state != JobState::Queued {
                continue;
            }
            if best
                .as_ref()
                .is_none_or(|b| (s.created_at, &s.id) < (b.created_at, &b.job))
            {
                best = Some(OldestWaiting {
                    job: s.id,
                    pipeline: s.pipeline,
                    created_at: s.created_at,
                    age_ms: now - s.created_at,
                });
            }
        }
        Ok(best)
    }
}
