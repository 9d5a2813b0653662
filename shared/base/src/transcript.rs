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
            AssistantBlock::Text { .. } => None,
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
            AssistantBlock::ToolCall(_) => None,
        })
        .collect();
    parts.join("\n")
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
