//! What a live attempt appended: the pairs of its job's outputs list
//! (`<base>:out:<id>`, written by checkpoints, `wire/append.rs`), read as the
//! seal in `core/lua/lib/outputs.lua` reads them. Until the attempt is sealed
//! its completed steps, last step, outputs and current step are there, not in
//! the job hash; the readers lay them over the hash's fields.

use std::collections::{HashMap, HashSet};

use deadpool_redis::redis::Value;

/// One entry of an outputs list, of the holder's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Appended {
    /// When the step completed, on the holder's clock (ms).
    pub(crate) at: i64,
    /// The fence of the attempt that wrote it.
    pub(crate) fence: String,
    /// The lease token it was written with.
    pub(crate) token: String,
    /// The step completed.
    pub(crate) step: String,
    /// The step that runs next ('' after the last).
    pub(crate) next: String,
    /// The step's output, JSON text.
    pub(crate) output: String,
}

/// The entries of an `LRANGE` reply (pairs: `<fence>@<token>@<ms>@<next>@<step>`,
/// output) of the holder's shape, in order; others are skipped, as the seal
/// skips them. A reply that is not a list gives none.
pub(crate) fn entries(reply: &Value) -> Vec<Appended> {
    let Value::Array(items) = reply else {
        return Vec::new();
    };
    items
        .chunks_exact(2)
        .filter_map(|pair| entry(text(&pair[0])?.as_str(), text(&pair[1])?))
        .collect()
}

/// One pair of the holder's shape.
fn entry(head: &str, output: String) -> Option<Appended> {
    let mut parts = head.splitn(5, '@');
    let (fence, token, at, next, step) = (
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
    );
    if fence.is_empty() || !fence.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if step.is_empty() || step.contains([',', '@']) {
        return None;
    }
    Some(Appended {
        at: at.parse().ok()?,
        fence: fence.to_owned(),
        token: token.to_owned(),
        step: step.to_owned(),
        next: next.to_owned(),
        output,
    })
}

/// A bulk or simple string reply as UTF-8 text.
fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// Lays what the live attempt appended over job hash `map`: when the job is
/// RUNNING, the entries of its fence and token give its
/// `steps` (as the seal will write them), `last_step`, `out:<step>` and its
/// current `step` (the latest entry's next). Entries of other fences (a holder
/// that outlived its lease) count for no one and change nothing.
pub(crate) fn overlay(map: &mut HashMap<String, Vec<u8>>, appended: &[Appended]) {
    let field = |m: &HashMap<String, Vec<u8>>, name: &str| {
        m.get(name)
            .and_then(|v| std::str::from_utf8(v).ok())
            .map(str::to_owned)
    };
    if field(map, "state").as_deref() != Some("RUNNING") {
        return;
    }
    let (Some(fence), Some(token)) = (field(map, "fence"), field(map, "token")) else {
        return;
    };
    // a job started by its lease call has no `started_at`: it started when leased
    let started_at: Option<i64> = field(map, "started_at")
        .or_else(|| field(map, "leased_at"))
        .and_then(|s| s.parse().ok());
    let mut steps = field(map, "steps").unwrap_or_default();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut latest: Option<&Appended> = None;
    for e in appended {
        if e.fence != fence || e.token != token || !seen.insert(&e.step) {
            continue;
        }
        if !steps.is_empty() {
            steps.push(',');
        }
        match started_at {
            Some(s) => steps.push_str(&format!("{}@+{}", e.step, (e.at - s).max(0))),
            None => steps.push_str(&format!("{}@{}", e.step, e.at)),
        }
        if e.output != "null" {
            map.insert(format!("out:{}", e.step), e.output.clone().into_bytes());
        }
        latest = Some(e);
    }
    let Some(latest) = latest else { return };
    map.insert("steps".into(), steps.into_bytes());
    map.insert("last_step".into(), latest.step.clone().into_bytes());
    // the step it is in: the latest entry's next (none after the last step)
    if latest.next.is_empty() {
        map.remove("step");
    } else {
        map.insert("step".into(), latest.next.clone().into_bytes());
    }
}

/// The step a RUNNING attempt of fence `fence` is in and the one it last
/// completed, from the latest entry of its outputs list (`LRANGE ... -2
/// -1`); `None` when that entry is another attempt's or there is none
/// (the fence tells them apart: a list's rows do not read the token).
pub(crate) fn current(latest: &Value, fence: u64) -> Option<(Option<String>, String)> {
    let e = entries(latest).into_iter().next()?;
    if e.fence != fence.to_string() {
        return None;
    }
    Some(((!e.next.is_empty()).then_some(e.next), e.step))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn pairs(entries: &[(&str, &str)]) -> Value {
        Value::Array(
            entries
                .iter()
                .flat_map(|(h, o)| [bulk(h), bulk(o)])
                .collect(),
        )
    }

    /// Only the live fence's and token's entries count, each step once, in
    /// order; the current step is the latest entry's next.
    #[test]
    fn the_live_fences_entries_are_laid_over_the_hash() {
        let reply = pairs(&[
            ("7@t@1010@load@fetch", "{\"n\":1}"),
            ("6@t@1020@y@late", "2"),
            ("7@x@1025@y@intruder", "3"),
            ("7@t@1030@load@fetch", "{\"n\":9}"),
            ("7@t@1040@save@load", "null"),
            ("not a head", "4"),
        ]);
        let mut map: HashMap<String, Vec<u8>> = [
            ("state", "RUNNING"),
            ("fence", "7"),
            ("token", "t"),
            ("started_at", "1000"),
            ("step", "fetch"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
        .collect();
        overlay(&mut map, &entries(&reply));
        let get = |k: &str| String::from_utf8(map[k].clone()).unwrap_or_default();
        assert_eq!(get("steps"), "fetch@+10,load@+40");
        assert_eq!(get("last_step"), "load");
        assert_eq!(get("step"), "save");
        assert_eq!(get("out:fetch"), "{\"n\":1}");
        assert!(!map.contains_key("out:load"), "a null output is no field");
        assert!(!map.contains_key("out:late") && !map.contains_key("out:intruder"));
    }

    /// A job that is not RUNNING keeps its hash as it is.
    #[test]
    fn a_job_not_running_is_left_alone() {
        let reply = pairs(&[("7@t@1010@load@fetch", "1")]);
        let mut map: HashMap<String, Vec<u8>> = [("state", "STALE"), ("fence", "7")]
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
            .collect();
        overlay(&mut map, &entries(&reply));
        assert!(!map.contains_key("steps"));
        assert_eq!(
            current(&reply, 7),
            Some((Some("load".into()), "fetch".into()))
        );
        assert_eq!(current(&reply, 8), None);
    }
}
