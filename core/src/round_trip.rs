//! Bounded round trips to Redis: every call under the response timeout, and
//! the one `SCAN` walk of the few views that have no index to read (a queue's
//! keys, its pipelines' lists, a search by id prefix).

use std::future::Future;
use std::ops::ControlFlow;

use deadpool_redis::redis::{self, RedisResult};

use crate::config::QueueConfig;
use crate::error::{Error, Result};
use crate::pool::{RedisConn, Target};

/// `SCAN … COUNT`.
const SCAN_COUNT: usize = 1_000;

/// Runs `fut`, failing with [`Error::Timeout`] after `config.response_timeout`.
pub(crate) async fn timed<T>(
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

/// Walks every key matching `pattern` on `target` (on a cluster: one master;
/// the master of a queue's slot holds every key of the queue) with `SCAN`,
/// handing each page of key names to `page` until the walk ends or `page`
/// breaks it. Each page is one round trip under the response timeout.
pub(crate) async fn scan_pages(
    conn: &mut RedisConn,
    config: &QueueConfig,
    target: Target<'_>,
    pattern: &str,
    mut page: impl FnMut(Vec<Vec<u8>>) -> ControlFlow<()>,
) -> Result<()> {
    let mut cursor: u64 = 0;
    loop {
        let mut scan = redis::cmd("SCAN");
        scan.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(SCAN_COUNT);
        let (next, keys): (u64, Vec<Vec<u8>>) = timed(config, conn.query_at(target, &scan)).await?;
        if page(keys).is_break() || next == 0 {
            return Ok(());
        }
        cursor = next;
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
