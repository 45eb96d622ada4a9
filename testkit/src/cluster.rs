//! [`RedisCluster`]: a private local Redis Cluster of `redis-server`
//! processes (masters, optionally with replicas) on free loopback ports, its
//! slots assigned directly (`CLUSTER ADDSLOTSRANGE` + `CLUSTER MEET`), and the
//! operations tests need on it: kill a node, promote a replica, move a slot
//! to another master step by step, and pick queue names that land on each
//! shard. Each node is a [`RedisServer`], so it is killed by PID on drop.

use std::time::{Duration, Instant};

use deadpool_redis::redis;

use crate::server::{free_tcp_port, RedisServer};

/// Number of hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;
/// How long the kit waits for the cluster to agree on its state.
const CLUSTER_DEADLINE: Duration = Duration::from_secs(60);
/// `cluster-node-timeout` of the kit's nodes, in ms.
const NODE_TIMEOUT_MS: &str = "3000";

/// One node of a [`RedisCluster`].
#[derive(Debug)]
struct Node {
    server: RedisServer,
    id: String,
    port: u16,
    bus: u16,
}

/// A private local Redis Cluster: `masters` masters splitting the 16384
/// slots in equal ranges (node `i` serves range `i`), each with
/// `replicas` replicas (nodes `masters + i * replicas ..`). Nodes are
/// numbered in that order; [`RedisCluster::url`] names every running node as
/// a seed.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<Node>,
    masters: usize,
}

/// A slot being moved from one master to another (see
/// [`RedisCluster::begin_slot_migration`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotMigration {
    /// The slot.
    pub slot: u16,
    /// The node it leaves.
    pub from: usize,
    /// The node it goes to.
    pub to: usize,
}

impl RedisCluster {
    /// Starts `masters` masters with `replicas` replicas each, assigns the
    /// slots, and waits (up to 60 s) until every node reports
    /// `cluster_state:ok` and knows every other node, and every replica is
    /// in sync with its master.
    ///
    /// # Panics
    ///
    /// If a node cannot be started or the cluster does not form in time.
    #[track_caller]
    pub fn start(masters: usize, replicas: usize) -> RedisCluster {
        Self::start_with(masters, replicas, |_| Vec::new())
    }

    /// Like [`RedisCluster::start`], with extra `redis-server` arguments for
    /// node `i` (in node order: masters, then replicas), e.g. a `--tls-port`
    /// of its own and `--tls-cluster yes`. The kit itself keeps talking to
    /// every node on its plain TCP port.
    #[track_caller]
    pub fn start_with(
        masters: usize,
        replicas: usize,
        extra: impl Fn(usize) -> Vec<String>,
    ) -> RedisCluster {
        assert!(masters >= 1, "a cluster needs at least one master");
        let total = masters * (1 + replicas);
        let mut nodes = Vec::with_capacity(total);
        for i in 0..total {
            let bus = free_tcp_port();
            let bus_arg = bus.to_string();
            let extra = extra(i);
            let mut args = vec![
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-port",
                &bus_arg,
                "--cluster-node-timeout",
                NODE_TIMEOUT_MS,
            ];
            args.extend(extra.iter().map(String::as_str));
            let server = RedisServer::start_tcp_with(&args);
            let port = server
                .port()
                .unwrap_or_else(|| panic!("a TCP node has a port"));
            let id: String = server.convert(server.cmd(&["CLUSTER", "MYID"]), "CLUSTER MYID");
            nodes.push(Node {
                server,
                id,
                port,
                bus,
            });
        }
        let cluster = RedisCluster { nodes, masters };
        // distinct config epochs from the start, every replica's above every
        // master's: left to collisions, a replica may keep the highest epoch
        // of the cluster, equal to its master's, and a `CLUSTER FAILOVER
        // TAKEOVER` then claims the slots with an epoch no higher than the dead
        // master's: the other nodes never take the claim
        for i in 0..total {
            cluster.ok(i, &["CLUSTER", "SET-CONFIG-EPOCH", &(i + 1).to_string()]);
        }
        for i in 0..masters {
            let (start, end) = slot_range(i, masters);
            cluster.ok(
                i,
                &[
                    "CLUSTER",
                    "ADDSLOTSRANGE",
                    &start.to_string(),
                    &end.to_string(),
                ],
            );
        }
        let first_port = cluster.nodes[0].port.to_string();
        let first_bus = cluster.nodes[0].bus.to_string();
        for i in 1..total {
            cluster.ok(
                i,
                &["CLUSTER", "MEET", "127.0.0.1", &first_port, &first_bus],
            );
        }
        cluster.wait_until_known(total);
        for r in 0..masters * replicas {
            let node = masters + r;
            let master = r / replicas.max(1);
            let id = cluster.nodes[master].id.clone();
            cluster.ok(node, &["CLUSTER", "REPLICATE", &id]);
        }
        cluster.wait_until_ok();
        if replicas > 0 {
            cluster.wait_for_replicas();
        }
        cluster
    }

    /// `redis+cluster://127.0.0.1:<port>,...` naming every running node.
    pub fn url(&self) -> String {
        let seeds: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| n.server.pid().is_some())
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis+cluster://{}", seeds.join(","))
    }

    /// Node `i` (a [`RedisServer`]: `cmd`, `info`, `dump` of that node only).
    pub fn node(&self, i: usize) -> &RedisServer {
        &self.nodes[i].server
    }

    /// How many nodes the cluster was started with (killed ones included).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the cluster has no nodes (never: it has at least one master).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The node id of node `i`.
    pub fn id(&self, i: usize) -> &str {
        &self.nodes[i].id
    }

    /// The running nodes that are masters now, by index (sorted).
    #[track_caller]
    pub fn masters(&self) -> Vec<usize> {
        let mut out: Vec<usize> = self
            .slot_owners()
            .into_iter()
            .map(|(_, _, node)| node)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT`).
    #[track_caller]
    pub fn slot_of(&self, key: &str) -> u16 {
        let i = self.any_running();
        let slot: i64 = self.node(i).convert(
            self.node(i).cmd(&["CLUSTER", "KEYSLOT", key]),
            "CLUSTER KEYSLOT",
        );
        u16::try_from(slot).unwrap_or_else(|_| panic!("CLUSTER KEYSLOT answered {slot}"))
    }

    /// The node serving `slot` now, as a running node sees it.
    #[track_caller]
    pub fn owner_of_slot(&self, slot: u16) -> usize {
        self.slot_owners()
            .into_iter()
            .find(|(start, end, _)| (*start..=*end).contains(&slot))
            .map(|(_, _, node)| node)
            .unwrap_or_else(|| panic!("no node serves slot {slot}"))
    }

    /// The node serving `key`'s slot now.
    #[track_caller]
    pub fn owner_of_key(&self, key: &str) -> usize {
        self.owner_of_slot(self.slot_of(key))
    }

    /// `total` queue names (`<stem>0`, `<stem>1`, ... as found) spread over
    /// the masters in turn: the name given for master `m` has its keys
    /// (`<prefix>:{<name>}:...`) in one of `m`'s slots. With 3 masters and 8
    /// names: 3, 3 and 2 per master.
    #[track_caller]
    pub fn queue_names(&self, prefix: &str, stem: &str, total: usize) -> Vec<String> {
        let masters = self.masters();
        let mut per_master: Vec<Vec<String>> = vec![Vec::new(); masters.len()];
        let want = |m: usize| total / masters.len() + usize::from(m < total % masters.len());
        let mut i = 0usize;
        while per_master.iter().map(Vec::len).sum::<usize>() < total {
            let name = format!("{stem}{i}");
            i += 1;
            let owner = self.owner_of_key(&format!("{prefix}:{{{name}}}"));
            let Some(m) = masters.iter().position(|n| *n == owner) else {
                continue;
            };
            if per_master[m].len() < want(m) {
                per_master[m].push(name);
            }
            assert!(i < 100_000, "cannot spread queue names over the masters");
        }
        // in turn: master 0's first, master 1's first, ...
        let mut out = Vec::with_capacity(total);
        for round in 0..total {
            for names in &per_master {
                if let Some(n) = names.get(round) {
                    out.push(n.clone());
                }
            }
        }
        out
    }

    /// SIGKILLs node `i` (its data is lost; a replica may take over).
    #[track_caller]
    pub fn kill(&mut self, i: usize) {
        self.nodes[i].server.kill();
    }

    /// Promotes replica `i` at once (`CLUSTER FAILOVER TAKEOVER`: no
    /// agreement with its master, which may be dead) and waits until every
    /// running node sees it serve its former master's slots and reports
    /// `cluster_state:ok`.
    #[track_caller]
    pub fn take_over(&self, i: usize) {
        self.ok(i, &["CLUSTER", "FAILOVER", "TAKEOVER"]);
        let started = Instant::now();
        loop {
            let role = self.node(i).info("replication");
            if role.contains("role:master") && self.all_see_master(i) {
                break;
            }
            assert!(
                started.elapsed() < CLUSTER_DEADLINE,
                "replica {i} did not become a master seen by every node: {role}\n{}",
                self.views()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        self.wait_until_ok();
    }

    /// Starts moving `slot` to node `to`: `CLUSTER SETSLOT <slot> IMPORTING`
    /// on `to`, then `MIGRATING` on its owner. Keys stay where they are until
    /// [`RedisCluster::move_slot_keys`].
    #[track_caller]
    pub fn begin_slot_migration(&self, slot: u16, to: usize) -> SlotMigration {
        let from = self.owner_of_slot(slot);
        assert_ne!(from, to, "slot {slot} is already on node {to}");
        let s = slot.to_string();
        let from_id = self.nodes[from].id.clone();
        let to_id = self.nodes[to].id.clone();
        self.ok(to, &["CLUSTER", "SETSLOT", &s, "IMPORTING", &from_id]);
        self.ok(from, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &to_id]);
        SlotMigration { slot, from, to }
    }

    /// Moves at most `max` of the migrating slot's keys (`CLUSTER
    /// GETKEYSINSLOT` + one `MIGRATE ... KEYS`); returns how many moved (0:
    /// none were left).
    #[track_caller]
    pub fn move_slot_keys(&self, migration: SlotMigration, max: usize) -> usize {
        let from = self.node(migration.from);
        let mut con = from.helper_connection();
        let keys: Vec<Vec<u8>> = from.convert(
            from.run(
                &mut con,
                &[
                    "CLUSTER",
                    "GETKEYSINSLOT",
                    &migration.slot.to_string(),
                    &max.max(1).to_string(),
                ],
            ),
            "CLUSTER GETKEYSINSLOT",
        );
        if keys.is_empty() {
            return 0;
        }
        let mut cmd = redis::cmd("MIGRATE");
        cmd.arg("127.0.0.1")
            .arg(self.nodes[migration.to].port)
            .arg("")
            .arg(0)
            .arg(10_000)
            .arg("KEYS")
            .arg(&keys);
        let reply = from.run_cmd(&mut con, &cmd, &["MIGRATE"]);
        if let redis::Value::ServerError(e) = &reply {
            panic!("MIGRATE of slot {} answered {e:?}", migration.slot);
        }
        keys.len()
    }

    /// Ends the move: `CLUSTER SETSLOT <slot> NODE <to>` on the target, the
    /// source and every other master, then waits until every running node
    /// sees `to` serving the slot. Keys must have been moved.
    #[track_caller]
    pub fn finish_slot_migration(&self, migration: SlotMigration) {
        let s = migration.slot.to_string();
        let to_id = self.nodes[migration.to].id.clone();
        self.ok(migration.to, &["CLUSTER", "SETSLOT", &s, "NODE", &to_id]);
        self.ok(migration.from, &["CLUSTER", "SETSLOT", &s, "NODE", &to_id]);
        for m in self.masters() {
            if m != migration.to && m != migration.from {
                self.ok(m, &["CLUSTER", "SETSLOT", &s, "NODE", &to_id]);
            }
        }
        let started = Instant::now();
        while !self
            .running()
            .all(|i| self.owner_seen_by(i, migration.slot) == Some(migration.to))
        {
            assert!(
                started.elapsed() < CLUSTER_DEADLINE,
                "not every node sees slot {} on node {}",
                migration.slot,
                migration.to
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Moves `slot` to node `to` at once: begin, every key, finish.
    #[track_caller]
    pub fn migrate_slot(&self, slot: u16, to: usize) {
        let m = self.begin_slot_migration(slot, to);
        while self.move_slot_keys(m, 100) > 0 {}
        self.finish_slot_migration(m);
    }

    /// The sum over the running nodes of `INFO errorstats`'s count for
    /// `error` (e.g. `CROSSSLOT`, `MOVED`, `TRYAGAIN`).
    #[track_caller]
    pub fn error_count(&self, error: &str) -> u64 {
        let field = format!("errorstat_{error}:count=");
        self.running()
            .map(|i| {
                self.node(i)
                    .info("errorstats")
                    .lines()
                    .find_map(|l| l.strip_prefix(&field))
                    .and_then(|rest| rest.split(',').next())
                    .and_then(|n| n.trim().parse::<u64>().ok())
                    .unwrap_or(0)
            })
            .sum()
    }

    /// Waits (up to 60 s) until every running node reports `cluster_state:ok`.
    #[track_caller]
    pub fn wait_until_ok(&self) {
        let started = Instant::now();
        loop {
            let states: Vec<String> = self
                .running()
                .map(|i| {
                    let info: String = self
                        .node(i)
                        .convert(self.node(i).cmd(&["CLUSTER", "INFO"]), "CLUSTER INFO");
                    info.lines()
                        .find(|l| l.starts_with("cluster_state:"))
                        .unwrap_or("cluster_state:?")
                        .trim()
                        .to_owned()
                })
                .collect();
            if states.iter().all(|s| s == "cluster_state:ok") {
                return;
            }
            assert!(
                started.elapsed() < CLUSTER_DEADLINE,
                "the cluster did not reach cluster_state:ok: {states:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    // ---- internals -------------------------------------------------------

    /// Indexes of the running nodes.
    fn running(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.nodes.len()).filter(|i| self.nodes[*i].server.pid().is_some())
    }

    /// A running node.
    #[track_caller]
    fn any_running(&self) -> usize {
        self.running()
            .next()
            .unwrap_or_else(|| panic!("no node of the cluster is running"))
    }

    /// Runs `args` on node `i`, panicking unless it answers OK.
    #[track_caller]
    fn ok(&self, i: usize, args: &[&str]) {
        let reply = self.node(i).cmd(args);
        if !matches!(reply, redis::Value::Okay) {
            panic!("{} on node {i} answered {reply:?}", args.join(" "));
        }
    }

    /// The slot ranges and their masters (node indexes), as a running node sees them.
    #[track_caller]
    fn slot_owners(&self) -> Vec<(u16, u16, usize)> {
        self.slot_owners_seen_by(self.any_running())
    }

    /// The slot ranges and their masters as node `seer` sees them.
    #[track_caller]
    fn slot_owners_seen_by(&self, seer: usize) -> Vec<(u16, u16, usize)> {
        let reply = self.node(seer).cmd(&["CLUSTER", "SLOTS"]);
        let ranges: Vec<Vec<redis::Value>> = self.node(seer).convert(reply, "CLUSTER SLOTS");
        let mut out = Vec::new();
        for range in ranges {
            let (Some(start), Some(end), Some(master)) =
                (range.first(), range.get(1), range.get(2))
            else {
                continue;
            };
            let start: u16 = self.node(seer).convert(start.clone(), "a slot");
            let end: u16 = self.node(seer).convert(end.clone(), "a slot");
            let master: Vec<redis::Value> = self.node(seer).convert(master.clone(), "a node");
            let Some(port) = master.get(1) else { continue };
            let port: u16 = self.node(seer).convert(port.clone(), "a port");
            if let Some(node) = self.nodes.iter().position(|n| n.port == port) {
                out.push((start, end, node));
            }
        }
        out
    }

    /// Which node `seer` says serves `slot`.
    fn owner_seen_by(&self, seer: usize, slot: u16) -> Option<usize> {
        self.slot_owners_seen_by(seer)
            .into_iter()
            .find(|(s, e, _)| (*s..=*e).contains(&slot))
            .map(|(_, _, n)| n)
    }

    /// Every running node's `CLUSTER NODES`, for a panic message.
    fn views(&self) -> String {
        self.running()
            .map(|seer| {
                let nodes: String = self
                    .node(seer)
                    .convert(self.node(seer).cmd(&["CLUSTER", "NODES"]), "CLUSTER NODES");
                format!(
                    "node {seer} (port {}) sees:\n{nodes}",
                    self.nodes[seer].port
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Whether every running node sees node `i` as a master serving slots.
    fn all_see_master(&self, i: usize) -> bool {
        self.running().all(|seer| {
            self.slot_owners_seen_by(seer)
                .iter()
                .any(|(_, _, n)| *n == i)
        })
    }

    /// Waits until every node lists `total` nodes in `CLUSTER NODES`.
    #[track_caller]
    fn wait_until_known(&self, total: usize) {
        let started = Instant::now();
        loop {
            let known: Vec<usize> = self
                .running()
                .map(|i| {
                    let nodes: String = self
                        .node(i)
                        .convert(self.node(i).cmd(&["CLUSTER", "NODES"]), "CLUSTER NODES");
                    nodes
                        .lines()
                        .filter(|l| !l.trim().is_empty() && !l.contains("handshake"))
                        .count()
                })
                .collect();
            if known.iter().all(|k| *k == total) {
                return;
            }
            assert!(
                started.elapsed() < CLUSTER_DEADLINE,
                "the nodes did not meet: each knows {known:?} of {total}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until every replica's link to its master is up and in sync.
    #[track_caller]
    fn wait_for_replicas(&self) {
        let started = Instant::now();
        for i in self.masters..self.nodes.len() {
            loop {
                let info = self.node(i).info("replication");
                if info.contains("master_link_status:up")
                    && info.contains("master_sync_in_progress:0")
                {
                    break;
                }
                assert!(
                    started.elapsed() < CLUSTER_DEADLINE,
                    "replica {i} did not sync with its master: {info}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// The slots of master `i` of `n`: equal ranges, the last one taking the rest.
fn slot_range(i: usize, n: usize) -> (u16, u16) {
    let per = SLOTS as usize / n;
    let start = i * per;
    let end = if i + 1 == n {
        SLOTS as usize - 1
    } else {
        start + per - 1
    };
    (start as u16, end as u16)
}

#[cfg(test)]
mod tests {
    use super::slot_range;

    #[test]
    fn slot_ranges_cover_every_slot_once() {
        for n in 1..=5 {
            let mut next = 0u32;
            for i in 0..n {
                let (s, e) = slot_range(i, n);
                assert_eq!(u32::from(s), next);
                next = u32::from(e) + 1;
            }
            assert_eq!(next, 16384);
        }
    }
}
