//! Groups of jobs and dependencies between jobs (`core/lua/lib/groups.lua`):
//! creating, sealing, reading, cancelling a group and retrying its failed
//! children, and the link values `enqueue` sends for a job's group and parents.
//!
//! A group and its children live in one queue (one hash tag): every count is
//! updated by the script that moves the child, in the same call.

use std::collections::HashMap;
use std::fmt;

use deadpool_redis::redis;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::id::JobId;
use crate::job_spec::NewJob;
use crate::lease::RetryMode;
use crate::queue::Queue;
use crate::record::Millis;
use crate::state::JobState;
use crate::wire::keys::check_name;
use crate::wire::reply::Reply;
use crate::wire::scripts;

// The longest group name, in bytes.
const MAX_GROUP_NAME_BYTES: usize = 128;

/// The first element of a refused enqueue's reply: no job id has braces, so
/// a refusal is never taken for a reply's first id (and a job named like a
/// refusal code is read as a job).
pub(crate) const REFUSED: &str = "{refused}";

/// Children a `group_cancel` or `group_retry` call acts on (one script call
/// per batch: each is bounded, and the group keeps the cursor between them).
const GROUP_BATCH: usize = 200;

/// Checks a group name: 1 to 128 ASCII letters, digits, `.`, `_` or `-`
/// (it is part of key names and of a dependent's `deps` field).
pub fn check_group_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_GROUP_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "group name {name:?} must be 1 to {MAX_GROUP_NAME_BYTES} ASCII letters, digits, '.', '_' or '-'"
        )))
    }
}

/// When a group's completion job is enqueued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupPolicy {
    /// Once every child SUCCEEDED (a FAILED or CANCELLED child holds it: the
    /// group is blocked until that child is retried and succeeds).
    #[default]
    AllSucceeded,
    /// Once every child ended, whatever the outcome.
    AllTerminal,
}

impl GroupPolicy {
    /// The policy as the scripts name it.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupPolicy::AllSucceeded => "all_succeeded",
            GroupPolicy::AllTerminal => "all_terminal",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "all_succeeded" => Some(GroupPolicy::AllSucceeded),
            "all_terminal" => Some(GroupPolicy::AllTerminal),
            _ => None,
        }
    }
}

/// What a parent ending FAILED or CANCELLED does to a job that depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ParentFailure {
    /// The dependent is cancelled, with the parent and its outcome as the reason.
    #[default]
    Cancel,
    /// The dependent runs anyway once every parent ended.
    Run,
}

impl ParentFailure {
    /// The policy as the scripts name it.
    pub fn as_str(self) -> &'static str {
        match self {
            ParentFailure::Cancel => "cancel",
            ParentFailure::Run => "run",
        }
    }
}

/// A parent a job waits for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dependency {
    /// A job (of the same queue), which must SUCCEED.
    Job(JobId),
    /// A group (of the same queue), every child of which must SUCCEED.
    Group(String),
}

impl Dependency {
    /// The parent as a job's `deps` field holds it (`j:<id>`, `g:<name>`).
    fn encode(&self) -> String {
        match self {
            Dependency::Job(id) => format!("j:{id}"),
            Dependency::Group(g) => format!("g:{g}"),
        }
    }

    fn decode(s: &str) -> Option<Dependency> {
        if let Some(id) = s.strip_prefix("j:") {
            return JobId::parse(id).ok().map(Dependency::Job);
        }
        s.strip_prefix("g:")
            .filter(|g| check_group_name(g).is_ok())
            .map(|g| Dependency::Group(g.to_owned()))
    }
}

impl fmt::Display for Dependency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dependency::Job(id) => write!(f, "{id}"),
            Dependency::Group(g) => write!(f, "group:{g}"),
        }
    }
}

impl From<JobId> for Dependency {
    fn from(id: JobId) -> Self {
        Dependency::Job(id)
    }
}

impl From<&JobId> for Dependency {
    fn from(id: &JobId) -> Self {
        Dependency::Job(id.clone())
    }
}

/// The parents as enqueue sends them: space-separated `j:<id>` and `g:<name>`.
pub(crate) fn encode_dependencies(deps: &[Dependency]) -> String {
    deps.iter()
        .map(Dependency::encode)
        .collect::<Vec<_>>()
        .join(" ")
}

impl NewJob {
    /// Whether the job joins a group or waits for parents (enqueue then sends the link values).
    pub(crate) fn has_links(&self) -> bool {
        self.group.is_some() || !self.depends_on.is_empty()
    }

    /// Whether two jobs have the same links (one enqueue call carries one set).
    pub(crate) fn same_links(&self, other: &NewJob) -> bool {
        self.group == other.group
            && self.depends_on == other.depends_on
            && (!self.has_links() || self.on_parent_failure == other.on_parent_failure)
    }
}

/// A group to create.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct NewGroup {
    /// Its name, unique in the queue.
    pub name: String,
    /// When the completion job runs.
    pub policy: GroupPolicy,
    /// The job enqueued once, by the script that settles the last child (its
    /// input key, resource, delay and links are not used).
    pub completion: Option<NewJob>,
}

impl NewGroup {
    /// A group without a completion job, policy all-succeeded.
    pub fn new(name: impl Into<String>) -> Self {
        NewGroup {
            name: name.into(),
            policy: GroupPolicy::AllSucceeded,
            completion: None,
        }
    }

    /// Sets the policy.
    #[must_use]
    pub fn policy(mut self, policy: GroupPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Sets the completion job.
    #[must_use]
    pub fn completion(mut self, job: NewJob) -> Self {
        self.completion = Some(job);
        self
    }
}

/// Where a group stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupStatus {
    /// Children may still be added; it cannot settle yet.
    Open,
    /// Its last child was added; it settles when they have all ended.
    Sealed,
    /// Every child ended but not every one SUCCEEDED, under the all-succeeded
    /// policy: the completion job is held until the failed ones are retried and succeed.
    Blocked,
    /// Settled: its completion job (if any) was enqueued.
    Completed,
    /// Cancelled by an operator: its completion job never runs.
    Cancelled,
}

impl GroupStatus {
    /// The status as the scripts name it.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupStatus::Open => "open",
            GroupStatus::Sealed => "sealed",
            GroupStatus::Blocked => "blocked",
            GroupStatus::Completed => "completed",
            GroupStatus::Cancelled => "cancelled",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "open" => GroupStatus::Open,
            "sealed" => GroupStatus::Sealed,
            "blocked" => GroupStatus::Blocked,
            "completed" => GroupStatus::Completed,
            "cancelled" => GroupStatus::Cancelled,
            _ => return None,
        })
    }
}

impl fmt::Display for GroupStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

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

/// What cancelling a group did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GroupCancelled {
    /// QUEUED children cancelled at once.
    pub cancelled: usize,
    /// LEASED or RUNNING children given a cancel request their holders honour.
    pub requested: usize,
    /// Children that ended meanwhile (nothing to do).
    pub skipped: usize,
}

impl Queue {
    /// The key of group `name` (its hash; the children, children's states and
    /// dependents keys add `:children`, `:states`, `:dependents`).
    pub(crate) fn group_key(&self, name: &str) -> String {
        format!("{}:group:{name}", self.keys.base())
    }

    fn groups_key(&self) -> String {
        format!("{}:groups", self.keys.base())
    }

    /// The queue's awaiting index: jobs QUEUED for their parents, not leasable.
    pub fn awaiting_key(&self) -> String {
        format!("{}:awaiting", self.keys.base())
    }

    /// Creates a group; false when one of that name exists (it is left as it is).
    pub async fn create_group(&self, group: &NewGroup, by: &str) -> Result<bool> {
        check_group_name(&group.name)?;
        let mut inv = self.invocation(&scripts::GROUP_CREATE);
        inv.key(self.group_key(&group.name)).key(self.groups_key());
        inv.arg(&group.name)
            .arg(JobId::new().as_str())
            .arg(group.policy.as_str());
        match &group.completion {
            Some(job) => {
                job.validate()?;
                check_name("pipeline name", &job.pipeline)?;
                inv.arg(job.id.clone().unwrap_or_default().as_str())
                    .arg(&job.pipeline)
                    .arg(&job.input)
                    .arg(job.priority)
                    .arg(job.max_attempts)
                    .arg(job.stale_lock.as_str());
            }
            None => {
                inv.arg("").arg("").arg("").arg("0").arg("1").arg("hold");
            }
        }
        inv.arg(by);
        // the completion job's flow gates and resource, as its pipeline's
        // contract gave them (crate::job_for, Contract::job)
        let completion = group.completion.as_ref();
        inv.arg(completion.and_then(|j| j.flow.as_deref()).unwrap_or(""))
            .arg(completion.and_then(|j| j.resource.as_deref()).unwrap_or(""));
        let mut reply = Reply::new("group_create", self.invoke(&inv).await?)?;
        match reply.text()?.as_str() {
            "CREATED" => Ok(true),
            "EXISTS" => Ok(false),
            other => Err(Error::Protocol {
                script: "group_create",
                detail: format!("unknown status {other:?}"),
            }),
        }
    }

    /// Seals a group (its last child was added): from now on it settles when
    /// its children have all ended. Returns its status after (a group whose
    /// children all ended already completes here).
    pub async fn seal_group(&self, name: &str, by: &str) -> Result<GroupStatus> {
        check_group_name(name)?;
        let mut inv = self.invocation(&scripts::GROUP_SEAL);
        inv.key(self.group_key(name));
        inv.arg(name).arg(by);
        let mut reply = Reply::new("group_seal", self.invoke(&inv).await?)?;
        let status = reply.text()?;
        match status.as_str() {
            "OK" | "ALREADY" => {
                let s = reply.text()?;
                GroupStatus::parse(&s).ok_or(Error::Protocol {
                    script: "group_seal",
                    detail: format!("unknown group status {s:?}"),
                })
            }
            "GROUP_NOT_FOUND" => Err(self.group_not_found(name)),
            other => Err(Error::Protocol {
                script: "group_seal",
                detail: format!("unknown status {other:?}"),
            }),
        }
    }

    fn group_not_found(&self, name: &str) -> Error {
        Error::GroupNotFound {
            queue: self.name().to_owned(),
            group: name.to_owned(),
        }
    }

    /// The error of an enqueue refused for its links: `reply` starts with
    /// [`REFUSED`], then the code and its values (`enqueue.lua`); `group` is
    /// the group the call named ('' for none).
    pub(crate) fn links_refusal(&self, reply: &mut Reply, group: &str) -> Error {
        let _ = reply.text();
        let code = reply.text().unwrap_or_default();
        let a = reply.text().unwrap_or_default();
        let b = reply.text().unwrap_or_default();
        let shown = |r: &str| {
            Dependency::decode(r)
                .map(|d| d.to_string())
                .unwrap_or_else(|| r.to_owned())
        };
        match code.as_str() {
            "GROUP_NOT_FOUND" => self.group_not_found(&a),
            "GROUP_SEALED" => Error::GroupClosed {
                group: a,
                status: b,
            },
            "PARENT_NOT_FOUND" => Error::ParentNotFound {
                queue: self.name().to_owned(),
                parent: shown(&a),
            },
            "PARENT_ENDED" => Error::ParentEnded {
                parent: shown(&a),
                state: b,
            },
            "CYCLE" => Error::GroupCycle {
                detail: if b.is_empty() {
                    format!("the job's parents include group {a}, or the group has dependents")
                } else {
                    format!("existing job {b} has parents and the group has dependents (or is one of them)")
                },
                group: a,
            },
            "CANNOT_JOIN" => Error::CannotJoinGroup {
                job: a,
                group: group.to_owned(),
                reason: b,
            },
            "BAD_LINKS" => Error::InvalidArgument(format!("enqueue refused its links: {a} {b:?}")),
            other => Error::Protocol {
                script: "enqueue",
                detail: format!("unknown refusal {other:?}"),
            },
        }
    }

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
                    .arg(self.keys.job(id))
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
                pipe.cmd("HGET").arg(self.keys.job(id)).arg("last_step");
            }
            let steps: Vec<redis::Value> = self.timed(pipe.query_async(&mut conn)).await?;
            let steps: Vec<Option<String>> = steps.into_iter().map(text).collect();
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for (id, step) in chunk.iter().zip(&steps) {
                pipe.cmd("HGET")
                    .arg(self.keys.job(id))
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
                    key: self.keys.job(id.as_str()),
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
                    .arg(self.keys.job(id.as_str()))
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
                                .arg(self.keys.job(p.as_str()))
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

    /// Cancels a group: it takes no more children and never fires its
    /// completion job; each unsettled child is cancelled (a QUEUED one at
    /// once, a LEASED or RUNNING one by an in-flight request its holder
    /// honours). STALE children are left to an operator. One `group_cancel`
    /// call per batch of children ([`Queue::cancel_group_batch`]), each
    /// atomic; the group keeps the cursor, so a cancel stopped midway (a
    /// crash) says so, and calling this again finishes it.
    pub async fn cancel_group(&self, name: &str, reason: &str, by: &str) -> Result<GroupCancelled> {
        let mut done = GroupCancelled::default();
        loop {
            let (step, finished) = self
                .cancel_group_batch(name, reason, by, GROUP_BATCH)
                .await?;
            done.cancelled += step.cancelled;
            done.requested += step.requested;
            done.skipped += step.skipped;
            if finished {
                return Ok(done);
            }
        }
    }

    /// One `group_cancel` call: the group marked cancelled (the first time)
    /// and up to `batch` of its children cancelled from the cursor the group
    /// keeps; true once every child was handled.
    pub async fn cancel_group_batch(
        &self,
        name: &str,
        reason: &str,
        by: &str,
        batch: usize,
    ) -> Result<(GroupCancelled, bool)> {
        check_group_name(name)?;
        if reason.is_empty() {
            return Err(Error::InvalidArgument("a cancel needs a reason".into()));
        }
        let mut inv = self.invocation(&scripts::GROUP_CANCEL);
        inv.key(self.group_key(name));
        inv.arg(name).arg(reason).arg(by).arg(batch.max(1));
        let mut reply = Reply::new("group_cancel", self.invoke(&inv).await?)?;
        match reply.text()?.as_str() {
            "OK" => {}
            "GROUP_NOT_FOUND" => return Err(self.group_not_found(name)),
            "SETTLED" => {
                return Err(Error::GroupClosed {
                    group: name.to_owned(),
                    status: reply.text()?,
                })
            }
            other => {
                return Err(Error::Protocol {
                    script: "group_cancel",
                    detail: format!("unknown status {other:?}"),
                })
            }
        }
        let step = GroupCancelled {
            cancelled: reply.int()?,
            requested: reply.int()?,
            skipped: reply.int()?,
        };
        Ok((step, reply.opt_text()?.is_none()))
    }

    /// Retries every FAILED and CANCELLED child of a group (each a new
    /// attempt with its event, as [`Queue::retry`] makes one); returns the
    /// children retried and those refused, with the reason. One `group_retry`
    /// call per batch of children ([`Queue::retry_group_batch`]), each atomic;
    /// the group keeps the cursor, so a retry stopped midway says so, and
    /// calling this again finishes it.
    pub async fn retry_group(
        &self,
        name: &str,
        mode: RetryMode,
        by: &str,
        reason: &str,
    ) -> Result<(Vec<JobId>, Vec<(JobId, Error)>)> {
        let mut retried = Vec::new();
        let mut refused = Vec::new();
        loop {
            let step = self
                .retry_group_batch(name, mode, by, reason, GROUP_BATCH)
                .await?;
            retried.extend(step.retried);
            refused.extend(step.refused);
            if step.done {
                return Ok((retried, refused));
            }
        }
    }

    /// One `group_retry` call: up to `batch` children from the cursor the
    /// group keeps, the FAILED and CANCELLED ones retried.
    pub async fn retry_group_batch(
        &self,
        name: &str,
        mode: RetryMode,
        by: &str,
        reason: &str,
        batch: usize,
    ) -> Result<GroupRetried> {
        check_group_name(name)?;
        let mode = match mode {
            RetryMode::Resume => "resume",
            RetryMode::FromStart => "start",
        };
        let mut inv = self.invocation(&scripts::GROUP_RETRY);
        inv.key(self.group_key(name));
        inv.arg(name)
            .arg(mode)
            .arg(by)
            .arg(reason)
            .arg(batch.max(1));
        let mut reply = Reply::new("group_retry", self.invoke(&inv).await?)?;
        match reply.text()?.as_str() {
            "OK" => {}
            "GROUP_NOT_FOUND" => return Err(self.group_not_found(name)),
            "SETTLED" => {
                return Err(Error::GroupClosed {
                    group: name.to_owned(),
                    status: reply.text()?,
                })
            }
            other => {
                return Err(Error::Protocol {
                    script: "group_retry",
                    detail: format!("unknown status {other:?}"),
                })
            }
        }
        let done = reply.opt_text()?.is_none();
        let mut out = GroupRetried {
            retried: Vec::new(),
            refused: Vec::new(),
            done,
        };
        while reply.remaining() > 0 {
            let id = JobId::parse(&reply.text()?)?;
            let verdict = reply.text()?;
            let detail = reply.text()?;
            match verdict.as_str() {
                "RETRIED" => out.retried.push(id),
                "INPUT_KEY_TAKEN" => out.refused.push((
                    id.clone(),
                    Error::InputKeyTaken {
                        job: id.to_string(),
                        holder: detail,
                    },
                )),
                _ => out.refused.push((
                    id.clone(),
                    Error::Corrupt {
                        key: self.keys.job(id.as_str()),
                        field: detail,
                        problem: "unreadable: the child was not retried".into(),
                    },
                )),
            }
        }
        Ok(out)
    }
}

/// What one `group_retry` call did.
#[derive(Debug)]
pub struct GroupRetried {
    /// Children given a new attempt.
    pub retried: Vec<JobId>,
    /// Children refused, with the reason.
    pub refused: Vec<(JobId, Error)>,
    /// Whether every child was handled (no batch is left).
    pub done: bool,
}
