//! Replies through the Bot API: `sendMessage` in 4,096-character chunks (each claimed once in
//! the inbox), in the forum topic the chat id names, replying to the message a directive points
//! at, with approval buttons on the last chunk; plus "typing…" and button-press answers.
//! Files (`reply.media`) follow the text, one upload each (`sendPhoto`, `sendVoice`,
//! `sendAudio`, `sendDocument`), claimed once like the chunks.
//! A send reports the last chunk's id as `<chat id>:<message id>`, the form inbound messages
//! carry, so the `message` tool's actions (in `actions`) can point at it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_core::outbox::{ActionRequest, Delivery, MessageActionKind, Outbox, OutboxError};
use clawless_core::session::{Claim, Inbox};
use clawless_core::turn::OutboundReply;
use clawless_core::turn::events::{ApprovalDecision, ChatRef};
use serde_json::{Value, json};

use super::api::{ApiError, call, call_multipart};
use super::config::TelegramActions;
use super::inbound::CHANNEL_ID;
use super::wire::{TOPIC_INFIX, truncate};
use crate::chunk::chunk_text;
use crate::directives::strip_directives;
use crate::multipart::Form;
use crate::webhook::approval_button_value;
use clawless_base::media::{MediaKind, OutboundMedia};

/// Longest text of one Telegram message, in characters.
pub const MESSAGE_LIMIT: usize = 4_096;

/// Largest photo `sendPhoto` takes; a larger image goes as a document.
pub(super) const MAX_PHOTO_BYTES: usize = 10_000_000;

/// Largest file a bot may upload through the public Bot API; a larger one is refused.
pub(super) const MAX_FILE_BYTES: usize = 50_000_000;

/// How long a sent chunk stays claimed: longer than any redelivery of its turn.
pub(super) const CHUNK_CLAIM_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// Sends replies through the Bot API. Each chunk of a reply is claimed in the inbox as
/// `out:telegram:<reply_id>:<index>` before it is sent, so a retried turn sends only the chunks
/// that did not go out.
#[derive(Clone)]
pub struct TelegramSender {
    client: reqwest::Client,
    api_base: String,
    token: String,
    pub(super) inbox: Arc<dyn Inbox>,
    pub(super) actions: TelegramActions,
}

impl std::fmt::Debug for TelegramSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is part of every URL, so neither appears here.
        f.debug_struct("TelegramSender")
            .field("api_base", &self.api_base)
            .finish_non_exhaustive()
    }
}

/// Where a `ChatRef` points on Telegram.
pub(super) struct Target {
    pub(super) chat_id: Value,
    pub(super) thread_id: Option<i64>,
}

pub(super) fn target(chat: &ChatRef) -> Target {
    let (chat_id, thread_id) = match chat.chat_id.split_once(TOPIC_INFIX) {
        Some((chat_id, thread)) => (chat_id, thread.parse::<i64>().ok()),
        None => (chat.chat_id.as_str(), None),
    };
    let chat_id = chat_id
        .parse::<i64>()
        .map_or_else(|_| Value::from(chat_id), Value::from);
    Target { chat_id, thread_id }
}

/// A Telegram message id from `4711` or `<chat id>:4711` (the channel's `message_id`).
pub(super) fn telegram_message_id(id: &str) -> Option<i64> {
    id.rsplit(':').next()?.trim().parse().ok()
}

fn approval_keyboard(code: &str) -> Value {
    let button = |label: &str, decision| json!({"text": label, "callback_data": approval_button_value(code, decision)});
    json!({
        "inline_keyboard": [[
            button("Allow once", ApprovalDecision::AllowOnce),
            button("Always allow", ApprovalDecision::AllowAlways),
            button("Deny", ApprovalDecision::Deny),
        ]]
    })
}

pub(super) fn now_unix() -> u64 {
    clawless_base::clock::system_now_ms() / 1_000
}

impl TelegramSender {
    /// A sender for the bot with `token`, at `api_base` (e.g.
    /// [`DEFAULT_API_BASE_URL`](super::DEFAULT_API_BASE_URL)).
    pub fn new(
        client: reqwest::Client, api_base: &str, token: &str, inbox: Arc<dyn Inbox>,
    ) -> Self {
        Self {
            client,
            api_base: api_base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            inbox,
            actions: TelegramActions::default(),
        }
    }

    /// The same sender with the `message` tool's action gates `actions` (all on by default).
    pub fn with_actions(mut self, actions: TelegramActions) -> Self {
        self.actions = actions;
        self
    }

    pub(super) async fn call(&self, method: &str, body: &Value) -> Result<Value, ApiError> {
        call(&self.client, &self.api_base, &self.token, method, body).await
    }

    /// Shows "typing…" in `chat` (`sendChatAction`), in its topic if it has one.
    pub async fn send_typing(&self, chat: &ChatRef) -> Result<(), OutboxError> {
        let target = target(chat);
        let mut body = json!({"chat_id": target.chat_id, "action": "typing"});
        if let Some(thread) = target.thread_id {
            body["message_thread_id"] = thread.into();
        }
        self.call("sendChatAction", &body).await?;
        Ok(())
    }

    /// Answers a button press (`answerCallbackQuery`), with a short notice when `text` is
    /// given.
    pub async fn answer_callback(
        &self, callback_query_id: &str, text: Option<&str>,
    ) -> Result<(), OutboxError> {
        let mut body = json!({"callback_query_id": callback_query_id});
        if let Some(text) = text {
            // Telegram shows at most 200 characters.
            body["text"] = truncate(text, 200).into();
        }
        self.call("answerCallbackQuery", &body).await?;
        Ok(())
    }

    /// Uploads `form` with `method` (`sendPhoto`, `sendDocument`, …) once under the inbox
    /// claim `key`, like [`Self::send_claimed`].
    pub(super) async fn upload_claimed(
        &self, key: &str, method: &str, form: Form,
    ) -> Result<Option<Value>, OutboxError> {
        let upload = call_multipart(&self.client, &self.api_base, &self.token, method, form);
        self.claimed(key, upload).await
    }

    /// Sends `body` with `method` once under the inbox claim `key`: `None` when an earlier
    /// try sent it already, else the Bot API's `result`. A failure gives the claim back.
    pub(super) async fn send_claimed(
        &self, key: &str, method: &str, body: &Value,
    ) -> Result<Option<Value>, OutboxError> {
        self.claimed(key, self.call(method, body)).await
    }

    /// Runs `send` once under the inbox claim `key`: `None` when an earlier try did it
    /// already, else its result. A failure gives the claim back.
    async fn claimed<F>(&self, key: &str, send: F) -> Result<Option<Value>, OutboxError>
    where
        F: Future<Output = Result<Value, ApiError>>,
    {
        let claim = self
            .inbox
            .claim(key, CHUNK_CLAIM_TTL, now_unix())
            .await
            .map_err(|err| OutboxError::Failed {
                message: format!("cannot claim reply chunk {key}"),
                source: Some(Box::new(err)),
            })?;
        if claim == Claim::Duplicate {
            tracing::info!(claim = key, "already sent");
            return Ok(None);
        }
        match send.await {
            Ok(result) => Ok(Some(result)),
            Err(err) => {
                // Give the claim back so the retry sends this chunk.
                if let Err(release) = self.inbox.release(key).await {
                    tracing::warn!(chunk = key, error = %release, "reply chunk claim not released");
                }
                Err(err.into())
            }
        }
    }
}

#[async_trait]
impl Outbox for TelegramSender {
    async fn typing(&self, chat: &ChatRef) -> Result<(), OutboxError> {
        self.send_typing(chat).await
    }

    async fn send(&self, reply: &OutboundReply) -> Result<(), OutboxError> {
        self.deliver(reply).await.map(|_| ())
    }

    async fn deliver(&self, reply: &OutboundReply) -> Result<Delivery, OutboxError> {
        let (text, directives) = strip_directives(&reply.text);
        if text.is_none() && reply.media.is_empty() {
            return Ok(Delivery::default());
        }
        let target = target(&reply.chat);
        let reply_to = directives
            .reply_to
            .as_deref()
            .and_then(telegram_message_id)
            .or_else(|| {
                directives
                    .reply_to_current
                    .then_some(reply.in_reply_to.as_deref())
                    .flatten()
                    .and_then(telegram_message_id)
            });
        let chunks = text
            .as_deref()
            .map(|text| chunk_text(text, MESSAGE_LIMIT))
            .unwrap_or_default();
        let last = chunks.len().saturating_sub(1);
        let mut delivery = Delivery::default();
        for (index, chunk) in chunks.iter().enumerate() {
            let mut body = json!({"chat_id": target.chat_id, "text": chunk});
            if let Some(thread) = target.thread_id {
                body["message_thread_id"] = thread.into();
            }
            if index == 0
                && let Some(message_id) = reply_to
            {
                // `reply_parameters` replaced the older `reply_to_message_id` in Bot API 7.0.
                // The message may be gone by now; the answer still goes out.
                body["reply_parameters"] =
                    json!({"message_id": message_id, "allow_sending_without_reply": true});
            }
            if index == last
                && let Some(code) = &reply.approval_code
            {
                body["reply_markup"] = approval_keyboard(code);
            }
            let key = format!("out:{CHANNEL_ID}:{}:{index}", reply.reply_id);
            let sent = self.send_claimed(&key, "sendMessage", &body).await?;
            if index == last {
                delivery.message_id = sent.and_then(|result| message_ref(&result, &target.chat_id));
            }
        }
        let mut refused = Vec::new();
        for (index, media) in reply.media.iter().enumerate() {
            let upload = match upload_of(media, directives.audio_as_voice) {
                Ok(upload) => upload,
                Err(reason) => {
                    refused.push(reason);
                    continue;
                }
            };
            let mut form = Form::new().text("chat_id", &chat_id_text(&target.chat_id));
            if let Some(thread) = target.thread_id {
                form = form.text("message_thread_id", &thread.to_string());
            }
            if chunks.is_empty()
                && index == 0
                && let Some(message_id) = reply_to
            {
                // A reply of files only answers with its first file.
                let reply = json!({"message_id": message_id, "allow_sending_without_reply": true});
                form = form.text("reply_parameters", &reply.to_string());
            }
            let form = form.file(upload.field, &media.name, &media.mime, &media.bytes);
            let key = format!("out:{CHANNEL_ID}:{}:media:{index}", reply.reply_id);
            let send = call_multipart(
                &self.client,
                &self.api_base,
                &self.token,
                upload.method,
                form,
            );
            let sent = self.claimed(&key, send).await?;
            if chunks.is_empty() {
                delivery.message_id = sent.and_then(|result| message_ref(&result, &target.chat_id));
            }
        }
        tracing::info!(
            reply_id = %reply.reply_id,
            chunks = chunks.len(),
            files = reply.media.len() - refused.len(),
            "telegram reply delivered"
        );
        if refused.is_empty() {
            Ok(delivery)
        } else {
            Err(OutboxError::Rejected {
                message: refused.join("; "),
            })
        }
    }

    fn message_actions(&self, _channel: &str) -> Vec<MessageActionKind> {
        self.enabled_actions()
    }

    async fn resolve_target(
        &self, channel: &str, target: &str, thread_id: Option<&str>,
    ) -> Result<ChatRef, OutboxError> {
        super::actions::resolve_target(channel, target, thread_id)
    }

    async fn act(&self, request: &ActionRequest) -> Result<Delivery, OutboxError> {
        self.carry_out(request).await
    }
}

/// The Bot API method and form field a file goes with.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Upload {
    pub(super) method: &'static str,
    pub(super) field: &'static str,
}

/// How `media` goes: an image as a photo (a document above [`MAX_PHOTO_BYTES`]), audio as a
/// voice note when asked (`as_voice` on the file or `[[audio_as_voice]]` on the reply) and in
/// a format voice notes take, else as audio, anything else as a document; refused above [`MAX_FILE_BYTES`].
pub(super) fn upload_of(media: &OutboundMedia, reply_as_voice: bool) -> Result<Upload, String> {
    let size = media.bytes.len();
    if size > MAX_FILE_BYTES {
        return Err(format!(
            "{:?} ({size} bytes) is larger than the {} MB a Telegram bot may send",
            media.name,
            MAX_FILE_BYTES / 1_000_000
        ));
    }
    let (method, field) = match media.kind {
        MediaKind::Image if size <= MAX_PHOTO_BYTES => ("sendPhoto", "photo"),
        MediaKind::Audio if (media.as_voice || reply_as_voice) && voice_format(&media.mime) => {
            ("sendVoice", "voice")
        }
        MediaKind::Audio => ("sendAudio", "audio"),
        _ => ("sendDocument", "document"),
    };
    Ok(Upload { method, field })
}

/// Whether `sendVoice` takes audio of type `mime` (OGG/Opus, MP3, M4A); other audio goes as
/// audio.
fn voice_format(mime: &str) -> bool {
    let essence = mime.split(';').next().unwrap_or_default().trim();
    VOICE_MIME_TYPES
        .iter()
        .any(|voice| essence.eq_ignore_ascii_case(voice))
}

/// The audio types a voice note may have.
const VOICE_MIME_TYPES: [&str; 6] = [
    "audio/ogg",
    "audio/opus",
    "audio/mpeg",
    "audio/mp4",
    "audio/m4a",
    "audio/x-m4a",
];

/// A chat id as a form field: the number, or `@username` as written.
pub(super) fn chat_id_text(chat_id: &Value) -> String {
    match chat_id {
        Value::String(name) => name.clone(),
        other => other.to_string(),
    }
}

/// `<chat id>:<message id>` of a sent message (the Bot API's `Message`), with `chat_id` when
/// the answer names no chat; `None` when it carries no message id.
pub(super) fn message_ref(result: &Value, chat_id: &Value) -> Option<String> {
    let chat = result
        .pointer("/chat/id")
        .and_then(Value::as_i64)
        .map_or_else(
            || match chat_id {
                Value::String(name) => name.clone(),
                other => other.to_string(),
            },
            |id| id.to_string(),
        );
    let message = result.get("message_id").and_then(Value::as_i64)?;
    Some(format!("{chat}:{message}"))
}

#[cfg(test)]
mod tests {
    use clawless_base::session_key::ChatType;

    use super::super::inbound::chat_id;
    use super::*;

    #[test]
    fn topic_chat_ids_round_trip_to_a_target() {
        let chat = ChatRef {
            channel: CHANNEL_ID.to_owned(),
            chat_id: chat_id(-100_123, Some(42), true),
            chat_type: ChatType::Group,
        };
        assert_eq!(chat.chat_id, "-100123:topic:42");
        let target = target(&chat);
        assert_eq!(target.chat_id, json!(-100_123));
        assert_eq!(target.thread_id, Some(42));
        assert_eq!(chat_id(-100_123, Some(42), false), "-100123");
    }

    fn media(kind: MediaKind, size: usize, as_voice: bool) -> OutboundMedia {
        OutboundMedia {
            kind,
            name: "f".to_owned(),
            mime: if kind == MediaKind::Audio {
                "audio/ogg; codecs=opus"
            } else {
                "application/octet-stream"
            }
            .to_owned(),
            bytes: vec![0; size],
            as_voice,
        }
    }

    #[test]
    fn files_pick_their_method_by_kind_voice_and_size() {
        let method = |media: &OutboundMedia, voice| upload_of(media, voice).map(|u| u.method);
        assert_eq!(
            method(&media(MediaKind::Image, 10, false), false),
            Ok("sendPhoto")
        );
        assert_eq!(
            method(&media(MediaKind::Image, MAX_PHOTO_BYTES + 1, false), false),
            Ok("sendDocument")
        );
        assert_eq!(
            method(&media(MediaKind::Audio, 10, true), false),
            Ok("sendVoice")
        );
        assert_eq!(
            method(&media(MediaKind::Audio, 10, false), true),
            Ok("sendVoice")
        );
        assert_eq!(
            method(&media(MediaKind::Audio, 10, false), false),
            Ok("sendAudio")
        );
        let mut wav = media(MediaKind::Audio, 10, true);
        wav.mime = "audio/wav".to_owned();
        assert_eq!(method(&wav, true), Ok("sendAudio"), "no voice note in WAV");
        assert_eq!(
            method(&media(MediaKind::Video, 10, false), false),
            Ok("sendDocument")
        );
        let too_big = method(
            &media(MediaKind::Document, MAX_FILE_BYTES + 1, false),
            false,
        );
        assert!(too_big.is_err_and(|reason| reason.contains("50 MB")));
    }

    #[test]
    fn message_ids_are_read_from_the_last_segment() {
        assert_eq!(telegram_message_id("4711"), Some(4711));
        assert_eq!(telegram_message_id("-100123:4711"), Some(4711));
        assert_eq!(telegram_message_id("callback:abc"), None);
    }
}
