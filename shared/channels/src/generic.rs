//! The generic JSON channel: `POST /webhook/generic` with
//! `{"message_id", "chat_id", "sender_id", "text", "chat_type": "direct"|"group"}`, so the
//! system can be driven before any chat platform is connected.
//!
//! A message may carry files inline: `"attachments": [{"name", "mime", "data"}]`, `data` in
//! base64, each at most [`MAX_ATTACHMENT_BYTES`] decoded (and the whole body within the
//! webhook limit). There is no `url` form: a signed body must not make the agent fetch an
//! address of its choosing, so the sender uploads the bytes it means.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use clawless_base::media::MediaKind;
use clawless_base::session_key::ChatType;
use clawless_core::turn::events::{ChatRef, InboundMessage};
use serde::Deserialize;

use crate::media::{MB, MediaSource, PendingMedia, placeholder_body};
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

/// Largest attachment accepted, decoded (a bigger one is skipped with the reason).
pub const MAX_ATTACHMENT_BYTES: u64 = 20 * MB;

/// Most attachments on one message.
pub const MAX_ATTACHMENTS: usize = 10;

/// One inline attachment of a generic message.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenericAttachment {
    /// The file name.
    #[serde(default)]
    pub name: Option<String>,
    /// Its MIME type (`application/octet-stream` when unset).
    #[serde(default)]
    pub mime: Option<String>,
    /// The file, base64.
    pub data: String,
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

    /// The attachments, decoded, ready for ingress to store.
    pub fn pending_media(&self) -> Result<Vec<PendingMedia>, ParseError> {
        self.attachments
            .iter()
            .enumerate()
            .map(|(index, attachment)| {
                let bytes = STANDARD
                    .decode(attachment.data.trim().as_bytes())
                    .map_err(|err| {
                        ParseError(format!("attachments[{index}].data is not base64: {err}"))
                    })?;
                if bytes.is_empty() {
                    return Err(ParseError(format!("attachments[{index}].data is empty")));
                }
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
                    size: Some(bytes.len() as u64),
                    source: MediaSource::Inline(bytes),
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
}
