//! Text from outside (a script's output, an error message, a reason, an
//! input) made safe to show a person: every control character is rendered
//! visibly (`\x1b`, `\r`, `\x9b`, ...), so nothing a script prints can drive
//! the operator's terminal. The one helper of every human output: the CLI,
//! the dashboard and the log lines of process steps. (`--json` and the HTTP
//! API escape by JSON's rules instead.)

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with every control character shown as an escape, except newlines
/// and tabs, which are kept (tails, multi-line messages).
pub fn visible(text: &str) -> Cow<'_, str> {
    render(text, true)
}

/// `text` on one line: as [`visible`], with newlines shown as `\n` too
/// (tabs are kept).
pub fn visible_line(text: &str) -> Cow<'_, str> {
    render(text, false)
}

/// Whether `c` is shown as an escape: C0 controls (but a tab, and a
/// newline when `keep_newline`), DEL, C1 controls (`\u{9b}` is a
/// one-character CSI on some terminals) and the bidirectional overrides and
/// isolates, which reorder what is shown.
fn escaped(c: char, keep_newline: bool) -> bool {
    match c {
        '\t' => false,
        '\n' => !keep_newline,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        c => c.is_control(),
    }
}

fn render(text: &str, keep_newline: bool) -> Cow<'_, str> {
    if !text.chars().any(|c| escaped(c, keep_newline)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !escaped(c, keep_newline) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) <= 0xff => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_sequences_are_shown_not_sent() {
        assert_eq!(visible("\x1b[2Jgone"), "\\x1b[2Jgone");
        assert_eq!(visible("\x1b]0;title\x07"), "\\x1b]0;title\\x07");
        assert_eq!(visible("\x1b[31mred\x1b[0m"), "\\x1b[31mred\\x1b[0m");
        assert_eq!(visible("50%\rdone"), "50%\\rdone");
        assert_eq!(visible("del\x7f"), "del\\x7f");
        assert_eq!(visible("csi\u{9b}2J"), "csi\\x9b2J");
        assert_eq!(visible("abc\u{202e}cba"), "abc\\u{202e}cba");
        assert_eq!(visible("\0"), "\\x00");
    }

    #[test]
    fn layout_and_text_stay() {
        assert!(matches!(visible("a\n\tb"), Cow::Borrowed("a\n\tb")));
        assert_eq!(visible_line("a\n\tb"), "a\\n\tb");
        assert!(matches!(
            visible("naïve — 東京 \\x1b"),
            Cow::Borrowed("naïve — 東京 \\x1b")
        ));
        // escaping twice changes nothing: the result holds no control
        let once = visible("\x1b[2J\u{9b}\r").into_owned();
        assert_eq!(visible(&once), once);
    }
}
