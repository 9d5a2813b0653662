//! Slack's side of the wire: the parts of an Events API envelope, a `message`/`app_mention`
//! event and a `block_actions` interaction this channel reads, and the shapes of Slack ids and
//! timestamps.

use serde::Deserialize;
use serde_json::Value;

/// Slack ids (users, channels, teams) are short upper-case alphanumerics.
pub(super) fn is_slack_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 32 && id.chars().all(|c| c.is_ascii_alphanumeric())
}

/// The outer Events API body.
#[derive(Debug, Deserialize)]
pub(super) struct Envelope {
    #[serde(rename = "type")]
    pub(super) kind: String,
    #[serde(default)]
    pub(super) challenge: Option<String>,
    #[serde(default)]
    pub(super) event_id: Option<String>,
    /// Kept loose: only `message` and `app_mention` are read further, and other event types
    /// have other shapes (a `user` object, say) that must not turn into a 400.
    #[serde(default)]
    pub(super) event: Option<Value>,
    #[serde(default)]
    pub(super) authorizations: Option<Vec<Value>>,
}

/// A `message` or `app_mention` event.
#[derive(Debug, Deserialize)]
pub(super) struct MessageEvent {
    #[serde(default)]
    pub(super) subtype: Option<String>,
    #[serde(default)]
    pub(super) user: Option<String>,
    #[serde(default)]
    pub(super) bot_id: Option<String>,
    #[serde(default)]
    pub(super) text: Option<String>,
    #[serde(default)]
    pub(super) ts: Option<String>,
    #[serde(default)]
    pub(super) thread_ts: Option<String>,
    #[serde(default)]
    pub(super) channel: Option<String>,
    #[serde(default)]
    pub(super) channel_type: Option<String>,
    /// Files shared with the message (subtype `file_share`).
    #[serde(default)]
    pub(super) files: Vec<SharedFile>,
}

/// A file on a message event (the parts of Slack's file object the download needs).
#[derive(Debug, Deserialize)]
pub(super) struct SharedFile {
    #[serde(default)]
    pub(super) id: Option<String>,
    #[serde(default)]
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) mimetype: Option<String>,
    #[serde(default)]
    pub(super) size: Option<u64>,
    #[serde(default)]
    pub(super) url_private_download: Option<String>,
    #[serde(default)]
    pub(super) url_private: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Interaction {
    #[serde(rename = "type")]
    pub(super) kind: String,
    #[serde(default)]
    pub(super) user: Option<IdOnly>,
    #[serde(default)]
    pub(super) channel: Option<IdOnly>,
    #[serde(default)]
    pub(super) container: Option<Container>,
    #[serde(default)]
    pub(super) message: Option<InteractionMessage>,
    #[serde(default)]
    pub(super) actions: Vec<Action>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct IdOnly {
    #[serde(default)]
    pub(super) id: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Container {
    #[serde(default)]
    pub(super) message_ts: Option<String>,
    #[serde(default)]
    pub(super) thread_ts: Option<String>,
    #[serde(default)]
    pub(super) channel_id: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct InteractionMessage {
    #[serde(default)]
    pub(super) ts: Option<String>,
    #[serde(default)]
    pub(super) thread_ts: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Action {
    #[serde(default)]
    pub(super) value: Option<String>,
    #[serde(default)]
    pub(super) action_ts: Option<String>,
}

/// Ids and timestamps Slack sends: short, printable, no spaces (they end up in keys).
pub(super) fn valid_token(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= 64
        && token
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}
