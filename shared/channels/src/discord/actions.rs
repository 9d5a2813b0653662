//! The `message` tool on Discord: which actions the bot offers (`channels.discord.actions`;
//! none without a bot token), reading a model's target (`channel:<id>`, `user:<id>`, `<@id>`,
//! a raw channel id, a thread) into a chat, and carrying out `react`
//! (`PUT`/`DELETE /channels/{c}/messages/{m}/reactions/{emoji}/@me`), `edit` (`PATCH`),
//! `delete` (`DELETE`), `poll` (a message with a `poll`, claimed once in the inbox and sent
//! with an enforced `nonce`) and a `send` with files (one multipart message a file, the text
//! as the first one's `content`; each claimed like a reply's file, with an enforced `nonce`).

use clawless_base::session_key::ChatType;
use clawless_core::outbox::{
    ActionRequest, Delivery, MediaSend, MessageAction, MessageActionKind, Outbox, OutboxError,
    PollRequest, unsupported_action,
};
use clawless_core::turn::events::ChatRef;
use serde_json::{Value, json};

use super::api::BotRequest;
use super::inbound::CHANNEL_ID;
use super::sender::{
    DiscordSender, MAX_FILE_BYTES, file_form, interaction_of, message_id_of, nonce,
};
use super::wire::is_snowflake;

/// What the model is told when a target cannot be read.
const TARGET_HINT: &str = "use channel:<id> (e.g. channel:1234567890123456789), user:<id> or \
                           <@id> for a direct message, or a raw numeric channel id; put a \
                           thread's id in threadId";

/// Discord's error code for a message that does not exist (a retried delete).
const UNKNOWN_MESSAGE: u64 = 10_008;

/// How long a poll stays open unless the model says otherwise, in hours (Discord's default).
const DEFAULT_POLL_HOURS: u32 = 24;
/// The longest poll Discord takes: 32 days.
const MAX_POLL_HOURS: u32 = 32 * 24;

impl DiscordSender {
    /// The actions whose gate is on, in the order the tool lists them; none without a bot
    /// token, since every one of them needs it.
    pub(super) fn enabled_actions(&self) -> Vec<MessageActionKind> {
        if self.bot.is_none() {
            return Vec::new();
        }
        let gates = [
            (MessageActionKind::React, self.actions.reactions),
            (MessageActionKind::Edit, self.actions.messages),
            (MessageActionKind::Delete, self.actions.messages),
            (MessageActionKind::Poll, self.actions.polls),
        ];
        gates
            .into_iter()
            .filter_map(|(kind, on)| on.then_some(kind))
            .collect()
    }

    /// Carries out one `message` action, refusing one whose gate is off.
    pub(super) async fn carry_out(&self, request: &ActionRequest) -> Result<Delivery, OutboxError> {
        if let MessageAction::Send(send) = &request.action {
            return self.send_media(request, send).await;
        }
        let kind = request.action.kind();
        let gated_off = match kind {
            MessageActionKind::React => !self.actions.reactions,
            MessageActionKind::Edit | MessageActionKind::Delete => !self.actions.messages,
            MessageActionKind::Poll => !self.actions.polls,
            MessageActionKind::Send => true,
        };
        if gated_off {
            return Err(unsupported_action(kind, CHANNEL_ID));
        }
        let bot = self.bot(&format!("The {} action", kind.name()))?;
        let (channel_id, message_id, body, method, what, tolerated): (_, _, _, _, _, &[u64]) =
            match &request.action {
                MessageAction::Poll(poll) => return self.post_poll(request, poll).await,
                MessageAction::Send(send) => return self.send_media(request, send).await,
                MessageAction::React {
                    message_id,
                    emoji,
                    remove,
                } => {
                    let (channel_id, message_id) = message_in(&request.chat, message_id)?;
                    let emoji = reaction_path(emoji)?;
                    let method = if *remove {
                        reqwest::Method::DELETE
                    } else {
                        reqwest::Method::PUT
                    };
                    let path = format!(
                        "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me"
                    );
                    (
                        channel_id,
                        message_id,
                        None,
                        method,
                        ("reaction", path),
                        &[],
                    )
                }
                MessageAction::Edit { message_id, text } => {
                    let (channel_id, message_id) = message_in(&request.chat, message_id)?;
                    if text.chars().count() > super::MESSAGE_LIMIT {
                        return Err(OutboxError::Rejected {
                            message: format!(
                                "a Discord message holds at most {} characters; the new text \
                                 has {}",
                                super::MESSAGE_LIMIT,
                                text.chars().count()
                            ),
                        });
                    }
                    let body = json!({"content": text, "allowed_mentions": {"parse": []}});
                    let path = format!("/channels/{channel_id}/messages/{message_id}");
                    let what = ("message edit", path);
                    (
                        channel_id,
                        message_id,
                        Some(body),
                        reqwest::Method::PATCH,
                        what,
                        &[],
                    )
                }
                MessageAction::Delete { message_id } => {
                    let (channel_id, message_id) = message_in(&request.chat, message_id)?;
                    let path = format!("/channels/{channel_id}/messages/{message_id}");
                    let what = ("message delete", path);
                    // A retried delete finds the message gone: done all the same.
                    (
                        channel_id,
                        message_id,
                        None,
                        reqwest::Method::DELETE,
                        what,
                        &[UNKNOWN_MESSAGE],
                    )
                }
            };
        let (what, path) = what;
        bot.call(BotRequest {
            method,
            path,
            body: body.as_ref(),
            what,
            tolerated,
        })
        .await?;
        tracing::info!(
            channel_id,
            message_id,
            action = kind.name(),
            "Discord action done"
        );
        Ok(Delivery {
            message_id: Some(message_id.to_owned()),
        })
    }

    async fn post_poll(
        &self, request: &ActionRequest, poll: &PollRequest,
    ) -> Result<Delivery, OutboxError> {
        let channel_id = request.chat.chat_id.as_str();
        if !is_snowflake(channel_id) {
            return Err(OutboxError::Rejected {
                message: format!("{channel_id:?} is not a Discord channel id"),
            });
        }
        let hours = poll.duration_hours.unwrap_or(DEFAULT_POLL_HOURS);
        if !(1..=MAX_POLL_HOURS).contains(&hours) {
            return Err(OutboxError::Rejected {
                message: format!(
                    "a Discord poll lasts 1 to {MAX_POLL_HOURS} hours; {hours} was asked for"
                ),
            });
        }
        let answers: Vec<Value> = poll
            .options
            .iter()
            .map(|option| json!({"poll_media": {"text": option}}))
            .collect();
        let body = json!({
            "poll": {
                "question": {"text": poll.question},
                "answers": answers,
                "duration": hours,
                "allow_multiselect": poll.allow_multiple,
            },
            "allowed_mentions": {"parse": []},
        });
        let key = format!("out:{CHANNEL_ID}:{}:poll", request.action_id);
        let sent = self
            .send_claimed(&key, self.post_to_channel(channel_id, &key, body))
            .await?;
        Ok(Delivery {
            message_id: sent.as_ref().and_then(message_id_of),
        })
    }

    /// Posts each file as a message of the channel, the text as the first one's content,
    /// each claimed as a reply's file is (`out:discord:<id>:media:<n>`) and sent with an
    /// enforced nonce. A text longer than a message, or a send in the chat of a slash command
    /// (its follow-up webhook), goes the reply's way. A file too large refuses the whole send
    /// before anything goes out.
    async fn send_media(
        &self, request: &ActionRequest, send: &MediaSend,
    ) -> Result<Delivery, OutboxError> {
        if let Some(media) = send
            .media
            .iter()
            .find(|media| media.bytes.len() > MAX_FILE_BYTES)
        {
            return Err(OutboxError::Rejected {
                message: format!(
                    "{:?} ({} bytes) is larger than the {} MiB Discord takes from a bot",
                    media.name,
                    media.bytes.len(),
                    MAX_FILE_BYTES >> 20
                ),
            });
        }
        let (text, directives) = crate::directives::strip_directives(&send.text);
        let content = text.unwrap_or_default();
        let channel_id = request.chat.chat_id.as_str();
        if content.chars().count() > super::MESSAGE_LIMIT
            || interaction_of(send.in_reply_to.as_deref()).is_some()
            || !is_snowflake(channel_id)
        {
            return self
                .deliver(&send.as_reply(&request.action_id, &request.chat))
                .await;
        }
        let bot = self.bot("posting a file to a channel")?;
        let reply_to = directives
            .reply_to
            .as_deref()
            .map(|id| id.rsplit(':').next().unwrap_or(id))
            .filter(|id| is_snowflake(id));
        let mut delivery = Delivery::default();
        for (index, media) in send.media.iter().enumerate() {
            let claim_id = format!("out:{CHANNEL_ID}:{}:media:{index}", request.action_id);
            let mut payload = json!({ "nonce": nonce(&claim_id), "enforce_nonce": true });
            if index == 0 {
                if !content.is_empty() {
                    payload["content"] = content.clone().into();
                }
                if let Some(message_id) = reply_to {
                    payload["message_reference"] =
                        json!({"message_id": message_id, "fail_if_not_exists": false});
                }
            }
            let path = format!("/channels/{channel_id}/messages");
            let post = bot.post_form(&path, file_form(media, payload), "file post");
            let sent = self.send_claimed(&claim_id, post).await?;
            if index == 0 {
                delivery.message_id = sent.as_ref().and_then(message_id_of);
            }
        }
        tracing::info!(action_id = %request.action_id, files = send.media.len(), "Discord send with files delivered");
        Ok(delivery)
    }

    /// The chat a `message` target names on Discord (see [`TARGET_HINT`]); a thread (a
    /// channel of its own on Discord) given as `thread_id` is where it goes.
    pub(super) async fn resolve(
        &self, channel: &str, raw: &str, thread_id: Option<&str>,
    ) -> Result<ChatRef, OutboxError> {
        let unknown = || OutboxError::Rejected {
            message: format!("Unknown target \"{raw}\" for {channel}. Hint: {TARGET_HINT}."),
        };
        let trimmed = raw.trim();
        let bare = trimmed.strip_prefix("discord:").unwrap_or(trimmed);
        let user = bare.strip_prefix("user:").or_else(|| {
            let inner = bare.strip_prefix("<@")?.strip_suffix('>')?;
            Some(inner.strip_prefix('!').unwrap_or(inner))
        });
        let channel_id = bare.strip_prefix("channel:").unwrap_or(bare);
        let thread = thread_id.map(str::trim).filter(|thread| !thread.is_empty());
        if let Some(thread) = thread
            && !is_snowflake(thread)
        {
            return Err(OutboxError::Rejected {
                message: format!("threadId \"{thread}\" is not a Discord thread id (digits)"),
            });
        }
        let (chat_id, chat_type) = match user {
            Some(user) if is_snowflake(user) => (self.open_dm(user).await?, ChatType::Direct),
            Some(_) => return Err(unknown()),
            None if is_snowflake(channel_id) => (channel_id.to_owned(), ChatType::Group),
            None => return Err(unknown()),
        };
        Ok(ChatRef {
            channel: CHANNEL_ID.to_owned(),
            chat_id: thread.map_or(chat_id, str::to_owned),
            chat_type,
        })
    }

    /// The DM channel with `user` (`POST /users/@me/channels`, which returns the existing one).
    async fn open_dm(&self, user: &str) -> Result<String, OutboxError> {
        let bot = self.bot("A direct message")?;
        let body = json!({"recipient_id": user});
        let channel = bot
            .call(BotRequest {
                method: reqwest::Method::POST,
                path: "/users/@me/channels".to_owned(),
                body: Some(&body),
                what: "DM channel lookup",
                tolerated: &[],
            })
            .await?;
        message_id_of(&channel).ok_or_else(|| OutboxError::Failed {
            message: format!("Discord named no DM channel for user {user}"),
            source: None,
        })
    }
}

/// The channel and message a message id names: a bare message id (as a send reports it) in
/// `chat`, or `<channel id>:<message id>`. The id of the slash command that started the turn
/// is no message and is refused with why.
fn message_in<'a>(
    chat: &'a ChatRef, message_id: &'a str,
) -> Result<(&'a str, &'a str), OutboxError> {
    let message_id = message_id.trim();
    if interaction_of(Some(message_id)).is_some()
        && !message_id
            .split_once(':')
            .is_some_and(|(_, second)| is_snowflake(second))
    {
        return Err(OutboxError::Rejected {
            message: "that id is the slash command that started the turn, which is no Discord \
                      message; act on a message the bot sent (the messageId its send reported)"
                .to_owned(),
        });
    }
    let (channel_id, message) = match message_id.split_once(':') {
        Some((channel_id, message)) => (channel_id, message),
        None => (chat.chat_id.as_str(), message_id),
    };
    if !is_snowflake(message) {
        return Err(OutboxError::Rejected {
            message: format!(
                "{message_id:?} is not a Discord message id: expected the message's numeric id \
                 as a send reported it, or <channel id>:<message id>"
            ),
        });
    }
    if !is_snowflake(channel_id) {
        return Err(OutboxError::Rejected {
            message: format!("{channel_id:?} is not a Discord channel id"),
        });
    }
    Ok((channel_id, message))
}

/// `emoji` as the reaction path segment: a unicode emoji, or a custom one (`<:name:id>`,
/// `<a:name:id>` or `name:id`) as `name:id`, URL-encoded.
fn reaction_path(emoji: &str) -> Result<String, OutboxError> {
    let emoji = emoji.trim();
    let custom = emoji
        .strip_prefix("<a:")
        .or_else(|| emoji.strip_prefix("<:"))
        .and_then(|inner| inner.strip_suffix('>'));
    let emoji = custom.unwrap_or(emoji);
    let usable = !emoji.is_empty()
        && emoji.chars().count() <= 100
        && !emoji
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '/');
    if !usable {
        return Err(OutboxError::Rejected {
            message: format!(
                "{emoji:?} is not an emoji Discord can react with: give a unicode emoji (👍) or \
                 a custom one as <:name:id>"
            ),
        });
    }
    Ok(percent_encode(emoji))
}

/// Every byte but `A-Z a-z 0-9 - . _ ~` as `%XX`.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|byte| {
            if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
                char::from(byte).to_string()
            } else {
                format!("%{byte:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emoji_are_url_encoded_and_custom_ones_named_by_name_and_id() {
        assert_eq!(reaction_path("👍").unwrap(), "%F0%9F%91%8D");
        assert_eq!(reaction_path("<:party:123>").unwrap(), "party%3A123");
        assert_eq!(reaction_path("<a:spin:9>").unwrap(), "spin%3A9");
        for junk in ["", "  ", "a b", "../x"] {
            assert!(reaction_path(junk).is_err(), "{junk:?}");
        }
    }

    #[test]
    fn message_ids_are_bare_or_carry_their_channel_and_interactions_are_refused() {
        let chat = ChatRef {
            channel: CHANNEL_ID.to_owned(),
            chat_id: "111".to_owned(),
            chat_type: ChatType::Group,
        };
        assert_eq!(message_in(&chat, "222").unwrap(), ("111", "222"));
        assert_eq!(message_in(&chat, "333:222").unwrap(), ("333", "222"));
        for junk in ["", "abc", "123:tok.en-x", "x:1", "1:"] {
            assert!(message_in(&chat, junk).is_err(), "{junk:?}");
        }
    }
}
