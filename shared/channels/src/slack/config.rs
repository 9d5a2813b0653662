//! `channels.slack`: the config block as written, and the same with its secrets read and its
//! values checked ([`ResolvedSlack`]).

use serde::{Deserialize, Serialize};

use super::api::DEFAULT_API_BASE_URL;
use super::wire::is_slack_id;
use crate::config_values::{REDACTED, SecretError, api_base_url, redacted, required_secret};

/// `channels.slack` in the config. Each secret is given either literally or as the name of
/// an environment variable holding it, never both.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SlackConfig {
    /// The bot token (`xoxb-…`), inline. Prefer `botTokenEnv`; set exactly one of the two.
    #[serde(default)]
    pub bot_token: Option<String>,
    /// The name of the environment variable (or `secrets:` entry) holding the bot token.
    #[serde(default)]
    pub bot_token_env: Option<String>,
    /// The app's signing secret, inline. Prefer `signingSecretEnv`; set exactly one of the
    /// two.
    #[serde(default)]
    pub signing_secret: Option<String>,
    /// The name of the environment variable (or `secrets:` entry) holding the signing
    /// secret.
    #[serde(default)]
    pub signing_secret_env: Option<String>,
    /// Web API base URL (a proxy; tests point it at a fake).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_API_BASE_URL)))]
    pub api_base_url: Option<String>,
    /// Slack user ids of the agent's owners: always allowed, and the only ones who may use
    /// owner-only tools and `/approve`.
    #[serde(default)]
    pub owners: Vec<String>,
    /// Slack user ids of other people allowed to talk to the agent (`*`: anyone).
    #[serde(default)]
    pub allow_from: Vec<String>,
    /// The bot's own user id (`U…`), to recognise mentions; unset, the id Slack puts in each
    /// event's `authorizations` is used.
    #[serde(default)]
    pub bot_user_id: Option<String>,
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
    /// Which `message` tool actions the agent may use on Slack (each on unless turned off).
    #[serde(default)]
    pub actions: SlackActions,
    /// Largest file people share that is downloaded and stored, in MB; bigger ones reach the
    /// agent as a note. The bot token needs `files:read`.
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_MEDIA_MAX_MB)))]
    pub media_max_mb: Option<u64>,
}

/// Largest inbound file stored when `mediaMaxMb` is unset.
pub const DEFAULT_MEDIA_MAX_MB: u64 = 20;

/// `channels.slack.actions`: the gates of the `message` tool's actions here. An action whose
/// gate is off is neither offered to the model nor carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct SlackActions {
    /// `react`: add or take back an emoji reaction (`reactions.add`/`reactions.remove`; the
    /// bot token needs `reactions:write`).
    pub reactions: bool,
    /// `edit` and `delete` of the bot's messages (`chat.update`, `chat.delete`).
    pub messages: bool,
}

impl Default for SlackActions {
    fn default() -> Self {
        Self {
            reactions: true,
            messages: true,
        }
    }
}

impl std::fmt::Debug for SlackConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackConfig")
            .field("bot_token", &redacted(self.bot_token.as_ref()))
            .field("bot_token_env", &self.bot_token_env)
            .field("signing_secret", &redacted(self.signing_secret.as_ref()))
            .field("signing_secret_env", &self.signing_secret_env)
            .field("api_base_url", &self.api_base_url)
            .field("owners", &self.owners)
            .field("allow_from", &self.allow_from)
            .field("bot_user_id", &self.bot_user_id)
            .field("groups", &self.groups)
            .field("actions", &self.actions)
            .field("media_max_mb", &self.media_max_mb)
            .finish()
    }
}

/// Why a Slack config could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `botToken` or `signingSecret` is missing, given twice, or names an unset variable.
    #[error("channels.slack: {0}")]
    Secret(#[from] SecretError),
    /// A value is unusable.
    #[error("channels.slack: {0}")]
    Invalid(String),
}

/// A Slack config with its secrets read.
#[derive(Clone, PartialEq, Eq)]
pub struct ResolvedSlack {
    /// The bot token.
    pub bot_token: String,
    /// The signing secret.
    pub signing_secret: String,
    /// Web API base URL, without a trailing `/`.
    pub api_base_url: String,
    /// Owners' user ids.
    pub owners: Vec<String>,
    /// Allowed senders' user ids.
    pub allow_from: Vec<String>,
    /// The bot's own user id, when configured.
    pub bot_user_id: Option<String>,
    /// The `message` tool's action gates.
    pub actions: SlackActions,
    /// Largest inbound file stored, in bytes (`mediaMaxMb`).
    pub media_max_bytes: u64,
}

impl std::fmt::Debug for ResolvedSlack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedSlack")
            .field("bot_token", &REDACTED)
            .field("signing_secret", &REDACTED)
            .field("api_base_url", &self.api_base_url)
            .field("owners", &self.owners)
            .field("allow_from", &self.allow_from)
            .field("bot_user_id", &self.bot_user_id)
            .field("actions", &self.actions)
            .field("media_max_bytes", &self.media_max_bytes)
            .finish()
    }
}

impl ResolvedSlack {
    /// The downloader of the files people share with this bot.
    pub fn media(&self, client: reqwest::Client) -> super::api::SlackMedia {
        super::api::SlackMedia::new(
            client,
            &self.api_base_url,
            &self.bot_token,
            self.media_max_bytes,
        )
    }
}

impl SlackConfig {
    /// Reads the secrets (from the literal fields or through `env`) and checks the rest.
    pub fn resolve(
        &self, env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ResolvedSlack, ConfigError> {
        let bot_token = required_secret(
            "botToken",
            self.bot_token.as_deref(),
            self.bot_token_env.as_deref(),
            env,
        )?;
        let signing_secret = required_secret(
            "signingSecret",
            self.signing_secret.as_deref(),
            self.signing_secret_env.as_deref(),
            env,
        )?;
        let api_base_url = api_base_url(self.api_base_url.as_deref(), DEFAULT_API_BASE_URL)
            .map_err(ConfigError::Invalid)?;
        let bot_user_id = match self.bot_user_id.as_deref().map(str::trim) {
            None => None,
            Some(id) if is_slack_id(id) => Some(id.to_owned()),
            Some(id) => {
                return Err(ConfigError::Invalid(format!(
                    "botUserId {id:?} is not a Slack user id"
                )));
            }
        };
        let media_max_bytes =
            crate::media::media_max_bytes(self.media_max_mb, DEFAULT_MEDIA_MAX_MB)
                .map_err(ConfigError::Invalid)?;
        Ok(ResolvedSlack {
            media_max_bytes,
            bot_token,
            signing_secret,
            api_base_url,
            owners: self.owners.clone(),
            allow_from: self.allow_from.clone(),
            bot_user_id,
            actions: self.actions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let config = SlackConfig {
            bot_token: Some("xoxb-secret-token".to_owned()),
            signing_secret: Some("signing-secret-value".to_owned()),
            ..SlackConfig::default()
        };
        let resolved = config.resolve(&|_| None).unwrap();
        for shown in [format!("{config:?}"), format!("{resolved:?}")] {
            assert!(!shown.contains("xoxb-secret-token"), "{shown}");
            assert!(!shown.contains("signing-secret-value"), "{shown}");
        }
    }
}
