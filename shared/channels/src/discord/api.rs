//! Discord's REST API: registering the slash commands (`PUT /applications/{id}/commands`) for
//! the CLI, one bot-authenticated call (`Authorization: Bot …`) for the sender and the
//! `message` tool's actions with Discord's answers sorted into refusals and failures worth a
//! retry, its `multipart/form-data` twin for file uploads, and the excerpt of an error body
//! kept in messages.

use std::time::Duration;

use clawless_core::outbox::OutboxError;
use serde_json::Value;

use super::wire::is_snowflake;
use crate::multipart::Form;

/// Discord's API, when the config names none.
pub const DEFAULT_API_BASE_URL: &str = "https://discord.com/api/v10";

/// How long one Discord API call may take.
pub(super) const API_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one file upload may take.
pub(super) const UPLOAD_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest excerpt of Discord's error body kept in an error message.
const MAX_ERROR_EXCERPT: usize = 300;

/// Why a call to Discord's API failed.
#[derive(Debug, thiserror::Error)]
pub enum DiscordApiError {
    /// The request was not sent or not answered.
    #[error("Discord API {what} failed: {source}")]
    Transport {
        /// What was being done.
        what: &'static str,
        /// The client error.
        #[source]
        source: reqwest::Error,
    },
    /// Discord answered with an error status.
    #[error("Discord API {what} answered HTTP {status}: {message}")]
    Status {
        /// What was being done.
        what: &'static str,
        /// The HTTP status.
        status: u16,
        /// Discord's message (an excerpt).
        message: String,
    },
    /// An argument cannot be put in a URL.
    #[error("{0}")]
    Invalid(String),
}

/// Registers `definitions` as the application's global commands, replacing the ones there
/// (`PUT {api_base}/applications/{application_id}/commands` with `Authorization: Bot …`).
pub async fn register_commands(
    client: &reqwest::Client, api_base: &str, application_id: &str, bot_token: &str,
    definitions: &[Value],
) -> Result<(), DiscordApiError> {
    if !is_snowflake(application_id) {
        return Err(DiscordApiError::Invalid(
            "the application id must be numeric".to_owned(),
        ));
    }
    let what = "command registration";
    let url = format!(
        "{}/applications/{application_id}/commands",
        api_base.trim_end_matches('/')
    );
    let response = client
        .put(url)
        .timeout(API_TIMEOUT)
        .header(reqwest::header::AUTHORIZATION, format!("Bot {bot_token}"))
        .json(definitions)
        .send()
        .await
        .map_err(|source| DiscordApiError::Transport {
            what,
            source: source.without_url(),
        })?;
    let status = response.status();
    if status.is_success() {
        tracing::info!(commands = definitions.len(), "Discord commands registered");
        Ok(())
    } else {
        let body = response.text().await.unwrap_or_default();
        Err(DiscordApiError::Status {
            what,
            status: status.as_u16(),
            message: error_excerpt(&body),
        })
    }
}

/// Discord's `message` from an error body, or the start of the body.
pub(super) fn error_excerpt(body: &str) -> String {
    let message = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|json| {
            json.get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| body.to_owned());
    message.chars().take(MAX_ERROR_EXCERPT).collect()
}

/// Discord's REST API as the bot: the client, the base URL and the bot token.
#[derive(Clone)]
pub(super) struct BotApi {
    pub(super) client: reqwest::Client,
    pub(super) api_base: String,
    pub(super) bot_token: String,
}

/// One bot REST request: method, path under the API base, JSON body, what it does (for
/// errors), and the Discord error codes that count as success.
pub(super) struct BotRequest<'a> {
    pub(super) method: reqwest::Method,
    pub(super) path: String,
    pub(super) body: Option<&'a Value>,
    pub(super) what: &'a str,
    pub(super) tolerated: &'a [u64],
}

impl BotApi {
    /// Sends `request` with `Authorization: Bot …`; Discord's answer (`null` for an empty
    /// one). A refusal whose JSON error `code` is in `request.tolerated` counts as success (a
    /// retried delete finding the message gone). Errors as [`status_error`] sorts them.
    pub(super) async fn call(&self, request: BotRequest<'_>) -> Result<Value, OutboxError> {
        bot_call(self, request).await
    }
}

async fn bot_call(api: &BotApi, call: BotRequest<'_>) -> Result<Value, OutboxError> {
    let BotRequest {
        method,
        path,
        body,
        what,
        tolerated,
    } = call;
    let url = format!("{}{path}", api.api_base.trim_end_matches('/'));
    let mut request = api.client.request(method, url).timeout(API_TIMEOUT).header(
        reqwest::header::AUTHORIZATION,
        format!("Bot {}", api.bot_token),
    );
    if let Some(body) = body {
        request = request.json(body);
    }
    let response = request.send().await.map_err(|err| OutboxError::Failed {
        message: format!("Discord {what} failed"),
        source: Some(Box::new(err.without_url())),
    })?;
    read_answer(what, response, tolerated).await
}

impl BotApi {
    /// POSTs the `multipart/form-data` `form` (a `payload_json` part and `files[n]`) to `path`
    /// with `Authorization: Bot …`; Discord's answer. Errors as [`status_error`] sorts them.
    pub(super) async fn post_form(
        &self, path: &str, form: Form, what: &str,
    ) -> Result<Value, OutboxError> {
        let url = format!("{}{path}", self.api_base.trim_end_matches('/'));
        let (content_type, body) = form.finish();
        let response = self
            .client
            .post(url)
            .timeout(UPLOAD_TIMEOUT)
            .header(
                reqwest::header::AUTHORIZATION,
                format!("Bot {}", self.bot_token),
            )
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(body)
            .send()
            .await
            .map_err(|err| OutboxError::Failed {
                message: format!("Discord {what} failed"),
                source: Some(Box::new(err.without_url())),
            })?;
        read_answer(what, response, &[]).await
    }
}

/// Discord's answer to `what` (`null` for an empty one), or the failure it reports; an error
/// `code` in `tolerated` counts as success.
async fn read_answer(
    what: &str, response: reqwest::Response, tolerated: &[u64],
) -> Result<Value, OutboxError> {
    let status = response.status().as_u16();
    let retry_after = retry_after_header(&response);
    let text = response.text().await.unwrap_or_default();
    if (200..300).contains(&status) {
        return Ok(serde_json::from_str(&text).unwrap_or(Value::Null));
    }
    let code = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|json| json.get("code").and_then(Value::as_u64));
    if code.is_some_and(|code| tolerated.contains(&code)) {
        tracing::info!(what, ?code, "Discord found the work done already");
        return Ok(Value::Null);
    }
    Err(status_error(what, status, retry_after, &text))
}

/// The `Retry-After` header of `response`, as written.
pub(super) fn retry_after_header(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

/// Discord's error answer `status` with `body` as a port error: 429 (with how long to wait),
/// 408 and 5xx are `Failed`, worth a retry; any other 4xx (bad request, missing access,
/// unknown message, a bad token) is `Rejected` with Discord's message.
pub(super) fn status_error(
    what: &str, status: u16, retry_after: Option<String>, body: &str,
) -> OutboxError {
    let mut summary = format!(
        "Discord {what} answered HTTP {status}: {}",
        error_excerpt(body)
    );
    // A 400's `errors` says which field was wrong, which the model can fix.
    if let Some(errors) = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|json| json.get("errors").map(Value::to_string))
    {
        summary.push_str(&format!(
            " ({})",
            errors.chars().take(MAX_ERROR_EXCERPT).collect::<String>()
        ));
    }
    match status {
        429 => {
            let retry_after = serde_json::from_str::<Value>(body)
                .ok()
                .and_then(|json| json.get("retry_after").and_then(Value::as_f64))
                .map(|secs| format!("{secs}"))
                .or(retry_after)
                .unwrap_or_else(|| "?".to_owned());
            OutboxError::Failed {
                message: format!("{summary} (retry after {retry_after} s)"),
                source: None,
            }
        }
        400..=499 if status != 408 => OutboxError::Rejected { message: summary },
        _ => OutboxError::Failed {
            message: summary,
            source: None,
        },
    }
}

/// Where Discord serves uploaded files.
pub const CDN_HOSTS: [&str; 2] = ["cdn.discordapp.com", "media.discordapp.net"];

/// How long the files of one command may take to download: Discord wants the interaction
/// answered within 3 seconds, and the answer goes only once they are stored.
pub(super) const DOWNLOAD_BUDGET: Duration = Duration::from_millis(2_000);

/// Downloads the files people upload with commands, from Discord's CDN only (or the
/// configured API base's origin, for a proxy or a test): the URL comes in the interaction, so
/// no other address is fetched.
///
/// Discord never redelivers an interaction, so a download that fails or takes longer than
/// [`DOWNLOAD_BUDGET`] is skipped with the reason rather than answered 503: the command still
/// reaches the agent.
#[derive(Debug, Clone)]
pub struct DiscordMedia {
    client: reqwest::Client,
    api_base: String,
    max_bytes: u64,
}

impl DiscordMedia {
    /// Downloads at most `max_bytes` a file.
    pub fn new(client: reqwest::Client, api_base: &str, max_bytes: u64) -> Self {
        Self {
            client,
            api_base: api_base.trim_end_matches('/').to_owned(),
            max_bytes,
        }
    }
}

#[async_trait::async_trait]
impl crate::media::MediaDownloader for DiscordMedia {
    fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    async fn download(
        &self, media: &crate::media::PendingMedia,
    ) -> Result<crate::media::Downloaded, crate::media::DownloadError> {
        use crate::media::DownloadError;
        let crate::media::MediaSource::Url(url) = &media.source else {
            return Err(DownloadError::Refused(
                "not a Discord attachment".to_owned(),
            ));
        };
        if !crate::media::url_is_allowed(url, &CDN_HOSTS, Some(&self.api_base)) {
            return Err(DownloadError::Refused(
                "the attachment is not on Discord's CDN".to_owned(),
            ));
        }
        let fetched = crate::media::fetch_limited_within(
            self.client.get(url),
            self.max_bytes,
            DOWNLOAD_BUDGET,
        )
        .await;
        fetched.map_err(|err| match err {
            DownloadError::Transient(reason) => DownloadError::Refused(format!(
                "download failed ({reason}); Discord does not resend a command"
            )),
            other => other,
        })
    }
}
