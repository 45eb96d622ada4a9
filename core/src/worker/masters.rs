//! Per-master work: a worker's periodic per-queue services (sweeps, lease
//! renewals and registration) run once per master, concurrently, so one
//! unreachable or failing-over master never delays another master's queues.
//!
//! Duties:
//! - groups the served queues by the master of their slot (one `CLUSTER
//!   SLOTS`, asked in the background at most every [`REGROUP_EVERY`] and after
//!   a master fails or recovers); on one server, or while the topology is
//!   unknown, each group is what it can be without asking: one group for one
//!   server, one group per queue on a cluster;
//! - at each tick, starts a group's work only when its previous run ended, so
//!   a group stuck on a dead master is skipped, not waited for;
//! - bounds each run by a timeout (the worker's renewal interval, well under
//!   the renewal margin of its shortest lease);
//! - on one server, runs the one group's work in place, unbounded, as a
//!   worker without this module would: no task, no timer, no call added;
//! - logs at warn once when a master starts failing, naming it and its
//!   queues, and at info once when it answers again;
//! - names the master of one queue for the services that run per queue (the
//!   lease loops, the schedules), asked only when their calls start failing.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt as _;
use tokio::task::{JoinHandle, JoinSet};
use tracing::{info, warn};

use crate::error::{Error, Result};
use crate::pool::Master;
use crate::queue::Queue;

/// How often the grouping is asked again while every master answers.
pub(crate) const REGROUP_EVERY: Duration = Duration::from_secs(30);

/// The state of one group's work, shared with its running task.
#[derive(Default)]
struct GroupState {
    /// A run of the group's work is in flight.
    busy: AtomicBool,
    /// Its last run failed or timed out (logged once, until one succeeds).
    failing: AtomicBool,
}

/// Queues served by one master.
struct Group {
    /// The master (`host:port`), or what stands for it: `redis` for one
    /// server, `slot of <queue>` on a cluster whose topology is unknown.
    master: String,
    /// Its queues.
    queues: Vec<Queue>,
    /// Its work's state.
    state: Arc<GroupState>,
}

/// One service's per-master runs (see the file comment).
pub(crate) struct PerMaster {
    /// What the work is, for the logs (`sweep`, `lease renewal`).
    what: &'static str,
    /// Every served queue.
    queues: Vec<Queue>,
    /// The current groups.
    groups: Vec<Group>,
    /// Longest one group's run may take.
    timeout: Duration,
    /// When the grouping was last asked for.
    asked: Option<Instant>,
    /// A master's group failed or recovered since: ask for the grouping again.
    changed: Arc<AtomicBool>,
    /// The grouping being asked for in the background.
    regrouping: Option<JoinHandle<Result<Vec<Option<Master>>>>>,
    /// The runs in flight.
    runs: JoinSet<()>,
}

impl PerMaster {
    /// Per-master runs of `what` over `queues`, each bounded by `timeout`.
    pub(crate) fn new(what: &'static str, queues: Vec<Queue>, timeout: Duration) -> Self {
        let cluster = queues.first().is_some_and(|q| q.pool().is_cluster());
        let groups = if cluster {
            queues
                .iter()
                .map(|q| Group {
                    master: format!("slot of {}", q.name()),
                    queues: vec![q.clone()],
                    state: Arc::default(),
                })
                .collect()
        } else {
            vec![Group {
                master: "redis".to_owned(),
                queues: queues.clone(),
                state: Arc::default(),
            }]
        };
        PerMaster {
            what,
            queues,
            groups,
            timeout,
            asked: None,
            changed: Arc::default(),
            regrouping: None,
            runs: JoinSet::new(),
        }
    }

    /// Starts `work` on the queues of every group whose previous run ended,
    /// without waiting for any run; a run past the timeout counts as failed.
    /// On one server, runs it in place instead and returns when it ends.
    pub(crate) async fn tick<F, Fut>(&mut self, work: F)
    where
        F: Fn(Vec<Queue>) -> Fut,
        Fut: Future<Output = Result<()>> + Send + 'static,
    {
        if !self.is_cluster() {
            if let Some(group) = self.groups.first() {
                let result = work(group.queues.clone()).await;
                report(self.what, group, &self.changed, result);
            }
            return;
        }
        while self.runs.try_join_next().is_some() {}
        self.regroup();
        for group in &self.groups {
            if group.state.busy.swap(true, Ordering::AcqRel) {
                continue;
            }
            let run = work(group.queues.clone());
            let group = Group {
                master: group.master.clone(),
                queues: group.queues.clone(),
                state: group.state.clone(),
            };
            let changed = self.changed.clone();
            let (what, timeout) = (self.what, self.timeout);
            self.runs.spawn(async move {
                let result = match tokio::time::timeout(timeout, run).await {
                    Ok(result) => result,
                    Err(_) => Err(Error::Timeout(timeout)),
                };
                report(what, &group, &changed, result);
                group.state.busy.store(false, Ordering::Release);
            });
        }
    }

    /// Whether the queues are on a cluster (else one server: one group).
    fn is_cluster(&self) -> bool {
        self.queues.first().is_some_and(|q| q.pool().is_cluster())
    }

    /// Waits up to the timeout for the runs in flight, then abandons them.
    pub(crate) async fn finish(&mut self) {
        let runs = &mut self.runs;
        let _ = tokio::time::timeout(self.timeout, async {
            while runs.join_next().await.is_some() {}
        })
        .await;
        self.runs.abort_all();
        if let Some(asking) = self.regrouping.take() {
            asking.abort();
        }
    }

    /// Takes the grouping asked for in the background when it came, and asks
    /// again when due (one server: never).
    fn regroup(&mut self) {
        let Some(pool) = self.queues.first().map(|q| q.pool().clone()) else {
            return;
        };
        if self.regrouping.as_ref().is_some_and(|h| h.is_finished()) {
            if let Some(asking) = self.regrouping.take() {
                if let Some(Ok(Ok(masters))) = asking.now_or_never() {
                    self.apply(masters);
                }
            }
        }
        let due = self.asked.is_none_or(|at| at.elapsed() >= REGROUP_EVERY)
            || self.changed.swap(false, Ordering::AcqRel);
        if due && self.regrouping.is_none() {
            self.asked = Some(Instant::now());
            let keys: Vec<String> = self
                .queues
                .iter()
                .map(|q| q.keys().base().to_owned())
                .collect();
            let timeout = self.timeout;
            self.regrouping = Some(tokio::spawn(async move {
                let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                match tokio::time::timeout(timeout, pool.masters_of(&keys)).await {
                    Ok(masters) => masters,
                    Err(_) => Err(Error::Timeout(timeout)),
                }
            }));
        }
    }

    /// Groups the queues by `masters` (the master of each queue, in order),
    /// keeping the state of a master's group that stays; a queue whose slot
    /// no master serves is a group of its own.
    fn apply(&mut self, masters: Vec<Option<Master>>) {
        let mut by_master: BTreeMap<String, Vec<Queue>> = BTreeMap::new();
        for (queue, master) in self.queues.iter().zip(masters) {
            let label = match master {
                Some(m) => m.to_string(),
                None => format!("slot of {}", queue.name()),
            };
            by_master.entry(label).or_default().push(queue.clone());
        }
        let mut old: BTreeMap<String, Arc<GroupState>> =
            self.groups.drain(..).map(|g| (g.master, g.state)).collect();
        self.groups = by_master
            .into_iter()
            .map(|(master, queues)| Group {
                state: old.remove(&master).unwrap_or_default(),
                master,
                queues,
            })
            .collect();
    }
}

/// The master of `queue`'s slot (`host:port`), for a log line: `redis` on
/// one server, `unknown` when no node said within `within`. One `CLUSTER
/// SLOTS`, asked only when a queue's calls start failing or answer again.
pub(crate) async fn master_of(queue: &Queue, within: Duration) -> String {
    if !queue.pool().is_cluster() {
        return "redis".to_owned();
    }
    let asked = queue.pool().master_of(queue.keys().base());
    match tokio::time::timeout(within, asked).await {
        Ok(Ok(Some(m))) => m.to_string(),
        Ok(Ok(None)) => "none (its slot has no master)".to_owned(),
        _ => "unknown".to_owned(),
    }
}

/// Logs a group's run that failed after one that did not (at warn, once),
/// or that succeeded after one that failed (at info, once), and marks the
/// grouping to be asked for again then.
fn report(what: &str, group: &Group, changed: &AtomicBool, result: Result<()>) {
    let names: Vec<&str> = group.queues.iter().map(|q| q.name()).collect();
    let master = &group.master;
    match result {
        Ok(()) => {
            if group.state.failing.swap(false, Ordering::AcqRel) {
                changed.store(true, Ordering::Release);
                info!(%master, queues = ?names, "{what} answered again by this master");
            }
        }
        Err(e) => {
            if !group.state.failing.swap(true, Ordering::AcqRel) {
                changed.store(true, Ordering::Release);
                warn!(%master, queues = ?names, error = %e,
                    "{what} failed on this master; its queues wait for it, the other masters' queues do not");
            }
        }
    }
}

/// Which of a worker's queues fail on each master, so that its lease loops
/// log a master's failure once, when its first queue fails (naming them all
/// as they fail), and its recovery once, when its last one answers again.
#[derive(Default)]
pub(crate) struct FailingMasters {
    /// Master → the queues failing on it.
    failing: std::sync::Mutex<BTreeMap<String, std::collections::BTreeSet<String>>>,
}

/// How a queue's change of state changed its master's.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum MasterSpell {
    /// The master's first failing queue: it started failing.
    Began,
    /// Its last failing queue answered: it answers again.
    Ended,
    /// Another queue of a master already failing (or still failing).
    Within,
}

impl FailingMasters {
    /// Records that `queue` on `master` fails (or answers again), and says
    /// whether that began or ended the master's spell, with the queues
    /// failing on it afterwards (before, when it ended).
    pub(crate) fn mark(
        &self,
        master: &str,
        queue: &str,
        failing: bool,
    ) -> (MasterSpell, Vec<String>) {
        let Ok(mut map) = self.failing.lock() else {
            // a poisoned lock only costs the deduplication of a log line
            return (
                if failing {
                    MasterSpell::Began
                } else {
                    MasterSpell::Ended
                },
                vec![queue.to_owned()],
            );
        };
        let set = map.entry(master.to_owned()).or_default();
        let spell = if failing {
            let first = set.is_empty();
            set.insert(queue.to_owned());
            if first {
                MasterSpell::Began
            } else {
                MasterSpell::Within
            }
        } else {
            let was = set.remove(queue);
            if was && set.is_empty() {
                MasterSpell::Ended
            } else {
                MasterSpell::Within
            }
        };
        let queues = if spell == MasterSpell::Ended {
            vec![queue.to_owned()]
        } else {
            set.iter().cloned().collect()
        };
        if set.is_empty() {
            map.remove(master);
        }
        (spell, queues)
    }
}

#[cfg(test)]
mod failing_masters_tests {
    use super::*;

    #[test]
    fn a_master_is_logged_once_per_spell_whatever_its_queues_do() {
        let gate = FailingMasters::default();
        assert_eq!(gate.mark("m1", "a", true).0, MasterSpell::Began);
        assert_eq!(
            gate.mark("m1", "b", true),
            (MasterSpell::Within, vec!["a".into(), "b".into()])
        );
        assert_eq!(gate.mark("m2", "c", true).0, MasterSpell::Began);
        assert_eq!(gate.mark("m1", "a", false).0, MasterSpell::Within);
        assert_eq!(gate.mark("m1", "b", false).0, MasterSpell::Ended);
        // a queue answering that never failed changes nothing
        assert_eq!(gate.mark("m1", "z", false).0, MasterSpell::Within);
        assert_eq!(gate.mark("m1", "a", true).0, MasterSpell::Began);
    }
}
