//! Proves that the Lua scripts and `leasehold_core::transitions::TRANSITIONS` agree, exhaustively.
//!
//! For every operation that acts on an existing job (in every variant: each
//! finish outcome, each resolve target, both retry modes, start and sweep with
//! and without a pending cancel request) and every state a job can be in, a
//! fresh job is brought into that state through the real client against a
//! private `redis-server`, the operation is applied with the job's lease token
//! (when it has one), and:
//!
//! * if the table has a row `(op, from, to)` the operation succeeds and the job
//!   ends in `to` (a new attempt in QUEUED for `Kind::NewAttempt` rows), with its
//!   indexes (leases, stale, done, ready, lock, inputs) consistent with `to`;
//! * otherwise the operation is refused with the typed error the client
//!   documents, whose `Display` names the job, its state and the operation, and
//!   every key of the queue is byte-for-byte unchanged.
//!
//! Holder operations that the table allows are first tried with a wrong token:
//! they must be refused as `LeaseLost` (renew: `Renewal::Lost`) and change
//! nothing. Finally every row of the table must have been exercised.
//!
//! Lease expiry is forced by rewriting the job's score in `<base>:leases` to 0

mod support;

use leasehold_core::transitions::{Op, TRANSITIONS};
use leasehold_core::StaleLock;
use support::table::*;
use support::table_run::*;

#[test]
fn every_op_that_acts_on_a_job_is_covered() {
    let ops: Vec<Op> = Action::ALL.iter().map(|a| a.op()).collect();
    for op in [
        Op::Lease,
        Op::Start,
        Op::Renew,
        Op::Finish,
        Op::Release,
        Op::Cancel,
        Op::Sweep,
        Op::Retry,
        Op::Resolve,
    ] {
        assert!(ops.contains(&op), "{op} is not exercised");
    }
    for t in TRANSITIONS {
        assert!(
            t.op == Op::Enqueue || ops.contains(&t.op),
            "row {t:?} has no action"
        );
    }
}

#[tokio::test]
async fn scripts_agree_with_the_table_plain_job() {
    exhaustive(Flavor {
        name: "plain",
        resource: None,
        input_key: None,
        stale_lock: StaleLock::Hold,
    })
    .await;
}

#[tokio::test]
async fn scripts_agree_with_the_table_resource_held_when_stale() {
    exhaustive(Flavor {
        name: "resource+input key, stale holds lock",
        resource: Some("shop:a"),
        input_key: Some("shop:a:00"),
        stale_lock: StaleLock::Hold,
    })
    .await;
}

#[tokio::test]
async fn scripts_agree_with_the_table_resource_released_when_stale() {
    exhaustive(Flavor {
        name: "resource+input key, stale releases lock",
        resource: Some("shop:b"),
        input_key: Some("shop:b:00"),
        stale_lock: StaleLock::Release,
    })
    .await;
}
