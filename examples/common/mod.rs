//! Shared by the examples: find Redis, or start a throwaway `redis-server`
//! (with `LEASEHOLD_DEMO_CLUSTER=1`: a throwaway 3-master Redis Cluster).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A Redis to talk to: `REDIS_URL` if set, else a private server that dies with the example.
pub(crate) struct ExampleRedis {
    /// The URL to connect to.
    pub url: String,
    child: Option<Child>,
    dir: Option<PathBuf>,
    /// The throwaway cluster, when one was asked for; its nodes die with it.
    _cluster: Option<leasehold_testkit::RedisCluster>,
}

impl ExampleRedis {
    /// Uses `REDIS_URL`, or starts `redis-server` on a unix socket in a
    /// temporary directory, or (with `LEASEHOLD_DEMO_CLUSTER=1`) a local
    /// 3-master Redis Cluster on free loopback ports.
    pub(crate) fn from_env_or_spawn() -> Result<Self, String> {
        if let Ok(url) = std::env::var("REDIS_URL") {
            println!("using Redis at {url} (from REDIS_URL)");
            return Ok(ExampleRedis {
                url,
                child: None,
                dir: None,
                _cluster: None,
            });
        }
        if std::env::var("LEASEHOLD_DEMO_CLUSTER").is_ok_and(|v| v == "1") {
            let cluster = leasehold_testkit::RedisCluster::start(3, 0);
            let url = cluster.url();
            println!("started a throwaway 3-master Redis Cluster at {url}");
            return Ok(ExampleRedis {
                url,
                child: None,
                dir: None,
                _cluster: Some(cluster),
            });
        }
        let dir = std::env::temp_dir().join(format!("leasehold-example-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let socket = dir.join("redis.sock");
        let child = Command::new("redis-server")
            .args(["--port", "0", "--save", "", "--appendonly", "no"])
            .arg("--unixsocket")
            .arg(&socket)
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                format!(
                    "REDIS_URL is not set and redis-server could not be started ({e}).\n\
                     Install it (Debian/Ubuntu: `sudo apt-get install redis-server`, macOS: `brew install redis`)\n\
                     or point REDIS_URL at a Redis you may write to."
                )
            })?;
        let url = format!("redis+unix://{}", socket.display());
        let deadline = Instant::now() + Duration::from_secs(10);
        while !socket.exists() {
            if Instant::now() > deadline {
                return Err("redis-server did not open its socket within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        println!(
            "started a throwaway redis-server (pid {}) at {url}",
            child.id()
        );
        Ok(ExampleRedis {
            url,
            child: Some(child),
            dir: Some(dir),
            _cluster: None,
        })
    }
}

impl Drop for ExampleRedis {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
