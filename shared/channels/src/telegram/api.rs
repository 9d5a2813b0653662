//! Bot API calls: one `POST {apiBaseUrl}/bot{token}/{method}` helper that sorts failures
//! into [`ApiError`] (rate-limited, worth retrying, refused), its `multipart/form-data` twin
//! for file uploads, and the `setWebhook` and `getMe` calls the CLI needs.

use std::time::Duration;

use clawless_core::outbox::OutboxError;
use serde_json::{Value, json};

use crate::multipart::Form;

use super::wire::{ApiAnswer, BotIdentity, normalise_username, truncate};

/// The public Bot API.
pub const DEFAULT_API_BASE_URL: &str = "https://api.telegram.org";

/// The update types the webhook asks for; everything else is ignored anyway.
pub const ALLOWED_UPDATES: [&str; 2] = ["message", "callback_query"];

/// How long one Bot API call may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one file upload may take (a 50 MB document on a slow link).
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// Longest platform error description kept in an error message.
const MAX_DESCRIPTION_CHARS: usize = 300;

/// Why a Bot API call failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Telegram could not be reached or did not answer in time.
    #[error("telegram {method} failed: {source}")]
    Transport {
        /// The Bot API method.
        method: String,
        /// The HTTP client's error (its URL, which holds the token, removed).
        #[source]
        source: reqwest::Error,
    },
    /// HTTP 429: too many requests.
    #[error("telegram {method} rate-limited (HTTP 429){}: {description}", retry_hint(*.retry_after))]
    RateLimited {
        /// The Bot API method.
        method: String,
        /// Seconds to wait, as Telegram asked (`parameters.retry_after`).
        retry_after: Option<u64>,
        /// Telegram's description.
        description: String,
    },
    /// HTTP 5xx or 408, or an answer that is not the Bot API's: worth retrying.
    #[error("telegram {method} failed (HTTP {status}): {description}")]
    Unavailable {
        /// The Bot API method.
        method: String,
        /// HTTP status.
        status: u16,
        /// Telegram's description.
        description: String,
    },
    /// Any other 4xx (bad request, bot blocked, chat not found, bad token): retrying cannot help.
    #[error("telegram {method} refused (HTTP {status}): {description}")]
    Refused {
        /// The Bot API method.
        method: String,
        /// HTTP status.
        status: u16,
        /// Telegram's description.
        description: String,
    },
}

fn retry_hint(retry_after: Option<u64>) -> String {
    retry_after
        .map(|secs| format!(", retry after {secs}s"))
        .unwrap_or_default()
}

impl From<ApiError> for OutboxError {
    fn from(err: ApiError) -> Self {
        match err {
            ApiError::Refused { .. } => OutboxError::Rejected {
                message: err.to_string(),
            },
            ApiError::Transport { .. } => OutboxError::Failed {
                message: err.to_string(),
                source: Some(Box::new(err)),
            },
            ApiError::RateLimited { .. } | ApiError::Unavailable { .. } => OutboxError::Failed {
                message: err.to_string(),
                source: None,
            },
        }
    }
}

/// Calls `{api_base}/bot{token}/{method}` with a JSON body; the answer's `result` on success.
pub(super) async fn call(
    client: &reqwest::Client, api_base: &str, token: &str, method: &str, body: &Value,
) -> Result<Value, ApiError> {
    let url = format!("{}/bot{token}/{method}", api_base.trim_end_matches('/'));
    let response = client
        .post(url)
        .timeout(REQUEST_TIMEOUT)
        .json(body)
        .send()
        .await
        .map_err(|err| ApiError::Transport {
            method: method.to_owned(),
            source: err.without_url(),
        })?;
    read_answer(method, response).await
}

/// Calls `{api_base}/bot{token}/{method}` with a `multipart/form-data` body (a file upload:
/// `sendPhoto`, `sendDocument`, …); the answer's `result` on success, failures as [`call`]'s.
pub(super) async fn call_multipart(
    client: &reqwest::Client, api_base: &str, token: &str, method: &str, form: Form,
) -> Result<Value, ApiError> {
    let url = format!("{}/bot{token}/{method}", api_base.trim_end_matches('/'));
    let (content_type, body) = form.finish();
    let response = client
        .post(url)
        .timeout(UPLOAD_TIMEOUT)
        .header(reqwest::header::CONTENT_TYPE, content_type)
        .body(body)
        .send()
        .await
        .map_err(|err| ApiError::Transport {
            method: method.to_owned(),
            source: err.without_url(),
        })?;
    read_answer(method, response).await
}

/// The Bot API's answer to `method` as its `result`, or the failure it reports.
async fn read_answer(method: &str, response: reqwest::Response) -> Result<Value, ApiError> {
    let status = response.status().as_u16();
    let bytes = response.bytes().await.map_err(|err| ApiError::Transport {
        method: method.to_owned(),
        source: err.without_url(),
    })?;
    let answer: ApiAnswer = serde_json::from_slice(&bytes).unwrap_or_default();
    let description = truncate(
        answer
            .description
            .as_deref()
            .unwrap_or("no description given"),
        MAX_DESCRIPTION_CHARS,
    );
    let method = method.to_owned();
    match status {
        200..=299 if answer.ok => Ok(answer.result),
        429 => Err(ApiError::RateLimited {
            method,
            retry_after: answer.parameters.and_then(|p| p.retry_after),
            description,
        }),
        400..=499 if status != 408 => Err(ApiError::Refused {
            method,
            status,
            description,
        }),
        _ => Err(ApiError::Unavailable {
            method,
            status,
            description,
        }),
    }
}

/// Points the bot's webhook at `url` with `secret_token`, asking only for the update types
/// the channel handles ([`ALLOWED_UPDATES`]). For `clawless channels telegram set-webhook`.
pub async fn set_webhook(
    client: &reqwest::Client, api_base: &str, token: &str, url: &str, secret_token: &str,
) -> Result<(), ApiError> {
    let body = json!({
        "url": url,
        "secret_token": secret_token,
        "allowed_updates": ALLOWED_UPDATES,
    });
    call(client, api_base, token, "setWebhook", &body)
        .await
        .map(|_| ())
}

/// Asks Telegram who the bot is (`getMe`): its id and username, for `botUsername`.
pub async fn get_me(
    client: &reqwest::Client, api_base: &str, token: &str,
) -> Result<BotIdentity, ApiError> {
    let result = call(client, api_base, token, "getMe", &json!({})).await?;
    Ok(BotIdentity {
        id: result.get("id").and_then(Value::as_i64),
        username: result
            .get("username")
            .and_then(Value::as_str)
            .and_then(normalise_username),
    })
}

/// The Bot API's own ceiling on a bot's downloads (`getFile` refuses bigger files).
pub const BOT_API_DOWNLOAD_LIMIT: u64 = 20 * crate::media::MB;

/// Downloads the files of Telegram messages: `getFile`, then
/// `{apiBaseUrl}/file/bot{token}/{file_path}`.
#[derive(Clone)]
pub struct TelegramMedia {
    client: reqwest::Client,
    api_base: String,
    token: String,
    max_bytes: u64,
}

impl std::fmt::Debug for TelegramMedia {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramMedia")
            .field("api_base", &self.api_base)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl TelegramMedia {
    /// Downloads with the bot `token` from `api_base`, at most `max_bytes` a file.
    pub fn new(client: reqwest::Client, api_base: &str, token: &str, max_bytes: u64) -> Self {
        Self {
            client,
            api_base: api_base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            max_bytes,
        }
    }
}

#[async_trait::async_trait]
impl crate::media::MediaDownloader for TelegramMedia {
    fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    async fn download(
        &self, media: &crate::media::PendingMedia,
    ) -> Result<crate::media::Downloaded, crate::media::DownloadError> {
        use crate::media::DownloadError;
        let crate::media::MediaSource::TelegramFile(file_id) = &media.source else {
            return Err(DownloadError::Refused("not a Telegram file".to_owned()));
        };
        let body = json!({ "file_id": file_id });
        let file = match call(&self.client, &self.api_base, &self.token, "getFile", &body).await {
            Ok(file) => file,
            Err(ApiError::Refused { description, .. }) if description.contains("too big") => {
                return Err(match media.size {
                    Some(size) => DownloadError::TooLarge {
                        size,
                        limit: self.max_bytes.min(BOT_API_DOWNLOAD_LIMIT),
                    },
                    None => DownloadError::Refused(format!(
                        "too large: Telegram lets bots download files up to {} MB only",
                        BOT_API_DOWNLOAD_LIMIT / crate::media::MB
                    )),
                });
            }
            Err(err @ ApiError::Refused { .. }) => {
                return Err(DownloadError::Refused(err.to_string()));
            }
            Err(err) => return Err(DownloadError::Transient(err.to_string())),
        };
        let Some(path) = file.get("file_path").and_then(Value::as_str) else {
            return Err(DownloadError::Refused(
                "telegram getFile gave no file_path".to_owned(),
            ));
        };
        if path.is_empty() || path.contains("..") || path.starts_with('/') {
            return Err(DownloadError::Refused(format!(
                "telegram getFile gave an odd file_path {:?}",
                truncate(path, 80)
            )));
        }
        let url = format!("{}/file/bot{}/{path}", self.api_base, self.token);
        crate::media::fetch_limited(self.client.get(url), self.max_bytes).await
    }
}
