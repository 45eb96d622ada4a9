//! [`RedisServer::dump`]: a deterministic rendering of every key matching a
//! pattern (type, value, TTL presence), for before/after comparisons such as
//! proving that a refused operation changed nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use deadpool_redis::redis;

use crate::server::RedisServer;

impl RedisServer {
    /// [`RedisServer::dump`] without the jobs' outputs streams (`<base>:out:<id>`):
    /// a checkpoint appends to one even when it is refused (its entry counts
    /// for no one, and the next script that ends, replaces or deletes the
    /// attempt deletes it), so a refusal's "nothing changed" leaves them out.
    #[track_caller]
    pub fn dump_but_outputs(&self, pattern: &str) -> BTreeMap<String, String> {
        let mut all = self.dump(pattern);
        all.retain(|key, _| !key.contains(":out:"));
        all
    }

    /// A deterministic dump of every key matching `pattern` (found with
    /// `SCAN`, never `KEYS`), in database 0, for comparing before/after
    /// states, e.g. to prove that a refused operation changed nothing.
    ///
    /// Maps each key to `"<type> <value>"`, followed by `" [ttl]"` when the
    /// key has an expiry. Values are rendered with byte strings quoted and
    /// escaped (non-UTF-8 ones as `0x..` hex):
    ///
    /// * string: `"v"`;
    /// * hash: `{"f1": "v1", "f2": "v2"}` sorted by field;
    /// * list: `["a", "b"]` in list order;
    /// * set: `{"a", "b"}` sorted;
    /// * zset: `[("m", "1.5"), ...]` in rank order, with scores;
    /// * stream: its entries (`id {field: value, ...}`), its last generated
    ///   id, and per consumer group its last delivered id and pending entries
    ///   (id, consumer, delivery count; idle times are omitted);
    /// * any other type: the type name only.
    ///
    /// Keys that are not valid UTF-8 are given as `0x..` hex.
    #[track_caller]
    pub fn dump(&self, pattern: &str) -> BTreeMap<String, String> {
        let mut con = self.helper_connection();
        let mut keys: BTreeSet<Vec<u8>> = BTreeSet::new();
        let mut cursor = String::from("0");
        loop {
            let reply = self.run(
                &mut con,
                &["SCAN", &cursor, "MATCH", pattern, "COUNT", "1000"],
            );
            let (next, batch): (String, Vec<Vec<u8>>) = self.convert(reply, "SCAN");
            keys.extend(batch);
            if next == "0" {
                break;
            }
            cursor = next;
        }

        let mut out = BTreeMap::new();
        for key in keys {
            if let Some(rendered) = self.render_key(&mut con, &key) {
                out.insert(render_key_name(&key), rendered);
            }
        }
        out
    }

    #[track_caller]
    fn run_bytes(
        &self,
        con: &mut redis::Connection,
        name: &str,
        key: &[u8],
        rest: &[&str],
    ) -> redis::Value {
        let mut cmd = redis::cmd(name);
        cmd.arg(key);
        for arg in rest {
            cmd.arg(*arg);
        }
        let mut shown = vec![name];
        let key_shown = render_key_name(key);
        shown.push(&key_shown);
        shown.extend_from_slice(rest);
        self.run_cmd(con, &cmd, &shown)
    }

    #[track_caller]
    fn query_key<T: redis::FromRedisValue>(
        &self,
        con: &mut redis::Connection,
        name: &str,
        key: &[u8],
        rest: &[&str],
    ) -> T {
        let value = self.run_bytes(con, name, key, rest);
        self.convert(value, name)
    }

    /// Renders one key, or `None` if it vanished since `SCAN`.
    fn render_key(&self, con: &mut redis::Connection, key: &[u8]) -> Option<String> {
        let kind: String = self.query_key(con, "TYPE", key, &[]);
        let mut out = kind.clone();
        out.push(' ');
        match kind.as_str() {
            "none" => return None,
            "string" => {
                let v: Option<Vec<u8>> = self.query_key(con, "GET", key, &[]);
                out.push_str(&render_bytes(&v?));
            }
            "hash" => {
                let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = self.query_key(con, "HGETALL", key, &[]);
                pairs.sort();
                render_pairs(&mut out, &pairs);
            }
            "list" => {
                let items: Vec<Vec<u8>> = self.query_key(con, "LRANGE", key, &["0", "-1"]);
                render_seq(&mut out, '[', ']', &items);
            }
            "set" => {
                let mut items: Vec<Vec<u8>> = self.query_key(con, "SMEMBERS", key, &[]);
                items.sort();
                render_seq(&mut out, '{', '}', &items);
            }
            "zset" => {
                let items: Vec<(Vec<u8>, String)> =
                    self.query_key(con, "ZRANGE", key, &["0", "-1", "WITHSCORES"]);
                out.push('[');
                for (i, (member, score)) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    let _ = write!(out, "({}, {score:?})", render_bytes(member));
                }
                out.push(']');
            }
            "stream" => self.render_stream(con, key, &mut out),
            _ => out.push_str("<not rendered>"),
        }
        let pttl: i64 = self.query_key(con, "PTTL", key, &[]);
        if pttl >= 0 {
            out.push_str(" [ttl]");
        }
        Some(out)
    }

    fn render_stream(&self, con: &mut redis::Connection, key: &[u8], out: &mut String) {
        let entries: Vec<StreamEntry> = {
            let value = self.run_bytes(con, "XRANGE", key, &["-", "+"]);
            self.convert_stream_entries(value)
        };
        out.push('[');
        for (i, (id, fields)) in entries.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(id);
            out.push(' ');
            render_pairs(out, fields);
        }
        out.push(']');

        // XINFO STREAM <key>: the key comes after the subcommand.
        let info = {
            let mut cmd = redis::cmd("XINFO");
            cmd.arg("STREAM").arg(key);
            let value = self.run_cmd(con, &cmd, &["XINFO", "STREAM", &render_key_name(key)]);
            flat_map(self.convert::<Vec<redis::Value>>(value, "XINFO STREAM"))
        };
        let last_id = info.get("last-generated-id").cloned().unwrap_or_default();
        let _ = write!(out, " last-id={last_id}");

        let groups: Vec<redis::Value> = {
            let mut cmd = redis::cmd("XINFO");
            cmd.arg("GROUPS").arg(key);
            let value = self.run_cmd(con, &cmd, &["XINFO", "GROUPS", &render_key_name(key)]);
            self.convert(value, "XINFO GROUPS")
        };
        let mut rendered_groups: Vec<String> = Vec::new();
        for group in groups {
            let fields = flat_map(self.convert::<Vec<redis::Value>>(group, "XINFO GROUPS entry"));
            let name = fields.get("name").cloned().unwrap_or_default();
            let last_delivered = fields.get("last-delivered-id").cloned().unwrap_or_default();
            let pending: Vec<(String, String, i64, i64)> = {
                let mut cmd = redis::cmd("XPENDING");
                cmd.arg(key).arg(&name).arg("-").arg("+").arg(100_000);
                let value = self.run_cmd(con, &cmd, &["XPENDING", &render_key_name(key), &name]);
                self.convert(value, "XPENDING")
            };
            let pending: Vec<String> = pending
                .into_iter()
                .map(|(id, consumer, _idle, deliveries)| format!("{id}@{consumer}x{deliveries}"))
                .collect();
            rendered_groups.push(format!(
                "{name:?}: last-delivered={last_delivered} pending=[{}]",
                pending.join(", ")
            ));
        }
        rendered_groups.sort();
        let _ = write!(out, " groups={{{}}}", rendered_groups.join(", "));
    }

    fn convert_stream_entries(&self, value: redis::Value) -> Vec<StreamEntry> {
        let raw: Vec<(String, Vec<Vec<u8>>)> = self.convert(value, "XRANGE");
        raw.into_iter()
            .map(|(id, flat)| {
                let pairs = flat
                    .chunks(2)
                    .map(|c| (c[0].clone(), c.get(1).cloned().unwrap_or_default()))
                    .collect();
                (id, pairs)
            })
            .collect()
    }
}

/// A stream entry: its id and its field/value pairs in order.
type StreamEntry = (String, Vec<(Vec<u8>, Vec<u8>)>);

fn render_bytes(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => format!("{s:?}"),
        Err(_) => hex(bytes),
    }
}

fn render_key_name(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(s) => s.to_owned(),
        Err(_) => hex(key),
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::from("0x");
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn render_pairs(out: &mut String, pairs: &[(Vec<u8>, Vec<u8>)]) {
    out.push('{');
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{}: {}", render_bytes(k), render_bytes(v));
    }
    out.push('}');
}

fn render_seq(out: &mut String, open: char, close: char, items: &[Vec<u8>]) {
    out.push(open);
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&render_bytes(item));
    }
    out.push(close);
}

/// Turns an `XINFO` reply (flat `name, value, ...` array) into a map of its
/// scalar fields rendered as strings.
fn flat_map(values: Vec<redis::Value>) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let mut it = values.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        let key = scalar(&k);
        if let Some(key) = key {
            if let Some(value) = scalar(&v) {
                map.insert(key, value);
            }
        }
    }
    map
}

fn scalar(value: &redis::Value) -> Option<String> {
    match value {
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => Some(s.clone()),
        redis::Value::Int(i) => Some(i.to_string()),
        redis::Value::Okay => Some("OK".into()),
        redis::Value::Nil => Some("nil".into()),
        _ => None,
    }
}
