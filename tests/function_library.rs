//! The scripts as one function library (`FUNCTION LOAD`, `FCALL`): a run binds
//! its own keys, arguments and clock (nothing is kept from the previous run),
//! the library comes back after `FUNCTION FLUSH`, and a server that refuses
//! functions gets the same scripts through `EVALSHA`.

mod support;

use std::time::Duration;

use leasehold::lease::Outcome;
use leasehold::queue::{JobState, Queue, QueueConfig};
use leasehold_testkit::RedisServer;
use support::{command_calls, connect, enqueue, get, job, lease_one};

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
