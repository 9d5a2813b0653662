//! Anthropic Messages against the scripted server.

use clawless_base::model::{CACHE_BOUNDARY, ModelError, ModelProvider};
use clawless_base::transcript::{AssistantBlock, StopReason};
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_llm::{AnthropicModel, ApiKey};
use serde_json::json;

use crate::support::{
    conversation_with_tool_results, exec_tool, http, read_tool, request, tool_call, user,
};

const ROUTE: &str = "/v1/messages";

fn model(server: &ScriptedServer) -> AnthropicModel {
    AnthropicModel::new(http(), "claude-sonnet-4-5")
        .with_api_key(ApiKey::new("sk-ant-test"))
        .with_base_url(server.base_url())
}

#[tokio::test]
async fn anthropic_text_answer_reads_content_usage_and_headers() {
    // GIVEN a server that answers with text and cache usage
    let server = ScriptedServer::start().await;
    server.push(
        ROUTE,
        ScriptedReply::json(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{ "type": "text", "text": "Hello there" }],
            "stop_reason": "end_turn",
            "usage": { "input_tokens": 12, "output_tokens": 3, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 40 },
        })),
    );
    // WHEN asked
    let response = model(&server)
        .complete(&request("You are helpful.", vec![user("hi")], vec![]))
        .await
        .expect("answer");
    // THEN the answer, stop reason and usage are read
    assert_eq!(
        response.content,
        vec![AssistantBlock::Text {
            text: "Hello there".into()
        }]
    );
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(response.model, "anthropic/claude-sonnet-4-5");
    assert_eq!(
        (
            response.usage.input_tokens,
            response.usage.output_tokens,
            response.usage.cache_read_tokens,
            response.usage.cache_write_tokens
        ),
        (12, 3, 900, 40)
    );
    // AND the request carries the key, version and JSON body
    let sent = &server.requests_to(ROUTE)[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(sent.body["model"], "claude-sonnet-4-5");
    assert_eq!(sent.body["max_tokens"], 512);
    assert_eq!(
        sent.body["messages"],
        json!([{ "role": "user", "content": [{ "type": "text", "text": "hi" }] }])
    );
}

#[tokio::test]
async fn anthropic_tool_call_and_results_round_trip() {
    // GIVEN a server that first asks for a tool, then answers
    let server = ScriptedServer::start().await;
    server.push(
        ROUTE,
        ScriptedReply::json(json!({
            "content": [
                { "type": "text", "text": "Let me look." },
                { "type": "tool_use", "id": "toolu_01", "name": "read", "input": { "path": "/skills/weather/SKILL.md" } },
            ],
            "stop_reason": "tool_use",
            "usage": { "input_tokens": 5, "output_tokens": 9 },
        })),
    );
    server.push(
        ROUTE,
        ScriptedReply::json(json!({
            "content": [{ "type": "text", "text": "It says to use wttr.in." }],
            "stop_reason": "end_turn",
            "usage": { "input_tokens": 30, "output_tokens": 7 },
        })),
    );
    let model = model(&server);

    // WHEN the model asks for a tool
    let first = model
        .complete(&request("sys", vec![user("weather?")], vec![read_tool()]))
        .await
        .expect("tool call");
    // THEN the call is parsed with its id and input
    assert_eq!(first.stop_reason, StopReason::ToolUse);
    assert_eq!(
        first.content[1],
        AssistantBlock::ToolCall(tool_call(
            "toolu_01",
            "read",
            json!({ "path": "/skills/weather/SKILL.md" })
        ))
    );

    // WHEN the results are sent back
    let second = model
        .complete(&request(
            "sys",
            conversation_with_tool_results(),
            vec![read_tool()],
        ))
        .await
        .expect("answer");
    assert_eq!(
        second.content,
        vec![AssistantBlock::Text {
            text: "It says to use wttr.in.".into()
        }]
    );

    // THEN both results travel in one user message of tool_result blocks, ids echoed
    let sent = &server.requests_to(ROUTE)[1];
    assert_eq!(
        sent.body["messages"],
        json!([
            { "role": "user", "content": [{ "type": "text", "text": "What does the weather skill say?" }] },
            { "role": "assistant", "content": [
                { "type": "text", "text": "Let me look." },
                { "type": "tool_use", "id": "call_1", "name": "read", "input": { "path": "/skills/weather/SKILL.md" } },
                { "type": "tool_use", "id": "call_2", "name": "read", "input": { "path": "/missing" } },
            ] },
            { "role": "user", "content": [
                { "type": "tool_result", "tool_use_id": "call_1", "content": "# Weather\nUse wttr.in", "is_error": false },
                { "type": "tool_result", "tool_use_id": "call_2", "content": "file not found", "is_error": true },
            ] },
        ])
    );
    assert_eq!(
        sent.body["tools"][0],
        json!({
            "name": "read",
            "description": "Read a file",
            "input_schema": { "type": "object", "properties": { "path": { "type": "string" } }, "required": ["path"] },
            "cache_control": { "type": "ephemeral" },
        })
    );
}

#[tokio::test]
async fn anthropic_marks_the_stable_system_prompt_and_last_tool_for_caching() {
    let server = ScriptedServer::start().await;
    server.push(
        ROUTE,
        ScriptedReply::json(
            json!({ "content": [{ "type": "text", "text": "ok" }], "stop_reason": "end_turn" }),
        ),
    );
    let system = format!("You are clawless.\n## Skills{CACHE_BOUNDARY}Time: 12:00");
    model(&server)
        .complete(&request(
            &system,
            vec![user("hi")],
            vec![read_tool(), exec_tool()],
        ))
        .await
        .expect("answer");
    let sent = &server.requests_to(ROUTE)[0];
    assert_eq!(
        sent.body["system"],
        json!([
            { "type": "text", "text": "You are clawless.\n## Skills", "cache_control": { "type": "ephemeral" } },
            { "type": "text", "text": "Time: 12:00" },
        ])
    );
    assert!(sent.body["tools"][0].get("cache_control").is_none());
    assert_eq!(
        sent.body["tools"][1]["cache_control"],
        json!({ "type": "ephemeral" })
    );
    assert!(!sent.raw_body.contains("CLAWLESS_CACHE_BOUNDARY"));
}

#[tokio::test]
async fn anthropic_overloaded_529_is_a_retryable_server_error() {
    let server = ScriptedServer::start().await;
    server.push(
        ROUTE,
        ScriptedReply::status_json(529, json!({ "type": "error", "error": { "type": "overloaded_error", "message": "Overloaded" } })),
    );
    let err = model(&server)
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect_err("overloaded");
    assert!(
        matches!(err, ModelError::Server { status: 529, .. }),
        "{err:?}"
    );
    assert!(err.is_retryable());
}

#[tokio::test]
async fn anthropic_rejected_key_is_an_auth_error_with_the_message() {
    let server = ScriptedServer::start().await;
    server.push(
        ROUTE,
        ScriptedReply::status_json(401, json!({ "type": "error", "error": { "type": "authentication_error", "message": "invalid x-api-key" } })),
    );
    let err = model(&server)
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect_err("401");
    assert!(
        matches!(&err, ModelError::Auth { message, .. } if message == "invalid x-api-key"),
        "{err:?}"
    );
}

#[tokio::test]
async fn anthropic_without_a_key_fails_before_any_network_call() {
    // The public endpoint is never contacted: the error comes before the request.
    let model = AnthropicModel::new(http(), "claude-sonnet-4-5");
    let err = model
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect_err("no key");
    assert!(
        matches!(&err, ModelError::Auth { message, .. } if message.contains("ANTHROPIC_API_KEY")),
        "{err:?}"
    );
}
