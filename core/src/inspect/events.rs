//! Events of a queue's stream: the [`Event`] type, parsing of stream entries,
//! and the inspector's reads of the stream (a job's events, the latest events).
//!
//! One stream entry holds one event, or, written by a `settle` call, every
//! happy-path event of that call (no reason, one `by`): the first in the usual
//! fields, the others in the field `more` as five space-separated words each,
//! `<op> <job> <attempt> <from> <to>` (`core/lua/lib/events.lua`).
//! [`parse_entry`] expands an entry into its events, in the order they happened.

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
    /// Stream entry id (`<ms>-<seq>`); the events one `settle` call
    /// gathered into one entry share it.
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

/// The events of stream entry `id` of `queue`'s stream `key`, from its flat
/// field list: the one in its fields, then those of its `more` field (the
/// entry's `by`, no reason), in the order they happened.
pub(crate) fn parse_entry(
    queue: &str,
    key: &str,
    id: String,
    mut flat: Vec<String>,
) -> Result<Vec<Event>> {
    let more = flat
        .chunks(2)
        .position(|kv| kv[0] == "more")
        .map(|i| flat.drain(2 * i..(2 * i + 2).min(flat.len())).nth(1));
    let first = parse_event(queue, key, id, flat)?;
    let Some(Some(more)) = more else {
        return Ok(vec![first]);
    };
    let words: Vec<&str> = more.split(' ').collect();
    let corrupt = |problem: String| Error::Corrupt {
        key: key.to_owned(),
        field: format!("more (entry {})", first.id),
        problem,
    };
    if !words.len().is_multiple_of(5) {
        return Err(corrupt(format!(
            "{} words, not five per event",
            words.len()
        )));
    }
    let mut out = Vec::with_capacity(1 + words.len() / 5);
    for w in words.chunks(5) {
        let state = |s: &str| -> Result<JobState> {
            s.parse()
                .map_err(|e| corrupt(format!("{e} (event of job {:?})", w[1])))
        };
        out.push(Event {
            queue: first.queue.clone(),
            id: first.id.clone(),
            at: first.at,
            op: w[0].to_owned(),
            job: JobId::parse(w[1]).map_err(|e| corrupt(e.to_string()))?,
            attempt: w[2]
                .parse()
                .map_err(|_| corrupt(format!("attempt {:?} is not a number", w[2])))?,
            from: match w[3] {
                "" => None,
                s => Some(state(s)?),
            },
            to: state(w[4])?,
            by: first.by.clone(),
            reason: String::new(),
        });
    }
    out.insert(0, first);
    Ok(out)
}

/// Stream entries as `XRANGE` and friends return them: id and flat field list.
pub(crate) type RawEntries = Vec<(String, Vec<String>)>;

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
                if !flat.chunks(2).any(|kv| {
                    let v = kv.get(1).map(String::as_str).unwrap_or_default();
                    (kv[0] == "job" && v == id.as_str())
                        || (kv[0] == "more" && v.split(' ').any(|w| w == id.as_str()))
                }) {
                    continue;
                }
                // newest first: an entry's events go in reversed
                let mut first = false;
                for event in parse_entry(self.queue().name(), &key, entry, flat)?
                    .into_iter()
                    .rev()
                {
                    if event.job != *id {
                        continue;
                    }
                    first |= event.op == "enqueue";
                    out.push(event);
                }
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

    /// Events, oldest first: those of up to `count` stream entries after entry
    /// `since` (exclusive; an entry's events come whole, so there may be more
    /// than `count`, and the last one's id is the next `since`), or, without
    /// `since`, the last `count` events.
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
        let mut out = Vec::with_capacity(raw.len());
        for (id, flat) in raw {
            out.extend(parse_entry(self.queue().name(), &key, id, flat)?);
        }
        if since.is_none() && out.len() > count.max(1) {
            out.drain(..out.len() - count.max(1));
        }
        Ok(out)
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

    #[test]
    fn an_entry_of_a_settle_call_expands_into_its_events_in_order() {
        let flat: Vec<String> = [
            ("op", "finish"),
            ("job", "j1"),
            ("attempt", "1"),
            ("from", "RUNNING"),
            ("to", "SUCCEEDED"),
            ("by", "w-1"),
            (
                "more",
                "start j2 1 QUEUED RUNNING finish j2 2 RUNNING SUCCEEDED",
            ),
        ]
        .iter()
        .flat_map(|(k, v)| [k.to_string(), v.to_string()])
        .collect();
        let events = parse_entry("q", "p:{q}:events", "7-3".into(), flat.clone()).unwrap();
        let seen: Vec<String> = events
            .iter()
            .map(|e| {
                format!(
                    "{} {} {} {:?}->{:?} by {} in {}",
                    e.op, e.job, e.attempt, e.from, e.to, e.by, e.id
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                "finish j1 1 Some(Running)->Succeeded by w-1 in 7-3",
                "start j2 1 Some(Queued)->Running by w-1 in 7-3",
                "finish j2 2 Some(Running)->Succeeded by w-1 in 7-3",
            ]
        );
        assert!(events.iter().all(|e| e.at == 7 && e.reason.is_empty()));
        // a `more` that is not five words per event is a typed error naming it
        let mut bad = flat;
        let last = bad.len() - 1;
        bad[last] = "start j2 1 QUEUED".into();
        match parse_entry("q", "p:{q}:events", "7-3".into(), bad) {
            Err(Error::Corrupt { field, .. }) => assert_eq!(field, "more (entry 7-3)"),
            other => panic!("{other:?}"),
        }
    }
}
