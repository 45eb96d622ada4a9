//! The checks of a pipelines file that need the pipeline whole: key templates
//! against the input schema, and a dry run of each schedule's first tick
//! through the same contract every enqueue path applies.

use leasehold_core::process::DeclaredPipeline;
use leasehold_core::{Contract, EnqueueOptions, KeyTemplate, Schedule};
use serde_json::Value;

/// Why template `text` can never render for an input `schema` accepts, if
/// so (see [`fields_against_schema`]).
pub(super) fn template_against_schema(text: &str, schema: &Value) -> Option<String> {
    let template = KeyTemplate::parse(text).ok()?;
    fields_against_schema(template.fields().map(<[String]>::to_vec), schema)
}

/// Why one of `fields` (paths into the input) can never be filled from an
/// input `schema` accepts, if so: a field the schema forbids
/// (`additionalProperties = false`), or one it makes an object, an array or null.
pub(super) fn fields_against_schema(
    fields: impl IntoIterator<Item = Vec<String>>,
    schema: &Value,
) -> Option<String> {
    for path in fields {
        let mut at = schema;
        for (depth, member) in path.iter().enumerate() {
            let properties = at.get("properties").and_then(Value::as_object);
            match properties.and_then(|p| p.get(member)) {
                Some(sub) => at = sub,
                None if at.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    let known: Vec<&str> = properties
                        .map(|p| p.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    return Some(format!(
                        "it names field `{}`, which the input schema forbids (additionalProperties = false; its fields: {})",
                        path[..=depth].join("."),
                        if known.is_empty() { "none".to_owned() } else { known.join(", ") }
                    ));
                }
                None => return None,
            }
        }
        if let Some(kind @ ("object" | "array" | "null")) = at.get("type").and_then(Value::as_str) {
            return Some(format!(
                "field `{}` is of type {kind} in the input schema: a template needs a string, a number or a boolean",
                path.join(".")
            ));
        }
    }
    None
}

/// The input of `schedule`'s first tick: its window from now (or from its
/// start), the static part and `window`; `None` for a schedule that never ticks.
pub(super) fn first_tick_input(schedule: &Schedule) -> Option<Value> {
    let cursor = schedule.initial_cursor(jiff::Timestamp::now());
    schedule
        .window_from(cursor)
        .map(|window| schedule.input_for(&window))
}

/// `input` (a tick's) through `pipeline`'s contract (schema, resource and
/// input-key templates), as an enqueue would take it.
pub(super) fn enqueue_dry(
    pipeline: &DeclaredPipeline,
    schedule: &Schedule,
    input: &Value,
) -> Result<(), String> {
    let contract = Contract::new(pipeline.spec()).map_err(|e| e.to_string())?;
    contract
        .job(&input.to_string(), &EnqueueOptions::new())
        .map(|_| ())
        .map_err(|e| {
            format!(
                "schedule {:?} can never enqueue: the input of its first tick ({input}) is refused: {e}",
                schedule.name()
            )
        })
}
