//! Telegram: the `POST /webhook/telegram` channel (secret-token check, update classification,
//! session addressing for private chats, groups and forum topics), the Bot API sender
//! (`sendMessage` in 4,096-character chunks, typing, approval buttons, callback answers), the
//! `setWebhook`/`getMe` calls the CLI needs, and the `channels.telegram` config.
//!
//! Addressing (spec §12): a private chat is `ChatType::Direct` with the chat id; a group or
//! supergroup is `ChatType::Group` with the chat id; a forum topic is
//! `<chat id>:topic:<thread id>`, so the session key gets the `:topic:` suffix and the sender
//! knows which `message_thread_id` to post in.
//!
//! Edited messages are ignored on purpose: the agent answered the original already, and a
//! second turn for a typo fix would only repeat itself.
//!
//! One file a layer: `config` (`channels.telegram`), `inbound` (the webhook), `wire` (the Bot
//! API's JSON shapes), `api` (Bot API calls), `sender` (replies) and `actions` (the `message`
//! tool's targets and actions).

mod actions;
mod api;
mod config;
mod inbound;
mod sender;
mod wire;

pub use api::{
    ALLOWED_UPDATES, ApiError, BOT_API_DOWNLOAD_LIMIT, DEFAULT_API_BASE_URL, TelegramMedia, get_me,
    set_webhook,
};
pub use config::{
    ConfigError, DEFAULT_MEDIA_MAX_MB, DEFAULT_REQUIRE_MENTION, ResolvedTelegram, TelegramActions,
    TelegramConfig, generate_secret_token,
};
pub use inbound::{CHANNEL_ID, SECRET_HEADER, TelegramChannel};
pub use sender::{MESSAGE_LIMIT, TelegramSender};
pub use wire::BotIdentity;
