//! Deferred tools: tools a turn rarely needs (`cron`, the sub-agent and session tools,
//! `web_search`, `message`, `grep`, `find`, `apply_patch`) are
//! offered in short form — their name, one line and an open schema — so every request does
//! not pay for schemas of several kilobytes. A call of one in short form whose arguments do
//! not fit the full schema does nothing but answer with the tool's full description and schema
//! (a successful result, never a failed action); one whose arguments fit (a model that knows
//! the tool) runs. Either way the session then remembers the tool as loaded
//! (`SessionMeta::loaded_tools`), and its requests carry the full schema until the next reset.

use clawless_base::model::ToolSpec;
use serde_json::{Value, json};

use crate::turn_service::prompt_fit::first_sentence;

/// What a short form adds to the tool's first sentence.
const SHORT_FORM_HINT: &str = "Call once for its schema.";

/// `full` in short form: its one-line summary (the prompt's, when one that short exists,
/// else its description's first sentence), the hint, and a schema that takes any object.
pub(crate) fn short_form(full: &ToolSpec) -> ToolSpec {
    let summary = clawless_core::system_prompt::core_tool_summary(&full.name)
        .filter(|summary| summary.len() <= 80)
        .map_or_else(
            || first_sentence(&full.description).to_owned(),
            |summary| format!("{summary}."),
        );
    ToolSpec {
        name: full.name.clone(),
        description: format!("{summary} {SHORT_FORM_HINT}"),
        input_schema: json!({"type": "object"}),
    }
}

/// The result of a call made in short form: the full description and schema, and what to
/// do next. Nothing was run.
pub(crate) fn schema_reply(full: &ToolSpec) -> String {
    let schema = serde_json::to_string(&full.input_schema).unwrap_or_default();
    format!(
        "Nothing was done yet: {name} was offered in short form. Its description and parameters \
         (now also in your tool list):\n{description}\nInput schema: {schema}\nCall {name} \
         again with these parameters.",
        name = full.name,
        description = full.description.trim(),
    )
}

/// Whether `input` fits `schema`, in the subset of JSON Schema the tools' schemas use (`type`,
/// `enum`, `required`, `properties`, `additionalProperties: false`, `items`, `minimum`,
/// `maximum`); `Err` names the first misfit.
pub(crate) fn fits_schema(input: &Value, schema: &Value) -> Result<(), String> {
    fits_at(input, schema, "input")
}

fn fits_at(value: &Value, schema: &Value, path: &str) -> Result<(), String> {
    if let Some(kind) = schema.get("type") {
        let kinds: Vec<&str> = match kind {
            Value::String(one) => vec![one.as_str()],
            Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !kinds.is_empty() && !kinds.iter().any(|kind| has_type(value, kind)) {
            return Err(format!("{path} is not {}", kinds.join(" or ")));
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        return Err(format!(
            "{path} is not one of {}",
            Value::Array(allowed.clone())
        ));
    }
    if let Some(number) = value.as_f64() {
        let below = schema
            .get("minimum")
            .and_then(Value::as_f64)
            .is_some_and(|min| number < min);
        let above = schema
            .get("maximum")
            .and_then(Value::as_f64)
            .is_some_and(|max| number > max);
        if below || above {
            return Err(format!("{path} is out of range"));
        }
    }
    if let Value::Object(fields) = value {
        fits_object(fields, schema, path)?;
    }
    if let (Value::Array(items), Some(item_schema)) = (value, schema.get("items")) {
        for (index, item) in items.iter().enumerate() {
            fits_at(item, item_schema, &format!("{path}[{index}]"))?;
        }
    }
    Ok(())
}

fn fits_object(
    fields: &serde_json::Map<String, Value>, schema: &Value, path: &str,
) -> Result<(), String> {
    let properties = schema.get("properties").and_then(Value::as_object);
    for required in schema["required"].as_array().into_iter().flatten() {
        if let Some(name) = required.as_str()
            && !fields.contains_key(name)
        {
            return Err(format!("{path}.{name} is missing"));
        }
    }
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    for (name, field) in fields {
        match properties.and_then(|properties| properties.get(name)) {
            Some(field_schema) => fits_at(field, field_schema, &format!("{path}.{name}"))?,
            None if closed => return Err(format!("{path}.{name} is not a parameter")),
            None => {}
        }
    }
    Ok(())
}

fn has_type(value: &Value, kind: &str) -> bool {
    match kind {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ToolSpec {
        ToolSpec {
            name: "cron".to_owned(),
            description: "Schedule jobs. Use it for reminders.\n\nActions: add, list".to_owned(),
            input_schema: json!({"type": "object", "properties": {"action": {"type": "string"}}}),
        }
    }

    #[test]
    fn a_short_form_uses_the_prompts_short_summary() {
        let mut full = spec();
        full.name = "sessions_list".to_owned();
        assert_eq!(
            short_form(&full).description,
            "List other sessions. Call once for its schema."
        );
    }

    #[test]
    fn the_short_form_keeps_the_first_sentence_and_takes_any_object() {
        let short = short_form(&spec());
        assert_eq!(short.name, "cron");
        assert_eq!(
            short.description,
            "Schedule jobs. Call once for its schema."
        );
        assert_eq!(short.input_schema, json!({"type": "object"}));
    }

    #[test]
    fn arguments_fit_a_schema_only_when_every_rule_holds() {
        let schema = json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["add", "list"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": 10},
                "tags": {"type": "array", "items": {"type": "string"}},
                "job": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                    "required": ["name"],
                    "additionalProperties": false
                }
            },
            "required": ["action"]
        });
        let fits = |input: Value| fits_schema(&input, &schema);
        assert!(fits(json!({"action": "list"})).is_ok());
        assert!(
            fits(json!({"action": "add", "job": {"name": "x"}, "limit": 3, "tags": ["a"]})).is_ok()
        );
        assert!(
            fits(json!({"action": "list", "other": 1})).is_ok(),
            "open at the top"
        );
        for misfit in [
            json!({}),
            json!({"action": "remove"}),
            json!({"action": 3}),
            json!({"action": "list", "limit": 0}),
            json!({"action": "list", "limit": 2.5}),
            json!({"action": "list", "tags": [1]}),
            json!({"action": "add", "job": {}}),
            json!({"action": "add", "job": {"name": "x", "when": "now"}}),
            json!("list"),
        ] {
            assert!(fits(misfit.clone()).is_err(), "{misfit}");
        }
    }

    #[test]
    fn the_schema_reply_carries_the_whole_description_and_schema() {
        let reply = schema_reply(&spec());
        assert!(reply.contains("Actions: add, list"), "{reply}");
        assert!(reply.contains(r#""action":{"type":"string"}"#), "{reply}");
        assert!(reply.contains("Call cron again"), "{reply}");
    }
}
