//! One place to collect every error of a macro run.

use std::fmt::Display;

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;

/// Errors found so far, combined into one `syn::Error`.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    /// Adds an error.
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    /// Adds an error at `span`.
    pub(crate) fn at(&mut self, span: Span, message: impl Display) {
        self.push(syn::Error::new(span, message));
    }

    /// Adds an error spanning `tokens`.
    pub(crate) fn spanned(&mut self, tokens: impl ToTokens, message: impl Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// Keeps the error of `result`, if any, and its value otherwise.
    pub(crate) fn ok<T>(&mut self, result: syn::Result<T>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(error) => {
                self.push(error);
                None
            }
        }
    }

    /// True when nothing went wrong.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Every message, in order (for the crate's tests).
    #[cfg(test)]
    pub(crate) fn messages(&self) -> Vec<String> {
        self.0
            .iter()
            .flat_map(|e| e.clone().into_iter().map(|e| e.to_string()))
            .collect()
    }

    /// A `compile_error!` per error.
    pub(crate) fn to_compile_errors(&self) -> TokenStream {
        self.0
            .as_ref()
            .map(syn::Error::to_compile_error)
            .unwrap_or_default()
    }
}
