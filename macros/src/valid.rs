//! Checking what the model is built from: the impl block, step names, the
//! signatures of steps and cleanup hooks, names, rates, resource templates
//! and flow options that need one another. Every check reports into `Errors`
//! (spanned at the offending tokens) and returns what the builder needs.

use std::collections::HashMap;

use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{
    FnArg, GenericArgument, GenericParam, Ident, ItemImpl, LitStr, PathArguments, ReturnType,
    Signature, Type,
};

use crate::case::pascal_case;
use crate::errors::Errors;
use crate::template::Template;

/// Checks the impl block itself; returns the pipeline type's name.
pub(crate) fn check_impl(item: &ItemImpl, errors: &mut Errors) -> Option<Ident> {
    if let Some((_, path, _)) = &item.trait_ {
        errors.spanned(
            path,
            "#[pipeline] goes on an inherent impl block (`impl MyPipeline { ... }`), not a trait impl",
        );
    }
    if !item.generics.params.is_empty() {
        errors.spanned(
            &item.generics,
            "#[pipeline] does not support generic impl blocks: a pipeline type is `'static` \
             and has one name",
        );
    }
    match &*item.self_ty {
        Type::Path(p) if p.qself.is_none() => {
            let last = p.path.segments.last()?;
            if !last.arguments.is_none() {
                errors.spanned(
                    &last.arguments,
                    "#[pipeline] does not support generic pipeline types",
                );
            }
            Some(last.ident.clone())
        }
        other => {
            errors.spanned(
                other,
                "#[pipeline] needs a named type, like `impl OrdersSync { ... }`",
            );
            None
        }
    }
}

/// What a step's name is to the steps before it.
pub(crate) enum StepName {
    /// A new name.
    Fresh,
    /// The name of an earlier method: rustc reports the duplicate itself.
    Repeated,
    /// A clash (reported): it differs only in case from an earlier step's,
    /// or makes the same step variant.
    Clash,
}

/// Checks step `name` against the earlier steps (`names`, by lowercase name).
pub(crate) fn check_step_name(
    ident: &Ident,
    name: &str,
    names: &HashMap<String, Ident>,
    errors: &mut Errors,
) -> StepName {
    if let Some(first) = names.get(&name.to_lowercase()) {
        if first.unraw() == name {
            return StepName::Repeated;
        }
        errors.at(
            ident.span(),
            format!(
                "step `{name}` clashes with step `{first}`: step names must differ \
                 case-insensitively (both would be the variant `{}`)",
                pascal_case(name)
            ),
        );
        return StepName::Clash;
    }
    let variant = pascal_case(name);
    if let Some(other) = names
        .values()
        .find(|i| pascal_case(&i.unraw().to_string()) == variant)
    {
        errors.at(
            ident.span(),
            format!(
                "step `{name}` clashes with step `{other}`: both would be the step \
                 variant `{variant}`; rename one"
            ),
        );
        return StepName::Clash;
    }
    StepName::Fresh
}

/// Checks a rate, `"10/s"`, with the core's grammar; the error is spanned
/// at the literal.
pub(crate) fn check_rate(lit: &LitStr) -> syn::Result<leasehold_syntax::Rate> {
    lit.value()
        .parse()
        .map_err(|why: leasehold_syntax::RateError| syn::Error::new(lit.span(), why))
}

/// Checks a name used inside Redis keys with the core's rule; the error is
/// spanned at the literal.
pub(crate) fn check_name(what: &str, lit: &LitStr) -> syn::Result<String> {
    let name = lit.value();
    match leasehold_syntax::check_name(&name) {
        Ok(()) => Ok(name),
        Err(why) => Err(syn::Error::new(
            lit.span(),
            format!("a {what} {name:?} {why}"),
        )),
    }
}

/// Checks that a resource template's text is fit for a resource name (its
/// fields are checked at run time, once filled in).
pub(crate) fn check_resource_template(template: &Template) -> syn::Result<()> {
    let forbidden = |c: char| leasehold_syntax::name::is_forbidden_char(c);
    if template.text().any(|t| t.chars().any(forbidden)) {
        return Err(syn::Error::new(
            template.lit.span(),
            "a resource name cannot contain braces, whitespace, control or format characters",
        ));
    }
    Ok(())
}

/// Flow options that need another: `resource_limit` a `resource`
/// (`resource_limit_alone`: where it was written, when there is none),
/// `limiter` a `rate` (`limiter_alone`, likewise).
pub(crate) fn check_flow_needs(
    resource_limit_alone: Option<Span>,
    limiter_alone: Option<Span>,
    errors: &mut Errors,
) {
    if let Some(span) = resource_limit_alone {
        errors.at(
            span,
            "`resource_limit` limits the holders of the job's resource: declare `resource = \"...\"` too",
        );
    }
    if let Some(span) = limiter_alone {
        errors.at(
            span,
            "`limiter` names a rate limiter: declare its `rate = \"10/s\"` too",
        );
    }
}

/// Checks what every marked method needs: `async`, plain, not generic.
/// Returns false on a problem that makes calling it impossible.
pub(crate) fn check_method(sig: &Signature, what: &str, errors: &mut Errors) -> bool {
    let mut ok = true;
    if sig.asyncness.is_none() {
        errors.spanned(sig.fn_token, format!("{what} must be `async fn`"));
        ok = false;
    }
    if let Some(c) = &sig.constness {
        errors.spanned(c, format!("{what} cannot be `const`"));
        ok = false;
    }
    if let Some(u) = &sig.unsafety {
        errors.spanned(u, format!("{what} cannot be `unsafe`"));
        ok = false;
    }
    if let Some(abi) = &sig.abi {
        errors.spanned(abi, format!("{what} cannot have an ABI"));
        ok = false;
    }
    if let Some(v) = &sig.variadic {
        errors.spanned(v, format!("{what} cannot be variadic"));
        ok = false;
    }
    for param in &sig.generics.params {
        if !matches!(param, GenericParam::Lifetime(_)) {
            errors.spanned(param, format!("{what} cannot be generic"));
            ok = false;
        }
    }
    ok
}

/// Checks `&self` and the context parameter; returns the parameters after them.
pub(crate) fn check_context<'a>(
    sig: &'a Signature,
    context: &str,
    what: &str,
    errors: &mut Errors,
) -> Option<Vec<&'a syn::PatType>> {
    let mut inputs = sig.inputs.iter();
    match inputs.next() {
        // `&self` is a reference receiver without `mut`; `&mut self` one with it
        // (syn puts the `mut` of `&mut self` in `mutability`)
        Some(FnArg::Receiver(r)) => match (&r.reference, &r.mutability) {
            (Some(_), None) if r.colon_token.is_none() => {}
            (Some(_), Some(_)) if r.colon_token.is_none() => {
                errors.spanned(
                    r,
                    format!(
                        "{what} takes `&self`, not `&mut self`: one pipeline value serves \
                         every job a worker runs"
                    ),
                );
                return None;
            }
            _ => {
                errors.spanned(r, format!("{what} takes `&self`"));
                return None;
            }
        },
        Some(FnArg::Typed(first)) => {
            errors.spanned(
                first,
                format!("{what} is a method: its first parameter must be `&self`"),
            );
            return None;
        }
        None => {
            errors.at(
                sig.paren_token.span.join(),
                format!("{what} takes `&self` and `ctx: &{context}`"),
            );
            return None;
        }
    }
    let ctx = match inputs.next() {
        Some(FnArg::Typed(ctx)) => ctx,
        _ => {
            errors.at(
                sig.paren_token.span.join(),
                format!("{what} takes the context after `&self`: `ctx: &{context}`"),
            );
            return None;
        }
    };
    if !is_ref_to(&ctx.ty, context) {
        errors.spanned(
            &ctx.ty,
            format!("the context parameter must be `&{context}`"),
        );
        return None;
    }
    Some(
        inputs
            .filter_map(|arg| match arg {
                FnArg::Typed(t) => Some(t),
                FnArg::Receiver(_) => None,
            })
            .collect(),
    )
}

/// `&Name` or `&path::to::Name`, without `mut` or generic arguments.
fn is_ref_to(ty: &Type, name: &str) -> bool {
    let Type::Reference(r) = ungroup(ty) else {
        return false;
    };
    if r.mutability.is_some() {
        return false;
    }
    match ungroup(&r.elem) {
        Type::Path(p) if p.qself.is_none() => p
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == name && s.arguments.is_none()),
        _ => false,
    }
}

pub(crate) fn ungroup(ty: &Type) -> &Type {
    match ty {
        Type::Group(g) => ungroup(&g.elem),
        Type::Paren(p) => ungroup(&p.elem),
        other => other,
    }
}

/// `T` and the span of `E` in `-> Result<T, E>` (or `-> Result<T>` for
/// aliases); otherwise the span to blame.
pub(crate) fn result_types(output: &ReturnType) -> Result<(Type, Span), Span> {
    let ty = match output {
        ReturnType::Type(_, ty) => ty,
        ReturnType::Default => return Err(Span::call_site()),
    };
    let blame = ty.span();
    let Type::Path(p) = ungroup(ty) else {
        return Err(blame);
    };
    let Some(last) = p.path.segments.last().filter(|s| s.ident == "Result") else {
        return Err(blame);
    };
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return Err(blame);
    };
    let mut types = args.args.iter().filter_map(|a| match a {
        GenericArgument::Type(t) => Some(t),
        _ => None,
    });
    let ok = types.next().ok_or(blame)?.clone();
    let error_span = types.next().map_or(blame, |e| e.span());
    Ok((ok, error_span))
}
