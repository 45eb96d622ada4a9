//! Key templates (`"shop:{shop_id}"`, `"{window.start}"`, `"{0}"`) evaluated
//! over a job's input as JSON: how tools that cannot run a pipeline's Rust
//! code (the CLI, the HTTP endpoint, untyped clients) compute the same resource
//! and input key as `#[pipeline]`'s generated code does over the typed input.
//!
//! The syntax is the macro's, parsed by the same function
//! (`leasehold_syntax::parse_template`): `{path}` names a field (dot-separated
//! names or tuple indexes), `{{` and `}}` are literal braces. A field must hold a
//! string, a number or a boolean; it is written as Rust's `Display` writes the
//! typed value (a string without quotes).

use leasehold_syntax::template::Part as Syntax;
use serde_json::Value;

/// A parsed key template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyTemplate {
    text: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Field(Vec<String>),
}

/// Why a template could not be parsed or evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TemplateError(pub String);

impl KeyTemplate {
    /// Parses `text` with the grammar the `#[pipeline]` macro uses
    /// (`leasehold_syntax::template`).
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let parts = leasehold_syntax::parse_template(text)
            .map_err(|e| TemplateError(e.to_string()))?
            .into_iter()
            .map(|part| match part {
                Syntax::Text(text) => Part::Text(text),
                Syntax::Field(members) => {
                    Part::Field(members.iter().map(ToString::to_string).collect())
                }
            })
            .collect();
        Ok(KeyTemplate {
            text: text.to_owned(),
            parts,
        })
    }

    /// The field paths the template names, in order (`["window", "start"]`).
    pub fn fields(&self) -> impl Iterator<Item = &[String]> {
        self.parts.iter().filter_map(|p| match p {
            Part::Field(path) => Some(path.as_slice()),
            Part::Text(_) => None,
        })
    }

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The key for `input`; the error names the field path that is missing or
    /// not a string, number or boolean.
    pub fn render(&self, input: &Value) -> Result<String, TemplateError> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Field(path) => {
                    let mut v = input;
                    for m in path {
                        let next = match v {
                            Value::Object(map) => map.get(m),
                            Value::Array(items) => {
                                m.parse::<usize>().ok().and_then(|i| items.get(i))
                            }
                            _ => None,
                        };
                        v = next.ok_or_else(|| {
                            TemplateError(format!(
                                "the input has no field `{}` (template {:?})",
                                path.join("."),
                                self.text
                            ))
                        })?;
                    }
                    match v {
                        Value::String(s) => out.push_str(s),
                        Value::Number(n) => out.push_str(&n.to_string()),
                        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
                        _ => {
                            return Err(TemplateError(format!(
                                "field `{}` of the input is not a string, number or boolean (template {:?})",
                                path.join("."),
                                self.text
                            )))
                        }
                    }
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_fields_paths_indexes_and_braces() {
        let t = KeyTemplate::parse("shop:{shop}:{window.start}:{pair.1}:{{x}}").expect("parse");
        let input = json!({"shop": "a", "window": {"start": 7}, "pair": [false, true]});
        assert_eq!(t.render(&input).expect("render"), "shop:a:7:true:{x}");
    }

    #[test]
    fn a_missing_or_structured_field_is_named() {
        let t = KeyTemplate::parse("{shop}:{window}").expect("parse");
        let e = t.render(&json!({"window": 1})).expect_err("missing");
        assert!(e.0.contains("`shop`"), "{e}");
        let e = t
            .render(&json!({"shop": "a", "window": {"start": 1}}))
            .expect_err("object");
        assert!(e.0.contains("`window`"), "{e}");
        assert!(KeyTemplate::parse("{a").is_err());
        assert!(KeyTemplate::parse("a}").is_err());
        assert!(KeyTemplate::parse("{a b}").is_err());
    }

    /// The macro and the core read templates with one parser: what one
    /// refuses, the other does too (the macro's own tests run the same
    /// function at compile time).
    #[test]
    fn the_grammar_is_the_macros() {
        for text in ["", "{a:?}", "{_}", "{a.}", "{a-b}", "{a{b}}", "x}"] {
            assert!(KeyTemplate::parse(text).is_err(), "{text:?}");
            assert!(leasehold_syntax::parse_template(text).is_err(), "{text:?}");
        }
        let t = KeyTemplate::parse("t:{0}:{w.start}").expect("parse");
        let out = t
            .render(&serde_json::json!(["a"]))
            .expect_err("no `w` in an array");
        assert!(out.0.contains("`w.start`"), "{out}");
    }
}
