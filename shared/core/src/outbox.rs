//! The outbox port: delivering a reply to a chat conversation.
//!
//! Channel adapters (`clawless-channels`) implement it; the turn runner calls it for each
//! `Effect::SendReply`. A reply carries an idempotency id, and a resend after a crash reuses it,
//! so receivers can drop the second copy.

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

/// Sends replies to chats.
#[async_trait]
pub trait Outbox: Send + Sync + std::fmt::Debug {
    /// Delivers one reply. Must be safe to call again with the same `reply_id`.
    async fn send(&self, reply: &OutboundReply) -> Result<(), OutboxError>;

    /// Shows that the agent is working on an answer in `chat`, where the platform has such
    /// an indicator (Telegram's "typing…"). Best effort: the default does nothing.
    async fn typing(&self, _chat: &ChatRef) -> Result<(), OutboxError> {
        Ok(())
    }
}
