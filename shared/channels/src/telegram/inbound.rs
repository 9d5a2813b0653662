//! The Telegram webhook: the secret-token check, reading an `Update` and classifying it (a
//! message to answer, an approval button press, or something ignored), whether a group
//! message is addressed to the bot, and the chat ids of private chats, groups and forum topics.

use clawless_base::media::MediaKind;
use clawless_base::session_key::ChatType;
use clawless_core::turn::events::{ChatRef, InboundMessage};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::wire::{
    BotIdentity, CallbackQuery, Chat, Entity, FileRef, Message, ReplyTo, TOPIC_INFIX, Update,
    normalise_username, truncate,
};
use crate::media::{MediaSource, PendingMedia, placeholder_body};
use crate::webhook::{
    ChannelApproval, ChannelMessage, MAX_WEBHOOK_BODY_BYTES, PlatformChannel, PlatformReply,
    WebhookError, WebhookOutcome, WebhookRequest, approve_text, parse_approval_button,
};

/// Channel id of Telegram (route `/webhook/telegram`, `ChatRef.channel`).
pub const CHANNEL_ID: &str = "telegram";

/// Header in which Telegram repeats the webhook's secret token.
pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// The Telegram webhook channel.
#[derive(Clone)]
pub struct TelegramChannel {
    secret_token: String,
    bot: BotIdentity,
    require_mention: bool,
}

impl std::fmt::Debug for TelegramChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramChannel")
            .field("bot", &self.bot)
            .field("require_mention", &self.require_mention)
            .finish_non_exhaustive()
    }
}

impl TelegramChannel {
    /// A channel accepting calls that carry `secret_token`, for the bot `bot`. An empty secret
    /// token accepts nothing.
    pub fn new(secret_token: impl Into<String>, bot: BotIdentity, require_mention: bool) -> Self {
        let bot = BotIdentity {
            id: bot.id,
            username: bot.username.as_deref().and_then(normalise_username),
        };
        Self {
            secret_token: secret_token.into(),
            bot,
            require_mention,
        }
    }

    /// Whether ingress should skip group messages not addressed to the bot.
    pub fn require_mention(&self) -> bool {
        self.require_mention
    }

    fn check_secret(&self, headers: &reqwest::header::HeaderMap) -> Result<(), WebhookError> {
        let given = headers
            .get(SECRET_HEADER)
            .ok_or_else(|| WebhookError::Unauthorized("missing secret token".to_owned()))?;
        if self.secret_token.is_empty() || !constant_time_eq(&self.secret_token, given.as_bytes()) {
            return Err(WebhookError::Unauthorized(
                "secret token does not match".to_owned(),
            ));
        }
        Ok(())
    }

    fn classify(&self, update: Update) -> WebhookOutcome {
        let event_id = update.update_id.to_string();
        if let Some(message) = update.message {
            return self.classify_message(event_id, message);
        }
        if let Some(query) = update.callback_query {
            return classify_callback(event_id, query);
        }
        if update.edited_message.is_some() {
            return WebhookOutcome::Ignored("edited messages are not answered".to_owned());
        }
        let kind = update
            .rest
            .keys()
            .next()
            .map_or("empty", String::as_str)
            .chars()
            .take(64)
            .collect::<String>();
        WebhookOutcome::Ignored(format!("update type {kind:?} is not handled"))
    }

    fn classify_message(&self, event_id: String, message: Message) -> WebhookOutcome {
        let Some(chat) = chat_ref(
            &message.chat,
            message.message_thread_id,
            message.is_topic_message,
        ) else {
            return WebhookOutcome::Ignored(format!(
                "messages in {:?} chats are not handled",
                truncate(&message.chat.kind, 32)
            ));
        };
        let Some(from) = &message.from else {
            return WebhookOutcome::Ignored("message without a sender".to_owned());
        };
        if from.is_bot {
            return WebhookOutcome::Ignored("message from a bot".to_owned());
        }
        let media = pending_media(&message);
        let no_entities: &[Entity] = &[];
        let (text, entities) = match (&message.text, &message.caption) {
            (Some(text), _) if !text.trim().is_empty() => (text.clone(), &message.entities[..]),
            (None, Some(caption)) if !caption.trim().is_empty() => {
                (caption.clone(), &message.caption_entities[..])
            }
            // A voice note, a photo without caption: the placeholder starts the turn.
            _ => match placeholder_body(&media) {
                Some(placeholder) => (placeholder, no_entities),
                None => return WebhookOutcome::Ignored("message without text".to_owned()),
            },
        };
        let addressed_to_bot = chat.chat_type == ChatType::Direct
            || self.mentions_bot(&text, entities)
            || self.replies_to_bot(message.reply_to_message.as_deref());
        WebhookOutcome::Message(ChannelMessage {
            event_id,
            message: InboundMessage {
                // Message ids are unique per chat only; the chat makes them unique per channel.
                message_id: format!("{}:{}", message.chat.id, message.message_id),
                chat,
                sender_id: from.id.to_string(),
                text,
                sender_is_owner: false,
                attachments: Vec::new(),
            },
            addressed_to_bot,
            ack: PlatformReply::ok(),
            media,
        })
    }

    /// `@username` in the text or its entities, a `text_mention` of the bot, or a command
    /// written `/command@username`. A bare `/command` is not counted: in a group with several
    /// bots it is not clearly for this one.
    fn mentions_bot(&self, text: &str, entities: &[Entity]) -> bool {
        let username = self.bot.username.as_deref();
        let by_entity = entities.iter().any(|entity| match entity.kind.as_str() {
            "text_mention" => entity
                .user
                .as_ref()
                .is_some_and(|user| Some(user.id) == self.bot.id),
            "mention" => username.is_some_and(|name| {
                utf16_slice(text, entity.offset, entity.length).is_some_and(|mention| {
                    mention
                        .strip_prefix('@')
                        .is_some_and(|m| m.eq_ignore_ascii_case(name))
                })
            }),
            "bot_command" => username.is_some_and(|name| {
                utf16_slice(text, entity.offset, entity.length).is_some_and(|command| {
                    command
                        .split_once('@')
                        .is_some_and(|(_, target)| target.eq_ignore_ascii_case(name))
                })
            }),
            _ => false,
        });
        by_entity || username.is_some_and(|name| text_mentions(text, name))
    }

    fn replies_to_bot(&self, reply_to: Option<&ReplyTo>) -> bool {
        let Some(reply_to) = reply_to else {
            return false;
        };
        // In a forum topic every message "replies" to the topic's creation message; that is no
        // reply to the bot even when the bot opened the topic.
        if reply_to.forum_topic_created.is_some() {
            return false;
        }
        let Some(author) = &reply_to.from else {
            return false;
        };
        author.is_bot
            && (self.bot.id.is_some_and(|id| id == author.id)
                || self.bot.username.as_deref().is_some_and(|name| {
                    author
                        .username
                        .as_deref()
                        .is_some_and(|u| u.eq_ignore_ascii_case(name))
                }))
    }
}

/// The files of `message`: the largest size of a photo, and each of voice, audio, video,
/// video note, document and sticker (the Bot API sends at most one of them).
fn pending_media(message: &Message) -> Vec<PendingMedia> {
    let pending = |file: &FileRef, kind: MediaKind, mime: Option<&str>| PendingMedia {
        kind,
        mime: file.mime_type.clone().or(mime.map(str::to_owned)),
        name: file.file_name.clone(),
        size: file.file_size,
        source: MediaSource::TelegramFile(file.file_id.clone()),
    };
    let mut media = Vec::new();
    if let Some(largest) = message
        .photo
        .iter()
        .max_by_key(|size| (size.width * size.height, size.file_size.unwrap_or(0)))
    {
        media.push(pending(largest, MediaKind::Image, Some("image/jpeg")));
    }
    let files = [
        (&message.voice, MediaKind::Audio, Some("audio/ogg")),
        (&message.audio, MediaKind::Audio, None),
        (&message.video, MediaKind::Video, Some("video/mp4")),
        (&message.video_note, MediaKind::Video, Some("video/mp4")),
        (&message.document, MediaKind::Document, None),
    ];
    for (file, kind, mime) in files {
        if let Some(file) = file {
            media.push(pending(file, kind, mime));
        }
    }
    if let Some(sticker) = &message.sticker {
        let mime = if sticker.is_animated {
            "application/x-tgsticker"
        } else if sticker.is_video {
            "video/webm"
        } else {
            "image/webp"
        };
        media.push(pending(sticker, MediaKind::Sticker, Some(mime)));
    }
    media
}

impl PlatformChannel for TelegramChannel {
    fn id(&self) -> &'static str {
        CHANNEL_ID
    }

    fn handle(&self, request: &WebhookRequest<'_>) -> Result<WebhookOutcome, WebhookError> {
        self.check_secret(request.headers)?;
        if request.body.len() > MAX_WEBHOOK_BODY_BYTES {
            return Err(WebhookError::TooLarge(request.body.len()));
        }
        let update = parse_update(request.body)?;
        Ok(self.classify(update))
    }
}

fn classify_callback(event_id: String, query: CallbackQuery) -> WebhookOutcome {
    let Some((code, decision)) = query.data.as_deref().and_then(parse_approval_button) else {
        return WebhookOutcome::Ignored("button press that is not an approval".to_owned());
    };
    let Some(message) = query.message else {
        return WebhookOutcome::Ignored("button press without its message".to_owned());
    };
    let Some(chat) = chat_ref(
        &message.chat,
        message.message_thread_id,
        message.is_topic_message,
    ) else {
        return WebhookOutcome::Ignored("button press in an unhandled chat".to_owned());
    };
    WebhookOutcome::Approval(ChannelApproval {
        event_id,
        message: InboundMessage {
            message_id: format!("callback:{}", truncate(&query.id, 128)),
            chat,
            sender_id: query.from.id.to_string(),
            text: approve_text(&code, decision),
            sender_is_owner: false,
            attachments: Vec::new(),
        },
        code,
        decision,
        // Telegram takes a Bot API call as the webhook's answer: this stops the button's
        // spinner without a call of our own. `TelegramSender::answer_callback` can add a text.
        ack: PlatformReply::json(json!({
            "method": "answerCallbackQuery",
            "callback_query_id": query.id,
        })),
    })
}

/// The chat a message (or the message under a button) is in, as a turn sees it; `None` in a
/// kind of chat that is not handled (e.g. a channel).
fn chat_ref(chat: &Chat, thread: Option<i64>, is_topic_message: bool) -> Option<ChatRef> {
    Some(ChatRef {
        channel: CHANNEL_ID.to_owned(),
        chat_id: chat_id(chat.id, thread, is_topic_message),
        chat_type: chat_type(&chat.kind)?,
    })
}

fn chat_type(kind: &str) -> Option<ChatType> {
    match kind {
        "private" => Some(ChatType::Direct),
        "group" | "supergroup" => Some(ChatType::Group),
        _ => None,
    }
}

pub(super) fn chat_id(chat: i64, thread: Option<i64>, is_topic_message: bool) -> String {
    match thread {
        Some(thread) if is_topic_message => format!("{chat}{TOPIC_INFIX}{thread}"),
        _ => chat.to_string(),
    }
}

/// Compares a secret without leaking, through timing, how much of it matched: both sides are
/// hashed first, so neither their lengths nor their common prefix change the work done.
fn constant_time_eq(expected: &str, given: &[u8]) -> bool {
    let expected = Sha256::digest(expected.as_bytes());
    let given = Sha256::digest(given);
    subtle::ConstantTimeEq::ct_eq(expected.as_slice(), given.as_slice()).into()
}

/// The text at a Telegram entity's UTF-16 offset and length (`None` when out of range or cut
/// through a surrogate pair).
fn utf16_slice(text: &str, offset: usize, length: usize) -> Option<String> {
    let units: Vec<u16> = text.encode_utf16().collect();
    let end = offset.checked_add(length)?;
    String::from_utf16(units.get(offset..end)?).ok()
}

/// `@name` in plain text, not as part of a longer word or username.
fn text_mentions(text: &str, name: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    let needle = format!("@{name}");
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    lower.match_indices(&needle).any(|(at, _)| {
        let before = lower[..at].chars().next_back();
        let after = lower[at + needle.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

fn parse_update(body: &[u8]) -> Result<Update, WebhookError> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let update: Update = serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if path == "." || path.is_empty() {
            WebhookError::BadRequest(format!("invalid update: {inner}"))
        } else {
            WebhookError::BadRequest(format!("invalid update at {path}: {inner}"))
        }
    })?;
    deserializer
        .end()
        .map_err(|err| WebhookError::BadRequest(format!("invalid update: {err}")))?;
    Ok(update)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entity_offsets_count_utf16_units() {
        let text = "😀 @Bot hi";
        // The emoji is two UTF-16 units, so the mention starts at 3.
        assert_eq!(utf16_slice(text, 3, 4).as_deref(), Some("@Bot"));
        assert_eq!(utf16_slice(text, 1, 2), None, "cut through a surrogate");
        assert_eq!(utf16_slice(text, 100, 4), None);
        assert_eq!(utf16_slice(text, usize::MAX, 2), None);
    }

    #[test]
    fn plain_text_mentions_need_word_boundaries() {
        assert!(text_mentions("hey @ClawBot, hi", "clawbot"));
        assert!(text_mentions("@clawbot", "clawbot"));
        assert!(!text_mentions("hey @clawbot2", "clawbot"));
        assert!(!text_mentions("mail a@clawbot", "clawbot"));
    }

    #[test]
    fn secrets_compare_equal_only_when_identical() {
        assert!(constant_time_eq("abc", b"abc"));
        assert!(!constant_time_eq("abc", b"abd"));
        assert!(!constant_time_eq("abc", b"abcd"));
        assert!(!constant_time_eq("abc", b""));
    }
}
