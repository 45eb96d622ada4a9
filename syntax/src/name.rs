//! The one rule for names used inside Redis keys (queues, pipelines,
//! resources, workers, steps, schedules) and the characters no name or id may
//! hold.
//!
//! ```
//! use leasehold_syntax::name::{check_name, NameError};
//!
//! assert_eq!(check_name("orders"), Ok(()));
//! assert_eq!(check_name("a b"), Err(NameError::Forbidden(' ')));
//! ```

use std::fmt;

/// The longest queue, pipeline, resource, worker or step name, in bytes of UTF-8.
pub const MAX_NAME_BYTES: usize = 200;

/// Why a string is not a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameError {
    /// Empty, or longer than [`MAX_NAME_BYTES`]; the length in bytes.
    Length(usize),
    /// A character no name may hold (see [`is_forbidden_char`]).
    Forbidden(char),
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::Length(len) => write!(
                f,
                "must be 1 to {MAX_NAME_BYTES} bytes long (it is {len} bytes)"
            ),
            NameError::Forbidden(c) => write!(
                f,
                "must not contain braces, whitespace, control or format characters (found U+{:04X})",
                u32::from(*c)
            ),
        }
    }
}

impl std::error::Error for NameError {}

/// Whether `c` may never appear in a name or an id: braces (they would end a
/// key's `{hash tag}`), whitespace, and the Unicode control (Cc) and format
/// (Cf) characters — zero-width and bidirectional controls among them, which
/// would let `orders` and a look-alike coexist.
pub fn is_forbidden_char(c: char) -> bool {
    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
    if c.is_ascii() {
        // (the same answer without the Unicode tables: ASCII has no format
        // character, its whitespace other than the space is control, and every
        // name and id the worker reads per job is ASCII in practice)
        return c == '{' || c == '}' || c == ' ' || c.is_ascii_control();
    }
    c == '{'
        || c == '}'
        || c.is_whitespace()
        || matches!(
            c.general_category(),
            GeneralCategory::Control | GeneralCategory::Format
        )
}

/// Checks a queue, pipeline, resource, worker or step name: 1 to
/// [`MAX_NAME_BYTES`] bytes, no braces, whitespace, control or format characters.
pub fn check_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(NameError::Length(name.len()));
    }
    match name.chars().find(|c| is_forbidden_char(*c)) {
        Some(c) => Err(NameError::Forbidden(c)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ascii_answer_is_the_unicode_one() {
        use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
        for c in (0u8..128).map(char::from) {
            let by_tables = c == '{'
                || c == '}'
                || c.is_whitespace()
                || matches!(
                    c.general_category(),
                    GeneralCategory::Control | GeneralCategory::Format
                );
            assert_eq!(is_forbidden_char(c), by_tables, "U+{:04X}", u32::from(c));
        }
    }

    #[test]
    fn accepted() {
        for name in ["orders", "shop:a", "ünïcode", "a-b.c_d/e", &"x".repeat(200)] {
            assert_eq!(check_name(name), Ok(()), "{name:?}");
        }
    }

    #[test]
    fn refused() {
        assert_eq!(check_name(""), Err(NameError::Length(0)));
        assert_eq!(check_name(&"x".repeat(201)), Err(NameError::Length(201)));
        for (name, c) in [
            ("a{b", '{'),
            ("a}b", '}'),
            ("a b", ' '),
            ("a\tb", '\t'),
            ("a\u{7}b", '\u{7}'),
            ("or\u{200B}ders", '\u{200B}'),
            ("a\u{202E}b", '\u{202E}'),
        ] {
            assert_eq!(check_name(name), Err(NameError::Forbidden(c)), "{name:?}");
        }
    }
}
