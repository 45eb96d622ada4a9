//! The quarantine: jobs the scripts set aside because they cannot be read (a
//! key of the wrong Redis type, a field that is missing, not a number, not
//! UTF-8 or not JSON, a state the table does not know). Listing them with why,
//! repairing one (re-validated and requeued by a script) and purging one.

use deadpool_redis::redis;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::id::JobId;
use crate::queue::Queue;
use crate::record::Millis;
use crate::wire::ops::quarantine_purge::QuarantinePurge;
use crate::wire::ops::quarantine_repair::QuarantineRepair;

/// Most entries [`Queue::quarantined`] returns per call.
pub const MAX_QUARANTINE_LISTED: usize = 10_000;

/// A quarantined job and why it was set aside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuarantineEntry {
    /// The job id, as the index holds it.
    pub id: String,
    /// The job's key.
    pub key: String,
    /// When it was set aside (ms, Redis time).
    pub at: Millis,
    /// What is wrong (`not a positive integer`, `the key is a string, not a hash`, ...).
    pub reason: String,
    /// The offending field (`(key)` when the key itself is unreadable).
    pub field: String,
    /// The index it was found in (`ready:<pipeline>`, `delayed:<pipeline>`, `leases`).
    pub from_index: String,
}

/// The JSON record in `quarantine:why`.
#[derive(Debug, Deserialize)]
struct Why {
    #[serde(default)]
    reason: String,
    #[serde(default)]
    field: String,
    #[serde(default)]
    from_index: String,
}

impl Queue {
    /// The quarantined jobs, oldest first (at most [`MAX_QUARANTINE_LISTED`]).
    pub async fn quarantined(&self) -> Result<Vec<QuarantineEntry>> {
        let mut conn = self.conn().await?;
        let raw: Vec<(Vec<u8>, f64)> = self
            .timed(
                redis::cmd("ZRANGE")
                    .arg(self.keys.quarantine())
                    .arg(0)
                    .arg(MAX_QUARANTINE_LISTED - 1)
                    .arg("WITHSCORES")
                    .query_async(&mut conn),
            )
            .await?;
        if raw.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<&[u8]> = raw.iter().map(|(id, _)| id.as_slice()).collect();
        let whys: Vec<Option<Vec<u8>>> = self
            .timed(
                redis::cmd("HMGET")
                    .arg(self.keys.quarantine_why())
                    .arg(&ids)
                    .query_async(&mut conn),
            )
            .await?;
        Ok(raw
            .iter()
            .zip(whys)
            .map(|((id, at), why)| self.entry(id, *at as Millis, why.as_deref()))
            .collect())
    }

    /// The quarantine entry of `id`, if it is quarantined.
    pub async fn quarantine_entry(&self, id: &str) -> Result<Option<QuarantineEntry>> {
        let mut conn = self.conn().await?;
        let (at, why): (Option<f64>, Option<Vec<u8>>) = self
            .timed(
                redis::pipe()
                    .cmd("ZSCORE")
                    .arg(self.keys.quarantine())
                    .arg(id)
                    .cmd("HGET")
                    .arg(self.keys.quarantine_why())
                    .arg(id)
                    .query_async(&mut conn),
            )
            .await?;
        Ok(at.map(|at| self.entry(id.as_bytes(), at as Millis, why.as_deref())))
    }

    /// Builds an entry; an id or record that cannot be read is shown escaped.
    fn entry(&self, id: &[u8], at: Millis, why: Option<&[u8]>) -> QuarantineEntry {
        let id = String::from_utf8(id.to_vec()).unwrap_or_else(|_| escape_bytes(id));
        let why: Option<Why> = why.and_then(|w| serde_json::from_slice(w).ok());
        let (reason, field, from_index) = match why {
            Some(w) => (w.reason, w.field, w.from_index),
            None => ("no record of why".to_owned(), String::new(), String::new()),
        };
        QuarantineEntry {
            key: self.keys.job(&id),
            id,
            at,
            reason,
            field,
            from_index,
        }
    }

    /// Re-validates quarantined job `job` and requeues it (QUEUED in its
    /// pipeline's ready set, its attempt number kept, its lease fields cleared).
    /// Refused with [`Error::Corrupt`](crate::Error::Corrupt) naming the field while it still cannot
    /// be read; nothing changes then. Returns its pipeline.
    pub async fn repair_quarantined(&self, job: &JobId, by: &str) -> Result<String> {
        self.run(&QuarantineRepair { job, by }).await
    }

    /// Deletes quarantined job `job`: its key, attempt records, quarantine
    /// record, index entries, input key claim and lock.
    pub async fn purge_quarantined(&self, job: &JobId, by: &str) -> Result<()> {
        self.run(&QuarantinePurge { job, by }).await
    }
}

/// `bytes` as text with every byte that is not printable ASCII written `\xNN`
/// (how the listings name a key or value that is not UTF-8).
pub fn escape_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_graphic() || b == b' ' {
            if b == b'\\' {
                out.push('\\');
            }
            out.push(b as char);
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_that_are_not_printable_are_escaped() {
        assert_eq!(escape_bytes(b"a{b\xff}:c\\"), "a{b\\xff}:c\\\\");
    }
}
