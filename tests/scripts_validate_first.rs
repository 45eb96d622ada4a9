//! Every script clients call checks all of its arguments, and the job fields it
//! reads, before it writes anything. Each script is called directly (the exact
//! text the crate runs, `leasehold_core::wire::script_source`) on realistic state,
//! with the fixed KEYS and common ARGV the crate sends, once per malformed value
//! of each argument: the reply is a clean refusal (a `BAD_ARG` error reply, or
//! a `BAD_ARG`/`CORRUPT` status) and a full dump of Redis is byte-identical
//! afterwards. Arguments where any text is legal (reasons, messages, outputs)
//! are shown to succeed with odd text. Corrupt job fields get the same check.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold::lease::{Lease, Outcome};
use leasehold::queue::{AttemptError, JobId, JobState, Queue};
use leasehold::redis::{self, Value};
use leasehold_testkit::RedisServer;
use support::{connect, enqueue, force_expire, get, job, lease_one, read, TTL};

/// A call of one script: every KEYS and every ARGV (from ARGV[1]).
#[derive(Clone, Debug)]
struct Call {
    keys: Vec<String>,
    args: Vec<String>,
}

/// What one malformed (or merely odd) value must lead to.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    /// A clean refusal, and nothing written.
    Refused,
    /// Any text is legal here: the call succeeds.
    Accepted,
}
use Expect::{Accepted, Refused};

/// Values that are not plain non-negative integers.
const NOT_COUNTS: [&str; 6] = ["x", "-1", "", "1.5", "1e3", "99999999999999999999"];
/// The same, and zero (for values that must be positive).
const NOT_POSITIVE: [&str; 7] = ["x", "-1", "", "1.5", "1e3", "99999999999999999999", "0"];
/// Values that are not flags ('1', '0' or '').
const NOT_FLAGS: [&str; 3] = ["yes", "2", "true"];
/// Text any free-text argument must take.
const ODD_TEXT: [&str; 3] = ["", "a, b @ {c} \"quoted\" \\ ✓", "not json {"];

/// Whether `name` is a script clients call.
fn source_exists(name: &str) -> bool {
    leasehold_core::wire::script_source(name).is_some()
}

/// The script `name` exactly as the crate builds it.
fn source(name: &str) -> String {
    leasehold_core::wire::script_source(name).expect("a script clients call")
}

/// The fixed KEYS and the common ARGV (events cap, keep count, keep age ms), as
/// `Queue` sends them, followed by the script's own keys and values.
fn call(q: &Queue, keys: &[String], args: &[&str]) -> Call {
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
fn eval(srv: &RedisServer, name: &str, call: &Call) -> redis::RedisResult<Value> {
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

/// Every key of the server, rendered and as raw `DUMP` payloads.
fn full_dump(srv: &RedisServer) -> (BTreeMap<String, String>, BTreeMap<String, Vec<u8>>) {
    let rendered = srv.dump("*");
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
fn refusal_in(v: &Value) -> Option<String> {
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
fn check(srv: &RedisServer, name: &str, base: &Call, arg: usize, value: &str, expect: Expect) {
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
fn common_cases() -> Vec<(usize, &'static str, Expect)> {
    let mut cases = Vec::new();
    for arg in 1..=3 {
        for v in NOT_COUNTS {
            cases.push((arg, v, Refused));
        }
    }
    cases
}

/// Adds `values` at `arg` with `expect` to `cases`.
fn add(
    cases: &mut Vec<(usize, &'static str, Expect)>,
    arg: usize,
    values: &[&'static str],
    expect: Expect,
) {
    cases.extend(values.iter().map(|v| (arg, *v, expect)));
}

/// Runs every case on fresh state made by `setup` (the server emptied first).
async fn run_cases<F, Fut>(
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
fn forgeries(k: &str) -> Vec<String> {
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
fn bad_key_text(reply: &redis::RedisResult<Value>) -> Option<String> {
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
async fn refuses_forged_keys<F, Fut>(srv: &RedisServer, name: &str, setup: &F)
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

fn failed(retryable: bool, backoff: Duration) -> Outcome {
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
async fn leased(q: &Queue, resource: bool) -> Lease {
    let mut new = job("p", 1).max_attempts(3);
    if resource {
        new = new.resource("R");
    }
    enqueue(q, new).await;
    lease_one(q, "w1", "p").await
}

/// A RUNNING job (started at step `fetch`).
async fn running(q: &Queue, resource: bool) -> Lease {
    let l = leased(q, resource).await;
    let _ = q.start(&l, "fetch").await.expect("start");
    l
}

/// A settle call of operations `ops` (kind, token, resource, values...) with
/// `keys`, asking no lease.
fn settle_call(q: &Queue, keys: &[String], ops: usize, values: &[&str]) -> Call {
    let ttl = TTL.as_millis().to_string();
    let lock_ttl = (TTL.as_millis() + 3_600_000).to_string();
    let n = ops.to_string();
    let mut args: Vec<&str> = vec!["", &ttl, &lock_ttl, &n, "0", "0"];
    args.extend_from_slice(values);
    call(q, keys, &args)
}

// ---- the issue's reproduction ---------------------------------------------------

/// Calling finish (through settle, as the crate does) as FAILED and retryable
/// with a backoff of `soon` used to record the attempt, unlease the job and drop
/// its token before failing (or, later, to take `soon` as no backoff at all):
/// now the call is refused, nothing changes, and the job is still RUNNING in
/// the lease index, where a sweep finds it.
#[tokio::test]
async fn a_finish_with_backoff_soon_is_refused_before_any_write() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    let l = running(&q, false).await;
    let k = q.keys().clone();
    let keys = [
        k.job(l.job.as_str()),
        k.ready("p"),
        k.delayed("p"),
        k.wake("p"),
    ];
    let c = settle_call(
        &q,
        &keys,
        1,
        &[
            "finish",
            &l.token,
            "",
            "FAILED",
            "",
            "",
            "io",
            "disk full",
            "1",
            "soon",
            "0",
            "",
            "0",
        ],
    );
    let before = full_dump(&srv);
    let err = eval(&srv, "settle", &c).expect_err("a backoff of `soon` must be refused");
    assert!(err.to_string().contains("BAD_ARG"), "{err}");
    assert!(err.to_string().contains("backoff"), "{err}");
    assert!(
        before == full_dump(&srv),
        "the refused finish changed Redis"
    );
    let j = read(&q, &l.job).await;
    assert_eq!(j.state, JobState::Running);
    let leases: Vec<String> = get(&srv, &["ZRANGE", &k.leases(), "0", "-1"]);
    assert_eq!(leases, [l.job.to_string()], "still in the lease index");
    // the same call with a number is applied
    let mut ok = c.clone();
    let at = ok.args.iter().position(|a| a == "soon").unwrap();
    ok.args[at] = "1000".into();
    let v = eval(&srv, "settle", &ok).unwrap();
    assert!(format!("{v:?}").contains("RETRY"), "{v:?}");
}

// ---- settle ---------------------------------------------------------------------

/// settle's own header (ARGV 4..9) and each operation kind's values.
#[tokio::test]
async fn settle_refuses_every_malformed_argument_before_writing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    let k = q.keys().clone();

    // a start of a job holding R, then a lease of one more job
    let mut cases = common_cases();
    add(&mut cases, 5, &NOT_POSITIVE, Refused); // lease ttl
    add(&mut cases, 6, &NOT_POSITIVE, Refused); // lock ttl
    add(&mut cases, 7, &NOT_COUNTS, Refused); // operations
    add(&mut cases, 8, &["x", "-1", "", "0"], Refused); // pipelines (a lease needs one)
    add(&mut cases, 9, &["x", "-1", "", "1.5"], Refused); // jobs to lease
    add(&mut cases, 4, &[""], Refused); // worker, when leasing
    add(&mut cases, 11, &[""], Refused); // token
    add(&mut cases, 12, &["S"], Refused); // a resource whose keys were not given
    add(&mut cases, 13, &ODD_TEXT, Accepted); // first step
    add(&mut cases, 14, &[""], Refused); // lease token
    run_cases(&srv, "settle", &cases, || async {
        let l = leased(&q, true).await;
        enqueue(&q, job("p", 2)).await;
        let ttl = TTL.as_millis().to_string();
        let lock_ttl = (TTL.as_millis() + 3_600_000).to_string();
        let keys = [
            k.job(l.job.as_str()),
            k.lock("R"),
            k.parked("R"),
            k.ready("p"),
            k.delayed("p"),
            k.wake("p"),
        ];
        call(
            &q,
            &keys,
            &[
                "w1", &ttl, &lock_ttl, "1", "1", "1", "start", &l.token, "R", "fetch", "tok-1",
            ],
        )
    })
    .await;

    // a checkpoint of a RUNNING job: step, output, next step
    let mut cases = Vec::new();
    add(&mut cases, 13, &["", "a,b", "a@b"], Refused);
    add(&mut cases, 14, &ODD_TEXT, Accepted);
    add(&mut cases, 15, &ODD_TEXT, Accepted);
    run_cases(&srv, "settle", &cases, || async {
        let l = running(&q, false).await;
        settle_call(
            &q,
            &[k.job(l.job.as_str())],
            1,
            &["checkpoint", &l.token, "", "fetch", "{\"rows\":1}", "load"],
        )
    })
    .await;

    // a failing finish: outcome, last step, its output, kind, message,
    // retryable, backoff, cleanup, reason, interrupted
    let mut cases = Vec::new();
    add(
        &mut cases,
        13,
        &["", "DONE", "RUNNING", "QUEUED", "failed"],
        Refused,
    );
    add(&mut cases, 14, &["a,b", "a@b"], Refused);
    add(&mut cases, 15, &ODD_TEXT, Accepted);
    add(&mut cases, 16, &ODD_TEXT, Accepted); // error kind
    add(&mut cases, 17, &ODD_TEXT, Accepted); // message
    add(&mut cases, 18, &NOT_FLAGS, Refused);
    add(&mut cases, 19, &NOT_COUNTS, Refused);
    add(&mut cases, 19, &["soon"], Refused);
    add(&mut cases, 20, &NOT_FLAGS, Refused);
    add(&mut cases, 21, &ODD_TEXT, Accepted); // reason
    add(&mut cases, 22, &NOT_FLAGS, Refused);
    run_cases(&srv, "settle", &cases, || async {
        let l = running(&q, false).await;
        let keys = [
            k.job(l.job.as_str()),
            k.ready("p"),
            k.delayed("p"),
            k.wake("p"),
        ];
        settle_call(
            &q,
            &keys,
            1,
            &[
                "finish",
                &l.token,
                "",
                "FAILED",
                "load",
                "{}",
                "io",
                "disk full",
                "1",
                "1000",
                "0",
                "",
                "0",
            ],
        )
    })
    .await;

    // a successful finish: outcome, last step, its output
    let mut cases = Vec::new();
    add(&mut cases, 14, &["a,b"], Refused);
    add(&mut cases, 15, &ODD_TEXT, Accepted);
    run_cases(&srv, "settle", &cases, || async {
        let l = running(&q, false).await;
        settle_call(
            &q,
            &[k.job(l.job.as_str())],
            1,
            &["finish", &l.token, "", "SUCCEEDED", "load", "{}"],
        )
    })
    .await;
}

/// A job field a transition reads that is malformed refuses that operation
/// ({'CORRUPT', problem, field}) before anything is written, in every kind.
#[tokio::test]
async fn settle_operations_check_the_job_fields_they_read_before_writing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    let k = q.keys().clone();
    // (field, value, job state wanted, operation values after kind, token, resource)
    let cases: &[(&str, &str, &str, &[&str])] = &[
        ("attempt", "two", "RUNNING", &["SUCCEEDED", "", ""]),
        ("attempt", "-1", "RUNNING", &["SUCCEEDED", "load", "{}"]),
        ("id", "", "RUNNING", &["SUCCEEDED", "", ""]),
        (
            "max_attempts",
            "many",
            "RUNNING",
            &["FAILED", "", "", "io", "m", "1", "0", "0", "", "0"],
        ),
        (
            "priority",
            "high",
            "RUNNING",
            &["FAILED", "", "", "io", "m", "1", "0", "0", "", "0"],
        ),
        (
            "attempt",
            "x",
            "RUNNING",
            &["CANCELLED", "", "", "", "", "0", "0", "0", "stop", "0"],
        ),
        ("started_at", "soon", "RUNNING", &["checkpoint"]),
        ("attempt", "x", "LEASED", &["start"]),
        ("priority", "high", "LEASED", &["release"]),
        ("created_at", "monday", "LEASED", &["release"]),
    ];
    for (field, value, state, values) in cases {
        let _: () = get(&srv, &["FLUSHALL"]);
        let l = if *state == "RUNNING" {
            running(&q, false).await
        } else {
            leased(&q, false).await
        };
        let jk = k.job(l.job.as_str());
        let _: () = get(&srv, &["HSET", &jk, field, value]);
        let requeue = [jk.clone(), k.ready("p"), k.delayed("p"), k.wake("p")];
        let (kind, keys, rest): (&str, &[String], Vec<&str>) = match values[0] {
            "checkpoint" => ("checkpoint", &requeue[..1], vec!["load", "{}", ""]),
            "start" => ("start", &requeue[..1], vec!["fetch"]),
            "release" => ("release", &requeue[..], vec![]),
            "SUCCEEDED" => ("finish", &requeue[..1], values.to_vec()),
            _ => ("finish", &requeue[..], values.to_vec()),
        };
        let mut args = vec![kind, l.token.as_str(), ""];
        args.extend(rest);
        let c = settle_call(&q, keys, 1, &args);
        let before = full_dump(&srv);
        let v = eval(&srv, "settle", &c).expect("a per-operation refusal, not an error");
        let text = refusal_in(&v)
            .unwrap_or_else(|| panic!("{field}={value:?} in {kind}: accepted: {v:?}"));
        assert!(
            text.contains("CORRUPT") && text.contains(field),
            "{field}={value:?} in {kind}: {text}"
        );
        assert!(
            before == full_dump(&srv),
            "{field}={value:?} in {kind}: refused but Redis changed"
        );
    }
    // the crate reads the refusal as a Corrupt error naming the field
    let _: () = get(&srv, &["FLUSHALL"]);
    let l = running(&q, false).await;
    let _: () = get(
        &srv,
        &["HSET", &k.job(l.job.as_str()), "max_attempts", "many"],
    );
    let err = q
        .finish(&l, &failed(true, Duration::ZERO))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, leasehold::Error::Corrupt { field, .. } if field == "max_attempts"),
        "{err:?}"
    );
}

// ---- the other scripts ------------------------------------------------------------

#[tokio::test]
async fn enqueue_refuses_every_malformed_argument_before_writing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    let k = q.keys().clone();
    let mut cases = common_cases();
    add(&mut cases, 4, &[""], Refused); // queue
    add(&mut cases, 5, &[""], Refused); // pipeline
    add(&mut cases, 6, &NOT_COUNTS, Refused); // job count
    add(&mut cases, 6, &["0", "2"], Refused); // not the jobs given
    add(&mut cases, 7, &[""], Refused); // id
    add(&mut cases, 8, &ODD_TEXT, Accepted); // input (the client checks JSON)
    add(&mut cases, 9, &["x, y"], Accepted); // input key
    add(&mut cases, 11, &["x", "-1", "", "256", "1.5"], Refused); // priority
    add(&mut cases, 12, &NOT_COUNTS, Refused); // delay ms
    add(&mut cases, 13, &["x", "-1", "", "0", "1.5"], Refused); // max attempts
    add(&mut cases, 14, &["", "keep", "HOLD"], Refused); // stale lock policy
    add(&mut cases, 15, &["x", "2", "yes"], Refused); // rerun flag
    add(
        &mut cases,
        16,
        &["x", "slots:0:r", "lock:3:r", "slots:3"],
        Refused,
    ); // flow gates
    add(
        &mut cases,
        16,
        &["slots:3:r running:2:p rate:100:api"],
        Accepted,
    );
    add(
        &mut cases,
        17,
        &[
            "x",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        ],
        Refused,
    ); // trace context
    add(
        &mut cases,
        17,
        &["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"],
        Accepted,
    );
    run_cases(&srv, "enqueue", &cases, || async {
        // a job already there, so that the call has something to get wrong
        enqueue(&q, job("p", 0)).await;
        let id = JobId::new();
        let keys = [
            k.ready("p"),
            k.delayed("p"),
            k.wake("p"),
            k.job(id.as_str()),
        ];
        call(
            &q,
            &keys,
            &[
                "vf",
                "p",
                "1",
                id.as_str(),
                "{\"n\":1}",
                "",
                "",
                "0",
                "0",
                "3",
                "hold",
                "0",
                "",
                "",
            ],
        )
    })
    .await;
}

#[tokio::test]
async fn renew_refuses_every_malformed_argument_before_writing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    let k = q.keys().clone();
    let mut cases = common_cases();
    add(&mut cases, 4, &NOT_POSITIVE, Refused); // lease ttl
    add(&mut cases, 5, &NOT_POSITIVE, Refused); // lock ttl
    add(&mut cases, 6, &[""], Refused); // first token: the second lease would be renewed first
    add(&mut cases, 7, &NOT_FLAGS, Refused);
    add(&mut cases, 8, &[""], Refused); // second token
    add(&mut cases, 9, &NOT_FLAGS, Refused);
    run_cases(&srv, "renew", &cases, || async {
        let a = leased(&q, true).await;
        let b = leased(&q, false).await;
        let ttl = TTL.as_millis().to_string();
        let lock_ttl = (TTL.as_millis() + 3_600_000).to_string();
        let keys = [
            k.job(a.job.as_str()),
            k.lock("R"),
            k.job(b.job.as_str()),
            k.job(b.job.as_str()),
        ];
        call(&q, &keys, &[&ttl, &lock_ttl, &a.token, "1", &b.token, "0"])
    })
    .await;
}

#[tokio::test]
async fn cancel_refuses_every_malformed_argument_before_writing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    let k = q.keys().clone();
    let mut cases = common_cases();
    add(&mut cases, 4, &[""], Refused); // reason
    add(&mut cases, 5, &ODD_TEXT, Accepted); // who
    add(&mut cases, 6, &["", "S"], Refused); // not the job's resource
    run_cases(&srv, "cancel", &cases, || async {
        let id = enqueue(&q, job("p", 1).resource("R")).await;
        let keys = [
            k.job(id.as_str()),
            k.ready("p"),
            k.delayed("p"),
            k.parked("R"),
        ];
        call(&q, &keys, &["no longer needed", "ops", "R"])
    })
    .await;
}

#[tokio::test]
async fn sweep_refuses_every_malformed_argument_before_writing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    let mut cases = common_cases();
    add(&mut cases, 4, &NOT_POSITIVE, Refused); // batch
    add(&mut cases, 5, &NOT_FLAGS, Refused); // dry run
    run_cases(&srv, "sweep", &cases, || async {
        let a = leased(&q, false).await;
        let b = running(&q, false).await;
        force_expire(&srv, &q, &a.job);
        force_expire(&srv, &q, &b.job);
        call(&q, &[], &["100", "0"])
    })
    .await;
}

/// A sweep moves no expired job whose move needs a malformed field: it sets it
/// aside in the quarantine (naming the field), its other fields as they were,
/// and moves the others.
#[tokio::test]
async fn sweep_quarantines_a_job_it_cannot_move_and_moves_the_others() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    let k = q.keys().clone();
    let bad = leased(&q, false).await;
    let good = leased(&q, false).await;
    let jk = k.job(bad.job.as_str());
    let _: () = get(&srv, &["HDEL", &jk, "pipeline"]);
    force_expire(&srv, &q, &bad.job);
    force_expire(&srv, &q, &good.job);
    let mut before: BTreeMap<String, String> = get(&srv, &["HGETALL", &jk]);
    let report = q.sweep(100).await.expect("sweep");
    assert_eq!(report.requeued, 1, "{report:?}");
    assert_eq!(read(&q, &good.job).await.state, JobState::Queued);
    let after: BTreeMap<String, String> = get(&srv, &["HGETALL", &jk]);
    // the lease is gone (its holder is refused); nothing else changed
    before.remove("token");
    assert_eq!(before, after, "the job without a pipeline is not moved");
    let leases: Vec<String> = get(&srv, &["ZRANGE", &k.leases(), "0", "-1"]);
    assert!(leases.is_empty(), "{leases:?}");
    let entry = q
        .quarantine_entry(bad.job.as_str())
        .await
        .expect("read")
        .expect("quarantined");
    assert_eq!(entry.field, "pipeline");
}

#[tokio::test]
async fn retry_refuses_every_malformed_argument_before_writing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    let k = q.keys().clone();
    let mut cases = common_cases();
    add(&mut cases, 4, &["", "again", "RESUME"], Refused); // mode
    add(&mut cases, 5, &ODD_TEXT, Accepted); // who
    add(&mut cases, 6, &ODD_TEXT, Accepted); // reason
    add(&mut cases, 7, &["R"], Refused); // not the job's resource
    run_cases(&srv, "retry", &cases, || async {
        let l = running(&q, false).await;
        q.finish(&l, &failed(false, Duration::ZERO))
            .await
            .expect("finish");
        let jk = k.job(l.job.as_str());
        let keys = [jk.clone(), k.ready("p"), k.wake("p"), jk.clone(), jk];
        call(&q, &keys, &["resume", "ops", "fixed", ""])
    })
    .await;

    // a malformed attempt number: refused before anything is written
    let _: () = get(&srv, &["FLUSHALL"]);
    let l = running(&q, false).await;
    q.finish(&l, &failed(false, Duration::ZERO))
        .await
        .expect("finish");
    let jk = k.job(l.job.as_str());
    let _: () = get(&srv, &["HSET", &jk, "attempt", "one"]);
    let before = full_dump(&srv);
    let keys = [jk.clone(), k.ready("p"), k.wake("p"), jk.clone(), jk];
    let v = eval(
        &srv,
        "retry",
        &call(&q, &keys, &["resume", "ops", "fixed", ""]),
    )
    .unwrap();
    assert!(
        refusal_in(&v).is_some_and(|t| t.contains("attempt")),
        "{v:?}"
    );
    assert!(before == full_dump(&srv));
}

/// A STALE job (started, then its lease expired and was swept).
async fn stale(srv: &RedisServer, q: &Queue) -> Lease {
    let l = running(q, false).await;
    force_expire(srv, q, &l.job);
    q.sweep(10).await.expect("sweep");
    l
}

#[tokio::test]
async fn resolve_refuses_every_malformed_argument_before_writing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    let k = q.keys().clone();
    let mut cases = common_cases();
    add(
        &mut cases,
        4,
        &["", "DONE", "RUNNING", "STALE", "failed"],
        Refused,
    ); // resolved state
    add(&mut cases, 5, &ODD_TEXT, Accepted); // who
    add(&mut cases, 6, &[""], Refused); // reason
    add(&mut cases, 6, &["a, b @ {c} ✓"], Accepted);
    add(&mut cases, 7, &["R"], Refused); // not the job's resource
    run_cases(&srv, "resolve", &cases, || async {
        let l = stale(&srv, &q).await;
        let jk = k.job(l.job.as_str());
        let keys = [jk.clone(), k.cleanup(), jk.clone(), jk];
        call(&q, &keys, &["FAILED", "ops", "checked the sink", ""])
    })
    .await;
}

#[tokio::test]
async fn purge_refuses_every_malformed_argument_before_writing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    let mut cases = common_cases();
    add(&mut cases, 4, &NOT_COUNTS, Refused); // batch
    run_cases(&srv, "purge", &cases, || async {
        for _ in 0..3 {
            let l = running(&q, false).await;
            q.finish(&l, &Outcome::Succeeded).await.expect("finish");
        }
        // keep 1: two are beyond the policy
        let mut c = call(&q, &[], &["10"]);
        c.args[1] = "1".into();
        c
    })
    .await;
}

#[tokio::test]
async fn claim_cleanup_refuses_every_malformed_argument_before_writing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    let k = q.keys().clone();
    let mut cases = common_cases();
    add(&mut cases, 4, &NOT_POSITIVE, Refused); // count
    add(&mut cases, 5, &NOT_POSITIVE, Refused); // claim ttl
    add(&mut cases, 6, &ODD_TEXT, Accepted); // a pipeline served
    run_cases(&srv, "claim_cleanup", &cases, || async {
        let l = stale(&srv, &q).await;
        q.resolve(&l.job, JobState::Failed, "ops", "partial write")
            .await
            .expect("resolve");
        call(&q, &[k.cleanup(), k.cleaning()], &["16", "600000", "p"])
    })
    .await;
}

/// The schedule hash of `s` in queue `vf` as `schedule_register` leaves it,
/// with its cursor at 1000 ms.
fn registered_schedule(srv: &RedisServer, q: &Queue) {
    let k = q.keys();
    let _: () = get(
        srv,
        &[
            "HSET",
            &k.schedule("s"),
            "pipeline",
            "p",
            "definition",
            "{}",
            "digest",
            "abcd",
            "cursor",
            "1000",
            "next_due",
            "2000",
            "paused",
            "0",
        ],
    );
}

#[tokio::test]
async fn schedule_tick_refuses_every_malformed_argument_before_writing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    let k = q.keys().clone();
    let mut cases = common_cases();
    add(&mut cases, 4, &[""], Refused); // queue
    add(&mut cases, 5, &[""], Refused); // pipeline
    add(&mut cases, 6, &[""], Refused); // schedule name
    add(&mut cases, 7, &[""], Refused); // digest
    add(&mut cases, 8, &["", "fire", "TICK"], Refused); // mode
    add(&mut cases, 9, &NOT_COUNTS, Refused); // expected cursor
    add(&mut cases, 10, &["", "some", "ALL"], Refused); // catch-up policy
    add(&mut cases, 11, &["", "queue"], Refused); // overlap policy
    add(&mut cases, 12, &NOT_COUNTS, Refused); // grace
    add(&mut cases, 13, &["x", "-1", "1.5"], Refused); // next due
    add(&mut cases, 14, &NOT_COUNTS, Refused); // left-out count
    add(&mut cases, 15, &ODD_TEXT, Accepted); // by
    add(&mut cases, 16, &NOT_POSITIVE, Refused); // window count
    add(&mut cases, 16, &["2"], Refused); // not the windows given
    add(&mut cases, 17, &["x", "2000", "500", "1500"], Refused); // window start
    add(&mut cases, 18, &["x", "1000", "-1"], Refused); // window end
    add(&mut cases, 19, &[""], Refused); // job id
    add(&mut cases, 20, &ODD_TEXT, Accepted); // input
    add(&mut cases, 23, &["x", "-1", "", "256"], Refused); // priority
    add(&mut cases, 24, &NOT_COUNTS, Refused); // delay ms
    add(&mut cases, 25, &["x", "0", ""], Refused); // max attempts
    add(&mut cases, 26, &["", "keep"], Refused); // stale lock policy
    add(&mut cases, 27, &["x", "2"], Refused); // rerun flag
    add(
        &mut cases,
        28,
        &["x", "slots:0:r", "lock:3:r", "slots:3"],
        Refused,
    ); // flow gates
    add(&mut cases, 28, &["running:2:p"], Accepted); // flow gates
    add(&mut cases, 29, &["x", "00-0-0-01"], Refused); // trace context
    add(
        &mut cases,
        29,
        &["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"],
        Accepted,
    ); // trace context
    run_cases(&srv, "schedule_tick", &cases, || async {
        registered_schedule(&srv, &q);
        let id = JobId::new();
        let keys = [
            k.schedule("s"),
            k.schedules(),
            k.schedule_ticks("s"),
            k.ready("p"),
            k.delayed("p"),
            k.wake("p"),
            k.job(id.as_str()),
        ];
        call(
            &q,
            &keys,
            &[
                "vf",
                "p",
                "s",
                "abcd",
                "tick",
                "1000",
                "all",
                "allow",
                "60000",
                "3000",
                "0",
                "w",
                "1",
                "1000",
                "2000",
                id.as_str(),
                "{\"n\":1}",
                "s:1000",
                "",
                "0",
                "0",
                "1",
                "hold",
                "0",
                "",
                "",
            ],
        )
    })
    .await;
}

#[tokio::test]
async fn schedule_register_and_state_refuse_every_malformed_argument_before_writing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    let k = q.keys().clone();
    let keys = [k.schedule("s"), k.schedules(), k.schedule_ticks("s")];
    let mut cases = common_cases();
    add(&mut cases, 4, &[""], Refused); // name
    add(&mut cases, 5, &[""], Refused); // pipeline
    add(&mut cases, 6, &["", "[1]", "x"], Refused); // definition
    add(&mut cases, 7, &["", "xyz!"], Refused); // digest
    add(&mut cases, 8, &NOT_COUNTS, Refused); // initial cursor
    add(&mut cases, 9, &["x", "-1", "1.5"], Refused); // next due
    add(&mut cases, 10, &ODD_TEXT, Accepted); // by
    run_cases(&srv, "schedule_register", &cases, || async {
        call(&q, &keys, &["s", "p", "{}", "abcd", "1000", "2000", "w"])
    })
    .await;
    let mut cases = common_cases();
    add(&mut cases, 4, &[""], Refused); // name
    add(&mut cases, 5, &["", "stop", "PAUSE"], Refused); // action
    add(&mut cases, 6, &ODD_TEXT, Accepted); // by
    add(&mut cases, 7, &ODD_TEXT, Accepted); // reason
    run_cases(&srv, "schedule_state", &cases, || async {
        registered_schedule(&srv, &q);
        call(&q, &keys, &["s", "pause", "w", "why"])
    })
    .await;
}

/// The key of group `g` of `q`.
fn group_key(q: &Queue, g: &str) -> String {
    format!("{}:group:{g}", q.keys().base())
}

#[tokio::test]
async fn group_scripts_refuse_every_malformed_argument_before_writing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    // group_create: the completion job's values are checked as every new
    // job's (lib/create), its resource too
    let mut cases = common_cases();
    add(&mut cases, 4, &["", "a b", "other"], Refused); // name (and its key)
    add(&mut cases, 6, &["", "all"], Refused); // policy
    add(&mut cases, 9, &[""], Refused); // completion id
    add(&mut cases, 13, &["x", "256"], Refused); // completion priority
    add(&mut cases, 14, &NOT_COUNTS, Refused); // completion delay ms
    add(&mut cases, 15, &NOT_POSITIVE, Refused); // completion max attempts
    add(&mut cases, 16, &["", "keep"], Refused); // completion stale lock
    add(&mut cases, 17, &["x", "2"], Refused); // completion rerun flag
    add(&mut cases, 18, &["x", "slots:0:r", "running:2"], Refused); // completion flow
    add(&mut cases, 18, &["running:1:agg"], Accepted);
    add(&mut cases, 12, &["a b", "{x}"], Refused); // completion resource
    add(&mut cases, 19, &["x", "00-0-0-01"], Refused); // completion trace context
    add(
        &mut cases,
        19,
        &["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"],
        Accepted,
    );
    add(&mut cases, 7, &ODD_TEXT, Accepted); // who
    run_cases(&srv, "group_create", &cases, || async {
        let keys = [group_key(&q, "g"), format!("{}:groups", q.keys().base())];
        let id = JobId::new().to_string();
        let gid = JobId::new().to_string();
        // name, group id, policy, who, the completion's pipeline and its
        // values: id, input, input key, resource, priority, delay ms, max
        // attempts, stale lock, rerun, flow, trace
        let args = [
            "g",
            gid.as_str(),
            "all_succeeded",
            "ops",
            "agg",
            id.as_str(),
            "{}",
            "",
            "day:1",
            "0",
            "0",
            "2",
            "hold",
            "0",
            "",
            "",
        ];
        call(&q, &keys, &args)
    })
    .await;

    // group_cancel and group_retry, on a sealed group with two children
    let setup = |cancelled: bool| {
        let q = q.clone();
        async move {
            q.create_group(&leasehold::group::NewGroup::new("g"), "t")
                .await
                .unwrap();
            for n in 0..2 {
                let id = enqueue(&q, job("p", n).group("g")).await;
                if cancelled {
                    q.cancel(&id, "x", "t").await.unwrap();
                }
            }
            q.seal_group("g", "t").await.unwrap();
        }
    };
    let mut cases = common_cases();
    add(&mut cases, 4, &["", "a b", "other"], Refused); // name (and its key)
    add(&mut cases, 5, &[""], Refused); // reason
    add(&mut cases, 7, &NOT_POSITIVE, Refused); // batch
    add(&mut cases, 6, &ODD_TEXT, Accepted); // who
    run_cases(&srv, "group_cancel", &cases, || async {
        setup(false).await;
        call(&q, &[group_key(&q, "g")], &["g", "wrong day", "ops", "200"])
    })
    .await;
    let mut cases = common_cases();
    add(&mut cases, 4, &["", "a b", "other"], Refused); // name (and its key)
    add(&mut cases, 5, &["", "resum"], Refused); // mode
    add(&mut cases, 8, &NOT_POSITIVE, Refused); // batch
    add(&mut cases, 7, &ODD_TEXT, Accepted); // reason
    run_cases(&srv, "group_retry", &cases, || async {
        setup(true).await;
        call(
            &q,
            &[group_key(&q, "g")],
            &["g", "start", "ops", "fixed", "200"],
        )
    })
    .await;
}

/// Every script in core/lua/ is called with each of its keys forged (here or
/// through `run_cases` above).
#[test]
fn every_script_is_called_with_forged_keys() {
    let this = include_str!("scripts_validate_first.rs");
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/core/lua");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("core/lua")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".lua").map(str::to_owned)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 23, "{names:?}");
    for name in &names {
        assert!(
            source_exists(name),
            "{name}.lua is not a script clients call"
        );
        let called = [
            format!("run_cases(&srv, \"{name}\""),
            format!("refuses_forged_keys(&srv, \"{name}\""),
        ];
        assert!(
            called.iter().any(|c| this.contains(c.as_str())),
            "script {name} is never called with forged keys"
        );
    }
}

/// The scripts (and settle operations) without malformed-argument cases above
/// refuse a forged key just the same: pause, limit, group_seal,
/// quarantine_repair, quarantine_purge, delete, run_now, and settle's release,
/// a checkpoint holding a lock, and a lease of two pipelines.
#[tokio::test]
async fn every_other_script_refuses_a_forged_fixed_key_before_writing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    let k = q.keys().clone();
    refuses_forged_keys(&srv, "pause", &|| async {
        enqueue(&q, job("p", 1)).await;
        call(
            &q,
            &[k.ready("p"), k.wake("p")],
            &["pause", "pipeline", "p", "ops", "why"],
        )
    })
    .await;
    refuses_forged_keys(&srv, "limit", &|| async {
        call(&q, &[], &["api", "1000", "1"])
    })
    .await;
    refuses_forged_keys(&srv, "group_seal", &|| async {
        q.create_group(&leasehold::group::NewGroup::new("g"), "t")
            .await
            .unwrap();
        enqueue(&q, job("p", 1).group("g")).await;
        call(&q, &[group_key(&q, "g")], &["g", "ops"])
    })
    .await;
    // a job the sweep set aside (its pipeline field gone)
    let quarantined = || async {
        let l = leased(&q, false).await;
        let _: () = get(&srv, &["HDEL", &k.job(l.job.as_str()), "pipeline"]);
        force_expire(&srv, &q, &l.job);
        q.sweep(10).await.expect("sweep");
        let id = l.job.to_string();
        call(&q, &[k.job(&id)], &[&id, "ops"])
    };
    refuses_forged_keys(&srv, "quarantine_repair", &quarantined).await;
    refuses_forged_keys(&srv, "quarantine_purge", &quarantined).await;
    refuses_forged_keys(&srv, "delete", &|| async {
        let l = running(&q, false).await;
        q.finish(&l, &Outcome::Succeeded).await.expect("finish");
        call(&q, &[k.job(l.job.as_str())], &["ops", "done with it"])
    })
    .await;
    refuses_forged_keys(&srv, "run_now", &|| async {
        let id = enqueue(&q, job("p", 1).delay(Duration::from_secs(3600))).await;
        call(
            &q,
            &[k.job(id.as_str()), k.delayed("p"), k.wake("p")],
            &["ops", "now"],
        )
    })
    .await;
    // settle: a release of a job holding R
    refuses_forged_keys(&srv, "settle", &|| async {
        let l = leased(&q, true).await;
        let keys = [
            k.job(l.job.as_str()),
            k.lock("R"),
            k.parked("R"),
            k.ready("p"),
            k.delayed("p"),
            k.wake("p"),
        ];
        settle_call(&q, &keys, 1, &["release", &l.token, "R"])
    })
    .await;
    // settle: a checkpoint of a RUNNING job holding R, and a lease of p and p2
    refuses_forged_keys(&srv, "settle", &|| async {
        let l = running(&q, true).await;
        enqueue(&q, job("p2", 1)).await;
        let ttl = TTL.as_millis().to_string();
        let lock_ttl = (TTL.as_millis() + 3_600_000).to_string();
        let keys = [
            k.job(l.job.as_str()),
            k.lock("R"),
            k.parked("R"),
            k.ready("p"),
            k.delayed("p"),
            k.wake("p"),
            k.ready("p2"),
            k.delayed("p2"),
            k.wake("p2"),
        ];
        call(
            &q,
            &keys,
            &[
                "w1",
                &ttl,
                &lock_ttl,
                "1",
                "2",
                "1",
                "checkpoint",
                &l.token,
                "R",
                "fetch",
                "{}",
                "",
                "tok-1",
            ],
        )
    })
    .await;
}

/// The keys settle, renew and cancel are given for a job are compared with
/// the job's own pipeline and resource once it is read: another pipeline's
/// keys (consistent among themselves) or another resource's lock refuse the
/// operation with a `BAD_KEY` naming the key, and nothing is written.
#[tokio::test]
async fn keys_of_another_pipeline_or_resource_are_refused_before_writing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    let k = q.keys().clone();
    let other = [k.ready("p2"), k.delayed("p2"), k.wake("p2")];
    let expect_refused = |c: &Call, script: &str, at: usize, key: &str| {
        let before = full_dump(&srv);
        let reply = eval(&srv, script, c);
        let text = bad_key_text(&reply)
            .unwrap_or_else(|| panic!("{script}: {key} at KEYS[{at}] accepted: {reply:?}"));
        assert!(
            text.contains(&format!("KEYS[{at}] is {key}, not ")),
            "{script}: {text}"
        );
        assert!(
            before == full_dump(&srv),
            "{script}: refused but Redis changed"
        );
    };
    // a failing finish that would queue the job again in p2
    let l = running(&q, false).await;
    let mut keys = vec![k.job(l.job.as_str())];
    keys.extend(other.iter().cloned());
    let c = settle_call(
        &q,
        &keys,
        1,
        &[
            "finish", &l.token, "", "FAILED", "", "", "io", "m", "1", "0", "0", "", "0",
        ],
    );
    expect_refused(&c, "settle", 11, &k.ready("p2"));
    // a release into p2
    let l = leased(&q, false).await;
    let mut keys = vec![k.job(l.job.as_str())];
    keys.extend(other.iter().cloned());
    let c = settle_call(&q, &keys, 1, &["release", &l.token, ""]);
    expect_refused(&c, "settle", 11, &k.ready("p2"));
    // a checkpoint renewing the lock of S, which the job does not hold
    let l = running(&q, false).await;
    let c = settle_call(
        &q,
        &[k.job(l.job.as_str()), k.lock("S"), k.parked("S")],
        1,
        &["checkpoint", &l.token, "S", "fetch", "{}", ""],
    );
    expect_refused(&c, "settle", 11, &k.lock("S"));
    // a renew naming the lock of S for a job holding R
    let l = leased(&q, true).await;
    let ttl = TTL.as_millis().to_string();
    let c = call(
        &q,
        &[k.job(l.job.as_str()), k.lock("S")],
        &[&ttl, &ttl, &l.token, "1"],
    );
    expect_refused(&c, "renew", 11, &k.lock("S"));
    // a cancel of a QUEUED job of p naming p2's sets
    let id = enqueue(&q, job("p", 9)).await;
    let c = call(
        &q,
        &[
            k.job(id.as_str()),
            k.ready("p2"),
            k.delayed("p2"),
            k.job(id.as_str()),
        ],
        &["stop", "ops", ""],
    );
    expect_refused(&c, "cancel", 11, &k.ready("p2"));
}

#[tokio::test]
async fn process_log_refuses_every_malformed_argument_and_a_stale_token_before_writing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    let k = q.keys().clone();
    let mut cases = common_cases();
    add(&mut cases, 4, &[""], Refused); // lease token
    add(&mut cases, 5, &["", "fetch", "x:fetch", "1:"], Refused); // '<attempt>:<step>'
    add(&mut cases, 6, &["", "not json {", "[1]"], Refused); // the record: a JSON object
    run_cases(&srv, "process_log", &cases, || async {
        let l = running(&q, false).await;
        let keys = [k.job(l.job.as_str()), k.process_log(l.job.as_str())];
        call(
            &q,
            &keys,
            &[&l.token, "1:fetch", r#"{"attempt":1,"step":"fetch"}"#],
        )
    })
    .await;
    // a token that does not hold the job (a lost lease) writes nothing
    let _: () = get(&srv, &["FLUSHALL"]);
    let l = running(&q, false).await;
    let keys = [k.job(l.job.as_str()), k.process_log(l.job.as_str())];
    let stale = call(&q, &keys, &["not-the-token", "1:fetch", r#"{"attempt":1}"#]);
    let before = full_dump(&srv);
    let reply = eval(&srv, "process_log", &stale).unwrap();
    assert_eq!(reply, Value::Array(vec![Value::Int(0)]));
    assert!(before == full_dump(&srv), "a stale token wrote");
}

/// A job hash whose `id` field names another job (here an existing one) is
/// never processed as that job: start, checkpoint, finish (plain and
/// failing) and release of the lease holder, and the renew of its lease, are
/// refused with a `CORRUPT` naming the `id` field, Redis byte-identical
/// afterwards (the other job untouched); once its lease runs out, the sweep
/// that meets it sets it aside in the quarantine, naming the field.
#[tokio::test]
async fn a_hash_naming_another_job_is_refused_by_every_holder_operation_then_quarantined() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    let k = q.keys().clone();
    for kind in ["start", "checkpoint", "finish", "fail", "release"] {
        let _: () = get(&srv, &["FLUSHALL"]);
        let other = enqueue(&q, job("o", 7)).await;
        let l = if kind == "start" || kind == "release" {
            leased(&q, false).await
        } else {
            running(&q, false).await
        };
        let jk = k.job(l.job.as_str());
        let _: () = get(&srv, &["HSET", &jk, "id", other.as_str()]);
        let before = full_dump(&srv);
        let err = match kind {
            "start" => q.start(&l, "fetch").await.map(|_| ()),
            "checkpoint" => q.checkpoint(&l, "fetch", "{}", None).await.map(|_| ()),
            "finish" => q.finish(&l, &Outcome::Succeeded).await.map(|_| ()),
            "fail" => q
                .finish(&l, &failed(true, Duration::ZERO))
                .await
                .map(|_| ()),
            _ => q.release(&l).await.map(|_| ()),
        }
        .expect_err("a hash naming another job is refused");
        assert!(
            matches!(&err, leasehold::Error::Corrupt { field, problem, .. }
                if field == "id" && problem.contains(other.as_str())),
            "{kind}: {err:?}"
        );
        assert!(
            before == full_dump(&srv),
            "{kind}: refused but Redis changed"
        );
        let renewed = q.renew(&[&l]).await.expect("renew");
        assert!(
            matches!(renewed[0], leasehold::lease::Renewal::Lost { .. }),
            "{kind}: renewed as another job: {renewed:?}"
        );
        assert!(before == full_dump(&srv), "{kind}: renew changed Redis");
        assert_eq!(read(&q, &other).await.state, JobState::Queued);
    }
    // the sweep meets it once its lease has run out: quarantined, naming the field
    let _: () = get(&srv, &["FLUSHALL"]);
    let other2 = enqueue(&q, job("o", 8)).await;
    let l = running(&q, false).await;
    let _: () = get(
        &srv,
        &["HSET", &k.job(l.job.as_str()), "id", other2.as_str()],
    );
    force_expire(&srv, &q, &l.job);
    q.sweep(10).await.expect("sweep");
    let entry = q
        .quarantine_entry(l.job.as_str())
        .await
        .expect("read")
        .expect("quarantined");
    assert_eq!(entry.field, "id");
    assert_eq!(read(&q, &other2).await.state, JobState::Queued);
}
