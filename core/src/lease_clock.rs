//! The local clock of one held lease: when a call last confirmed it, and the
//! deadline on the holder's monotonic clock past which the holder assumes it
//! is lost. Shared by the worker's job task, its heartbeat and watchdog, and
//! the step's [`StepContext`](crate::StepContext) (its synchronous
//! `lease_valid` check), so every one of them reads the same deadline. A
//! process step's monitor is told each new deadline (see
//! [`LeaseClock::changed`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long before the end of a lease's TTL (counted from the sending of the
/// call that confirmed it) its holder gives it up: a tenth of the TTL, at
/// least 300 ms, but never more than a quarter of it. It covers the clocks
/// of the worker and Redis running at slightly different rates and the time
/// a step takes to see its cancellation.
pub(crate) fn deadline_margin(ttl: Duration) -> Duration {
    (ttl / 10).max(Duration::from_millis(300)).min(ttl / 4)
}

/// The local clock of one lease (see the module docs).
#[derive(Debug)]
pub(crate) struct LeaseClock {
    /// The lease's TTL; `None` for a detached step context, whose lease never
    /// passes a deadline.
    ttl: Option<Duration>,
    /// When the last call that confirmed the lease (the lease itself, a
    /// renewal) was sent: Redis set the lease's deadline after
    /// that instant, so it lies beyond `confirmed_at + ttl`.
    confirmed_at: Mutex<Instant>,
    /// Set once the lease is known (or assumed) lost.
    lost: AtomicBool,
    /// Notified when a confirmation moved the deadline on (no waiter, no cost
    /// beyond an atomic read: only a running process step waits on it).
    changed: tokio::sync::Notify,
}

impl LeaseClock {
    /// The clock of a lease with `ttl` whose leasing call was sent at `leased_at`.
    pub(crate) fn new(ttl: Duration, leased_at: Instant) -> Self {
        LeaseClock {
            ttl: Some(ttl),
            confirmed_at: Mutex::new(leased_at),
            lost: AtomicBool::new(false),
            changed: tokio::sync::Notify::new(),
        }
    }

    /// The clock of a step run outside a worker: always valid.
    pub(crate) fn detached() -> Self {
        LeaseClock {
            ttl: None,
            confirmed_at: Mutex::new(Instant::now()),
            lost: AtomicBool::new(false),
            changed: tokio::sync::Notify::new(),
        }
    }

    /// Moves the local deadline on after a call sent at `sent_at` confirmed the lease.
    pub(crate) fn renewed(&self, sent_at: Instant) {
        if let Ok(mut at) = self.confirmed_at.lock() {
            if sent_at > *at {
                *at = sent_at;
                drop(at);
                self.changed.notify_waiters();
            }
        }
    }

    /// Notified each time a confirmation moves the local deadline on
    /// (`notify_waiters`: enable a `notified()` before reading the deadline).
    pub(crate) fn changed(&self) -> &tokio::sync::Notify {
        &self.changed
    }

    /// When the last call that confirmed the lease was sent.
    pub(crate) fn confirmed_at(&self) -> Instant {
        // a poisoned lock reads as never confirmed since the lease: the earliest deadline
        match self.confirmed_at.lock() {
            Ok(at) => *at,
            Err(poisoned) => *poisoned.into_inner(),
        }
    }

    /// The local deadline: when the last confirming call was sent, plus the
    /// TTL, minus [`deadline_margin`]; `None` for a detached clock.
    pub(crate) fn local_deadline(&self) -> Option<Instant> {
        self.ttl
            .map(|ttl| self.confirmed_at() + ttl - deadline_margin(ttl))
    }

    /// True when the local deadline has passed at `now` without a confirmed renewal.
    pub(crate) fn expired_at(&self, now: Instant) -> bool {
        self.local_deadline().is_some_and(|d| now >= d)
    }

    /// Records that the lease is lost (a renewal or a refusal said so, or its
    /// local deadline passed).
    pub(crate) fn mark_lost(&self) {
        self.lost.store(true, Ordering::Release);
    }

    /// True while the lease is neither known lost nor past its local deadline,
    /// read now on the monotonic clock: no Redis call.
    pub(crate) fn valid_now(&self) -> bool {
        !self.lost.load(Ordering::Acquire) && !self.expired_at(Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_is_valid_until_its_local_deadline_or_a_loss() {
        let ttl = Duration::from_secs(3);
        let start = Instant::now();
        let clock = LeaseClock::new(ttl, start);
        assert!(clock.valid_now());
        assert!(!clock.expired_at(start + ttl - deadline_margin(ttl) - Duration::from_millis(1)));
        assert!(clock.expired_at(start + ttl - deadline_margin(ttl)));
        clock.renewed(start + Duration::from_secs(1));
        assert!(!clock.expired_at(start + ttl - deadline_margin(ttl)));
        clock.mark_lost();
        assert!(!clock.valid_now());
    }

    #[test]
    fn a_clock_that_ran_out_is_not_valid() {
        let ttl = Duration::from_millis(400);
        let clock = LeaseClock::new(ttl, Instant::now() - Duration::from_secs(1));
        assert!(!clock.valid_now());
    }

    #[test]
    fn a_detached_clock_never_runs_out() {
        let clock = LeaseClock::detached();
        assert!(clock.local_deadline().is_none());
        assert!(!clock.expired_at(Instant::now() + Duration::from_secs(86_400)));
        assert!(clock.valid_now());
    }
}
