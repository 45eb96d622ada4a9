//! Colour on the terminal: whether stdout shows it (decided once, at start,
//! by anstream: `NO_COLOR` turns it off, `CLICOLOR_FORCE` on, otherwise on
//! only for a terminal) and the styles of states and table headers. Text is
//! built plain unless colour is on, so a pipe or a file never sees a code.

use std::sync::OnceLock;

use anstyle::{AnsiColor, Style};
use leasehold_core::JobState;

/// Whether stdout shows colour; unset (tests, before `init`) means no.
static COLOUR: OnceLock<bool> = OnceLock::new();

/// Decides, from the environment and stdout, whether output is coloured.
pub(crate) fn init() {
    let choice = anstream::AutoStream::choice(&std::io::stdout());
    let _ = COLOUR.set(matches!(
        choice,
        anstream::ColorChoice::Always | anstream::ColorChoice::AlwaysAnsi
    ));
}

/// Whether output is coloured.
pub(crate) fn enabled() -> bool {
    COLOUR.get().copied().unwrap_or(false)
}

/// `text` in `style` when colour is on, else `text` as it is.
pub(crate) fn paint(style: Style, text: &str) -> String {
    if enabled() && !text.is_empty() {
        format!("{}{text}{}", style.render(), style.render_reset())
    } else {
        text.to_owned()
    }
}

/// The style of a state: green done, red failed, yellow STALE (a decision
/// is needed), blue in flight, dim waiting or cancelled.
pub(crate) fn of_state(state: JobState) -> Style {
    let colour = match state {
        JobState::Succeeded => AnsiColor::Green,
        JobState::Failed => AnsiColor::Red,
        JobState::Stale => AnsiColor::Yellow,
        JobState::Leased | JobState::Running => AnsiColor::Blue,
        JobState::Queued | JobState::Cancelled => return Style::new().dimmed(),
    };
    Style::new().fg_color(Some(colour.into()))
}

/// A table header.
pub(crate) fn header(text: &str) -> String {
    paint(Style::new().bold(), text)
}

/// The style of a warning (`STALE`, `FAILED` counts that are not zero).
pub(crate) const WARN: Style = Style::new()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Yellow)))
    .bold();

/// A warning in its style.
pub(crate) fn warn(text: &str) -> String {
    paint(WARN, text)
}

/// How many columns `text` takes on a terminal: its characters, less the
/// escape codes of its styles.
pub(crate) fn width(text: &str) -> usize {
    if !text.contains('\x1b') {
        return text.chars().count();
    }
    anstream::adapter::strip_str(text)
        .map(|s| s.chars().count())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_unless_enabled_and_width_ignores_codes() {
        // `init` is never called in unit tests: text stays plain
        assert_eq!(paint(of_state(JobState::Failed), "FAILED"), "FAILED");
        let styled = format!(
            "{}FAILED{}",
            of_state(JobState::Failed).render(),
            of_state(JobState::Failed).render_reset()
        );
        assert!(styled.contains('\x1b'));
        assert_eq!(width(&styled), 6);
        assert_eq!(width("QUEUED"), 6);
    }
}
