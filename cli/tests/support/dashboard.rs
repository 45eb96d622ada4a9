//! A running `leasehold dashboard` child process on a free loopback port, and
//! an HTTP client for it.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::Child;

use super::binary::command;

/// A running `leasehold dashboard`.
pub(crate) struct Dashboard {
    child: Child,
    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub base: String,
    stderr: Arc<Mutex<String>>,
}

impl Dashboard {
    /// Starts `leasehold --redis-url URL dashboard --bind 127.0.0.1:0 ARGS...`,
    /// with `LEASEHOLD_DASHBOARD_TOKEN` set to `token_env` if given, and waits
    /// for the line naming the address it serves.
    pub(crate) async fn start(url: &str, args: &[&str], token_env: Option<&str>) -> Dashboard {
        Dashboard::start_with_env(url, args, token_env, &[]).await
    }

    /// [`Dashboard::start`] with environment variables `env` set.
    pub(crate) async fn start_with_env(
        url: &str,
        args: &[&str],
        token_env: Option<&str>,
        env: &[(&str, &str)],
    ) -> Dashboard {
        let mut all = vec!["dashboard"];
        if !args.contains(&"--bind") {
            all.extend(["--bind", "127.0.0.1:0"]);
        }
        all.extend_from_slice(args);
        let mut cmd = command(url, &all);
        if let Some(t) = token_env {
            cmd.env("LEASEHOLD_DASHBOARD_TOKEN", t);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn leasehold dashboard");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "the dashboard did not say where it serves within 20 s; stderr: {}",
                    stderr.lock().unwrap()
                )
            })
            .expect("read the dashboard's stdout")
            .unwrap_or_else(|| {
                panic!(
                    "the dashboard exited before serving; stderr: {}",
                    stderr.lock().unwrap()
                )
            });
        let start = line
            .find("http://")
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        let base = line[start..]
            .split_whitespace()
            .next()
            .unwrap()
            .trim_end_matches('/')
            .to_owned();
        // keep draining stdout so the child never blocks on a full pipe
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Dashboard {
            child,
            base,
            stderr,
        }
    }

    /// `base` + `path`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// What the dashboard wrote to stderr so far.
    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Stops the dashboard (SIGKILL) and reaps it.
    pub(crate) async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// An HTTP client that does not follow redirects (303s are checked) and never
/// goes through a proxy.
pub(crate) fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("HTTP client")
}
