//! Connections from the pool, commands bounded by the response timeout, and
//! `SCAN` for the few views that have no index to read.

use std::collections::BTreeSet;
use std::future::Future;

use deadpool_redis::redis::{self, RedisResult};

use crate::config::QueueConfig;
use crate::error::{Error, Result};
use crate::pool::{RedisConn, RedisPool, Target};
use crate::queue::escape_bytes;

/// `SCAN … COUNT`.
const SCAN_COUNT: usize = 1_000;

/// A connection from `pool`, waiting at most the pool's own timeout.
pub(super) async fn pooled(pool: &RedisPool, _config: &QueueConfig) -> Result<RedisConn> {
    pool.get().await
}

/// Runs `fut`, failing with [`Error::Timeout`] after `config.response_timeout`.
pub(super) async fn timed<T>(
    config: &QueueConfig,
    fut: impl Future<Output = RedisResult<T>>,
) -> Result<T> {
    match tokio::time::timeout(config.response_timeout, fut).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(Error::Timeout(config.response_timeout)),
    }
}

/// Escapes Redis glob metacharacters so `s` matches itself in `SCAN MATCH`.
pub(crate) fn escape_glob(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The keys a `SCAN` found: those named in UTF-8, and the escaped names of
/// the others (no view can name a queue or pipeline by them).
#[derive(Debug, Default)]
pub(crate) struct Scanned {
    /// Key names in UTF-8.
    pub keys: BTreeSet<String>,
    /// Key names that are not UTF-8, escaped as `\xNN`.
    pub not_utf8: Vec<String>,
}

/// Every key matching `pattern`, by `SCAN`ning the whole database of
/// `target` (on a cluster: one master; the master of a queue's slot holds
/// every key of the queue).
pub(crate) async fn scan_keys(
    conn: &mut RedisConn,
    config: &QueueConfig,
    pattern: &str,
    target: Target<'_>,
) -> Result<Scanned> {
    let mut cursor: u64 = 0;
    let mut out = Scanned::default();
    loop {
        let mut scan = redis::cmd("SCAN");
        scan.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(SCAN_COUNT);
        let (next, keys): (u64, Vec<Vec<u8>>) = timed(config, conn.query_at(target, &scan)).await?;
        for key in keys {
            match String::from_utf8(key) {
                Ok(k) => {
                    out.keys.insert(k);
                }
                Err(e) => out.not_utf8.push(escape_bytes(e.as_bytes())),
            }
        }
        cursor = next;
        if cursor == 0 {
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_metacharacters_are_escaped() {
        assert_eq!(escape_glob("a*b?c[d]e\\f{g}"), "a\\*b\\?c\\[d\\]e\\\\f{g}");
    }
}
