//! A schedule whose ticks fail is loud: `schedules` and `status` say FAILING
//! with the count and the last error, the dashboard's `/metrics` has a series
//! for it, the ticks stream records the spell's start once; the next claimed
//! tick (after the pipeline is fixed) clears it and records the recovery.

mod support;

use std::time::Duration;

use leasehold_core::process::{DeclaredPipeline, ProcessStep};
use leasehold_core::{Schedule, Worker};
use leasehold_testkit::{wait_until_async, RedisServer};
use serde_json::{json, Value};
use support::binary::{command, run_cmd};
use support::dashboard::{http, Dashboard};
use tokio::sync::oneshot;

const WAIT: Duration = Duration::from_secs(30);

/// A pipeline whose resource template needs `source`; its schedule gives
/// the input `input`.
fn pipeline(input: Value) -> DeclaredPipeline {
    DeclaredPipeline::new("hourly_load")
        .queue("cron")
        .resource_template("source:{source}")
        .unwrap()
        .schedule(
            Schedule::every("load", Duration::from_secs(1))
                .unwrap()
                .input(input)
                .unwrap(),
        )
        .step("load", ProcessStep::new("true"))
}

async fn serve(url: &str, p: DeclaredPipeline) -> oneshot::Sender<()> {
    let worker = Worker::builder(url)
        .declared(p)
        .unwrap()
        .build()
        .await
        .unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    stop
}

/// The schedule as `leasehold --json schedules` lists it.
async fn listed(url: &str) -> Value {
    let run = run_cmd(command(url, &["--json", "schedules"])).await.ok();
    run.json()[0]["schedule"].clone()
}

async fn tick_outcomes(url: &str) -> Vec<String> {
    let run = run_cmd(command(
        url,
        &["--json", "schedules", "ticks", "load", "--limit", "200"],
    ))
    .await
    .ok();
    run.json()
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["outcome"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_schedule_is_shown_failing_everywhere_and_clears_on_recovery() {
    let srv = RedisServer::start();
    let url = srv.url();
    // the tick's input has no `source`: every tick is refused
    let stop = serve(&url, pipeline(json!({}))).await;
    wait_until_async(WAIT, "the schedule failing twice", || {
        let url = url.clone();
        async move { listed(&url).await["failing"]["failures"].as_u64() >= Some(2) }
    })
    .await;
    let s = listed(&url).await;
    assert!(
        s["failing"]["last_error"]
            .as_str()
            .unwrap()
            .contains("source"),
        "{s:#}"
    );
    let text = run_cmd(command(&url, &["schedules"])).await.ok();
    assert!(text.stdout.contains("FAILING ("), "{text:#?}");
    let status = run_cmd(command(&url, &["status"])).await.ok();
    assert!(
        status.stdout.contains("schedule load FAILING:"),
        "{status:#?}"
    );
    let dash = Dashboard::start(&url, &[], None).await;
    let metrics = http()
        .get(dash.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("leasehold_schedule_failing{queue=\"cron\",schedule=\"load\"}"),
        "{metrics}"
    );
    // the spell's start is recorded once, however many ticks failed
    let outcomes = tick_outcomes(&url).await;
    assert_eq!(
        outcomes.iter().filter(|o| *o == "failing").count(),
        1,
        "{outcomes:?}"
    );
    let _ = stop.send(());

    // fixed: the next claimed tick ends the spell
    let stop = serve(&url, pipeline(json!({"source": "shop-a"}))).await;
    wait_until_async(WAIT, "the schedule recovered", || {
        let url = url.clone();
        async move { listed(&url).await["failing"].is_null() }
    })
    .await;
    assert!(tick_outcomes(&url).await.iter().any(|o| o == "recovered"));
    let metrics = http()
        .get(dash.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !metrics.contains("leasehold_schedule_failing{"),
        "{metrics}"
    );
    let _ = stop.send(());
    dash.stop().await;
}
