//! The `leasehold` binary end to end: every command against a private
//! `redis-server` populated through the `Queue` client (no worker runtime: the
//! tests lease, start, checkpoint and finish jobs themselves).

mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use leasehold_core::{AttemptError, JobId, JobState, Lease, Outcome, Queue};
use leasehold_testkit::RedisServer;
use serde_json::{json, Value};
use support::binary::{command, run_cmd, Run, BIN};
use support::jobs::{enqueue, job, lease_one, queue, start};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

const TTL: Duration = Duration::from_secs(60);

/// Runs the binary against `srv` with `args`.
async fn cli(srv: &RedisServer, args: &[&str]) -> Run {
    run_cmd(command(&srv.url(), args)).await
}

fn failure(retryable: bool) -> Outcome {
    Outcome::Failed {
        error: AttemptError {
            kind: "validation".into(),
            message: "3 orders have negative totals".into(),
            retryable,
            retries_exhausted: false,
        },
        backoff: Duration::ZERO,
        cleanup_needed: false,
    }
}

/// A RUNNING job whose lease expires and is swept: STALE, holding its lock.
async fn make_stale(q: &Queue, pipeline: &str) -> Lease {
    let lease = lease_one(q, "w-dead", pipeline, Duration::from_millis(1000)).await;
    start(q, &lease).await;
    q.checkpoint(&lease, "fetch", "{\"rows\":1}", Some("load"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(q.sweep(100).await.unwrap().stale, 1);
    lease
}

/// A populated queue `orders`: one job in every state, a worker, two locks.
struct Scene {
    stale: JobId,
    running: JobId,
    leased: JobId,
    parked: JobId,
    ready: JobId,
    delayed: JobId,
    succeeded: JobId,
    failed: JobId,
    cancelled: JobId,
    running_lease: Lease,
}

async fn scene(srv: &RedisServer) -> Scene {
    let q = queue(srv, "orders").await;
    let stale = enqueue(&q, job("sync", 1).resource("shop:s")).await;
    make_stale(&q, "sync").await;
    let succeeded = enqueue(&q, job("sync", 2)).await;
    let l = lease_one(&q, "w1", "sync", TTL).await;
    start(&q, &l).await;
    q.checkpoint(&l, "fetch", "{\"rows\":2}", None)
        .await
        .unwrap();
    q.finish(&l, &Outcome::Succeeded).await.unwrap();
    let failed = enqueue(&q, job("sync", 3)).await;
    let l = lease_one(&q, "w1", "sync", TTL).await;
    start(&q, &l).await;
    q.finish(&l, &failure(false)).await.unwrap();
    let cancelled = enqueue(&q, job("sync", 4)).await;
    q.cancel(&cancelled, "not needed", "alice").await.unwrap();
    let running = enqueue(&q, job("sync", 5).resource("shop:a")).await;
    let running_lease = lease_one(&q, "w1", "sync", TTL).await;
    start(&q, &running_lease).await;
    let leased = enqueue(&q, job("sync", 6)).await;
    lease_one(&q, "w2", "sync", TTL).await;
    let parked = enqueue(&q, job("sync", 7).resource("shop:a")).await;
    assert!(q
        .lease("w2", &["sync"], 1, TTL)
        .await
        .unwrap()
        .leases
        .is_empty());
    let ready = enqueue(&q, job("report", 8)).await;
    let delayed = enqueue(&q, job("report", 9).delay(Duration::from_secs(3600))).await;
    srv.cmd(&[
        "SET",
        &q.keys().worker("w1"),
        r#"{"id":"w1","pid":4242,"started_at":1778025600000,"pipelines":["sync"],"concurrency":4,"active":1,"shutting_down":false}"#,
        "PX",
        "60000",
    ]);
    srv.cmd(&["SADD", &q.keys().workers(), "w1", "w-gone"]);
    Scene {
        stale,
        running,
        leased,
        parked,
        ready,
        delayed,
        succeeded,
        failed,
        cancelled,
        running_lease,
    }
}

fn ids(v: &Value) -> Vec<String> {
    v["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect()
}

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
async fn actions_go_through_the_scripts_and_record_who() {
    let srv = RedisServer::start();
    let s = scene(&srv).await;
    let q = queue(&srv, "orders").await;

    // cancel a QUEUED job: at once
    let v = cli(
        &srv,
        &["cancel", s.ready.as_str(), "--reason", "dup", "--json"],
    )
    .await
    .ok()
    .json();
    assert_eq!(
        (&v["outcome"], &v["state"]),
        (&json!("cancelled"), &json!("CANCELLED"))
    );
    assert_eq!(
        q.job(&s.ready).await.unwrap().unwrap().state,
        JobState::Cancelled
    );
    // cancel a LEASED job: a request; again: it stands
    let v = cli(
        &srv,
        &[
            "cancel",
            s.leased.as_str(),
            "--reason",
            "stop",
            "--by",
            "ops:bob",
            "--json",
        ],
    )
    .await
    .ok()
    .json();
    assert_eq!(v["outcome"], "requested");
    let again = cli(&srv, &["cancel", s.leased.as_str(), "--reason", "stop!"])
        .await
        .ok();
    assert!(
        again.stdout.contains("already has a cancel request"),
        "{again:?}"
    );

    // is the failure retryable? show says so
    let human = cli(&srv, &["show", s.failed.as_str()]).await.ok().stdout;
    assert!(human.contains("verdict    not retryable"), "{human}");
    let human = cli(&srv, &["show", s.stale.as_str()]).await.ok().stdout;
    assert!(human.contains("verdict    needs a decision"), "{human}");

    // retry the FAILED job (resume, default) and the CANCELLED one from the start
    let v = cli(
        &srv,
        &[
            "retry",
            s.failed.as_str(),
            "--reason",
            "fixed data",
            "--json",
        ],
    )
    .await
    .ok()
    .json();
    assert_eq!((&v["attempt"], &v["mode"]), (&json!(2), &json!("resume")));
    let run = cli(&srv, &["retry", s.cancelled.as_str(), "--from-start"])
        .await
        .ok();
    assert!(
        run.stdout.contains("attempt 2, from the first step"),
        "{run:?}"
    );

    // resolve the STALE job; its lock is released and the operator is recorded
    let run = cli(
        &srv,
        &[
            "resolve",
            s.stale.as_str(),
            "--as",
            "succeeded",
            "--reason",
            "rows verified",
        ],
    )
    .await
    .ok();
    assert!(run.stdout.contains("resolved as SUCCEEDED"), "{run:?}");
    let job = q.job(&s.stale).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Succeeded);
    let res = job.attempts[0].resolution.as_ref().unwrap();
    assert_eq!(
        (res.by.as_str(), res.reason.as_str()),
        ("tester", "rows verified")
    );
    let v = cli(&srv, &["events", "--json", "--limit", "200"])
        .await
        .ok()
        .json();
    let by_of = |op: &str, job: &JobId| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|e| e["op"] == op && e["job"] == job.as_str())
            .map(|e| e["by"].as_str().unwrap().to_owned())
    };
    assert_eq!(by_of("cancel", &s.leased).as_deref(), Some("ops:bob"));
    assert_eq!(by_of("retry", &s.failed).as_deref(), Some("tester"));
    assert_eq!(by_of("resolve", &s.stale).as_deref(), Some("tester"));
    let _ = (s.running, s.running_lease, s.parked, s.succeeded, s.delayed);
}

#[tokio::test]
async fn errors_have_clear_messages_and_exit_codes() {
    let srv = RedisServer::start();
    let s = scene(&srv).await;

    // unknown job: 3
    let missing = "0190aaaa-0000-7000-8000-000000000000";
    let run = cli(&srv, &["show", missing, "--queue", "orders"])
        .await
        .code(3);
    assert!(
        run.stderr
            .contains(&format!("job {missing} not found in queue orders")),
        "{run:?}"
    );
    let run = cli(&srv, &["cancel", missing, "--reason", "x"])
        .await
        .code(3);
    assert!(
        run.stderr.contains("not found in any queue") && run.stderr.contains("orders"),
        "{run:?}"
    );
    cli(&srv, &["retry", missing, "--queue", "orders"])
        .await
        .code(3);
    cli(&srv, &["events", "--job", missing]).await.code(3);

    // refused moves: 4, naming the state and why
    let run = cli(
        &srv,
        &[
            "resolve",
            s.ready.as_str(),
            "--as",
            "failed",
            "--reason",
            "x",
        ],
    )
    .await
    .code(4);
    assert!(
        run.stderr.contains("it is QUEUED")
            && run.stderr.contains("resolve applies only to STALE jobs"),
        "{run:?}"
    );
    let run = cli(&srv, &["cancel", s.stale.as_str(), "--reason", "x"])
        .await
        .code(4);
    assert!(run.stderr.contains("it is STALE"), "{run:?}");
    let run = cli(&srv, &["retry", s.succeeded.as_str()]).await.code(4);
    assert!(
        run.stderr.contains("it is SUCCEEDED") && run.stderr.contains("never rewritten"),
        "{run:?}"
    );
    let run = cli(&srv, &["retry", s.running.as_str()]).await.code(4);
    assert!(run.stderr.contains("it is RUNNING"), "{run:?}");
    let run = cli(&srv, &["cancel", s.failed.as_str(), "--reason", "x"])
        .await
        .code(4);
    assert!(run.stderr.contains("it is FAILED"), "{run:?}");

    // bad arguments: 2
    cli(&srv, &["cancel", s.ready.as_str()]).await.code(2); // no --reason
    cli(&srv, &["jobs", "--state", "sleeping"]).await.code(2);
    cli(
        &srv,
        &[
            "resolve",
            s.stale.as_str(),
            "--as",
            "queued",
            "--reason",
            "x",
        ],
    )
    .await
    .code(2);
    cli(
        &srv,
        &["retry", s.failed.as_str(), "--resume", "--from-start"],
    )
    .await
    .code(2);
    cli(&srv, &["enqueue", "sync", "--queue", "orders"])
        .await
        .code(2); // no input
                  // a pipeline no worker registered is refused, naming what to do
    let run = cli(&srv, &["enqueue", "sync", "--input", "{}"])
        .await
        .code(2);
    assert!(
        run.stderr.contains("not registered") && run.stderr.contains("--unregistered"),
        "{run:?}"
    );
    let run = cli(
        &srv,
        &[
            "enqueue",
            "sync",
            "--unregistered",
            "--queue",
            "orders",
            "--input",
            "{not json",
        ],
    )
    .await
    .code(2);
    assert!(run.stderr.contains("not JSON"), "{run:?}");
    cli(
        &srv,
        &["enqueue", "sync", "--input", "{}", "--delay", "soon"],
    )
    .await
    .code(2);
    cli(
        &srv,
        &[
            "enqueue",
            "sync",
            "--input-template",
            "{}",
            "--from",
            "2026-05-06",
            "--to",
            "2026-05-07",
            "--step",
            "1h",
        ],
    )
    .await
    .code(2); // an unregistered pipeline
    let run = cli(&srv, &["show", "not a job id"]).await.code(2);
    assert!(run.stderr.contains("not a job id"), "{run:?}");
    cli(&srv, &["frobnicate"]).await.code(2);
    cli(
        &srv,
        &[
            "resolve",
            s.stale.as_str(),
            "--as",
            "failed",
            "--reason",
            " ",
        ],
    )
    .await
    .code(2);

    // the job moved nothing on any refusal
    let q = queue(&srv, "orders").await;
    assert_eq!(
        q.job(&s.stale).await.unwrap().unwrap().state,
        JobState::Stale
    );
}

#[tokio::test]
async fn unreachable_redis_exits_5_quickly_without_leaking_the_password() {
    // a port nothing listens on
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("redis://alice:hunter2@127.0.0.1:{port}");
    let started = Instant::now();
    let run = run_cmd(command(&url, &["status"])).await.code(5);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        run.stderr.contains(&format!(
            "cannot reach Redis at redis://alice:****@127.0.0.1:{port}"
        )),
        "{run:?}"
    );
    assert!(!run.stderr.contains("hunter2"), "{run:?}");
    // every command fails the same way
    run_cmd(command(&url, &["jobs"])).await.code(5);
    run_cmd(command(&url, &["cancel", "x1", "--reason", "r"]))
        .await
        .code(5);
    // the environment is read when --redis-url is absent
    let mut cmd = Command::new(BIN);
    cmd.arg("status")
        .env_remove("LEASEHOLD_REDIS_URL")
        .env("REDIS_URL", &url);
    let run = run_cmd(cmd).await.code(5);
    assert!(run.stderr.contains(&port.to_string()), "{run:?}");
}

#[tokio::test]
async fn enqueue_one_job_idempotently() {
    let srv = RedisServer::start();
    let args = [
        "enqueue",
        "sync",
        "--unregistered",
        "--queue",
        "orders",
        "--input",
        r#"{"shop":"a"}"#,
        "--input-key",
        "shop:a:1",
        "--resource",
        "shop:a",
        "--priority",
        "7",
        "--max-attempts",
        "3",
        "--json",
    ];
    let first = cli(&srv, &args).await.ok().json();
    assert_eq!(first["created"], true);
    let second = cli(&srv, &args).await.ok().json();
    assert_eq!(
        (&second["created"], &second["id"]),
        (&json!(false), &first["id"])
    );
    let q = queue(&srv, "orders").await;
    let job = q
        .job(&JobId::parse(first["id"].as_str().unwrap()).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.input, json!({"shop": "a"}));
    assert_eq!((job.priority, job.max_attempts), (7, 3));
    assert_eq!(job.resource.as_deref(), Some("shop:a"));

    // human output; --delay; the queue defaults to the one the pipeline's spec names
    queue(&srv, "nightly-q")
        .await
        .register_pipeline(&leasehold_core::PipelineSpec {
            name: "nightly".into(),
            queue: Some("nightly-q".into()),
            steps: vec!["run".into()],
            max_attempts: 2,
            stale_lock: leasehold_core::StaleLock::Hold,
            resource_template: None,
            input_key_template: None,
            input_schema: None,
            flow: None,
            version: String::new(),
        })
        .await
        .unwrap();
    let run = cli(
        &srv,
        &["enqueue", "nightly", "--input", "{}", "--delay", "5m"],
    )
    .await
    .ok();
    assert!(run.stdout.starts_with("created job "), "{run:?}");
    assert!(run.stdout.contains("in queue nightly-q"), "{run:?}");
    let v = cli(&srv, &["status", "--queue", "nightly-q", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(v[0]["pipelines"][0]["delayed"], 1);
}

#[tokio::test]
async fn backfill_ranges_are_idempotent_and_report_progress() {
    let srv = RedisServer::start();
    let args = [
        "enqueue",
        "orders_sync",
        "--unregistered",
        "--queue",
        "orders",
        "--input-template",
        r#"{"shop":"a","from":"{from}","to":"{to}"}"#,
        "--from",
        "2026-05-06T00:00:00Z",
        "--to",
        "2026-05-07T00:00:00Z",
        "--step",
        "1h",
        "--input-key-template",
        "shop:a:{from}",
        "--resource",
        "shop:a",
    ];
    let first = cli(&srv, &args).await.ok();
    assert!(
        first.stdout.contains("24 windows of orders_sync")
            && first.stdout.contains("24 created, 0 already enqueued"),
        "{first:?}"
    );
    assert!(
        first
            .stderr
            .contains("enqueued 24/24 windows (24 created, 0 existing, 0 succeeded, 0 re-run)"),
        "{first:?}"
    );
    let second = cli(&srv, &args).await.ok();
    assert!(
        second.stdout.contains("0 created, 24 already enqueued"),
        "{second:?}"
    );

    // JSON lists every window; the inputs are filled in
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let v = cli(&srv, &json_args).await.ok().json();
    assert_eq!(
        (&v["windows"], &v["created"], &v["existing"]),
        (&json!(24), &json!(0), &json!(24))
    );
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs[0]["from"], "2026-05-06T00:00:00Z");
    assert_eq!(jobs[23]["to"], "2026-05-07T00:00:00Z");
    assert_eq!(jobs[1]["input_key"], "shop:a:2026-05-06T01:00:00Z");
    let q = queue(&srv, "orders").await;
    let job = q
        .job(&JobId::parse(jobs[1]["id"].as_str().unwrap()).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        job.input,
        json!({"shop": "a", "from": "2026-05-06T01:00:00Z", "to": "2026-05-06T02:00:00Z"})
    );
    assert_eq!(
        job.input_key.as_deref(),
        Some("shop:a:2026-05-06T01:00:00Z")
    );

    // a larger range: chunked, a progress line per chunk, only the new windows created
    let mut wide = args.to_vec();
    assert_eq!(wide[7], "--from");
    wide[8] = "2026-04-06T00:00:00Z"; // 30 more days
    let run = cli(&srv, &wide).await.ok();
    let progress: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("enqueued "))
        .collect();
    assert_eq!(progress.len(), 2, "{run:?}");
    assert!(
        progress[0].starts_with("enqueued 500/744 windows"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("720 created, 24 already enqueued"),
        "{run:?}"
    );
}

#[tokio::test]
async fn sweep_dry_run_changes_nothing_and_sweep_recovers() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    let id = enqueue(&q, job("sync", 1)).await;
    let lease = lease_one(&q, "w1", "sync", Duration::from_millis(100)).await;
    start(&q, &lease).await;
    tokio::time::sleep(Duration::from_millis(250)).await;

    let before = srv.dump("*");
    let v = cli(&srv, &["sweep", "--dry-run", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(
        (&v[0]["queue"], &v[0]["stale"], &v[0]["dry_run"]),
        (&json!("orders"), &json!(1), &json!(true))
    );
    assert_eq!(
        v[0]["moves"][0],
        json!({"job": id.as_str(), "from": "RUNNING", "to": "STALE"})
    );
    assert_eq!(before, srv.dump("*"), "a dry run changed Redis");
    let human = cli(&srv, &["sweep", "--dry-run"]).await.ok().stdout;
    assert!(
        human.contains("dry run: nothing changed") && human.contains("RUNNING -> STALE"),
        "{human}"
    );

    let run = cli(&srv, &["sweep"]).await.ok();
    assert!(
        run.stdout
            .contains("orders: 0 requeued, 0 cancelled, 1 STALE"),
        "{run:?}"
    );
    assert_eq!(q.job(&id).await.unwrap().unwrap().state, JobState::Stale);
}

#[tokio::test]
async fn purge_applies_the_retention_given() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    for n in 0..3 {
        let id = enqueue(&q, job("sync", n)).await;
        q.cancel(&id, "x", "t").await.unwrap();
    }
    let v = cli(&srv, &["purge", "--keep-count", "1", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(
        (&v[0]["queue"], &v[0]["purged"]),
        (&json!("orders"), &json!(2))
    );
    let human = cli(&srv, &["purge", "--keep-count", "1"]).await.ok().stdout;
    assert!(human.contains("orders: purged 0 terminal jobs"), "{human}");
    let v = cli(&srv, &["jobs", "--json"]).await.ok().json();
    assert_eq!(ids(&v).len(), 1);
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

/// `rediss://` with an ACL user and password, verified against a private CA
/// given through `SSL_CERT_FILE`. Needs the `openssl` command to make the
/// certificates; without it the test says so and passes.
#[tokio::test]
async fn tls_with_acl_credentials() {
    let Some(tls) = support::tls::make() else {
        return;
    };
    let (cert, key, ca) = (tls.cert.clone(), tls.key.clone(), tls.ca.clone());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let srv = RedisServer::start_with(&[
        "--tls-port",
        &port,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca,
        "--tls-auth-clients",
        "no",
    ]);
    srv.cmd(&[
        "ACL", "SETUSER", "alice", "on", ">s3cret", "~*", "&*", "+@all",
    ]);
    let q = queue(&srv, "secure").await;
    enqueue(&q, job("sync", 1)).await;

    let url = format!("rediss://alice:s3cret@127.0.0.1:{port}");
    let mut cmd = command(&url, &["status", "--json"]);
    cmd.env("SSL_CERT_FILE", &ca);
    let v = run_cmd(cmd).await.ok().json();
    assert_eq!(v[0]["queue"], "secure");
    assert_eq!(v[0]["counts"]["queued"], 1);

    // a wrong password cannot use Redis: authentication failed (6), the password not shown
    let mut cmd = command(
        &format!("rediss://alice:wrong@127.0.0.1:{port}"),
        &["status"],
    );
    cmd.env("SSL_CERT_FILE", &ca);
    let run = run_cmd(cmd).await.code(6);
    assert!(run.stderr.contains("authentication failed"), "{run:?}");
    assert!(!run.stderr.contains(":wrong@"), "{run:?}");
    // an untrusted server certificate is refused
    let mut cmd = command(&url, &["status"]);
    cmd.env("SSL_CERT_FILE", &cert);
    run_cmd(cmd).await.code(5);
}
