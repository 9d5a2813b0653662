//! Skill slash commands (spec §5): command specs with sanitised unique names, parsing of
//! `/name args` and `/skill name args`, and what an invocation turns into.

use std::collections::HashSet;
use std::sync::Arc;

use serde::Serialize;

use super::entry::SkillEntry;
use super::metadata::ToolDispatch;

/// Built-in chat command names (and aliases); a skill command never takes one of these.
pub const RESERVED_COMMAND_NAMES: &[&str] = &[
    "acp",
    "activation",
    "agents",
    "allowlist",
    "approve",
    "bash",
    "btw",
    "commands",
    "compact",
    "config",
    "context",
    "debug",
    "elev",
    "elevated",
    "exec",
    "export",
    "export-session",
    "fast",
    "focus",
    "help",
    "id",
    "kill",
    "mcp",
    "model",
    "models",
    "new",
    "plugin",
    "plugins",
    "queue",
    "reason",
    "reasoning",
    "reset",
    "restart",
    "send",
    "session",
    "skill",
    "status",
    "steer",
    "stop",
    "subagents",
    "t",
    "tasks",
    "tell",
    "think",
    "thinking",
    "tools",
    "trace",
    "tts",
    "unfocus",
    "usage",
    "v",
    "verbose",
    "whoami",
];

/// Longest command name.
const MAX_COMMAND_NAME_LEN: usize = 32;
/// Longest command description, in UTF-16 units, including the ellipsis.
const MAX_DESCRIPTION_LEN: usize = 100;

/// A slash command backed by a skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillCommandSpec {
    /// Command name, without the slash: `[a-z0-9_]{1,32}`.
    pub name: String,
    /// The skill's own name.
    pub skill_name: String,
    /// At most 100 characters.
    pub description: String,
    /// Direct tool dispatch, when the skill asks for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispatch: Option<ToolDispatch>,
}

/// Lowercase, runs of anything but `[a-z0-9_]` → `_`, trimmed of `_`, at most 32 chars.
pub fn sanitize_command_name(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for ch in raw.to_lowercase().chars() {
        let keep = ch.is_ascii_lowercase() || ch.is_ascii_digit();
        if keep {
            out.push(ch);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let trimmed: String = out
        .trim_matches('_')
        .chars()
        .take(MAX_COMMAND_NAME_LEN)
        .collect();
    if trimmed.is_empty() {
        "skill".to_owned()
    } else {
        trimmed
    }
}

/// `base` if free, else `base_2` … `base_999` (cut to stay within 32), else `base_x`.
pub fn unique_command_name(base: &str, used: &HashSet<String>) -> String {
    if !used.contains(&base.to_lowercase()) {
        return base.to_owned();
    }
    for index in 2..=999 {
        let suffix = format!("_{index}");
        let keep = MAX_COMMAND_NAME_LEN.saturating_sub(suffix.len()).max(1);
        let candidate = format!("{}{suffix}", prefix_chars(base, keep));
        if !used.contains(&candidate.to_lowercase()) {
            return candidate;
        }
    }
    format!("{}_x", prefix_chars(base, 30))
}

fn prefix_chars(text: &str, count: usize) -> String {
    text.chars().take(count).collect()
}

/// The first `max` UTF-16 units of `text` (never splitting a character), plus `…` if cut.
fn truncate_description(text: &str) -> String {
    if text.encode_utf16().count() <= MAX_DESCRIPTION_LEN {
        return text.to_owned();
    }
    let mut out = String::new();
    let mut units = 0;
    for ch in text.chars() {
        if units + ch.len_utf16() > MAX_DESCRIPTION_LEN - 1 {
            break;
        }
        units += ch.len_utf16();
        out.push(ch);
    }
    out.push('…');
    out
}

/// Command specs for the user-invocable skills among `eligible` (already filtered), in order.
pub fn build_command_specs(
    eligible: &[&Arc<SkillEntry>], reserved: &[&str],
) -> Vec<SkillCommandSpec> {
    let mut used: HashSet<String> = reserved.iter().map(|name| name.to_lowercase()).collect();
    let mut specs = Vec::new();
    for entry in eligible
        .iter()
        .filter(|entry| entry.invocation.user_invocable)
    {
        let name = unique_command_name(&sanitize_command_name(&entry.name), &used);
        used.insert(name.to_lowercase());
        let description = match entry.description.trim() {
            "" => entry.name.clone(),
            text => truncate_description(text),
        };
        specs.push(SkillCommandSpec {
            name,
            skill_name: entry.name.clone(),
            description,
            dispatch: entry.dispatch.clone(),
        });
    }
    specs
}

/// Pre-normalises a message before command matching: trimmed; a slash command keeps only
/// its first line, `/cmd: rest` becomes `/cmd rest` and `/cmd@bot` loses a matching mention.
pub fn normalize_command_body(text: &str, bot_username: Option<&str>) -> String {
    let trimmed = text.trim();
    if !trimmed.starts_with('/') {
        return trimmed.to_owned();
    }
    let first_line = trimmed.lines().next().unwrap_or_default().trim_end();
    let name_end = first_line
        .find(|c: char| c.is_whitespace() || c == ':')
        .unwrap_or(first_line.len());
    let (mut name, rest) = first_line.split_at(name_end);
    if let (Some((command, mention)), Some(bot)) = (name.split_once('@'), bot_username)
        && mention.eq_ignore_ascii_case(bot.trim_start_matches('@'))
    {
        name = command;
    }
    let rest = rest.strip_prefix(':').unwrap_or(rest).trim();
    if rest.is_empty() {
        name.to_owned()
    } else {
        format!("{name} {rest}")
    }
}

/// The command name of a slash command body (`/name`, `/name args`, `/name: args`).
pub fn slash_command_name(body: &str) -> Option<&str> {
    let after = body.strip_prefix('/')?;
    let end = after
        .find(|c: char| c.is_whitespace() || c == ':')
        .unwrap_or(after.len());
    (end > 0).then(|| &after[..end])
}

/// Built-ins that are never looked up as skill commands besides [`RESERVED_COMMAND_NAMES`].
const EXTRA_BUILTINS: &[&str] = &[
    "btw",
    "think",
    "verbose",
    "reasoning",
    "elevated",
    "exec",
    "model",
    "status",
    "queue",
];

/// Whether a body should be matched against skill commands at all.
pub fn may_be_skill_command(body: &str) -> bool {
    match slash_command_name(body) {
        None => false,
        Some(name) => {
            let lower = name.to_lowercase();
            lower == "skill"
                || !(RESERVED_COMMAND_NAMES.contains(&lower.as_str())
                    || EXTRA_BUILTINS.contains(&lower.as_str()))
        }
    }
}

/// A matched skill command and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillCommandInvocation {
    /// The spec that matched.
    pub spec: SkillCommandSpec,
    /// Trimmed arguments; `None` when there were none.
    pub args: Option<String>,
}

/// Matches `/name args` against spec names and `/skill x args` against names or skill names.
pub fn resolve_skill_command(
    body: &str, specs: &[SkillCommandSpec],
) -> Option<SkillCommandInvocation> {
    let after = body.trim().strip_prefix('/')?;
    let (name, args) = split_first_word(after);
    if name.is_empty() {
        return None;
    }
    let name = name.to_lowercase();
    let (spec, args) = if name == "skill" {
        let (target, args) = split_first_word(args?);
        (find_skill_command(target, specs)?, args)
    } else {
        (
            specs.iter().find(|spec| spec.name.to_lowercase() == name)?,
            args,
        )
    };
    let args = args
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_owned);
    Some(SkillCommandInvocation {
        spec: spec.clone(),
        args,
    })
}

/// Splits at the first whitespace run: `("name", Some("rest"))`.
fn split_first_word(text: &str) -> (&str, Option<&str>) {
    match text.find(char::is_whitespace) {
        Some(end) => {
            let rest = text[end..].trim_start();
            (&text[..end], (!rest.is_empty()).then_some(rest))
        }
        None => (text, None),
    }
}

fn find_skill_command<'s>(
    raw: &str, specs: &'s [SkillCommandSpec],
) -> Option<&'s SkillCommandSpec> {
    let lower = raw.to_lowercase();
    let loose = loosen(&lower);
    specs.iter().find(|spec| {
        spec.name.to_lowercase() == lower
            || spec.skill_name.to_lowercase() == lower
            || loosen(&spec.name.to_lowercase()) == loose
            || loosen(&spec.skill_name.to_lowercase()) == loose
    })
}

/// Lowercase text with runs of whitespace and `_` turned into `-`.
fn loosen(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_run = false;
    for ch in text.chars() {
        if ch.is_whitespace() || ch == '_' {
            if !in_run {
                out.push('-');
            }
            in_run = true;
        } else {
            out.push(ch);
            in_run = false;
        }
    }
    out
}

/// What the message becomes when a skill command without tool dispatch is used.
pub fn skill_rewrite_text(skill_name: &str, args: Option<&str>) -> String {
    let mut text = format!("Use the \"{skill_name}\" skill for this request.");
    if let Some(args) = args {
        text.push_str("\n\nUser input:\n");
        text.push_str(args);
    }
    text
}

/// A direct tool call made by a `command-dispatch: tool` skill command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DispatchedToolCall {
    /// The tool to call.
    pub tool_name: String,
    /// Its parameters: `{command, commandName, skillName}`.
    pub params: serde_json::Value,
}

/// The tool call for `invocation`, if its skill dispatches to a tool.
pub fn dispatched_tool_call(invocation: &SkillCommandInvocation) -> Option<DispatchedToolCall> {
    let dispatch = invocation.spec.dispatch.as_ref()?;
    Some(DispatchedToolCall {
        tool_name: dispatch.tool_name.clone(),
        params: serde_json::json!({
            "command": invocation.args.as_deref().unwrap_or(""),
            "commandName": invocation.spec.name,
            "skillName": invocation.spec.skill_name,
        }),
    })
}
