//! Slack: the Events API webhook (`POST /webhook/slack`) and its interactive sub-route
//! (`POST /webhook/slack/interactive`, approval buttons), checked with Slack's `v0` request
//! signature, and replies sent with `chat.postMessage`.
//!
//! Conversations map to sessions like this: a direct message (`channel_type: im`) is a
//! direct chat keyed by its channel id; in a channel, every thread is its own group session,
//! `<channel>:thread:<thread_ts>`, and a top-level channel message starts a thread keyed by
//! its own `ts`, so the reply lands in that thread.
//!
//! Slack sends both a `message` and an `app_mention` event when someone mentions the bot in a
//! channel; the `app_mention` one starts the turn and the `message` one is ignored, so one
//! mention is one turn.
//!
//! One file a layer: `config` (`channels.slack`), `inbound` (events and button presses),
//! `wire` (Slack's JSON shapes and id formats), `api` (Web API calls), `sender` (replies) and
//! `actions` (the `message` tool's targets and actions).

mod actions;
mod api;
mod config;
mod inbound;
mod sender;
mod wire;

pub use api::{DEFAULT_API_BASE_URL, FILE_HOSTS, SlackMedia};
pub use config::{ConfigError, DEFAULT_MEDIA_MAX_MB, ResolvedSlack, SlackActions, SlackConfig};
pub use inbound::{
    CHANNEL_ID, INTERACTIVE_SUB_PATH, REPLAY_WINDOW_MS, RETRY_NUM_HEADER, SIGNATURE_HEADER,
    SlackChannel, TIMESTAMP_HEADER,
};
pub use sender::{MAX_MESSAGE_CHARS, MAX_SECTION_CHARS, SlackSender};
