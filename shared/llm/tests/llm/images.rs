//! Images shown with user messages, as each provider's wire format carries them, and never
//! sent to a model that does not see them.

use std::sync::Arc;

use clawless_base::media::ImageInput;
use clawless_base::model::{ModelProvider, ModelRequest, UserImages};
use clawless_base::transcript::{AssistantBlock, Message, StopReason};
use clawless_llm::testing::{ScriptedReply, ScriptedServer, bedrock_client};
use clawless_llm::{
    AnthropicModel, ApiKey, BedrockModel, FallbackChain, ModelsConfig, OpenAiModel, build_model,
};
use serde_json::{Value, json};

use crate::support::{http, request, user};

const ANTHROPIC: &str = "/v1/messages";
const OPENAI: &str = "/v1/chat/completions";
const CLAUDE_ID: &str = "anthropic.claude-3-5-haiku-20241022-v1:0";
const CLAUDE_ROUTE: &str = "/model/anthropic.claude-3-5-haiku-20241022-v1:0/converse";
const LLAMA_ID: &str = "meta.llama3-70b-instruct-v1:0";
const LLAMA_ROUTE: &str = "/model/meta.llama3-70b-instruct-v1:0/converse";

/// A PNG and a JPEG signature with their standard base64.
fn png() -> ImageInput {
    ImageInput {
        media_type: "image/png".into(),
        data: vec![0x89, b'P', b'N', b'G'],
    }
}
const PNG_BASE64: &str = "iVBORw==";

fn jpeg() -> ImageInput {
    ImageInput {
        media_type: "image/jpeg".into(),
        data: vec![0xff, 0xd8, 0xff],
    }
}
const JPEG_BASE64: &str = "/9j/";

/// "sys", then a user message, an assistant answer and a second user message that carries
/// `images`.
fn with_images(images: Vec<ImageInput>) -> ModelRequest {
    let mut request = request(
        "sys",
        vec![
            user("hello"),
            Message::Assistant {
                content: vec![AssistantBlock::Text { text: "hi".into() }],
                stop_reason: StopReason::EndTurn,
            },
            user("what is this?"),
        ],
        vec![],
    );
    request.images = vec![UserImages { message: 2, images }];
    request
}

fn without_images() -> ModelRequest {
    ModelRequest {
        images: Vec::new(),
        ..with_images(vec![png()])
    }
}

fn anthropic(server: &ScriptedServer) -> AnthropicModel {
    AnthropicModel::new(http(), "claude-sonnet-4-5")
        .with_api_key(ApiKey::new("sk-ant-test"))
        .with_base_url(server.base_url())
}

fn anthropic_ok() -> ScriptedReply {
    ScriptedReply::json(
        json!({ "content": [{ "type": "text", "text": "a cat" }], "stop_reason": "end_turn" }),
    )
}

fn openai(server: &ScriptedServer, images: Option<bool>) -> OpenAiModel {
    OpenAiModel::new(http(), "gpt-4o")
        .with_api_key(ApiKey::new("sk-test"))
        .with_base_url(format!("{}/v1", server.base_url()))
        .with_images(images)
}

fn openai_ok() -> ScriptedReply {
    ScriptedReply::json(json!({
        "choices": [{ "message": { "role": "assistant", "content": "a cat" }, "finish_reason": "stop" }],
    }))
}

fn bedrock_ok() -> ScriptedReply {
    ScriptedReply::json(json!({
        "output": { "message": { "role": "assistant", "content": [{ "text": "a cat" }] } },
        "stopReason": "end_turn",
        "usage": { "inputTokens": 1, "outputTokens": 1, "totalTokens": 2 },
    }))
}

fn anthropic_image(data: &str, media_type: &str) -> Value {
    json!({ "type": "image", "source": { "type": "base64", "media_type": media_type, "data": data } })
}

#[tokio::test]
async fn anthropic_shows_one_or_two_images_after_the_message_text() {
    for (images, blocks) in [
        (vec![png()], vec![anthropic_image(PNG_BASE64, "image/png")]),
        (
            vec![png(), jpeg()],
            vec![
                anthropic_image(PNG_BASE64, "image/png"),
                anthropic_image(JPEG_BASE64, "image/jpeg"),
            ],
        ),
    ] {
        // GIVEN a Claude model and a question with images
        let server = ScriptedServer::start().await;
        server.push(ANTHROPIC, anthropic_ok());
        let model = anthropic(&server);
        assert!(model.sees_images());
        // WHEN asked
        model.complete(&with_images(images)).await.expect("answer");
        // THEN the images follow the text of their own message, base64 with their type
        let sent = &server.requests_to(ANTHROPIC)[0];
        let mut content = vec![json!({ "type": "text", "text": "what is this?" })];
        content.extend(blocks);
        assert_eq!(
            sent.body["messages"],
            json!([
                { "role": "user", "content": [{ "type": "text", "text": "hello" }] },
                { "role": "assistant", "content": [{ "type": "text", "text": "hi" }] },
                { "role": "user", "content": content },
            ])
        );
    }
}

#[tokio::test]
async fn anthropic_without_images_sends_the_same_bytes_as_before() {
    // GIVEN a request with no images
    let server = ScriptedServer::start().await;
    server.push(ANTHROPIC, anthropic_ok());
    // WHEN asked
    anthropic(&server)
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect("answer");
    // THEN the body is exactly the text-only body
    assert_eq!(
        server.requests_to(ANTHROPIC)[0].raw_body,
        r#"{"model":"claude-sonnet-4-5","max_tokens":512,"system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#
    );
}

#[tokio::test]
async fn an_anthropic_compatible_server_without_vision_gets_no_images() {
    // GIVEN a server configured as not seeing images
    let server = ScriptedServer::start().await;
    server.push(ANTHROPIC, anthropic_ok());
    server.push(ANTHROPIC, anthropic_ok());
    let model = anthropic(&server).with_images(false);
    assert!(!model.sees_images());
    // WHEN asked with and without images
    model
        .complete(&with_images(vec![png(), jpeg()]))
        .await
        .expect("answer");
    model.complete(&without_images()).await.expect("answer");
    // THEN both bodies are the same bytes: the images were dropped, the call not refused
    let sent = server.requests_to(ANTHROPIC);
    assert_eq!(sent[0].raw_body, sent[1].raw_body);
    assert!(!sent[0].raw_body.contains(PNG_BASE64));
}

fn image_url(url: &str) -> Value {
    json!({ "type": "image_url", "image_url": { "url": url } })
}

#[tokio::test]
async fn openai_shows_one_or_two_images_as_data_url_parts() {
    for (images, parts) in [
        (
            vec![png()],
            vec![image_url("data:image/png;base64,iVBORw==")],
        ),
        (
            vec![png(), jpeg()],
            vec![
                image_url("data:image/png;base64,iVBORw=="),
                image_url("data:image/jpeg;base64,/9j/"),
            ],
        ),
    ] {
        // GIVEN a compatible server configured as seeing images
        let server = ScriptedServer::start().await;
        server.push(OPENAI, openai_ok());
        let model = openai(&server, Some(true));
        assert!(model.sees_images());
        // WHEN asked with images
        model.complete(&with_images(images)).await.expect("answer");
        // THEN that user message's content is its text part, then one part per image;
        // the other messages keep their plain text content
        let sent = &server.requests_to(OPENAI)[0];
        let mut content = vec![json!({ "type": "text", "text": "what is this?" })];
        content.extend(parts);
        assert_eq!(
            sent.body["messages"],
            json!([
                { "role": "system", "content": "sys" },
                { "role": "user", "content": "hello" },
                { "role": "assistant", "content": "hi" },
                { "role": "user", "content": content },
            ])
        );
    }
}

#[tokio::test]
async fn openai_without_images_sends_the_same_bytes_as_before() {
    let server = ScriptedServer::start().await;
    server.push(OPENAI, openai_ok());
    openai(&server, Some(true))
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect("answer");
    assert_eq!(
        server.requests_to(OPENAI)[0].raw_body,
        r#"{"model":"gpt-4o","messages":[{"role":"system","content":"sys"},{"role":"user","content":"hi"}],"max_tokens":512}"#
    );
}

#[tokio::test]
async fn a_compatible_server_not_said_to_see_images_gets_none() {
    for images in [None, Some(false)] {
        // GIVEN a compatible server left at its default, or configured off
        let server = ScriptedServer::start().await;
        server.push(OPENAI, openai_ok());
        server.push(OPENAI, openai_ok());
        let model = openai(&server, images);
        assert!(!model.sees_images());
        // WHEN asked with and without images
        model
            .complete(&with_images(vec![png()]))
            .await
            .expect("answer");
        model.complete(&without_images()).await.expect("answer");
        // THEN it got the text-only body both times
        let sent = server.requests_to(OPENAI);
        assert_eq!(sent[0].raw_body, sent[1].raw_body);
        assert!(!sent[0].raw_body.contains("image_url"));
    }
}

#[tokio::test]
async fn the_images_key_decides_for_openai_compatible_providers() {
    // GIVEN the official endpoint, a default Ollama and an Ollama said to see images
    let env = |name: &str| (name == "OPENAI_API_KEY").then(|| "sk-test".to_owned());
    let build = |primary: &str, providers: Value| {
        let config: ModelsConfig =
            serde_json::from_value(json!({ "primary": primary, "providers": providers }))
                .expect("config");
        build_model(&config, &env).expect("builds")
    };
    // THEN only the official endpoint and the configured vision server see images
    assert!(build("openai/gpt-4o", json!({})).sees_images());
    assert!(!build("ollama/llama3.2", json!({})).sees_images());
    assert!(build("ollama/llava", json!({ "ollama": { "images": true } })).sees_images());
    assert!(!build("openai/gpt-4o", json!({ "openai": { "images": false } })).sees_images());
    assert!(
        build(
            "anthropic/claude-sonnet-4-5",
            json!({ "anthropic": { "apiKey": "k" } })
        )
        .sees_images()
    );
    assert!(!build("offline/scripted", json!({})).sees_images());
}

fn bedrock_image(format: &str, bytes: &str) -> Value {
    json!({ "image": { "format": format, "source": { "bytes": bytes } } })
}

#[tokio::test]
async fn bedrock_claude_shows_one_or_two_images_as_image_blocks() {
    for (images, blocks) in [
        (vec![png()], vec![bedrock_image("png", PNG_BASE64)]),
        (
            vec![png(), jpeg()],
            vec![
                bedrock_image("png", PNG_BASE64),
                bedrock_image("jpeg", JPEG_BASE64),
            ],
        ),
    ] {
        // GIVEN Claude on Bedrock
        let server = ScriptedServer::start().await;
        server.push(CLAUDE_ROUTE, bedrock_ok());
        let model = BedrockModel::new(&bedrock_client(&server.base_url()), CLAUDE_ID);
        assert!(model.sees_images());
        // WHEN asked with images
        model.complete(&with_images(images)).await.expect("answer");
        // THEN the SDK sent the bytes (base64 in the JSON protocol) after the text
        let sent = &server.requests_to(CLAUDE_ROUTE)[0];
        let mut content = vec![json!({ "text": "what is this?" })];
        content.extend(blocks);
        assert_eq!(
            sent.body["messages"],
            json!([
                { "role": "user", "content": [{ "text": "hello" }] },
                { "role": "assistant", "content": [{ "text": "hi" }] },
                { "role": "user", "content": content },
            ])
        );
    }
}

#[tokio::test]
async fn a_bedrock_model_without_vision_gets_no_images() {
    // GIVEN Llama on Bedrock, which reads text only
    let server = ScriptedServer::start().await;
    server.push(LLAMA_ROUTE, bedrock_ok());
    server.push(LLAMA_ROUTE, bedrock_ok());
    let model = BedrockModel::new(&bedrock_client(&server.base_url()), LLAMA_ID);
    assert!(!model.sees_images());
    // WHEN asked with and without images
    model
        .complete(&with_images(vec![png()]))
        .await
        .expect("answer");
    model.complete(&without_images()).await.expect("answer");
    // THEN both bodies are the same bytes
    let sent = server.requests_to(LLAMA_ROUTE);
    assert_eq!(sent[0].raw_body, sent[1].raw_body);
    assert!(!sent[0].raw_body.contains("image"));
}

#[tokio::test]
async fn a_fallback_without_vision_is_handed_the_request_without_its_images() {
    // GIVEN Claude failing with 503, then a compatible server without vision
    let server = ScriptedServer::start().await;
    server.push(
        ANTHROPIC,
        ScriptedReply::status_json(503, json!({ "error": { "message": "busy" } })),
    );
    server.push(OPENAI, openai_ok());
    let chain = FallbackChain::new(
        Arc::new(anthropic(&server)),
        vec![Arc::new(openai(&server, None))],
    );
    // THEN the chain sees images as its primary does
    assert!(chain.sees_images());
    // WHEN asked with an image
    let response = chain
        .complete(&with_images(vec![png()]))
        .await
        .expect("the fallback answers");
    // THEN Claude was shown it, the fallback was not (and still answered)
    assert_eq!(response.model, "openai/gpt-4o");
    assert!(
        server.requests_to(ANTHROPIC)[0]
            .raw_body
            .contains(PNG_BASE64)
    );
    let fallback = &server.requests_to(OPENAI)[0];
    assert_eq!(fallback.body["messages"][3]["content"], "what is this?");
    assert!(!fallback.raw_body.contains("image_url"));
}
