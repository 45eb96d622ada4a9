//! Robustness of the core client against a real private `redis-server` per
//! test: retention keeps memory bounded, corrupt data yields typed errors,
//! Redis going away (or hanging) yields transient errors within the configured
//! timeouts, and bad input is rejected before anything is written.

mod support;

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::time::{Duration, Instant};

use leasehold_core::redis;
use leasehold_core::Error;
use leasehold_core::{
    JobId, JobState, NewJob, Queue, QueueConfig, Retention, RetryMode, StaleLock,
};
use leasehold_core::{Lease, Outcome, Renewal};
use leasehold_testkit::{wait_until_async, RedisServer};
use support::server::{connect, enqueue, get, job, lease_one, TTL, WAIT};

// ---- helpers ----------------------------------------------------------------

/// Number of keys matching `pattern` (SCAN, never KEYS).
fn count_keys(srv: &RedisServer, pattern: &str) -> usize {
    let mut cursor = "0".to_owned();
    let mut n = 0;
    loop {
        let (next, keys): (String, Vec<String>) =
            get(srv, &["SCAN", &cursor, "MATCH", pattern, "COUNT", "1000"]);
        n += keys.len();
        if next == "0" {
            return n;
        }
        cursor = next;
    }
}

fn job_keys(srv: &RedisServer, q: &Queue) -> usize {
    count_keys(srv, &format!("{}:job:*", q.keys().base()))
}

/// A numeric field of `INFO <section>`.
fn info_field(srv: &RedisServer, section: &str, field: &str) -> i64 {
    let info = srv.info(section);
    let prefix = format!("{field}:");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("INFO {section} has no {field}"))
        .trim()
        .parse()
        .unwrap()
}

fn config(retention: Retention, events_max_len: u64) -> QueueConfig {
    QueueConfig::default()
        .retention(retention)
        .events_max_len(events_max_len)
}

/// Enqueues `n` jobs (each with its own input key) and runs them all to their
/// end with `batch` leases at a time, started and finished concurrently: every
/// third job (input `n` divisible by 3) FAILED, so that its attempt has a
/// record in the attempts hash, the others SUCCEEDED. After every batch,
/// `check` sees the server.
async fn run_to_end(
    srv: &RedisServer,
    q: &Queue,
    first: u64,
    n: u64,
    batch: usize,
    mut check: impl FnMut(&RedisServer),
) {
    let jobs: Vec<NewJob> = (first..first + n)
        .map(|i| job("p", i).input_key(format!("input:{i}")))
        .collect();
    let out = q.enqueue_bulk(jobs).await.unwrap();
    assert!(out.iter().all(|e| e.created));
    let mut done = 0;
    loop {
        let leases = q.lease("w", &["p"], batch, TTL).await.unwrap().leases;
        if leases.is_empty() {
            break;
        }
        let mut set = tokio::task::JoinSet::new();
        for l in leases {
            let q = q.clone();
            set.spawn(async move {
                let _ = q.start(&l, "only").await.unwrap();
                q.checkpoint(&l, "only", r#"{"ok":true}"#, None)
                    .await
                    .unwrap();
                let input: serde_json::Value = serde_json::from_str(&l.input).unwrap();
                let outcome = if input["n"].as_u64().unwrap().is_multiple_of(3) {
                    Outcome::Failed {
                        error: leasehold_core::AttemptError {
                            kind: "test".into(),
                            message: "every third job fails".into(),
                            retryable: false,
                            retries_exhausted: false,
                        },
                        backoff: Duration::ZERO,
                        cleanup_needed: false,
                    }
                } else {
                    Outcome::Succeeded
                };
                q.finish(&l, &outcome).await.unwrap();
            });
        }
        while let Some(r) = set.join_next().await {
            r.unwrap();
            done += 1;
        }
        check(srv);
    }
    assert_eq!(done, n);
}

// ---- retention ----------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_retention_keeps_redis_bounded_over_thousands_of_jobs() {
    let srv = RedisServer::start();
    let events_max = 1000;
    let retention = Retention::new(50, Duration::from_secs(3600));
    let q = Queue::connect(&srv.url(), "ret", config(retention, events_max))
        .await
        .unwrap();
    let done_key = q.keys().done();
    let mut max_done = 0;
    let mut bound = |srv: &RedisServer| {
        let n: u64 = get(srv, &["ZCARD", &done_key]);
        max_done = max_done.max(n);
    };

    let started = Instant::now();
    run_to_end(&srv, &q, 0, 2000, 100, &mut bound).await;
    let jobs_2k = job_keys(&srv, &q);
    // the per-minute counters add one key per minute (kept 25 h): not per job
    let minutes = |srv: &RedisServer| -> u64 {
        get::<Vec<String>>(srv, &["KEYS", &format!("{}:stats:*", q.keys().base())]).len() as u64
    };
    let keys_2k: u64 = get::<u64>(&srv, &["DBSIZE"]) - minutes(&srv);
    let mem_2k = info_field(&srv, "memory", "used_memory");
    // the input keys' outcomes are remembered for the input window (30 days) by
    // design, about 230 B per key: measured apart from everything else
    let remembered = |srv: &RedisServer| -> i64 {
        [
            q.keys().base().to_owned() + ":outcomes",
            q.keys().base().to_owned() + ":outcomes:at",
        ]
        .iter()
        .map(|k| get::<Option<i64>>(srv, &["MEMORY", "USAGE", k, "SAMPLES", "0"]).unwrap_or(0))
        .sum()
    };
    let outcomes_2k = remembered(&srv);
    let xlen_2k: u64 = get(&srv, &["XLEN", &q.keys().events()]);
    run_to_end(&srv, &q, 2000, 4000, 100, &mut bound).await;
    let elapsed = started.elapsed();
    let jobs_6k = job_keys(&srv, &q);
    let keys_6k: u64 = get::<u64>(&srv, &["DBSIZE"]) - minutes(&srv);
    let mem_6k = info_field(&srv, "memory", "used_memory");
    let outcomes_6k = remembered(&srv);
    let xlen_6k: u64 = get(&srv, &["XLEN", &q.keys().events()]);
    eprintln!(
        "6,000 jobs in {elapsed:?}; job hashes {jobs_2k} -> {jobs_6k}, keys {keys_2k} -> {keys_6k}, \
         used_memory {mem_2k} -> {mem_6k}, events {xlen_2k} -> {xlen_6k}, max done {max_done}"
    );

    // Terminal jobs: never more than keep_count plus what one finish may leave behind.
    assert!(max_done <= 50 + 4, "terminal jobs kept: {max_done}");
    assert!(
        jobs_2k <= 54 && jobs_6k <= 54,
        "job hashes: {jobs_2k}, {jobs_6k}"
    );
    // Nothing else accumulates: no input keys, no leases, no index left behind.
    assert_eq!(keys_6k, keys_2k, "the key count does not grow");
    assert_eq!(get::<u64>(&srv, &["HLEN", &q.keys().inputs()]), 0);
    assert_eq!(get::<u64>(&srv, &["ZCARD", &q.keys().leases()]), 0);
    assert!(get::<u64>(&srv, &["LLEN", &q.keys().wake("p")]) <= 64);
    // attempt records go with their jobs: one per kept FAILED job (a success
    // keeps its attempt in its own hash)
    let records: usize = get(&srv, &["HLEN", &q.keys().attempts()]);
    let kept: Vec<String> = get(&srv, &["ZRANGE", &q.keys().done(), "0", "-1"]);
    let kept_failed = kept
        .iter()
        .filter(|id| get::<String>(&srv, &["HGET", &q.keys().job(id), "state"]) == "FAILED")
        .count();
    assert!(kept_failed > 0, "no FAILED job among the kept ones");
    assert_eq!(
        records, kept_failed,
        "attempt records of purged jobs are left behind"
    );
    // The event stream is capped (approximately: whole stream nodes are trimmed).
    assert!(
        xlen_2k <= events_max + 200 && xlen_6k <= events_max + 200,
        "XLEN {xlen_2k}, {xlen_6k}"
    );
    // Memory: 4,000 more jobs cost (nearly) nothing beyond the outcomes the
    // input window keeps (a bulk enqueue's backlog leaves the search index's
    // hash table sized for its peak, some tens of KB here).
    let growth = (mem_6k - mem_2k) - (outcomes_6k - outcomes_2k);
    assert!(
        outcomes_6k - outcomes_2k < 4000 * 300,
        "the outcomes of 4,000 input keys took {} bytes",
        outcomes_6k - outcomes_2k
    );
    assert!(
        growth < 512 * 1024,
        "used_memory grew by {growth} bytes over 4,000 more jobs besides the outcomes ({mem_2k} -> {mem_6k})"
    );
}

#[tokio::test]
async fn purge_deletes_at_most_its_batch_oldest_first() {
    let srv = RedisServer::start();
    // This client keeps everything: nothing is purged while the jobs run.
    let keep_all = Retention::new(0, Duration::ZERO);
    let q = Queue::connect(&srv.url(), "purge", config(keep_all, 10_000))
        .await
        .unwrap();
    run_to_end(&srv, &q, 0, 30, 30, |_| {}).await;
    assert_eq!(job_keys(&srv, &q), 30);
    assert_eq!(
        q.purge(100).await.unwrap(),
        0,
        "no retention limit: nothing to purge"
    );
    let oldest_first: Vec<String> = get(&srv, &["ZRANGE", &q.keys().done(), "0", "-1"]);

    let keep_10 = Retention::new(10, Duration::ZERO);
    // Another client of the same queue, with a tighter policy (retention travels with each call).
    let q10 = Queue::with_pool(q.pool().clone(), "purge", config(keep_10, 10_000)).unwrap();
    assert_eq!(q10.purge(5).await.unwrap(), 5);
    assert_eq!(job_keys(&srv, &q), 25);
    let r = q10.sweep(3).await.unwrap();
    assert_eq!(r.purged, 3, "a sweep purges within its batch too");
    assert_eq!(q10.purge(100).await.unwrap(), 12);
    assert_eq!(q10.purge(100).await.unwrap(), 0);
    let left: Vec<String> = get(&srv, &["ZRANGE", &q.keys().done(), "0", "-1"]);
    assert_eq!(left, oldest_first[20..], "the newest 10 are kept");
    assert_eq!(job_keys(&srv, &q), 10);
    for id in &oldest_first[..20] {
        assert!(q.job(&JobId::parse(id).unwrap()).await.unwrap().is_none());
    }
}

#[tokio::test]
async fn age_retention_deletes_old_terminal_jobs_only() {
    let srv = RedisServer::start();
    let keep_hour = Retention::new(0, Duration::from_secs(3600));
    let q = Queue::connect(&srv.url(), "age", config(keep_hour, 10_000))
        .await
        .unwrap();
    run_to_end(&srv, &q, 0, 10, 10, |_| {}).await;
    // Non-terminal jobs are never purged, whatever their age.
    let running = enqueue(&q, job("p", 99)).await;
    let waiting = enqueue(&q, job("p", 100)).await;
    let l = lease_one(&q, "w", "p").await;
    assert_eq!(l.job, running);
    let _ = q.start(&l, "s").await.unwrap();
    assert_eq!(q.purge(100).await.unwrap(), 0, "an hour has not passed");

    let short = Retention::new(0, Duration::from_millis(200));
    let qs = Queue::with_pool(q.pool().clone(), "age", config(short, 10_000)).unwrap();
    let purged = std::cell::Cell::new(0);
    wait_until_async(WAIT, "jobs older than 200 ms are purged", || {
        let qs = qs.clone();
        let purged = &purged;
        async move {
            let n = qs.purge(3).await.unwrap();
            assert!(n <= 3, "purge respects its batch");
            purged.set(purged.get() + n);
            purged.get() == 10
        }
    })
    .await;
    assert_eq!(
        job_keys(&srv, &q),
        2,
        "only the two non-terminal jobs are left"
    );
    assert_eq!(get::<u64>(&srv, &["ZCARD", &q.keys().done()]), 0);
    assert_eq!(qs.purge(100).await.unwrap(), 0);
    let state = |id: JobId| {
        let q = q.clone();
        async move { q.job(&id).await.unwrap().unwrap().state }
    };
    assert_eq!(state(running).await, JobState::Running);
    assert_eq!(state(waiting).await, JobState::Queued);
}

// ---- corrupt data -----------------------------------------------------------------

/// A job leased and RUNNING, for corrupting.
async fn running_job(q: &Queue, n: u64) -> Lease {
    enqueue(q, job("p", n).max_attempts(3)).await;
    let l = lease_one(q, "w", "p").await;
    let _ = q.start(&l, "fetch").await.unwrap();
    l
}

/// Asserts `err` is `Error::Corrupt` naming `key` and `field`, in the value and in its message.
#[track_caller]
fn assert_corrupt(err: &Error, key: &str, field: &str) {
    match err {
        Error::Corrupt {
            key: k, field: f, ..
        } => {
            assert_eq!((k.as_str(), f.as_str()), (key, field), "{err}");
        }
        other => panic!("expected Corrupt for {key} {field}, got {other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains(key) && text.contains(field), "{text}");
}

/// Asserts that `result` is a typed, non-transient error (never a panic, never Ok).
#[track_caller]
fn assert_typed<T: Debug>(result: Result<T, Error>) -> Error {
    let err = result.expect_err("a corrupt job cannot be operated on");
    assert!(
        matches!(
            err,
            Error::Corrupt { .. }
                | Error::Protocol { .. }
                | Error::Redis(_)
                | Error::Refused { .. }
        ),
        "{err:?}"
    );
    assert!(!err.is_transient(), "{err:?}");
    err
}

#[tokio::test]
async fn corrupt_state_is_a_typed_error_for_reads_and_scripts() {
    let srv = RedisServer::start();
    let q = connect(&srv, "bad").await;
    let l = running_job(&q, 1).await;
    let key = q.keys().job(l.job.as_str());
    let _: i64 = get(&srv, &["HSET", &key, "state", "BOGUS"]);

    assert_corrupt(&q.job(&l.job).await.unwrap_err(), &key, "state");
    assert_corrupt(
        &q.checkpoint(&l, "fetch", "{}", None).await.unwrap_err(),
        &key,
        "state",
    );
    assert_corrupt(
        &q.finish(&l, &Outcome::Succeeded).await.unwrap_err(),
        &key,
        "state",
    );
    assert_corrupt(&q.start(&l, "fetch").await.unwrap_err(), &key, "state");
    assert_corrupt(&q.release(&l).await.unwrap_err(), &key, "state");
    assert_corrupt(
        &q.retry(&l.job, RetryMode::Resume, "op", "why")
            .await
            .unwrap_err(),
        &key,
        "state",
    );
    assert_corrupt(
        &q.resolve(&l.job, JobState::Failed, "op", "why")
            .await
            .unwrap_err(),
        &key,
        "state",
    );
    assert_eq!(
        q.renew(&[&l]).await.unwrap(),
        [Renewal::Lost { state: None }]
    );
    assert_typed(q.cancel(&l.job, "stop", "op").await);

    // The sweeper leaves a job in an unknown state alone (and drops its lease entry).
    let _: i64 = get(&srv, &["ZADD", &q.keys().leases(), "0", l.job.as_str()]);
    let r = q.sweep(10).await.unwrap();
    assert!(r.moves.is_empty(), "{r:?}");
    // A waiting job with an unknown state is never leased.
    let other = enqueue(&q, job("p", 2)).await;
    let _: i64 = get(
        &srv,
        &["HSET", &q.keys().job(other.as_str()), "state", "BOGUS"],
    );
    assert!(q
        .lease("w", &["p"], 5, TTL)
        .await
        .unwrap()
        .leases
        .is_empty());
    assert_eq!(get::<String>(&srv, &["HGET", &key, "state"]), "BOGUS");
}

#[tokio::test]
async fn corrupt_input_is_a_typed_error_when_read() {
    let srv = RedisServer::start();
    let q = connect(&srv, "bad").await;
    let id = enqueue(&q, job("p", 1)).await;
    let key = q.keys().job(id.as_str());
    let _: i64 = get(&srv, &["HSET", &key, "input", "{not json"]);
    assert_corrupt(&q.job(&id).await.unwrap_err(), &key, "input");
    // Text that is not JSON is passed through (a binary one is quarantined):
    // whether it is the pipeline's input type is the worker's decode, which
    // fails the attempt permanently (kind "input") rather than looping.
    let l = lease_one(&q, "w", "p").await;
    assert_eq!(l.input, "{not json");
    assert!(serde_json::from_str::<serde_json::Value>(&l.input).is_err());
    let _ = q.start(&l, "fetch").await.unwrap();
    q.finish(
        &l,
        &Outcome::Failed {
            error: leasehold_core::AttemptError {
                kind: "input".into(),
                message: "input is not JSON".into(),
                retryable: false,
                retries_exhausted: false,
            },
            backoff: Duration::ZERO,
            cleanup_needed: false,
        },
    )
    .await
    .unwrap();
    assert_eq!(get::<String>(&srv, &["HGET", &key, "state"]), "FAILED");
}

#[tokio::test]
async fn corrupt_attempt_number_is_a_typed_error_for_reads_and_scripts() {
    let srv = RedisServer::start();
    let q = connect(&srv, "bad").await;
    let l = running_job(&q, 1).await;
    let key = q.keys().job(l.job.as_str());
    let _: i64 = get(&srv, &["HSET", &key, "attempt", "x"]);
    assert_corrupt(&q.job(&l.job).await.unwrap_err(), &key, "attempt");
    assert_typed(q.finish(&l, &Outcome::Succeeded).await);
    assert_eq!(get::<String>(&srv, &["HGET", &key, "state"]), "RUNNING");

    // A waiting job with a corrupt attempt number: the lease quarantines it.
    let id = enqueue(&q, job("p", 2)).await;
    let _: i64 = get(&srv, &["HSET", &q.keys().job(id.as_str()), "attempt", "x"]);
    let leased = q.lease("w", &["p"], 1, TTL).await.unwrap();
    assert!(leased.leases.is_empty());
    let entry = q.quarantine_entry(id.as_str()).await.unwrap().unwrap();
    assert_eq!(entry.field, "attempt");
}

#[tokio::test]
async fn corrupt_attempt_record_is_a_typed_error_and_is_never_overwritten() {
    let srv = RedisServer::start();
    let q = connect(&srv, "bad").await;
    let l = running_job(&q, 1).await;
    let key = q.keys().job(l.job.as_str());
    // attempt records live in the queue's attempts hash, field `<id>:<n>`
    let attempts = q.keys().attempts();
    let field = format!("{}:1", l.job);
    let _: i64 = get(&srv, &["HSET", &attempts, &field, "garbage"]);
    assert_corrupt(&q.job(&l.job).await.unwrap_err(), &attempts, &field);
    // a failed finish must append attempt 1's record, which exists: refused, nothing written
    let failed = Outcome::Failed {
        error: leasehold_core::AttemptError {
            kind: "sink".into(),
            message: "down".into(),
            retryable: false,
            retries_exhausted: false,
        },
        backoff: Duration::ZERO,
        cleanup_needed: false,
    };
    let before = srv.dump("*");
    let err = q.finish(&l, &failed).await.unwrap_err();
    assert_corrupt(&err, &key, "attempt");
    assert!(err.to_string().contains(&field), "{err}");
    assert_eq!(before, srv.dump("*"));
    assert_eq!(get::<String>(&srv, &["HGET", &attempts, &field]), "garbage");
    // a plain success writes no record (its attempt stays in the job hash): it
    // ends the job, the bad record is left as it is and still read as an error
    q.finish(&l, &Outcome::Succeeded).await.unwrap();
    assert_eq!(get::<String>(&srv, &["HGET", &key, "state"]), "SUCCEEDED");
    assert_eq!(get::<String>(&srv, &["HGET", &attempts, &field]), "garbage");
    assert_corrupt(&q.job(&l.job).await.unwrap_err(), &attempts, &field);
}

#[tokio::test]
async fn corrupt_step_output_is_a_typed_error_when_read() {
    let srv = RedisServer::start();
    let q = connect(&srv, "bad").await;
    let l = running_job(&q, 1).await;
    q.checkpoint(&l, "fetch", r#"{"rows":1}"#, Some("load"))
        .await
        .unwrap();
    let key = q.keys().job(l.job.as_str());
    // the attempt's end seals the output into the job hash, where it is
    // corrupted; a resumed attempt receives the stored text as it is
    q.finish(
        &l,
        &Outcome::Failed {
            error: leasehold_core::AttemptError {
                kind: "io".into(),
                message: "reset".into(),
                retryable: true,
                retries_exhausted: false,
            },
            backoff: Duration::ZERO,
            cleanup_needed: false,
        },
    )
    .await
    .unwrap();
    let _: i64 = get(&srv, &["HSET", &key, "out:fetch", "rows=1"]);
    assert_corrupt(&q.job(&l.job).await.unwrap_err(), &key, "out:fetch");
    let l2 = lease_one(&q, "w", "p").await;
    assert_eq!(l2.attempt, 2);
    assert_eq!(l2.last_step.as_deref(), Some("fetch"));
    assert_eq!(l2.last_output.as_deref(), Some("rows=1"));
}

#[tokio::test]
async fn every_unreadable_field_is_named_in_the_error() {
    let srv = RedisServer::start();
    let q = connect(&srv, "fields").await;
    let cases: &[(&str, Option<&[u8]>)] = &[
        ("state", Some(b"")),
        ("priority", Some(b"high")),
        ("not_before", Some(b"soon")),
        ("max_attempts", Some(b"-1")),
        ("stale_lock", Some(b"maybe")),
        ("created_at", None),
        ("updated_at", Some(b"1.5")),
        ("id", Some(b"has space")),
        ("pipeline", Some(&[0xff, 0xfe])),
        ("steps", Some(b"fetch")),
        ("cancel_at", Some(b"yesterday")),
    ];
    let mut con = srv.connection();
    for (i, (field, value)) in cases.iter().enumerate() {
        let id = enqueue(&q, job("p", i as u64)).await;
        let key = q.keys().job(id.as_str());
        if *field == "cancel_at" {
            let _: i64 = get(&srv, &["HSET", &key, "cancel_reason", "x"]);
        }
        match value {
            Some(v) => redis::cmd("HSET")
                .arg(&key)
                .arg(*field)
                .arg(*v)
                .query::<i64>(&mut con),
            None => redis::cmd("HDEL")
                .arg(&key)
                .arg(*field)
                .query::<i64>(&mut con),
        }
        .unwrap();
        let err = q.job(&id).await.expect_err(field);
        assert_corrupt(&err, &key, field);
    }
    // A live lease with a corrupt fence is named too.
    let _l = lease_one(&q, "w", "p").await;
    let ids: Vec<String> = get(&srv, &["ZRANGE", &q.keys().leases(), "0", "-1"]);
    let key = q.keys().job(&ids[0]);
    let _: i64 = get(&srv, &["HSET", &key, "fence", "NaN"]);
    let err = q.job(&JobId::parse(&ids[0]).unwrap()).await.unwrap_err();
    assert_corrupt(&err, &key, "fence");
}

// ---- Redis going away --------------------------------------------------------------

fn short_timeouts() -> QueueConfig {
    QueueConfig::default()
        .connect_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(1))
}

/// Runs `fut`, expecting a transient connection-level error within `limit`.
async fn expect_transient<T: Debug>(
    what: &str,
    limit: Duration,
    fut: impl Future<Output = Result<T, Error>>,
) -> Error {
    let started = Instant::now();
    let result = fut.await;
    let took = started.elapsed();
    let err = match result {
        Ok(v) => panic!("{what}: expected an error, got {v:?}"),
        Err(e) => e,
    };
    assert!(
        matches!(err, Error::Redis(_) | Error::Pool(_) | Error::Timeout(_)),
        "{what}: {err:?}"
    );
    assert!(err.is_transient(), "{what}: {err:?} should be transient");
    assert!(took < limit, "{what}: took {took:?}, more than {limit:?}");
    err
}

#[tokio::test]
async fn redis_killed_gives_transient_errors_and_the_same_queue_works_after_restart() {
    let mut srv = RedisServer::start();
    let q = Queue::connect(&srv.url(), "down", short_timeouts())
        .await
        .unwrap();
    let id = enqueue(&q, job("p", 1)).await;
    let l = lease_one(&q, "w", "p").await;
    assert_eq!(l.job, id);

    srv.kill();
    // connect (1 s) + response (1 s), with slack for a loaded machine.
    let limit = Duration::from_secs(5);
    expect_transient("ping", limit, q.ping()).await;
    expect_transient("enqueue", limit, q.enqueue(job("p", 2))).await;
    expect_transient("lease", limit, q.lease("w", &["p"], 1, TTL)).await;
    expect_transient("start", limit, q.start(&l, "s")).await;
    expect_transient("renew", limit, q.renew(&[&l])).await;
    expect_transient("finish", limit, q.finish(&l, &Outcome::Succeeded)).await;
    expect_transient("cancel", limit, q.cancel(&id, "x", "op")).await;
    expect_transient("sweep", limit, q.sweep(10)).await;
    expect_transient("job", limit, q.job(&id)).await;
    let url = srv.url();
    let connect = Queue::connect(&url, "down", short_timeouts());
    expect_transient("connect", limit, connect).await;

    srv.restart();
    wait_until_async(WAIT, "the queue reconnects", || async {
        q.ping().await.is_ok()
    })
    .await;
    // The data is gone (no persistence), and the function library with it:
    // the same Queue loads it again transparently.
    assert_eq!(get::<i64>(&srv, &["DBSIZE"]), 0);
    assert!(q.job(&id).await.unwrap().is_none());
    assert_eq!(
        q.renew(&[&l]).await.unwrap(),
        [Renewal::Lost { state: None }]
    );
    let id2 = enqueue(&q, job("p", 3)).await;
    assert!(
        srv.info("commandstats").contains("cmdstat_function|load:"),
        "the library was loaded again (FUNCTION LOAD after 'Function not found')"
    );
    let l2 = lease_one(&q, "w", "p").await;
    assert_eq!(l2.job, id2);
    let _ = q.start(&l2, "s").await.unwrap();
    q.finish(&l2, &Outcome::Succeeded).await.unwrap();
    assert_eq!(
        q.job(&id2).await.unwrap().unwrap().state,
        JobState::Succeeded
    );
}

#[tokio::test]
async fn a_hung_redis_gives_a_timeout_within_the_response_timeout() {
    let srv = RedisServer::start();
    let q = Queue::connect(&srv.url(), "hung", short_timeouts())
        .await
        .unwrap();
    let id = enqueue(&q, job("p", 1)).await;
    q.load_scripts().await.unwrap();
    // Writes (scripts) are held by the server until unpaused; reads still answer.
    assert_eq!(
        get::<String>(&srv, &["CLIENT", "PAUSE", "60000", "WRITE"]),
        "OK"
    );
    let err = expect_transient(
        "lease",
        Duration::from_secs(4),
        q.lease("w", &["p"], 1, TTL),
    )
    .await;
    assert!(
        matches!(err, Error::Timeout(d) if d == Duration::from_secs(1)),
        "{err:?}"
    );
    assert_eq!(get::<String>(&srv, &["CLIENT", "UNPAUSE"]), "OK");
    // The held call ran once the server resumed: a timeout does not mean "not done".
    wait_until_async(WAIT, "the held lease ran", || async {
        get::<String>(&srv, &["HGET", &q.keys().job(id.as_str()), "state"]) == "LEASED"
    })
    .await;
    // The queue is usable again; the orphaned lease is recovered by the sweeper.
    let _: i64 = get(&srv, &["ZADD", &q.keys().leases(), "XX", "0", id.as_str()]);
    assert_eq!(q.sweep(10).await.unwrap().requeued, 1);
    assert_eq!(lease_one(&q, "w", "p").await.job, id);
}

#[tokio::test]
async fn a_slow_redis_within_the_response_timeout_is_not_an_error() {
    let srv = RedisServer::start();
    let q = Queue::connect(
        &srv.url(),
        "slow",
        QueueConfig::default()
            .connect_timeout(Duration::from_secs(5))
            .response_timeout(Duration::from_secs(10)),
    )
    .await
    .unwrap();
    q.load_scripts().await.unwrap();
    // The server holds every write for 1.5 s: well within the configured 10 s.
    let started = Instant::now();
    assert_eq!(
        get::<String>(&srv, &["CLIENT", "PAUSE", "1500", "WRITE"]),
        "OK"
    );
    let e = q
        .enqueue(job("p", 1))
        .await
        .expect("a slow answer within response_timeout is an answer");
    assert!(e.created);
    assert!(
        started.elapsed() >= Duration::from_millis(1400),
        "{:?}",
        started.elapsed()
    );
}

// ---- bad input ----------------------------------------------------------------------

#[tokio::test]
async fn bad_input_is_rejected_before_anything_is_written() {
    let srv = RedisServer::start();
    let q = connect(&srv, "input").await;
    let ok = || job("p", 1);
    let bad: Vec<(&str, NewJob)> = vec![
        ("invalid JSON input", NewJob::from_json("p", "{nope")),
        ("empty input", NewJob::from_json("p", "")),
        ("empty pipeline", NewJob::from_json("", "{}")),
        ("pipeline with a space", NewJob::from_json("a b", "{}")),
        ("pipeline with braces", NewJob::from_json("a{b}", "{}")),
        ("pipeline with a newline", NewJob::from_json("a\nb", "{}")),
        (
            "pipeline too long",
            NewJob::from_json("p".repeat(201), "{}"),
        ),
        ("resource with a brace", ok().resource("shop}a")),
        ("empty resource", ok().resource("")),
        ("resource with a space", ok().resource("shop a")),
        ("empty input key", ok().input_key("")),
        ("max_attempts 0", ok().max_attempts(0)),
    ];
    for (what, job) in bad {
        let err = q.enqueue(job.clone()).await.expect_err(what);
        assert!(matches!(err, Error::InvalidArgument(_)), "{what}: {err:?}");
        // One bad job in a bulk rejects the whole bulk.
        let err = q.enqueue_bulk(vec![ok(), job, ok()]).await.expect_err(what);
        assert!(matches!(err, Error::InvalidArgument(_)), "{what}: {err:?}");
    }
    assert!(
        srv.dump("*").is_empty(),
        "nothing was written: {:?}",
        srv.dump("*")
    );

    // Inputs that cannot be serialised at all.
    let mut map = HashMap::new();
    map.insert((1, 2), 3);
    assert!(matches!(
        NewJob::new("p", &map),
        Err(Error::InvalidArgument(_))
    ));

    // Names used in keys.
    for name in ["", "a b", "a{b", "a}b", "tab\there"] {
        let err = Queue::connect(&srv.url(), name, QueueConfig::default())
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument(_)),
            "queue {name:?}: {err:?}"
        );
        assert!(matches!(
            q.lease(name, &["p"], 1, TTL).await.unwrap_err(),
            Error::InvalidArgument(_)
        ));
        assert!(matches!(
            q.lease("w", &[name], 1, TTL).await.unwrap_err(),
            Error::InvalidArgument(_)
        ));
        assert!(JobId::parse(name).is_err() || name.is_empty());
    }
    let prefixed = QueueConfig::default().prefix("bad prefix");
    assert!(matches!(
        Queue::connect(&srv.url(), "q", prefixed).await.unwrap_err(),
        Error::InvalidArgument(_)
    ));
    assert!(srv.dump("*").is_empty());

    // Operations on a real job with bad arguments write nothing either.
    let id = enqueue(&q, ok().stale_lock(StaleLock::Hold)).await;
    let l = lease_one(&q, "w", "p").await;
    let _ = q.start(&l, "fetch").await.unwrap();
    let before = srv.dump("*");
    for (what, result) in [
        (
            "non-JSON output",
            q.checkpoint(&l, "fetch", "rows: 3", None).await,
        ),
        (
            "step with a comma",
            q.checkpoint(&l, "a,b", "{}", None).await,
        ),
        (
            "step with an at sign",
            q.checkpoint(&l, "a@b", "{}", None).await,
        ),
        ("empty step", q.checkpoint(&l, "", "{}", None).await),
    ] {
        assert!(
            matches!(result, Err(Error::InvalidArgument(_))),
            "{what}: {result:?}"
        );
    }
    assert!(matches!(
        q.cancel(&id, "", "op").await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        q.resolve(&id, JobState::Running, "op", "why").await,
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(before, srv.dump("*"), "rejected calls write nothing");
}
