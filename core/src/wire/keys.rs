//! Names of a queue's Redis keys. See `docs/redis-keys.md` for the layout.

use crate::error::Error;
use crate::name::check_name;
pub use crate::name::MAX_NAME_BYTES;

/// The keys of one queue, all under `<prefix>:{<queue>}:` so the queue lives in one cluster slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueKeys {
    queue: String,
    base: String,
}

impl QueueKeys {
    /// Keys of `queue` under `prefix`.
    pub fn new(prefix: &str, queue: &str) -> Result<Self, Error> {
        check_name("key prefix", prefix)?;
        check_name("queue name", queue)?;
        Ok(QueueKeys {
            queue: queue.to_owned(),
            base: format!("{prefix}:{{{queue}}}"),
        })
    }

    /// The queue's name.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// `<prefix>:{<queue>}`, the start of every key of the queue.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The nine fixed keys every script receives as KEYS[1..9], in order.
    pub fn fixed(&self) -> [String; 9] {
        [
            self.base.clone(),
            self.leases(),
            self.fence(),
            self.events(),
            self.inputs(),
            self.parked_resources(),
            self.done(),
            self.stale(),
            self.attempts(),
        ]
    }

    /// Sorted set: job id → lease deadline (ms).
    pub fn leases(&self) -> String {
        format!("{}:leases", self.base)
    }
    /// Counter: the queue's fencing number.
    pub fn fence(&self) -> String {
        format!("{}:fence", self.base)
    }
    /// Stream: every transition.
    pub fn events(&self) -> String {
        format!("{}:events", self.base)
    }
    /// Hash: input key → id of the non-terminal job for it.
    pub fn inputs(&self) -> String {
        format!("{}:inputs", self.base)
    }
    /// Set: resources that have jobs parked on their lock.
    pub fn parked_resources(&self) -> String {
        format!("{}:parked", self.base)
    }
    /// Sorted set: terminal job id → end time (ms), for retention.
    pub fn done(&self) -> String {
        format!("{}:done", self.base)
    }
    /// Hash: the counters of one minute (`ms / 60000`) for the charts (lib/stats).
    pub fn stats(&self, minute: i64) -> String {
        format!("{}:stats:{minute}", self.base)
    }
    /// Hash: the roll-up of one hour (`ms / 3600000`) of [`QueueKeys::stats`] (lib/stats).
    pub fn stats_hour(&self, hour: i64) -> String {
        format!("{}:stats:h:{hour}", self.base)
    }
    /// Hash: the roll-up of one UTC day (`ms / 86400000`) of [`QueueKeys::stats`] (lib/stats).
    pub fn stats_day(&self, day: i64) -> String {
        format!("{}:stats:d:{day}", self.base)
    }
    /// String: the last minute folded into the roll-ups (lib/stats).
    pub fn stats_rolled(&self) -> String {
        format!("{}:stats:rolled", self.base)
    }
    /// Sorted set (lex, every score 0): the search index of jobs (lib/search).
    pub fn search(&self) -> String {
        format!("{}:search", self.base)
    }
    /// Sorted set: STALE job id → time it went STALE (ms).
    pub fn stale(&self) -> String {
        format!("{}:stale", self.base)
    }
    /// List: STALE jobs resolved as FAILED or CANCELLED whose cleanup hook has not run yet.
    pub fn cleanup(&self) -> String {
        format!("{}:cleanup", self.base)
    }
    /// Hash: `<job id>:<n>` → the final record of attempt `n` of that job (JSON),
    /// written once when the attempt ends. Kept out of the job hash so that it
    /// stays small (a listpack) and cheap to update.
    pub fn attempts(&self) -> String {
        format!("{}:attempts", self.base)
    }
    /// The field of attempt `n` of `job` in [`QueueKeys::attempts`].
    pub fn attempt_field(job: &str, n: u32) -> String {
        format!("{job}:{n}")
    }
    /// Sorted set: job id → deadline (ms) of a worker's claim on its cleanup hook
    /// (taken from the cleanup list; back on the list when the claim expires).
    pub fn cleaning(&self) -> String {
        format!("{}:cleaning", self.base)
    }
    /// Hash: pipeline name → its spec (JSON: steps, max attempts, STALE lock policy), written by workers.
    pub fn pipelines(&self) -> String {
        format!("{}:pipelines", self.base)
    }
    /// Set: ids of worker instances that registered with the queue.
    pub fn workers(&self) -> String {
        format!("{}:workers", self.base)
    }
    /// String with a TTL: a live worker's registration (JSON).
    pub fn worker(&self, id: &str) -> String {
        format!("{}:worker:{id}", self.base)
    }
    /// Pub/sub channel (not a key): the id of a LEASED or RUNNING job whose
    /// cancel was just requested, published by `cancel` and `group_cancel`
    /// for its holder to stop the step at once. Named by the scripts from KEYS[1].
    pub fn cancels(&self) -> String {
        format!("{}:cancels", self.base)
    }
    /// Sorted set: job id → time (ms) the job was set aside because it could
    /// not be read (a key of the wrong type, an unreadable field). Named by
    /// the scripts from KEYS[1], not passed in KEYS.
    pub fn quarantine(&self) -> String {
        format!("{}:quarantine", self.base)
    }
    /// Hash: job id → why it is quarantined (JSON: `reason`, `field`, `at`, `from_index`).
    pub fn quarantine_why(&self) -> String {
        format!("{}:quarantine:why", self.base)
    }
    /// Hash: the job record.
    pub fn job(&self, id: &str) -> String {
        format!("{}:job:{id}", self.base)
    }
    /// List: the step outputs job `id`'s holder appended and no seal has
    /// taken yet (pairs `<fence>@<token>@<ms>@<next>@<step>`, output; see
    /// `lib/outputs.lua`).
    /// The scripts name it from KEYS[1].
    pub fn outputs(&self, id: &str) -> String {
        format!("{}:out:{id}", self.base)
    }
    /// Hash: the records of job `id`'s process steps (field `<attempt>:<step>`:
    /// exit, cut-off, progress, log tails as JSON). Only process steps write
    /// it; retention deletes it with the job. Named by the scripts from KEYS[1].
    pub fn process_log(&self, id: &str) -> String {
        format!("{}:proc:{id}", self.base)
    }
    /// Sorted set: ready jobs of `pipeline`, by priority then age.
    pub fn ready(&self, pipeline: &str) -> String {
        format!("{}:ready:{pipeline}", self.base)
    }
    /// List: wake-up tokens for idle workers of `pipeline` (pushed when its jobs
    /// become ready, deleted by a lease that empties its ready set).
    pub fn wake(&self, pipeline: &str) -> String {
        format!("{}:wake:{pipeline}", self.base)
    }
    /// Sorted set: delayed jobs of `pipeline`, by not-before time (ms).
    pub fn delayed(&self, pipeline: &str) -> String {
        format!("{}:delayed:{pipeline}", self.base)
    }
    /// String with a TTL: the id of the job holding `resource`.
    pub fn lock(&self, resource: &str) -> String {
        format!("{}:lock:{resource}", self.base)
    }
    /// Sorted set: jobs waiting for `resource`'s lock.
    pub fn parked(&self, resource: &str) -> String {
        format!("{}:parked:{resource}", self.base)
    }
    /// Hash: schedule `name`'s definition, cursor (end of the last claimed
    /// window, ms), paused flag, last job and tick counters.
    pub fn schedule(&self, name: &str) -> String {
        format!("{}:schedule:{name}", self.base)
    }
    /// Sorted set: schedule name → its next due time (ms).
    pub fn schedules(&self) -> String {
        format!("{}:schedules", self.base)
    }
    /// Stream: schedule `name`'s tick outcomes and operator actions (capped).
    pub fn schedule_ticks(&self, name: &str) -> String {
        format!("{}:schedule:{name}:ticks", self.base)
    }
    /// Pattern matching every key of the queue (for SCAN).
    pub fn pattern(&self) -> String {
        format!("{}:*", self.base)
    }
}
