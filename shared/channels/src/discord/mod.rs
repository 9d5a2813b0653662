//! Discord, through interactions (`POST /webhook/discord`): the Ed25519 signature check,
//! classifying an interaction (PING, slash command, button press), the slash command
//! definitions to register, and sending a turn's reply through the interaction's follow-up
//! webhook.
//!
//! Only interactions reach clawless. Plain messages typed into a Discord channel are delivered
//! by Discord over a persistent gateway (WebSocket) connection, which a serverless backend does
//! not keep open; so people talk to the agent through `/ask` and the skill commands, never by
//! writing in a channel or mentioning the bot.
//!
//! A command is answered at once with a deferred response (Discord's "thinking…"), and the
//! turn's reply follows later through `POST {apiBaseUrl}/webhooks/{applicationId}/{token}`. The
//! interaction token that URL needs travels with the message as its id
//! (`<interaction id>:<token>`) and comes back to the sender in
//! [`OutboundReply::in_reply_to`](clawless_core::turn::OutboundReply::in_reply_to). The token
//! lives 15 minutes; a reply after that is refused for good (without a bot token). An `/ask` without a usable
//! question starts no turn: it is answered at once, visibly to the invoker only, with what the
//! command expects.
//!
//! One file a layer: `config` (`channels.discord`), `inbound` (interactions), `wire`
//! (Discord's JSON shapes, ids and numbering), `commands` (the slash commands), `api`
//! (registering them, bot REST calls), `sender` (follow-up and channel messages) and `actions`
//! (the `message` tool's targets and actions).
//!
//! With a bot token, a reply that has no live interaction (a cron job's, the `message` tool's
//! send to another channel, an answer after the 15 minutes) is posted to the channel instead,
//! `POST /channels/{id}/messages` with a `nonce` Discord enforces, and the `message` tool can
//! react, edit, delete and post polls.

mod actions;
mod api;
mod commands;
mod config;
mod inbound;
mod sender;
mod wire;

pub use api::{CDN_HOSTS, DEFAULT_API_BASE_URL, DiscordApiError, DiscordMedia, register_commands};
pub use commands::{
    ARGS_OPTION, ASK_COMMAND, ASK_FILE_OPTION, ASK_OPTION, command_definitions, skill_command_text,
};
pub use config::{
    ConfigError, DEFAULT_MEDIA_MAX_MB, DiscordActions, DiscordConfig, DiscordPublicKey,
    ResolvedDiscord,
};
pub use inbound::{CHANNEL_ID, DiscordChannel, SIGNATURE_HEADER, TIMESTAMP_HEADER};
pub use sender::{DiscordSender, MESSAGE_LIMIT, TOKEN_LIFETIME};
