//! `#[derive(InputFields)]`: a struct's field names as constants, which the
//! checks `#[pipeline]` generates over key templates and a schedule's
//! `window` read (a leasehold message naming the field and the fields there
//! are, instead of rustc's "no field").

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::{Data, DeriveInput, Fields, Ident};

/// The derive: `impl InputFields` with the type's name and its fields.
pub(crate) fn derive(item: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(item) {
        Ok(input) => input,
        Err(error) => return error.to_compile_error(),
    };
    let fields: Vec<String> = match &input.data {
        Data::Struct(data) => match &data.fields {
            Fields::Named(named) => named
                .named
                .iter()
                .filter_map(|f| f.ident.as_ref().map(|i| i.unraw().to_string()))
                .collect(),
            Fields::Unnamed(unnamed) => (0..unnamed.unnamed.len()).map(|i| i.to_string()).collect(),
            Fields::Unit => Vec::new(),
        },
        Data::Enum(data) => {
            return syn::Error::new(
                data.enum_token.span,
                "`InputFields` lists the fields of a struct; a template or schedule over an enum \
                 input has none to name",
            )
            .to_compile_error()
        }
        Data::Union(data) => {
            return syn::Error::new(
                data.union_token.span,
                "`InputFields` lists the fields of a struct, not a union",
            )
            .to_compile_error()
        }
    };
    let ident = &input.ident;
    let type_name = ident.unraw().to_string();
    let (impl_generics, type_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        #[automatically_derived]
        impl #impl_generics ::leasehold::__private::fields::InputFields for #ident #type_generics #where_clause {
            const TYPE_NAME: &'static str = #type_name;
            const FIELDS: &'static [&'static str] = &[#(#fields),*];
        }
    }
}

/// `input` (a `&Input`) once the constant `message` built from the input's
/// field list is empty: when it is not, its evaluation fails with the
/// message at `span`, and the value's type becomes an error, so rustc adds
/// no "no field" of its own at the accesses that follow.
pub(crate) fn checked_input(
    input_ty: &syn::Type,
    input: &Ident,
    message: TokenStream,
    span: Span,
) -> TokenStream {
    quote_spanned! {span=>
        {
            #[allow(unused_imports)]
            use ::leasehold::__private::fields::NoFields as _;
            const MESSAGE: ::leasehold::__private::fields::Message = #message;
            const OK: bool = match MESSAGE.text() {
                ::core::option::Option::Some(text) => ::core::panic!("{}", text),
                ::core::option::Option::None => true,
            };
            <#input_ty as ::leasehold::__private::fields::Pass<OK>>::pass(#input)
        }
    }
}
