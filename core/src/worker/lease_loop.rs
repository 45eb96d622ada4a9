//! The lease loop: leasing and settling for one lease group (the pipelines of
//! one queue leased with one TTL).
//!
//! Duties:
//! - collects the holder operations of the group's running jobs (sent through
//!   their `Settler`, see `settler.rs`) and sends them to Redis together with
//!   a lease of new jobs for the free lease slots, one `settle` call per batch;
//! - keeps at most [`MAX_IN_FLIGHT`] calls in flight, sending a second one only
//!   for a batch worth its fixed cost; requests that arrive meanwhile form the
//!   next batch, so a busy worker pays one round trip per batch and an idle one
//!   answers at once;
//! - keeps each attempt's operations in the order they were sent: a request of
//!   an attempt with an operation in a call still in flight waits for that
//!   call (a job task does not wait for its checkpoints, so its next ones and
//!   its finish may follow while one is on its way); an append whose send
//!   failed goes first in the next batch;
//! - starts the jobs it leases into free run slots in the same call (LEASED
//!   and RUNNING both recorded); leases ahead of free run slots (prefetch)
//!   only when the worker is told to, and then starts none in the lease;
//! - hands each call's replies to the waiting job tasks and spawns a task per
//!   leased job (see `attempt/`);
//! - backs off after a failed call, logging a master's spell of failed calls
//!   once at warn (when the first of its queues fails, naming the master of
//!   the queue's slot, asked then in a task of its own, and its failing
//!   queues) and its end once at info (when the last one answers again); the
//!   worker's `FailingMasters` keeps which queues fail on which master; a loop
//!   per queue, so a master that does not answer holds up only its own
//!   queues' leasing;
//! - with nothing to do and free slots, blocks on the queue's wake lists (see
//!   `waiter.rs`) until work arrives or a delayed job comes due;
//! - at shutdown, stops leasing and keeps settling until every job task ended.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;
use tracing::{debug, error, info, warn};

use super::attempt::{self, Slots};
use super::masters::{master_of, MasterSpell};
use super::settler::{Pending, Settler};
use super::shared::{RedisSource, Shared};
use super::waiter::Waiter;
use crate::error::Error;
use crate::lease::Leased;
use crate::metrics::{PipelineLabels, QueueLabels, WaitLabels};
use crate::pipeline::runner::Runner;
use crate::queue::Queue;
use crate::settle::{HolderOp, LeaseRequest};

/// Pipelines of one queue leased with one TTL.
pub(crate) struct LeaseGroup {
    /// The queue they are leased from.
    pub(crate) queue: Queue,
    /// Their lease time-to-live.
    pub(crate) ttl: Duration,
    /// The pipelines.
    pub(crate) runners: Vec<Arc<dyn Runner>>,
}

/// Leasing and settling for one lease group: every holder operation of the
/// group's running jobs and the lease of new ones go to Redis together, one
/// `settle` call per batch. Requests that arrive while a call is in flight
/// form the next batch, so a busy worker pays one round trip per batch and an
/// idle one answers at once. With nothing to do and free slots, it blocks on
/// the queue's wake list until work arrives or a delayed job comes due.
pub(crate) struct LeaseLoop {
    /// The worker's shared state.
    pub(crate) shared: Arc<Shared>,
    /// The group it leases for.
    pub(crate) group: LeaseGroup,
    /// Lease slots for jobs that may run now.
    pub(crate) slots: Arc<Semaphore>,
    /// Lease slots for jobs taken ahead of free `slots` (prefetch).
    pub(crate) prefetch_slots: Arc<Semaphore>,
    /// How many jobs it leases ahead of free run slots (`Worker::prefetch`; 0 by default).
    pub(crate) prefetch: usize,
    /// Where the leased jobs' tasks run.
    pub(crate) jobs: TaskTracker,
    /// Where the worker's Redis is, for the blocking connection.
    pub(crate) source: RedisSource,
    /// Longest an idle loop blocks before looking again.
    pub(crate) max_idle_wait: Duration,
    /// Lease slots in all (running and prefetched): the most jobs one call leases.
    pub(crate) batch: usize,
    /// Whether the last settle call failed (logged once per spell).
    pub(crate) failing: std::sync::atomic::AtomicBool,
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

/// First pause after a failed call.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// Longest pause after failed calls.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Longest wait for a node to name the queue's master, for a log line.
const MASTER_LOOKUP: Duration = Duration::from_secs(2);

/// Whether a second call in flight is worth sending for `ops` pending
/// operations, `starts` of them starts, from a worker of `batch` lease slots
/// (running and prefetched).
fn second_call_ready(ops: usize, starts: usize, batch: usize) -> bool {
    let quarter = batch.div_ceil(SECOND_CALL_DIVISOR);
    ops >= quarter && ops - starts >= quarter.min(SECOND_CALL_MIN_WORK)
}

/// What a finished settle call tells the loop.
struct CallDone {
    /// How it went.
    outcome: CallOutcome,
    /// The attempts it carried operations of (see `Pending::attempt_key`).
    attempts: Vec<usize>,
    /// Its appends whose send failed, to be sent again first.
    again: Vec<Pending>,
}

/// How a settle call went.
enum CallOutcome {
    Settled {
        /// Whether it asked for leases and got none.
        found_nothing: bool,
        /// When the next delayed job comes due (ms since epoch, Redis clock).
        next_due: Option<i64>,
    },
    Failed,
}

/// The moving parts of a running lease loop.
struct LoopState {
    /// Requests from the job tasks.
    requests: mpsc::UnboundedReceiver<Pending>,
    /// Set once every `Settler` is gone: every job task has ended (shutdown).
    closed: bool,
    /// The handle leased jobs get; dropped when leasing stops, so the channel
    /// closes once every job task has ended.
    settler: Option<Settler>,
    /// Requests collected for the next call.
    pending: Vec<Pending>,
    /// Requests of attempts with an operation in a call in flight, in the
    /// order they came: they join a batch once that call has returned.
    held: Vec<Pending>,
    /// The attempts with operations in calls in flight, and in how many.
    busy: HashMap<usize, usize>,
    /// Where settle calls report how they went.
    done_tx: mpsc::UnboundedSender<CallDone>,
    /// Where the loop hears of finished settle calls.
    done_rx: mpsc::UnboundedReceiver<CallDone>,
    /// Settle calls in flight.
    in_flight: usize,
    /// A call outcome received while waiting, applied at the top of the loop.
    arrived: Option<CallDone>,
    /// The pause after the next failed call.
    backoff: Duration,
    /// Whether the last call asked for leases and got none.
    idle: bool,
    /// When the next delayed job comes due, as the last call said.
    next_due: Option<i64>,
    /// The blocking waiter while no wait runs.
    waiter: Option<Waiter>,
    /// The blocking wait running in a task of its own; it gives the waiter back.
    waiting: Option<JoinHandle<Waiter>>,
}

impl LoopState {
    fn new(lease_loop: &LeaseLoop) -> Self {
        let (settler, requests) = Settler::channel();
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        LoopState {
            requests,
            closed: false,
            settler: Some(settler),
            pending: Vec::new(),
            held: Vec::new(),
            busy: HashMap::new(),
            done_tx,
            done_rx,
            in_flight: 0,
            arrived: None,
            backoff: FIRST_BACKOFF,
            idle: false,
            next_due: None,
            // The blocking wait runs in a task of its own and is never dropped mid-call:
            // a BLPOP abandoned on its connection would still take the next wake-up token.
            waiter: Some(Waiter::new(&lease_loop.source, lease_loop.wake_keys())),
            waiting: None,
        }
    }

    /// Applies the outcomes of the calls that finished: whether the queue had
    /// nothing to lease and when a delayed job comes due; pauses after a failure.
    async fn apply_finished_calls(&mut self) {
        let mut outcomes: Vec<CallDone> = self.arrived.take().into_iter().collect();
        while let Ok(done) = self.done_rx.try_recv() {
            outcomes.push(done);
        }
        let mut failed = false;
        for done in outcomes {
            self.in_flight -= 1;
            for key in done.attempts {
                if let Some(n) = self.busy.get_mut(&key) {
                    *n -= 1;
                    if *n == 0 {
                        self.busy.remove(&key);
                    }
                }
            }
            // sent again ahead of everything of their attempts (whose later
            // requests were held behind the failed call)
            if !done.again.is_empty() {
                let later = std::mem::replace(&mut self.pending, done.again);
                self.pending.extend(later);
            }
            match done.outcome {
                CallOutcome::Settled {
                    found_nothing,
                    next_due,
                } => {
                    self.backoff = FIRST_BACKOFF;
                    self.idle = found_nothing;
                    self.next_due = next_due;
                }
                CallOutcome::Failed => failed = true,
            }
        }
        self.release_held();
        if failed {
            tokio::time::sleep(self.backoff).await;
            self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Moves the held requests whose attempts have no call in flight any more
    /// to the next batch, in the order they came.
    fn release_held(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let held = std::mem::take(&mut self.held);
        for p in held {
            if self.busy.contains_key(&p.attempt_key()) {
                self.held.push(p);
            } else {
                self.pending.push(p.free_slot());
            }
        }
    }

    /// Takes a request for the next batch, or holds it while an earlier
    /// operation of its attempt is in a call in flight (or held itself).
    fn take(&mut self, p: Pending) {
        let key = p.attempt_key();
        if self.busy.contains_key(&key) || self.held.iter().any(|h| h.attempt_key() == key) {
            self.held.push(p);
        } else {
            self.pending.push(p.free_slot());
        }
    }

    /// Takes the requests already sent, up to a full batch.
    fn collect_requests(&mut self) {
        while self.pending.len() < MAX_BATCH {
            match self.requests.try_recv() {
                Ok(p) => self.take(p),
                Err(_) => break,
            }
        }
    }

    /// While a call is in flight: waits for one more request or for a call to return.
    async fn wait_for_request_or_call(&mut self) {
        tokio::select! {
            r = self.requests.recv() => match r {
                Some(p) => self.take(p),
                None => self.closed = true,
            },
            d = self.done_rx.recv() => self.arrived = d,
        }
    }
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

    /// Whether the worker prefetches because it was told to (`Worker::prefetch`
    /// with a count): then no job starts in its lease call.
    fn prefetch_on_purpose(&self) -> bool {
        self.prefetch > 0
    }

    /// Whether to lease ahead of free slots now.
    fn prefetching(&self) -> bool {
        self.prefetch_slots.available_permits() > 0
    }

    /// Runs the loop until leasing stopped and every job task has ended.
    pub(crate) async fn run(self) {
        let this = Arc::new(self);
        let mut state = LoopState::new(&this);
        loop {
            if this.shared.stop_leasing.is_cancelled() {
                state.settler = None;
            }
            state.apply_finished_calls().await;
            // checked after the outcomes: with the channel closed and no call in
            // flight, the wait below would have nothing left to wait for
            if state.closed
                && state.in_flight == 0
                && state.pending.is_empty()
                && state.held.is_empty()
            {
                return;
            }
            if state.in_flight >= MAX_IN_FLIGHT {
                // requests keep arriving on the channel meanwhile: the next batch grows
                state.arrived = state.done_rx.recv().await;
                continue;
            }
            // let the job tasks just woken by the last replies run to their next
            // request first, so it joins this batch rather than the next call
            for _ in 0..2 {
                tokio::task::yield_now().await;
            }
            state.collect_requests();
            // A second call in flight only for a batch worth its fixed cost:
            // otherwise wait for more requests or for the first call to return.
            if state.in_flight > 0 && !state.closed && !this.worth_a_second_call(&state.pending) {
                state.wait_for_request_or_call().await;
                continue;
            }
            let prefetching = this.prefetching();
            let permits = if state.settler.is_some() {
                this.take_free_slots(prefetching)
            } else {
                Vec::new()
            };
            if state.pending.is_empty() && (permits.is_empty() || state.idle) {
                drop(permits);
                this.wait_for_work(&mut state, prefetching).await;
                continue;
            }
            this.send_batch(&mut state, permits);
        }
    }

    /// Whether `pending` is worth a second call in flight.
    fn worth_a_second_call(&self, pending: &[Pending]) -> bool {
        let starts = pending.iter().filter(|p| p.is_start()).count();
        second_call_ready(pending.len(), starts, self.batch)
    }

    /// The free lease slots, up to `batch`: run slots first, then (while
    /// `prefetching`) prefetch slots.
    fn take_free_slots(&self, prefetching: bool) -> Vec<OwnedSemaphorePermit> {
        let mut permits = Vec::new();
        for slots in [
            Some(&self.slots),
            prefetching.then_some(&self.prefetch_slots),
        ]
        .into_iter()
        .flatten()
        {
            while permits.len() < self.batch {
                match slots.clone().try_acquire_owned() {
                    Ok(p) => permits.push(p),
                    Err(_) => break,
                }
            }
        }
        permits
    }

    /// Nothing to settle: waits for a request, a free slot, a call to finish,
    /// or (idle) work in Redis, in a blocking wait of its own.
    async fn wait_for_work(&self, state: &mut LoopState, prefetching: bool) {
        let wait = match state.next_due {
            Some(due) => due_in(due).min(self.max_idle_wait),
            None => self.max_idle_wait,
        };
        let leasing = state.settler.is_some();
        if leasing && state.idle && state.in_flight == 0 && state.waiting.is_none() {
            let mut w = state
                .waiter
                .take()
                .unwrap_or_else(|| Waiter::new(&self.source, self.wake_keys()));
            state.waiting = Some(tokio::spawn(async move {
                w.wait(wait).await;
                w
            }));
        }
        let LoopState {
            requests,
            closed,
            pending,
            held,
            busy,
            done_rx,
            in_flight,
            arrived,
            idle,
            waiter,
            waiting,
            ..
        } = state;
        let wait_done = async {
            match waiting.as_mut() {
                Some(handle) => handle.await.ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = requests.recv(), if !*closed => match r {
                // as `LoopState::take`
                Some(p) => {
                    let key = p.attempt_key();
                    if busy.contains_key(&key) || held.iter().any(|h| h.attempt_key() == key) {
                        held.push(p);
                    } else {
                        pending.push(p.free_slot());
                    }
                }
                None => {
                    // every job task has ended (shutdown)
                    *closed = true;
                    if let Some(handle) = waiting.take() {
                        handle.abort();
                    }
                }
            },
            d = done_rx.recv(), if *in_flight > 0 => *arrived = d,
            p = self.slots.clone().acquire_owned(), if leasing && !*idle => drop(p),
            p = self.prefetch_slots.clone().acquire_owned(), if leasing && !*idle && prefetching => drop(p),
            w = wait_done, if leasing && *idle => {
                *waiting = None;
                *waiter = w;
                *idle = false;
            }
            _ = self.shared.stop_leasing.cancelled(), if leasing => {}
        }
    }

    /// Sends the pending requests and a lease for `permits` in a settle call
    /// of its own task; it reports back on the loop's `done` channel.
    fn send_batch(self: &Arc<Self>, state: &mut LoopState, permits: Vec<OwnedSemaphorePermit>) {
        let batch: Vec<Pending> = std::mem::take(&mut state.pending);
        for p in &batch {
            *state.busy.entry(p.attempt_key()).or_insert(0) += 1;
        }
        state.in_flight += 1;
        let call = self.clone();
        let settler = state.settler.clone();
        let done = state.done_tx.clone();
        tokio::spawn(async move {
            let _ = done.send(call.settle_batch(batch, permits, settler).await);
        });
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
        let first_steps: Vec<&'static str> = self
            .group
            .runners
            .iter()
            .map(|r| r.steps().first().map_or("", |s| s.name))
            .collect();
        let ops: Vec<HolderOp<'_>> = batch.iter().map(Pending::as_op).collect();
        let attempts: Vec<usize> = batch.iter().map(Pending::attempt_key).collect();
        let mut again = Vec::new();
        let appended: Vec<bool> = batch.iter().map(Pending::appended).collect();
        let want = if settler.is_some() { permits.len() } else { 0 };
        // the free run slots, taken now: the jobs leased into them start in the
        // same call (a worker that prefetches on purpose keeps its free run
        // slots for the jobs it prefetched, which start with their own call)
        let mut run_permits = Vec::new();
        if !self.prefetch_on_purpose() {
            while run_permits.len() < want {
                match self.shared.run_slots.clone().try_acquire_owned() {
                    Ok(p) => run_permits.push(p),
                    Err(_) => break,
                }
            }
        }
        let request = (want > 0).then_some(LeaseRequest {
            worker: &self.shared.id,
            pipelines: &pipelines,
            n: want,
            start: run_permits.len(),
            first_steps: &first_steps,
        });
        // the leases' local deadlines count from here: Redis sets theirs later
        let sent_at = Instant::now();
        let result = self
            .group
            .queue
            .settle_sealing(&ops, Some(&appended), request, self.group.ttl, true)
            .await;
        drop(ops);
        match result {
            Ok(settled) => {
                if self
                    .failing
                    .swap(false, std::sync::atomic::Ordering::AcqRel)
                {
                    self.log_master(false, None);
                }
                for (p, reply) in batch.into_iter().zip(settled.replies) {
                    again.extend(p.answer(reply));
                }
                let leased = settled.leased;
                for bad in &leased.unreadable {
                    error!(queue = %self.group.queue.name(), job = %bad.job, problem = %bad.problem,
                        "leased a job whose fields cannot be read: left to the sweeper (back to QUEUED, or STALE if the lease started it); `leasehold show` names the field");
                }
                let found_nothing = want > 0 && leased.leases.is_empty();
                let next_due = leased.next_due;
                if let Some(settler) = &settler {
                    self.spawn_jobs(settler, leased, sent_at, &mut permits, run_permits);
                }
                CallDone {
                    outcome: CallOutcome::Settled {
                        found_nothing,
                        next_due,
                    },
                    attempts,
                    again,
                }
            }
            Err(e) => {
                if self.failing.swap(true, std::sync::atomic::Ordering::AcqRel) {
                    debug!(queue = %self.group.queue.name(), error = %e, "settle failed");
                } else {
                    self.log_master(true, Some(e.to_string()));
                }
                for p in batch {
                    let error = if e.is_transient() {
                        Error::Pool(format!("settle failed: {e}"))
                    } else {
                        Error::Protocol {
                            script: "settle",
                            detail: e.to_string(),
                        }
                    };
                    again.extend(p.answer(Err(error)));
                }
                CallDone {
                    outcome: CallOutcome::Failed,
                    attempts,
                    again,
                }
            }
        }
    }

    /// Logs, in a task of its own (the call's replies do not wait for it),
    /// that the queue's settle calls started failing (at warn, with `error`)
    /// or answer again (at info), naming the master of its slot.
    fn log_master(&self, failing: bool, error: Option<String>) {
        let queue = self.group.queue.clone();
        let shared = self.shared.clone();
        tokio::spawn(async move {
            let master = master_of(&queue, MASTER_LOOKUP).await;
            let error = error.unwrap_or_default();
            let (spell, queues) = shared.failing_masters.mark(&master, queue.name(), failing);
            match spell {
                MasterSpell::Began => {
                    warn!(%master, ?queues, %error,
                        "leasing and settling failed on this master; retrying with backoff (logged again when all its queues answer); the other masters' queues do not wait for it");
                }
                MasterSpell::Ended => {
                    info!(%master, "leasing and settling answered again by this master, on every queue");
                }
                MasterSpell::Within if failing => {
                    info!(%master, ?queues, %error, "another queue of this master fails too");
                }
                MasterSpell::Within => {
                    debug!(%master, queue = %queue.name(), "this queue answers again; others of this master still fail");
                }
            }
        });
    }

    /// Counts the leased jobs in the metrics and spawns a task for each, with
    /// one of `permits` (its lease slot) held until its final operation is
    /// sent, and one of `run_permits` (a run slot taken before the call) for
    /// each job the call started (the rest go back to the worker's run slots,
    /// where a job leased but not started waits for one); `sent_at` is when
    /// the call that leased them was sent.
    fn spawn_jobs(
        &self,
        settler: &Settler,
        leased: Leased,
        sent_at: Instant,
        permits: &mut Vec<OwnedSemaphorePermit>,
        mut run_permits: Vec<OwnedSemaphorePermit>,
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
        let w = leased.waits;
        for (cause, n) in [
            ("resource_limit", w.resource_limit),
            ("max_running", w.max_running),
            ("rate", w.rate),
            ("paused", w.paused),
        ] {
            if n > 0 {
                metrics
                    .flow_waits
                    .get_or_create(&WaitLabels {
                        queue: self.group.queue.name().to_owned(),
                        cause: cause.to_owned(),
                    })
                    .inc_by(n);
            }
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
            let slots = Slots {
                lease: permits.pop(),
                run: if lease.started {
                    run_permits.pop()
                } else {
                    None
                },
            };
            if lease.started && slots.run.is_none() {
                // cannot happen: the call starts at most as many jobs as run slots were taken
                warn!(job = %lease.job, "a job started by its lease has no run slot; it waits for one");
            }
            let shared = self.shared.clone();
            let queue = self.group.queue.clone();
            let settler = settler.clone();
            self.jobs.spawn(async move {
                attempt::run(shared, runner, queue, settler, lease, sent_at, slots).await;
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
