//! `group_cancel.lua`: cancels a group, a batch of its children per call.

use deadpool_redis::redis::Value;

use super::{group_batch_status, group_key, ScriptOp};
use crate::answers::GroupCancelled;
use crate::error::Result;
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// One batch of the cancel of group `name`.
pub(crate) struct GroupCancel<'a> {
    pub(crate) name: &'a str,
    pub(crate) reason: &'a str,
    pub(crate) by: &'a str,
    pub(crate) batch: usize,
}

impl ScriptOp for GroupCancel<'_> {
    /// What the batch did, and whether every child was handled.
    type Output = (GroupCancelled, bool);

    fn script(&self) -> &'static LuaScript {
        &scripts::GROUP_CANCEL
    }

    /// KEYS: group; ARGV: name, reason, who, batch (at least 1).
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        call.key(group_key(keys, self.name));
        call.arg(self.name)
            .arg(self.reason)
            .arg(self.by)
            .arg(self.batch.max(1));
    }

    /// `{'OK', cancelled, requested, skipped, cursor ('' when done)}`, or the
    /// group not found or settled.
    fn decode(&self, keys: &QueueKeys, reply: Value) -> Result<(GroupCancelled, bool)> {
        let mut reply = Reply::new("group_cancel", reply)?;
        group_batch_status(keys, "group_cancel", self.name, &mut reply)?;
        let step = GroupCancelled {
            cancelled: reply.int()?,
            requested: reply.int()?,
            skipped: reply.int()?,
        };
        Ok((step, reply.opt_text()?.is_none()))
    }
}
