//! Gemini with Google Search grounding: `POST <base>/v1beta/models/<model>:generateContent`
//! with the key in `x-goog-api-key` and the `google_search` tool. The answer is the first
//! candidate's text; citations are its grounding chunks (Google's redirect links are kept
//! as they are, not resolved). Filters are not supported.

use reqwest::Method;
use serde_json::{Value, json};

use super::http::Failure;
use super::params::{Filter, refuse_unsupported};
use super::{Citation, Found, ProviderCall};
use crate::tools_section::web::SearchProviderId;

/// The public API.
pub(super) const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";
/// The model when none is configured.
pub(super) const DEFAULT_MODEL: &str = "gemini-2.5-flash";

pub(super) async fn search(call: &ProviderCall<'_>) -> Result<Found, Failure> {
    refuse_unsupported(
        call.params,
        SearchProviderId::Gemini,
        &[
            Filter::Country,
            Filter::Language,
            Filter::Freshness,
            Filter::Dates,
            Filter::Domains,
        ],
    )?;
    let model = call
        .settings
        .model
        .as_deref()
        .map(str::trim)
        .filter(|model| !model.is_empty())
        .unwrap_or(DEFAULT_MODEL)
        .trim_start_matches("models/")
        .to_owned();
    let url = call.endpoint(
        DEFAULT_BASE_URL,
        &format!("v1beta/models/{model}:generateContent"),
    )?;
    let request = call
        .http
        .request(Method::POST, url)
        .header("x-goog-api-key", call.credential)
        .json(&json!({
            "contents": [{"parts": [{"text": call.params.query}]}],
            "tools": [{"google_search": {}}],
        }));
    let answer = call
        .http
        .json(request, "Gemini API", Some(call.credential))
        .await?;
    let candidate = answer.pointer("/candidates/0");
    let content: String = candidate
        .and_then(|candidate| candidate.pointer("/content/parts"))
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    let mut citations: Vec<Citation> = Vec::new();
    let chunks = candidate
        .and_then(|candidate| candidate.pointer("/groundingMetadata/groundingChunks"))
        .and_then(Value::as_array);
    for chunk in chunks.into_iter().flatten() {
        let Some(url) = chunk.pointer("/web/uri").and_then(Value::as_str) else {
            continue;
        };
        if citations.iter().any(|known| known.url == url) {
            continue;
        }
        citations.push(Citation {
            url: url.to_owned(),
            title: chunk
                .pointer("/web/title")
                .and_then(Value::as_str)
                .map(str::to_owned),
        });
    }
    let content = if content.trim().is_empty() {
        "No response".to_owned()
    } else {
        content
    };
    Ok(Found::Answer {
        model,
        content,
        citations,
    })
}
