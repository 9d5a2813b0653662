//! The JSON Schema (draft 2020-12) of `clawless.yaml`, generated from the config types
//! themselves (`schemars`), so it cannot drift from what start-up accepts. Doc comments become
//! descriptions and the code's defaults become `default`s. Behind the `schema` feature: only
//! the CLI (`clawless config schema`) builds it, no Lambda links it.

use schemars::generate::SchemaSettings;
use serde_json::Value;

use crate::config::ClawlessConfig;

/// The schema's `title`.
pub const SCHEMA_TITLE: &str = "clawless.yaml";

/// The JSON Schema of `clawless.yaml`. The top level is open (a skill's `requires.config` may
/// gate on any dotted path); every section clawless reads denies unknown keys.
///
/// Descriptions are the keys' doc comments. The types' own doc comments are written for
/// developers (rustdoc), so they are left out of `$defs`: every use of a type is a key with
/// its own description.
pub fn config_schema() -> Value {
    let generator = SchemaSettings::draft2020_12().into_generator();
    let schema = generator
        .into_root_schema_for::<ClawlessConfig>()
        .to_value();
    let Value::Object(mut generated) = schema else {
        return schema;
    };
    if let Some(Value::Object(defs)) = generated.get_mut("$defs") {
        for def in defs.values_mut().filter_map(Value::as_object_mut) {
            def.remove("description");
        }
    }
    // `$schema`, `title` and `description` first, for whoever reads the file.
    let mut root = serde_json::Map::new();
    for key in ["$schema", "title", "description"] {
        if let Some(value) = generated.remove(key) {
            root.insert(key.to_owned(), value);
        }
    }
    root.insert("title".to_owned(), Value::from(SCHEMA_TITLE));
    root.extend(generated);
    let mut schema = Value::Object(root);
    unwrap_descriptions(&mut schema);
    schema
}

/// The keys `clawless.yaml` has at its top level.
pub fn top_level_keys() -> Vec<String> {
    config_schema()
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| properties.keys().cloned().collect())
        .unwrap_or_default()
}

/// Joins the lines of each wrapped doc comment into one (keeping paragraph breaks), so an
/// editor's hover shows flowing text.
fn unwrap_descriptions(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            for (key, value) in object.iter_mut() {
                match value {
                    Value::String(text) if key == "description" => *text = unwrap_lines(text),
                    _ => unwrap_descriptions(value),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(unwrap_descriptions),
        _ => {}
    }
}

fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .lines()
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_lines_join_and_paragraphs_stay() {
        assert_eq!(unwrap_lines("one\ntwo\n\nthree"), "one two\n\nthree");
    }

    #[test]
    fn the_schema_is_draft_2020_12_with_an_open_top_level() {
        let schema = config_schema();
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        assert_eq!(schema["title"], SCHEMA_TITLE);
        assert!(schema.get("additionalProperties").is_none());
        assert!(top_level_keys().contains(&"session".to_owned()));
    }
}
