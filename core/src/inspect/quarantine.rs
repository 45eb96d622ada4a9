//! The quarantine as the views see it: the jobs set aside as unreadable, and
//! one job's key read raw (its type, its fields escaped) when its record
//! cannot be read as a job.

use deadpool_redis::redis;

use super::{Inspector, RawJob};
use crate::error::Result;
use crate::queue::{escape_bytes, QuarantineEntry};

/// `bytes` as text: itself when UTF-8, else escaped.
fn text_of(bytes: &[u8]) -> String {
    std::str::from_utf8(bytes).map_or_else(|_| escape_bytes(bytes), str::to_owned)
}

impl Inspector {
    /// The quarantined jobs with why, oldest first (see [`crate::Queue::quarantined`]).
    pub async fn quarantined(&self) -> Result<Vec<QuarantineEntry>> {
        self.queue().quarantined().await
    }

    /// Job `id`'s key as Redis holds it, with its quarantine entry: for a job
    /// whose record cannot be read (a wrong-type key, a corrupt field).
    pub async fn raw_job(&self, id: &str) -> Result<RawJob> {
        let key = self.keys().job(id);
        let mut conn = self.conn().await?;
        let key_type: String = self
            .timed(redis::cmd("TYPE").arg(&key).query_async(&mut conn))
            .await?;
        let mut fields = Vec::new();
        if key_type == "hash" {
            let flat: Vec<Vec<u8>> = self
                .timed(redis::cmd("HGETALL").arg(&key).query_async(&mut conn))
                .await?;
            for pair in flat.chunks(2) {
                if let [name, value] = pair {
                    fields.push((text_of(name), text_of(value)));
                }
            }
            fields.sort();
        }
        drop(conn);
        let quarantine = self.queue().quarantine_entry(id).await?;
        Ok(RawJob {
            key,
            key_type,
            fields,
            quarantine,
        })
    }
}
