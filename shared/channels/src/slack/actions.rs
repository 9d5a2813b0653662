//! The `message` tool on Slack: which actions the bot offers (`channels.slack.actions`),
//! reading a model's target (`channel:<id>`, `user:<id>`, a raw conversation id, a thread)
//! into a chat, and carrying out `react` (`reactions.add`/`reactions.remove`), `edit`
//! (`chat.update`) and `delete` (`chat.delete`). Slack has no polls for bots. A `send` with
//! files goes through the external upload flow (`files.getUploadURLExternal`, the upload,
//! `files.completeUploadExternal` into the channel or thread), the text as the first file's
//! `initial_comment`; each file claimed like a reply's.
//!
//! A user target becomes their DM with the bot through `conversations.open` (scope `im:write`),
//! so the chat is the same `D…` conversation their own messages arrive in.

use clawless_base::session_key::ChatType;
use clawless_core::outbox::{
    ActionRequest, Delivery, MediaSend, MessageAction, MessageActionKind, Outbox, OutboxError,
    unsupported_action,
};
use clawless_core::turn::events::ChatRef;
use serde_json::{Value, json};

use super::inbound::{CHANNEL_ID, THREAD_MARKER};
use super::sender::{SlackSender, split_chat_id};
use super::wire::{is_slack_id, valid_token};

/// What the model is told when a target cannot be read.
const TARGET_HINT: &str = "use channel:<id> (e.g. channel:C0123ABCD), user:<id> for a direct \
                           message (e.g. user:U0123ABCD), or a raw C…/G…/D… conversation id; put \
                           a thread's ts in threadId";

/// Unicode emoji Slack reactions take by name (Slack names reactions, never characters).
const EMOJI_NAMES: &[(&str, &str)] = &[
    ("👍", "+1"),
    ("👎", "-1"),
    ("❤", "heart"),
    ("✅", "white_check_mark"),
    ("✔", "heavy_check_mark"),
    ("❌", "x"),
    ("👀", "eyes"),
    ("🎉", "tada"),
    ("🔥", "fire"),
    ("🙏", "pray"),
    ("😂", "joy"),
    ("😄", "smile"),
    ("🙂", "slightly_smiling_face"),
    ("😢", "cry"),
    ("😮", "open_mouth"),
    ("🤔", "thinking_face"),
    ("👏", "clap"),
    ("👋", "wave"),
    ("🚀", "rocket"),
    ("💯", "100"),
    ("⚠", "warning"),
    ("⭐", "star"),
    ("👌", "ok_hand"),
    ("🙌", "raised_hands"),
    ("💪", "muscle"),
    ("⏳", "hourglass_flowing_sand"),
];

impl SlackSender {
    /// The actions whose gate is on, in the order the tool lists them.
    pub(super) fn enabled_actions(&self) -> Vec<MessageActionKind> {
        let actions = self.actions();
        let gates = [
            (MessageActionKind::React, actions.reactions),
            (MessageActionKind::Edit, actions.messages),
            (MessageActionKind::Delete, actions.messages),
        ];
        gates
            .into_iter()
            .filter_map(|(kind, on)| on.then_some(kind))
            .collect()
    }

    /// Carries out one `message` action, refusing one whose gate is off (and every poll).
    pub(super) async fn carry_out(&self, request: &ActionRequest) -> Result<Delivery, OutboxError> {
        if let MessageAction::Send(send) = &request.action {
            return self.send_media(request, send).await;
        }
        let kind = request.action.kind();
        if !self.enabled_actions().contains(&kind) {
            return Err(unsupported_action(kind, CHANNEL_ID));
        }
        let (channel, ts) = match &request.action {
            MessageAction::React { message_id, .. }
            | MessageAction::Edit { message_id, .. }
            | MessageAction::Delete { message_id } => message_in(&request.chat, message_id)?,
            MessageAction::Poll(_) | MessageAction::Send(_) => {
                return Err(unsupported_action(kind, CHANNEL_ID));
            }
        };
        match &request.action {
            MessageAction::React { emoji, remove, .. } => {
                let name = reaction_name(emoji)?;
                let body = json!({"channel": channel, "timestamp": ts, "name": name});
                if *remove {
                    self.call("reactions.remove", &body, &["no_reaction"])
                        .await?;
                } else {
                    self.call("reactions.add", &body, &["already_reacted"])
                        .await?;
                }
            }
            MessageAction::Edit { text, .. } => {
                let body = json!({"channel": channel, "ts": ts, "text": text});
                self.call("chat.update", &body, &[]).await?;
            }
            MessageAction::Delete { .. } => {
                let body = json!({"channel": channel, "ts": ts});
                // A retried delete finds the message gone: done all the same.
                self.call("chat.delete", &body, &["message_not_found"])
                    .await?;
            }
            MessageAction::Poll(_) | MessageAction::Send(_) => {
                return Err(unsupported_action(kind, CHANNEL_ID));
            }
        }
        Ok(Delivery {
            message_id: Some(format!("{channel}:{ts}")),
        })
    }

    /// Uploads the files into the chat (its thread when it names one), the text as the first
    /// file's comment, each claimed as a reply's file is (`out:slack:<id>:media:<n>`). A text
    /// longer than a message goes the reply's way (the text, then the files).
    async fn send_media(
        &self, request: &ActionRequest, send: &MediaSend,
    ) -> Result<Delivery, OutboxError> {
        let (text, _directives) = crate::directives::strip_directives(&send.text);
        let comment = text.unwrap_or_default();
        if comment.chars().count() > super::sender::MAX_MESSAGE_CHARS {
            return self
                .deliver(&send.as_reply(&request.action_id, &request.chat))
                .await;
        }
        let (channel, thread_ts) = split_chat_id(&request.chat.chat_id);
        if !is_slack_id(channel) || thread_ts.is_some_and(|thread| !valid_token(thread)) {
            return Err(OutboxError::Rejected {
                message: format!("{:?} is not a Slack chat id", request.chat.chat_id),
            });
        }
        for (index, media) in send.media.iter().enumerate() {
            let key = format!("out:{CHANNEL_ID}:{}:media:{index}", request.action_id);
            let comment = (index == 0).then_some(comment.as_str());
            self.upload_claimed(&key, channel, thread_ts, media, comment)
                .await?;
        }
        tracing::info!(action_id = %request.action_id, files = send.media.len(), "Slack send with files delivered");
        // Slack's upload answers name the file, not a message: there is no message id to act on.
        Ok(Delivery::default())
    }

    /// The chat a `message` target names on Slack (see [`TARGET_HINT`]), in thread
    /// `thread_id` when given.
    pub(super) async fn resolve(
        &self, channel: &str, raw: &str, thread_id: Option<&str>,
    ) -> Result<ChatRef, OutboxError> {
        let unknown = || OutboxError::Rejected {
            message: format!("Unknown target \"{raw}\" for {channel}. Hint: {TARGET_HINT}."),
        };
        let trimmed = raw.trim();
        let bare = trimmed.strip_prefix("slack:").unwrap_or(trimmed);
        // A chat id copied from the conversation may carry its thread already.
        let (bare, inline_thread) = split_chat_id(bare);
        let conversation = match Address::parse(bare) {
            Some(Address::Conversation(id)) => id.to_owned(),
            Some(Address::User(user)) => self.open_dm(user).await?,
            None => return Err(unknown()),
        };
        let chat_type = if conversation.starts_with('D') {
            ChatType::Direct
        } else {
            ChatType::Group
        };
        let thread = thread_id
            .map(str::trim)
            .filter(|thread| !thread.is_empty())
            .or(inline_thread);
        let chat_id = match thread {
            None => conversation,
            Some(thread) if valid_token(thread) && thread.contains('.') => {
                format!("{conversation}{THREAD_MARKER}{thread}")
            }
            Some(thread) => {
                return Err(OutboxError::Rejected {
                    message: format!(
                        "threadId \"{thread}\" is not a Slack thread ts (e.g. 1700000000.000100)"
                    ),
                });
            }
        };
        Ok(ChatRef {
            channel: CHANNEL_ID.to_owned(),
            chat_id,
            chat_type,
        })
    }

    /// The DM conversation with `user` (`conversations.open`, which returns the existing one).
    async fn open_dm(&self, user: &str) -> Result<String, OutboxError> {
        let answer = self
            .call("conversations.open", &json!({"users": user}), &[])
            .await
            .map_err(|err| match err {
                OutboxError::Rejected { message } if message.contains("missing_scope") => {
                    OutboxError::Rejected {
                        message: format!(
                            "{message} (a direct message needs the bot token's im:write scope)"
                        ),
                    }
                }
                other => other,
            })?;
        answer
            .pointer("/channel/id")
            .and_then(Value::as_str)
            .filter(|id| is_slack_id(id))
            .map(str::to_owned)
            .ok_or_else(|| OutboxError::Failed {
                message: format!("conversations.open named no DM channel for {user}"),
                source: None,
            })
    }
}

/// Who or where a Slack target points.
enum Address<'a> {
    /// A channel, private channel or DM id.
    Conversation(&'a str),
    /// A user (`U…`/`W…`), to be reached in their DM.
    User(&'a str),
}

impl<'a> Address<'a> {
    fn parse(target: &'a str) -> Option<Self> {
        if let Some(id) = target.strip_prefix("channel:") {
            return is_id(id, &['C', 'G', 'D']).then_some(Self::Conversation(id));
        }
        let user = target.strip_prefix("user:").or_else(|| {
            // `<@U123>` or `<@U123|name>`, as Slack writes a mention.
            let inner = target.strip_prefix("<@")?.strip_suffix('>')?;
            Some(inner.split('|').next().unwrap_or(inner))
        });
        if let Some(user) = user {
            return is_id(user, &['U', 'W']).then_some(Self::User(user));
        }
        if is_id(target, &['C', 'G', 'D']) {
            Some(Self::Conversation(target))
        } else if is_id(target, &['U', 'W']) {
            Some(Self::User(target))
        } else {
            None
        }
    }
}

/// A Slack id starting with one of `prefixes`: upper-case letters and digits.
fn is_id(id: &str, prefixes: &[char]) -> bool {
    id.len() >= 2
        && is_slack_id(id)
        && id.starts_with(prefixes)
        && id
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// The conversation and ts a message id names: `<channel>:<ts>` (as sends and inbound
/// messages report it; that channel wins over the target) or a bare ts in `chat`.
fn message_in<'a>(
    chat: &'a ChatRef, message_id: &'a str,
) -> Result<(&'a str, &'a str), OutboxError> {
    let message_id = message_id.trim();
    let (channel, ts) = match message_id.split_once(':') {
        Some((channel, ts)) => (channel, ts),
        None => (split_chat_id(&chat.chat_id).0, message_id),
    };
    if is_slack_id(channel) && valid_token(ts) && ts.contains('.') {
        Ok((channel, ts))
    } else {
        Err(OutboxError::Rejected {
            message: format!(
                "{message_id:?} is not a Slack message id: expected <channel>:<ts> as a send or \
                 an inbound message reported it (e.g. C0123ABCD:1700000000.000100), or the ts"
            ),
        })
    }
}

/// The name Slack takes for `emoji`: `thumbsup`, `:thumbsup:` or `thumbsup::skin-tone-2`
/// as written, a common unicode emoji by its Slack name; anything else is refused.
fn reaction_name(emoji: &str) -> Result<String, OutboxError> {
    let trimmed = emoji.trim();
    // Emoji presentation selectors and skin-tone modifiers are not part of the name.
    let plain: String = trimmed
        .chars()
        .filter(|c| *c != '\u{fe0f}' && !('\u{1f3fb}'..='\u{1f3ff}').contains(c))
        .collect();
    if let Some((_, name)) = EMOJI_NAMES.iter().find(|(glyph, _)| *glyph == plain) {
        return Ok((*name).to_owned());
    }
    let name = trimmed.trim_matches(':').to_ascii_lowercase();
    let named = !name.is_empty()
        && name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+' | '\'' | ':'));
    if named {
        Ok(name)
    } else {
        Err(OutboxError::Rejected {
            message: format!(
                "Slack reactions take an emoji name such as thumbsup, white_check_mark or \
                 :tada:, and {trimmed:?} has no name known here; give its Slack name instead"
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reactions_are_named_as_slack_names_them() {
        assert_eq!(reaction_name(":tada:").unwrap(), "tada");
        assert_eq!(reaction_name("Thumbsup").unwrap(), "thumbsup");
        assert_eq!(
            reaction_name("thumbsup::skin-tone-2").unwrap(),
            "thumbsup::skin-tone-2"
        );
        assert_eq!(reaction_name("👍").unwrap(), "+1");
        assert_eq!(reaction_name("👍🏽").unwrap(), "+1");
        assert_eq!(reaction_name("❤️").unwrap(), "heart");
        for junk in ["", "::", "🦩", "thumbs up", "<script>"] {
            assert!(
                matches!(reaction_name(junk), Err(OutboxError::Rejected { .. })),
                "{junk:?}"
            );
        }
    }

    #[test]
    fn targets_are_read_in_slacks_formats() {
        assert!(matches!(
            Address::parse("channel:C0123"),
            Some(Address::Conversation("C0123"))
        ));
        assert!(matches!(
            Address::parse("G77"),
            Some(Address::Conversation("G77"))
        ));
        assert!(matches!(
            Address::parse("user:U9"),
            Some(Address::User("U9"))
        ));
        assert!(matches!(
            Address::parse("<@W42|ann>"),
            Some(Address::User("W42"))
        ));
        for junk in [
            "",
            "#general",
            "channel:U1",
            "user:C1",
            "c0123",
            "channel:",
            "U",
        ] {
            assert!(Address::parse(junk).is_none(), "{junk:?}");
        }
    }
}
