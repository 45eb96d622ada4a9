//! What the code `#[pipeline]` generates reaches for: re-exports under
//! paths that do not depend on the user's imports, and the functions and
//! traits whose bounds and `#[diagnostic::on_unimplemented]` messages turn a
//! misuse into a compile error at the user's tokens. Not a public API
//! (`leasehold_core::__private`, re-exported as `leasehold::__private`).

pub use serde;
pub use serde_json;

/// A pipeline's input schema: the generated `input_schema()` calls
/// [`schema::of`], whose bound reports an input type without a JSON Schema
/// at the step parameter that names it, saying what to add.
pub mod schema {
    /// A type whose JSON Schema a pipeline publishes.
    #[diagnostic::on_unimplemented(
        message = "the pipeline's input `{Self}` has no JSON Schema to publish",
        label = "add `#[derive(JsonSchema)]` to `{Self}`",
        note = "with `use leasehold::prelude::*;` (or `use leasehold::{{schemars, JsonSchema}};`) in scope, `#[derive(Serialize, Deserialize, JsonSchema)]` is all it takes; the CLI and HTTP enqueue check every input against the schema",
        note = "a pipeline whose input cannot have a schema says `#[pipeline(input_schema = false)]`: its enqueues from the CLI and HTTP are then not checked, and say so"
    )]
    pub trait InputSchema {
        /// The JSON Schema, as JSON.
        fn input_schema() -> Option<serde_json::Value>;
    }

    impl<T: schemars::JsonSchema> InputSchema for T {
        fn input_schema() -> Option<serde_json::Value> {
            serde_json::to_value(schemars::schema_for!(T)).ok()
        }
    }

    /// The input schema of `T`.
    pub fn of<T: InputSchema>() -> Option<serde_json::Value> {
        T::input_schema()
    }
}

use crate::pipeline::StepError;

/// Serialises a step's output. The bound also checks, at the output type
/// the macro names, that the output can be read back by the next step.
pub fn encode_output<T: serde::Serialize + serde::de::DeserializeOwned>(
    step: &str,
    output: &T,
) -> Result<String, StepError> {
    serde_json::to_string(output).map_err(|e| {
        StepError::permanent(format!("step `{step}`: cannot serialise its output: {e}"))
            .with_kind("output")
    })
}

/// Reads the previous step's output for step `step`.
pub fn decode_previous<T: serde::de::DeserializeOwned>(
    step: &str,
    previous: Option<&str>,
) -> Result<T, StepError> {
    let Some(json) = previous else {
        return Err(StepError::permanent(format!(
            "step `{step}` takes the previous step's output, but none was given"
        ))
        .with_kind("output"));
    };
    serde_json::from_str(json).map_err(|e| {
        StepError::permanent(format!(
            "step `{step}`: cannot read the previous step's output: {e}"
        ))
        .with_kind("output")
    })
}

/// Implemented only by `Output` itself: checks, at a step's by-value
/// parameter, that it has the previous step's output type.
#[diagnostic::on_unimplemented(
    message = "this step takes `{Self}`, but the previous step's output is `{Output}`",
    label = "expected `{Output}`, the previous step's output",
    note = "a step may take the previous step's output by value, with the type that step returns as `Ok`"
)]
pub trait PreviousOutput<Output> {}

impl<T> PreviousOutput<T> for T {}

/// Fails to compile unless `Param` is `Output`.
pub fn check_previous_output<Output, Param: PreviousOutput<Output>>() {}

/// Implemented only by [`Window`](crate::Window): checks that a scheduled
/// pipeline's `window` field has the type the scheduler fills in.
#[diagnostic::on_unimplemented(
    message = "the `window` field of a scheduled pipeline's input is `{Self}`, not `leasehold::schedule::Window`",
    label = "the scheduler fills this field with the tick's window",
    note = "declare it as `window: leasehold::schedule::Window` (or `Window` from `leasehold::prelude`)"
)]
pub trait ScheduleWindow {}

impl ScheduleWindow for crate::Window {}

/// The `window` field of a scheduled pipeline's input, checked to be a
/// [`Window`](crate::Window).
pub fn schedule_window<W: ScheduleWindow>(_window: &W) {}

/// Implemented only by `Input` itself: checks, at a step's `&Input`
/// parameter, that it is the pipeline's input type, and hands it over.
#[diagnostic::on_unimplemented(
    message = "this parameter takes `&{Self}`, but the pipeline's input is `{Input}`",
    label = "expected `&{Input}`, the job input",
    note = "the first step's `&Input` parameter sets the pipeline's input type; later steps and the cleanup hook may take it too"
)]
pub trait JobInput<Input> {
    /// The input, as this type (which it is).
    fn cast(input: &Input) -> &Self;
}

impl<T> JobInput<T> for T {
    fn cast(input: &T) -> &T {
        input
    }
}

/// A step's future, checked (at the step's name) to be `Send`: workers
/// run steps on a multi-threaded runtime.
pub fn send_step<F: std::future::Future + Send>(future: F) -> F {
    future
}

/// A step's error, as a [`StepError`].
pub fn into_step_error<E: Into<StepError>>(error: E) -> StepError {
    error.into()
}

/// `run_step` called with an index past the last step (defined beside
/// [`StepError`], where declared pipelines use it too).
pub use crate::pipeline::no_such_step;

/// The field names of a pipeline's input, for the checks `#[pipeline]`
/// generates over its key templates and its schedule's `window` field.
///
/// `#[derive(InputFields)]` lists a type's fields ([`InputFields`]); for an
/// input with the list, every field a template names (and the `window` of a
/// scheduled pipeline) is checked in a constant, which fails with a leasehold
/// message naming the field and the fields there are. The field accesses
/// then go through [`Pass`] over that constant, so a failed check leaves
/// them untyped and rustc adds no "no field" error of its own. An input
/// without the list ([`Probe`] falls back to [`NoFields`]) is not checked
/// here: rustc reports a missing field.
pub mod fields {
    use std::marker::PhantomData;

    /// The fields of a type, as `#[derive(InputFields)]` lists them.
    pub trait InputFields {
        /// The type's name, as written at its definition.
        const TYPE_NAME: &'static str;
        /// Its field names (`"0"`, `"1"`, ... for a tuple struct), in order.
        const FIELDS: &'static [&'static str];
    }

    /// `Probe::<T>::FIELDS`: `Some` of `T`'s fields when `T` implements
    /// [`InputFields`] (the inherent constant), `None` otherwise (the
    /// [`NoFields`] one, with that trait in scope).
    pub struct Probe<T: ?Sized>(PhantomData<T>);

    impl<T: ?Sized + InputFields> Probe<T> {
        /// `T`'s name.
        pub const TYPE_NAME: &'static str = T::TYPE_NAME;
        /// `T`'s fields.
        pub const FIELDS: Option<&'static [&'static str]> = Some(T::FIELDS);
    }

    /// The fallback of [`Probe`] for a type without a field list.
    pub trait NoFields {
        /// No name.
        const TYPE_NAME: &'static str = "";
        /// No field list: nothing to check.
        const FIELDS: Option<&'static [&'static str]> = None;
    }

    impl<T: ?Sized> NoFields for Probe<T> {}

    /// Implemented for `OK == true` only: `<T as Pass<{OK}>>::pass(input)`
    /// is `input` when the check constant `OK` evaluates, and an error type
    /// (no cascade of errors) when it fails.
    pub trait Pass<const OK: bool> {
        /// `Self`.
        type Out: ?Sized;
        /// The value itself.
        fn pass(&self) -> &Self::Out;
    }

    impl<T: ?Sized> Pass<true> for T {
        type Out = T;
        fn pass(&self) -> &T {
            self
        }
    }

    /// Room for a message; a longer one ends in `...`.
    const ROOM: usize = 1024;

    /// A message built at compile time (empty: nothing to report).
    pub struct Message {
        bytes: [u8; ROOM],
        len: usize,
    }

    impl Message {
        const fn new() -> Self {
            Message {
                bytes: [0; ROOM],
                len: 0,
            }
        }

        const fn push(mut self, text: &str) -> Self {
            let text = text.as_bytes();
            let mut i = 0;
            while i < text.len() {
                if self.len == ROOM {
                    // Cut at a character boundary, then mark the cut.
                    while self.len > 0 && (self.bytes[self.len - 1] & 0xC0) == 0x80 {
                        self.len -= 1;
                    }
                    if self.len > 0 && self.bytes[self.len - 1] >= 0xC0 {
                        self.len -= 1;
                    }
                    self.len = if self.len > ROOM - 3 {
                        ROOM - 3
                    } else {
                        self.len
                    };
                    self.bytes[self.len] = b'.';
                    self.bytes[self.len + 1] = b'.';
                    self.bytes[self.len + 2] = b'.';
                    self.len += 3;
                    return self;
                }
                self.bytes[self.len] = text[i];
                self.len += 1;
                i += 1;
            }
            self
        }

        /// The message, or `None` when there is nothing to report.
        pub const fn text(&self) -> Option<&str> {
            if self.len == 0 {
                return None;
            }
            let (head, _) = self.bytes.split_at(self.len);
            match std::str::from_utf8(head) {
                Ok(text) => Some(text),
                Err(_) => Some("leasehold: a field check failed"),
            }
        }
    }

    const fn same(a: &str, b: &str) -> bool {
        let (a, b) = (a.as_bytes(), b.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        let mut i = 0;
        while i < a.len() {
            if a[i] != b[i] {
                return false;
            }
            i += 1;
        }
        true
    }

    const fn contains(fields: &[&str], name: &str) -> bool {
        let mut i = 0;
        while i < fields.len() {
            if same(fields[i], name) {
                return true;
            }
            i += 1;
        }
        false
    }

    /// The fields of `type_name` as "`a`, `b`" (or "none").
    const fn list(mut message: Message, fields: &[&str]) -> Message {
        if fields.is_empty() {
            return message.push("none");
        }
        let mut i = 0;
        while i < fields.len() {
            if i > 0 {
                message = message.push(", ");
            }
            message = message.push("`").push(fields[i]).push("`");
            i += 1;
        }
        message
    }

    /// The first of `wanted` that `fields` lacks, as a message naming the
    /// `template` it comes from (`"shop:{shop_id}"`) and the type's fields;
    /// empty when every one is there or there is no field list.
    pub const fn missing_template_field(
        type_name: &str,
        fields: Option<&[&str]>,
        template: &str,
        wanted: &[&str],
    ) -> Message {
        let Some(fields) = fields else {
            return Message::new();
        };
        let mut i = 0;
        while i < wanted.len() {
            if !contains(fields, wanted[i]) {
                let message = Message::new()
                    .push("leasehold: the template \"")
                    .push(template)
                    .push("\" names the field `")
                    .push(wanted[i])
                    .push("`, which the pipeline's input `")
                    .push(type_name)
                    .push("` does not have; its fields are ");
                return list(message, fields);
            }
            i += 1;
        }
        Message::new()
    }

    /// A message when `fields` has no `window`; empty when it has one or
    /// there is no field list.
    pub const fn missing_window(type_name: &str, fields: Option<&[&str]>) -> Message {
        let Some(fields) = fields else {
            return Message::new();
        };
        if contains(fields, "window") {
            return Message::new();
        }
        let message = Message::new()
            .push("leasehold: a scheduled pipeline's input carries the tick's window, and `")
            .push(type_name)
            .push("` has no `window` field (its fields are ");
        list(message, fields).push(
            "); add `window: leasehold::schedule::Window`, which the scheduler fills with the window [previous tick, tick)",
        )
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn names_the_missing_field_and_the_fields_there_are() {
            let fields: &[&str] = &["tenant", "window"];
            let m = missing_template_field(
                "Input",
                Some(fields),
                "{tenant}:{windw}",
                &["tenant", "windw"],
            );
            assert_eq!(
                m.text(),
                Some("leasehold: the template \"{tenant}:{windw}\" names the field `windw`, which the pipeline's input `Input` does not have; its fields are `tenant`, `window`")
            );
            assert_eq!(
                missing_template_field("Input", Some(fields), "{tenant}", &["tenant"]).text(),
                None
            );
            assert_eq!(
                missing_template_field("Input", None, "{x}", &["x"]).text(),
                None
            );
            assert_eq!(missing_window("Input", Some(fields)).text(), None);
            assert!(missing_window("Tick", Some(&["table"])).text().is_some_and(
                |t| t.contains("`Tick` has no `window` field (its fields are `table`)")
            ));
        }

        #[test]
        fn a_long_message_is_cut_at_a_character_boundary() {
            let many = ["é_long_field_name_é"; 100];
            let m = missing_template_field("T", Some(&many), "{x}", &["x"]);
            let text = m.text().expect("a message");
            assert!(text.ends_with("..."), "{text}");
            assert!(text.len() <= ROOM);
        }
    }
}
