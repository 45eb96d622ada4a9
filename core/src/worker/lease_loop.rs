//! Leasing and settling: holder operations of running jobs and leases of new
//! ones, batched into one `settle` call; blocking on Redis when idle.

use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::redis::{self, aio::MultiplexedConnection, AsyncConnectionConfig};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio_util::task::TaskTracker;
use tracing::{debug, error, warn};

use super::runner::Runner;
use super::{job, RedisSource, Shared};
use crate::error::{Error, Result};
use crate::lease::{Lease, Leased, Outcome};
use crate::metrics::{PipelineLabels, QueueLabels};
use crate::queue::Queue;
use crate::settle::{HolderOp, HolderReply, LeaseRequest};

/// Pipelines of one queue leased with one TTL.
pub(crate) struct LeaseGroup {
    pub(crate) queue: Queue,
    pub(crate) ttl: Duration,
    pub(crate) runners: Vec<Arc<dyn Runner>>,
}

/// A holder operation a job task asks its group's settler to perform.
pub(crate) enum Request {
    Start {
        first_step: &'static str,
    },
    Checkpoint {
        step: &'static str,
        output: String,
        next_step: Option<&'static str>,
    },
    Finish {
        outcome: Outcome,
        last_step: Option<(&'static str, String)>,
    },
    Release,
}

struct Pending {
    lease: Arc<Lease>,
    request: Request,
    reply: oneshot::Sender<Result<HolderReply>>,
}

/// The handle job tasks use to reach their group's settler.
#[derive(Clone)]
pub(crate) struct Settler {
    tx: mpsc::UnboundedSender<Pending>,
}

impl Settler {
    /// Performs `request` on `lease` in the settler's next batch.
    pub(crate) async fn call(&self, lease: &Arc<Lease>, request: Request) -> Result<HolderReply> {
        let (reply, rx) = oneshot::channel();
        let pending = Pending {
            lease: lease.clone(),
            request,
            reply,
        };
        if self.tx.send(pending).is_err() {
            return Err(Error::Pool("the worker's settler has stopped".into()));
        }
        rx.await
            .unwrap_or_else(|_| Err(Error::Pool("the worker's settler dropped a request".into())))
    }
}

/// Leasing and settling for one lease group: every holder operation of the
/// group's running jobs and the lease of new ones go to Redis together, one
/// `settle` call per batch. Requests that arrive while a call is in flight
/// form the next batch, so a busy worker pays one round trip per batch and an
/// idle one answers at once. With nothing to do and free slots, it blocks on
/// the queue's wake list until work arrives or a delayed job comes due.
pub(crate) struct LeaseLoop {
    pub(crate) shared: Arc<Shared>,
    pub(crate) group: LeaseGroup,
    pub(crate) slots: Arc<Semaphore>,
    /// Lease slots for jobs taken ahead of free `slots` (prefetch).
    pub(crate) prefetch_slots: Arc<Semaphore>,
    /// Whether prefetching follows the jobs' run times (the default) rather
    /// than always using every `prefetch_slots` permit.
    pub(crate) prefetch_auto: bool,
    pub(crate) jobs: TaskTracker,
    pub(crate) source: RedisSource,
    pub(crate) max_idle_wait: Duration,
    pub(crate) batch: usize,
}

/// Most operations in one settle call.
const MAX_BATCH: usize = 256;

/// Most settle calls in flight at once. A job never has two operations
/// outstanding, so concurrent calls never touch the same job; two keep Redis
/// busy while the worker collects the next batch.
const MAX_IN_FLIGHT: usize = 2;

/// While a call is in flight, the next one waits for at least
/// concurrency / SECOND_CALL_DIVISOR operations (fewer, larger calls)...
const SECOND_CALL_DIVISOR: usize = 4;

/// ...of which at least this many (or that quarter, when smaller) are not the
/// start of a prefetched job. A short job's finish frees its run slot for a
/// prefetched job, whose start joins the same batch: counting those starts,
/// a worker of concurrency 10 sent a second call for 3 jobs' worth of work
/// (0.22 calls per no-op job; 0.18 this way, `benches/quick.sh w1 10`). A
/// floor on all operations instead cost jobs of many checkpoints ~12% of their
/// throughput: their operations come one per job, so the second call rarely
/// went at all.
const SECOND_CALL_MIN_WORK: usize = 4;

/// Whether a second call in flight is worth sending for `ops` pending
/// operations, `starts` of them starts, from a worker of `batch` lease slots
/// (running and prefetched).
fn second_call_ready(ops: usize, starts: usize, batch: usize) -> bool {
    let quarter = batch.div_ceil(SECOND_CALL_DIVISOR);
    ops >= quarter && ops - starts >= quarter.min(SECOND_CALL_MIN_WORK)
}

/// What a finished settle call tells the loop.
enum CallDone {
    Settled {
        /// Whether it asked for leases and got none.
        found_nothing: bool,
        next_due: Option<i64>,
    },
    Failed,
}

impl LeaseLoop {
    /// The wake lists an idle loop blocks on: one per pipeline of its group.
    fn wake_keys(&self) -> Vec<String> {
        let keys = self.group.queue.keys();
        self.group
            .runners
            .iter()
            .map(|r| keys.wake(r.name()))
            .collect()
    }

    /// Whether to lease ahead of free slots now.
    fn prefetching(&self) -> bool {
        self.prefetch_slots.available_permits() > 0
            && (!self.prefetch_auto || self.shared.jobs_are_short())
    }

    pub(crate) async fn run(self) {
        let this = Arc::new(self);
        let stop = this.shared.stop_leasing.clone();
        // The blocking wait runs in a task of its own and is never dropped mid-call:
        // a BLPOP abandoned on its connection would still take the next wake-up token.
        let mut waiter = Some(Waiter::new(&this.source, this.wake_keys()));
        let mut waiting: Option<tokio::task::JoinHandle<Waiter>> = None;
        let (tx, mut rx) = mpsc::unbounded_channel::<Pending>();
        // dropped at shutdown, so the channel closes once every job task has ended
        let mut tx = Some(Settler { tx });
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<CallDone>();
        let mut in_flight = 0usize;
        // a call outcome received while waiting, applied at the top of the loop
        let mut arrived: Option<CallDone> = None;
        let mut backoff = Duration::from_millis(100);
        let mut idle = false;
        let mut next_due: Option<i64> = None;
        let mut pending: Vec<Pending> = Vec::new();
        let mut closed = false;
        loop {
            if stop.is_cancelled() {
                tx = None;
            }
            // outcomes of calls that finished
            let mut outcomes: Vec<CallDone> = arrived.take().into_iter().collect();
            while let Ok(done) = done_rx.try_recv() {
                outcomes.push(done);
            }
            for done in outcomes {
                in_flight -= 1;
                match done {
                    CallDone::Settled {
                        found_nothing,
                        next_due: due,
                    } => {
                        backoff = Duration::from_millis(100);
                        idle = found_nothing;
                        next_due = due;
                    }
                    CallDone::Failed => {
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                    }
                }
            }
            // checked after the outcomes: with the channel closed and no call in
            // flight, the wait below would have nothing left to wait for
            if closed && in_flight == 0 && pending.is_empty() {
                return;
            }
            if in_flight >= MAX_IN_FLIGHT {
                // requests keep arriving on the channel meanwhile: the next batch grows
                arrived = done_rx.recv().await;
                continue;
            }
            // let the job tasks just woken by the last replies run to their next
            // request first, so it joins this batch rather than the next call
            for _ in 0..2 {
                tokio::task::yield_now().await;
            }
            while pending.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(p) => pending.push(p),
                    Err(_) => break,
                }
            }
            // A second call in flight only for a batch worth its fixed cost:
            // otherwise wait for more requests or for the first call to return.
            let worth_a_second_call = || {
                let starts = pending
                    .iter()
                    .filter(|p| matches!(p.request, Request::Start { .. }))
                    .count();
                second_call_ready(pending.len(), starts, this.batch)
            };
            if in_flight > 0 && !closed && !worth_a_second_call() {
                tokio::select! {
                    r = rx.recv() => match r {
                        Some(p) => pending.push(p),
                        None => closed = true,
                    },
                    d = done_rx.recv() => arrived = d,
                }
                continue;
            }
            let mut permits = Vec::new();
            let prefetching = this.prefetching();
            if tx.is_some() {
                for slots in [
                    Some(&this.slots),
                    prefetching.then_some(&this.prefetch_slots),
                ]
                .into_iter()
                .flatten()
                {
                    while permits.len() < this.batch {
                        match slots.clone().try_acquire_owned() {
                            Ok(p) => permits.push(p),
                            Err(_) => break,
                        }
                    }
                }
            }
            if pending.is_empty() && (permits.is_empty() || idle) {
                drop(permits);
                // nothing to settle: wait for a request, a free slot, a call to
                // finish, or (idle) work in Redis
                let wait = match next_due {
                    Some(due) => due_in(due).min(this.max_idle_wait),
                    None => this.max_idle_wait,
                };
                let leasing = tx.is_some();
                if leasing && idle && in_flight == 0 && waiting.is_none() {
                    let mut w = waiter
                        .take()
                        .unwrap_or_else(|| Waiter::new(&this.source, this.wake_keys()));
                    waiting = Some(tokio::spawn(async move {
                        w.wait(wait).await;
                        w
                    }));
                }
                let wait_done = async {
                    match waiting.as_mut() {
                        Some(handle) => handle.await.ok(),
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    r = rx.recv(), if !closed => match r {
                        Some(p) => pending.push(p),
                        None => {
                            // every job task has ended (shutdown)
                            closed = true;
                            if let Some(handle) = waiting.take() {
                                handle.abort();
                            }
                        }
                    },
                    d = done_rx.recv(), if in_flight > 0 => arrived = d,
                    p = this.slots.clone().acquire_owned(), if leasing && !idle => drop(p),
                    p = this.prefetch_slots.clone().acquire_owned(), if leasing && !idle && prefetching => drop(p),
                    w = wait_done, if leasing && idle => {
                        waiting = None;
                        waiter = w;
                        idle = false;
                    }
                    _ = stop.cancelled(), if leasing => {}
                }
                continue;
            }
            let batch: Vec<Pending> = std::mem::take(&mut pending);
            in_flight += 1;
            let call = this.clone();
            let settler = tx.clone();
            let done = done_tx.clone();
            tokio::spawn(async move {
                let _ = done.send(call.settle_batch(batch, permits, settler).await);
            });
        }
    }

    /// One settle call: the batch's operations and a lease for `permits`;
    /// replies go to the job tasks, leased jobs are spawned.
    async fn settle_batch(
        &self,
        batch: Vec<Pending>,
        mut permits: Vec<OwnedSemaphorePermit>,
        settler: Option<Settler>,
    ) -> CallDone {
        let pipelines: Vec<&'static str> = self.group.runners.iter().map(|r| r.name()).collect();
        let leases: Vec<Arc<Lease>> = batch.iter().map(|p| p.lease.clone()).collect();
        let ops: Vec<HolderOp<'_>> = batch
            .iter()
            .zip(&leases)
            .map(|(p, lease)| match &p.request {
                Request::Start { first_step } => HolderOp::Start { lease, first_step },
                Request::Checkpoint {
                    step,
                    output,
                    next_step,
                } => HolderOp::Checkpoint {
                    lease,
                    step,
                    output,
                    next_step: *next_step,
                },
                Request::Finish { outcome, last_step } => HolderOp::Finish {
                    lease,
                    outcome,
                    last_step: last_step.as_ref().map(|(s, o)| (*s, o.as_str())),
                },
                Request::Release => HolderOp::Release { lease },
            })
            .collect();
        let want = if settler.is_some() { permits.len() } else { 0 };
        let request = (want > 0).then_some(LeaseRequest {
            worker: &self.shared.id,
            pipelines: &pipelines,
            n: want,
        });
        let result = self.group.queue.settle(&ops, request, self.group.ttl).await;
        drop(ops);
        match result {
            Ok(settled) => {
                for (p, reply) in batch.into_iter().zip(settled.replies) {
                    let _ = p.reply.send(reply);
                }
                let leased = settled.leased;
                for bad in &leased.unreadable {
                    error!(queue = %self.group.queue.name(), job = %bad.job, problem = %bad.problem,
                        "leased a job whose fields cannot be read: left LEASED for the sweeper; `leasehold show` names the field");
                }
                let found_nothing = want > 0 && leased.leases.is_empty();
                let next_due = leased.next_due;
                if let Some(settler) = &settler {
                    self.spawn_jobs(settler, leased, &mut permits);
                }
                CallDone::Settled {
                    found_nothing,
                    next_due,
                }
            }
            Err(e) => {
                warn!(queue = %self.group.queue.name(), error = %e, "settle failed");
                for p in batch {
                    let error = if e.is_transient() {
                        Error::Pool(format!("settle failed: {e}"))
                    } else {
                        Error::Protocol {
                            script: "settle",
                            detail: e.to_string(),
                        }
                    };
                    let _ = p.reply.send(Err(error));
                }
                CallDone::Failed
            }
        }
    }

    fn spawn_jobs(
        &self,
        settler: &Settler,
        leased: Leased,
        permits: &mut Vec<OwnedSemaphorePermit>,
    ) {
        let metrics = &self.shared.metrics;
        if leased.parked > 0 {
            metrics
                .lock_waits
                .get_or_create(&QueueLabels {
                    queue: self.group.queue.name().to_owned(),
                })
                .inc_by(leased.parked);
        }
        for lease in leased.leases {
            let labels = PipelineLabels {
                queue: self.group.queue.name().to_owned(),
                pipeline: lease.pipeline.clone(),
            };
            let waited = (leased.now - lease.not_before).max(0) as f64 / 1000.0;
            metrics
                .queue_wait_seconds
                .get_or_create(&labels)
                .observe(waited);
            metrics.transition(&labels.queue, &labels.pipeline, "QUEUED", "LEASED");
            let Some(runner) = self
                .group
                .runners
                .iter()
                .find(|r| r.name() == lease.pipeline)
                .cloned()
            else {
                warn!(job = %lease.job, pipeline = %lease.pipeline, "leased a pipeline this worker does not serve");
                continue;
            };
            let permit = permits.pop();
            let shared = self.shared.clone();
            let queue = self.group.queue.clone();
            let settler = settler.clone();
            self.jobs.spawn(async move {
                job::run(shared, runner, queue, settler, lease).await;
                drop(permit);
            });
        }
    }
}

/// Time until `due` (ms since epoch, Redis clock), by this machine's clock.
fn due_in(due: i64) -> Duration {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    Duration::from_millis(u64::try_from(due - now).unwrap_or(0).max(5))
}

/// Blocks on the queue's wake list with a connection of its own.
struct Waiter {
    source: RedisSource,
    /// The wake lists of the group's pipelines.
    keys: Vec<String>,
    conn: Option<MultiplexedConnection>,
}

impl Waiter {
    fn new(source: &RedisSource, keys: Vec<String>) -> Self {
        Waiter {
            source: source.clone(),
            keys,
            conn: None,
        }
    }

    /// A connection of its own: opened from the URL, or taken out of the pool for good.
    async fn connect(&self, wait: Duration) -> Result<MultiplexedConnection> {
        match &self.source {
            RedisSource::Url(url) => {
                let client = redis::Client::open(url.as_str())?;
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(Duration::from_secs(5)))
                    .set_response_timeout(Some(wait + Duration::from_secs(5)));
                Ok(client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?)
            }
            RedisSource::Pool(pool) => {
                // a new connection made by the pool's manager, never one of the pool's
                // own: those are shared (multiplexed) with script calls, which a
                // blocking BLPOP would stall
                use deadpool::managed::Manager as _;
                Ok(pool.manager().create().await?)
            }
        }
    }

    /// Waits up to `wait` for a wake-up token.
    async fn wait(&mut self, wait: Duration) {
        let max_block = Duration::from_secs(60);
        let wait = wait.min(max_block);
        if self.conn.is_none() {
            match self.connect(max_block).await {
                Ok(c) => self.conn = Some(c),
                Err(e) => {
                    debug!(error = %e, "cannot open the blocking connection; sleeping instead");
                    tokio::time::sleep(wait).await;
                    return;
                }
            }
        }
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        let secs = wait.as_secs_f64().max(0.01);
        let reply: std::result::Result<Option<(String, String)>, Error> = redis::cmd("BLPOP")
            .arg(&self.keys)
            .arg(format!("{secs:.3}"))
            .query_async(conn)
            .await
            .map_err(Error::from);
        if let Err(e) = reply {
            debug!(error = %e, "blocking wait failed; reconnecting next time");
            self.conn = None;
            tokio::time::sleep(wait.min(Duration::from_millis(500))).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::second_call_ready;

    #[test]
    fn second_calls_wait_for_a_batch_worth_sending() {
        // concurrency 1 with prefetch: one operation is enough
        assert!(second_call_ready(1, 0, 2));
        assert!(!second_call_ready(1, 1, 2), "a start alone");
        // concurrency 10 with prefetch 10: a quarter (5), 4 of them not starts
        assert!(!second_call_ready(4, 0, 20));
        assert!(second_call_ready(5, 0, 20), "five checkpoints");
        assert!(
            !second_call_ready(6, 3, 20),
            "three finishes and their starts"
        );
        assert!(
            second_call_ready(8, 4, 20),
            "four finishes and their starts"
        );
        // concurrency 50 with prefetch 50: a quarter (25)
        assert!(!second_call_ready(24, 0, 100));
        assert!(second_call_ready(25, 12, 100));
        assert!(!second_call_ready(25, 22, 100));
    }
}
