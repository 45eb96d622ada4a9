//! The transition scripts, one `.lua` file each, loaded once and called by SHA.

use std::sync::LazyLock;

use deadpool_redis::redis::Script;

macro_rules! script {
    ($file:literal) => {
        LazyLock::new(|| {
            Script::new(concat!(
                include_str!("../lua/prelude.lua"),
                "\n",
                include_str!(concat!("../lua/", $file))
            ))
        })
    };
}

/// enqueue.lua
pub(crate) static ENQUEUE: LazyLock<Script> = script!("enqueue.lua");
/// lease.lua
pub(crate) static LEASE: LazyLock<Script> = script!("lease.lua");
/// start.lua
pub(crate) static START: LazyLock<Script> = script!("start.lua");
/// checkpoint.lua
pub(crate) static CHECKPOINT: LazyLock<Script> = script!("checkpoint.lua");
/// renew.lua
pub(crate) static RENEW: LazyLock<Script> = script!("renew.lua");
/// finish.lua
pub(crate) static FINISH: LazyLock<Script> = script!("finish.lua");
/// release.lua
pub(crate) static RELEASE: LazyLock<Script> = script!("release.lua");
/// cancel.lua
pub(crate) static CANCEL: LazyLock<Script> = script!("cancel.lua");
/// sweep.lua
pub(crate) static SWEEP: LazyLock<Script> = script!("sweep.lua");
/// retry.lua
pub(crate) static RETRY: LazyLock<Script> = script!("retry.lua");
/// resolve.lua
pub(crate) static RESOLVE: LazyLock<Script> = script!("resolve.lua");
/// purge.lua
pub(crate) static PURGE: LazyLock<Script> = script!("purge.lua");

/// Every script with its name, for preloading and tests.
pub(crate) fn all() -> [(&'static str, &'static Script); 12] {
    [
        ("enqueue", &ENQUEUE),
        ("lease", &LEASE),
        ("start", &START),
        ("checkpoint", &CHECKPOINT),
        ("renew", &RENEW),
        ("finish", &FINISH),
        ("release", &RELEASE),
        ("cancel", &CANCEL),
        ("sweep", &SWEEP),
        ("retry", &RETRY),
        ("resolve", &RESOLVE),
        ("purge", &PURGE),
    ]
}
