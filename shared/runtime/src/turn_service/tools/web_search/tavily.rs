//! Tavily: `POST <base>/search` with `Authorization: Bearer <key>` and `{query, max_results}`;
//! `results[]` (title, url, content) become hits. Tavily takes the query and the count only.

use reqwest::Method;
use serde_json::{Value, json};

use super::http::Failure;
use super::params::{Filter, refuse_unsupported};
use super::{Found, Hit, ProviderCall};
use crate::tools_section::web::SearchProviderId;

/// The public API.
pub(super) const DEFAULT_BASE_URL: &str = "https://api.tavily.com";

pub(super) async fn search(call: &ProviderCall<'_>) -> Result<Found, Failure> {
    refuse_unsupported(
        call.params,
        SearchProviderId::Tavily,
        &[
            Filter::Country,
            Filter::Language,
            Filter::Freshness,
            Filter::Dates,
            Filter::Domains,
        ],
    )?;
    let url = call.endpoint(DEFAULT_BASE_URL, "search")?;
    let request = call
        .http
        .request(Method::POST, url)
        .bearer_auth(call.credential)
        .json(&json!({
            "query": call.params.query,
            "max_results": call.params.count,
            "search_depth": "basic",
            "topic": "general",
        }));
    let answer = call
        .http
        .json(request, "Tavily API", Some(call.credential))
        .await?;
    let hits = answer
        .get("results")
        .and_then(Value::as_array)
        .map(|results| {
            results
                .iter()
                .map(|result| Hit {
                    title: text(result, "title"),
                    url: text(result, "url"),
                    description: text(result, "content"),
                    published: result
                        .get("published_date")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Found::Results { hits })
}

fn text(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}
