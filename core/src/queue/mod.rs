//! The client of one queue: its connection, the calls to its scripts, and
//! (in the submodules) one file per family of operations.
//!
//! - `enqueue.rs`: creating jobs;
//! - `holder.rs`: what a lease holder does (lease, start, checkpoint, renew,
//!   finish, release), the holder operations as settle calls of one;
//! - `settle.rs`: [`Queue::settle`], many holder operations and a lease in
//!   one round trip, and the settle call of one the single operations make;
//! - `operator.rs`: cancel, sweep, retry, resolve, purge;
//! - `records.rs`: pipeline specs, cleanup claims, and reading a job;
//! - `groups.rs`: groups of jobs, their completion jobs, and dependencies;
//! - `quarantine.rs`: jobs set aside as unreadable: list, repair, purge;
//! - `schedules.rs`: schedules: registration, tick claims, pause and resume, reads.

mod enqueue;
mod flow;
mod groups;
mod holder;
mod operator;
mod quarantine;
mod records;
mod schedules;
mod settle;

pub use crate::group::{check_group_name, Dependency, GroupPolicy, GroupStatus, ParentFailure};
pub use crate::job_spec::NewGroup;
pub use flow::PauseChange;
pub use groups::{GroupCancelled, GroupRetried};
pub use quarantine::{escape_bytes, QuarantineEntry, MAX_QUARANTINE_LISTED};
pub use schedules::{ScheduleFailing, ScheduleInfo, TickEntry, TickReply, TickedWindow};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_redis::redis::{self, RedisError, Value};

use crate::config::QueueConfig;
use crate::error::{Error, Result};
pub use crate::pool::connect_pool;
use crate::pool::{Multiplexed, RedisConn, RedisPool};
use crate::wire::args::millis;
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::ops::ScriptOp;

pub use crate::answers::{EnqueueStatus, Enqueued};
use crate::wire::scripts::{self, LuaScript};

/// A client of one queue. Cheap to clone; clones share the connection pool.
#[derive(Clone)]
pub struct Queue {
    pool: RedisPool,
    keys: QueueKeys,
    config: QueueConfig,
    shared: Arc<Mutex<Option<Multiplexed>>>,
    // set once the server turned out to have no functions (or to refuse
    // them): scripts are then called with EVALSHA
    eval_only: Arc<AtomicBool>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("base", &self.keys.base())
            .finish_non_exhaustive()
    }
}

impl Queue {
    /// Connects to Redis at `url` and checks that it answers.
    pub async fn connect(url: &str, queue: &str, config: QueueConfig) -> Result<Self> {
        let pool = connect_pool(url, &config)?;
        let queue = Queue::with_pool(pool, queue, config)?;
        queue.ping().await?;
        Ok(queue)
    }

    /// A client of `queue` over an existing pool (a [`RedisPool`], or a
    /// deadpool-redis pool of connections to one server).
    pub fn with_pool(pool: impl Into<RedisPool>, queue: &str, config: QueueConfig) -> Result<Self> {
        let keys = QueueKeys::new(&config.prefix, queue)?;
        Ok(Queue {
            pool: pool.into(),
            keys,
            config,
            shared: Arc::new(Mutex::new(None)),
            eval_only: Arc::new(AtomicBool::new(false)),
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
            eval_only: self.eval_only.clone(),
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

    /// The connections (to one server or to a cluster).
    pub fn pool(&self) -> &RedisPool {
        &self.pool
    }

    /// A connection for plain commands.
    pub(crate) async fn conn(&self) -> Result<RedisConn> {
        self.pool.get().await
    }

    /// Runs a Redis call under the response timeout.
    pub(crate) async fn timed<T>(
        &self,
        fut: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T> {
        crate::round_trip::timed(&self.config, fut).await
    }

    /// Checks that Redis answers.
    pub async fn ping(&self) -> Result<()> {
        let mut conn = self.conn().await?;
        let _: String = self
            .timed(redis::cmd("PING").query_async(&mut conn))
            .await?;
        Ok(())
    }

    /// Waits until `replicas` replicas acknowledged every write this client
    /// (and its siblings) sent so far, or `timeout` passed (`WAIT`); returns
    /// how many did (on a cluster: the fewest over the masters). Replication
    /// is asynchronous: a transition acknowledged by a master that dies before
    /// its replica received it is lost in the failover. A producer that must
    /// not lose an enqueue calls this after it and treats fewer replicas than
    /// asked as "not yet safe" (re-enqueueing with the same input key is
    /// idempotent). See docs/operations.md, "Redis Cluster".
    pub async fn wait_for_replicas(&self, replicas: u32, timeout: Duration) -> Result<u64> {
        let mut conn = self.shared_conn().await?;
        let limit = timeout.saturating_add(self.config.response_timeout);
        let wait = redis::cmd("WAIT")
            .arg(replicas)
            .arg(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX))
            .to_owned();
        match tokio::time::timeout(limit, wait.query_async::<u64>(&mut conn)).await {
            Ok(acked) => Ok(acked?),
            Err(_) => Err(Error::Timeout(limit)),
        }
    }

    /// Loads the scripts into Redis: the function library (`FUNCTION LOAD`),
    /// or each script into the script cache where the server has no
    /// functions. They are also loaded on first use.
    pub async fn load_scripts(&self) -> Result<()> {
        let mut conn = self.shared_conn().await?;
        if !self.eval_only.load(Ordering::Relaxed) && self.load_library(&mut conn).await? {
            return Ok(());
        }
        for script in scripts::all() {
            let _: String = self
                .timed(script.eval.prepare_invoke().load_async(&mut conn))
                .await?;
        }
        Ok(())
    }

    /// Loads the function library; false when the server has no functions
    /// or refuses them (scripts are then called with EVALSHA from now on).
    ///
    /// On a cluster, `FUNCTION LOAD` goes to every master (redis-rs routes it
    /// to all primaries and wants every one to succeed); a master that has the
    /// library answers "already exists", which counts as loaded, so this also
    /// loads it on a master that lacks it (a new node after resharding, one
    /// whose functions were flushed) while the others keep theirs.
    async fn load_library(&self, conn: &mut Multiplexed) -> Result<bool> {
        let loaded: Result<String> = self
            .timed(
                redis::cmd("FUNCTION")
                    .arg("LOAD")
                    .arg(scripts::library_source())
                    .query_async(conn),
            )
            .await;
        match loaded {
            Ok(_) => Ok(true),
            Err(Error::Redis(e))
                if detail_starts(&e, "Library") && detail_has(&e, "already exists") =>
            {
                Ok(true)
            }
            Err(Error::Redis(e)) if functions_unsupported(&e) => {
                tracing::info!(
                    "this Redis server does not run function libraries ({e}): scripts are called with EVALSHA"
                );
                self.eval_only.store(true, Ordering::Relaxed);
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Runs one script operation (`wire/ops/`): its call built and sent, its
    /// reply read.
    pub(crate) async fn run<O: ScriptOp>(&self, op: &O) -> Result<O::Output> {
        let mut call = self.invocation(op.script());
        op.encode(&self.keys, &mut call);
        let reply = self.invoke(&call).await?;
        op.decode(&self.keys, reply)
    }

    /// A call of `script` with the fixed KEYS and the common ARGV.
    fn invocation<'a>(&self, script: &'a LuaScript) -> ScriptCall<'a> {
        let mut inv = ScriptCall::new(script);
        for key in self.keys.fixed() {
            inv.key(key);
        }
        inv.arg(self.config.events_max_len)
            .arg(self.config.retention.keep_count)
            .arg(format!(
                "{}:{}",
                millis(self.config.retention.keep_age),
                millis(self.config.input_window)
            ));
        inv
    }

    /// A multiplexed connection shared by every script call of this client and
    /// its siblings: calls pipeline on it concurrently, and none pays the pool's
    /// per-checkout health check (an UNWATCH + PING round trip). A connection
    /// that fails at the transport level is dropped and the next call takes a
    /// fresh one from the pool.
    async fn shared_conn(&self) -> Result<Multiplexed> {
        if let Some(conn) = self.shared.lock().ok().and_then(|c| c.clone()) {
            return Ok(conn);
        }
        let conn = self.pool.shared().await?;
        if let Ok(mut slot) = self.shared.lock() {
            *slot = Some(conn.clone());
        }
        Ok(conn)
    }

    /// Drops the shared connection after a transport error.
    fn forget_shared_conn(&self) {
        if let Ok(mut slot) = self.shared.lock() {
            *slot = None;
        }
    }

    /// Runs a script call on the shared connection: `FCALL` of its function,
    /// loading the library first when the server does not have it (a new or
    /// restarted server, `FUNCTION FLUSH`, a new version of this crate), or
    /// `EVALSHA` where the server has no functions.
    async fn invoke(&self, call: &ScriptCall<'_>) -> Result<Value> {
        let mut conn = self.shared_conn().await?;
        let result = self.invoke_on(&mut conn, call).await;
        if let Err(e) = &result {
            if e.is_transient() {
                self.forget_shared_conn();
            }
        }
        result.map_err(foreign_key)
    }

    /// Runs plain commands `before` (with `ignore_errors` set), then script
    /// op `op`, in one pipeline on the shared connection: the commands land
    /// first, in one round trip. Where the server lacks the function library
    /// (or runs no functions) the script is run again on its own, after the
    /// commands. Returns the commands' values and the script's output.
    pub(crate) async fn run_after<O: ScriptOp>(
        &self,
        before: redis::Pipeline,
        op: &O,
    ) -> Result<(Vec<Value>, O::Output)> {
        let mut call = self.invocation(op.script());
        op.encode(&self.keys, &mut call);
        if self.eval_only.load(Ordering::Relaxed) {
            let values = self.pipeline(&before).await?;
            let reply = self.invoke(&call).await?;
            return Ok((values, op.decode(&self.keys, reply)?));
        }
        let mut pipe = before;
        pipe.add_command(call.fcall());
        let mut values = self.pipeline(&pipe).await?;
        let reply = match values.pop() {
            Some(Value::ServerError(e)) => {
                let e = RedisError::from(e);
                if detail_starts(&e, "Function not found") || functions_unsupported(&e) {
                    // loads the library (or turns to EVALSHA) and runs it alone
                    self.invoke(&call).await?
                } else {
                    return Err(foreign_key(Error::Redis(e)));
                }
            }
            Some(v) => v,
            None => {
                return Err(Error::Protocol {
                    script: "settle",
                    detail: "no reply to the script after the commands".into(),
                })
            }
        };
        Ok((values, op.decode(&self.keys, reply)?))
    }

    /// Runs plain commands (no script) as one pipeline on the shared
    /// connection; with `ignore_errors` set on `pipe`, an error reply is its
    /// command's value, not the call's failure.
    pub(crate) async fn pipeline(&self, pipe: &redis::Pipeline) -> Result<Vec<Value>> {
        let mut conn = self.shared_conn().await?;
        let result = self.timed(pipe.query_async::<Vec<Value>>(&mut conn)).await;
        if let Err(e) = &result {
            if e.is_transient() {
                self.forget_shared_conn();
            }
        }
        result
    }

    async fn invoke_on(&self, conn: &mut Multiplexed, call: &ScriptCall<'_>) -> Result<Value> {
        if !self.eval_only.load(Ordering::Relaxed) {
            match self.timed(call.fcall().query_async::<Value>(conn)).await {
                Err(Error::Redis(e)) if detail_starts(&e, "Function not found") => {
                    if self.load_library(conn).await? {
                        return self.timed(call.fcall().query_async::<Value>(conn)).await;
                    }
                }
                Err(Error::Redis(e)) if functions_unsupported(&e) => {
                    self.eval_only.store(true, Ordering::Relaxed);
                }
                other => return other,
            }
        }
        self.timed(call.invocation().invoke_async::<Value>(conn))
            .await
    }
}

/// A script's `BAD_KEY KEYS[<i>] is <given>, not <expected>` error reply as
/// [`Error::ForeignKey`]; any other error as it is.
fn foreign_key(e: Error) -> Error {
    let Error::Redis(re) = &e else {
        return e;
    };
    if re.code() != Some("BAD_KEY") {
        return e;
    }
    crate::wire::refusal::foreign_key(re.detail().unwrap_or_default())
}

/// Whether the detail of error reply `e` starts with `text`.
fn detail_starts(e: &RedisError, text: &str) -> bool {
    e.detail().is_some_and(|d| d.trim_start().starts_with(text))
}

/// Whether the detail of error reply `e` contains `text`.
fn detail_has(e: &RedisError, text: &str) -> bool {
    e.detail().is_some_and(|d| d.contains(text))
}

/// Whether `e` says the server does not run function libraries: a server
/// before Redis 7 (unknown command), or one whose ACL or configuration
/// refuses `FCALL` / `FUNCTION LOAD`.
fn functions_unsupported(e: &RedisError) -> bool {
    e.code() == Some("NOPERM")
        || detail_starts(e, "unknown command")
        || detail_starts(e, "unknown subcommand")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A script's `BAD_KEY` error reply, as a real server sends it, becomes
    /// [`Error::ForeignKey`] naming the position, the key and the one expected.
    #[test]
    fn a_bad_key_reply_is_a_foreign_key_error() {
        let srv = leasehold_testkit::RedisServer::start();
        let reply: redis::RedisResult<Value> = redis::cmd("EVAL")
            .arg("return redis.error_reply('BAD_KEY KEYS[3] is lh:{q}:fence:forged, not lh:{q}:fence')")
            .arg(0)
            .query(&mut srv.connection());
        let e = foreign_key(Error::Redis(reply.expect_err("an error reply")));
        match e {
            Error::ForeignKey {
                position,
                key,
                expected,
            } => {
                assert_eq!(position, 3);
                assert_eq!(key, "lh:{q}:fence:forged");
                assert_eq!(expected, "lh:{q}:fence");
            }
            other => panic!("{other:?}"),
        }
        let other = Error::Timeout(std::time::Duration::from_secs(1));
        assert!(matches!(foreign_key(other), Error::Timeout(_)));
    }
}
