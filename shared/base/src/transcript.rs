//! The provider-neutral conversation: user messages, assistant turns with tool calls, tool results.
//!
//! Providers translate these to and from their wire formats (`clawless-llm`); the turn engine
//! derives them from persisted session steps. Nothing here knows a provider's JSON.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One tool invocation requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider-issued call id, echoed back in the matching [`Message::ToolResult`].
    pub id: String,
    /// Tool name exactly as the model sent it.
    pub name: String,
    /// Arguments object (JSON). Providers that stream arguments as text hand over the parsed value.
    pub input: Value,
}

/// One block of an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum AssistantBlock {
    /// Visible text.
    Text {
        /// The text.
        text: String,
    },
    /// A request to run a tool.
    ToolCall(ToolCall),
    /// The model's reasoning before what follows. Never shown as the answer; sent back to the
    /// provider that wrote it where its API needs it (the same tool-use turn), with its
    /// signature unchanged.
    #[serde(rename_all = "camelCase")]
    Thinking {
        /// The reasoning text (a summary for some providers; empty when only an encrypted or
        /// redacted form was given).
        #[serde(default)]
        text: String,
        /// The provider's signature over the reasoning, echoed back verbatim.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
        /// Reasoning the provider only handed over encrypted (Anthropic `redacted_thinking`
        /// data, Bedrock `redactedContent` as base64), echoed back verbatim.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        redacted: Option<String>,
        /// The API that wrote it (`anthropic`, `openai`, `bedrock`): only that API is sent it.
        #[serde(default)]
        api: String,
    },
}

/// Why the model stopped producing output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    /// The model finished its answer.
    #[default]
    EndTurn,
    /// The model wants tool results before going on.
    ToolUse,
    /// The output hit the token limit.
    MaxTokens,
    /// The provider reported an error inside the response.
    Error,
    /// The request was aborted.
    Aborted,
}

/// One message of the conversation sent to a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "camelCase")]
pub enum Message {
    /// What the user (or a channel on their behalf) said.
    User {
        /// Message text.
        text: String,
    },
    /// What the model answered.
    Assistant {
        /// Text and tool calls, in the order the model produced them.
        content: Vec<AssistantBlock>,
        /// Why it stopped.
        #[serde(default)]
        stop_reason: StopReason,
    },
    /// The result of one tool call.
    #[serde(rename_all = "camelCase")]
    ToolResult {
        /// The [`ToolCall::id`] this answers.
        tool_call_id: String,
        /// Name of the tool that ran.
        tool_name: String,
        /// Text the model sees.
        text: String,
        /// True when the tool failed or was refused.
        #[serde(default)]
        is_error: bool,
    },
}

impl Message {
    /// The tool calls of an assistant message (empty for other roles).
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        let blocks: &[AssistantBlock] = match self {
            Self::Assistant { content, .. } => content,
            _ => &[],
        };
        blocks.iter().filter_map(|block| match block {
            AssistantBlock::ToolCall(call) => Some(call),
            AssistantBlock::Text { .. } | AssistantBlock::Thinking { .. } => None,
        })
    }

    /// The visible text of an assistant message, blocks joined with newlines.
    pub fn assistant_text(&self) -> Option<String> {
        match self {
            Self::Assistant { content, .. } => Some(assistant_text(content)),
            _ => None,
        }
    }
}

/// Joins the text blocks of an assistant message with newlines.
pub fn assistant_text(content: &[AssistantBlock]) -> String {
    let parts: Vec<&str> = content
        .iter()
        .filter_map(|block| match block {
            AssistantBlock::Text { text } => Some(text.as_str()),
            AssistantBlock::ToolCall(_) | AssistantBlock::Thinking { .. } => None,
        })
        .collect();
    parts.join("\n")
}

/// The reasoning text of an assistant message's thinking blocks, joined with blank lines
/// (redacted reasoning has none).
pub fn thinking_text(content: &[AssistantBlock]) -> String {
    let parts: Vec<&str> = content
        .iter()
        .filter_map(|block| match block {
            AssistantBlock::Thinking { text, .. } if !text.trim().is_empty() => Some(text.trim()),
            _ => None,
        })
        .collect();
    parts.join("\n\n")
}

/// Prefix of the message that shows a summary to the model.
pub const SUMMARY_MESSAGE_PREFIX: &str =
    "The conversation history before this point was compacted into the following summary:";

/// The user message that stands for the compacted history in later requests.
pub fn summary_message(summary: &str) -> Message {
    Message::User {
        text: format!("{SUMMARY_MESSAGE_PREFIX}\n\n<summary>\n{summary}\n</summary>"),
    }
}
