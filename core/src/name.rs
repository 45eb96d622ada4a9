//! The one rule for names used inside Redis keys (queues, pipelines,
//! resources, workers, steps, schedules) and the characters no name or id may hold.

use crate::error::Error;

/// The longest queue, pipeline, resource, worker or step name, in bytes of UTF-8.
pub const MAX_NAME_BYTES: usize = 200;

/// Whether `c` may never appear in a name or an id: braces (they would end a
/// key's `{hash tag}`), whitespace, and the Unicode control (Cc) and format
/// (Cf) characters — zero-width and bidirectional controls among them, which
/// would let `orders` and a look-alike coexist.
pub(crate) fn is_forbidden_char(c: char) -> bool {
    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
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
pub(crate) fn check_name(what: &str, name: &str) -> Result<(), Error> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(Error::InvalidArgument(format!(
            "{what} {name:?} must be 1 to {MAX_NAME_BYTES} bytes long (it is {} bytes)",
            name.len()
        )));
    }
    if let Some(c) = name.chars().find(|c| is_forbidden_char(*c)) {
        return Err(Error::InvalidArgument(format!(
            "{what} {name:?} must not contain braces, whitespace, control or format characters (found U+{:04X})",
            u32::from(c)
        )));
    }
    Ok(())
}
