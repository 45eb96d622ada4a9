//! Key templates like `"shop:{shop_id}"`: text with `{field}` placeholders
//! over the fields of a pipeline's input. `{a.b}` names a nested field, `{0}`
//! a tuple struct's; `{{` and `}}` are literal braces. The macro turns the
//! parts into field accesses on the typed input, the core evaluates them over
//! the input as JSON.
//!
//! ```
//! use leasehold_syntax::template::{parse_template, Member, Part};
//!
//! let parts = parse_template("shop:{shop_id}").unwrap();
//! assert_eq!(
//!     parts,
//!     vec![Part::Text("shop:".into()), Part::Field(vec![Member::Named("shop_id".into())])]
//! );
//! assert!(parse_template("shop:{shop_id").is_err());
//! ```

use std::fmt;

/// A piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Literal text (braces already unescaped).
    Text(String),
    /// A field path: `shop_id`, `window.start`, `0`.
    Field(Vec<Member>),
}

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Member {
    /// A named field.
    Named(String),
    /// A tuple field's index.
    Index(u32),
}

impl fmt::Display for Member {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Member::Named(name) => f.write_str(name),
            Member::Index(index) => write!(f, "{index}"),
        }
    }
}

/// Why a string is not a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError(pub String);

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TemplateError {}

/// Splits a template into text and fields; the error says what is wrong
/// and how to write it.
pub fn parse_template(template: &str) -> Result<Vec<Part>, TemplateError> {
    parse_parts(template).map_err(TemplateError)
}

fn parse_parts(template: &str) -> Result<Vec<Part>, String> {
    if template.is_empty() {
        return Err("empty template: a key needs some text or `{field}`s".into());
    }
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut chars = template.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '{' if chars.peek().map(|(_, c)| *c) == Some('{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek().map(|(_, c)| *c) == Some('}') => {
                chars.next();
                text.push('}');
            }
            '}' => {
                return Err(format!(
                    "unmatched `}}` at byte {at} of the template (write `}}}}` for a literal brace)"
                ))
            }
            '{' => {
                let start = at + 1;
                let Some(len) = template[start..].find(['}', '{']) else {
                    return Err(format!(
                        "unmatched `{{` at byte {at} of the template (write `{{{{` for a literal brace)"
                    ));
                };
                if template[start + len..].starts_with('{') {
                    return Err(format!(
                        "unmatched `{{` at byte {at} of the template (write `{{{{` for a literal brace)"
                    ));
                }
                let field = &template[start..start + len];
                // Skip the field and its closing brace.
                for _ in 0..field.chars().count() + 1 {
                    chars.next();
                }
                if !text.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut text)));
                }
                parts.push(Part::Field(parse_field(field)?));
            }
            c => text.push(c),
        }
    }
    if !text.is_empty() {
        parts.push(Part::Text(text));
    }
    Ok(parts)
}

fn parse_field(field: &str) -> Result<Vec<Member>, String> {
    if field.trim().is_empty() {
        return Err(
            "empty `{}` in the template: name a field of the input, like `{shop_id}`".into(),
        );
    }
    if field.contains(':') {
        return Err(format!(
            "`{{{field}}}`: format specs are not supported in templates; write `{{field}}`"
        ));
    }
    field
        .split('.')
        .map(|member| {
            if !member.is_empty() && member.bytes().all(|b| b.is_ascii_digit()) {
                member
                    .parse()
                    .map(Member::Index)
                    .map_err(|_| format!("`{member}` is not a field index"))
            } else if is_identifier(member) {
                Ok(Member::Named(member.to_owned()))
            } else {
                Err(format!(
                    "`{{{field}}}`: `{member}` is not a field name; a placeholder names a field \
                     of the input, like `{{shop_id}}` or `{{window.start}}`"
                ))
            }
        })
        .collect()
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c == '_' || c.is_alphabetic() => {}
        _ => return false,
    }
    s != "_" && chars.all(|c| c == '_' || c.is_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(path: &[&str]) -> Part {
        Part::Field(path.iter().map(|m| Member::Named((*m).into())).collect())
    }

    #[test]
    fn parses_text_and_fields() {
        assert_eq!(
            parse_template("shop:{shop_id}").unwrap(),
            vec![Part::Text("shop:".into()), named(&["shop_id"])]
        );
        assert_eq!(
            parse_template("{a}{b.c}:x").unwrap(),
            vec![named(&["a"]), named(&["b", "c"]), Part::Text(":x".into())]
        );
        assert_eq!(
            parse_template("t{0}").unwrap(),
            vec![Part::Text("t".into()), Part::Field(vec![Member::Index(0)])]
        );
        assert_eq!(
            parse_template("{{lit}}").unwrap(),
            vec![Part::Text("{lit}".into())]
        );
        assert_eq!(
            parse_template("fixed").unwrap(),
            vec![Part::Text("fixed".into())]
        );
    }

    #[test]
    fn rejects_malformed_templates() {
        for bad in [
            "",
            "shop:{shop_id",
            "shop:shop_id}",
            "{}",
            "{a:?}",
            "{a-b}",
            "{a{b}}",
            "{a.}",
            "{_}",
        ] {
            assert!(parse_template(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
