//! `group_retry.lua`: retries the FAILED and CANCELLED children of a group,
//! a batch per call.

use deadpool_redis::redis::Value;

use super::{group_batch_status, group_key, retry_mode, ScriptOp};
use crate::answers::GroupRetried;
use crate::error::{Error, Result};
use crate::id::JobId;
use crate::lease::RetryMode;
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// One batch of the retry of group `name`.
pub(crate) struct GroupRetry<'a> {
    pub(crate) name: &'a str,
    pub(crate) mode: RetryMode,
    pub(crate) by: &'a str,
    pub(crate) reason: &'a str,
    pub(crate) batch: usize,
}

impl ScriptOp for GroupRetry<'_> {
    type Output = GroupRetried;

    fn script(&self) -> &'static LuaScript {
        &scripts::GROUP_RETRY
    }

    /// KEYS: group; ARGV: name, mode, who, reason, batch (at least 1).
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        call.key(group_key(keys, self.name));
        call.arg(self.name)
            .arg(retry_mode(self.mode))
            .arg(self.by)
            .arg(self.reason)
            .arg(self.batch.max(1));
    }

    /// `{'OK', cursor ('' when done), then id, verdict, detail per child}`,
    /// or the group not found or settled.
    fn decode(&self, keys: &QueueKeys, reply: Value) -> Result<GroupRetried> {
        let mut reply = Reply::new("group_retry", reply)?;
        group_batch_status(keys, "group_retry", self.name, &mut reply)?;
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
                        key: keys.job(id.as_str()),
                        field: detail,
                        problem: "unreadable: the child was not retried".into(),
                    },
                )),
            }
        }
        Ok(out)
    }
}
