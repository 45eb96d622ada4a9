//! `renew.lua`: renews many leases in one call (the worker's heartbeat).

use deadpool_redis::redis::Value;

use super::ScriptOp;
use crate::error::{Error, Result};
use crate::lease::{Lease, Renewal};
use crate::wire::args::{bool_arg, lock_ttl, millis};
use crate::wire::call::ScriptCall;
use crate::wire::keys::QueueKeys;
use crate::wire::reply::Reply;
use crate::wire::scripts::{self, LuaScript};

/// Renews `leases` (not empty), each for the longest of their ttls.
pub(crate) struct Renew<'a> {
    pub(crate) leases: &'a [&'a Lease],
}

impl ScriptOp for Renew<'_> {
    /// One renewal per lease, in order.
    type Output = Vec<Renewal>;

    fn script(&self) -> &'static LuaScript {
        &scripts::RENEW
    }

    /// ARGV: lease ttl (ms), lock ttl (ms); then per lease KEYS job and lock
    /// (the job key without a resource), ARGV token and the lock flag.
    fn encode(&self, keys: &QueueKeys, call: &mut ScriptCall<'_>) {
        let ttl = self.leases.iter().map(|l| l.ttl).max().unwrap_or_default();
        call.arg(millis(ttl)).arg(lock_ttl(ttl));
        for lease in self.leases {
            call.key(keys.job(lease.job.as_str()))
                .key(match &lease.resource {
                    Some(res) => keys.lock(res),
                    None => keys.job(lease.job.as_str()),
                });
            call.arg(&lease.token)
                .arg(bool_arg(lease.resource.is_some()));
        }
    }

    /// Per lease `OK`, `CANCEL:<reason>` or `LOST:<state>`.
    fn decode(&self, _keys: &QueueKeys, reply: Value) -> Result<Vec<Renewal>> {
        let mut reply = Reply::new("renew", reply)?;
        let mut out = Vec::with_capacity(self.leases.len());
        for lease in self.leases {
            let status = reply.text()?;
            let renewal = if status == "OK" {
                Renewal::Held
            } else if let Some(reason) = status.strip_prefix("CANCEL:") {
                Renewal::CancelRequested {
                    reason: reason.to_owned(),
                }
            } else if let Some(state) = status.strip_prefix("LOST:") {
                Renewal::Lost {
                    state: state.parse().ok(),
                }
            } else {
                return Err(Error::Protocol {
                    script: "renew",
                    detail: format!("unknown status {status:?} for job {}", lease.job),
                });
            };
            out.push(renewal);
        }
        Ok(out)
    }
}
