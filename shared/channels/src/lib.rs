//! Chat channels: checking that a webhook call really comes from the platform, turning its
//! body into a normalised [`clawless_core::turn::events::InboundMessage`], and sending replies.
//!
//! Knows HTTP and the platforms' formats; knows nothing of storage or models.

pub mod chunk;
mod config_values;
pub mod directives;
pub mod discord;
pub mod generic;
pub mod media;
pub mod media_lines;
pub mod media_links;
mod multipart;
pub mod outbox;
pub mod probe;
pub mod signature;
pub mod slack;
pub mod telegram;
pub mod webhook;

pub use config_values::SecretError;
pub use discord::{DiscordChannel, DiscordConfig, DiscordSender, ResolvedDiscord};
pub use generic::{GenericMessage, GenericWebhook, ParseError};
pub use outbox::{ChannelOutbox, HttpReplySender};
pub use signature::{SIGNATURE_HEADER, SignatureError, sign, verify};
pub use slack::{ResolvedSlack, SlackChannel, SlackConfig, SlackSender};
pub use telegram::{TelegramChannel, TelegramConfig, TelegramSender};
pub use webhook::{
    ChannelApproval, ChannelMessage, PlatformChannel, PlatformReply, WebhookError, WebhookOutcome,
    WebhookRequest,
};
