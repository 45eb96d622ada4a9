//! The [`RedisServer`] process: a private `redis-server` child on a unix
//! socket or a loopback TCP port, its lifecycle (start, stop, restart, kill,
//! drop), and the synchronous connections and one-off commands tests use to
//! inspect it. Rendering keys for comparison lives in [`crate::dump`].

use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use deadpool_redis::redis;

use crate::binary::redis_server_binary;
use crate::log::{log_len, log_tail, log_tail_from};
use crate::spawner::spawn_from_kit_thread;

/// How long [`RedisServer::start`] and friends wait for the server to answer.
const STARTUP_DEADLINE: Duration = Duration::from_secs(20);
/// How long [`RedisServer::stop`] waits after SIGTERM before resorting to SIGKILL.
const STOP_DEADLINE: Duration = Duration::from_secs(10);
/// Read/write timeout of the connections the kit's helpers open for themselves.
const HELPER_IO_TIMEOUT: Duration = Duration::from_secs(60);
/// Connect timeout for every connection the kit opens.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How many times [`RedisServer::start_tcp`] picks a new port after a collision.
const TCP_ATTEMPTS: usize = 5;

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

    /// A fresh connection with the helpers' read/write timeouts (60 s).
    #[track_caller]
    pub(crate) fn helper_connection(&self) -> redis::Connection {
        let con = self.connection();
        if let Err(e) = con
            .set_read_timeout(Some(HELPER_IO_TIMEOUT))
            .and_then(|()| con.set_write_timeout(Some(HELPER_IO_TIMEOUT)))
        {
            panic!("cannot set timeouts on a connection to {}: {e}", self.url());
        }
        con
    }

    /// Runs `args` (command name first) on `con`; panics on a transport error.
    #[track_caller]
    pub(crate) fn run(&self, con: &mut redis::Connection, args: &[&str]) -> redis::Value {
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        self.run_cmd(con, &cmd, args)
    }

    /// Runs a built command on `con`; `shown` names it in the panic message.
    #[track_caller]
    pub(crate) fn run_cmd(
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

    /// Converts a reply, panicking on an error reply or an unexpected shape.
    #[track_caller]
    pub(crate) fn convert<T: redis::FromRedisValue>(&self, value: redis::Value, what: &str) -> T {
        if let redis::Value::ServerError(e) = &value {
            panic!("{what} on {} answered an error: {e:?}", self.url());
        }
        match T::from_redis_value(value.clone()) {
            Ok(v) => v,
            Err(e) => panic!("unexpected reply to {what}: {value:?} ({e})"),
        }
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

/// Why a start attempt failed, and whether picking another port may help.
struct StartFailure {
    retryable: bool,
    message: String,
}

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

/// A free loopback TCP port (bound once and released).
pub(crate) fn free_tcp_port() -> u16 {
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
