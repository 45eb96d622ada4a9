//! `group_seal.lua`: closes a group to new children.

use deadpool_redis::redis::Value;

use super::{group_key, group_not_found, ScriptOp};
use crate::error::{Error, Result};
use crate::group::GroupStatus;
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// Seals group `name`.
pub(crate) struct GroupSeal<'a> {
    pub(crate) name: &'a str,
    pub(crate) by: &'a str,
}

impl ScriptOp for GroupSeal<'_> {
    /// The group's status after.
    type Output = GroupStatus;

    fn script(&self) -> &'static LuaScript {
        &scripts::GROUP_SEAL
    }

    /// KEYS: group; ARGV: name, who.
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        call.key(group_key(keys, self.name));
        call.arg(self.name).arg(self.by);
    }

    /// `{'OK' | 'ALREADY', status}` or `{'GROUP_NOT_FOUND'}`.
    fn decode(&self, keys: &QueueKeys, reply: Value) -> Result<GroupStatus> {
        let mut reply = Reply::new("group_seal", reply)?;
        let status = reply.text()?;
        match status.as_str() {
            "OK" | "ALREADY" => {
                let s = reply.text()?;
                GroupStatus::parse(&s).ok_or(Error::Protocol {
                    script: "group_seal",
                    detail: format!("unknown group status {s:?}"),
                })
            }
            "GROUP_NOT_FOUND" => Err(group_not_found(keys, self.name)),
            other => Err(Error::Protocol {
                script: "group_seal",
                detail: format!("unknown status {other:?}"),
            }),
        }
    }
}
