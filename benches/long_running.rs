//! The Redis cost of long-running jobs against a private redis-server: lease
//! renewal rounds at 10^3, 10^4 and 10^5 running jobs, the per-call cost of a
//! renewal by leases per call, and checkpoints by step-output size.
//!
//! `cargo bench --bench long_running [-- --quick]` (full: ~2 min; `--quick`
//! stops at 10^4 running jobs). Results: a markdown report on stdout and in
//! `target/long-running-results.md`. See docs/benchmarks-history.md, "Long-running costs
//! and the floor".
//!
//! Running jobs are made as a worker makes them: jobs enqueued in bulk, then
//! leased and started in batched `settle` calls (each call starts the jobs the
//! previous one leased and leases the next batch). A renewal round is what the
//! worker's heartbeat sends at each renewal interval: every held lease, in
//! sequential `renew` calls of `RENEW_BATCH` leases. Redis time is the script's
//! `usec` in `INFO commandstats` (FCALL/EVALSHA: the whole run, inner commands
//! included), Redis CPU is the `used_cpu_user + used_cpu_sys` delta around the
//! measured calls (adds reading and parsing the requests), bytes are the
//! `total_net_input_bytes` / `total_net_output_bytes` deltas; each figure is the
//! median over the repetitions.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use leasehold::lease::{HolderOp, Lease, LeaseRequest, Renewal};
use leasehold::queue::{NewJob, Queue, QueueConfig};
use leasehold::redis;
use leasehold_testkit::RedisServer;

const QUEUE: &str = "long";
const PIPELINE: &str = "lr";
/// The worker's default lease TTL (`Worker::lease_ttl`).
const LEASE_TTL: Duration = Duration::from_secs(30);
/// The worker's default renewal interval: a third of the shortest lease TTL.
const RENEW_EVERY: Duration = Duration::from_secs(10);
/// Leases per renew call in the worker's heartbeat (`heartbeat.rs`).
const RENEW_BATCH: usize = 500;
/// Jobs leased (and started) per settle call while making running jobs.
const MAKE_BATCH: usize = 500;
/// Commands this bench sends itself; left out of the per-call counts.
const OWN: &[&str] = &["info", "config|resetstat", "flushall", "memory|usage"];

/// Per-command (calls, usec) since the last CONFIG RESETSTAT, minus this bench's own.
type Stats = BTreeMap<String, (u64, u64)>;

/// What Redis did during one measured stretch.
#[derive(Debug, Clone, Default)]
struct Cost {
    /// Script calls (FCALL + EVALSHA) and their Redis µs.
    script_calls: u64,
    script_us: u64,
    /// Commands run inside the scripts, and their own µs.
    inner: u64,
    inner_us: u64,
    /// Other top-level commands (the pool's PING/UNWATCH on a checkout).
    other_top: u64,
    /// Redis CPU, µs.
    cpu_us: f64,
    /// Bytes Redis read and wrote.
    bytes_in: f64,
    bytes_out: f64,
    /// used_memory delta, bytes.
    mem: f64,
    /// Client wall time, s.
    wall: f64,
    /// Every command Redis ran: (calls, usec) by name.
    stats: Stats,
}

struct Bench {
    con: redis::Connection,
    rt: tokio::runtime::Runtime,
    queue: Queue,
    out: String,
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    if xs.is_empty() {
        f64::NAN
    } else {
        xs[xs.len() / 2]
    }
}

/// The median of each figure of `costs`, figure by figure.
fn median_cost(costs: &[Cost]) -> Cost {
    let m = |f: &dyn Fn(&Cost) -> f64| median(&mut costs.iter().map(f).collect::<Vec<_>>());
    Cost {
        script_calls: m(&|c| c.script_calls as f64) as u64,
        script_us: m(&|c| c.script_us as f64) as u64,
        inner: m(&|c| c.inner as f64) as u64,
        inner_us: m(&|c| c.inner_us as f64) as u64,
        other_top: m(&|c| c.other_top as f64) as u64,
        cpu_us: m(&|c| c.cpu_us),
        bytes_in: m(&|c| c.bytes_in),
        bytes_out: m(&|c| c.bytes_out),
        mem: m(&|c| c.mem),
        wall: m(&|c| c.wall),
        stats: costs.first().map(|c| c.stats.clone()).unwrap_or_default(),
    }
}

/// The commands of `c` but the top-level ones, by calls per `per`, most first.
fn breakdown(c: &Cost, per: f64) -> String {
    let mut v: Vec<(&String, u64)> = c
        .stats
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "fcall" | "evalsha" | "ping" | "unwatch"))
        .map(|(k, v)| (k, v.0))
        .collect();
    v.sort_by_key(|b| std::cmp::Reverse(b.1));
    v.iter()
        .map(|(k, n)| format!("{} {:.2}", k.to_uppercase(), *n as f64 / per))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The Redis µs of each command of `c` but the top-level ones, per `per`, most first.
fn breakdown_us(c: &Cost, per: f64) -> String {
    let mut v: Vec<(&String, u64)> = c
        .stats
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "fcall" | "evalsha" | "ping" | "unwatch"))
        .map(|(k, v)| (k, v.1))
        .collect();
    v.sort_by_key(|b| std::cmp::Reverse(b.1));
    v.iter()
        .take(3)
        .map(|(k, us)| format!("{} {:.2}", k.to_uppercase(), *us as f64 / per))
        .collect::<Vec<_>>()
        .join(", ")
}

fn fmt_int(x: f64) -> String {
    let s = format!("{x:.0}");
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl Bench {
    fn info_text(&mut self, section: &str) -> String {
        redis::cmd("INFO")
            .arg(section)
            .query(&mut self.con)
            .expect("INFO")
    }

    fn info(&mut self, section: &str) -> HashMap<String, String> {
        self.info_text(section)
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
            .collect()
    }

    fn num(map: &HashMap<String, String>, k: &str) -> f64 {
        map.get(k).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
    }

    fn stats(&mut self) -> Stats {
        let mut out = Stats::new();
        for (k, v) in self.info("commandstats") {
            let Some(name) = k.strip_prefix("cmdstat_") else {
                continue;
            };
            if OWN.contains(&name) {
                continue;
            }
            let (mut calls, mut usec) = (0, 0);
            for kv in v.split(',') {
                if let Some(x) = kv.strip_prefix("calls=") {
                    calls = x.parse().unwrap_or(0);
                } else if let Some(x) = kv.strip_prefix("usec=") {
                    usec = x.parse().unwrap_or(0);
                }
            }
            out.insert(name.to_owned(), (calls, usec));
        }
        out
    }

    fn flush(&mut self) {
        let _: () = redis::cmd("FLUSHALL")
            .query(&mut self.con)
            .expect("FLUSHALL");
    }

    /// Runs `f` once and returns what Redis did meanwhile.
    fn measure(&mut self, f: impl FnOnce(&tokio::runtime::Runtime, &Queue)) -> Cost {
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut self.con)
            .expect("RESETSTAT");
        let mem0 = Self::num(&self.info("memory"), "used_memory");
        let cpu = self.info("cpu");
        let cpu0 = Self::num(&cpu, "used_cpu_user") + Self::num(&cpu, "used_cpu_sys");
        let net0_text = self.info_text("stats");
        let net0: HashMap<String, String> = net0_text
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
            .collect();
        let t = Instant::now();
        f(&self.rt, &self.queue);
        let wall = t.elapsed().as_secs_f64();
        let net1 = self.info("stats");
        let cpu = self.info("cpu");
        let cpu1 = Self::num(&cpu, "used_cpu_user") + Self::num(&cpu, "used_cpu_sys");
        let mem1 = Self::num(&self.info("memory"), "used_memory");
        let st = self.stats();
        // the delta counts the request of the second `INFO stats` and the reply
        // to the first one: take them off
        let info_req = b"*2\r\n$4\r\nINFO\r\n$5\r\nstats\r\n".len() as f64;
        let info_reply = (net0_text.len() + net0_text.len().to_string().len() + 5) as f64;
        let script = ["fcall", "evalsha"]
            .iter()
            .filter_map(|c| st.get(*c))
            .fold((0, 0), |(n, us), v| (n + v.0, us + v.1));
        let top = ["ping", "unwatch", "script|load", "function|load"];
        Cost {
            script_calls: script.0,
            script_us: script.1,
            inner: st
                .iter()
                .filter(|(k, _)| !top.contains(&k.as_str()) && *k != "fcall" && *k != "evalsha")
                .map(|(_, v)| v.0)
                .sum(),
            inner_us: st
                .iter()
                .filter(|(k, _)| !top.contains(&k.as_str()) && *k != "fcall" && *k != "evalsha")
                .map(|(_, v)| v.1)
                .sum(),
            other_top: st
                .iter()
                .filter(|(k, _)| top.contains(&k.as_str()))
                .map(|(_, v)| v.0)
                .sum(),
            cpu_us: (cpu1 - cpu0) * 1e6,
            bytes_in: Self::num(&net1, "total_net_input_bytes")
                - Self::num(&net0, "total_net_input_bytes")
                - info_req,
            bytes_out: Self::num(&net1, "total_net_output_bytes")
                - Self::num(&net0, "total_net_output_bytes")
                - info_reply,
            mem: mem1 - mem0,
            wall,
            stats: st,
        }
    }

    /// Makes `n` RUNNING jobs (enqueued in bulk, leased and started in batched
    /// settle calls) and returns their leases.
    fn running(&mut self, n: usize, tag: &str) -> Vec<Lease> {
        let q = self.queue.clone();
        let tag = tag.to_owned();
        self.rt.block_on(async move {
            let mut i = 0;
            while i < n {
                let end = (i + 1000).min(n);
                let jobs = (i..end)
                    .map(|k| NewJob::new(PIPELINE, &serde_json::json!({"i": k, "t": tag})))
                    .collect::<Result<Vec<_>, _>>()
                    .expect("job");
                q.enqueue_bulk(jobs).await.expect("enqueue bulk");
                i = end;
            }
            let mut started: Vec<Lease> = Vec::with_capacity(n);
            let mut leased: Vec<Lease> = Vec::new();
            loop {
                let want = (n - started.len() - leased.len()).min(MAKE_BATCH);
                let ops: Vec<HolderOp<'_>> = leased
                    .iter()
                    .map(|l| HolderOp::Start {
                        lease: l,
                        first_step: "work",
                    })
                    .collect();
                let req = LeaseRequest {
                    worker: "lr-worker",
                    pipelines: &[PIPELINE],
                    n: want,
                    start: 0,
                    first_steps: &[],
                };
                let settled = q
                    .settle(&ops, (want > 0).then_some(req), LEASE_TTL)
                    .await
                    .expect("settle");
                for r in &settled.replies {
                    r.as_ref().expect("start");
                }
                drop(ops);
                started.append(&mut leased);
                leased = settled.leased.leases;
                if leased.is_empty() && want == 0 {
                    break;
                }
                assert!(
                    want == 0 || !leased.is_empty(),
                    "no job left to lease ({} started of {n})",
                    started.len()
                );
            }
            started
        })
    }

    fn write(&mut self, s: &str) {
        print!("{s}");
        self.out.push_str(s);
    }
}

/// One renewal round as the heartbeat sends it: all `leases`, `batch` a call.
fn renew_round(rt: &tokio::runtime::Runtime, q: &Queue, leases: &[Lease], batch: usize) {
    for chunk in leases.chunks(batch) {
        let refs: Vec<&Lease> = chunk.iter().collect();
        let got = rt.block_on(q.renew(&refs)).expect("renew");
        let held = got.iter().filter(|r| matches!(r, Renewal::Held)).count();
        assert_eq!(held, chunk.len(), "every lease renewed");
    }
}

fn section_rounds(b: &mut Bench, counts: &[usize], reps: usize) {
    let mut rows = Vec::new();
    for &n in counts {
        b.flush();
        let t = Instant::now();
        let mem0 = Bench::num(&b.info("memory"), "used_memory");
        let leases = b.running(n, "round");
        let made = t.elapsed().as_secs_f64();
        let mem1 = Bench::num(&b.info("memory"), "used_memory");
        let costs: Vec<Cost> = (0..reps)
            .map(|_| b.measure(|rt, q| renew_round(rt, q, &leases, RENEW_BATCH)))
            .collect();
        let c = median_cost(&costs);
        let per = n as f64;
        rows.push(format!(
            "| {} | {} | {:.1} | {} | {:.2} | {} | {:.2} | {:.2} | {:.1} | {:.1} | {:.1} | {:.2} | {:.1} s, {:.0} B/job |",
            fmt_int(per),
            c.script_calls,
            c.wall * 1e3,
            fmt_int(c.script_us as f64),
            c.script_us as f64 / per,
            breakdown_us(&c, per),
            c.cpu_us / per,
            c.inner as f64 / per,
            (c.script_calls + c.other_top) as f64 / per * 1000.0,
            c.bytes_in / per,
            c.bytes_out / per,
            c.cpu_us / (RENEW_EVERY.as_secs_f64() * 1e6) * 100.0,
            made,
            (mem1 - mem0) / per,
        ));
        eprintln!("  renewal round at {n} running: done");
    }
    let mut s = String::new();
    let _ = writeln!(s, "## Renewal rounds\n");
    let _ = writeln!(
        s,
        "One round = every running job's lease renewed, in sequential `renew` calls of {RENEW_BATCH} leases (the heartbeat's batch), lease TTL {} s; median of {reps} rounds. Redis µs = FCALL `usec` from commandstats; CPU = used_cpu_user+sys delta; inner cmds = commands run inside the script; top-level = FCALL + the pool's PING/UNWATCH; bytes = Redis's network counters. Redis busy % = the share of one Redis core the renewals of that many jobs take at one round per {} s.\n",
        LEASE_TTL.as_secs(),
        RENEW_EVERY.as_secs()
    );
    let _ = writeln!(s, "| running jobs | renew calls | round wall ms | round Redis µs | Redis µs/job | of which commands, µs/job | Redis CPU µs/job | inner cmds/job | top-level cmds per 1,000 jobs | bytes in/job | bytes out/job | Redis busy % | making them (s, memory/job) |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let _ = writeln!(s, "{r}");
    }
    let _ = writeln!(s);
    b.write(&s);
}

fn section_batch(b: &mut Bench, n: usize, reps: usize) {
    b.flush();
    let leases = b.running(n, "batch");
    let mut rows = Vec::new();
    for batch in [1usize, 10, 100, 500, 2000] {
        let take = if batch == 1 { n.min(2000) } else { n };
        let costs: Vec<Cost> = (0..reps)
            .map(|_| b.measure(|rt, q| renew_round(rt, q, &leases[..take], batch)))
            .collect();
        let c = median_cost(&costs);
        let calls = c.script_calls.max(1) as f64;
        rows.push(format!(
            "| {batch} | {} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} | {:.1} | {} |",
            c.script_calls,
            c.script_us as f64 / calls,
            (c.script_us as f64 - c.inner_us as f64) / calls,
            c.script_us as f64 / take as f64,
            c.cpu_us / take as f64,
            c.inner as f64 / take as f64,
            c.bytes_in / take as f64,
            breakdown(&c, take as f64),
        ));
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## Renew cost by leases per call ({} running jobs)\n",
        fmt_int(n as f64)
    );
    let _ = writeln!(s, "The same jobs renewed with 1 (first 2,000 jobs only), 10, 100, 500 (the heartbeat's batch) and 2,000 leases per call; median of {reps} rounds.\n");
    let _ = writeln!(s, "| leases/call | calls | Redis µs/call | of which outside the inner commands | Redis µs/lease | Redis CPU µs/lease | inner cmds/lease | bytes in/lease | inner commands per lease |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let _ = writeln!(s, "{r}");
    }
    let _ = writeln!(s);
    b.write(&s);
    eprintln!("  renew by batch size: done");
}

fn section_checkpoint(b: &mut Bench, reps: usize) {
    let mut rows = Vec::new();
    for size in [0usize, 64, 66, 1_000, 10_000, 100_000] {
        // a JSON string of `size` bytes ("null" for 0)
        let output = if size == 0 {
            "null".to_owned()
        } else {
            format!("\"{}\"", "x".repeat(size - 2))
        };
        let k = if size >= 100_000 { 100 } else { 300 };
        let mut costs = Vec::new();
        for rep in 0..reps {
            b.flush();
            // fresh running jobs: each measured checkpoint is its job's first
            let leases = b.running(k, "ckpt");
            let step = format!("step{rep}");
            let out = output.clone();
            costs.push(b.measure(|rt, q| {
                for l in &leases {
                    let cancel = rt
                        .block_on(q.checkpoint(l, &step, &out, Some("next")))
                        .expect("checkpoint");
                    assert!(cancel.is_none());
                }
            }));
        }
        let c = median_cost(&costs);
        let per = k as f64;
        rows.push(format!(
            "| {} | {k} | {:.3} | {:.1} | {:.1} | {:.1} | {:.2} | {} | {} | {} |",
            fmt_int(output.len() as f64),
            c.wall * 1e3 / per,
            c.script_us as f64 / per,
            c.inner_us as f64 / per,
            c.cpu_us / per,
            c.inner as f64 / per,
            fmt_int(c.bytes_in / per),
            fmt_int(c.mem / per),
            breakdown(&c, per),
        ));
        eprintln!("  checkpoint {size} B: done");
    }
    let mut s = String::new();
    let _ = writeln!(s, "## Checkpoint by step-output size\n");
    let _ = writeln!(s, "One `Queue::checkpoint` per RUNNING job, each its job's first checkpoint: an append (`RPUSH` to the job's outputs list and `HMGET` of the job, one pipeline, no script) that the attempt's end seals into the job hash; median of {reps} repetitions. Memory = used_memory delta per checkpoint while the attempt runs (the outputs list, until the seal moves the output into the job's `out:<step>` field).\n");
    let _ = writeln!(s, "| output bytes | calls | client ms/call | Redis µs/call | of which inner commands µs | Redis CPU µs/call | inner cmds/call | bytes in/call | memory B/call | inner commands per call |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let _ = writeln!(s, "{r}");
    }
    let _ = writeln!(s);
    b.write(&s);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let reps = if quick { 3 } else { 5 };
    let counts: &[usize] = if quick {
        &[1_000, 10_000]
    } else {
        &[1_000, 10_000, 100_000]
    };

    let srv = RedisServer::start_tcp();
    let url = srv.url();
    let con = redis::Client::open(url.as_str())
        .expect("client")
        .get_connection()
        .expect("connect");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let queue = rt.block_on(async {
        let q = Queue::connect(&url, QUEUE, QueueConfig::default())
            .await
            .expect("connect");
        q.load_scripts().await.expect("load scripts");
        q
    });
    let mut b = Bench {
        con,
        rt,
        queue,
        out: String::new(),
    };
    let version = b
        .info("server")
        .get("redis_version")
        .cloned()
        .unwrap_or_default();
    let head = format!(
        "# leasehold long-running costs{}\n\nredis-server {version} (private, TCP 127.0.0.1, no persistence), {} cores. Defaults: lease TTL {} s, renewal every {} s (a third of the TTL), {RENEW_BATCH} leases per renew call.\n\n",
        if quick { " (--quick)" } else { "" },
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        LEASE_TTL.as_secs(),
        RENEW_EVERY.as_secs(),
    );
    b.write(&head);
    eprintln!("[1/3] renewal rounds");
    section_rounds(&mut b, counts, reps);
    eprintln!("[2/3] renew by leases per call");
    section_batch(&mut b, 10_000, reps);
    eprintln!("[3/3] checkpoints");
    section_checkpoint(&mut b, reps);
    let exe = std::env::current_exe().expect("current_exe");
    let target: PathBuf = exe
        .ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let path = target.join("long-running-results.md");
    std::fs::write(&path, &b.out).expect("write results");
    eprintln!("results written to {}", path.display());
    drop(b);
    drop(srv);
}
