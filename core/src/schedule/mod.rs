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

use crate::name::check_name;

mod policy;
mod ticks;
mod window;

pub use crate::error::ScheduleError;
pub use policy::{Cadence, CatchUp, Overlap};
pub use ticks::DueWindows;
pub use window::Window;

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
    /// Added to the bounds of the window a tick's input and key carry (ms).
    window_offset_ms: i64,
    /// Whether a schedule new to Redis runs its latest whole window at once.
    run_on_start: bool,
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
    /// Added to the window's bounds in a tick's input and key (ms; `-3600000`:
    /// the hour before). Left out when 0, so older digests stay the same.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub window_offset_ms: i64,
    /// Whether a schedule new to Redis runs its latest whole window at once
    /// (instead of waiting for the next tick). Left out when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub run_on_start: bool,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
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
            window_offset_ms: 0,
            run_on_start: false,
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

    /// Shifts the window a tick's input and input key carry by `offset_ms`
    /// (negative: earlier), as cron's `15 * * * * job --hour prev` did: an
    /// hourly tick at :15 with `-15m` carries the clock hour before it. The
    /// ticks themselves (when a window is due) do not move. At most a year
    /// either way.
    pub fn window_offset_ms(mut self, offset_ms: i64) -> Result<Schedule, ScheduleError> {
        const YEAR_MS: i64 = 366 * 86_400_000;
        if !(-YEAR_MS..=YEAR_MS).contains(&offset_ms) {
            return Err(invalid(
                &self.name,
                format!("the window offset {offset_ms} ms is more than a year"),
            ));
        }
        self.window_offset_ms = offset_ms;
        Ok(self)
    }

    /// Whether a schedule Redis does not know yet runs its latest whole
    /// window at once (default: it waits for the next tick). A schedule with
    /// a start catches up from it instead.
    #[must_use]
    pub fn run_on_start(mut self, run: bool) -> Schedule {
        self.run_on_start = run;
        self
    }

    /// The window offset (ms).
    pub fn window_offset(&self) -> i64 {
        self.window_offset_ms
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
}

impl Schedule {
    /// The input of the tick for window `w`: the static part, and `window`.
    pub fn input_for(&self, w: &Window) -> Value {
        let w = self.offset(w);
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
        format!("{}:{}", self.name, self.offset(w).start)
    }

    /// Window `w` as a tick's input carries it: shifted by the window offset.
    fn offset(&self, w: &Window) -> Window {
        let shift = |t: Timestamp| {
            Timestamp::from_millisecond(t.as_millisecond() + self.window_offset_ms).unwrap_or(t)
        };
        Window {
            start: shift(w.start),
            end: shift(w.end),
        }
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
            window_offset_ms: self.window_offset_ms,
            run_on_start: self.run_on_start,
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
            .input(Value::Object(d.input.clone()))?
            .window_offset_ms(d.window_offset_ms)?
            .run_on_start(d.run_on_start);
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

#[cfg(test)]
mod tests;
