//! Finding what has no index, by `SCAN`: the queues under a prefix and the
//! pipelines of a queue with waiting jobs.

use std::collections::BTreeSet;

use deadpool_redis::redis;

use super::conn::{escape_glob, pooled, scan_keys};
use super::{Inspector, Unreadable};
use crate::config::QueueConfig;
use crate::error::Result;
use crate::keys::check_name;
use crate::pool::{RedisConn, RedisPool, Target};

/// The keys that name a queue: its fence and event stream (once it had a job),
/// the set of its workers' ids and its pipeline specs (written by a worker when
/// it starts, before any job).
const QUEUE_MARKS: [&str; 4] = [":fence", ":events", ":workers", ":pipelines"];

/// Finds the queues under `config.prefix` by `SCAN`ning for their
/// `<prefix>:{<queue>}:fence`, `:events`, `:workers` and `:pipelines` keys
/// (there is no index of queues). Sorted by name.
///
/// Cost: one `SCAN` of the whole database (its `MATCH` lets through only keys
/// whose part after the `}` begins like one of those four); in Redis Cluster,
/// one `SCAN` of every master (`CLUSTER SLOTS` names them), so a queue is
/// found on whichever shard its slot lives. A queue that never had a job nor a worker is not found. Key
/// names that are not UTF-8 (no queue can be named by them) are skipped;
/// [`Inspector::status`] reports those of its own queue.
pub async fn discover_queues(pool: &RedisPool, config: &QueueConfig) -> Result<Vec<String>> {
    check_name("key prefix", &config.prefix)?;
    let head = format!("{}:{{", config.prefix);
    let mut conn = pooled(pool, config).await?;
    let mut queues = BTreeSet::new();
    // `ev`ents, `fe`nce, `pi`pelines, `wo`rkers (and `wo`rker:<id>, filtered below)
    let pattern = format!("{}*}}:[efpw][veio]*", escape_glob(&head));
    let masters = pool.masters().await?;
    let mut found = BTreeSet::new();
    if masters.is_empty() {
        found = scan_and_warn(&mut conn, config, &pattern, Target::Master(None)).await?;
    }
    for master in &masters {
        found.extend(
            scan_and_warn(&mut conn, config, &pattern, Target::Master(Some(master))).await?,
        );
    }
    for key in found {
        let Some(rest) = key.strip_prefix(&head) else {
            continue;
        };
        let Some((queue, tail)) = rest.split_once('}') else {
            continue;
        };
        if QUEUE_MARKS.contains(&tail) && check_name("queue name", queue).is_ok() {
            queues.insert(queue.to_owned());
        }
    }
    Ok(queues.into_iter().collect())
}

/// The UTF-8 key names `SCAN` finds on `target`, warning of the others.
async fn scan_and_warn(
    conn: &mut RedisConn,
    config: &QueueConfig,
    pattern: &str,
    target: Target<'_>,
) -> Result<BTreeSet<String>> {
    let scanned = scan_keys(conn, config, pattern, target).await?;
    if !scanned.not_utf8.is_empty() {
        tracing::warn!(keys = ?scanned.not_utf8, "skipped key names that are not UTF-8");
    }
    Ok(scanned.keys)
}

impl Inspector {
    /// Pipelines with waiting jobs: the names of the queue's `ready:*` and
    /// `delayed:*` keys, found by `SCAN` (no index of pipelines exists). Sorted.
    pub async fn pipelines(&self) -> Result<Vec<String>> {
        let mut conn = self.conn().await?;
        self.pipelines_on(&mut conn, &mut Vec::new()).await
    }

    /// [`Inspector::pipelines`] over `conn`; key names that are not UTF-8 go to `bad`.
    pub(super) async fn pipelines_on(
        &self,
        conn: &mut RedisConn,
        bad: &mut Vec<Unreadable>,
    ) -> Result<Vec<String>> {
        let mut out = BTreeSet::new();
        for kind in ["ready", "delayed"] {
            let head = format!("{}:{kind}:", self.keys().base());
            let pattern = format!("{}*", escape_glob(&head));
            let base = self.keys().base();
            let scanned = scan_keys(conn, self.config(), &pattern, Target::SlotOf(base)).await?;
            bad.extend(scanned.not_utf8.into_iter().map(|key| Unreadable {
                key,
                field: "(name)".into(),
                problem: "the key name is not UTF-8".into(),
            }));
            for key in scanned.keys {
                if let Some(p) = key.strip_prefix(&head) {
                    if check_name("pipeline name", p).is_ok() {
                        out.insert(p.to_owned());
                    }
                }
            }
        }
        Ok(out.into_iter().collect())
    }
}

impl Inspector {
    /// Whether the queue exists: [`discover_queues`] would find it (one of its
    /// fence, event stream, workers set or pipeline specs exists). One
    /// `EXISTS` of the four keys, which share the queue's slot; no `SCAN`.
    pub async fn exists(&self) -> Result<bool> {
        let mut conn = self.conn().await?;
        let k = self.keys();
        let n: i64 = self
            .timed(
                redis::cmd("EXISTS")
                    .arg(k.fence())
                    .arg(k.events())
                    .arg(k.workers())
                    .arg(k.pipelines())
                    .query_async(&mut conn),
            )
            .await?;
        Ok(n > 0)
    }

    /// The pipelines of the queue a name may refer to: those a worker
    /// published a spec of (`HKEYS` of the specs) and those with waiting jobs
    /// ([`Inspector::pipelines`]). Sorted. A pipeline known only from ended
    /// jobs is not among them.
    pub async fn known_pipelines(&self) -> Result<Vec<String>> {
        let mut names: BTreeSet<String> = self.pipelines().await?.into_iter().collect();
        let mut conn = self.conn().await?;
        let published: Vec<String> = self
            .timed(
                redis::cmd("HKEYS")
                    .arg(self.keys().pipelines())
                    .query_async(&mut conn),
            )
            .await?;
        names.extend(published);
        Ok(names.into_iter().collect())
    }
}
