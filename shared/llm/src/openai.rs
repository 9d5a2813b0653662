//! OpenAI Chat Completions (`POST {base}/chat/completions`), which also covers every
//! OpenAI-compatible server (Ollama, vLLM, LM Studio, …) reached by base URL.
//!
//! Images go after their user message's text as `image_url` parts holding a `data:` URL, to
//! models configured as seeing them: the official endpoint by default, a compatible server
//! only when told (many serve text-only models and reject image parts).
//!
//! OpenAI caches prompt prefixes automatically, so no markers are sent; the cached share of
//! the prompt comes back as `usage.prompt_tokens_details.cached_tokens`.

use std::time::Duration;

use async_trait::async_trait;
use clawless_base::model::{
    ModelError, ModelProvider, ModelRequest, ModelResponse, Usage, UserImages,
};
use clawless_base::thinking::ThinkingLevel;
use clawless_base::transcript::{AssistantBlock, Message, StopReason, ToolCall};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::{Map, Value, json};

use crate::http::{ApiKey, HttpClient, header_value};
use crate::turns::{current_turn_start, images_of};

/// The public OpenAI endpoint; `OPENAI_BASE_URL` or config replaces it.
pub const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// Default per-request timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Key under which tool-call arguments that are not valid JSON are kept, as text.
pub const RAW_ARGUMENTS_KEY: &str = "_raw";

/// A model behind the Chat Completions API or an OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct OpenAiModel {
    http: HttpClient,
    provider: String,
    model: String,
    api_key: Option<ApiKey>,
    base_url: String,
    timeout: Duration,
    /// `None`: decided by the endpoint (see [`OpenAiModel::with_images`]).
    sees_images: Option<bool>,
}

impl OpenAiModel {
    /// A model on the public endpoint, named `openai/<model>`, with no key yet.
    pub fn new(http: HttpClient, model: impl Into<String>) -> Self {
        Self {
            http,
            provider: "openai".to_owned(),
            model: model.into(),
            api_key: None,
            base_url: DEFAULT_OPENAI_BASE_URL.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            sees_images: None,
        }
    }

    /// Sets the API key (`Authorization: Bearer`). Optional for compatible servers; without
    /// one, requests to the public endpoint fail with [`ModelError::Auth`] before any network call.
    pub fn with_api_key(mut self, key: Option<ApiKey>) -> Self {
        self.api_key = key;
        self
    }

    /// Sets the base URL including its version path, e.g. `http://127.0.0.1:11434/v1`.
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into().trim_end_matches('/').to_owned();
        self
    }

    /// Sets the per-request timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Whether images are sent. Unset, only the official endpoint gets them: a compatible
    /// server may serve a text-only model, which is shown none rather than refusing the call.
    pub fn with_images(mut self, sees_images: Option<bool>) -> Self {
        self.sees_images = sees_images;
        self
    }

    /// Names the provider in `model_ref` and errors (`ollama`, `vllm`, …).
    pub fn with_provider_name(mut self, provider: impl Into<String>) -> Self {
        self.provider = provider.into();
        self
    }

    fn is_public_endpoint(&self) -> bool {
        self.base_url == DEFAULT_OPENAI_BASE_URL
    }

    fn headers(&self) -> Result<HeaderMap, ModelError> {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        match &self.api_key {
            Some(key) => {
                let bearer = format!("Bearer {}", key.expose());
                let mut value = header_value(&self.provider, "authorization", &bearer)?;
                value.set_sensitive(true);
                headers.insert(AUTHORIZATION, value);
            }
            None if self.is_public_endpoint() => {
                return Err(ModelError::Auth {
                    provider: self.provider.clone(),
                    message: "no API key configured (set OPENAI_API_KEY or models.providers.openai.apiKey)"
                        .to_owned(),
                });
            }
            None => {}
        }
        Ok(headers)
    }
}

#[async_trait]
impl ModelProvider for OpenAiModel {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let headers = self.headers()?;
        let images: &[UserImages] = if self.sees_images() {
            &request.images
        } else {
            &[]
        };
        let body = request_body(&self.model, request, self.is_public_endpoint(), images);
        let url = format!("{}/chat/completions", self.base_url);
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
            .unwrap_or_else(|| self.is_public_endpoint())
    }
}

/// The Chat Completions request body, showing `images` (the request's, or none for a model
/// that does not see them).
///
/// The public API wants `max_completion_tokens` (its newer models reject `max_tokens`);
/// compatible servers are sent the long-standing `max_tokens`, which they all accept.
pub(crate) fn request_body(
    model: &str, request: &ModelRequest, public_endpoint: bool, images: &[UserImages],
) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    let system = request.system_text();
    if !system.trim().is_empty() {
        messages.push(json!({ "role": "system", "content": system }));
    }
    let current = current_turn_start(&request.messages);
    for (index, message) in request.messages.iter().enumerate() {
        let shown: Vec<_> = images_of(images, &request.messages, index).collect();
        messages.push(match message {
            Message::User { text } if !shown.is_empty() => user_with_images(text, &shown),
            _ => message_json(message, index >= current),
        });
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages));
    let limit_field = if public_endpoint {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    body.insert(limit_field.into(), json!(request.max_tokens));
    if let Some(effort) = reasoning_effort(model, request.thinking, public_endpoint) {
        body.insert("reasoning_effort".into(), json!(effort));
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.input_schema,
                    },
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    Value::Object(body)
}

/// Whether an OpenAI model reasons (and so takes `reasoning_effort`): the o-series and GPT-5.
pub(crate) fn is_openai_reasoning_model(model: &str) -> bool {
    let model = model.to_ascii_lowercase();
    model.starts_with("gpt-5")
        || ["o1", "o3", "o4"]
            .iter()
            .any(|family| model == *family || model.starts_with(&format!("{family}-")))
}

/// `reasoning_effort` for a thinking level: the level's own name, `adaptive` as `medium`,
/// `xhigh` only where the model advertises it (else `high`). Sent to the official API only
/// for its reasoning models (others refuse the field), to a compatible server whenever
/// thinking is on (Ollama, vLLM and friends read it for their reasoning models). `None`
/// when nothing is sent.
pub(crate) fn reasoning_effort(
    model: &str, level: ThinkingLevel, public_endpoint: bool,
) -> Option<&'static str> {
    if level == ThinkingLevel::Off || (public_endpoint && !is_openai_reasoning_model(model)) {
        return None;
    }
    Some(match level.for_model(model) {
        ThinkingLevel::Off | ThinkingLevel::Medium | ThinkingLevel::Adaptive => "medium",
        ThinkingLevel::Minimal => "minimal",
        ThinkingLevel::Low => "low",
        ThinkingLevel::High => "high",
        ThinkingLevel::Xhigh => "xhigh",
    })
}

/// One message on the wire. An assistant message of the current tool-use turn (`current`)
/// carries the reasoning its server returned back as `reasoning_content` (DeepSeek's
/// thinking mode with tools requires it; others ignore it); completed turns' reasoning is
/// not resent.
fn message_json(message: &Message, current: bool) -> Value {
    match message {
        Message::User { text } => json!({ "role": "user", "content": text }),
        Message::Assistant {
            content: blocks, ..
        } => {
            let text = clawless_base::transcript::assistant_text(blocks);
            let calls: Vec<Value> = message
                .tool_calls()
                .map(|call| {
                    json!({
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            "arguments": arguments_text(&call.input),
                        },
                    })
                })
                .collect();
            let mut out = Map::new();
            out.insert("role".into(), json!("assistant"));
            // With tool calls and no text the API wants `content: null`, not "".
            let content = if text.is_empty() && !calls.is_empty() {
                Value::Null
            } else {
                json!(text)
            };
            out.insert("content".into(), content);
            if !calls.is_empty() {
                out.insert("tool_calls".into(), Value::Array(calls));
            }
            let reasoning: Vec<&str> = blocks
                .iter()
                .filter_map(|block| match block {
                    AssistantBlock::Thinking { text, api, .. } if current && api == "openai" => {
                        Some(text.as_str())
                    }
                    _ => None,
                })
                .collect();
            if !reasoning.is_empty() {
                out.insert("reasoning_content".into(), json!(reasoning.join("\n")));
            }
            Value::Object(out)
        }
        // The wire format has no error flag; the tool's own text says what failed.
        Message::ToolResult {
            tool_call_id, text, ..
        } => json!({ "role": "tool", "tool_call_id": tool_call_id, "content": text }),
    }
}

/// A user message as content parts: its text (unless empty), then one `image_url` part per
/// image.
fn user_with_images(text: &str, images: &[&clawless_base::media::ImageInput]) -> Value {
    let mut parts = Vec::with_capacity(images.len() + 1);
    if !text.trim().is_empty() {
        parts.push(json!({ "type": "text", "text": text }));
    }
    for image in images {
        parts.push(json!({
            "type": "image_url",
            "image_url": { "url": crate::media::data_url(image) },
        }));
    }
    json!({ "role": "user", "content": parts })
}

/// Arguments go over the wire as a JSON string; arguments we could not parse on the way in
/// (kept under [`RAW_ARGUMENTS_KEY`]) go back out verbatim.
fn arguments_text(input: &Value) -> String {
    if let Some(map) = input.as_object()
        && map.len() == 1
        && let Some(Value::String(raw)) = map.get(RAW_ARGUMENTS_KEY)
    {
        return raw.clone();
    }
    input.to_string()
}

/// Parses the `arguments` of a tool call: a JSON string (the standard), an object (some
/// compatible servers), empty (no arguments → `{}`), or malformed text, which is kept as
/// `{"_raw": "<text>"}` so the tool layer can report the bad arguments to the model.
pub(crate) fn parse_arguments(arguments: Option<&Value>) -> Value {
    match arguments {
        None | Some(Value::Null) => json!({}),
        Some(Value::String(text)) if text.trim().is_empty() => json!({}),
        Some(Value::String(text)) => {
            serde_json::from_str(text).unwrap_or_else(|_| json!({ RAW_ARGUMENTS_KEY: text }))
        }
        Some(other) => other.clone(),
    }
}

/// Reads a Chat Completions response.
pub(crate) fn parse_response(
    provider: &str, answer: &Value, model: String,
) -> Result<ModelResponse, ModelError> {
    let invalid = |message: String| ModelError::Invalid {
        provider: provider.to_owned(),
        message,
    };
    let Some(choice) = answer.pointer("/choices/0") else {
        // Some compatible servers answer 200 with an error object.
        let detail = answer
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or("response has no choices");
        return Err(invalid(detail.to_owned()));
    };
    let message = choice
        .get("message")
        .ok_or_else(|| invalid("choice has no message".to_owned()))?;

    let mut content = Vec::new();
    // Compatible servers return reasoning as `reasoning_content` (DeepSeek, vLLM) or
    // `reasoning` (Ollama, OpenRouter); the official API keeps it to itself.
    let reasoning = ["reasoning_content", "reasoning"]
        .iter()
        .find_map(|field| message.get(*field).and_then(Value::as_str))
        .filter(|text| !text.trim().is_empty());
    if let Some(reasoning) = reasoning {
        content.push(AssistantBlock::Thinking {
            text: reasoning.to_owned(),
            signature: None,
            redacted: None,
            api: "openai".to_owned(),
        });
    }
    let text = match message.get("content") {
        Some(Value::String(text)) => text.clone(),
        // Content-part arrays: keep the text parts.
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    };
    if !text.is_empty() {
        content.push(AssistantBlock::Text { text });
    }
    let calls = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (index, call) in calls.iter().enumerate() {
        let name = call
            .pointer("/function/name")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("tool call without a function name".to_owned()))?;
        // Some compatible servers omit ids; the result must still be matched to its call.
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .map_or_else(|| format!("call_{index}"), str::to_owned);
        content.push(AssistantBlock::ToolCall(ToolCall {
            id,
            name: name.to_owned(),
            input: parse_arguments(call.pointer("/function/arguments")),
        }));
    }

    let stop_reason = match choice.get("finish_reason").and_then(Value::as_str) {
        Some("length") => StopReason::MaxTokens,
        Some("content_filter") => StopReason::Error,
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        // Some servers say "stop" even when they return tool calls.
        _ if !calls.is_empty() => StopReason::ToolUse,
        _ => StopReason::EndTurn,
    };

    let count = |pointer: &str| answer.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
    let prompt = count("/usage/prompt_tokens");
    let cached = count("/usage/prompt_tokens_details/cached_tokens").min(prompt);
    Ok(ModelResponse {
        content,
        stop_reason,
        usage: Usage {
            // prompt_tokens includes the cached share; Usage counts full-rate tokens apart.
            input_tokens: prompt - cached,
            output_tokens: count("/usage/completion_tokens"),
            cache_read_tokens: cached,
            cache_write_tokens: 0,
        },
        model,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse_strings_objects_empty_and_garbage() {
        assert_eq!(
            parse_arguments(Some(&json!("{\"a\":1}"))),
            json!({ "a": 1 })
        );
        assert_eq!(parse_arguments(Some(&json!({ "a": 1 }))), json!({ "a": 1 }));
        assert_eq!(parse_arguments(Some(&json!(""))), json!({}));
        assert_eq!(parse_arguments(None), json!({}));
        assert_eq!(
            parse_arguments(Some(&json!("{\"a\":"))),
            json!({ "_raw": "{\"a\":" })
        );
    }

    #[test]
    fn raw_arguments_go_back_verbatim() {
        assert_eq!(arguments_text(&json!({ "_raw": "{\"a\":" })), "{\"a\":");
        assert_eq!(arguments_text(&json!({ "path": "x" })), "{\"path\":\"x\"}");
    }

    #[test]
    fn tool_calls_without_ids_or_with_stop_are_still_tool_use() {
        let answer = json!({
            "choices": [{
                "message": {
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [{ "type": "function", "function": { "name": "read", "arguments": { "path": "a" } } }],
                },
                "finish_reason": "stop",
            }],
            "usage": { "prompt_tokens": 100, "completion_tokens": 5, "prompt_tokens_details": { "cached_tokens": 60 } },
        });
        let response = parse_response("ollama", &answer, "ollama/m".into()).expect("parses");
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        let AssistantBlock::ToolCall(call) = &response.content[0] else {
            panic!("expected a tool call");
        };
        assert_eq!(call.id, "call_0");
        assert_eq!(call.input, json!({ "path": "a" }));
        assert_eq!(response.usage.input_tokens, 40);
        assert_eq!(response.usage.cache_read_tokens, 60);
    }

    #[test]
    fn a_200_error_object_is_an_invalid_response() {
        let err = parse_response(
            "vllm",
            &json!({ "error": { "message": "model not loaded" } }),
            "vllm/m".into(),
        )
        .expect_err("no choices");
        assert!(err.to_string().contains("model not loaded"));
    }

    #[test]
    fn reasoning_effort_only_where_the_model_takes_it() {
        use clawless_base::thinking::ThinkingLevel as Level;
        // The official API: reasoning models only; xhigh where advertised, else high.
        assert_eq!(reasoning_effort("gpt-4o-mini", Level::High, true), None);
        assert_eq!(reasoning_effort("o3-mini", Level::Low, true), Some("low"));
        assert_eq!(
            reasoning_effort("gpt-5.4", Level::Xhigh, true),
            Some("xhigh")
        );
        assert_eq!(reasoning_effort("gpt-5", Level::Xhigh, true), Some("high"));
        assert_eq!(
            reasoning_effort("gpt-5", Level::Adaptive, true),
            Some("medium")
        );
        assert_eq!(reasoning_effort("gpt-5", Level::Off, true), None);
        // A compatible server is sent the effort whenever thinking is on.
        assert_eq!(
            reasoning_effort("qwen3:8b", Level::Minimal, false),
            Some("minimal")
        );
        assert!(!is_openai_reasoning_model("o10-preview"));
        assert!(is_openai_reasoning_model("o4-mini"));
    }
}
