//! Tests of the test kit itself: every one spawns its own private redis-server.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use deadpool_redis::redis::{self, Value};
use leasehold_testkit::{redis_server_binary, wait_until, wait_until_async, RedisServer};

/// Whether the process is gone (no /proc entry, or only a zombie that some
/// other parent has yet to reap).
fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            // "pid (comm) S ...": the state follows the last ')'.
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            state.starts_with('Z') || state.starts_with('X')
        }
    }
}

fn ping(srv: &RedisServer) -> bool {
    matches!(
        redis::Client::open(srv.url().as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(500)))
            .and_then(|mut con| redis::cmd("PING").query::<String>(&mut con)),
        Ok(ref pong) if pong == "PONG"
    )
}

#[test]
fn start_answers_ping_on_a_private_unix_socket() {
    let srv = RedisServer::start();
    let url = srv.url();
    assert!(url.starts_with("redis+unix:///"), "{url}");
    assert!(srv
        .socket_path()
        .expect("unix server has a socket")
        .exists());
    assert_eq!(srv.port(), None);
    assert!(srv.pid().is_some());
    assert_eq!(srv.cmd(&["PING"]), Value::SimpleString("PONG".into()));

    // It is ours, not a system Redis: same pid, no TCP, no persistence.
    let info = srv.info("server");
    let pid = srv.pid().unwrap().to_string();
    assert!(info.contains(&format!("process_id:{pid}")), "{info}");
    assert!(info.contains("tcp_port:0"), "{info}");
    let mut con = srv.connection();
    let save: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("save")
        .query(&mut con)
        .unwrap();
    assert_eq!(save, ["save", ""]);
    let aof: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendonly")
        .query(&mut con)
        .unwrap();
    assert_eq!(aof, ["appendonly", "no"]);
}

#[test]
fn kill_then_restart_answers_again_with_data_gone() {
    let mut srv = RedisServer::start();
    srv.cmd(&["SET", "k", "v"]);
    let old_pid = srv.pid().unwrap();

    srv.kill();
    assert!(!srv.is_running());
    assert_eq!(srv.pid(), None);
    assert!(!ping(&srv), "a killed server must not answer");
    assert!(process_gone(old_pid));

    srv.restart();
    assert!(srv.is_running());
    assert_ne!(srv.pid(), Some(old_pid));
    assert!(ping(&srv));
    assert_eq!(
        srv.cmd(&["GET", "k"]),
        Value::Nil,
        "data is lost by a crash"
    );
}

#[test]
fn stop_is_graceful_and_restart_of_a_running_server_works() {
    let mut srv = RedisServer::start();
    srv.stop();
    assert!(!srv.is_running());
    assert!(!ping(&srv));
    srv.restart();
    assert!(ping(&srv));
    // Restarting a running server stops it first.
    let pid = srv.pid().unwrap();
    srv.restart();
    assert_ne!(srv.pid(), Some(pid));
    assert!(ping(&srv));
    assert!(srv.log_tail().contains("ready to accept connections"));
}

#[test]
fn tcp_variant_listens_on_loopback_and_survives_restart() {
    let mut srv = RedisServer::start_tcp();
    let port = srv.port().expect("tcp server has a port");
    assert_ne!(port, 6379);
    assert_eq!(srv.url(), format!("redis://127.0.0.1:{port}"));
    assert_eq!(srv.socket_path(), None);
    srv.cmd(&["SET", "k", "v"]);
    assert_eq!(srv.cmd(&["GET", "k"]), Value::BulkString(b"v".to_vec()));

    srv.kill();
    assert!(!ping(&srv));
    srv.restart();
    assert_eq!(srv.port(), Some(port), "restart keeps the port");
    assert_eq!(srv.cmd(&["GET", "k"]), Value::Nil);
}

#[test]
fn start_with_passes_extra_arguments() {
    let srv = RedisServer::start_with(&["--maxmemory", "10mb"]);
    let mut con = srv.connection();
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory")
        .query(&mut con)
        .unwrap();
    assert_eq!(v, ["maxmemory", "10485760"]);
}

#[test]
fn a_bad_argument_panics_quoting_the_server_log() {
    let err = std::panic::catch_unwind(|| RedisServer::start_with(&["--no-such-option", "1"]))
        .expect_err("redis-server must refuse an unknown option");
    let msg = err
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(msg.contains("exited during startup"), "{msg}");
    assert!(
        msg.contains("no-such-option"),
        "log tail must be quoted: {msg}"
    );
}

#[test]
fn dump_is_deterministic_and_detects_changes() {
    let srv = RedisServer::start();
    srv.cmd(&["SET", "s", "plain \"quoted\""]);
    srv.cmd(&["HSET", "h", "b", "2", "a", "1", "c", "3"]);
    srv.cmd(&["RPUSH", "l", "x", "y", "x"]);
    srv.cmd(&["SADD", "set", "q", "p", "r"]);
    srv.cmd(&["ZADD", "z", "2", "two", "1.5", "one"]);
    srv.cmd(&["XADD", "st", "1-1", "f", "v"]);
    srv.cmd(&["XADD", "st", "2-1", "g", "w"]);
    srv.cmd(&["XGROUP", "CREATE", "st", "grp", "0"]);
    srv.cmd(&[
        "XREADGROUP",
        "GROUP",
        "grp",
        "c1",
        "COUNT",
        "1",
        "STREAMS",
        "st",
        ">",
    ]);
    srv.cmd(&["SET", "ttl", "1", "EX", "1000"]);
    srv.cmd(&["SET", "other:k", "ignored by the pattern"]);
    {
        let mut con = srv.connection();
        let _: () = redis::cmd("SET")
            .arg(&b"bin\xff"[..])
            .arg(&b"\x00\xfe"[..])
            .query(&mut con)
            .unwrap();
    }

    let before = srv.dump("*");
    assert_eq!(before, srv.dump("*"), "dump must be deterministic");
    assert_eq!(before["s"], r#"string "plain \"quoted\"""#);
    assert_eq!(before["h"], r#"hash {"a": "1", "b": "2", "c": "3"}"#);
    assert_eq!(before["l"], r#"list ["x", "y", "x"]"#);
    assert_eq!(before["set"], r#"set {"p", "q", "r"}"#);
    assert_eq!(before["z"], r#"zset [("one", "1.5"), ("two", "2")]"#);
    assert_eq!(
        before["st"],
        r#"stream [1-1 {"f": "v"}, 2-1 {"g": "w"}] last-id=2-1 groups={"grp": last-delivered=1-1 pending=[1-1@c1x1]}"#
    );
    assert_eq!(before["ttl"], r#"string "1" [ttl]"#);
    assert_eq!(before["0x62696eff"], "string 0x00fe");

    let only_h = srv.dump("h*");
    assert_eq!(only_h.keys().collect::<Vec<_>>(), ["h"]);
    assert!(!srv.dump("other:*").is_empty());

    // Every kind of change is seen.
    let changes: &[&[&str]] = &[
        &["HSET", "h", "a", "9"],
        &["RPUSH", "l", "z"],
        &["ZINCRBY", "z", "1", "one"],
        &["XACK", "st", "grp", "1-1"],
        &["PERSIST", "ttl"],
        &["SET", "new", "1"],
        &["DEL", "s"],
    ];
    let mut previous = before;
    for change in changes {
        srv.cmd(change);
        let now = srv.dump("*");
        assert_ne!(previous, now, "{change:?} must show in the dump");
        previous = now;
    }
}

#[test]
fn cmd_returns_error_replies_as_values() {
    let srv = RedisServer::start();
    srv.cmd(&["SET", "k", "v"]);
    match srv.cmd(&["HGET", "k", "f"]) {
        Value::ServerError(e) => assert_eq!(e.code(), "WRONGTYPE"),
        other => panic!("expected a WRONGTYPE error, got {other:?}"),
    }
}

#[test]
fn flush_empties_every_database() {
    let srv = RedisServer::start();
    srv.cmd(&["SET", "a", "1"]);
    srv.cmd(&["HSET", "b", "f", "v"]);
    assert_eq!(srv.dump("*").len(), 2);
    srv.flush();
    assert!(srv.dump("*").is_empty());
    assert_eq!(srv.cmd(&["DBSIZE"]), Value::Int(0));
}

#[test]
fn info_returns_the_section() {
    let srv = RedisServer::start();
    srv.cmd(&["SET", "a", "1"]);
    let stats = srv.info("commandstats");
    assert!(stats.contains("cmdstat_set:calls=1"), "{stats}");
}

#[test]
fn drop_leaves_no_process_and_no_directory() {
    let srv = RedisServer::start();
    let pid = srv.pid().unwrap();
    let dir = srv.dir().to_path_buf();
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    drop(srv);
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "redis-server {pid} survived drop"
    );
    assert!(!dir.exists(), "temp dir {} survived drop", dir.display());
}

#[test]
fn a_server_outlives_the_thread_that_created_it() {
    // PR_SET_PDEATHSIG fires when the *forking thread* exits; the kit forks
    // from its own long-lived thread, so this must not kill the server.
    let srv = std::thread::spawn(RedisServer::start).join().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(srv.cmd(&["PING"]), Value::SimpleString("PONG".into()));
}

const HELPER_ENV: &str = "LEASEHOLD_TESTKIT_ORPHAN_PID_FILE";

/// Not a test on its own: run by `a_killed_test_process_leaks_no_server` in a
/// child process, which it SIGKILLs.
#[test]
#[ignore = "helper process for a_killed_test_process_leaks_no_server"]
fn orphan_helper() {
    let Some(pid_file) = std::env::var_os(HELPER_ENV) else {
        return;
    };
    let srv = RedisServer::start();
    let tmp = Path::new(&pid_file).with_extension("tmp");
    let report = format!("{}\n{}", srv.pid().unwrap(), srv.dir().display());
    std::fs::write(&tmp, report).unwrap();
    std::fs::rename(&tmp, &pid_file).unwrap();
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn a_killed_test_process_leaks_no_server() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args(["--exact", "orphan_helper", "--ignored", "--nocapture"])
        .env(HELPER_ENV, &pid_file)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until(
        Duration::from_secs(20),
        "the helper reports its server's pid",
        || pid_file.exists(),
    );
    let report = std::fs::read_to_string(&pid_file).unwrap();
    let (pid, server_dir) = report.split_once('\n').unwrap();
    let pid: u32 = pid.parse().unwrap();
    // The helper's Drop never runs: remove its temp dir, and should an
    // assertion below fail, do not leak its server either.
    struct Reaper(u32, std::path::PathBuf);
    impl Drop for Reaper {
        fn drop(&mut self) {
            if !process_gone(self.0) {
                // SAFETY: plain kill(2) on the leaked server's pid.
                unsafe { libc::kill(self.0 as libc::pid_t, libc::SIGKILL) };
            }
            let _ = std::fs::remove_dir_all(&self.1);
        }
    }
    let _reaper = Reaper(pid, server_dir.into());
    assert!(!process_gone(pid));
    child.kill().unwrap();
    child.wait().unwrap();
    wait_until(
        Duration::from_secs(10),
        "the orphaned redis-server dies",
        || process_gone(pid),
    );
}

#[test]
fn wait_until_returns_early_and_panics_with_its_message() {
    let mut n = 0;
    wait_until(Duration::from_secs(5), "n reaches 3", || {
        n += 1;
        n >= 3
    });
    let err =
        std::panic::catch_unwind(|| wait_until(Duration::from_millis(50), "pigs fly", || false))
            .expect_err("must time out");
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("pigs fly"), "{msg}");
}

#[tokio::test]
async fn wait_until_async_polls_an_async_condition() {
    let srv = RedisServer::start();
    let url = srv.url();
    tokio::spawn({
        let url = url.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let client = redis::Client::open(url.as_str()).unwrap();
            let mut con = client.get_multiplexed_async_connection().await.unwrap();
            let _: () = redis::cmd("SET")
                .arg("flag")
                .arg("1")
                .query_async(&mut con)
                .await
                .unwrap();
        }
    });
    let client = redis::Client::open(url.as_str()).unwrap();
    wait_until_async(Duration::from_secs(10), "flag is set", || {
        let client = client.clone();
        async move {
            let mut con = client.get_multiplexed_async_connection().await.unwrap();
            let v: Option<String> = redis::cmd("GET")
                .arg("flag")
                .query_async(&mut con)
                .await
                .unwrap();
            v.is_some()
        }
    })
    .await;
}

#[test]
fn binary_is_found() {
    let bin = redis_server_binary();
    assert!(bin.ends_with("redis-server") || std::env::var_os("LEASEHOLD_REDIS_SERVER").is_some());
}
