//! Amazon Bedrock Converse through the AWS SDK: messages, tool use and results, images (raw
//! bytes in `image` blocks, for the model families that see them), `cachePoint` markers for
//! models that support prompt caching, and the SDK's errors mapped to [`ModelError`].
//!
//! The SDK's own retries are switched off: [`crate::retry::Retrying`] retries every provider
//! the same way, and the per-request timeout wraps the whole SDK call.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::config::retry::RetryConfig;
use aws_sdk_bedrockruntime::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::operation::converse::{ConverseError, ConverseOutput};
use aws_sdk_bedrockruntime::types::{
    CachePointBlock, CachePointType, ContentBlock, ConversationRole, ImageBlock, ImageFormat,
    ImageSource, InferenceConfiguration, Message as WireMessage, ReasoningContentBlock,
    ReasoningTextBlock, StopReason as WireStopReason, SystemContentBlock, Tool, ToolConfiguration,
    ToolInputSchema, ToolResultBlock, ToolResultContentBlock, ToolResultStatus, ToolSpecification,
    ToolUseBlock,
};
use aws_smithy_types::{Blob, Document, Number};
use base64::Engine;
use clawless_base::media::ImageInput;
use clawless_base::model::{
    ModelError, ModelProvider, ModelRequest, ModelResponse, Usage, UserImages,
};
use clawless_base::transcript::{AssistantBlock, StopReason, ToolCall};
use serde_json::Value;
use tokio::sync::OnceCell;

use crate::anthropic::{ClaudeThinking, claude_thinking};
use crate::http::{error_for_status, parse_retry_after};
use crate::turns::{Part, Role, alternating_turns};

/// Provider name in model refs (`bedrock/<model id>`) and errors.
pub const BEDROCK_PROVIDER: &str = "bedrock";

/// Default per-request timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Where the SDK client comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BedrockSettings {
    /// AWS region; `None` uses the SDK's usual chain (`AWS_REGION`, profile, …).
    pub region: Option<String>,
    /// Endpoint override (a VPC endpoint, a proxy or a test server).
    pub endpoint_url: Option<String>,
}

/// A model on Amazon Bedrock, called through the Converse API.
#[derive(Debug)]
pub struct BedrockModel {
    model: String,
    client: OnceCell<Client>,
    settings: BedrockSettings,
    /// An AWS configuration the process already loaded, which the client is built from
    /// instead of loading the default chain again.
    shared_config: Option<aws_config::SdkConfig>,
    timeout: Duration,
    prompt_caching: bool,
    sees_images: bool,
}

impl BedrockModel {
    /// A model using `client` (its retries are switched off; ours apply).
    pub fn new(client: &Client, model: impl Into<String>) -> Self {
        let model = model.into();
        let client = Client::from_conf(
            client
                .config()
                .to_builder()
                .retry_config(RetryConfig::disabled())
                .build(),
        );
        Self {
            prompt_caching: supports_prompt_caching(&model),
            sees_images: supports_images(&model),
            model,
            client: OnceCell::new_with(Some(client)),
            settings: BedrockSettings::default(),
            shared_config: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// A model whose client is built on first use from the default AWS configuration chain
    /// (credentials from the environment, profile or role), with `settings` applied.
    pub fn from_settings(settings: BedrockSettings, model: impl Into<String>) -> Self {
        let model = model.into();
        Self {
            prompt_caching: supports_prompt_caching(&model),
            sees_images: supports_images(&model),
            model,
            client: OnceCell::new(),
            settings,
            shared_config: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Builds the client, on first use, from `shared`: an AWS configuration this process has
    /// already loaded (a Lambda function's, at cold start), whose credentials, HTTP client and
    /// region it reuses instead of loading the default chain a second time. The settings'
    /// region and endpoint still win over `shared`'s.
    pub fn with_shared_config(mut self, shared: aws_config::SdkConfig) -> Self {
        self.shared_config = Some(shared);
        self
    }

    /// Sets the per-request timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Forces images on or off. By default they are sent only to model families known to see
    /// them (Claude 3 and later, Amazon Nova Lite, Pro and Premier); others never get any.
    pub fn with_images(mut self, sees_images: bool) -> Self {
        self.sees_images = sees_images;
        self
    }

    /// Forces `cachePoint` markers on or off. By default they are sent only to model
    /// families known to accept them (Anthropic Claude, Amazon Nova); others reject them.
    pub fn with_prompt_caching(mut self, enabled: bool) -> Self {
        self.prompt_caching = enabled;
        self
    }

    async fn client(&self) -> &Client {
        self.client
            .get_or_init(|| async {
                let loaded;
                let shared = match &self.shared_config {
                    Some(shared) => shared,
                    None => {
                        loaded = self.load_default_config().await;
                        &loaded
                    }
                };
                let mut conf = aws_sdk_bedrockruntime::config::Builder::from(shared)
                    .retry_config(RetryConfig::disabled());
                if let Some(region) = &self.settings.region {
                    conf = conf.region(aws_config::Region::new(region.clone()));
                }
                if let Some(endpoint) = &self.settings.endpoint_url {
                    conf = conf.endpoint_url(endpoint);
                }
                Client::from_conf(conf.build())
            })
            .await
    }

    /// The default AWS configuration chain. A configured region is given to the loader so it
    /// skips the region chain (and its instance-metadata lookup); the endpoint is applied to
    /// the client's configuration only, by [`Self::client`].
    async fn load_default_config(&self) -> aws_config::SdkConfig {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
        if let Some(region) = &self.settings.region {
            loader = loader.region(aws_config::Region::new(region.clone()));
        }
        loader.load().await
    }

    async fn call(&self, request: &ModelRequest) -> Result<ConverseOutput, ModelError> {
        let client = self.client().await;
        let (stable, dynamic) = request.system_parts();
        let mut system = Vec::new();
        if !stable.trim().is_empty() {
            system.push(SystemContentBlock::Text(stable.to_owned()));
            if self.prompt_caching {
                system.push(SystemContentBlock::CachePoint(cache_point()?));
            }
        }
        if !dynamic.trim().is_empty() {
            system.push(SystemContentBlock::Text(dynamic.to_owned()));
        }
        let thinking = self.thinking(request);
        let max_tokens = thinking
            .as_ref()
            .map_or(request.max_tokens, |thinking| thinking.max_tokens);
        let max_tokens = i32::try_from(max_tokens).unwrap_or(i32::MAX);
        let thinking_api = thinking.as_ref().map(|_| BEDROCK_PROVIDER);
        let mut call = client
            .converse()
            .model_id(&self.model)
            .set_system((!system.is_empty()).then_some(system))
            .set_messages(Some(wire_messages(
                request,
                self.sees_images,
                thinking_api,
            )?))
            .inference_config(
                InferenceConfiguration::builder()
                    .max_tokens(max_tokens)
                    .build(),
            );
        if !request.tools.is_empty() {
            call = call.tool_config(self.tool_config(request)?);
        }
        if let Some(thinking) = &thinking {
            call = call.additional_model_request_fields(to_document(&thinking_fields(thinking)));
        }
        match tokio::time::timeout(self.timeout, call.send()).await {
            Ok(result) => result.map_err(|err| map_sdk_error(err, self.timeout)),
            Err(_) => Err(ModelError::Timeout {
                provider: BEDROCK_PROVIDER.to_owned(),
                after: self.timeout,
            }),
        }
    }

    /// Claude's extended thinking for this request, the same fields as on Anthropic's own
    /// API (sent in `additionalModelRequestFields`); `None` for other model families, which
    /// Converse gives no common reasoning switch.
    fn thinking(&self, request: &ModelRequest) -> Option<ClaudeThinking> {
        if !self.model.contains("anthropic.claude") {
            return None;
        }
        claude_thinking(&self.model, request, BEDROCK_PROVIDER)
    }

    fn tool_config(&self, request: &ModelRequest) -> Result<ToolConfiguration, ModelError> {
        let mut tools = Vec::with_capacity(request.tools.len() + 1);
        for tool in &request.tools {
            let spec = ToolSpecification::builder()
                .name(&tool.name)
                .description(&tool.description)
                .input_schema(ToolInputSchema::Json(to_document(&tool.input_schema)))
                .build()
                .map_err(build_error)?;
            tools.push(Tool::ToolSpec(spec));
        }
        // Only Claude accepts a cache point among tools (Nova caches system and messages only).
        if self.prompt_caching && self.model.contains("anthropic.claude") {
            tools.push(Tool::CachePoint(cache_point()?));
        }
        ToolConfiguration::builder()
            .set_tools(Some(tools))
            .build()
            .map_err(build_error)
    }
}

#[async_trait]
impl ModelProvider for BedrockModel {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let output = self.call(request).await?;
        parse_output(&output, self.model_ref())
    }

    fn model_ref(&self) -> String {
        format!("{BEDROCK_PROVIDER}/{}", self.model)
    }

    fn sees_images(&self) -> bool {
        self.sees_images
    }
}

/// Model families whose Converse API takes image blocks: Claude from version 3 on (the older
/// `claude-v2` and `claude-instant` read text only) and Amazon Nova except the text-only Micro.
fn supports_images(model: &str) -> bool {
    let claude = model.contains("anthropic.claude")
        && !model.contains("claude-v2")
        && !model.contains("claude-instant");
    let nova = model.contains("amazon.nova") && !model.contains("nova-micro");
    claude || nova
}

/// Model families whose Converse API accepts `cachePoint` blocks. Model ids may carry a
/// cross-region prefix (`us.anthropic.claude-…`), hence `contains`.
fn supports_prompt_caching(model: &str) -> bool {
    model.contains("anthropic.claude") || model.contains("amazon.nova")
}

fn cache_point() -> Result<CachePointBlock, ModelError> {
    CachePointBlock::builder()
        .r#type(CachePointType::Default)
        .build()
        .map_err(build_error)
}

fn build_error(err: aws_sdk_bedrockruntime::error::BuildError) -> ModelError {
    ModelError::Invalid {
        provider: BEDROCK_PROVIDER.to_owned(),
        message: format!("cannot build the Converse request: {err}"),
    }
}

/// `additionalModelRequestFields` for Claude's thinking: `thinking` and, for adaptive
/// thinking, `output_config.effort`.
pub(crate) fn thinking_fields(thinking: &ClaudeThinking) -> Value {
    let mut fields = serde_json::Map::new();
    fields.insert("thinking".into(), thinking.thinking.clone());
    if let Some(effort) = thinking.effort {
        fields.insert(
            "output_config".into(),
            serde_json::json!({ "effort": effort }),
        );
    }
    Value::Object(fields)
}

fn wire_messages(
    request: &ModelRequest, images: bool, thinking_api: Option<&str>,
) -> Result<Vec<WireMessage>, ModelError> {
    let images: &[UserImages] = if images { &request.images } else { &[] };
    alternating_turns(&request.messages, images, thinking_api)
        .into_iter()
        .map(|turn| {
            let role = match turn.role {
                Role::User => ConversationRole::User,
                Role::Assistant => ConversationRole::Assistant,
            };
            let content = turn
                .parts
                .iter()
                .filter_map(|part| wire_block(part).transpose())
                .collect::<Result<Vec<_>, _>>()?;
            WireMessage::builder()
                .role(role)
                .set_content(Some(content))
                .build()
                .map_err(build_error)
        })
        .collect()
}

/// The Converse block for `part`; `None` for an image in a format Converse does not take.
fn wire_block(part: &Part<'_>) -> Result<Option<ContentBlock>, ModelError> {
    Ok(Some(match part {
        Part::Text(text) => ContentBlock::Text((*text).to_owned()),
        Part::ToolCall(call) => ContentBlock::ToolUse(
            ToolUseBlock::builder()
                .tool_use_id(&call.id)
                .name(&call.name)
                .input(to_document(&call.input))
                .build()
                .map_err(build_error)?,
        ),
        Part::ToolResult {
            tool_call_id,
            text,
            is_error,
        } => {
            let mut result = ToolResultBlock::builder()
                .tool_use_id(*tool_call_id)
                .content(ToolResultContentBlock::Text((*text).to_owned()));
            if *is_error {
                result = result.status(ToolResultStatus::Error);
            }
            ContentBlock::ToolResult(result.build().map_err(build_error)?)
        }
        Part::Image(image) => match image_block(image)? {
            Some(block) => ContentBlock::Image(block),
            None => return Ok(None),
        },
        Part::Thinking {
            redacted: Some(data),
            ..
        } => match base64::engine::general_purpose::STANDARD.decode(data) {
            Ok(bytes) => ContentBlock::ReasoningContent(ReasoningContentBlock::RedactedContent(
                Blob::new(bytes),
            )),
            Err(_) => return Ok(None),
        },
        Part::Thinking {
            text, signature, ..
        } => {
            let mut reasoning = ReasoningTextBlock::builder().text(*text);
            if let Some(signature) = signature {
                reasoning = reasoning.signature(*signature);
            }
            ContentBlock::ReasoningContent(ReasoningContentBlock::ReasoningText(
                reasoning.build().map_err(build_error)?,
            ))
        }
    }))
}

/// An `image` block with the raw bytes; `None` (and a warning) for a media type other than
/// PNG, JPEG, GIF or WebP.
fn image_block(image: &ImageInput) -> Result<Option<ImageBlock>, ModelError> {
    let Some(format) = image_format(&image.media_type) else {
        tracing::warn!(media_type = %image.media_type, "image format Bedrock does not take; not sent");
        return Ok(None);
    };
    ImageBlock::builder()
        .format(format)
        .source(ImageSource::Bytes(Blob::new(image.data.clone())))
        .build()
        .map(Some)
        .map_err(build_error)
}

fn image_format(media_type: &str) -> Option<ImageFormat> {
    let subtype = media_type.split(';').next()?.trim().to_ascii_lowercase();
    match subtype.as_str() {
        "image/png" => Some(ImageFormat::Png),
        "image/jpeg" | "image/jpg" => Some(ImageFormat::Jpeg),
        "image/gif" => Some(ImageFormat::Gif),
        "image/webp" => Some(ImageFormat::Webp),
        _ => None,
    }
}

fn parse_output(output: &ConverseOutput, model: String) -> Result<ModelResponse, ModelError> {
    let message = output
        .output()
        .and_then(|out| out.as_message().ok())
        .ok_or_else(|| ModelError::Invalid {
            provider: BEDROCK_PROVIDER.to_owned(),
            message: "response has no output message".to_owned(),
        })?;
    let content = message
        .content()
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(AssistantBlock::Text { text: text.clone() }),
            ContentBlock::ToolUse(tool_use) => Some(AssistantBlock::ToolCall(ToolCall {
                id: tool_use.tool_use_id().to_owned(),
                name: tool_use.name().to_owned(),
                input: from_document(tool_use.input()),
            })),
            ContentBlock::ReasoningContent(ReasoningContentBlock::ReasoningText(reasoning)) => {
                Some(AssistantBlock::Thinking {
                    text: reasoning.text().to_owned(),
                    signature: reasoning.signature().map(str::to_owned),
                    redacted: None,
                    api: BEDROCK_PROVIDER.to_owned(),
                })
            }
            ContentBlock::ReasoningContent(ReasoningContentBlock::RedactedContent(data)) => {
                Some(AssistantBlock::Thinking {
                    text: String::new(),
                    signature: None,
                    redacted: Some(crate::media::base64(data.as_ref())),
                    api: BEDROCK_PROVIDER.to_owned(),
                })
            }
            // Citations and media are not part of the neutral transcript.
            _ => None,
        })
        .collect();
    let stop_reason = match output.stop_reason() {
        WireStopReason::ToolUse => StopReason::ToolUse,
        WireStopReason::MaxTokens | WireStopReason::ModelContextWindowExceeded => {
            StopReason::MaxTokens
        }
        WireStopReason::ContentFiltered
        | WireStopReason::GuardrailIntervened
        | WireStopReason::MalformedModelOutput
        | WireStopReason::MalformedToolUse => StopReason::Error,
        _ => StopReason::EndTurn,
    };
    let count = |n: i32| u64::try_from(n).unwrap_or(0);
    let usage = output.usage().map_or_else(Usage::default, |u| Usage {
        input_tokens: count(u.input_tokens()),
        output_tokens: count(u.output_tokens()),
        cache_read_tokens: u.cache_read_input_tokens().map_or(0, count),
        cache_write_tokens: u.cache_write_input_tokens().map_or(0, count),
    });
    Ok(ModelResponse {
        content,
        stop_reason,
        usage,
        model,
    })
}

fn map_sdk_error(err: SdkError<ConverseError>, timeout: Duration) -> ModelError {
    let provider = BEDROCK_PROVIDER.to_owned();
    match &err {
        SdkError::TimeoutError(_) => ModelError::Timeout {
            provider,
            after: timeout,
        },
        SdkError::DispatchFailure(failure) if failure.is_timeout() => ModelError::Timeout {
            provider,
            after: timeout,
        },
        SdkError::DispatchFailure(_) => ModelError::Transport {
            provider,
            message: DisplayErrorContext(&err).to_string(),
        },
        SdkError::ServiceError(context) => {
            let raw = context.raw();
            let status = raw.status().as_u16();
            let retry_after = raw
                .headers()
                .get("retry-after")
                .and_then(|value| parse_retry_after(value, SystemTime::now()));
            let service = context.err();
            let message = service.message().unwrap_or("(no error message)").to_owned();
            match service {
                ConverseError::ThrottlingException(_) => ModelError::RateLimited {
                    provider,
                    retry_after,
                },
                ConverseError::ServiceUnavailableException(_)
                | ConverseError::InternalServerException(_)
                | ConverseError::ModelNotReadyException(_) => ModelError::Server {
                    provider,
                    status: if status >= 500 { status } else { 503 },
                },
                ConverseError::ModelTimeoutException(_) => ModelError::Timeout {
                    provider,
                    after: timeout,
                },
                ConverseError::AccessDeniedException(_) => ModelError::Auth { provider, message },
                _ => error_for_status(BEDROCK_PROVIDER, status, retry_after, &message),
            }
        }
        // The response arrived but could not be read, or the request could not be built.
        _ => ModelError::Invalid {
            provider,
            message: DisplayErrorContext(&err).to_string(),
        },
    }
}

/// JSON → the SDK's document type (tool inputs and schemas).
pub(crate) fn to_document(value: &Value) -> Document {
    match value {
        Value::Null => Document::Null,
        Value::Bool(b) => Document::Bool(*b),
        Value::Number(n) => Document::Number(if let Some(u) = n.as_u64() {
            Number::PosInt(u)
        } else if let Some(i) = n.as_i64() {
            Number::NegInt(i)
        } else {
            Number::Float(n.as_f64().unwrap_or(0.0))
        }),
        Value::String(s) => Document::String(s.clone()),
        Value::Array(items) => Document::Array(items.iter().map(to_document).collect()),
        Value::Object(map) => Document::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), to_document(v)))
                .collect::<HashMap<_, _>>(),
        ),
    }
}

/// The SDK's document type → JSON. Object keys come back sorted (documents are hash maps).
pub(crate) fn from_document(document: &Document) -> Value {
    match document {
        Document::Null => Value::Null,
        Document::Bool(b) => Value::Bool(*b),
        Document::Number(Number::PosInt(u)) => Value::from(*u),
        Document::Number(Number::NegInt(i)) => Value::from(*i),
        Document::Number(Number::Float(f)) => {
            serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number)
        }
        Document::String(s) => Value::String(s.clone()),
        Document::Array(items) => Value::Array(items.iter().map(from_document).collect()),
        Document::Object(map) => {
            let mut entries: Vec<(&String, &Document)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), from_document(v)))
                    .collect(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn documents_round_trip_json() {
        let value = json!({ "a": [1, -2, 2.5, null, true, "x"], "b": { "c": {} } });
        assert_eq!(from_document(&to_document(&value)), value);
    }

    #[test]
    fn caching_is_on_for_claude_and_nova_only() {
        assert!(supports_prompt_caching(
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
        ));
        assert!(supports_prompt_caching("amazon.nova-pro-v1:0"));
        assert!(!supports_prompt_caching("meta.llama3-70b-instruct-v1:0"));
    }

    #[test]
    fn images_go_to_claude_3_and_later_and_to_nova_but_micro() {
        assert!(supports_images(
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
        ));
        assert!(supports_images("anthropic.claude-3-haiku-20240307-v1:0"));
        assert!(!supports_images("anthropic.claude-v2:1"));
        assert!(!supports_images("anthropic.claude-instant-v1"));
        assert!(supports_images("us.amazon.nova-pro-v1:0"));
        assert!(!supports_images("amazon.nova-micro-v1:0"));
        assert!(!supports_images("meta.llama3-70b-instruct-v1:0"));
    }

    #[test]
    fn image_formats_follow_the_media_type() {
        assert_eq!(image_format("image/png"), Some(ImageFormat::Png));
        assert_eq!(image_format("Image/JPEG"), Some(ImageFormat::Jpeg));
        assert_eq!(image_format("image/webp; q=1"), Some(ImageFormat::Webp));
        assert_eq!(image_format("image/gif"), Some(ImageFormat::Gif));
        assert_eq!(image_format("image/tiff"), None);
    }
}
