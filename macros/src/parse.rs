//! Syntax: the attribute's arguments, and the impl block with its `#[step]` /
//! `#[cleanup]` markers taken off the methods.

use proc_macro2::TokenStream;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Attribute, ImplItem, Item, ItemImpl, Meta, Signature, Token};

use crate::errors::Errors;

/// `key = value`, `key(...)` or `key` settings, as written.
pub(crate) type Settings = Vec<Meta>;

/// Which marker a method carries.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum MarkerKind {
    Step,
    Cleanup,
}

impl MarkerKind {
    fn of(attr: &Attribute) -> Option<MarkerKind> {
        let path = attr.path();
        if path.is_ident("step") {
            Some(MarkerKind::Step)
        } else if path.is_ident("cleanup") {
            Some(MarkerKind::Cleanup)
        } else {
            None
        }
    }
}

/// A method carrying `#[step]` or `#[cleanup]`.
pub(crate) struct Marked {
    pub kind: MarkerKind,
    /// The marker itself, for spans.
    pub attr: Attribute,
    /// The settings inside the marker's parentheses.
    pub settings: Settings,
    pub sig: Signature,
}

/// The impl block, markers removed, and the marked methods in declaration order.
pub(crate) struct Parsed {
    pub item: ItemImpl,
    pub marked: Vec<Marked>,
}

/// Parses the attribute's arguments: a comma-separated list of settings.
pub(crate) fn settings(args: TokenStream, errors: &mut Errors) -> Settings {
    let parser = Punctuated::<Meta, Token![,]>::parse_terminated;
    errors
        .ok(parser.parse2(args))
        .map(|list| list.into_iter().collect())
        .unwrap_or_default()
}

/// Parses the item `#[pipeline]` is on, which must be an impl block.
pub(crate) fn item(item: TokenStream) -> syn::Result<ItemImpl> {
    match syn::parse2::<Item>(item)? {
        Item::Impl(item) => Ok(item),
        other => Err(syn::Error::new_spanned(
            other,
            "#[pipeline] goes on an `impl` block of the pipeline type, \
             whose async methods marked #[step] are the steps",
        )),
    }
}

/// Takes the markers off the methods of `item`, recording the marked ones.
pub(crate) fn strip_markers(mut item: ItemImpl, errors: &mut Errors) -> Parsed {
    let mut marked = Vec::new();
    for impl_item in &mut item.items {
        match impl_item {
            ImplItem::Fn(method) => {
                let mut found: Option<Marked> = None;
                let attrs = std::mem::take(&mut method.attrs);
                for attr in attrs {
                    let Some(kind) = MarkerKind::of(&attr) else {
                        method.attrs.push(attr);
                        continue;
                    };
                    if let Some(first) = &found {
                        let first_name = marker_name(first.kind);
                        errors.spanned(
                            &attr,
                            if first.kind == kind {
                                format!("duplicate #[{first_name}] marker")
                            } else {
                                format!(
                                    "a method is either a #[step] or the #[cleanup] hook, not both \
                                     (it is already marked #[{first_name}])"
                                )
                            },
                        );
                        continue;
                    }
                    let settings = marker_settings(&attr, kind, errors);
                    found = Some(Marked {
                        kind,
                        attr,
                        settings,
                        sig: method.sig.clone(),
                    });
                }
                marked.extend(found);
            }
            other => {
                // A marker on anything else would be an unknown attribute to
                // rustc; say what it is for instead.
                let attrs = match other {
                    ImplItem::Const(c) => &mut c.attrs,
                    ImplItem::Type(t) => &mut t.attrs,
                    ImplItem::Macro(m) => &mut m.attrs,
                    _ => continue,
                };
                attrs.retain(|attr| match MarkerKind::of(attr) {
                    Some(kind) => {
                        errors.spanned(
                            attr,
                            format!("#[{}] goes on an `async fn` method", marker_name(kind)),
                        );
                        false
                    }
                    None => true,
                });
            }
        }
    }
    Parsed { item, marked }
}

fn marker_name(kind: MarkerKind) -> &'static str {
    match kind {
        MarkerKind::Step => "step",
        MarkerKind::Cleanup => "cleanup",
    }
}

/// The settings of `#[step(...)]`; `#[cleanup]` takes none.
fn marker_settings(attr: &Attribute, kind: MarkerKind, errors: &mut Errors) -> Settings {
    match (&attr.meta, kind) {
        (Meta::Path(_), _) => Vec::new(),
        (Meta::List(list), MarkerKind::Step) => errors
            .ok(list.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated))
            .map(|list| list.into_iter().collect())
            .unwrap_or_default(),
        (Meta::List(list), MarkerKind::Cleanup) => {
            errors.spanned(list, "#[cleanup] takes no settings");
            Vec::new()
        }
        (Meta::NameValue(nv), _) => {
            errors.spanned(
                nv,
                format!(
                    "expected #[{0}] or #[{0}(...)], not #[{0} = ...]",
                    marker_name(kind)
                ),
            );
            Vec::new()
        }
    }
}
