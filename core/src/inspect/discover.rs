//! Finding what has no index, by `SCAN`: the queues under a prefix and the
//! pipelines of a queue with waiting jobs.

use std::collections::BTreeSet;

use deadpool_redis::redis;

use super::conn::{escape_glob, pooled, scan_keys};
use super::{Inspector, Unreadable};
use crate::config::QueueConfig;
use crate::error::{Error, Result};
use crate::name::check_name;
use crate::pool::{Master, RedisConn, RedisPool, Target};

/// The keys that name a queue: its fence and event stream (once it had a job),
/// the set of its workers' ids and its pipeline specs (written by a worker when
/// it starts, before any job).
const QUEUE_MARKS: [&str; 4] = [":fence", ":events", ":workers", ":pipelines"];

/// How many times [`discover_reachable_queues`] asks a replica of a master
/// that does not answer.
const REPLICA_TRIES: usize = 5;

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
    let found = discover_reachable_queues(pool, config).await?;
    match found.unreachable.into_iter().next() {
        Some(lost) => Err(lost.error),
        None => Ok(found.queues),
    }
}

/// The queues [`discover_reachable_queues`] found, and the masters it could
/// not scan.
#[derive(Debug)]
pub struct DiscoveredQueues {
    /// The queues found on the masters that answered, sorted.
    pub queues: Vec<String>,
    /// The masters that did not answer (a Redis Cluster master down, its
    /// replica not promoted yet), with why.
    pub unreachable: Vec<UnreachableMaster>,
}

/// A cluster master [`discover_reachable_queues`] could not scan.
#[derive(Debug)]
pub struct UnreachableMaster {
    /// The master.
    pub master: Master,
    /// Why it could not be scanned.
    pub error: Error,
    /// The replica of it whose keys were scanned instead: its queues are in
    /// [`DiscoveredQueues::queues`] (their data may not be readable until
    /// the replica is promoted). `None`: no replica answered, its queues are
    /// not listed.
    pub listed_from: Option<Master>,
}

/// [`discover_queues`], going on past a cluster master that does not answer
/// (killed, its replica not yet promoted): the queues of the others, and the
/// masters it could not scan. Fails only when no master answers (or on one
/// server, when it does not). The masters are scanned at once, each on a
/// connection of its own, so one that does not answer delays no other.
pub async fn discover_reachable_queues(
    pool: &RedisPool,
    config: &QueueConfig,
) -> Result<DiscoveredQueues> {
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
    // every master at once: one that does not answer delays no other's listing
    let scans = masters
        .iter()
        .map(|master| scan_master(pool, config, &pattern, master));
    let mut unreachable = Vec::new();
    for scanned in futures_util::future::join_all(scans).await {
        match scanned {
            Ok(keys) => found.extend(keys),
            Err((lost, keys)) => {
                found.extend(keys);
                unreachable.push(lost);
            }
        }
    }
    if !masters.is_empty() && unreachable.len() == masters.len() {
        if let Some(lost) = unreachable.into_iter().next() {
            return Err(lost.error);
        }
        unreachable = Vec::new();
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
    Ok(DiscoveredQueues {
        queues: queues.into_iter().collect(),
        unreachable,
    })
}

/// The keys of `pattern` on `master`, on a connection of its own; when it
/// does not answer, what stands for it and the keys its replica holds (none
/// when no replica answered).
async fn scan_master(
    pool: &RedisPool,
    config: &QueueConfig,
    pattern: &str,
    master: &Master,
) -> std::result::Result<BTreeSet<String>, (UnreachableMaster, BTreeSet<String>)> {
    let scanned = async {
        let mut conn = pooled(pool, config).await?;
        scan_and_warn(&mut conn, config, pattern, Target::Master(Some(master))).await
    };
    let error = match scanned.await {
        Ok(keys) => return Ok(keys),
        Err(e) => e,
    };
    // the master's queues, as its replica holds them (it may lag)
    let mut listed_from = None;
    let mut found = BTreeSet::new();
    // (the client may have no connection to a replica yet: it makes one
    // after the first ask fails, so each is asked a few times)
    'replicas: for replica in pool.replicas_of(master).await.unwrap_or_default() {
        for _ in 0..REPLICA_TRIES {
            let target = Target::Master(Some(&replica));
            let asked = async {
                let mut conn = pooled(pool, config).await?;
                scan_and_warn(&mut conn, config, pattern, target).await
            };
            if let Ok(keys) = asked.await {
                found = keys;
                listed_from = Some(replica);
                break 'replicas;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    let lost = UnreachableMaster {
        master: master.clone(),
        error,
        listed_from,
    };
    Err((lost, found))
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
