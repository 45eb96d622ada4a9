//! A lease on the wire: the lease part of a `settle` call (its keys and
//! tokens) and the reader of its reply.

use std::time::Duration;

use super::call::ScriptCall;

use crate::error::{Error, Result};
use crate::id::JobId;
use crate::lease::{FlowWaits, Lease, Leased, UnreadableLease};
use crate::name::check_name;
use crate::wire::keys::QueueKeys;
use crate::wire::reply::Reply;

/// The lease part of a [`Queue::settle`](crate::Queue::settle) call.
#[derive(Debug, Clone, Copy)]
pub struct LeaseRequest<'a> {
    /// The worker taking the leases.
    pub worker: &'a str,
    /// The pipelines it serves in this queue.
    pub pipelines: &'a [&'a str],
    /// How many jobs at most.
    pub n: usize,
    /// How many of them start in the same call (the worker's free run slots):
    /// those with no completed step to resume from go LEASED → RUNNING at
    /// their pipeline's first step, with one `start` event. 0: none.
    pub start: usize,
    /// The first step of each pipeline of `pipelines`, in the same order
    /// (missing or empty: that pipeline's jobs do not start in the call).
    pub first_steps: &'a [&'a str],
}

impl LeaseRequest<'_> {
    /// Whether the request asks for anything.
    pub(crate) fn wants_any(&self) -> bool {
        self.n > 0 && !self.pipelines.is_empty()
    }

    /// Checks the worker id and pipeline names.
    pub(crate) fn validate(&self) -> Result<()> {
        check_name("worker id", self.worker)?;
        for p in self.pipelines {
            check_name("pipeline name", p)?;
        }
        for s in self.first_steps.iter().filter(|s| !s.is_empty()) {
            check_name("step name", s)?;
        }
        Ok(())
    }

    /// Appends the served pipelines' keys (ready, delayed, wake) to a settle invocation.
    pub(crate) fn encode_keys(&self, keys: &QueueKeys, inv: &mut ScriptCall<'_>) {
        for p in self.pipelines {
            inv.key(keys.ready(p))
                .key(keys.delayed(p))
                .key(keys.wake(p));
        }
    }

    /// Appends one fresh lease token per job asked for, then the starts: how
    /// many, and the first step of each pipeline.
    pub(crate) fn encode_tokens(&self, inv: &mut ScriptCall<'_>) {
        for _ in 0..self.n {
            inv.arg(uuid::Uuid::new_v4().simple().to_string());
        }
        inv.arg(self.start.min(self.n));
        for i in 0..self.pipelines.len() {
            inv.arg(self.first_steps.get(i).copied().unwrap_or(""));
        }
    }
}

/// Values per leased job in a lease reply.
const LEASE_ENTRY: usize = 12;

/// Reads a lease reply: next due time, Redis's clock, jobs parked, jobs set
/// aside by flow control (resource limit, max running, rate), pipelines found
/// paused, then twelve
/// values per leased job. With `lenient`, a job whose values cannot be read is
/// reported in [`Leased::unreadable`] instead of failing the whole reply.
pub(crate) fn read_leased(reply: &mut Reply, ttl: Duration, lenient: bool) -> Result<Leased> {
    let next_due: i64 = reply.int()?;
    let now: i64 = reply.int()?;
    let parked: u64 = reply.int()?;
    let waits = FlowWaits {
        resource_limit: reply.int()?,
        max_running: reply.int()?,
        rate: reply.int()?,
        paused: reply.int()?,
    };
    let mut leases = Vec::new();
    let mut unreadable = Vec::new();
    while reply.remaining() > 0 {
        let mut entry = reply.take(LEASE_ENTRY);
        let job = entry.peek_text().unwrap_or_default();
        match read_lease_entry(&mut entry, ttl, now) {
            Ok(lease) => leases.push(lease),
            Err(e) if lenient => unreadable.push(UnreadableLease {
                job,
                problem: e.to_string(),
            }),
            Err(e) => return Err(e),
        }
    }
    Ok(Leased {
        leases,
        next_due: (next_due >= 0).then_some(next_due),
        now,
        parked,
        waits,
        unreadable,
    })
}

/// One leased job's values: id, token, fence, attempt, pipeline, input,
/// resource, last step, its output, not-before, trace context, whether it started.
fn read_lease_entry(reply: &mut Reply, ttl: Duration, now: i64) -> Result<Lease> {
    if reply.remaining() != LEASE_ENTRY {
        return Err(Error::Protocol {
            script: "lease",
            detail: format!(
                "a leased job has {} values, not {LEASE_ENTRY}",
                reply.remaining()
            ),
        });
    }
    Ok(Lease {
        job: JobId::parse(&reply.text()?)?,
        token: reply.text()?,
        fence: reply.int()?,
        attempt: reply.int()?,
        pipeline: reply.text()?,
        input: reply.text()?,
        resource: reply.opt_text()?,
        last_step: reply.opt_text()?,
        last_output: reply.opt_text()?,
        ttl,
        not_before: reply
            .opt_text()?
            .and_then(|t| t.parse().ok())
            .unwrap_or(now),
        traceparent: reply.opt_text()?,
        started: reply.opt_text()?.is_some_and(|s| s == "1"),
    })
}
