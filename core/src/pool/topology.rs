//! A cluster's topology as a queue needs it: its masters and their replicas,
//! the master of a key's slot, and the slot of a key.

use super::*;

/// One master of a cluster, as `CLUSTER SLOTS` names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Master {
    /// Its host (as the cluster announces it).
    pub host: String,
    /// Its port.
    pub port: u16,
}

impl std::fmt::Display for Master {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

impl RedisPool {
    /// The masters of the cluster (`CLUSTER SLOTS`), sorted; empty for one server.
    pub async fn masters(&self) -> Result<Vec<Master>> {
        let mut masters: Vec<Master> = Vec::new();
        for (_, _, master) in self.slot_ranges().await? {
            if !masters.contains(&master) {
                masters.push(master);
            }
        }
        masters.sort();
        Ok(masters)
    }

    /// The replicas of `master` (`CLUSTER NODES`, as a reachable node sees
    /// them: `CLUSTER SLOTS` leaves out the replicas of a failed master).
    pub async fn replicas_of(&self, master: &Master) -> Result<Vec<Master>> {
        let text: String = self
            .ask_any_node(redis::cmd("CLUSTER").arg("NODES"))
            .await?;
        // <id> <ip:port@cport[,hostname]> <flags> <master id or -> ...
        let nodes: Vec<(&str, Option<Master>, &str)> = text
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                let id = words.next()?;
                let addr = words.next()?;
                let _flags = words.next()?;
                let of = words.next()?;
                let (host, rest) = addr.rsplit_once(':')?;
                let port = rest.split(['@', ',']).next()?.parse().ok()?;
                let node = Master {
                    host: host.to_owned(),
                    port,
                };
                Some((id, Some(node), of))
            })
            .collect();
        let Some(master_id) = nodes
            .iter()
            .find(|(_, node, _)| node.as_ref() == Some(master))
            .map(|(id, _, _)| *id)
        else {
            return Ok(Vec::new());
        };
        Ok(nodes
            .into_iter()
            .filter(|(_, _, of)| *of == master_id)
            .filter_map(|(_, node, _)| node)
            .collect())
    }

    /// Runs `cmd` on a random node of the cluster, asking another when the
    /// one asked does not answer (a master killed, its replica not promoted).
    async fn ask_any_node<T: FromRedisValue>(&self, cmd: &mut Cmd) -> Result<T> {
        let RedisPool::Cluster(cluster) = self else {
            return Err(Error::InvalidArgument("not a Redis Cluster".into()));
        };
        let mut conn = cluster.shared().await?;
        let mut tries = 0;
        loop {
            tries += 1;
            let reply = bounded(
                cluster.response_timeout,
                conn.route_command(
                    cmd.to_owned(),
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
                ),
            )
            .await;
            match reply {
                Err(e) if tries < 8 && !e.is_auth_failure() => continue,
                other => return Ok(parse(other?)?),
            }
        }
    }

    /// The master serving the slot of `key` (`CLUSTER SLOTS`, as a reachable
    /// node sees it); `None` for one server or a slot no master serves.
    pub async fn master_of(&self, key: &str) -> Result<Option<Master>> {
        let slot = key_slot(key.as_bytes());
        Ok(self
            .slot_ranges()
            .await?
            .into_iter()
            .find(|(from, to, _)| (*from..=*to).contains(&slot))
            .map(|(_, _, master)| master))
    }

    /// The master serving the slot of each of `keys`, in order, from one
    /// `CLUSTER SLOTS` (as a reachable node sees it); all `None` for one
    /// server (no call made), `None` for a slot no master serves.
    pub async fn masters_of(&self, keys: &[&str]) -> Result<Vec<Option<Master>>> {
        if !self.is_cluster() {
            return Ok(vec![None; keys.len()]);
        }
        let ranges = self.slot_ranges().await?;
        Ok(keys
            .iter()
            .map(|key| {
                let slot = key_slot(key.as_bytes());
                ranges
                    .iter()
                    .find(|(from, to, _)| (*from..=*to).contains(&slot))
                    .map(|(_, _, master)| master.clone())
            })
            .collect())
    }

    /// The slot ranges of the cluster and their masters (`CLUSTER SLOTS`);
    /// empty for one server.
    async fn slot_ranges(&self) -> Result<Vec<(u16, u16, Master)>> {
        Ok(self
            .slot_nodes()
            .await?
            .into_iter()
            .map(|(from, to, master, _)| (from, to, master))
            .collect())
    }

    /// The slot ranges of the cluster, their masters and replicas
    /// (`CLUSTER SLOTS`); empty for one server.
    async fn slot_nodes(&self) -> Result<Vec<(u16, u16, Master, Vec<Master>)>> {
        let RedisPool::Cluster(cluster) = self else {
            return Ok(Vec::new());
        };
        let mut conn = cluster.shared().await?;
        // asked of a random node: one that is down (a master killed, its
        // replica not promoted yet) fails the ask, another node answers
        let mut tries = 0;
        let reply = loop {
            tries += 1;
            let reply = bounded(
                cluster.response_timeout,
                conn.route_command(
                    redis::cmd("CLUSTER").arg("SLOTS").to_owned(),
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
                ),
            )
            .await;
            match reply {
                Err(e) if tries < 8 && !e.is_auth_failure() => continue,
                other => break other?,
            }
        };
        let ranges: Vec<Vec<Value>> = parse(reply)?;
        let mut out = Vec::new();
        for range in ranges {
            let (Some(from), Some(to), Some(node)) = (range.first(), range.get(1), range.get(2))
            else {
                continue;
            };
            let from: u16 = parse(from.clone())?;
            let to: u16 = parse(to.clone())?;
            let Some(master) = node_of(node)? else {
                continue;
            };
            let mut replicas = Vec::new();
            for replica in range.iter().skip(3) {
                replicas.extend(node_of(replica)?);
            }
            out.push((from, to, master, replicas));
        }
        Ok(out)
    }
}

/// The host and port of one node entry of a `CLUSTER SLOTS` range.
fn node_of(node: &Value) -> redis::RedisResult<Option<Master>> {
    let node: Vec<Value> = parse(node.clone())?;
    let (Some(host), Some(port)) = (node.first(), node.get(1)) else {
        return Ok(None);
    };
    Ok(Some(Master {
        host: parse(host.clone())?,
        port: parse(port.clone())?,
    }))
}

/// The Redis Cluster hash slot of `key`: CRC16 (XMODEM) of its hash tag (the
/// part between the first `{` and the next `}`, when not empty) or of the
/// whole key, modulo 16384, as Redis computes it.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|b| *b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|b| *b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    let mut crc: u16 = 0;
    for byte in tagged {
        crc ^= u16::from(*byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}
