//! Bedrock Converse through the real AWS SDK client, pointed at the scripted server with
//! static test credentials.

use std::time::Duration;

use clawless_base::model::{CACHE_BOUNDARY, ModelError, ModelProvider};
use clawless_base::transcript::{AssistantBlock, StopReason};
use clawless_llm::testing::{RecordedRequest, ScriptedReply, ScriptedServer, bedrock_client};
use clawless_llm::{BedrockModel, ModelBuild, ModelsConfig, build_model_from};
use serde_json::json;

use crate::support::{conversation_with_tool_results, read_tool, request, tool_call, user};

const MODEL_ID: &str = "anthropic.claude-3-5-haiku-20241022-v1:0";
const ROUTE: &str = "/model/anthropic.claude-3-5-haiku-20241022-v1:0/converse";

fn model(server: &ScriptedServer) -> BedrockModel {
    BedrockModel::new(&bedrock_client(&server.base_url()), MODEL_ID)
}

fn text_reply(text: &str) -> ScriptedReply {
    ScriptedReply::json(json!({
        "output": { "message": { "role": "assistant", "content": [{ "text": text }] } },
        "stopReason": "end_turn",
        "usage": { "inputTokens": 14, "outputTokens": 4, "totalTokens": 18, "cacheReadInputTokens": 800, "cacheWriteInputTokens": 60 },
        "metrics": { "latencyMs": 21 },
    }))
}

#[tokio::test]
async fn bedrock_text_answer_with_cache_point_after_the_stable_system_prompt() {
    // GIVEN a Converse endpoint answering with text and cache usage
    let server = ScriptedServer::start().await;
    server.push(ROUTE, text_reply("Hello from Bedrock"));
    // WHEN asked with a split system prompt
    let system = format!("Stable rules{CACHE_BOUNDARY}Now: Monday");
    let response = model(&server)
        .complete(&request(&system, vec![user("hi")], vec![]))
        .await
        .expect("answer");
    // THEN the answer and usage are read
    assert_eq!(
        response.content,
        vec![AssistantBlock::Text {
            text: "Hello from Bedrock".into()
        }]
    );
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(response.model, format!("bedrock/{MODEL_ID}"));
    assert_eq!(
        (
            response.usage.input_tokens,
            response.usage.output_tokens,
            response.usage.cache_read_tokens,
            response.usage.cache_write_tokens
        ),
        (14, 4, 800, 60)
    );
    // AND the SDK sent a signed Converse request with a cachePoint after the stable part
    let sent = &server.requests_to(ROUTE)[0];
    assert!(
        sent.header("authorization")
            .is_some_and(|auth| auth.starts_with("AWS4-HMAC-SHA256"))
    );
    assert_eq!(
        sent.body["system"],
        json!([{ "text": "Stable rules" }, { "cachePoint": { "type": "default" } }, { "text": "Now: Monday" }])
    );
    assert_eq!(
        sent.body["messages"],
        json!([{ "role": "user", "content": [{ "text": "hi" }] }])
    );
    assert_eq!(sent.body["inferenceConfig"], json!({ "maxTokens": 512 }));
}

#[tokio::test]
async fn bedrock_tool_use_and_results_round_trip() {
    // GIVEN a server that first asks for a tool, then answers
    let server = ScriptedServer::start().await;
    server.push(
        ROUTE,
        ScriptedReply::json(json!({
            "output": { "message": { "role": "assistant", "content": [
                { "text": "Reading." },
                { "toolUse": { "toolUseId": "tooluse_77", "name": "read", "input": { "path": "/skills/weather/SKILL.md" } } },
            ] } },
            "stopReason": "tool_use",
            "usage": { "inputTokens": 20, "outputTokens": 10, "totalTokens": 30 },
            "metrics": { "latencyMs": 5 },
        })),
    );
    server.push(ROUTE, text_reply("It says to use wttr.in."));
    let model = model(&server);

    // WHEN the model asks for a tool
    let first = model
        .complete(&request("sys", vec![user("weather?")], vec![read_tool()]))
        .await
        .expect("tool call");
    // THEN the toolUse is parsed with its id
    assert_eq!(first.stop_reason, StopReason::ToolUse);
    assert_eq!(
        first.content[1],
        AssistantBlock::ToolCall(tool_call(
            "tooluse_77",
            "read",
            json!({ "path": "/skills/weather/SKILL.md" })
        ))
    );
    // AND the tools went out as toolSpecs followed by a cachePoint
    let sent = &server.requests_to(ROUTE)[0];
    assert_eq!(
        sent.body["toolConfig"],
        json!({ "tools": [
            { "toolSpec": {
                "name": "read",
                "description": "Read a file",
                "inputSchema": { "json": { "properties": { "path": { "type": "string" } }, "required": ["path"], "type": "object" } },
            } },
            { "cachePoint": { "type": "default" } },
        ] })
    );

    // WHEN the results go back
    model
        .complete(&request(
            "sys",
            conversation_with_tool_results(),
            vec![read_tool()],
        ))
        .await
        .expect("answer");
    // THEN they are toolResult blocks in one user message, ids echoed, the failure marked
    let sent = &server.requests_to(ROUTE)[1];
    assert_eq!(
        sent.body["messages"],
        json!([
            { "role": "user", "content": [{ "text": "What does the weather skill say?" }] },
            { "role": "assistant", "content": [
                { "text": "Let me look." },
                { "toolUse": { "toolUseId": "call_1", "name": "read", "input": { "path": "/skills/weather/SKILL.md" } } },
                { "toolUse": { "toolUseId": "call_2", "name": "read", "input": { "path": "/missing" } } },
            ] },
            { "role": "user", "content": [
                { "toolResult": { "toolUseId": "call_1", "content": [{ "text": "# Weather\nUse wttr.in" }] } },
                { "toolResult": { "toolUseId": "call_2", "content": [{ "text": "file not found" }], "status": "error" } },
            ] },
        ])
    );
}

#[tokio::test]
async fn bedrock_throttling_is_rate_limited_and_validation_is_invalid() {
    let server = ScriptedServer::start().await;
    server.push(
        ROUTE,
        ScriptedReply::status_json(
            429,
            json!({ "message": "Too many requests, please wait before trying again." }),
        )
        .with_header(
            "x-amzn-errortype",
            "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/",
        )
        .with_header("retry-after", "3"),
    );
    server.push(
        ROUTE,
        ScriptedReply::status_json(400, json!({ "message": "The model returned the following errors: messages: roles must alternate" }))
            .with_header("x-amzn-errortype", "ValidationException"),
    );
    let model = model(&server);
    let throttled = model
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect_err("throttled");
    assert!(
        matches!(throttled, ModelError::RateLimited { retry_after: Some(after), .. } if after == Duration::from_secs(3)),
        "{throttled:?}"
    );
    let invalid = model
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect_err("invalid");
    assert!(
        matches!(&invalid, ModelError::Invalid { message, .. } if message.contains("roles must alternate")),
        "{invalid:?}"
    );
    assert!(!invalid.is_retryable());
    // The SDK's own retries are off: exactly one HTTP request per call.
    assert_eq!(server.requests_to(ROUTE).len(), 2);
}

#[tokio::test]
async fn bedrock_slow_answer_times_out() {
    let server = ScriptedServer::start().await;
    server.push(ROUTE, text_reply("late").with_delay(Duration::from_secs(5)));
    let err = model(&server)
        .with_timeout(Duration::from_millis(300))
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect_err("timeout");
    assert!(
        matches!(err, ModelError::Timeout { after, .. } if after == Duration::from_millis(300)),
        "{err:?}"
    );
}

/// An AWS configuration as a Lambda function loads it at cold start: its own credentials and
/// region, and (here) the scripted server or a dead port as its endpoint.
fn loaded_config(endpoint: &str) -> aws_config::SdkConfig {
    use aws_sdk_bedrockruntime::config::{
        BehaviorVersion, Credentials, Region, SharedCredentialsProvider,
    };
    aws_config::SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("eu-west-1"))
        .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
            "AKIDLOADEDATCOLDSTART",
            "loaded-secret",
            None,
            None,
            "clawless-test",
        )))
        .endpoint_url(endpoint)
        .build()
}

fn bedrock_models(provider: serde_json::Value) -> ModelsConfig {
    serde_json::from_value(json!({
        "primary": format!("bedrock/{MODEL_ID}"),
        "maxRetries": 0,
        "providers": { "bedrock": provider },
    }))
    .expect("models config")
}

/// The `Credential=<key id>/<date>/<region>/<service>/aws4_request` scope of a SigV4 header.
fn credential_scope(sent: &RecordedRequest) -> String {
    let auth = sent.header("authorization").unwrap_or_default();
    let scope = auth
        .split("Credential=")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_default();
    let parts: Vec<&str> = scope.split('/').collect();
    match parts.as_slice() {
        [key, _date, region, service, _] => format!("{key}/{region}/{service}"),
        _ => panic!("no SigV4 credential scope in {auth:?}"),
    }
}

#[tokio::test]
async fn a_configured_bedrock_model_signs_with_the_aws_configuration_the_process_loaded() {
    // GIVEN `bedrock/<id>` configured with nothing of its own, and an AWS configuration the
    // process already loaded (its credentials, its region, the scripted server as endpoint)
    let server = ScriptedServer::start().await;
    server.push(ROUTE, text_reply("from the loaded config"));
    let build = ModelBuild::default().with_aws_config(loaded_config(&server.base_url()));
    // WHEN the model is built from the config with it, and asked
    let model = build_model_from(&bedrock_models(json!({})), &|_| None, &build).expect("builds");
    let response = model
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect("answer");
    // THEN the request went where that configuration points, signed with its credentials
    // for its region: no second credential or region chain was consulted
    assert_eq!(
        response.content,
        vec![AssistantBlock::Text {
            text: "from the loaded config".into()
        }]
    );
    let sent = &server.requests_to(ROUTE)[0];
    assert_eq!(
        credential_scope(sent),
        "AKIDLOADEDATCOLDSTART/eu-west-1/bedrock"
    );
}

#[tokio::test]
async fn the_bedrock_provider_settings_win_over_the_loaded_configuration() {
    // GIVEN a loaded configuration whose endpoint is a closed port, and a provider entry
    // that names its own region and endpoint (the scripted server)
    let server = ScriptedServer::start().await;
    server.push(ROUTE, text_reply("from the override"));
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let dead_endpoint = format!("http://{}", closed.local_addr().expect("addr"));
    drop(closed);
    let build = ModelBuild::default().with_aws_config(loaded_config(&dead_endpoint));
    let models = bedrock_models(json!({
        "region": "ap-southeast-2",
        "baseUrl": server.base_url(),
    }));
    // WHEN the model is built and asked
    let model = build_model_from(&models, &|_| None, &build).expect("builds");
    model
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect("answer from the configured endpoint");
    // THEN it reached the configured endpoint, signed for the configured region with the
    // loaded credentials
    let sent = &server.requests_to(ROUTE)[0];
    assert_eq!(
        credential_scope(sent),
        "AKIDLOADEDATCOLDSTART/ap-southeast-2/bedrock"
    );
}
