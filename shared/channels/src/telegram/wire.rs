//! The Bot API's JSON as this channel reads it: the parts of an `Update` the webhook
//! classifies, and the envelope every Bot API answer comes in. Unknown fields are allowed:
//! Telegram adds fields without notice.

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
