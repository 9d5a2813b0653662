//! The model provider port: one request (system prompt, messages, tools) in, one response out.
//!
//! Wire formats, HTTP, retries and fallback chains live in `clawless-llm`; the turn engine
//! only sees [`ModelRequest`] and [`ModelResponse`].

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::transcript::{AssistantBlock, Message, StopReason};

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Exact name the model must call.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub input_schema: Value,
}

/// Everything a provider needs for one model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The system prompt. It may contain [`CACHE_BOUNDARY`]; providers with prompt caching mark
    /// the text before it as cacheable and send the prompt without the marker.
    pub system: String,
    /// The conversation so far, already repaired (every tool call has its result).
    pub messages: Vec<Message>,
    /// Tools the model may call; only policy-allowed tools are ever listed.
    pub tools: Vec<ToolSpec>,
    /// Output token limit.
    pub max_tokens: u32,
    /// Images shown with user messages, for a model that sees images; a provider without
    /// vision never gets any (the turn describes them in words instead).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<UserImages>,
    /// How hard the model thinks before answering; each provider maps it to its own fields
    /// (and ignores it for a model without reasoning). `off` sends nothing.
    #[serde(
        default,
        skip_serializing_if = "crate::thinking::ThinkingLevel::is_off"
    )]
    pub thinking: crate::thinking::ThinkingLevel,
}

/// Images shown with one user message of a [`ModelRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserImages {
    /// The index in [`ModelRequest::messages`] of the user message they belong to.
    pub message: usize,
    /// The images, in order, after the message's text.
    pub images: Vec<crate::media::ImageInput>,
}

/// Marker the system prompt builder places between the stable prefix and the dynamic tail.
pub const CACHE_BOUNDARY: &str = "\n<!-- CLAWLESS_CACHE_BOUNDARY -->\n";

impl ModelRequest {
    /// The system prompt split at [`CACHE_BOUNDARY`]: `(stable prefix, dynamic tail)`.
    /// Without a marker the whole prompt is the stable prefix.
    pub fn system_parts(&self) -> (&str, &str) {
        match self.system.split_once(CACHE_BOUNDARY) {
            Some((stable, dynamic)) => (stable, dynamic),
            None => (self.system.as_str(), ""),
        }
    }

    /// The system prompt without the cache marker, as providers without caching send it.
    pub fn system_text(&self) -> String {
        let (stable, dynamic) = self.system_parts();
        if dynamic.is_empty() {
            stable.to_owned()
        } else {
            format!("{stable}\n{dynamic}")
        }
    }
}

/// Token accounting reported by the provider.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Input tokens billed at the full rate.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
}

/// What the model answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelResponse {
    /// Text and tool calls in order.
    pub content: Vec<AssistantBlock>,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Token counts.
    #[serde(default)]
    pub usage: Usage,
    /// `provider/model` that actually answered (after any fallback).
    pub model: String,
}

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// 429: the provider asks us to slow down.
    #[error("rate limited by {provider}")]
    RateLimited {
        /// Provider name.
        provider: String,
        /// Its `retry-after`, when given.
        retry_after: Option<Duration>,
    },
    /// 5xx or an overloaded signal.
    #[error("{provider} server error (HTTP {status})")]
    Server {
        /// Provider name.
        provider: String,
        /// HTTP status.
        status: u16,
    },
    /// The request took longer than its timeout.
    #[error("{provider} request timed out after {after:?}")]
    Timeout {
        /// Provider name.
        provider: String,
        /// The timeout that fired.
        after: Duration,
    },
    /// Missing or rejected credentials (401/403).
    #[error("{provider} rejected the credentials: {message}")]
    Auth {
        /// Provider name.
        provider: String,
        /// The provider's message.
        message: String,
    },
    /// The provider refused the request as malformed (400/404/422) or the response could not be read.
    #[error("{provider} request failed: {message}")]
    Invalid {
        /// Provider name.
        provider: String,
        /// What went wrong.
        message: String,
    },
    /// The connection failed before a response.
    #[error("{provider} unreachable: {message}")]
    Transport {
        /// Provider name.
        provider: String,
        /// What went wrong.
        message: String,
    },
}

impl ModelError {
    /// True for failures worth retrying or falling back on: rate limits, 5xx, timeouts, transport.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. }
                | Self::Server { .. }
                | Self::Timeout { .. }
                | Self::Transport { .. }
        )
    }
}

/// A model (or a chain of models) that answers requests.
#[async_trait]
pub trait ModelProvider: Send + Sync + std::fmt::Debug {
    /// Sends one request and returns the whole response.
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError>;

    /// `provider/model` of the primary model, for the system prompt's runtime line.
    fn model_ref(&self) -> String;

    /// Whether the model is shown [`ModelRequest::images`]. A provider that answers `false`
    /// drops them unsent; the turn then describes images in words instead.
    fn sees_images(&self) -> bool {
        false
    }
}
