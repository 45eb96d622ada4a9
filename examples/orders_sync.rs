//! FETCH → VALIDATE → LOAD → AGGREGATE over hourly windows of generated order
//! data for several shops, loaded into an embedded SQLite warehouse (staging
//! rows, then an aggregate table), run by three worker replicas. One window per
//! job; the shop is the resource, so two windows of one shop never load at once.
//! The day's windows form one group whose completion job, DAILY_AGGREGATE,
//! runs once, after every hourly window of the day loaded: it reads the
//! windows' final outputs and writes the day's row.
//!
//! Run: `cargo run --example orders_sync` (starts a throwaway redis-server when
//! `REDIS_URL` is unset; `LEASEHOLD_DEMO_CLUSTER=1` starts a throwaway
//! 3-master Redis Cluster instead, and `REDIS_URL=redis+cluster://...` uses yours). Set `RUST_LOG=leasehold=info` to see the runtime's logs.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::group::{GroupStatus, NewGroup};
use leasehold::inspect::EventFollower;
use leasehold::prelude::*;
use leasehold::queue::Queue;
use rusqlite::{params, Connection};
use serde::{Deserialize, Serialize};

/// One job's fixed input boundary: one shop, one hour of one day. `from` and
/// `to` (RFC 3339) are the window as leasehold indexes it, so that
/// `leasehold jobs --window 2026-05-06` finds the day's jobs.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, InputFields)]
struct Window {
    shop_id: String,
    day: String,
    hour: u32,
    from: String,
    to: String,
}

/// An order as the (simulated) shop API returns it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Order {
    id: String,
    total_cents: i64,
}

/// What VALIDATE keeps and what it rejected.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Validated {
    orders: Vec<Order>,
    rejected: usize,
}

/// What LOAD wrote into staging.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Loaded {
    rows: usize,
    fence: u64,
}

/// The aggregate row AGGREGATE wrote.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct HourlySales {
    orders: i64,
    revenue_cents: i64,
}

/// The daily aggregate's input: the day and the group of its hourly windows.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, InputFields)]
struct Day {
    day: String,
    group: String,
}

/// The row DAILY_AGGREGATE wrote.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct DailySales {
    windows: usize,
    orders: i64,
    revenue_cents: i64,
}

/// The completion job of a day's group: holds the warehouse and the queue
/// (to read the group's outcome).
struct DailyAggregate {
    warehouse: Arc<Mutex<Connection>>,
    queue: Queue,
}

#[pipeline(name = "daily_aggregate", queue = "orders", max_attempts = 2)]
impl DailyAggregate {
    /// Sums the hourly windows' final outputs (their AGGREGATE rows) into `daily_sales`.
    #[step]
    async fn aggregate_day(
        &self,
        _ctx: &StepContext,
        input: &Day,
    ) -> Result<DailySales, StepError> {
        let hours = self
            .queue
            .group_outputs_as::<HourlySales>(&input.group)
            .await
            .map_err(|e| StepError::retryable(e.to_string()))?;
        let day = DailySales {
            windows: hours.len(),
            orders: hours.iter().map(|(_, h)| h.orders).sum(),
            revenue_cents: hours.iter().map(|(_, h)| h.revenue_cents).sum(),
        };
        let db = self
            .warehouse
            .lock()
            .map_err(|_| StepError::permanent("warehouse lock poisoned"))?;
        db.execute(
            "INSERT INTO daily_sales (day, windows, orders, revenue_cents) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (day) DO UPDATE SET windows = excluded.windows, orders = excluded.orders, revenue_cents = excluded.revenue_cents",
            params![input.day, day.windows as i64, day.orders, day.revenue_cents],
        )?;
        Ok(day)
    }
}

/// The pipeline: holds the warehouse connection.
struct OrdersSync {
    warehouse: Arc<Mutex<Connection>>,
}

/// A small deterministic generator, so re-running a window reads the same input set.
fn orders_for(window: &Window) -> Vec<Order> {
    let mut seed = window
        .shop_id
        .bytes()
        .chain(window.day.bytes())
        .fold(u64::from(window.hour) + 7, |h, b| {
            h.wrapping_mul(31).wrapping_add(u64::from(b))
        });
    let mut next = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        seed >> 33
    };
    let count = 20 + next() % 30;
    (0..count)
        .map(|i| {
            let cents = (next() % 20_000) as i64;
            // about one order in twelve comes back with a negative total
            let total_cents = if next() % 12 == 0 { -cents } else { cents };
            Order {
                id: format!("{}-{}-{:02}-{i}", window.shop_id, window.day, window.hour),
                total_cents,
            }
        })
        .collect()
}

impl OrdersSync {
    fn warehouse(&self) -> Result<std::sync::MutexGuard<'_, Connection>, StepError> {
        self.warehouse
            .lock()
            .map_err(|_| StepError::permanent("warehouse lock poisoned"))
    }
}

#[pipeline(
    queue = "orders",
    resource = "shop:{shop_id}",
    input_key = "orders:{shop_id}:{day}:{hour}",
    lease_ttl = "10s",
    max_attempts = 3,
    initial_backoff = "200ms"
)]
impl OrdersSync {
    /// FETCH: call the shop's API for the window (simulated: deterministic data and latency).
    #[step(timeout = "30s")]
    async fn fetch(&self, ctx: &StepContext, input: &Window) -> Result<Vec<Order>, StepError> {
        let latency = Duration::from_millis(40 + u64::from(input.hour) * 10);
        tokio::select! {
            _ = tokio::time::sleep(latency) => Ok(orders_for(input)),
            _ = ctx.cancelled() => Err(StepError::permanent("cancelled while fetching").with_kind("cancelled")),
        }
    }

    /// VALIDATE: drop orders with negative totals; too many means the source is broken.
    #[step]
    async fn validate(
        &self,
        _ctx: &StepContext,
        orders: Vec<Order>,
    ) -> Result<Validated, StepError> {
        let total = orders.len();
        let valid: Vec<Order> = orders.into_iter().filter(|o| o.total_cents >= 0).collect();
        let rejected = total - valid.len();
        if rejected * 2 > total {
            return Err(StepError::permanent(format!(
                "{rejected} of {total} orders are invalid"
            )));
        }
        Ok(Validated {
            orders: valid,
            rejected,
        })
    }

    /// LOAD: replace the window's staging rows, fenced so a zombie attempt cannot overwrite a newer one.
    #[step(retry(max_attempts = 3, initial_backoff = "200ms"))]
    async fn load(
        &self,
        ctx: &StepContext,
        input: &Window,
        validated: Validated,
    ) -> Result<Loaded, StepError> {
        // the warehouse is "busy" the first time shop c's 02:00 window loads: a retryable failure
        if input.shop_id == "c" && input.hour == 2 && ctx.attempt() == 1 {
            return Err(StepError::retryable("warehouse busy: lock wait timeout"));
        }
        let mut db = self.warehouse()?;
        let tx = db.transaction()?;
        let stored: Option<i64> = tx
            .query_row(
                "SELECT fence FROM window_loads WHERE shop = ?1 AND day = ?2 AND hour = ?3",
                params![input.shop_id, input.day, input.hour],
                |r| r.get(0),
            )
            .ok();
        let fence = ctx.fence() as i64;
        if stored.is_some_and(|s| s > fence) {
            return Err(StepError::permanent(format!(
                "fence {fence} is older than the warehouse's {stored:?}"
            )));
        }
        tx.execute(
            "DELETE FROM staging_orders WHERE shop = ?1 AND day = ?2 AND hour = ?3",
            params![input.shop_id, input.day, input.hour],
        )?;
        for order in &validated.orders {
            tx.execute(
                "INSERT INTO staging_orders (shop, day, hour, order_id, total_cents) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![input.shop_id, input.day, input.hour, order.id, order.total_cents],
            )?;
        }
        tx.execute(
            "INSERT INTO window_loads (shop, day, hour, fence) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (shop, day, hour) DO UPDATE SET fence = excluded.fence",
            params![input.shop_id, input.day, input.hour, fence],
        )?;
        tx.commit()?;
        Ok(Loaded {
            rows: validated.orders.len(),
            fence: ctx.fence(),
        })
    }

    /// AGGREGATE: roll the window's staging rows up into `hourly_sales`.
    #[step]
    async fn aggregate(
        &self,
        _ctx: &StepContext,
        input: &Window,
        _loaded: Loaded,
    ) -> Result<HourlySales, StepError> {
        let db = self.warehouse()?;
        let (orders, revenue_cents): (i64, i64) = db.query_row(
            "SELECT COUNT(*), COALESCE(SUM(total_cents), 0) FROM staging_orders WHERE shop = ?1 AND day = ?2 AND hour = ?3",
            params![input.shop_id, input.day, input.hour],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        db.execute(
            "INSERT INTO hourly_sales (shop, day, hour, orders, revenue_cents) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (shop, day, hour) DO UPDATE SET orders = excluded.orders, revenue_cents = excluded.revenue_cents",
            params![input.shop_id, input.day, input.hour, orders, revenue_cents],
        )?;
        Ok(HourlySales {
            orders,
            revenue_cents,
        })
    }

    /// Runs after a failed or cancelled attempt: drop half-loaded staging rows.
    #[cleanup]
    async fn cleanup(&self, ctx: &CleanupContext, input: &Window) {
        if ctx.last_completed_step == Some("aggregate") {
            return;
        }
        if let Ok(db) = self.warehouse.lock() {
            let _ = db.execute(
                "DELETE FROM staging_orders WHERE shop = ?1 AND day = ?2 AND hour = ?3",
                params![input.shop_id, input.day, input.hour],
            );
        }
    }
}

fn open_warehouse(path: &PathBuf) -> rusqlite::Result<Connection> {
    let db = Connection::open(path)?;
    db.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE IF NOT EXISTS staging_orders (shop TEXT, day TEXT, hour INTEGER, order_id TEXT, total_cents INTEGER);
         CREATE TABLE IF NOT EXISTS window_loads (shop TEXT, day TEXT, hour INTEGER, fence INTEGER, PRIMARY KEY (shop, day, hour));
         CREATE TABLE IF NOT EXISTS hourly_sales (shop TEXT, day TEXT, hour INTEGER, orders INTEGER, revenue_cents INTEGER, PRIMARY KEY (shop, day, hour));
         CREATE TABLE IF NOT EXISTS daily_sales (day TEXT PRIMARY KEY, windows INTEGER, orders INTEGER, revenue_cents INTEGER);",
    )?;
    Ok(db)
}

/// Prints the queue's events as they happen, in words.
async fn narrate(
    url: String,
    queue: Queue,
    names: Arc<Mutex<BTreeMap<String, String>>>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    // the library's follower: one XREAD BLOCK on a server; on a cluster, an
    // XREAD on the node of the queue's slot
    let Ok(mut follower) = EventFollower::connect(
        &url,
        queue.config(),
        &[queue.name().to_owned()],
        Duration::from_millis(200),
    )
    .await
    else {
        return;
    };
    follower.resume_after(queue.name(), "0-0");
    loop {
        if let Ok(events) = follower.next_batch(100).await {
            for event in events {
                let job = event.job.to_string();
                let label = names
                    .lock()
                    .ok()
                    .and_then(|n| n.get(&job).cloned())
                    .unwrap_or_else(|| job[..8.min(job.len())].to_owned());
                let from = event.from.map(|s| s.as_str()).unwrap_or_default();
                let to = event.to.as_str();
                let (op, by, reason) = (&event.op, &event.by, &event.reason);
                let who = if by.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", short_worker(by))
                };
                let line = match op.as_str() {
                    "enqueue" if !reason.is_empty() => format!("queued: {reason}"),
                    "enqueue" => "queued".to_owned(),
                    "group_complete" => reason.clone(),
                    "lease" => format!("leased (attempt {})", event.attempt),
                    "start" if to == "RUNNING" => "started".to_owned(),
                    "finish" if to == "SUCCEEDED" => "SUCCEEDED: every step done".to_owned(),
                    "finish" => format!("{from} → {to}: {reason}"),
                    "retry" => format!("new attempt {} queued ({reason})", event.attempt),
                    "group_create" => "group created".to_owned(),
                    "group_seal" => "group sealed: no more windows will join".to_owned(),
                    "group_join" => format!("joined the group ({to})"),
                    "release" => format!("handed back, {to}"),
                    "sweep" => format!("lease expired: {from} → {to}"),
                    "cancel" => format!("cancelled ({reason})"),
                    "deps" => "its parents settled: ready".to_owned(),
                    // anything else: the move itself, in the state model's words
                    _ if from.is_empty() => format!("now {to} {reason}"),
                    _ => format!("{from} → {to} {reason}"),
                };
                println!("  {label:<18}{who:<22} {line}");
            }
        }
        if *stop.borrow() {
            return;
        }
    }
}

fn short_worker(id: &str) -> String {
    // host-pid-suffix → show the random suffix, which differs per replica
    id.rsplit('-').next().unwrap_or(id).to_owned()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .init();
    }
    let redis = common::ExampleRedis::from_env_or_spawn()?;
    let db_path = std::env::temp_dir().join(format!("leasehold-orders-{}.db", std::process::id()));
    let warehouse = Arc::new(Mutex::new(open_warehouse(&db_path)?));
    println!("warehouse: SQLite at {}", db_path.display());

    let client = Client::connect(&redis.url, QueueConfig::default()).await?;
    let queue = client.queue_for::<OrdersSync>()?;
    let names = Arc::new(Mutex::new(BTreeMap::new()));

    // the day's windows are one group; its completion job aggregates the day
    // once every window SUCCEEDED (a name per run, so a reused Redis works too)
    let group = format!("orders-2026-05-06-{}", std::process::id());
    let daily = JobId::new();
    // built like any job of its pipeline (its max attempts, flow gates)
    let completion = leasehold::queue::job_for::<DailyAggregate>(&Day {
        day: "2026-05-06".into(),
        group: group.clone(),
    })?
    .id(daily.clone());
    queue
        .create_group(&NewGroup::new(&group).completion(completion), "demo")
        .await?;
    let group_id = queue.group(&group).await?.ok_or("group vanished")?.id;
    if let Ok(mut n) = names.lock() {
        n.insert(daily.to_string(), "day 2026-05-06".into());
        n.insert(group_id.to_string(), "group of the day".into());
    }
    println!(
        "\nenqueueing one job per shop and hour (shops a, b, c; 00:00 to 03:00 of 2026-05-06), as group {group}:"
    );
    let mut jobs: Vec<(Window, JobId)> = Vec::new();
    for shop in ["a", "b", "c"] {
        for hour in 0..4 {
            let window = Window {
                shop_id: shop.into(),
                day: "2026-05-06".into(),
                hour,
                from: format!("2026-05-06T{hour:02}:00:00Z"),
                to: format!("2026-05-06T{:02}:00:00Z", hour + 1),
            };
            let enqueued = client
                .enqueue_with::<OrdersSync>(&window)
                .group(&group)
                .send()
                .await?;
            if let Ok(mut n) = names.lock() {
                n.insert(enqueued.id.to_string(), format!("shop {shop} {hour:02}:00"));
            }
            jobs.push((window, enqueued.id));
        }
    }
    let again = client.enqueue::<OrdersSync>(&jobs[0].0).await?;
    println!(
        "  {} jobs; enqueueing shop a 00:00 again returns the same job (created = {})",
        jobs.len(),
        again.created
    );
    queue.seal_group(&group, "demo").await?;
    println!(
        "  group sealed: its daily aggregate runs once, after the last of its {} windows SUCCEEDED",
        jobs.len()
    );

    const REPLICAS: usize = 3;
    println!(
        "\n{REPLICAS} worker replicas, one job at a time each (the shop lock lets three run at once); what happens, as it happens:"
    );
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let narrator = tokio::spawn(narrate(
        redis.url.clone(),
        queue.clone(),
        names.clone(),
        stop_rx,
    ));
    let (shutdown_tx, _) = tokio::sync::broadcast::channel::<()>(1);
    let mut replicas = Vec::new();
    let mut replica_ids = Vec::new();
    for _ in 0..REPLICAS {
        let worker = Worker::builder(redis.url.clone())
            .pipeline(OrdersSync {
                warehouse: warehouse.clone(),
            })
            .pipeline(DailyAggregate {
                warehouse: warehouse.clone(),
                queue: queue.clone(),
            })
            .concurrency(1)
            .build()
            .await?;
        replica_ids.push(worker.id().to_owned());
        let mut shutdown = shutdown_tx.subscribe();
        replicas.push(tokio::spawn(worker.run_until(async move {
            let _ = shutdown.recv().await;
        })));
    }

    // wait until every job is terminal
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut done = 0;
        for (_, id) in &jobs {
            if queue.job(id).await?.is_some_and(|j| j.state.is_terminal()) {
                done += 1;
            }
        }
        let day_done = queue
            .job(&daily)
            .await?
            .is_some_and(|j| j.state.is_terminal());
        if done == jobs.len() && day_done {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            return Err("jobs did not finish within 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = stop_tx.send(true);
    let _ = narrator.await;
    let _ = shutdown_tx.send(());
    for replica in replicas {
        replica.await??;
    }

    println!("\nwhat Redis recorded, job by job:");
    for (window, id) in &jobs {
        let job = queue.job(id).await?.ok_or("job vanished")?;
        let attempts: Vec<String> = job
            .attempts
            .iter()
            .map(|a| {
                let steps: Vec<&str> = a.steps.iter().map(|s| s.step.as_str()).collect();
                let error = a
                    .error
                    .as_ref()
                    .map(|e| format!(" ({})", e.message))
                    .unwrap_or_default();
                format!(
                    "#{} {} by {} fence {} [{}]{error}",
                    a.n,
                    a.state,
                    short_worker(&a.worker),
                    a.fence,
                    steps.join(" → ")
                )
            })
            .collect();
        println!(
            "  shop {} {:02}:00  {:<9} {}",
            window.shop_id,
            window.hour,
            job.state.to_string(),
            attempts.join("; ")
        );
        assert_eq!(job.state, JobState::Succeeded);
    }

    // the completion job is a job of its own: its line too
    let day_job = queue.job(&daily).await?.ok_or("daily job vanished")?;
    println!(
        "  day 2026-05-06     {:<9} {}",
        day_job.state.to_string(),
        day_job
            .attempts
            .iter()
            .map(|a| format!("#{} {} by {}", a.n, a.state, short_worker(&a.worker)))
            .collect::<Vec<_>>()
            .join("; ")
    );
    // which replica ran what: every one of them took part
    let mut ran: BTreeMap<String, usize> = replica_ids.iter().map(|w| (w.clone(), 0)).collect();
    for (_, id) in &jobs {
        for a in queue.job(id).await?.ok_or("job vanished")?.attempts {
            *ran.entry(a.worker).or_default() += 1;
        }
    }
    for a in &day_job.attempts {
        *ran.entry(a.worker.clone()).or_default() += 1;
    }
    println!(
        "\nattempts per replica: {}",
        ran.iter()
            .map(|(w, n)| format!("{} {n}", short_worker(w)))
            .collect::<Vec<_>>()
            .join(", ")
    );

    let info = queue.group(&group).await?.ok_or("group vanished")?;
    assert_eq!(info.status, GroupStatus::Completed);
    assert_eq!(
        (info.succeeded, info.total),
        (jobs.len() as u64, jobs.len() as u64)
    );
    assert_eq!(
        queue.job(&daily).await?.map(|j| j.state),
        Some(JobState::Succeeded)
    );
    println!("\nthe warehouse's hourly_sales table:");
    let db = warehouse.lock().map_err(|_| "poisoned")?;
    let mut stmt = db.prepare(
        "SELECT shop, hour, orders, revenue_cents FROM hourly_sales ORDER BY shop, hour",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, i64>(3)?,
        ))
    })?;
    println!("  shop  hour   orders   revenue");
    for row in rows {
        let (shop, hour, orders, cents) = row?;
        println!(
            "  {shop:<5} {hour:02}:00  {orders:>6}  {:>8.2}",
            cents as f64 / 100.0
        );
    }
    drop(stmt);
    let (windows, orders, cents): (i64, i64, i64) = db.query_row(
        "SELECT windows, orders, revenue_cents FROM daily_sales WHERE day = '2026-05-06'",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    println!(
        "\nthe daily aggregate (group {group}, run once after all its windows loaded):\n  2026-05-06  {windows} windows  {orders} orders  {:.2}",
        cents as f64 / 100.0
    );
    drop(db);
    assert_eq!(windows, jobs.len() as i64);
    // close the warehouse (the workers' copies went with them), then leave
    // nothing behind: the database and SQLite's write-ahead log and shared memory
    drop(warehouse);
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut path = db_path.clone().into_os_string();
        path.push(suffix);
        let _ = std::fs::remove_file(&path);
    }
    println!("\ndone: every window SUCCEEDED; shop c 02:00 needed a second attempt, which resumed at LOAD.");
    Ok(())
}
