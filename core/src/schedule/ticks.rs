//! The tick arithmetic of a schedule: the next tick, the due windows after downtime, the window at an instant.

use jiff::Timestamp;

use super::*;

impl Schedule {
    /// The first tick strictly after `t` (`None` past the schedule's end).
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        let t = match self.start {
            Some(s) if t < s => {
                // the first tick is the first one after the start
                return self.raw_next_after(s).filter(|n| self.before_end(*n));
            }
            _ => t,
        };
        self.raw_next_after(t).filter(|n| self.before_end(*n))
    }

    fn before_end(&self, t: Timestamp) -> bool {
        self.end.is_none_or(|e| t <= e)
    }

    /// `t` in the schedule's zone, as croner takes it.
    fn cron_instant(&self, t: Timestamp) -> Option<jiff_cron::Zoned> {
        let at = jiff_cron::Timestamp::from_nanosecond(t.as_nanosecond()).ok()?;
        Some(at.to_zoned(self.zone.clone()))
    }

    fn raw_next_after(&self, t: Timestamp) -> Option<Timestamp> {
        match &self.cadence {
            Cadence::Cron { cron, .. } => cron
                .find_next_occurrence(&self.cron_instant(t)?, false)
                .ok()
                .and_then(|z| from_cron_instant(z.timestamp())),
            Cadence::Every(every) => {
                let step = i64::try_from(every.as_millis()).ok()?;
                let anchor = self.start.map(|s| s.as_millisecond()).unwrap_or(0);
                let at = t.as_millisecond();
                let k = (at - anchor).div_euclid(step) + 1;
                Timestamp::from_millisecond(anchor + k * step).ok()
            }
        }
    }

    /// The latest tick at or before `t`, not before the start (the start
    /// itself when no tick lies between): where a new cursor begins.
    pub fn latest_at_or_before(&self, t: Timestamp) -> Option<Timestamp> {
        let found = match &self.cadence {
            Cadence::Cron { cron, .. } => cron
                .find_previous_occurrence(&self.cron_instant(t)?, true)
                .ok()
                .and_then(|z| from_cron_instant(z.timestamp())),
            Cadence::Every(every) => {
                let step = i64::try_from(every.as_millis()).ok()?;
                let anchor = self.start.map(|s| s.as_millisecond()).unwrap_or(0);
                let at = t.as_millisecond();
                let k = (at - anchor).div_euclid(step);
                Timestamp::from_millisecond(anchor + k * step).ok()
            }
        };
        match (found, self.start) {
            (Some(f), Some(s)) if f < s => (t >= s).then_some(s),
            (None, Some(s)) if t >= s => Some(s),
            (f, _) => f,
        }
    }

    /// Where a cursor starts when Redis has none (first registration, or a
    /// flushed Redis): the start when one is set (every window since it is
    /// then due, under the catch-up policy), else the latest tick at or
    /// before `now` (nothing before the worker came up is enqueued), or with
    /// `run_on_start` the tick before it (the latest whole window is due at once).
    pub fn initial_cursor(&self, now: Timestamp) -> Timestamp {
        match self.start {
            Some(s) => s,
            None => {
                let latest = self.latest_at_or_before(now).unwrap_or(now);
                if !self.run_on_start {
                    return latest;
                }
                // one tick earlier: the latest whole window is due at once
                Timestamp::from_millisecond(latest.as_millisecond() - 1)
                    .ok()
                    .and_then(|before| self.latest_at_or_before(before))
                    .unwrap_or(latest)
            }
        }
    }

    /// The window that starts at `start` (a tick, or the cursor).
    pub fn window_from(&self, start: Timestamp) -> Option<Window> {
        self.next_after(start).map(|end| Window { start, end })
    }

    /// The windows after `cursor` that are due at `now` (end ≤ now), oldest
    /// first, as one tick sends them: under [`CatchUp::All`] the latest `max`,
    /// under `Latest` the latest one, under `None` the latest
    /// [`MAX_WINDOWS_PER_TICK`]. Also the number of due windows left out
    /// before them (counted up to a bound), and the next due time after the
    /// last window returned (`None`: the schedule ended).
    pub fn due_windows(&self, cursor: Timestamp, now: Timestamp) -> DueWindows {
        let keep = match self.catch_up {
            CatchUp::All { max } => max.clamp(1, MAX_WINDOWS_PER_TICK) as usize,
            CatchUp::Latest => 1,
            CatchUp::None => MAX_WINDOWS_PER_TICK as usize,
        };
        let mut windows: std::collections::VecDeque<Window> = Default::default();
        let mut left_out = 0usize;
        let mut at = cursor;
        let mut counted = 0usize;
        let mut next_due = None;
        while let Some(end) = self.next_after(at) {
            if end > now {
                next_due = Some(end);
                break;
            }
            counted += 1;
            if counted > MAX_COUNTED {
                // too many to count: take the latest `keep` backward from now
                return self.due_tail(cursor, now, keep, left_out + windows.len());
            }
            windows.push_back(Window { start: at, end });
            if windows.len() > keep {
                windows.pop_front();
                left_out += 1;
            }
            at = end;
        }
        DueWindows {
            windows: windows.into(),
            left_out,
            next_due,
        }
    }

    /// The latest `keep` due windows found backward from `now` (catch-up over a
    /// very long downtime).
    fn due_tail(
        &self,
        cursor: Timestamp,
        now: Timestamp,
        keep: usize,
        at_least: usize,
    ) -> DueWindows {
        let mut ends = Vec::new();
        let mut t = self.latest_at_or_before(now);
        while let Some(e) = t {
            if e <= cursor || ends.len() > keep {
                break;
            }
            ends.push(e);
            t = e
                .checked_sub(jiff::SignedDuration::from_millis(1))
                .ok()
                .and_then(|p| self.latest_at_or_before(p));
        }
        ends.reverse();
        let windows: Vec<Window> = ends
            .windows(2)
            .map(|w| Window {
                start: w[0],
                end: w[1],
            })
            .collect();
        let last = windows.last().map(|w| w.end).unwrap_or(cursor);
        DueWindows {
            windows,
            left_out: at_least,
            next_due: self.next_after(last),
        }
    }

    /// The window an operator's trigger means: the one starting at `start`
    /// (which must be a tick, or the schedule's start, and complete at `now`),
    /// or else the latest window due at `now`.
    pub fn window_at(
        &self,
        start: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<Window, ScheduleError> {
        let name = &self.name;
        let before = |t: Timestamp| t.checked_sub(jiff::SignedDuration::from_millis(1)).ok();
        match start {
            Some(start) => {
                let is_tick = before(start).and_then(|b| self.next_after(b)) == Some(start);
                if !(is_tick || self.start == Some(start)) {
                    let near = self
                        .latest_at_or_before(start)
                        .map(|t| format!(" (the window around it starts at {t})"))
                        .unwrap_or_default();
                    return Err(invalid(
                        name,
                        format!("{start} is not where a window starts{near}"),
                    ));
                }
                let w = self
                    .window_from(start)
                    .ok_or_else(|| invalid(name, format!("no window starts at {start}")))?;
                if w.end > now {
                    return Err(invalid(
                        name,
                        format!(
                            "the window {start} .. {end} is not complete until {end}",
                            end = w.end
                        ),
                    ));
                }
                Ok(w)
            }
            None => {
                let end = self
                    .latest_at_or_before(now)
                    .ok_or_else(|| invalid(name, "no window is due yet"))?;
                match before(end).and_then(|b| self.latest_at_or_before(b)) {
                    Some(start) if start < end => Ok(Window { start, end }),
                    _ => Err(invalid(
                        name,
                        format!(
                            "no complete window ends at or before {end}: name one with its start"
                        ),
                    )),
                }
            }
        }
    }
}

/// The due windows of one tick (see [`Schedule::due_windows`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueWindows {
    /// The windows to claim, oldest first.
    pub windows: Vec<Window>,
    /// Due windows before them that the catch-up policy leaves out.
    pub left_out: usize,
    /// The next due time after the last window (`None`: the schedule ended).
    pub next_due: Option<Timestamp>,
}

/// An instant croner found, as this crate's [`Timestamp`].
fn from_cron_instant(t: jiff_cron::Timestamp) -> Option<Timestamp> {
    Timestamp::from_nanosecond(t.as_nanosecond()).ok()
}
