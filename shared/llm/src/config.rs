//! The `models:` section of `clawless.yaml` and [`build_model`], which turns it (plus the
//! providers' usual environment variables) into one ready [`ModelProvider`]: the primary model
//! with retries, then its fallbacks, or the offline model when nothing is configured.
//!
//! ```yaml
//! models:
//!   primary: anthropic/claude-sonnet-4-5
//!   fallbacks: [openai/gpt-4o-mini, ollama/llama3.2]
//!   maxTokens: 4096
//!   timeoutSeconds: 120
//!   maxRetries: 2
//!   providers:
//!     anthropic: { apiKey: "…", baseUrl: "https://api.anthropic.com" }
//!     openai: { apiKeyEnv: MY_OPENAI_KEY }
//!     ollama: { api: openai, baseUrl: "http://127.0.0.1:11434/v1", images: true }
//!     bedrock: { region: us-east-1 }
//! ```
//!
//! The environment is read through a closure, never directly, so tests pass their own.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use clawless_base::model::ModelProvider;
use serde::Deserialize;

use crate::anthropic::{AnthropicModel, DEFAULT_ANTHROPIC_BASE_URL};
#[cfg(feature = "bedrock")]
use crate::bedrock::{BedrockModel, BedrockSettings};
use crate::fallback::FallbackChain;
use crate::http::{ApiKey, ClientBuildError, HttpClient};
use crate::offline::OfflineModel;
use crate::openai::{DEFAULT_OPENAI_BASE_URL, OpenAiModel};
use crate::retry::{RetryPolicy, Retrying, Sleeper, TokioSleeper};

/// Output token limit the turn engine uses when `maxTokens` is not set.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
/// Per-request timeout when `timeoutSeconds` is not set.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 120;
/// Retries after the first attempt when `maxRetries` is not set.
pub const DEFAULT_MAX_RETRIES: u32 = 2;
/// Primary model when none is configured but `ANTHROPIC_API_KEY` is set.
pub const DEFAULT_ANTHROPIC_MODEL: &str = "anthropic/claude-sonnet-4-5";
/// Primary model when none is configured but `OPENAI_API_KEY` is set.
pub const DEFAULT_OPENAI_MODEL: &str = "openai/gpt-4o-mini";
/// Base URL of a local Ollama server's OpenAI-compatible API.
pub const DEFAULT_OLLAMA_BASE_URL: &str = "http://127.0.0.1:11434/v1";

/// `models:` in `clawless.yaml`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ModelsConfig {
    /// The model asked first, as `provider/model` (e.g. `anthropic/claude-sonnet-4-5`,
    /// `openai/gpt-4o-mini`, `ollama/llama3.2`, `bedrock/<model id>`). Unset:
    /// `anthropic/claude-sonnet-4-5` if `ANTHROPIC_API_KEY` is set, else `openai/gpt-4o-mini`
    /// if `OPENAI_API_KEY` is set, else the offline model (which only says it is offline).
    pub primary: Option<String>,
    /// `provider/model`s tried in order when the previous one fails in a way another model
    /// could get past (rate limit, server error, timeout, network, rejected key), each after
    /// its own retries. Needs `primary`.
    pub fallbacks: Vec<String>,
    /// More `provider/model`s a session may choose with `/model <model>` or `/new <model>`
    /// (the primary, the fallbacks and `agents.defaults.models` always may).
    pub allowed: Vec<String>,
    /// Output token limit of one model call.
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_MAX_TOKENS)))]
    pub max_tokens: Option<u32>,
    /// Timeout of one model request, in seconds.
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_TIMEOUT_SECONDS)))]
    pub timeout_seconds: Option<u64>,
    /// Retries per model after its first attempt (with backoff, honouring `Retry-After`),
    /// before the next fallback is tried.
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_MAX_RETRIES)))]
    pub max_retries: Option<u32>,
    /// Per-provider settings, keyed by the provider part of the model refs (`anthropic`,
    /// `openai`, `bedrock`, `ollama`, `vllm` or a name of your own with `api` set).
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub providers: BTreeMap<String, ProviderConfig>,
}

impl ModelsConfig {
    /// The models a session may choose: the primary, the fallbacks and `allowed`, once each.
    pub fn choosable(&self) -> Vec<String> {
        let mut models: Vec<String> = Vec::new();
        let named = self
            .primary
            .iter()
            .chain(&self.fallbacks)
            .chain(&self.allowed);
        for model in named
            .map(|model| model.trim())
            .filter(|model| !model.is_empty())
        {
            if !models.iter().any(|known| known == model) {
                models.push(model.to_owned());
            }
        }
        models
    }

    /// `maxTokens` or its default.
    pub fn max_tokens(&self) -> u32 {
        self.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)
    }

    /// `timeoutSeconds` or its default.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS))
    }

    /// The retry policy `maxRetries` describes.
    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy::with_max_retries(self.max_retries.unwrap_or(DEFAULT_MAX_RETRIES))
    }

    /// The longest one model call through [`build_model`]'s chain can take: for the primary
    /// and each fallback, every attempt running into the timeout, with the longest wait
    /// [`RetryPolicy::delay`] allows between attempts. With the defaults, 3 x 120 s + 2 x 30 s
    /// = 420 s. A deployment's function timeout must leave room for it (see `template.yaml`).
    pub fn worst_case_call(&self) -> Duration {
        let policy = self.retry_policy();
        let attempts = policy.max_attempts.max(1);
        let longest_wait = policy.max_retry_after.max(policy.max_delay);
        let per_model =
            self.timeout().saturating_mul(attempts) + longest_wait.saturating_mul(attempts - 1);
        let models = u32::try_from(self.fallbacks.len())
            .unwrap_or(u32::MAX)
            .saturating_add(1);
        per_model.saturating_mul(models)
    }
}

/// Which wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ProviderApi {
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Chat Completions (and compatible servers).
    Openai,
    /// Amazon Bedrock Converse.
    Bedrock,
}

/// One entry of `models.providers`.
#[derive(Clone, Default, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ProviderConfig {
    /// The wire format the provider speaks: `anthropic`, `openai` (OpenAI Chat Completions
    /// and compatible servers) or `bedrock`. Unset: implied by the provider's name for
    /// `anthropic`, `openai`, `bedrock`, `ollama` and `vllm`; required for any other name.
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub api: Option<ProviderApi>,
    /// The API key itself. Prefer `apiKeyEnv` or `secrets:`, which keep it out of the file.
    pub api_key: Option<String>,
    /// The name of an environment variable (or `secrets:` entry) holding the API key. Unset:
    /// the provider's usual variable (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`).
    pub api_key_env: Option<String>,
    /// Base URL of the API: without `/v1` for Anthropic, with it for OpenAI-compatible
    /// servers (e.g. `http://127.0.0.1:11434/v1`); the endpoint override for Bedrock.
    /// Unset: `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL` for those two providers, else their
    /// public endpoint; `http://127.0.0.1:11434/v1` for `ollama`; required for any other
    /// OpenAI-compatible provider.
    pub base_url: Option<String>,
    /// AWS region of Bedrock (Bedrock only). Unset: `AWS_REGION`, else `AWS_DEFAULT_REGION`,
    /// else the AWS configuration's region.
    pub region: Option<String>,
    /// Whether the provider's models are shown the images sent with messages (photos in a
    /// chat); a provider that is not is never sent any, and reads a note in words instead.
    /// Unset: yes for `anthropic`-API providers and the official OpenAI endpoint; for Bedrock,
    /// yes for Claude 3 and later and Amazon Nova Lite, Pro and Premier; no for any other
    /// OpenAI-compatible server (set it for a vision model on Ollama, vLLM, …).
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub images: Option<bool>,
}

impl fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("api", &self.api)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("api_key_env", &self.api_key_env)
            .field("base_url", &self.base_url)
            .field("region", &self.region)
            .field("images", &self.images)
            .finish()
    }
}

/// Why the models could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A model ref without a `/`.
    #[error("model {0:?} is not of the form provider/model")]
    InvalidModelRef(String),
    /// A provider with no known wire format.
    #[error(
        "model {model_ref}: unknown provider {provider:?}; add models.providers.{provider} with api: anthropic, openai or bedrock"
    )]
    UnknownProvider {
        /// The provider part.
        provider: String,
        /// The whole ref.
        model_ref: String,
    },
    /// The provider's public endpoint needs a key and none was found.
    #[error("model {model_ref}: no API key for {provider}; {hint}")]
    MissingApiKey {
        /// The provider.
        provider: String,
        /// The whole ref.
        model_ref: String,
        /// Where a key can be given.
        hint: String,
    },
    /// A Bedrock model in a build without the `bedrock` feature.
    #[error(
        "model {model_ref}: this build has no Amazon Bedrock support; build it with `--features bedrock`"
    )]
    BedrockNotBuilt {
        /// The whole ref.
        model_ref: String,
    },
    /// An OpenAI-compatible provider without a base URL.
    #[error("model {model_ref}: models.providers.{provider}.baseUrl is required")]
    MissingBaseUrl {
        /// The provider.
        provider: String,
        /// The whole ref.
        model_ref: String,
    },
    /// `fallbacks` given without `primary`.
    #[error("models.fallbacks is set but models.primary is not")]
    FallbacksWithoutPrimary,
    /// The HTTP client could not be built.
    #[error(transparent)]
    HttpClient(#[from] ClientBuildError),
}

/// Reads the process environment; the usual `env` argument of [`build_model`] outside tests.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Builds the model the config describes, waiting between retries with the real clock.
pub fn build_model(
    config: &ModelsConfig, env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn ModelProvider>, ConfigError> {
    build_model_from(config, env, &ModelBuild::default())
}

/// [`build_model`] with an injected [`Sleeper`] (tests record delays instead of waiting).
pub fn build_model_with(
    config: &ModelsConfig, env: &dyn Fn(&str) -> Option<String>, sleeper: Arc<dyn Sleeper>,
) -> Result<Arc<dyn ModelProvider>, ConfigError> {
    build_model_from(config, env, &ModelBuild::default().with_sleeper(sleeper))
}

/// What [`build_model_from`] gives the models it builds, beyond the config and the
/// environment: how retries wait and, with the `bedrock` feature, an AWS configuration the
/// process has already loaded.
#[derive(Clone)]
pub struct ModelBuild {
    sleeper: Arc<dyn Sleeper>,
    #[cfg(feature = "bedrock")]
    aws_config: Option<aws_config::SdkConfig>,
}

impl Default for ModelBuild {
    /// Retries wait on the real clock; Bedrock models load the default AWS chain.
    fn default() -> Self {
        Self {
            sleeper: Arc::new(TokioSleeper),
            #[cfg(feature = "bedrock")]
            aws_config: None,
        }
    }
}

impl fmt::Debug for ModelBuild {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelBuild").finish_non_exhaustive()
    }
}

impl ModelBuild {
    /// Retries wait through `sleeper`.
    pub fn with_sleeper(mut self, sleeper: Arc<dyn Sleeper>) -> Self {
        self.sleeper = sleeper;
        self
    }

    /// Bedrock models build their client from `shared` (see
    /// [`BedrockModel::with_shared_config`]), so a process that has loaded its AWS
    /// configuration once does not load it again for the model.
    #[cfg(feature = "bedrock")]
    pub fn with_aws_config(mut self, shared: aws_config::SdkConfig) -> Self {
        self.aws_config = Some(shared);
        self
    }
}

/// Builds the chain for a session's chosen model: `model_ref` first, then the configured
/// fallbacks. Built on first use by the turn service and kept.
pub type ModelFactory =
    Arc<dyn Fn(&str) -> Result<Arc<dyn ModelProvider>, ConfigError> + Send + Sync>;

/// A [`ModelFactory`] over `config`: each chosen model is built as the primary of a copy of
/// it, with its fallbacks, keys from `env`, and `build`'s sleeper and AWS configuration.
pub fn model_factory(
    config: ModelsConfig, env: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    build: ModelBuild,
) -> ModelFactory {
    Arc::new(move |model_ref: &str| {
        let mut chosen = config.clone();
        chosen.primary = Some(model_ref.to_owned());
        chosen
            .fallbacks
            .retain(|fallback| fallback.trim() != model_ref);
        build_model_from(&chosen, &env, &build)
    })
}

/// Builds the model the config describes, with `build`'s sleeper and shared AWS
/// configuration.
///
/// Keys and base URLs come from `models.providers.<name>` first; for `anthropic` and
/// `openai`, `ANTHROPIC_API_KEY` / `ANTHROPIC_BASE_URL` and `OPENAI_API_KEY` /
/// `OPENAI_BASE_URL` fill what the config leaves out. A public endpoint without a key is a
/// [`ConfigError::MissingApiKey`]; a custom base URL (a proxy, Ollama, vLLM) may go without.
/// Bedrock credentials come from `build`'s AWS configuration, else from the AWS SDK's own
/// chain, when the client is first used.
pub fn build_model_from(
    config: &ModelsConfig, env: &dyn Fn(&str) -> Option<String>, build: &ModelBuild,
) -> Result<Arc<dyn ModelProvider>, ConfigError> {
    let env = |name: &str| env(name).filter(|value| !value.trim().is_empty());
    let primary = match config.primary.as_deref().map(str::trim) {
        Some(primary) if !primary.is_empty() => primary.to_owned(),
        _ if !config.fallbacks.is_empty() => return Err(ConfigError::FallbacksWithoutPrimary),
        _ => match default_primary(config, &env) {
            Some(primary) => primary.to_owned(),
            None => {
                tracing::info!(
                    "no model configured and no model key found: using the offline model"
                );
                return Ok(Arc::new(OfflineModel::new()));
            }
        },
    };
    let http = HttpClient::new()?;
    let mut links = Vec::with_capacity(1 + config.fallbacks.len());
    for model_ref in std::iter::once(&primary).chain(config.fallbacks.iter()) {
        let provider = build_one(config, model_ref.trim(), &env, &http, build)?;
        // The offline model never fails, so it needs no retries.
        let link: Arc<dyn ModelProvider> = if provider.model_ref().starts_with("offline/") {
            provider
        } else {
            Arc::new(Retrying::new(
                provider,
                config.retry_policy(),
                build.sleeper.clone(),
            ))
        };
        links.push(link);
    }
    let mut links = links.into_iter();
    let Some(first) = links.next() else {
        return Err(ConfigError::InvalidModelRef(primary));
    };
    let rest: Vec<_> = links.collect();
    if rest.is_empty() {
        Ok(first)
    } else {
        Ok(Arc::new(FallbackChain::new(first, rest)))
    }
}

fn default_primary(
    config: &ModelsConfig, env: &dyn Fn(&str) -> Option<String>,
) -> Option<&'static str> {
    let has_key = |provider: &str, variable: &str| {
        let configured = config.providers.get(provider);
        configured
            .and_then(|p| p.api_key.as_deref())
            .is_some_and(|k| !k.trim().is_empty())
            || configured
                .and_then(|p| p.api_key_env.as_deref())
                .and_then(env)
                .is_some()
            || env(variable).is_some()
    };
    if has_key("anthropic", "ANTHROPIC_API_KEY") {
        Some(DEFAULT_ANTHROPIC_MODEL)
    } else if has_key("openai", "OPENAI_API_KEY") {
        Some(DEFAULT_OPENAI_MODEL)
    } else {
        None
    }
}

fn build_one(
    config: &ModelsConfig, model_ref: &str, env: &dyn Fn(&str) -> Option<String>,
    http: &HttpClient,
    #[cfg_attr(
        not(feature = "bedrock"),
        expect(unused_variables, reason = "only Bedrock models take from it")
    )]
    build: &ModelBuild,
) -> Result<Arc<dyn ModelProvider>, ConfigError> {
    let Some((provider, model)) = model_ref
        .split_once('/')
        .filter(|(p, m)| !p.is_empty() && !m.is_empty())
    else {
        return Err(ConfigError::InvalidModelRef(model_ref.to_owned()));
    };
    if provider == "offline" {
        return Ok(Arc::new(OfflineModel::new()));
    }
    let settings = config.providers.get(provider).cloned().unwrap_or_default();
    let api = match (settings.api, provider) {
        (Some(api), _) => api,
        (None, "anthropic") => ProviderApi::Anthropic,
        (None, "openai" | "ollama" | "vllm") => ProviderApi::Openai,
        (None, "bedrock") => ProviderApi::Bedrock,
        (None, _) => {
            return Err(ConfigError::UnknownProvider {
                provider: provider.to_owned(),
                model_ref: model_ref.to_owned(),
            });
        }
    };
    let configured = |value: &Option<String>| {
        value
            .as_deref()
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    // The providers' usual variables apply to the provider of that name only: a custom
    // OpenAI-compatible server must not receive the OpenAI key.
    let usual = |official: &str, variable: &str| {
        if provider == official {
            env(variable)
        } else {
            None
        }
    };
    let api_key = configured(&settings.api_key)
        .or_else(|| settings.api_key_env.as_deref().and_then(env))
        .or_else(|| match api {
            ProviderApi::Anthropic => usual("anthropic", "ANTHROPIC_API_KEY"),
            ProviderApi::Openai => usual("openai", "OPENAI_API_KEY"),
            ProviderApi::Bedrock => None,
        })
        .and_then(ApiKey::new);
    let base_url = configured(&settings.base_url).or_else(|| match api {
        ProviderApi::Anthropic => usual("anthropic", "ANTHROPIC_BASE_URL"),
        ProviderApi::Openai => usual("openai", "OPENAI_BASE_URL"),
        ProviderApi::Bedrock => None,
    });
    let timeout = config.timeout();
    let missing_key = |variable: &str| ConfigError::MissingApiKey {
        provider: provider.to_owned(),
        model_ref: model_ref.to_owned(),
        hint: format!("set {variable} or models.providers.{provider}.apiKey"),
    };

    Ok(match api {
        ProviderApi::Anthropic => {
            let base_url = base_url.unwrap_or_else(|| DEFAULT_ANTHROPIC_BASE_URL.to_owned());
            if api_key.is_none() && base_url.trim_end_matches('/') == DEFAULT_ANTHROPIC_BASE_URL {
                return Err(missing_key("ANTHROPIC_API_KEY"));
            }
            Arc::new(
                AnthropicModel::new(http.clone(), model)
                    .with_provider_name(provider)
                    .with_api_key(api_key)
                    .with_base_url(base_url)
                    .with_timeout(timeout)
                    .with_images(settings.images.unwrap_or(true)),
            )
        }
        ProviderApi::Openai => {
            let base_url = match (base_url, provider) {
                (Some(url), _) => url,
                (None, "openai") => DEFAULT_OPENAI_BASE_URL.to_owned(),
                (None, "ollama") => DEFAULT_OLLAMA_BASE_URL.to_owned(),
                (None, _) => {
                    return Err(ConfigError::MissingBaseUrl {
                        provider: provider.to_owned(),
                        model_ref: model_ref.to_owned(),
                    });
                }
            };
            if api_key.is_none() && base_url.trim_end_matches('/') == DEFAULT_OPENAI_BASE_URL {
                return Err(missing_key("OPENAI_API_KEY"));
            }
            Arc::new(
                OpenAiModel::new(http.clone(), model)
                    .with_provider_name(provider)
                    .with_api_key(api_key)
                    .with_base_url(base_url)
                    .with_timeout(timeout)
                    .with_images(settings.images),
            )
        }
        #[cfg(not(feature = "bedrock"))]
        ProviderApi::Bedrock => {
            return Err(ConfigError::BedrockNotBuilt {
                model_ref: model_ref.to_owned(),
            });
        }
        #[cfg(feature = "bedrock")]
        ProviderApi::Bedrock => {
            let region = configured(&settings.region)
                .or_else(|| env("AWS_REGION"))
                .or_else(|| env("AWS_DEFAULT_REGION"));
            let bedrock = BedrockModel::from_settings(
                BedrockSettings {
                    region,
                    endpoint_url: base_url,
                },
                model,
            )
            .with_timeout(timeout);
            let bedrock = match settings.images {
                Some(sees_images) => bedrock.with_images(sees_images),
                None => bedrock,
            };
            Arc::new(match &build.aws_config {
                Some(shared) => bedrock.with_shared_config(shared.clone()),
                None => bedrock,
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn the_worst_call_counts_every_attempt_its_waits_and_every_fallback() {
        // The defaults: 3 attempts of 120 s, 2 waits of at most 30 s (a capped retry-after).
        assert_eq!(
            ModelsConfig::default().worst_case_call(),
            Duration::from_secs(420)
        );
        let config = ModelsConfig {
            primary: Some("anthropic/claude-sonnet-4-5".to_owned()),
            fallbacks: vec!["openai/gpt-4o-mini".to_owned()],
            timeout_seconds: Some(60),
            max_retries: Some(0),
            ..ModelsConfig::default()
        };
        assert_eq!(config.worst_case_call(), Duration::from_secs(120));
    }

    #[test]
    fn nothing_configured_means_the_offline_model() {
        let model = build_model(&ModelsConfig::default(), &no_env).expect("builds");
        assert_eq!(model.model_ref(), "offline/scripted");
    }

    #[test]
    fn a_key_in_the_environment_picks_that_provider() {
        let env = |name: &str| (name == "OPENAI_API_KEY").then(|| "sk-test".to_owned());
        let model = build_model(&ModelsConfig::default(), &env).expect("builds");
        assert_eq!(model.model_ref(), DEFAULT_OPENAI_MODEL);
        let env = |name: &str| (name == "ANTHROPIC_API_KEY").then(|| "sk-ant".to_owned());
        let model = build_model(&ModelsConfig::default(), &env).expect("builds");
        assert_eq!(model.model_ref(), DEFAULT_ANTHROPIC_MODEL);
    }

    #[test]
    fn public_endpoints_without_keys_are_config_errors() {
        let config = ModelsConfig {
            primary: Some("anthropic/claude-sonnet-4-5".into()),
            ..ModelsConfig::default()
        };
        let err = build_model(&config, &no_env).expect_err("no key");
        assert!(err.to_string().contains("ANTHROPIC_API_KEY"), "{err}");
    }

    #[test]
    fn bad_refs_and_unknown_providers_are_named() {
        let config = |primary: &str| ModelsConfig {
            primary: Some(primary.into()),
            ..ModelsConfig::default()
        };
        assert!(matches!(
            build_model(&config("gpt-4o"), &no_env),
            Err(ConfigError::InvalidModelRef(_))
        ));
        assert!(matches!(
            build_model(&config("acme/m1"), &no_env),
            Err(ConfigError::UnknownProvider { .. })
        ));
        assert!(matches!(
            build_model(&config("vllm/qwen"), &no_env),
            Err(ConfigError::MissingBaseUrl { .. })
        ));
        let fallbacks_only = ModelsConfig {
            fallbacks: vec!["openai/gpt-4o-mini".into()],
            ..ModelsConfig::default()
        };
        assert!(matches!(
            build_model(&fallbacks_only, &no_env),
            Err(ConfigError::FallbacksWithoutPrimary)
        ));
    }

    #[cfg(feature = "bedrock")]
    #[test]
    fn bedrock_needs_no_key_and_takes_its_region_from_config_or_env() {
        let config = ModelsConfig {
            primary: Some("bedrock/anthropic.claude-3-5-haiku-20241022-v1:0".into()),
            ..ModelsConfig::default()
        };
        let env = |name: &str| (name == "AWS_REGION").then(|| "eu-west-1".to_owned());
        let model = build_model(&config, &env).expect("builds without touching AWS");
        assert_eq!(
            model.model_ref(),
            "bedrock/anthropic.claude-3-5-haiku-20241022-v1:0"
        );
    }

    #[test]
    fn yaml_shape_parses_and_debug_hides_keys() {
        let config: ModelsConfig = serde_json::from_value(serde_json::json!({
            "primary": "anthropic/claude-sonnet-4-5",
            "fallbacks": ["ollama/llama3.2"],
            "maxTokens": 2048,
            "timeoutSeconds": 30,
            "maxRetries": 1,
            "providers": {
                "anthropic": { "apiKey": "sk-secret" },
                "ollama": { "api": "openai", "baseUrl": "http://127.0.0.1:11434/v1" },
                "bedrock": { "region": "eu-west-1" },
            },
        }))
        .expect("parses");
        assert_eq!(config.max_tokens(), 2048);
        assert_eq!(config.timeout(), Duration::from_secs(30));
        assert_eq!(config.retry_policy().max_attempts, 2);
        assert_eq!(config.providers["ollama"].api, Some(ProviderApi::Openai));
        assert!(!format!("{config:?}").contains("sk-secret"));
        let typo = serde_json::from_value::<ModelsConfig>(serde_json::json!({ "primry": "x/y" }));
        assert!(typo.is_err());
    }
}
