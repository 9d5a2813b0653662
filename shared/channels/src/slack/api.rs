//! Slack's Web API as the sender uses it: one `POST {apiBaseUrl}/<method>` helper with the bot
//! token as `Authorization: Bearer`, its failures sorted into ones a retry may fix and ones it
//! cannot, and `chat.postMessage` and the external file upload flow on top of it.

use std::time::Duration;

use clawless_base::media::OutboundMedia;
use clawless_core::outbox::OutboxError;
use serde_json::{Value, json};

/// Where the Web API lives unless the config says otherwise.
pub const DEFAULT_API_BASE_URL: &str = "https://slack.com/api";

/// How long one Web API call may take.
const POST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one file's bytes may take to upload.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// Slack `error` codes that no retry can fix.
const PERMANENT_ERRORS: &[&str] = &[
    "channel_not_found",
    "not_in_channel",
    "is_archived",
    "invalid_auth",
    "account_inactive",
    "msg_too_long",
    "token_revoked",
    "not_authed",
    "missing_scope",
    "no_text",
    "invalid_blocks",
    "invalid_blocks_format",
    "invalid_arguments",
    "restricted_action",
    "message_not_found",
    "cant_update_message",
    "cant_delete_message",
    "edit_window_closed",
    "invalid_name",
    "bad_timestamp",
    "no_item_specified",
    "not_reactable",
    "too_many_emoji",
    "too_many_reactions",
    "user_not_found",
    "user_not_visible",
    "user_disabled",
    "cannot_dm_bot",
];

/// One message to post: `channel`, `thread_ts` (none in a DM), text and optional blocks.
#[derive(Debug)]
pub(super) struct Post<'a> {
    pub(super) channel: &'a str,
    pub(super) thread_ts: Option<&'a str>,
    pub(super) text: &'a str,
    pub(super) blocks: Option<Value>,
}

/// Posts one message with `chat.postMessage` as the bot with `bot_token`; Slack's answer
/// (`channel`, `ts`). Failures as [`call`]'s.
pub(super) async fn post_message(
    client: &reqwest::Client, api_base_url: &str, bot_token: &str, post: &Post<'_>,
) -> Result<Value, OutboxError> {
    let mut body = json!({ "channel": post.channel, "text": post.text });
    if let Some(thread) = post.thread_ts {
        body["thread_ts"] = json!(thread);
    }
    if let Some(blocks) = &post.blocks {
        body["blocks"] = blocks.clone();
    }
    call(
        client,
        api_base_url,
        bot_token,
        "chat.postMessage",
        &body,
        &[],
    )
    .await
}

/// Calls the Web API `method` with a JSON body as the bot with `bot_token`; Slack's answer.
/// An `error` code in `tolerated` counts as success (a retried action finding its work done).
/// A rate limit, a server error or an `error` code a retry may fix is `Failed`; any other
/// refusal is `Rejected`.
pub(super) async fn call(
    client: &reqwest::Client, api_base_url: &str, bot_token: &str, method: &str, body: &Value,
    tolerated: &[&str],
) -> Result<Value, OutboxError> {
    let url = format!("{api_base_url}/{method}");
    let response = client
        .post(&url)
        .timeout(POST_TIMEOUT)
        .bearer_auth(bot_token)
        .json(body)
        .send()
        .await
        .map_err(|err| OutboxError::Failed {
            message: format!("POST {url} failed"),
            source: Some(Box::new(err)),
        })?;
    read_answer(method, response, tolerated).await
}

/// Calls the Web API `method` with a form-encoded body (`fields`) as the bot, for the methods
/// that take no JSON (the file upload ones); failures as [`call`]'s.
async fn call_form(
    client: &reqwest::Client, api_base_url: &str, bot_token: &str, method: &str,
    fields: &[(&str, &str)],
) -> Result<Value, OutboxError> {
    let url = format!("{api_base_url}/{method}");
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish();
    let response = client
        .post(&url)
        .timeout(POST_TIMEOUT)
        .bearer_auth(bot_token)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(body)
        .send()
        .await
        .map_err(|err| OutboxError::Failed {
            message: format!("POST {url} failed"),
            source: Some(Box::new(err)),
        })?;
    read_answer(method, response, &[]).await
}

/// Sends one file to `channel` (in `thread_ts`) with Slack's external upload flow:
/// `files.getUploadURLExternal` (name and length) gives an upload URL and a file id, the bytes
/// are POSTed there, and `files.completeUploadExternal` shares the file in the channel. Every
/// step carries the bot token. Failures as [`call`]'s; Slack's last answer on success.
pub(super) async fn upload_file(
    client: &reqwest::Client, api_base_url: &str, bot_token: &str, channel: &str,
    thread_ts: Option<&str>, media: &OutboundMedia, initial_comment: Option<&str>,
) -> Result<Value, OutboxError> {
    let length = media.bytes.len().to_string();
    let ticket = call_form(
        client,
        api_base_url,
        bot_token,
        "files.getUploadURLExternal",
        &[("filename", &media.name), ("length", &length)],
    )
    .await?;
    let (Some(upload_url), Some(file_id)) = (
        ticket.get("upload_url").and_then(Value::as_str),
        ticket.get("file_id").and_then(Value::as_str),
    ) else {
        return Err(failed(
            "files.getUploadURLExternal answered without upload_url and file_id".to_owned(),
        ));
    };
    let response = client
        .post(upload_url)
        .timeout(UPLOAD_TIMEOUT)
        .bearer_auth(bot_token)
        .header(reqwest::header::CONTENT_TYPE, media.mime.as_str())
        .body(media.bytes.clone())
        .send()
        .await
        .map_err(|err| OutboxError::Failed {
            message: "the file upload to Slack failed".to_owned(),
            source: Some(Box::new(err.without_url())),
        })?;
    let status = response.status();
    if !status.is_success() {
        let message = format!("the file upload to Slack answered HTTP {status}");
        return Err(
            if status.is_server_error() || matches!(status.as_u16(), 408 | 429) {
                failed(message)
            } else {
                OutboxError::Rejected { message }
            },
        );
    }
    let files = json!([{ "id": file_id, "title": media.name }]).to_string();
    let mut fields = vec![("files", files.as_str()), ("channel_id", channel)];
    if let Some(thread) = thread_ts {
        fields.push(("thread_ts", thread));
    }
    if let Some(comment) = initial_comment.filter(|comment| !comment.is_empty()) {
        fields.push(("initial_comment", comment));
    }
    call_form(
        client,
        api_base_url,
        bot_token,
        "files.completeUploadExternal",
        &fields,
    )
    .await
}

/// Slack's answer to `method`, or the failure it reports (see [`call`]).
async fn read_answer(
    method: &str, response: reqwest::Response, tolerated: &[&str],
) -> Result<Value, OutboxError> {
    let status = response.status();
    if status.as_u16() == 429 {
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("?")
            .to_owned();
        return Err(failed(format!(
            "{method} rate limited (Retry-After: {retry_after}s)"
        )));
    }
    if status.is_server_error() || status.as_u16() == 408 {
        return Err(failed(format!("{method} answered HTTP {status}")));
    }
    if !status.is_success() {
        return Err(OutboxError::Rejected {
            message: format!("{method} answered HTTP {status}"),
        });
    }
    let answer: Value = response.json().await.map_err(|err| OutboxError::Failed {
        message: format!("{method} answered with a body that is not JSON"),
        source: Some(Box::new(err)),
    })?;
    if answer.get("ok").and_then(Value::as_bool) == Some(true) {
        return Ok(answer);
    }
    let error = answer
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or("unknown_error");
    if tolerated.contains(&error) {
        tracing::info!(method, error, "Slack found the work done already");
        return Ok(answer);
    }
    if PERMANENT_ERRORS.contains(&error) {
        Err(OutboxError::Rejected {
            message: format!("{method}: {error}"),
        })
    } else {
        Err(failed(format!("{method}: {error}")))
    }
}

fn failed(message: String) -> OutboxError {
    OutboxError::Failed {
        message,
        source: None,
    }
}

/// Where Slack serves the files shared in a workspace.
pub const FILE_HOSTS: [&str; 1] = ["files.slack.com"];

/// Downloads the files shared on Slack: their private URL with `Authorization: Bearer <bot
/// token>`, only on Slack's file host (or the configured API base's origin, for a proxy or a
/// test), so the token goes nowhere else.
#[derive(Clone)]
pub struct SlackMedia {
    client: reqwest::Client,
    api_base: String,
    token: String,
    max_bytes: u64,
}

impl std::fmt::Debug for SlackMedia {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackMedia")
            .field("api_base", &self.api_base)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl SlackMedia {
    /// The download URL of file `id`, from `files.info` (scope `files:read`).
    async fn file_url(&self, id: &str) -> Result<String, crate::media::DownloadError> {
        use crate::media::DownloadError;
        let answer = call_form(
            &self.client,
            &self.api_base,
            &self.token,
            "files.info",
            &[("file", id)],
        )
        .await
        .map_err(|err| match err {
            OutboxError::Rejected { message } => DownloadError::Refused(message),
            // Gone for good, though not in the sender's list of permanent errors.
            other
                if ["file_not_found", "file_deleted"]
                    .iter()
                    .any(|code| other.to_string().ends_with(code)) =>
            {
                DownloadError::Refused(other.to_string())
            }
            other => DownloadError::Transient(other.to_string()),
        })?;
        let file = &answer["file"];
        Ok(file["url_private_download"]
            .as_str()
            .or_else(|| file["url_private"].as_str())
            .unwrap_or_default()
            .to_owned())
    }

    /// Downloads with the bot `token`, at most `max_bytes` a file.
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
impl crate::media::MediaDownloader for SlackMedia {
    fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    async fn download(
        &self, media: &crate::media::PendingMedia,
    ) -> Result<crate::media::Downloaded, crate::media::DownloadError> {
        use crate::media::{DownloadError, MediaSource};
        let url = match &media.source {
            MediaSource::Url(url) => url.clone(),
            MediaSource::SlackFile(id) => self.file_url(id).await?,
            _ => return Err(DownloadError::Refused("not a Slack file".to_owned())),
        };
        if url.is_empty() {
            return Err(DownloadError::Refused(
                "Slack gave no download URL for the file".to_owned(),
            ));
        }
        if !crate::media::url_is_allowed(&url, &FILE_HOSTS, Some(&self.api_base)) {
            return Err(DownloadError::Refused(
                "the file is not on Slack's file host".to_owned(),
            ));
        }
        let request = self.client.get(&url).bearer_auth(&self.token);
        crate::media::fetch_limited(request, self.max_bytes).await
    }
}
