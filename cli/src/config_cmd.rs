//! `clawless config`: `schema` prints the JSON Schema (draft 2020-12) of `clawless.yaml`,
//! generated from the config types themselves (`--markdown`, hidden: the key reference of
//! `docs/configuration.md`, generated from that schema); `check [FILE]` reads a file exactly
//! as start-up does and prints `ok: FILE`, or the error as `FILE:LINE:COLUMN: key.path:
//! problem`, plus a warning for each top-level key clawless does not read.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use clawless_runtime::config::CONFIG_ENV;
use clawless_runtime::config_schema::{config_schema, top_level_keys};
use clawless_runtime::{ClawlessConfig, ConfigError};
use serde_json::Value;

/// The file `check` reads when none is given.
const DEFAULT_CONFIG: &str = "clawless.yaml";

/// `clawless config` options.
#[derive(Debug, Args)]
pub(crate) struct ConfigArgs {
    /// clawless.yaml (default: $CLAWLESS_CONFIG, else ./clawless.yaml).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: ConfigCommand,
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print the JSON Schema (draft 2020-12) of clawless.yaml, for editors and validators.
    Schema {
        /// Print the key reference of docs/configuration.md (Markdown) instead.
        #[arg(long, hide = true)]
        markdown: bool,
    },
    /// Check a config file as start-up reads it; errors name the file, line and column.
    Check {
        /// The file (default: --config, else $CLAWLESS_CONFIG, else ./clawless.yaml).
        file: Option<PathBuf>,
    },
}

/// Runs `clawless config …`.
pub(crate) async fn run(args: ConfigArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ConfigCommand::Schema { markdown: false } => {
            let schema = serde_json::to_string_pretty(&config_schema())?;
            println!("{schema}");
            Ok(ExitCode::SUCCESS)
        }
        ConfigCommand::Schema { markdown: true } => {
            print!("{}", markdown_reference(&config_schema()));
            Ok(ExitCode::SUCCESS)
        }
        ConfigCommand::Check { file } => {
            // A blank $CLAWLESS_CONFIG counts as unset, as for `clawless skills`.
            let from_env = std::env::var(CONFIG_ENV)
                .ok()
                .filter(|value| !value.trim().is_empty())
                .map(PathBuf::from);
            let path = file
                .or(args.config)
                .or(from_env)
                .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
            check(&path)
        }
    }
}

/// `config check`: the start-up parse, then the top-level keys clawless does not read.
fn check(path: &Path) -> anyhow::Result<ExitCode> {
    let shown = path.display().to_string();
    if shown.starts_with("s3://") {
        bail!("config check reads a local file; copy the s3:// object locally first");
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read config {shown}"))?;
    match ClawlessConfig::from_file(path) {
        Ok(config) => {
            let known = top_level_keys();
            let unread = config
                .document
                .as_object()
                .into_iter()
                .flat_map(|document| document.keys())
                .filter(|key| !known.contains(key));
            for key in unread {
                let at = match top_level_line(&text, key) {
                    Some(line) => format!("{shown}:{line}:1"),
                    None => shown.clone(),
                };
                eprintln!(
                    "warning: {at}: top-level key `{key}` is not read by clawless; it is kept \
                     for skills' requires.config"
                );
            }
            println!("ok: {shown}");
            Ok(ExitCode::SUCCESS)
        }
        Err(ConfigError::Invalid { reason, .. }) => {
            // Positioned reasons start with the file already; the others get it in front.
            let reason = if reason.starts_with(&shown) {
                reason
            } else {
                format!("{shown}: {reason}")
            };
            eprintln!("error: {reason}");
            Ok(ExitCode::FAILURE)
        }
        Err(err) => Err(err.into()),
    }
}

/// The 1-based line where `key` starts a top-level entry of a block mapping (`key:` at column
/// 1, possibly quoted).
fn top_level_line(text: &str, key: &str) -> Option<usize> {
    let spellings = [
        format!("{key}:"),
        format!("\"{key}\":"),
        format!("'{key}':"),
    ];
    text.lines()
        .position(|line| {
            spellings.iter().any(|spelling| {
                line.strip_prefix(spelling.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t']))
            })
        })
        .map(|index| index + 1)
}

// ---------------------------------------------------------------------------------------------
// The Markdown key reference
// ---------------------------------------------------------------------------------------------

/// The key reference of `docs/configuration.md`: one section per top-level key, then a table
/// of every key under it with its type, default and description.
fn markdown_reference(schema: &Value) -> String {
    let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
    let mut out = String::new();
    for (key, property) in properties(schema) {
        let _ = writeln!(out, "### `{key}`\n");
        let _ = writeln!(out, "{}\n", description(property));
        let mut rows = Vec::new();
        collect_rows(key, property, &defs, &mut rows);
        if rows.is_empty() {
            // A section whose value is the whole entry (no keys of its own).
            rows.push(row(key, property, &defs));
        }
        let _ = writeln!(out, "| Key | Type | Default | Description |");
        let _ = writeln!(out, "|---|---|---|---|");
        for line in rows {
            let _ = writeln!(out, "{line}");
        }
        out.push('\n');
    }
    // One trailing newline.
    let trimmed = out.trim_end().len();
    out.truncate(trimmed);
    out.push('\n');
    out
}

/// The table rows of every key under `path` (not `path` itself), depth first.
fn collect_rows(path: &str, property: &Value, defs: &Value, rows: &mut Vec<String>) {
    let schema = resolve(property, defs);
    for (key, child) in properties(&schema) {
        let child_path = format!("{path}.{key}");
        rows.push(row(&child_path, child, defs));
        collect_rows(&child_path, child, defs, rows);
    }
    // Maps of objects (`entries.<name>`, `providers.<name>`) and lists of objects.
    if let Some(values) = schema
        .get("additionalProperties")
        .filter(|values| values.is_object())
    {
        collect_rows(&format!("{path}.<name>"), values, defs, rows);
    }
    if let Some(items) = schema.get("items").filter(|items| items.is_object()) {
        collect_rows(&format!("{path}[]"), items, defs, rows);
    }
}

fn row(path: &str, property: &Value, defs: &Value) -> String {
    let default = match property.get("default") {
        Some(Value::Object(object)) if !object.is_empty() => "each key's default".to_owned(),
        Some(value) => format!("`{value}`"),
        None => "required".to_owned(),
    };
    format!(
        "| `{path}` | {} | {default} | {} |",
        type_name(property, defs),
        cell(&description(property)),
    )
}

/// A short, readable type: `string`, `integer`, `list of string`, `map of string`, an enum's
/// values, `object`.
fn type_name(property: &Value, defs: &Value) -> String {
    let schema = resolve(property, defs);
    if let Some(values) = enum_values(&schema) {
        return values.join(" \\| ");
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let types: Vec<&str> = types.into_iter().filter(|t| *t != "null").collect();
    match types.as_slice() {
        ["array"] => match schema.get("items") {
            Some(items) => format!("list of {}", type_name(items, defs)),
            None => "list".to_owned(),
        },
        ["object"] => match schema.get("additionalProperties") {
            Some(values) if values.is_object() && properties(&schema).next().is_none() => {
                format!("map of {}", type_name(values, defs))
            }
            _ if properties(&schema).next().is_none() => "any mapping".to_owned(),
            _ => "object".to_owned(),
        },
        [] => "any".to_owned(),
        several => several.join(" or "),
    }
}

/// The values of a string enum: `oneOf` of `const`s, or `enum`.
fn enum_values(schema: &Value) -> Option<Vec<String>> {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return Some(values.iter().map(|value| format!("`{value}`")).collect());
    }
    let variants = schema.get("oneOf").and_then(Value::as_array)?;
    variants
        .iter()
        .map(|variant| variant.get("const").map(|value| format!("`{value}`")))
        .collect()
}

/// `property` with a `$ref` (direct, or the non-null branch of an `anyOf`) replaced by its
/// definition.
fn resolve(property: &Value, defs: &Value) -> Value {
    let target = property
        .get("anyOf")
        .and_then(Value::as_array)
        .and_then(|branches| {
            branches
                .iter()
                .find(|branch| branch.get("type") != Some(&Value::from("null")))
        })
        .unwrap_or(property);
    match target
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|reference| reference.strip_prefix("#/$defs/"))
    {
        Some(name) => defs.get(name).cloned().unwrap_or(Value::Null),
        None => target.clone(),
    }
}

fn properties(schema: &Value) -> impl Iterator<Item = (&String, &Value)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

fn description(property: &Value) -> String {
    property
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Text fit for one table cell: no line breaks, no bare `|`.
fn cell(text: &str) -> String {
    text.replace("\n\n", "<br><br>")
        .replace('\n', " ")
        .replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_level_keys_are_found_at_column_one_only() {
        let text = "# browser: no\nagents:\n  browser: nested\n\"browser\": {enabled: true}\nbrowserish: 1\n";
        assert_eq!(top_level_line(text, "browser"), Some(4));
        assert_eq!(top_level_line(text, "browserish"), Some(5));
        assert_eq!(top_level_line(text, "missing"), None);
    }

    #[test]
    fn the_reference_covers_every_section_with_types_and_defaults() {
        let reference = markdown_reference(&config_schema());
        for needle in [
            "### `agents`",
            "| `agents.defaults.maxModelCalls` | integer | `12` |",
            "| `session.dmScope` | `\"main\"` \\| `\"per-peer\"` \\| `\"per-channel-peer\"` | `\"main\"` |",
            "| `skills.entries.<name>.enabled` | boolean | `true` |",
            "| `agents.list[].id` | string | required |",
        ] {
            assert!(reference.contains(needle), "{needle} not in:\n{reference}");
        }
    }
}
