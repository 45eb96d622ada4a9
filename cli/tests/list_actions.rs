//! Acting on many from the list, over the real binary and a private
//! `redis-server`: the dashboard's jobs list of one queue and state has a
//! checkbox per row and, for the rows checked or for every job matching the
//! filter (with its count), the actions the state allows; both go through the
//! bulk confirm page and run through the same scripts as the single actions,
//! recorded with who and why, under the dashboard's login and CSRF rules. The
//! bulk page offers the known queues and pipelines. `bulk delete` does the
//! same from the command line, and `bulk cancel --dry-run` needs no reason.

mod support;

use std::time::Duration;

use leasehold_core::{AttemptError, JobId, JobState, Outcome, Queue};
use leasehold_testkit::RedisServer;
use support::binary::{command, run_cmd, Run};
use support::dashboard::{http, Dashboard};
use support::jobs::{enqueue, job, lease_one, queue, start};

const TOKEN: &str = "bulk-secret-0123456789";

async fn cli(srv: &RedisServer, args: &[&str]) -> Run {
    run_cmd(command(&srv.url(), args)).await
}

/// Enqueues a job of `sync` and fails it (retryably).
async fn failed(q: &Queue, n: u32) -> JobId {
    let id = enqueue(q, job("sync", n)).await;
    let l = lease_one(q, "w1", "sync", Duration::from_secs(60)).await;
    start(q, &l).await;
    q.finish(
        &l,
        &Outcome::Failed {
            error: AttemptError {
                kind: "io".into(),
                message: "warehouse busy".into(),
                retryable: true,
                retries_exhausted: true,
            },
            backoff: Duration::ZERO,
            cleanup_needed: false,
        },
    )
    .await
    .unwrap();
    id
}

async fn state(q: &Queue, id: &JobId) -> Option<JobState> {
    q.job(id).await.unwrap().map(|j| j.state)
}

async fn get(dash: &Dashboard, path: &str) -> (u16, String) {
    let r = http().get(dash.url(path)).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_checked_or_every_match_act_through_the_confirm_page() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    let a = failed(&q, 1).await;
    let b = failed(&q, 2).await;
    let c = failed(&q, 3).await;
    let report = enqueue(&q, job("report", 4)).await;
    let dash = Dashboard::start(&srv.url(), &[], Some(TOKEN)).await;
    let client = http();

    // the FAILED list: a checkbox per row, and the count of every match
    let (code, page) = get(&dash, "/jobs?queue=orders&state=FAILED").await;
    assert_eq!(code, 200);
    for id in [&a, &b, &c] {
        assert!(
            page.contains(&format!("name=\"id\" value=\"{id}\" form=\"bulk-select\"")),
            "{page}"
        );
    }
    assert!(page.contains("id=\"matching\" data-count=\"3\""), "{page}");
    assert!(page.contains("Every job matching this filter (3 jobs)"));
    assert!(page.contains("data-action=\"retry\""));
    assert!(page.contains("data-action=\"delete\""));
    assert!(!page.contains("data-action=\"cancel\""));
    // a list of no single state offers no selection, and says how to get one
    let (_, any) = get(&dash, "/jobs?queue=orders").await;
    assert!(!any.contains("form=\"bulk-select\"") && any.contains("bulk-hint"));

    // the rows checked: the confirm page shows those two only
    let (code, confirm) = get(
        &dash,
        &format!("/bulk?picked=rows&queue=orders&state=FAILED&action=retry&id={a}&id={b}"),
    )
    .await;
    assert_eq!(code, 200, "{confirm}");
    assert!(confirm.contains("data-count=\"2\""), "{confirm}");
    assert!(confirm.contains(a.as_str()) && confirm.contains(b.as_str()));
    assert!(!confirm.contains(c.as_str()), "{confirm}");
    // none checked is an error, not "every job"
    let (code, none) = get(
        &dash,
        "/bulk?picked=rows&queue=orders&state=FAILED&action=retry",
    )
    .await;
    assert_eq!(code, 400);
    assert!(none.contains("no rows were checked"), "{none}");

    // acting needs the token (or a session with its CSRF value)
    let ids = format!("{a} {b}");
    let form = |extra: &[(&'static str, &'static str)]| {
        let mut f: Vec<(&str, String)> = vec![
            ("action", "retry".into()),
            ("queue", "orders".into()),
            ("state", "FAILED".into()),
            ("ids", ids.clone()),
            ("picked", "rows".into()),
            ("reason", "warehouse back".into()),
        ];
        f.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
        f
    };
    let refused = client
        .post(dash.url("/bulk"))
        .form(&form(&[("operator", "erin")]))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(state(&q, &a).await, Some(JobState::Failed));
    let login = client
        .post(dash.url("/login"))
        .form(&[("token", TOKEN), ("operator", "erin")])
        .send()
        .await
        .unwrap();
    let session = login.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let forged = client
        .post(dash.url("/bulk"))
        .header("cookie", &session)
        .form(&form(&[("csrf", "0000")]))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    assert_eq!(state(&q, &a).await, Some(JobState::Failed));
    // the confirm page under the session carries its CSRF value
    let confirm = client
        .get(dash.url(&format!(
            "/bulk?picked=rows&queue=orders&state=FAILED&action=retry&id={a}&id={b}"
        )))
        .header("cookie", &session)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = confirm
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a csrf field")
        .to_owned();
    let csrf: &'static str = Box::leak(csrf.into_boxed_str());
    let done = client
        .post(dash.url("/bulk"))
        .header("cookie", &session)
        .form(&form(&[("csrf", csrf)]))
        .send()
        .await
        .unwrap();
    assert_eq!(done.status(), 200);
    let text = done.text().await.unwrap();
    assert!(text.contains("data-done=\"2\""), "{text}");
    assert_eq!(state(&q, &a).await, Some(JobState::Queued));
    assert_eq!(state(&q, &b).await, Some(JobState::Queued));
    assert_eq!(state(&q, &c).await, Some(JobState::Failed));
    // recorded per job, with who and why
    let shown = cli(&srv, &["--json", "show", a.as_str()]).await.ok().stdout;
    assert!(shown.contains("dashboard:erin"), "{shown}");
    assert!(shown.contains("warehouse back"), "{shown}");

    // every job matching the filter: QUEUED jobs of sync (the two retried)
    let (_, page) = get(&dash, "/jobs?queue=orders&state=QUEUED&pipeline=sync").await;
    assert!(page.contains("id=\"matching\" data-count=\"2\""), "{page}");
    assert!(page.contains("<input type=\"hidden\" name=\"pipeline\" value=\"sync\">"));
    let (_, confirm) = get(
        &dash,
        "/bulk?queue=orders&state=QUEUED&pipeline=sync&action=cancel",
    )
    .await;
    assert!(confirm.contains("data-count=\"2\""), "{confirm}");
    let done = client
        .post(dash.url("/bulk"))
        .form(&[
            ("action", "cancel"),
            ("queue", "orders"),
            ("state", "QUEUED"),
            ("pipeline", "sync"),
            ("reason", "superseded"),
            ("token", TOKEN),
            ("operator", "dave"),
        ])
        .send()
        .await
        .unwrap();
    assert!(done.text().await.unwrap().contains("data-done=\"2\""));
    assert_eq!(state(&q, &a).await, Some(JobState::Cancelled));
    assert_eq!(state(&q, &report).await, Some(JobState::Queued));

    // delete from the CANCELLED list: a reason is required, then they are gone
    let (_, page) = get(&dash, "/jobs?queue=orders&state=CANCELLED").await;
    assert!(page.contains("data-action=\"delete\""), "{page}");
    let no_reason = client
        .post(dash.url("/bulk"))
        .form(&[
            ("action", "delete"),
            ("queue", "orders"),
            ("state", "CANCELLED"),
            ("ids", a.as_str()),
            ("token", TOKEN),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(no_reason.status(), 400);
    let done = client
        .post(dash.url("/bulk"))
        .form(&[
            ("action", "delete"),
            ("queue", "orders"),
            ("state", "CANCELLED"),
            ("ids", &format!("{a},{b}")),
            ("reason", "noise"),
            ("token", TOKEN),
            ("operator", "dave"),
        ])
        .send()
        .await
        .unwrap();
    assert!(done.text().await.unwrap().contains("data-done=\"2\""));
    assert_eq!(state(&q, &a).await, None);
    assert_eq!(state(&q, &b).await, None);

    // the bulk page offers the known queues and pipelines (published by a
    // worker, or with waiting jobs: `report`), not free text
    let (_, bulk) = get(&dash, "/bulk").await;
    let pipeline_select = bulk
        .split("<select name=\"pipeline\">")
        .nth(1)
        .and_then(|rest| rest.split("</select>").next())
        .expect("a pipeline select");
    assert!(
        pipeline_select.contains("<option value=\"report\">report</option>"),
        "{pipeline_select}"
    );
    assert!(!bulk.contains("type=\"text\" name=\"pipeline\""), "{bulk}");
    assert!(bulk.contains("<option value=\"orders\">orders</option>"));
    assert!(bulk.contains("form class=\"bulk-delete\""));
    dash.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_delete_and_dry_runs_from_the_command_line() {
    let srv = RedisServer::start();
    let q = queue(&srv, "orders").await;
    let a = failed(&q, 1).await;
    let b = failed(&q, 2).await;
    enqueue(&q, job("report", 3)).await;

    // a dry run needs no reason, and counts in words
    cli(
        &srv,
        &[
            "bulk",
            "cancel",
            "--queue",
            "orders",
            "--pipeline",
            "report",
            "--dry-run",
        ],
    )
    .await
    .ok()
    .shows(&["would touch 1 QUEUED job of queue orders"]);
    cli(
        &srv,
        &[
            "bulk",
            "delete",
            "--queue",
            "orders",
            "--state",
            "failed",
            "--dry-run",
        ],
    )
    .await
    .ok()
    .shows(&[
        "would touch 2 FAILED jobs of queue orders",
        a.as_str(),
        b.as_str(),
    ]);
    // a run needs one
    cli(
        &srv,
        &["bulk", "delete", "--queue", "orders", "--state", "failed"],
    )
    .await
    .code(2);
    let done = cli(
        &srv,
        &[
            "--json",
            "bulk",
            "delete",
            "--queue",
            "orders",
            "--state",
            "failed",
            a.as_str(),
            "--reason",
            "test data",
        ],
    )
    .await
    .ok()
    .json();
    assert_eq!(done["done"], 1, "{done:#}");
    assert_eq!(done["action"], "delete");
    assert_eq!(state(&q, &a).await, None);
    assert_eq!(state(&q, &b).await, Some(JobState::Failed));
    // an unknown queue is an error naming the known ones
    let unknown = cli(
        &srv,
        &[
            "bulk",
            "delete",
            "--queue",
            "ordres",
            "--state",
            "failed",
            "--dry-run",
        ],
    )
    .await;
    assert_ne!(unknown.code, 0);
    assert!(unknown.stderr.contains("orders"), "{unknown:?}");
}
