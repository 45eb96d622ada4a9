//! Redis Cluster benchmarks against a private local cluster (the test kit's
//! `RedisCluster`).
//!
//! `cargo bench --bench cluster [-- --quick]`. Results: a markdown report on
//! stdout and in `target/bench-cluster.md`. See BENCHMARKS.md.
//!
//! 1. Shards: 1, 2 and 3 masters, one queue per master (its slot on that
//!    master), N pre-enqueued W1 jobs (one no-op step) per queue, one worker in
//!    this process serving every queue at concurrency 50 → jobs/s, and per
//!    shard: Redis CPU per job (`INFO cpu` delta / jobs of that shard) and
//!    Redis commands per job (`INFO commandstats` delta).
//! 2. Failover loss window: 1 master with 1 replica, 8 producers enqueueing
//!    as fast as they can; the master is SIGKILLed mid-stream and the replica
//!    promoted (`CLUSTER FAILOVER TAKEOVER`); acknowledged enqueues missing on
//!    the promoted replica are counted. Then the same with
//!    `Queue::wait_for_replicas(1, 100 ms)` after each enqueue (an enqueue
//!    counts as acknowledged only when WAIT says a replica has it).
//! 3. Promotion: 3 masters with 1 replica each (automatic failover off, so
//!    the moment is the bench's), one queue per master, one worker (in this
//!    process, concurrency 50) serving all three; one master is SIGKILLed,
//!    its replica promoted 2 s later (`CLUSTER FAILOVER TAKEOVER`); jobs/s of
//!    each healthy queue per second (its `done` index read on its master
//!    directly), from 3 s before the kill to 6 s after the promotion.
//!    `BENCH_ONLY=promotion` runs this part alone.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold::pipeline::{BoxFuture, Pipeline, PipelineOptions, StepContext, StepError, StepSpec};
use leasehold::queue::{Client, JobId, NewJob, Queue, QueueConfig};
use leasehold::redis;
use leasehold::worker::Worker;
use leasehold_testkit::RedisCluster;
use serde::{Deserialize, Serialize};

/// The queue of shard `i` in the current run (set before each worker is built).
static QUEUES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

leasehold_testkit::step_enum!(Only, "w1"; Run = "run");

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Input {
    n: u64,
}

/// W1 on shard `I`'s queue: one no-op step.
struct W1<const I: usize>;

const NAMES: [&str; 3] = ["w1_0", "w1_1", "w1_2"];

impl<const I: usize> Pipeline for W1<I> {
    type Input = Input;
    type Step = Only;
    const NAME: &'static str = NAMES[I];
    const STEPS: &'static [StepSpec] = &[StepSpec::new("run")];
    fn options() -> PipelineOptions {
        match QUEUES.lock().ok().and_then(|q| q.get(I).copied()) {
            Some(queue) => PipelineOptions::new().queue(queue),
            None => PipelineOptions::new(),
        }
    }
    fn run_step<'a>(
        &'a self,
        _index: usize,
        _ctx: &'a StepContext,
        input: &'a Input,
        _previous: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, StepError>> {
        Box::pin(async move { Ok(input.n.to_string()) })
    }
}

/// `INFO <section>` of node `i` as fields.
fn info(cluster: &RedisCluster, i: usize, section: &str) -> BTreeMap<String, String> {
    cluster
        .node(i)
        .info(section)
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect()
}

/// Redis CPU seconds (user + sys) of node `i`.
fn cpu(cluster: &RedisCluster, i: usize) -> f64 {
    let i = info(cluster, i, "cpu");
    let f = |k: &str| i.get(k).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    f("used_cpu_user") + f("used_cpu_sys")
}

/// Commands run on node `i` since its last `CONFIG RESETSTAT` (scripts'
/// inner commands included), without the bench's own `INFO` and `CONFIG`.
fn commands(cluster: &RedisCluster, i: usize) -> u64 {
    info(cluster, i, "commandstats")
        .into_iter()
        .filter(|(k, _)| !k.starts_with("cmdstat_info") && !k.starts_with("cmdstat_config"))
        .filter_map(|(_, v)| {
            v.split(',')
                .find_map(|p| p.strip_prefix("calls="))
                .and_then(|n| n.parse::<u64>().ok())
        })
        .sum()
}

/// Script calls on node `i` (`FCALL` + `EVALSHA`).
fn script_calls(cluster: &RedisCluster, i: usize) -> u64 {
    info(cluster, i, "commandstats")
        .into_iter()
        .filter(|(k, _)| k == "cmdstat_fcall" || k == "cmdstat_evalsha")
        .filter_map(|(_, v)| {
            v.split(',')
                .find_map(|p| p.strip_prefix("calls="))
                .and_then(|n| n.parse::<u64>().ok())
        })
        .sum()
}

/// A worker serving the first `shards` W1 pipelines.
async fn worker(url: &str, shards: usize) -> Worker {
    let mut b = Worker::builder(url)
        .concurrency(50)
        .lease_ttl(Duration::from_secs(30));
    b = b.pipeline(W1::<0>);
    if shards > 1 {
        b = b.pipeline(W1::<1>);
    }
    if shards > 2 {
        b = b.pipeline(W1::<2>);
    }
    b.build().await.expect("a worker")
}

/// Enqueues `n` W1 jobs of shard `i`'s pipeline, in batches.
async fn fill(client: &Client, i: usize, n: u64) {
    let name = NAMES[i];
    let queue = QUEUES.lock().unwrap()[i];
    let q = client.queue(queue).unwrap();
    let mut next = 0;
    while next < n {
        let batch: Vec<NewJob> = (next..(next + 500).min(n))
            .map(|k| NewJob::new(name, &Input { n: k }).unwrap())
            .collect();
        next += batch.len() as u64;
        q.enqueue_bulk(batch).await.expect("enqueue");
    }
}

/// The number of terminal jobs of `queue` (its `done` index).
async fn done(q: &Queue) -> u64 {
    let mut conn = q.pool().get().await.expect("a connection");
    redis::cmd("ZCARD")
        .arg(q.keys().done())
        .query_async(&mut conn)
        .await
        .unwrap_or(0)
}

/// One shard-count run: jobs/s and per-shard cost.
fn run_shards(rt: &tokio::runtime::Runtime, shards: usize, n: u64, out: &mut String) {
    let cluster = RedisCluster::start(shards, 0);
    let names: Vec<&'static str> = cluster
        .queue_names("leasehold", "s", shards)
        .into_iter()
        .map(|s| &*Box::leak(s.into_boxed_str()))
        .collect();
    *QUEUES.lock().unwrap() = names.clone();
    let url = cluster.url();
    let owners: Vec<usize> = names
        .iter()
        .map(|q| cluster.owner_of_key(&format!("leasehold:{{{q}}}")))
        .collect();
    let (secs, cpu_per_shard, cmds, scripts) = rt.block_on(async {
        let client = Client::connect(&url, QueueConfig::default()).await.unwrap();
        for i in 0..shards {
            fill(&client, i, n).await;
        }
        for &o in &owners {
            cluster.node(o).cmd(&["CONFIG", "RESETSTAT"]);
        }
        let cpu_before: Vec<f64> = owners.iter().map(|o| cpu(&cluster, *o)).collect();
        let w = worker(&url, shards).await;
        let started = Instant::now();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(w.run_until(async {
            let _ = stopped.await;
        }));
        let queues: Vec<Queue> = names.iter().map(|q| client.queue(q).unwrap()).collect();
        loop {
            let mut all = true;
            for q in &queues {
                if done(q).await < n {
                    all = false;
                }
            }
            if all {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let secs = started.elapsed().as_secs_f64();
        let cpu_after: Vec<f64> = owners.iter().map(|o| cpu(&cluster, *o)).collect();
        let cmds: Vec<u64> = owners.iter().map(|o| commands(&cluster, *o)).collect();
        let scripts: Vec<u64> = owners.iter().map(|o| script_calls(&cluster, *o)).collect();
        let _ = stop.send(());
        let _ = handle.await;
        let cpu: Vec<f64> = cpu_before
            .iter()
            .zip(&cpu_after)
            .map(|(b, a)| a - b)
            .collect();
        (secs, cpu, cmds, scripts)
    });
    let total = n * shards as u64;
    let _ = writeln!(
        out,
        "| {shards} | {} | {:.0} | {} | {} | {} | {} |",
        fmt_u(total),
        total as f64 / secs,
        cpu_per_shard
            .iter()
            .map(|c| format!("{:.1}", c * 1e6 / n as f64))
            .collect::<Vec<_>>()
            .join(" / "),
        cmds.iter()
            .map(|c| format!("{:.2}", *c as f64 / n as f64))
            .collect::<Vec<_>>()
            .join(" / "),
        scripts
            .iter()
            .map(|c| format!("{:.2}", *c as f64 / n as f64))
            .collect::<Vec<_>>()
            .join(" / "),
        cpu_per_shard
            .iter()
            .map(|c| format!("{:.0}%", c / secs * 100.0))
            .collect::<Vec<_>>()
            .join(" / "),
    );
}

fn fmt_u(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One failover trial: acknowledged enqueues, how many the promoted replica
/// lacks, and the acknowledgement rate just before the kill.
/// With `kill`, the master is SIGKILLed before the replica takes over;
/// without, the replica takes over while the old master still serves its
/// clients (a split brain until the old master learns of the new epoch and
/// becomes a replica, dropping what it acknowledged meanwhile).
fn failover_trial(
    rt: &tokio::runtime::Runtime,
    with_wait: bool,
    kill: bool,
) -> (usize, usize, f64) {
    let mut cluster = RedisCluster::start(1, 1);
    let url = cluster.url();
    let acked: Arc<Mutex<Vec<(Instant, JobId)>>> = Arc::new(Mutex::new(Vec::new()));
    let running = Arc::new(AtomicBool::new(true));
    let client = rt
        .block_on(Client::connect(&url, QueueConfig::default()))
        .unwrap();
    let q = client.queue("lossy").unwrap();
    let mut producers = Vec::new();
    for p in 0..8u64 {
        let q = q.clone();
        let acked = acked.clone();
        let running = running.clone();
        producers.push(rt.spawn(async move {
            let mut k = 0u64;
            while running.load(Ordering::Relaxed) {
                k += 1;
                let job = NewJob::new(
                    "w1_0",
                    &Input {
                        n: p * 1_000_000 + k,
                    },
                )
                .unwrap();
                let Ok(e) = q.enqueue(job).await else {
                    continue;
                };
                if with_wait {
                    match q.wait_for_replicas(1, Duration::from_millis(100)).await {
                        Ok(n) if n >= 1 => {}
                        _ => continue,
                    }
                }
                acked.lock().unwrap().push((Instant::now(), e.id));
            }
        }));
    }
    // let the producers run for a while, then kill the master mid-stream
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_millis(1500) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let killed_at = Instant::now();
    if kill {
        cluster.kill(0);
    }
    cluster.take_over(1);
    if !kill {
        // until the old master is a replica of the new one
        let started = Instant::now();
        while !cluster.node(0).info("replication").contains("role:slave") {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "node 0 stays a master"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // and has synced: what it acknowledged alone is gone
        while !cluster
            .node(0)
            .info("replication")
            .contains("master_link_status:up")
        {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "node 0 never syncs"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    running.store(false, Ordering::Relaxed);
    for p in producers {
        let _ = rt.block_on(p);
    }
    let acked = acked.lock().unwrap().clone();
    let before: Vec<&(Instant, JobId)> = acked.iter().filter(|(t, _)| *t < killed_at).collect();
    let window = Duration::from_millis(500);
    let recent = before
        .iter()
        .filter(|(t, _)| killed_at.duration_since(*t) < window)
        .count();
    let rate = recent as f64 / window.as_secs_f64();
    let lost = rt.block_on(async {
        let mut lost = 0;
        for (_, id) in &acked {
            if !matches!(q.job(id).await, Ok(Some(_))) {
                lost += 1;
            }
        }
        lost
    });
    (before.len(), lost, rate)
}

/// The number of members of `key` on node `i`, asked directly (not
/// through the cluster client the worker uses).
fn zcard(cluster: &RedisCluster, i: usize, key: &str) -> u64 {
    match cluster.node(i).cmd(&["ZCARD", key]) {
        redis::Value::Int(n) => n as u64,
        _ => 0,
    }
}

/// The promotion run: per second, jobs/s of each healthy queue while one
/// master is killed and its replica promoted 2 s later. Rows: second (from
/// the kill), what happened in it, jobs/s of each healthy queue.
fn promotion(rt: &tokio::runtime::Runtime, n: u64, out: &mut String) {
    let mut cluster = RedisCluster::start_with(3, 1, |i| {
        let mut args = vec!["--cluster-require-full-coverage".into(), "no".into()];
        if i >= 3 {
            args.extend(["--cluster-replica-no-failover".into(), "yes".into()]);
        }
        args
    });
    let names: Vec<&'static str> = cluster
        .queue_names("leasehold", "p", 3)
        .into_iter()
        .map(|s| &*Box::leak(s.into_boxed_str()))
        .collect();
    *QUEUES.lock().unwrap() = names.clone();
    let url = cluster.url();
    let base = |q: &str| format!("leasehold:{{{q}}}");
    let owners: Vec<usize> = names
        .iter()
        .map(|q| cluster.owner_of_key(&base(q)))
        .collect();
    let victim = owners[0];
    let port = cluster.node(victim).port().expect("a TCP node");
    let replica = (3..cluster.len())
        .find(|&i| {
            cluster
                .node(i)
                .info("replication")
                .contains(&format!("master_port:{port}"))
        })
        .expect("the victim's replica");
    let client = rt
        .block_on(Client::connect(&url, QueueConfig::default()))
        .unwrap();
    rt.block_on(async {
        for i in 0..3 {
            fill(&client, i, n).await;
        }
    });
    let w = rt.block_on(worker(&url, 3));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = rt.spawn(w.run_until(async {
        let _ = stopped.await;
    }));
    let healthy = [1usize, 2];
    let done_key = |q: &str| format!("{}:done", base(q));
    let sample = |cluster: &RedisCluster| -> Vec<u64> {
        healthy
            .iter()
            .map(|&h| zcard(cluster, owners[h], &done_key(names[h])))
            .collect()
    };
    let tick = Duration::from_secs(1);
    let mut rows: Vec<(i64, String, Vec<u64>)> = Vec::new();
    let mut last = sample(&cluster);
    let mut at = Instant::now();
    // (second from the kill, what happens at its start)
    let plan: Vec<(i64, &str)> = (-3..=8)
        .map(|s| {
            (
                s,
                match s {
                    0 => "master killed",
                    2 => "replica promoted",
                    _ => "",
                },
            )
        })
        .collect();
    for (second, event) in plan {
        let mut note = event.to_owned();
        if second == 0 {
            cluster.kill(victim);
        }
        if second == 2 {
            let t = Instant::now();
            cluster.take_over(replica);
            note = format!("{event} (took {} ms)", t.elapsed().as_millis());
        }
        let next = at + tick;
        while Instant::now() < next {
            std::thread::sleep(Duration::from_millis(10));
        }
        let now = sample(&cluster);
        let secs = at.elapsed().as_secs_f64();
        at = Instant::now();
        let rates = now
            .iter()
            .zip(&last)
            .map(|(a, b)| ((a - b) as f64 / secs) as u64)
            .collect();
        rows.push((second, note, rates));
        last = now;
    }
    let _ = stop.send(());
    let _ = rt.block_on(handle);
    let finished: Vec<u64> = sample(&cluster);
    let _ = writeln!(
        out,
        "\n## Promotion: healthy shards' throughput\n\n3 masters with 1 replica each (automatic \
         failover off), one queue per master ({n} W1 jobs each), one worker (concurrency 50) \
         serving the three; master of `{}` SIGKILLed at second 0, its replica promoted at \
         second 2 (CLUSTER FAILOVER TAKEOVER). jobs/s of the two healthy queues per second \
         (done counts read on their masters directly; done at the end: {}).\n",
        names[0],
        finished
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(" / ")
    );
    let _ = writeln!(
        out,
        "| second | event | `{}` jobs/s | `{}` jobs/s |",
        names[1], names[2]
    );
    let _ = writeln!(out, "|---|---|---|---|");
    for (second, note, rates) in rows {
        let _ = writeln!(out, "| {second} | {note} | {} | {} |", rates[0], rates[1]);
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n: u64 = std::env::var("BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 2_000 } else { 10_000 });
    let trials = if quick { 1 } else { 3 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Redis Cluster: shards\n\nW1 (one no-op step), {n} jobs per queue, one queue per master, \
         one worker (concurrency 50) in the bench process serving every queue. Per shard: \
         master 1 / 2 / 3.\n"
    );
    let _ = writeln!(
        out,
        "| masters | jobs | jobs/s | Redis CPU µs/job per shard | Redis commands/job per shard | script calls/job per shard | Redis CPU busy per shard |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    if only == "promotion" {
        out.clear();
        promotion(&rt, n.max(20_000), &mut out);
        println!("{out}");
        return;
    }
    let only_failover = only == "failover";
    for shards in 1..=3 {
        if only_failover {
            break;
        }
        eprintln!("shards: {shards} ...");
        run_shards(&rt, shards, n, &mut out);
    }
    let _ = writeln!(
        out,
        "\n## Failover: acknowledged enqueues lost\n\n1 master + 1 replica, 8 producers; after 1.5 s \
         the master is SIGKILLed and the replica promoted with CLUSTER FAILOVER TAKEOVER \
         (kill), or the replica takes over while the old master still serves (split brain).\n"
    );
    let _ = writeln!(
        out,
        "| mode | trial | acked before the kill | lost | ack rate before the kill (/s) | lost window (ms) |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for (kill, with_wait) in [(true, false), (true, true), (false, false), (false, true)] {
        for t in 1..=trials {
            eprintln!("failover trial {t} (kill: {kill}, WAIT: {with_wait}) ...");
            let (acked, lost, rate) = failover_trial(&rt, with_wait, kill);
            let _ = writeln!(
                out,
                "| {}, {} | {t} | {acked} | {lost} | {rate:.0} | {:.1} |",
                if kill { "kill" } else { "split brain" },
                if with_wait {
                    "enqueue + WAIT 1 100"
                } else {
                    "enqueue"
                },
                if rate > 0.0 {
                    lost as f64 / rate * 1000.0
                } else {
                    0.0
                }
            );
        }
    }
    promotion(&rt, n.max(20_000), &mut out);
    println!("{out}");
    let exe = std::env::current_exe().expect("current_exe");
    if let Some(target) = exe.ancestors().nth(3) {
        let _ = std::fs::write(target.join("bench-cluster.md"), &out);
    }
}
