//! The scripts other than settle check all of their arguments before they
//! write anything (see `scripts_validate_first.rs`): enqueue, renew, cancel,
//! sweep (and its quarantine of a job it cannot move), retry, resolve, purge,
//! claim_cleanup, schedule_tick, schedule_register and schedule_state, the
//! group scripts and process_log, each called directly once per malformed value
//! of each argument, Redis byte-identical after every refusal.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold_core::redis::Value;
use leasehold_core::{JobId, JobState, Queue};
use leasehold_core::{Lease, Outcome};
use leasehold_testkit::RedisServer;
use support::server::{connect, enqueue, force_expire, get, job, read, TTL};
use support::validate::Expect::{Accepted, Refused};
use support::validate::*;

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
            q.create_group(&leasehold_core::NewGroup::new("g"), "t")
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
