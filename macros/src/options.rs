//! Reading settings (`key = value`, `key(...)`): values, durations and retry
//! policies, unknown and duplicate keys.

use std::collections::HashMap;
use std::time::Duration;

use leasehold_syntax::setting::{
    self, CountSetting, DurationSetting, NumberSetting, SettingError, WordSetting,
};
use proc_macro2::Span;
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, Ident, Lit, LitStr, Meta, Token};

use crate::errors::Errors;

/// A setting whose key is known and appears once.
pub(crate) struct Setting {
    pub key: Ident,
    pub meta: Meta,
}

impl Setting {
    /// The value of `key = value`, or an error saying how to write it.
    fn value(&self, example: &str) -> syn::Result<&Expr> {
        match &self.meta {
            Meta::NameValue(nv) => Ok(&nv.value),
            other => Err(syn::Error::new_spanned(
                other,
                format!("expected `{} = {example}`", self.key),
            )),
        }
    }

    /// A string value.
    pub(crate) fn string(&self, example: &str) -> syn::Result<LitStr> {
        self.string_of("a string", example)
    }

    fn string_of(&self, what: &str, example: &str) -> syn::Result<LitStr> {
        match self.value(example)? {
            Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) => Ok(s.clone()),
            other => Err(syn::Error::new_spanned(
                other,
                format!("expected {what}, like `{} = {example}`", self.key),
            )),
        }
    }

    /// A duration setting, checked by its one definition (bounds and words
    /// shared with the pipelines file and the command line).
    pub(crate) fn duration_of(&self, def: &DurationSetting) -> syn::Result<Duration> {
        let lit = self.string_of("a duration string", "\"30s\"")?;
        def.parse(&lit.value()).map_err(|e| refusal(lit.span(), e))
    }

    /// A word setting (`"hold"`), checked by its one definition; the word as
    /// the definition spells it.
    pub(crate) fn word_of(&self, def: &WordSetting) -> syn::Result<&'static str> {
        let example = format!("{:?}", def.words.first().copied().unwrap_or_default());
        let lit = self.string(&example)?;
        def.parse(&lit.value()).map_err(|e| refusal(lit.span(), e))
    }

    /// A whole-number setting, checked by its one definition.
    pub(crate) fn count_of(&self, def: &CountSetting, example: &str) -> syn::Result<u32> {
        match self.value(example)? {
            Expr::Lit(ExprLit {
                lit: Lit::Int(int), ..
            }) => match int.base10_parse::<u64>() {
                Ok(n) => def.check(n).map_err(|e| refusal(int.span(), e)),
                Err(_) => Err(syn::Error::new(
                    int.span(),
                    format!("`{}` must fit in a u32", self.key),
                )),
            },
            other => Err(syn::Error::new_spanned(
                other,
                format!("expected an integer, like `{} = {example}`", self.key),
            )),
        }
    }

    /// A number setting, checked by its one definition.
    pub(crate) fn number_of(&self, def: &NumberSetting, example: &str) -> syn::Result<f64> {
        let value = self.value(example)?;
        let parsed = match value {
            Expr::Lit(ExprLit {
                lit: Lit::Float(f), ..
            }) => f.base10_parse::<f64>().ok(),
            Expr::Lit(ExprLit {
                lit: Lit::Int(i), ..
            }) => i.base10_parse::<f64>().ok(),
            _ => None,
        };
        match parsed {
            Some(n) => def
                .check(n)
                .map_err(|e| syn::Error::new_spanned(value, e.message)),
            None => Err(syn::Error::new_spanned(
                value,
                format!("expected a number, like `{} = {example}`", self.key),
            )),
        }
    }

    /// The span of the value of `key = value`.
    pub(crate) fn literal_span(&self) -> Option<Span> {
        match &self.meta {
            Meta::NameValue(nv) => Some(syn::spanned::Spanned::span(&nv.value)),
            _ => None,
        }
    }

    /// A boolean, `true` or `false`.
    pub(crate) fn boolean(&self, example: &str) -> syn::Result<bool> {
        match self.value(example)? {
            Expr::Lit(ExprLit {
                lit: Lit::Bool(b), ..
            }) => Ok(b.value),
            other => Err(syn::Error::new_spanned(
                other,
                format!(
                    "expected `true` or `false`, like `{} = {example}`",
                    self.key
                ),
            )),
        }
    }

    /// The settings inside `key(...)`.
    pub(crate) fn nested(&self, example: &str) -> syn::Result<Vec<Meta>> {
        match &self.meta {
            Meta::List(list) => Ok(list
                .parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)?
                .into_iter()
                .collect()),
            other => Err(syn::Error::new_spanned(
                other,
                format!("expected `{}({example})`", self.key),
            )),
        }
    }
}

/// A setting's refusal, at `span`.
fn refusal(span: Span, e: SettingError) -> syn::Error {
    syn::Error::new(span, e.message)
}

/// The settings that have old names.
const ALIASED: [setting::Key; 2] = [setting::STALE_LOCK.key, setting::INITIAL_BACKOFF.key];

/// The current name of `key`, when it is an old name (an alias) of a setting.
pub(crate) fn current_name(key: &str) -> &str {
    ALIASED
        .iter()
        .find(|k| k.aliases.contains(&key))
        .map_or(key, |k| k.name)
}

/// Sorts `settings` into known keys, reporting unknown keys (with the list of
/// known ones and a suggestion) and keys given twice (an old name and its
/// current one are the same key). `known` lists the current names; the old
/// names of a known setting are read too.
pub(crate) fn known(
    settings: Vec<Meta>,
    known: &[&str],
    what: &str,
    errors: &mut Errors,
) -> Vec<Setting> {
    let mut seen: HashMap<String, Span> = HashMap::new();
    let mut out = Vec::new();
    for meta in settings {
        let Some(key) = meta.path().get_ident().cloned() else {
            errors.spanned(
                meta.path(),
                format!("expected a {what} name, one of: {}", known.join(", ")),
            );
            continue;
        };
        let written = key.to_string();
        let name = current_name(&written).to_owned();
        if !known.contains(&name.as_str()) {
            // an old name counts as its new one, so `backof` still finds `backoff`
            let mut names: Vec<&str> = known.to_vec();
            names.extend(
                ALIASED
                    .iter()
                    .filter(|k| known.contains(&k.name))
                    .flat_map(|k| k.aliases.iter().copied()),
            );
            let hint = match suggest(&name, &names).map(current_name) {
                Some(close) => format!("did you mean `{close}`? "),
                None => String::new(),
            };
            errors.at(
                key.span(),
                format!(
                    "unknown {what} `{name}`; {hint}known {what}s: {}",
                    known.join(", ")
                ),
            );
            continue;
        }
        if seen.insert(name.clone(), key.span()).is_some() {
            let also = if written == name {
                String::new()
            } else {
                format!(" (`{written}` is its old name)")
            };
            errors.at(key.span(), format!("duplicate {what} `{name}`{also}"));
            continue;
        }
        out.push(Setting { key, meta });
    }
    out
}

/// The known name closest to `name`, if close enough to be a likely typo.
fn suggest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (strsim::levenshtein(name, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// A retry policy as written: unset fields come from elsewhere (the pipeline's
/// policy, then `RetryPolicy::exponential(3)`).
#[derive(Clone, Copy, Default)]
pub(crate) struct Retry {
    pub max_attempts: Option<u32>,
    pub backoff: Option<Duration>,
    /// Where `initial_backoff` was written (to blame it when it is longer
    /// than the `max_backoff` beside it).
    pub backoff_at: Option<Span>,
    pub max_backoff: Option<Duration>,
    pub multiplier: Option<f64>,
    pub jitter: Option<f64>,
}

/// The keys of a retry policy.
pub(crate) const RETRY_KEYS: &[&str] = &[
    "max_attempts",
    "initial_backoff",
    "max_backoff",
    "multiplier",
    "jitter",
];

impl Retry {
    /// Reads one retry key; returns false if `setting` is not one.
    pub(crate) fn read(&mut self, setting: &Setting, errors: &mut Errors) -> bool {
        match current_name(&setting.key.to_string()) {
            "max_attempts" => {
                self.max_attempts = errors.ok(setting.count_of(&setting::MAX_ATTEMPTS, "3"))
            }
            "initial_backoff" => {
                self.backoff = errors.ok(setting.duration_of(&setting::INITIAL_BACKOFF));
                self.backoff_at = setting.literal_span();
            }
            "max_backoff" => {
                self.max_backoff = errors.ok(setting.duration_of(&setting::MAX_BACKOFF))
            }
            "multiplier" => {
                self.multiplier = errors.ok(setting.number_of(&setting::MULTIPLIER, "2.0"))
            }
            "jitter" => self.jitter = errors.ok(setting.number_of(&setting::JITTER, "0.2")),
            _ => return false,
        }
        true
    }

    /// Checks the backoffs written side by side in this policy (before it is
    /// merged with another).
    pub(crate) fn check(&self, errors: &mut Errors) {
        if let (Some(i), Some(m), Some(at)) = (self.backoff, self.max_backoff, self.backoff_at) {
            if let Err(e) = setting::check_backoffs(i, m) {
                errors.at(at, e.message);
            }
        }
    }

    /// This policy, with unset fields taken from `base`.
    pub(crate) fn or(self, base: Retry) -> Retry {
        Retry {
            max_attempts: self.max_attempts.or(base.max_attempts),
            backoff: self.backoff.or(base.backoff),
            backoff_at: self.backoff_at.or(base.backoff_at),
            max_backoff: self.max_backoff.or(base.max_backoff),
            multiplier: self.multiplier.or(base.multiplier),
            jitter: self.jitter.or(base.jitter),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        let known = ["name", "queue", "lease_ttl", "max_attempts"];
        assert_eq!(suggest("lease_tll", &known), Some("lease_ttl"));
        assert_eq!(suggest("queu", &known), Some("queue"));
        assert_eq!(suggest("max_attempt", &known), Some("max_attempts"));
        assert_eq!(suggest("priority", &known), None);
    }
}
