//! The per-minute counters behind the dashboard's charts: jobs that ended or
//! moved each minute, per pipeline, and the waiting jobs sampled once a minute,
//! read from the `<base>:stats:<minute>` hashes the scripts keep for 25 hours
//! (`core/lua/lib/stats.lua`; one `HGETALL` per minute asked for, pipelined).

use std::collections::BTreeMap;

use deadpool_redis::redis;
use serde::{Deserialize, Serialize};

use super::{Inspector, CHUNK};
use crate::error::{Error, Result};
use crate::record::Millis;

/// Most minutes one [`Inspector::history`] call reads (the counters' retention).
pub const HISTORY_MAX_MINUTES: usize = 1500;

/// One pipeline's counts in one minute.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MinuteCounts {
    /// Jobs that ended SUCCEEDED.
    pub succeeded: u64,
    /// Jobs that ended FAILED.
    pub failed: u64,
    /// Jobs that ended CANCELLED (at a worker's finish or a sweep).
    pub cancelled: u64,
    /// Failed attempts that queued an automatic retry.
    pub retried: u64,
    /// Jobs the sweep made STALE.
    pub stale: u64,
    /// Waiting jobs (ready + delayed) when sampled, if a sweep sampled this minute.
    pub waiting: Option<u64>,
    /// Age of the oldest ready job when sampled (ms), if any waited.
    pub oldest_ms: Option<i64>,
}

/// One minute of a queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Minute {
    /// The minute's start (ms).
    pub at: Millis,
    /// Whether the waiting jobs were sampled in it.
    pub sampled: bool,
    /// Counts per pipeline (pipelines with nothing that minute are absent).
    pub pipelines: BTreeMap<String, MinuteCounts>,
}

/// The last minutes of a queue, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    /// Queue.
    pub queue: String,
    /// Redis `TIME` when read (ms).
    pub now: Millis,
    /// Every minute asked for, the current one last (empty ones included).
    pub minutes: Vec<Minute>,
}

/// Adds field `field` = `value` of a minute's hash to `minute`; unknown fields are ignored.
fn apply(minute: &mut Minute, field: &str, value: &str) {
    if field == "sampled" {
        minute.sampled = true;
        return;
    }
    let Some((pipeline, what)) = field.rsplit_once(':') else {
        return;
    };
    let Ok(n) = value.parse::<i64>() else {
        return;
    };
    let count = u64::try_from(n).unwrap_or(0);
    let c = minute.pipelines.entry(pipeline.to_owned()).or_default();
    match what {
        "succeeded" => c.succeeded = count,
        "failed" => c.failed = count,
        "cancelled" => c.cancelled = count,
        "retried" => c.retried = count,
        "stale" => c.stale = count,
        "waiting" => c.waiting = Some(count),
        "oldest_ms" => c.oldest_ms = Some(n.max(0)),
        _ => {}
    }
}

impl Inspector {
    /// The last `minutes` minutes (the current one included, at most
    /// [`HISTORY_MAX_MINUTES`]) of the queue's counters.
    pub async fn history(&self, minutes: usize) -> Result<History> {
        if minutes == 0 || minutes > HISTORY_MAX_MINUTES {
            return Err(Error::InvalidArgument(format!(
                "history of {minutes} minutes: give 1 to {HISTORY_MAX_MINUTES}"
            )));
        }
        let mut conn = self.conn().await?;
        let now = self.now_on(&mut conn).await?;
        let current = now.div_euclid(60_000);
        let first = current - (minutes as i64) + 1;
        let all: Vec<i64> = (first..=current).collect();
        let mut out = Vec::with_capacity(all.len());
        for chunk in all.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            for m in chunk {
                pipe.cmd("HGETALL").arg(self.keys().stats(*m));
            }
            let replies: Vec<BTreeMap<String, String>> =
                self.timed(pipe.query_async(&mut conn)).await?;
            for (m, fields) in chunk.iter().zip(replies) {
                let mut minute = Minute {
                    at: m * 60_000,
                    sampled: false,
                    pipelines: BTreeMap::new(),
                };
                for (f, v) in &fields {
                    apply(&mut minute, f, v);
                }
                out.push(minute);
            }
        }
        Ok(History {
            queue: self.queue().name().to_owned(),
            now,
            minutes: out,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_name_the_pipeline_before_the_last_colon() {
        let mut m = Minute {
            at: 0,
            sampled: false,
            pipelines: BTreeMap::new(),
        };
        apply(&mut m, "a:b:succeeded", "3");
        apply(&mut m, "a:b:oldest_ms", "1200");
        apply(&mut m, "sampled", "1");
        apply(&mut m, "x:nonsense", "1");
        apply(&mut m, "x:failed", "not a number");
        assert!(m.sampled);
        assert_eq!(m.pipelines["a:b"].succeeded, 3);
        assert_eq!(m.pipelines["a:b"].oldest_ms, Some(1200));
        assert_eq!(m.pipelines["x"], MinuteCounts::default());
    }
}
