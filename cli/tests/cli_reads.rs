//! The `leasehold` binary end to end, the commands that read: status, jobs
//! (filters and pages), show, locks, workers, events and `events --follow`,
//! against a private `redis-server` populated through the `Queue` client (no
//! worker runtime: the tests lease, start, checkpoint and finish jobs
//! themselves).

mod support;

use std::process::Stdio;
use std::time::Duration;

use leasehold_core::Outcome;
use leasehold_testkit::RedisServer;
use serde_json::{json, Value};
use support::binary::command;
use support::jobs::{enqueue, job, lease_one, queue, start};
use support::scene::*;
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test]
async fn status_reports_counts_oldest_waiting_workers_locks_and_stale_jobs() {
    let srv = RedisServer::start();
    let s = scene(&srv).await;

    let human = cli(&srv, &["status"]).await.ok().stdout;
    for needle in [
        "QUEUE",
        "orders",
        "oldest waiting: job",
        "workers: w1 (1/4 busy)",
        "pruned expired worker registrations: w-gone",
        "locks held:",
        "persisted (STALE holder)",
        "STALE jobs needing a decision: 1",
        s.stale.as_str(),
        "leasehold resolve JOB",
    ] {
        assert!(human.contains(needle), "status lacks {needle:?}:\n{human}");
    }

    let v = cli(&srv, &["status", "--json"]).await.ok().json();
    let st = &v[0];
    assert_eq!(st["queue"], "orders");
    let c = &st["counts"];
    assert_eq!(
        (
            &c["queued"],
            &c["leased"],
            &c["running"],
            &c["stale"],
            &c["terminal"]
        ),
        (&json!(3), &json!(1), &json!(1), &json!(1), &json!(3))
    );
    assert_eq!(
        (&c["succeeded"], &c["failed"], &c["cancelled"]),
        (&json!(1), &json!(1), &json!(1))
    );
    assert_eq!(st["oldest_waiting"]["job"], s.parked.as_str());
    assert_eq!(st["workers"][0]["id"], "w1");
    assert_eq!(st["locks"].as_array().unwrap().len(), 2);
    assert_eq!(st["stale"][0]["job"]["id"], s.stale.as_str());
    assert_eq!(st["stale"][0]["holds_lock"], true);

    // --queue restricts; an unknown queue is an error naming the known ones
    let run = cli(&srv, &["status", "--queue", "nothing", "--json"])
        .await
        .code(3);
    assert!(
        run.stderr.contains("no queue \"nothing\"") && run.stderr.contains("known queues: orders"),
        "{run:?}"
    );
}

#[tokio::test]
async fn jobs_filters_and_pages_newest_first() {
    let srv = RedisServer::start();
    let s = scene(&srv).await;

    let all = cli(&srv, &["jobs", "--json"]).await.ok().json();
    let listed = ids(&all);
    assert_eq!(listed.len(), 9, "{all:#}");
    // the delayed and ready jobs were the last changes; the first terminal job is the oldest end
    assert_eq!(listed[0], s.delayed.as_str());
    assert_eq!(listed[1], s.ready.as_str());
    assert!(!all["has_more"].as_bool().unwrap());

    let running = cli(&srv, &["jobs", "--state", "running", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(ids(&running), [s.running.as_str()]);
    assert_eq!(running["jobs"][0]["worker"], "w1");
    let stale = cli(
        &srv,
        &["jobs", "--queue", "orders", "--state", "STALE", "--json"],
    )
    .await
    .ok()
    .json();
    assert_eq!(ids(&stale), [s.stale.as_str()]);
    let queued = cli(&srv, &["jobs", "--state", "queued", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(
        ids(&queued),
        [s.delayed.as_str(), s.ready.as_str(), s.parked.as_str()]
    );
    let report = cli(&srv, &["jobs", "--pipeline", "report", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(ids(&report), [s.delayed.as_str(), s.ready.as_str()]);
    let shop_a = cli(&srv, &["jobs", "--resource", "shop:a", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(ids(&shop_a), [s.parked.as_str(), s.running.as_str()]);
    let w2 = cli(&srv, &["jobs", "--worker", "w2", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(ids(&w2), [s.leased.as_str()]);
    let w1_terminal = cli(
        &srv,
        &["jobs", "--worker", "w1", "--state", "failed", "--json"],
    )
    .await
    .ok()
    .json();
    assert_eq!(ids(&w1_terminal), [s.failed.as_str()]);

    // paging
    let p1 = cli(&srv, &["jobs", "--limit", "4", "--json"])
        .await
        .ok()
        .json();
    let p2 = cli(&srv, &["jobs", "--limit", "4", "--offset", "4", "--json"])
        .await
        .ok()
        .json();
    let p3 = cli(&srv, &["jobs", "--limit", "4", "--offset", "8", "--json"])
        .await
        .ok()
        .json();
    assert!(p1["has_more"].as_bool().unwrap());
    let paged: Vec<String> = [ids(&p1), ids(&p2), ids(&p3)].concat();
    assert_eq!(paged, listed);
    assert_eq!(ids(&p3).len(), 1);

    // the table
    let table = cli(&srv, &["jobs", "--limit", "3"]).await.ok().stdout;
    assert!(table.starts_with("ID"), "{table}");
    assert!(
        table.contains("3 jobs (offset 0); more may match: --offset 3"),
        "{table}"
    );
    // a pipeline that exists but matches nothing: an empty answer; an
    // unknown one: an error
    let none = cli(&srv, &["jobs", "--pipeline", "report", "--state", "failed"])
        .await
        .ok()
        .stdout;
    assert!(none.contains("no jobs match"), "{none}");
    let run = cli(&srv, &["jobs", "--pipeline", "nope"]).await.code(3);
    assert!(run.stderr.contains("no pipeline \"nope\""), "{run:?}");
    let _ = (s.succeeded, s.cancelled, s.running_lease);
}

#[tokio::test]
async fn show_tells_the_whole_story_of_a_job() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    // attempt 1 fails retryably, attempt 2 runs two steps and gets a cancel request
    let id = enqueue(
        &q,
        job("sync", 1)
            .resource("shop:a")
            .max_attempts(3)
            .input_key("shop:a:1"),
    )
    .await;
    let l1 = lease_one(&q, "w1", "sync", TTL).await;
    start(&q, &l1).await;
    q.checkpoint(&l1, "fetch", "{\"rows\":3}", Some("load"))
        .await
        .unwrap();
    q.finish(&l1, &failure(true)).await.unwrap();
    let l2 = lease_one(&q, "w2", "sync", TTL).await;
    start(&q, &l2).await;
    q.checkpoint(&l2, "load", "{\"loaded\":3}", Some("aggregate"))
        .await
        .unwrap();

    // found without --queue
    let run = cli(&srv, &["cancel", id.as_str(), "--reason", "shop migrating"])
        .await
        .ok();
    assert!(run.stdout.contains("cancel requested"), "{run:?}");
    let human = cli(&srv, &["show", id.as_str()]).await.ok().stdout;
    for needle in [
        "pipeline",
        "{\"n\":1}",
        "shop:a:1",
        "held by w2",
        "held by this job",
        "requested by tester",
        "pending: the holder is told at once",
        "#1 FAILED",
        "error: validation: 3 orders have negative totals  (retryable: yes)",
        "steps completed: fetch at",
        "#2 RUNNING (current)",
        "steps completed: load at",
        "timeline",
        "leased by w1 (fence 1)",
        "step fetch completed",
        "ended FAILED",
        "leased by w2 (fence 2)",
        "cancel requested by tester: shop migrating",
        "events",
        "enqueue",
    ] {
        assert!(human.contains(needle), "show lacks {needle:?}:\n{human}");
    }

    let v = cli(&srv, &["show", id.as_str(), "--queue", "orders", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(v["job"]["id"], id.as_str());
    assert_eq!(v["job"]["state"], "RUNNING");
    assert_eq!(v["job"]["lease"]["token"], "(redacted)");
    assert_eq!(v["job"]["attempts"][0]["error"]["retryable"], true);
    assert_eq!(v["cancel"]["outcome"], "pending");
    assert_eq!(v["lock"]["holder"], id.as_str());
    let ops: Vec<&str> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["op"].as_str().unwrap())
        .collect();
    assert_eq!(
        ops,
        ["enqueue", "lease", "start", "finish", "retry", "lease", "start", "cancel"]
    );
    assert!(v["timeline"].as_array().unwrap().len() >= 8);

    // the worker honours it: the cancel is honoured
    q.finish(
        &l2,
        &Outcome::Cancelled {
            reason: "shop migrating".into(),
            cleanup_needed: true,
        },
    )
    .await
    .unwrap();
    let v = cli(&srv, &["show", id.as_str(), "--json"])
        .await
        .ok()
        .json();
    assert_eq!(v["cancel"]["outcome"], "honoured");
    assert!(v["cancel_explained"]
        .as_str()
        .unwrap()
        .starts_with("honoured"));
    let human = cli(&srv, &["show", id.as_str()]).await.ok().stdout;
    assert!(
        human.contains("honoured: attempt 2 ended CANCELLED"),
        "{human}"
    );
    assert!(human.contains("cleanup needed"), "{human}");
}

#[tokio::test]
async fn locks_workers_and_events_list_what_redis_holds() {
    let srv = RedisServer::start();
    let s = scene(&srv).await;

    let v = cli(&srv, &["locks", "--json"]).await.ok().json();
    let locks = v.as_array().unwrap();
    assert_eq!(locks.len(), 2, "{v:#}");
    let a = locks.iter().find(|l| l["resource"] == "shop:a").unwrap();
    assert_eq!(
        (&a["queue"], &a["holder"], &a["holder_state"], &a["parked"]),
        (
            &json!("orders"),
            &json!(s.running.as_str()),
            &json!("RUNNING"),
            &json!(1)
        )
    );
    let st = locks.iter().find(|l| l["resource"] == "shop:s").unwrap();
    assert_eq!(st["ttl_ms"], -1);
    let human = cli(&srv, &["locks"]).await.ok().stdout;
    assert!(
        human.contains("shop:a") && human.contains("persisted (STALE holder)"),
        "{human}"
    );

    let v = cli(&srv, &["workers", "--json"]).await.ok().json();
    assert_eq!(v[0]["queue"], "orders");
    assert_eq!(v[0]["live"][0]["id"], "w1");
    assert_eq!(v[0]["live"][0]["pid"], 4242);
    assert_eq!(v[0]["pruned"], json!(["w-gone"]));
    let human = cli(&srv, &["workers"]).await.ok().stdout;
    assert!(
        human.contains("w1") && human.contains("4242") && human.contains("1/4"),
        "{human}"
    );

    let v = cli(&srv, &["events", "--json", "--limit", "5"])
        .await
        .ok()
        .json();
    let events = v.as_array().unwrap();
    assert_eq!(events.len(), 5);
    assert_eq!(events[4]["job"], s.delayed.as_str());
    assert_eq!(events[4]["op"], "enqueue");
    assert!(events
        .windows(2)
        .all(|w| w[0]["at"].as_i64() <= w[1]["at"].as_i64()));
    let v = cli(&srv, &["events", "--job", s.cancelled.as_str(), "--json"])
        .await
        .ok()
        .json();
    let ops: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["enqueue", "cancel"]);
    assert_eq!(v[1]["by"], "alice");
    let human = cli(&srv, &["events", "--job", s.stale.as_str()])
        .await
        .ok()
        .stdout;
    assert!(
        human.contains("RUNNING->STALE") && human.contains("lease expired (worker w-dead)"),
        "{human}"
    );
}

#[tokio::test]
async fn events_follow_prints_new_events_as_they_happen() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    let first = enqueue(&q, job("sync", 1)).await;
    let mut cmd = command(
        &srv.url(),
        &["events", "--follow", "--json", "--queue", "orders"],
    );
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = async || -> Value {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("a line within 20 s")
            .expect("read")
            .expect("not closed");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    };
    let e = next().await;
    assert_eq!(
        (&e["job"], &e["op"]),
        (&json!(first.as_str()), &json!("enqueue"))
    );
    let second = enqueue(&q, job("sync", 2)).await;
    let e = next().await;
    assert_eq!(
        (&e["job"], &e["op"]),
        (&json!(second.as_str()), &json!("enqueue"))
    );
    q.cancel(&second, "changed my mind", "dave").await.unwrap();
    let e = next().await;
    assert_eq!(
        (&e["op"], &e["by"], &e["to"]),
        (&json!("cancel"), &json!("dave"), &json!("CANCELLED"))
    );
    // Ctrl-C (SIGINT, sent to the follower's pid): it stops quietly with the
    // status a shell gives a process SIGINT ended
    let pid = child.id().expect("still running").to_string();
    let sent = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("run kill");
    assert!(sent.success());
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the follower exits within 20 s")
        .expect("its status");
    assert_eq!(status.code(), Some(130), "{status:?}");
}
