//! `tools.web`: the settings of the web tools that are not tool policy. Today that is
//! `tools.web.search`, the `web_search` tool's providers, limits and cache. Unknown keys are
//! errors, as everywhere in the config.

use serde::Deserialize;

/// `tools.web`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct WebToolsConfig {
    /// The `web_search` tool.
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub search: WebSearchConfig,
}

/// `web_search` results per call when the model does not say.
pub const DEFAULT_MAX_RESULTS: u32 = 5;
/// Seconds a provider request may take.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 30;
/// Minutes a result stays cached.
pub const DEFAULT_CACHE_TTL_MINUTES: u64 = 15;

/// `tools.web.search`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct WebSearchConfig {
    /// `false` removes the `web_search` tool. Default `true`.
    #[cfg_attr(feature = "schema", schemars(extend("default" = true)))]
    pub enabled: Option<bool>,
    /// The provider to use, always (no fallback to another). Unset: the first provider with
    /// a key, in the order brave, gemini, perplexity, tavily, searxng; a provider that fails
    /// is then skipped for the next one with a key. Nothing configured: brave, which answers
    /// with guidance on setting its key.
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub provider: Option<SearchProviderId>,
    /// Results per call when the model does not say (1–10). Default 5.
    #[cfg_attr(feature = "schema", schemars(extend("default" = 5)))]
    pub max_results: Option<u32>,
    /// Seconds a provider request may take (at least 1). Default 30.
    #[cfg_attr(feature = "schema", schemars(extend("default" = 30)))]
    pub timeout_seconds: Option<u64>,
    /// Minutes a result stays cached in the state store; 0 turns the cache off. Default 15.
    #[cfg_attr(feature = "schema", schemars(extend("default" = 15)))]
    pub cache_ttl_minutes: Option<u64>,
    /// Brave Search (`BRAVE_API_KEY`).
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub brave: ProviderSettings,
    /// Google Gemini with Search grounding (`GEMINI_API_KEY`).
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub gemini: ProviderSettings,
    /// Perplexity Search (`PERPLEXITY_API_KEY`).
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub perplexity: ProviderSettings,
    /// Tavily (`TAVILY_API_KEY`).
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub tavily: ProviderSettings,
    /// A SearXNG instance (`SEARXNG_BASE_URL`; its `baseUrl` is what configures it).
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub searxng: ProviderSettings,
}

impl WebSearchConfig {
    /// `enabled`, true when unset.
    pub fn enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }

    /// `maxResults` clamped to 1–10, 5 when unset.
    pub fn max_results(&self) -> u32 {
        self.max_results.unwrap_or(DEFAULT_MAX_RESULTS).clamp(1, 10)
    }

    /// `timeoutSeconds`, at least one second, 30 when unset.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(
            self.timeout_seconds
                .unwrap_or(DEFAULT_TIMEOUT_SECONDS)
                .max(1),
        )
    }

    /// `cacheTtlMinutes` in milliseconds (0: no cache), 15 minutes when unset.
    pub fn cache_ttl_ms(&self) -> u64 {
        self.cache_ttl_minutes
            .unwrap_or(DEFAULT_CACHE_TTL_MINUTES)
            .saturating_mul(60_000)
    }

    /// The settings of `provider`.
    pub fn settings(&self, provider: SearchProviderId) -> &ProviderSettings {
        match provider {
            SearchProviderId::Brave => &self.brave,
            SearchProviderId::Gemini => &self.gemini,
            SearchProviderId::Perplexity => &self.perplexity,
            SearchProviderId::Tavily => &self.tavily,
            SearchProviderId::Searxng => &self.searxng,
        }
    }
}

/// A `web_search` provider, in auto-detection order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum SearchProviderId {
    /// Brave Search API.
    Brave,
    /// Gemini `generateContent` with the `google_search` tool.
    Gemini,
    /// Perplexity's Search API (`/search`).
    Perplexity,
    /// Tavily's search API.
    Tavily,
    /// A SearXNG instance's JSON API.
    Searxng,
}

impl SearchProviderId {
    /// Every provider, in auto-detection order.
    pub const ALL: [SearchProviderId; 5] = [
        Self::Brave,
        Self::Gemini,
        Self::Perplexity,
        Self::Tavily,
        Self::Searxng,
    ];

    /// The id as configured and as results name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Brave => "brave",
            Self::Gemini => "gemini",
            Self::Perplexity => "perplexity",
            Self::Tavily => "tavily",
            Self::Searxng => "searxng",
        }
    }
}

/// `tools.web.search.<provider>`.
#[derive(Clone, Default, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ProviderSettings {
    /// The API key itself. Prefer a `secrets:` entry or the environment variable under the
    /// provider's variable name (e.g. `BRAVE_API_KEY`), which keep it out of the file. For
    /// SearXNG, an optional bearer token for an instance behind authentication.
    pub api_key: Option<String>,
    /// The API's base URL (tests and proxies); for SearXNG, the instance (required, unless
    /// `SEARXNG_BASE_URL` names it).
    pub base_url: Option<String>,
    /// The model (Gemini only; default `gemini-2.5-flash`).
    pub model: Option<String>,
}

impl std::fmt::Debug for ProviderSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderSettings")
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_hold_when_nothing_is_set_and_limits_are_clamped() {
        let config = WebSearchConfig::default();
        assert!(config.enabled());
        assert_eq!(config.max_results(), 5);
        assert_eq!(config.timeout(), std::time::Duration::from_secs(30));
        assert_eq!(config.cache_ttl_ms(), 15 * 60_000);
        let clamped = WebSearchConfig {
            max_results: Some(50),
            timeout_seconds: Some(0),
            cache_ttl_minutes: Some(0),
            ..WebSearchConfig::default()
        };
        assert_eq!(clamped.max_results(), 10);
        assert_eq!(clamped.timeout(), std::time::Duration::from_secs(1));
        assert_eq!(clamped.cache_ttl_ms(), 0);
    }

    #[test]
    fn an_api_key_never_shows_in_debug_output() {
        let settings = ProviderSettings {
            api_key: Some("sk-secret".to_owned()),
            ..ProviderSettings::default()
        };
        assert!(!format!("{settings:?}").contains("sk-secret"));
    }
}
