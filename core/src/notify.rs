//! Failure notices, as cron's MAILTO gave them: a pipeline names a command
//! that runs when one of its jobs ends FAILED, goes STALE, or one of its
//! schedules starts failing, with the event as JSON on its standard input.
//!
//! Each event fires once across a pipeline's replicas: job events are read
//! from the queue's events stream through one consumer group, so one replica
//! takes each entry; a schedule's failing spell fires on the replica whose
//! failed tick was the spell's first (its count in Redis says so). A notice
//! is delivered at most once: a worker that dies while its command runs does
//! not hand it on.
//!
//! ```
//! use leasehold_core::notify::{Notify, NotifyEvent};
//!
//! let mail = Notify::command(["sh", "-c", "mail -s \"leasehold: $(jq -r .summary)\" data-team@example.com"])
//!     .on([NotifyEvent::JobFailed, NotifyEvent::ScheduleFailing]);
//! assert!(mail.wants(NotifyEvent::JobFailed));
//! assert!(!mail.wants(NotifyEvent::JobStale));
//! ```

use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;
use tracing::{info, warn};

/// The default time a notice command may run before its group is killed.
pub const DEFAULT_NOTIFY_TIMEOUT: Duration = Duration::from_secs(30);

/// What a notice is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyEvent {
    /// A job ended FAILED (its last attempt failed, no retry follows).
    JobFailed,
    /// A job went STALE (its worker died mid-step): an operator must decide.
    JobStale,
    /// A schedule's ticks started failing: its windows are not enqueued.
    ScheduleFailing,
}

impl NotifyEvent {
    /// Every event, in the order the docs list them.
    pub const ALL: [NotifyEvent; 3] = [
        NotifyEvent::JobFailed,
        NotifyEvent::JobStale,
        NotifyEvent::ScheduleFailing,
    ];

    /// The event's name (`job_failed`, `job_stale`, `schedule_failing`).
    pub fn as_str(self) -> &'static str {
        match self {
            NotifyEvent::JobFailed => "job_failed",
            NotifyEvent::JobStale => "job_stale",
            NotifyEvent::ScheduleFailing => "schedule_failing",
        }
    }
}

impl std::str::FromStr for NotifyEvent {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        NotifyEvent::ALL
            .into_iter()
            .find(|e| e.as_str() == s)
            .ok_or_else(|| {
                format!("unknown event {s:?}: expected \"job_failed\", \"job_stale\" or \"schedule_failing\"")
            })
    }
}

/// The default attempts of a webhook POST (the first and two retries).
pub const DEFAULT_WEBHOOK_ATTEMPTS: u32 = 3;

/// A pipeline's notice hook: a command (argv, no shell unless it names one)
/// given each event as JSON on standard input, a webhook the same JSON is
/// POSTed to (the `webhook` feature), or both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notify {
    argv: Vec<String>,
    webhook: Option<String>,
    attempts: u32,
    on: Vec<NotifyEvent>,
    timeout: Duration,
    current_dir: Option<std::path::PathBuf>,
}

impl Notify {
    /// Runs `argv` (the program, then its arguments) for every event.
    pub fn command<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Notify {
            argv: argv.into_iter().map(Into::into).collect(),
            webhook: None,
            attempts: DEFAULT_WEBHOOK_ATTEMPTS,
            on: NotifyEvent::ALL.to_vec(),
            timeout: DEFAULT_NOTIFY_TIMEOUT,
            current_dir: None,
        }
    }

    /// POSTs every event's JSON to `url` (`http://` or `https://`), each try
    /// bounded by the timeout, retried with a backoff (1 s, then 2 s, ...) up
    /// to the attempts (default 3) until it answers 2xx.
    #[cfg(feature = "webhook")]
    pub fn webhook(url: impl Into<String>) -> Self {
        let mut hook = Notify::command(Vec::<String>::new());
        hook.webhook = Some(url.into());
        hook
    }

    /// Also POSTs to `url` (a command and a webhook).
    #[cfg(feature = "webhook")]
    #[must_use]
    pub fn and_webhook(mut self, url: impl Into<String>) -> Self {
        self.webhook = Some(url.into());
        self
    }

    /// How many times a webhook POST is tried (at least once).
    #[must_use]
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts.max(1);
        self
    }

    /// The webhook's URL, if it has one.
    pub fn webhook_url(&self) -> Option<&str> {
        self.webhook.as_deref()
    }

    /// Only for `events` (default: all of them).
    #[must_use]
    pub fn on(mut self, events: impl IntoIterator<Item = NotifyEvent>) -> Self {
        self.on = events.into_iter().collect();
        self
    }

    /// How long the command may run before its process group is killed
    /// (default 30 s).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Runs the command in `dir` (default: the worker's working directory).
    #[must_use]
    pub fn current_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.current_dir = Some(dir.into());
        self
    }

    /// Whether `event` is notified.
    pub fn wants(&self, event: NotifyEvent) -> bool {
        self.on.contains(&event)
    }

    /// The command.
    pub fn argv(&self) -> &[String] {
        &self.argv
    }

    /// Runs the command with `notice` (JSON) on its standard input, in a
    /// process group of its own, killed with it past the timeout. Logs how it
    /// ended; never fails the caller.
    pub(crate) async fn fire(&self, event: NotifyEvent, notice: &serde_json::Value) {
        #[cfg(feature = "webhook")]
        if let Some(url) = &self.webhook {
            self.post(event, url, notice).await;
        }
        self.run_command(event, notice).await;
    }

    /// POSTs `notice` to `url`, retried as [`Notify::webhook`] says.
    #[cfg(feature = "webhook")]
    async fn post(&self, event: NotifyEvent, url: &str, notice: &serde_json::Value) {
        let client = match webhook_client() {
            Ok(c) => c,
            Err(e) => {
                warn!(event = event.as_str(), url, error = %e, "cannot make the webhook's client");
                return;
            }
        };
        let uri: http::Uri = match url.parse() {
            Ok(u) => u,
            Err(e) => {
                warn!(event = event.as_str(), url, error = %e, "the webhook's URL is not a URL");
                return;
            }
        };
        let body = bytes::Bytes::from(notice.to_string());
        for attempt in 1..=self.attempts {
            let request = http::Request::post(uri.clone())
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(http_body_util::Full::new(body.clone()));
            let why = match request {
                Err(e) => e.to_string(),
                Ok(request) => {
                    match tokio::time::timeout(self.timeout, client.request(request)).await {
                        Ok(Ok(r)) if r.status().is_success() => {
                            info!(event = event.as_str(), url, attempt, "notice posted");
                            return;
                        }
                        Ok(Ok(r)) => format!("answered {}", r.status()),
                        Ok(Err(e)) => e.to_string(),
                        Err(_) => format!("no answer within {:?}", self.timeout),
                    }
                }
            };
            warn!(event = event.as_str(), url, attempt, of = self.attempts, error = %why, "the webhook failed");
            if attempt < self.attempts {
                tokio::time::sleep(Duration::from_secs(1 << (attempt - 1).min(5))).await;
            }
        }
    }

    /// Runs the command, if there is one.
    async fn run_command(&self, event: NotifyEvent, notice: &serde_json::Value) {
        let Some((program, args)) = self.argv.split_first() else {
            return;
        };
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(dir) = &self.current_dir {
            command.current_dir(dir);
        }
        #[cfg(unix)]
        command.process_group(0);
        let mut child = match command.spawn() {
            Ok(c) => c,
            Err(e) => {
                warn!(event = event.as_str(), program = %program, error = %e, "cannot run the notice command");
                return;
            }
        };
        let body = notice.to_string();
        if let Some(mut stdin) = child.stdin.take() {
            // a command that does not read its input is fine
            let _ = stdin.write_all(body.as_bytes()).await;
        }
        let pid = child.id();
        match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            Ok(Ok(out)) if out.status.success() => {
                info!(event = event.as_str(), program = %program, "notice sent");
            }
            Ok(Ok(out)) => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                warn!(event = event.as_str(), program = %program, status = %out.status,
                    stderr = ?stderr.trim_end(), "the notice command failed");
            }
            Ok(Err(e)) => {
                warn!(event = event.as_str(), program = %program, error = %e, "the notice command failed");
            }
            Err(_) => {
                #[cfg(unix)]
                if let Some(pid) = pid {
                    // the group this function started (the command leads it)
                    crate::process::signal_process_group(pid, libc::SIGKILL);
                }
                warn!(event = event.as_str(), program = %program, timeout = ?self.timeout,
                    "the notice command ran past its timeout: killed");
            }
        }
    }
}

/// The webhook's HTTP client: rustls with ring and the system's roots
/// (`SSL_CERT_FILE` / `SSL_CERT_DIR` for a private CA); `http://` URLs are
/// posted in the clear. Each request is bounded by the caller.
#[cfg(feature = "webhook")]
fn webhook_client() -> Result<WebhookClient, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        // a certificate the store cannot take is left out, as browsers do
        let _ = roots.add(cert);
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .build();
    Ok(
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(connector),
    )
}

/// The webhook client's type: HTTP/1 over rustls or plain TCP.
#[cfg(feature = "webhook")]
type WebhookClient = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    http_body_util::Full<bytes::Bytes>,
>;
