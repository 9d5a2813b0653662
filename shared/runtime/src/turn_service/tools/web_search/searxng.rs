//! SearXNG: `GET <instance>/search?q=…&format=json` on the operator's own instance (loopback
//! and private addresses allowed: it is their config). `results[]` (title, url, content,
//! publishedDate) become hits, the first `count` of them. Language and freshness
//! (`time_range`) are passed on; an optional key is sent as a bearer token for an instance
//! behind authentication.

use reqwest::Method;

use super::http::Failure;
use super::params::{Filter, Freshness, invalid_freshness, refuse_unsupported};
use super::{Found, HitFields, ProviderCall, hits_in};
use crate::tools_section::web::SearchProviderId;

pub(super) async fn search(call: &ProviderCall<'_>) -> Result<Found, Failure> {
    let params = call.params;
    refuse_unsupported(
        params,
        SearchProviderId::Searxng,
        &[Filter::Country, Filter::Dates, Filter::Domains],
    )?;
    // The instance's address is SearXNG's credential.
    let mut url = super::http::endpoint(call.credential, "search")?;
    {
        let mut query = url.query_pairs_mut();
        query.append_pair("q", &params.query);
        query.append_pair("format", "json");
        if let Some(language) = &params.language {
            query.append_pair("language", language);
        }
        if let Some(freshness) = &params.freshness {
            let window = Freshness::parse(freshness).ok_or_else(invalid_freshness)?;
            query.append_pair("time_range", window.word());
        }
    }
    let mut request = call
        .http
        .request(Method::GET, url)
        .header("Accept", "application/json");
    let token = call
        .settings
        .api_key
        .as_deref()
        .map(str::trim)
        .filter(|key| !key.is_empty());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let answer = call.http.json(request, "SearXNG API", token).await?;
    let hits = hits_in(
        &answer,
        &HitFields {
            list: "/results",
            description: "content",
            published: &["publishedDate"],
        },
        params.count as usize,
    );
    Ok(Found::Results { hits })
}
