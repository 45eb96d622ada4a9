//! The operator's day, through the binary and the dashboard, on jobs driven
//! with the `Queue` client: per-minute counters written by the scripts
//! (settle counts a batch with one HINCRBY per pipeline and outcome; the sweep
//! counts STALE and samples the waiting jobs) read by `/api/history` and the
//! charts page; finding jobs by input key, resource, input window and id prefix
//! (`leasehold jobs --input-key/--resource/--window/--id-prefix`, `/search`,
//! `/api/search`), with retention removing purged jobs from the index; bulk
//! retry, cancel and resolve with their dry runs (CLI and dashboard confirm
//! page); `/metrics` in Prometheus' naming; and the dashboard session: login,
//! cookie flags, CSRF refusal, acting as the name given at login, logout.

mod support;

use std::time::{Duration, Instant};

use leasehold_core::redis;
use leasehold_core::{
    AttemptError, HolderOp, JobId, JobState, NewJob, Outcome, Queue, QueueConfig, Retention,
};
use leasehold_testkit::RedisServer;
use serde_json::{json, Value};
use support::binary::{command, run_cmd, Run};
use support::dashboard::{http, Dashboard};
use support::jobs::{enqueue, lease_one, queue, start};

const TOKEN: &str = "operator-day-token";
const TTL: Duration = Duration::from_secs(60);

async fn cli(srv: &RedisServer, args: &[&str]) -> Run {
    run_cmd(command(&srv.url(), args)).await
}

fn json_of(run: Run) -> Value {
    run.ok().json()
}

fn raw<T: redis::FromRedisValue>(srv: &RedisServer, args: &[&str]) -> T {
    let mut con = srv.connection();
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(&mut con).expect("raw command")
}

/// A job of `sync` for shop `shop` and the hour starting at `day`T`hour`.
fn windowed(shop: &str, day: &str, hour: u32) -> NewJob {
    let start = format!("{day}T{hour:02}:00:00Z");
    let end = format!("{day}T{:02}:00:00Z", hour + 1);
    NewJob::new(
        "sync",
        &json!({"shop": shop, "window": {"start": start, "end": end}}),
    )
    .unwrap()
    .input_key(format!("sync:{shop}:{start}"))
    .resource(format!("shop:{shop}"))
}

fn failure(kind: &str) -> Outcome {
    Outcome::Failed {
        error: AttemptError {
            kind: kind.into(),
            message: format!("{kind} went wrong"),
            // an outage may pass; bad data does not
            retryable: kind != "validation",
            retries_exhausted: false,
        },
        backoff: Duration::ZERO,
        cleanup_needed: false,
    }
}

/// Leases every QUEUED job of `sync` (up to `n`), starts each, and finishes
/// them with `outcomes` in ONE settle call; returns the ids in lease order.
async fn run_batch(q: &Queue, n: usize, outcomes: &[Outcome]) -> Vec<JobId> {
    let leased = q.lease("w1", &["sync"], n, TTL).await.unwrap();
    assert_eq!(leased.leases.len(), outcomes.len());
    for l in &leased.leases {
        start(q, l).await;
    }
    let ops: Vec<HolderOp<'_>> = leased
        .leases
        .iter()
        .zip(outcomes)
        .map(|(lease, outcome)| HolderOp::Finish {
            lease,
            outcome,
            last_step: None,
        })
        .collect();
    let done = q.settle(&ops, None, TTL).await.unwrap();
    assert!(done.replies.iter().all(|r| r.is_ok()), "{:?}", done.replies);
    leased.leases.iter().map(|l| l.job.clone()).collect()
}

/// One job of `sync` made STALE: leased and started with a short lease, then swept.
async fn make_stale(q: &Queue, job: NewJob) -> JobId {
    let id = enqueue(q, job).await;
    let lease = lease_one(q, "w-dead", "sync", Duration::from_millis(300)).await;
    start(q, &lease).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        q.sweep(100).await.unwrap();
        if q.job(&id).await.unwrap().unwrap().state == JobState::Stale {
            return id;
        }
        assert!(Instant::now() < deadline, "job {id} never went STALE");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn hincrby_calls(srv: &RedisServer) -> u64 {
    let info: String = raw(srv, &["INFO", "commandstats"]);
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_hincrby:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_search_bulk_metrics_and_the_session() {
    let srv = RedisServer::start();
    let q = queue(&srv, "day").await;
    // the sweep samples the pipelines workers published: publish `sync` as one would
    let _: i64 = raw(
        &srv,
        &[
            "HSET",
            "leasehold:{day}:pipelines",
            "sync",
            "{\"name\":\"sync\"}",
        ],
    );

    // ---- 1. counters: 3 succeed and 2 fail in one settle call (one HINCRBY per outcome) ----
    let mut ids = Vec::new();
    for (shop, hour) in [("a", 0), ("b", 0), ("c", 0), ("f", 0), ("g", 0)] {
        ids.push(enqueue(&q, windowed(shop, "2026-05-06", hour)).await);
    }
    let _: String = raw(&srv, &["CONFIG", "RESETSTAT"]);
    let outcomes = [
        Outcome::Succeeded,
        Outcome::Succeeded,
        Outcome::Succeeded,
        failure("io"),
        failure("validation"),
    ];
    let batch = run_batch(&q, 5, &outcomes).await;
    assert_eq!(
        hincrby_calls(&srv),
        2,
        "one HINCRBY per (pipeline, outcome) per settle call"
    );
    // two more FAILED `io` jobs, and one STALE job
    let mut later = Vec::new();
    for shop in ["a", "b"] {
        later.push(enqueue(&q, windowed(shop, "2026-05-06", 1)).await);
    }
    run_batch(&q, 2, &[failure("io"), failure("io")]).await;
    // QUEUED jobs of a backfill range (2026-05-08) and one outside it
    let mut backfill = Vec::new();
    for hour in [0, 1, 2] {
        backfill.push(enqueue(&q, windowed("e", "2026-05-08", hour)).await);
    }
    let outside = enqueue(&q, windowed("e", "2026-05-09", 0)).await;
    // the STALE one goes first (priority); its sweeps sample the 4 waiting jobs
    let stale = make_stale(&q, windowed("d", "2026-05-07", 0).priority(9)).await;
    q.sweep(100).await.unwrap();

    let minute = {
        let t: Vec<String> = raw(&srv, &["TIME"]);
        t[0].parse::<i64>().unwrap() / 60
    };
    let ttl: i64 = raw(&srv, &["TTL", &format!("leasehold:{{day}}:stats:{minute}")]);
    assert!(ttl > 86_400 && ttl <= 90_000, "stats hash TTL {ttl}");

    let dash = Dashboard::start(&srv.url(), &[], Some(TOKEN)).await;
    let c = http();
    let hist: Value = c
        .get(dash.url("/api/history?queue=day&range=hour"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let qh = &hist["queues"][0];
    assert_eq!(qh["queue"], "day");
    assert_eq!(qh["t"].as_array().unwrap().len(), 60);
    let s = &qh["series"]["sync"];
    let sum = |name: &str| -> u64 {
        s[name]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .sum()
    };
    assert_eq!(sum("succeeded"), 3, "{s}");
    assert_eq!(sum("failed"), 4, "{s}");
    assert_eq!(sum("stale"), 1, "{s}");
    let waiting: Vec<u64> = s["waiting"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert_eq!(waiting.last(), Some(&4), "{s}");
    let day: Value = c
        .get(dash.url("/api/history?queue=day&range=day"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(day["queues"][0]["t"].as_array().unwrap().len(), 1440);
    let page = c
        .get(dash.url("/charts?queue=day"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("/static/uplot.min.js")
            && page.contains("data-src=\"/api/history?queue=day&amp;range=1h\""),
        "{page}"
    );
    assert!(page.contains("<td class=\"processed\">3</td>"), "{page}");
    let js = c
        .get(dash.url("/static/uplot.min.js"))
        .send()
        .await
        .unwrap();
    assert!(js.status().is_success());
    assert!(js.text().await.unwrap().contains("uPlot"));

    // ---- 2. search ----
    let found = json_of(
        cli(
            &srv,
            &["--json", "jobs", "--queue", "day", "--input-key", "sync:a:"],
        )
        .await,
    );
    assert_eq!(found["jobs"].as_array().unwrap().len(), 2, "{found}");
    let found = json_of(cli(&srv, &["--json", "jobs", "--resource", "shop:b"]).await);
    let got: Vec<&str> = found["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(got.len(), 2, "{found}");
    assert!(got.contains(&ids[1].as_str()) && got.contains(&later[1].as_str()));
    let found = json_of(
        cli(
            &srv,
            &[
                "--json",
                "jobs",
                "--window",
                "2026-05-08",
                "--state",
                "QUEUED",
            ],
        )
        .await,
    );
    assert_eq!(found["jobs"].as_array().unwrap().len(), 3, "{found}");
    assert_eq!(
        found["jobs"][0]["window"].as_str().unwrap().len(),
        "2026-05-08T00:00:00Z/2026-05-08T01:00:00Z".len()
    );
    let prefix = &stale.as_str()[..13];
    let found = json_of(cli(&srv, &["--json", "jobs", "--id-prefix", prefix]).await);
    assert!(
        found["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["id"] == stale.as_str()),
        "{found}"
    );
    let table = cli(&srv, &["jobs", "--queue", "day", "--resource", "shop:d"]).await;
    assert!(
        table.code == 0
            && table.stdout.contains("WINDOW")
            && table
                .stdout
                .contains("2026-05-07T00:00:00Z/2026-05-07T01:00:00Z"),
        "{table:?}"
    );
    // free text on the dashboard: shop A of one day
    let api: Value = c
        .get(dash.url("/api/search?q=shop:a,%202026-05-06T0"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(api["jobs"].as_array().unwrap().len(), 2, "{api}");
    let html = c
        .get(dash.url("/search?q=shop:c"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        html.contains(ids[2].as_str()) && !html.contains(ids[0].as_str()),
        "{html}"
    );

    // ---- 3. bulk: dry runs, then the actions ----
    let dry = cli(
        &srv,
        &[
            "bulk",
            "retry",
            "--queue",
            "day",
            "--pipeline",
            "sync",
            "--error-kind",
            "io",
            "--dry-run",
        ],
    )
    .await;
    assert!(
        dry.code == 0 && dry.stdout.contains("would touch 3 FAILED jobs"),
        "{dry:?}"
    );
    let all_failed = json_of(
        cli(
            &srv,
            &["--json", "bulk", "retry", "--queue", "day", "--dry-run"],
        )
        .await,
    );
    // the validation failure is permanent: counted apart, left out
    assert_eq!(all_failed["plan"]["jobs"].as_array().unwrap().len(), 3);
    assert_eq!(all_failed["plan"]["permanent"].as_array().unwrap().len(), 1);
    let run = cli(
        &srv,
        &[
            "--by",
            "ops:carol",
            "bulk",
            "retry",
            "--queue",
            "day",
            "--pipeline",
            "sync",
            "--error-kind",
            "io",
            "--reason",
            "disk fixed",
        ],
    )
    .await;
    assert!(
        run.code == 0 && run.stdout.contains("3 of 3 jobs done"),
        "{run:?}"
    );
    assert!(run.stderr.contains("bulk retry: 3/3"), "{run:?}");
    let validation = batch[4].clone();
    assert_eq!(
        q.job(&validation).await.unwrap().unwrap().state,
        JobState::Failed
    );
    let events = leasehold_core::Inspector::new(q.clone())
        .events(None, 100)
        .await
        .unwrap();
    let retries: Vec<_> = events
        .iter()
        .filter(|e| e.op == "retry" && e.by == "ops:carol")
        .collect();
    assert_eq!(retries.len(), 3, "{events:?}");
    assert!(
        retries
            .iter()
            .all(|e| e.reason.contains("disk fixed (bulk retry of 3 jobs)")),
        "{retries:?}"
    );

    // cancel a backfill range from the dashboard: the confirm page shows the count
    let confirm = c
        .get(dash.url("/bulk?action=cancel&queue=day&from=2026-05-08&to=2026-05-09"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(confirm.contains("data-count=\"3\""), "{confirm}");
    let done = c
        .post(dash.url("/bulk"))
        .form(&[
            ("action", "cancel"),
            ("queue", "day"),
            ("from", "2026-05-08"),
            ("to", "2026-05-09"),
            ("reason", "backfill withdrawn"),
            ("token", TOKEN),
            ("operator", "dave"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(done.status(), 200);
    assert!(done.text().await.unwrap().contains("data-done=\"3\""));
    for id in &backfill {
        assert_eq!(q.job(id).await.unwrap().unwrap().state, JobState::Cancelled);
    }
    assert_eq!(
        q.job(&outside).await.unwrap().unwrap().state,
        JobState::Queued
    );
    let cancel_events = leasehold_core::Inspector::new(q.clone())
        .job_events(&backfill[0])
        .await
        .unwrap();
    assert!(
        cancel_events
            .iter()
            .any(|e| e.op == "cancel" && e.by == "dashboard:dave"),
        "{cancel_events:?}"
    );

    // ---- 5. metrics ----
    let metrics = c
        .get(dash.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "# TYPE leasehold_oldest_waiting_age_seconds gauge",
        "# HELP leasehold_stale_jobs ",
        "leasehold_stale_jobs{queue=\"day\"} 1",
        "leasehold_live_workers{queue=\"day\"} 0",
        "leasehold_parked_jobs{queue=\"day\"} 0",
        "leasehold_jobs{queue=\"day\",state=\"STALE\"} 1",
        "leasehold_waiting_jobs{queue=\"day\",pipeline=\"sync\"} 4",
    ] {
        assert!(metrics.contains(line), "no {line:?} in\n{metrics}");
    }
    assert!(!metrics.contains("_total"), "gauges only:\n{metrics}");
    // the example alert rules and Grafana dashboard use only metrics that exist:
    // the dashboard's (above) or the workers' (documented in operations.md)
    let ops = include_str!("../../docs/operations.md");
    for (file, text) in [
        ("docs/alerts.yml", include_str!("../../docs/alerts.yml")),
        (
            "docs/grafana/leasehold.json",
            include_str!("../../docs/grafana/leasehold.json"),
        ),
    ] {
        let mut rest = text;
        while let Some(at) = rest.find("leasehold_") {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[at + name.len()..];
            let base = name.trim_end_matches("_bucket");
            assert!(
                metrics.contains(&format!("# TYPE {base} ")) || ops.contains(&format!("`{base}`")),
                "{file} uses {name}, which neither the dashboard nor a worker exports"
            );
        }
    }

    // ---- 4. the session ----
    let bad = c
        .post(dash.url("/login"))
        .form(&[("token", "nope"), ("operator", "erin")])
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 401);
    assert!(bad.headers().get("set-cookie").is_none());
    let login = c
        .post(dash.url("/login"))
        .form(&[("token", TOKEN), ("operator", "erin")])
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 303);
    let cookie = login.headers()["set-cookie"].to_str().unwrap().to_owned();
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=28800"] {
        assert!(cookie.contains(flag), "{cookie}");
    }
    assert!(
        !cookie.contains("Secure"),
        "plain http on loopback: {cookie}"
    );
    let proxied = c
        .post(dash.url("/login"))
        .header("x-forwarded-proto", "https")
        .form(&[("token", TOKEN), ("operator", "erin")])
        .send()
        .await
        .unwrap();
    assert!(proxied.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .ends_with("; Secure"));
    let session = cookie.split(';').next().unwrap().to_owned();
    let page = c
        .get(dash.url(&format!("/jobs/day/{stale}")))
        .header("cookie", &session)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("logged in as") && page.contains("erin"),
        "{page}"
    );
    assert!(
        !page.contains("name=\"token\""),
        "no token fields once logged in"
    );
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a csrf field")
        .to_owned();
    // a form without the CSRF value is refused and changes nothing
    let refused = c
        .post(dash.url(&format!("/jobs/day/{stale}/resolve")))
        .header("cookie", &session)
        .form(&[("as", "failed"), ("reason", "forged")])
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let forged = c
        .post(dash.url(&format!("/jobs/day/{stale}/resolve")))
        .header("cookie", &session)
        .form(&[("as", "failed"), ("reason", "forged"), ("csrf", "0000")])
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    assert_eq!(q.job(&stale).await.unwrap().unwrap().state, JobState::Stale);
    // the bulk resolve through the session: recorded as the name given at login
    let ok = c
        .post(dash.url("/bulk"))
        .header("cookie", &session)
        .form(&[
            ("action", "resolve"),
            ("queue", "day"),
            ("as", "failed"),
            ("ids", stale.as_str()),
            ("reason", "checked the sink"),
            ("csrf", &csrf),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(
        q.job(&stale).await.unwrap().unwrap().state,
        JobState::Failed
    );
    let ev = leasehold_core::Inspector::new(q.clone())
        .job_events(&stale)
        .await
        .unwrap();
    assert!(
        ev.iter()
            .any(|e| e.op == "resolve" && e.by == "dashboard:erin"),
        "{ev:?}"
    );
    // the API keeps the bearer token, without a session
    let api = c
        .post(dash.url("/api/bulk"))
        .bearer_auth(TOKEN)
        .json(&json!({"action": "retry", "queue": "day", "dry_run": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), 200);
    // the resolved job; the validation failure is permanent, counted apart
    let api = api.json::<Value>().await.unwrap();
    assert_eq!(api["count"], 1, "{api:#}");
    assert_eq!(
        api["plan"]["permanent"].as_array().unwrap().len(),
        1,
        "{api:#}"
    );
    // logout: the cookie is cleared and the session forgotten
    let out = c
        .post(dash.url("/logout"))
        .header("cookie", &session)
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 303);
    assert!(out.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .contains("Max-Age=0"));
    let after = c
        .get(dash.url("/"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !after.contains("logged in as") && after.contains("id=\"login-link\""),
        "{after}"
    );
    dash.stop().await;

    // ---- retention removes purged jobs from the search index ----
    let strict = Queue::connect(
        &srv.url(),
        "day",
        QueueConfig::default().retention(Retention::new(1, Duration::ZERO)),
    )
    .await
    .unwrap();
    strict.purge(1000).await.unwrap();
    let members: Vec<Vec<u8>> = raw(&srv, &["ZRANGE", "leasehold:{day}:search", "0", "-1"]);
    let text: Vec<String> = members
        .iter()
        .map(|m| String::from_utf8_lossy(m).into_owned())
        .collect();
    assert!(
        !text.iter().any(|m| m.ends_with(ids[0].as_str())),
        "purged job still indexed: {text:?}"
    );
    assert!(
        text.iter().any(|m| m.ends_with(outside.as_str())),
        "a live job stays indexed"
    );
}
