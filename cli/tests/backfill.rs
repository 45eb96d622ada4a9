//! `leasehold backfill`: the windows of a scheduled pipeline between two
//! instants, with the schedule's own input and input key, so a second run (or
//! a window the schedule already ran) enqueues nothing new.

mod support;

use std::time::Duration;

use leasehold_core::process::{DeclaredPipeline, ProcessStep};
use leasehold_core::{Schedule, Worker};
use leasehold_testkit::{wait_until_async, RedisServer};
use serde_json::{json, Value};
use support::binary::{command, run_cmd};
use tokio::sync::oneshot;

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_enqueues_the_schedules_windows_once() {
    let srv = RedisServer::start();
    let url = srv.url();
    let pipeline = DeclaredPipeline::new("hourly_sales")
        .queue("sales")
        .schedule(
            Schedule::every("hourly", Duration::from_secs(3600))
                .unwrap()
                .input(json!({"source": "shop-a"}))
                .unwrap(),
        )
        .step("load", ProcessStep::new("true"));
    let worker = Worker::builder(&url)
        .declared(pipeline)
        .unwrap()
        .build()
        .await
        .unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    let args = [
        "--json",
        "backfill",
        "hourly_sales",
        "--from",
        "2026-05-01T00:30:00Z",
        "--to",
        "2026-05-01T04:00:00Z",
    ];
    // the worker registers the schedule as it starts
    wait_until_async(WAIT, "the schedule registered", || {
        let url = url.clone();
        async move { run_cmd(command(&url, &args)).await.code == 0 }
    })
    .await;
    // the first run created the windows 01:00, 02:00, 03:00 (00:30 is no tick)
    let again = run_cmd(command(&url, &args)).await.ok().json();
    assert_eq!(again["windows"], 3, "{again:#}");
    assert_eq!(again["created"], 0, "{again:#}");
    let jobs = again["jobs"].as_array().unwrap();
    assert_eq!(jobs[0]["from"], "2026-05-01T01:00:00Z");
    assert_eq!(jobs[2]["to"], "2026-05-01T04:00:00Z");
    assert_eq!(jobs[0]["input_key"], "hourly:2026-05-01T01:00:00Z");
    // the job's input is the tick's: the static part and the window
    let id = jobs[1]["id"].as_str().unwrap();
    wait_until_async(WAIT, "the window's job ran", || {
        let (url, id) = (url.clone(), id.to_owned());
        async move {
            let run = run_cmd(command(&url, &["--json", "show", &id])).await;
            serde_json::from_str::<Value>(&run.stdout)
                .is_ok_and(|v| v["job"]["state"] == "SUCCEEDED")
        }
    })
    .await;
    let shown = run_cmd(command(&url, &["--json", "show", id]))
        .await
        .ok()
        .json();
    let input = match &shown["job"]["input"] {
        Value::String(text) => serde_json::from_str(text).unwrap(),
        other => other.clone(),
    };
    assert_eq!(
        input,
        json!({"source": "shop-a", "window": {"start": "2026-05-01T02:00:00Z", "end": "2026-05-01T03:00:00Z"}})
    );
    // --rerun runs the succeeded one again; a range with no whole window is refused
    let rerun = run_cmd(command(
        &url,
        &[
            "--json",
            "backfill",
            "hourly_sales",
            "--from",
            "2026-05-01T02:00:00Z",
            "--to",
            "2026-05-01T03:00:00Z",
            "--rerun",
        ],
    ))
    .await
    .ok()
    .json();
    assert_eq!(rerun["rerun"], 1, "{rerun:#}");
    let none = run_cmd(command(
        &url,
        &[
            "backfill",
            "hourly_sales",
            "--from",
            "2026-05-01T02:10:00Z",
            "--to",
            "2026-05-01T02:50:00Z",
        ],
    ))
    .await;
    assert_eq!(none.code, 2, "{none:#?}");
    assert!(none.stderr.contains("no whole window"), "{none:#?}");
    let _ = stop.send(());
    let _ = running.await;
}
