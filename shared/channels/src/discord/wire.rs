//! Discord's side of the wire: the fields of an interaction this channel reads, Discord's
//! numbering of interaction, response, command and option types, and the shapes of its ids
//! (snowflakes, which carry their creation time) and interaction tokens.

use serde::Deserialize;
use serde_json::Value;

/// Discord's epoch (2015-01-01) in Unix milliseconds; snowflakes count from it.
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// Longest interaction token accepted (Discord's are a few hundred characters).
const MAX_TOKEN_CHARS: usize = 1_000;

/// Interaction types (Discord's numbering).
pub(super) const PING: u64 = 1;
pub(super) const APPLICATION_COMMAND: u64 = 2;
pub(super) const MESSAGE_COMPONENT: u64 = 3;
/// Interaction response types.
pub(super) const PONG: u64 = 1;
pub(super) const CHANNEL_MESSAGE_WITH_SOURCE: u64 = 4;
pub(super) const DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE: u64 = 5;
pub(super) const DEFERRED_UPDATE_MESSAGE: u64 = 6;
/// Command type of a slash command (others are context-menu commands).
pub(super) const CHAT_INPUT: u64 = 1;
/// Option type of a string.
pub(super) const STRING_OPTION: u64 = 3;
/// Option type of an attachment (its value is the id in `resolved.attachments`).
pub(super) const ATTACHMENT_OPTION: u64 = 11;
/// Message flag: only the invoking user sees it.
pub(super) const EPHEMERAL: u64 = 1 << 6;

/// A Discord id: 1–20 ASCII digits.
pub(super) fn is_snowflake(id: &str) -> bool {
    !id.is_empty() && id.len() <= 20 && id.bytes().all(|b| b.is_ascii_digit())
}

/// When the snowflake `id` was made, in Unix milliseconds.
pub(super) fn snowflake_created_ms(id: &str) -> Option<u64> {
    let id: u64 = id.parse().ok()?;
    Some((id >> 22) + DISCORD_EPOCH_MS)
}

/// An interaction token safe to put in a URL path: Discord's are URL-safe base64 with dots.
pub(super) fn is_token(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= MAX_TOKEN_CHARS
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The fields of an interaction this channel reads.
#[derive(Debug, Deserialize)]
pub(super) struct Interaction {
    pub(super) id: String,
    #[serde(rename = "type")]
    pub(super) kind: u64,
    #[serde(default)]
    pub(super) token: Option<String>,
    #[serde(default)]
    pub(super) data: Option<Value>,
    #[serde(default)]
    pub(super) guild_id: Option<String>,
    #[serde(default)]
    pub(super) channel_id: Option<String>,
    #[serde(default)]
    pub(super) channel: Option<Channel>,
    #[serde(default)]
    pub(super) member: Option<Member>,
    #[serde(default)]
    pub(super) user: Option<User>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Channel {
    pub(super) id: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct Member {
    #[serde(default)]
    pub(super) user: Option<User>,
}

#[derive(Debug, Deserialize)]
pub(super) struct User {
    pub(super) id: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct CommandData {
    pub(super) name: String,
    #[serde(rename = "type", default = "chat_input")]
    pub(super) kind: u64,
    #[serde(default)]
    pub(super) options: Vec<CommandOption>,
    #[serde(default)]
    pub(super) resolved: Option<Resolved>,
}

/// The objects a command's options name, by id.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Resolved {
    #[serde(default)]
    pub(super) attachments: std::collections::BTreeMap<String, Attachment>,
}

/// A file uploaded with a command (Discord's attachment object, the fields the download
/// needs).
#[derive(Debug, Deserialize)]
pub(super) struct Attachment {
    pub(super) url: String,
    #[serde(default)]
    pub(super) filename: Option<String>,
    #[serde(default)]
    pub(super) content_type: Option<String>,
    #[serde(default)]
    pub(super) size: Option<u64>,
}

fn chat_input() -> u64 {
    CHAT_INPUT
}

#[derive(Debug, Deserialize)]
pub(super) struct CommandOption {
    pub(super) name: String,
    #[serde(rename = "type")]
    pub(super) kind: u64,
    #[serde(default)]
    pub(super) value: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub(super) struct ComponentData {
    pub(super) custom_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snowflakes_carry_their_creation_time() {
        // 175928847299117063 is Discord's documented example: 2016-04-30 11:18:25.796 UTC.
        assert_eq!(
            snowflake_created_ms("175928847299117063"),
            Some(1_462_015_105_796)
        );
        assert_eq!(snowflake_created_ms("not a number"), None);
    }
}
