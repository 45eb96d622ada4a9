//! Reading settings (`key = value`, `key(...)`): values, durations and retry
//! policies, unknown and duplicate keys.

use std::collections::HashMap;
use std::time::Duration;

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

    /// A duration string, like `"30s"`.
    pub(crate) fn duration(&self) -> syn::Result<(Duration, Span)> {
        let lit = self.string_of("a duration string", "\"30s\"")?;
        let duration = parse_duration(&lit.value()).map_err(|why| {
            syn::Error::new(lit.span(), format!("bad duration {:?}: {why}", lit.value()))
        })?;
        Ok((duration, lit.span()))
    }

    /// A positive integer.
    pub(crate) fn count(&self, example: &str) -> syn::Result<u32> {
        match self.value(example)? {
            Expr::Lit(ExprLit {
                lit: Lit::Int(int), ..
            }) => match int.base10_parse::<u32>() {
                Ok(0) => Err(syn::Error::new(
                    int.span(),
                    format!("`{}` must be at least 1", self.key),
                )),
                Ok(n) => Ok(n),
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

    /// A number in `range`.
    pub(crate) fn number(
        &self,
        example: &str,
        range: std::ops::RangeInclusive<f64>,
    ) -> syn::Result<f64> {
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
            Some(n) if n.is_finite() && range.contains(&n) => Ok(n),
            Some(_) => Err(syn::Error::new_spanned(
                value,
                format!(
                    "`{}` must be between {} and {}",
                    self.key,
                    range.start(),
                    if range.end().is_finite() {
                        range.end().to_string()
                    } else {
                        "any larger number".into()
                    }
                ),
            )),
            None => Err(syn::Error::new_spanned(
                value,
                format!("expected a number, like `{} = {example}`", self.key),
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

/// Sorts `settings` into known keys, reporting unknown keys (with the list of
/// known ones and a suggestion) and keys given twice.
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
        let name = key.to_string();
        if !known.contains(&name.as_str()) {
            let hint = match suggest(&name, known) {
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
            errors.at(key.span(), format!("duplicate {what} `{name}`"));
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
        .map(|k| (edit_distance(name, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

/// Parses `"250ms"`, `"30s"`, `"5m"`, `"1h"`, or a sum like `"1m30s"`; the
/// error says what is wrong and how to write it.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    const HELP: &str =
        "write a number and a unit (ms, s, m, h), like \"250ms\", \"30s\" or \"1m30s\"";
    if text.is_empty() {
        return Err(format!("it is empty; {HELP}"));
    }
    let mut total: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(HELP.to_owned());
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| "it is too large".to_owned())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let millis_per_unit = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "" => return Err(format!("a unit is missing; {HELP}")),
            unit if unit.starts_with(['.', ',']) => {
                return Err(
                    "fractions are not supported; use a smaller unit, like \"1500ms\" for 1.5s"
                        .to_owned(),
                )
            }
            unit if unit.contains(char::is_whitespace) => {
                return Err(format!("no spaces inside a duration; {HELP}"))
            }
            unit => return Err(format!("unknown unit `{unit}`; {HELP}")),
        };
        rest = &rest[unit_len..];
        total = number
            .checked_mul(millis_per_unit)
            .and_then(|ms| total.checked_add(ms))
            .ok_or_else(|| "it is too large".to_owned())?;
    }
    Ok(Duration::from_millis(total))
}

/// A retry policy as written: unset fields come from elsewhere (the pipeline's
/// policy, then `RetryPolicy::exponential(3)`).
#[derive(Clone, Copy, Default)]
pub(crate) struct Retry {
    pub max_attempts: Option<u32>,
    pub backoff: Option<Duration>,
    pub max_backoff: Option<Duration>,
    pub multiplier: Option<f64>,
    pub jitter: Option<f64>,
}

/// The keys of a retry policy.
pub(crate) const RETRY_KEYS: &[&str] = &[
    "max_attempts",
    "backoff",
    "max_backoff",
    "multiplier",
    "jitter",
];

impl Retry {
    /// Reads one retry key; returns false if `setting` is not one.
    pub(crate) fn read(&mut self, setting: &Setting, errors: &mut Errors) -> bool {
        match setting.key.to_string().as_str() {
            "max_attempts" => self.max_attempts = errors.ok(setting.count("3")),
            "backoff" => self.backoff = errors.ok(setting.duration()).map(|(d, _)| d),
            "max_backoff" => self.max_backoff = errors.ok(setting.duration()).map(|(d, _)| d),
            "multiplier" => self.multiplier = errors.ok(setting.number("2.0", 1.0..=f64::INFINITY)),
            "jitter" => self.jitter = errors.ok(setting.number("0.2", 0.0..=1.0)),
            _ => return false,
        }
        true
    }

    /// This policy, with unset fields taken from `base`.
    pub(crate) fn or(self, base: Retry) -> Retry {
        Retry {
            max_attempts: self.max_attempts.or(base.max_attempts),
            backoff: self.backoff.or(base.backoff),
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
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        for bad in [
            "",
            "s",
            "30",
            "30sec",
            "1.5s",
            "-1s",
            "30 s",
            "99999999999999999999h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn suggestions() {
        let known = ["name", "queue", "lease_ttl", "max_attempts"];
        assert_eq!(suggest("lease_tll", &known), Some("lease_ttl"));
        assert_eq!(suggest("queu", &known), Some("queue"));
        assert_eq!(suggest("max_attempt", &known), Some("max_attempts"));
        assert_eq!(suggest("priority", &known), None);
    }
}
