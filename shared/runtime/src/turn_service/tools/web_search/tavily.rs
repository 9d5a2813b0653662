//! Tavily: `POST <base>/search` with `Authorization: Bearer <key>` and `{query, max_results}`;
//! `results[]` (title, url, content) become hits. Tavily takes the query and the count only.

use reqwest::Method;
use serde_json::json;

use super::http::Failure;
use super::params::{Filter, refuse_unsupported};
use super::{Found, HitFields, ProviderCall, hits_in};
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
    let hits = hits_in(
        &answer,
        &HitFields {
            list: "/results",
            description: "content",
            published: &["published_date"],
        },
        usize::MAX,
    );
    Ok(Found::Results { hits })
}
