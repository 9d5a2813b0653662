//! Model providers behind the core's [`ModelProvider`](clawless_base::model::ModelProvider)
//! port: Anthropic Messages, OpenAI Chat Completions (and any OpenAI-compatible server),
//! Amazon Bedrock Converse, plus retries, a fallback chain, config-driven construction and a
//! labelled offline model for machines with no key.
//!
//! Wire types stay here; the turn engine only sees `ModelRequest` and `ModelResponse`.
//! This crate knows nothing of channels or storage.

pub mod anthropic;
#[cfg(feature = "bedrock")]
pub mod bedrock;
pub mod config;
pub mod fallback;
pub mod http;
pub mod media;
pub mod offline;
pub mod openai;
pub mod retry;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
mod turns;

pub use anthropic::AnthropicModel;
#[cfg(feature = "bedrock")]
pub use bedrock::{BedrockModel, BedrockSettings};
pub use config::{
    ConfigError, ModelBuild, ModelFactory, ModelsConfig, ProviderApi, ProviderConfig, build_model,
    build_model_from, build_model_with, model_factory, process_env,
};
pub use fallback::FallbackChain;
pub use http::{ApiKey, HttpClient};
pub use offline::OfflineModel;
pub use openai::OpenAiModel;
pub use retry::{RetryPolicy, Retrying, Sleeper, TokioSleeper};
