//! The wire: everything that crosses to Redis and back. Key names, the script
//! registry (the script list, written once: `scripts.rs`; the transition
//! table as Lua: `moves.rs`), one argument builder and one reply reader per
//! script (`ops/<script>.rs`), the one encoding of a new job (`new_job.rs`),
//! the decoding of refusals, and the reading of script replies.
//!
//! A holder operation (start, finish, release) and a lease exist on the wire
//! once: as part of a `settle` call (`holder.rs`, `lease.rs`); a checkpoint is
//! an append beside it (`append.rs`). The single-operation entry points of
//! [`crate::Queue`] are settle calls of one.

pub(crate) mod append;
pub(crate) mod args;
pub(crate) mod call;
pub(crate) mod holder;
pub mod keys;
pub(crate) mod lease;
pub(crate) mod moves;
pub(crate) mod new_job;
pub(crate) mod ops;
pub(crate) mod refusal;
pub(crate) mod reply;
pub(crate) mod scripts;

pub use scripts::{library_source, script_names, script_source};
