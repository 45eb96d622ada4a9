//! Charts that agree and remember, over the real binary and a private
//! `redis-server`: on a queue with a ready job, a delayed job that is due, a
//! job parked behind a lock and one waiting for a flow-control slot, the
//! charts (`/api/history`: the live reading and the sweep's sample), `status
//! --json` and `/metrics` read at the same moment give the same waiting count
//! and the same oldest waiting job; the sweep folds finished minutes into the
//! hourly and daily roll-ups that the 7-day and 90-day charts read (each
//! minute counted once); the front page's overview table shows every queue;
//! and times are UTC unless the operator chooses local time.

mod support;

use std::time::{Duration, Instant};

use leasehold_core::{
    FlowSpec, JobId, NewJob, Outcome, PauseScope, PipelineSpec, Queue, StaleLock,
};
use leasehold_testkit::RedisServer;
use serde_json::Value;
use support::binary::{command, run_cmd, Run};
use support::dashboard::{http, Dashboard};
use support::jobs::{enqueue, job, lease_one, queue, start};

const TTL: Duration = Duration::from_secs(60);

async fn cli(srv: &RedisServer, args: &[&str]) -> Run {
    run_cmd(command(&srv.url(), args)).await
}

/// `status --json` of queue `orders`.
async fn status(srv: &RedisServer) -> Value {
    let all = cli(srv, &["--json", "status", "--queue", "orders"])
        .await
        .ok()
        .json();
    all[0].clone()
}

/// A job of `load` on resource `wh` under `resource_limit = 2`.
fn limited(i: u32) -> NewJob {
    let flow = FlowSpec {
        resource_limit: Some(2),
        ..FlowSpec::default()
    };
    let (_, gates) = flow.gates("load", Some("wh"), None).unwrap();
    job("load", i).flow(gates)
}

/// The value of the first sample line of `metric` with every label in `labels`.
fn metric(text: &str, metric: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")))
        .find(|l| labels.iter().all(|want| l.contains(want)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {metric} {labels:?} in\n{text}"))
}

fn string(v: leasehold_core::redis::Value) -> Option<String> {
    match v {
        leasehold_core::redis::Value::BulkString(b) => Some(String::from_utf8(b).unwrap()),
        leasehold_core::redis::Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Whether `text` holds a time such as `12:34:56.789Z`.
fn has_utc_stamp(text: &str) -> bool {
    let b = text.as_bytes();
    (12..b.len()).any(|i| {
        b[i] == b'Z'
            && b[i - 4] == b'.'
            && b[i - 7] == b':'
            && b[i - 10] == b':'
            && [1, 2, 3, 5, 6, 8, 9, 11, 12]
                .iter()
                .all(|d| b[i - d].is_ascii_digit())
    })
}

/// Redis `TIME` in ms.
fn redis_now(srv: &RedisServer) -> i64 {
    match srv.cmd(&["TIME"]) {
        leasehold_core::redis::Value::Array(parts) => {
            let mut it = parts.into_iter().map(|p| string(p).unwrap());
            let s: i64 = it.next().unwrap().parse().unwrap();
            let us: i64 = it.next().unwrap().parse().unwrap();
            s * 1000 + us / 1000
        }
        other => panic!("TIME answered {other:?}"),
    }
}

/// The scene: a running job holding `shop:a`, then (oldest first) a job
/// parked behind it, a ready job, a delayed job made due, and a job waiting
/// for a flow-control slot; one job of `sync` SUCCEEDED. Returns the parked job.
async fn scene(srv: &RedisServer, q: &Queue) -> JobId {
    // the pipelines' workers registered them (the sample reads that list)
    for name in ["sync", "report", "load", "audit"] {
        q.register_pipeline(&PipelineSpec {
            name: name.into(),
            queue: Some("orders".into()),
            steps: vec!["fetch".into()],
            max_attempts: 1,
            stale_lock: StaleLock::Hold,
            resource_template: None,
            input_key_template: None,
            input_schema: None,
            flow: None,
            version: String::new(),
        })
        .await
        .unwrap();
    }
    let holder = enqueue(q, job("sync", 1).resource("shop:a")).await;
    let l = lease_one(q, "w1", "sync", TTL).await;
    assert_eq!(l.job, holder);
    start(q, &l).await;
    let parked = enqueue(q, job("sync", 2).resource("shop:a")).await;
    assert!(q
        .lease("w1", &["sync"], 1, TTL)
        .await
        .unwrap()
        .leases
        .is_empty());
    enqueue(q, job("report", 3)).await;
    enqueue(q, job("report", 4).delay(Duration::from_millis(200))).await;
    for i in 5..8 {
        q.enqueue(limited(i)).await.unwrap();
    }
    assert_eq!(
        q.lease("w2", &["load"], 5, TTL).await.unwrap().leases.len(),
        2
    );
    let done = enqueue(q, job("audit", 7)).await;
    let l = lease_one(q, "w3", "audit", TTL).await;
    assert_eq!(l.job, done);
    start(q, &l).await;
    q.finish(&l, &Outcome::Succeeded).await.unwrap();
    // the delayed job is due (and not promoted yet: nothing swept)
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let st = status(srv).await;
        let due: u64 = st["pipelines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["due"].as_u64().unwrap_or(0))
            .sum();
        if due == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the delayed job never came due: {st:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    parked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charts_status_and_metrics_count_every_waiting_job_alike() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    let parked = scene(&srv, &q).await;
    let dash = Dashboard::start(&srv.url(), &[], None).await;
    let c = http();

    // the three read at the same moment (nothing changes the queue meanwhile;
    // only the ages grow, by at most the time the reads took)
    let began = Instant::now();
    let st = status(&srv).await;
    let metrics = c
        .get(dash.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let charts: Value = c
        .get(dash.url("/api/history?queue=orders&range=1h"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let spread_s = began.elapsed().as_secs_f64() + 1.0;

    // ready 1 + delayed (due) 1 + parked 1 + waiting for a slot 1
    assert_eq!(st["counts"]["queued"], 4, "{st:#}");
    assert_eq!(st["parked"], 1);
    assert_eq!(st["flow_waiting"], 1);
    assert_eq!(st["oldest_waiting"]["job"], parked.as_str(), "{st:#}");
    let status_age_s = st["oldest_waiting"]["age_ms"].as_f64().unwrap() / 1000.0;
    let queued = metric(
        &metrics,
        "leasehold_jobs",
        &["queue=\"orders\"", "state=\"QUEUED\""],
    );
    assert_eq!(queued, 4.0, "{metrics}");
    let metrics_age_s = metric(
        &metrics,
        "leasehold_oldest_waiting_age_seconds",
        &["queue=\"orders\""],
    );
    let chart = &charts["queues"][0];
    assert_eq!(chart["queue"], "orders");
    assert_eq!(chart["waiting_now"], 4, "{chart:#}");
    let chart_age_s = chart["oldest_now_s"].as_f64().unwrap();
    for (what, age) in [("/metrics", metrics_age_s), ("the charts", chart_age_s)] {
        assert!(
            (age - status_age_s).abs() <= spread_s,
            "{what} says the oldest waits {age} s, status {status_age_s} s"
        );
    }

    // the sweep's once-a-minute sample counts the same jobs (the parked one,
    // the one waiting for a slot, the due one) as status does right after it
    q.sweep(100).await.unwrap();
    let began = Instant::now();
    let st = status(&srv).await;
    let charts: Value = c
        .get(dash.url("/api/history?queue=orders&range=1h"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let spread_s = began.elapsed().as_secs_f64() + 1.0;
    let chart = &charts["queues"][0];
    let last_sample = |series: &str| {
        chart[series]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|v| !v.is_null())
            .cloned()
            .unwrap_or_else(|| panic!("no sample of {series}: {chart:#}"))
    };
    assert_eq!(st["counts"]["queued"], 4, "{st:#}");
    assert_eq!(last_sample("waiting"), 4, "{chart:#}");
    let sampled_age_s = last_sample("oldest_s").as_f64().unwrap();
    let status_age_s = st["oldest_waiting"]["age_ms"].as_f64().unwrap() / 1000.0;
    assert!(
        sampled_age_s <= status_age_s + 0.001 && status_age_s - sampled_age_s <= spread_s,
        "the sample says the oldest waits {sampled_age_s} s, status {status_age_s} s"
    );
    assert_eq!(chart["waiting_now"], 4);

    // one time convention: UTC unless the operator chooses local
    assert_eq!(charts["zone"], "utc");
    for range in ["1h", "24h", "7d", "90d"] {
        let r = c
            .get(dash.url(&format!("/charts?queue=orders&range={range}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{range}");
        let page = r.text().await.unwrap();
        assert!(page.contains("data-tz=\"utc\""), "{range}");
        assert!(page.contains("Times in UTC"), "{range}");
    }
    let bad = c
        .get(dash.url("/api/history?range=1y"))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    dash.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_rolls_up_hours_and_days_and_the_overview_lists_every_queue() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    scene(&srv, &q).await;
    let other = queue(&srv, "mail").await;
    enqueue(&other, job("send", 1)).await;
    other
        .pause(&PauseScope::Queue, "tester", "smtp down")
        .await
        .unwrap();

    // an earlier minute with counts, not folded yet; the sweep's first sample
    // of this minute folds it (and the rest up to this minute) into its hour
    // and day, once
    let now = redis_now(&srv);
    let minute = now / 60_000;
    let past = minute - 5;
    let keys = q.keys();
    srv.cmd(&[
        "HSET",
        &keys.stats(past),
        "sync:succeeded",
        "3",
        "sync:failed",
        "2",
        "waiting",
        "9",
    ]);
    srv.cmd(&["SET", &keys.stats_rolled(), &(past - 1).to_string()]);
    q.sweep(100).await.unwrap();
    let hour = string(srv.cmd(&["HGET", &keys.stats_hour(past / 60), "sync:succeeded"]));
    let day = string(srv.cmd(&["HGET", &keys.stats_day(past / 1440), "sync:succeeded"]));
    assert_eq!(hour.as_deref(), Some("3"));
    assert_eq!(day.as_deref(), Some("3"));
    let peak = string(srv.cmd(&["HGET", &keys.stats_day(past / 1440), "waiting"]));
    assert_eq!(
        peak.as_deref(),
        Some("9"),
        "a roll-up keeps the largest sample"
    );
    let rolled = string(srv.cmd(&["GET", &keys.stats_rolled()]));
    assert_eq!(rolled, Some((minute - 1).to_string()));
    // a second sample in the same minute folds nothing again
    srv.cmd(&["HDEL", &keys.stats(minute), "sampled"]);
    q.sweep(100).await.unwrap();
    let hour = string(srv.cmd(&["HGET", &keys.stats_hour(past / 60), "sync:succeeded"]));
    assert_eq!(hour.as_deref(), Some("3"));
    // the roll-ups' expiry bounds them (8 and 92 days)
    let ttl = |k: &str| -> i64 { string(srv.cmd(&["TTL", k])).unwrap().parse().unwrap() };
    let hour_ttl = ttl(&keys.stats_hour(past / 60));
    let day_ttl = ttl(&keys.stats_day(past / 1440));
    assert!(
        hour_ttl > 7 * 86_400 && hour_ttl <= 8 * 86_400,
        "{hour_ttl}"
    );
    assert!(day_ttl > 91 * 86_400 && day_ttl <= 92 * 86_400, "{day_ttl}");

    let dash = Dashboard::start(&srv.url(), &[], None).await;
    let c = http();
    // 7 days per hour and 90 days per day: the folded minute plus this
    // minute's job (not folded yet), each counted once
    for (range, step, points) in [("7d", 3600, 168), ("90d", 86_400, 90)] {
        let v: Value = c
            .get(dash.url(&format!("/api/history?queue=orders&range={range}")))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(v["step_s"], step, "{range}");
        let chart = &v["queues"][0];
        assert_eq!(chart["t"].as_array().unwrap().len(), points, "{range}");
        let sum = |p: &str, s: &str| -> u64 {
            chart["series"][p][s]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_u64().unwrap())
                .sum()
        };
        assert_eq!(sum("sync", "succeeded"), 3, "{range}: {chart:#}");
        assert_eq!(sum("sync", "failed"), 2, "{range}");
        assert_eq!(sum("audit", "succeeded"), 1, "{range}");
        let peak = chart["waiting"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_u64)
            .max();
        assert_eq!(peak, Some(9), "{range}");
    }

    // the front page: one row per queue with counts per state, processed and
    // failed today (UTC), the oldest waiting job and whether it is paused
    let page = c
        .get(dash.url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let table_at = page
        .find("id=\"overview-table\"")
        .expect("the overview table");
    let table = &page[table_at..page[table_at..].find("</table>").unwrap() + table_at];
    let row = |queue: &str| -> String {
        let at = table
            .find(&format!("data-queue=\"{queue}\""))
            .unwrap_or_else(|| panic!("no row of {queue}: {table}"));
        table[at..at + table[at..].find("</tr>").unwrap()].to_owned()
    };
    let orders = row("orders");
    assert!(orders.contains("state=QUEUED\">4</a>"), "{orders}");
    assert!(orders.contains("state=RUNNING\">1</a>"), "{orders}");
    assert!(orders.contains("state=LEASED\">2</a>"), "{orders}");
    let today = if past / 1440 == minute / 1440 {
        (4, 2)
    } else {
        (1, 0)
    };
    assert!(
        orders.contains(&format!("processed-today\">{}<", today.0)),
        "{orders}"
    );
    assert!(
        orders.contains(&format!("failed-today\">{}<", today.1)),
        "{orders}"
    );
    assert!(!orders.contains("oldest\">-<"), "{orders}");
    assert!(orders.contains("paused\">no<"), "{orders}");
    let mail = row("mail");
    assert!(mail.contains("state=QUEUED\">1</a>"), "{mail}");
    assert!(mail.contains(">queue<"), "{mail}");
    dash.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn times_are_utc_unless_the_operator_chooses_local() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    let id = enqueue(&q, job("sync", 1)).await;

    // the CLI: UTC, or the host's zone with its offset under --local-time
    let utc = cli(&srv, &["show", id.as_str()]).await.ok();
    assert!(has_utc_stamp(&utc.stdout), "{}", utc.stdout);
    assert!(!utc.stdout.contains("+09:00"), "{}", utc.stdout);
    let mut cmd = command(&srv.url(), &["--local-time", "show", id.as_str()]);
    cmd.env("TZ", "Asia/Tokyo");
    let local = run_cmd(cmd).await.ok();
    assert!(local.stdout.contains("+09:00"), "{}", local.stdout);

    // the dashboard: UTC by default; the switch sets a cookie that shows
    // local time (the host's zone on pages; the charts' axes follow it)
    let dash = Dashboard::start_with_env(&srv.url(), &[], None, &[("TZ", "Asia/Tokyo")]).await;
    let c = http();
    let page = c
        .get(dash.url("/charts?queue=orders"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("data-tz=\"utc\""));
    assert!(!page.contains("+09:00"));
    let r = c
        .get(dash.url("/settings/time?zone=local&back=/charts%3Fqueue%3Dorders"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/charts?queue=orders");
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.starts_with("leasehold_tz=local;"), "{cookie}");
    let page = c
        .get(dash.url("/charts?queue=orders"))
        .header("cookie", "leasehold_tz=local")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("data-tz=\"local\""));
    assert!(page.contains("+09:00"), "a stamp in local time");
    let v: Value = c
        .get(dash.url("/api/history?queue=orders"))
        .header("cookie", "leasehold_tz=local")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["zone"], "local");
    // a redirect only to this dashboard's own paths
    let r = c
        .get(dash.url("/settings/time?zone=utc&back=//evil.example/"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["location"], "/");
    let r = c
        .get(dash.url("/settings/time?zone=mars"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    dash.stop().await;
}
