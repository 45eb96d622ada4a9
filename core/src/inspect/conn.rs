//! Connections from the pool for the views, and the keys a `SCAN` finds (the
//! timeout and the walk itself are `crate::round_trip`'s).

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use crate::config::QueueConfig;
use crate::error::Result;
use crate::pool::{RedisConn, RedisPool, Target};
use crate::queue::escape_bytes;
use crate::round_trip::scan_pages;
pub(crate) use crate::round_trip::{escape_glob, timed};

/// A connection from `pool`, waiting at most the pool's own timeout.
pub(super) async fn pooled(pool: &RedisPool, _config: &QueueConfig) -> Result<RedisConn> {
    pool.get().await
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
    let mut out = Scanned::default();
    scan_pages(conn, config, target, pattern, |keys| {
        for key in keys {
            match String::from_utf8(key) {
                Ok(k) => {
                    out.keys.insert(k);
                }
                Err(e) => out.not_utf8.push(escape_bytes(e.as_bytes())),
            }
        }
        ControlFlow::Continue(())
    })
    .await?;
    Ok(out)
}
