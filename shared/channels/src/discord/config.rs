//! `channels.discord`: the config block as written, checked and its bot token looked up
//! ([`ResolvedDiscord`]), and the application's Ed25519 public key that signs interactions.

use ed25519_dalek::{Signature, VerifyingKey};
use serde::{Deserialize, Serialize};

use super::api::DEFAULT_API_BASE_URL;
use super::wire::is_snowflake;
use crate::config_values::{SecretError, api_base_url, optional_secret, redacted};

/// `channels.discord` in `clawless.yaml`.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiscordConfig {
    /// The application id, a numeric snowflake (Developer Portal, General Information).
    /// Required.
    pub application_id: String,
    /// The application's Ed25519 public key, 64 hex digits (Developer Portal, General
    /// Information). Required: every interaction's signature is checked with it.
    pub public_key: String,
    /// The bot token, inline: registering commands, the `message` tool's actions and sends
    /// outside an interaction need it. Prefer `botTokenEnv`; set at most one of the two.
    #[serde(default)]
    pub bot_token: Option<String>,
    /// The name of the environment variable (or `secrets:` entry) holding the bot token.
    #[serde(default)]
    pub bot_token_env: Option<String>,
    /// Discord's API base URL (a proxy; tests point it at a fake).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_API_BASE_URL)))]
    pub api_base_url: Option<String>,
    /// Discord user ids of the agent's owners: always allowed, and the only ones who may use
    /// owner-only tools and `/approve`.
    #[serde(default)]
    pub owners: Vec<String>,
    /// Discord user ids of other people allowed to talk to the agent (`*`: anyone).
    #[serde(default)]
    pub allow_from: Vec<String>,
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
    /// Which `message` tool actions the agent may use on Discord (each on unless turned off;
    /// all of them need the bot token).
    #[serde(default)]
    pub actions: DiscordActions,
    /// Largest file people upload with a command that is downloaded and stored, in MB;
    /// bigger ones reach the agent as a note.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_MEDIA_MAX_MB)))]
    pub media_max_mb: Option<u64>,
}

/// Largest inbound file stored when `mediaMaxMb` is unset.
pub const DEFAULT_MEDIA_MAX_MB: u64 = 100;

/// `channels.discord.actions`: the gates of the `message` tool's actions here. An action
/// whose gate is off is neither offered to the model nor carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct DiscordActions {
    /// `react`: add or take back the bot's emoji reaction.
    pub reactions: bool,
    /// `edit` and `delete` of messages (the bot's own, or others' with Manage Messages).
    pub messages: bool,
    /// `poll`: post a poll.
    pub polls: bool,
}

impl Default for DiscordActions {
    fn default() -> Self {
        Self {
            reactions: true,
            messages: true,
            polls: true,
        }
    }
}

impl std::fmt::Debug for DiscordConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token stays out of logs.
        f.debug_struct("DiscordConfig")
            .field("application_id", &self.application_id)
            .field("public_key", &self.public_key)
            .field("bot_token", &redacted(self.bot_token.as_ref()))
            .field("bot_token_env", &self.bot_token_env)
            .field("api_base_url", &self.api_base_url)
            .field("owners", &self.owners)
            .field("allow_from", &self.allow_from)
            .field("groups", &self.groups)
            .field("actions", &self.actions)
            .field("media_max_mb", &self.media_max_mb)
            .finish()
    }
}

/// Why a Discord config cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A field is malformed or contradicts another.
    #[error("channels.discord: {0}")]
    Invalid(String),
    /// `botToken` and `botTokenEnv` are both given, or `botTokenEnv` names an unset variable.
    #[error("channels.discord: {0}")]
    Secret(#[from] SecretError),
}

/// An Ed25519 public key, parsed and checked once.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DiscordPublicKey(VerifyingKey);

impl DiscordPublicKey {
    /// Parses 64 hex digits into a valid curve point.
    pub fn parse(hex_key: &str) -> Result<Self, ConfigError> {
        let bytes = hex::decode(hex_key.trim())
            .map_err(|_| ConfigError::Invalid("publicKey is not hex".to_owned()))?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|_| {
            ConfigError::Invalid("publicKey must be 32 bytes (64 hex digits)".to_owned())
        })?;
        VerifyingKey::from_bytes(&bytes)
            .map(Self)
            .map_err(|_| ConfigError::Invalid("publicKey is not an Ed25519 key".to_owned()))
    }

    /// Whether `signature` signs `timestamp` followed by `body`.
    pub(super) fn verifies(&self, timestamp: &[u8], body: &[u8], signature: &[u8; 64]) -> bool {
        let mut message = Vec::with_capacity(timestamp.len() + body.len());
        message.extend_from_slice(timestamp);
        message.extend_from_slice(body);
        self.0
            .verify_strict(&message, &Signature::from_bytes(signature))
            .is_ok()
    }
}

impl std::fmt::Debug for DiscordPublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DiscordPublicKey({})", hex::encode(self.0.as_bytes()))
    }
}

/// A checked Discord config, the token looked up.
#[derive(Clone, PartialEq, Eq)]
pub struct ResolvedDiscord {
    /// The application id (digits).
    pub application_id: String,
    /// The key interactions are signed with.
    pub public_key: DiscordPublicKey,
    /// The bot token, when one was configured.
    pub bot_token: Option<String>,
    /// API base URL without a trailing `/`.
    pub api_base_url: String,
    /// Owner user ids.
    pub owners: Vec<String>,
    /// Allowed user ids.
    pub allow_from: Vec<String>,
    /// The `message` tool's action gates.
    pub actions: DiscordActions,
    /// Largest inbound file stored, in bytes (`mediaMaxMb`).
    pub media_max_bytes: u64,
}

impl std::fmt::Debug for ResolvedDiscord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedDiscord")
            .field("application_id", &self.application_id)
            .field("public_key", &self.public_key)
            .field("bot_token", &redacted(self.bot_token.as_ref()))
            .field("api_base_url", &self.api_base_url)
            .field("owners", &self.owners)
            .field("allow_from", &self.allow_from)
            .field("actions", &self.actions)
            .field("media_max_bytes", &self.media_max_bytes)
            .finish()
    }
}

impl ResolvedDiscord {
    /// The downloader of the files people upload with commands.
    pub fn media(&self, client: reqwest::Client) -> super::api::DiscordMedia {
        super::api::DiscordMedia::new(client, &self.api_base_url, self.media_max_bytes)
    }
}

impl DiscordConfig {
    /// Checks the config and looks up `botTokenEnv` with `env`. A bot token is optional (only
    /// registering commands needs one), but `botToken` and `botTokenEnv` together are an error,
    /// and so is a `botTokenEnv` naming an unset variable.
    pub fn resolve(
        &self, env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ResolvedDiscord, ConfigError> {
        let application_id = self.application_id.trim();
        if !is_snowflake(application_id) {
            return Err(ConfigError::Invalid(
                "applicationId must be the application's numeric id".to_owned(),
            ));
        }
        let public_key = DiscordPublicKey::parse(&self.public_key)?;
        let bot_token = match optional_secret(
            "botToken",
            self.bot_token.as_deref(),
            self.bot_token_env.as_deref(),
            env,
        ) {
            // The token is optional, so a blank `botToken` is a malformed token, not a missing one.
            Err(SecretError::Missing { .. }) => return Err(malformed_bot_token()),
            lookup => lookup?.map(|token| non_blank_token(&token)).transpose()?,
        };
        let api_base_url = api_base_url(self.api_base_url.as_deref(), DEFAULT_API_BASE_URL)
            .map_err(ConfigError::Invalid)?;
        let media_max_bytes =
            crate::media::media_max_bytes(self.media_max_mb, DEFAULT_MEDIA_MAX_MB)
                .map_err(ConfigError::Invalid)?;
        Ok(ResolvedDiscord {
            media_max_bytes,
            application_id: application_id.to_owned(),
            public_key,
            bot_token,
            api_base_url,
            owners: self.owners.clone(),
            allow_from: self.allow_from.clone(),
            actions: self.actions,
        })
    }
}

fn non_blank_token(token: &str) -> Result<String, ConfigError> {
    let token = token.trim();
    if token.is_empty() || token.chars().any(|c| c.is_control() || c.is_whitespace()) {
        Err(malformed_bot_token())
    } else {
        Ok(token.to_owned())
    }
}

fn malformed_bot_token() -> ConfigError {
    ConfigError::Invalid("the bot token is empty or malformed".to_owned())
}
