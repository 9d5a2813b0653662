//! The `message` tool on Telegram: which actions the bot offers (`channels.telegram.actions`),
//! reading a model's target (a chat id, `@username`, a forum topic) into a chat, and carrying
//! out `react` (`setMessageReaction`), `edit` (`editMessageText`), `delete` (`deleteMessage`),
//! `poll` (`sendPoll`, claimed once in the inbox like a reply's chunks) and a `send` with files
//! (`sendPhoto`/`sendDocument`/`sendVoice`/`sendAudio` multipart, the text as the first file's
//! caption; each file claimed like a reply's).

use clawless_base::session_key::ChatType;
use clawless_core::outbox::{
    ActionRequest, Delivery, MediaSend, MessageAction, MessageActionKind, Outbox, OutboxError,
    PollRequest, unsupported_action,
};
use clawless_core::turn::events::ChatRef;
use serde_json::{Value, json};

use super::api::ApiError;
use super::inbound::CHANNEL_ID;
use super::sender::{
    TelegramSender, chat_id_text, message_ref, target, telegram_message_id, upload_of,
};
use super::wire::TOPIC_INFIX;
use crate::multipart::Form;

/// Longest caption a Telegram file takes, in characters; a longer text goes as a message
/// before the files.
const CAPTION_LIMIT: usize = 1_024;

/// What the model is told when a target cannot be read.
const TARGET_HINT: &str = "use a numeric chat id (negative for groups and channels, e.g. \
                           -1001234567890), or @username of a public channel or group; put a \
                           forum topic's id in threadId";

/// Telegram's description when an edit changes nothing (a retried edit).
const NOT_MODIFIED: &str = "message is not modified";
/// Telegram's description when the message to delete is gone (a retried delete).
const DELETE_NOT_FOUND: &str = "message to delete not found";

impl TelegramSender {
    /// The actions whose gate is on, in the order the tool lists them.
    pub(super) fn enabled_actions(&self) -> Vec<MessageActionKind> {
        let gates = [
            (MessageActionKind::React, self.actions.reactions),
            (MessageActionKind::Edit, self.actions.edit_message),
            (MessageActionKind::Delete, self.actions.delete_message),
            (MessageActionKind::Poll, self.actions.poll),
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
        if !self.enabled_actions().contains(&kind) {
            return Err(unsupported_action(kind, CHANNEL_ID));
        }
        match &request.action {
            MessageAction::React {
                message_id,
                emoji,
                remove,
            } => {
                let (chat_id, message) = message_in(&request.chat, message_id)?;
                let reaction = if *remove {
                    json!([])
                } else {
                    json!([{"type": "emoji", "emoji": emoji.trim()}])
                };
                let body = json!({"chat_id": chat_id, "message_id": message, "reaction": reaction});
                self.call("setMessageReaction", &body).await?;
                Ok(acted_on(&chat_id, message))
            }
            MessageAction::Edit { message_id, text } => {
                let (chat_id, message) = message_in(&request.chat, message_id)?;
                let body = json!({"chat_id": chat_id, "message_id": message, "text": text});
                match self.call("editMessageText", &body).await {
                    Err(err) if refused_with(&err, NOT_MODIFIED) => {}
                    other => {
                        other?;
                    }
                }
                Ok(acted_on(&chat_id, message))
            }
            MessageAction::Delete { message_id } => {
                let (chat_id, message) = message_in(&request.chat, message_id)?;
                let body = json!({"chat_id": chat_id, "message_id": message});
                match self.call("deleteMessage", &body).await {
                    Err(err) if refused_with(&err, DELETE_NOT_FOUND) => {
                        tracing::info!(message_id, "message to delete is gone already");
                    }
                    other => {
                        other?;
                    }
                }
                Ok(acted_on(&chat_id, message))
            }
            MessageAction::Poll(poll) => self.send_poll(request, poll).await,
            MessageAction::Send(send) => self.send_media(request, send).await,
        }
    }

    /// Sends files with the text as the first one's caption, each claimed as a reply's file
    /// is (`out:telegram:<id>:media:<n>`). A text longer than a caption goes the reply's way
    /// (the text, then the files). A file Telegram does not take refuses the whole send
    /// before anything goes out.
    async fn send_media(
        &self, request: &ActionRequest, send: &MediaSend,
    ) -> Result<Delivery, OutboxError> {
        let (text, directives) = crate::directives::strip_directives(&send.text);
        let caption = text.unwrap_or_default();
        if caption.chars().count() > CAPTION_LIMIT {
            return self
                .deliver(&send.as_reply(&request.action_id, &request.chat))
                .await;
        }
        let uploads = send
            .media
            .iter()
            .map(|media| upload_of(media, directives.audio_as_voice))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|message| OutboxError::Rejected { message })?;
        let target = target(&request.chat);
        let reply_to = directives
            .reply_to
            .as_deref()
            .and_then(telegram_message_id)
            .or_else(|| {
                directives
                    .reply_to_current
                    .then_some(send.in_reply_to.as_deref())
                    .flatten()
                    .and_then(telegram_message_id)
            });
        let mut delivery = Delivery::default();
        for (index, (media, upload)) in send.media.iter().zip(&uploads).enumerate() {
            let mut form = Form::new().text("chat_id", &chat_id_text(&target.chat_id));
            if let Some(thread) = target.thread_id {
                form = form.text("message_thread_id", &thread.to_string());
            }
            if index == 0 {
                if !caption.is_empty() {
                    form = form.text("caption", &caption);
                }
                if let Some(message_id) = reply_to {
                    let reply =
                        json!({"message_id": message_id, "allow_sending_without_reply": true});
                    form = form.text("reply_parameters", &reply.to_string());
                }
            }
            let form = form.file(upload.field, &media.name, &media.mime, &media.bytes);
            let key = format!("out:{CHANNEL_ID}:{}:media:{index}", request.action_id);
            let sent = self.upload_claimed(&key, upload.method, form).await?;
            if index == 0 {
                delivery.message_id = sent.and_then(|result| message_ref(&result, &target.chat_id));
            }
        }
        tracing::info!(action_id = %request.action_id, files = send.media.len(), "telegram send with files delivered");
        Ok(delivery)
    }

    async fn send_poll(
        &self, request: &ActionRequest, poll: &PollRequest,
    ) -> Result<Delivery, OutboxError> {
        let target = target(&request.chat);
        let options: Vec<Value> = poll
            .options
            .iter()
            .map(|option| json!({"text": option}))
            .collect();
        let mut body = json!({
            "chat_id": target.chat_id,
            "question": poll.question,
            "options": options,
            "allows_multiple_answers": poll.allow_multiple,
        });
        if let Some(thread) = target.thread_id {
            body["message_thread_id"] = thread.into();
        }
        let key = format!("out:{CHANNEL_ID}:{}:poll", request.action_id);
        let sent = self.send_claimed(&key, "sendPoll", &body).await?;
        Ok(Delivery {
            message_id: sent.and_then(|result| message_ref(&result, &target.chat_id)),
        })
    }
}

/// The Delivery of an action on `message` in `chat_id`.
fn acted_on(chat_id: &Value, message: i64) -> Delivery {
    message_ref(&json!({"message_id": message}), chat_id).map_or_else(Delivery::default, |id| {
        Delivery {
            message_id: Some(id),
        }
    })
}

/// Whether `err` is Telegram refusing with a description that contains `needle`.
fn refused_with(err: &ApiError, needle: &str) -> bool {
    matches!(err, ApiError::Refused { description, .. }
        if description.to_ascii_lowercase().contains(needle))
}

/// The chat and message a message id names: `<chat id>:<message id>` (as sends and inbound
/// messages report it; that chat wins over the target) or a bare message id in `chat`.
fn message_in(chat: &ChatRef, message_id: &str) -> Result<(Value, i64), OutboxError> {
    let bad = || OutboxError::Rejected {
        message: format!(
            "{message_id:?} is not a Telegram message id: expected <chat id>:<message id> as a \
             send or an inbound message reported it, or the message's number"
        ),
    };
    let message_id = message_id.trim();
    let (chat_part, number) = match message_id.rsplit_once(':') {
        Some((chat_part, number)) => (Some(chat_part), number),
        None => (None, message_id),
    };
    let number: i64 = number.parse().map_err(|_| bad())?;
    if number <= 0 {
        return Err(bad());
    }
    let chat_id = match chat_part {
        None => target(chat).chat_id,
        Some(part) => {
            // An inbound id of a topic message is `<chat>:<message>`; a topic chat id itself
            // (`<chat>:topic:<thread>`) is no message id.
            let part = part.split(TOPIC_INFIX).next().unwrap_or(part);
            if let Ok(id) = part.parse::<i64>() {
                Value::from(id)
            } else if part.starts_with('@') && super::wire::normalise_username(part).is_some() {
                Value::from(part)
            } else {
                return Err(bad());
            }
        }
    };
    Ok((chat_id, number))
}

/// The chat a `message` target names on Telegram: a numeric chat id (negative: a group,
/// supergroup or channel), `@username` (a public group or channel; bots cannot start private
/// chats by username), either optionally prefixed `telegram:`, in forum topic `thread_id`.
pub(super) fn resolve_target(
    channel: &str, raw: &str, thread_id: Option<&str>,
) -> Result<ChatRef, OutboxError> {
    let unknown = || OutboxError::Rejected {
        message: format!("Unknown target \"{raw}\" for {channel}. Hint: {TARGET_HINT}."),
    };
    let trimmed = raw.trim();
    let bare = trimmed
        .strip_prefix("telegram:")
        .or_else(|| trimmed.strip_prefix("tg:"))
        .unwrap_or(trimmed);
    // A chat id copied from the conversation may carry its topic already.
    let (chat, inline_topic) = match bare.split_once(TOPIC_INFIX) {
        Some((chat, topic)) => (chat, Some(topic)),
        None => (bare, None),
    };
    let (chat_id, chat_type) = if let Ok(id) = chat.parse::<i64>() {
        let kind = if id < 0 {
            ChatType::Group
        } else {
            ChatType::Direct
        };
        (id.to_string(), kind)
    } else if chat.starts_with('@')
        && let Some(name) = super::wire::normalise_username(chat)
    {
        (format!("@{name}"), ChatType::Group)
    } else {
        return Err(unknown());
    };
    let topic = match thread_id
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .or(inline_topic)
    {
        None => None,
        Some(topic) => match topic.parse::<i64>() {
            Ok(id) if id > 0 => Some(id),
            _ => {
                return Err(OutboxError::Rejected {
                    message: format!(
                        "threadId \"{topic}\" is not a Telegram forum topic id (a positive number)"
                    ),
                });
            }
        },
    };
    let chat_id = match topic {
        Some(topic) => format!("{chat_id}{TOPIC_INFIX}{topic}"),
        None => chat_id,
    };
    Ok(ChatRef {
        channel: CHANNEL_ID.to_owned(),
        chat_id,
        chat_type,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(chat_id: &str) -> ChatRef {
        ChatRef {
            channel: CHANNEL_ID.to_owned(),
            chat_id: chat_id.to_owned(),
            chat_type: ChatType::Group,
        }
    }

    #[test]
    fn message_ids_name_their_chat_or_take_the_targets() {
        assert_eq!(
            message_in(&chat("-100:topic:4"), "55").unwrap(),
            (json!(-100), 55)
        );
        assert_eq!(
            message_in(&chat("42"), "-1007:55").unwrap(),
            (json!(-1007), 55)
        );
        assert_eq!(
            message_in(&chat("42"), "@news_room:9").unwrap(),
            (json!("@news_room"), 9)
        );
        for junk in [
            "",
            "abc",
            "callback:abc",
            "42:",
            "42:-3",
            "x y:5",
            ":5",
            "42:0",
        ] {
            assert!(
                matches!(
                    message_in(&chat("42"), junk),
                    Err(OutboxError::Rejected { .. })
                ),
                "{junk:?}"
            );
        }
    }
}
