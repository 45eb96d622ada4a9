//! A job input given on the command line (`enqueue --input`,
//! `--input-template`, `group create --completion-input`): the JSON itself,
//! `@FILE` for a file's contents or `-` for standard input, so an input of
//! any size up to the HTTP enqueue's limit can be enqueued (Linux refuses a
//! single argument above 128 KiB). JSON never starts with `@` and `-` alone
//! is not JSON, so the forms cannot be mistaken for one another.

use std::io::Read as _;
use std::path::PathBuf;

use crate::failure::Failure;

/// The largest input read from a file or standard input: the HTTP enqueue's
/// body limit, so every enqueue path takes the same inputs.
pub(crate) const MAX_INPUT_BYTES: usize = 10 * 1024 * 1024;

/// Where an input was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// The argument itself.
    Argument,
    /// `@FILE`.
    File(PathBuf),
    /// `-`.
    Stdin,
}

impl Source {
    /// `file "x.json"` or `standard input`, for messages; `None` for the argument.
    pub(crate) fn describe(&self) -> Option<String> {
        match self {
            Source::Argument => None,
            Source::File(p) => Some(format!("file {:?}", p.display().to_string())),
            Source::Stdin => Some("standard input".to_owned()),
        }
    }
}

/// Why an input could not be read.
#[derive(Debug)]
pub(crate) enum InputError {
    /// The file or standard input could not be read.
    Unreadable {
        /// The flag that named it.
        flag: &'static str,
        /// Where from.
        from: Source,
        /// The system's reason.
        error: std::io::Error,
    },
    /// More than [`MAX_INPUT_BYTES`].
    TooLarge {
        /// The flag that named it.
        flag: &'static str,
        /// Where from.
        from: Source,
    },
    /// Not UTF-8, so not JSON.
    NotText {
        /// The flag that named it.
        flag: &'static str,
        /// Where from.
        from: Source,
    },
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let place = |from: &Source| from.describe().unwrap_or_default();
        match self {
            InputError::Unreadable { flag, from, error } => {
                write!(f, "{flag}: cannot read {}: {error}", place(from))
            }
            InputError::TooLarge { flag, from } => write!(
                f,
                "{flag}: {} holds more than {} MiB, the largest input accepted (as by the HTTP enqueue)",
                place(from),
                MAX_INPUT_BYTES / (1024 * 1024)
            ),
            InputError::NotText { flag, from } => {
                write!(f, "{flag}: {} is not UTF-8 text, so not JSON", place(from))
            }
        }
    }
}

impl From<InputError> for Failure {
    fn from(e: InputError) -> Failure {
        Failure::Usage(e.to_string())
    }
}

/// The input text `value` (the argument of `flag`) stands for, and where it was read.
pub(crate) fn read(flag: &'static str, value: &str) -> Result<(String, Source), InputError> {
    let from = if value == "-" {
        Source::Stdin
    } else if let Some(path) = value.strip_prefix('@') {
        Source::File(PathBuf::from(path))
    } else {
        return Ok((value.to_owned(), Source::Argument));
    };
    let unreadable = |error| InputError::Unreadable {
        flag,
        from: from.clone(),
        error,
    };
    let mut bytes = Vec::new();
    let limit = MAX_INPUT_BYTES as u64 + 1;
    match &from {
        Source::File(path) => std::fs::File::open(path)
            .and_then(|file| file.take(limit).read_to_end(&mut bytes))
            .map_err(unreadable)?,
        _ => std::io::stdin()
            .lock()
            .take(limit)
            .read_to_end(&mut bytes)
            .map_err(unreadable)?,
    };
    if bytes.len() > MAX_INPUT_BYTES {
        return Err(InputError::TooLarge { flag, from });
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok((text, from)),
        Err(_) => Err(InputError::NotText { flag, from }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_file_and_their_errors() {
        let (text, from) = read("--input", "{\"a\":1}").expect("inline");
        assert_eq!((text.as_str(), from), ("{\"a\":1}", Source::Argument));

        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("in.json");
        std::fs::write(&path, "{\"b\":2}").expect("write");
        let (text, from) = read("--input", &format!("@{}", path.display())).expect("file");
        assert_eq!((text.as_str(), from), ("{\"b\":2}", Source::File(path)));

        let missing = dir.path().join("missing.json");
        let e = read("--input", &format!("@{}", missing.display())).expect_err("missing");
        assert!(
            e.to_string().starts_with(&format!(
                "--input: cannot read file \"{}\": ",
                missing.display()
            )),
            "{e}"
        );

        let binary = dir.path().join("bin");
        std::fs::write(&binary, [0xff, 0xfe, b'{']).expect("write");
        let e = read("--input", &format!("@{}", binary.display())).expect_err("binary");
        assert!(matches!(e, InputError::NotText { .. }), "{e}");

        let big = dir.path().join("big.json");
        std::fs::write(&big, vec![b' '; MAX_INPUT_BYTES + 1]).expect("write");
        let e = read("--input", &format!("@{}", big.display())).expect_err("big");
        assert!(matches!(e, InputError::TooLarge { .. }), "{e}");
        assert!(e.to_string().contains("more than 10 MiB"), "{e}");
    }
}
