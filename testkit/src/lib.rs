//! Private `redis-server` processes for leasehold's tests.
//!
//! Every test of the project talks to its **own** `redis-server`, spawned by
//! this kit in a fresh temporary directory, never to a Redis that happens to be
//! running on the machine (one may well be listening on 6379: it is ignored).
//!
//! ```no_run
//! use leasehold_testkit::RedisServer;
//!
//! let srv = RedisServer::start(); // unix socket, no TCP, no persistence
//! srv.cmd(&["SET", "k", "v"]);
//! let before = srv.dump("*");
//! // ... run an operation that must be refused ...
//! assert_eq!(before, srv.dump("*"), "a refused operation changed nothing");
//! ```
//!
//! # Process hygiene
//!
//! * [`RedisServer`]'s `Drop` SIGKILLs and reaps the server, then removes its
//!   temporary directory (socket, log).
//! * On Linux the server is additionally spawned with
//!   `PR_SET_PDEATHSIG = SIGKILL`, so a test process that is itself killed
//!   (SIGKILL, abort, timeout) does not leak `redis-server` processes.
//!   The kernel sends that signal when the *thread* that forked the child
//!   exits, not the process. To make this harmless the kit forks every server
//!   from one dedicated spawner thread that lives as long as the test process,
//!   so a [`RedisServer`] may be created on any thread (a tokio worker, a
//!   short-lived `std::thread`, ...) and moved freely between threads.
//!
//! # Finding the binary
//!
//! See [`redis_server_binary`]: `LEASEHOLD_REDIS_SERVER` overrides, otherwise
//! `redis-server` is looked up on `PATH`.

#![warn(missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::future::Future;
use std::io::{self, Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use deadpool_redis::redis;

/// How long [`RedisServer::start`] and friends wait for the server to answer.
const STARTUP_DEADLINE: Duration = Duration::from_secs(20);
/// How long [`RedisServer::stop`] waits after SIGTERM before resorting to SIGKILL.
const STOP_DEADLINE: Duration = Duration::from_secs(10);
/// Read/write timeout of the connections the kit's helpers open for themselves.
const HELPER_IO_TIMEOUT: Duration = Duration::from_secs(60);
/// Connect timeout for every connection the kit opens.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How many times [`RedisServer::start_tcp`] picks a new port after a collision.
const TCP_ATTEMPTS: usize = 5;
/// Name of the environment variable that overrides the `redis-server` binary.
const BINARY_ENV: &str = "LEASEHOLD_REDIS_SERVER";
/// Lines of the server log quoted in panic messages.
const LOG_TAIL_LINES: usize = 40;

/// Where a [`RedisServer`] listens.
#[derive(Debug, Clone)]
enum Endpoint {
    Unix(PathBuf),
    Tcp(u16),
}

/// A private `redis-server` child process listening on a unix socket or on a
/// loopback TCP port, with persistence disabled (`--save '' --appendonly no`).
///
/// Created with [`RedisServer::start`], [`RedisServer::start_tcp`] or
/// [`RedisServer::start_with`]. It is killed and reaped, and its temporary
/// directory removed, when the value is dropped. Helpers such as
/// [`cmd`](RedisServer::cmd), [`dump`](RedisServer::dump) and
/// [`info`](RedisServer::info) open a fresh synchronous connection per call
/// and panic with a descriptive message on any transport error, which is what
/// a test wants.
#[derive(Debug)]
pub struct RedisServer {
    /// The running child, `None` after [`kill`](RedisServer::kill) or
    /// [`stop`](RedisServer::stop).
    child: Option<Child>,
    endpoint: Endpoint,
    extra_args: Vec<String>,
    log_path: PathBuf,
    client: redis::Client,
    /// Dropped last: holds the socket, the log and the server's working dir.
    dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts a private `redis-server` listening only on a unix socket in a
    /// fresh temporary directory (`--port 0`: no TCP), with `--save ''` and
    /// `--appendonly no`, and waits (up to 20 s, polling `PING`) until it
    /// answers.
    ///
    /// # Panics
    ///
    /// If `redis-server` cannot be found (the message says how to install it),
    /// cannot be spawned, exits early or does not answer in time; the message
    /// then quotes the tail of the server's log.
    #[track_caller]
    pub fn start() -> RedisServer {
        Self::start_with(&[])
    }

    /// Like [`start`](RedisServer::start) but listening on `127.0.0.1` on a
    /// free TCP port (found by binding port 0); if the port is taken between
    /// picking and starting, a new one is picked, a few times.
    ///
    /// # Panics
    ///
    /// As [`start`](RedisServer::start).
    #[track_caller]
    pub fn start_tcp() -> RedisServer {
        Self::start_tcp_with(&[])
    }

    /// Like [`start`](RedisServer::start) (unix socket) with extra
    /// `redis-server` command-line arguments appended, e.g.
    /// `&["--maxmemory", "10mb"]`. They are kept for
    /// [`restart`](RedisServer::restart).
    ///
    /// # Panics
    ///
    /// As [`start`](RedisServer::start), including when redis-server rejects
    /// an argument (its complaint is quoted).
    #[track_caller]
    pub fn start_with(args: &[&str]) -> RedisServer {
        let dir = make_temp_dir();
        let socket = dir.path().join("redis.sock");
        let endpoint = Endpoint::Unix(socket);
        let mut srv = Self::new_stopped(dir, endpoint, args);
        if let Err(failure) = srv.spawn_and_wait() {
            panic!("{}", failure.message);
        }
        srv
    }

    /// Like [`start_tcp`](RedisServer::start_tcp) with extra `redis-server`
    /// command-line arguments appended (kept for
    /// [`restart`](RedisServer::restart)).
    ///
    /// # Panics
    ///
    /// As [`start`](RedisServer::start).
    #[track_caller]
    pub fn start_tcp_with(args: &[&str]) -> RedisServer {
        let mut last_failure = String::new();
        for attempt in 1..=TCP_ATTEMPTS {
            let port = free_tcp_port();
            let dir = make_temp_dir();
            let mut srv = Self::new_stopped(dir, Endpoint::Tcp(port), args);
            match srv.spawn_and_wait() {
                Ok(()) => return srv,
                Err(failure) if failure.retryable => {
                    last_failure = format!("attempt {attempt} (port {port}): {}", failure.message);
                }
                Err(failure) => panic!("{}", failure.message),
            }
        }
        panic!(
            "could not start redis-server on a free TCP port after {TCP_ATTEMPTS} attempts; \
             last failure: {last_failure}"
        );
    }

    /// The URL to give redis-rs (or deadpool-redis):
    /// `redis+unix:///path/to/redis.sock` for a unix-socket server,
    /// `redis://127.0.0.1:PORT` for a TCP one.
    pub fn url(&self) -> String {
        endpoint_url(&self.endpoint)
    }

    /// The TCP port, or `None` for a unix-socket server.
    pub fn port(&self) -> Option<u16> {
        match self.endpoint {
            Endpoint::Tcp(port) => Some(port),
            Endpoint::Unix(_) => None,
        }
    }

    /// The unix socket's path, or `None` for a TCP server.
    pub fn socket_path(&self) -> Option<&Path> {
        match &self.endpoint {
            Endpoint::Unix(path) => Some(path),
            Endpoint::Tcp(_) => None,
        }
    }

    /// The server's process id, or `None` after [`kill`](RedisServer::kill)
    /// or [`stop`](RedisServer::stop) (until [`restart`](RedisServer::restart)).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The directory holding the socket and the server's log
    /// (`redis.log`); removed on drop.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The tail (last 40 lines) of the server's log, as quoted in panics.
    pub fn log_tail(&self) -> String {
        log_tail(&self.log_path)
    }

    /// SIGKILLs the server (simulates a crash) and reaps it; all data is lost.
    /// Does nothing if it is not running.
    #[track_caller]
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = child.id();
            if let Err(e) = child.kill() {
                panic!("failed to SIGKILL redis-server (pid {pid}): {e}");
            }
            if let Err(e) = child.wait() {
                panic!("failed to reap redis-server (pid {pid}) after SIGKILL: {e}");
            }
        }
    }

    /// Stops the server gracefully: SIGTERM, then waits for it to exit (after
    /// 10 s it is SIGKILLed and the call panics). Does nothing if it is not
    /// running.
    #[track_caller]
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = child.id();
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        send_signal(pid, libc::SIGTERM);
        let deadline = Instant::now() + STOP_DEADLINE;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "redis-server (pid {pid}) did not exit within {STOP_DEADLINE:?} of SIGTERM \
                         (it has been SIGKILLed); log tail:\n{}",
                        self.log_tail()
                    );
                }
                Err(e) => panic!("failed to wait for redis-server (pid {pid}): {e}"),
            }
        }
    }

    /// Starts the server again on the same socket or port, with the same
    /// arguments, and waits until it answers. If it is running it is first
    /// [`stop`](RedisServer::stop)ped. Data is whatever survived (with the
    /// default arguments: nothing).
    ///
    /// # Panics
    ///
    /// As [`start`](RedisServer::start), e.g. when another process took the
    /// TCP port meanwhile.
    #[track_caller]
    pub fn restart(&mut self) {
        if self.is_running() {
            self.stop();
        }
        if let Err(failure) = self.spawn_and_wait() {
            panic!("restart failed: {}", failure.message);
        }
    }

    /// Whether the server process is still alive (an exited one is reaped).
    pub fn is_running(&mut self) -> bool {
        let Some(child) = self.child.as_mut() else {
            return false;
        };
        match child.try_wait() {
            Ok(None) => true,
            Ok(Some(_)) => {
                self.child = None;
                false
            }
            Err(e) => panic!("failed to poll redis-server (pid {}): {e}", child.id()),
        }
    }

    /// Deletes every key of every database (`FLUSHALL`).
    #[track_caller]
    pub fn flush(&self) {
        let reply = self.cmd(&["FLUSHALL"]);
        if !matches!(reply, redis::Value::Okay) {
            panic!("FLUSHALL on {} answered {reply:?}", self.url());
        }
    }

    /// A new synchronous connection to the server, for inspection in tests.
    ///
    /// # Panics
    ///
    /// If the server does not accept the connection.
    #[track_caller]
    pub fn connection(&self) -> redis::Connection {
        match self.client.get_connection_with_timeout(CONNECT_TIMEOUT) {
            Ok(con) => con,
            Err(e) => panic!(
                "cannot connect to the test redis-server at {} (is it running? pid {:?}): {e}",
                self.url(),
                self.pid()
            ),
        }
    }

    /// Runs one command on a fresh connection and returns the raw reply, e.g.
    /// `srv.cmd(&["HGETALL", "k"])`. A Redis error reply is returned as
    /// [`redis::Value::ServerError`] rather than panicking, so tests can assert
    /// on refusals.
    ///
    /// # Panics
    ///
    /// On a transport error (server down, timeout after 60 s, ...).
    #[track_caller]
    pub fn cmd(&self, args: &[&str]) -> redis::Value {
        assert!(
            !args.is_empty(),
            "RedisServer::cmd needs at least the command name"
        );
        let mut con = self.helper_connection();
        self.run(&mut con, args)
    }

    /// A deterministic dump of every key matching `pattern` (found with
    /// `SCAN`, never `KEYS`), in database 0, for comparing before/after
    /// states, e.g. to prove that a refused operation changed nothing.
    ///
    /// Maps each key to `"<type> <value>"`, followed by `" [ttl]"` when the
    /// key has an expiry. Values are rendered with byte strings quoted and
    /// escaped (non-UTF-8 ones as `0x..` hex):
    ///
    /// * string: `"v"`;
    /// * hash: `{"f1": "v1", "f2": "v2"}` sorted by field;
    /// * list: `["a", "b"]` in list order;
    /// * set: `{"a", "b"}` sorted;
    /// * zset: `[("m", "1.5"), ...]` in rank order, with scores;
    /// * stream: its entries (`id {field: value, ...}`), its last generated
    ///   id, and per consumer group its last delivered id and pending entries
    ///   (id, consumer, delivery count; idle times are omitted);
    /// * any other type: the type name only.
    ///
    /// Keys that are not valid UTF-8 are given as `0x..` hex.
    #[track_caller]
    pub fn dump(&self, pattern: &str) -> BTreeMap<String, String> {
        let mut con = self.helper_connection();
        let mut keys: BTreeSet<Vec<u8>> = BTreeSet::new();
        let mut cursor = String::from("0");
        loop {
            let reply = self.run(
                &mut con,
                &["SCAN", &cursor, "MATCH", pattern, "COUNT", "1000"],
            );
            let (next, batch): (String, Vec<Vec<u8>>) = self.convert(reply, "SCAN");
            keys.extend(batch);
            if next == "0" {
                break;
            }
            cursor = next;
        }

        let mut out = BTreeMap::new();
        for key in keys {
            if let Some(rendered) = self.render_key(&mut con, &key) {
                out.insert(render_key_name(&key), rendered);
            }
        }
        out
    }

    /// The text of `INFO <section>`, e.g. `srv.info("commandstats")`. Note that
    /// the kit's own helpers also issue commands that show up in statistics;
    /// `srv.cmd(&["CONFIG", "RESETSTAT"])` resets them.
    #[track_caller]
    pub fn info(&self, section: &str) -> String {
        let reply = self.cmd(&["INFO", section]);
        match reply {
            redis::Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            redis::Value::VerbatimString { text, .. } => text,
            redis::Value::SimpleString(text) => text,
            other => panic!("INFO {section} answered {other:?}"),
        }
    }

    // ---- internals -------------------------------------------------------

    fn new_stopped(dir: tempfile::TempDir, endpoint: Endpoint, args: &[&str]) -> RedisServer {
        let url = endpoint_url(&endpoint);
        let client = match redis::Client::open(url.as_str()) {
            Ok(client) => client,
            Err(e) => panic!("redis-rs rejected the test server URL {url:?}: {e}"),
        };
        RedisServer {
            child: None,
            log_path: dir.path().join("redis.log"),
            endpoint,
            extra_args: args.iter().map(|a| a.to_string()).collect(),
            client,
            dir,
        }
    }

    fn command_line(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        match &self.endpoint {
            Endpoint::Unix(path) => {
                args.extend(["--port".into(), "0".into(), "--unixsocket".into()]);
                args.push(path.clone().into());
                args.extend(["--unixsocketperm".into(), "700".into()]);
            }
            Endpoint::Tcp(port) => {
                args.extend(["--port".into(), port.to_string().into()]);
                args.extend(["--bind".into(), "127.0.0.1".into()]);
            }
        }
        args.extend([
            "--save".into(),
            "".into(),
            "--appendonly".into(),
            "no".into(),
        ]);
        args.extend(["--daemonize".into(), "no".into(), "--dir".into()]);
        args.push(self.dir.path().into());
        args.extend(self.extra_args.iter().map(OsString::from));
        args
    }

    /// Spawns the server and waits until it answers `PING` *and* reports our
    /// child's pid (so a foreign server that grabbed the port is not taken
    /// for ours).
    fn spawn_and_wait(&mut self) -> Result<(), StartFailure> {
        debug_assert!(self.child.is_none());
        if let Endpoint::Unix(path) = &self.endpoint {
            // A SIGKILLed server leaves its socket behind.
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => panic!("cannot remove stale socket {}: {e}", path.display()),
            }
        }
        let binary = redis_server_binary();
        let log = match OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
        {
            Ok(f) => f,
            Err(e) => panic!(
                "cannot open redis-server log {}: {e}",
                self.log_path.display()
            ),
        };
        let log_err = match log.try_clone() {
            Ok(f) => f,
            Err(e) => panic!("cannot duplicate redis-server log handle: {e}"),
        };
        let log_start = log_len(&self.log_path);

        let mut command = Command::new(&binary);
        command
            .args(self.command_line())
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err));
        let child = match spawn_from_kit_thread(command) {
            Ok(child) => child,
            Err(e) => panic!("cannot spawn {}: {e}", binary.display()),
        };
        let pid = child.id();
        self.child = Some(child);

        let started = Instant::now();
        let mut last_error;
        loop {
            match self.child.as_mut().map(Child::try_wait) {
                Some(Ok(None)) => {}
                Some(Ok(Some(status))) => {
                    self.child = None;
                    let tail = log_tail_from(&self.log_path, log_start);
                    let retryable = tail.contains("Address already in use");
                    return Err(StartFailure {
                        retryable,
                        message: format!(
                            "redis-server ({}) exited during startup with {status} \
                             (listening on {}); log tail:\n{tail}",
                            binary.display(),
                            self.url()
                        ),
                    });
                }
                Some(Err(e)) => panic!("failed to poll redis-server (pid {pid}): {e}"),
                None => unreachable!("child was just set"),
            }
            last_error = match self.probe(pid) {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if started.elapsed() > STARTUP_DEADLINE {
                let tail = log_tail_from(&self.log_path, log_start);
                self.kill();
                // A foreign process answering on "our" port is a collision too.
                let retryable = last_error.contains("is not ours");
                return Err(StartFailure {
                    retryable,
                    message: format!(
                        "redis-server ({}, pid {pid}) did not answer PING on {} within \
                         {STARTUP_DEADLINE:?} (last error: {last_error}); log tail:\n{tail}",
                        binary.display(),
                        self.url()
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// One readiness probe: connect, PING, and check the answering pid.
    fn probe(&self, pid: u32) -> Result<(), String> {
        let mut con = self
            .client
            .get_connection_with_timeout(Duration::from_millis(500))
            .map_err(|e| format!("connect: {e}"))?;
        con.set_read_timeout(Some(Duration::from_secs(2)))
            .map_err(|e| format!("set timeout: {e}"))?;
        let pong: String = redis::cmd("PING")
            .query(&mut con)
            .map_err(|e| format!("PING: {e}"))?;
        if pong != "PONG" {
            return Err(format!("PING answered {pong:?}"));
        }
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query(&mut con)
            .map_err(|e| format!("INFO server: {e}"))?;
        let answering = info
            .lines()
            .find_map(|l| l.strip_prefix("process_id:"))
            .map(str::trim);
        if answering != Some(pid.to_string().as_str()) {
            return Err(format!(
                "the server answering is not ours (process_id {answering:?}, ours is {pid})"
            ));
        }
        Ok(())
    }

    #[track_caller]
    fn helper_connection(&self) -> redis::Connection {
        let con = self.connection();
        if let Err(e) = con
            .set_read_timeout(Some(HELPER_IO_TIMEOUT))
            .and_then(|()| con.set_write_timeout(Some(HELPER_IO_TIMEOUT)))
        {
            panic!("cannot set timeouts on a connection to {}: {e}", self.url());
        }
        con
    }

    #[track_caller]
    fn run(&self, con: &mut redis::Connection, args: &[&str]) -> redis::Value {
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        self.run_cmd(con, &cmd, args)
    }

    #[track_caller]
    fn run_bytes(
        &self,
        con: &mut redis::Connection,
        name: &str,
        key: &[u8],
        rest: &[&str],
    ) -> redis::Value {
        let mut cmd = redis::cmd(name);
        cmd.arg(key);
        for arg in rest {
            cmd.arg(*arg);
        }
        let mut shown = vec![name];
        let key_shown = render_key_name(key);
        shown.push(&key_shown);
        shown.extend_from_slice(rest);
        self.run_cmd(con, &cmd, &shown)
    }

    #[track_caller]
    fn run_cmd(
        &self,
        con: &mut redis::Connection,
        cmd: &redis::Cmd,
        shown: &[&str],
    ) -> redis::Value {
        use redis::ConnectionLike as _;
        match con.req_command(cmd) {
            Ok(value) => value,
            Err(e) => panic!(
                "{} on the test redis-server at {} failed: {e}",
                shown.join(" "),
                self.url()
            ),
        }
    }

    #[track_caller]
    fn convert<T: redis::FromRedisValue>(&self, value: redis::Value, what: &str) -> T {
        if let redis::Value::ServerError(e) = &value {
            panic!("{what} on {} answered an error: {e:?}", self.url());
        }
        match T::from_redis_value(value.clone()) {
            Ok(v) => v,
            Err(e) => panic!("unexpected reply to {what}: {value:?} ({e})"),
        }
    }

    #[track_caller]
    fn query_key<T: redis::FromRedisValue>(
        &self,
        con: &mut redis::Connection,
        name: &str,
        key: &[u8],
        rest: &[&str],
    ) -> T {
        let value = self.run_bytes(con, name, key, rest);
        self.convert(value, name)
    }

    /// Renders one key, or `None` if it vanished since `SCAN`.
    fn render_key(&self, con: &mut redis::Connection, key: &[u8]) -> Option<String> {
        let kind: String = self.query_key(con, "TYPE", key, &[]);
        let mut out = kind.clone();
        out.push(' ');
        match kind.as_str() {
            "none" => return None,
            "string" => {
                let v: Option<Vec<u8>> = self.query_key(con, "GET", key, &[]);
                out.push_str(&render_bytes(&v?));
            }
            "hash" => {
                let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = self.query_key(con, "HGETALL", key, &[]);
                pairs.sort();
                render_pairs(&mut out, &pairs);
            }
            "list" => {
                let items: Vec<Vec<u8>> = self.query_key(con, "LRANGE", key, &["0", "-1"]);
                render_seq(&mut out, '[', ']', &items);
            }
            "set" => {
                let mut items: Vec<Vec<u8>> = self.query_key(con, "SMEMBERS", key, &[]);
                items.sort();
                render_seq(&mut out, '{', '}', &items);
            }
            "zset" => {
                let items: Vec<(Vec<u8>, String)> =
                    self.query_key(con, "ZRANGE", key, &["0", "-1", "WITHSCORES"]);
                out.push('[');
                for (i, (member, score)) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    let _ = write!(out, "({}, {score:?})", render_bytes(member));
                }
                out.push(']');
            }
            "stream" => self.render_stream(con, key, &mut out),
            _ => out.push_str("<not rendered>"),
        }
        let pttl: i64 = self.query_key(con, "PTTL", key, &[]);
        if pttl >= 0 {
            out.push_str(" [ttl]");
        }
        Some(out)
    }

    fn render_stream(&self, con: &mut redis::Connection, key: &[u8], out: &mut String) {
        let entries: Vec<StreamEntry> = {
            let value = self.run_bytes(con, "XRANGE", key, &["-", "+"]);
            self.convert_stream_entries(value)
        };
        out.push('[');
        for (i, (id, fields)) in entries.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(id);
            out.push(' ');
            render_pairs(out, fields);
        }
        out.push(']');

        // XINFO STREAM <key>: the key comes after the subcommand.
        let info = {
            let mut cmd = redis::cmd("XINFO");
            cmd.arg("STREAM").arg(key);
            let value = self.run_cmd(con, &cmd, &["XINFO", "STREAM", &render_key_name(key)]);
            flat_map(self.convert::<Vec<redis::Value>>(value, "XINFO STREAM"))
        };
        let last_id = info.get("last-generated-id").cloned().unwrap_or_default();
        let _ = write!(out, " last-id={last_id}");

        let groups: Vec<redis::Value> = {
            let mut cmd = redis::cmd("XINFO");
            cmd.arg("GROUPS").arg(key);
            let value = self.run_cmd(con, &cmd, &["XINFO", "GROUPS", &render_key_name(key)]);
            self.convert(value, "XINFO GROUPS")
        };
        let mut rendered_groups: Vec<String> = Vec::new();
        for group in groups {
            let fields = flat_map(self.convert::<Vec<redis::Value>>(group, "XINFO GROUPS entry"));
            let name = fields.get("name").cloned().unwrap_or_default();
            let last_delivered = fields.get("last-delivered-id").cloned().unwrap_or_default();
            let pending: Vec<(String, String, i64, i64)> = {
                let mut cmd = redis::cmd("XPENDING");
                cmd.arg(key).arg(&name).arg("-").arg("+").arg(100_000);
                let value = self.run_cmd(con, &cmd, &["XPENDING", &render_key_name(key), &name]);
                self.convert(value, "XPENDING")
            };
            let pending: Vec<String> = pending
                .into_iter()
                .map(|(id, consumer, _idle, deliveries)| format!("{id}@{consumer}x{deliveries}"))
                .collect();
            rendered_groups.push(format!(
                "{name:?}: last-delivered={last_delivered} pending=[{}]",
                pending.join(", ")
            ));
        }
        rendered_groups.sort();
        let _ = write!(out, " groups={{{}}}", rendered_groups.join(", "));
    }

    fn convert_stream_entries(&self, value: redis::Value) -> Vec<StreamEntry> {
        let raw: Vec<(String, Vec<Vec<u8>>)> = self.convert(value, "XRANGE");
        raw.into_iter()
            .map(|(id, flat)| {
                let pairs = flat
                    .chunks(2)
                    .map(|c| (c[0].clone(), c.get(1).cloned().unwrap_or_default()))
                    .collect();
                (id, pairs)
            })
            .collect()
    }
}

impl Drop for RedisServer {
    /// SIGKILLs and reaps the server; the temporary directory is then removed.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Never panic in drop: it may run during unwinding.
            if let Err(e) = child.kill() {
                eprintln!(
                    "leasehold-testkit: failed to SIGKILL redis-server (pid {}): {e}",
                    child.id()
                );
            }
            if let Err(e) = child.wait() {
                eprintln!(
                    "leasehold-testkit: failed to reap redis-server (pid {}): {e}",
                    child.id()
                );
            }
        }
    }
}

/// A stream entry: its id and its field/value pairs in order.
type StreamEntry = (String, Vec<(Vec<u8>, Vec<u8>)>);

/// Why a start attempt failed, and whether picking another port may help.
struct StartFailure {
    retryable: bool,
    message: String,
}

/// The `redis-server` binary the kit runs: the `LEASEHOLD_REDIS_SERVER`
/// environment variable if set (and non-empty), else the first executable
/// `redis-server` on `PATH`, else one in `/usr/bin`, `/usr/sbin`,
/// `/usr/local/bin`.
///
/// # Panics
///
/// If none is found, saying how to install it; or if the variable names a
/// file that does not exist.
pub fn redis_server_binary() -> PathBuf {
    if let Some(path) = std::env::var_os(BINARY_ENV).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        if !is_executable(&path) {
            panic!("{BINARY_ENV}={} is not an executable file", path.display());
        }
        return path;
    }
    let path_dirs = std::env::var_os("PATH").unwrap_or_default();
    let fallback = ["/usr/bin", "/usr/sbin", "/usr/local/bin"].map(PathBuf::from);
    std::env::split_paths(&path_dirs)
        .chain(fallback)
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| is_executable(candidate))
        .unwrap_or_else(|| {
            panic!(
                "redis-server not found on PATH: install it with `apt-get install redis-server` \
                 (or point {BINARY_ENV} at a redis-server binary)"
            )
        })
}

/// Waits until `cond()` returns true, polling every 20 ms.
///
/// # Panics
///
/// With a message naming `what` if `cond` is still false after `deadline`.
#[track_caller]
pub fn wait_until(deadline: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    loop {
        if cond() {
            return;
        }
        if started.elapsed() >= deadline {
            panic!("timed out after {deadline:?} waiting until {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Async version of [`wait_until`] for tokio tests: awaits `cond()` every
/// 20 ms (sleeping with `tokio::time::sleep`, so the runtime keeps running).
///
/// # Panics
///
/// With a message naming `what` if `cond` is still false after `deadline`.
pub async fn wait_until_async<F, Fut>(deadline: Duration, what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if cond().await {
            return;
        }
        if started.elapsed() >= deadline {
            panic!("timed out after {deadline:?} waiting until {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---- TCP proxy -------------------------------------------------------------

/// A loopback TCP proxy in front of a server (usually a
/// [`RedisServer::start_tcp`] one), for simulating a network cut-off between
/// one client process and Redis while others keep talking to Redis directly.
///
/// It runs on plain threads (one accept thread, two copy threads per
/// connection). [`block`](TcpProxy::block) shuts down every live connection
/// and makes the proxy close every new one as soon as it is accepted (clients
/// see the connection reset, as when a firewall rejects them);
/// [`unblock`](TcpProxy::unblock) lets new connections through again.
/// Dropping the proxy closes everything and joins its accept thread.
///
/// ```no_run
/// use leasehold_testkit::{RedisServer, TcpProxy};
///
/// let srv = RedisServer::start_tcp();
/// let proxy = TcpProxy::start(format!("127.0.0.1:{}", srv.port().unwrap()).parse().unwrap());
/// let url = proxy.url(); // give this to the process to cut off
/// proxy.block();
/// // ... the process behind the proxy cannot reach Redis ...
/// proxy.unblock();
/// ```
#[derive(Debug)]
pub struct TcpProxy {
    addr: std::net::SocketAddr,
    state: std::sync::Arc<ProxyState>,
    accept: Option<std::thread::JoinHandle<()>>,
}

#[derive(Debug, Default)]
struct ProxyState {
    blocked: std::sync::atomic::AtomicBool,
    stopping: std::sync::atomic::AtomicBool,
    next_id: std::sync::atomic::AtomicU64,
    /// Live connections: id → (client side, upstream side).
    live: Mutex<BTreeMap<u64, (std::net::TcpStream, std::net::TcpStream)>>,
}

impl ProxyState {
    fn shutdown_all(&self) {
        let live = std::mem::take(&mut *self.live.lock().unwrap_or_else(|p| p.into_inner()));
        for (client, upstream) in live.into_values() {
            let _ = client.shutdown(std::net::Shutdown::Both);
            let _ = upstream.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl TcpProxy {
    /// Starts a proxy on a free port of `127.0.0.1` forwarding to `target`.
    ///
    /// # Panics
    ///
    /// If it cannot bind a port or start its thread.
    #[track_caller]
    pub fn start(target: std::net::SocketAddr) -> TcpProxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("TcpProxy: cannot bind 127.0.0.1:0: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("TcpProxy: no local address: {e}"));
        let state = std::sync::Arc::new(ProxyState::default());
        let accept_state = state.clone();
        let accept = std::thread::Builder::new()
            .name("leasehold-testkit-proxy".into())
            .spawn(move || proxy_accept_loop(listener, target, accept_state))
            .unwrap_or_else(|e| panic!("TcpProxy: cannot start the accept thread: {e}"));
        TcpProxy {
            addr,
            state,
            accept: Some(accept),
        }
    }

    /// The address clients connect to.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// `redis://127.0.0.1:PORT` of the proxy.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// Cuts every live connection and closes new ones as soon as they are accepted.
    pub fn block(&self) {
        self.state
            .blocked
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.state.shutdown_all();
    }

    /// Lets new connections through again (connections cut by
    /// [`block`](TcpProxy::block) stay cut: clients reconnect).
    pub fn unblock(&self) {
        self.state
            .blocked
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether the proxy is blocking.
    pub fn is_blocked(&self) -> bool {
        self.state.blocked.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many proxied connections are open now.
    pub fn live_connections(&self) -> usize {
        self.state
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }
}

impl Drop for TcpProxy {
    /// Closes every connection, stops accepting and joins the accept thread.
    fn drop(&mut self) {
        self.state
            .stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.state.shutdown_all();
        // wake the blocking accept()
        let _ = std::net::TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(handle) = self.accept.take() {
            let _ = handle.join();
        }
    }
}

fn proxy_accept_loop(
    listener: TcpListener,
    target: std::net::SocketAddr,
    state: std::sync::Arc<ProxyState>,
) {
    use std::sync::atomic::Ordering;
    for incoming in listener.incoming() {
        if state.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = incoming else {
            continue;
        };
        if state.blocked.load(Ordering::SeqCst) {
            let _ = client.shutdown(std::net::Shutdown::Both);
            continue;
        }
        let Ok(upstream) = std::net::TcpStream::connect_timeout(&target, CONNECT_TIMEOUT) else {
            let _ = client.shutdown(std::net::Shutdown::Both);
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = upstream.set_nodelay(true);
        let handles = (
            client.try_clone(),
            upstream.try_clone(),
            upstream.try_clone(),
            client.try_clone(),
        );
        let (Ok(c_read), Ok(u_write), Ok(u_read), Ok(c_write)) = handles else {
            continue;
        };
        let id = state.next_id.fetch_add(1, Ordering::SeqCst);
        {
            let mut live = state.live.lock().unwrap_or_else(|p| p.into_inner());
            // A block() may have run since the check above: do not let this one through.
            if state.blocked.load(Ordering::SeqCst) || state.stopping.load(Ordering::SeqCst) {
                let _ = client.shutdown(std::net::Shutdown::Both);
                let _ = upstream.shutdown(std::net::Shutdown::Both);
                continue;
            }
            live.insert(id, (client, upstream));
        }
        let ends = std::sync::Arc::new(std::sync::atomic::AtomicU8::new(0));
        for (mut from, mut to) in [(c_read, u_write), (u_read, c_write)] {
            let st = state.clone();
            let ends = ends.clone();
            let spawned = std::thread::Builder::new()
                .name("leasehold-testkit-proxy-copy".into())
                .spawn(move || {
                    let _ = io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Write);
                    if ends.fetch_add(1, Ordering::SeqCst) == 1 {
                        let removed = st
                            .live
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .remove(&id);
                        if let Some((client, upstream)) = removed {
                            let _ = client.shutdown(std::net::Shutdown::Both);
                            let _ = upstream.shutdown(std::net::Shutdown::Both);
                        }
                    }
                });
            if spawned.is_err() {
                state.shutdown_all();
            }
        }
    }
}

// ---- helpers ---------------------------------------------------------------

type SpawnJob = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `command` from the kit's long-lived spawner thread, with
/// `PR_SET_PDEATHSIG = SIGKILL` on Linux. The thread never exits before the
/// process does, so the death signal fires only when the test process dies.
fn spawn_from_kit_thread(mut command: Command) -> io::Result<Child> {
    set_parent_death_signal(&mut command);
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnJob>>> = OnceLock::new();
    let sender = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        let spawned = std::thread::Builder::new()
            .name("leasehold-testkit-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
            });
        if let Err(e) = spawned {
            panic!("cannot start the testkit's spawner thread: {e}");
        }
        Mutex::new(tx)
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    {
        let sender = sender
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if sender.send((command, reply_tx)).is_err() {
            panic!("the testkit's spawner thread is gone");
        }
    }
    match reply_rx.recv() {
        Ok(result) => result,
        Err(_) => panic!("the testkit's spawner thread dropped a spawn request"),
    }
}

#[cfg(target_os = "linux")]
fn set_parent_death_signal(command: &mut Command) {
    use std::os::unix::process::CommandExt as _;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the hook only calls async-signal-safe functions (prctl, getppid).
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect.
            if libc::getppid() != parent {
                return Err(io::Error::other(
                    "test process exited while spawning redis-server",
                ));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn set_parent_death_signal(_command: &mut Command) {}

fn send_signal(pid: u32, signal: libc::c_int) {
    // SAFETY: plain syscall on a pid we own and have not reaped yet.
    let rc = unsafe { libc::kill(pid as libc::pid_t, signal) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ESRCH) {
            panic!("failed to send signal {signal} to redis-server (pid {pid}): {e}");
        }
    }
}

/// A fresh temporary directory whose socket path stays within the unix
/// socket path limit (108 bytes on Linux, 104 on macOS): falls back to
/// `/tmp` if `TMPDIR` is too deep.
fn make_temp_dir() -> tempfile::TempDir {
    let make = |base: &Path| {
        tempfile::Builder::new()
            .prefix("leasehold-redis-")
            .tempdir_in(base)
            .unwrap_or_else(|e| panic!("cannot create a temp dir in {}: {e}", base.display()))
    };
    let dir = make(&std::env::temp_dir());
    if dir.path().join("redis.sock").as_os_str().len() < 100 {
        dir
    } else {
        make(Path::new("/tmp"))
    }
}

fn free_tcp_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0")
        .unwrap_or_else(|e| panic!("cannot bind 127.0.0.1:0 to pick a free port: {e}"));
    match listener.local_addr() {
        Ok(addr) => addr.port(),
        Err(e) => panic!("cannot read the address of a freshly bound listener: {e}"),
    }
}

fn endpoint_url(endpoint: &Endpoint) -> String {
    match endpoint {
        Endpoint::Unix(path) => {
            use std::os::unix::ffi::OsStrExt as _;
            // redis-rs parses this with `url`, then `Url::to_file_path`, which
            // percent-decodes: encode anything but unreserved chars and '/'.
            let mut url = String::from("redis+unix://");
            for &b in path.as_os_str().as_bytes() {
                if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
                    url.push(b as char);
                } else {
                    let _ = write!(url, "%{b:02X}");
                }
            }
            url
        }
        Endpoint::Tcp(port) => format!("redis://127.0.0.1:{port}"),
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn log_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

fn log_tail(path: &Path) -> String {
    log_tail_from(path, 0)
}

/// The last lines of the log written since byte `from`.
fn log_tail_from(path: &Path, from: u64) -> String {
    let mut text = String::new();
    let read = File::open(path).and_then(|mut f| {
        f.seek(SeekFrom::Start(from))?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)?;
        text = String::from_utf8_lossy(&bytes).into_owned();
        Ok(())
    });
    if let Err(e) = read {
        return format!("(cannot read {}: {e})", path.display());
    }
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        return format!("({} is empty)", path.display());
    }
    let start = lines.len().saturating_sub(LOG_TAIL_LINES);
    lines[start..].join("\n")
}

fn render_bytes(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => format!("{s:?}"),
        Err(_) => hex(bytes),
    }
}

fn render_key_name(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(s) => s.to_owned(),
        Err(_) => hex(key),
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::from("0x");
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn render_pairs(out: &mut String, pairs: &[(Vec<u8>, Vec<u8>)]) {
    out.push('{');
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{}: {}", render_bytes(k), render_bytes(v));
    }
    out.push('}');
}

fn render_seq(out: &mut String, open: char, close: char, items: &[Vec<u8>]) {
    out.push(open);
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&render_bytes(item));
    }
    out.push(close);
}

/// Turns an `XINFO` reply (flat `name, value, ...` array) into a map of its
/// scalar fields rendered as strings.
fn flat_map(values: Vec<redis::Value>) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let mut it = values.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        let key = scalar(&k);
        if let Some(key) = key {
            if let Some(value) = scalar(&v) {
                map.insert(key, value);
            }
        }
    }
    map
}

fn scalar(value: &redis::Value) -> Option<String> {
    match value {
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => Some(s.clone()),
        redis::Value::Int(i) => Some(i.to_string()),
        redis::Value::Okay => Some("OK".into()),
        redis::Value::Nil => Some("nil".into()),
        _ => None,
    }
}
