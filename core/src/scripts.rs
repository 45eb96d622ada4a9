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
    // A transition written as a function, called with this script's KEYS and ARGV.
    ($file:literal, $entry:literal) => {
        LazyLock::new(|| {
            Script::new(concat!(
                include_str!("../lua/prelude.lua"),
                "\n",
                include_str!(concat!("../lua/", $file)),
                "\n",
                $entry
            ))
        })
    };
}

/// enqueue.lua
pub(crate) static ENQUEUE: LazyLock<Script> = script!("enqueue.lua");
/// lease.lua
pub(crate) static LEASE: LazyLock<Script> = script!(
    "lease.lua",
    "local ready_keys, delayed_keys, wake_keys, tokens = {}, {}, {}, {}
for p = 1, (#KEYS - 9) / 3 do
  ready_keys[p] = KEYS[7 + 3 * p]
  delayed_keys[p] = KEYS[8 + 3 * p]
  wake_keys[p] = KEYS[9 + 3 * p]
end
local n = tonumber(ARGV[7])
for i = 1, n do tokens[i] = ARGV[7 + i] end
return lease(ready_keys, delayed_keys, wake_keys, ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6]), n, tokens)"
);
/// start.lua
pub(crate) static START: LazyLock<Script> = script!(
    "start.lua",
    "return start(KEYS[10], KEYS[11], KEYS[12], ARGV[4], ARGV[5], ARGV[6])"
);
/// checkpoint.lua
pub(crate) static CHECKPOINT: LazyLock<Script> = script!(
    "checkpoint.lua",
    "return checkpoint(KEYS[10], KEYS[11], ARGV[4], ARGV[5], ARGV[6], ARGV[7], tonumber(ARGV[8]),
  tonumber(ARGV[9]), ARGV[10] == '1')"
);
/// renew.lua
pub(crate) static RENEW: LazyLock<Script> = script!("renew.lua");
/// finish.lua
pub(crate) static FINISH: LazyLock<Script> = script!(
    "finish.lua",
    "return finish(KEYS[10], KEYS[11], KEYS[12], KEYS[13], KEYS[14], KEYS[15], ARGV[4], ARGV[5], ARGV[6], ARGV[7],
  ARGV[8] == '1', tonumber(ARGV[9]), ARGV[10] == '1', ARGV[11], ARGV[12], ARGV[13] == '1', '', '')"
);
/// release.lua
pub(crate) static RELEASE: LazyLock<Script> = script!(
    "release.lua",
    "return release(KEYS[10], KEYS[11], KEYS[12], KEYS[13], KEYS[14], ARGV[4], ARGV[5])"
);
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
pub(crate) static CLAIM_CLEANUP: LazyLock<Script> = script!("claim_cleanup.lua");
/// settle.lua: many holder operations (start, checkpoint, finish, release) and one
/// lease in one call, composed from the same transition functions.
pub(crate) static SETTLE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../lua/prelude.lua"),
        "\n",
        include_str!("../lua/start.lua"),
        "\n",
        include_str!("../lua/checkpoint.lua"),
        "\n",
        include_str!("../lua/finish.lua"),
        "\n",
        include_str!("../lua/release.lua"),
        "\n",
        include_str!("../lua/lease.lua"),
        "\n",
        include_str!("../lua/settle.lua")
    ))
});

/// Every script with its name, for preloading and tests.
pub(crate) fn all() -> [(&'static str, &'static Script); 14] {
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
        ("claim_cleanup", &CLAIM_CLEANUP),
        ("settle", &SETTLE),
    ]
}
