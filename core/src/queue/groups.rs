//! The group scripts of a queue (`core/lua/lib/groups.lua`): creating,
//! sealing and cancelling a group and retrying its failed children (each
//! script's arguments and reply in `wire/ops/group_*.rs`; the refusals of the
//! link values `enqueue` sends in `wire/ops/enqueue.rs`). The model (names, policies, dependencies) is `crate::group`; the views of a
//! group are in `crate::inspect`.
//!
//! A group and its children live in one queue (one hash tag): every count is
//! updated by the script that moves the child, in the same call.

use crate::error::{Error, Result};
use crate::group::{check_group_name, GroupStatus};
use crate::id::JobId;
use crate::job_spec::NewGroup;
use crate::lease::RetryMode;
use crate::name::check_name;
use crate::queue::Queue;
use crate::wire::ops::group_cancel::GroupCancel;
use crate::wire::ops::group_create::GroupCreate;
use crate::wire::ops::group_retry::GroupRetry;
use crate::wire::ops::group_seal::GroupSeal;
use crate::wire::ops::{group_key, groups_key};

pub use crate::answers::{GroupCancelled, GroupRetried};

/// Children a `group_cancel` or `group_retry` call acts on (one script call
/// per batch: each is bounded, and the group keeps the cursor between them).
const GROUP_BATCH: usize = 200;

impl Queue {
    /// The key of group `name` (its hash; the children, children's states and
    /// dependents keys add `:children`, `:states`, `:dependents`).
    pub(crate) fn group_key(&self, name: &str) -> String {
        group_key(&self.keys, name)
    }

    pub(crate) fn groups_key(&self) -> String {
        groups_key(&self.keys)
    }

    /// The queue's awaiting index: jobs QUEUED for their parents, not leasable.
    pub fn awaiting_key(&self) -> String {
        format!("{}:awaiting", self.keys.base())
    }

    /// Creates a group; false when one of that name exists (it is left as it is).
    pub async fn create_group(&self, group: &NewGroup, by: &str) -> Result<bool> {
        check_group_name(&group.name)?;
        if let Some(job) = &group.completion {
            job.validate()?;
            check_name("pipeline name", &job.pipeline)?;
        }
        self.run(&GroupCreate { group, by }).await
    }

    /// Seals a group (its last child was added): from now on it settles when
    /// its children have all ended. Returns its status after (a group whose
    /// children all ended already completes here).
    pub async fn seal_group(&self, name: &str, by: &str) -> Result<GroupStatus> {
        check_group_name(name)?;
        self.run(&GroupSeal { name, by }).await
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
        self.run(&GroupCancel {
            name,
            reason,
            by,
            batch,
        })
        .await
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
        self.run(&GroupRetry {
            name,
            mode,
            by,
            reason,
            batch,
        })
        .await
    }
}
