//! The HTTP every search provider shares: one plain reqwest client (provider endpoints are the
//! operator's choice, so a SearXNG on loopback or a private network is reachable; the
//! `web_fetch` address policy is for model-chosen URLs, not these), the per-request timeout,
//! and the mapping of a failed response to `<Provider> API error (<status>): <body>` with the
//! body cut at 64 KB and the key never echoed.

use std::time::Duration;

use serde_json::Value;

/// Bytes of a provider's error body quoted in the error, at most.
pub(super) const MAX_ERROR_BODY_BYTES: usize = 64_000;
/// Bytes of a successful answer read at most.
const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;
const USER_AGENT: &str = concat!("clawless-web-search/", env!("CARGO_PKG_VERSION"));

/// How a provider call failed: soft (guidance the model reads as a result, never a reason to
/// try another provider) or hard (an error result; an auto-selected provider's next one is
/// tried).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Failure {
    /// A returned payload: `{"error": …, "message": …}`.
    Soft(Value),
    /// An error message.
    Hard(String),
}

impl From<Value> for Failure {
    fn from(value: Value) -> Self {
        Self::Soft(value)
    }
}

/// The client for provider endpoints, with the call's timeout.
#[derive(Debug, Clone)]
pub(super) struct ProviderHttp {
    client: reqwest::Client,
    timeout: Duration,
}

impl ProviderHttp {
    /// A client whose requests each take at most `timeout`. `None` when the TLS set-up fails
    /// (logged; the tool is then left out).
    pub(super) fn new(timeout: Duration) -> Option<Self> {
        match clawless_http::client_builder()
            .user_agent(USER_AGENT)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()
        {
            Ok(client) => Some(Self { client, timeout }),
            Err(error) => {
                tracing::warn!(%error, "web_search disabled: no HTTP client");
                None
            }
        }
    }

    /// A request with the timeout set.
    pub(super) fn request(
        &self, method: reqwest::Method, url: url::Url,
    ) -> reqwest::RequestBuilder {
        self.client.request(method, url).timeout(self.timeout)
    }

    /// Sends `request` and reads a JSON answer. `label` names the API in errors
    /// (`Brave Search API`); `secret` is redacted from any quoted body.
    pub(super) async fn json(
        &self, request: reqwest::RequestBuilder, label: &str, secret: Option<&str>,
    ) -> Result<Value, Failure> {
        let response = request.send().await.map_err(|error| {
            Failure::Hard(format!("{label} request failed: {}", describe(error)))
        })?;
        let status = response.status();
        if !status.is_success() {
            let body = read_capped(response, MAX_ERROR_BODY_BYTES).await;
            let mut text = String::from_utf8_lossy(&body).trim().to_owned();
            if text.is_empty() {
                text = status.canonical_reason().unwrap_or("no body").to_owned();
            }
            return Err(Failure::Hard(format!(
                "{label} error ({}): {}",
                status.as_u16(),
                redact(&text, secret)
            )));
        }
        let body = read_capped(response, MAX_ANSWER_BYTES).await;
        serde_json::from_slice(&body)
            .map_err(|error| Failure::Hard(format!("{label} returned invalid JSON: {error}")))
    }
}

/// A transport error without its URL (which could carry a token).
fn describe(error: reqwest::Error) -> String {
    let error = error.without_url();
    if error.is_timeout() {
        return "timed out".to_owned();
    }
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Up to `cap` bytes of the body (what arrived before a read error, if one comes).
async fn read_capped(mut response: reqwest::Response, cap: usize) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = cap.saturating_sub(body.len());
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if body.len() >= cap {
                    break;
                }
            }
            Ok(None) => break,
            Err(error) => {
                tracing::debug!(%error, "web_search: provider body cut short");
                break;
            }
        }
    }
    body
}

/// `text` with `secret` and any `key=…` query value masked.
pub(super) fn redact(text: &str, secret: Option<&str>) -> String {
    let mut text = match secret {
        Some(secret) if !secret.is_empty() => text.replace(secret, "***"),
        _ => text.to_owned(),
    };
    let mut from = 0;
    while let Some(found) = text[from..].find("key=") {
        let start = from + found + "key=".len();
        let end = text[start..]
            .find(|c: char| c == '&' || c == '"' || c.is_whitespace())
            .map_or(text.len(), |offset| start + offset);
        text.replace_range(start..end, "***");
        from = start + 3;
    }
    text
}

/// `base` (a configured base URL, trailing `/` optional) joined with `path`.
pub(super) fn endpoint(base: &str, path: &str) -> Result<url::Url, Failure> {
    let joined = format!(
        "{}/{}",
        base.trim().trim_end_matches('/'),
        path.trim_start_matches('/')
    );
    url::Url::parse(&joined)
        .map_err(|error| Failure::Hard(format!("invalid web_search base URL {base}: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_masked_in_quoted_bodies() {
        assert_eq!(
            redact(
                "bad key sk-123 at https://x/?key=sk-123&a=1",
                Some("sk-123")
            ),
            "bad key *** at https://x/?key=***&a=1"
        );
        assert_eq!(redact("url?key=abc def", None), "url?key=*** def");
    }

    #[test]
    fn endpoints_join_base_and_path_whatever_the_slashes() {
        assert_eq!(
            endpoint("http://127.0.0.1:9/base/", "/search")
                .expect("valid")
                .as_str(),
            "http://127.0.0.1:9/base/search"
        );
        assert!(matches!(endpoint("not a url", "x"), Err(Failure::Hard(_))));
    }
}
