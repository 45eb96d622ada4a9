//! The batched Lua scripts against a real, private `redis-server` per test:
//! `lease.lua` popping, parking, fencing and indexing a whole batch at once (one
//! pipeline) and picking across ready sets (several pipelines) with exact scores;
//! `settle.lua` refusing a malformed operation list before writing anything; and
//! the hand-built attempt records of `lib/attempts.lua` (`record_of`/`jstr`) staying
//! valid JSON that round-trips names and messages needing escapes.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use leasehold_core::inspect::Inspector;
use leasehold_core::redis::{self, Value};
use leasehold_core::{AttemptError, AttemptRecord, JobId, JobState, NewJob, Queue};
use leasehold_core::{Finished, HolderOp, HolderReply, Lease, LeaseRequest, Outcome, Started};
use leasehold_testkit::RedisServer;
use serde_json::json;
use support::server::{command_calls, connect, enqueue, get, job, read, zmembers, TTL, WAIT};

/// 2^42: the span of one priority level in a ready score.
const PRIORITY_SPAN: u64 = 4_398_046_511_104;

/// The settle script exactly as the crate builds it (`core/src/wire/scripts.rs`,
/// includes resolved). The operation lists `Queue::settle` encodes are always
/// well formed, so a malformed one can only be sent by calling the script directly.
fn settle_src() -> String {
    leasehold_core::wire::script_source("settle").expect("the settle script")
}

// ---- helpers ----------------------------------------------------------------

/// `ZSCORE` as Redis prints it (no float conversion on our side).
fn zscore_text(srv: &RedisServer, key: &str, member: &str) -> Option<String> {
    get(srv, &["ZSCORE", key, member])
}

fn hget(srv: &RedisServer, key: &str, field: &str) -> Option<String> {
    get(srv, &["HGET", key, field])
}

/// Redis `TIME` in ms, on an open connection.
fn redis_now_ms(con: &mut redis::Connection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query(con).expect("TIME");
    secs * 1000 + micros / 1000
}

/// Polls Redis `TIME` until its millisecond changes, so the next enqueue gets
/// a later creation time (and ready score) than the previous one.
fn next_redis_ms(srv: &RedisServer) {
    let mut con = srv.connection();
    let start = redis_now_ms(&mut con);
    let began = Instant::now();
    while redis_now_ms(&mut con) <= start {
        assert!(began.elapsed() < WAIT, "Redis TIME did not advance");
    }
}

/// A ready score as an exact integer: `(255 - priority) * 2^42 + t`.
#[track_caller]
fn score_value(text: &str) -> u64 {
    text.parse()
        .unwrap_or_else(|e| panic!("score {text:?} is not an integer as printed: {e}"))
}

/// `(priority, t)` of a ready score.
fn decode_score(score: u64) -> (u64, u64) {
    (255 - score / PRIORITY_SPAN, score % PRIORITY_SPAN)
}

/// Enqueues `make()` and returns its id and ready score, making sure the score
/// has non-zero last two digits: a score rounded to fewer significant digits
/// (a Lua number printed with `%.14g`, say) then always differs from the
/// original. A job whose score happens to end in `00` is cancelled and
/// replaced by a later one.
async fn enqueue_with_awkward_score(
    srv: &RedisServer,
    q: &Queue,
    mut make: impl FnMut() -> NewJob,
) -> (JobId, String) {
    for _ in 0..20 {
        let new = make();
        let ready = q.keys().ready(&new.pipeline);
        let id = enqueue(q, new).await;
        let score = zscore_text(srv, &ready, id.as_str()).expect("a new job is ready");
        if !score_value(&score).is_multiple_of(100) {
            return (id, score);
        }
        q.cancel(&id, "score ends in 00", "test").await.unwrap();
        next_redis_ms(srv);
    }
    panic!("20 ready scores in a row ended in 00");
}

/// Every key of the server: the testkit's rendering (types, values, scores,
/// whether a TTL is set) and the raw `DUMP` payload of each key.
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

/// Checks a lease call's results against the job hashes, the lease index and
/// the fence counter: fences are consecutive after `fence_before` in lease
/// order, the counter ends at the last one, and every job is in `leases` with
/// its deadline (`now + ttl`).
fn assert_leases_indexed(
    srv: &RedisServer,
    q: &Queue,
    leases: &[Lease],
    now: i64,
    fence_before: u64,
) {
    let k = q.keys();
    let fences: Vec<u64> = leases.iter().map(|l| l.fence).collect();
    let expected: Vec<u64> = (1..=leases.len() as u64)
        .map(|i| fence_before + i)
        .collect();
    assert_eq!(fences, expected, "fences follow the lease order, one each");
    assert!(fences.windows(2).all(|w| w[0] < w[1]));
    let counter: u64 = get(srv, &["GET", &k.fence()]);
    assert_eq!(Some(&counter), fences.last(), "fence counter = last fence");

    let deadline = now + TTL.as_millis() as i64;
    for l in leases {
        let jk = k.job(l.job.as_str());
        assert_eq!(hget(srv, &jk, "state").as_deref(), Some("LEASED"));
        assert_eq!(hget(srv, &jk, "fence"), Some(l.fence.to_string()));
        assert_eq!(hget(srv, &jk, "token").as_deref(), Some(l.token.as_str()));
        // the deadline is the lease index's score only
        assert_eq!(hget(srv, &jk, "lease_deadline"), None);
        assert_eq!(
            zscore_text(srv, &k.leases(), l.job.as_str()),
            Some(deadline.to_string()),
            "job {} is indexed in leases with its deadline",
            l.job
        );
    }
    let indexed: BTreeSet<String> = zmembers(srv, &k.leases()).into_iter().collect();
    let leased: BTreeSet<String> = leases.iter().map(|l| l.job.to_string()).collect();
    assert!(indexed.is_superset(&leased));
}

/// A parked job: QUEUED, in `parked:<res>` with exactly `score`, `res` listed
/// in `parked`, and in no other index.
async fn assert_parked(srv: &RedisServer, q: &Queue, id: &JobId, res: &str, score: &str) {
    let k = q.keys();
    assert_eq!(read(q, id).await.state, JobState::Queued);
    assert_eq!(
        zscore_text(srv, &k.parked(res), id.as_str()).as_deref(),
        Some(score),
        "parked with exactly its ready-set score"
    );
    assert_eq!(
        get::<i64>(srv, &["SISMEMBER", &k.parked_resources(), res]),
        1,
        "{res} is listed in the parked set"
    );
    assert_eq!(zscore_text(srv, &k.leases(), id.as_str()), None);
    assert_eq!(hget(srv, &k.job(id.as_str()), "token"), None);
    assert_eq!(hget(srv, &k.job(id.as_str()), "fence"), None);
}

// ---- lease.lua ----------------------------------------------------------------

/// One pipeline, n = 4, four QUEUED jobs of which two share resource R: one
/// pop takes the batch, the second R job is parked with its exact score, and
/// the three taken jobs get consecutive fences in take order and are indexed.
#[tokio::test]
async fn one_pipeline_leases_a_batch_parks_a_locked_job_and_fences_in_order() {
    let srv = RedisServer::start();
    let q = connect(&srv, "batch").await;
    let k = q.keys().clone();

    // Move the fence counter off zero first (another pipeline, so the batch
    // below starts from a counter some earlier call left behind).
    enqueue(&q, job("warmup", 0)).await;
    let warm = q.lease("w0", &["warmup"], 1, TTL).await.unwrap().leases;
    assert_eq!(warm.len(), 1);
    let fence_before = warm[0].fence;
    assert_eq!(fence_before, 1);

    let r1 = enqueue(&q, job("p", 1).resource("R")).await;
    next_redis_ms(&srv);
    let (r2, r2_score) = enqueue_with_awkward_score(&srv, &q, || job("p", 2).resource("R")).await;
    next_redis_ms(&srv);
    let s = enqueue(&q, job("p", 3).resource("S")).await;
    next_redis_ms(&srv);
    let free = enqueue(&q, job("p", 4)).await;
    // r2's score is its enqueue time at priority 0, to the millisecond
    let r2_created = read(&q, &r2).await.created_at;
    assert_eq!(decode_score(score_value(&r2_score)), (0, r2_created as u64));

    srv.cmd(&["CONFIG", "RESETSTAT"]);
    let leased = q.lease("w1", &["p"], 4, TTL).await.unwrap();
    let (zpopmin, incrby, incr) = (
        command_calls(&srv, "zpopmin"),
        command_calls(&srv, "incrby"),
        command_calls(&srv, "incr"),
    );

    let ids: Vec<&JobId> = leased.leases.iter().map(|l| &l.job).collect();
    assert_eq!(
        ids,
        [&r1, &s, &free],
        "exactly three leased, in ready order"
    );
    assert_eq!(leased.parked, 1, "the call reports the job it parked");
    assert_parked(&srv, &q, &r2, "R", &r2_score).await;
    assert_eq!(
        zmembers(&srv, &k.parked("R")),
        [r2.to_string()],
        "only r2 waits for R"
    );
    assert!(zmembers(&srv, &k.ready("p")).is_empty());
    assert_eq!(
        get::<Option<String>>(&srv, &["GET", &k.lock("R")]).as_deref(),
        Some(r1.as_str())
    );
    assert_eq!(
        get::<Option<String>>(&srv, &["GET", &k.lock("S")]).as_deref(),
        Some(s.as_str())
    );
    assert_leases_indexed(&srv, &q, &leased.leases, leased.now, fence_before);

    // The batch was popped, not walked one job at a time: fewer pops than
    // jobs considered (one for the four, one finding the set empty), and the
    // three fences came from one INCRBY.
    assert!(
        zpopmin <= 2,
        "{zpopmin} ZPOPMIN calls for 4 jobs in one lease call"
    );
    assert_eq!((incrby, incr), (1, 0), "one INCRBY for the whole batch");
}

/// Two pipelines: the lease takes the lowest score across both ready sets each
/// time (priority first, then age; age beats the id tie-break), and a job it
/// parks there keeps exactly the score it had in its ready set.
#[tokio::test]
async fn two_pipelines_lease_lowest_score_first_and_park_with_the_exact_score() {
    let srv = RedisServer::start();
    let q = connect(&srv, "multi").await;
    let k = q.keys().clone();

    // Enqueue order = age order (each in a later millisecond than the last).
    // The two priority-5 jobs: b_mid is older but has the larger id, so only
    // the age part of the score puts it before a_mid_new.
    let a_low = enqueue(&q, job("pa", 1).priority(0)).await;
    next_redis_ms(&srv);
    let b_mid = enqueue(
        &q,
        job("pb", 2)
            .priority(5)
            .id(JobId::parse("zz-b-mid-older").unwrap()),
    )
    .await;
    next_redis_ms(&srv);
    let (a_high, a_high_score) =
        enqueue_with_awkward_score(&srv, &q, || job("pa", 3).priority(10).resource("R")).await;
    next_redis_ms(&srv);
    let b_top = enqueue(&q, job("pb", 4).priority(20).resource("R")).await;
    next_redis_ms(&srv);
    let b_15 = enqueue(&q, job("pb", 5).priority(15)).await;
    next_redis_ms(&srv);
    let a_12 = enqueue(&q, job("pa", 6).priority(12)).await;
    next_redis_ms(&srv);
    let a_mid_new = enqueue(
        &q,
        job("pa", 7)
            .priority(5)
            .id(JobId::parse("aa-a-mid-newer").unwrap()),
    )
    .await;

    // Every ready score decodes to the job's priority and creation time exactly.
    let all = [&a_low, &b_mid, &a_high, &b_top, &b_15, &a_12, &a_mid_new];
    let mut scores = BTreeMap::new();
    for id in all {
        let j = read(&q, id).await;
        let text = zscore_text(&srv, &k.ready(&j.pipeline), id.as_str()).expect("ready");
        assert_eq!(
            decode_score(score_value(&text)),
            (u64::from(j.priority), j.created_at as u64),
            "ready score of {id}"
        );
        scores.insert(id.to_string(), text);
    }
    assert_eq!(scores[a_high.as_str()], a_high_score);
    assert!(score_value(&scores[b_mid.as_str()]) < score_value(&scores[a_mid_new.as_str()]));

    let fence_before = 0;
    let leased = q.lease("w1", &["pa", "pb"], 10, TTL).await.unwrap();
    let ids: Vec<&JobId> = leased.leases.iter().map(|l| &l.job).collect();
    // b_top (20) takes R; b_15; a_12; a_high (10) finds R locked and is parked;
    // b_mid (5, older); a_mid_new (5, newer); a_low (0).
    assert_eq!(
        ids,
        [&b_top, &b_15, &a_12, &b_mid, &a_mid_new, &a_low],
        "lowest score first across both ready sets"
    );
    let pipelines: Vec<&str> = leased.leases.iter().map(|l| l.pipeline.as_str()).collect();
    assert_eq!(pipelines, ["pb", "pb", "pa", "pb", "pa", "pa"]);
    assert_eq!(leased.parked, 1);
    assert_leases_indexed(&srv, &q, &leased.leases, leased.now, fence_before);

    // a_high was parked from the several-pipeline path with its exact score:
    // the same text, hence the same integer, hence priority and age intact.
    assert_parked(&srv, &q, &a_high, "R", &a_high_score).await;
    let parked_score = zscore_text(&srv, &k.parked("R"), a_high.as_str()).unwrap();
    assert_eq!(parked_score, scores[a_high.as_str()]);
    let j = read(&q, &a_high).await;
    assert_eq!(
        decode_score(score_value(&parked_score)),
        (10, j.created_at as u64)
    );
    assert!(zmembers(&srv, &k.ready("pa")).is_empty());
    assert!(zmembers(&srv, &k.ready("pb")).is_empty());

    // When b_top ends, a_high goes back to its ready set with that same score.
    let top = &leased.leases[0];
    assert_eq!(q.start(top, "s").await.unwrap(), Started::Running);
    assert_eq!(
        q.finish(top, &Outcome::Succeeded).await.unwrap(),
        Finished::Ended(JobState::Succeeded)
    );
    assert_eq!(
        zscore_text(&srv, &k.ready("pa"), a_high.as_str()),
        Some(a_high_score)
    );
    assert_eq!(
        get::<i64>(&srv, &["EXISTS", &k.parked("R")]),
        0,
        "the parked set is gone once unparked"
    );
}

// ---- settle.lua: malformed operation lists ---------------------------------------

/// The settle script called directly with a malformed operation list (each with
/// a well-formed operation before the bad one, and a lease asked for) answers
/// BAD_ARG and leaves every key byte-identical; the same list made well formed
/// does write, so the valid prefix would have been applied had it run.
#[tokio::test]
async fn settle_with_a_malformed_operation_list_writes_nothing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "malformed").await;
    let k = q.keys().clone();
    let cfg = q.config().clone();

    let j_res = enqueue(&q, job("p", 1).resource("R")).await;
    next_redis_ms(&srv);
    let j_free = enqueue(&q, job("p", 2)).await;
    let leases = q.lease("w1", &["p"], 2, TTL).await.unwrap().leases;
    assert_eq!(leases.len(), 2);
    let (l_res, l_free) = (&leases[0], &leases[1]);
    assert_eq!((&l_res.job, &l_free.job), (&j_res, &j_free));
    // one more job waiting, for the lease part of the calls below
    let waiting = enqueue(&q, job("p", 3)).await;

    // The text driven here is the crate's settle script on its own (its EVALSHA
    // form); the library load_scripts puts in Redis is built from the same
    // files (checked in the registry's unit tests) and is the one the crate runs.
    let script = redis::Script::new(&settle_src());
    q.load_scripts().await.unwrap();
    let listed = srv.cmd(&["FUNCTION", "LIST", "WITHCODE"]);
    let listed = format!("{listed:?}");
    assert!(
        listed.contains("leasehold_") && listed.contains("_settle"),
        "load_scripts loaded the library: {listed:.300}"
    );

    let ttl_ms = TTL.as_millis().to_string();
    let lock_ttl_ms = (TTL.as_millis() + 3_600_000).to_string();
    let keep_age_ms = cfg.retention.keep_age.as_millis().to_string();
    // One settle call: `n_ops` operations with their KEYS and ARGV, then, when
    // `n_lease` > 0, pipeline `p`'s keys, and `tokens` lease tokens.
    let call = |n_ops: usize, keys: &[String], args: &[String], n_lease: usize, tokens: usize| {
        let mut inv = script.prepare_invoke();
        for key in k.fixed() {
            inv.key(key);
        }
        inv.arg(cfg.events_max_len)
            .arg(cfg.retention.keep_count)
            .arg(&keep_age_ms)
            .arg("w1")
            .arg(&ttl_ms)
            .arg(&lock_ttl_ms)
            .arg(n_ops)
            .arg(usize::from(n_lease > 0)) // pipelines to lease
            .arg(n_lease);
        for key in keys {
            inv.key(key);
        }
        if n_lease > 0 {
            inv.key(k.ready("p")).key(k.delayed("p")).key(k.wake("p"));
        }
        for a in args {
            inv.arg(a);
        }
        for i in 0..tokens {
            inv.arg(format!("lease-token-{i}"));
        }
        inv.invoke::<Value>(&mut srv.connection())
    };

    let jk_res = k.job(j_res.as_str());
    let jk_free = k.job(j_free.as_str());
    let (lock_r, parked_r) = (k.lock("R"), k.parked("R"));
    let (tok_res, tok_free) = (l_res.token.as_str(), l_free.token.as_str());
    // Every case but the last starts with a well-formed operation that would
    // write (a start of the job holding R), then a bad one.
    let after_start = |keys: &[String], args: &[&'static str], tok: &str| {
        let mut all_keys = vec![jk_res.clone(), lock_r.clone(), parked_r.clone()];
        all_keys.extend_from_slice(keys);
        let mut all_args: Vec<String> = ["start", tok_res, "R", "fetch"]
            .iter()
            .map(|a| a.to_string())
            .collect();
        all_args.push(args[0].to_owned());
        all_args.push(tok.to_owned());
        all_args.extend(args[1..].iter().map(|a| a.to_string()));
        (all_keys, all_args)
    };
    let free_key = std::slice::from_ref(&jk_free);
    let mut cases: Vec<Malformed> = Vec::new();
    let (keys, args) = after_start(free_key, &["bogus", "", "fetch"], tok_free);
    cases.push(Malformed {
        what: "unknown operation kind",
        n_ops: 2,
        keys,
        args,
        n_lease: 1,
        tokens: 1,
    });
    // a failing finish needs 10 values after kind, token and resource; 4 are
    // given (plus the one lease token after them)
    let (keys, args) = after_start(
        &[jk_free.clone(), k.ready("p"), k.delayed("p"), k.wake("p")],
        &["finish", "", "FAILED", "", "", "kind"],
        tok_free,
    );
    cases.push(Malformed {
        what: "too few values for a failing finish",
        n_ops: 2,
        keys,
        args,
        n_lease: 1,
        tokens: 1,
    });
    // a checkpoint needs 3 values; the ARGV ends after 2 (no lease, so no lease
    // token follows that could pass for the third)
    let (keys, args) = after_start(free_key, &["checkpoint", "", "fetch", "1"], tok_free);
    cases.push(Malformed {
        what: "too few values for a checkpoint",
        n_ops: 2,
        keys,
        args,
        n_lease: 0,
        tokens: 0,
    });
    let (keys, args) = after_start(free_key, &["start", "", "fetch"], tok_free);
    cases.push(Malformed {
        what: "more operations announced than given",
        n_ops: 3,
        keys,
        args,
        n_lease: 1,
        tokens: 1,
    });
    // a release of a job with a resource needs job, lock, parked, ready,
    // delayed and wake keys; the KEYS end after the first three (no lease). The
    // well-formed first operation here starts the free job.
    cases.push(Malformed {
        what: "too few keys for a release",
        n_ops: 2,
        keys: vec![
            jk_free.clone(),
            jk_res.clone(),
            lock_r.clone(),
            parked_r.clone(),
        ],
        args: ["start", tok_free, "", "fetch", "release", tok_res, "R"]
            .iter()
            .map(|a| a.to_string())
            .collect(),
        n_lease: 0,
        tokens: 0,
    });

    // a valid start, then a lease of 2 announced with only one token
    let (keys, args) = after_start(free_key, &["start", "", "fetch"], tok_free);
    cases.push(Malformed {
        what: "fewer lease tokens than jobs to lease",
        n_ops: 2,
        keys,
        args,
        n_lease: 2,
        tokens: 1,
    });

    for Malformed {
        what,
        n_ops,
        keys,
        args,
        n_lease,
        tokens,
    } in &cases
    {
        let before = full_dump(&srv);
        let err = call(*n_ops, keys, args, *n_lease, *tokens)
            .expect_err(&format!("{what}: a malformed list must be an error reply"));
        let text = err.to_string();
        assert!(
            text.contains("BAD_ARG") && text.contains("do not match their keys and values"),
            "{what}: unexpected error {text:?}"
        );
        assert_eq!(before, full_dump(&srv), "{what}: the call changed Redis");
    }

    // Nothing moved: both jobs still LEASED with their tokens, the third still ready.
    assert_eq!(read(&q, &j_res).await.state, JobState::Leased);
    assert_eq!(read(&q, &j_free).await.state, JobState::Leased);
    assert_eq!(zmembers(&srv, &k.ready("p")), [waiting.to_string()]);

    // Control: the first case made well formed writes the prefix, the fixed
    // operation and the lease.
    let (keys, args) = after_start(free_key, &["start", "", "fetch"], tok_free);
    let fence_before: u64 = get(&srv, &["GET", &k.fence()]);
    let reply = call(2, &keys, &args, 1, 1).expect("a well-formed list runs");
    let Value::Array(items) = reply else {
        panic!("settle answered {reply:?}")
    };
    assert_eq!(items.len(), 3);
    assert_eq!(read(&q, &j_res).await.state, JobState::Running);
    assert_eq!(read(&q, &j_free).await.state, JobState::Running);
    let w = read(&q, &waiting).await;
    assert_eq!(w.state, JobState::Leased);
    assert_eq!(w.fence, Some(fence_before + 1));
    assert_eq!(w.lease.map(|l| l.token).as_deref(), Some("lease-token-0"));
}

/// A malformed settle call: what is wrong, the operations announced, the
/// operations' KEYS and ARGV, and the jobs to lease.
struct Malformed {
    what: &'static str,
    n_ops: usize,
    keys: Vec<String>,
    args: Vec<String>,
    n_lease: usize,
    tokens: usize,
}

// ---- lib/attempts.lua: hand-built attempt records ----------------------------------

const WORKER: &str = r#"wörker-"7"\b-ünï"#;
const STEP_1: &str = r#"fétch-"raw"\in"#;
const STEP_2: &str = r#"lo\ad-"ünï""#;
const ERR_KIND: &str = r#"valid"ation\ü"#;
const ERR_MESSAGE: &str = "row \"42\" at C:\\data\\in.csv\nline 2: ünï ✓ / tab\there";
const CANCEL_REASON: &str = "stop \"now\" \\ ünï\nplease";
const CANCEL_BY: &str = r#"op"er\ätor"#;
const FINISH_REASON: &str = "honoured \"cancel\" \\ ünï\nafter load";

/// The raw JSON of a job's attempt 1 (attempts hash, field `<id>:1`), parsed, with its key set.
fn raw_record(srv: &RedisServer, q: &Queue, id: &JobId) -> (serde_json::Value, BTreeSet<String>) {
    let text = hget(srv, &q.keys().attempts(), &format!("{id}:1")).expect("attempt 1 is written");
    let value: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("attempt:1 is not JSON ({e}): {text}"));
    let keys = value
        .as_object()
        .expect("a JSON object")
        .keys()
        .cloned()
        .collect();
    (value, keys)
}

fn key_set(keys: &[&str]) -> BTreeSet<String> {
    keys.iter().map(|k| k.to_string()).collect()
}

/// Names and messages with quotes, backslashes, newlines and non-ASCII text
/// come back exactly from the hand-built attempt records: through the job read
/// API, the inspector, and the raw `attempt:1` field parsed by serde_json.
/// One job fails through the single-job scripts, one is cancelled through
/// `settle` (with its last step checkpointed by the finish).
#[tokio::test]
async fn attempt_records_round_trip_names_and_messages_that_need_escaping() {
    let srv = RedisServer::start();
    let q = connect(&srv, "records").await;
    let ins = Inspector::new(q.clone());

    // -- FAILED, through lease / start / checkpoint / finish
    let a = enqueue(&q, job("p", 1).resource(r#"shöp:"a"\1"#)).await;
    let leased = q.lease(WORKER, &["p"], 1, TTL).await.unwrap().leases;
    let la = &leased[0];
    assert_eq!(la.job, a);
    assert_eq!(q.start(la, STEP_1).await.unwrap(), Started::Running);
    q.checkpoint(la, STEP_1, r#"{"rows":"ünï \"x\""}"#, Some(STEP_2))
        .await
        .unwrap();
    q.checkpoint(la, STEP_2, "2", None).await.unwrap();
    let outcome = Outcome::Failed {
        error: AttemptError {
            kind: ERR_KIND.into(),
            message: ERR_MESSAGE.into(),
            retryable: false,
            retries_exhausted: false,
        },
        backoff: Duration::ZERO,
        cleanup_needed: true,
    };
    assert_eq!(
        q.finish(la, &outcome).await.unwrap(),
        Finished::Ended(JobState::Failed)
    );

    let job_a = read(&q, &a).await;
    assert_eq!(job_a.state, JobState::Failed);
    assert_eq!(job_a.attempts.len(), 1);
    let rec = &job_a.attempts[0];
    assert_eq!(rec.n, 1);
    assert_eq!(rec.state, JobState::Failed);
    assert_eq!(rec.worker, WORKER);
    assert_eq!(rec.fence, la.fence);
    let steps: Vec<&str> = rec.steps.iter().map(|s| s.step.as_str()).collect();
    assert_eq!(steps, [STEP_1, STEP_2]);
    assert_eq!(
        rec.error,
        Some(AttemptError {
            kind: ERR_KIND.into(),
            message: ERR_MESSAGE.into(),
            retryable: false,
            retries_exhausted: false,
        })
    );
    assert_eq!(rec.reason, None);
    assert_eq!(rec.cancel, None);
    assert!(rec.cleanup_needed);
    let (leased_at, started_at) = (rec.leased_at.unwrap(), rec.started_at.unwrap());
    assert!(leased_at <= started_at && started_at <= rec.steps[0].at);
    assert!(rec.steps[0].at <= rec.steps[1].at && rec.steps[1].at <= rec.ended_at);

    let (raw, keys) = raw_record(&srv, &q, &a);
    assert_eq!(
        keys,
        key_set(&[
            "n",
            "state",
            "worker",
            "fence",
            "leased_at",
            "started_at",
            "ended_at",
            "steps",
            "error",
            "cleanup_needed",
        ])
    );
    assert_eq!(raw["worker"], json!(WORKER));
    assert_eq!(raw["state"], json!("FAILED"));
    assert_eq!(raw["n"], json!(1));
    assert_eq!(raw["fence"], json!(la.fence));
    assert_eq!(raw["cleanup_needed"], json!(true));
    assert_eq!(raw["steps"][0]["step"], json!(STEP_1));
    assert_eq!(raw["steps"][1]["step"], json!(STEP_2));
    assert_eq!(
        raw["error"],
        json!({ "kind": ERR_KIND, "message": ERR_MESSAGE, "retryable": false })
    );
    let typed: AttemptRecord = serde_json::from_value(raw).unwrap();
    assert_eq!(&typed, rec);
    let detail = ins.job_detail(&a).await.unwrap().expect("job exists");
    assert_eq!(detail.job.attempts, job_a.attempts);

    // -- CANCELLED, through settle: lease, start, a cancel request, and a
    // finish that checkpoints its last step first
    let b = enqueue(&q, job("p", 2)).await;
    let req = LeaseRequest {
        worker: WORKER,
        pipelines: &["p"],
        n: 1,
        start: 0,
        first_steps: &[],
    };
    let settled = q.settle(&[], Some(req), TTL).await.unwrap();
    let lb = &settled.leased.leases[0];
    assert_eq!(lb.job, b);
    let started = q
        .settle(
            &[HolderOp::Start {
                lease: lb,
                first_step: STEP_1,
            }],
            None,
            TTL,
        )
        .await
        .unwrap();
    assert!(matches!(
        started.replies[..],
        [Ok(HolderReply::Started(Started::Running))]
    ));
    q.cancel(&b, CANCEL_REASON, CANCEL_BY).await.unwrap();
    let cancelled = Outcome::Cancelled {
        reason: FINISH_REASON.into(),
        cleanup_needed: false,
    };
    let finished = q
        .settle(
            &[HolderOp::Finish {
                lease: lb,
                outcome: &cancelled,
                last_step: Some((STEP_1, "\"ünï\"")),
            }],
            None,
            TTL,
        )
        .await
        .unwrap();
    assert_eq!(
        finished.replies[0].as_ref().unwrap(),
        &HolderReply::Finished(Finished::Ended(JobState::Cancelled))
    );

    let job_b = read(&q, &b).await;
    assert_eq!(job_b.state, JobState::Cancelled);
    assert_eq!(job_b.outputs[STEP_1], json!("ünï"));
    let rec = &job_b.attempts[0];
    assert_eq!(rec.state, JobState::Cancelled);
    assert_eq!(rec.worker, WORKER);
    assert_eq!(rec.fence, lb.fence);
    let steps: Vec<&str> = rec.steps.iter().map(|s| s.step.as_str()).collect();
    assert_eq!(steps, [STEP_1]);
    assert_eq!(rec.reason.as_deref(), Some(FINISH_REASON));
    assert_eq!(rec.error, None);
    let cancel = rec.cancel.as_ref().expect("the cancel request is recorded");
    assert_eq!(
        (cancel.reason.as_str(), cancel.by.as_str()),
        (CANCEL_REASON, CANCEL_BY)
    );
    assert!(cancel.at.is_some());

    let (raw, keys) = raw_record(&srv, &q, &b);
    assert_eq!(
        keys,
        key_set(&[
            "n",
            "state",
            "worker",
            "fence",
            "leased_at",
            "started_at",
            "ended_at",
            "steps",
            "reason",
            "cancel",
        ])
    );
    // no cleanup needed: the key is left out (false is the reader's default)
    assert!(!rec.cleanup_needed);
    assert_eq!(raw["worker"], json!(WORKER));
    assert_eq!(raw["state"], json!("CANCELLED"));
    assert_eq!(raw["steps"][0]["step"], json!(STEP_1));
    assert_eq!(raw["reason"], json!(FINISH_REASON));
    assert_eq!(raw["cancel"]["reason"], json!(CANCEL_REASON));
    assert_eq!(raw["cancel"]["by"], json!(CANCEL_BY));
    let typed: AttemptRecord = serde_json::from_value(raw).unwrap();
    assert_eq!(&typed, rec);
    let detail = ins.job_detail(&b).await.unwrap().expect("job exists");
    assert_eq!(detail.job.attempts, job_b.attempts);
}
