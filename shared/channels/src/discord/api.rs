//! Discord's REST API as the CLI uses it: registering the slash commands
//! (`PUT /applications/{id}/commands`), and the excerpt of an error body kept in messages.

use std::time::Duration;

use serde_json::Value;

use super::wire::is_snowflake;

/// Discord's API, when the config names none.
pub const DEFAULT_API_BASE_URL: &str = "https://discord.com/api/v10";

/// How long one Discord API call may take.
pub(super) const API_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest excerpt of Discord's error body kept in an error message.
const MAX_ERROR_EXCERPT: usize = 300;

/// Why a call to Discord's API failed.
#[derive(Debug, thiserror::Error)]
pub enum DiscordApiError {
    /// The request was not sent or not answered.
    #[error("Discord API {what} failed: {source}")]
    Transport {
        /// What was being done.
        what: &'static str,
        /// The client error.
        #[source]
        source: reqwest::Error,
    },
    /// Discord answered with an error status.
    #[error("Discord API {what} answered HTTP {status}: {message}")]
    Status {
        /// What was being done.
        what: &'static str,
        /// The HTTP status.
        status: u16,
        /// Discord's message (an excerpt).
        message: String,
    },
    /// An argument cannot be put in a URL.
    #[error("{0}")]
    Invalid(String),
}

/// Registers `definitions` as the application's global commands, replacing the ones there
/// (`PUT {api_base}/applications/{application_id}/commands` with `Authorization: Bot …`).
pub async fn register_commands(
    client: &reqwest::Client, api_base: &str, application_id: &str, bot_token: &str,
    definitions: &[Value],
) -> Result<(), DiscordApiError> {
    if !is_snowflake(application_id) {
        return Err(DiscordApiError::Invalid(
            "the application id must be numeric".to_owned(),
        ));
    }
    let what = "command registration";
    let url = format!(
        "{}/applications/{application_id}/commands",
        api_base.trim_end_matches('/')
    );
    let response = client
        .put(url)
        .timeout(API_TIMEOUT)
        .header(reqwest::header::AUTHORIZATION, format!("Bot {bot_token}"))
        .json(definitions)
        .send()
        .await
        .map_err(|source| DiscordApiError::Transport {
            what,
            source: source.without_url(),
        })?;
    let status = response.status();
    if status.is_success() {
        tracing::info!(commands = definitions.len(), "Discord commands registered");
        Ok(())
    } else {
        let body = response.text().await.unwrap_or_default();
        Err(DiscordApiError::Status {
            what,
            status: status.as_u16(),
            message: error_excerpt(&body),
        })
    }
}

/// Discord's `message` from an error body, or the start of the body.
pub(super) fn error_excerpt(body: &str) -> String {
    let message = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|json| {
            json.get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| body.to_owned());
    message.chars().take(MAX_ERROR_EXCERPT).collect()
}
