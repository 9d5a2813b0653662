//! `/context [list|detail]`: what this session's requests carry, for the person in the chat
//! (OpenClaw's `/context`). Each system prompt section and Project Context file, each tool
//! schema, the transcript and the summary, with their sizes in characters and estimated
//! tokens, the window, and what was shortened to fit it. A command-only tool: never offered
//! to the model.

use async_trait::async_trait;
use clawless_base::model::ToolSpec;
use clawless_core::compaction::plan::{messages_tokens, text_tokens};
use clawless_core::tools::ToolOutput;

use clawless_core::turn::state::SessionState;

use super::{RuntimeTool, ToolCallContext, ToolOutcome};
use crate::turn_service::{TurnContext, TurnError};

/// The command tool's name (`/context` dispatches to it).
pub(crate) const CONTEXT_COMMAND: &str = "context";

/// `/context`.
pub(super) struct ContextCommand;

#[async_trait]
impl RuntimeTool for ContextCommand {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: CONTEXT_COMMAND.to_owned(),
            description: "List what this session's requests carry, with sizes (/context)."
                .to_owned(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {"mode": {"type": "string", "enum": ["list", "detail"]}},
            }),
        }
    }

    fn command_only(&self) -> bool {
        true
    }

    async fn call(&self, context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError> {
        let Some(prompt) = context.prompt else {
            return Ok(ToolOutcome::Done(ToolOutput::error(
                "The prompt context is not available.",
            )));
        };
        let detail = context.call.input["mode"] == "detail";
        Ok(ToolOutcome::Done(ToolOutput::ok(render_context(
            prompt,
            context.state,
            detail,
        ))))
    }
}

/// What `/context` (and `clawless sessions context`) says of `state`'s requests built from
/// `prompt` (fitted to its window); `detail` lists every tool, not only the largest.
pub(crate) fn render_context(prompt: &TurnContext, state: &SessionState, detail: bool) -> String {
    let view = state.view();
    let report = ContextReport {
        system: &prompt.system,
        tools: &prompt.tools,
        fixed_tokens: prompt.fixed_tokens,
        shortened: prompt
            .shortened
            .iter()
            .map(|step| step.describe())
            .collect(),
        transcript: PartSize::tokens(messages_tokens(&state.messages())),
        summary: view.summary.map(PartSize::of),
        window: prompt.window,
    };
    report.render(detail)
}

/// A part's size.
#[derive(Debug, Clone, Copy)]
struct PartSize {
    chars: Option<usize>,
    tokens: u64,
}

impl PartSize {
    fn of(text: &str) -> Self {
        Self {
            chars: Some(text.chars().count()),
            tokens: text_tokens(text),
        }
    }

    fn tokens(tokens: u64) -> Self {
        Self {
            chars: None,
            tokens,
        }
    }

    fn render(self) -> String {
        match self.chars {
            Some(chars) => format!("{chars} chars, ~{} tok", self.tokens),
            None => format!("~{} tok", self.tokens),
        }
    }
}

/// A part of the prompt by its title (a section) or path (a workspace file).
type NamedPart = (String, PartSize);

/// What `/context` reports.
struct ContextReport<'a> {
    system: &'a str,
    tools: &'a [ToolSpec],
    fixed_tokens: u64,
    shortened: Vec<&'static str>,
    transcript: PartSize,
    summary: Option<PartSize>,
    window: u64,
}

impl ContextReport<'_> {
    fn render(&self, detail: bool) -> String {
        let mut lines = vec![
            "🧠 Context".to_owned(),
            format!(
                "Window: {} tok. Fixed part (system prompt + tool schemas): ~{} tok ({}%).",
                self.window,
                self.fixed_tokens,
                self.fixed_tokens * 100 / self.window.max(1)
            ),
            format!("System prompt: {}", PartSize::of(self.system).render()),
        ];
        let (sections, files) = prompt_parts(self.system);
        for (title, size) in &sections {
            lines.push(format!("- {title}: {}", size.render()));
        }
        lines.push(format!("Project Context files: {}", files.len()));
        for (path, size) in &files {
            lines.push(format!("- {path}: {}", size.render()));
        }
        let schemas = serde_json::to_string(self.tools).unwrap_or_default();
        lines.push(format!(
            "Tool schemas: {} tools, {}",
            self.tools.len(),
            PartSize::of(&schemas).render()
        ));
        let mut tools: Vec<(String, PartSize)> = self
            .tools
            .iter()
            .map(|tool| {
                let json = serde_json::to_string(tool).unwrap_or_default();
                (tool.name.clone(), PartSize::of(&json))
            })
            .collect();
        if !detail {
            tools.sort_by_key(|(_, size)| std::cmp::Reverse(size.tokens));
            tools.truncate(5);
            lines.push("Largest (/context detail lists every tool):".to_owned());
        }
        for (name, size) in &tools {
            lines.push(format!("- {name}: {}", size.render()));
        }
        lines.push(format!("Transcript: {}", self.transcript.render()));
        lines.push(match self.summary {
            Some(size) => format!("Summary: {}", size.render()),
            None => "Summary: none".to_owned(),
        });
        if self.shortened.is_empty() {
            lines.push("Shortened for the window: nothing.".to_owned());
        } else {
            lines.push(format!(
                "Shortened for the window: {}.",
                self.shortened.join("; ")
            ));
        }
        lines.join("\n")
    }
}

/// The prompt's own sections that follow Project Context (a heading inside a workspace
/// file is the file's).
const SECTIONS_AFTER_FILES: [&str; 5] = [
    "Silent Replies",
    "Group Chat Context",
    "Subagent Context",
    "Heartbeats",
    "Runtime",
];

/// The prompt's sections (by their `## ` heading) and its Project Context files (whose
/// headings are their paths), with their sizes.
fn prompt_parts(system: &str) -> (Vec<NamedPart>, Vec<NamedPart>) {
    let mut sections = Vec::new();
    let mut files = Vec::new();
    let mut part = ("Identity".to_owned(), String::new(), false);
    let mut in_files = false;
    for line in system.lines() {
        let heading = line.strip_prefix("## ").or_else(|| line.strip_prefix("# "));
        let next = match heading.map(str::trim) {
            Some(title @ ("Project Context" | "Dynamic Project Context")) => {
                in_files = true;
                Some((false, title))
            }
            Some(title) if SECTIONS_AFTER_FILES.contains(&title) => {
                in_files = false;
                Some((false, title))
            }
            Some(title) if in_files && line.starts_with("## ") && title.ends_with(".md") => {
                Some((true, title))
            }
            Some(title) if !in_files => Some((false, title)),
            _ => None,
        };
        if let Some((is_file, title)) = next {
            let (done_title, body, done_is_file) =
                std::mem::replace(&mut part, (title.to_owned(), String::new(), is_file));
            if !body.is_empty() {
                let entry = (done_title, PartSize::of(&body));
                match done_is_file {
                    true => files.push(entry),
                    false => sections.push(entry),
                }
            }
        }
        part.1.push_str(line);
        part.1.push('\n');
    }
    let (title, body, is_file) = part;
    if !body.is_empty() {
        match is_file {
            true => files.push((title, PartSize::of(&body))),
            false => sections.push((title, PartSize::of(&body))),
        }
    }
    (sections, files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_splits_into_sections_and_project_context_files() {
        let system = "You are…\n## Tooling\n- read\n## Safety\nBe safe.\n# Project Context\nLoaded:\n## /ws/AGENTS.md\n# AGENTS.md\n## Rules\nbe nice\n## /ws/SOUL.md\ncalm\n## Silent Replies\nNO_REPLY\n# Dynamic Project Context\n## /ws/HEARTBEAT.md\n# Checks go below\n- inbox\n## Runtime\nRuntime: agent=main";
        let (sections, files) = prompt_parts(system);
        let titles: Vec<&str> = sections.iter().map(|(title, _)| title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "Identity",
                "Tooling",
                "Safety",
                "Project Context",
                "Silent Replies",
                "Dynamic Project Context",
                "Runtime"
            ]
        );
        let paths: Vec<&str> = files.iter().map(|(path, _)| path.as_str()).collect();
        assert_eq!(paths, ["/ws/AGENTS.md", "/ws/SOUL.md", "/ws/HEARTBEAT.md"]);
        assert!(files[0].1.chars.unwrap_or(0) > "## /ws/AGENTS.md".len() + 20);
    }
}
