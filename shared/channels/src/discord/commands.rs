//! The slash commands clawless registers: `/ask text:<…> file:<…>` and one per user-invocable skill
//! command, with names and descriptions cut to Discord's rules, and the way back from a
//! Discord command name to the skill command it stands for.

use std::collections::HashSet;

use clawless_skills::commands::{SkillCommandSpec, unique_command_name};
use serde_json::{Value, json};

use super::wire::{ATTACHMENT_OPTION, CHAT_INPUT, STRING_OPTION};

/// The generic command: `/ask text:<what to ask> file:<a file>`, either or both.
pub const ASK_COMMAND: &str = "ask";
/// The option of [`ASK_COMMAND`] holding the question.
pub const ASK_OPTION: &str = "text";
/// The option of [`ASK_COMMAND`] carrying a file (Discord uploads it; ingress stores it).
pub const ASK_FILE_OPTION: &str = "file";
/// The option of a skill command holding its arguments.
pub const ARGS_OPTION: &str = "args";

/// Longest command name Discord accepts.
pub(super) const MAX_NAME_CHARS: usize = 32;
/// Longest command or option description Discord accepts.
const MAX_DESCRIPTION_CHARS: usize = 100;

/// A command name Discord accepts: lowercase ASCII letters, digits, `-` and `_`, 1–32 long
/// (a subset of Discord's `^[-_\p{L}\p{N}]{1,32}$`, so no script's casing rules are needed).
fn discord_command_name(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for ch in raw.to_lowercase().chars() {
        if ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-' || ch == '_' {
            out.push(ch);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let name: String = out.trim_matches('_').chars().take(MAX_NAME_CHARS).collect();
    if name.is_empty() {
        "skill".to_owned()
    } else {
        name
    }
}

/// `text` cut to Discord's 1–100 characters, with `…` when cut; `fallback` when blank.
fn discord_description(text: &str, fallback: &str) -> String {
    let text = match text.trim() {
        "" => fallback.trim(),
        text => text,
    };
    let text = if text.is_empty() { "clawless" } else { text };
    if text.chars().count() <= MAX_DESCRIPTION_CHARS {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(MAX_DESCRIPTION_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// The Discord name of each skill command, unique and never `ask`, in order.
fn discord_command_names(specs: &[SkillCommandSpec]) -> Vec<(String, &SkillCommandSpec)> {
    let mut used: HashSet<String> = HashSet::from([ASK_COMMAND.to_owned()]);
    let mut names = Vec::with_capacity(specs.len());
    for spec in specs {
        let mut name = unique_command_name(&discord_command_name(&spec.name), &used);
        if name.chars().count() > MAX_NAME_CHARS || used.contains(&name) {
            // Only past 999 clashes; unreachable with Discord's 100-command limit.
            continue;
        }
        name.make_ascii_lowercase();
        used.insert(name.clone());
        names.push((name, spec));
    }
    names
}

/// `text` with its leading Discord command name replaced by the skill command it was
/// registered for (see [`command_definitions`]), when Discord's name differs (e.g. a skill
/// called `ask` is `/ask_2` on Discord). `None` when the text needs no change.
pub fn skill_command_text(text: &str, specs: &[SkillCommandSpec]) -> Option<String> {
    let rest = text.strip_prefix('/')?;
    let (name, args) = rest
        .split_once(' ')
        .map_or((rest, None), |(name, args)| (name, Some(args)));
    let (_, spec) = discord_command_names(specs)
        .into_iter()
        .find(|(discord, _)| discord == name)?;
    if spec.name == name {
        return None;
    }
    Some(match args {
        Some(args) => format!("/{} {args}", spec.name),
        None => format!("/{}", spec.name),
    })
}

/// The slash commands to register: `/ask text:<…> file:<…>` and one per user-invocable skill
/// command (with an optional `args` option), as Discord's JSON. Both options of `/ask` are
/// optional to Discord, so a file can be sent alone (its placeholder starts the turn); an
/// `/ask` with neither is answered with what it needs.
pub fn command_definitions(skill_specs: &[SkillCommandSpec]) -> Vec<Value> {
    let mut definitions = vec![json!({
        "name": ASK_COMMAND,
        "type": CHAT_INPUT,
        "description": "Ask the clawless agent",
        "options": [
            {
                "type": STRING_OPTION,
                "name": ASK_OPTION,
                "description": "What to ask",
                "required": false,
            },
            {
                "type": ATTACHMENT_OPTION,
                "name": ASK_FILE_OPTION,
                "description": "A file for the agent (a photo, a voice note, a document)",
                "required": false,
            },
        ],
    })];
    for (name, spec) in discord_command_names(skill_specs) {
        definitions.push(json!({
            "name": name,
            "type": CHAT_INPUT,
            "description": discord_description(&spec.description, &spec.skill_name),
            "options": [{
                "type": STRING_OPTION,
                "name": ARGS_OPTION,
                "description": "Input for the skill",
                "required": false,
            }],
        }));
    }
    definitions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitised_to_discords_rules() {
        assert_eq!(discord_command_name("Hello World!"), "hello_world");
        assert_eq!(discord_command_name("résumé-bot"), "r_sum_-bot");
        assert_eq!(discord_command_name("???"), "skill");
        assert_eq!(discord_command_name(&"x".repeat(40)).len(), 32);
    }

    #[test]
    fn ask_takes_a_question_and_an_optional_file() {
        let definitions = command_definitions(&[]);
        assert_eq!(
            definitions[0]["options"],
            json!([
                {"type": 3, "name": "text", "description": "What to ask", "required": false},
                {
                    "type": 11,
                    "name": "file",
                    "description": "A file for the agent (a photo, a voice note, a document)",
                    "required": false
                },
            ])
        );
        for option in definitions[0]["options"].as_array().unwrap() {
            let description = option["description"].as_str().unwrap();
            assert!((1..=MAX_DESCRIPTION_CHARS).contains(&description.chars().count()));
        }
    }
}
