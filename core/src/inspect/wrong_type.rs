//! Naming the key behind a `WRONGTYPE` reply: Redis does not say which key of
//! a read holds the wrong kind of value, so when a read of the inspector fails
//! that way, the queue's keys are looked at (`TYPE` of each, only then) and
//! the first whose type is not the one leasehold writes is named.

use deadpool_redis::redis;

use super::Inspector;
use crate::error::{Error, Result};
use crate::id::JobId;

/// Whether `e` is Redis's `WRONGTYPE` reply (or a pipeline's failure with one).
fn is_wrong_type(e: &Error) -> bool {
    let Error::Redis(re) = e else {
        return false;
    };
    re.code() == Some("WRONGTYPE")
        || re
            .clone()
            .into_server_errors()
            .is_some_and(|errors| errors.iter().any(|(_, s)| s.code() == "WRONGTYPE"))
        // a pipeline's failure (`Pipeline failure: [(Index 0, error: "WRONGTYPE" ...)]`)
        || re.to_string().contains("\"WRONGTYPE\"")
}

impl Inspector {
    /// `result`, with a `WRONGTYPE` error replaced by [`Error::Corrupt`]
    /// naming the key of the wrong type (field `(key)`): the job `job`'s key,
    /// a fixed key of the queue, or a ready, delayed or parked set.
    pub(super) async fn naming_wrong_type<T>(
        &self,
        result: Result<T>,
        job: Option<&JobId>,
    ) -> Result<T> {
        match result {
            Err(e) if is_wrong_type(&e) => Err(self.wrong_type_key(job).await.unwrap_or(e)),
            other => other,
        }
    }

    /// The first key of the queue (and of `job`) that exists with another
    /// type than leasehold's, as [`Error::Corrupt`]; `None` when none does
    /// (or they cannot be read).
    async fn wrong_type_key(&self, job: Option<&JobId>) -> Option<Error> {
        let k = self.keys();
        let base = k.base();
        let mut expected: Vec<(String, &str)> = Vec::new();
        if let Some(id) = job {
            expected.push((k.job(id.as_str()), "hash"));
        }
        expected.extend([
            (k.leases(), "zset"),
            (k.fence(), "string"),
            (k.events(), "stream"),
            (k.inputs(), "hash"),
            (k.parked_resources(), "set"),
            (k.done(), "zset"),
            (k.stale(), "zset"),
            (k.attempts(), "hash"),
            (k.cleanup(), "list"),
            (k.cleaning(), "zset"),
            (k.pipelines(), "hash"),
            (k.workers(), "set"),
            (k.quarantine(), "zset"),
            (k.quarantine_why(), "hash"),
            (k.search(), "zset"),
            (k.schedules(), "zset"),
            (format!("{base}:groups"), "zset"),
            (format!("{base}:waiting"), "set"),
            (format!("{base}:limits"), "hash"),
            (format!("{base}:paused"), "hash"),
        ]);
        let mut conn = self.conn().await.ok()?;
        let mut bad = Vec::new();
        if let Ok(pipelines) = self.pipelines_on(&mut conn, &mut bad).await {
            for p in pipelines {
                expected.push((k.ready(&p), "zset"));
                expected.push((k.delayed(&p), "zset"));
                expected.push((k.wake(&p), "list"));
            }
        }
        let resources: Vec<String> = self
            .timed(
                redis::cmd("SMEMBERS")
                    .arg(k.parked_resources())
                    .query_async(&mut conn),
            )
            .await
            .unwrap_or_default();
        for r in resources {
            expected.push((k.parked(&r), "zset"));
            expected.push((k.lock(&r), "string"));
        }
        for chunk in expected.chunks(super::CHUNK) {
            let mut pipe = redis::pipe();
            for (key, _) in chunk {
                pipe.cmd("TYPE").arg(key);
            }
            let types: Vec<String> = self.timed(pipe.query_async(&mut conn)).await.ok()?;
            for ((key, want), got) in chunk.iter().zip(types) {
                if got != "none" && got != *want {
                    return Some(Error::Corrupt {
                        key: key.clone(),
                        field: "(key)".into(),
                        problem: format!("the key is a {got}, not a {want}"),
                    });
                }
            }
        }
        None
    }
}
