//! Every script clients call checks all of its arguments, and the job fields it
//! reads, before it writes anything. Each script is called directly (the exact
//! text the crate runs, `leasehold_core::wire::script_source`) on realistic state,
//! with the fixed KEYS and common ARGV the crate sends, once per malformed value
//! of each argument: the reply is a clean refusal (a `BAD_ARG` error reply, or
//! a `BAD_ARG`/`CORRUPT` status) and a full dump of Redis is byte-identical
//! afterwards. Arguments where any text is legal (reasons, messages, outputs)
//! are shown to succeed with odd text. Corrupt job fields get the same check.
//!
//! This file: the reproduction (a finish with a backoff soon), settle's
//! arguments and the job fields its operations read, and a job hash naming
//! another job. The other scripts are in `scripts_validate_first_scripts.rs`,
//! forged keys in `scripts_validate_first_keys.rs`; the helpers in
//! `support/validate.rs`.

mod support;

use std::time::Duration;

use leasehold_core::JobState;
use leasehold_core::Outcome;
use leasehold_testkit::RedisServer;
use support::server::{connect, enqueue, force_expire, get, job, read, TTL};
use support::validate::Expect::{Accepted, Refused};
use support::validate::*;

// ---- the reproduction ---------------------------------------------------

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

    // a checkpoint is no operation of settle (it is appended beside it)
    let mut cases = Vec::new();
    add(&mut cases, 10, &["checkpoint"], Refused);
    run_cases(&srv, "settle", &cases, || async {
        let l = running(&q, false).await;
        settle_call(
            &q,
            &[k.job(l.job.as_str())],
            1,
            &["finish", &l.token, "", "SUCCEEDED", "load", "{}", "0"],
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
    add(&mut cases, 23, &NOT_FLAGS, Refused); // appended
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
                "1",
            ],
        )
    })
    .await;

    // a successful finish: outcome, last step, its output, appended
    let mut cases = Vec::new();
    add(&mut cases, 14, &["a,b"], Refused);
    add(&mut cases, 15, &ODD_TEXT, Accepted);
    add(&mut cases, 16, &NOT_FLAGS, Refused);
    run_cases(&srv, "settle", &cases, || async {
        let l = running(&q, false).await;
        settle_call(
            &q,
            &[k.job(l.job.as_str())],
            1,
            &["finish", &l.token, "", "SUCCEEDED", "load", "{}", "1"],
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
        ("attempt", "two", "RUNNING", &["SUCCEEDED", "", "", "1"]),
        (
            "attempt",
            "-1",
            "RUNNING",
            &["SUCCEEDED", "load", "{}", "1"],
        ),
        ("id", "", "RUNNING", &["SUCCEEDED", "", "", "1"]),
        (
            "max_attempts",
            "many",
            "RUNNING",
            &["FAILED", "", "", "io", "m", "1", "0", "0", "", "0", "1"],
        ),
        (
            "priority",
            "high",
            "RUNNING",
            &["FAILED", "", "", "io", "m", "1", "0", "0", "", "0", "1"],
        ),
        (
            "attempt",
            "x",
            "RUNNING",
            &["CANCELLED", "", "", "", "", "0", "0", "0", "stop", "0", "1"],
        ),
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
        matches!(&err, leasehold_core::Error::Corrupt { field, .. } if field == "max_attempts"),
        "{err:?}"
    );
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
            matches!(&err, leasehold_core::Error::Corrupt { field, problem, .. }
                if field == "id" && problem.contains(other.as_str())),
            "{kind}: {err:?}"
        );
        assert!(
            before == full_dump(&srv),
            "{kind}: refused but Redis changed"
        );
        let renewed = q.renew(&[&l]).await.expect("renew");
        assert!(
            matches!(renewed[0], leasehold_core::Renewal::Lost { .. }),
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
