//! Read-only questions to the platforms about how a deployment is registered with them, for
//! `clawless doctor`: where Telegram delivers the bot's updates (`getWebhookInfo`), whether
//! Slack accepts the bot token (`auth.test`), and which commands Discord knows for the
//! application. Nothing here changes a registration; `clawless channels …` does that.

use std::time::Duration;

use serde_json::{Value, json};

/// How long one probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest excerpt of a platform's error kept in a [`ProbeError`].
const MAX_EXCERPT_CHARS: usize = 200;

/// Why a probe got no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The platform could not be reached (the URL, which may hold a token, is left out).
    #[error("{what}: the platform could not be reached: {source}")]
    Transport {
        /// The call.
        what: &'static str,
        /// What failed.
        #[source]
        source: reqwest::Error,
    },
    /// The platform answered with an error status or refused the call.
    #[error("{what}: {message}")]
    Refused {
        /// The call.
        what: &'static str,
        /// The platform's status and error, excerpted.
        message: String,
    },
    /// An argument cannot be put in a URL.
    #[error("{0}")]
    Invalid(String),
}

/// Where Telegram delivers the bot's updates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelegramWebhookInfo {
    /// The webhook URL; empty when none is set.
    pub url: String,
    /// Updates waiting to be delivered.
    pub pending_update_count: u64,
    /// The last delivery error Telegram saw, if any.
    pub last_error_message: Option<String>,
}

/// Who a Slack bot token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlackIdentity {
    /// The workspace's name.
    pub team: Option<String>,
    /// The bot's user id.
    pub user_id: Option<String>,
}

fn excerpt(text: &str) -> String {
    text.chars().take(MAX_EXCERPT_CHARS).collect()
}

async fn json_answer(
    what: &'static str, request: reqwest::RequestBuilder,
) -> Result<(u16, Value), ProbeError> {
    let response =
        request
            .timeout(PROBE_TIMEOUT)
            .send()
            .await
            .map_err(|err| ProbeError::Transport {
                what,
                source: err.without_url(),
            })?;
    let status = response.status().as_u16();
    let text = response.text().await.map_err(|err| ProbeError::Transport {
        what,
        source: err.without_url(),
    })?;
    match serde_json::from_str(&text) {
        Ok(value) => Ok((status, value)),
        Err(_) => Err(ProbeError::Refused {
            what,
            message: format!("HTTP {status}, not JSON: {}", excerpt(&text)),
        }),
    }
}

/// Asks Telegram for the bot's webhook (`getWebhookInfo`).
pub async fn telegram_webhook_info(
    client: &reqwest::Client, api_base: &str, bot_token: &str,
) -> Result<TelegramWebhookInfo, ProbeError> {
    let what = "Telegram getWebhookInfo";
    let url = format!(
        "{}/bot{bot_token}/getWebhookInfo",
        api_base.trim_end_matches('/')
    );
    let (status, answer) = json_answer(what, client.post(url).json(&json!({}))).await?;
    if !(200..300).contains(&status) || answer["ok"] != Value::Bool(true) {
        let description = answer["description"].as_str().unwrap_or("no description");
        return Err(ProbeError::Refused {
            what,
            message: format!("HTTP {status}: {}", excerpt(description)),
        });
    }
    let result = &answer["result"];
    Ok(TelegramWebhookInfo {
        url: result["url"].as_str().unwrap_or_default().to_owned(),
        pending_update_count: result["pending_update_count"].as_u64().unwrap_or(0),
        last_error_message: result["last_error_message"].as_str().map(excerpt),
    })
}

/// Checks a Slack bot token (`auth.test`).
pub async fn slack_auth_test(
    client: &reqwest::Client, api_base: &str, bot_token: &str,
) -> Result<SlackIdentity, ProbeError> {
    let what = "Slack auth.test";
    let url = format!("{}/auth.test", api_base.trim_end_matches('/'));
    let (status, answer) = json_answer(what, client.post(url).bearer_auth(bot_token)).await?;
    if !(200..300).contains(&status) || answer["ok"] != Value::Bool(true) {
        let error = answer["error"].as_str().unwrap_or("no error given");
        return Err(ProbeError::Refused {
            what,
            message: format!("HTTP {status}: {}", excerpt(error)),
        });
    }
    let field = |name: &str| answer[name].as_str().map(str::to_owned);
    Ok(SlackIdentity {
        team: field("team"),
        user_id: field("user_id"),
    })
}

/// The names of the application's global commands on Discord
/// (`GET {api_base}/applications/{application_id}/commands`).
pub async fn discord_command_names(
    client: &reqwest::Client, api_base: &str, application_id: &str, bot_token: &str,
) -> Result<Vec<String>, ProbeError> {
    let what = "Discord application commands";
    if application_id.is_empty() || !application_id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ProbeError::Invalid(
            "the application id must be numeric".to_owned(),
        ));
    }
    let url = format!(
        "{}/applications/{application_id}/commands",
        api_base.trim_end_matches('/')
    );
    let request = client
        .get(url)
        .header(reqwest::header::AUTHORIZATION, format!("Bot {bot_token}"));
    let (status, answer) = json_answer(what, request).await?;
    match answer.as_array() {
        Some(commands) if (200..300).contains(&status) => Ok(commands
            .iter()
            .filter_map(|command| command["name"].as_str().map(str::to_owned))
            .collect()),
        _ => Err(ProbeError::Refused {
            what,
            message: format!(
                "HTTP {status}: {}",
                excerpt(answer["message"].as_str().unwrap_or("unexpected answer"))
            ),
        }),
    }
}
