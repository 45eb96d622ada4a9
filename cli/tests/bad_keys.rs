//! Corrupted keys through the `leasehold` binary: one bad job or key name
//! never breaks a listing (it is named, with its field, and everything else
//! is listed), and quarantined jobs are listed, shown, repaired and purged.

mod support;

use std::time::Duration;

use leasehold_core::redis;
use leasehold_core::{JobId, JobState, Queue};
use leasehold_testkit::RedisServer;
use support::binary::{command, run_cmd, Run};
use support::jobs::{enqueue, job, lease_one, queue, start};

const TTL: Duration = Duration::from_secs(60);

async fn cli(srv: &RedisServer, args: &[&str]) -> Run {
    run_cmd(command(&srv.url(), args)).await
}

fn raw(srv: &RedisServer, args: &[&[u8]]) {
    let mut con = srv.connection();
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).expect("a command name"));
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let _: redis::Value = cmd.query(&mut con).expect("raw command");
}

/// Queue `orders`: a RUNNING job whose state was overwritten with BOGUS, a
/// QUEUED job whose key was overwritten with a string, a good QUEUED job;
/// queue `other` with one job; and a key name under the prefix that is not UTF-8.
struct Scene {
    q: Queue,
    bogus: JobId,
    typed: JobId,
    good: JobId,
    other: JobId,
}

async fn scene(srv: &RedisServer) -> Scene {
    let q = queue(srv, "orders").await;
    let bogus = enqueue(&q, job("sync", 1)).await;
    let lease = lease_one(&q, "w1", "sync", TTL).await;
    assert_eq!(lease.job, bogus);
    start(&q, &lease).await;
    let typed = enqueue(&q, job("sync", 2)).await;
    let good = enqueue(&q, job("sync", 3)).await;
    let other_q = queue(srv, "other").await;
    let other = enqueue(&other_q, job("sync", 4)).await;
    raw(
        srv,
        &[
            b"HSET",
            q.keys().job(bogus.as_str()).as_bytes(),
            b"state",
            b"BOGUS",
        ],
    );
    raw(srv, &[b"DEL", q.keys().job(typed.as_str()).as_bytes()]);
    raw(
        srv,
        &[b"SET", q.keys().job(typed.as_str()).as_bytes(), b"oops"],
    );
    raw(srv, &[b"SET", b"leasehold:{bad\xff}:fence", b"1"]);
    Scene {
        q,
        bogus,
        typed,
        good,
        other,
    }
}

#[tokio::test]
async fn status_and_jobs_name_bad_keys_and_list_everything_else() {
    let srv = RedisServer::start();
    let s = scene(&srv).await;
    let bogus_key = s.q.keys().job(s.bogus.as_str());
    let typed_key = s.q.keys().job(s.typed.as_str());
    // before: "unknown state BOGUS" / "Cannot convert from UTF-8" for every queue
    let run = cli(&srv, &["status"]).await.ok();
    let run = run.shows(&["orders", "other", "unreadable", &bogus_key, "state"]);
    assert!(!run.stdout.contains("bad"), "{}", run.stdout);
    let status = cli(&srv, &["--json", "status", "--queue", "orders"])
        .await
        .ok()
        .json();
    // the BOGUS state (a lease) and the string key (the oldest waiting job)
    assert_eq!(status[0]["counts"]["unreadable"], 2, "{status:#}");
    assert_eq!(status[0]["counts"]["queued"], 2);
    let fields: Vec<(&str, &str)> = status[0]["unreadable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| (u["key"].as_str().unwrap(), u["field"].as_str().unwrap()))
        .collect();
    assert!(
        fields.contains(&(bogus_key.as_str(), "state")),
        "{fields:?}"
    );
    assert!(
        fields.contains(&(typed_key.as_str(), "(key)")),
        "{fields:?}"
    );
    // the oldest waiting job is the oldest readable one
    assert_eq!(status[0]["oldest_waiting"]["job"], s.good.as_str());

    // before: "Pipeline failure: [(Index 18, WRONGTYPE…)]" without the key
    cli(&srv, &["jobs"]).await.ok().shows(&[
        s.good.as_str(),
        s.other.as_str(),
        &typed_key,
        "(key)",
        &bogus_key,
    ]);
    let page = cli(&srv, &["--json", "jobs", "--queue", "orders"])
        .await
        .ok()
        .json();
    let listed: Vec<&str> = page["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [s.good.as_str()]);
    let named: Vec<&str> = page["unreadable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["key"].as_str().unwrap())
        .collect();
    assert!(named.contains(&typed_key.as_str()), "{page:#}");
    assert!(named.contains(&bogus_key.as_str()), "{page:#}");
}

#[tokio::test]
async fn quarantined_jobs_are_listed_shown_repaired_and_purged_by_the_cli() {
    let srv = RedisServer::start();
    let s = scene(&srv).await;
    // a job with an unreadable attempt number, and a lease call that meets both
    let attempt_bad = enqueue(&s.q, job("sync", 5)).await;
    raw(
        &srv,
        &[
            b"HSET",
            s.q.keys().job(attempt_bad.as_str()).as_bytes(),
            b"attempt",
            b"two",
        ],
    );
    let leased = s.q.lease("w2", &["sync"], 10, TTL).await.expect("lease");
    assert_eq!(leased.leases.len(), 1, "only the good job is leased");
    assert_eq!(leased.leases[0].job, s.good);
    assert!(leased.unreadable.is_empty(), "{:?}", leased.unreadable);

    cli(&srv, &["quarantine", "list"]).await.ok().shows(&[
        s.typed.as_str(),
        attempt_bad.as_str(),
        "(key)",
        "attempt",
        "ready:sync",
    ]);
    cli(&srv, &["jobs", "--state", "quarantined"])
        .await
        .ok()
        .shows(&[s.typed.as_str(), attempt_bad.as_str()]);
    cli(&srv, &["status", "--queue", "orders"])
        .await
        .ok()
        .shows(&["quarantined (unreadable) jobs: 2"]);
    cli(&srv, &["show", s.typed.as_str()]).await.ok().shows(&[
        "quarantined since",
        "(string)",
        "cannot be read",
    ]);
    cli(&srv, &["show", attempt_bad.as_str()])
        .await
        .ok()
        .shows(&["quarantined since", "attempt", "two"]);

    // still unreadable: refused, naming the field; nothing changes
    let run = cli(&srv, &["quarantine", "repair", attempt_bad.as_str()])
        .await
        .code(4);
    assert!(run.stderr.contains("attempt"), "{run:#?}");
    raw(
        &srv,
        &[
            b"HSET",
            s.q.keys().job(attempt_bad.as_str()).as_bytes(),
            b"attempt",
            b"1",
        ],
    );
    cli(&srv, &["quarantine", "repair", attempt_bad.as_str()])
        .await
        .ok()
        .shows(&["repaired"]);
    let job = s.q.job(&attempt_bad).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Queued);
    let again = s.q.lease("w2", &["sync"], 10, TTL).await.expect("lease");
    assert_eq!(again.leases.len(), 1);
    assert_eq!(again.leases[0].job, attempt_bad);

    // the wrong-type key cannot be repaired; purge deletes it
    cli(&srv, &["quarantine", "repair", s.typed.as_str()])
        .await
        .code(4);
    cli(&srv, &["quarantine", "purge", s.typed.as_str()])
        .await
        .ok();
    cli(&srv, &["quarantine", "list", "--queue", "orders"])
        .await
        .ok()
        .shows(&["no quarantined jobs"]);
    let events = cli(&srv, &["--json", "events", "--queue", "orders"])
        .await
        .ok()
        .json();
    assert!(
        events
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["op"] == "repair" && e["job"] == attempt_bad.as_str()),
        "{events:#}"
    );
}
