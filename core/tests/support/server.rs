//! The tests that drive the `Queue` client against a private `redis-server`
//! of their own ([`RedisServer`]): reading Redis directly (`get` and a few
//! typed reads), connecting, enqueueing and leasing one job, forcing a lease
//! expired, and polling until a condition yields a value.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use leasehold_core::redis::{self, FromRedisValue, Value};
use leasehold_core::Lease;
use leasehold_core::{JobId, NewJob, Queue, QueueConfig};
use leasehold_testkit::{wait_until_async, RedisServer};
use serde_json::json;

/// Generous deadline for every condition a test waits on.
pub(crate) const WAIT: Duration = Duration::from_secs(10);
/// A lease TTL long enough never to expire during a test unless forced.
pub(crate) const TTL: Duration = Duration::from_secs(60);

// ---- reading Redis directly ---------------------------------------------------

/// Runs one command on the test server and converts its reply.
#[track_caller]
pub(crate) fn get<T: FromRedisValue>(srv: &RedisServer, args: &[&str]) -> T {
    let reply = srv.cmd(args);
    if let Value::ServerError(e) = &reply {
        panic!("{args:?} failed: {e:?}");
    }
    redis::from_redis_value(reply).unwrap_or_else(|e| panic!("{args:?}: cannot convert: {e}"))
}

/// The score of `member` in the sorted set `key`, if it is a member.
pub(crate) fn zscore(srv: &RedisServer, key: &str, member: &str) -> Option<f64> {
    get(srv, &["ZSCORE", key, member])
}

/// Every member of the sorted set `key`, lowest score first.
pub(crate) fn zmembers(srv: &RedisServer, key: &str) -> Vec<String> {
    get(srv, &["ZRANGE", key, "0", "-1"])
}

/// Every event of the queue's stream, as field maps, oldest first.
pub(crate) fn events(srv: &RedisServer, q: &Queue) -> Vec<BTreeMap<String, String>> {
    let raw: Vec<(String, Vec<String>)> = get(srv, &["XRANGE", &q.keys().events(), "-", "+"]);
    let mut out = Vec::new();
    for (_, flat) in raw {
        let mut first: BTreeMap<String, String> = flat
            .chunks(2)
            .map(|c| (c[0].clone(), c.get(1).cloned().unwrap_or_default()))
            .collect();
        // a settle call's happy-path events after the first: five words each
        // in `more`, with the entry's `by` (docs/redis-keys.md, Events)
        let more = first.remove("more").unwrap_or_default();
        let by = first.get("by").cloned().unwrap_or_default();
        out.push(first);
        let words: Vec<&str> = more.split_whitespace().collect();
        assert!(
            words.len().is_multiple_of(5),
            "an events entry's more: {more:?}"
        );
        for w in words.chunks(5) {
            out.push(
                [
                    ("op", w[0]),
                    ("job", w[1]),
                    ("attempt", w[2]),
                    ("from", w[3]),
                    ("to", w[4]),
                    ("by", by.as_str()),
                ]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            );
        }
    }
    out
}

/// `calls=` of one command in `INFO commandstats` (0 when never called).
pub(crate) fn command_calls(srv: &RedisServer, command: &str) -> u64 {
    let prefix = format!("cmdstat_{command}:");
    srv.info("commandstats")
        .lines()
        .find(|l| l.starts_with(&prefix))
        .and_then(|l| l.split("calls=").nth(1))
        .and_then(|s| s.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Script calls counted by `INFO commandstats` since the last reset: `FCALL`
/// of the function library, and `EVALSHA`/`EVAL` where scripts run on their own.
#[allow(dead_code)]
pub(crate) fn script_calls(srv: &RedisServer) -> u64 {
    ["fcall", "evalsha", "eval"]
        .iter()
        .map(|c| command_calls(srv, c))
        .sum()
}

// ---- the queue client ---------------------------------------------------------

/// A `Queue` client for `queue` on the test server, with the default config.
pub(crate) async fn connect(srv: &RedisServer, queue: &str) -> Queue {
    Queue::connect(&srv.url(), queue, QueueConfig::default())
        .await
        .expect("connect")
}

/// A new job of `pipeline` with input `{"n": n}`.
pub(crate) fn job(pipeline: &str, n: u64) -> NewJob {
    NewJob::new(pipeline, &json!({ "n": n })).expect("serialisable input")
}

/// Enqueues `job`, asserting it was created (not an idempotent duplicate).
pub(crate) async fn enqueue(q: &Queue, job: NewJob) -> JobId {
    let e = q.enqueue(job).await.expect("enqueue");
    assert!(e.created);
    e.id
}

/// Leases exactly one job of `pipeline` for `worker`, with [`TTL`].
pub(crate) async fn lease_one(q: &Queue, worker: &str, pipeline: &str) -> Lease {
    let mut leased = q
        .lease(worker, &[pipeline], 1, TTL)
        .await
        .expect("lease")
        .leases;
    assert_eq!(leased.len(), 1, "expected exactly one lease");
    leased.pop().unwrap()
}

/// The job as the client reads it; it must exist.
pub(crate) async fn read(q: &Queue, id: &JobId) -> leasehold_core::Job {
    q.job(id).await.expect("read job").expect("job exists")
}

/// Makes the job's lease look expired to the sweeper.
pub(crate) fn force_expire(srv: &RedisServer, q: &Queue, id: &JobId) {
    let changed: i64 = get(
        srv,
        &["ZADD", &q.keys().leases(), "XX", "CH", "0", id.as_str()],
    );
    assert_eq!(changed, 1, "job {id} had no lease to expire");
}

// ---- waiting ------------------------------------------------------------------

/// Polls `f` until it yields `Some`, within [`WAIT`].
pub(crate) async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let slot = RefCell::new(None);
    wait_until_async(WAIT, what, || {
        let fut = f();
        let slot = &slot;
        async move {
            match fut.await {
                Some(v) => {
                    *slot.borrow_mut() = Some(v);
                    true
                }
                None => false,
            }
        }
    })
    .await;
    slot.into_inner().unwrap()
}

// ---- groups -------------------------------------------------------------------

/// Reads, in one script run (atomically), group `group`'s count per state
/// and the state each of its children is actually in (QUARANTINED for one in
/// the quarantine, GONE for one deleted), and returns the differences as
/// `STATE=counted/actual` plus the sum of the counts against the total and
/// the children listed; empty when every count is exact.
pub(crate) fn group_count_errors(srv: &RedisServer, q: &Queue, group: &str) -> Vec<String> {
    const CHECK: &str = r#"
local base, g = ARGV[1], ARGV[2]
local gk = base .. ':group:' .. g
local ids = redis.call('ZRANGE', gk .. ':children', 0, -1)
local actual = {}
for _, id in ipairs(ids) do
  local s
  if redis.call('ZSCORE', base .. ':quarantine', id) then
    s = 'QUARANTINED'
  else
    local t = redis.pcall('HGET', base .. ':job:' .. id, 'state')
    if type(t) == 'string' then s = t else s = 'GONE' end
  end
  actual[s] = (actual[s] or 0) + 1
end
local out = {}
local sum = 0
for _, st in ipairs({ 'QUEUED', 'LEASED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'STALE', 'QUARANTINED' }) do
  local c = tonumber(redis.call('HGET', gk, st) or '0')
  sum = sum + c
  if c ~= (actual[st] or 0) then out[#out + 1] = st .. '=' .. c .. '/' .. (actual[st] or 0) end
end
local total = tonumber(redis.call('HGET', gk, 'total') or '0')
if sum ~= total or total ~= #ids then out[#out + 1] = 'sum=' .. sum .. ' total=' .. total .. ' children=' .. #ids end
return out
"#;
    get(srv, &["EVAL", CHECK, "0", q.keys().base(), group])
}
