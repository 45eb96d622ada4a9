//! The `schedule(...)` option: reading it (a cron literal checked with the
//! runtime's parser, or an interval; zone, start, end, policies, static input)
//! and generating `Pipeline::schedules` and the check that the input type
//! carries a `window: leasehold::Window` field.

use std::time::Duration;

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::{Ident, LitStr};

use crate::errors::Errors;
use crate::options::{self, Setting};
use leasehold_syntax::setting;

/// The keys inside `schedule(...)`.
const SCHEDULE_KEYS: &[&str] = &[
    "name",
    "cron",
    "every",
    "zone",
    "start",
    "end",
    "catch_up",
    "catch_up_max",
    "overlap",
    "grace",
    "input",
    "window_offset",
    "run_on_start",
];

/// A schedule as declared.
pub(crate) struct ScheduleDecl {
    /// Where `schedule` is written (errors about the input type point here).
    pub span: Span,
    pub name: Option<String>,
    pub cron: Option<String>,
    pub every: Option<Duration>,
    pub zone: Option<String>,
    pub start: Option<String>,
    pub end: Option<String>,
    pub catch_up: Option<&'static str>,
    pub catch_up_max: Option<u32>,
    pub overlap: Option<&'static str>,
    pub grace: Option<Duration>,
    pub input: Option<String>,
    /// Added to the window a tick's input carries (ms).
    pub window_offset_ms: Option<i64>,
    pub run_on_start: Option<bool>,
}

/// Checks a cron literal as the runtime parses it: 5 or 6 fields, then croner.
fn check_cron(lit: &LitStr) -> syn::Result<String> {
    let expr = lit.value();
    let fields = expr.split_whitespace().count();
    if fields != 5 && fields != 6 {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "bad cron expression {expr:?}: it has {fields} fields; write 5 (minute hour day month weekday) or 6 (second first)"
            ),
        ));
    }
    <croner::Cron as std::str::FromStr>::from_str(&expr)
        .map_err(|e| syn::Error::new(lit.span(), format!("bad cron expression {expr:?}: {e}")))?;
    Ok(expr)
}

/// Reads `schedule(...)`.
pub(crate) fn read(setting: &Setting, errors: &mut Errors) -> Option<ScheduleDecl> {
    let nested = errors.ok(setting.nested("cron = \"0 2 * * *\", zone = \"UTC\""))?;
    let mut d = ScheduleDecl {
        span: setting.key.span(),
        name: None,
        cron: None,
        every: None,
        zone: None,
        start: None,
        end: None,
        catch_up: None,
        catch_up_max: None,
        overlap: None,
        grace: None,
        input: None,
        window_offset_ms: None,
        run_on_start: None,
    };
    let mut catch_up_max_at = None;
    for s in options::known(nested, SCHEDULE_KEYS, "schedule setting", errors) {
        match s.key.to_string().as_str() {
            "name" => d.name = errors.ok(s.string("\"nightly\"")).map(|l| l.value()),
            "cron" => {
                d.cron = errors
                    .ok(s.string("\"30 2 * * *\""))
                    .and_then(|l| errors.ok(check_cron(&l)))
            }
            "every" => d.every = errors.ok(s.duration_of(&setting::EVERY)),
            "zone" => d.zone = errors.ok(s.string("\"Europe/Berlin\"")).map(|l| l.value()),
            "start" => {
                d.start = errors
                    .ok(s.string("\"2026-01-01T00:00:00Z\""))
                    .map(|l| l.value())
            }
            "end" => {
                d.end = errors
                    .ok(s.string("\"2027-01-01T00:00:00Z\""))
                    .map(|l| l.value())
            }
            "catch_up" => d.catch_up = errors.ok(s.word_of(&setting::CATCH_UP)),
            "catch_up_max" => {
                d.catch_up_max = errors.ok(s.count_of(&setting::CATCH_UP_MAX, "24"));
                catch_up_max_at = Some(s.key.span());
            }
            "overlap" => d.overlap = errors.ok(s.word_of(&setting::OVERLAP)),
            "grace" => d.grace = errors.ok(s.duration_of(&setting::SCHEDULE_GRACE)),
            "input" => {
                d.input = errors
                    .ok(s.string("r#\"{\"table\": \"orders\"}\"#"))
                    .map(|l| l.value())
            }
            "window_offset" => {
                d.window_offset_ms = errors.ok(s.string("\"-1h\"")).and_then(|l| {
                    errors.ok(
                        leasehold_syntax::parse_offset_ms(&l.value()).map_err(|why| {
                            syn::Error::new(
                                l.span(),
                                format!("bad window offset {:?}: {why}", l.value()),
                            )
                        }),
                    )
                })
            }
            "run_on_start" => d.run_on_start = errors.ok(s.boolean("true")),
            _ => unreachable!("every known schedule setting is handled"),
        }
    }
    match (&d.cron, &d.every) {
        (Some(_), Some(_)) => errors.at(d.span, "a schedule has `cron` or `every`, not both"),
        (None, None) if errors.is_empty() => errors.at(
            d.span,
            "a schedule needs `cron = \"...\"` or `every = \"...\"`",
        ),
        _ => {}
    }
    if let Some(at) = catch_up_max_at.filter(|_| d.catch_up != Some("all")) {
        errors.at(at, setting::CATCH_UP_MAX_ALONE);
    }
    Some(d)
}

/// `fn schedules()` and the compile-time check that `input` has a window.
pub(crate) fn expand(d: &ScheduleDecl, pipeline_name: &str, input: &syn::Type) -> TokenStream {
    let name = d.name.clone().unwrap_or_else(|| pipeline_name.to_owned());
    let mut chain = match (&d.cron, d.every) {
        (Some(expr), _) => quote!(::leasehold::__private::core::Schedule::cron(#name, #expr)?),
        (None, Some(every)) => {
            let ms = every.as_millis() as u64;
            quote!(::leasehold::__private::core::Schedule::every(#name, ::core::time::Duration::from_millis(#ms))?)
        }
        (None, None) => return TokenStream::new(),
    };
    if let Some(zone) = &d.zone {
        chain = quote!(#chain.in_zone(#zone)?);
    }
    if let Some(start) = &d.start {
        chain = quote!(#chain.starting_at(#start)?);
    }
    if let Some(end) = &d.end {
        chain = quote!(#chain.ending_at(#end)?);
    }
    match d.catch_up {
        Some("all") => {
            let max = d.catch_up_max.unwrap_or(::core::primitive::u32::MAX);
            chain =
                quote!(#chain.catch_up(::leasehold::__private::core::CatchUp::All { max: #max }));
        }
        Some("none") => {
            chain = quote!(#chain.catch_up(::leasehold::__private::core::CatchUp::None))
        }
        Some(_) => chain = quote!(#chain.catch_up(::leasehold::__private::core::CatchUp::Latest)),
        None => {}
    }
    match d.overlap {
        Some("skip") => chain = quote!(#chain.overlap(::leasehold::__private::core::Overlap::Skip)),
        Some("wait") => chain = quote!(#chain.overlap(::leasehold::__private::core::Overlap::Wait)),
        _ => {}
    }
    if let Some(grace) = d.grace {
        let ms = grace.as_millis() as u64;
        chain = quote!(#chain.grace(::core::time::Duration::from_millis(#ms)));
    }
    if let Some(json) = &d.input {
        chain = quote!(#chain.input_json(#json)?);
    }
    if let Some(ms) = d.window_offset_ms {
        chain = quote!(#chain.window_offset_ms(#ms)?);
    }
    if let Some(run) = d.run_on_start {
        chain = quote!(#chain.run_on_start(#run));
    }
    // A scheduled pipeline's input carries the tick's window. The field name
    // belongs to this expansion (rustc names the missing field and lists the
    // input's fields without rewriting `schedule`); its type is checked by a
    // bound whose message says what to write.
    // With the input's field list (`#[derive(InputFields)]`), a missing
    // `window` is a leasehold message instead.
    let window = Ident::new("window", Span::mixed_site().located_at(d.span));
    let input_ident = Ident::new("input", d.span);
    let message = quote! {
        ::leasehold::__private::fields::missing_window(
            ::leasehold::__private::fields::Probe::<#input>::TYPE_NAME,
            ::leasehold::__private::fields::Probe::<#input>::FIELDS,
        )
    };
    let checked = crate::fields::checked_input(input, &input_ident, message, d.span);
    let check = quote_spanned! {d.span=>
        #[allow(dead_code)]
        fn __leasehold_schedule_window(#input_ident: &#input) {
            let #input_ident = #checked;
            ::leasehold::__private::schedule_window(&#input_ident.#window);
        }
    };
    quote! {
        fn schedules() -> ::core::result::Result<
            ::std::vec::Vec<::leasehold::__private::core::Schedule>,
            ::leasehold::__private::core::ScheduleError,
        > {
            #check
            ::core::result::Result::Ok(::std::vec![#chain])
        }
    }
}
