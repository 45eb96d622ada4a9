//! Read-only views of a queue's groups: a group's counts and status, its
//! children and their states, the outputs of its children, and what a job
//! still waits for.

use std::collections::HashMap;

use deadpool_redis::redis;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::group::{check_group_name, Dependency, GroupPolicy, GroupStatus};
use crate::id::JobId;
use crate::queue::Queue;
use crate::record::{last_entry_step, Millis};
use crate::state::JobState;

/// A group as its hash holds it: counts per state are kept by the scripts
/// that move the children (no recount on read).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupInfo {
    /// The queue.
    pub queue: String,
    /// Its name.
    pub name: String,
    /// Its id (names it in the events stream).
    pub id: JobId,
    /// Where it stands.
    pub status: GroupStatus,
    /// When its completion job runs.
    pub policy: GroupPolicy,
    /// Children added (the sum of the counts per state).
    pub total: u64,
    /// Children QUEUED (ready, delayed, parked or waiting for parents).
    pub queued: u64,
    /// Children LEASED by a worker, not yet started.
    pub leased: u64,
    /// Children RUNNING.
    pub running: u64,
    /// Children whose current attempt SUCCEEDED.
    pub succeeded: u64,
    /// Children whose current attempt FAILED (automatic retries used up).
    pub failed: u64,
    /// Children whose current attempt was CANCELLED.
    pub cancelled: u64,
    /// Children STALE, waiting for an operator.
    pub stale: u64,
    /// Children set aside in the quarantine (unreadable): they count as not
    /// succeeded until repaired (QUEUED again) or purged.
    pub quarantined: u64,
    /// Children retention deleted (the group is deleted once it is settled
    /// and all are, with its completion job).
    pub purged: u64,
    /// A group cancel under way: the index of the next child it acts on.
    pub cancel_next: Option<u64>,
    /// A group retry under way: the index of the next child it acts on.
    pub retry_next: Option<u64>,
    /// SUCCEEDED (every child did), FAILED (some did not) or CANCELLED, once settled.
    pub outcome: Option<JobState>,
    /// The completion job's id (it exists once `fired`).
    pub completion: Option<JobId>,
    /// The completion job's pipeline.
    pub completion_pipeline: Option<String>,
    /// Whether the completion job was enqueued.
    pub fired: bool,
    /// When it was created (ms).
    pub created_at: Millis,
    /// When it was sealed (ms).
    pub sealed_at: Option<Millis>,
    /// When it completed, was blocked or was cancelled (ms).
    pub settled_at: Option<Millis>,
    /// Why it was cancelled.
    pub cancel_reason: Option<String>,
}

impl GroupInfo {
    /// Children the group is done with (SUCCEEDED, FAILED, CANCELLED or QUARANTINED).
    pub fn ended(&self) -> u64 {
        self.succeeded + self.failed + self.cancelled + self.quarantined
    }

    /// Children QUEUED (waiting for parents included), LEASED or RUNNING.
    pub fn active(&self) -> u64 {
        self.queued + self.leased + self.running
    }

    /// The sum of the counts per state (equal to `total`: each child is
    /// counted once, in the state of its current attempt).
    pub fn counted(&self) -> u64 {
        self.active() + self.ended() + self.stale
    }

    fn from_hash(queue: &str, key: &str, mut h: HashMap<String, String>) -> Result<Self> {
        let corrupt = |field: &str, problem: String| Error::Corrupt {
            key: key.to_owned(),
            field: field.to_owned(),
            problem,
        };
        let mut text = |field: &str| h.remove(field).filter(|v| !v.is_empty());
        let num = |v: Option<String>, field: &str| -> Result<u64> {
            match v {
                None => Ok(0),
                Some(v) => v
                    .parse::<i64>()
                    .map(|n| n.max(0) as u64)
                    .map_err(|_| corrupt(field, format!("{v:?} is not a count"))),
            }
        };
        let ms = |v: Option<String>, field: &str| -> Result<Option<Millis>> {
            v.map(|v| {
                v.parse::<Millis>()
                    .map_err(|_| corrupt(field, format!("{v:?} is not a time")))
            })
            .transpose()
        };
        let name = text("name").ok_or_else(|| corrupt("name", "missing".into()))?;
        let id_text = text("id").ok_or_else(|| corrupt("id", "missing".into()))?;
        let id = JobId::parse(&id_text).map_err(|e| corrupt("id", e.to_string()))?;
        let status_text = text("status").unwrap_or_default();
        let status = GroupStatus::parse(&status_text)
            .ok_or_else(|| corrupt("status", format!("{status_text:?} is not a group status")))?;
        let policy_text = text("policy").unwrap_or_default();
        let policy = GroupPolicy::parse(&policy_text)
            .ok_or_else(|| corrupt("policy", format!("{policy_text:?} is not a policy")))?;
        let outcome = match text("outcome") {
            None => None,
            Some(o) => Some(
                o.parse::<JobState>()
                    .map_err(|e| corrupt("outcome", e.to_string()))?,
            ),
        };
        let completion = match text("completion_id") {
            None => None,
            Some(c) => Some(JobId::parse(&c).map_err(|e| corrupt("completion_id", e.to_string()))?),
        };
        Ok(GroupInfo {
            queue: queue.to_owned(),
            name,
            id,
            status,
            policy,
            total: num(text("total"), "total")?,
            succeeded: num(text("SUCCEEDED"), "SUCCEEDED")?,
            failed: num(text("FAILED"), "FAILED")?,
            cancelled: num(text("CANCELLED"), "CANCELLED")?,
            stale: num(text("STALE"), "STALE")?,
            queued: num(text("QUEUED"), "QUEUED")?,
            leased: num(text("LEASED"), "LEASED")?,
            running: num(text("RUNNING"), "RUNNING")?,
            quarantined: num(text("QUARANTINED"), "QUARANTINED")?,
            purged: num(text("purged"), "purged")?,
            cancel_next: text("cancel_next")
                .map(|v| num(Some(v), "cancel_next"))
                .transpose()?,
            retry_next: text("retry_next")
                .map(|v| num(Some(v), "retry_next"))
                .transpose()?,
            outcome,
            completion,
            completion_pipeline: text("completion_pipeline"),
            fired: text("fired").as_deref() == Some("1"),
            created_at: ms(text("created_at"), "created_at")?.unwrap_or(0),
            sealed_at: ms(text("sealed_at"), "sealed_at")?,
            settled_at: ms(text("settled_at"), "settled_at")?,
            cancel_reason: text("cancel_reason"),
        })
    }
}

/// One child of a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupChild {
    /// The job.
    pub id: JobId,
    /// Its state (`None`: retention deleted it).
    pub state: Option<JobState>,
    /// Its pipeline.
    pub pipeline: Option<String>,
    /// Whether it waits for parents (QUEUED, not leasable).
    pub waiting: bool,
}

/// A group with its children and what holds it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupView {
    /// The group.
    pub info: GroupInfo,
    /// Its children, in the order they were added.
    pub children: Vec<GroupChild>,
    /// Children whose current attempt FAILED.
    pub failed: Vec<JobId>,
    /// Children whose current attempt was CANCELLED.
    pub cancelled: Vec<JobId>,
    /// Children STALE: the group waits for an operator on them.
    pub stale: Vec<JobId>,
    /// Children in the quarantine (unreadable): repair or purge them.
    pub quarantined: Vec<JobId>,
}

impl GroupView {
    /// What the group waits for, or why it will not complete, in words
    /// (`None` once completed with nothing to say).
    pub fn why(&self) -> Option<String> {
        let ids = |v: &[JobId]| {
            let mut s = v
                .iter()
                .take(5)
                .map(JobId::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            if v.len() > 5 {
                s.push_str(&format!(" and {} more", v.len() - 5));
            }
            s
        };
        let info = &self.info;
        let mut parts = Vec::new();
        match info.status {
            GroupStatus::Open => parts.push(format!(
                "open: {} children so far; it settles only after it is sealed",
                info.total
            )),
            GroupStatus::Cancelled => parts.push(format!(
                "cancelled: {}",
                info.cancel_reason.as_deref().unwrap_or("no reason recorded")
            )),
            GroupStatus::Blocked => parts.push(format!(
                "completion held: {} of {} children did not succeed (retry them to move the group on)",
                info.failed + info.cancelled + info.quarantined,
                info.total
            )),
            _ => {}
        }
        if !self.stale.is_empty() {
            parts.push(format!(
                "waiting for an operator on job {} (STALE: resolve or retry it)",
                ids(&self.stale)
            ));
        }
        if !self.quarantined.is_empty() {
            parts.push(format!(
                "job {} in the quarantine (unreadable; repair it to move the group on, or purge it)",
                ids(&self.quarantined)
            ));
        }
        if let Some(next) = info.cancel_next {
            parts.push(format!(
                "cancel under way: {next} of {} children handled (cancel the group again to finish)",
                info.total
            ));
        }
        if let Some(next) = info.retry_next {
            parts.push(format!(
                "retry under way: {next} of {} children handled (retry the group again to finish)",
                info.total
            ));
        }
        if !self.failed.is_empty() && info.status != GroupStatus::Completed {
            parts.push(format!("FAILED: {}", ids(&self.failed)));
        }
        if !self.cancelled.is_empty() && info.status != GroupStatus::Completed {
            parts.push(format!("CANCELLED: {}", ids(&self.cancelled)));
        }
        if parts.is_empty() {
            None
        } else {
            Some(parts.join("; "))
        }
    }
}

impl Queue {
    /// The group `name`, or `None`.
    pub async fn group(&self, name: &str) -> Result<Option<GroupInfo>> {
        check_group_name(name)?;
        let key = self.group_key(name);
        let mut conn = self.conn().await?;
        let h: HashMap<String, String> = self
            .timed(redis::cmd("HGETALL").arg(&key).query_async(&mut conn))
            .await?;
        if h.is_empty() {
            return Ok(None);
        }
        GroupInfo::from_hash(self.name(), &key, h).map(Some)
    }

    /// Every group of the queue, oldest first.
    pub async fn groups(&self) -> Result<Vec<GroupInfo>> {
        let mut conn = self.conn().await?;
        let names: Vec<String> = self
            .timed(
                redis::cmd("ZRANGE")
                    .arg(self.groups_key())
                    .arg(0)
                    .arg(-1)
                    .query_async(&mut conn),
            )
            .await?;
        let mut pipe = redis::pipe();
        for name in &names {
            pipe.cmd("HGETALL").arg(self.group_key(name));
        }
        let hashes: Vec<HashMap<String, String>> = if names.is_empty() {
            Vec::new()
        } else {
            self.timed(pipe.query_async(&mut conn)).await?
        };
        let mut out = Vec::new();
        for (name, h) in names.iter().zip(hashes) {
            if !h.is_empty() {
                out.push(GroupInfo::from_hash(self.name(), &self.group_key(name), h)?);
            }
        }
        Ok(out)
    }

    /// The group with its children (every one, in the order added) and the
    /// ids of the FAILED, CANCELLED and STALE ones; `None` when there is no such group.
    pub async fn group_view(&self, name: &str) -> Result<Option<GroupView>> {
        let Some(info) = self.group(name).await? else {
            return Ok(None);
        };
        let key = self.group_key(name);
        let mut conn = self.conn().await?;
        let ids: Vec<String> = self
            .timed(
                redis::cmd("ZRANGE")
                    .arg(format!("{key}:children"))
                    .arg(0)
                    .arg(-1)
                    .query_async(&mut conn),
            )
            .await?;
        let ended: HashMap<String, String> = self
            .timed(
                redis::cmd("HGETALL")
                    .arg(format!("{key}:states"))
                    .query_async(&mut conn),
            )
            .await?;
        let mut children = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let mut pipe = redis::pipe();
            // a child whose key is not a hash (quarantined) is read as gone,
            // not as a failure of the whole view
            pipe.ignore_errors();
            for id in chunk {
                pipe.cmd("HMGET")
                    .arg(self.keys().job(id))
                    .arg("state")
                    .arg("pipeline");
                pipe.cmd("ZSCORE").arg(self.awaiting_key()).arg(id);
            }
            let replies: Vec<redis::Value> = self.timed(pipe.query_async(&mut conn)).await?;
            for (id, pair) in chunk.iter().zip(replies.chunks(2)) {
                let fields: (Option<String>, Option<String>) =
                    redis::from_redis_value(pair[0].clone()).unwrap_or((None, None));
                let waiting = !matches!(pair.get(1), Some(redis::Value::Nil) | None);
                children.push(GroupChild {
                    id: JobId::parse(id)?,
                    state: fields.0.and_then(|s| s.parse().ok()),
                    pipeline: fields.1,
                    waiting,
                });
            }
        }
        let mut failed = Vec::new();
        let mut cancelled = Vec::new();
        let mut stale = Vec::new();
        let mut quarantined = Vec::new();
        for c in &children {
            match ended.get(c.id.as_str()).map(String::as_str) {
                Some("FAILED") => failed.push(c.id.clone()),
                Some("CANCELLED") => cancelled.push(c.id.clone()),
                Some("STALE") => stale.push(c.id.clone()),
                Some("QUARANTINED") => quarantined.push(c.id.clone()),
                _ => {}
            }
        }
        Ok(Some(GroupView {
            info,
            children,
            failed,
            cancelled,
            stale,
            quarantined,
        }))
    }

    /// The final step outputs of the group's children (the JSON text of each
    /// child's last completed step, `None` for a child without one): what a
    /// completion job reads to aggregate its children.
    pub async fn group_outputs(&self, name: &str) -> Result<Vec<(JobId, Option<String>)>> {
        check_group_name(name)?;
        let key = self.group_key(name);
        let mut conn = self.conn().await?;
        let ids: Vec<String> = self
            .timed(
                redis::cmd("ZRANGE")
                    .arg(format!("{key}:children"))
                    .arg(0)
                    .arg(-1)
                    .query_async(&mut conn),
            )
            .await?;
        let mut out = Vec::with_capacity(ids.len());
        // a child whose key is not a hash (quarantined) has no output
        let text = |v: redis::Value| redis::from_redis_value::<Option<String>>(v).unwrap_or(None);
        for chunk in ids.chunks(500) {
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for id in chunk {
                pipe.cmd("HMGET")
                    .arg(self.keys().job(id))
                    .arg("last_step")
                    .arg("steps");
            }
            let steps: Vec<redis::Value> = self.timed(pipe.query_async(&mut conn)).await?;
            // a plain success keeps its last step as the last entry of `steps`
            let steps: Vec<Option<String>> = steps
                .into_iter()
                .map(|v| {
                    let pair = redis::from_redis_value::<(Option<String>, Option<String>)>(v)
                        .unwrap_or((None, None));
                    match pair {
                        (Some(last), _) if !last.is_empty() => Some(last),
                        (_, Some(steps)) => last_entry_step(&steps).map(str::to_owned),
                        _ => None,
                    }
                })
                .collect();
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for (id, step) in chunk.iter().zip(&steps) {
                pipe.cmd("HGET")
                    .arg(self.keys().job(id))
                    .arg(format!("out:{}", step.as_deref().unwrap_or("")));
            }
            let outputs: Vec<redis::Value> = self.timed(pipe.query_async(&mut conn)).await?;
            for (id, output) in chunk.iter().zip(outputs) {
                out.push((JobId::parse(id)?, text(output)));
            }
        }
        Ok(out)
    }

    /// The group's children's final outputs decoded as `T` (the pipeline's
    /// last step's output type); a child without an output is left out, one
    /// whose output does not decode is an error naming it.
    pub async fn group_outputs_as<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<Vec<(JobId, T)>> {
        let mut out = Vec::new();
        for (id, text) in self.group_outputs(name).await? {
            if let Some(text) = text {
                let value = serde_json::from_str(&text).map_err(|e| Error::Corrupt {
                    key: self.keys().job(id.as_str()),
                    field: "out:<last step>".into(),
                    problem: format!("not the output type asked for: {e}"),
                })?;
                out.push((id, value));
            }
        }
        Ok(out)
    }

    /// The parents job `id` still waits for (not yet SUCCEEDED), as they
    /// would be shown ("waiting for A, B"); empty when it waits for nothing.
    pub async fn waiting_for(&self, id: &JobId) -> Result<Vec<Dependency>> {
        let mut conn = self.conn().await?;
        let (deps, waiting): (Option<String>, Option<f64>) = self
            .timed(
                redis::pipe()
                    .cmd("HGET")
                    .arg(self.keys().job(id.as_str()))
                    .arg("deps")
                    .cmd("ZSCORE")
                    .arg(self.awaiting_key())
                    .arg(id.as_str())
                    .query_async(&mut conn),
            )
            .await?;
        if waiting.is_none() {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for dep in deps.unwrap_or_default().split_whitespace() {
            let Some(dep) = Dependency::decode(dep) else {
                continue;
            };
            let settled = match &dep {
                Dependency::Job(p) => {
                    let s: Option<String> = self
                        .timed(
                            redis::cmd("HGET")
                                .arg(self.keys().job(p.as_str()))
                                .arg("state")
                                .query_async(&mut conn),
                        )
                        .await?;
                    s.as_deref() == Some("SUCCEEDED")
                }
                Dependency::Group(g) => self.group(g).await?.is_some_and(|g| {
                    g.status == GroupStatus::Completed && g.outcome == Some(JobState::Succeeded)
                }),
            };
            if !settled {
                out.push(dep);
            }
        }
        Ok(out)
    }
}
