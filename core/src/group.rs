//! The group and dependency model: group names and their rule, a group's
//! completion policy, a job's parents, what a child does when a parent
//! fails, and a group's status. The scripts that act on groups are in
//! `crate::queue` (`groups.rs`), the views of a group in `crate::inspect`.

use std::fmt;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::id::JobId;

// The longest group name, in bytes.
const MAX_GROUP_NAME_BYTES: usize = 128;

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

    pub(crate) fn parse(s: &str) -> Option<Self> {
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
    pub(crate) fn encode(&self) -> String {
        match self {
            Dependency::Job(id) => format!("j:{id}"),
            Dependency::Group(g) => format!("g:{g}"),
        }
    }

    pub(crate) fn decode(s: &str) -> Option<Dependency> {
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

/// Parses a parent as it is written on a command line or in a JSON body, the
/// form [`Display`](fmt::Display) writes: a job id, or `group:<name>`.
///
/// ```
/// use leasehold_core::{Dependency, JobId};
///
/// let id = JobId::new();
/// assert_eq!(id.as_str().parse::<Dependency>()?, Dependency::Job(id.clone()));
/// assert_eq!("group:nightly".parse::<Dependency>()?, Dependency::Group("nightly".into()));
/// assert!("group:".parse::<Dependency>().is_err());
/// # Ok::<(), leasehold_core::Error>(())
/// ```
impl std::str::FromStr for Dependency {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.strip_prefix("group:") {
            Some(g) => {
                check_group_name(g)?;
                Ok(Dependency::Group(g.to_owned()))
            }
            None => Ok(Dependency::Job(JobId::parse(s)?)),
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

    pub(crate) fn parse(s: &str) -> Option<Self> {
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
