//! The workers registered with a queue, pruning ids whose registration expired.

use std::collections::BTreeSet;

use deadpool_redis::redis;

use super::{Inspector, WorkerInfo, Workers, CHUNK};
use crate::error::{Error, Result};

impl Inspector {
    /// Workers registered with the queue: members of `<base>:workers` whose
    /// `<base>:worker:<id>` key still exists. Ids whose key has expired are
    /// removed from the set (and put back if the worker re-registered meanwhile).
    pub async fn workers(&self) -> Result<Workers> {
        let mut conn = self.conn().await?;
        let keys = self.keys();
        let ids: BTreeSet<String> = self
            .timed(
                redis::cmd("SMEMBERS")
                    .arg(keys.workers())
                    .query_async(&mut conn),
            )
            .await?;
        let ids: Vec<String> = ids.into_iter().collect();
        let mut live = Vec::new();
        let mut dead = Vec::new();
        for chunk in ids.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            for id in chunk {
                pipe.cmd("GET").arg(keys.worker(id));
                pipe.cmd("PTTL").arg(keys.worker(id));
            }
            let replies: Vec<(Option<String>, i64)> =
                self.timed(pipe.query_async(&mut conn)).await?;
            for (id, (value, pttl)) in chunk.iter().zip(replies) {
                let Some(text) = value else {
                    dead.push(id.clone());
                    continue;
                };
                let key = keys.worker(id);
                let mut info: WorkerInfo = serde_json::from_str::<serde_json::Value>(&text)
                    .ok()
                    .filter(serde_json::Value::is_object)
                    .map(|mut v| {
                        // the set member is the authority on the id
                        v["id"] = serde_json::Value::String(id.clone());
                        v
                    })
                    .and_then(|v| serde_json::from_value(v).ok())
                    .ok_or_else(|| Error::Corrupt {
                        key,
                        field: "(value)".into(),
                        problem: format!("not a worker registration: {text:?}"),
                    })?;
                info.expires_in_ms = (pttl >= 0).then_some(pttl);
                live.push(info);
            }
        }
        let mut pruned = Vec::new();
        if !dead.is_empty() {
            let mut pipe = redis::pipe();
            for id in &dead {
                pipe.cmd("SREM").arg(keys.workers()).arg(id).ignore();
                pipe.cmd("EXISTS").arg(keys.worker(id));
            }
            let exists: Vec<u64> = self.timed(pipe.query_async(&mut conn)).await?;
            let mut back = redis::pipe();
            let mut any_back = false;
            for (id, e) in dead.into_iter().zip(exists) {
                if e > 0 {
                    // registered again between our GET and SREM
                    back.cmd("SADD").arg(keys.workers()).arg(&id).ignore();
                    any_back = true;
                } else {
                    pruned.push(id);
                }
            }
            if any_back {
                let _: () = self.timed(back.query_async(&mut conn)).await?;
            }
        }
        Ok(Workers { live, pruned })
    }
}
