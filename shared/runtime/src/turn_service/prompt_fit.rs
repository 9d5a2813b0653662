//! Fitting a turn's fixed part (system prompt and tool schemas) to a small context window:
//! it may take at most [`FIXED_SHARE_PERCENT`] of the window. When it takes more, the steps
//! of [`FitStep`] are applied in their order, each only while the prompt still does not fit,
//! and the model is told what was shortened (see `docs/sessions.md`, "Small windows").
//!
//! Nothing a step removes is out of reach: the optional sections are advice, a schema's
//! parameter notes are not needed to call it, a skill's description is in its `SKILL.md`,
//! and the workspace files stay readable with `read`.

use clawless_base::model::ToolSpec;
use clawless_core::compaction::plan::text_tokens;
use serde_json::Value;

/// The share of the window the fixed part may take, in percent.
pub(super) const FIXED_SHARE_PERCENT: u64 = 40;

/// The project context's share of the window once [`FitStep::ShortContextFiles`] applies, in
/// percent (of the window's characters, at 4 a token).
const SHORT_CONTEXT_SHARE_PERCENT: u64 = 8;

/// One way of making the fixed part smaller, in the order they are tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum FitStep {
    /// The prompt's optional sections left out (the CLI reference, Execution Bias, and the
    /// narration lines of Tool Call Style).
    LeanSections,
    /// Tool descriptions cut to their first sentence, and parameter notes dropped from the
    /// schemas (names, types and required fields stay).
    TerseSchemas,
    /// The skills list without descriptions (OpenClaw's compact format).
    CompactSkills,
    /// Each workspace file in Project Context cut to its share of the window.
    ShortContextFiles,
    /// No skills list; a line says where the skills are.
    NoSkills,
}

impl FitStep {
    /// Every step, in the order they are applied.
    pub(super) const ALL: [Self; 5] = [
        Self::LeanSections,
        Self::TerseSchemas,
        Self::CompactSkills,
        Self::ShortContextFiles,
        Self::NoSkills,
    ];

    /// What the model (and `/context`) is told was shortened.
    pub(super) fn describe(self) -> &'static str {
        match self {
            Self::LeanSections => "optional prompt sections left out",
            Self::TerseSchemas => "tool descriptions and parameter notes shortened",
            Self::CompactSkills => "skill descriptions left out (read a skill's SKILL.md for it)",
            Self::ShortContextFiles => {
                "workspace files in Project Context cut (read them for the rest)"
            }
            Self::NoSkills => "the skills list left out (skills are SKILL.md files you can read)",
        }
    }
}

/// The most tokens the fixed part may take in a `window`-token window.
pub(super) fn fixed_limit(window: u64) -> u64 {
    window * FIXED_SHARE_PERCENT / 100
}

/// The per-file and total character caps of Project Context under
/// [`FitStep::ShortContextFiles`].
pub(super) fn short_context_caps(window: u64) -> (usize, usize) {
    let total = usize::try_from(window * 4 * SHORT_CONTEXT_SHARE_PERCENT / 100).unwrap_or(0);
    (total / 2, total)
}

/// Whether a fixed part of `tokens` fits a `window`-token window.
pub(super) fn fits(tokens: u64, window: u64) -> bool {
    tokens <= fixed_limit(window)
}

/// `spec` under [`FitStep::TerseSchemas`]: its description's first sentence, and its schema
/// without `description`s.
pub(super) fn terse_spec(spec: &ToolSpec) -> ToolSpec {
    let mut schema = spec.input_schema.clone();
    strip_descriptions(&mut schema);
    ToolSpec {
        name: spec.name.clone(),
        description: first_sentence(&spec.description).to_owned(),
        input_schema: schema,
    }
}

fn strip_descriptions(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            map.remove("description");
            for value in map.values_mut() {
                strip_descriptions(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_descriptions),
        _ => {}
    }
}

/// The first sentence (or line) of `text`, with its full stop.
pub(super) fn first_sentence(text: &str) -> &str {
    let line = text.trim().lines().next().unwrap_or_default().trim();
    match line.find(". ") {
        Some(end) => &line[..=end],
        None => line,
    }
}

/// The skills list without descriptions (with OpenClaw's note on the compact format), for
/// skills given as `(name, location)`.
pub(super) fn compact_skills(skills: &[(&str, &str)]) -> String {
    use clawless_skills::prompt::{PromptSkill, format_skills_compact};
    let listed: Vec<PromptSkill<'_>> = skills
        .iter()
        .map(|(name, location)| PromptSkill {
            name,
            description: "",
            location,
        })
        .collect();
    let block = format_skills_compact(&listed);
    if block.is_empty() {
        return block;
    }
    format!(
        "⚠️ Skills catalog using compact format (descriptions omitted).{}",
        block
    )
}

/// What a provider's request adds around the prompt and the schemas: the system prompt's
/// blocks and cache markers, the tools' cache marker.
const WIRE_WRAPPING_TOKENS: u64 = 32;

/// Estimated tokens of a system prompt and the tool schemas sent with it, as they go over the
/// wire: the prompt JSON-encoded (each newline and quote escaped), plus its wrapping.
pub(super) fn fixed_tokens(system: &str, tools: &[ToolSpec]) -> u64 {
    let system = serde_json::to_string(system).unwrap_or_default();
    let tool_schemas = serde_json::to_string(tools).unwrap_or_default();
    text_tokens(&system) + text_tokens(&tool_schemas) + WIRE_WRAPPING_TOKENS
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_fixed_part_may_take_two_fifths_of_the_window() {
        assert_eq!(fixed_limit(8_000), 3_200);
        assert!(fits(3_200, 8_000) && !fits(3_201, 8_000));
    }

    #[test]
    fn a_terse_spec_keeps_names_types_and_required_fields() {
        let spec = ToolSpec {
            name: "read".to_owned(),
            description: "Read a file. Pages with offset.".to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Where"},
                    "job": {"type": "object", "description": "x", "properties": {
                        "name": {"type": "string", "description": "y"}
                    }}
                },
                "required": ["path"]
            }),
        };
        let terse = terse_spec(&spec);
        assert_eq!(terse.description, "Read a file.");
        assert_eq!(
            terse.input_schema,
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "job": {"type": "object", "properties": {"name": {"type": "string"}}}
                },
                "required": ["path"]
            })
        );
    }

    #[test]
    fn the_steps_are_tried_in_their_documented_order() {
        let mut sorted = FitStep::ALL;
        sorted.sort();
        assert_eq!(sorted, FitStep::ALL);
        assert!(FitStep::ALL.iter().all(|step| !step.describe().is_empty()));
    }

    #[test]
    fn compact_skills_list_names_and_locations_only() {
        let block = compact_skills(&[("weather", "/skills/weather/SKILL.md")]);
        assert!(block.contains("<name>weather</name>"), "{block}");
        assert!(block.contains("/skills/weather/SKILL.md"));
        assert!(!block.contains("<description>"));
        assert_eq!(compact_skills(&[]), "");
    }
}
