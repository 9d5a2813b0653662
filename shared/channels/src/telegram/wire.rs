//! The Bot API's JSON as this channel reads it (the parts of an `Update` the webhook
//! classifies, and the envelope every Bot API answer comes in; unknown fields are allowed, as
//! Telegram adds fields without notice), and the small facts every layer spells the same way:
//! the bot's identity, usernames, forum-topic chat ids and truncation.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

#[derive(Debug, Deserialize)]
pub(super) struct Update {
    pub(super) update_id: i64,
    pub(super) message: Option<Message>,
    pub(super) edited_message: Option<IgnoredAny>,
    pub(super) callback_query: Option<CallbackQuery>,
    /// The other update types, named in the log.
    #[serde(flatten)]
    pub(super) rest: std::collections::BTreeMap<String, IgnoredAny>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Message {
    pub(super) message_id: i64,
    pub(super) from: Option<User>,
    pub(super) chat: Chat,
    pub(super) message_thread_id: Option<i64>,
    #[serde(default)]
    pub(super) is_topic_message: bool,
    pub(super) text: Option<String>,
    #[serde(default)]
    pub(super) entities: Vec<Entity>,
    pub(super) caption: Option<String>,
    #[serde(default)]
    pub(super) caption_entities: Vec<Entity>,
    pub(super) reply_to_message: Option<Box<ReplyTo>>,
    /// A photo in several sizes, smallest first.
    #[serde(default)]
    pub(super) photo: Vec<FileRef>,
    pub(super) voice: Option<FileRef>,
    pub(super) audio: Option<FileRef>,
    pub(super) video: Option<FileRef>,
    pub(super) video_note: Option<FileRef>,
    pub(super) document: Option<FileRef>,
    pub(super) sticker: Option<FileRef>,
}

/// A file a message carries (`PhotoSize`, `Voice`, `Document`, …: the fields they share).
#[derive(Debug, Deserialize)]
pub(super) struct FileRef {
    pub(super) file_id: String,
    pub(super) file_size: Option<u64>,
    pub(super) mime_type: Option<String>,
    pub(super) file_name: Option<String>,
    /// Photos only: the size's width and height.
    #[serde(default)]
    pub(super) width: u64,
    #[serde(default)]
    pub(super) height: u64,
    /// Stickers only.
    #[serde(default)]
    pub(super) is_animated: bool,
    #[serde(default)]
    pub(super) is_video: bool,
}

#[derive(Debug, Deserialize)]
pub(super) struct ReplyTo {
    pub(super) from: Option<User>,
    pub(super) forum_topic_created: Option<IgnoredAny>,
}

#[derive(Debug, Deserialize)]
pub(super) struct User {
    pub(super) id: i64,
    #[serde(default)]
    pub(super) is_bot: bool,
    pub(super) username: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Chat {
    pub(super) id: i64,
    #[serde(rename = "type")]
    pub(super) kind: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct Entity {
    #[serde(rename = "type")]
    pub(super) kind: String,
    pub(super) offset: usize,
    pub(super) length: usize,
    pub(super) user: Option<User>,
}

#[derive(Debug, Deserialize)]
pub(super) struct CallbackQuery {
    pub(super) id: String,
    pub(super) from: User,
    pub(super) message: Option<CallbackMessage>,
    pub(super) data: Option<String>,
}

/// The message a button sits on (possibly "inaccessible": chat and id only).
#[derive(Debug, Deserialize)]
pub(super) struct CallbackMessage {
    pub(super) chat: Chat,
    pub(super) message_thread_id: Option<i64>,
    #[serde(default)]
    pub(super) is_topic_message: bool,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct ApiAnswer {
    #[serde(default)]
    pub(super) ok: bool,
    pub(super) description: Option<String>,
    pub(super) parameters: Option<ApiParameters>,
    #[serde(default)]
    pub(super) result: Value,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct ApiParameters {
    pub(super) retry_after: Option<u64>,
}

/// Infix of a forum topic's chat id: `<chat id>:topic:<thread id>`.
pub(super) const TOPIC_INFIX: &str = ":topic:";

/// Who the bot is, to tell which group messages are addressed to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BotIdentity {
    /// The bot's user id (the number before the `:` of its token).
    pub id: Option<i64>,
    /// The bot's username, lowercase, without `@`.
    pub username: Option<String>,
}

/// `@Name` or `Name` as lowercase `name`, or `None` when it is not a Telegram username.
pub(super) fn normalise_username(name: &str) -> Option<String> {
    let name = name.trim();
    let name = name.strip_prefix('@').unwrap_or(name);
    let valid = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    valid.then(|| name.to_ascii_lowercase())
}

/// The first `max_chars` characters of `text`.
pub(super) fn truncate(text: &str, max_chars: usize) -> String {
    text.chars().take(max_chars).collect()
}
