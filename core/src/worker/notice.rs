//! Delivering a notice hook ([`Notify`], declared in `crate::notify`): the
//! command runs with the event's JSON on its standard input, in a process
//! group of its own killed with it past the hook's timeout; the webhook (the
//! `webhook` feature) is POSTed the same JSON, retried. Called by the
//! notifier and the scheduler; logs how each ended, never fails the caller.

use std::process::Stdio;
#[cfg(feature = "webhook")]
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tracing::{info, warn};

use crate::notify::{Notify, NotifyEvent};

/// Delivers `notice` (JSON) for `event` through `hook`: POSTs it to the
/// webhook when there is one, then runs the command with it on its standard
/// input, in a process group of its own, killed with it past the timeout.
/// Logs how it ended; never fails the caller.
pub(crate) async fn fire(hook: &Notify, event: NotifyEvent, notice: &serde_json::Value) {
    #[cfg(feature = "webhook")]
    if let Some(url) = &hook.webhook {
        post(hook, event, url, notice).await;
    }
    run_command(hook, event, notice).await;
}

/// POSTs `notice` to `url`, retried as [`Notify::webhook`] says.
#[cfg(feature = "webhook")]
async fn post(hook: &Notify, event: NotifyEvent, url: &str, notice: &serde_json::Value) {
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
    for attempt in 1..=hook.attempts {
        let request = http::Request::post(uri.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(http_body_util::Full::new(body.clone()));
        let why = match request {
            Err(e) => e.to_string(),
            Ok(request) => {
                match tokio::time::timeout(hook.timeout, client.request(request)).await {
                    Ok(Ok(r)) if r.status().is_success() => {
                        info!(event = event.as_str(), url, attempt, "notice posted");
                        return;
                    }
                    Ok(Ok(r)) => format!("answered {}", r.status()),
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => format!("no answer within {:?}", hook.timeout),
                }
            }
        };
        warn!(event = event.as_str(), url, attempt, of = hook.attempts, error = %why, "the webhook failed");
        if attempt < hook.attempts {
            tokio::time::sleep(Duration::from_secs(1 << (attempt - 1).min(5))).await;
        }
    }
}

/// Runs the command, if there is one.
async fn run_command(hook: &Notify, event: NotifyEvent, notice: &serde_json::Value) {
    let Some((program, args)) = hook.argv.split_first() else {
        return;
    };
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(dir) = &hook.current_dir {
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
    match tokio::time::timeout(hook.timeout, child.wait_with_output()).await {
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
            warn!(event = event.as_str(), program = %program, timeout = ?hook.timeout,
                "the notice command ran past its timeout: killed");
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
