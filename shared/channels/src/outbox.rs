//! Sending replies: a signed HTTP POST to a channel's `reply_url`, and a router that picks the
//! sender by the reply's channel.
//!
//! The generic channel's sender ([`HttpReplySender`]) carries the `message` tool's `send` to
//! any `chat_id` through the same URL, keyed by the reply id in `Idempotency-Key` (a send
//! with files is that same reply with its `attachments`); it has no other action. A 4xx
//! answer (but 408 and 429) is a refusal for good, anything else a failure worth retrying. A
//! reply's files travel by link, as `attachments: [{name, mime, size, url}]`: each stored
//! once in the blob store and linked by the deployment's
//! [`MediaPublisher`] (a presigned S3 URL on AWS, a signed local route in `clawless local`).
//! Only a sender built without a publisher sends them inline, `[{name, mime, data}]` with
//! base64 `data`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_core::outbox::{
    ActionRequest, Delivery, MessageAction, MessageActionKind, Outbox, OutboxError,
};
use clawless_core::turn::OutboundReply;
use clawless_core::turn::events::ChatRef;
use serde::Serialize;

use crate::media_links::MediaPublisher;
use crate::signature::{SIGNATURE_HEADER, sign};

/// Header repeating the reply id, so receivers can drop a resend.
pub const IDEMPOTENCY_HEADER: &str = "idempotency-key";

/// How long one reply POST may take.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// The JSON body POSTed to `reply_url`.
#[derive(Debug, Serialize)]
struct ReplyBody<'a> {
    reply_id: &'a str,
    channel: &'a str,
    chat_id: &'a str,
    chat_type: clawless_base::session_key::ChatType,
    text: &'a str,
    /// The reply's files, present only when it has some.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    attachments: Vec<ReplyAttachment<'a>>,
}

/// One file of a reply: a link to it, or (without a publisher) the file inline.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum ReplyAttachment<'a> {
    /// `{name, mime, size, url}`: the receiver fetches the file from `url` until it expires.
    Linked {
        name: &'a str,
        mime: &'a str,
        size: usize,
        url: String,
    },
    /// `{name, mime, data}`, the file in standard base64 with padding.
    Inline {
        name: &'a str,
        mime: &'a str,
        data: String,
    },
}

/// `bytes` as standard base64 (RFC 4648 §4) with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let b = [
            group[0],
            group.get(1).copied().unwrap_or(0),
            group.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= group.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Posts replies as signed JSON to one URL.
#[derive(Clone)]
pub struct HttpReplySender {
    client: reqwest::Client,
    reply_url: String,
    secret: Arc<[u8]>,
    media: Option<MediaPublisher>,
}

impl std::fmt::Debug for HttpReplySender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret stays out of logs.
        f.debug_struct("HttpReplySender")
            .field("reply_url", &self.reply_url)
            .field("media", &self.media)
            .finish_non_exhaustive()
    }
}

impl HttpReplySender {
    /// A sender to `reply_url`, signing with `secret`.
    pub fn new(client: reqwest::Client, reply_url: impl Into<String>, secret: &[u8]) -> Self {
        Self {
            client,
            reply_url: reply_url.into(),
            secret: Arc::from(secret),
            media: None,
        }
    }

    /// The same sender, handing a reply's files out as links made by `publisher` instead of
    /// inline.
    #[must_use]
    pub fn with_media_publisher(mut self, publisher: MediaPublisher) -> Self {
        self.media = Some(publisher);
        self
    }

    /// The reply's files as the body carries them: linked when there is a publisher, inline
    /// otherwise. A file that cannot be stored or linked fails the send (worth a retry).
    async fn attachments<'a>(
        &self, reply: &'a OutboundReply,
    ) -> Result<Vec<ReplyAttachment<'a>>, OutboxError> {
        let mut attachments = Vec::with_capacity(reply.media.len());
        for media in &reply.media {
            attachments.push(match &self.media {
                Some(publisher) => {
                    let published = publisher
                        .publish(media)
                        .await
                        .map_err(|err| failed(err.to_string()))?;
                    ReplyAttachment::Linked {
                        name: &media.name,
                        mime: &media.mime,
                        size: media.bytes.len(),
                        url: published.url,
                    }
                }
                None => ReplyAttachment::Inline {
                    name: &media.name,
                    mime: &media.mime,
                    data: base64(&media.bytes),
                },
            });
        }
        Ok(attachments)
    }
}

fn failed(message: String) -> OutboxError {
    OutboxError::Failed {
        message,
        source: None,
    }
}

/// Whether an HTTP error status is a refusal for good: a 4xx but 408 (timeout) and 429 (rate
/// limit), which a later attempt may get past.
fn refused_for_good(status: reqwest::StatusCode) -> bool {
    status.is_client_error()
        && status != reqwest::StatusCode::REQUEST_TIMEOUT
        && status != reqwest::StatusCode::TOO_MANY_REQUESTS
}

/// The message id a receiver may answer with (`{"message_id": "…"}`, a string or a number).
fn message_id_of(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    match value.get("message_id")? {
        serde_json::Value::String(id) if !id.trim().is_empty() => Some(id.trim().to_owned()),
        serde_json::Value::Number(id) => Some(id.to_string()),
        _ => None,
    }
}

#[async_trait]
impl Outbox for HttpReplySender {
    async fn send(&self, reply: &OutboundReply) -> Result<(), OutboxError> {
        self.deliver(reply).await.map(|_| ())
    }

    async fn deliver(&self, reply: &OutboundReply) -> Result<Delivery, OutboxError> {
        let body = serde_json::to_vec(&ReplyBody {
            reply_id: &reply.reply_id,
            channel: &reply.chat.channel,
            chat_id: &reply.chat.chat_id,
            chat_type: reply.chat.chat_type,
            text: &reply.text,
            attachments: self.attachments(reply).await?,
        })
        .map_err(|err| failed(format!("reply could not be encoded: {err}")))?;
        let response = self
            .client
            .post(&self.reply_url)
            .timeout(REPLY_TIMEOUT)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(SIGNATURE_HEADER, sign(&self.secret, &body))
            .header(IDEMPOTENCY_HEADER, &reply.reply_id)
            .body(body)
            .send()
            .await
            .map_err(|err| OutboxError::Failed {
                message: format!("POST {} failed", self.reply_url),
                source: Some(Box::new(err)),
            })?;
        let status = response.status();
        if status.is_success() {
            tracing::info!(reply_id = %reply.reply_id, status = status.as_u16(), "reply delivered");
            // The id is a courtesy of the receiver: a body that cannot be read has none.
            let answer = response.bytes().await.unwrap_or_default();
            Ok(Delivery {
                message_id: message_id_of(&answer),
            })
        } else if refused_for_good(status) {
            Err(OutboxError::Rejected {
                message: format!("POST {} answered HTTP {status}", self.reply_url),
            })
        } else {
            Err(failed(format!(
                "POST {} answered HTTP {status}",
                self.reply_url
            )))
        }
    }

    /// The target is the receiver's `chat_id`, checked like an inbound one; the generic
    /// channel has no threads.
    async fn resolve_target(
        &self, channel: &str, target: &str, thread_id: Option<&str>,
    ) -> Result<ChatRef, OutboxError> {
        if thread_id.is_some_and(|thread| !thread.trim().is_empty()) {
            return Err(OutboxError::Rejected {
                message: format!("The {channel} channel has no threads; leave threadId out."),
            });
        }
        crate::generic::check_chat_id(target)
            .map_err(|err| OutboxError::Rejected { message: err.0 })?;
        Ok(ChatRef {
            channel: channel.to_owned(),
            chat_id: target.to_owned(),
            chat_type: clawless_base::session_key::ChatType::Direct,
        })
    }

    /// A `send` with files is POSTed as a reply with them (the text beside its
    /// `attachments`, keyed by the action id); every other action is refused.
    async fn act(&self, request: &ActionRequest) -> Result<Delivery, OutboxError> {
        match &request.action {
            MessageAction::Send(send) => {
                self.deliver(&send.as_reply(&request.action_id, &request.chat))
                    .await
            }
            other => Err(clawless_core::outbox::unsupported_action(
                other.kind(),
                &request.chat.channel,
            )),
        }
    }
}

/// Routes each reply to the sender of its channel.
#[derive(Debug, Default, Clone)]
pub struct ChannelOutbox {
    senders: BTreeMap<String, Arc<dyn Outbox>>,
}

impl ChannelOutbox {
    /// An outbox with no channels.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the sender for `channel`.
    pub fn with_channel(mut self, channel: &str, sender: Arc<dyn Outbox>) -> Self {
        self.senders.insert(channel.to_owned(), sender);
        self
    }
}

impl ChannelOutbox {
    /// The sender of `channel`.
    fn sender(&self, channel: &str) -> Result<&Arc<dyn Outbox>, OutboxError> {
        self.senders
            .get(channel)
            .ok_or_else(|| OutboxError::UnknownChannel(channel.to_owned()))
    }

    /// The configured channels, in name order.
    pub fn channels(&self) -> impl Iterator<Item = &str> {
        self.senders.keys().map(String::as_str)
    }
}

#[async_trait]
impl Outbox for ChannelOutbox {
    fn channel_ids(&self) -> Vec<String> {
        self.senders.keys().cloned().collect()
    }

    async fn send(&self, reply: &OutboundReply) -> Result<(), OutboxError> {
        self.sender(&reply.chat.channel)?.send(reply).await
    }

    async fn deliver(&self, reply: &OutboundReply) -> Result<Delivery, OutboxError> {
        self.sender(&reply.chat.channel)?.deliver(reply).await
    }

    fn message_actions(&self, channel: &str) -> Vec<MessageActionKind> {
        self.senders
            .get(channel)
            .map(|sender| sender.message_actions(channel))
            .unwrap_or_default()
    }

    async fn resolve_target(
        &self, channel: &str, target: &str, thread_id: Option<&str>,
    ) -> Result<clawless_core::turn::events::ChatRef, OutboxError> {
        self.sender(channel)?
            .resolve_target(channel, target, thread_id)
            .await
    }

    async fn act(&self, request: &ActionRequest) -> Result<Delivery, OutboxError> {
        self.sender(&request.chat.channel)?.act(request).await
    }

    async fn typing(&self, chat: &clawless_core::turn::events::ChatRef) -> Result<(), OutboxError> {
        match self.senders.get(&chat.channel) {
            Some(sender) => sender.typing(chat).await,
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_follows_rfc_4648_test_vectors() {
        let vectors = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in vectors {
            assert_eq!(base64(plain.as_bytes()), encoded, "{plain:?}");
        }
        assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
    }
}
