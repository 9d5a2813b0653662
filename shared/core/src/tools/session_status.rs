//! The `session_status` tool: a short status card built from [`super::SessionFacts`].
//!
//! It is also how the model learns the current date and time (the system prompt only names
//! the time zone, to keep the prompt cacheable). The facts are supplied by the turn engine;
//! this tool reads no clock and no store.

use async_trait::async_trait;
use serde_json::{Value, json};

use clawless_base::model::ToolSpec;

use super::{SessionFacts, Tool, ToolContext, ToolOutput};

/// `session_status`: session, model, usage and the current time.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionStatusTool;

#[async_trait]
impl Tool for SessionStatusTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "session_status".to_owned(),
            description: "This session's model, usage, and the current date and time.".to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {},
                "additionalProperties": false
            }),
        }
    }

    async fn run(&self, _input: &Value, context: &ToolContext) -> ToolOutput {
        ToolOutput::ok(render_status(&context.session))
    }
}

/// The status card; lines whose fact is unknown are left out.
pub fn render_status(facts: &SessionFacts) -> String {
    let mut lines = vec!["📊 Session status".to_owned()];
    let mut push = |label: &str, value: &str| {
        if !value.is_empty() {
            lines.push(format!("{label}: {value}"));
        }
    };
    let session = match (facts.session_key.as_str(), facts.session_id.as_str()) {
        (key, "") => key.to_owned(),
        ("", id) => format!("(id {id})"),
        (key, id) => format!("{key} (id {id})"),
    };
    push("Session", &session);
    push("Agent", &facts.agent_id);
    push("Model", &facts.model);
    push("Channel", &facts.channel);
    push("Transcript steps", &facts.transcript_steps.to_string());
    push(
        "Model calls this turn",
        &facts.model_calls_this_turn.to_string(),
    );
    push(
        "Tokens",
        &format!("{} in / {} out", facts.tokens_in, facts.tokens_out),
    );
    if facts.context_window.is_some() || facts.context_tokens.is_some() {
        let usage = crate::compaction::format::format_context_usage_short(
            facts.context_tokens,
            facts.context_window,
        );
        push(
            "Context",
            &format!("{usage} · Compactions: {}", facts.compactions),
        );
    }
    push("Sandbox", &facts.sandbox);
    if let Some(media) = &facts.media {
        push("📎 Media", media);
    }
    push("Session age", &facts.session_age);
    push(
        "Last reset",
        facts
            .last_reset
            .as_deref()
            .unwrap_or("none (first generation)"),
    );
    push(
        "Time zone",
        facts.timezone.as_deref().unwrap_or("not set (UTC)"),
    );
    push("Current time (UTC)", &facts.now_rfc3339);
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::testing::InMemoryObjectStore;
    use crate::tools::Workspace;

    #[tokio::test]
    async fn session_status_lists_the_session_facts() {
        let context = ToolContext {
            workspace: Workspace {
                store: Arc::new(InMemoryObjectStore::new()),
                prefix: String::new(),
            },
            skill_sources: Vec::new(),
            home_dirs: Vec::new(),
            web: None,
            session: SessionFacts {
                session_key: "agent:main:telegram:dm:42".to_owned(),
                session_id: "s-1".to_owned(),
                agent_id: "main".to_owned(),
                model: "anthropic/claude-sonnet-4-5".to_owned(),
                channel: "telegram".to_owned(),
                transcript_steps: 12,
                model_calls_this_turn: 3,
                tokens_in: 1_200,
                tokens_out: 340,
                sandbox: "off".to_owned(),
                timezone: Some("Europe/Berlin".to_owned()),
                now_rfc3339: "2025-06-01T12:00:00Z".to_owned(),
                context_tokens: Some(12_345),
                context_window: Some(200_000),
                compactions: 2,
                session_age: "3d 4h".to_owned(),
                last_reset: Some("new at 2025-05-29T08:00:00Z".to_owned()),
                media: Some("image shown · audio ok (openai/gpt-4o-mini-transcribe)".to_owned()),
            },
            sandbox: None,
        };
        let output = SessionStatusTool.run(&json!({}), &context).await;
        assert_eq!(
            output,
            ToolOutput::ok(
                "📊 Session status\nSession: agent:main:telegram:dm:42 (id s-1)\nAgent: main\n\
                 Model: anthropic/claude-sonnet-4-5\nChannel: telegram\nTranscript steps: 12\n\
                 Model calls this turn: 3\nTokens: 1200 in / 340 out\n\
                 Context: Context 12k/200k (6%) · Compactions: 2\nSandbox: off\n\
                 📎 Media: image shown · audio ok (openai/gpt-4o-mini-transcribe)\nSession age: 3d 4h\n\
                 Last reset: new at 2025-05-29T08:00:00Z\nTime zone: Europe/Berlin\n\
                 Current time (UTC): 2025-06-01T12:00:00Z"
            )
        );
    }

    #[test]
    fn unknown_facts_are_left_out_and_a_missing_time_zone_says_utc() {
        let text = render_status(&SessionFacts::default());
        assert_eq!(
            text,
            "📊 Session status\nTranscript steps: 0\nModel calls this turn: 0\n\
             Tokens: 0 in / 0 out\nLast reset: none (first generation)\nTime zone: not set (UTC)"
        );
    }
}
