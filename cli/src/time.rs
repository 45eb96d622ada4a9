//! Times and durations: parsing the command line's, printing Redis's.
//!
//! Uses `jiff` for the arithmetic: backfill windows step through UTC with
//! calendar units (`1h`, `1d`, `1mo`), so a month-long step is a calendar month.

use std::str::FromStr;
use std::time::Duration;

use jiff::tz::TimeZone;
use jiff::{Span, Timestamp, ZonedDateTime};

/// Most windows one backfill may create (a guard against a typo in `--step`).
pub(crate) const MAX_WINDOWS: usize = 1_000_000;

/// Parses a duration such as `5m`, `1h30m`, `2d`, `500ms` or `PT5M` (days are
/// 24 hours): the library's parser, the one the `#[pipeline]` attribute uses.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    leasehold_core::parse_duration(s).map_err(|e| format!("{s:?} is not a duration: {e}"))
}

/// Parses a backfill step: a positive span such as `1h`, `15m`, `1d` or `1mo`.
pub(crate) fn parse_step(s: &str) -> Result<Span, String> {
    let span = Span::from_str(s.trim())
        .map_err(|e| format!("{s:?} is not a step (try 15m, 1h, 1d, 1mo): {e}"))?;
    if !span.is_positive() {
        return Err(format!("step {s:?} must be positive"));
    }
    Ok(span)
}

/// Parses an instant: RFC 3339 (`2026-05-06T00:00:00Z`, `2026-05-06T02:00+02:00`),
/// or a date or civil time taken as UTC (`2026-05-06`, `2026-05-06T13:00`).
pub(crate) fn parse_instant(s: &str) -> Result<Timestamp, String> {
    let s = s.trim();
    if let Ok(ts) = Timestamp::from_str(s) {
        return Ok(ts);
    }
    if let Ok(dt) = jiff::civil::DateTime::from_str(s) {
        return dt
            .to_zoned_datetime(TimeZone::UTC)
            .map(|z| z.timestamp())
            .map_err(|e| format!("{s:?}: {e}"));
    }
    Err(format!(
        "{s:?} is not a time: use RFC 3339 such as 2026-05-06T00:00:00Z (a date or a time without offset is taken as UTC)"
    ))
}

/// One backfill window, `[from, to)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Window {
    /// Start, inclusive.
    pub from: Timestamp,
    /// End, exclusive (the last window is cut at the range's end).
    pub to: Timestamp,
}

/// The windows covering `[from, to)` in steps of `step`, in UTC.
pub(crate) fn windows(from: Timestamp, to: Timestamp, step: Span) -> Result<Vec<Window>, String> {
    if from >= to {
        return Err(format!("--from {from} must be before --to {to}"));
    }
    let origin: ZonedDateTime = from.to_zoned_datetime(TimeZone::UTC);
    let mut out = Vec::new();
    let mut start = from;
    let mut i: i64 = 1;
    while start < to {
        if out.len() >= MAX_WINDOWS {
            return Err(format!(
                "the range {from} .. {to} in steps of {step:#} makes more than {MAX_WINDOWS} jobs; use a larger --step or a shorter range"
            ));
        }
        // always step from the origin, so month steps do not drift (Jan 31 + 1mo + 1mo)
        let next = step
            .checked_mul(i)
            .and_then(|s| origin.checked_add(s))
            .map_err(|e| format!("cannot step {step:#} from {from}: {e}"))?
            .timestamp();
        let end = next.min(to);
        out.push(Window {
            from: start,
            to: end,
        });
        start = end;
        i += 1;
    }
    Ok(out)
}

/// Replaces `{from}`, `{to}` (RFC 3339, UTC) and `{from_ms}`, `{to_ms}` (epoch
/// milliseconds) in `template`; other braces are left alone.
pub(crate) fn render(template: &str, w: &Window) -> String {
    template
        .replace("{from}", &w.from.to_string())
        .replace("{to}", &w.to.to_string())
        .replace("{from_ms}", &w.from.as_millisecond().to_string())
        .replace("{to_ms}", &w.to.as_millisecond().to_string())
}

/// The clock times are shown in: UTC unless the operator chose local time
/// (`--local-time` or `LEASEHOLD_LOCAL_TIME=true`; in the dashboard also its
/// UTC/local switch, a cookie).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Zone {
    /// UTC, `2026-05-06T00:00:00.000Z`.
    #[default]
    Utc,
    /// The host's zone (`$TZ`, else `/etc/localtime`), with its offset.
    Local,
}

impl Zone {
    /// `utc` or `local`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Zone::Utc => "utc",
            Zone::Local => "local",
        }
    }
}

static DEFAULT_ZONE: std::sync::OnceLock<Zone> = std::sync::OnceLock::new();

tokio::task_local! {
    static ZONE: Zone;
}

/// Sets the process's zone (once, at start).
pub(crate) fn set_default_zone(zone: Zone) {
    let _ = DEFAULT_ZONE.set(zone);
}

/// The process's zone, whatever a request chose.
pub(crate) fn default_zone() -> Zone {
    DEFAULT_ZONE.get().copied().unwrap_or_default()
}

/// The zone in effect: the request's (dashboard), else the process's.
pub(crate) fn zone() -> Zone {
    ZONE.try_with(|z| *z).unwrap_or_else(|_| default_zone())
}

/// Runs `f` with times shown in `zone`.
pub(crate) async fn in_zone<F: std::future::Future>(zone: Zone, f: F) -> F::Output {
    ZONE.scope(zone, f).await
}

/// The host's time zone: `$TZ` (an IANA name), else the name `/etc/localtime`
/// links to, from the bundled database; UTC when neither names one.
fn local_zone() -> TimeZone {
    static LOCAL: std::sync::OnceLock<TimeZone> = std::sync::OnceLock::new();
    LOCAL
        .get_or_init(|| {
            let from_env = std::env::var("TZ")
                .ok()
                .map(|s| s.trim_start_matches(':').to_owned());
            let from_link = std::fs::read_link("/etc/localtime").ok().and_then(|p| {
                let p = p.to_string_lossy().into_owned();
                p.split_once("zoneinfo/").map(|(_, name)| name.to_owned())
            });
            from_env
                .into_iter()
                .chain(from_link)
                .find_map(|name| TimeZone::get(&name).ok())
                .unwrap_or(TimeZone::UTC)
        })
        .clone()
}

/// A time in ms as RFC 3339 with milliseconds: UTC (`Z`), or local time with
/// its offset when the operator chose local time ([`zone`]).
pub(crate) fn stamp(ms: i64) -> String {
    match Timestamp::from_millisecond(ms) {
        Ok(ts) => match zone() {
            Zone::Utc => ts.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
            Zone::Local => ts
                .to_zoned_datetime(local_zone())
                .strftime("%Y-%m-%dT%H:%M:%S%.3f%:z")
                .to_string(),
        },
        Err(_) => format!("{ms}ms"),
    }
}

/// A duration in ms, short: `850ms`, `42s`, `3m12s`, `2h05m`, `3d4h`.
pub(crate) fn human(ms: i64) -> String {
    let sign = if ms < 0 { "-" } else { "" };
    let ms = ms.unsigned_abs();
    let s = ms / 1000;
    let text = if ms < 1000 {
        format!("{ms}ms")
    } else if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else if s < 86_400 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s % 86_400 < 3600 {
        format!("{}d", s / 86_400)
    } else {
        format!("{}d{}h", s / 86_400, (s % 86_400) / 3600)
    };
    format!("{sign}{text}")
}

/// A duration, for messages.
pub(crate) fn human_duration(d: Duration) -> String {
    human(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        parse_instant(s).unwrap()
    }

    #[test]
    fn durations_parse_in_friendly_units() {
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(
            parse_duration("7d").unwrap(),
            Duration::from_secs(7 * 86_400)
        );
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-5m").is_err());
        assert!(parse_step("0h").is_err());
        assert!(parse_step("1mo").is_ok());
    }

    #[test]
    fn instants_accept_rfc3339_and_utc_civil_times() {
        assert_eq!(ts("2026-05-06T00:00:00Z"), ts("2026-05-06"));
        assert_eq!(ts("2026-05-06T02:00:00+02:00"), ts("2026-05-06T00:00"));
        assert!(parse_instant("yesterday").is_err());
    }

    #[test]
    fn windows_cover_the_range_and_cut_the_last_one() {
        let w = windows(
            ts("2026-05-06T00:00:00Z"),
            ts("2026-05-06T02:30:00Z"),
            parse_step("1h").unwrap(),
        )
        .unwrap();
        assert_eq!(w.len(), 3);
        assert_eq!(w[0].to, ts("2026-05-06T01:00:00Z"));
        assert_eq!(w[2].from, ts("2026-05-06T02:00:00Z"));
        assert_eq!(w[2].to, ts("2026-05-06T02:30:00Z"));
        let days = windows(
            ts("2026-05-06"),
            ts("2026-05-07"),
            parse_step("1h").unwrap(),
        )
        .unwrap();
        assert_eq!(days.len(), 24);
        let months = windows(
            ts("2026-01-31"),
            ts("2026-04-01"),
            parse_step("1mo").unwrap(),
        )
        .unwrap();
        assert_eq!(
            months.iter().map(|w| w.to.to_string()).collect::<Vec<_>>(),
            [
                "2026-02-28T00:00:00Z",
                "2026-03-31T00:00:00Z",
                "2026-04-01T00:00:00Z"
            ]
        );
        assert!(windows(
            ts("2026-05-07"),
            ts("2026-05-06"),
            parse_step("1h").unwrap()
        )
        .is_err());
        assert!(windows(
            ts("2000-01-01"),
            ts("2030-01-01"),
            parse_step("1s").unwrap()
        )
        .is_err());
    }

    #[test]
    fn templates_fill_only_known_placeholders() {
        let w = Window {
            from: ts("2026-05-06T00:00:00Z"),
            to: ts("2026-05-06T01:00:00Z"),
        };
        assert_eq!(
            render(
                r#"{"shop":"a","from":"{from}","to":"{to}","ms":{from_ms}}"#,
                &w
            ),
            r#"{"shop":"a","from":"2026-05-06T00:00:00Z","to":"2026-05-06T01:00:00Z","ms":1778025600000}"#
        );
    }

    #[test]
    fn humans_read_short_durations() {
        assert_eq!(human(850), "850ms");
        assert_eq!(human(42_000), "42s");
        assert_eq!(human(192_000), "3m12s");
        assert_eq!(human(7_500_000), "2h05m");
        assert_eq!(human(-42_000), "-42s");
        assert_eq!(human(7 * 86_400_000), "7d");
        assert_eq!(human(90_000_000), "1d1h");
        assert_eq!(stamp(1_778_025_600_123), "2026-05-06T00:00:00.123Z");
    }
}
