//! Events of a queue's stream: the [`Event`] type, parsing of stream entries,
//! and the inspector's reads of the stream (a job's events, the latest events).

use std::collections::HashMap;

use deadpool_redis::redis;
use serde::{Deserialize, Serialize};

use super::{Inspector, MAX_EVENTS_SCANNED};
use crate::error::{Error, Result};
use crate::id::JobId;
use crate::record::Millis;
use crate::state::JobState;

/// Stream entries per `XREVRANGE` page.
const EVENT_PAGE: usize = 1_000;
/// Slack between the stream's clock and `TIME` when bounding a job's events by its creation time.
const CLOCK_SLACK_MS: i64 = 5_000;

/// One entry of a queue's event stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Queue.
    pub queue: String,
    /// Stream entry id (`<ms>-<seq>`).
    pub id: String,
    /// When (ms, from the entry id).
    pub at: Millis,
    /// Operation: `enqueue`, `lease`, `start`, `finish`, `retry`, `release`, `cancel`, `sweep`, `resolve`.
    pub op: String,
    /// Job.
    pub job: JobId,
    /// The attempt concerned.
    pub attempt: u32,
    /// State before (`None` for `enqueue`).
    pub from: Option<JobState>,
    /// State after (equal to `from` for a cancel request).
    pub to: JobState,
    /// Worker or operator (see `docs/redis-keys.md`).
    pub by: String,
    /// Reason, if any.
    pub reason: String,
}

/// The millisecond part of a stream entry id.
fn entry_ms(key: &str, id: &str) -> Result<Millis> {
    id.split_once('-')
        .and_then(|(ms, _)| ms.parse().ok())
        .ok_or_else(|| Error::Corrupt {
            key: key.to_owned(),
            field: "entry id".into(),
            problem: format!("{id:?} is not <ms>-<seq>"),
        })
}

/// The event of stream entry `id` of `queue`'s stream `key`, from its flat field list.
pub(super) fn parse_event(queue: &str, key: &str, id: String, flat: Vec<String>) -> Result<Event> {
    let mut map: HashMap<String, String> = HashMap::new();
    let mut it = flat.into_iter();
    while let Some(name) = it.next() {
        map.insert(name, it.next().unwrap_or_default());
    }
    let corrupt = |field: &str, problem: String| Error::Corrupt {
        key: key.to_owned(),
        field: format!("{field} (entry {id})"),
        problem,
    };
    let take = |map: &mut HashMap<String, String>, field: &str| {
        map.remove(field)
            .ok_or_else(|| corrupt(field, "missing".into()))
    };
    let op = take(&mut map, "op")?;
    let job_text = take(&mut map, "job")?;
    let job = JobId::parse(&job_text).map_err(|e| corrupt("job", e.to_string()))?;
    let attempt_text = take(&mut map, "attempt")?;
    let attempt = attempt_text
        .parse()
        .map_err(|_| corrupt("attempt", format!("{attempt_text:?} is not a number")))?;
    let state = |map: &mut HashMap<String, String>, field: &str| -> Result<Option<JobState>> {
        match map.remove(field).as_deref() {
            None | Some("") => Ok(None),
            Some(s) => s
                .parse()
                .map(Some)
                .map_err(|e| corrupt(field, format!("{e}"))),
        }
    };
    let from = state(&mut map, "from")?;
    let to = state(&mut map, "to")?.ok_or_else(|| corrupt("to", "missing".into()))?;
    Ok(Event {
        queue: queue.to_owned(),
        at: entry_ms(key, &id)?,
        op,
        job,
        attempt,
        from,
        to,
        by: map.remove("by").unwrap_or_default(),
        reason: map.remove("reason").unwrap_or_default(),
        id,
    })
}

/// Stream entries as `XRANGE` and friends return them: id and flat field list.
pub(super) type RawEntries = Vec<(String, Vec<String>)>;

impl Inspector {
    /// The events of job `id` still in the stream, oldest first. Reads the
    /// stream backwards in pages and stops at the job's `enqueue` event, at
    /// entries older than its creation, or after [`MAX_EVENTS_SCANNED`] entries.
    pub async fn job_events(&self, id: &JobId) -> Result<Vec<Event>> {
        let mut conn = self.conn().await?;
        let created: Option<String> = self
            .timed(
                redis::cmd("HGET")
                    .arg(self.keys().job(id.as_str()))
                    .arg("created_at")
                    .query_async(&mut conn),
            )
            .await?;
        let created = created.and_then(|s| s.parse().ok());
        drop(conn);
        self.events_of(id, created).await
    }

    /// The events of job `id`, created at `created_at` if known, oldest first.
    pub(super) async fn events_of(
        &self,
        id: &JobId,
        created_at: Option<Millis>,
    ) -> Result<Vec<Event>> {
        let mut conn = self.conn().await?;
        let key = self.keys().events();
        let floor = created_at.map(|c| c - CLOCK_SLACK_MS);
        let mut end = "+".to_owned();
        let mut scanned = 0usize;
        let mut out = Vec::new();
        'pages: while scanned < MAX_EVENTS_SCANNED {
            let page: RawEntries = self
                .timed(
                    redis::cmd("XREVRANGE")
                        .arg(&key)
                        .arg(&end)
                        .arg("-")
                        .arg("COUNT")
                        .arg(EVENT_PAGE)
                        .query_async(&mut conn),
                )
                .await?;
            let len = page.len();
            for (entry, flat) in page {
                scanned += 1;
                if floor.is_some_and(|f| entry_ms(&key, &entry).is_ok_and(|ms| ms < f)) {
                    break 'pages;
                }
                end = format!("({entry}");
                // cheap filter before parsing the whole entry
                if !flat
                    .chunks(2)
                    .any(|kv| kv[0] == "job" && kv.get(1).map(String::as_str) == Some(id.as_str()))
                {
                    continue;
                }
                let event = parse_event(self.queue().name(), &key, entry, flat)?;
                let first = event.op == "enqueue";
                out.push(event);
                if first {
                    break 'pages;
                }
            }
            if len < EVENT_PAGE {
                break;
            }
        }
        out.reverse();
        Ok(out)
    }

    /// Up to `count` events, oldest first: those after stream entry `since`
    /// (exclusive), or, without `since`, the last `count` events.
    pub async fn events(&self, since: Option<&str>, count: usize) -> Result<Vec<Event>> {
        let mut conn = self.conn().await?;
        let key = self.keys().events();
        let raw: RawEntries = match since {
            Some(since) => {
                self.timed(
                    redis::cmd("XRANGE")
                        .arg(&key)
                        .arg(format!("({since}"))
                        .arg("+")
                        .arg("COUNT")
                        .arg(count.max(1))
                        .query_async(&mut conn),
                )
                .await?
            }
            None => {
                let mut raw: RawEntries = self
                    .timed(
                        redis::cmd("XREVRANGE")
                            .arg(&key)
                            .arg("+")
                            .arg("-")
                            .arg("COUNT")
                            .arg(count.max(1))
                            .query_async(&mut conn),
                    )
                    .await?;
                raw.reverse();
                raw
            }
        };
        raw.into_iter()
            .map(|(id, flat)| parse_event(self.queue().name(), &key, id, flat))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_entries_parse_and_corrupt_ones_name_the_field() {
        let flat = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .flat_map(|(k, v)| [k.to_string(), v.to_string()])
                .collect::<Vec<_>>()
        };
        let ok = parse_event(
            "q",
            "p:{q}:events",
            "1796035961436-0".into(),
            flat(&[
                ("op", "enqueue"),
                ("job", "j1"),
                ("attempt", "1"),
                ("from", ""),
                ("to", "QUEUED"),
                ("by", ""),
                ("reason", ""),
            ]),
        )
        .unwrap();
        assert_eq!(ok.at, 1_796_035_961_436);
        assert_eq!(ok.from, None);
        assert_eq!(ok.to, JobState::Queued);
        let bad = parse_event(
            "q",
            "p:{q}:events",
            "1-0".into(),
            flat(&[
                ("op", "lease"),
                ("job", "j1"),
                ("attempt", "x"),
                ("to", "LEASED"),
            ]),
        )
        .unwrap_err();
        match bad {
            Error::Corrupt { key, field, .. } => {
                assert_eq!(key, "p:{q}:events");
                assert_eq!(field, "attempt (entry 1-0)");
            }
            other => panic!("{other:?}"),
        }
    }
}
