//! Unit tests of schedule arithmetic.

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

#[test]
fn a_window_offset_moves_the_input_window_not_the_ticks() {
    // cron's `15 * * * * job --hour prev`: at :15, the clock hour before
    let s = Schedule::cron("load", "15 * * * *")
        .unwrap()
        .window_offset_ms(-15 * 60_000)
        .unwrap();
    let w = s.window_from(ts("2026-05-06T13:15:00Z")).unwrap();
    assert_eq!(w.end, ts("2026-05-06T14:15:00Z"), "the tick is unchanged");
    assert_eq!(
        s.input_for(&w)["window"],
        serde_json::json!({"start": "2026-05-06T13:00:00Z", "end": "2026-05-06T14:00:00Z"})
    );
    assert_eq!(s.input_key_for(&w), "load:2026-05-06T13:00:00Z");
    let back = Schedule::from_definition(&s.definition()).unwrap();
    assert_eq!(back.window_offset(), -900_000);
    assert!(s.clone().window_offset_ms(400 * 86_400_000).is_err());
    // a schedule without an offset keeps its digest (the field is left out)
    let plain = Schedule::cron("load", "15 * * * *").unwrap();
    assert!(!serde_json::to_string(&plain.definition())
        .unwrap()
        .contains("window_offset_ms"));
}

#[test]
fn run_on_start_makes_the_latest_whole_window_due_at_once() {
    let s = Schedule::every("hourly", Duration::from_secs(3600)).unwrap();
    let now = ts("2026-05-06T13:20:00Z");
    assert_eq!(s.initial_cursor(now), ts("2026-05-06T13:00:00Z"));
    let eager = s.clone().run_on_start(true);
    let cursor = eager.initial_cursor(now);
    assert_eq!(cursor, ts("2026-05-06T12:00:00Z"));
    let due = eager.due_windows(cursor, now);
    assert_eq!(due.windows.len(), 1);
    assert_eq!(due.windows[0].start, ts("2026-05-06T12:00:00Z"));
    assert!(
        Schedule::from_definition(&eager.definition())
            .unwrap()
            .definition()
            .run_on_start
    );
}
