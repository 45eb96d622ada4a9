//! Schedules: a pipeline's recurring ticks, each a fixed input [`Window`].
//!
//! A [`Schedule`] says when windows end (a cron expression evaluated in an
//! IANA time zone, or a fixed interval), from when and until when, what a tick
//! does after downtime ([`CatchUp`]) or while the previous window's job runs
//! ([`Overlap`]), and the static part of every tick's input. This module is
//! the arithmetic and the definition a worker registers in Redis; the claim of
//! a tick is `schedule_tick.lua` (see `crate::queue`), its driver the worker's
//! scheduler task.
//!
//! A tick at time T enqueues one job for the window `[previous tick, T)`: its
//! input is the static part with the window under `window`, and its input key
//! is `<schedule>:<window start>` (RFC 3339, UTC) unless the pipeline declares
//! an input-key template, which is then evaluated over that input. Both are
//! what `leasehold enqueue --range` computes for the same window, so a backfill
//! and the schedule never enqueue one window twice.
//!
//! ```
//! use leasehold_core::schedule::{CatchUp, Overlap, Schedule};
//! use leasehold_core::jiff::Timestamp;
//!
//! let nightly = Schedule::cron("nightly", "30 2 * * *")?
//!     .in_zone("Europe/Berlin")?
//!     .catch_up(CatchUp::All { max: 7 })
//!     .overlap(Overlap::Skip)
//!     .input(serde_json::json!({ "table": "orders" }))?;
//! // 2026-03-29 is a spring-forward day in Berlin: 02:30 does not exist, the
//! // run is at 03:00 local (01:00 UTC), once.
//! let before: Timestamp = "2026-03-28T12:00:00Z".parse()?;
//! let next = nightly.next_after(before).expect("a next run");
//! assert_eq!(next.to_string(), "2026-03-29T01:00:00Z");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::str::FromStr;
use std::time::Duration;

use croner::Cron;
use jiff::Timestamp;
// croner speaks the jiff of its own release line (0.2); the schedule's zone is
// kept in that one, and instants cross between the two as nanoseconds.
use jiff_cron::tz::TimeZone;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::wire::keys::check_name;

/// The window a tick covers: `[start, end)`, both UTC instants. A scheduled
/// pipeline's input carries it as its `window` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Window {
    /// The previous tick (inclusive).
    pub start: Timestamp,
    /// This tick (exclusive): when the window is due.
    pub end: Timestamp,
}

/// A window's JSON Schema, for inputs that carry one (`#[derive(JsonSchema)]`
/// on a scheduled pipeline's input): two RFC 3339 instants.
impl schemars::JsonSchema for Window {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Window".into()
    }

    fn schema_id() -> std::borrow::Cow<'static, str> {
        "leasehold::schedule::Window".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "object",
            "description": "The window a schedule tick covers: [start, end), UTC instants.",
            "properties": {
                "start": { "type": "string", "format": "date-time" },
                "end": { "type": "string", "format": "date-time" }
            },
            "required": ["start", "end"]
        })
    }
}

impl Window {
    /// The window's start in milliseconds since the Unix epoch.
    pub fn start_ms(&self) -> i64 {
        self.start.as_millisecond()
    }
    /// The window's end (its due time) in milliseconds since the Unix epoch.
    pub fn end_ms(&self) -> i64 {
        self.end.as_millisecond()
    }
}

/// Why a schedule cannot be declared or evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// The cron expression does not parse (or has other than 5 or 6 fields).
    #[error("schedule {schedule}: bad cron expression {expr:?}: {why}")]
    BadCron {
        /// The schedule.
        schedule: String,
        /// The expression as given.
        expr: String,
        /// What is wrong.
        why: String,
    },
    /// The time zone is not an IANA name the bundled database knows.
    #[error("schedule {schedule}: unknown time zone {zone:?}: {why}")]
    BadZone {
        /// The schedule.
        schedule: String,
        /// The zone as given.
        zone: String,
        /// What is wrong.
        why: String,
    },
    /// Some other setting is out of range (interval, start after end, static
    /// input that is not an object or has a `window` field, a bad name).
    #[error("schedule {schedule}: {why}")]
    Invalid {
        /// The schedule.
        schedule: String,
        /// What is wrong.
        why: String,
    },
}

/// When a schedule's ticks are.
#[derive(Debug, Clone)]
pub enum Cadence {
    /// A cron expression (5 fields, or 6 with seconds first), evaluated in the
    /// schedule's zone.
    Cron {
        /// The expression as written.
        expr: String,
        /// The parsed expression.
        cron: Box<Cron>,
    },
    /// A fixed interval, anchored at the schedule's start (or the Unix epoch):
    /// ticks at anchor + k × interval, whatever the zone.
    Every(Duration),
}

/// What a tick does with windows that fell due while no scheduler ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Every missed window, oldest first, the latest `max` of them (older ones
    /// are recorded as missed).
    All {
        /// The most windows one catch-up enqueues.
        max: u32,
    },
    /// Only the most recent missed window; the older ones are recorded as skipped.
    Latest,
    /// No missed window: a window claimed more than the grace after its due
    /// time is recorded as missed, not enqueued.
    None,
}

impl CatchUp {
    /// The policy's name as stored and shown (`all`, `latest`, `none`).
    pub fn as_str(self) -> &'static str {
        match self {
            CatchUp::All { .. } => "all",
            CatchUp::Latest => "latest",
            CatchUp::None => "none",
        }
    }
}

/// What a tick does while the previous window's job is not finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// Enqueue anyway (jobs of two windows may run at once).
    Allow,
    /// Do not enqueue this window: record it as skipped.
    Skip,
    /// Hold the window (recorded as delayed) until the previous job ends.
    Wait,
}

impl Overlap {
    /// The policy's name as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Allow => "allow",
            Overlap::Skip => "skip",
            Overlap::Wait => "wait",
        }
    }
}

/// The most windows one tick call carries (a bound of `CatchUp::All` above it is cut to it).
pub const MAX_WINDOWS_PER_TICK: u32 = 1000;
/// The most windows a catch-up counts one by one before it stops counting.
const MAX_COUNTED: usize = 200_000;

/// A pipeline's schedule. Build one with [`Schedule::cron`] or
/// [`Schedule::every`] and the setters; `#[pipeline(schedule(...))]` does it
/// from literals checked at compile time.
#[derive(Debug, Clone)]
pub struct Schedule {
    name: String,
    cadence: Cadence,
    zone_name: String,
    zone: TimeZone,
    start: Option<Timestamp>,
    end: Option<Timestamp>,
    catch_up: CatchUp,
    overlap: Overlap,
    grace: Duration,
    input: Map<String, Value>,
}

/// What a worker registers of a schedule (JSON in the schedule's hash): every
/// setting, so tools that cannot run the pipeline (the CLI, the dashboard)
/// compute the same windows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleDefinition {
    /// The schedule's name.
    pub name: String,
    /// The cron expression, for a cron schedule.
    #[serde(default)]
    pub cron: Option<String>,
    /// The interval in ms, for a fixed-interval schedule.
    #[serde(default)]
    pub every_ms: Option<u64>,
    /// The IANA time zone.
    pub zone: String,
    /// The start (ms since the epoch).
    #[serde(default)]
    pub start_ms: Option<i64>,
    /// The end (ms since the epoch).
    #[serde(default)]
    pub end_ms: Option<i64>,
    /// The catch-up policy.
    pub catch_up: CatchUp,
    /// The overlap policy.
    pub overlap: Overlap,
    /// The grace in ms: a window claimed later than this after its due time is late.
    pub grace_ms: u64,
    /// The static input part.
    #[serde(default)]
    pub input: Map<String, Value>,
}

fn invalid(schedule: &str, why: impl Into<String>) -> ScheduleError {
    ScheduleError::Invalid {
        schedule: schedule.to_owned(),
        why: why.into(),
    }
}

/// Parses a 5- or 6-field cron expression (seconds first when 6), as the
/// `#[pipeline]` macro checks a literal one.
pub fn parse_cron(expr: &str) -> Result<Cron, String> {
    let fields = expr.split_whitespace().count();
    if fields != 5 && fields != 6 {
        return Err(format!(
            "it has {fields} fields; write 5 (minute hour day month weekday) or 6 (second first)"
        ));
    }
    Cron::from_str(expr).map_err(|e| e.to_string())
}

impl Schedule {
    fn with_cadence(name: &str, cadence: Cadence) -> Result<Schedule, ScheduleError> {
        check_name("schedule name", name).map_err(|e| invalid(name, e.to_string()))?;
        if name.contains(':') {
            return Err(invalid(name, "a schedule name must not contain ':'"));
        }
        Ok(Schedule {
            name: name.to_owned(),
            cadence,
            zone_name: "UTC".into(),
            zone: TimeZone::UTC,
            start: None,
            end: None,
            catch_up: CatchUp::Latest,
            overlap: Overlap::Allow,
            grace: Duration::from_secs(60),
            input: Map::new(),
        })
    }

    /// A schedule ticking on the cron expression `expr` (5 fields, or 6 with
    /// seconds first), in UTC until [`Schedule::in_zone`] says otherwise.
    pub fn cron(name: &str, expr: &str) -> Result<Schedule, ScheduleError> {
        let cron = parse_cron(expr).map_err(|why| ScheduleError::BadCron {
            schedule: name.to_owned(),
            expr: expr.to_owned(),
            why,
        })?;
        Schedule::with_cadence(
            name,
            Cadence::Cron {
                expr: expr.to_owned(),
                cron: Box::new(cron),
            },
        )
    }

    /// A schedule ticking every `interval` (whole milliseconds, at least 1 s).
    pub fn every(name: &str, interval: Duration) -> Result<Schedule, ScheduleError> {
        if interval < Duration::from_secs(1) || !interval.subsec_nanos().is_multiple_of(1_000_000) {
            return Err(invalid(
                name,
                format!("the interval {interval:?} must be whole milliseconds and at least 1s"),
            ));
        }
        Schedule::with_cadence(name, Cadence::Every(interval))
    }

    /// Evaluates the cron expression in IANA zone `zone` (default UTC).
    pub fn in_zone(mut self, zone: &str) -> Result<Schedule, ScheduleError> {
        self.zone = TimeZone::get(zone).map_err(|e| ScheduleError::BadZone {
            schedule: self.name.clone(),
            zone: zone.to_owned(),
            why: e.to_string(),
        })?;
        self.zone_name = zone.to_owned();
        Ok(self)
    }

    /// The first window starts here (and a fixed interval is anchored here).
    #[must_use]
    pub fn starting(mut self, start: Timestamp) -> Schedule {
        self.start = Some(start);
        self
    }

    /// [`Schedule::starting`] from RFC 3339 text (what the macro passes).
    pub fn starting_at(self, start: &str) -> Result<Schedule, ScheduleError> {
        let t = self.instant(start, "start")?;
        Ok(self.starting(t))
    }

    /// [`Schedule::ending`] from RFC 3339 text.
    pub fn ending_at(self, end: &str) -> Result<Schedule, ScheduleError> {
        let t = self.instant(end, "end")?;
        Ok(self.ending(t))
    }

    fn instant(&self, text: &str, what: &str) -> Result<Timestamp, ScheduleError> {
        text.parse().map_err(|e| {
            invalid(
                &self.name,
                format!(
                    "the {what} {text:?} is not an RFC 3339 instant like 2026-01-01T00:00:00Z: {e}"
                ),
            )
        })
    }

    /// No window ends after `end`.
    #[must_use]
    pub fn ending(mut self, end: Timestamp) -> Schedule {
        self.end = Some(end);
        self
    }

    /// The catch-up policy (default [`CatchUp::Latest`]).
    #[must_use]
    pub fn catch_up(mut self, policy: CatchUp) -> Schedule {
        if let CatchUp::All { max } = policy {
            self.catch_up = CatchUp::All {
                max: max.clamp(1, MAX_WINDOWS_PER_TICK),
            };
        } else {
            self.catch_up = policy;
        }
        self
    }

    /// The overlap policy (default [`Overlap::Allow`]).
    #[must_use]
    pub fn overlap(mut self, policy: Overlap) -> Schedule {
        self.overlap = policy;
        self
    }

    /// How late after its due time a window still counts as on time (default
    /// 60 s): later ones are "caught up", or missed under [`CatchUp::None`].
    #[must_use]
    pub fn grace(mut self, grace: Duration) -> Schedule {
        self.grace = grace;
        self
    }

    /// The static input part (a JSON object without a `window` field), merged
    /// into every tick's input.
    pub fn input(mut self, input: Value) -> Result<Schedule, ScheduleError> {
        match input {
            Value::Object(map) if !map.contains_key("window") => {
                self.input = map;
                Ok(self)
            }
            Value::Object(_) => Err(invalid(
                &self.name,
                "the static input must not have a `window` field: the tick sets it",
            )),
            other => Err(invalid(
                &self.name,
                format!("the static input must be a JSON object, not {other}"),
            )),
        }
    }

    /// The static input part as JSON text (what the macro passes).
    pub fn input_json(self, json: &str) -> Result<Schedule, ScheduleError> {
        let value: Value = serde_json::from_str(json)
            .map_err(|e| invalid(&self.name, format!("the static input is not JSON: {e}")))?;
        self.input(value)
    }

    /// Checks settings that relate to each other (start before end).
    pub(crate) fn check(&self) -> Result<(), ScheduleError> {
        if let (Some(s), Some(e)) = (self.start, self.end) {
            if s >= e {
                return Err(invalid(
                    &self.name,
                    format!("the start {s} is not before the end {e}"),
                ));
            }
        }
        Ok(())
    }

    /// The schedule's name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// When its ticks are.
    pub fn cadence(&self) -> &Cadence {
        &self.cadence
    }
    /// Its catch-up policy.
    pub fn catch_up_policy(&self) -> CatchUp {
        self.catch_up
    }
    /// Its overlap policy.
    pub fn overlap_policy(&self) -> Overlap {
        self.overlap
    }
    /// Its grace.
    pub fn grace_period(&self) -> Duration {
        self.grace
    }
    /// Its start, if set.
    pub fn start(&self) -> Option<Timestamp> {
        self.start
    }

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
    /// before `now` (nothing before the worker came up is enqueued).
    pub fn initial_cursor(&self, now: Timestamp) -> Timestamp {
        match self.start {
            Some(s) => s,
            None => self.latest_at_or_before(now).unwrap_or(now),
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

    /// The input of the tick for window `w`: the static part, and `window`.
    pub fn input_for(&self, w: &Window) -> Value {
        let mut map = self.input.clone();
        map.insert(
            "window".into(),
            serde_json::json!({ "start": w.start.to_string(), "end": w.end.to_string() }),
        );
        Value::Object(map)
    }

    /// The input key of window `w` when the pipeline has no input-key
    /// template: `<schedule>:<window start, RFC 3339 UTC>`.
    pub fn input_key_for(&self, w: &Window) -> String {
        format!("{}:{}", self.name, w.start)
    }

    /// What a worker registers.
    pub fn definition(&self) -> ScheduleDefinition {
        let (cron, every_ms) = match &self.cadence {
            Cadence::Cron { expr, .. } => (Some(expr.clone()), None),
            Cadence::Every(d) => (None, Some(d.as_millis() as u64)),
        };
        ScheduleDefinition {
            name: self.name.clone(),
            cron,
            every_ms,
            zone: self.zone_name.clone(),
            start_ms: self.start.map(|s| s.as_millisecond()),
            end_ms: self.end.map(|s| s.as_millisecond()),
            catch_up: self.catch_up,
            overlap: self.overlap,
            grace_ms: self.grace.as_millis() as u64,
            input: self.input.clone(),
        }
    }

    /// The schedule a definition read back from Redis describes.
    pub fn from_definition(d: &ScheduleDefinition) -> Result<Schedule, ScheduleError> {
        let mut s = match (&d.cron, d.every_ms) {
            (Some(expr), None) => Schedule::cron(&d.name, expr)?,
            (None, Some(ms)) => Schedule::every(&d.name, Duration::from_millis(ms))?,
            _ => {
                return Err(invalid(
                    &d.name,
                    "a definition needs exactly one of cron and every_ms",
                ))
            }
        };
        s = s.in_zone(&d.zone)?;
        let ts = |ms: i64| {
            Timestamp::from_millisecond(ms)
                .map_err(|e| invalid(&d.name, format!("bad instant {ms}: {e}")))
        };
        if let Some(ms) = d.start_ms {
            s = s.starting(ts(ms)?);
        }
        if let Some(ms) = d.end_ms {
            s = s.ending(ts(ms)?);
        }
        s = s
            .catch_up(d.catch_up)
            .overlap(d.overlap)
            .grace(Duration::from_millis(d.grace_ms))
            .input(Value::Object(d.input.clone()))?;
        s.check()?;
        Ok(s)
    }
}

impl ScheduleDefinition {
    /// A digest of the definition (FNV-1a over its JSON, 16 hex digits): two
    /// workers registering different definitions of one schedule are told apart.
    pub fn digest(&self) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for b in text.bytes() {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        format!("{hash:016x}")
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("a timestamp")
    }

    /// Every tick of `s` in `[from, to)`, as UTC text.
    fn ticks(s: &Schedule, from: &str, to: &str) -> Vec<String> {
        let (mut at, to) = (ts(from), ts(to));
        let mut out = Vec::new();
        while let Some(n) = s.next_after(at) {
            if n >= to {
                break;
            }
            out.push(n.to_string());
            at = n;
        }
        out
    }

    #[test]
    fn a_daily_0230_runs_once_on_spring_forward_and_once_on_fall_back() {
        let s = Schedule::cron("d", "30 2 * * *")
            .unwrap()
            .in_zone("Europe/Berlin")
            .unwrap();
        // 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist
        assert_eq!(
            ticks(&s, "2026-03-28T00:00:00Z", "2026-03-31T00:00:00Z"),
            [
                "2026-03-28T01:30:00Z", // 02:30 CET
                "2026-03-29T01:00:00Z", // 03:00 CEST, the first valid time after the gap
                "2026-03-30T00:30:00Z", // 02:30 CEST
            ]
        );
        // 2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice
        assert_eq!(
            ticks(&s, "2026-10-24T00:00:00Z", "2026-10-27T00:00:00Z"),
            [
                "2026-10-24T00:30:00Z", // 02:30 CEST
                "2026-10-25T00:30:00Z", // the first 02:30 (CEST) only
                "2026-10-26T01:30:00Z", // 02:30 CET
            ]
        );
    }

    #[test]
    fn new_york_spring_forward_and_fall_back_windows_are_contiguous() {
        let s = Schedule::cron("d", "30 2 * * *")
            .unwrap()
            .in_zone("America/New_York")
            .unwrap();
        // 2026-03-08 spring forward, 2026-11-01 fall back
        let spring = ticks(&s, "2026-03-07T00:00:00Z", "2026-03-10T00:00:00Z");
        assert_eq!(spring.len(), 3, "{spring:?}");
        assert_eq!(spring[1], "2026-03-08T07:00:00Z"); // 03:00 EDT
                                                       // 2026-11-01: 02:00 EDT falls back to 01:00 EST; 02:30 happens once
        let fall = ticks(&s, "2026-10-31T00:00:00Z", "2026-11-03T00:00:00Z");
        assert_eq!(fall.len(), 3, "{fall:?}");
        assert_eq!(fall[1], "2026-11-01T07:30:00Z"); // 02:30 EST
                                                     // and 01:30, which happens twice, runs once: at the first (EDT) one
        let early = Schedule::cron("e", "30 1 * * *")
            .unwrap()
            .in_zone("America/New_York")
            .unwrap();
        assert_eq!(
            ticks(&early, "2026-10-31T12:00:00Z", "2026-11-02T12:00:00Z"),
            ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]
        );
        // the windows of a clock injected across the fall-back day cover time exactly
        let due = s.due_windows(ts("2026-10-31T06:30:00Z"), ts("2026-11-02T12:00:00Z"));
        assert_eq!(due.windows.len(), 1, "catch-up latest keeps one");
        assert_eq!(due.left_out, 1);
        let all = s
            .clone()
            .catch_up(CatchUp::All { max: 10 })
            .due_windows(ts("2026-10-31T06:30:00Z"), ts("2026-11-02T12:00:00Z"));
        assert_eq!(all.windows.len(), 2);
        assert_eq!(all.windows[0].end, all.windows[1].start);
        assert_eq!(all.windows[1].end.to_string(), "2026-11-02T07:30:00Z");
        assert_eq!(all.next_due.unwrap().to_string(), "2026-11-03T07:30:00Z");
    }

    #[test]
    fn intervals_are_anchored_and_bounded() {
        let s = Schedule::every("i", Duration::from_secs(10))
            .unwrap()
            .starting(ts("2026-01-01T00:00:05Z"))
            .ending(ts("2026-01-01T00:00:35Z"));
        assert_eq!(
            ticks(&s, "2025-12-31T00:00:00Z", "2027-01-01T00:00:00Z"),
            [
                "2026-01-01T00:00:15Z",
                "2026-01-01T00:00:25Z",
                "2026-01-01T00:00:35Z"
            ]
        );
        assert_eq!(
            s.initial_cursor(ts("2026-06-01T00:00:00Z")),
            ts("2026-01-01T00:00:05Z")
        );
        let s = Schedule::every("i", Duration::from_secs(60)).unwrap();
        assert_eq!(
            s.initial_cursor(ts("2026-01-01T00:10:30Z")),
            ts("2026-01-01T00:10:00Z")
        );
    }

    #[test]
    fn catch_up_bounds_the_windows_and_counts_the_rest() {
        let s = Schedule::every("i", Duration::from_secs(1))
            .unwrap()
            .catch_up(CatchUp::All { max: 3 });
        let due = s.due_windows(ts("2026-01-01T00:00:00Z"), ts("2026-01-01T00:00:05.500Z"));
        let ends: Vec<String> = due.windows.iter().map(|w| w.end.to_string()).collect();
        assert_eq!(
            ends,
            [
                "2026-01-01T00:00:03Z",
                "2026-01-01T00:00:04Z",
                "2026-01-01T00:00:05Z"
            ]
        );
        assert_eq!(due.left_out, 2);
        assert_eq!(due.next_due, Some(ts("2026-01-01T00:00:06Z")));
        // a downtime too long to count: the tail is found backward
        let due = s.due_windows(ts("2025-01-01T00:00:00Z"), ts("2026-01-01T00:00:05.500Z"));
        assert_eq!(due.windows.len(), 3);
        assert_eq!(due.windows[2].end, ts("2026-01-01T00:00:05Z"));
        assert!(due.left_out >= MAX_COUNTED - 3);
    }

    #[test]
    fn bad_declarations_are_typed_errors() {
        assert!(matches!(
            Schedule::cron("x", "61 * * * *"),
            Err(ScheduleError::BadCron { .. })
        ));
        assert!(matches!(
            Schedule::cron("x", "* * * * * * *"),
            Err(ScheduleError::BadCron { .. })
        ));
        assert!(matches!(
            Schedule::cron("x", "0 * * * *")
                .unwrap()
                .in_zone("Mars/Olympus"),
            Err(ScheduleError::BadZone { .. })
        ));
        assert!(Schedule::every("x", Duration::from_millis(10)).is_err());
        assert!(Schedule::every("x:y", Duration::from_secs(1)).is_err());
        let s = Schedule::every("x", Duration::from_secs(1)).unwrap();
        assert!(s.clone().input(serde_json::json!([1])).is_err());
        assert!(s.clone().input(serde_json::json!({"window": 1})).is_err());
        let back = Schedule::from_definition(&s.definition()).unwrap();
        assert_eq!(back.definition(), s.definition());
    }

    #[test]
    fn the_input_and_key_use_rfc3339_instants() {
        let s = Schedule::every("hourly", Duration::from_secs(3600))
            .unwrap()
            .input(serde_json::json!({"table": "t"}))
            .unwrap();
        let w = s.window_from(ts("2026-05-06T00:00:00Z")).unwrap();
        assert_eq!(
            s.input_for(&w),
            serde_json::json!({"table": "t", "window": {"start": "2026-05-06T00:00:00Z", "end": "2026-05-06T01:00:00Z"}})
        );
        assert_eq!(s.input_key_for(&w), "hourly:2026-05-06T00:00:00Z");
        // the typed window reads the same JSON
        let typed: Window = serde_json::from_value(s.input_for(&w)["window"].clone()).unwrap();
        assert_eq!(typed, w);
    }
}
