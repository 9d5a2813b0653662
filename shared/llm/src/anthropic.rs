//! Anthropic Messages API (`POST {base}/v1/messages`): the wire format (images as base64
//! `image` blocks after their user message's text), prompt-caching markers and response
//! parsing. Retries and fallback are layered on top ([`crate::retry`],
//! [`crate::fallback`]); this module makes exactly one HTTP call per request.

use std::time::Duration;

use async_trait::async_trait;
use clawless_base::media::ImageInput;
use clawless_base::model::{
    ModelError, ModelProvider, ModelRequest, ModelResponse, Usage, UserImages,
};
use clawless_base::thinking::ThinkingLevel;
use clawless_base::transcript::{AssistantBlock, StopReason, ToolCall};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::{Map, Value, json};

use crate::http::{ApiKey, HttpClient, header_value};
use crate::turns::{Part, Role, alternating_turns, current_turn_lacks_thinking};

/// The public Anthropic endpoint; `ANTHROPIC_BASE_URL` or config replaces it.
pub const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";

/// The API version this module speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Default per-request timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// A model behind the Anthropic Messages API (or a server speaking it).
#[derive(Debug, Clone)]
pub struct AnthropicModel {
    http: HttpClient,
    provider: String,
    model: String,
    api_key: Option<ApiKey>,
    base_url: String,
    timeout: Duration,
    sees_images: bool,
}

impl AnthropicModel {
    /// A model on the public endpoint, named `anthropic/<model>`, with no key yet.
    pub fn new(http: HttpClient, model: impl Into<String>) -> Self {
        Self {
            http,
            provider: "anthropic".to_owned(),
            model: model.into(),
            api_key: None,
            base_url: DEFAULT_ANTHROPIC_BASE_URL.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            sees_images: true,
        }
    }

    /// Sets the API key (`x-api-key`). Without one, requests to the public endpoint fail
    /// with [`ModelError::Auth`] before any network call.
    pub fn with_api_key(mut self, key: Option<ApiKey>) -> Self {
        self.api_key = key;
        self
    }

    /// Sets the base URL (without `/v1`), e.g. a proxy or a test server.
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into().trim_end_matches('/').to_owned();
        self
    }

    /// Sets the per-request timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Whether images are sent (on by default: every current Claude model sees them). Off,
    /// for an Anthropic-compatible server without vision, they are dropped unsent.
    pub fn with_images(mut self, sees_images: bool) -> Self {
        self.sees_images = sees_images;
        self
    }

    /// Names the provider in `model_ref` and errors (for Anthropic-compatible servers).
    pub fn with_provider_name(mut self, provider: impl Into<String>) -> Self {
        self.provider = provider.into();
        self
    }

    fn headers(&self) -> Result<HeaderMap, ModelError> {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            "anthropic-version",
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        match &self.api_key {
            Some(key) => {
                let mut value = header_value(&self.provider, "x-api-key", key.expose())?;
                value.set_sensitive(true);
                headers.insert("x-api-key", value);
            }
            // A proxy or local server may not need a key; the public API always does.
            None if self.base_url == DEFAULT_ANTHROPIC_BASE_URL => {
                return Err(ModelError::Auth {
                    provider: self.provider.clone(),
                    message: "no API key configured (set ANTHROPIC_API_KEY or models.providers.anthropic.apiKey)"
                        .to_owned(),
                });
            }
            None => {}
        }
        Ok(headers)
    }
}

#[async_trait]
impl ModelProvider for AnthropicModel {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let headers = self.headers()?;
        let images: &[UserImages] = if self.sees_images {
            &request.images
        } else {
            &[]
        };
        let body = request_body(&self.model, request, images);
        let url = format!("{}/v1/messages", self.base_url);
        let answer = self
            .http
            .post_json(&self.provider, &url, headers, &body, self.timeout)
            .await?;
        parse_response(&self.provider, &answer, self.model_ref())
    }

    fn model_ref(&self) -> String {
        format!("{}/{}", self.provider, self.model)
    }

    fn sees_images(&self) -> bool {
        self.sees_images
    }
}

fn ephemeral() -> Value {
    json!({ "type": "ephemeral" })
}

/// The Messages API request body for `request`, showing `images` (the request's, or none
/// for a model that does not see them).
pub(crate) fn request_body(model: &str, request: &ModelRequest, images: &[UserImages]) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    let thinking = claude_thinking(model, request, "anthropic");
    body.insert(
        "max_tokens".into(),
        json!(
            thinking
                .as_ref()
                .map_or(request.max_tokens, |t| t.max_tokens)
        ),
    );
    if let Some(thinking) = &thinking {
        body.insert("thinking".into(), thinking.thinking.clone());
        if let Some(effort) = thinking.effort {
            body.insert("output_config".into(), json!({ "effort": effort }));
        }
    }
    let thinking_api = thinking.as_ref().map(|_| "anthropic");

    // The stable prefix is cached; the dynamic tail (time, session facts) follows uncached.
    let (stable, dynamic) = request.system_parts();
    let mut system = Vec::new();
    if !stable.trim().is_empty() {
        system.push(json!({ "type": "text", "text": stable, "cache_control": ephemeral() }));
    }
    if !dynamic.trim().is_empty() {
        system.push(json!({ "type": "text", "text": dynamic }));
    }
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }

    let messages: Vec<Value> = alternating_turns(&request.messages, images, thinking_api)
        .into_iter()
        .map(|turn| {
            let role = match turn.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            let content: Vec<Value> = turn.parts.iter().map(part_json).collect();
            json!({ "role": role, "content": content })
        })
        .collect();
    body.insert("messages".into(), Value::Array(messages));

    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.input_schema,
                })
            })
            .collect();
        // A marker on the last tool caches the whole tool list (tools precede the system prompt).
        if let Some(Value::Object(last)) = tools.last_mut() {
            last.insert("cache_control".into(), ephemeral());
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    Value::Object(body)
}

fn part_json(part: &Part<'_>) -> Value {
    match part {
        Part::Text(text) => json!({ "type": "text", "text": text }),
        Part::ToolCall(call) => json!({
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": call.input,
        }),
        Part::ToolResult {
            tool_call_id,
            text,
            is_error,
        } => json!({
            "type": "tool_result",
            "tool_use_id": tool_call_id,
            "content": text,
            "is_error": is_error,
        }),
        Part::Image(image) => image_json(image),
        Part::Thinking {
            redacted: Some(data),
            ..
        } => json!({ "type": "redacted_thinking", "data": data }),
        Part::Thinking {
            text, signature, ..
        } => {
            json!({ "type": "thinking", "thinking": text, "signature": signature.unwrap_or_default() })
        }
    }
}

/// Extended thinking for one Messages request, as Claude takes it (shared with Bedrock's
/// Claude models, whose `additionalModelRequestFields` carry the same object).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ClaudeThinking {
    /// The `thinking` object: `{type: enabled, budget_tokens}` or `{type: adaptive}`.
    pub(crate) thinking: Value,
    /// `output_config.effort` for adaptive thinking.
    pub(crate) effort: Option<&'static str>,
    /// The output limit, raised by the thinking budget.
    pub(crate) max_tokens: u32,
}

/// Budget tokens per level for Claude models with budgeted thinking.
pub(crate) fn claude_budget(level: ThinkingLevel) -> u32 {
    match level {
        ThinkingLevel::Off => 0,
        ThinkingLevel::Minimal => 1024,
        ThinkingLevel::Low => 2048,
        ThinkingLevel::Medium | ThinkingLevel::Adaptive => 8192,
        ThinkingLevel::High | ThinkingLevel::Xhigh => 16384,
    }
}

/// The most output tokens a Claude model produces in one response (thinking included).
pub(crate) fn claude_max_output(model: &str) -> u32 {
    let model = model.to_ascii_lowercase();
    if model.contains("opus-4-6") {
        128_000
    } else if model.contains("opus-4-1") || model.contains("opus-4-0") || model.contains("opus-4-2")
    {
        32_000
    } else if model.contains("claude-3-5") || model.contains("claude-3-haiku") {
        8_192
    } else {
        64_000
    }
}

/// Whether a Claude model thinks adaptively (`thinking: {type: adaptive}` plus an effort)
/// instead of with a token budget: the 4.6 Opus and Sonnet models.
pub(crate) fn claude_is_adaptive(model: &str) -> bool {
    let model = model.to_ascii_lowercase();
    model.contains("opus-4-6") || model.contains("sonnet-4-6")
}

/// The thinking fields for `request` on Claude `model`, or `None` when it does not think:
/// level `off`, or a tool-use turn in progress whose tool calls were made without Claude's
/// signed reasoning (thinking on would be refused until the next user message).
///
/// `api` names the API whose signed reasoning the turn's tool calls must carry (`anthropic`,
/// or `bedrock` for Claude on Bedrock).
pub(crate) fn claude_thinking(
    model: &str, request: &ModelRequest, api: &str,
) -> Option<ClaudeThinking> {
    let level = request.thinking;
    if level == ThinkingLevel::Off || current_turn_lacks_thinking(&request.messages, api) {
        return None;
    }
    let model_max = claude_max_output(model);
    if claude_is_adaptive(model) {
        let effort = match level {
            ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
            ThinkingLevel::Medium | ThinkingLevel::Adaptive | ThinkingLevel::Off => "medium",
            ThinkingLevel::High => "high",
            ThinkingLevel::Xhigh if model.contains("opus-4-6") => "max",
            ThinkingLevel::Xhigh => "high",
        };
        return Some(ClaudeThinking {
            thinking: json!({ "type": "adaptive" }),
            effort: Some(effort),
            max_tokens: request.max_tokens,
        });
    }
    let mut budget = claude_budget(level);
    let max_tokens = request.max_tokens.saturating_add(budget).min(model_max);
    if max_tokens <= budget {
        budget = max_tokens.saturating_sub(1024);
    }
    if budget < 1024 {
        // Claude's smallest budget does not fit under this model's output limit.
        return None;
    }
    Some(ClaudeThinking {
        thinking: json!({ "type": "enabled", "budget_tokens": budget }),
        effort: None,
        max_tokens,
    })
}

/// A base64 `image` block.
fn image_json(image: &ImageInput) -> Value {
    json!({
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": image.media_type,
            "data": crate::media::base64(&image.data),
        },
    })
}

/// Reads a Messages API response.
pub(crate) fn parse_response(
    provider: &str, answer: &Value, model: String,
) -> Result<ModelResponse, ModelError> {
    let invalid = |message: &str| ModelError::Invalid {
        provider: provider.to_owned(),
        message: message.to_owned(),
    };
    let blocks = answer
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("response has no content array"))?;
    let mut content = Vec::with_capacity(blocks.len());
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = block
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                content.push(AssistantBlock::Text {
                    text: text.to_owned(),
                });
            }
            Some("tool_use") => {
                let field = |name: &str| {
                    block
                        .get(name)
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .ok_or_else(|| invalid(&format!("tool_use block without {name}")))
                };
                content.push(AssistantBlock::ToolCall(ToolCall {
                    id: field("id")?,
                    name: field("name")?,
                    input: block.get("input").cloned().unwrap_or_else(|| json!({})),
                }));
            }
            Some("thinking") => content.push(AssistantBlock::Thinking {
                text: block
                    .get("thinking")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                signature: block
                    .get("signature")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                redacted: None,
                api: "anthropic".to_owned(),
            }),
            Some("redacted_thinking") => content.push(AssistantBlock::Thinking {
                text: String::new(),
                signature: None,
                redacted: Some(
                    block
                        .get("data")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                ),
                api: "anthropic".to_owned(),
            }),
            // Other block kinds (server tools' results) are not part of the neutral transcript.
            _ => {}
        }
    }
    let stop_reason = match answer.get("stop_reason").and_then(Value::as_str) {
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        // end_turn, stop_sequence, pause_turn, refusal (its text is the answer), or absent.
        _ => StopReason::EndTurn,
    };
    let usage = answer.get("usage");
    let count = |name: &str| {
        usage
            .and_then(|u| u.get(name))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    Ok(ModelResponse {
        content,
        stop_reason,
        usage: Usage {
            input_tokens: count("input_tokens"),
            output_tokens: count("output_tokens"),
            cache_read_tokens: count("cache_read_input_tokens"),
            cache_write_tokens: count("cache_creation_input_tokens"),
        },
        model,
    })
}

#[cfg(test)]
mod tests {
    use clawless_base::model::{CACHE_BOUNDARY, ToolSpec};
    use clawless_base::transcript::Message;

    use super::*;

    #[test]
    fn system_prompt_without_dynamic_part_is_one_cached_block() {
        let request = ModelRequest {
            system: "stable only".into(),
            messages: vec![Message::User { text: "hi".into() }],
            tools: vec![],
            max_tokens: 10,
            images: Vec::new(),
            thinking: ThinkingLevel::Off,
        };
        let body = request_body("m", &request, &request.images);
        assert_eq!(
            body["system"],
            json!([{ "type": "text", "text": "stable only", "cache_control": { "type": "ephemeral" } }])
        );
        assert!(body.get("tools").is_none());
    }

    #[test]
    fn only_the_last_tool_carries_the_cache_marker() {
        let tool = |name: &str| ToolSpec {
            name: name.into(),
            description: "d".into(),
            input_schema: json!({ "type": "object" }),
        };
        let request = ModelRequest {
            system: format!("a{CACHE_BOUNDARY}b"),
            messages: vec![],
            tools: vec![tool("one"), tool("two")],
            max_tokens: 10,
            images: Vec::new(),
            thinking: ThinkingLevel::Off,
        };
        let body = request_body("m", &request, &request.images);
        assert!(body["tools"][0].get("cache_control").is_none());
        assert_eq!(
            body["tools"][1]["cache_control"],
            json!({ "type": "ephemeral" })
        );
        assert_eq!(body["system"][1], json!({ "type": "text", "text": "b" }));
    }

    #[test]
    fn unknown_blocks_and_stop_reasons_are_tolerated() {
        let answer = json!({
            "content": [{ "type": "server_tool_use", "id": "x" }, { "type": "text", "text": "ok" }],
            "stop_reason": "stop_sequence",
        });
        let response = parse_response("anthropic", &answer, "anthropic/m".into()).expect("parses");
        assert_eq!(
            response.content,
            vec![AssistantBlock::Text { text: "ok".into() }]
        );
        assert_eq!(response.stop_reason, StopReason::EndTurn);
        assert_eq!(response.usage, Usage::default());
    }

    #[test]
    fn thinking_levels_map_to_budgets_and_adaptive_efforts() {
        let request = |level: ThinkingLevel| ModelRequest {
            system: String::new(),
            messages: vec![Message::User { text: "hi".into() }],
            tools: vec![],
            max_tokens: 4096,
            images: Vec::new(),
            thinking: level,
        };
        // Budgeted models: the spec's budgets, max_tokens raised by them (xhigh clamped).
        for (level, budget) in [
            (ThinkingLevel::Minimal, 1024),
            (ThinkingLevel::Low, 2048),
            (ThinkingLevel::Medium, 8192),
            (ThinkingLevel::High, 16384),
            (ThinkingLevel::Xhigh, 16384),
        ] {
            let body = request_body("claude-sonnet-4-5", &request(level), &[]);
            assert_eq!(
                body["thinking"],
                json!({ "type": "enabled", "budget_tokens": budget })
            );
            assert_eq!(body["max_tokens"], json!(4096 + budget));
        }
        // Off: no thinking field, the configured limit.
        let body = request_body("claude-sonnet-4-5", &request(ThinkingLevel::Off), &[]);
        assert!(body.get("thinking").is_none());
        assert_eq!(body["max_tokens"], json!(4096));
        // A small model limit caps max_tokens and the budget leaves room for the answer.
        let body = request_body("claude-3-5-haiku", &request(ThinkingLevel::High), &[]);
        assert_eq!(body["max_tokens"], json!(8192));
        assert_eq!(body["thinking"]["budget_tokens"], json!(8192 - 1024));
        // 4.6 models: adaptive, with an effort; xhigh is max on Opus only.
        let body = request_body("claude-opus-4-6", &request(ThinkingLevel::Xhigh), &[]);
        assert_eq!(body["thinking"], json!({ "type": "adaptive" }));
        assert_eq!(body["output_config"], json!({ "effort": "max" }));
        let body = request_body("claude-sonnet-4-6", &request(ThinkingLevel::Xhigh), &[]);
        assert_eq!(body["output_config"], json!({ "effort": "high" }));
        let body = request_body("claude-sonnet-4-6", &request(ThinkingLevel::Minimal), &[]);
        assert_eq!(body["output_config"], json!({ "effort": "low" }));
    }

    #[test]
    fn thinking_and_redacted_blocks_are_read_with_their_signatures() {
        let answer = json!({
            "content": [
                { "type": "thinking", "thinking": "hmm", "signature": "sig1" },
                { "type": "redacted_thinking", "data": "opaque" },
                { "type": "text", "text": "ok" },
            ],
            "stop_reason": "end_turn",
        });
        let response = parse_response("anthropic", &answer, "anthropic/m".into()).expect("parses");
        assert_eq!(
            response.content[0],
            AssistantBlock::Thinking {
                text: "hmm".into(),
                signature: Some("sig1".into()),
                redacted: None,
                api: "anthropic".into(),
            }
        );
        assert_eq!(
            response.content[1],
            AssistantBlock::Thinking {
                text: String::new(),
                signature: None,
                redacted: Some("opaque".into()),
                api: "anthropic".into(),
            }
        );
    }
}
