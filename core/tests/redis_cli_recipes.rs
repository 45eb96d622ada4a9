//! The `redis-cli` recipes of docs/redis-keys.md ("Answering the operator's
//! questions with redis-cli"), run as written against a private Redis holding
//! real jobs of queue `orders`: one that succeeded on the happy path (leased
//! and started in one call), one retried after a failure, a STALE one, a
//! cancelled one, a child of a group, a running one holding `shop:a` (its
//! outputs read before and after its finish seals them, last), one
//! parked on it, one with an expired lease, a ready one and a delayed one.
//! Each recipe block is marked in the docs with `<!-- recipe: <name> -->`;
//! this test extracts every marked block, runs it with bash (the `helpers`
//! block first, `redis-cli` pointed at the private server, `ID` set to the job
//! the recipe is about) and checks what it prints. Every block of that page
//! that calls `redis-cli` or the `events` helper must be marked.

mod support;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use leasehold_core::NewGroup;
use leasehold_core::Outcome;
use leasehold_core::{AttemptError, JobId, Queue};
use leasehold_testkit::RedisServer;
use support::server::{connect, enqueue, force_expire, job, TTL};

const DOC: &str = include_str!("../../docs/redis-keys.md");
const OPERATIONS: &str = include_str!("../../docs/operations.md");
const MARK: &str = "<!-- recipe: ";

/// Every marked recipe block of `doc`, by name, in the order written.
fn recipes(doc: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line.strip_prefix(MARK).and_then(|r| r.strip_suffix(" -->")) else {
            continue;
        };
        let fence = lines.next().unwrap_or_default();
        assert!(
            fence.starts_with("```"),
            "recipe {name}: no code block after its mark"
        );
        let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        assert!(
            out.insert(name.to_owned(), body.join("\n")).is_none(),
            "recipe {name} is marked twice"
        );
    }
    out
}

/// Every fenced block of `doc` that runs `redis-cli` or the events helper is marked.
fn every_recipe_is_marked(doc: &str) {
    let lines: Vec<&str> = doc.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].starts_with("```") {
            let start = i;
            i += 1;
            let mut body = String::new();
            while i < lines.len() && lines[i] != "```" {
                body.push_str(lines[i]);
                body.push('\n');
                i += 1;
            }
            let runs = body.contains("redis-cli ") || body.contains("events |");
            let marked = start > 0 && lines[start - 1].starts_with(MARK);
            assert!(
                !runs || marked,
                "docs/redis-keys.md line {}: a redis-cli block without a recipe mark:\n{body}",
                start + 1
            );
        }
        i += 1;
    }
}

/// The `redis-cli` commands of the transcripts in `doc` (blocks whose
/// commands start with `$ `, indented lines continuing them), each with
/// whether the transcript shows output after it.
fn transcript_commands(doc: &str) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = Vec::new();
    let mut in_block = false;
    let mut current: Option<(String, bool)> = None;
    for line in doc.lines() {
        if line.starts_with("```") {
            in_block = !in_block;
            out.extend(current.take());
            continue;
        }
        if !in_block {
            continue;
        }
        if let Some(cmd) = line.strip_prefix("$ ") {
            out.extend(current.take());
            current = Some((cmd.to_owned(), false));
        } else if let Some((cmd, shown)) = current.as_mut() {
            if line.starts_with(' ') && !*shown {
                cmd.push('\n');
                cmd.push_str(line);
            } else {
                *shown = true;
            }
        }
    }
    out.retain(|(cmd, _)| cmd.contains("redis-cli ") || cmd.starts_with("events "));
    out
}

/// Runs recipe `body` (after the `helpers` block) with `redis-cli` talking to
/// the server at unix socket `socket` and `ID` set to `id`; returns what it
/// printed. It must exit 0 and write nothing to stderr, and no Redis error may
/// show in its output.
fn run(name: &str, helpers: &str, body: &str, socket: &str, id: &str) -> String {
    let script = format!(
        "set -o pipefail\n\
         redis-cli() {{ command redis-cli -s '{socket}' \"$@\"; }}\n\
         ID={id}\n{helpers}\n{body}\n"
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.is_empty(),
        "recipe {name} failed ({}):\n{script}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    for bad in ["ERR ", "WRONGTYPE", "(error)"] {
        assert!(
            !stdout.contains(bad),
            "recipe {name}: Redis error in\n{stdout}"
        );
    }
    stdout
}

/// Asserts `out` (of recipe `name`) contains each of `wanted`.
#[track_caller]
fn has(name: &str, out: &str, wanted: &[&str]) {
    for w in wanted {
        assert!(out.contains(w), "recipe {name}: no {w:?} in\n{out}");
    }
}

/// Leases and starts (step `fetch`) the one ready job of `orders_sync` for
/// `worker`, as a worker with a free run slot does.
async fn take(q: &Queue, worker: &str) -> leasehold_core::Lease {
    let mut leased = q
        .lease_and_start(worker, &["orders_sync"], &["fetch"], 1, TTL)
        .await
        .expect("lease and start")
        .leases;
    assert_eq!(leased.len(), 1, "one job leased");
    leased.pop().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_redis_cli_recipe_runs_on_real_jobs_and_answers() {
    every_recipe_is_marked(DOC);
    let all = recipes(DOC);
    let srv = RedisServer::start();
    let socket = srv
        .socket_path()
        .expect("a unix socket")
        .to_string_lossy()
        .into_owned();
    let q = connect(&srv, "orders").await;
    const P: &str = "orders_sync";

    // the happy path: leased and started in one call, succeeded
    let happy = enqueue(&q, job(P, 1)).await;
    let l = take(&q, "w-happy").await;
    assert_eq!(l.job, happy);
    q.finish(&l, &Outcome::Succeeded).await.expect("finish");
    // retried: failed with a backoff of an hour, QUEUED again as attempt 2
    let retried = enqueue(&q, job(P, 2).max_attempts(3)).await;
    let l = take(&q, "w-retry").await;
    let failed = Outcome::Failed {
        error: AttemptError {
            kind: "io".into(),
            message: "disk full".into(),
            retryable: true,
            retries_exhausted: false,
        },
        backoff: Duration::from_secs(3600),
        cleanup_needed: false,
    };
    q.finish(&l, &failed).await.expect("finish");
    // STALE: its worker died while it ran; it keeps shop:b locked
    let stale = enqueue(&q, job(P, 3).resource("shop:b")).await;
    take(&q, "w-dead").await;
    force_expire(&srv, &q, &stale);
    q.sweep(10).await.expect("sweep");
    // running, holding shop:a under an input key; another parked behind it
    let running = enqueue(
        &q,
        job(P, 4)
            .resource("shop:a")
            .input_key("orders:a:2026-05-06T00:00:00Z"),
    )
    .await;
    let run_lease = take(&q, "w-run").await;
    let parked = enqueue(&q, job(P, 5).resource("shop:a")).await;
    let none = q
        .lease("w-other", &[P], 1, TTL)
        .await
        .expect("lease")
        .leases;
    assert!(none.is_empty(), "shop:a is held");
    // leased, its lease expired and not swept yet
    let expired = enqueue(&q, job(P, 6)).await;
    let l = q.lease("w-gone", &[P], 1, TTL).await.expect("lease").leases;
    assert_eq!(l[0].job, expired);
    force_expire(&srv, &q, &expired);
    // cancelled while QUEUED
    let cancelled = enqueue(&q, job(P, 7)).await;
    q.cancel(&cancelled, "no longer needed", "ops")
        .await
        .expect("cancel");
    // a child of a group, waiting
    q.create_group(&NewGroup::new("backfill"), "ops")
        .await
        .expect("group");
    let child = enqueue(&q, job(P, 8).group("backfill")).await;
    q.seal_group("backfill", "ops").await.expect("seal");
    // ready, and delayed
    let ready = enqueue(&q, job(P, 9)).await;
    let delayed = enqueue(&q, job(P, 10).delay(Duration::from_secs(3600))).await;

    let helpers = all.get("helpers").expect("the helpers block");
    let mut ran = vec!["helpers"];
    let mut recipe = |name: &'static str, id: &JobId| -> String {
        let body = all
            .get(name)
            .unwrap_or_else(|| panic!("no recipe {name} in docs/redis-keys.md"));
        ran.push(name);
        run(name, helpers, body, &socket, id.as_str())
    };
    let s = |id: &JobId| id.to_string();

    let out = recipe("waiting", &ready);
    has(
        "waiting",
        &out,
        &[
            &s(&ready),
            &s(&child),
            &s(&delayed),
            &s(&retried),
            "shop:a",
            &s(&parked),
        ],
    );
    has("waiting", &out, &["leasehold:{orders}:ready:orders_sync"]);

    let out = recipe("which-worker", &happy);
    has("which-worker", &out, &["SUCCEEDED", "w-happy"]);
    let out = recipe("which-worker-events", &happy);
    has("which-worker-events", &out, &["start attempt 1 by w-happy"]);
    let out = recipe("which-worker-events", &expired);
    has("which-worker-events", &out, &["lease attempt 1 by w-gone"]);
    let out = recipe("which-worker-events", &retried);
    has("which-worker-events", &out, &["start attempt 1 by w-retry"]);

    let out = recipe("running", &happy);
    let line_of = |out: &str, id: &JobId| -> String {
        out.lines()
            .find(|l| l.starts_with(id.as_str()))
            .unwrap_or_else(|| panic!("no line for {id} in\n{out}"))
            .to_owned()
    };
    has(
        "running",
        &line_of(&out, &running),
        &["RUNNING", "w-run", "fetch"],
    );
    has("running", &line_of(&out, &expired), &["LEASED", "w-gone"]);
    assert_eq!(out.lines().count(), 2, "{out}");

    let out = recipe("expired", &happy);
    has("expired", &out, &[&s(&expired)]);
    assert!(!out.contains(running.as_str()), "{out}");

    let out = recipe("twice", &running);
    // the input key's job, the lock holder, its PTTL, the holder's lease deadline
    assert_eq!(out.lines().count(), 4, "{out}");
    assert_eq!(out.lines().next(), Some(running.as_str()), "{out}");
    assert_eq!(out.lines().nth(1), Some(running.as_str()), "{out}");
    assert!(
        out.lines().nth(2).unwrap().parse::<i64>().unwrap() > 0,
        "{out}"
    );
    // nothing is processed twice: the check prints nothing
    let out = recipe("twice-live", &happy);
    assert_eq!(out, "", "twice-live");

    let out = recipe("cancel", &cancelled);
    has("cancel", &out, &["CANCELLED", "no longer needed", "ops"]);
    has(
        "cancel",
        &out,
        &["cancel QUEUED->CANCELLED ops no longer needed"],
    );

    let out = recipe("sweeps", &happy);
    has(
        "sweeps",
        &out,
        &[&format!(
            "{stale} attempt 1 RUNNING->STALE lease expired (worker w-dead)"
        )],
    );
    let out = recipe("recovered", &stale);
    has(
        "recovered",
        &out,
        &[
            "start attempt 1 QUEUED->RUNNING w-dead",
            "sweep attempt 1 RUNNING->STALE w-dead lease expired (worker w-dead)",
            "STALE",
        ],
    );

    let out = recipe("retryable", &retried);
    has(
        "retryable",
        &out,
        &["QUEUED", "\"retryable\": true", "disk full"],
    );

    let out = recipe("stale", &stale);
    has("stale", &out, &[&s(&stale), "w-dead", "shop:b"]);

    // the flow-control keys of other queues: nothing there, and no error
    recipe("flow", &happy);

    // the transcripts of docs/operations.md: each command runs, and prints
    // something where the transcript shows output
    let commands = transcript_commands(OPERATIONS);
    assert!(commands.len() >= 8, "{commands:#?}");
    for (cmd, shown) in commands {
        let id = if cmd.contains(":attempts") {
            &retried
        } else {
            &running
        };
        let out = run("operations.md", helpers, &cmd, &socket, id.as_str());
        assert!(
            !shown || !out.trim().is_empty(),
            "docs/operations.md: `{cmd}` printed nothing (ID {id})"
        );
    }

    // a running job's outputs: the live attempt's appended steps, then, once
    // its finish sealed them, the job hash's (last, as the finish ends the
    // job the transcripts above read)
    let fetched = r#"{"rows":42}"#;
    q.checkpoint(&run_lease, "fetch", fetched, Some("load"))
        .await
        .expect("checkpoint");
    let out = recipe("outputs", &running);
    let token = run_lease.token.as_str();
    let fence = run_lease.fence.to_string();
    let head = format!("{fence}@{token}@");
    has("outputs", &out, &[head.as_str(), "@load@fetch", fetched]);
    assert!(
        !out.lines().any(|l| l.starts_with("fetch@")),
        "outputs: nothing is sealed while the attempt runs:\n{out}"
    );
    q.finish(&run_lease, &Outcome::Succeeded)
        .await
        .expect("finish");
    let out = recipe("outputs", &running);
    assert!(
        !out.contains(token),
        "outputs: the seal deleted the list:\n{out}"
    );
    // the missing list prints an empty line
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines.first(),
        Some(&fetched),
        "outputs: the sealed output:\n{out}"
    );
    assert!(
        lines.get(1).is_some_and(|l| l.starts_with("fetch@+")),
        "outputs: the sealed steps:\n{out}"
    );

    let mut marked: Vec<&str> = all.keys().map(String::as_str).collect();
    marked.sort_unstable();
    ran.sort_unstable();
    ran.dedup();
    assert_eq!(marked, ran, "every marked recipe is run");
}
