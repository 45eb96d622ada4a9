//! Firing precision of schedules: how long after a window's due time its job is
//! enqueued, on Redis's clock, on an otherwise idle system.
//!
//! `cargo bench --bench schedule_precision [-- --quick] [-- --replicas N]`: a
//! private redis-server, N worker replicas (default 2; each its own runtime in
//! this process) serving a pipeline with a 1-second schedule, for 60 ticks (20
//! with `--quick`). The lag of each window is what `schedule_tick.lua` records:
//! Redis `TIME` when the window's job was created minus the window's end.
//! Prints p50, p99 and max in milliseconds.

use std::time::Duration;

use leasehold::pipeline;
use leasehold::pipeline::{StepContext, StepError};
use leasehold::queue::{Queue, QueueConfig};
use leasehold::schedule::Window;
use leasehold::worker::Worker;
use leasehold::{schemars, JsonSchema};
use leasehold_testkit::RedisServer;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct Tick {
    window: Window,
}

struct Precision;

#[pipeline(
    queue = "precision",
    max_attempts = 1,
    schedule(every = "1s", catch_up = "all")
)]
impl Precision {
    #[step]
    async fn run(&self, _ctx: &StepContext, _input: &Tick) -> Result<(), StepError> {
        Ok(())
    }
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let replicas: usize = args
        .iter()
        .position(|a| a == "--replicas")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(2);
    let ticks: usize = if quick { 20 } else { 60 };
    let srv = RedisServer::start();
    let url = srv.url();
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let mut stops = Vec::new();
    let mut threads = Vec::new();
    for _ in 0..replicas {
        let url = url.clone();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        stops.push(stop);
        // each replica on its own runtime, as separate processes would be
        threads.push(std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(async move {
                let worker = Worker::builder(url)
                    .pipeline(Precision)
                    .build()
                    .await
                    .expect("a worker");
                let wait = tokio::task::spawn_blocking(move || {
                    let _ = stopped.recv();
                });
                worker
                    .run_until(async {
                        let _ = wait.await;
                    })
                    .await
                    .expect("the worker runs");
            });
        }));
    }
    let lags: Vec<i64> = rt.block_on(async {
        let q = Queue::connect(&url, "precision", QueueConfig::default())
            .await
            .expect("connect");
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let ticks_now = q.schedule_ticks("precision", 10_000).await.expect("ticks");
            let lags: Vec<i64> = ticks_now
                .iter()
                .filter(|t| t.job.is_some())
                .filter_map(|t| t.lag_ms)
                .collect();
            if lags.len() >= ticks {
                break lags;
            }
        }
    });
    for stop in stops {
        let _ = stop.send(());
    }
    for t in threads {
        let _ = t.join();
    }
    let mut sorted = lags.clone();
    sorted.sort_unstable();
    println!(
        "schedule firing precision: {} windows of a 1 s schedule, {replicas} replicas, lag = Redis TIME at enqueue - due time",
        sorted.len()
    );
    println!(
        "p50 {} ms, p99 {} ms, max {} ms, min {} ms",
        percentile(&sorted, 50.0),
        percentile(&sorted, 99.0),
        sorted.last().copied().unwrap_or(0),
        sorted.first().copied().unwrap_or(0)
    );
}
