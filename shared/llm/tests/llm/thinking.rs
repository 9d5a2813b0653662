//! Thinking levels on the wire and the reasoning round trip, per provider, against recorded
//! request and response shapes: a tool-use turn's signed reasoning goes back unchanged in
//! the same turn, a completed turn's is not resent, and `off` sends no thinking fields.

use clawless_base::model::{ModelProvider, ModelRequest};
use clawless_base::thinking::ThinkingLevel;
use clawless_base::transcript::{AssistantBlock, Message, StopReason};
use clawless_llm::testing::{ScriptedReply, ScriptedServer, bedrock_client};
use clawless_llm::{AnthropicModel, ApiKey, BedrockModel, OpenAiModel};
use serde_json::{Value, json};

use crate::support::{http, read_tool, request, user};

/// A completed earlier turn whose answer came with reasoning from `api`, then a new question.
fn history(api: &str) -> Vec<Message> {
    vec![
        user("earlier question"),
        Message::Assistant {
            content: vec![
                AssistantBlock::Thinking {
                    text: "old reasoning".into(),
                    signature: Some("old-sig".into()),
                    redacted: None,
                    api: api.into(),
                },
                AssistantBlock::Text {
                    text: "earlier answer".into(),
                },
            ],
            stop_reason: StopReason::EndTurn,
        },
        user("read the file"),
    ]
}

fn at(messages: Vec<Message>, level: ThinkingLevel) -> ModelRequest {
    let mut request = request("sys", messages, vec![read_tool()]);
    request.thinking = level;
    request
}

/// The conversation after the model's tool-use answer: its message, then the tool's result.
fn continued(mut messages: Vec<Message>, answer: Vec<AssistantBlock>) -> Vec<Message> {
    messages.push(Message::Assistant {
        content: answer,
        stop_reason: StopReason::ToolUse,
    });
    messages.push(Message::ToolResult {
        tool_call_id: "call_1".into(),
        tool_name: "read".into(),
        text: "file body".into(),
        is_error: false,
    });
    messages
}

fn mentions(value: &Value, needle: &str) -> bool {
    value.to_string().contains(needle)
}

#[tokio::test]
async fn anthropic_signed_thinking_goes_back_unchanged_within_the_tool_use_turn() {
    let server = ScriptedServer::start().await;
    server.push(
        "/v1/messages",
        ScriptedReply::json(json!({
            "content": [
                { "type": "thinking", "thinking": "I should read it.", "signature": "EqQBCkgIARABGAIiQ" },
                { "type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix" },
                { "type": "tool_use", "id": "call_1", "name": "read", "input": { "path": "a.txt" } },
            ],
            "stop_reason": "tool_use",
            "usage": { "input_tokens": 10, "output_tokens": 40 },
        })),
    );
    server.push(
        "/v1/messages",
        ScriptedReply::json(json!({
            "content": [{ "type": "text", "text": "done" }],
            "stop_reason": "end_turn",
            "usage": { "input_tokens": 10, "output_tokens": 2 },
        })),
    );
    let model = AnthropicModel::new(http(), "claude-sonnet-4-5")
        .with_api_key(ApiKey::new("sk-ant-test"))
        .with_base_url(server.base_url());
    // GIVEN thinking high: the first call carries the budget and a raised max_tokens
    let first = model
        .complete(&at(history("anthropic"), ThinkingLevel::High))
        .await
        .expect("first answer");
    let sent = &server.requests_to("/v1/messages")[0];
    assert_eq!(
        sent.body["thinking"],
        json!({ "type": "enabled", "budget_tokens": 16384 })
    );
    assert_eq!(sent.body["max_tokens"], json!(512 + 16384));
    // AND the earlier turn's reasoning is not resent
    assert!(!mentions(&sent.body["messages"], "old reasoning"));
    assert!(!mentions(&sent.body["messages"], "old-sig"));
    // WHEN the tool's result goes back
    let messages = continued(history("anthropic"), first.content);
    model
        .complete(&at(messages, ThinkingLevel::High))
        .await
        .expect("second answer");
    // THEN the assistant message starts with both thinking blocks exactly as received
    let sent = &server.requests_to("/v1/messages")[1];
    let assistant = &sent.body["messages"][3];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(
        assistant["content"][0],
        json!({ "type": "thinking", "thinking": "I should read it.", "signature": "EqQBCkgIARABGAIiQ" })
    );
    assert_eq!(
        assistant["content"][1],
        json!({ "type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix" })
    );
    assert_eq!(assistant["content"][2]["type"], "tool_use");
}

#[tokio::test]
async fn anthropic_off_sends_no_thinking_and_drops_stored_reasoning() {
    let server = ScriptedServer::start().await;
    server.push(
        "/v1/messages",
        ScriptedReply::json(json!({
            "content": [{ "type": "text", "text": "ok" }],
            "stop_reason": "end_turn",
        })),
    );
    let model = AnthropicModel::new(http(), "claude-sonnet-4-5")
        .with_api_key(ApiKey::new("sk-ant-test"))
        .with_base_url(server.base_url());
    let answer = vec![
        AssistantBlock::Thinking {
            text: "current".into(),
            signature: Some("s".into()),
            redacted: None,
            api: "anthropic".into(),
        },
        AssistantBlock::ToolCall(crate::support::tool_call("call_1", "read", json!({}))),
    ];
    let messages = continued(history("anthropic"), answer);
    model
        .complete(&at(messages, ThinkingLevel::Off))
        .await
        .expect("answer");
    let sent = &server.requests_to("/v1/messages")[0];
    assert!(sent.body.get("thinking").is_none());
    assert_eq!(sent.body["max_tokens"], json!(512));
    assert!(!mentions(&sent.body["messages"], "\"thinking\""));
}

#[tokio::test]
async fn anthropic_thinking_waits_when_the_turn_has_unsigned_tool_calls() {
    // GIVEN a tool-use turn begun with thinking off (or by another provider)
    let server = ScriptedServer::start().await;
    server.push(
        "/v1/messages",
        ScriptedReply::json(json!({
            "content": [{ "type": "text", "text": "ok" }],
            "stop_reason": "end_turn",
        })),
    );
    let model = AnthropicModel::new(http(), "claude-sonnet-4-5")
        .with_api_key(ApiKey::new("sk-ant-test"))
        .with_base_url(server.base_url());
    let answer = vec![AssistantBlock::ToolCall(crate::support::tool_call(
        "call_1",
        "read",
        json!({}),
    ))];
    let messages = continued(history("anthropic"), answer);
    // WHEN continued at high
    model
        .complete(&at(messages, ThinkingLevel::High))
        .await
        .expect("answer");
    // THEN thinking stays off for that request (Claude would refuse it) instead of failing
    let sent = &server.requests_to("/v1/messages")[0];
    assert!(sent.body.get("thinking").is_none());
}

#[tokio::test]
async fn openai_effort_and_reasoning_content_round_trip() {
    let server = ScriptedServer::start().await;
    let route = "/v1/chat/completions";
    server.push(
        route,
        ScriptedReply::json(json!({
            "choices": [{ "index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "reasoning_content": "Need the file first.",
                "tool_calls": [{ "id": "call_1", "type": "function", "function": { "name": "read", "arguments": "{\"path\":\"a.txt\"}" } }],
            }}],
            "usage": { "prompt_tokens": 10, "completion_tokens": 20 },
        })),
    );
    server.push(
        route,
        ScriptedReply::json(json!({
            "choices": [{ "index": 0, "finish_reason": "stop", "message": { "role": "assistant", "content": "done" } }],
        })),
    );
    let model = OpenAiModel::new(http(), "gpt-5-mini")
        .with_api_key(ApiKey::new("sk-openai-test"))
        .with_base_url(format!("{}/v1", server.base_url()));
    // GIVEN medium: the request names the effort
    let first = model
        .complete(&at(history("openai"), ThinkingLevel::Medium))
        .await
        .expect("first answer");
    let sent = &server.requests_to(route)[0];
    assert_eq!(sent.body["reasoning_effort"], "medium");
    assert!(!mentions(&sent.body["messages"], "old reasoning"));
    // AND the reasoning is read as a thinking block
    assert_eq!(
        first.content[0],
        AssistantBlock::Thinking {
            text: "Need the file first.".into(),
            signature: None,
            redacted: None,
            api: "openai".into(),
        }
    );
    // WHEN the tool result goes back (xhigh on a model without it: clamped to high)
    let messages = continued(history("openai"), first.content);
    model
        .complete(&at(messages, ThinkingLevel::Xhigh))
        .await
        .expect("second answer");
    let sent = &server.requests_to(route)[1];
    assert_eq!(sent.body["reasoning_effort"], "high");
    // THEN only the current turn's assistant message carries its reasoning back
    let assistant = sent.body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|message| message["role"] == "assistant")
        .cloned()
        .collect::<Vec<_>>();
    assert!(assistant[0].get("reasoning_content").is_none());
    assert_eq!(assistant[1]["reasoning_content"], "Need the file first.");
    assert_eq!(assistant[1]["tool_calls"][0]["id"], "call_1");
}

#[tokio::test]
async fn openai_off_sends_no_effort() {
    let server = ScriptedServer::start().await;
    let route = "/v1/chat/completions";
    server.push(
        route,
        ScriptedReply::json(json!({
            "choices": [{ "index": 0, "finish_reason": "stop", "message": { "role": "assistant", "content": "hi" } }],
        })),
    );
    let model = OpenAiModel::new(http(), "gpt-5.4")
        .with_api_key(ApiKey::new("sk-openai-test"))
        .with_base_url(format!("{}/v1", server.base_url()));
    model
        .complete(&at(vec![user("hi")], ThinkingLevel::Off))
        .await
        .expect("answer");
    assert!(
        server.requests_to(route)[0]
            .body
            .get("reasoning_effort")
            .is_none()
    );
}

#[tokio::test]
async fn bedrock_claude_reasoning_content_round_trip_with_signature() {
    const MODEL_ID: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
    let route = format!("/model/{MODEL_ID}/converse");
    let server = ScriptedServer::start().await;
    server.push(
        &route,
        ScriptedReply::json(json!({
            "output": { "message": { "role": "assistant", "content": [
                { "reasoningContent": { "reasoningText": { "text": "Read it first.", "signature": "sig-bedrock-1" } } },
                { "reasoningContent": { "redactedContent": "AQID" } },
                { "toolUse": { "toolUseId": "call_1", "name": "read", "input": { "path": "a.txt" } } },
            ] } },
            "stopReason": "tool_use",
            "usage": { "inputTokens": 10, "outputTokens": 20, "totalTokens": 30 },
            "metrics": { "latencyMs": 5 },
        })),
    );
    server.push(
        &route,
        ScriptedReply::json(json!({
            "output": { "message": { "role": "assistant", "content": [{ "text": "done" }] } },
            "stopReason": "end_turn",
            "usage": { "inputTokens": 10, "outputTokens": 2, "totalTokens": 12 },
            "metrics": { "latencyMs": 5 },
        })),
    );
    let model = BedrockModel::new(&bedrock_client(&server.base_url()), MODEL_ID);
    // GIVEN thinking low: Claude's thinking object in additionalModelRequestFields
    let first = model
        .complete(&at(history("bedrock"), ThinkingLevel::Low))
        .await
        .expect("first answer");
    let sent = &server.requests_to(&route)[0];
    assert_eq!(
        sent.body["additionalModelRequestFields"],
        json!({ "thinking": { "type": "enabled", "budget_tokens": 2048 } })
    );
    assert_eq!(
        sent.body["inferenceConfig"],
        json!({ "maxTokens": 512 + 2048 })
    );
    assert!(!mentions(&sent.body["messages"], "old reasoning"));
    assert_eq!(
        first.content[0],
        AssistantBlock::Thinking {
            text: "Read it first.".into(),
            signature: Some("sig-bedrock-1".into()),
            redacted: None,
            api: "bedrock".into(),
        }
    );
    // WHEN the result goes back
    let messages = continued(history("bedrock"), first.content);
    model
        .complete(&at(messages, ThinkingLevel::Low))
        .await
        .expect("second answer");
    // THEN the reasoning and the redacted bytes precede the tool use, unchanged
    let sent = &server.requests_to(&route)[1];
    let assistant = &sent.body["messages"][3];
    assert_eq!(
        assistant["content"][0],
        json!({ "reasoningContent": { "reasoningText": { "text": "Read it first.", "signature": "sig-bedrock-1" } } })
    );
    assert_eq!(
        assistant["content"][1],
        json!({ "reasoningContent": { "redactedContent": "AQID" } })
    );
    assert!(assistant["content"][2].get("toolUse").is_some());
}

#[tokio::test]
async fn bedrock_non_claude_models_get_no_thinking_fields() {
    const MODEL_ID: &str = "amazon.nova-lite-v1:0";
    let route = format!("/model/{MODEL_ID}/converse");
    let server = ScriptedServer::start().await;
    server.push(
        &route,
        ScriptedReply::json(json!({
            "output": { "message": { "role": "assistant", "content": [{ "text": "hi" }] } },
            "stopReason": "end_turn",
            "usage": { "inputTokens": 1, "outputTokens": 1, "totalTokens": 2 },
            "metrics": { "latencyMs": 5 },
        })),
    );
    let model = BedrockModel::new(&bedrock_client(&server.base_url()), MODEL_ID);
    model
        .complete(&at(vec![user("hi")], ThinkingLevel::High))
        .await
        .expect("answer");
    let sent = &server.requests_to(&route)[0];
    assert!(sent.body.get("additionalModelRequestFields").is_none());
    assert_eq!(sent.body["inferenceConfig"], json!({ "maxTokens": 512 }));
}
