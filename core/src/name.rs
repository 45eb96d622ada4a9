//! Names used inside Redis keys (queues, pipelines, resources, workers,
//! steps, schedules): the rule is `leasehold_syntax::name`'s, which the
//! `#[pipeline]` macro checks at compile time too; here its refusals become
//! the core's [`Error::InvalidArgument`].

use crate::error::Error;

pub use leasehold_syntax::name::{is_forbidden_char, MAX_NAME_BYTES};

/// Checks a queue, pipeline, resource, worker or step name: 1 to
/// [`MAX_NAME_BYTES`] bytes, no braces, whitespace, control or format
/// characters. `what` names it in the error.
pub(crate) fn check_name(what: &str, name: &str) -> Result<(), Error> {
    leasehold_syntax::check_name(name)
        .map_err(|why| Error::InvalidArgument(format!("{what} {name:?} {why}")))
}
