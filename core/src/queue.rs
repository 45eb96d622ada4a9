//! The client of one queue: every transition script, and reads of job records.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_redis::redis::{
    self, aio::MultiplexedConnection, AsyncCommands, Script, ScriptInvocation, Value,
};
use deadpool_redis::{Connection, Pool, PoolConfig, Runtime, Timeouts};

use crate::config::QueueConfig;
use crate::error::{Error, Result};
use crate::id::JobId;
use crate::job_spec::NewJob;
use crate::keys::{check_name, QueueKeys};
use crate::lease::{
    Cancelled, Finished, Lease, Leased, Outcome, Renewal, RetryMode, Started, SweepReport,
    SweptJob, UnreadableLease,
};
use crate::pipeline::PipelineSpec;
use crate::record::{AttemptRecord, Job};
use crate::reply::Reply;
use crate::scripts;
use crate::state::JobState;
use crate::transitions::Op;

/// A client of one queue. Cheap to clone; clones share the connection pool.
#[derive(Clone)]
pub struct Queue {
    pool: Pool,
    keys: QueueKeys,
    config: QueueConfig,
    shared: Arc<Mutex<Option<MultiplexedConnection>>>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("base", &self.keys.base())
            .finish_non_exhaustive()
    }
}

/// The reply to `enqueue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enqueued {
    /// The job's id (an existing job's, when `created` is false).
    pub id: JobId,
    /// False when a non-terminal job with the same input key existed and was returned instead.
    pub created: bool,
}

/// Builds a connection pool for `url` with explicit connect and wait timeouts.
pub fn connect_pool(url: &str, config: &QueueConfig) -> Result<Pool> {
    // redis-rs gives each connection its own defaults (1 s to connect, 500 ms per
    // reply) unless told otherwise, which silently capped `response_timeout`: a
    // script slower than 500 ms failed even with a 10 s `response_timeout`. The
    // connection's reply timeout is a backstop just above the client's own timer,
    // so `Queue` calls report `Error::Timeout` and direct pool users stay bounded.
    let timeout = config.response_timeout;
    let reply_backstop = timeout.saturating_add(Duration::from_secs(1));
    let connection = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(config.connect_timeout))
        .set_response_timeout(Some(reply_backstop));
    let manager = deadpool_redis::Manager::new_with_config(url, connection)
        .map_err(|e| Error::Pool(format!("cannot build a pool for {url}: {e}")))?;
    Pool::builder(manager)
        .config(PoolConfig {
            max_size: config.pool_size.max(1),
            timeouts: Timeouts {
                wait: Some(config.connect_timeout),
                create: Some(config.connect_timeout),
                recycle: Some(config.connect_timeout),
            },
            ..PoolConfig::default()
        })
        .runtime(Runtime::Tokio1)
        .build()
        .map_err(|e| Error::Pool(format!("cannot build a pool for {url}: {e}")))
}

pub(crate) fn bool_arg(b: bool) -> &'static str {
    if b {
        "1"
    } else {
        "0"
    }
}

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A lock key lives an hour past its lease: while any worker runs, the sweeper
/// (not the TTL) decides what happens to a dead holder's resource — released
/// with a LEASED job, held with a STALE one. The TTL only guards against leaks
/// when no worker runs at all.
pub(crate) fn lock_ttl(ttl: Duration) -> u64 {
    millis(ttl).saturating_add(3_600_000)
}

impl Queue {
    /// Connects to Redis at `url` and checks that it answers.
    pub async fn connect(url: &str, queue: &str, config: QueueConfig) -> Result<Self> {
        let pool = connect_pool(url, &config)?;
        let queue = Queue::with_pool(pool, queue, config)?;
        queue.ping().await?;
        Ok(queue)
    }

    /// A client of `queue` over an existing pool.
    pub fn with_pool(pool: Pool, queue: &str, config: QueueConfig) -> Result<Self> {
        let keys = QueueKeys::new(&config.prefix, queue)?;
        Ok(Queue {
            pool,
            keys,
            config,
            shared: Arc::new(Mutex::new(None)),
        })
    }

    /// A client of another queue sharing this one's pool, connection and settings.
    pub fn sibling(&self, queue: &str) -> Result<Self> {
        let keys = QueueKeys::new(&self.config.prefix, queue)?;
        Ok(Queue {
            pool: self.pool.clone(),
            keys,
            config: self.config.clone(),
            shared: self.shared.clone(),
        })
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        self.keys.queue()
    }

    /// The queue's key names.
    pub fn keys(&self) -> &QueueKeys {
        &self.keys
    }

    /// The settings.
    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    /// The connection pool.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    async fn conn(&self) -> Result<Connection> {
        self.pool.get().await.map_err(|e| match e {
            deadpool_redis::PoolError::Backend(e) => Error::Redis(e),
            deadpool_redis::PoolError::Timeout(_) => Error::Timeout(self.config.connect_timeout),
            other => Error::Pool(other.to_string()),
        })
    }

    async fn timed<T>(
        &self,
        fut: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.config.response_timeout, fut).await {
            Ok(result) => Ok(result?),
            Err(_) => Err(Error::Timeout(self.config.response_timeout)),
        }
    }

    /// Checks that Redis answers.
    pub async fn ping(&self) -> Result<()> {
        let mut conn = self.conn().await?;
        let _: String = self
            .timed(redis::cmd("PING").query_async(&mut conn))
            .await?;
        Ok(())
    }

    /// Loads every script into Redis's script cache (they are also loaded on first use).
    pub async fn load_scripts(&self) -> Result<()> {
        let mut conn = self.conn().await?;
        for (_, script) in scripts::all() {
            let _: String = self
                .timed(script.prepare_invoke().load_async(&mut conn))
                .await?;
        }
        Ok(())
    }

    /// An invocation of `script` with the fixed KEYS and the common ARGV.
    pub(crate) fn invocation<'a>(&self, script: &'a Script) -> ScriptInvocation<'a> {
        let mut inv = script.prepare_invoke();
        for key in self.keys.fixed() {
            inv.key(key);
        }
        inv.arg(self.config.events_max_len)
            .arg(self.config.retention.keep_count)
            .arg(millis(self.config.retention.keep_age));
        inv
    }

    /// A multiplexed connection shared by every script call of this client and
    /// its siblings: calls pipeline on it concurrently, and none pays the pool's
    /// per-checkout health check (an UNWATCH + PING round trip). A connection
    /// that fails at the transport level is dropped and the next call takes a
    /// fresh one from the pool.
    async fn shared_conn(&self) -> Result<MultiplexedConnection> {
        if let Some(conn) = self.shared.lock().ok().and_then(|c| c.clone()) {
            return Ok(conn);
        }
        let pooled = self.conn().await?;
        let conn: MultiplexedConnection = (*pooled).clone();
        if let Ok(mut slot) = self.shared.lock() {
            *slot = Some(conn.clone());
        }
        Ok(conn)
    }

    fn forget_shared_conn(&self) {
        if let Ok(mut slot) = self.shared.lock() {
            *slot = None;
        }
    }

    pub(crate) async fn invoke(&self, inv: &ScriptInvocation<'_>) -> Result<Value> {
        let mut conn = self.shared_conn().await?;
        let result = self.timed(inv.invoke_async::<Value>(&mut conn)).await;
        if let Err(e) = &result {
            if e.is_transient() {
                self.forget_shared_conn();
            }
        }
        result
    }

    /// Maps a refusal reply (`NOT_FOUND`, `REFUSED`, `LOST`, `TERMINAL`, ...) to its error.
    fn refusal(
        &self,
        script: &'static str,
        op: Op,
        job: &str,
        to: Option<JobState>,
        status: &str,
        reply: &mut Reply,
    ) -> Error {
        let state = |reply: &mut Reply| -> Result<JobState> {
            let text = reply.text()?;
            text.parse().map_err(|_| Error::Corrupt {
                key: self.keys.job(job),
                field: "state".into(),
                problem: format!("unknown state {text:?}"),
            })
        };
        let result = match status {
            "NOT_FOUND" => Err(Error::NotFound {
                queue: self.name().to_owned(),
                job: job.to_owned(),
            }),
            "REFUSED" => state(reply).and_then(|state| {
                Err(Error::Refused {
                    job: job.to_owned(),
                    state,
                    op,
                    to,
                })
            }),
            "LOST" => state(reply).and_then(|state| {
                Err(Error::LeaseLost {
                    job: job.to_owned(),
                    state,
                    op,
                })
            }),
            "TERMINAL" => state(reply).and_then(|state| {
                Err(Error::AlreadyTerminal {
                    job: job.to_owned(),
                    state,
                    op,
                })
            }),
            "CORRUPT" => reply.text().and_then(|detail| {
                Err(Error::Corrupt {
                    key: self.keys.job(job),
                    field: "attempt".into(),
                    problem: detail,
                })
            }),
            "OP_ERROR" => reply.text().and_then(|detail| {
                Err(Error::Corrupt {
                    key: self.keys.job(job),
                    field: "(a field the operation reads)".into(),
                    problem: format!("{script} failed on this job: {detail}"),
                })
            }),
            "BAD_ARG" => reply
                .text()
                .and_then(|what| Err(Error::InvalidArgument(format!("{script}: bad {what}")))),
            other => Err(Error::Protocol {
                script,
                detail: format!("unknown status {other:?}"),
            }),
        };
        match result {
            Err(e) => e,
            Ok(()) => unreachable!("every arm above yields an error"),
        }
    }

    /// Enqueues one job. Idempotent on its input key.
    pub async fn enqueue(&self, job: NewJob) -> Result<Enqueued> {
        let mut out = self.enqueue_bulk(vec![job]).await?;
        out.pop().ok_or(Error::Protocol {
            script: "enqueue",
            detail: "empty reply".into(),
        })
    }

    /// Enqueues many jobs, one call per pipeline. Replies in the order given.
    pub async fn enqueue_bulk(&self, jobs: Vec<NewJob>) -> Result<Vec<Enqueued>> {
        for job in &jobs {
            job.validate()?;
        }
        let mut by_pipeline: Vec<(String, Vec<(usize, NewJob)>)> = Vec::new();
        for (i, job) in jobs.into_iter().enumerate() {
            match by_pipeline.iter_mut().find(|(p, _)| *p == job.pipeline) {
                Some((_, group)) => group.push((i, job)),
                None => by_pipeline.push((job.pipeline.clone(), vec![(i, job)])),
            }
        }
        let total: usize = by_pipeline.iter().map(|(_, g)| g.len()).sum();
        let mut results: Vec<Option<Enqueued>> = vec![None; total];
        for (pipeline, group) in by_pipeline {
            for chunk in group.chunks(1000) {
                let mut inv = self.invocation(&scripts::ENQUEUE);
                inv.key(self.keys.ready(&pipeline))
                    .key(self.keys.delayed(&pipeline))
                    .key(self.keys.wake(&pipeline));
                inv.arg(self.name()).arg(&pipeline).arg(chunk.len());
                let ids: Vec<JobId> = chunk
                    .iter()
                    .map(|(_, job)| job.id.clone().unwrap_or_default())
                    .collect();
                for ((_, job), id) in chunk.iter().zip(&ids) {
                    inv.key(self.keys.job(id.as_str()));
                    inv.arg(id.as_str())
                        .arg(&job.input)
                        .arg(job.input_key.as_deref().unwrap_or(""))
                        .arg(job.resource.as_deref().unwrap_or(""))
                        .arg(job.priority)
                        .arg(millis(job.delay))
                        .arg(job.max_attempts)
                        .arg(job.stale_lock.as_str());
                }
                let mut reply = Reply::new("enqueue", self.invoke(&inv).await?)?;
                for (index, _) in chunk {
                    let id = JobId::parse(&reply.text()?)?;
                    let created = match reply.text()?.as_str() {
                        "created" => true,
                        "existing" => false,
                        other => {
                            return Err(Error::Protocol {
                                script: "enqueue",
                                detail: format!("unknown status {other:?}"),
                            })
                        }
                    };
                    results[*index] = Some(Enqueued { id, created });
                }
            }
        }
        results
            .into_iter()
            .map(|r| {
                r.ok_or(Error::Protocol {
                    script: "enqueue",
                    detail: "a job got no reply".into(),
                })
            })
            .collect()
    }

    /// Leases up to `n` jobs of `pipelines` for `worker`, each for `ttl`.
    pub async fn lease(
        &self,
        worker: &str,
        pipelines: &[&str],
        n: usize,
        ttl: Duration,
    ) -> Result<Leased> {
        check_name("worker id", worker)?;
        if pipelines.is_empty() || n == 0 {
            return Ok(Leased::default());
        }
        let mut inv = self.invocation(&scripts::LEASE);
        for p in pipelines {
            check_name("pipeline name", p)?;
            inv.key(self.keys.ready(p))
                .key(self.keys.delayed(p))
                .key(self.keys.wake(p));
        }
        inv.arg(worker).arg(millis(ttl)).arg(lock_ttl(ttl)).arg(n);
        for _ in 0..n {
            inv.arg(uuid::Uuid::new_v4().simple().to_string());
        }
        let mut reply = Reply::new("lease", self.invoke(&inv).await?)?;
        read_leased(&mut reply, ttl, false)
    }

    fn lock_key_or_job(&self, lease: &Lease) -> String {
        match &lease.resource {
            Some(res) => self.keys.lock(res),
            None => self.keys.job(lease.job.as_str()),
        }
    }

    /// The lock and parked-set keys of `resource`, or the job key twice when it has none.
    pub(crate) fn lock_keys(&self, job: &str, resource: Option<&str>) -> [String; 2] {
        match resource {
            Some(res) => [self.keys.lock(res), self.keys.parked(res)],
            None => [self.keys.job(job), self.keys.job(job)],
        }
    }

    /// LEASED → RUNNING, or → CANCELLED when a cancel was requested before the start.
    pub async fn start(&self, lease: &Lease, first_step: &str) -> Result<Started> {
        let mut inv = self.invocation(&scripts::START);
        let [lock, parked] = self.lock_keys(lease.job.as_str(), lease.resource.as_deref());
        inv.key(self.keys.job(lease.job.as_str()))
            .key(lock)
            .key(parked);
        inv.arg(&lease.token)
            .arg(first_step)
            .arg(lease.resource.as_deref().unwrap_or(""));
        let mut reply = Reply::new("start", self.invoke(&inv).await?)?;
        self.read_started(lease, &mut reply)
    }

    pub(crate) fn read_started(&self, lease: &Lease, reply: &mut Reply) -> Result<Started> {
        match reply.text()?.as_str() {
            "OK" => match reply.text()?.as_str() {
                "RUNNING" => Ok(Started::Running),
                "CANCELLED" => Ok(Started::Cancelled {
                    reason: reply.text()?,
                }),
                other => Err(Error::Protocol {
                    script: "start",
                    detail: format!("unknown state {other:?}"),
                }),
            },
            status => Err(self.refusal(
                "start",
                Op::Start,
                lease.job.as_str(),
                Some(JobState::Running),
                status,
                reply,
            )),
        }
    }

    /// Records `step` as completed with `output` (JSON text), renews the lease, and
    /// returns the reason of a pending cancel request, if any.
    pub async fn checkpoint(
        &self,
        lease: &Lease,
        step: &str,
        output: &str,
        next_step: Option<&str>,
    ) -> Result<Option<String>> {
        check_name("step name", step)?;
        if step.contains(',') || step.contains('@') {
            return Err(Error::InvalidArgument(format!(
                "step name {step:?} must not contain ',' or '@'"
            )));
        }
        serde_json::from_str::<serde::de::IgnoredAny>(output).map_err(|e| {
            Error::InvalidArgument(format!("output of step {step} is not JSON: {e}"))
        })?;
        let mut inv = self.invocation(&scripts::CHECKPOINT);
        inv.key(self.keys.job(lease.job.as_str()))
            .key(self.lock_key_or_job(lease));
        inv.arg(&lease.token)
            .arg(step)
            .arg(output)
            .arg(next_step.unwrap_or(""))
            .arg(millis(lease.ttl))
            .arg(lock_ttl(lease.ttl))
            .arg(bool_arg(lease.resource.is_some()));
        let mut reply = Reply::new("checkpoint", self.invoke(&inv).await?)?;
        self.read_checkpointed(lease, &mut reply)
    }

    pub(crate) fn read_checkpointed(
        &self,
        lease: &Lease,
        reply: &mut Reply,
    ) -> Result<Option<String>> {
        match reply.text()?.as_str() {
            "OK" => reply.opt_text(),
            status => Err(self.refusal(
                "checkpoint",
                Op::Checkpoint,
                lease.job.as_str(),
                Some(JobState::Running),
                status,
                reply,
            )),
        }
    }

    /// Renews many leases in one call; one [`Renewal`] per lease, in order.
    pub async fn renew(&self, leases: &[&Lease]) -> Result<Vec<Renewal>> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let ttl = leases.iter().map(|l| l.ttl).max().unwrap_or_default();
        let mut inv = self.invocation(&scripts::RENEW);
        inv.arg(millis(ttl)).arg(lock_ttl(ttl));
        for lease in leases {
            inv.key(self.keys.job(lease.job.as_str()))
                .key(self.lock_key_or_job(lease));
            inv.arg(&lease.token)
                .arg(bool_arg(lease.resource.is_some()));
        }
        let mut reply = Reply::new("renew", self.invoke(&inv).await?)?;
        let mut out = Vec::with_capacity(leases.len());
        for lease in leases {
            let status = reply.text()?;
            let renewal = if status == "OK" {
                Renewal::Held
            } else if let Some(reason) = status.strip_prefix("CANCEL:") {
                Renewal::CancelRequested {
                    reason: reason.to_owned(),
                }
            } else if let Some(state) = status.strip_prefix("LOST:") {
                Renewal::Lost {
                    state: state.parse().ok(),
                }
            } else {
                return Err(Error::Protocol {
                    script: "renew",
                    detail: format!("unknown status {status:?} for job {}", lease.job),
                });
            };
            out.push(renewal);
        }
        Ok(out)
    }

    /// Ends the current attempt. A retryable failure with attempts left queues a new attempt,
    /// unless a cancel was requested: then the attempt ends FAILED and the request stands.
    pub async fn finish(&self, lease: &Lease, outcome: &Outcome) -> Result<Finished> {
        let mut inv = self.invocation(&scripts::FINISH);
        let [lock, parked] = self.lock_keys(lease.job.as_str(), lease.resource.as_deref());
        inv.key(self.keys.job(lease.job.as_str()))
            .key(self.keys.ready(&lease.pipeline))
            .key(self.keys.delayed(&lease.pipeline))
            .key(self.keys.wake(&lease.pipeline))
            .key(lock)
            .key(parked);
        inv.arg(&lease.token).arg(outcome.state().as_str());
        match outcome {
            Outcome::Succeeded => {
                inv.arg("").arg("").arg("0").arg(0).arg("0").arg("");
            }
            Outcome::Failed {
                error,
                backoff,
                cleanup_needed,
            } => {
                inv.arg(&error.kind)
                    .arg(&error.message)
                    .arg(bool_arg(error.retryable))
                    .arg(millis(*backoff))
                    .arg(bool_arg(*cleanup_needed))
                    .arg("");
            }
            Outcome::Interrupted {
                reason,
                cleanup_needed,
            } => {
                inv.arg("interrupted")
                    .arg(reason)
                    .arg("1")
                    .arg(0)
                    .arg(bool_arg(*cleanup_needed))
                    .arg(reason);
            }
            Outcome::Cancelled {
                reason,
                cleanup_needed,
            } => {
                inv.arg("")
                    .arg("")
                    .arg("0")
                    .arg(0)
                    .arg(bool_arg(*cleanup_needed))
                    .arg(reason);
            }
        }
        inv.arg(lease.resource.as_deref().unwrap_or(""))
            .arg(bool_arg(matches!(outcome, Outcome::Interrupted { .. })));
        let mut reply = Reply::new("finish", self.invoke(&inv).await?)?;
        self.read_finished(lease, outcome, &mut reply)
    }

    pub(crate) fn read_finished(
        &self,
        lease: &Lease,
        outcome: &Outcome,
        reply: &mut Reply,
    ) -> Result<Finished> {
        match reply.text()?.as_str() {
            "OK" => {
                let state = reply.text()?;
                state
                    .parse()
                    .map(Finished::Ended)
                    .map_err(|_| Error::Protocol {
                        script: "finish",
                        detail: format!("unknown state {state:?}"),
                    })
            }
            "RETRY" => Ok(Finished::Retrying {
                attempt: reply.int()?,
                not_before: reply.int()?,
            }),
            status => Err(self.refusal(
                "finish",
                Op::Finish,
                lease.job.as_str(),
                Some(outcome.state()),
                status,
                reply,
            )),
        }
    }

    /// LEASED → QUEUED: hands an unstarted job back (graceful shutdown). When a
    /// cancel was requested meanwhile, LEASED → CANCELLED instead. Returns the new state.
    pub async fn release(&self, lease: &Lease) -> Result<JobState> {
        let mut inv = self.invocation(&scripts::RELEASE);
        let [lock, parked] = self.lock_keys(lease.job.as_str(), lease.resource.as_deref());
        inv.key(self.keys.job(lease.job.as_str()))
            .key(self.keys.ready(&lease.pipeline))
            .key(self.keys.wake(&lease.pipeline))
            .key(lock)
            .key(parked);
        inv.arg(&lease.token)
            .arg(lease.resource.as_deref().unwrap_or(""));
        let mut reply = Reply::new("release", self.invoke(&inv).await?)?;
        self.read_released(lease, &mut reply)
    }

    pub(crate) fn read_released(&self, lease: &Lease, reply: &mut Reply) -> Result<JobState> {
        match reply.text()?.as_str() {
            "OK" => {
                let state = reply.text()?;
                state.parse().map_err(|_| Error::Protocol {
                    script: "release",
                    detail: format!("unknown state {state:?}"),
                })
            }
            status => Err(self.refusal(
                "release",
                Op::Release,
                lease.job.as_str(),
                Some(JobState::Queued),
                status,
                reply,
            )),
        }
    }

    /// Reads the pipeline and resource of a job (immutable once created), to name its keys.
    async fn routing(&self, job: &str) -> Result<(String, Option<String>)> {
        let mut conn = self.conn().await?;
        let key = self.keys.job(job);
        let (pipeline, resource): (Option<String>, Option<String>) = self
            .timed(
                redis::cmd("HMGET")
                    .arg(&key)
                    .arg("pipeline")
                    .arg("resource")
                    .query_async(&mut conn),
            )
            .await?;
        let pipeline = pipeline.ok_or_else(|| Error::NotFound {
            queue: self.name().to_owned(),
            job: job.to_owned(),
        })?;
        check_name("pipeline name", &pipeline).map_err(|e| Error::Corrupt {
            key: key.clone(),
            field: "pipeline".into(),
            problem: e.to_string(),
        })?;
        Ok((pipeline, resource.filter(|r| !r.is_empty())))
    }

    /// Cancels a job: at once when QUEUED; a recorded request when LEASED or RUNNING.
    pub async fn cancel(&self, job: &JobId, reason: &str, by: &str) -> Result<Cancelled> {
        if reason.is_empty() {
            return Err(Error::InvalidArgument("a cancel needs a reason".into()));
        }
        let (pipeline, resource) = self.routing(job.as_str()).await?;
        let mut inv = self.invocation(&scripts::CANCEL);
        inv.key(self.keys.job(job.as_str()))
            .key(self.keys.ready(&pipeline))
            .key(self.keys.delayed(&pipeline))
            .key(match &resource {
                Some(r) => self.keys.parked(r),
                None => self.keys.job(job.as_str()),
            });
        inv.arg(reason)
            .arg(by)
            .arg(resource.as_deref().unwrap_or(""));
        let mut reply = Reply::new("cancel", self.invoke(&inv).await?)?;
        let parse_state = |reply: &mut Reply| -> Result<JobState> {
            let s = reply.text()?;
            s.parse().map_err(|_| Error::Protocol {
                script: "cancel",
                detail: format!("unknown state {s:?}"),
            })
        };
        match reply.text()?.as_str() {
            "CANCELLED" => Ok(Cancelled::Now),
            "REQUESTED" => Ok(Cancelled::Requested {
                state: parse_state(&mut reply)?,
            }),
            "ALREADY_REQUESTED" => Ok(Cancelled::AlreadyRequested {
                state: parse_state(&mut reply)?,
                reason: reply.text()?,
            }),
            status => Err(self.refusal(
                "cancel",
                Op::Cancel,
                job.as_str(),
                Some(JobState::Cancelled),
                status,
                &mut reply,
            )),
        }
    }

    /// Recovers up to `batch` expired leases (see DESIGN.md's recovery rules).
    pub async fn sweep(&self, batch: usize) -> Result<SweepReport> {
        self.sweep_with(batch, false).await
    }

    /// Reports what a sweep would do, changing nothing.
    pub async fn sweep_dry_run(&self, batch: usize) -> Result<SweepReport> {
        self.sweep_with(batch, true).await
    }

    async fn sweep_with(&self, batch: usize, dry_run: bool) -> Result<SweepReport> {
        let mut inv = self.invocation(&scripts::SWEEP);
        inv.arg(batch.max(1)).arg(bool_arg(dry_run));
        let mut reply = Reply::new("sweep", self.invoke(&inv).await?)?;
        let mut report = SweepReport {
            requeued: reply.int()?,
            cancelled: reply.int()?,
            stale: reply.int()?,
            unparked: reply.int()?,
            purged: reply.int()?,
            moves: Vec::new(),
        };
        while reply.remaining() > 0 {
            let job = JobId::parse(&reply.text()?)?;
            let mut state = || -> Result<JobState> {
                let s = reply.text()?;
                s.parse().map_err(|_| Error::Protocol {
                    script: "sweep",
                    detail: format!("unknown state {s:?}"),
                })
            };
            let from = state()?;
            let to = state()?;
            report.moves.push(SweptJob { job, from, to });
        }
        Ok(report)
    }

    /// Operator retry: a new attempt in QUEUED for a FAILED, CANCELLED or STALE job.
    /// Returns the new attempt's number.
    pub async fn retry(&self, job: &JobId, mode: RetryMode, by: &str, reason: &str) -> Result<u32> {
        let (pipeline, resource) = self.routing(job.as_str()).await?;
        let mut inv = self.invocation(&scripts::RETRY);
        let [lock, parked] = self.lock_keys(job.as_str(), resource.as_deref());
        inv.key(self.keys.job(job.as_str()))
            .key(self.keys.ready(&pipeline))
            .key(self.keys.wake(&pipeline))
            .key(lock)
            .key(parked);
        inv.arg(match mode {
            RetryMode::Resume => "resume",
            RetryMode::FromStart => "start",
        })
        .arg(by)
        .arg(reason)
        .arg(resource.as_deref().unwrap_or(""));
        let mut reply = Reply::new("retry", self.invoke(&inv).await?)?;
        match reply.text()?.as_str() {
            "OK" => reply.int(),
            "INPUT_KEY_TAKEN" => Err(Error::InputKeyTaken {
                job: job.to_string(),
                holder: reply.text()?,
            }),
            status => Err(self.refusal(
                "retry",
                Op::Retry,
                job.as_str(),
                Some(JobState::Queued),
                status,
                &mut reply,
            )),
        }
    }

    /// Operator decision on a STALE job: FAILED, CANCELLED or SUCCEEDED, with a reason.
    pub async fn resolve(
        &self,
        job: &JobId,
        as_state: JobState,
        by: &str,
        reason: &str,
    ) -> Result<()> {
        if !as_state.is_terminal() {
            return Err(Error::InvalidArgument(format!(
                "a STALE job resolves to SUCCEEDED, FAILED or CANCELLED, not {as_state}"
            )));
        }
        if reason.trim().is_empty() {
            return Err(Error::InvalidArgument(
                "resolving a STALE job needs a reason".into(),
            ));
        }
        let (_, resource) = self.routing(job.as_str()).await?;
        let mut inv = self.invocation(&scripts::RESOLVE);
        let [lock, parked] = self.lock_keys(job.as_str(), resource.as_deref());
        inv.key(self.keys.job(job.as_str()))
            .key(self.keys.cleanup())
            .key(lock)
            .key(parked);
        inv.arg(as_state.as_str())
            .arg(by)
            .arg(reason)
            .arg(resource.as_deref().unwrap_or(""));
        let mut reply = Reply::new("resolve", self.invoke(&inv).await?)?;
        match reply.text()?.as_str() {
            "OK" => Ok(()),
            status => Err(self.refusal(
                "resolve",
                Op::Resolve,
                job.as_str(),
                Some(as_state),
                status,
                &mut reply,
            )),
        }
    }

    /// Deletes up to `batch` terminal jobs beyond the retention policy; returns how many.
    pub async fn purge(&self, batch: usize) -> Result<u64> {
        let mut inv = self.invocation(&scripts::PURGE);
        inv.arg(batch.max(1));
        match self.invoke(&inv).await? {
            Value::Int(n) => Ok(u64::try_from(n).unwrap_or(0)),
            other => Err(Error::Protocol {
                script: "purge",
                detail: format!("expected an integer, got {other:?}"),
            }),
        }
    }

    /// Publishes what a worker serves about `spec`'s pipeline (see [`PipelineSpec`]).
    pub async fn register_pipeline(&self, spec: &PipelineSpec) -> Result<()> {
        let json = serde_json::to_string(spec)
            .map_err(|e| Error::InvalidArgument(format!("pipeline spec: {e}")))?;
        let mut conn = self.conn().await?;
        let _: i64 = self
            .timed(conn.hset(self.keys.pipelines(), &spec.name, json))
            .await?;
        Ok(())
    }

    /// The spec a worker published for `pipeline`, if any worker serving it ran.
    pub async fn pipeline_spec(&self, pipeline: &str) -> Result<Option<PipelineSpec>> {
        let mut conn = self.conn().await?;
        let key = self.keys.pipelines();
        let json: Option<String> = self.timed(conn.hget(&key, pipeline)).await?;
        json.map(|j| {
            serde_json::from_str(&j).map_err(|e| Error::Corrupt {
                key: key.clone(),
                field: pipeline.to_owned(),
                problem: format!("not a pipeline spec: {e}"),
            })
        })
        .transpose()
    }

    /// Claims up to `n` jobs from the cleanup list (STALE jobs resolved as FAILED
    /// or CANCELLED) whose pipeline is one of `pipelines`, for `ttl`. Mark each
    /// done with [`Queue::cleanup_done`] once its hook ran; a claim not marked
    /// done by then goes back on the list (its worker died), so a hook runs at
    /// least once. Ids come back as Redis holds them.
    pub async fn claim_cleanups(
        &self,
        n: usize,
        pipelines: &[&str],
        ttl: Duration,
    ) -> Result<Vec<String>> {
        if pipelines.is_empty() {
            return Ok(Vec::new());
        }
        let mut inv = self.invocation(&scripts::CLAIM_CLEANUP);
        inv.key(self.keys.cleanup())
            .key(self.keys.cleaning())
            .arg(n.max(1))
            .arg(millis(ttl));
        for p in pipelines {
            inv.arg(*p);
        }
        let mut reply = Reply::new("claim_cleanup", self.invoke(&inv).await?)?;
        let mut ids = Vec::with_capacity(reply.remaining());
        while reply.remaining() > 0 {
            ids.push(reply.text()?);
        }
        Ok(ids)
    }

    /// Ends the claim on a job's cleanup hook (it ran, or can never run).
    pub async fn cleanup_done(&self, id: &str) -> Result<()> {
        let mut conn = self.conn().await?;
        let _: i64 = self.timed(conn.zrem(self.keys.cleaning(), id)).await?;
        Ok(())
    }

    /// Reads a job, with every attempt record (the last one of a plain success
    /// built from the job hash). `None` when it does not exist.
    pub async fn job(&self, id: &JobId) -> Result<Option<Job>> {
        let key = self.keys.job(id.as_str());
        let mut conn = self.conn().await?;
        let map: HashMap<String, Vec<u8>> = self.timed(conn.hgetall(&key)).await?;
        if map.is_empty() {
            return Ok(None);
        }
        // the attempt records live in the queue's attempts hash, `<id>:<n>` for n = 1..attempt
        let attempt: u32 = map
            .get("attempt")
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|t| t.parse().ok())
            .unwrap_or(0);
        let mut job = Job::from_fields(&key, map)?;
        if attempt > 0 {
            let attempts_key = self.keys.attempts();
            let fields: Vec<String> = (1..=attempt.min(10_000))
                .map(|n| QueueKeys::attempt_field(id.as_str(), n))
                .collect();
            let texts: Vec<Option<Vec<u8>>> = self
                .timed(
                    redis::cmd("HMGET")
                        .arg(&attempts_key)
                        .arg(&fields)
                        .query_async(&mut conn),
                )
                .await?;
            for (field, text) in fields.iter().zip(texts) {
                let Some(text) = text else { continue };
                let record: AttemptRecord =
                    serde_json::from_slice(&text).map_err(|e| Error::Corrupt {
                        key: attempts_key.clone(),
                        field: field.clone(),
                        problem: format!("not an attempt record: {e}"),
                    })?;
                if !job.attempts.iter().any(|a| a.n == record.n) {
                    job.attempts.push(record);
                }
            }
        }
        // a plain success's last attempt is described by the job hash itself
        if let Some(last) = job.final_attempt_from_hash() {
            job.attempts.push(last);
        }
        job.attempts.sort_by_key(|a| a.n);
        Ok(Some(job))
    }
}

/// Reads a lease reply: the header, then ten values per leased job.
/// Values per leased job in a lease reply.
const LEASE_ENTRY: usize = 10;

/// Reads a lease reply. With `lenient`, a job whose values cannot be read is
/// reported in [`Leased::unreadable`] instead of failing the whole reply.
pub(crate) fn read_leased(reply: &mut Reply, ttl: Duration, lenient: bool) -> Result<Leased> {
    let next_due: i64 = reply.int()?;
    let now: i64 = reply.int()?;
    let parked: u64 = reply.int()?;
    let mut leases = Vec::new();
    let mut unreadable = Vec::new();
    while reply.remaining() > 0 {
        let mut entry = reply.take(LEASE_ENTRY);
        let job = entry.peek_text().unwrap_or_default();
        match read_lease_entry(&mut entry, ttl, now) {
            Ok(lease) => leases.push(lease),
            Err(e) if lenient => unreadable.push(UnreadableLease {
                job,
                problem: e.to_string(),
            }),
            Err(e) => return Err(e),
        }
    }
    Ok(Leased {
        leases,
        next_due: (next_due >= 0).then_some(next_due),
        now,
        parked,
        unreadable,
    })
}

/// One leased job's values: id, token, fence, attempt, pipeline, input,
/// resource, last step, its output, not-before.
fn read_lease_entry(reply: &mut Reply, ttl: Duration, now: i64) -> Result<Lease> {
    if reply.remaining() != LEASE_ENTRY {
        return Err(Error::Protocol {
            script: "lease",
            detail: format!(
                "a leased job has {} values, not {LEASE_ENTRY}",
                reply.remaining()
            ),
        });
    }
    Ok(Lease {
        job: JobId::parse(&reply.text()?)?,
        token: reply.text()?,
        fence: reply.int()?,
        attempt: reply.int()?,
        pipeline: reply.text()?,
        input: reply.text()?,
        resource: reply.opt_text()?,
        last_step: reply.opt_text()?,
        last_output: reply.opt_text()?,
        ttl,
        not_before: reply
            .opt_text()?
            .and_then(|t| t.parse().ok())
            .unwrap_or(now),
    })
}
