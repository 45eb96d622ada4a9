//! The `leasehold` binary end to end, failing and connecting: clear error
//! messages and exit codes, an unreachable Redis (exit 5, quickly, without
//! leaking the password), and TLS with ACL credentials.

mod support;

use std::time::{Duration, Instant};

use leasehold_core::JobState;
use leasehold_testkit::RedisServer;
use support::binary::{command, run_cmd, BIN};
use support::jobs::{enqueue, job, queue};
use support::scene::*;
use tokio::process::Command;

#[tokio::test]
async fn errors_have_clear_messages_and_exit_codes() {
    let srv = RedisServer::start();
    let s = scene(&srv).await;

    // unknown job: 3
    let missing = "0190aaaa-0000-7000-8000-000000000000";
    let run = cli(&srv, &["show", missing, "--queue", "orders"])
        .await
        .code(3);
    assert!(
        run.stderr
            .contains(&format!("job {missing} not found in queue orders")),
        "{run:?}"
    );
    let run = cli(&srv, &["cancel", missing, "--reason", "x"])
        .await
        .code(3);
    assert!(
        run.stderr.contains("not found in any queue") && run.stderr.contains("orders"),
        "{run:?}"
    );
    cli(&srv, &["retry", missing, "--queue", "orders"])
        .await
        .code(3);
    cli(&srv, &["events", "--job", missing]).await.code(3);

    // refused moves: 4, naming the state and why
    let run = cli(
        &srv,
        &[
            "resolve",
            s.ready.as_str(),
            "--as",
            "failed",
            "--reason",
            "x",
        ],
    )
    .await
    .code(4);
    assert!(
        run.stderr.contains("it is QUEUED")
            && run.stderr.contains("resolve applies only to STALE jobs"),
        "{run:?}"
    );
    let run = cli(&srv, &["cancel", s.stale.as_str(), "--reason", "x"])
        .await
        .code(4);
    assert!(run.stderr.contains("it is STALE"), "{run:?}");
    let run = cli(&srv, &["retry", s.succeeded.as_str()]).await.code(4);
    assert!(
        run.stderr.contains("it is SUCCEEDED") && run.stderr.contains("never rewritten"),
        "{run:?}"
    );
    let run = cli(&srv, &["retry", s.running.as_str()]).await.code(4);
    assert!(run.stderr.contains("it is RUNNING"), "{run:?}");
    let run = cli(&srv, &["cancel", s.failed.as_str(), "--reason", "x"])
        .await
        .code(4);
    assert!(run.stderr.contains("it is FAILED"), "{run:?}");

    // bad arguments: 2
    cli(&srv, &["cancel", s.ready.as_str()]).await.code(2); // no --reason
    cli(&srv, &["jobs", "--state", "sleeping"]).await.code(2);
    cli(
        &srv,
        &[
            "resolve",
            s.stale.as_str(),
            "--as",
            "queued",
            "--reason",
            "x",
        ],
    )
    .await
    .code(2);
    cli(
        &srv,
        &["retry", s.failed.as_str(), "--resume", "--from-start"],
    )
    .await
    .code(2);
    cli(&srv, &["enqueue", "sync", "--queue", "orders"])
        .await
        .code(2); // no input
                  // a pipeline no worker registered is refused, naming what to do
    let run = cli(&srv, &["enqueue", "sync", "--input", "{}"])
        .await
        .code(2);
    assert!(
        run.stderr.contains("not registered") && run.stderr.contains("--unregistered"),
        "{run:?}"
    );
    let run = cli(
        &srv,
        &[
            "enqueue",
            "sync",
            "--unregistered",
            "--queue",
            "orders",
            "--input",
            "{not json",
        ],
    )
    .await
    .code(2);
    assert!(run.stderr.contains("not JSON"), "{run:?}");
    cli(
        &srv,
        &["enqueue", "sync", "--input", "{}", "--delay", "soon"],
    )
    .await
    .code(2);
    cli(
        &srv,
        &[
            "enqueue",
            "sync",
            "--input-template",
            "{}",
            "--from",
            "2026-05-06",
            "--to",
            "2026-05-07",
            "--step",
            "1h",
        ],
    )
    .await
    .code(2); // an unregistered pipeline
    let run = cli(&srv, &["show", "not a job id"]).await.code(2);
    assert!(run.stderr.contains("not a job id"), "{run:?}");
    cli(&srv, &["frobnicate"]).await.code(2);
    cli(
        &srv,
        &[
            "resolve",
            s.stale.as_str(),
            "--as",
            "failed",
            "--reason",
            " ",
        ],
    )
    .await
    .code(2);

    // the job moved nothing on any refusal
    let q = queue(&srv, "orders").await;
    assert_eq!(
        q.job(&s.stale).await.unwrap().unwrap().state,
        JobState::Stale
    );
}

#[tokio::test]
async fn unreachable_redis_exits_5_quickly_without_leaking_the_password() {
    // a port nothing listens on
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("redis://alice:hunter2@127.0.0.1:{port}");
    let started = Instant::now();
    let run = run_cmd(command(&url, &["status"])).await.code(5);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        run.stderr.contains(&format!(
            "cannot reach Redis at redis://alice:****@127.0.0.1:{port}"
        )),
        "{run:?}"
    );
    assert!(!run.stderr.contains("hunter2"), "{run:?}");
    // every command fails the same way
    run_cmd(command(&url, &["jobs"])).await.code(5);
    run_cmd(command(&url, &["cancel", "x1", "--reason", "r"]))
        .await
        .code(5);
    // the environment is read when --redis-url is absent
    let mut cmd = Command::new(BIN);
    cmd.arg("status")
        .env_remove("LEASEHOLD_REDIS_URL")
        .env("REDIS_URL", &url);
    let run = run_cmd(cmd).await.code(5);
    assert!(run.stderr.contains(&port.to_string()), "{run:?}");
}

/// `rediss://` with an ACL user and password, verified against a private CA
/// given through `SSL_CERT_FILE`. Needs the `openssl` command to make the
/// certificates; without it the test says so and passes.
#[tokio::test]
async fn tls_with_acl_credentials() {
    let Some(tls) = support::tls::make() else {
        return;
    };
    let (cert, key, ca) = (tls.cert.clone(), tls.key.clone(), tls.ca.clone());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let srv = RedisServer::start_with(&[
        "--tls-port",
        &port,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca,
        "--tls-auth-clients",
        "no",
    ]);
    srv.cmd(&[
        "ACL", "SETUSER", "alice", "on", ">s3cret", "~*", "&*", "+@all",
    ]);
    let q = queue(&srv, "secure").await;
    enqueue(&q, job("sync", 1)).await;

    let url = format!("rediss://alice:s3cret@127.0.0.1:{port}");
    let mut cmd = command(&url, &["status", "--json"]);
    cmd.env("SSL_CERT_FILE", &ca);
    let v = run_cmd(cmd).await.ok().json();
    assert_eq!(v[0]["queue"], "secure");
    assert_eq!(v[0]["counts"]["queued"], 1);

    // a wrong password cannot use Redis: authentication failed (6), the password not shown
    let mut cmd = command(
        &format!("rediss://alice:wrong@127.0.0.1:{port}"),
        &["status"],
    );
    cmd.env("SSL_CERT_FILE", &ca);
    let run = run_cmd(cmd).await.code(6);
    assert!(run.stderr.contains("authentication failed"), "{run:?}");
    assert!(!run.stderr.contains(":wrong@"), "{run:?}");
    // an untrusted server certificate is refused
    let mut cmd = command(&url, &["status"]);
    cmd.env("SSL_CERT_FILE", &cert);
    run_cmd(cmd).await.code(5);
}
