//! The transition-table cases of `transition_table.rs` through a cluster
//! client of a private 3-master cluster: every script's keys are in the
//! queue's slot, and no call meets CROSSSLOT.

mod support;

use leasehold_core::StaleLock;
use leasehold_testkit::RedisCluster;
use support::table::*;
use support::table_run::*;

/// The same cases through a cluster client of a private 3-master cluster,
/// the keys compared on the master that holds queue `q`'s slot (not the
/// first seed, so the client is redirected there): every script's keys are in
/// the queue's slot, and no call meets CROSSSLOT.
#[tokio::test]
async fn scripts_agree_with_the_table_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let owner = cluster.owner_of_key(&format!("leasehold:{{{QUEUE}}}"));
    assert_ne!(
        owner, 0,
        "queue {QUEUE} lives on another node than the first seed"
    );
    exhaustive_on(
        cluster.node(owner),
        &cluster.url(),
        Flavor {
            name: "cluster: resource+input key, stale holds lock",
            resource: Some("shop:c"),
            input_key: Some("shop:c:00"),
            stale_lock: StaleLock::Hold,
        },
    )
    .await;
    assert_eq!(cluster.error_count("CROSSSLOT"), 0);
}
