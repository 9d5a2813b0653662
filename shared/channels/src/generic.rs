//! The generic JSON channel: `POST /webhook/generic` with
//! `{"message_id", "chat_id", "sender_id", "text", "chat_type": "direct"|"group"}`, so the
//! system can be driven before any chat platform is connected.
//!
//! A message may carry files: `"attachments": [{"name", "mime", "data" | "url"}]`, either
//! inline (`data`, base64, the whole body within the webhook limit) or by `url`, fetched once
//! at ingress ([`GenericMedia`]). A URL must be http(s) and goes through the same address
//! policy as `web_fetch` on every hop (no loopback, private, link-local or metadata address,
//! DNS answers and redirects included): a signed body cannot make the system reach inside
//! its own network. Either form is capped by `channels.generic.mediaMaxMb`; a file over it,
//! or a URL refused, unreachable or answering an error, is skipped with the reason, and the
//! message still goes to the agent.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use clawless_base::media::MediaKind;
use clawless_base::session_key::ChatType;
use clawless_core::tools::WebFetcher;
use clawless_core::turn::events::{ChatRef, InboundMessage};
use serde::Deserialize;

use crate::media::{
    DownloadError, Downloaded, MB, MediaDownloader, MediaSource, PendingMedia, placeholder_body,
};
use crate::signature::{SIGNATURE_HEADER, verify};
use crate::webhook::{
    ChannelMessage, PlatformChannel, PlatformReply, WebhookError, WebhookOutcome, WebhookRequest,
};

/// Channel id of the generic channel.
pub const CHANNEL_ID: &str = "generic";

/// Longest accepted id (message, chat or sender), in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// Longest accepted message text, in bytes.
pub const MAX_TEXT_BYTES: usize = 64 * 1024;

/// Largest attachment stored when `mediaMaxMb` is unset, in MB (a bigger one is skipped
/// with the reason).
pub const DEFAULT_MEDIA_MAX_MB: u64 = 20;

/// [`DEFAULT_MEDIA_MAX_MB`] in bytes.
pub const MAX_ATTACHMENT_BYTES: u64 = DEFAULT_MEDIA_MAX_MB * MB;

/// Longest attachment URL accepted, in bytes.
pub const MAX_URL_BYTES: usize = 2048;

/// How long fetching one attachment URL may take, redirects included (the webhook function
/// has 10 seconds in all).
pub const URL_FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Most attachments on one message.
pub const MAX_ATTACHMENTS: usize = 10;

/// One attachment of a generic message: `data` or `url`, exactly one.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenericAttachment {
    /// The file name.
    #[serde(default)]
    pub name: Option<String>,
    /// Its MIME type (`application/octet-stream` when unset and the server names none).
    #[serde(default)]
    pub mime: Option<String>,
    /// The file, base64.
    #[serde(default)]
    pub data: Option<String>,
    /// Where to fetch the file (http or https), once, at ingress.
    #[serde(default)]
    pub url: Option<String>,
}

/// A validated generic-channel message.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenericMessage {
    /// Unique per message; a second delivery with the same id is a duplicate.
    pub message_id: String,
    /// The conversation.
    pub chat_id: String,
    /// The author.
    pub sender_id: String,
    /// The text (may be empty when attachments are sent).
    #[serde(default)]
    pub text: String,
    /// `direct` or `group`.
    pub chat_type: ChatType,
    /// Files sent with the message.
    #[serde(default)]
    pub attachments: Vec<GenericAttachment>,
}

/// Why a body was refused (HTTP 400, with this text as the reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

impl GenericMessage {
    /// Parses and validates a raw body.
    pub fn parse(body: &[u8]) -> Result<Self, ParseError> {
        let mut deserializer = serde_json::Deserializer::from_slice(body);
        let message: Self = serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
            let path = err.path().to_string();
            let inner = err.into_inner();
            if path == "." || path.is_empty() {
                ParseError(format!("invalid body: {inner}"))
            } else {
                ParseError(format!("invalid body at {path}: {inner}"))
            }
        })?;
        deserializer
            .end()
            .map_err(|err| ParseError(format!("invalid body: {err}")))?;
        for (field, value) in [
            ("message_id", &message.message_id),
            ("chat_id", &message.chat_id),
            ("sender_id", &message.sender_id),
        ] {
            check_id(field, value)?;
        }
        if message.text.trim().is_empty() && message.attachments.is_empty() {
            return Err(ParseError("text must not be empty".to_owned()));
        }
        if message.attachments.len() > MAX_ATTACHMENTS {
            return Err(ParseError(format!(
                "more than {MAX_ATTACHMENTS} attachments"
            )));
        }
        message.pending_media()?;
        if message.text.len() > MAX_TEXT_BYTES {
            return Err(ParseError(format!(
                "text is longer than {MAX_TEXT_BYTES} bytes"
            )));
        }
        Ok(message)
    }

    /// The attachments, decoded (or their URLs checked), ready for ingress to store.
    pub fn pending_media(&self) -> Result<Vec<PendingMedia>, ParseError> {
        self.attachments
            .iter()
            .enumerate()
            .map(|(index, attachment)| {
                let (source, size) = match (&attachment.data, &attachment.url) {
                    (Some(data), None) => {
                        let bytes = inline_bytes(index, data)?;
                        let size = bytes.len() as u64;
                        (MediaSource::Inline(bytes), Some(size))
                    }
                    (None, Some(url)) => (MediaSource::Url(checked_url(index, url)?), None),
                    _ => {
                        return Err(ParseError(format!(
                            "attachments[{index}] needs exactly one of data and url"
                        )));
                    }
                };
                let mime = attachment
                    .mime
                    .clone()
                    .filter(|mime| !mime.trim().is_empty());
                if let Some(bad) = mime
                    .iter()
                    .chain(attachment.name.iter())
                    .find(|value| value.len() > MAX_ID_BYTES || value.chars().any(char::is_control))
                {
                    return Err(ParseError(format!(
                        "attachments[{index}] has a name or mime that is too long or holds control characters: {:?}",
                        bad.chars().take(40).collect::<String>()
                    )));
                }
                Ok(PendingMedia {
                    kind: mime.as_deref().map_or(MediaKind::Document, MediaKind::of_mime),
                    mime,
                    name: attachment.name.clone(),
                    size,
                    source,
                })
            })
            .collect()
    }

    /// The normalised message.
    pub fn into_inbound(self, sender_is_owner: bool) -> InboundMessage {
        InboundMessage {
            message_id: self.message_id,
            chat: ChatRef {
                channel: CHANNEL_ID.to_owned(),
                chat_id: self.chat_id,
                chat_type: self.chat_type,
            },
            sender_id: self.sender_id,
            text: self.text,
            sender_is_owner,
            attachments: Vec::new(),
        }
    }
}

/// The decoded bytes of an inline attachment; not base64, or nothing, is a bad body.
fn inline_bytes(index: usize, data: &str) -> Result<Vec<u8>, ParseError> {
    let bytes = STANDARD
        .decode(data.trim().as_bytes())
        .map_err(|err| ParseError(format!("attachments[{index}].data is not base64: {err}")))?;
    if bytes.is_empty() {
        return Err(ParseError(format!("attachments[{index}].data is empty")));
    }
    Ok(bytes)
}

/// An attachment URL as a well-formed http(s) URL; whether its address may be reached is the
/// fetcher's check, at ingress (a refusal there is a skipped file, not a bad body).
fn checked_url(index: usize, url: &str) -> Result<String, ParseError> {
    let bad = |why: &str| ParseError(format!("attachments[{index}].url {why}"));
    let url = url.trim();
    if url.len() > MAX_URL_BYTES {
        return Err(bad(&format!("is longer than {MAX_URL_BYTES} bytes")));
    }
    let parsed = url::Url::parse(url).map_err(|err| bad(&format!("is not a URL: {err}")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(bad("must be an http or https URL with a host"));
    }
    Ok(parsed.into())
}

/// How the generic channel gets its attachments' bytes: inline ones from the body, `url` ones
/// through a [`WebFetcher`] (the address policy of `web_fetch`), each at most `max_bytes`
/// and [`URL_FETCH_TIMEOUT`]. Any failure to fetch a URL is a refusal: the file is skipped
/// with the reason rather than the webhook retried, since the sender's server, not the
/// platform, is what failed.
#[derive(Debug, Clone)]
pub struct GenericMedia {
    max_bytes: u64,
    fetcher: Option<Arc<dyn WebFetcher>>,
}

impl GenericMedia {
    /// Stores files up to `max_bytes`; URLs are fetched with `fetcher` (none: every URL
    /// attachment is skipped).
    pub fn new(max_bytes: u64, fetcher: Option<Arc<dyn WebFetcher>>) -> Self {
        Self { max_bytes, fetcher }
    }
}

#[async_trait]
impl MediaDownloader for GenericMedia {
    fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    async fn download(&self, media: &PendingMedia) -> Result<Downloaded, DownloadError> {
        let url = match &media.source {
            MediaSource::Inline(bytes) => {
                return Ok(Downloaded {
                    bytes: bytes.clone(),
                    mime: None,
                });
            }
            MediaSource::Url(url) => url,
            _ => {
                return Err(DownloadError::Refused(
                    "not a generic channel attachment".to_owned(),
                ));
            }
        };
        let Some(fetcher) = &self.fetcher else {
            return Err(DownloadError::Refused(
                "this deployment fetches no attachment URLs".to_owned(),
            ));
        };
        // One byte over the limit tells an oversized file from one exactly at it.
        let read = usize::try_from(self.max_bytes.saturating_add(1)).unwrap_or(usize::MAX);
        let page = fetcher
            .fetch(url, read, URL_FETCH_TIMEOUT)
            .await
            .map_err(|err| DownloadError::Refused(format!("the URL was not fetched: {err}")))?;
        if !(200..300).contains(&page.status) {
            return Err(DownloadError::Refused(format!(
                "the URL answered HTTP {}",
                page.status
            )));
        }
        if page.truncated || page.body.len() as u64 > self.max_bytes {
            return Err(DownloadError::TooLarge {
                size: page.body.len() as u64,
                limit: self.max_bytes,
            });
        }
        let mime = page
            .content_type
            .as_deref()
            .map(|value| value.split(';').next().unwrap_or("").trim().to_owned())
            .filter(|value| !value.is_empty());
        Ok(Downloaded {
            bytes: page.body,
            mime,
        })
    }
}

/// Checks one id of the generic channel: not blank, at most [`MAX_ID_BYTES`], no control
/// characters.
fn check_id(field: &str, value: &str) -> Result<(), ParseError> {
    if value.trim().is_empty() {
        return Err(ParseError(format!("{field} must not be empty")));
    }
    if value.len() > MAX_ID_BYTES {
        return Err(ParseError(format!(
            "{field} is longer than {MAX_ID_BYTES} bytes"
        )));
    }
    if value.chars().any(char::is_control) {
        return Err(ParseError(format!("{field} contains control characters")));
    }
    Ok(())
}

/// Checks a chat id a reply (or a `message` send) is addressed to, by the rules of an inbound
/// message's `chat_id`: any chat of the receiver is reachable through its reply URL.
pub fn check_chat_id(chat_id: &str) -> Result<(), ParseError> {
    check_id("chat_id", chat_id)
}

/// The generic channel as a [`PlatformChannel`]: `X-Clawless-Signature` (HMAC-SHA256 of the
/// body under the shared secret), then [`GenericMessage::parse`]. Every message is addressed
/// to the agent; the message id is the delivery's id.
#[derive(Clone)]
pub struct GenericWebhook {
    secret: Arc<[u8]>,
}

impl std::fmt::Debug for GenericWebhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GenericWebhook").finish_non_exhaustive()
    }
}

impl GenericWebhook {
    /// The generic channel checking signatures with `secret`.
    pub fn new(secret: &[u8]) -> Self {
        Self {
            secret: Arc::from(secret),
        }
    }
}

impl PlatformChannel for GenericWebhook {
    fn id(&self) -> &'static str {
        CHANNEL_ID
    }

    fn handle(&self, request: &WebhookRequest<'_>) -> Result<WebhookOutcome, WebhookError> {
        if !request.sub_path.is_empty() {
            return Err(WebhookError::BadRequest(format!(
                "the generic channel has no route {:?}",
                request.sub_path
            )));
        }
        let signature = request
            .headers
            .get(SIGNATURE_HEADER)
            .map(|value| value.to_str().unwrap_or(""));
        verify(&self.secret, request.body, signature)
            .map_err(|err| WebhookError::Unauthorized(err.to_string()))?;
        let message =
            GenericMessage::parse(request.body).map_err(|err| WebhookError::BadRequest(err.0))?;
        let media = message
            .pending_media()
            .map_err(|err| WebhookError::BadRequest(err.0))?;
        let mut inbound = message.into_inbound(false);
        if inbound.text.trim().is_empty() {
            inbound.text = placeholder_body(&media).unwrap_or_default();
        }
        Ok(WebhookOutcome::Message(ChannelMessage {
            event_id: inbound.message_id.clone(),
            message: inbound,
            media,
            addressed_to_bot: true,
            // Null body: ingress answers with its own `{"accepted", "session"}`.
            ack: PlatformReply {
                status: 202,
                body: serde_json::Value::Null,
            },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str =
        r#"{"message_id":"m1","chat_id":"c1","sender_id":"u1","text":"hi","chat_type":"direct"}"#;

    #[test]
    fn a_well_formed_body_parses() {
        let message = GenericMessage::parse(GOOD.as_bytes()).unwrap();
        assert_eq!(message.chat_type, ChatType::Direct);
        let inbound = message.into_inbound(true);
        assert_eq!(inbound.chat.channel, "generic");
    }

    #[test]
    fn bad_bodies_are_refused_with_a_reason() {
        let cases = [
            ("", "invalid body"),
            ("[]", "invalid body"),
            ("{", "invalid body"),
            (
                r#"{"message_id":"m1","chat_id":"c1","sender_id":"u1","text":"hi"}"#,
                "chat_type",
            ),
            (
                r#"{"message_id":"m1","chat_id":"c1","sender_id":"u1","text":"hi","chat_type":"channel"}"#,
                "chat_type",
            ),
            (
                r#"{"message_id":1,"chat_id":"c1","sender_id":"u1","text":"hi","chat_type":"direct"}"#,
                "message_id",
            ),
            (
                r#"{"message_id":" ","chat_id":"c1","sender_id":"u1","text":"hi","chat_type":"direct"}"#,
                "message_id must not be empty",
            ),
            (
                r#"{"message_id":"m1","chat_id":"c1","sender_id":"u1","text":"  ","chat_type":"direct"}"#,
                "text must not be empty",
            ),
            (
                r#"{"message_id":"m1","chat_id":"c\n1","sender_id":"u1","text":"hi","chat_type":"direct"}"#,
                "control",
            ),
            (
                r#"{"message_id":"m1","chat_id":"c1","sender_id":"u1","text":"hi","chat_type":"direct","x":1}"#,
                "unknown field",
            ),
            (
                r#"{"message_id":"m1","chat_id":"c1","sender_id":"u1","text":"hi","chat_type":"direct"} trailing"#,
                "invalid body",
            ),
        ];
        for (body, expected) in cases {
            let err = GenericMessage::parse(body.as_bytes()).unwrap_err();
            assert!(err.0.contains(expected), "{body:?}: {err}");
        }
        let with = |attachment: &str| {
            format!(
                r#"{{"message_id":"m1","chat_id":"c1","sender_id":"u1","text":"hi","chat_type":"direct","attachments":[{attachment}]}}"#
            )
        };
        for (attachment, expected) in [
            (r#"{"url":"file:///etc/passwd"}"#, "http or https"),
            (r#"{"url":"gopher://example.com/"}"#, "http or https"),
            (r#"{"url":"not a url"}"#, "is not a URL"),
            (
                r#"{"url":"https://example.com/a.png","data":"aGk="}"#,
                "exactly one",
            ),
            (r#"{"name":"a.png"}"#, "exactly one"),
            (r#"{"data":"not base64!"}"#, "base64"),
        ] {
            let err = GenericMessage::parse(with(attachment).as_bytes()).unwrap_err();
            assert!(err.0.contains(expected), "{attachment}: {err}");
        }
        let long_url = format!(
            r#"{{"url":"https://example.com/{}"}}"#,
            "a".repeat(MAX_URL_BYTES)
        );
        assert!(
            GenericMessage::parse(with(&long_url).as_bytes())
                .unwrap_err()
                .0
                .contains("longer")
        );
        let long = format!(
            r#"{{"message_id":"{}","chat_id":"c1","sender_id":"u1","text":"hi","chat_type":"direct"}}"#,
            "m".repeat(MAX_ID_BYTES + 1)
        );
        assert!(
            GenericMessage::parse(long.as_bytes())
                .unwrap_err()
                .0
                .contains("longer")
        );
    }

    #[test]
    fn a_url_attachment_is_announced_unfetched_with_no_size() {
        let body = r#"{"message_id":"m1","chat_id":"c1","sender_id":"u1","text":"","chat_type":"direct","attachments":[{"name":"chart.png","mime":"image/png","url":" https://example.com/chart.png "}]}"#;
        let message = GenericMessage::parse(body.as_bytes()).unwrap();
        let media = message.pending_media().unwrap();
        assert_eq!(media.len(), 1);
        assert_eq!(
            media[0].source,
            MediaSource::Url("https://example.com/chart.png".to_owned())
        );
        assert_eq!(media[0].kind, MediaKind::Image);
        assert_eq!(media[0].size, None);
    }

    /// A fetcher answering every URL with one scripted result.
    #[derive(Debug)]
    struct OneAnswer(Result<clawless_core::tools::FetchedPage, clawless_core::tools::FetchError>);

    #[async_trait]
    impl WebFetcher for OneAnswer {
        async fn fetch(
            &self, url: &str, max_bytes: usize, _timeout: Duration,
        ) -> Result<clawless_core::tools::FetchedPage, clawless_core::tools::FetchError> {
            self.0.clone().map(|mut page| {
                page.url = url.to_owned();
                page.truncated = page.body.len() > max_bytes;
                page.body.truncate(max_bytes);
                page
            })
        }
    }

    fn page(status: u16, body: &[u8]) -> clawless_core::tools::FetchedPage {
        clawless_core::tools::FetchedPage {
            url: String::new(),
            status,
            content_type: Some("image/png; charset=binary".to_owned()),
            body: body.to_vec(),
            truncated: false,
        }
    }

    fn by_url() -> PendingMedia {
        PendingMedia {
            kind: MediaKind::Document,
            mime: None,
            name: None,
            size: None,
            source: MediaSource::Url("https://example.com/f".to_owned()),
        }
    }

    #[tokio::test]
    async fn url_downloads_are_capped_and_every_failure_is_a_refusal() {
        let fetch = |answer| GenericMedia::new(4, Some(Arc::new(OneAnswer(answer))));
        let got = fetch(Ok(page(200, b"1234")))
            .download(&by_url())
            .await
            .unwrap();
        assert_eq!(got.bytes, b"1234");
        assert_eq!(got.mime.as_deref(), Some("image/png"));
        assert_eq!(
            fetch(Ok(page(200, b"12345"))).download(&by_url()).await,
            Err(DownloadError::TooLarge { size: 5, limit: 4 })
        );
        assert_eq!(
            fetch(Ok(page(404, b""))).download(&by_url()).await,
            Err(DownloadError::Refused(
                "the URL answered HTTP 404".to_owned()
            ))
        );
        let refused = fetch(Err(clawless_core::tools::FetchError::Refused(
            "10.0.0.7 (private)".to_owned(),
        )))
        .download(&by_url())
        .await;
        assert_eq!(
            refused,
            Err(DownloadError::Refused(
                "the URL was not fetched: refused: 10.0.0.7 (private)".to_owned()
            ))
        );
        let no_fetcher = GenericMedia::new(4, None).download(&by_url()).await;
        assert!(matches!(no_fetcher, Err(DownloadError::Refused(_))));
    }
}
