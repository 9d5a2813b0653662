//! `channels.telegram`: the config block as written, its secrets looked up and every value
//! checked ([`ResolvedTelegram`]), and a fresh webhook secret token for `set-webhook`.

use std::sync::Arc;

use clawless_core::session::Inbox;
use serde::{Deserialize, Serialize};

use super::api::DEFAULT_API_BASE_URL;
use super::inbound::TelegramChannel;
use super::sender::TelegramSender;
use super::wire::{BotIdentity, normalise_username};
use crate::config_values::{REDACTED, SecretError, api_base_url, redacted, required_secret};

/// Longest secret token Telegram accepts.
const MAX_SECRET_TOKEN_CHARS: usize = 256;

/// Whether group messages must be addressed to the bot when `requireMention` is unset.
pub const DEFAULT_REQUIRE_MENTION: bool = true;

/// Largest inbound file stored when `mediaMaxMb` is unset (also the Bot API's own ceiling).
pub const DEFAULT_MEDIA_MAX_MB: u64 = 20;

/// Length of a generated secret token.
const GENERATED_SECRET_CHARS: usize = 64;

/// `channels.telegram` in `clawless.yaml`. Each secret is given inline or by the name of an
/// environment variable, never both.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct TelegramConfig {
    /// The bot token from BotFather, inline. Prefer `botTokenEnv`; set exactly one of the
    /// two.
    pub bot_token: Option<String>,
    /// The name of the environment variable (or `secrets:` entry) holding the bot token.
    pub bot_token_env: Option<String>,
    /// The webhook's secret token (what `clawless channels telegram set-webhook` prints),
    /// inline. Prefer `secretTokenEnv`; set exactly one of the two.
    pub secret_token: Option<String>,
    /// The name of the environment variable (or `secrets:` entry) holding the webhook's
    /// secret token.
    pub secret_token_env: Option<String>,
    /// Bot API base URL (a local Bot API server or a proxy; tests point it at a fake).
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_API_BASE_URL)))]
    pub api_base_url: Option<String>,
    /// The bot's `@username` (with or without `@`), to recognise `@username` mentions and
    /// `/command@username` in groups; unset, only replies to the bot and mentions that carry
    /// its user id count as addressed to it.
    pub bot_username: Option<String>,
    /// Telegram user ids of the agent's owners: always allowed, and the only ones who may
    /// use owner-only tools and `/approve`.
    pub owners: Vec<String>,
    /// Telegram user ids of other people allowed to talk to the agent (`*`: anyone).
    pub allow_from: Vec<String>,
    /// In groups, answer only messages that mention the bot or reply to it.
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_REQUIRE_MENTION)))]
    pub require_mention: Option<bool>,
    /// Who may talk to the agent in group chats: `open` (anyone in a group the bot is in),
    /// `allowlist` (owners and `allowFrom` only) or `disabled` (group messages start no turn).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = crate::webhook::GroupPolicy::default())))]
    pub group_policy: Option<crate::webhook::GroupPolicy>,
    /// Sent to a sender who may not talk to the agent; unset, such a message gets no answer.
    #[serde(default)]
    pub unauthorized_reply: Option<String>,
    /// Per group (by chat id; `"*"` for every other group): the tools the agent may use
    /// there, for everyone (`tools`) or for single senders (`toolsBySender`, keyed
    /// `id:<senderId>`); the first match applies.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub groups: indexmap::IndexMap<String, clawless_core::tool_policy::GroupToolsConfig>,
    /// Which `message` tool actions the agent may use on Telegram (each on unless turned off).
    #[serde(default)]
    pub actions: TelegramActions,
    /// Largest file people send that is downloaded and stored, in MB; bigger ones reach the
    /// agent as a note. The Bot API itself refuses downloads over 20 MB.
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_MEDIA_MAX_MB)))]
    pub media_max_mb: Option<u64>,
}

/// `channels.telegram.actions`: the gates of the `message` tool's actions here. An action
/// whose gate is off is neither offered to the model nor carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct TelegramActions {
    /// `react`: add or take back an emoji reaction (`setMessageReaction`).
    pub reactions: bool,
    /// `edit`: replace the text of a message the bot sent (`editMessageText`).
    pub edit_message: bool,
    /// `delete`: delete a message (`deleteMessage`).
    pub delete_message: bool,
    /// `poll`: post a poll (`sendPoll`).
    pub poll: bool,
}

impl Default for TelegramActions {
    fn default() -> Self {
        Self {
            reactions: true,
            edit_message: true,
            delete_message: true,
            poll: true,
        }
    }
}

impl std::fmt::Debug for TelegramConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramConfig")
            .field("bot_token", &redacted(self.bot_token.as_ref()))
            .field("bot_token_env", &self.bot_token_env)
            .field("secret_token", &redacted(self.secret_token.as_ref()))
            .field("secret_token_env", &self.secret_token_env)
            .field("api_base_url", &self.api_base_url)
            .field("bot_username", &self.bot_username)
            .field("owners", &self.owners)
            .field("allow_from", &self.allow_from)
            .field("require_mention", &self.require_mention)
            .field("groups", &self.groups)
            .field("actions", &self.actions)
            .field("media_max_mb", &self.media_max_mb)
            .finish()
    }
}

/// Why `channels.telegram` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `botToken` or `secretToken` is missing, given twice, or names an unset variable.
    #[error("channels.telegram: {0}")]
    Secret(#[from] SecretError),
    /// A value has the wrong shape (the value itself is not shown).
    #[error("channels.telegram.{field}: {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// `channels.telegram` with its secrets looked up and checked.
#[derive(Clone, PartialEq, Eq)]
pub struct ResolvedTelegram {
    /// The bot token.
    pub bot_token: String,
    /// The webhook secret token.
    pub secret_token: String,
    /// Bot API base URL, without a trailing `/`.
    pub api_base_url: String,
    /// The bot's username, lowercase, without `@`.
    pub bot_username: Option<String>,
    /// Owners' user ids.
    pub owners: Vec<String>,
    /// Allowed senders' user ids.
    pub allow_from: Vec<String>,
    /// In groups, answer only messages addressed to the bot.
    pub require_mention: bool,
    /// The `message` tool's action gates.
    pub actions: TelegramActions,
    /// Largest inbound file stored, in bytes (`mediaMaxMb`).
    pub media_max_bytes: u64,
}

impl std::fmt::Debug for ResolvedTelegram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedTelegram")
            .field("bot_token", &REDACTED)
            .field("secret_token", &REDACTED)
            .field("api_base_url", &self.api_base_url)
            .field("bot_username", &self.bot_username)
            .field("owners", &self.owners)
            .field("allow_from", &self.allow_from)
            .field("require_mention", &self.require_mention)
            .field("actions", &self.actions)
            .field("media_max_bytes", &self.media_max_bytes)
            .finish()
    }
}

impl TelegramConfig {
    /// Whether unaddressed group messages are skipped (default true).
    pub fn require_mention(&self) -> bool {
        self.require_mention.unwrap_or(DEFAULT_REQUIRE_MENTION)
    }

    /// Looks up the secrets (`env` reads an environment variable) and checks every value.
    pub fn resolve(
        &self, env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ResolvedTelegram, ConfigError> {
        let bot_token = required_secret(
            "botToken",
            self.bot_token.as_deref(),
            self.bot_token_env.as_deref(),
            env,
        )?;
        if !is_bot_token(&bot_token) {
            // The token goes into request paths, so anything but `<digits>:<token chars>` is
            // refused rather than escaped.
            return Err(ConfigError::Invalid {
                field: "botToken",
                reason: "expected <bot id>:<secret> as BotFather gives it".to_owned(),
            });
        }
        let secret_token = required_secret(
            "secretToken",
            self.secret_token.as_deref(),
            self.secret_token_env.as_deref(),
            env,
        )?;
        if !is_secret_token(&secret_token) {
            return Err(ConfigError::Invalid {
                field: "secretToken",
                reason: format!(
                    "expected 1 to {MAX_SECRET_TOKEN_CHARS} characters of A-Z, a-z, 0-9, _ and -"
                ),
            });
        }
        let api_base_url = api_base_url(self.api_base_url.as_deref(), DEFAULT_API_BASE_URL)
            .map_err(|reason| ConfigError::Invalid {
                field: "apiBaseUrl",
                reason,
            })?;
        let bot_username = match self.bot_username.as_deref().map(normalise_username) {
            Some(Some(name)) => Some(name),
            Some(None) => {
                return Err(ConfigError::Invalid {
                    field: "botUsername",
                    reason: "expected 1 to 64 characters of A-Z, a-z, 0-9 and _".to_owned(),
                });
            }
            None => None,
        };
        let media_max_bytes =
            crate::media::media_max_bytes(self.media_max_mb, DEFAULT_MEDIA_MAX_MB).map_err(
                |reason| ConfigError::Invalid {
                    field: "mediaMaxMb",
                    reason,
                },
            )?;
        Ok(ResolvedTelegram {
            media_max_bytes,
            bot_token,
            secret_token,
            api_base_url,
            bot_username,
            owners: self.owners.clone(),
            allow_from: self.allow_from.clone(),
            require_mention: self.require_mention(),
            actions: self.actions,
        })
    }
}

impl ResolvedTelegram {
    /// The bot's user id: the number before the `:` of its token.
    pub fn bot_id(&self) -> Option<i64> {
        bot_id_from_token(&self.bot_token)
    }

    /// The webhook channel for this bot.
    pub fn channel(&self) -> TelegramChannel {
        TelegramChannel::new(
            self.secret_token.clone(),
            BotIdentity {
                id: self.bot_id(),
                username: self.bot_username.clone(),
            },
            self.require_mention,
        )
    }

    /// The downloader of the files people send this bot.
    pub fn media(&self, client: reqwest::Client) -> super::api::TelegramMedia {
        super::api::TelegramMedia::new(
            client,
            &self.api_base_url,
            &self.bot_token,
            self.media_max_bytes,
        )
    }

    /// The reply sender for this bot; `inbox` keeps each chunk from being sent twice.
    pub fn sender(&self, client: reqwest::Client, inbox: Arc<dyn Inbox>) -> TelegramSender {
        TelegramSender::new(client, &self.api_base_url, &self.bot_token, inbox)
            .with_actions(self.actions)
    }
}

fn is_bot_token(token: &str) -> bool {
    let Some((id, secret)) = token.split_once(':') else {
        return false;
    };
    !id.is_empty()
        && id.len() <= 20
        && id.bytes().all(|b| b.is_ascii_digit())
        && !secret.is_empty()
        && secret.len() <= 128
        && secret
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn bot_id_from_token(token: &str) -> Option<i64> {
    token.split_once(':')?.0.parse().ok()
}

fn is_secret_token(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= MAX_SECRET_TOKEN_CHARS
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A fresh webhook secret token: 64 characters of `A-Z a-z 0-9 _ -` from the operating
/// system's randomness ([`clawless_base::ids`], as the runtime's secrets).
pub fn generate_secret_token() -> std::io::Result<String> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
    let bytes =
        clawless_base::ids::random_bytes(GENERATED_SECRET_CHARS).map_err(std::io::Error::other)?;
    // 256 is a multiple of 64, so the low six bits are uniform.
    Ok(bytes
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(b & 63)]))
        .collect())
}
