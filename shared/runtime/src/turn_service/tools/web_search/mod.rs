//! `web_search`: searches the web through a keyed provider (Brave, Gemini, Perplexity, Tavily
//! or the operator's SearXNG) and answers with pretty JSON the model reads as data: every
//! title, snippet and synthesized answer inside its own untrusted-content fence with a fresh
//! id, an `externalContent` flag, the provider and the time taken.
//!
//! This module owns the call's flow: read the arguments, walk the providers the
//! [`selection`] plan allows (falling back only when the provider was auto-selected), consult
//! and fill the [`cache`] (the agent's workspace store: S3, or the local workspace directory),
//! and shape the payload. Each provider module owns its wire format and nothing else. Soft
//! errors (a missing key, an unsupported filter) are successful results the model can act
//! on; hard errors are `{"status":"error","tool":"web_search","error":…}`.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use clawless_base::clock::Clock;
use clawless_base::model::ToolSpec;
use clawless_base::object_store::ObjectStore;
use clawless_core::tools::ToolOutput;
use clawless_core::tools::web_fetch::fence::{FenceSource, wrap_untrusted};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::{RuntimeTool, ToolCallContext, ToolOutcome, ToolRegistry};
use crate::tools_section::web::{ProviderSettings, SearchProviderId, WebSearchConfig};
use crate::turn_service::{TurnError, TurnService};

mod brave;
mod cache;
mod gemini;
mod http;
mod params;
mod perplexity;
mod searxng;
mod selection;
mod tavily;
#[cfg(test)]
mod tests;

use http::{Failure, ProviderHttp};
use params::SearchParams;
use selection::Plan;

/// The tool's name.
const NAME: &str = "web_search";

/// Registers `web_search` with `registry` unless `tools.web.search.enabled` is false (or no
/// HTTP client can be built). Credentials come from the config, then `secrets:`, then the
/// environment.
pub(super) fn register(registry: &mut ToolRegistry, service: &TurnService) {
    let config = &service.config().tools.web.search;
    if !config.enabled() {
        return;
    }
    let secrets = service.secrets.clone();
    let lookup = move |name: &str| secrets.lookup(name);
    if let Some(mut tool) =
        WebSearchTool::new(config.clone(), &lookup, Arc::clone(&service.deps.clock))
    {
        tool.cache = service.blobs.clone();
        registry.register(tool);
    }
}

/// One hit of a structured provider, before fencing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Hit {
    title: String,
    url: String,
    description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    published: Option<String>,
}

/// Where a structured provider's answer keeps its hits, and what their fields are called
/// (`title` and `url` are the same everywhere).
struct HitFields {
    /// JSON pointer to the array of hits.
    list: &'static str,
    /// The snippet's field.
    description: &'static str,
    /// The publication date's fields, the first present wins.
    published: &'static [&'static str],
}

/// The first `limit` hits of a structured provider's `answer` (none when it has no list).
fn hits_in(answer: &Value, fields: &HitFields, limit: usize) -> Vec<Hit> {
    let text = |value: &Value, key: &str| {
        value
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    answer
        .pointer(fields.list)
        .and_then(Value::as_array)
        .map(|results| {
            results
                .iter()
                .take(limit)
                .map(|result| Hit {
                    title: text(result, "title"),
                    url: text(result, "url"),
                    description: text(result, fields.description),
                    published: fields
                        .published
                        .iter()
                        .find_map(|key| result.get(key).and_then(Value::as_str))
                        .map(str::to_owned),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A source of a synthesized answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Citation {
    url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    title: Option<String>,
}

/// What a provider found, before fencing (and as the cache keeps it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Found {
    /// Ranked hits.
    Results { hits: Vec<Hit> },
    /// One synthesized answer with its sources.
    Answer {
        model: String,
        content: String,
        citations: Vec<Citation>,
    },
}

/// One provider request: the client, the credential, the provider's settings, the call.
struct ProviderCall<'a> {
    http: &'a ProviderHttp,
    credential: &'a str,
    settings: &'a ProviderSettings,
    params: &'a SearchParams,
    now_ms: u64,
}

impl ProviderCall<'_> {
    /// `path` below the configured base URL, or `default_base`.
    fn endpoint(&self, default_base: &str, path: &str) -> Result<url::Url, Failure> {
        let base = self
            .settings
            .base_url
            .as_deref()
            .map(str::trim)
            .filter(|base| !base.is_empty())
            .unwrap_or(default_base);
        http::endpoint(base, path)
    }
}

/// The `web_search` tool.
pub(super) struct WebSearchTool {
    config: WebSearchConfig,
    plan: Plan,
    http: ProviderHttp,
    clock: Arc<dyn Clock>,
    spec: ToolSpec,
    /// The state store's blobs, where results are cached (under [`cache::CACHE_PREFIX`]);
    /// `None`: not cached.
    cache: Option<Arc<dyn ObjectStore>>,
}

impl WebSearchTool {
    /// The tool for `config`, credentials resolved once through `lookup`. `None` without an
    /// HTTP client.
    fn new(
        config: WebSearchConfig, lookup: &dyn Fn(&str) -> Option<String>, clock: Arc<dyn Clock>,
    ) -> Option<Self> {
        let plan = selection::plan(&config, lookup);
        let http = ProviderHttp::new(config.timeout())?;
        tracing::debug!(?plan, "web_search: providers");
        Some(Self {
            spec: spec_for(plan.shown),
            config,
            plan,
            http,
            clock,
            cache: None,
        })
    }

    /// Runs one call; results are cached in `cache_store` under `cache_prefix` when given.
    async fn search(
        &self, input: &Value, cache_store: Option<(&dyn ObjectStore, &str)>,
    ) -> ToolOutput {
        let params = match SearchParams::read(input, self.config.max_results()) {
            Ok(params) => params,
            Err(message) => return hard_error(&message),
        };
        if self.plan.chain.is_empty() {
            return soft_result(
                self.plan.shown,
                selection::missing_credential(self.plan.shown),
            );
        }
        let now_ms = self.clock.now_ms();
        let cache = cache_store.map(|(store, prefix)| cache::SearchCache {
            store,
            prefix,
            now_ms,
            ttl_ms: self.config.cache_ttl_ms(),
        });
        let mut last_error = String::new();
        for (provider, credential) in &self.plan.chain {
            let settings = self.config.settings(*provider);
            let key = cache_key(*provider, &params, settings);
            if let Some(cache) = &cache
                && let Some(stored) = cache.get(&key).await
                && let Some((found, took_ms)) = decode_cached(stored)
            {
                tracing::debug!(provider = provider.as_str(), "web_search: cache hit");
                return found_result(*provider, &params, found, took_ms, true);
            }
            let call = ProviderCall {
                http: &self.http,
                credential,
                settings,
                params: &params,
                now_ms,
            };
            let started = Instant::now();
            let outcome = match provider {
                SearchProviderId::Brave => brave::search(&call).await,
                SearchProviderId::Gemini => gemini::search(&call).await,
                SearchProviderId::Perplexity => perplexity::search(&call).await,
                SearchProviderId::Tavily => tavily::search(&call).await,
                SearchProviderId::Searxng => searxng::search(&call).await,
            };
            let took_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            match outcome {
                Ok(found) => {
                    if let Some(cache) = &cache {
                        match serde_json::to_value(&found) {
                            Ok(stored) => {
                                cache
                                    .put(&key, &json!({"found": stored, "tookMs": took_ms}))
                                    .await;
                            }
                            Err(error) => tracing::warn!(%error, "web_search: result not cached"),
                        }
                    }
                    return found_result(*provider, &params, found, took_ms, false);
                }
                Err(Failure::Soft(guidance)) => return soft_result(*provider, guidance),
                Err(Failure::Hard(message)) => {
                    tracing::info!(provider = provider.as_str(), error = %message, "web_search: provider failed");
                    if self.plan.explicit {
                        return hard_error(&message);
                    }
                    last_error = message;
                }
            }
        }
        hard_error(&last_error)
    }
}

#[async_trait]
impl RuntimeTool for WebSearchTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    /// Offered in short form until first called: a call with a `query` fits the schema and
    /// runs at once.
    fn deferred(&self) -> bool {
        true
    }

    async fn call(&self, context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError> {
        let cache_store = self
            .cache
            .as_ref()
            .map(|blobs| (blobs.as_ref(), cache::CACHE_PREFIX));
        Ok(ToolOutcome::Done(
            self.search(&context.call.input, cache_store).await,
        ))
    }
}

/// The lower-cased cache key: the provider, where it is reached, and every argument that
/// shapes its answer.
fn cache_key(
    provider: SearchProviderId, params: &SearchParams, settings: &ProviderSettings,
) -> String {
    let part = |value: &Option<String>| value.clone().unwrap_or_else(|| "default".to_owned());
    [
        provider.as_str().to_owned(),
        part(&settings.base_url),
        part(&settings.model),
        params.query.clone(),
        params.count.to_string(),
        part(&params.country),
        part(&params.language),
        part(&params.ui_lang),
        part(&params.freshness),
        part(&params.date_after),
        part(&params.date_before),
        params.domain_filter.join(","),
        params
            .max_tokens
            .map_or_else(|| "default".to_owned(), |n| n.to_string()),
        params
            .max_tokens_per_page
            .map_or_else(|| "default".to_owned(), |n| n.to_string()),
    ]
    .join(":")
    .to_lowercase()
}

fn decode_cached(stored: Value) -> Option<(Found, u64)> {
    let took_ms = stored.get("tookMs").and_then(Value::as_u64).unwrap_or(0);
    let found = serde_json::from_value(stored.get("found")?.clone()).ok()?;
    Some((found, took_ms))
}

/// The payload the model reads: every title, snippet and answer fenced separately.
fn found_result(
    provider: SearchProviderId, params: &SearchParams, found: Found, took_ms: u64, cached: bool,
) -> ToolOutput {
    let fence = |text: &str| match text {
        "" => String::new(),
        text => wrap_untrusted(text, FenceSource::WebSearch, false),
    };
    let mut payload = Map::new();
    payload.insert("query".to_owned(), json!(params.query));
    payload.insert("provider".to_owned(), json!(provider.as_str()));
    match found {
        Found::Results { hits } => {
            payload.insert("count".to_owned(), json!(hits.len()));
            payload.insert("tookMs".to_owned(), json!(took_ms));
            payload.insert("externalContent".to_owned(), external_content(provider));
            let results: Vec<Value> = hits
                .iter()
                .map(|hit| {
                    let mut result = Map::new();
                    result.insert("title".to_owned(), json!(fence(&hit.title)));
                    result.insert("url".to_owned(), json!(hit.url));
                    result.insert("description".to_owned(), json!(fence(&hit.description)));
                    if let Some(published) = &hit.published {
                        result.insert("published".to_owned(), json!(published));
                    }
                    if let Some(site) = site_name(&hit.url) {
                        result.insert("siteName".to_owned(), json!(site));
                    }
                    Value::Object(result)
                })
                .collect();
            payload.insert("results".to_owned(), Value::Array(results));
        }
        Found::Answer {
            model,
            content,
            citations,
        } => {
            payload.insert("model".to_owned(), json!(model));
            payload.insert("tookMs".to_owned(), json!(took_ms));
            payload.insert("externalContent".to_owned(), external_content(provider));
            payload.insert("content".to_owned(), json!(fence(&content)));
            let citations: Vec<Value> = citations
                .into_iter()
                .map(|citation| {
                    let mut entry =
                        Map::from_iter([("url".to_owned(), Value::String(citation.url))]);
                    if let Some(title) = citation.title {
                        entry.insert("title".to_owned(), Value::String(title));
                    }
                    Value::Object(entry)
                })
                .collect();
            payload.insert("citations".to_owned(), Value::Array(citations));
        }
    }
    if cached {
        payload.insert("cached".to_owned(), json!(true));
    }
    ToolOutput::ok(pretty(&Value::Object(payload)))
}

fn external_content(provider: SearchProviderId) -> Value {
    json!({"untrusted": true, "source": NAME, "provider": provider.as_str(), "wrapped": true})
}

/// The host of `url`, when it has one.
fn site_name(url: &str) -> Option<String> {
    url::Url::parse(url).ok()?.host_str().map(str::to_owned)
}

/// A soft error as a successful result, naming the provider.
fn soft_result(provider: SearchProviderId, guidance: Value) -> ToolOutput {
    let mut payload = match guidance {
        Value::Object(map) => map,
        other => Map::from_iter([("error".to_owned(), other)]),
    };
    payload.insert("provider".to_owned(), json!(provider.as_str()));
    ToolOutput::ok(pretty(&Value::Object(payload)))
}

/// A hard error, as every tool's thrown error reads.
fn hard_error(message: &str) -> ToolOutput {
    ToolOutput::error(pretty(
        &json!({"status": "error", "tool": NAME, "error": message}),
    ))
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// The description and schema the model sees: the shown provider's own.
fn spec_for(provider: SearchProviderId) -> ToolSpec {
    // Terse on purpose: every request of every turn carries this schema.
    let query = json!({"type": "string"});
    let count = json!({"type": "number", "minimum": 1, "maximum": 10});
    let country = json!({"type": "string", "description": "2-letter code"});
    let language = json!({"type": "string", "description": "e.g. en"});
    let freshness = json!({"type": "string", "description": "day|week|month|year"});
    let date = json!({"type": "string", "description": "YYYY-MM-DD"});
    let (description, properties) = match provider {
        SearchProviderId::Brave => (
            "Search the web (Brave). Returns titles, URLs and snippets.",
            json!({
                "query": query, "count": count, "country": country, "language": language,
                "freshness": freshness, "date_after": date, "date_before": date,
            }),
        ),
        SearchProviderId::Perplexity => (
            "Search the web (Perplexity). Returns titles, URLs and snippets.",
            json!({
                "query": query, "count": count, "country": country, "language": language,
                "freshness": freshness, "date_after": date, "date_before": date,
                "domain_filter": {"type": "array", "items": {"type": "string"}, "description": "only these domains, or '-domain' to exclude"},
            }),
        ),
        SearchProviderId::Gemini => (
            "Search the web (Gemini with Google Search). Returns one answer with its sources.",
            json!({"query": query}),
        ),
        SearchProviderId::Tavily => (
            "Search the web (Tavily). Returns titles, URLs and snippets.",
            json!({"query": query, "count": count}),
        ),
        SearchProviderId::Searxng => (
            "Search the web (SearXNG). Returns titles, URLs and snippets.",
            json!({"query": query, "count": count, "language": language, "freshness": freshness}),
        ),
    };
    ToolSpec {
        name: NAME.to_owned(),
        description: description.to_owned(),
        input_schema: json!({"type": "object", "properties": properties, "required": ["query"]}),
    }
}
