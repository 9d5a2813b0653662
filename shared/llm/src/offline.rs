//! The offline model: a clearly labelled stand-in used when no model key is configured, so the
//! whole path (skills prompt → `read` tool → answer) can be seen working on a fresh machine.
//!
//! It replays one scripted conversation, deterministically:
//! 1. the last message is from the user and the system prompt lists skills in
//!    `<available_skills>` → it calls `read` on the `<location>` of the skill whose name and
//!    description share the most words with the user's message (the first on a tie);
//! 2. the last message is the result of that `read` → when the skill shows a command in an
//!    ` ```sh exec ` block and the request offers `exec`, it runs that command through `exec`
//!    (on a node host, under the node's exec policy); otherwise it answers with what it read;
//! 3. the last message is an `exec` result → it answers with the command's output, labelled;
//! 4. otherwise → a labelled text: an echo when no skills are listed, a note when the request
//!    offers tools but not `read` (an empty tool list still gets the `read` call).

use async_trait::async_trait;
use clawless_base::model::{ModelError, ModelProvider, ModelRequest, ModelResponse, Usage};
use clawless_base::transcript::{AssistantBlock, Message, StopReason, ToolCall};
use serde_json::json;

/// `provider/model` of the offline model.
pub const OFFLINE_MODEL_REF: &str = "offline/scripted";

/// Every answer starts with this label.
pub const OFFLINE_LABEL: &str = "[offline model]";

/// The sentence that ends every answer.
pub const CONFIGURE_HINT: &str =
    "Configure a model key (ANTHROPIC_API_KEY or OPENAI_API_KEY) for real answers.";

/// The tool the offline model calls to open a skill.
pub const READ_TOOL: &str = "read";

/// The tool the offline model runs a skill's command with.
pub const EXEC_TOOL: &str = "exec";

/// Opens the fenced block whose command the offline model runs (` ```sh exec `).
const EXEC_FENCE: &str = "```sh exec";

/// A scripted model that needs no network and no key.
#[derive(Debug, Clone, Copy, Default)]
pub struct OfflineModel;

impl OfflineModel {
    /// The offline model.
    pub fn new() -> Self {
        Self
    }
}

/// One skill as listed in the system prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ListedSkill {
    name: String,
    description: String,
    location: String,
}

#[async_trait]
impl ModelProvider for OfflineModel {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        Ok(answer(request))
    }

    fn model_ref(&self) -> String {
        OFFLINE_MODEL_REF.to_owned()
    }
}

fn text_response(text: String) -> ModelResponse {
    ModelResponse {
        content: vec![AssistantBlock::Text { text }],
        stop_reason: StopReason::EndTurn,
        usage: Usage::default(),
        model: OFFLINE_MODEL_REF.to_owned(),
    }
}

fn answer(request: &ModelRequest) -> ModelResponse {
    let skills = listed_skills(&request.system);
    let read_offered =
        request.tools.is_empty() || request.tools.iter().any(|tool| tool.name == READ_TOOL);
    match request.messages.last() {
        Some(Message::User { text }) => {
            let Some(skill) = best_skill(&skills, text) else {
                return text_response(format!(
                    "{OFFLINE_LABEL} You said: \"{}\". No skills are listed in my prompt, so there is nothing for me to read. {CONFIGURE_HINT}",
                    text.trim()
                ));
            };
            if !read_offered {
                return text_response(format!(
                    "{OFFLINE_LABEL} I would read the {} skill at {}, but the read tool is not available to me. {CONFIGURE_HINT}",
                    skill.name, skill.location
                ));
            }
            tool_call(request, READ_TOOL, json!({ "path": skill.location }))
        }
        Some(Message::ToolResult {
            tool_call_id,
            text,
            is_error,
            ..
        }) => {
            let call = find_call(&request.messages, tool_call_id);
            if let Some(call) = call.filter(|call| call.name == EXEC_TOOL) {
                let command = call
                    .input
                    .get("command")
                    .and_then(|command| command.as_str())
                    .unwrap_or_default();
                let verb = if *is_error { "failed" } else { "printed" };
                return text_response(format!(
                    "{OFFLINE_LABEL} I ran `{command}` on your node host; it {verb}:\n{}\n{CONFIGURE_HINT}",
                    text.trim_end()
                ));
            }
            let path = requested_path(&request.messages, tool_call_id);
            let name = skill_name_for(&skills, path.as_deref());
            let exec_offered = request.tools.iter().any(|tool| tool.name == EXEC_TOOL);
            if !*is_error
                && exec_offered
                && let Some(command) = skill_command(text)
            {
                return tool_call(request, EXEC_TOOL, json!({ "command": command }));
            }
            if *is_error {
                return text_response(format!(
                    "{OFFLINE_LABEL} I tried to read the {name} skill, but the read failed: {}. {CONFIGURE_HINT}",
                    first_line(text).unwrap_or("no details")
                ));
            }
            let lines = text.lines().count();
            let gist = first_body_line(text)
                .unwrap_or("(the file has no body)")
                .trim_end_matches('.');
            text_response(format!(
                "{OFFLINE_LABEL} I read the {name} skill ({lines} lines). It says: {gist}. {CONFIGURE_HINT}"
            ))
        }
        Some(Message::Assistant { .. }) | None => text_response(format!(
            "{OFFLINE_LABEL} I replay a scripted conversation: ask me something and I will read a matching skill. {CONFIGURE_HINT}"
        )),
    }
}

/// A call of `tool`. Ids count the assistant turns so far, so a replay gives the same ids.
fn tool_call(request: &ModelRequest, tool: &str, input: serde_json::Value) -> ModelResponse {
    let turn = request
        .messages
        .iter()
        .filter(|m| matches!(m, Message::Assistant { .. }))
        .count()
        + 1;
    ModelResponse {
        content: vec![AssistantBlock::ToolCall(ToolCall {
            id: format!("offline_call_{turn}"),
            name: tool.to_owned(),
            input,
        })],
        stop_reason: StopReason::ToolUse,
        usage: Usage::default(),
        model: OFFLINE_MODEL_REF.to_owned(),
    }
}

/// The command in a skill's first ` ```sh exec ` block (its lines joined by newlines).
fn skill_command(skill: &str) -> Option<String> {
    let mut lines = skill.lines().skip_while(|line| line.trim() != EXEC_FENCE);
    lines.next()?;
    let body: Vec<&str> = lines.take_while(|line| line.trim() != "```").collect();
    let command = body.join("\n");
    let command = command.trim();
    (!command.is_empty()).then(|| command.to_owned())
}

/// The call `tool_call_id` answers.
fn find_call<'a>(messages: &'a [Message], tool_call_id: &str) -> Option<&'a ToolCall> {
    messages
        .iter()
        .rev()
        .flat_map(Message::tool_calls)
        .find(|call| call.id == tool_call_id)
}

/// The `<skill>` entries of the `<available_skills>` block, in prompt order.
fn listed_skills(system: &str) -> Vec<ListedSkill> {
    let Some(block) = between(system, "<available_skills>", "</available_skills>") else {
        return Vec::new();
    };
    block
        .split("<skill>")
        .skip(1)
        .filter_map(|entry| {
            let entry = entry.split("</skill>").next().unwrap_or(entry);
            let location = unescape_xml(between(entry, "<location>", "</location>")?.trim());
            if location.is_empty() {
                return None;
            }
            let field = |tag: &str| {
                between(entry, &format!("<{tag}>"), &format!("</{tag}>"))
                    .map(|text| unescape_xml(text.trim()))
                    .unwrap_or_default()
            };
            Some(ListedSkill {
                name: field("name"),
                description: field("description"),
                location,
            })
        })
        .collect()
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = text.find(open)? + open.len();
    let len = text[start..].find(close)?;
    Some(&text[start..start + len])
}

fn unescape_xml(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// Words too common to say which skill a message is about.
const STOP_WORDS: [&str; 16] = [
    "the", "and", "for", "with", "you", "are", "what", "whats", "this", "that", "how", "can",
    "please", "about", "from", "when",
];

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .map(|word| word.replace('\'', "").to_lowercase())
        .filter(|word| word.chars().count() >= 3 && !STOP_WORDS.contains(&word.as_str()))
        .collect()
}

/// The skill sharing the most words with `said`; the first listed on a tie (or no overlap).
fn best_skill<'a>(skills: &'a [ListedSkill], said: &str) -> Option<&'a ListedSkill> {
    let said = words(said);
    let mut best: Option<(&ListedSkill, usize)> = None;
    for skill in skills {
        let own = words(&skill.description);
        let name = words(&skill.name.replace('-', " "));
        // A word naming the skill counts more than one merely in its description.
        let score: usize = said
            .iter()
            .map(|word| 3 * usize::from(name.contains(word)) + usize::from(own.contains(word)))
            .sum();
        if best.is_none_or(|(_, top)| score > top) {
            best = Some((skill, score));
        }
    }
    best.map(|(skill, _)| skill)
}

/// The `path` the assistant asked `read` for in the call `tool_call_id`.
fn requested_path(messages: &[Message], tool_call_id: &str) -> Option<String> {
    messages
        .iter()
        .rev()
        .flat_map(Message::tool_calls)
        .find(|call| call.id == tool_call_id)
        .and_then(|call| call.input.get("path")?.as_str().map(str::to_owned))
}

fn skill_name_for(skills: &[ListedSkill], path: Option<&str>) -> String {
    let Some(path) = path else {
        return "requested".to_owned();
    };
    if let Some(skill) = skills.iter().find(|skill| skill.location == path) {
        return skill.name.clone();
    }
    // `…/<name>/SKILL.md` → `<name>`.
    let mut parts = path.rsplit('/');
    let file = parts.next().unwrap_or(path);
    match parts.next() {
        Some(dir) if !dir.is_empty() => dir.to_owned(),
        _ => file.to_owned(),
    }
}

fn first_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).find(|line| !line.is_empty())
}

/// The first non-empty line after a `---` frontmatter block (or of the whole text without
/// one), without markdown heading marks.
fn first_body_line(text: &str) -> Option<&str> {
    let mut lines = text.lines();
    if text.trim_start().starts_with("---") {
        // Skip through the closing `---`.
        let mut fences = 0;
        for line in lines.by_ref() {
            if line.trim() == "---" {
                fences += 1;
                if fences == 2 {
                    break;
                }
            }
        }
    }
    lines
        .map(|line| line.trim().trim_start_matches('#').trim())
        .find(|line| !line.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROMPT: &str = "You are a helpful agent.\n<available_skills>\n  <skill>\n    <name>weather</name>\n    <description>Get weather &amp; forecasts</description>\n    <location>/skills/weather/SKILL.md</location>\n  </skill>\n  <skill>\n    <name>git-helper</name>\n    <description>Commit and push with git</description>\n    <location>~/skills/git-helper/SKILL.md</location>\n  </skill>\n</available_skills>";

    #[test]
    fn skills_are_parsed_and_unescaped() {
        let skills = listed_skills(PROMPT);
        assert_eq!(skills.len(), 2);
        assert_eq!(skills[0].description, "Get weather & forecasts");
        assert_eq!(skills[1].location, "~/skills/git-helper/SKILL.md");
    }

    #[test]
    fn word_overlap_picks_the_skill_and_ties_pick_the_first() {
        let skills = listed_skills(PROMPT);
        assert_eq!(
            best_skill(&skills, "please push my git commit").map(|s| s.name.as_str()),
            Some("git-helper")
        );
        assert_eq!(
            best_skill(&skills, "What's the weather in Paris?").map(|s| s.name.as_str()),
            Some("weather")
        );
        assert_eq!(
            best_skill(&skills, "hello there").map(|s| s.name.as_str()),
            Some("weather")
        );
        assert_eq!(best_skill(&[], "hello"), None);
    }

    #[test]
    fn a_skill_named_by_the_message_beats_one_sharing_common_words() {
        let prompt = "<available_skills>\n  <skill>\n    <name>summarize-url</name>\n    <description>Says what the page at a link is about</description>\n    <location>/s/summarize-url/SKILL.md</location>\n  </skill>\n  <skill>\n    <name>weather</name>\n    <description>Gets the current weather</description>\n    <location>/s/weather/SKILL.md</location>\n  </skill>\n</available_skills>";
        let skills = listed_skills(prompt);
        assert_eq!(
            best_skill(&skills, "What's the weather in Paris?").map(|s| s.name.as_str()),
            Some("weather")
        );
    }

    #[test]
    fn the_body_line_skips_frontmatter() {
        let skill = "---\nname: weather\ndescription: x\n---\n\n# Weather\n\nUse curl.\n";
        assert_eq!(first_body_line(skill), Some("Weather"));
        assert_eq!(first_body_line("\n\nplain text"), Some("plain text"));
        assert_eq!(first_body_line("---\nname: x\n---\n"), None);
    }
}
