//! Placeholders in a process step's arguments: `{source}`, `{window.start}`,
//! `{window.start:%Y-%m-%dT%H}`, filled from the job's input, each argument
//! passed whole as one argument (never through a shell).
//!
//! A placeholder is `{` a field path (names or indexes joined by `.`, the
//! first a name), an optional `:` and strftime format, and `}`. Any other `{`
//! stays as written, so JSON, jq programs and `{{.Go}}` templates pass
//! unchanged. A field must hold a string, a number or a boolean; with a
//! format it must hold an RFC 3339 instant (a window's bounds do), formatted
//! in UTC.

use std::ffi::OsString;

use serde_json::Value;

/// One piece of an argument.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece<'a> {
    Text(&'a str),
    Field {
        path: Vec<&'a str>,
        format: Option<&'a str>,
    },
}

/// Whether `name` is a path member: a name (letters, digits, `_`, `-`, not
/// starting with a digit or `-`) or, after the first, an index.
fn is_member(name: &str, first: bool) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {
            chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        }
        Some(c) if c.is_ascii_digit() && !first => chars.all(|c| c.is_ascii_digit()),
        _ => false,
    }
}

/// The placeholder that `text` (just after a `{`) starts with, and its length
/// up to and with its `}`.
fn placeholder(text: &str) -> Option<(Piece<'_>, usize)> {
    let end = text.find('}')?;
    let inner = &text[..end];
    let (path, format) = match inner.split_once(':') {
        Some((path, format)) if !format.is_empty() => (path, Some(format)),
        Some(_) => return None,
        None => (inner, None),
    };
    let members: Vec<&str> = path.split('.').collect();
    let valid = members
        .iter()
        .enumerate()
        .all(|(i, m)| is_member(m, i == 0));
    valid.then_some((
        Piece::Field {
            path: members,
            format,
        },
        end + 1,
    ))
}

/// The pieces of argument `arg`.
fn pieces(arg: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let (mut text_start, mut at) = (0, 0);
    while let Some(i) = arg[at..].find('{').map(|i| at + i) {
        at = i + 1;
        if let Some((field, len)) = placeholder(&arg[at..]) {
            if text_start < i {
                out.push(Piece::Text(&arg[text_start..i]));
            }
            out.push(field);
            at += len;
            text_start = at;
        }
    }
    if text_start < arg.len() {
        out.push(Piece::Text(&arg[text_start..]));
    }
    out
}

/// The field paths that `arg` names (`["window", "start"]`), for checks
/// against an input schema.
pub fn arg_fields(arg: &str) -> Vec<Vec<String>> {
    pieces(arg)
        .into_iter()
        .filter_map(|p| match p {
            Piece::Field { path, .. } => Some(path.iter().map(|m| (*m).to_owned()).collect()),
            Piece::Text(_) => None,
        })
        .collect()
}

/// The value at `path` in `input`, as an argument writes it.
fn value_of(input: &Value, path: &[&str], format: Option<&str>) -> Result<String, String> {
    let mut v = input;
    for m in path {
        v = match v {
            Value::Object(map) => map.get(*m),
            Value::Array(items) => m.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        }
        .ok_or_else(|| format!("the input has no field `{}`", path.join(".")))?;
    }
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => {
            return Err(format!(
                "field `{}` holds {}, not a string, a number or a boolean",
                path.join("."),
                match other {
                    Value::Null => "null",
                    Value::Array(_) => "an array",
                    _ => "an object",
                }
            ))
        }
    };
    let Some(format) = format else {
        return Ok(text);
    };
    let at: jiff::Timestamp = text.parse().map_err(|_| {
        format!(
            "field `{}` is {text:?}, not an RFC 3339 instant to format with {format:?}",
            path.join(".")
        )
    })?;
    jiff::fmt::strtime::format(format, at).map_err(|e| format!("bad format {format:?}: {e}"))
}

/// `arg` with its placeholders filled from `input`.
pub fn render_arg(arg: &str, input: &Value) -> Result<String, String> {
    let mut out = String::with_capacity(arg.len());
    for piece in pieces(arg) {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Field { path, format } => out.push_str(&value_of(input, &path, format)?),
        }
    }
    Ok(out)
}

/// Whether an argument of `args` has a placeholder.
pub(crate) fn templated(args: &[OsString]) -> bool {
    args.iter().any(has_field)
}

/// Whether argument `arg` has a placeholder.
fn has_field(arg: &OsString) -> bool {
    arg.to_str()
        .is_some_and(|s| pieces(s).iter().any(|p| matches!(p, Piece::Field { .. })))
}

/// Every argument of `args` with its placeholders filled from `input` (the
/// job's input, parsed once by the caller, or why it could not be; read only
/// when an argument has a placeholder). The error names the argument (from
/// 1) and what is wrong.
pub(crate) fn render(
    args: &[OsString],
    input: Result<&Value, &str>,
) -> Result<Vec<OsString>, String> {
    if !templated(args) {
        return Ok(args.to_vec());
    }
    let input = input.map_err(str::to_owned)?;
    args.iter()
        .enumerate()
        .map(|(i, a)| match a.to_str() {
            Some(s) if has_field(a) => render_arg(s, input)
                .map(OsString::from)
                .map_err(|e| format!("argument {} ({s:?}): {e}", i + 1)),
            _ => Ok(a.clone()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input() -> Value {
        json!({"source": "shop a", "n": 3, "ok": true, "cfg": {"x": 1},
               "window": {"start": "2026-05-06T13:00:00Z", "end": "2026-05-06T14:00:00Z"}})
    }

    #[test]
    fn fields_and_windows_fill_whole_arguments() {
        let i = input();
        assert_eq!(render_arg("{source}", &i).unwrap(), "shop a");
        assert_eq!(render_arg("--n={n}/{ok}", &i).unwrap(), "--n=3/true");
        assert_eq!(
            render_arg("{window.start:%Y-%m-%dT%H}", &i).unwrap(),
            "2026-05-06T13"
        );
        assert_eq!(
            render_arg("--hour={window.end:%H}", &i).unwrap(),
            "--hour=14"
        );
        assert_eq!(
            render_arg("{window.start}", &i).unwrap(),
            "2026-05-06T13:00:00Z"
        );
    }

    #[test]
    fn other_braces_pass_as_written() {
        let i = input();
        for literal in [
            "{\"a\": 1}",
            "{{.Names}}",
            "{ .a }",
            "{}",
            "{1}",
            "a{",
            "}{",
            "{window.start:}",
        ] {
            assert_eq!(render_arg(literal, &i).unwrap(), literal);
            assert!(arg_fields(literal).is_empty(), "{literal}");
        }
    }

    #[test]
    fn bad_fields_are_named() {
        let i = input();
        assert!(render_arg("{nope}", &i)
            .unwrap_err()
            .contains("no field `nope`"));
        assert!(render_arg("{cfg}", &i).unwrap_err().contains("an object"));
        assert!(render_arg("{source:%H}", &i)
            .unwrap_err()
            .contains("not an RFC 3339 instant"));
        let args = [OsString::from("x"), OsString::from("{nope}")];
        assert!(render(&args, Ok(&json!({})))
            .unwrap_err()
            .starts_with("argument 2 (\"{nope}\")"));
        // no placeholder: the input is not even read
        assert_eq!(
            render(&[OsString::from("{\"a\"}")], Err("not json")).unwrap(),
            vec![OsString::from("{\"a\"}")]
        );
        // a placeholder and an input that is not JSON: why it is not
        assert_eq!(
            render(&[OsString::from("{a}")], Err("the input is not JSON")).unwrap_err(),
            "the input is not JSON"
        );
    }
}
