//! Names that do not exist are errors: an unknown queue, pipeline or group in
//! a command exits 3 naming the known ones, with "did you mean" for a close
//! one, instead of answering "0" with exit 0; the dashboard answers 404 the
//! same way. (Unknown schedules: `schedules_cli`.)

mod support;

use leasehold_testkit::RedisServer;
use support::binary::{command, run_cmd, Run};
use support::dashboard::{http, Dashboard};
use support::jobs::{enqueue, job, queue};

async fn cli(srv: &RedisServer, args: &[&str]) -> Run {
    run_cmd(command(&srv.url(), args)).await
}

/// Runs `args`, expects exit 3 and every one of `says` in stderr.
async fn unknown(srv: &RedisServer, args: &[&str], says: &[&str]) {
    let run = cli(srv, args).await.code(3);
    for s in says {
        assert!(run.stderr.contains(s), "{args:?} lacks {s:?}: {run:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_queues_pipelines_and_groups_are_errors_that_name_what_exists() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    let id = enqueue(&q, job("tenant_report", 1)).await;
    let _ = enqueue(&queue(&srv, "reports").await, job("daily", 2)).await;
    cli(&srv, &["group", "create", "nightly", "--queue", "orders"])
        .await
        .ok();

    // queues, in every kind of command
    for args in [
        &["jobs", "--queue", "ordres"][..],
        &["status", "--queue", "ordres"],
        &["locks", "--queue", "ordres"],
        &["events", "--queue", "ordres"],
        &["bulk", "retry", "--queue", "ordres", "--dry-run"],
        &["pause", "ordres", "--reason", "x"],
        &["groups", "--queue", "ordres"],
        &["show", id.as_str(), "--queue", "ordres"],
    ] {
        unknown(
            &srv,
            args,
            &[
                "no queue \"ordres\"",
                "did you mean \"orders\"?",
                "known queues: orders, reports",
            ],
        )
        .await;
    }
    // far from any: no suggestion, the known ones all the same
    let run = cli(&srv, &["jobs", "--queue", "nosuchqueue"]).await.code(3);
    assert!(!run.stderr.contains("did you mean"), "{run:#?}");
    assert!(
        run.stderr.contains("known queues: orders, reports"),
        "{run:#?}"
    );

    // pipelines
    for args in [
        &["jobs", "--queue", "orders", "--pipeline", "tenant_reprot"][..],
        &["jobs", "--pipeline", "tenant_reprot", "--state", "failed"],
        &["jobs", "--pipeline", "tenant_reprot", "--input-key", "k"],
        &[
            "bulk",
            "retry",
            "--queue",
            "orders",
            "--pipeline",
            "tenant_reprot",
            "--dry-run",
        ],
    ] {
        unknown(
            &srv,
            args,
            &[
                "no pipeline \"tenant_reprot\"",
                "did you mean \"tenant_report\"?",
            ],
        )
        .await;
    }
    // a pipeline that exists matching nothing is no error: an empty answer
    let run = cli(
        &srv,
        &["jobs", "--pipeline", "tenant_report", "--state", "failed"],
    )
    .await
    .ok();
    assert!(run.stdout.contains("no jobs"), "{run:#?}");
    cli(
        &srv,
        &[
            "bulk",
            "retry",
            "--queue",
            "orders",
            "--pipeline",
            "tenant_report",
            "--dry-run",
        ],
    )
    .await
    .ok()
    .shows(&["would touch 0 FAILED jobs"]);

    // a dry run needs no reason (it records nothing); the real cancel does
    cli(
        &srv,
        &[
            "bulk",
            "cancel",
            "--queue",
            "orders",
            "--pipeline",
            "tenant_report",
            "--dry-run",
        ],
    )
    .await
    .ok()
    .shows(&["bulk cancel would touch 1 QUEUED job of queue orders"]);
    let run = cli(
        &srv,
        &[
            "bulk",
            "cancel",
            "--queue",
            "orders",
            "--pipeline",
            "tenant_report",
        ],
    )
    .await
    .code(2);
    assert!(run.stderr.contains("--reason"), "{run:#?}");

    // groups
    unknown(
        &srv,
        &["group", "show", "nightyl"],
        &[
            "no group \"nightyl\" in any queue",
            "did you mean \"nightly\"?",
            "known groups: nightly",
        ],
    )
    .await;
    unknown(
        &srv,
        &[
            "group", "cancel", "nightyl", "--queue", "orders", "--reason", "x",
        ],
        &["no group \"nightyl\" in queue orders"],
    )
    .await;

    // the dashboard: 404 naming what exists
    let dash = Dashboard::start(&srv.url(), &[], None).await;
    for path in [
        "/jobs?queue=ordres",
        "/api/jobs?queue=ordres",
        "/bulk?action=retry&queue=ordres",
        "/jobs?queue=orders&pipeline=tenant_reprot",
        "/api/jobs?queue=orders&pipeline=tenant_reprot",
        "/search?queue=ordres&input_key=k",
        "/api/search?input_key=k&pipeline=tenant_reprot",
    ] {
        let res = http().get(dash.url(path)).send().await.unwrap();
        assert_eq!(res.status().as_u16(), 404, "{path}");
        let body = res.text().await.unwrap();
        assert!(body.contains("did you mean"), "{path}: {body}");
    }
    // the bulk forms offer the queues and pipelines that exist
    let forms = http()
        .get(dash.url("/bulk"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for offered in [
        "<option value=\"orders\">",
        "<option value=\"reports\">",
        "<option value=\"tenant_report\">",
    ] {
        assert!(forms.contains(offered), "{offered}: {forms}");
    }
    let res = http()
        .get(dash.url("/groups/orders/nightyl"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 404);
    assert!(res.text().await.unwrap().contains("nightly"));
    dash.stop().await;
}
