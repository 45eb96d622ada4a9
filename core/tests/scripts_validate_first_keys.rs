//! Forged keys are refused before any write (see `scripts_validate_first.rs`):
//! every script in `core/lua/` is called with each of its keys forged (here, or
//! through `run_cases` in the other `scripts_validate_first*` files), the
//! scripts without malformed-argument cases refuse a forged fixed key, and the
//! keys of another pipeline or resource are refused.

mod support;

use std::time::Duration;

use leasehold_core::Outcome;
use leasehold_testkit::RedisServer;
use support::server::{connect, enqueue, force_expire, get, job, TTL};
use support::validate::*;

/// Every script in core/lua/ is called with each of its keys forged (here or
/// through `run_cases` in the other `scripts_validate_first*` files).
#[test]
fn every_script_is_called_with_forged_keys() {
    let this = [
        include_str!("scripts_validate_first.rs"),
        include_str!("scripts_validate_first_scripts.rs"),
        include_str!("scripts_validate_first_keys.rs"),
    ]
    .concat();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/lua");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("core/lua")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".lua").map(str::to_owned)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 23, "{names:?}");
    for name in &names {
        assert!(
            source_exists(name),
            "{name}.lua is not a script clients call"
        );
        let called = [
            format!("run_cases(&srv, \"{name}\""),
            format!("refuses_forged_keys(&srv, \"{name}\""),
        ];
        assert!(
            called.iter().any(|c| this.contains(c.as_str())),
            "script {name} is never called with forged keys"
        );
    }
}

/// The scripts (and settle operations) without malformed-argument cases above
/// refuse a forged key just the same: pause, limit, group_seal,
/// quarantine_repair, quarantine_purge, delete, run_now, and settle's release,
/// a checkpoint holding a lock, and a lease of two pipelines.
#[tokio::test]
async fn every_other_script_refuses_a_forged_fixed_key_before_writing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    let k = q.keys().clone();
    refuses_forged_keys(&srv, "pause", &|| async {
        enqueue(&q, job("p", 1)).await;
        call(
            &q,
            &[k.ready("p"), k.wake("p")],
            &["pause", "pipeline", "p", "ops", "why"],
        )
    })
    .await;
    refuses_forged_keys(&srv, "limit", &|| async {
        call(&q, &[], &["api", "1000", "1"])
    })
    .await;
    refuses_forged_keys(&srv, "group_seal", &|| async {
        q.create_group(&leasehold_core::NewGroup::new("g"), "t")
            .await
            .unwrap();
        enqueue(&q, job("p", 1).group("g")).await;
        call(&q, &[group_key(&q, "g")], &["g", "ops"])
    })
    .await;
    // a job the sweep set aside (its pipeline field gone)
    let quarantined = || async {
        let l = leased(&q, false).await;
        let _: () = get(&srv, &["HDEL", &k.job(l.job.as_str()), "pipeline"]);
        force_expire(&srv, &q, &l.job);
        q.sweep(10).await.expect("sweep");
        let id = l.job.to_string();
        call(&q, &[k.job(&id)], &[&id, "ops"])
    };
    refuses_forged_keys(&srv, "quarantine_repair", &quarantined).await;
    refuses_forged_keys(&srv, "quarantine_purge", &quarantined).await;
    refuses_forged_keys(&srv, "delete", &|| async {
        let l = running(&q, false).await;
        q.finish(&l, &Outcome::Succeeded).await.expect("finish");
        call(&q, &[k.job(l.job.as_str())], &["ops", "done with it"])
    })
    .await;
    refuses_forged_keys(&srv, "run_now", &|| async {
        let id = enqueue(&q, job("p", 1).delay(Duration::from_secs(3600))).await;
        call(
            &q,
            &[k.job(id.as_str()), k.delayed("p"), k.wake("p")],
            &["ops", "now"],
        )
    })
    .await;
    // settle: a release of a job holding R
    refuses_forged_keys(&srv, "settle", &|| async {
        let l = leased(&q, true).await;
        let keys = [
            k.job(l.job.as_str()),
            k.lock("R"),
            k.parked("R"),
            k.ready("p"),
            k.delayed("p"),
            k.wake("p"),
        ];
        settle_call(&q, &keys, 1, &["release", &l.token, "R"])
    })
    .await;
    // settle: a finish of a RUNNING job holding R, and a lease of p and p2
    refuses_forged_keys(&srv, "settle", &|| async {
        let l = running(&q, true).await;
        enqueue(&q, job("p2", 1)).await;
        let ttl = TTL.as_millis().to_string();
        let lock_ttl = (TTL.as_millis() + 3_600_000).to_string();
        let keys = [
            k.job(l.job.as_str()),
            k.lock("R"),
            k.parked("R"),
            k.ready("p"),
            k.delayed("p"),
            k.wake("p"),
            k.ready("p2"),
            k.delayed("p2"),
            k.wake("p2"),
        ];
        call(
            &q,
            &keys,
            &[
                "w1",
                &ttl,
                &lock_ttl,
                "1",
                "2",
                "1",
                "finish",
                &l.token,
                "R",
                "SUCCEEDED",
                "fetch",
                "{}",
                "0",
                "tok-1",
            ],
        )
    })
    .await;
}

/// The keys settle, renew and cancel are given for a job are compared with
/// the job's own pipeline and resource once it is read: another pipeline's
/// keys (consistent among themselves) or another resource's lock refuse the
/// operation with a `BAD_KEY` naming the key, and nothing is written.
#[tokio::test]
async fn keys_of_another_pipeline_or_resource_are_refused_before_writing() {
    let srv = RedisServer::start();
    let q = connect(&srv, "vf").await;
    let k = q.keys().clone();
    let other = [k.ready("p2"), k.delayed("p2"), k.wake("p2")];
    let expect_refused = |c: &Call, script: &str, at: usize, key: &str| {
        let before = full_dump(&srv);
        let reply = eval(&srv, script, c);
        let text = bad_key_text(&reply)
            .unwrap_or_else(|| panic!("{script}: {key} at KEYS[{at}] accepted: {reply:?}"));
        assert!(
            text.contains(&format!("KEYS[{at}] is {key}, not ")),
            "{script}: {text}"
        );
        assert!(
            before == full_dump(&srv),
            "{script}: refused but Redis changed"
        );
    };
    // a failing finish that would queue the job again in p2
    let l = running(&q, false).await;
    let mut keys = vec![k.job(l.job.as_str())];
    keys.extend(other.iter().cloned());
    let c = settle_call(
        &q,
        &keys,
        1,
        &[
            "finish", &l.token, "", "FAILED", "", "", "io", "m", "1", "0", "0", "", "0", "0",
        ],
    );
    expect_refused(&c, "settle", 11, &k.ready("p2"));
    // a release into p2
    let l = leased(&q, false).await;
    let mut keys = vec![k.job(l.job.as_str())];
    keys.extend(other.iter().cloned());
    let c = settle_call(&q, &keys, 1, &["release", &l.token, ""]);
    expect_refused(&c, "settle", 11, &k.ready("p2"));
    // a renew naming the lock of S for a job holding R
    let l = leased(&q, true).await;
    let ttl = TTL.as_millis().to_string();
    let c = call(
        &q,
        &[k.job(l.job.as_str()), k.lock("S")],
        &[&ttl, &ttl, &l.token, "1"],
    );
    expect_refused(&c, "renew", 11, &k.lock("S"));
    // a cancel of a QUEUED job of p naming p2's sets
    let id = enqueue(&q, job("p", 9)).await;
    let c = call(
        &q,
        &[
            k.job(id.as_str()),
            k.ready("p2"),
            k.delayed("p2"),
            k.job(id.as_str()),
        ],
        &["stop", "ops", ""],
    );
    expect_refused(&c, "cancel", 11, &k.ready("p2"));
}
