//! The strings of leasehold's settings, each read by one parser that the
//! `#[pipeline]` macro, the core library and the `leasehold` command line
//! share, so they accept and refuse the same text: [`duration`]s (`"30s"`),
//! [`name`]s used inside Redis keys (queues, pipelines, resources), [`rate`]s
//! (`"10/s"`) and key [`template`]s (`"shop:{shop_id}"`); and every
//! pipeline [`setting`]: its name, aliases, words or bounds and refusal. A crate of its own
//! because the macro crate cannot depend on the core; it depends on nothing
//! of leasehold's.
//!
//! Errors are plain values with a `Display` that says what to write; the
//! macro reports them at the literal, the core as its `InvalidArgument`.

pub mod duration;
pub mod name;
pub mod rate;
pub mod setting;
pub mod template;

pub use duration::{parse_duration, parse_offset_ms, DurationError};
pub use name::{check_name, NameError, MAX_NAME_BYTES};
pub use rate::{Rate, RateError};
pub use template::{parse_template, Member, Part, TemplateError};
