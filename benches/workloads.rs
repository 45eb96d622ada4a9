//! End-to-end workload benchmarks against a private redis-server.
//!
//! `cargo bench --bench workloads` (full, ~3 min) or `cargo bench --bench workloads -- --quick`
//! (smoke, ~1 min). Results: a markdown report on stdout and in `target/bench-results.md`.
//!
//! The worker under test is `target/release/examples/bench_peer worker` (built by this
//! bench with `cargo build --release --example bench_peer` first): a separate OS process,
//! as in production and as in the peer harness (`shared/peers`). The enqueue rates are
//! measured with `bench_peer enqueue` (the peers' protocol); the pickup, recovery, scale
//! and per-script measurements drive `leasehold::queue::Queue` in this process.
//!
//! Sections:
//! 1. W1 (1 no-op step) and W2 (4 steps, a checkpoint after each): N pre-enqueued jobs,
//!    one worker process at concurrency 10 and 50 → jobs/s (from spawn, and steady = first
//!    completion to last), Redis commands/job, Redis CPU/job, worker CPU/job, memory per
//!    retained terminal job; enqueue/s one by one and bulk.
//!    Then the hand-off (1b): 1, 100 and 1,000 jobs queued on one resource (workload
//!    `one`) → Redis commands and µs per job (flat: a release hands the lock to the next
//!    waiter).
//! 2. Pickup latency enqueue → RUNNING at a fixed arrival rate (1,000 jobs/s for 10 s).
//! 3. Recovery latency after `kill -9` of a worker holding leases (TTL 2 s, another
//!    replica sweeping every 500 ms), and of a holder that died right after leasing.
//! 4. Per-script cost (client round trip, Redis µs, commands run inside the script).
//! 5. Sweep, lease and renew cost with 10^6 jobs waiting and 10^4 running, vs 10^4 waiting.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use leasehold::lease::{HolderOp, Lease, LeaseRequest, Outcome};
use leasehold::queue::{NewJob, Queue, QueueConfig};
use leasehold::redis::{self, Value};
use leasehold_testkit::RedisServer;

const QUEUE: &str = "bench";
const DONE: &str = "leasehold:{bench}:done";
const EVENTS: &str = "leasehold:{bench}:events";
/// Commands this bench sends itself; left out of per-job counts.
const OWN: &[&str] = &[
    "zcount",
    "info",
    "config|resetstat",
    "memory|usage",
    "eval",
    "xrange",
    "hgetall",
    "flushall",
    "script|flush",
];
/// Counts the terminal jobs of queue `bench` that did not succeed.
const FAILED_CHECK: &str = "local n=0 for _,id in ipairs(redis.call('ZRANGE',KEYS[1],0,-1)) do \
if redis.call('HGET','leasehold:{bench}:job:'..id,'state')~='SUCCEEDED' then n=n+1 end end return n";

struct Settings {
    quick: bool,
    n: u64,
    reps: usize,
    pickup_rate: u64,
    pickup_secs: u64,
    recovery_trials: usize,
    scale_waiting: u64,
    script_jobs: usize,
}

struct Bench {
    settings: Settings,
    srv: RedisServer,
    url: String,
    con: redis::Connection,
    peer: PathBuf,
    logs: PathBuf,
    clk_tck: f64,
    rt: tokio::runtime::Runtime,
    out: String,
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn median(xs: &[f64]) -> f64 {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    percentile(&v, 50.0)
}

fn fmt_int(x: f64) -> String {
    if !x.is_finite() {
        return "n/a".into();
    }
    let s = format!("{:.0}", x);
    let (sign, digits) = s.strip_prefix('-').map(|d| ("-", d)).unwrap_or(("", &s));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{sign}{out}")
}

/// Per-command (calls, usec) since the last CONFIG RESETSTAT, minus this bench's own commands.
type Stats = BTreeMap<String, (u64, u64)>;

/// Script calls and their Redis µs: `FCALL` of the library plus `EVALSHA`.
fn script_stat(s: &Stats) -> (u64, u64) {
    ["fcall", "evalsha"]
        .iter()
        .filter_map(|c| s.get(*c))
        .fold((0, 0), |(n, us), v| (n + v.0, us + v.1))
}

fn total_calls(s: &Stats) -> u64 {
    s.values().map(|v| v.0).sum()
}

/// Top-level commands a client sends (the rest of commandstats ran inside Lua scripts).
fn is_top_level(cmd: &str) -> bool {
    matches!(
        cmd,
        "fcall"
            | "evalsha"
            | "eval"
            | "function|load"
            | "blpop"
            | "ping"
            | "unwatch"
            | "script|load"
            | "hello"
            | "select"
            | "client|setinfo"
    )
}

fn top_level_calls(s: &Stats) -> u64 {
    s.iter()
        .filter(|(k, _)| is_top_level(k))
        .map(|(_, v)| v.0)
        .sum()
}

fn top_cmds(s: &Stats, per: f64, k: usize, filter: impl Fn(&str) -> bool) -> String {
    let mut v: Vec<(&String, &(u64, u64))> = s.iter().filter(|(c, _)| filter(c)).collect();
    v.sort_by_key(|b| std::cmp::Reverse(b.1 .0));
    v.iter()
        .take(k)
        .map(|(c, (n, _))| format!("{c} {:.2}", *n as f64 / per))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Bench {
    fn cmd(&mut self, args: &[&str]) -> Value {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        c.query::<Value>(&mut self.con)
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    fn int(&mut self, args: &[&str]) -> i64 {
        match self.cmd(args) {
            Value::Int(n) => n,
            other => panic!("{args:?}: expected an integer, got {other:?}"),
        }
    }

    fn info(&mut self, section: &str) -> HashMap<String, String> {
        let text: String = redis::cmd("INFO")
            .arg(section)
            .query(&mut self.con)
            .expect("INFO");
        text.lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
            .collect()
    }

    fn used_memory(&mut self) -> f64 {
        self.info("memory")["used_memory"].parse().unwrap()
    }

    fn redis_cpu(&mut self) -> f64 {
        let i = self.info("cpu");
        i["used_cpu_user"].parse::<f64>().unwrap() + i["used_cpu_sys"].parse::<f64>().unwrap()
    }

    fn reset_stats(&mut self) {
        self.cmd(&["CONFIG", "RESETSTAT"]);
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
            let mut calls = 0;
            let mut usec = 0;
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

    fn fresh(&mut self) {
        self.cmd(&["FLUSHALL"]);
        self.cmd(&["SCRIPT", "FLUSH"]);
    }

    fn done(&mut self) -> i64 {
        self.int(&["ZCOUNT", DONE, "-inf", "+inf"])
    }

    fn redis_time_ms(&mut self) -> i64 {
        let (s, us): (i64, i64) = redis::cmd("TIME").query(&mut self.con).expect("TIME");
        s * 1000 + us / 1000
    }

    fn proc_cpu(&self, pid: u32) -> f64 {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return f64::NAN;
        };
        let rest = text.rsplit_once(')').map(|x| x.1).unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        // after the comm: state(0) ... utime(11) stime(12)
        let ticks: f64 = f[11].parse::<f64>().unwrap_or(0.0) + f[12].parse::<f64>().unwrap_or(0.0);
        ticks / self.clk_tck
    }

    fn peer_cmd(&self, args: &[&str], env: &[(&str, String)], log: &str) -> Command {
        let mut c = Command::new(&self.peer);
        c.args(args)
            .env("REDIS_URL", &self.url)
            .env_remove("REDIS_PORT");
        for (k, v) in env {
            c.env(k, v);
        }
        let f = std::fs::File::create(self.logs.join(log)).expect("log file");
        c.stdout(Stdio::piped()).stderr(f);
        c
    }

    fn spawn_worker(
        &self,
        workload: &str,
        conc: usize,
        env: &[(&str, String)],
        log: &str,
    ) -> Child {
        let mut c = self.peer_cmd(
            &[
                "worker",
                "--concurrency",
                &conc.to_string(),
                "--workload",
                workload,
            ],
            env,
            log,
        );
        c.stdout(Stdio::null());
        c.spawn().expect("spawn bench_peer worker")
    }

    /// `bench_peer enqueue`: seconds of the enqueue loop.
    fn enqueue_proc(&self, n: u64, mode: &str, workload: &str) -> f64 {
        let out = self
            .peer_cmd(
                &[
                    "enqueue",
                    "--n",
                    &n.to_string(),
                    "--mode",
                    mode,
                    "--workload",
                    workload,
                ],
                &[],
                "enqueue.log",
            )
            .output()
            .expect("run bench_peer enqueue");
        assert!(
            out.status.success(),
            "bench_peer enqueue failed: see {}",
            self.logs.join("enqueue.log").display()
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .rfind(|l| l.starts_with('{'))
            .expect("enqueue printed no JSON");
        let v: serde_json::Value = serde_json::from_str(line).expect("enqueue JSON");
        v["seconds"].as_f64().expect("seconds")
    }

    fn write(&mut self, s: &str) {
        print!("{s}");
        self.out.push_str(s);
    }
}

#[derive(Default, Clone)]
struct Run {
    enq_secs: f64,
    enq_stats: Stats,
    jobs_s_spawn: f64,
    jobs_s_steady: f64,
    startup: f64,
    redis_cpu: f64,
    worker_cpu: f64,
    stats: Stats,
    mem_delta: f64,
    job_mem: f64,
    events_mem: f64,
    done_mem: f64,
    failed: i64,
    secs: f64,
}

fn run_workload(b: &mut Bench, workload: &str, conc: usize, mode: &str, tag: &str) -> Run {
    let n = b.settings.n;
    b.fresh();
    let mem0 = b.used_memory();
    b.reset_stats();
    let enq_secs = b.enqueue_proc(n, mode, workload);
    let enq_stats = b.stats();
    b.reset_stats();
    let cpu0 = b.redis_cpu();
    let t_spawn = Instant::now();
    let mut w = b.spawn_worker(workload, conc, &[], &format!("{tag}.worker.log"));
    let pid = w.id();
    let mut t_first = None;
    let mut c_first = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    let (t_done, cpu_w) = loop {
        let d = b.done();
        let now = Instant::now();
        if t_first.is_none() && d > 0 {
            t_first = Some(now);
            c_first = d;
        }
        if d as u64 >= n {
            break (now, b.proc_cpu(pid));
        }
        if let Ok(Some(status)) = w.try_wait() {
            panic!("worker exited early ({status}) after {d}/{n} jobs; see {tag}.worker.log");
        }
        assert!(now < deadline, "{tag}: only {d}/{n} jobs done after 120 s");
        std::thread::sleep(Duration::from_millis(2));
    };
    let cpu1 = b.redis_cpu();
    let stats = b.stats();
    let mem1 = b.used_memory();
    let _ = w.kill();
    let _ = w.wait();
    let failed = {
        let v: i64 = redis::cmd("EVAL")
            .arg(FAILED_CHECK)
            .arg(1)
            .arg(DONE)
            .query(&mut b.con)
            .expect("failed check");
        v
    };
    let sample: Option<String> = redis::cmd("ZRANGE")
        .arg(DONE)
        .arg(-1)
        .arg(-1)
        .query::<Vec<String>>(&mut b.con)
        .ok()
        .and_then(|v| v.into_iter().next());
    let mem_of = |b: &mut Bench, key: &str| -> f64 {
        redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .arg("SAMPLES")
            .arg(0)
            .query::<Option<i64>>(&mut b.con)
            .ok()
            .flatten()
            .unwrap_or(0) as f64
    };
    let job_mem = sample
        .map(|id| mem_of(b, &format!("leasehold:{{bench}}:job:{id}")))
        .unwrap_or(f64::NAN);
    let events_mem = mem_of(b, EVENTS) / n as f64;
    let done_mem = mem_of(b, DONE) / n as f64;
    let t_first = t_first.unwrap();
    let steady = t_done - t_first;
    Run {
        enq_secs,
        enq_stats,
        jobs_s_spawn: n as f64 / (t_done - t_spawn).as_secs_f64(),
        jobs_s_steady: (n - c_first as u64) as f64 / steady.as_secs_f64(),
        startup: (t_first - t_spawn).as_secs_f64(),
        redis_cpu: cpu1 - cpu0,
        worker_cpu: cpu_w,
        stats,
        mem_delta: (mem1 - mem0) / n as f64,
        job_mem,
        events_mem,
        done_mem,
        failed,
        secs: (t_done - t_spawn).as_secs_f64(),
    }
}

fn section_workloads(b: &mut Bench) -> Vec<(String, Vec<Run>)> {
    let n = b.settings.n;
    let reps = b.settings.reps;
    let plan = [
        ("w1", 10, "single"),
        ("w1", 50, "bulk"),
        ("w2", 10, "bulk"),
        ("w2", 50, "bulk"),
    ];
    let mut all = Vec::new();
    for (w, c, mode) in plan {
        let mut runs = Vec::new();
        for r in 0..reps {
            let tag = format!("{w}c{c}r{r}");
            let run = run_workload(b, w, c, mode, &tag);
            eprintln!(
                "  {tag}: {:.0} jobs/s from spawn, {:.0} steady, enqueue {mode} {:.0}/s, failed {}",
                run.jobs_s_spawn,
                run.jobs_s_steady,
                n as f64 / run.enq_secs,
                run.failed
            );
            runs.push(run);
        }
        all.push((format!("{}|{c}|{mode}", w.to_uppercase()), runs));
    }

    let mut s = String::new();
    let _ = writeln!(s, "## 1. Throughput: N = {n} pre-enqueued jobs, one worker process (`bench_peer worker`), median of {reps}\n");
    let _ = writeln!(s, "jobs/s from spawn = N / (worker spawn → last job SUCCEEDED, polled every 2 ms); steady = from the first completion to the last (the peers' definition). cmds/job: all commands Redis executed per job during processing (INFO commandstats, incl. those run inside Lua), top-level = EVALSHA + BLPOP + the pool's UNWATCH/PING; CPU per job in µs (Redis: INFO cpu; worker: /proc/pid/stat utime+stime since spawn).\n");
    let _ = writeln!(s, "| workload | C | jobs/s from spawn | jobs/s steady | startup s | enqueue/s (mode) | cmds/job (+Lua) | top-level cmds/job | EVALSHA/job | Redis µs CPU/job | Redis EVALSHA µs/job | worker CPU µs/job | Redis CPU % / worker CPU % | failed |");
    let _ = writeln!(
        s,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for (key, runs) in &all {
        let parts: Vec<&str> = key.split('|').collect();
        let nn = n as f64;
        let m = |f: &dyn Fn(&Run) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.2} | {} ({}) | {:.1} | {:.2} | {:.2} | {:.1} | {:.1} | {:.1} | {:.0}% / {:.0}% | {} |",
            parts[0],
            parts[1],
            fmt_int(m(&|r| r.jobs_s_spawn)),
            fmt_int(m(&|r| r.jobs_s_steady)),
            m(&|r| r.startup),
            fmt_int(m(&|r| nn / r.enq_secs)),
            parts[2],
            m(&|r| total_calls(&r.stats) as f64 / nn),
            m(&|r| top_level_calls(&r.stats) as f64 / nn),
            m(&|r| script_stat(&r.stats).0 as f64 / nn),
            m(&|r| r.redis_cpu * 1e6 / nn),
            m(&|r| script_stat(&r.stats).1 as f64 / nn),
            m(&|r| r.worker_cpu * 1e6 / nn),
            m(&|r| 100.0 * r.redis_cpu / r.secs),
            m(&|r| 100.0 * r.worker_cpu / r.secs),
            runs.iter().map(|r| r.failed).sum::<i64>(),
        );
    }
    let _ = writeln!(s, "\nEvery run (jobs/s from spawn / steady):\n");
    for (key, runs) in &all {
        let v: Vec<String> = runs
            .iter()
            .map(|r| format!("{} / {}", fmt_int(r.jobs_s_spawn), fmt_int(r.jobs_s_steady)))
            .collect();
        let _ = writeln!(s, "- {}: {}", key.replace('|', " C="), v.join("; "));
    }
    // enqueue rates
    let single: Vec<f64> = all
        .iter()
        .filter(|(k, _)| k.ends_with("single"))
        .flat_map(|(_, r)| r.iter().map(|r| n as f64 / r.enq_secs))
        .collect();
    let bulk: Vec<f64> = all
        .iter()
        .filter(|(k, _)| k.ends_with("bulk"))
        .flat_map(|(_, r)| r.iter().map(|r| n as f64 / r.enq_secs))
        .collect();
    let enq_single = all
        .iter()
        .find(|(k, _)| k.ends_with("single"))
        .map(|(_, r)| r[0].enq_stats.clone())
        .unwrap_or_default();
    let enq_bulk = all
        .iter()
        .find(|(k, _)| k.ends_with("bulk"))
        .map(|(_, r)| r[0].enq_stats.clone())
        .unwrap_or_default();
    let _ = writeln!(s, "\n**Enqueue** (`bench_peer enqueue`, N = {n}, connect excluded): one by one {} jobs/s (median of {}), bulk (chunks of 1,000) {} jobs/s (median of {}). Commands per job: one by one {:.1} (+Lua; top-level {:.2}: {}), bulk {:.1} (+Lua; top-level {:.4}).\n",
        fmt_int(median(&single)), single.len(), fmt_int(median(&bulk)), bulk.len(),
        total_calls(&enq_single) as f64 / n as f64, top_level_calls(&enq_single) as f64 / n as f64,
        top_cmds(&enq_single, n as f64, 4, is_top_level),
        total_calls(&enq_bulk) as f64 / n as f64, top_level_calls(&enq_bulk) as f64 / n as f64);
    // dominant commands, W1 C=10
    for (key, runs) in all
        .iter()
        .filter(|(k, _)| k.starts_with("W1|10") || k.starts_with("W2|10"))
    {
        let r = &runs[0];
        let _ = writeln!(
            s,
            "Commands per job, {} processing: top-level: {}; inside scripts: {}.\n",
            key.replace('|', " C=")
                .replace("C=single", "")
                .replace("C=bulk", ""),
            top_cmds(&r.stats, n as f64, 6, is_top_level),
            top_cmds(&r.stats, n as f64, 12, |c| !is_top_level(c))
        );
    }
    // memory
    if let Some((_, runs)) = all.iter().find(|(k, _)| k.starts_with("W1|10")) {
        let r = &runs[0];
        let _ = writeln!(s, "**Memory per retained terminal job** (W1, after N jobs SUCCEEDED, default retention keeps them all): used_memory delta / N = {} bytes, of which the job hash {} B (MEMORY USAGE of one job), the `done` index {:.0} B/job, the `events` stream {:.0} B/job (4 events per job; the stream is capped at {} events per queue, so over N jobs its share is at most {} / N events). A job that succeeded keeps its last attempt in its hash: no attempt record.\n",
            fmt_int(r.mem_delta), fmt_int(r.job_mem), r.done_mem, r.events_mem,
            fmt_int(QueueConfig::default().events_max_len as f64),
            fmt_int(QueueConfig::default().events_max_len as f64));
    }
    if let Some((_, runs)) = all.iter().find(|(k, _)| k.starts_with("W2|10")) {
        let r = &runs[0];
        let _ = writeln!(s, "W2 (4 step outputs; its last attempt kept in the job hash): used_memory delta / N = {} bytes, job hash {} B, events {:.0} B/job.\n", fmt_int(r.mem_delta), fmt_int(r.job_mem), r.events_mem);
    }
    b.write(&s);
    all
}

/// A backlog of N jobs on one resource (`bench_peer` workload `one`), run
/// through its lock one at a time by one worker at concurrency 10: Redis
/// commands and µs per job must stay flat as N grows (a release hands the lock
/// to the next waiter only).
fn section_handoff(b: &mut Bench) {
    let keep = b.settings.n;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## 1b. Hand-off: N jobs queued on one resource, one worker (C = 10), median of {}\n",
        b.settings.reps
    );
    let _ = writeln!(s, "Commands and Redis CPU from the worker's spawn to the last job SUCCEEDED (worker start-up included, which dominates N = 1).\n");
    let _ = writeln!(
        s,
        "| N | jobs/s from spawn | cmds/job (+Lua) | Redis µs CPU/job |"
    );
    let _ = writeln!(s, "|---|---|---|---|");
    for n in [1u64, 100, 1_000] {
        b.settings.n = n;
        let mut runs = Vec::new();
        for r in 0..b.settings.reps {
            runs.push(run_workload(b, "one", 10, "bulk", &format!("one{n}r{r}")));
        }
        let nn = n as f64;
        let m = |f: &dyn Fn(&Run) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
        let _ = writeln!(
            s,
            "| {n} | {} | {:.1} | {:.0} |",
            fmt_int(m(&|r| r.jobs_s_spawn)),
            m(&|r| total_calls(&r.stats) as f64 / nn),
            m(&|r| r.redis_cpu * 1e6 / nn),
        );
    }
    b.settings.n = keep;
    s.push('\n');
    b.write(&s);
}

fn section_pickup(b: &mut Bench) {
    let rate = b.settings.pickup_rate;
    let secs = b.settings.pickup_secs;
    let total = rate * secs;
    b.fresh();
    let mut w = b.spawn_worker("lat", 10, &[], "pickup.worker.log");
    // wait for the worker to register (its first heartbeat) and settle into its idle wait
    let t = Instant::now();
    while b.int(&["SCARD", "leasehold:{bench}:workers"]) < 1 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "worker did not register"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    let url = b.url.clone();
    let lag = b.rt.block_on(async move {
        let queue = Queue::connect(&url, QUEUE, QueueConfig::default())
            .await
            .expect("connect");
        queue.load_scripts().await.expect("load");
        let t0 = tokio::time::Instant::now();
        let period = Duration::from_nanos(1_000_000_000 / rate);
        let mut max_lag = Duration::ZERO;
        for k in 0..total {
            let at = t0 + period * k as u32;
            tokio::time::sleep_until(at).await;
            max_lag = max_lag.max(tokio::time::Instant::now() - at);
            let job =
                NewJob::new("lat", &serde_json::json!({"i": k, "t_us": now_us()})).expect("job");
            queue.enqueue(job).await.expect("enqueue");
        }
        max_lag
    });
    let t = Instant::now();
    while (b.done() as u64) < total {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "pickup: jobs not done"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = w.kill();
    let _ = w.wait();
    let ids: Vec<String> = redis::cmd("ZRANGE")
        .arg(DONE)
        .arg(0)
        .arg(-1)
        .query(&mut b.con)
        .expect("ids");
    // a job that succeeded keeps its last attempt (leased_at, started_at) in its
    // hash; without started_at it started when it was leased (finish.lua)
    let mut pipe = redis::pipe();
    for id in &ids {
        pipe.cmd("HMGET")
            .arg(format!("leasehold:{{bench}}:job:{id}"))
            .arg("created_at")
            .arg("out:probe")
            .arg("state")
            .arg("leased_at")
            .arg("started_at");
    }
    type Row = (
        Option<i64>,
        Option<String>,
        Option<String>,
        Option<i64>,
        Option<i64>,
    );
    let rows: Vec<Row> = pipe.query(&mut b.con).expect("rows");
    let mut ms = Vec::new();
    let mut leased_ms = Vec::new();
    let mut us = Vec::new();
    let mut failed = 0;
    for (created, out, state, leased_at, started_at) in rows {
        if state.as_deref() != Some("SUCCEEDED") {
            failed += 1;
            continue;
        }
        let started_at = started_at.or(leased_at);
        if let (Some(c), Some(s)) = (created, started_at) {
            ms.push((s - c) as f64);
        }
        if let (Some(c), Some(l)) = (created, leased_at) {
            leased_ms.push((l - c) as f64);
        }
        if let Some(v) = out.and_then(|o| o.parse::<f64>().ok()) {
            us.push(v / 1000.0);
        }
    }
    for v in [&mut ms, &mut leased_ms, &mut us] {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    }
    let mut s = String::new();
    let _ = writeln!(s, "## 2. Pickup latency at a fixed arrival rate\n");
    let _ = writeln!(s, "{total} jobs enqueued one by one at {rate} jobs/s for {secs} s (schedule lag max {:.1} ms) into an idle worker process (`bench_peer worker --workload lat`, C=10, blocked on its wake-up list). Redis-side: the job's `leased_at`/`started_at` (kept in its hash once it succeeded) minus its `created_at` (Redis TIME, ms resolution). Client-side: the step's start minus the enqueue call's start (wall clock, µs resolution; includes the enqueue round trip, lease, start and the step task's spawn). {failed} jobs did not succeed.\n", lag.as_secs_f64() * 1e3);
    let _ = writeln!(s, "| measure | p50 | p90 | p99 | max |");
    let _ = writeln!(s, "|---|---|---|---|---|");
    for (name, v) in [
        ("enqueue → LEASED (Redis, ms)", &leased_ms),
        ("enqueue → RUNNING (Redis, ms)", &ms),
        ("enqueue call → step running (client, ms)", &us),
    ] {
        let _ = writeln!(
            s,
            "| {name} | {:.2} | {:.2} | {:.2} | {:.2} |",
            percentile(v, 50.0),
            percentile(v, 90.0),
            percentile(v, 99.0),
            v.last().copied().unwrap_or(f64::NAN)
        );
    }
    let _ = writeln!(s);
    b.write(&s);
}

struct SweepEvent {
    ms: i64,
    job: String,
    to: String,
}

fn sweep_events(b: &mut Bench) -> Vec<SweepEvent> {
    let v: Vec<(String, HashMap<String, String>)> = redis::cmd("XRANGE")
        .arg(EVENTS)
        .arg("-")
        .arg("+")
        .query(&mut b.con)
        .expect("XRANGE");
    v.into_iter()
        .filter(|(_, f)| f.get("op").map(String::as_str) == Some("sweep"))
        .map(|(id, f)| SweepEvent {
            ms: id.split('-').next().unwrap().parse().unwrap(),
            job: f.get("job").cloned().unwrap_or_default(),
            to: f.get("to").cloned().unwrap_or_default(),
        })
        .collect()
}

fn section_recovery(b: &mut Bench) {
    let ttl_ms = 2000i64;
    let held = 20usize;
    let ghosts = 10usize;
    let mut rows = Vec::new();
    for trial in 0..b.settings.recovery_trials {
        b.fresh();
        let env_b = [
            ("BENCH_LEASE_TTL_MS", ttl_ms.to_string()),
            ("BENCH_SWEEP_MS", "500".to_owned()),
        ];
        let mut sweeper = b.spawn_worker("w1", 1, &env_b, "recovery.sweeper.log");
        let url = b.url.clone();
        let queue = b.rt.block_on(async move {
            let q = Queue::connect(&url, QUEUE, QueueConfig::default())
                .await
                .expect("connect");
            let jobs = (0..held + ghosts)
                .map(|i| NewJob::new("hold", &serde_json::json!({"i": i})).unwrap())
                .collect();
            q.enqueue_bulk(jobs).await.expect("enqueue");
            q
        });
        let env_a = [
            ("BENCH_LEASE_TTL_MS", ttl_ms.to_string()),
            ("BENCH_SWEEP_MS", "3600000".to_owned()),
            ("BENCH_HOLD_MS", "600000".to_owned()),
        ];
        let mut victim = b.spawn_worker("hold", held, &env_a, "recovery.victim.log");
        let t = Instant::now();
        loop {
            let ids: Vec<String> = redis::cmd("ZRANGE")
                .arg("leasehold:{bench}:leases")
                .arg(0)
                .arg(-1)
                .query(&mut b.con)
                .unwrap();
            let running = ids
                .iter()
                .filter(|id| {
                    redis::cmd("HGET")
                        .arg(format!("leasehold:{{bench}}:job:{id}"))
                        .arg("state")
                        .query::<Option<String>>(&mut b.con)
                        .ok()
                        .flatten()
                        .as_deref()
                        == Some("RUNNING")
                })
                .count();
            if running == held {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "victim did not start its jobs"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        // vary the kill's phase relative to the victim's renewals
        std::thread::sleep(Duration::from_millis(200 + 230 * trial as u64));
        let t_kill = b.redis_time_ms();
        victim.kill().expect("kill -9");
        let _ = victim.wait();
        // each held job's lease deadline: its score in the lease index (the
        // job hash keeps none), read once the victim is dead: a renewal sent
        // just before the kill may still have moved it
        let leased: Vec<(String, f64)> = redis::cmd("ZRANGE")
            .arg("leasehold:{bench}:leases")
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(&mut b.con)
            .unwrap();
        let deadlines: HashMap<String, i64> = leased
            .into_iter()
            .map(|(id, deadline)| (id, deadline as i64))
            .collect();
        // a holder that dies right after leasing (LEASED, never started)
        let t_ghost = b.redis_time_ms();
        let ghost: Vec<Lease> = b.rt.block_on(async {
            queue
                .lease(
                    "ghost-holder",
                    &["hold"],
                    ghosts,
                    Duration::from_millis(ttl_ms as u64),
                )
                .await
                .expect("lease")
                .leases
        });
        assert_eq!(ghost.len(), ghosts);
        let t = Instant::now();
        let evs = loop {
            let evs = sweep_events(b);
            if evs.len() >= held + ghosts || t.elapsed() > Duration::from_secs(15) {
                break evs;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let _ = sweeper.kill();
        let _ = sweeper.wait();
        let mut stale = Vec::new();
        let mut stale_late = Vec::new();
        let mut requeued = Vec::new();
        for e in &evs {
            if e.to == "STALE" {
                stale.push((e.ms - t_kill) as f64);
                stale_late.push((e.ms - deadlines.get(&e.job).copied().unwrap_or(e.ms)) as f64);
            } else if e.to == "QUEUED" {
                requeued.push((e.ms - t_ghost) as f64);
            }
        }
        let mx = |v: &[f64]| v.iter().copied().fold(f64::NAN, f64::max);
        let mn = |v: &[f64]| v.iter().copied().fold(f64::NAN, f64::min);
        rows.push(format!(
            "| {} | {}/{held} | {:.0} – {:.0} | {:.0} – {:.0} | {}/{ghosts} | {:.0} – {:.0} | {:.0} – {:.0} |",
            trial + 1,
            stale.len(),
            mn(&stale),
            mx(&stale),
            mn(&stale_late),
            mx(&stale_late),
            requeued.len(),
            mn(&requeued),
            mx(&requeued),
            mn(&requeued) - ttl_ms as f64,
            mx(&requeued) - ttl_ms as f64,
        ));
    }
    let mut s = String::new();
    let _ = writeln!(s, "## 3. Recovery latency after kill -9\n");
    let _ = writeln!(s, "A worker process (`hold` workload, C={held}, lease TTL {ttl_ms} ms, renewing every TTL/3) holds {held} RUNNING jobs and is killed with SIGKILL; another replica (`bench_peer worker`, lease TTL {ttl_ms} ms, `sweep_interval` 500 ms) sweeps. Right after the kill a holder leases {ghosts} more jobs (TTL {ttl_ms} ms) and dies without starting them. Times from the `sweep` events' stream ids (Redis clock, ms). Expected: RUNNING → STALE within (time left on the lease) + one sweep period; LEASED → QUEUED within TTL + one sweep period.\n");
    let _ = writeln!(s, "| trial | → STALE | kill → STALE ms (min – max) | past the lease deadline ms | → QUEUED | death → QUEUED ms | past the lease deadline ms |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|");
    for r in rows {
        let _ = writeln!(s, "{r}");
    }
    let _ = writeln!(s);
    b.write(&s);
}

/// Runs `calls` invocations of `f`, returning (client ms per call, Redis µs per script call, stats).
fn measure<F>(b: &mut Bench, calls: usize, mut f: F) -> (f64, f64, Stats)
where
    F: FnMut(&tokio::runtime::Runtime, usize),
{
    b.reset_stats();
    let t = Instant::now();
    for i in 0..calls {
        f(&b.rt, i);
    }
    let el = t.elapsed().as_secs_f64();
    let st = b.stats();
    let ev = script_stat(&st).1 as f64;
    (el * 1e3 / calls as f64, ev / calls as f64, st)
}

fn script_row(name: &str, calls: usize, per_unit: f64, m: &(f64, f64, Stats)) -> String {
    let (ms, us, st) = m;
    let inner = st
        .iter()
        .filter(|(k, _)| !is_top_level(k))
        .map(|(_, v)| v.0)
        .sum::<u64>() as f64
        / calls as f64;
    let pool = st.get("ping").map_or(0, |v| v.0) as f64 / calls as f64;
    format!(
        "| {name} | {calls} | {:.3} | {:.1} | {:.1} | {:.1} | {:.2} | {} |",
        ms,
        us,
        us / per_unit,
        inner,
        pool,
        top_cmds(st, calls as f64, 7, |c| !is_top_level(c))
    )
}

fn section_scripts(b: &mut Bench) -> f64 {
    let n = b.settings.script_jobs;
    b.fresh();
    let url = b.url.clone();
    let queue = b.rt.block_on(async move {
        let q = Queue::connect(&url, QUEUE, QueueConfig::default())
            .await
            .expect("connect");
        q.load_scripts().await.expect("load");
        q
    });
    let mut rows = Vec::new();
    let q = queue.clone();
    let m = measure(b, n, |rt, i| {
        rt.block_on(q.enqueue(NewJob::new("p", &serde_json::json!({"i": i})).unwrap()))
            .expect("enqueue");
    });
    let enqueue_us = m.1;
    rows.push(script_row("enqueue (1 job)", n, 1.0, &m));
    let q = queue.clone();
    let m = measure(b, 2, |rt, _| {
        let jobs = (0..1000)
            .map(|i| NewJob::new("p", &serde_json::json!({"i": i})).unwrap())
            .collect();
        rt.block_on(q.enqueue_bulk(jobs)).expect("enqueue bulk");
    });
    rows.push(script_row(
        "enqueue bulk (1,000 jobs; µs/job in col 5)",
        2,
        1000.0,
        &m,
    ));
    let mut leases: Vec<Lease> = Vec::new();
    let q = queue.clone();
    let m = measure(b, n / 10, |rt, _| {
        leases.extend(
            rt.block_on(q.lease("bench-w", &["p"], 10, Duration::from_secs(3600)))
                .expect("lease")
                .leases,
        );
    });
    let lease_us = m.1 / 10.0;
    rows.push(script_row("lease n=10 (µs/job in col 5)", n / 10, 10.0, &m));
    let q = queue.clone();
    let ls = leases.clone();
    let m = measure(b, n, |rt, i| {
        let _ = rt.block_on(q.start(&ls[i], "noop")).expect("start");
    });
    let start_us = m.1;
    rows.push(script_row("start", n, 1.0, &m));
    let q = queue.clone();
    let batch: Vec<&Lease> = leases.iter().take(100).collect();
    let m = measure(b, 20, |rt, _| {
        rt.block_on(q.renew(&batch)).expect("renew");
    });
    rows.push(script_row(
        "renew 100 leases (µs/lease in col 5)",
        20,
        100.0,
        &m,
    ));
    let q = queue.clone();
    let ls = leases.clone();
    let m = measure(b, n, |rt, i| {
        rt.block_on(q.checkpoint(&ls[i], "noop", "null", None))
            .expect("checkpoint");
    });
    let ckpt_us = m.1;
    rows.push(script_row("checkpoint", n, 1.0, &m));
    let q = queue.clone();
    let ls = leases.clone();
    let m = measure(b, n, |rt, i| {
        rt.block_on(q.finish(&ls[i], &Outcome::Succeeded))
            .expect("finish");
    });
    let finish_us = m.1;
    rows.push(script_row("finish (SUCCEEDED)", n, 1.0, &m));
    let q = queue.clone();
    let m = measure(b, 50, |rt, _| {
        rt.block_on(q.sweep(500)).expect("sweep");
    });
    rows.push(script_row("sweep (nothing expired)", 50, 1.0, &m));

    // The worker's batched path: one settle call carrying the starts of the jobs
    // leased by the previous call, the finishes (with their last checkpoint) of the
    // jobs started by the previous call, and the next lease of 10.
    let batch = 10usize;
    let q = queue.clone();
    b.rt.block_on(async {
        let jobs = (0..n + 2 * batch)
            .map(|i| NewJob::new("p", &serde_json::json!({"i": i})).unwrap())
            .collect();
        q.enqueue_bulk(jobs).await.expect("enqueue");
    });
    let ttl = Duration::from_secs(3600);
    let mut leased: Vec<Lease> =
        b.rt.block_on(q.lease("bench-w", &["p"], batch, ttl))
            .expect("lease")
            .leases;
    let mut running: Vec<Lease> = Vec::new();
    let mut refused = 0usize;
    let m = measure(b, n / batch, |rt, _| {
        let outcome = Outcome::Succeeded;
        let next = {
            let mut ops = Vec::new();
            for l in &leased {
                ops.push(HolderOp::Start {
                    lease: l,
                    first_step: "noop",
                });
            }
            for l in &running {
                ops.push(HolderOp::Finish {
                    lease: l,
                    outcome: &outcome,
                    last_step: Some(("noop", "null")),
                });
            }
            let req = LeaseRequest {
                worker: "bench-w",
                pipelines: &["p"],
                n: batch,
                start: 0,
                first_steps: &[],
            };
            let settled = rt.block_on(q.settle(&ops, Some(req), ttl)).expect("settle");
            refused += settled.replies.iter().filter(|r| r.is_err()).count();
            settled.leased.leases
        };
        running = std::mem::replace(&mut leased, next);
    });
    let settle_us = m.1 / batch as f64;
    rows.push(script_row(
        &format!("settle: {batch} starts + {batch} finishes (last checkpoint folded in) + lease {batch} (µs/job in col 5; {refused} refused)"),
        n / batch,
        batch as f64,
        &m,
    ));

    let mut s = String::new();
    let _ = writeln!(s, "## 4. Cost of each transition script (sequential calls from one client, {n} jobs, no resource locks)\n");
    let _ = writeln!(s, "client ms/call = awaited round trip including the pool checkout; Redis µs/call = EVALSHA `usec` from commandstats (the script's whole run, inner commands included); inner cmds = commands the script ran; pool cmds = the `PING` (pipelined with `UNWATCH`) deadpool-redis sends to recycle a connection on every checkout.\n");
    let _ = writeln!(s, "| script | calls | client ms/call | Redis µs/call | Redis µs per job/lease | inner cmds/call | pool PINGs/call | inner commands per call |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
    for r in rows {
        let _ = writeln!(s, "{r}");
    }
    let w1 = enqueue_us + lease_us + start_us + ckpt_us + finish_us;
    let w1s = enqueue_us + settle_us;
    let _ = writeln!(s, "\nRedis µs for one W1 job from these parts: one call per transition (enqueue + lease/10 + start + checkpoint + finish) {w1:.1} µs → a ceiling of {} jobs/s if Redis did nothing else; the worker's batched path (enqueue + settle/10) {w1s:.1} µs → {} jobs/s (script execution only; command parsing, networking and the pool's PINGs come on top).\n", fmt_int(1e6 / w1), fmt_int(1e6 / w1s));
    b.write(&s);
    w1
}

fn section_scale(b: &mut Bench) {
    let big = b.settings.scale_waiting;
    let mut rows = Vec::new();
    for waiting in [big, 10_000] {
        b.fresh();
        let running = 10_000usize;
        let expired = 500usize;
        let probes = 100 * 10;
        let total = waiting as usize + running + expired + probes;
        let url = b.url.clone();
        let mem0 = b.used_memory();
        let (queue, enq_secs) = b.rt.block_on(async move {
            let q = Queue::connect(&url, QUEUE, QueueConfig::default())
                .await
                .expect("connect");
            q.load_scripts().await.expect("load");
            let t = Instant::now();
            let mut i = 0;
            while i < total {
                let end = (i + 1000).min(total);
                let jobs = (i..end)
                    .map(|k| NewJob::new("s", &serde_json::json!({"i": k})).unwrap())
                    .collect();
                q.enqueue_bulk(jobs).await.expect("enqueue bulk");
                i = end;
            }
            (q, t.elapsed().as_secs_f64())
        });
        let mem1 = b.used_memory();
        let q = queue.clone();
        let mut held: Vec<Lease> = Vec::new();
        let lease100 = measure(b, running / 100, |rt, _| {
            held.extend(
                rt.block_on(q.lease("scale-w", &["s"], 100, Duration::from_secs(3600)))
                    .expect("lease")
                    .leases,
            );
        });
        // leases that expire at once
        let _ =
            b.rt.block_on(queue.lease("scale-dead", &["s"], expired, Duration::from_millis(1)))
                .expect("lease");
        std::thread::sleep(Duration::from_millis(20));
        let q = queue.clone();
        let mut recovered = 0;
        let sweep_exp = measure(b, 1, |rt, _| {
            recovered = rt.block_on(q.sweep(500)).expect("sweep").requeued;
        });
        let q = queue.clone();
        let sweep_idle = measure(b, 100, |rt, _| {
            rt.block_on(q.sweep(500)).expect("sweep");
        });
        let q = queue.clone();
        let lease10 = measure(b, 100, |rt, _| {
            rt.block_on(q.lease("scale-w2", &["s"], 10, Duration::from_secs(3600)))
                .expect("lease");
        });
        let q = queue.clone();
        let batch: Vec<&Lease> = held.iter().take(100).collect();
        let renew = measure(b, 100, |rt, _| {
            rt.block_on(q.renew(&batch)).expect("renew");
        });
        let waiting_now = b.int(&["ZCARD", "leasehold:{bench}:ready:s"]);
        let leased_now = b.int(&["ZCARD", "leasehold:{bench}:leases"]);
        for (name, m) in [
            ("sweep, 500 expired leases → QUEUED", &sweep_exp),
            ("sweep, nothing expired", &sweep_idle),
            ("lease n=10", &lease10),
            ("lease n=100", &lease100),
            ("renew 100 leases", &renew),
        ] {
            rows.push(format!(
                "| {} | {} | {} | {:.3} | {:.1} | {:.1} |",
                fmt_int(waiting_now as f64),
                fmt_int(leased_now as f64),
                name,
                m.0,
                m.1,
                m.2.iter()
                    .filter(|(k, _)| !is_top_level(k))
                    .map(|(_, v)| v.0)
                    .sum::<u64>() as f64
                    / if name.starts_with("sweep, 500") {
                        1.0
                    } else if name == "lease n=100" {
                        (running / 100) as f64
                    } else {
                        100.0
                    },
            ));
        }
        rows.push(format!(
            "| {} | {} | (bulk enqueue of {} jobs: {} jobs/s; {:.0} bytes/waiting job; sweep recovered {recovered}) | | | |",
            fmt_int(waiting_now as f64),
            fmt_int(leased_now as f64),
            fmt_int(total as f64),
            fmt_int(total as f64 / enq_secs),
            (mem1 - mem0) / total as f64
        ));
        eprintln!("  scale {waiting}: done");
    }
    let mut s = String::new();
    let _ = writeln!(s, "## 5. Lease, sweep and renew with a large backlog\n");
    let _ = writeln!(s, "Jobs enqueued in bulk; 10,000 leased (TTL 1 h) and not finished, 500 leased with a 1 ms TTL (expired). Times are sequential calls from one client; Redis µs from commandstats (EVALSHA usec / calls).\n");
    let _ = writeln!(
        s,
        "| waiting (ready) | leased | call | client ms/call | Redis µs/call | inner cmds/call |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    for r in rows {
        let _ = writeln!(s, "{r}");
    }
    let _ = writeln!(s);
    b.write(&s);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `cargo bench` passes `--bench`; a filter argument is not supported (everything runs).
    let env_u64 = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let settings = Settings {
        quick,
        n: env_u64("BENCH_N").unwrap_or(if quick { 2_000 } else { 20_000 }),
        reps: env_u64("BENCH_REPS").unwrap_or(if quick { 1 } else { 3 }) as usize,
        pickup_rate: 1_000,
        pickup_secs: env_u64("BENCH_PICKUP_SECS").unwrap_or(if quick { 2 } else { 10 }),
        recovery_trials: if quick { 1 } else { 3 },
        scale_waiting: env_u64("BENCH_SCALE_WAITING").unwrap_or(if quick {
            100_000
        } else {
            1_000_000
        }),
        script_jobs: if quick { 500 } else { 2_000 },
    };

    // target dir: this executable is <target>/release/deps/workloads-<hash>
    let exe = std::env::current_exe().expect("current_exe");
    let target: PathBuf = exe
        .ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .expect("target dir");
    let peer = match std::env::var("BENCH_PEER") {
        Ok(p) => PathBuf::from(p),
        Err(_) => {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            eprintln!("building bench_peer (cargo build --release --example bench_peer) ...");
            let st = Command::new(cargo)
                .args(["build", "--release", "--example", "bench_peer"])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .env("CARGO_TARGET_DIR", &target)
                .status()
                .expect("run cargo build");
            assert!(st.success(), "cargo build --example bench_peer failed");
            target.join("release").join("examples").join("bench_peer")
        }
    };
    let logs = target.join("bench-logs");
    std::fs::create_dir_all(&logs).expect("logs dir");
    let clk_tck = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse::<f64>()
                .ok()
        })
        .unwrap_or(100.0);

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
    let mut b = Bench {
        settings,
        srv,
        url,
        con,
        peer,
        logs,
        clk_tck,
        rt,
        out: String::new(),
    };

    let version = b
        .info("server")
        .get("redis_version")
        .cloned()
        .unwrap_or_default();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_default();
    let head = format!(
        "# leasehold workload benchmarks{}\n\nredis-server {version} (private, TCP 127.0.0.1, no persistence), {} cores ({cpu}), worker = `{}` (separate process), N = {}, median of {} runs. Logs: `{}`.\n\n",
        if b.settings.quick { " (--quick)" } else { "" },
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        b.peer.display(),
        b.settings.n,
        b.settings.reps,
        b.logs.display(),
    );
    b.write(&head);
    eprintln!("[1/5] throughput");
    section_workloads(&mut b);
    eprintln!("[1b/5] hand-off on one resource");
    section_handoff(&mut b);
    eprintln!("[2/5] pickup latency");
    section_pickup(&mut b);
    eprintln!("[3/5] recovery");
    section_recovery(&mut b);
    eprintln!("[4/5] per-script cost");
    section_scripts(&mut b);
    eprintln!("[5/5] scale");
    section_scale(&mut b);
    let path = target.join("bench-results.md");
    std::fs::write(&path, &b.out).expect("write results");
    eprintln!("results written to {}", path.display());
    drop(b.srv);
}
