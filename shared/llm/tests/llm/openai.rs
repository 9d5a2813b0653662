//! OpenAI Chat Completions (and compatible servers) against the scripted server.

use clawless_base::model::{CACHE_BOUNDARY, ModelError, ModelProvider};
use clawless_base::transcript::{AssistantBlock, StopReason};
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_llm::{ApiKey, OpenAiModel};
use serde_json::json;

use crate::support::{conversation_with_tool_results, http, read_tool, request, tool_call, user};

const ROUTE: &str = "/v1/chat/completions";

fn model(server: &ScriptedServer) -> OpenAiModel {
    OpenAiModel::new(http(), "gpt-4o-mini")
        .with_api_key(ApiKey::new("sk-openai-test"))
        .with_base_url(format!("{}/v1", server.base_url()))
}

fn text_reply(text: &str) -> ScriptedReply {
    ScriptedReply::json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 1200, "completion_tokens": 8, "prompt_tokens_details": { "cached_tokens": 1024 } },
    }))
}

#[tokio::test]
async fn openai_text_answer_reads_content_usage_and_headers() {
    // GIVEN a server answering with text and a cached prompt prefix
    let server = ScriptedServer::start().await;
    server.push(ROUTE, text_reply("Hi!"));
    // WHEN asked with a system prompt that has a cache boundary
    let system = format!("Stable part{CACHE_BOUNDARY}Dynamic part");
    let response = model(&server)
        .complete(&request(&system, vec![user("hello")], vec![]))
        .await
        .expect("answer");
    // THEN text, stop reason and usage (cached share split out) are read
    assert_eq!(
        response.content,
        vec![AssistantBlock::Text { text: "Hi!".into() }]
    );
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(response.model, "openai/gpt-4o-mini");
    assert_eq!(response.usage.input_tokens, 176);
    assert_eq!(response.usage.cache_read_tokens, 1024);
    assert_eq!(response.usage.output_tokens, 8);
    // AND the request has a bearer key, the system message first, no cache markers
    let sent = &server.requests_to(ROUTE)[0];
    assert_eq!(sent.header("authorization"), Some("Bearer sk-openai-test"));
    assert_eq!(
        sent.body["messages"],
        json!([
            { "role": "system", "content": "Stable part\nDynamic part" },
            { "role": "user", "content": "hello" },
        ])
    );
    assert_eq!(sent.body["max_tokens"], 512);
    assert!(!sent.raw_body.contains("cache_control"));
}

#[tokio::test]
async fn openai_tool_call_and_results_round_trip() {
    // GIVEN a server that first calls a tool (arguments as a JSON string), then answers
    let server = ScriptedServer::start().await;
    server.push(
        ROUTE,
        ScriptedReply::json(json!({
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [{
                        "id": "call_abc", "type": "function",
                        "function": { "name": "read", "arguments": "{\"path\":\"/skills/weather/SKILL.md\"}" },
                    }],
                },
                "finish_reason": "tool_calls",
            }],
            "usage": { "prompt_tokens": 50, "completion_tokens": 12 },
        })),
    );
    server.push(ROUTE, text_reply("It says to use wttr.in."));
    let model = model(&server);

    // WHEN the model asks for a tool
    let first = model
        .complete(&request("sys", vec![user("weather?")], vec![read_tool()]))
        .await
        .expect("tool call");
    // THEN the arguments string is parsed into JSON
    assert_eq!(first.stop_reason, StopReason::ToolUse);
    assert_eq!(
        first.content,
        vec![AssistantBlock::ToolCall(tool_call(
            "call_abc",
            "read",
            json!({ "path": "/skills/weather/SKILL.md" })
        ))]
    );
    let sent = &server.requests_to(ROUTE)[0];
    assert_eq!(
        sent.body["tools"],
        json!([{
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file",
                "parameters": { "type": "object", "properties": { "path": { "type": "string" } }, "required": ["path"] },
            },
        }])
    );

    // WHEN the results are sent back
    model
        .complete(&request(
            "sys",
            conversation_with_tool_results(),
            vec![read_tool()],
        ))
        .await
        .expect("answer");
    // THEN the assistant carries tool_calls with string arguments and each result is a tool message
    let sent = &server.requests_to(ROUTE)[1];
    assert_eq!(
        sent.body["messages"],
        json!([
            { "role": "system", "content": "sys" },
            { "role": "user", "content": "What does the weather skill say?" },
            { "role": "assistant", "content": "Let me look.", "tool_calls": [
                { "id": "call_1", "type": "function", "function": { "name": "read", "arguments": "{\"path\":\"/skills/weather/SKILL.md\"}" } },
                { "id": "call_2", "type": "function", "function": { "name": "read", "arguments": "{\"path\":\"/missing\"}" } },
            ] },
            { "role": "tool", "tool_call_id": "call_1", "content": "# Weather\nUse wttr.in" },
            { "role": "tool", "tool_call_id": "call_2", "content": "file not found" },
        ])
    );
}

#[tokio::test]
async fn openai_malformed_tool_arguments_are_kept_raw() {
    let server = ScriptedServer::start().await;
    server.push(
        ROUTE,
        ScriptedReply::json(json!({
            "choices": [{
                "message": { "role": "assistant", "tool_calls": [{
                    "id": "call_bad", "type": "function", "function": { "name": "exec", "arguments": "{\"command\": \"ls" },
                }] },
                "finish_reason": "tool_calls",
            }],
        })),
    );
    let response = model(&server)
        .complete(&request("sys", vec![user("list")], vec![read_tool()]))
        .await
        .expect("answer");
    assert_eq!(
        response.content,
        vec![AssistantBlock::ToolCall(tool_call(
            "call_bad",
            "exec",
            json!({ "_raw": "{\"command\": \"ls" })
        ))]
    );
}

#[tokio::test]
async fn openai_compatible_server_needs_no_key_and_gets_no_authorization_header() {
    // GIVEN an Ollama-like server and no key
    let server = ScriptedServer::start().await;
    server.push(ROUTE, text_reply("local answer"));
    let model = OpenAiModel::new(http(), "llama3.2")
        .with_provider_name("ollama")
        .with_base_url(format!("{}/v1/", server.base_url()));
    // WHEN asked
    let response = model
        .complete(&request("", vec![user("hi")], vec![]))
        .await
        .expect("answer");
    // THEN it answers, names itself, and sent no Authorization header nor an empty system message
    assert_eq!(response.model, "ollama/llama3.2");
    let sent = &server.requests_to(ROUTE)[0];
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(
        sent.body["messages"],
        json!([{ "role": "user", "content": "hi" }])
    );
}

#[tokio::test]
async fn openai_length_finish_is_max_tokens() {
    let server = ScriptedServer::start().await;
    server.push(
        ROUTE,
        ScriptedReply::json(json!({
            "choices": [{ "message": { "role": "assistant", "content": "partial" }, "finish_reason": "length" }],
        })),
    );
    let response = model(&server)
        .complete(&request("sys", vec![user("long")], vec![]))
        .await
        .expect("answer");
    assert_eq!(response.stop_reason, StopReason::MaxTokens);
}

#[tokio::test]
async fn openai_without_a_key_on_the_public_endpoint_fails_before_any_network_call() {
    let err = OpenAiModel::new(http(), "gpt-4o-mini")
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect_err("no key");
    assert!(
        matches!(&err, ModelError::Auth { message, .. } if message.contains("OPENAI_API_KEY")),
        "{err:?}"
    );
}
