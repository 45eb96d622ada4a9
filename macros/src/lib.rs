//! The `#[pipeline]` attribute macro of leasehold.
//!
//! Users reach it as `leasehold::pipeline`; its documentation lives there.
//!
//! The crate is layered: `parse` reads the attribute's arguments and the impl
//! block (taking the `#[step]` / `#[cleanup]` markers off the methods), `model`
//! builds a pipeline model from them while `valid` checks each piece (with
//! `options` and `template` reading
//! setting values), and `expand` turns the model into tokens. Every layer
//! reports problems into one `Errors` collector, so one macro run reports
//! every mistake it can find.

use proc_macro::TokenStream;

mod case;
mod errors;
mod expand;
mod fields;
mod model;
mod notify;
mod options;
mod parse;
mod schedule;
#[cfg(test)]
mod settings_walk;
mod template;
mod valid;

/// Turns an inherent `impl` block of async methods into a leasehold pipeline.
///
/// Mark the steps with `#[step]`, in the order they run, and at most one
/// cleanup hook with `#[cleanup]`. The macro keeps the impl block (without the
/// markers, so the methods stay callable), and generates
///
/// - a step enum named `<Type>Step` (variants in `PascalCase` of the step
///   names, in order) implementing `leasehold::pipeline::Steps`,
///   `Display`/`FromStr` (the step's name; parsing fails with `UnknownStep`),
///   `Debug`, `Clone`, `Copy`, `Eq`, `Ord`, `Hash`, and serde's `Serialize` /
///   `Deserialize` as the name string;
/// - `impl Pipeline for Type`: the input type, name, step specs (timeouts and
///   retry policies), options, resource and idempotency keys, and `run_step`,
///   which deserialises the previous step's output from JSON, calls the step
///   and serialises its output to JSON.
///
/// # Example
///
/// ```
/// use leasehold::pipeline;
/// use leasehold::pipeline::{CleanupContext, Pipeline, StepContext, StepError};
/// use leasehold::{schemars, JsonSchema};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Debug, Serialize, Deserialize, JsonSchema)]
/// pub struct Window {
///     shop_id: String,
///     hour: u32,
/// }
///
/// #[derive(Debug, Serialize, Deserialize)]
/// pub struct Order {
///     id: u64,
///     cents: i64,
/// }
///
/// pub struct OrdersSync;
///
/// #[pipeline(
///     queue = "orders",
///     resource = "shop:{shop_id}",
///     input_key = "orders:{shop_id}:{hour}",
///     lease_ttl = "30s",
///     max_attempts = 5,
///     initial_backoff = "2s",
///     stale_lock = "release",
/// )]
/// impl OrdersSync {
///     /// Reads the window's orders.
///     #[step(timeout = "1m")]
///     async fn fetch(&self, ctx: &StepContext, input: &Window) -> Result<Vec<Order>, StepError> {
///         ctx.check_cancelled()?;
///         Ok(vec![Order { id: u64::from(input.hour), cents: 250 }])
///     }
///
///     /// Drops refunds.
///     #[step(retry(max_attempts = 1))]
///     async fn validate(&self, _ctx: &StepContext, orders: Vec<Order>) -> Result<Vec<Order>, StepError> {
///         Ok(orders.into_iter().filter(|o| o.cents > 0).collect())
///     }
///
///     /// Writes them, fenced by the lease.
///     #[step]
///     async fn load(
///         &self,
///         ctx: &StepContext,
///         input: &Window,
///         orders: Vec<Order>,
///     ) -> Result<u64, std::io::Error> {
///         let _fence = ctx.fence();
///         println!("loading {} orders of {}", orders.len(), input.shop_id);
///         Ok(orders.len() as u64)
///     }
///
///     #[cleanup]
///     async fn undo(&self, ctx: &CleanupContext, input: &Window) {
///         let _ = (ctx.last_completed_step, &input.shop_id);
///     }
/// }
///
/// assert_eq!(OrdersSync::NAME, "orders_sync");
/// assert_eq!(OrdersSyncStep::Validate.to_string(), "validate");
/// let window = Window { shop_id: "a".into(), hour: 7 };
/// assert_eq!(OrdersSync::resource_key(&window).as_deref(), Some("shop:a"));
/// ```
///
/// # Pipeline options: `#[pipeline(...)]`
///
/// All optional. Durations are strings read by `leasehold::parse_duration`,
/// the parser the `leasehold` command line uses too: `"250ms"`, `"30s"`,
/// `"1m30s"`, `"1h"`, `"2d"` (24 hours), `"PT5M"`; months, years, negative
/// and sub-millisecond durations are compile errors.
///
/// Every setting below is defined once in `leasehold_syntax::setting` (its
/// name, words, bounds and refusal), which the pipelines file and the
/// command line read with too: a value is accepted or refused alike, in the
/// same words, wherever it is written.
///
/// | option | value | default | meaning |
/// |---|---|---|---|
/// | `name` | string | the type name in `snake_case` | the pipeline's name, recorded on its jobs |
/// | `queue` | string | the name | the queue its jobs go to |
/// | `resource` | template | none | the resource the job locks, e.g. `"shop:{shop_id}"` |
/// | `input_key` | template | none | the idempotency key, e.g. `"orders:{shop_id}:{hour}"` |
/// | `lease_ttl` | duration, 1 s to 1 day | the worker's | lease time-to-live |
/// | `max_attempts` | integer ≥ 1 | `3` | attempts in all, counting the first |
/// | `initial_backoff` | duration, at most 7 days | `"1s"` | wait before the second attempt (old name: `backoff`, read until 0.3) |
/// | `max_backoff` | duration, at most 7 days | `"5m"` | upper bound of the wait |
/// | `multiplier` | number ≥ 1 | `2.0` | growth of the wait per attempt |
/// | `jitter` | number in 0..=1 | `0.2` | random spread of the wait (± this fraction) |
/// | `stale_lock` | `"hold"` or `"release"` | `"hold"` | whether a STALE job keeps its resource lock (old name: `on_stale`, read until 0.3) |
/// | `schedule(...)` | see below | none | ticks that each enqueue one job for a time window |
/// | `notify(run = [...], on = [...], timeout = "30s")` | a command (argv), events among `"job_failed"`, `"job_stale"`, `"schedule_failing"` (default: all), a duration | none | a notice hook: the command runs with the event's JSON on stdin, once per event across replicas (`leasehold::notify`) |
/// | `input_schema` | `true` or `false` | `true` | publish the input's JSON Schema, which the CLI and HTTP enqueue check every input against |
///
/// The input type's JSON Schema is published with the pipeline, so the input
/// type implements `JsonSchema`: `#[derive(JsonSchema)]` with `schemars` in
/// scope (`use leasehold::prelude::*;`, or `use leasehold::{schemars, JsonSchema};`)
/// and no other attribute; standard types (`String`, numbers, `Vec`,
/// `serde_json::Value`) have one already. An input without one is a compile
/// error at the step parameter that names it, saying what to add.
/// `input_schema = false` publishes none (for an input type that cannot have
/// one): enqueues from the CLI and HTTP then check only that the input is JSON,
/// and say in their output that it was not checked.
///
/// `schedule(cron = "30 2 * * *", zone = "Europe/Berlin", ...)` or
/// `schedule(every = "1h", ...)` makes every worker serving the pipeline
/// register the schedule on start and enqueue, once per tick and by whichever
/// replica comes first, a job for the window `[previous tick, tick)`. The cron
/// literal (5 fields, or 6 with seconds first) is checked at compile time. The
/// input type must have a `window: leasehold::schedule::Window` field (a compile error
/// at `schedule` otherwise: when it is missing, a leasehold message listing the
/// input's fields if the input derives [`InputFields`](derive@InputFields),
/// rustc's "no field `window`" if not; a leasehold message naming the type to
/// use when it has another type); the static `input` (a JSON object) fills the rest.
/// Settings: `name` (default: the pipeline's name), `cron` or `every`, `zone`
/// (IANA, default UTC), `start` / `end` (RFC 3339), `catch_up` (`"all"`,
/// `"latest"` (default), `"none"`), `catch_up_max` (≥ 1, only with `"all"`), `overlap`
/// (`"allow"` (default), `"skip"`, `"wait"`), `grace` (default `"60s"`, at most 7 days),
/// `input`, `window_offset` (a signed duration added to the window the input
/// carries, `"-1h"`: the hour before the tick's), `run_on_start` (`true`: a
/// schedule new to Redis runs its latest whole window at once).
///
/// A template is text with `{field}` placeholders over the fields of the input
/// type (`{a.b}` for nested fields, `{0}` for tuple structs; `{{` and `}}` are
/// literal braces). Each field must implement `Display`. A field the input
/// lacks is a compile error pointing at the template: with
/// `#[derive(InputFields)]` on the input, a leasehold message naming the field
/// and listing the input's fields; without it, rustc's "no field `x` on type
/// `&Input`" (the macro sees the impl block, not the input type's fields).
///
/// # Steps: `#[step]` / `#[step(...)]`
///
/// A step is an `async fn` with this shape:
///
/// ```text
/// async fn NAME(&self, ctx: &StepContext, [input: &Input,] [previous: PrevOutput]) -> Result<T, E>
/// ```
///
/// - The first step must take the job input by reference: its type defines the
///   pipeline's `Input`. Later steps may take it too (`&Input`), in any position
///   after `ctx`.
/// - A step after the first may take the previous step's output by value (at
///   most one by-value parameter; it must have the previous step's output type).
///   A step may ignore the previous output; after a step returning `()` there is
///   nothing to take.
/// - `T` (the step output) must implement `Serialize` and `DeserializeOwned`:
///   it travels to the next step, and into Redis checkpoints, as JSON.
/// - `E` must convert into `StepError` (`StepError` itself, or
///   any `std::error::Error + Send + Sync + 'static`, which becomes a retryable
///   error). `Result<T>` aliases with one argument work too.
///
/// Step options:
///
/// | option | value | meaning |
/// |---|---|---|
/// | `timeout` | duration, more than zero, at most 7 days | time limit for one run of the step |
/// | `retry(...)` | `max_attempts`, `initial_backoff` (or its old name `backoff`), `max_backoff`, `multiplier`, `jitter` | the step's own retry policy; settings left out come from the pipeline's |
///
/// # Cleanup: `#[cleanup]`
///
/// At most one `async fn NAME(&self, ctx: &CleanupContext[, input: &Input])`
/// returning nothing; it runs after a failed or cancelled attempt, or when an
/// operator resolves a STALE job.
///
/// Methods without a marker are kept as they are.
///
/// # Errors
///
/// Mistakes are compile errors pointing at the offending tokens: a step that
/// is not `async`, a missing `&self` or context parameter, a first step
/// without `&Input`, two by-value parameters, an output that does not
/// serialise, a parameter whose type differs from the previous step's output,
/// unknown options (with the list of known ones), malformed durations or
/// templates, a template field the input lacks, and more than one
/// `#[cleanup]`. When the macro reports an error it still emits the impl block
/// (and, where it can, the step enum), so code using them does not fail in a
/// cascade of unrelated errors.
#[proc_macro_attribute]
pub fn pipeline(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::pipeline(args.into(), item.into()).into()
}

/// Lists a struct's field names for `#[pipeline]`'s compile-time checks.
///
/// With `#[derive(InputFields)]` on a pipeline's input, a key template that
/// names a field the input lacks (`resource = "shop:{shop}"` over an input
/// with `shop_id`), or a scheduled pipeline whose input has no `window`
/// field, is a compile error at the template (or at `schedule`) that names
/// the field and lists the input's fields. Without it, rustc reports the
/// missing field itself ("no field `shop` on type `&Input`").
///
/// ```
/// use leasehold::prelude::*;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, JsonSchema, InputFields)]
/// pub struct Sync {
///     shop_id: String,
/// }
/// ```
#[proc_macro_derive(InputFields)]
pub fn input_fields(item: TokenStream) -> TokenStream {
    fields::derive(item.into()).into()
}
