//! Calling a script directly, for the `scripts_validate_first*` tests: the
//! exact text the crate runs (`leasehold_core::wire::script_source`) with the
//! fixed KEYS and common ARGV the crate sends, the malformed values tried for
//! each argument and forged keys, and the full dump of Redis compared before
//! and after a refusal; the realistic states the scripts are called on
//! (a failed, leased or running job, a settle call, a group's key).

use std::collections::BTreeMap;
use std::time::Duration;

use super::server::{enqueue, get, job, lease_one, TTL};
use leasehold_core::redis::{self, Value};
use leasehold_core::{AttemptError, Queue};
use leasehold_core::{Lease, Outcome};
use leasehold_testkit::RedisServer;

/// A call of one script: every KEYS and every ARGV (from ARGV[1]).
#[derive(Clone, Debug)]
pub(crate) struct Call {
    pub(crate) keys: Vec<String>,
    pub(crate) args: Vec<String>,
}

/// What one malformed (or merely odd) value must lead to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Expect {
    /// A clean refusal, and nothing written.
    Refused,
    /// Any text is legal here: the call succeeds.
    Accepted,
}
use Expect::{Accepted, Refused};

/// Values that are not plain non-negative integers.
pub(crate) const NOT_COUNTS: [&str; 6] = ["x", "-1", "", "1.5", "1e3", "99999999999999999999"];
/// The same, and zero (for values that must be positive).
pub(crate) const NOT_POSITIVE: [&str; 7] =
    ["x", "-1", "", "1.5", "1e3", "99999999999999999999", "0"];
/// Values that are not flags ('1', '0' or '').
pub(crate) const NOT_FLAGS: [&str; 3] = ["yes", "2", "true"];
/// Text any free-text argument must take.
pub(crate) const ODD_TEXT: [&str; 3] = ["", "a, b @ {c} \"quoted\" \\ ✓", "not json {"];

/// Whether `name` is a script clients call.
pub(crate) fn source_exists(name: &str) -> bool {
    leasehold_core::wire::script_source(name).is_some()
}

/// The script `name` exactly as the crate builds it.
pub(crate) fn source(name: &str) -> String {
    leasehold_core::wire::script_source(name).expect("a script clients call")
}

/// The fixed KEYS and the common ARGV (events cap, keep count, keep age ms), as
/// `Queue` sends them, followed by the script's own keys and values.
pub(crate) fn call(q: &Queue, keys: &[String], args: &[&str]) -> Call {
    let cfg = q.config();
    let mut all_keys: Vec<String> = q.keys().fixed().to_vec();
    all_keys.extend_from_slice(keys);
    let mut all_args = vec![
        cfg.events_max_len.to_string(),
        cfg.retention.keep_count.to_string(),
        cfg.retention.keep_age.as_millis().to_string(),
    ];
    all_args.extend(args.iter().map(|a| a.to_string()));
    Call {
        keys: all_keys,
        args: all_args,
    }
}

/// Runs `call` on script `name` with `EVAL`.
pub(crate) fn eval(srv: &RedisServer, name: &str, call: &Call) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(source(name)).arg(call.keys.len());
    for k in &call.keys {
        cmd.arg(k);
    }
    for a in &call.args {
        cmd.arg(a);
    }
    cmd.query(&mut srv.connection())
}

/// Every key of the server but the jobs' outputs lists (a checkpoint
/// appends to one even when refused, and its entry counts for no one),
/// rendered and as raw `DUMP` payloads.
pub(crate) fn full_dump(
    srv: &RedisServer,
) -> (BTreeMap<String, String>, BTreeMap<String, Vec<u8>>) {
    let rendered = srv.dump_but_outputs("*");
    let mut con = srv.connection();
    let raw = rendered
        .keys()
        .map(|k| {
            let payload: Option<Vec<u8>> = redis::cmd("DUMP").arg(k).query(&mut con).unwrap();
            (k.clone(), payload.expect("key vanished while dumping"))
        })
        .collect();
    (rendered, raw)
}

/// The first refusal status (`BAD_ARG`, `CORRUPT`, `OP_ERROR`) at the head of
/// the reply or of one of its nested arrays, with the text after it.
pub(crate) fn refusal_in(v: &Value) -> Option<String> {
    match v {
        Value::Array(items) => {
            let text = |v: &Value| match v {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                other => format!("{other:?}"),
            };
            if let Some(head) = items.first() {
                if ["BAD_ARG", "CORRUPT", "OP_ERROR"].contains(&text(head).as_str()) {
                    return Some(items.iter().map(text).collect::<Vec<_>>().join(" "));
                }
            }
            items.iter().find_map(refusal_in)
        }
        _ => None,
    }
}

/// Calls `name` with ARGV[`arg`] replaced by `value` and checks `expect`.
#[track_caller]
pub(crate) fn check(
    srv: &RedisServer,
    name: &str,
    base: &Call,
    arg: usize,
    value: &str,
    expect: Expect,
) {
    let mut c = base.clone();
    assert!(
        arg >= 1 && arg <= c.args.len(),
        "{name}: no ARGV[{arg}] in {:?}",
        c.args
    );
    c.args[arg - 1] = value.to_owned();
    let what = format!("{name} with ARGV[{arg}] = {value:?}");
    let before = full_dump(srv);
    let reply = eval(srv, name, &c);
    match expect {
        Refused => {
            match &reply {
                Err(e) => assert!(
                    e.to_string().contains("BAD_ARG") || e.to_string().contains("BAD_KEY"),
                    "{what}: an error reply that is not a BAD_ARG or BAD_KEY refusal: {e}"
                ),
                Ok(v) => assert!(
                    refusal_in(v).is_some(),
                    "{what}: accepted ({v:?}), should be refused"
                ),
            }
            let after = full_dump(srv);
            assert!(
                before == after,
                "{what}: refused ({reply:?}) but Redis changed:\nbefore {:#?}\nafter {:#?}",
                before.0,
                after.0
            );
        }
        Accepted => {
            let v = reply.unwrap_or_else(|e| panic!("{what}: any text is legal here: {e}"));
            assert!(
                refusal_in(&v).is_none(),
                "{what}: any text is legal here, got {v:?}"
            );
        }
    }
}

/// The cases of the common ARGV every script receives.
pub(crate) fn common_cases() -> Vec<(usize, &'static str, Expect)> {
    let mut cases = Vec::new();
    for arg in 1..=3 {
        for v in NOT_COUNTS {
            cases.push((arg, v, Refused));
        }
    }
    cases
}

/// Adds `values` at `arg` with `expect` to `cases`.
pub(crate) fn add(
    cases: &mut Vec<(usize, &'static str, Expect)>,
    arg: usize,
    values: &[&'static str],
    expect: Expect,
) {
    cases.extend(values.iter().map(|v| (arg, *v, expect)));
}

/// Runs every case on fresh state made by `setup` (the server emptied first).
pub(crate) async fn run_cases<F, Fut>(
    srv: &RedisServer,
    name: &str,
    cases: &[(usize, &'static str, Expect)],
    setup: F,
) where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Call>,
{
    for (arg, value, expect) in cases {
        let _: () = get(srv, &["FLUSHALL"]);
        let base = setup().await;
        check(srv, name, &base, *arg, value, *expect);
    }
    // and the base call itself is accepted
    let _: () = get(srv, &["FLUSHALL"]);
    let base = setup().await;
    let v = eval(srv, name, &base).unwrap_or_else(|e| panic!("{name}: the base call fails: {e}"));
    assert!(
        refusal_in(&v).is_none(),
        "{name}: the base call is refused: {v:?}"
    );
    refuses_forged_keys(srv, name, &setup).await;
}

/// The ways a hand-built call could forge the key `k`: another queue's key,
/// and a key of this queue that is not the one the script derives. A job's
/// key names its job by the id after `:job:` (a script taking the job from
/// its key cannot tell `<job key>:forged` from the key of job `<id>:forged`),
/// so it is forged as a key of another kind (`:jobx:`); every other key with
/// `:forged` after it (for a pipeline's key: another pipeline's, for a
/// resource's: another resource's).
pub(crate) fn forgeries(k: &str) -> Vec<String> {
    let mut out = vec![k.replacen("{vf}", "{other}", 1)];
    if k.contains("}:job:") {
        out.push(k.replacen("}:job:", "}:jobx:", 1));
    } else {
        out.push(format!("{k}:forged"));
    }
    out
}

/// The text of a `BAD_KEY` refusal in `reply`: an error reply (the whole call
/// refused), or an operation's `{'BAD_KEY', detail}` in settle's reply.
pub(crate) fn bad_key_text(reply: &redis::RedisResult<Value>) -> Option<String> {
    match reply {
        Err(e) => Some(e.to_string()).filter(|t| t.contains("BAD_KEY")),
        Ok(Value::Array(ops)) => ops.iter().find_map(|op| match op {
            Value::Array(items) => match (items.first(), items.get(1)) {
                (Some(Value::BulkString(head)), Some(Value::BulkString(detail)))
                    if head.as_slice() == b"BAD_KEY" =>
                {
                    Some(format!("BAD_KEY {}", String::from_utf8_lossy(detail)))
                }
                _ => None,
            },
            _ => None,
        }),
        Ok(_) => None,
    }
}

/// Calls `name` once per key of its call but the base (KEYS[2..], fresh
/// state made by `setup` each time) with that key forged the way a
/// hand-built call could (`forgeries`): each call is refused with a
/// `BAD_KEY` naming the position and the key, and every key of Redis is
/// byte-identical afterwards (a `DUMP` of each).
pub(crate) async fn refuses_forged_keys<F, Fut>(srv: &RedisServer, name: &str, setup: &F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Call>,
{
    let _: () = get(srv, &["FLUSHALL"]);
    let positions = setup().await.keys.len();
    assert!(positions >= 9, "{name}: fewer than the fixed keys");
    for at in 2..=positions {
        for way in 0..2 {
            let _: () = get(srv, &["FLUSHALL"]);
            let mut c = setup().await;
            assert_eq!(
                c.keys.len(),
                positions,
                "{name}: setup names as many keys each time"
            );
            let forged = forgeries(&c.keys[at - 1]).swap_remove(way);
            c.keys[at - 1] = forged.clone();
            let before = full_dump(srv);
            let reply = eval(srv, name, &c);
            let what = format!("{name} with KEYS[{at}] = {forged}");
            let text = bad_key_text(&reply)
                .unwrap_or_else(|| panic!("{what}: not refused as a foreign key: {reply:?}"));
            assert!(
                text.contains(&format!("KEYS[{at}] is {forged}, not ")),
                "{what}: refused without naming the key: {text}"
            );
            let after = full_dump(srv);
            assert!(
                before == after,
                "{what}: refused ({text}) but Redis changed:\nbefore {:#?}\nafter {:#?}",
                before.0,
                after.0
            );
        }
    }
}

pub(crate) fn failed(retryable: bool, backoff: Duration) -> Outcome {
    Outcome::Failed {
        error: AttemptError {
            kind: "io".into(),
            message: "disk full".into(),
            retryable,
            retries_exhausted: false,
        },
        backoff,
        cleanup_needed: false,
    }
}

/// A leased job of pipeline `p` (with resource `R` when `resource`), max 3 attempts.
pub(crate) async fn leased(q: &Queue, resource: bool) -> Lease {
    let mut new = job("p", 1).max_attempts(3);
    if resource {
        new = new.resource("R");
    }
    enqueue(q, new).await;
    lease_one(q, "w1", "p").await
}

/// A RUNNING job (started at step `fetch`).
pub(crate) async fn running(q: &Queue, resource: bool) -> Lease {
    let l = leased(q, resource).await;
    let _ = q.start(&l, "fetch").await.expect("start");
    l
}

/// A settle call of operations `ops` (kind, token, resource, values...) with
/// `keys`, asking no lease.
pub(crate) fn settle_call(q: &Queue, keys: &[String], ops: usize, values: &[&str]) -> Call {
    let ttl = TTL.as_millis().to_string();
    let lock_ttl = (TTL.as_millis() + 3_600_000).to_string();
    let n = ops.to_string();
    let mut args: Vec<&str> = vec!["", &ttl, &lock_ttl, &n, "0", "0"];
    args.extend_from_slice(values);
    call(q, keys, &args)
}

/// The key of group `g` of `q`.
pub(crate) fn group_key(q: &Queue, g: &str) -> String {
    format!("{}:group:{g}", q.keys().base())
}
