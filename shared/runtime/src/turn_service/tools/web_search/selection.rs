//! Which provider answers a call. An explicit `tools.web.search.provider` is the only one
//! tried. Otherwise every provider with a credential is tried in auto-detection order (brave,
//! gemini, perplexity, tavily, searxng), the next taking over when one fails; with none, the
//! first provider is shown and answers with guidance on setting its key. There is no
//! key-free provider: scraping a search page from a data-centre address is met with bot
//! challenges, so silence would be the likely outcome.
//!
//! A credential is the provider's `apiKey` in the config, else a `secrets:` entry or an
//! environment variable under the provider's variable name (looked up in that order by the
//! caller's lookup). SearXNG's credential is its instance's base URL.

use serde_json::Value;

use super::params::soft;
use crate::tools_section::web::{SearchProviderId, WebSearchConfig};

/// The providers one call may use, in the order they are tried.
#[derive(Clone)]
pub(super) struct Plan {
    /// The provider whose description and schema the model is shown.
    pub shown: SearchProviderId,
    /// True when the config names the provider: no fallback.
    pub explicit: bool,
    /// The providers with a credential, to try in order (explicit: at most one).
    pub chain: Vec<(SearchProviderId, String)>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let chain: Vec<&str> = self.chain.iter().map(|(id, _)| id.as_str()).collect();
        f.debug_struct("Plan")
            .field("shown", &self.shown)
            .field("explicit", &self.explicit)
            .field("chain", &chain)
            .finish()
    }
}

/// The plan for `config`, with credentials from `lookup` (secrets, then the environment).
pub(super) fn plan(config: &WebSearchConfig, lookup: &dyn Fn(&str) -> Option<String>) -> Plan {
    match config.provider {
        Some(provider) => Plan {
            shown: provider,
            explicit: true,
            chain: credential(config, provider, lookup)
                .map(|credential| vec![(provider, credential)])
                .unwrap_or_default(),
        },
        None => {
            let chain: Vec<(SearchProviderId, String)> = SearchProviderId::ALL
                .into_iter()
                .filter_map(|provider| {
                    credential(config, provider, lookup).map(|credential| (provider, credential))
                })
                .collect();
            Plan {
                shown: chain.first().map_or(SearchProviderId::Brave, |(id, _)| *id),
                explicit: false,
                chain,
            }
        }
    }
}

/// The variable (environment or `secrets:` entry) holding `provider`'s credential.
pub(super) fn credential_variable(provider: SearchProviderId) -> &'static str {
    match provider {
        SearchProviderId::Brave => "BRAVE_API_KEY",
        SearchProviderId::Gemini => "GEMINI_API_KEY",
        SearchProviderId::Perplexity => "PERPLEXITY_API_KEY",
        SearchProviderId::Tavily => "TAVILY_API_KEY",
        SearchProviderId::Searxng => "SEARXNG_BASE_URL",
    }
}

/// `provider`'s credential: the config's value, else `lookup` of its variable; blanks are
/// no credential.
fn credential(
    config: &WebSearchConfig, provider: SearchProviderId, lookup: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    let settings = config.settings(provider);
    let configured = match provider {
        SearchProviderId::Searxng => settings.base_url.as_deref(),
        _ => settings.api_key.as_deref(),
    };
    configured
        .map(str::to_owned)
        .or_else(|| lookup(credential_variable(provider)))
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

/// The soft answer when `provider` has no credential: what to set, in clawless's terms.
pub(super) fn missing_credential(provider: SearchProviderId) -> Value {
    let variable = credential_variable(provider);
    let id = provider.as_str();
    let (what, code, key, signup) = match provider {
        SearchProviderId::Brave => (
            "a Brave Search API key",
            "missing_brave_api_key",
            "apiKey",
            " Keys are issued at https://brave.com/search/api/.",
        ),
        SearchProviderId::Gemini => (
            "a Gemini API key",
            "missing_gemini_api_key",
            "apiKey",
            " Keys are issued at https://aistudio.google.com/apikey.",
        ),
        SearchProviderId::Perplexity => (
            "a Perplexity API key",
            "missing_perplexity_api_key",
            "apiKey",
            " Keys are issued at https://www.perplexity.ai/settings/api.",
        ),
        SearchProviderId::Tavily => (
            "a Tavily API key",
            "missing_tavily_api_key",
            "apiKey",
            " Keys are issued at https://app.tavily.com.",
        ),
        SearchProviderId::Searxng => (
            "the address of a SearXNG instance",
            "missing_searxng_base_url",
            "baseUrl",
            "",
        ),
    };
    soft(
        code,
        format!(
            "web_search ({id}) needs {what}. Set tools.web.search.{id}.{key} in clawless.yaml, \
             add a `secrets:` entry named {variable}, or set the {variable} environment \
             variable, then restart.{signup}"
        ),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::tools_section::web::ProviderSettings;

    fn lookup(values: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let values: BTreeMap<String, String> = values
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        move |name| values.get(name).cloned()
    }

    fn ids(plan: &Plan) -> Vec<&'static str> {
        plan.chain.iter().map(|(id, _)| id.as_str()).collect()
    }

    #[test]
    fn auto_detection_follows_the_provider_order_and_skips_blanks() {
        let config = WebSearchConfig {
            tavily: ProviderSettings {
                api_key: Some("tvly".to_owned()),
                ..ProviderSettings::default()
            },
            ..WebSearchConfig::default()
        };
        let plan = plan(
            &config,
            &lookup(&[
                ("SEARXNG_BASE_URL", "http://127.0.0.1:1"),
                ("BRAVE_API_KEY", "  "),
                ("GEMINI_API_KEY", "g"),
            ]),
        );
        assert!(!plan.explicit);
        assert_eq!(plan.shown, SearchProviderId::Gemini);
        assert_eq!(ids(&plan), ["gemini", "tavily", "searxng"]);
    }

    #[test]
    fn nothing_configured_shows_brave_with_an_empty_chain() {
        let plan = plan(&WebSearchConfig::default(), &lookup(&[]));
        assert_eq!(plan.shown, SearchProviderId::Brave);
        assert!(plan.chain.is_empty());
        let guidance = missing_credential(plan.shown);
        assert_eq!(guidance["error"], "missing_brave_api_key");
        let message = guidance["message"].as_str().expect("text");
        for needed in [
            "tools.web.search.brave.apiKey",
            "`secrets:` entry named BRAVE_API_KEY",
            "BRAVE_API_KEY environment variable",
        ] {
            assert!(message.contains(needed), "{message}");
        }
        assert!(!message.contains("Gateway") && !message.contains("openclaw"));
    }

    #[test]
    fn an_explicit_provider_is_the_only_one_even_without_a_key() {
        let config = WebSearchConfig {
            provider: Some(SearchProviderId::Perplexity),
            ..WebSearchConfig::default()
        };
        let plan = plan(&config, &lookup(&[("BRAVE_API_KEY", "b")]));
        assert!(plan.explicit);
        assert_eq!(plan.shown, SearchProviderId::Perplexity);
        assert!(plan.chain.is_empty());
        assert!(!format!("{plan:?}").contains('b') || !format!("{plan:?}").contains("\"b\""));
    }

    #[test]
    fn the_config_key_wins_over_the_environment() {
        let config = WebSearchConfig {
            brave: ProviderSettings {
                api_key: Some("from-config".to_owned()),
                ..ProviderSettings::default()
            },
            ..WebSearchConfig::default()
        };
        let plan = plan(&config, &lookup(&[("BRAVE_API_KEY", "from-env")]));
        assert_eq!(
            plan.chain,
            [(SearchProviderId::Brave, "from-config".to_owned())]
        );
    }
}
