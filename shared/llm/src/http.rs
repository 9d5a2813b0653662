//! The one HTTP client the JSON providers share, and the mapping from HTTP outcomes to
//! [`ModelError`]: statuses, `retry-after`, timeouts and connection failures.
//!
//! Keys travel only in request headers; nothing here logs headers or bodies.

use std::fmt;
use std::time::{Duration, SystemTime};

use clawless_base::model::ModelError;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::Value;

/// Longest provider error text carried into a [`ModelError`].
const MAX_ERROR_MESSAGE_CHARS: usize = 500;

/// A secret API key. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key; `None` for an empty or blank one.
    pub fn new(key: impl Into<String>) -> Option<Self> {
        let key = key.into();
        if key.trim().is_empty() {
            None
        } else {
            Some(Self(key.trim().to_owned()))
        }
    }

    /// The key itself, for the request header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

/// The HTTP client could not be built (TLS backend initialisation failed).
#[derive(Debug, thiserror::Error)]
#[error("cannot build the HTTP client: {0}")]
pub struct ClientBuildError(#[source] reqwest::Error);

/// A shared HTTP client for the JSON model APIs. Cheap to clone (one connection pool).
#[derive(Debug, Clone)]
pub struct HttpClient {
    client: reqwest::Client,
}

impl HttpClient {
    /// Builds the client (rustls with the process's shared TLS configuration, see
    /// `clawless_http`; connection pooling). Timeouts are set per request.
    pub fn new() -> Result<Self, ClientBuildError> {
        let client = clawless_http::client_builder()
            .user_agent(concat!("clawless-llm/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(ClientBuildError)?;
        Ok(Self { client })
    }

    /// POSTs `body` as JSON and returns the JSON answer of a 2xx response.
    ///
    /// `timeout` covers the whole exchange, from connecting to the end of the body.
    pub(crate) async fn post_json(
        &self, provider: &str, url: &str, headers: HeaderMap, body: &Value, timeout: Duration,
    ) -> Result<Value, ModelError> {
        let transport = |err: reqwest::Error| map_reqwest_error(provider, timeout, &err);
        let response = self
            .client
            .post(url)
            .headers(headers)
            .timeout(timeout)
            .json(body)
            .send()
            .await
            .map_err(transport)?;
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers(), SystemTime::now());
        let text = response.text().await.map_err(transport)?;
        tracing::debug!(provider, status, bytes = text.len(), "model response");
        if (200..300).contains(&status) {
            return serde_json::from_str(&text).map_err(|err| ModelError::Invalid {
                provider: provider.to_owned(),
                message: format!("response is not JSON: {err}"),
            });
        }
        Err(error_for_status(
            provider,
            status,
            retry_after,
            &provider_message(&text),
        ))
    }
}

/// Builds a header value, refusing characters HTTP forbids (a key pasted with a newline).
pub(crate) fn header_value(
    provider: &str, name: &str, value: &str,
) -> Result<HeaderValue, ModelError> {
    HeaderValue::from_str(value).map_err(|_| ModelError::Auth {
        provider: provider.to_owned(),
        message: format!("the {name} header value contains characters HTTP does not allow"),
    })
}

fn map_reqwest_error(provider: &str, timeout: Duration, err: &reqwest::Error) -> ModelError {
    if err.is_timeout() {
        ModelError::Timeout {
            provider: provider.to_owned(),
            after: timeout,
        }
    } else {
        // The URL carries no secret (keys go in headers), so the error text is safe to keep.
        ModelError::Transport {
            provider: provider.to_owned(),
            message: error_chain(err),
        }
    }
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// Maps a non-2xx status to the error the retry and fallback layers act on.
///
/// 429 → `RateLimited`; 5xx and Anthropic's 529 (overloaded) → `Server`; 401/403 → `Auth`;
/// any other status → `Invalid` with the provider's message.
pub(crate) fn error_for_status(
    provider: &str, status: u16, retry_after: Option<Duration>, message: &str,
) -> ModelError {
    let provider = provider.to_owned();
    match status {
        429 => ModelError::RateLimited {
            provider,
            retry_after,
        },
        500..=599 => ModelError::Server { provider, status },
        401 | 403 => ModelError::Auth {
            provider,
            message: message.to_owned(),
        },
        _ => ModelError::Invalid {
            provider,
            message: format!("HTTP {status}: {message}"),
        },
    }
}

/// The human-readable error of a provider's error body: `error.message` (Anthropic, OpenAI),
/// `message` (Bedrock and others), or the raw text, shortened.
pub(crate) fn provider_message(body: &str) -> String {
    let from_json = serde_json::from_str::<Value>(body).ok().and_then(|value| {
        let message = value
            .pointer("/error/message")
            .or_else(|| value.get("message"))
            .or_else(|| value.get("error"))?;
        message.as_str().map(str::to_owned)
    });
    let message = from_json.unwrap_or_else(|| body.trim().to_owned());
    if message.is_empty() {
        return "(no error message)".to_owned();
    }
    truncate_chars(&message, MAX_ERROR_MESSAGE_CHARS)
}

fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// How long the server asked us to wait: `retry-after-ms` (OpenAI), else `retry-after` as
/// seconds (fractions allowed) or an HTTP date relative to `now`.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return duration_from_secs(ms / 1000.0);
    }
    parse_retry_after(header("retry-after")?, now)
}

/// Parses one `retry-after` value: delay seconds or an HTTP date.
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return duration_from_secs(secs);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    // A date in the past means "now".
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

fn duration_from_secs(secs: f64) -> Option<Duration> {
    if secs.is_finite() && secs >= 0.0 {
        Duration::try_from_secs_f64(secs).ok()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_dates_and_milliseconds() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after(" 1.5 ", now),
            Some(Duration::from_millis(1500))
        );
        let later = httpdate::fmt_http_date(now + Duration::from_secs(12));
        assert_eq!(
            parse_retry_after(&later, now),
            Some(Duration::from_secs(12))
        );
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(12));
        assert_eq!(parse_retry_after(&earlier, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-3", now), None);

        let mut headers = HeaderMap::new();
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        headers.insert("retry-after", HeaderValue::from_static("9"));
        assert_eq!(retry_after(&headers, now), Some(Duration::from_millis(250)));
    }

    #[test]
    fn statuses_map_to_the_error_the_retry_layer_needs() {
        assert!(matches!(
            error_for_status("p", 429, Some(Duration::from_secs(1)), "slow"),
            ModelError::RateLimited {
                retry_after: Some(_),
                ..
            }
        ));
        assert!(matches!(
            error_for_status("p", 529, None, "overloaded"),
            ModelError::Server { status: 529, .. }
        ));
        assert!(matches!(
            error_for_status("p", 403, None, "no"),
            ModelError::Auth { .. }
        ));
        let invalid = error_for_status("p", 400, None, "bad field");
        assert!(!invalid.is_retryable());
        assert!(invalid.to_string().contains("HTTP 400: bad field"));
    }

    #[test]
    fn provider_message_prefers_the_structured_message() {
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too big"}}"#;
        assert_eq!(provider_message(anthropic), "max_tokens: too big");
        assert_eq!(provider_message(r#"{"message":"Bad model"}"#), "Bad model");
        assert_eq!(provider_message("plain failure\n"), "plain failure");
        assert_eq!(provider_message(""), "(no error message)");
        assert_eq!(provider_message(&"x".repeat(600)).chars().count(), 501);
    }

    #[test]
    fn api_key_debug_hides_the_key() {
        let key = ApiKey::new("sk-secret").expect("non-empty");
        assert_eq!(format!("{key:?}"), "ApiKey(***)");
        assert_eq!(key.expose(), "sk-secret");
        assert!(ApiKey::new("  ").is_none());
    }
}
