//! Key templates like `"shop:{shop_id}"` as the macro holds them: the parts
//! (parsed by `leasehold_syntax::template`, the grammar the core uses too)
//! with the literal they came from, for spans.

use syn::LitStr;

pub(crate) use leasehold_syntax::template::{Member, Part};

/// A parsed template, with the literal it came from (for spans).
pub(crate) struct Template {
    pub lit: LitStr,
    pub parts: Vec<Part>,
}

impl Template {
    /// Parses `lit`; the error is spanned at it.
    pub(crate) fn parse(lit: LitStr) -> syn::Result<Template> {
        match leasehold_syntax::parse_template(&lit.value()) {
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
