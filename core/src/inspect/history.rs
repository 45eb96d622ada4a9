//! The counters behind the dashboard's charts: jobs that ended or moved each
//! minute, per pipeline, and the waiting jobs sampled once a minute, read from
//! the `<base>:stats:<minute>` hashes the scripts keep for 25 hours, or from
//! their hourly (8 days) and daily (92 days, UTC days) roll-ups
//! (`core/lua/lib/stats.lua`; one `HGETALL` per point asked for, pipelined).
//! A roll-up point also gets the minutes not folded into it yet, so the
//! current hour and day are whole.

use std::collections::BTreeMap;

use deadpool_redis::redis::{self, FromRedisValue};
use serde::{Deserialize, Serialize};

use super::{Inspector, CHUNK};
use crate::error::{Error, Result};
use crate::record::Millis;

/// Most minutes one [`Inspector::history`] call reads (the counters' retention).
pub const HISTORY_MAX_MINUTES: usize = 1500;

/// How long one point of a [`History`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Granularity {
    /// A minute (kept 25 hours).
    Minute,
    /// An hour (kept 8 days).
    Hour,
    /// A UTC day (kept 92 days).
    Day,
}

impl Granularity {
    /// Milliseconds per point.
    pub fn ms(self) -> i64 {
        match self {
            Granularity::Minute => 60_000,
            Granularity::Hour => 3_600_000,
            Granularity::Day => 86_400_000,
        }
    }

    /// Most points kept.
    pub fn max_points(self) -> usize {
        match self {
            Granularity::Minute => HISTORY_MAX_MINUTES,
            Granularity::Hour => 8 * 24,
            Granularity::Day => 92,
        }
    }
}

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

/// One point of a queue's history: a minute, or an hour or day of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Minute {
    /// The point's start (ms).
    pub at: Millis,
    /// Whether the waiting jobs were sampled in it.
    pub sampled: bool,
    /// Every QUEUED job of the queue when sampled (ready, delayed, parked,
    /// waiting for a flow-control slot): what `status` counts; in a roll-up, the
    /// largest sample.
    pub waiting: Option<u64>,
    /// Age of the QUEUED job created first when sampled (ms), as `status`
    /// computes it; in a roll-up, the largest sample.
    pub oldest_ms: Option<i64>,
    /// Counts per pipeline (pipelines with nothing that minute are absent).
    pub pipelines: BTreeMap<String, MinuteCounts>,
}

/// The last points of a queue, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    /// Queue.
    pub queue: String,
    /// Redis `TIME` when read (ms).
    pub now: Millis,
    /// How long each point is.
    pub granularity: Granularity,
    /// Every point asked for, the current one last (empty ones included).
    pub minutes: Vec<Minute>,
}

fn larger<T: Ord + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// Adds field `field` = `value` of a counters' hash to `minute`: counts are
/// added, gauges keep the larger value; unknown fields are ignored.
fn apply(minute: &mut Minute, field: &str, value: &str) {
    if field == "sampled" {
        minute.sampled = true;
        return;
    }
    let Ok(n) = value.parse::<i64>() else {
        return;
    };
    let count = u64::try_from(n).unwrap_or(0);
    let Some((pipeline, what)) = field.rsplit_once(':') else {
        match field {
            "waiting" => minute.waiting = larger(minute.waiting, Some(count)),
            "oldest_ms" => minute.oldest_ms = larger(minute.oldest_ms, Some(n.max(0))),
            _ => {}
        }
        return;
    };
    let c = minute.pipelines.entry(pipeline.to_owned()).or_default();
    match what {
        "succeeded" => c.succeeded = c.succeeded.saturating_add(count),
        "failed" => c.failed = c.failed.saturating_add(count),
        "cancelled" => c.cancelled = c.cancelled.saturating_add(count),
        "retried" => c.retried = c.retried.saturating_add(count),
        "stale" => c.stale = c.stale.saturating_add(count),
        "waiting" => c.waiting = larger(c.waiting, Some(count)),
        "oldest_ms" => c.oldest_ms = larger(c.oldest_ms, Some(n.max(0))),
        _ => {}
    }
}

impl Inspector {
    /// The last `minutes` minutes (the current one included, at most
    /// [`HISTORY_MAX_MINUTES`]) of the queue's counters.
    pub async fn history(&self, minutes: usize) -> Result<History> {
        self.history_at(Granularity::Minute, minutes).await
    }

    /// The last `points` points of `granularity` (the current one included, at
    /// most [`Granularity::max_points`]) of the queue's counters.
    pub async fn history_at(&self, granularity: Granularity, points: usize) -> Result<History> {
        if points == 0 || points > granularity.max_points() {
            return Err(Error::InvalidArgument(format!(
                "history of {points} {granularity:?} points: give 1 to {}",
                granularity.max_points()
            )));
        }
        let mut conn = self.conn().await?;
        let now = self.now_on(&mut conn).await?;
        let step = granularity.ms();
        let current = now.div_euclid(step);
        let first = current - (points as i64) + 1;
        let all: Vec<i64> = (first..=current).collect();
        let keys = self.keys();
        let key = |n: i64| match granularity {
            Granularity::Minute => keys.stats(n),
            Granularity::Hour => keys.stats_hour(n),
            Granularity::Day => keys.stats_day(n),
        };
        let mut out = Vec::with_capacity(all.len());
        let push = |out: &mut Vec<Minute>, n: i64, fields: &BTreeMap<String, String>| {
            let mut point = Minute {
                at: n * step,
                sampled: false,
                waiting: None,
                oldest_ms: None,
                pipelines: BTreeMap::new(),
            };
            for (f, v) in fields {
                apply(&mut point, f, v);
            }
            out.push(point);
        };
        if granularity == Granularity::Minute {
            for chunk in all.chunks(CHUNK) {
                let mut pipe = redis::pipe();
                for n in chunk {
                    pipe.cmd("HGETALL").arg(key(*n));
                }
                let replies: Vec<BTreeMap<String, String>> =
                    self.timed(pipe.query_async(&mut conn)).await?;
                for (n, fields) in chunk.iter().zip(replies) {
                    push(&mut out, *n, &fields);
                }
            }
        } else {
            // the roll-ups between two reads of the last minute folded into
            // them (read again if a fold came in between: at most 192
            // points), then the minutes not folded yet, so each minute is
            // counted once
            let mut tries = 0;
            let (replies, rolled) = loop {
                let mut pipe = redis::pipe();
                pipe.cmd("GET").arg(keys.stats_rolled());
                for n in &all {
                    pipe.cmd("HGETALL").arg(key(*n));
                }
                pipe.cmd("GET").arg(keys.stats_rolled());
                let mut values: Vec<redis::Value> = self.timed(pipe.query_async(&mut conn)).await?;
                let mark = |v: Option<redis::Value>| {
                    v.and_then(|v| <Option<i64> as FromRedisValue>::from_redis_value(v).ok())
                        .flatten()
                };
                let after = mark(values.pop());
                let before = mark(if values.is_empty() {
                    None
                } else {
                    Some(values.remove(0))
                });
                tries += 1;
                if before != after && tries < 5 {
                    continue;
                }
                let mut maps = Vec::with_capacity(values.len());
                for (n, v) in all.iter().zip(values) {
                    maps.push(
                        <BTreeMap<String, String> as FromRedisValue>::from_redis_value(v).map_err(
                            |e| Error::Corrupt {
                                key: key(*n),
                                field: "(hash)".into(),
                                problem: e.to_string(),
                            },
                        )?,
                    );
                }
                break (maps, after);
            };
            for (n, fields) in all.iter().zip(replies) {
                push(&mut out, *n, &fields);
            }
            let this_minute = now.div_euclid(60_000);
            let oldest_kept = this_minute - HISTORY_MAX_MINUTES as i64 + 1;
            let from = rolled
                .map_or(oldest_kept, |r| r + 1)
                .max(oldest_kept)
                .max((first * step).div_euclid(60_000));
            let minutes: Vec<i64> = (from..=this_minute).collect();
            for chunk in minutes.chunks(CHUNK) {
                let mut pipe = redis::pipe();
                for m in chunk {
                    pipe.cmd("HGETALL").arg(keys.stats(*m));
                }
                let replies: Vec<BTreeMap<String, String>> =
                    self.timed(pipe.query_async(&mut conn)).await?;
                for (m, fields) in chunk.iter().zip(replies) {
                    let at = (m * 60_000).div_euclid(step) * step;
                    if let Some(point) = out.iter_mut().find(|p| p.at == at) {
                        for (f, v) in &fields {
                            apply(point, f, v);
                        }
                    }
                }
            }
        }
        Ok(History {
            queue: self.queue().name().to_owned(),
            now,
            granularity,
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
            waiting: None,
            oldest_ms: None,
            pipelines: BTreeMap::new(),
        };
        apply(&mut m, "a:b:succeeded", "3");
        apply(&mut m, "a:b:succeeded", "2");
        apply(&mut m, "waiting", "7");
        apply(&mut m, "waiting", "4");
        apply(&mut m, "a:b:oldest_ms", "1200");
        apply(&mut m, "sampled", "1");
        apply(&mut m, "x:nonsense", "1");
        apply(&mut m, "x:failed", "not a number");
        assert!(m.sampled);
        assert_eq!(m.pipelines["a:b"].succeeded, 5);
        assert_eq!(m.waiting, Some(7));
        assert_eq!(m.pipelines["a:b"].oldest_ms, Some(1200));
        assert_eq!(m.pipelines["x"], MinuteCounts::default());
    }
}
