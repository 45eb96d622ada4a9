//! Flow control an operator or a step drives: pausing and resuming a pipeline
//! or the whole queue (`pause.lua`), the pauses in force, and the tokens of a
//! named rate limiter a step takes (`limit.lua`).

use std::time::Duration;

use deadpool_redis::redis::AsyncCommands as _;

use crate::error::{Error, Result};
use crate::flow::{Pause, PauseScope, Rate};
use crate::name::check_name;
use crate::queue::Queue;
use crate::round_trip::{escape_glob, scan_pages};
use crate::wire::ops::limit::Limit;
use crate::wire::ops::pause::Pause as PauseOp;

pub use crate::answers::PauseChange;

/// The record of a pause, as `pause.lua` writes it.
#[derive(serde::Deserialize)]
struct PauseRecord {
    since: i64,
    by: String,
    #[serde(default)]
    reason: String,
}

impl Queue {
    /// The queue's `paused` hash: what is paused, since when, by whom.
    pub(crate) fn paused_key(&self) -> String {
        format!("{}:paused", self.keys.base())
    }

    /// Pauses `scope` (a pipeline, or every pipeline of the queue): its jobs
    /// are not leased until [`Queue::resume`]; jobs leased or running go on.
    /// Recorded as a `pause` event.
    pub async fn pause(&self, scope: &PauseScope, by: &str, reason: &str) -> Result<PauseChange> {
        self.pause_call("pause", scope, by, reason).await
    }

    /// Resumes `scope` and wakes its idle workers. Recorded as a `resume` event.
    pub async fn resume(&self, scope: &PauseScope, by: &str, reason: &str) -> Result<PauseChange> {
        self.pause_call("resume", scope, by, reason).await
    }

    async fn pause_call(
        &self,
        action: &str,
        scope: &PauseScope,
        by: &str,
        reason: &str,
    ) -> Result<PauseChange> {
        let (scope_name, name, pipelines) = match scope {
            PauseScope::Pipeline(p) => {
                check_name("pipeline name", p)?;
                ("pipeline", p.clone(), vec![p.clone()])
            }
            PauseScope::Queue => (
                "queue",
                self.name().to_owned(),
                self.known_pipelines().await?,
            ),
        };
        self.run(&PauseOp {
            action,
            scope: scope_name,
            name: &name,
            pipelines: &pipelines,
            by,
            reason,
        })
        .await
    }

    /// Re-applies a queue pause in force to `pipeline` (a worker registering a
    /// pipeline the pause did not know of). One `HEXISTS` when nothing is paused.
    pub(crate) async fn apply_queue_pause(&self, pipeline: &str) -> Result<()> {
        let mut conn = self.conn().await?;
        let paused: bool = self.timed(conn.hexists(self.paused_key(), "queue")).await?;
        if paused {
            self.run(&PauseOp {
                action: "pause",
                scope: "queue",
                name: self.name(),
                pipelines: &[pipeline.to_owned()],
                by: "worker",
                reason: "",
            })
            .await?;
        }
        Ok(())
    }

    /// The pipelines of the queue: those a worker registered, and those with
    /// a ready or delayed set (found by `SCAN`).
    async fn known_pipelines(&self) -> Result<Vec<String>> {
        let mut conn = self.conn().await?;
        let mut names: std::collections::BTreeSet<String> = self
            .timed(conn.hkeys::<_, Vec<String>>(self.keys.pipelines()))
            .await?
            .into_iter()
            .collect();
        for kind in ["ready", "delayed"] {
            let head = format!("{}:{kind}:", self.keys.base());
            let pattern = format!("{}*", escape_glob(&head));
            let target = crate::pool::Target::SlotOf(self.keys.base());
            scan_pages(&mut conn, &self.config, target, &pattern, |keys| {
                names.extend(
                    keys.iter()
                        .filter_map(|k| std::str::from_utf8(k).ok())
                        .filter_map(|k| k.strip_prefix(&head))
                        .filter(|p| check_name("pipeline name", p).is_ok())
                        .map(str::to_owned),
                );
                std::ops::ControlFlow::Continue(())
            })
            .await?;
        }
        Ok(names.into_iter().collect())
    }

    /// The pauses in force (the queue's, then each pipeline's).
    pub async fn pauses(&self) -> Result<Vec<Pause>> {
        let mut conn = self.conn().await?;
        let key = self.paused_key();
        let raw: Vec<(String, String)> = self.timed(conn.hgetall(&key)).await?;
        let mut out = Vec::new();
        for (field, json) in raw {
            let scope = if field == "queue" {
                PauseScope::Queue
            } else if let Some(p) = field.strip_prefix("pipeline:") {
                PauseScope::Pipeline(p.to_owned())
            } else {
                return Err(Error::Corrupt {
                    key,
                    field,
                    problem: "not 'queue' or 'pipeline:<name>'".into(),
                });
            };
            let rec: PauseRecord = serde_json::from_str(&json).map_err(|e| Error::Corrupt {
                key: key.clone(),
                field: field.clone(),
                problem: format!("not a pause record: {e}"),
            })?;
            out.push(Pause {
                scope,
                since: rec.since,
                by: rec.by,
                reason: rec.reason,
            });
        }
        out.sort_by_key(|p| !matches!(p.scope, PauseScope::Queue));
        Ok(out)
    }

    /// Takes `n` tokens from the rate limiter `name` (one per `rate` period),
    /// waiting as long as the limiter says; the limiter is the one lease uses
    /// for a rate gate of that name, so starts and in-step calls share it.
    pub async fn acquire_rate(&self, name: &str, rate: Rate, n: u32) -> Result<()> {
        check_name("rate limiter", name)?;
        if n == 0 {
            return Ok(());
        }
        loop {
            let wait = self.run(&Limit { name, rate, n }).await?;
            if wait == 0 {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(wait)).await;
        }
    }
}
