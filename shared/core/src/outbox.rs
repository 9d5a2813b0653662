//! The outbox port: delivering a reply to a chat conversation, and the `message` tool's
//! channel actions (a send to any chat, a send with files, react, edit, delete, poll).
//!
//! Channel adapters (`clawless-channels`) implement it; the turn runner calls it for each
//! `Effect::SendReply`. A reply (and an action) carries an idempotency id, and a resend after a
//! crash reuses it, so receivers can drop the second copy.

use clawless_base::media::OutboundMedia;
use clawless_base::port_error::BoxError;

use async_trait::async_trait;

use crate::turn::OutboundReply;
use crate::turn::events::ChatRef;

/// Why a reply could not be delivered.
#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    /// No sender is configured for the reply's channel.
    #[error("no outbound channel {0:?} is configured")]
    UnknownChannel(String),
    /// The platform refused it for good (bot blocked, chat not found, bad request): retrying
    /// cannot help. The turn records it and goes on, so later messages are not held back.
    #[error("reply refused for good: {message}")]
    Rejected {
        /// Summary (status and the platform's description).
        message: String,
    },
    /// The receiver refused it or could not be reached; a redelivery retries.
    #[error("reply delivery failed: {message}")]
    Failed {
        /// Summary.
        message: String,
        /// The underlying error.
        #[source]
        source: Option<BoxError>,
    },
}

/// A `message` tool action as a channel carries it out (a `send` of text alone is a
/// [`Outbox::deliver`]ed reply instead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageAction {
    /// Sends files, the text as their caption (or comment, or message content) where the
    /// platform takes one that long, else as a message before them.
    Send(MediaSend),
    /// Adds a reaction to `message_id` (or, with `remove`, takes the bot's reaction back).
    React {
        /// The platform's message id (as a send or an inbound message reported it).
        message_id: String,
        /// The emoji (unicode, or the platform's custom form).
        emoji: String,
        /// Take the reaction back instead of adding it.
        remove: bool,
    },
    /// Replaces the text of a message the bot sent.
    Edit {
        /// The platform's message id.
        message_id: String,
        /// The new text.
        text: String,
    },
    /// Deletes a message.
    Delete {
        /// The platform's message id.
        message_id: String,
    },
    /// Posts a poll.
    Poll(PollRequest),
}

impl MessageAction {
    /// The action's kind.
    pub fn kind(&self) -> MessageActionKind {
        match self {
            Self::Send(_) => MessageActionKind::Send,
            Self::React { .. } => MessageActionKind::React,
            Self::Edit { .. } => MessageActionKind::Edit,
            Self::Delete { .. } => MessageActionKind::Delete,
            Self::Poll(_) => MessageActionKind::Poll,
        }
    }
}

/// A `send` with files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaSend {
    /// The text, possibly empty, with any `[[reply_to:…]]` directive in it.
    pub text: String,
    /// The files, at least one.
    pub media: Vec<OutboundMedia>,
    /// The message the turn answers, when the send goes to the turn's own chat (what
    /// `[[reply_to_current]]` means).
    pub in_reply_to: Option<String>,
}

impl MediaSend {
    /// The same send as a reply with id `reply_id` to `chat`: what a channel without captions
    /// delivers (the text, then each file).
    pub fn as_reply(&self, reply_id: &str, chat: &ChatRef) -> OutboundReply {
        OutboundReply {
            reply_id: reply_id.to_owned(),
            chat: chat.clone(),
            text: self.text.clone(),
            approval_code: None,
            in_reply_to: self.in_reply_to.clone(),
            media: self.media.clone(),
        }
    }
}

/// A poll to post.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollRequest {
    /// The question.
    pub question: String,
    /// The answers, at least two.
    pub options: Vec<String>,
    /// Whether a voter may pick more than one answer.
    pub allow_multiple: bool,
    /// How long the poll stays open, in hours, where the platform takes it (Discord).
    pub duration_hours: Option<u32>,
}

/// The actions of the `message` tool, as the model names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MessageActionKind {
    /// `send`: every channel.
    Send,
    /// `react`.
    React,
    /// `edit`.
    Edit,
    /// `delete`.
    Delete,
    /// `poll`.
    Poll,
}

impl MessageActionKind {
    /// The name the model uses (`send`, `react`, `edit`, `delete`, `poll`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Send => "send",
            Self::React => "react",
            Self::Edit => "edit",
            Self::Delete => "delete",
            Self::Poll => "poll",
        }
    }
}

/// One channel action of the `message` tool, addressed and keyed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionRequest {
    /// Idempotency id, derived from the tool call: a retried call carries the same id.
    pub action_id: String,
    /// The conversation it applies to.
    pub chat: ChatRef,
    /// What to do.
    pub action: MessageAction,
}

/// What a channel reports for a send or an action.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delivery {
    /// The platform's id of the message sent (the last chunk's) or acted on, when it has one.
    pub message_id: Option<String>,
}

/// The refusal for an action `channel` does not carry out.
pub fn unsupported_action(kind: MessageActionKind, channel: &str) -> OutboxError {
    OutboxError::Rejected {
        message: format!(
            "Message action {} not supported for channel {channel}.",
            kind.name()
        ),
    }
}

/// Sends replies to chats.
#[async_trait]
pub trait Outbox: Send + Sync + std::fmt::Debug {
    /// Delivers one reply. Must be safe to call again with the same `reply_id`.
    async fn send(&self, reply: &OutboundReply) -> Result<(), OutboxError>;

    /// Delivers one reply like [`Outbox::send`] and reports the platform's message id. The
    /// default sends and reports none.
    async fn deliver(&self, reply: &OutboundReply) -> Result<Delivery, OutboxError> {
        self.send(reply).await.map(|()| Delivery::default())
    }

    /// The channels this outbox delivers to, in name order (none by default). The `message`
    /// tool is offered only when there is at least one.
    fn channel_ids(&self) -> Vec<String> {
        Vec::new()
    }

    /// The `message` actions `channel` carries out besides `send` (none by default). The
    /// tool's schema and description advertise exactly these.
    fn message_actions(&self, _channel: &str) -> Vec<MessageActionKind> {
        Vec::new()
    }

    /// The conversation a `message` target names on `channel`, in that platform's formats
    /// (Telegram `-100…`/`@name`, Slack `channel:C…`/`user:U…`, Discord `channel:…`/`user:…`/
    /// `<@…>`, the generic channel's `chat_id`), in thread or topic `thread_id` when given.
    /// `Err` (rejected) with a reason the model can act on for a target the channel cannot
    /// address. The default takes the target as the chat id.
    async fn resolve_target(
        &self, channel: &str, target: &str, thread_id: Option<&str>,
    ) -> Result<ChatRef, OutboxError> {
        let _ = thread_id;
        Ok(ChatRef {
            channel: channel.to_owned(),
            chat_id: target.to_owned(),
            chat_type: clawless_base::session_key::ChatType::Direct,
        })
    }

    /// Carries out one action. Must be safe to call again with the same `action_id`. The
    /// default refuses every action.
    async fn act(&self, request: &ActionRequest) -> Result<Delivery, OutboxError> {
        Err(unsupported_action(
            request.action.kind(),
            &request.chat.channel,
        ))
    }

    /// Shows that the agent is working on an answer in `chat`, where the platform has such
    /// an indicator (Telegram's "typing…"). Best effort: the default does nothing.
    async fn typing(&self, _chat: &ChatRef) -> Result<(), OutboxError> {
        Ok(())
    }
}
