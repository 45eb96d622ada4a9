//! One definition of every pipeline setting: its name (and the old names kept
//! as aliases), its words or its bounds, and the message that refuses a value.
//! The `#[pipeline]` macro, the pipelines file (`leasehold worker
//! --pipelines`) and the command line's flags check a value with the same
//! constant here, so they accept and refuse the same values with the same
//! words.
//!
//! ```
//! use std::time::Duration;
//! use leasehold_syntax::setting::{LEASE_TTL, STALE_LOCK};
//!
//! assert_eq!(LEASE_TTL.parse("30s"), Ok(Duration::from_secs(30)));
//! assert_eq!(
//!     LEASE_TTL.parse("500ms").unwrap_err().to_string(),
//!     "lease_ttl is 500ms: it must be at least 1s"
//! );
//! assert_eq!(STALE_LOCK.parse("release"), Ok("release"));
//! assert!(STALE_LOCK.is_named("on_stale"));
//! ```

use std::fmt;
use std::time::Duration;

use crate::duration::parse_duration;

/// Why a value of a setting is refused: the setting's name and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError {
    /// The setting's (current) name.
    pub setting: &'static str,
    /// What is wrong, in the words every surface shows.
    pub message: String,
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SettingError {}

/// A setting's name and the names it had before (accepted for one release).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    /// The name to write.
    pub name: &'static str,
    /// Older names, still read; the docs say which release drops them.
    pub aliases: &'static [&'static str],
}

impl Key {
    /// Whether `key` is this setting's name or one of its aliases.
    pub fn is_named(&self, key: &str) -> bool {
        self.name == key || self.aliases.contains(&key)
    }

    fn refuse(&self, message: String) -> SettingError {
        SettingError {
            setting: self.name,
            message,
        }
    }
}

/// A duration setting (`"30s"`), between `min` and `max` inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurationSetting {
    /// Its name.
    pub key: Key,
    /// The least it may be (a millisecond: more than zero).
    pub min: Duration,
    /// The most it may be.
    pub max: Duration,
}

impl DurationSetting {
    /// Parses `text` as this setting's value.
    pub fn parse(&self, text: &str) -> Result<Duration, SettingError> {
        let d =
            parse_duration(text).map_err(|e| self.key.refuse(format!("{}: {e}", self.key.name)))?;
        self.check_as(d, text.trim())
    }

    /// Checks a duration already read (`written` is how it was written).
    pub fn check_as(&self, d: Duration, written: &str) -> Result<Duration, SettingError> {
        let name = self.key.name;
        if d < self.min {
            let least = if self.min == Duration::from_millis(1) {
                "more than 0s".to_owned()
            } else {
                format!("at least {}", shown(self.min))
            };
            return Err(self
                .key
                .refuse(format!("{name} is {written}: it must be {least}")));
        }
        if d > self.max {
            return Err(self.key.refuse(format!(
                "{name} is {written}: it must be {} at most",
                shown(self.max)
            )));
        }
        Ok(d)
    }

    /// Is this setting's name `key` (or an alias)?
    pub fn is_named(&self, key: &str) -> bool {
        self.key.is_named(key)
    }
}

/// A setting that is one of a few words (`"hold"` or `"release"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WordSetting {
    /// Its name.
    pub key: Key,
    /// The words, in the order the refusal lists them.
    pub words: &'static [&'static str],
}

impl WordSetting {
    /// The word `text` is (as this definition spells it), or the refusal.
    pub fn parse(&self, text: &str) -> Result<&'static str, SettingError> {
        self.words
            .iter()
            .copied()
            .find(|w| *w == text)
            .ok_or_else(|| {
                let quoted: Vec<String> = self.words.iter().map(|w| format!("{w:?}")).collect();
                let list = match quoted.split_last() {
                    Some((last, [])) => last.clone(),
                    Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                    None => String::new(),
                };
                self.key
                    .refuse(format!("{} is {text:?}: expected {list}", self.key.name))
            })
    }

    /// Is this setting's name `key` (or an alias)?
    pub fn is_named(&self, key: &str) -> bool {
        self.key.is_named(key)
    }
}

/// A number setting (`multiplier = 2.0`), between `min` and `max` inclusive
/// (`max` may be infinite: no upper bound), always finite.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NumberSetting {
    /// Its name.
    pub key: Key,
    /// The least it may be.
    pub min: f64,
    /// The most it may be (`f64::INFINITY`: no bound).
    pub max: f64,
}

impl NumberSetting {
    /// Checks `n`.
    pub fn check(&self, n: f64) -> Result<f64, SettingError> {
        if n.is_finite() && n >= self.min && n <= self.max {
            return Ok(n);
        }
        let name = self.key.name;
        Err(self.key.refuse(if self.max.is_finite() {
            format!("{name} must be between {} and {}", self.min, self.max)
        } else {
            format!("{name} must be a number of at least {}", self.min)
        }))
    }
}

/// A whole-number setting (`max_attempts = 3`) of at least `min`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountSetting {
    /// Its name.
    pub key: Key,
    /// The least it may be.
    pub min: u64,
}

impl CountSetting {
    /// Checks `n`: at least `min` and within a `u32`.
    pub fn check(&self, n: u64) -> Result<u32, SettingError> {
        let name = self.key.name;
        if n < self.min {
            return Err(self
                .key
                .refuse(format!("{name} must be at least {}", self.min)));
        }
        u32::try_from(n).map_err(|_| {
            self.key
                .refuse(format!("{name} must be at most {}", u32::MAX))
        })
    }
}

const MS: Duration = Duration::from_millis(1);
const SECOND: Duration = Duration::from_secs(1);
const HOUR: Duration = Duration::from_secs(3_600);
const DAY: Duration = Duration::from_secs(86_400);
const WEEK: Duration = Duration::from_secs(7 * 86_400);

const fn key(name: &'static str) -> Key {
    Key { name, aliases: &[] }
}

/// `lease_ttl`: a lease's time-to-live, 1 s to a day (the pipeline's setting
/// and the worker's `--lease-ttl` for pipelines that set none).
pub const LEASE_TTL: DurationSetting = DurationSetting {
    key: key("lease_ttl"),
    min: SECOND,
    max: DAY,
};

/// `stale_lock`: what happens to the resource lock when a job goes STALE,
/// `"hold"` (the default: until an operator decides) or `"release"`. The
/// macro's old name `on_stale` is read until 0.3.
pub const STALE_LOCK: WordSetting = WordSetting {
    key: Key {
        name: "stale_lock",
        aliases: &["on_stale"],
    },
    words: &["hold", "release"],
};

/// `max_attempts`: attempts of a job (of a step), at least 1.
pub const MAX_ATTEMPTS: CountSetting = CountSetting {
    key: key("max_attempts"),
    min: 1,
};

/// `initial_backoff`: the wait before the first retry, zero to a week. The
/// macro's old name `backoff` is read until 0.3.
pub const INITIAL_BACKOFF: DurationSetting = DurationSetting {
    key: Key {
        name: "initial_backoff",
        aliases: &["backoff"],
    },
    min: Duration::ZERO,
    max: WEEK,
};

/// `max_backoff`: the longest wait between retries, zero to a week.
pub const MAX_BACKOFF: DurationSetting = DurationSetting {
    key: key("max_backoff"),
    min: Duration::ZERO,
    max: WEEK,
};

/// `multiplier`: how much each retry's wait grows, at least 1.
pub const MULTIPLIER: NumberSetting = NumberSetting {
    key: key("multiplier"),
    min: 1.0,
    max: f64::INFINITY,
};

/// `jitter`: the random share of a retry's wait, 0 to 1.
pub const JITTER: NumberSetting = NumberSetting {
    key: key("jitter"),
    min: 0.0,
    max: 1.0,
};

/// `timeout`: a step's (or a notice hook's) time limit, more than zero, a
/// week at most.
pub const TIMEOUT: DurationSetting = DurationSetting {
    key: key("timeout"),
    min: MS,
    max: WEEK,
};

/// `grace`: a process step's time between SIGTERM and SIGKILL, zero (SIGKILL
/// at once) to an hour. Process steps only: the pipelines file.
pub const STEP_GRACE: DurationSetting = DurationSetting {
    key: key("grace"),
    min: Duration::ZERO,
    max: HOUR,
};

/// `resource_limit`: jobs holding one resource at once, at least 1.
pub const RESOURCE_LIMIT: CountSetting = CountSetting {
    key: key("resource_limit"),
    min: 1,
};

/// `max_running`: the pipeline's jobs running at once, at least 1.
pub const MAX_RUNNING: CountSetting = CountSetting {
    key: key("max_running"),
    min: 1,
};

/// A schedule's `catch_up`: `"all"`, `"latest"` or `"none"` (see the core's
/// `CatchUp`).
pub const CATCH_UP: WordSetting = WordSetting {
    key: key("catch_up"),
    words: &["all", "latest", "none"],
};

/// A schedule's `catch_up_max`: the most windows one catch-up enqueues, at
/// least 1; only with `catch_up = "all"`.
pub const CATCH_UP_MAX: CountSetting = CountSetting {
    key: key("catch_up_max"),
    min: 1,
};

/// The refusal of `catch_up_max` without `catch_up = "all"`.
pub const CATCH_UP_MAX_ALONE: &str = "catch_up_max goes with catch_up = \"all\"";

/// A schedule's `overlap`: `"allow"`, `"skip"` or `"wait"` (see the core's
/// `Overlap`).
pub const OVERLAP: WordSetting = WordSetting {
    key: key("overlap"),
    words: &["allow", "skip", "wait"],
};

/// A schedule's `every`: its interval, at least 1 s (no upper bound).
pub const EVERY: DurationSetting = DurationSetting {
    key: key("every"),
    min: SECOND,
    max: Duration::MAX,
};

/// A schedule's `grace` for a late tick: zero to a week.
pub const SCHEDULE_GRACE: DurationSetting = DurationSetting {
    key: key("grace"),
    min: Duration::ZERO,
    max: WEEK,
};

/// Checks the backoffs written side by side in one retry policy: the first
/// wait may not be longer than the longest.
pub fn check_backoffs(initial: Duration, max: Duration) -> Result<(), SettingError> {
    if initial <= max {
        return Ok(());
    }
    Err(INITIAL_BACKOFF.key.refuse(format!(
        "initial_backoff ({}) is longer than max_backoff ({})",
        shown(initial),
        shown(max)
    )))
}

/// A duration as the messages write it: its largest whole unit (`1s`, `1d`,
/// `90m`, `250ms`).
pub fn shown(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms >= size && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// Where a setting is written: the same place in the macro and in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// On the pipeline: `#[pipeline(k = v)]`, a `[[pipeline]]`'s `k = v`.
    Pipeline,
    /// The pipeline's retry policy: `#[pipeline(k = v)]`, `retry = { k = v }`.
    Retry,
    /// Flow control: `#[pipeline(k = v)]`, `flow = { k = v }`.
    Flow,
    /// A step: `#[step(k = v)]`, a `[[pipeline.step]]`'s `k = v`.
    Step,
    /// A schedule (`every = "1h"` besides): `schedule(k = v)`, a
    /// `[[pipeline.schedule]]`'s `k = v`.
    Schedule,
}

/// A value of a setting and what every surface must say of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Example {
    /// The setting's name as written (a current name or an alias).
    pub key: &'static str,
    /// Where it is written.
    pub place: Place,
    /// Other settings written beside it (`k = v`, one per entry).
    pub with: &'static [&'static str],
    /// The value, as a literal (Rust's and TOML's spelling agree: `"30s"`, `3`, `0.5`).
    pub value: &'static str,
    /// `None`: accepted; `Some(words)`: refused with exactly these words.
    pub refused: Option<&'static str>,
}

const fn ok(key: &'static str, place: Place, value: &'static str) -> Example {
    Example {
        key,
        place,
        with: &[],
        value,
        refused: None,
    }
}

const fn no(key: &'static str, place: Place, value: &'static str, words: &'static str) -> Example {
    Example {
        key,
        place,
        with: &[],
        value,
        refused: Some(words),
    }
}

/// One accepted and one refused value (or more) of every setting defined
/// here, with the refusal's words: the table the macro's, the pipelines
/// file's and the command line's tests walk, so the three agree.
pub const EXAMPLES: &[Example] = &[
    ok("lease_ttl", Place::Pipeline, "\"1s\""),
    no(
        "lease_ttl",
        Place::Pipeline,
        "\"500ms\"",
        "lease_ttl is 500ms: it must be at least 1s",
    ),
    no(
        "lease_ttl",
        Place::Pipeline,
        "\"0s\"",
        "lease_ttl is 0s: it must be at least 1s",
    ),
    no(
        "lease_ttl",
        Place::Pipeline,
        "\"2d\"",
        "lease_ttl is 2d: it must be 1d at most",
    ),
    no(
        "lease_ttl",
        Place::Pipeline,
        "\"1mo\"",
        "lease_ttl: months and years have no fixed length; use days, like \"30d\"",
    ),
    ok("stale_lock", Place::Pipeline, "\"release\""),
    ok("on_stale", Place::Pipeline, "\"hold\""),
    no(
        "stale_lock",
        Place::Pipeline,
        "\"keep\"",
        "stale_lock is \"keep\": expected \"hold\" or \"release\"",
    ),
    no(
        "on_stale",
        Place::Pipeline,
        "\"drop\"",
        "stale_lock is \"drop\": expected \"hold\" or \"release\"",
    ),
    ok("max_attempts", Place::Retry, "1"),
    no(
        "max_attempts",
        Place::Retry,
        "0",
        "max_attempts must be at least 1",
    ),
    ok("initial_backoff", Place::Retry, "\"0s\""),
    ok("backoff", Place::Retry, "\"7d\""),
    no(
        "initial_backoff",
        Place::Retry,
        "\"8d\"",
        "initial_backoff is 8d: it must be 7d at most",
    ),
    no(
        "backoff",
        Place::Retry,
        "\"-1s\"",
        "initial_backoff: it must not be negative",
    ),
    ok("max_backoff", Place::Retry, "\"1h\""),
    no(
        "max_backoff",
        Place::Retry,
        "\"30d\"",
        "max_backoff is 30d: it must be 7d at most",
    ),
    ok("multiplier", Place::Retry, "1.0"),
    no(
        "multiplier",
        Place::Retry,
        "0.5",
        "multiplier must be a number of at least 1",
    ),
    ok("jitter", Place::Retry, "1.0"),
    no(
        "jitter",
        Place::Retry,
        "1.5",
        "jitter must be between 0 and 1",
    ),
    ok("max_running", Place::Flow, "1"),
    no(
        "max_running",
        Place::Flow,
        "0",
        "max_running must be at least 1",
    ),
    ok("timeout", Place::Step, "\"7d\""),
    no(
        "timeout",
        Place::Step,
        "\"0s\"",
        "timeout is 0s: it must be more than 0s",
    ),
    no(
        "timeout",
        Place::Step,
        "\"30d\"",
        "timeout is 30d: it must be 7d at most",
    ),
    no(
        "timeout",
        Place::Step,
        "\"250us\"",
        "timeout: it is finer than a millisecond; leasehold keeps whole milliseconds",
    ),
    ok("catch_up", Place::Schedule, "\"none\""),
    no(
        "catch_up",
        Place::Schedule,
        "\"some\"",
        "catch_up is \"some\": expected \"all\", \"latest\" or \"none\"",
    ),
    Example {
        key: "catch_up_max",
        place: Place::Schedule,
        with: &["catch_up = \"all\""],
        value: "1",
        refused: None,
    },
    Example {
        key: "catch_up_max",
        place: Place::Schedule,
        with: &["catch_up = \"all\""],
        value: "0",
        refused: Some("catch_up_max must be at least 1"),
    },
    no("catch_up_max", Place::Schedule, "3", CATCH_UP_MAX_ALONE),
    ok("overlap", Place::Schedule, "\"wait\""),
    no(
        "overlap",
        Place::Schedule,
        "\"never\"",
        "overlap is \"never\": expected \"allow\", \"skip\" or \"wait\"",
    ),
    ok("grace", Place::Schedule, "\"7d\""),
    ok("every", Place::Schedule, "\"1s\""),
    no(
        "every",
        Place::Schedule,
        "\"500ms\"",
        "every is 500ms: it must be at least 1s",
    ),
    no(
        "grace",
        Place::Schedule,
        "\"8d\"",
        "grace is 8d: it must be 7d at most",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_keep_their_bounds_and_say_them() {
        assert_eq!(LEASE_TTL.parse("1d"), Ok(DAY));
        assert_eq!(
            TIMEOUT.parse(" 0s ").unwrap_err().to_string(),
            "timeout is 0s: it must be more than 0s"
        );
        assert_eq!(INITIAL_BACKOFF.parse("0s"), Ok(Duration::ZERO));
        assert!(LEASE_TTL
            .parse("soon")
            .unwrap_err()
            .message
            .starts_with("lease_ttl: "));
    }

    #[test]
    fn words_numbers_and_counts() {
        assert_eq!(OVERLAP.parse("skip"), Ok("skip"));
        assert_eq!(
            STALE_LOCK.parse("x").unwrap_err().to_string(),
            "stale_lock is \"x\": expected \"hold\" or \"release\""
        );
        assert!(MULTIPLIER.check(f64::INFINITY).is_err());
        assert!(JITTER.check(f64::NAN).is_err());
        assert_eq!(JITTER.check(0.0), Ok(0.0));
        assert_eq!(MAX_ATTEMPTS.check(0).unwrap_err().setting, "max_attempts");
        assert!(MAX_ATTEMPTS.check(u64::from(u32::MAX) + 1).is_err());
    }

    /// Every setting defined here is walked, accepted and refused, under each
    /// of its names; except `grace` of a process step (the file only: a Rust
    /// step has no process to signal) and `resource_limit` (it needs a
    /// `resource` outside its `flow` table; `check_mistakes` and the UI
    /// tests cover it).
    #[test]
    fn every_setting_has_examples_on_both_sides() {
        let keys = [
            LEASE_TTL.key,
            STALE_LOCK.key,
            MAX_ATTEMPTS.key,
            INITIAL_BACKOFF.key,
            MAX_BACKOFF.key,
            MULTIPLIER.key,
            JITTER.key,
            TIMEOUT.key,
            MAX_RUNNING.key,
            CATCH_UP.key,
            CATCH_UP_MAX.key,
            OVERLAP.key,
            SCHEDULE_GRACE.key,
            EVERY.key,
        ];
        for k in keys {
            for name in std::iter::once(k.name).chain(k.aliases.iter().copied()) {
                let of = |refused: bool| {
                    EXAMPLES
                        .iter()
                        .any(|e| e.key == name && e.refused.is_some() == refused)
                };
                assert!(
                    of(false) && of(true),
                    "{name}: an accepted and a refused example"
                );
            }
        }
    }

    #[test]
    fn every_example_names_a_setting_and_agrees_with_it() {
        let durations = [
            EVERY,
            LEASE_TTL,
            INITIAL_BACKOFF,
            MAX_BACKOFF,
            TIMEOUT,
            SCHEDULE_GRACE,
        ];
        let words = [STALE_LOCK, CATCH_UP, OVERLAP];
        for e in EXAMPLES.iter().filter(|e| e.with.is_empty()) {
            let text = e.value.trim_matches('"');
            let place_ok = |k: &Key| match (k.name, e.place) {
                ("grace", Place::Schedule) | ("timeout", Place::Step) => true,
                ("grace" | "timeout", _) => false,
                _ => true,
            };
            let result = if let Some(d) = durations
                .iter()
                .find(|d| d.is_named(e.key) && place_ok(&d.key))
            {
                d.parse(text).map(|_| ())
            } else if let Some(w) = words.iter().find(|w| w.is_named(e.key)) {
                w.parse(text).map(|_| ())
            } else {
                continue;
            };
            assert_eq!(
                result.err().map(|e| e.to_string()),
                e.refused.map(str::to_owned),
                "{e:?}"
            );
        }
    }
}
