//! The scripts as one function library (`FUNCTION LOAD`, `FCALL`): a run binds
//! its own keys, arguments and clock (nothing is kept from the previous run;
//! what the library keeps of names it derived never spares a run its checks),
//! the library comes back after `FUNCTION FLUSH`, and a server that refuses
//! functions gets the same scripts through `EVALSHA`.

mod support;

use std::time::Duration;

use leasehold_core::redis::{self, Value};
use leasehold_core::Outcome;
use leasehold_core::{JobState, Queue, QueueConfig};
use leasehold_testkit::RedisServer;
use support::server::{command_calls, connect, enqueue, get, job, lease_one};

#[tokio::test]
async fn a_run_binds_its_own_queue_and_clock() {
    let srv = RedisServer::start();
    let a = connect(&srv, "lib-a").await;
    let b = a.sibling("lib-b").expect("sibling");
    let first = enqueue(&a, job("p", 1)).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    let second = enqueue(&b, job("p", 2)).await;
    assert!(
        command_calls(&srv, "fcall") >= 2,
        "{}",
        srv.info("commandstats")
    );

    // each job is in its own queue's keys, not in the queue of the run before
    let ja = a.job(&first).await.unwrap().expect("job of lib-a");
    let jb = b.job(&second).await.unwrap().expect("job of lib-b");
    assert!(a.job(&second).await.unwrap().is_none());
    assert!(b.job(&first).await.unwrap().is_none());
    // the second run read Redis TIME afresh
    assert!(
        jb.created_at >= ja.created_at + 20,
        "{:?} then {:?}",
        ja.created_at,
        jb.created_at
    );
    // the lease index of lib-b holds its job only
    let l = lease_one(&b, "w", "p").await;
    assert_eq!(l.job, second);
    let leases_a: i64 = get(&srv, &["ZCARD", &a.keys().leases()]);
    assert_eq!(leases_a, 0);
}

/// `settle` with no operation and no lease, through `FCALL`, with `keys` as
/// its KEYS and `common` as its first three ARGV.
fn empty_settle(
    srv: &RedisServer,
    keys: &[String],
    common: [&str; 3],
) -> redis::RedisResult<Value> {
    let lib = leasehold_core::wire::library_source();
    let name = lib
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("#!lua name="))
        .expect("the library names itself on its first line");
    let mut cmd = redis::cmd("FCALL");
    cmd.arg(format!("{name}_settle")).arg(keys.len());
    for k in keys {
        cmd.arg(k);
    }
    cmd.arg(&common[..])
        .arg(&["", "60000", "60000", "0", "0", "0"][..]);
    cmd.query(&mut srv.connection())
}

/// Whether `err` is the error reply `code` whose text holds `text`.
fn refused(err: &redis::RedisError, code: &str, text: &str) -> bool {
    let shown = err.to_string();
    shown.contains(code) && shown.contains(text)
}

/// The library keeps the names it derived from the last base and the common
/// arguments it last found well formed, so that the next run of the same
/// worker need not derive or check them again: a run with a forged fixed key or
/// a malformed common argument right after good runs is still refused, and one
/// of another queue is checked against that queue's names.
#[tokio::test]
async fn a_run_after_good_runs_still_checks_its_keys_and_common_arguments() {
    let srv = RedisServer::start();
    let q = connect(&srv, "kept").await;
    q.load_scripts().await.expect("load");
    let fixed: Vec<String> = q.keys().fixed().to_vec();
    let good = ["1000", "0", "0"];
    for _ in 0..2 {
        empty_settle(&srv, &fixed, good).expect("a good run");
    }
    // a forged fixed key, with the base the library derived names from last
    let mut forged = fixed.clone();
    forged[6] = forged[0].clone() + ":elsewhere";
    let err = empty_settle(&srv, &forged, good).expect_err("a forged done key");
    assert!(refused(&err, "BAD_KEY", "KEYS[7] is"), "{err}");
    // each common argument malformed, right after a good run
    for (i, bad) in [(0, "x"), (1, "-1"), (2, "1:x")] {
        empty_settle(&srv, &fixed, good).expect("a good run");
        let mut common = good;
        common[i] = bad;
        let err = empty_settle(&srv, &fixed, common).expect_err("a malformed common argument");
        assert!(
            refused(
                &err,
                "BAD_ARG",
                &format!(
                    "settle: {}",
                    ["events", "retention keep", "retention ages"][i]
                )
            ),
            "ARGV[{}] {bad}: {err}",
            i + 1
        );
    }
    // another queue's keys: its own names, and a key of the first queue refused
    let other = q.sibling("kept-2").expect("sibling");
    let theirs: Vec<String> = other.keys().fixed().to_vec();
    empty_settle(&srv, &theirs, good).expect("a good run of another queue");
    let mut mixed = theirs.clone();
    mixed[1] = fixed[1].clone();
    let err = empty_settle(&srv, &mixed, good).expect_err("a key of the first queue");
    assert!(refused(&err, "BAD_KEY", "KEYS[2] is"), "{err}");
    empty_settle(&srv, &fixed, good).expect("the first queue again");
}

/// Lua allows a function 200 locals. Every script as `EVAL` runs it (servers
/// without functions) keeps room for 16 more in its main chunk, where the
/// shared files' helpers are, and 16 more in its own body: a new shared
/// helper or a longer script is refused here, with the script's name, before a
/// server without functions refuses it.
#[test]
fn every_script_has_room_for_more_locals() {
    let srv = RedisServer::start();
    let spare: String = (1..=16)
        .map(|i| format!("local spare_{i} = {i}\n"))
        .collect();
    for name in leasehold_core::wire::script_names() {
        let text = leasehold_core::wire::script_source(name).expect("a script");
        let body_at = text
            .find("return (function()\n")
            .expect("the script's own text runs as a function");
        let (shared, body) = text.split_at(body_at);
        let body = body.replacen(
            "return (function()\n",
            &format!("return (function()\n{spare}"),
            1,
        );
        let padded = format!("{shared}{spare}{body}");
        let loaded: redis::RedisResult<String> = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(&padded)
            .query(&mut srv.connection());
        assert!(loaded.is_ok(), "{name}: {loaded:?}");
    }
}

#[tokio::test]
async fn the_library_is_loaded_again_after_function_flush() {
    let srv = RedisServer::start();
    let q = connect(&srv, "flush").await;
    q.load_scripts().await.expect("load");
    // a second client (another worker starting) finds it loaded: not an error
    let other = connect(&srv, "flush").await;
    other.load_scripts().await.expect("loaded already");
    let id = enqueue(&q, job("p", 1)).await;
    let _: String = get(&srv, &["FUNCTION", "FLUSH"]);
    let l = lease_one(&q, "w", "p").await;
    assert_eq!(l.job, id);
    let _ = q.start(&l, "s").await.unwrap();
    q.finish(&l, &Outcome::Succeeded).await.unwrap();
    assert_eq!(
        q.job(&id).await.unwrap().unwrap().state,
        JobState::Succeeded
    );
    assert!(command_calls(&srv, "function|load") >= 2);
}

#[tokio::test]
async fn a_server_refusing_functions_runs_the_same_scripts_by_evalsha() {
    let srv = RedisServer::start_tcp();
    let _: String = get(
        &srv,
        &[
            "ACL",
            "SETUSER",
            "nofn",
            "on",
            ">pw",
            "~*",
            "&*",
            "+@all",
            "-fcall",
            "-function",
        ],
    );
    let url = srv.url().replacen("redis://", "redis://nofn:pw@", 1);
    let q = Queue::connect(&url, "nofn", QueueConfig::default())
        .await
        .expect("connect as a user without FCALL");
    q.load_scripts().await.expect("scripts loaded one by one");
    let id = enqueue(&q, job("p", 1)).await;
    let l = lease_one(&q, "w", "p").await;
    assert_eq!(l.job, id);
    let _ = q.start(&l, "s").await.unwrap();
    q.finish(&l, &Outcome::Succeeded).await.unwrap();
    assert_eq!(
        q.job(&id).await.unwrap().unwrap().state,
        JobState::Succeeded
    );
    assert!(command_calls(&srv, "evalsha") >= 3);
    // the refused FCALL is a rejected call, never run
    assert_eq!(command_calls(&srv, "fcall"), 0);
}
