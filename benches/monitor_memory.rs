//! What the per-step monitor of a process step costs in memory on Linux: the
//! worker (this process) grows its heap to ~100 MB, runs 20 process steps
//! (`sleep`), and reads each monitor's `/proc/<pid>/smaps_rollup` (RSS, PSS,
//! Private_Dirty, Shared_Dirty) and page tables (`VmPTE` of
//! `/proc/<pid>/status`) right after the spawn and again after the worker
//! rewrote its 100 MB (the pages it writes after a fork stay behind, in their
//! old copy, with the monitors forked before).
//!
//! Two rounds against a private redis-server:
//! - **at once**: 20 steps leased together (`sleep 5`); the worker rewrites
//!   its heap once all 20 monitors are up;
//! - **staggered**: 20 steps started one after the other (`sleep 30`), the
//!   worker rewriting its heap after each start, as a worker whose heap
//!   churns between steps does: each monitor keeps its own old copy.
//!
//! The monitors are the worker's children that run this very binary (they
//! never exec); their own children are the programs.
//! `cargo bench --bench monitor_memory` (Linux only). See BENCHMARKS.md.

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::time::Duration;

    use leasehold_core::process::{DeclaredPipeline, ProcessStep};
    use leasehold_core::{Client, EnqueueOptions, JobId, Queue, QueueConfig, Worker};
    use leasehold_testkit::{wait_until_async, RedisServer};

    /// Deadline of every wait.
    const WAIT: Duration = Duration::from_secs(60);
    /// Steps running at once.
    const STEPS: usize = 20;
    /// The worker's heap grown by this much.
    const BALLAST: usize = 100 * 1024 * 1024;

    /// The fields of one `smaps_rollup` or `status` file, in kB.
    fn kb_fields(path: &str) -> HashMap<String, u64> {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines()
            .filter_map(|line| {
                let (name, rest) = line.split_once(':')?;
                let kb = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
                Some((name.to_owned(), kb))
            })
            .collect()
    }

    /// The pids in `/proc/<pid>/task/*/children`.
    fn children(pid: u32) -> Vec<u32> {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return Vec::new();
        };
        tasks
            .filter_map(|t| t.ok())
            .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
            .flat_map(|text| {
                text.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect::<Vec<u32>>()
            })
            .collect()
    }

    /// The executable of process `pid`.
    fn exe(pid: u32) -> Option<PathBuf> {
        std::fs::read_link(format!("/proc/{pid}/exe")).ok()
    }

    /// The monitors now running: this process's children that run this
    /// binary, each with its program (a child that exec'd `sleep`).
    fn monitors() -> Vec<u32> {
        let me = std::process::id();
        let own = exe(me);
        children(me)
            .into_iter()
            .filter(|&pid| exe(pid) == own)
            .filter(|&pid| {
                children(pid).iter().any(|&program| {
                    std::fs::read_to_string(format!("/proc/{program}/comm"))
                        .is_ok_and(|comm| comm.trim() == "sleep")
                })
            })
            .collect()
    }

    /// One process's figures, in MB.
    struct Figures {
        rss: f64,
        pss: f64,
        private_dirty: f64,
        shared_dirty: f64,
        pte: f64,
    }

    fn figures(pid: u32) -> Figures {
        let rollup = kb_fields(&format!("/proc/{pid}/smaps_rollup"));
        let status = kb_fields(&format!("/proc/{pid}/status"));
        let mb = |map: &HashMap<String, u64>, name: &str| {
            map.get(name).copied().unwrap_or(0) as f64 / 1024.0
        };
        Figures {
            rss: mb(&rollup, "Rss"),
            pss: mb(&rollup, "Pss"),
            private_dirty: mb(&rollup, "Private_Dirty"),
            shared_dirty: mb(&rollup, "Shared_Dirty"),
            pte: mb(&status, "VmPTE"),
        }
    }

    /// Prints each monitor's figures, their spread and their sum.
    fn report(what: &str, pids: &[u32]) {
        let worker = figures(std::process::id());
        println!(
            "{what}: worker RSS {:.1} MB, PSS {:.1} MB, Private_Dirty {:.1} MB",
            worker.rss, worker.pss, worker.private_dirty
        );
        let all: Vec<Figures> = pids.iter().map(|&p| figures(p)).collect();
        for (pid, f) in pids.iter().zip(&all) {
            println!(
                "  monitor {pid:>7}: RSS {:6.1} MB  PSS {:6.1} MB  Private_Dirty {:6.1} MB  Shared_Dirty {:6.1} MB  page tables {:5.2} MB",
                f.rss, f.pss, f.private_dirty, f.shared_dirty, f.pte
            );
        }
        let column = |get: fn(&Figures) -> f64| {
            let mut v: Vec<f64> = all.iter().map(get).collect();
            v.sort_by(f64::total_cmp);
            let sum: f64 = v.iter().sum();
            format!(
                "min {:.1} / median {:.1} / max {:.1} MB, sum {:.1} MB",
                v.first().copied().unwrap_or(0.0),
                v.get(v.len() / 2).copied().unwrap_or(0.0),
                v.last().copied().unwrap_or(0.0),
                sum
            )
        };
        println!("  {} monitors:", all.len());
        println!("    RSS           {}", column(|f| f.rss));
        println!("    PSS           {}", column(|f| f.pss));
        println!("    Private_Dirty {}", column(|f| f.private_dirty));
        println!("    Shared_Dirty  {}", column(|f| f.shared_dirty));
        println!("    page tables   {}", column(|f| f.pte));
    }

    /// Writes every byte of `ballast` (a new value each time): every page
    /// of it is the worker's own again, its old copy left to the monitors.
    fn rewrite(ballast: &mut [u8], round: u8) {
        ballast.fill(round);
        std::hint::black_box(&ballast);
    }

    /// Waits until every job of `ids` is terminal.
    async fn ended(queue: &Queue, ids: &[JobId]) {
        for id in ids {
            wait_until_async(WAIT, "the job ended", || {
                let queue = queue.clone();
                let id = id.clone();
                async move {
                    matches!(queue.job(&id).await, Ok(Some(job)) if job.state.is_terminal())
                }
            })
            .await;
        }
    }

    /// Runs one round: `STEPS` steps of `sleep <secs>`, all enqueued at once
    /// or one after the other with a rewrite of the ballast after each start.
    async fn round(url: &str, ballast: &mut [u8], staggered: bool) {
        let (name, secs) = if staggered {
            ("monmem_staggered", "30")
        } else {
            ("monmem_at_once", "5")
        };
        let pipeline =
            DeclaredPipeline::new(name).step("sleep", ProcessStep::new("sleep").arg(secs));
        let worker = Worker::builder(url)
            .declared(pipeline)
            .expect("a declared pipeline")
            .concurrency(STEPS)
            .build()
            .await
            .expect("a worker");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(async move {
            let _ = worker
                .run_until(async {
                    let _ = stopped.await;
                })
                .await;
        });
        let client = Client::connect(url, QueueConfig::default())
            .await
            .expect("a client");
        let queue = Queue::connect(url, name, QueueConfig::default())
            .await
            .expect("a queue");
        let mut ids = Vec::new();
        let mut written = 1u8;
        for n in 0..STEPS {
            let id = client
                .enqueue_json(name, &format!("{{\"n\":{n}}}"), &EnqueueOptions::default())
                .await
                .expect("enqueue")
                .id;
            ids.push(id);
            if staggered {
                let up = n + 1;
                wait_until_async(WAIT, "the step's monitor is up", || async move {
                    monitors().len() >= up
                })
                .await;
                written = written.wrapping_add(1);
                rewrite(ballast, written);
            }
        }
        wait_until_async(WAIT, "every monitor is up", || async {
            monitors().len() == STEPS
        })
        .await;
        let pids = monitors();
        if staggered {
            report(
                "staggered, 20 steps, the worker's 100 MB rewritten after each start",
                &pids,
            );
        } else {
            report("at once, right after the spawns", &pids);
            rewrite(ballast, written.wrapping_add(1));
            report("at once, after the worker rewrote its 100 MB", &pids);
        }
        ended(&queue, &ids).await;
        let _ = stop.send(());
        let _ = tokio::time::timeout(WAIT, running).await;
    }

    pub(crate) async fn main() {
        let srv = RedisServer::start();
        let url = srv.url();
        let before = figures(std::process::id());
        // the worker's heap: allocated and touched, page by page
        let mut ballast = vec![0u8; BALLAST];
        rewrite(&mut ballast, 1);
        let after = figures(std::process::id());
        println!(
            "worker RSS {:.1} MB before its ballast, {:.1} MB with it",
            before.rss, after.rss
        );
        round(&url, &mut ballast, false).await;
        round(&url, &mut ballast, true).await;
        drop(ballast);
    }
}

#[cfg(target_os = "linux")]
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    linux::main().await;
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("monitor_memory: Linux only (elsewhere there is no monitor)");
}
