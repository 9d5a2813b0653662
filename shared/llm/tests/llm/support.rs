//! Builders shared by the integration tests.

use clawless_base::model::{ModelRequest, ToolSpec};
use clawless_base::transcript::{AssistantBlock, Message, StopReason, ToolCall};
use clawless_llm::HttpClient;
use serde_json::{Value, json};

pub(crate) fn http() -> HttpClient {
    HttpClient::new().expect("http client")
}

pub(crate) fn user(text: &str) -> Message {
    Message::User { text: text.into() }
}

pub(crate) fn request(system: &str, messages: Vec<Message>, tools: Vec<ToolSpec>) -> ModelRequest {
    ModelRequest {
        system: system.into(),
        messages,
        tools,
        max_tokens: 512,
        images: Vec::new(),
        thinking: Default::default(),
    }
}

pub(crate) fn read_tool() -> ToolSpec {
    ToolSpec {
        name: "read".into(),
        description: "Read a file".into(),
        input_schema: json!({
            "type": "object",
            "properties": { "path": { "type": "string" } },
            "required": ["path"],
        }),
    }
}

pub(crate) fn exec_tool() -> ToolSpec {
    ToolSpec {
        name: "exec".into(),
        description: "Run a command".into(),
        input_schema: json!({ "type": "object", "properties": { "command": { "type": "string" } } }),
    }
}

pub(crate) fn tool_call(id: &str, name: &str, input: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        input,
    }
}

/// The conversation after the model called `read` twice in one turn and both results came back
/// (the second one failed).
pub(crate) fn conversation_with_tool_results() -> Vec<Message> {
    vec![
        user("What does the weather skill say?"),
        Message::Assistant {
            content: vec![
                AssistantBlock::Text {
                    text: "Let me look.".into(),
                },
                AssistantBlock::ToolCall(tool_call(
                    "call_1",
                    "read",
                    json!({ "path": "/skills/weather/SKILL.md" }),
                )),
                AssistantBlock::ToolCall(tool_call(
                    "call_2",
                    "read",
                    json!({ "path": "/missing" }),
                )),
            ],
            stop_reason: StopReason::ToolUse,
        },
        Message::ToolResult {
            tool_call_id: "call_1".into(),
            tool_name: "read".into(),
            text: "# Weather\nUse wttr.in".into(),
            is_error: false,
        },
        Message::ToolResult {
            tool_call_id: "call_2".into(),
            tool_name: "read".into(),
            text: "file not found".into(),
            is_error: true,
        },
    ]
}
