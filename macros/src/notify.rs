//! The `notify(...)` option: a pipeline's notice hook (a command run with the
//! event's JSON on stdin when a job ends FAILED, goes STALE, or a schedule
//! starts failing), generating `Pipeline::notify`.

use std::time::Duration;

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Expr, ExprLit, Lit, LitStr};

use crate::errors::Errors;
use crate::options::{self, Setting};

/// The keys inside `notify(...)`.
const NOTIFY_KEYS: &[&str] = &["run", "on", "timeout"];
/// The events a hook can be for (`leasehold::notify::NotifyEvent`).
const EVENTS: &[&str] = &["job_failed", "job_stale", "schedule_failing"];

/// A notice hook as declared.
pub(crate) struct NotifyDecl {
    /// The command: program, then arguments.
    pub run: Vec<String>,
    /// The events, when not all of them.
    pub on: Option<Vec<String>>,
    /// How long the command may run.
    pub timeout: Option<Duration>,
}

/// The string literals of `key = ["a", "b"]`.
fn strings(s: &Setting, example: &str) -> syn::Result<Vec<LitStr>> {
    let bad = |span: &dyn quote::ToTokens| {
        syn::Error::new_spanned(
            span,
            format!("expected a list of strings, like `{} = {example}`", s.key),
        )
    };
    let syn::Meta::NameValue(nv) = &s.meta else {
        return Err(bad(&s.meta));
    };
    let Expr::Array(array) = &nv.value else {
        return Err(bad(&nv.value));
    };
    array
        .elems
        .iter()
        .map(|e| match e {
            Expr::Lit(ExprLit {
                lit: Lit::Str(l), ..
            }) => Ok(l.clone()),
            other => Err(bad(other)),
        })
        .collect()
}

/// Reads `notify(run = [...], on = [...], timeout = "30s")`.
pub(crate) fn read(setting: &Setting, errors: &mut Errors) -> Option<NotifyDecl> {
    let nested = errors.ok(setting.nested("run = [\"sh\", \"mail.sh\"]"))?;
    let mut d = NotifyDecl {
        run: Vec::new(),
        on: None,
        timeout: None,
    };
    let mut has_run = false;
    for s in options::known(nested, NOTIFY_KEYS, "notify setting", errors) {
        match s.key.to_string().as_str() {
            "run" => {
                if let Some(words) = errors.ok(strings(&s, "[\"sh\", \"mail.sh\"]")) {
                    has_run = true;
                    match words.first() {
                        Some(first) if !first.value().is_empty() => {
                            d.run = words.iter().map(LitStr::value).collect();
                        }
                        Some(first) => {
                            errors.at(first.span(), "the notice command's program is empty")
                        }
                        None => errors.at(
                            s.key.span(),
                            "`run` names the notice command: run = [\"sh\", \"mail.sh\"]",
                        ),
                    }
                }
            }
            "on" => {
                if let Some(words) = errors.ok(strings(&s, "[\"job_failed\"]")) {
                    let mut on = Vec::new();
                    for w in words {
                        if EVENTS.contains(&w.value().as_str()) {
                            on.push(w.value());
                        } else {
                            errors.at(
                                w.span(),
                                format!(
                                    "unknown event {:?}: expected \"job_failed\", \"job_stale\" or \"schedule_failing\"",
                                    w.value()
                                ),
                            );
                        }
                    }
                    d.on = Some(on);
                }
            }
            "timeout" => d.timeout = errors.ok(s.duration_of(&leasehold_syntax::setting::TIMEOUT)),
            _ => unreachable!("every known notify setting is handled"),
        }
    }
    if !has_run {
        errors.at(
            setting.key.span(),
            "`notify(...)` needs the command: notify(run = [\"sh\", \"mail.sh\"])",
        );
        return None;
    }
    Some(d)
}

/// `fn notify()`.
pub(crate) fn expand(d: &NotifyDecl) -> TokenStream {
    let run = &d.run;
    let mut chain = quote!(::leasehold::__private::core::notify::Notify::command([#(#run),*]));
    if let Some(on) = &d.on {
        let events = on.iter().map(|e| {
            let variant =
                syn::Ident::new(&crate::case::pascal_case(e), proc_macro2::Span::call_site());
            quote!(::leasehold::__private::core::notify::NotifyEvent::#variant)
        });
        chain = quote!(#chain.on([#(#events),*]));
    }
    if let Some(t) = d.timeout {
        let ms = t.as_millis() as u64;
        chain = quote!(#chain.timeout(::core::time::Duration::from_millis(#ms)));
    }
    quote! {
        fn notify() -> ::core::option::Option<::leasehold::__private::core::notify::Notify> {
            ::core::option::Option::Some(#chain)
        }
    }
}
