//! The `leasehold` binary against a private 3-master Redis Cluster
//! (`redis+cluster://` URL): `status` lists the queues of every shard,
//! `show` finds a job wherever its queue lives, `jobs --id-prefix` finds it
//! on its queue's shard, `events --follow` follows
//! queues on several shards, and the dashboard's queues page and API show
//! every queue; none of it meets CROSSSLOT.

mod support;

use std::process::Stdio;
use std::time::Duration;

use leasehold_core::{JobId, Queue, QueueConfig};
use leasehold_testkit::RedisCluster;
use serde_json::{json, Value};
use support::binary::{command, run_cmd, Run};
use support::dashboard::{http, Dashboard};
use support::jobs::{enqueue, job, lease_one, start};
use tokio::io::{AsyncBufReadExt, BufReader};

/// Queues on the three masters' slots (3, 3 and 2 of them).
const QUEUES: [&str; 8] = ["q0", "q1", "q2", "q4", "q5", "q3", "q8", "q9"];

/// A client of `name` through the cluster.
async fn queue(cluster: &RedisCluster, name: &str) -> Queue {
    Queue::connect(&cluster.url(), name, QueueConfig::default())
        .await
        .expect("connect to the cluster")
}

/// One job per queue (the first one running), their ids by queue.
async fn scene(cluster: &RedisCluster) -> Vec<(Queue, JobId)> {
    let mut out = Vec::new();
    for (i, name) in QUEUES.iter().enumerate() {
        let q = queue(cluster, name).await;
        let id = enqueue(&q, job("sync", i as u32)).await;
        if i == 0 {
            let lease = lease_one(&q, "w1", "sync", Duration::from_secs(60)).await;
            start(&q, &lease).await;
        }
        out.push((q, id));
    }
    let owners: std::collections::BTreeSet<usize> = out
        .iter()
        .map(|(q, _)| cluster.owner_of_key(q.keys().base()))
        .collect();
    assert_eq!(owners.len(), 3, "the queues are on all three masters");
    out
}

#[tokio::test]
async fn status_show_and_events_see_every_shard() {
    let cluster = RedisCluster::start(3, 0);
    let jobs = scene(&cluster).await;
    let url = cluster.url();

    let v = run_cmd(command(&url, &["status", "--json"]))
        .await
        .ok()
        .json();
    let listed: Vec<&str> = v
        .as_array()
        .expect("a list of queues")
        .iter()
        .map(|s| s["queue"].as_str().unwrap())
        .collect();
    let mut want = QUEUES.to_vec();
    want.sort();
    assert_eq!(listed, want, "{v}");
    let running = v
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["queue"] == "q0")
        .unwrap();
    assert_eq!(running["counts"]["running"], 1, "{running}");

    // a job found without naming its queue, on any shard
    for (q, id) in &jobs {
        let shown = run_cmd(command(&url, &["show", id.as_str(), "--json"]))
            .await
            .ok()
            .json();
        assert_eq!(shown["job"]["id"], id.as_str(), "{shown}");
        assert_eq!(shown["job"]["queue"], q.name(), "{shown}");
    }

    // a job found by a prefix of its id (a SCAN on the master of its queue's slot)
    for (q, id) in &jobs {
        let found = run_cmd(command(
            &url,
            &[
                "--json",
                "jobs",
                "--queue",
                q.name(),
                "--id-prefix",
                &id.as_str()[..20],
            ],
        ))
        .await
        .ok()
        .json();
        let ids: Vec<&str> = found["jobs"]
            .as_array()
            .unwrap_or_else(|| panic!("a list of jobs: {found}"))
            .iter()
            .filter_map(|j| j["id"].as_str())
            .collect();
        assert_eq!(ids, [id.as_str()], "{found}");
    }

    // events of every queue (discovered on three shards), followed by one process
    let mut cmd = command(&url, &["events", "--follow", "--json"]);
    // its complaints, if any, go to the test's output
    cmd.stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut child = cmd.spawn().expect("spawn the follower");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = async || -> Value {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("a line within 30 s")
            .expect("read")
            .expect("the follower is running");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    };
    // first the recent history: every scene job's enqueue
    let mut pending: std::collections::BTreeSet<String> =
        jobs.iter().map(|(_, id)| id.to_string()).collect();
    while !pending.is_empty() {
        let e = next().await;
        if e["op"] == json!("enqueue") {
            pending.remove(e["job"].as_str().unwrap());
        }
    }
    // then new events on every shard, as they happen
    for (i, (q, _)) in jobs.iter().enumerate() {
        pending.insert(enqueue(q, job("sync", 100 + i as u32)).await.to_string());
    }
    while !pending.is_empty() {
        let e = next().await;
        if e["op"] == json!("enqueue") {
            pending.remove(e["job"].as_str().unwrap());
        }
    }
    child.kill().await.expect("stop the follower");
    assert_eq!(cluster.error_count("CROSSSLOT"), 0);
}

#[tokio::test]
async fn the_dashboard_shows_the_queues_of_every_shard() {
    let cluster = RedisCluster::start(3, 0);
    let jobs = scene(&cluster).await;
    let dash = Dashboard::start(&cluster.url(), &[], None).await;
    let c = http();
    let r = c.get(dash.url("/api/queues")).send().await.expect("GET");
    assert!(r.status().is_success(), "{r:?}");
    let v: Value = r.json().await.expect("JSON");
    let listed: Vec<&str> = v
        .as_array()
        .expect("a list of queues")
        .iter()
        .map(|s| s["queue"].as_str().unwrap())
        .collect();
    let mut want = QUEUES.to_vec();
    want.sort();
    assert_eq!(listed, want, "{v}");
    let r = c.get(dash.url("/")).send().await.expect("GET /");
    assert!(r.status().is_success(), "{r:?}");
    let page = r.text().await.unwrap();
    for name in QUEUES {
        assert!(page.contains(name), "the queues page lacks {name}:\n{page}");
    }
    let (q, id) = &jobs[2];
    let r = c
        .get(dash.url(&format!("/jobs/{}/{}", q.name(), id.as_str())))
        .send()
        .await
        .expect("GET a job page");
    assert!(r.status().is_success(), "{r:?}");
    assert_eq!(cluster.error_count("CROSSSLOT"), 0);
}

#[tokio::test]
async fn a_server_url_of_a_cluster_node_says_to_use_a_cluster_url() {
    let cluster = RedisCluster::start(3, 0);
    let jobs = scene(&cluster).await;
    let (q, _) = jobs
        .iter()
        .find(|(q, _)| cluster.owner_of_key(q.keys().base()) != 0)
        .expect("a queue on another node than node 0");
    let port = cluster.node(0).port().expect("a TCP node");
    let run = run_cmd(command(
        &format!("redis://127.0.0.1:{port}"),
        &["status", "--queue", q.name()],
    ))
    .await;
    assert_ne!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("redis+cluster://"), "{run:?}");
}

/// `rediss+cluster://` with an ACL user: three TLS masters (`--tls-cluster
/// yes`: the cluster bus and the slot map over TLS too), a private CA given
/// through `SSL_CERT_FILE`. Needs the `openssl` command to make the
/// certificates; without it the test says so and passes.
#[tokio::test]
async fn tls_and_an_acl_user_on_a_cluster() {
    let Some(tls) = support::tls::make() else {
        return;
    };
    let (cert, key, ca) = (tls.cert.clone(), tls.key.clone(), tls.ca.clone());
    let tls_ports: Vec<u16> = (0..3)
        .map(|_| {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        })
        .collect();
    let cluster = RedisCluster::start_with(3, 0, |i| {
        [
            "--tls-port",
            &tls_ports[i].to_string(),
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca,
            "--tls-auth-clients",
            "no",
            "--tls-cluster",
            "yes",
        ]
        .iter()
        .map(|a| (*a).to_owned())
        .collect()
    });
    for m in 0..3 {
        cluster.node(m).cmd(&[
            "ACL", "SETUSER", "alice", "on", ">s3cret", "~*", "&*", "+@all",
        ]);
    }
    let seeds: Vec<String> = tls_ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let url = format!("rediss+cluster://alice:s3cret@{}", seeds.join(","));
    let queues = ["q0", "q1", "q2"];
    for (i, name) in queues.iter().enumerate() {
        let input = format!("{{\"n\":{i}}}");
        let args = [
            "enqueue",
            "sync",
            "--unregistered",
            "--queue",
            name,
            "--input",
            &input,
        ];
        let mut cmd = command(&url, &args);
        cmd.env("SSL_CERT_FILE", &ca);
        run_cmd(cmd).await.ok();
    }
    let mut cmd = command(&url, &["status", "--json"]);
    cmd.env("SSL_CERT_FILE", &ca);
    let v = run_cmd(cmd).await.ok().json();
    let listed: Vec<&str> = v
        .as_array()
        .expect("a list of queues")
        .iter()
        .map(|s| s["queue"].as_str().unwrap())
        .collect();
    assert_eq!(listed, queues, "{v}");
    // the three queues are on three masters: each was reached over TLS
    let owners: std::collections::BTreeSet<usize> = queues
        .iter()
        .map(|q| cluster.owner_of_key(&format!("leasehold:{{{q}}}")))
        .collect();
    assert_eq!(owners.len(), 3);
    // a wrong password: authentication failed (6), the password not shown
    let bad = format!("rediss+cluster://alice:wrong@{}", seeds.join(","));
    let mut cmd = command(&bad, &["status"]);
    cmd.env("SSL_CERT_FILE", &ca);
    let run = run_cmd(cmd).await.code(6);
    assert!(!run.stderr.contains(":wrong@"), "{run:?}");
    // an untrusted server certificate is refused
    let mut cmd = command(&url, &["status"]);
    cmd.env("SSL_CERT_FILE", &cert);
    let run = run_cmd(cmd).await;
    assert_ne!(run.code, 0, "{run:?}");
}

/// A master killed and its replica not promoted (automatic failover off, and
/// the cluster serving the slots it still covers): `status` shows every
/// queue of the other masters, names each queue it cannot read with its
/// master ("master 127.0.0.1:P unreachable: failover in progress?") and
/// exits 5; `status --queue` of a lost queue says the same, never "give a
/// cluster URL" (one was given). Once the replica takes over, all is back.
#[tokio::test]
async fn status_with_a_master_down_shows_the_others_and_names_the_lost_queues() {
    let mut cluster = RedisCluster::start_with(3, 1, |i| {
        let mut args = vec!["--cluster-require-full-coverage".into(), "no".into()];
        if i >= 3 {
            args.extend(["--cluster-replica-no-failover".into(), "yes".into()]);
        }
        args
    });
    let jobs = scene(&cluster).await;
    let url = cluster.url();
    let victim = cluster.owner_of_key(jobs[1].0.keys().base());
    let port = cluster.node(victim).port().expect("a TCP node");
    let on_victim = |q: &Queue| cluster.owner_of_key(q.keys().base()) == victim;
    let names = |lost: bool| -> Vec<&str> {
        QUEUES
            .iter()
            .zip(&jobs)
            .filter(|(_, (q, _))| on_victim(q) == lost)
            .map(|(name, _)| *name)
            .collect()
    };
    let (lost, kept) = (names(true), names(false));
    // the replica of the victim (replicas follow the masters in node order)
    let replica = (3..cluster.len())
        .find(|&i| {
            cluster
                .node(i)
                .info("replication")
                .contains(&format!("master_port:{port}"))
        })
        .expect("the victim's replica");
    cluster.kill(victim);

    let run = status_with_a_master_down(&url, &["status"]).await;
    for q in &kept {
        assert!(
            run.stdout
                .lines()
                .any(|l| l.split_whitespace().next() == Some(q)),
            "{q} not shown:\n{}",
            run.stdout
        );
    }
    for q in &lost {
        assert!(
            run.stderr.contains(&format!(
                "queue {q}: master 127.0.0.1:{port} unreachable: failover in progress?"
            )),
            "{q} not named:\n{}",
            run.stderr
        );
        assert!(
            !run.stdout.contains(&format!("{q} (Redis time")),
            "{}",
            run.stdout
        );
    }
    assert!(!run.stderr.contains("give a cluster URL"), "{}", run.stderr);

    // the JSON has the entries of /api/queues: each queue read
    // ("reachable": true, its status) and each queue not read ("reachable":
    // false, its master and the line printed on stderr)
    let json = status_with_a_master_down(&url, &["status", "--json"]).await;
    let v = json.json();
    let entries = v.as_array().expect("a list of queues");
    let listed: Vec<String> = entries
        .iter()
        .filter(|s| s["reachable"] == true)
        .map(|s| s["queue"].as_str().unwrap().to_owned())
        .collect();
    let mut want: Vec<String> = kept.iter().map(|q| q.to_string()).collect();
    want.sort();
    assert_eq!(listed, want, "{v:#}");
    assert!(
        entries
            .iter()
            .filter(|s| s["reachable"] == true)
            .all(|s| s.get("counts").is_some()),
        "{v:#}"
    );
    let not_read = queues_not_read(entries, port, &json.stderr);
    let mut lost_sorted = lost.clone();
    lost_sorted.sort();
    assert_eq!(not_read, lost_sorted, "{v:#}");
    assert_eq!(entries.len(), QUEUES.len(), "{v:#}");

    let one = status_with_a_master_down(&url, &["status", "--queue", lost[0]]).await;
    assert!(
        one.stderr.contains(&format!(
            "queue {}: master 127.0.0.1:{port} unreachable: failover in progress?",
            lost[0]
        )),
        "{}",
        one.stderr
    );
    assert!(!one.stderr.contains("give a cluster URL"), "{}", one.stderr);

    // the replica takes over: every queue is back
    cluster.take_over(replica);
    let back = run_cmd(command(&url, &["status", "--json"])).await.ok();
    let back = back.json();
    assert_eq!(back.as_array().map(Vec::len), Some(QUEUES.len()));
    assert!(
        back.as_array()
            .unwrap()
            .iter()
            .all(|e| e["reachable"] == true),
        "{back:#}"
    );
}

/// Runs `args` until it exits 5 (a master down, the rest shown), for 30 s at
/// most: just after a master dies, a fresh client may still be handed a
/// redirection to it (exit 1) until every node has marked it failed.
async fn status_with_a_master_down(url: &str, args: &[&str]) -> Run {
    let until = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let run = run_cmd(command(url, args)).await;
        if run.code == 5 || std::time::Instant::now() >= until {
            return run.code(5);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The dashboard with a master killed that has no replica: its queues cannot
/// even be listed, and `/api/queues` says so with an entry for the master
/// (`"queue": null`, `"reachable": false`, its address and the line the
/// queues page shows) beside the queues of the other masters.
#[tokio::test]
async fn api_queues_names_a_master_whose_queues_cannot_be_listed() {
    let mut cluster = RedisCluster::start_with(3, 0, |_| {
        vec!["--cluster-require-full-coverage".into(), "no".into()]
    });
    let jobs = scene(&cluster).await;
    let victim = cluster.owner_of_key(jobs[1].0.keys().base());
    let port = cluster.node(victim).port().expect("a TCP node");
    let mut kept: Vec<&str> = QUEUES
        .iter()
        .zip(&jobs)
        .filter(|(_, (q, _))| cluster.owner_of_key(q.keys().base()) != victim)
        .map(|(name, _)| *name)
        .collect();
    kept.sort();
    let dash = Dashboard::start(&cluster.url(), &[], None).await;
    let c = http();
    cluster.kill(victim);

    let line = format!(
        "master 127.0.0.1:{port} unreachable: failover in progress? its queues are not listed"
    );
    // until every node has marked the master failed, a request may still be
    // handed a redirection to it: ask again for 30 s at most
    let until = std::time::Instant::now() + Duration::from_secs(30);
    let entries = loop {
        let r = c.get(dash.url("/api/queues")).send().await.expect("GET");
        if r.status().is_success() {
            let v: Value = r.json().await.expect("JSON");
            let entries = v.as_array().expect("a list of queues").clone();
            if entries.iter().any(|e| e["reachable"] == false) {
                break entries;
            }
        }
        assert!(
            std::time::Instant::now() < until,
            "no answer naming the lost master in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let lost: Vec<&Value> = entries.iter().filter(|e| e["reachable"] == false).collect();
    assert_eq!(lost.len(), 1, "{entries:?}");
    let master = lost[0];
    assert_eq!(master["queue"], Value::Null, "{master}");
    assert_eq!(master["master"], format!("127.0.0.1:{port}"), "{master}");
    assert!(
        master["error"].as_str().unwrap().starts_with(&line),
        "{master}"
    );
    let mut read: Vec<&str> = entries
        .iter()
        .filter(|e| e["reachable"] == true)
        .map(|e| e["queue"].as_str().unwrap())
        .collect();
    read.sort();
    assert_eq!(read, kept, "{entries:?}");
    // /metrics: the master's queues unlisted, a 0 for it with an empty queue
    let metrics = get_metrics(&c, &dash).await;
    assert!(
        metrics.contains(&format!(
            "leasehold_queue_reachable{{queue=\"\",master=\"127.0.0.1:{port}\"}} 0\n"
        )),
        "{metrics}"
    );
    for q in &kept {
        assert!(
            metrics.contains(&format!(
                "leasehold_queue_reachable{{queue=\"{q}\",master=\"\"}} 1\n"
            )),
            "{q} not 1:\n{metrics}"
        );
    }
    let page = c
        .get(dash.url("/"))
        .send()
        .await
        .expect("GET /")
        .text()
        .await
        .unwrap();
    assert!(page.contains(&line), "{page}");
}

/// The dashboard with a master killed and its replica not promoted: the
/// queues page and `/api/queues` show every queue of the other masters, and
/// name each queue they cannot read with its master ("master 127.0.0.1:P
/// unreachable: failover in progress?"), as `status` does: the JSON has an
/// entry for each of them (`"reachable": false`, its master and that line)
/// beside the queues read (`"reachable": true`); once the replica takes
/// over, every queue is shown again.
#[tokio::test]
async fn the_dashboard_with_a_master_down_shows_the_others_and_names_the_lost_queues() {
    let mut cluster = RedisCluster::start_with(3, 1, |i| {
        let mut args = vec!["--cluster-require-full-coverage".into(), "no".into()];
        if i >= 3 {
            args.extend(["--cluster-replica-no-failover".into(), "yes".into()]);
        }
        args
    });
    let jobs = scene(&cluster).await;
    let victim = cluster.owner_of_key(jobs[1].0.keys().base());
    let port = cluster.node(victim).port().expect("a TCP node");
    let on_victim = |lost: bool| -> Vec<&str> {
        let mut names: Vec<&str> = QUEUES
            .iter()
            .zip(&jobs)
            .filter(|(_, (q, _))| (cluster.owner_of_key(q.keys().base()) == victim) == lost)
            .map(|(name, _)| *name)
            .collect();
        names.sort();
        names
    };
    let (lost, kept) = (on_victim(true), on_victim(false));
    let replica = (3..cluster.len())
        .find(|&i| {
            cluster
                .node(i)
                .info("replication")
                .contains(&format!("master_port:{port}"))
        })
        .expect("the victim's replica");
    let dash = Dashboard::start(&cluster.url(), &[], None).await;
    let c = http();
    cluster.kill(victim);

    // until every node has marked the master failed, a request may still be
    // handed a redirection to it: ask again for 30 s at most
    let until = std::time::Instant::now() + Duration::from_secs(30);
    let (listed, named, entries) = loop {
        let r = c.get(dash.url("/api/queues")).send().await.expect("GET");
        if r.status().is_success() {
            let named = r
                .headers()
                .get("x-leasehold-unreachable")
                .map(|v| v.to_str().unwrap().to_owned());
            let v: Value = r.json().await.expect("JSON");
            let entries = v.as_array().expect("a list of queues").clone();
            let listed: Vec<String> = entries
                .iter()
                .filter(|s| s["reachable"] != false)
                .map(|s| s["queue"].as_str().unwrap().to_owned())
                .collect();
            if let Some(named) = named {
                break (listed, named, entries);
            }
        }
        assert!(
            std::time::Instant::now() < until,
            "no answer naming the lost master in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(listed, kept, "{named}");
    for q in &lost {
        assert!(
            named.contains(&format!(
                "queue {q}: master 127.0.0.1:{port} unreachable: failover in progress?"
            )),
            "{q} not named: {named}"
        );
    }
    // the body says it too: one entry per queue not read, with its master
    // and the line the page shows, none of them left out
    let not_read = queues_not_read(&entries, port, &named);
    assert_eq!(not_read, lost, "{entries:?}");
    assert!(
        entries
            .iter()
            .all(|e| e["reachable"] == true || e["reachable"] == false),
        "every entry says whether it was read: {entries:?}"
    );
    // /metrics says it too: leasehold_queue_reachable 0 for each queue not
    // read, with its master, and 1 for each queue read
    let metrics = get_metrics(&c, &dash).await;
    for q in &lost {
        assert!(
            metrics.contains(&format!(
                "leasehold_queue_reachable{{queue=\"{q}\",master=\"127.0.0.1:{port}\"}} 0\n"
            )),
            "{q} not 0:\n{metrics}"
        );
    }
    for q in &kept {
        assert!(
            metrics.contains(&format!(
                "leasehold_queue_reachable{{queue=\"{q}\",master=\"\"}} 1\n"
            )),
            "{q} not 1:\n{metrics}"
        );
    }
    let r = c.get(dash.url("/")).send().await.expect("GET /");
    assert!(r.status().is_success(), "{r:?}");
    let page = r.text().await.unwrap();
    assert!(page.contains("Not every queue could be read"), "{page}");
    for q in &lost {
        assert!(
            page.contains(&format!(
                "queue {q}: master 127.0.0.1:{port} unreachable: failover in progress?"
            )),
            "the page does not name {q}:\n{page}"
        );
        assert!(!page.contains(&format!("data-queue=\"{q}\"")), "{q} shown");
    }
    for q in &kept {
        assert!(
            page.contains(&format!("data-queue=\"{q}\"")),
            "the page lacks {q}:\n{page}"
        );
    }

    // the replica takes over: every queue is back
    cluster.take_over(replica);
    let until = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let r = c.get(dash.url("/api/queues")).send().await.expect("GET");
        if r.status().is_success() && r.headers().get("x-leasehold-unreachable").is_none() {
            let v: Value = r.json().await.expect("JSON");
            let all = v.as_array().cloned().unwrap_or_default();
            if all.len() == QUEUES.len() && all.iter().all(|e| e["reachable"] == true) {
                break;
            }
        }
        assert!(
            std::time::Instant::now() < until,
            "not every queue back in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let metrics = get_metrics(&c, &dash).await;
    let reach: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("leasehold_queue_reachable{"))
        .collect();
    assert_eq!(reach.len(), QUEUES.len(), "{metrics}");
    assert!(reach.iter().all(|l| l.ends_with("} 1")), "{metrics}");
}

/// The queues that `entries` (the JSON of `status --json` or `GET
/// /api/queues`) gives as not read, sorted; each entry checked on the way: its
/// master is the one on `port`, its error is the failover line and is also in
/// `shown` (the stderr of `status`, or the lines the page shows), and it has
/// no counts.
fn queues_not_read<'a>(entries: &'a [Value], port: u16, shown: &str) -> Vec<&'a str> {
    let mut not_read: Vec<&str> = Vec::new();
    for e in entries.iter().filter(|e| e["reachable"] == false) {
        let q = e["queue"].as_str().expect("a queue named");
        assert_eq!(e["master"], format!("127.0.0.1:{port}"), "{e}");
        let error = e["error"].as_str().expect("an error line");
        assert!(
            error.starts_with(&format!(
                "queue {q}: master 127.0.0.1:{port} unreachable: failover in progress?"
            )) && shown.contains(error),
            "{e}\n{shown}"
        );
        assert!(e.get("counts").is_none(), "{e}");
        not_read.push(q);
    }
    not_read.sort();
    not_read
}

/// The dashboard's `/metrics`, which must answer 200.
async fn get_metrics(c: &reqwest::Client, dash: &Dashboard) -> String {
    let r = c
        .get(dash.url("/metrics"))
        .send()
        .await
        .expect("GET /metrics");
    assert!(r.status().is_success(), "{r:?}");
    r.text().await.unwrap()
}
