//! Key templates like `"shop:{shop_id}"`: text with `{field}` placeholders over
//! the fields of the pipeline's input.

use syn::LitStr;

/// A parsed template, with the literal it came from (for spans).
pub(crate) struct Template {
    pub lit: LitStr,
    pub parts: Vec<Part>,
}

/// A piece of a template.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Part {
    /// Literal text (braces already unescaped).
    Text(String),
    /// A field path: `shop_id`, `window.start`, `0`.
    Field(Vec<Member>),
}

/// One step of a field path.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Member {
    Named(String),
    Index(u32),
}

impl Template {
    /// Parses `lit`; the error is spanned at it.
    pub(crate) fn parse(lit: LitStr) -> syn::Result<Template> {
        match parse_parts(&lit.value()) {
            Ok(parts) => Ok(Template { lit, parts }),
            Err(why) => Err(syn::Error::new(lit.span(), why)),
        }
    }

    /// The literal text of the template (without fields), for checks.
    pub(crate) fn text(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Text(t) => Some(t.as_str()),
            Part::Field(_) => None,
        })
    }
}

/// Splits a template into text and fields.
pub(crate) fn parse_parts(template: &str) -> Result<Vec<Part>, String> {
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
            parse_parts("shop:{shop_id}").unwrap(),
            vec![Part::Text("shop:".into()), named(&["shop_id"])]
        );
        assert_eq!(
            parse_parts("{a}{b.c}:x").unwrap(),
            vec![named(&["a"]), named(&["b", "c"]), Part::Text(":x".into())]
        );
        assert_eq!(
            parse_parts("t{0}").unwrap(),
            vec![Part::Text("t".into()), Part::Field(vec![Member::Index(0)])]
        );
        assert_eq!(
            parse_parts("{{lit}}").unwrap(),
            vec![Part::Text("{lit}".into())]
        );
        assert_eq!(
            parse_parts("fixed").unwrap(),
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
            assert!(parse_parts(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
