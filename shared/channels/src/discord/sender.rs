//! A turn's reply as follow-up messages of the interaction that started it: 2,000 characters
//! a message, each claimed once in the inbox, refused for good once the interaction token has
//! expired, with approval buttons on the last message.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_core::outbox::{Outbox, OutboxError};
use clawless_core::session::{Claim, Inbox};
use clawless_core::turn::OutboundReply;
use clawless_core::turn::events::ApprovalDecision;
use serde_json::{Value, json};

use super::api::{API_TIMEOUT, error_excerpt};
use super::config::ResolvedDiscord;
use super::inbound::CHANNEL_ID;
use super::wire::{is_snowflake, is_token, snowflake_created_ms};
use crate::chunk::chunk_text;
use crate::directives::strip_directives;
use crate::webhook::approval_button_value;

/// Longest message Discord accepts, in characters.
pub const MESSAGE_LIMIT: usize = 2_000;
/// How long an interaction token can send follow-ups.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// How long a sent chunk stays claimed: well past the token's life, so no redelivery can
/// send it twice.
const CHUNK_CLAIM_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Sends a turn's reply as follow-up messages of the interaction that started it: 2,000
/// characters a message, in order, each claimed once in the inbox (`out:discord:<reply id>:<n>`)
/// so a redelivery sends only what is missing.
#[derive(Clone)]
pub struct DiscordSender {
    client: reqwest::Client,
    api_base_url: String,
    application_id: String,
    inbox: Arc<dyn Inbox>,
}

impl std::fmt::Debug for DiscordSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordSender")
            .field("api_base_url", &self.api_base_url)
            .field("application_id", &self.application_id)
            .finish_non_exhaustive()
    }
}

impl DiscordSender {
    /// A sender for `config`'s application, claiming chunks in `inbox`.
    pub fn new(client: reqwest::Client, config: &ResolvedDiscord, inbox: Arc<dyn Inbox>) -> Self {
        Self {
            client,
            api_base_url: config.api_base_url.trim_end_matches('/').to_owned(),
            application_id: config.application_id.clone(),
            inbox,
        }
    }

    async fn post_chunk(
        &self, interaction_id: &str, token: &str, body: &Value,
    ) -> Result<(), OutboxError> {
        // The token is a credential: it is in the URL, so neither goes into errors or logs.
        let url = format!(
            "{}/webhooks/{}/{token}",
            self.api_base_url, self.application_id
        );
        let response = self
            .client
            .post(url)
            .timeout(API_TIMEOUT)
            .json(body)
            .send()
            .await
            .map_err(|err| OutboxError::Failed {
                message: format!("Discord follow-up for interaction {interaction_id} failed"),
                source: Some(Box::new(err.without_url())),
            })?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let text = response.text().await.unwrap_or_default();
        let summary = format!(
            "Discord follow-up for interaction {interaction_id} answered HTTP {}: {}",
            status.as_u16(),
            error_excerpt(&text)
        );
        match status.as_u16() {
            400 | 401 | 403 | 404 => Err(OutboxError::Rejected { message: summary }),
            429 => {
                let retry_after = serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|json| json.get("retry_after").and_then(Value::as_f64))
                    .map(|secs| format!("{secs}"))
                    .or(retry_after)
                    .unwrap_or_else(|| "?".to_owned());
                Err(failed(format!("{summary} (retry after {retry_after} s)")))
            }
            _ => Err(failed(summary)),
        }
    }
}

fn failed(message: String) -> OutboxError {
    OutboxError::Failed {
        message,
        source: None,
    }
}

/// `(interaction id, token)` from a message id `<interaction id>:<token>`.
fn interaction_of(in_reply_to: Option<&str>) -> Option<(&str, &str)> {
    let (id, token) = in_reply_to?.split_once(':')?;
    (is_snowflake(id) && is_token(token)).then_some((id, token))
}

/// The action row of approval buttons for `code`.
fn approval_buttons(code: &str) -> Value {
    let button = |label: &str, style: u64, decision: ApprovalDecision| {
        json!({
            "type": 2,
            "style": style,
            "label": label,
            "custom_id": approval_button_value(code, decision),
        })
    };
    json!({
        "type": 1,
        "components": [
            button("Allow once", 3, ApprovalDecision::AllowOnce),
            button("Always allow", 1, ApprovalDecision::AllowAlways),
            button("Deny", 4, ApprovalDecision::Deny),
        ],
    })
}

#[async_trait]
impl Outbox for DiscordSender {
    async fn send(&self, reply: &OutboundReply) -> Result<(), OutboxError> {
        let (text, _directives) = strip_directives(&reply.text);
        let Some(text) = text else {
            tracing::info!(reply_id = %reply.reply_id, "silent reply: nothing sent to Discord");
            return Ok(());
        };
        let (interaction_id, token) =
            interaction_of(reply.in_reply_to.as_deref()).ok_or_else(|| OutboxError::Rejected {
                message: "a Discord reply needs the interaction that started the turn, and \
                          this one has none"
                    .to_owned(),
            })?;
        let created_ms = snowflake_created_ms(interaction_id).unwrap_or(0);
        let lifetime_ms = u64::try_from(TOKEN_LIFETIME.as_millis()).unwrap_or(u64::MAX);
        let now = clawless_base::clock::system_now_ms();
        if now > created_ms.saturating_add(lifetime_ms) {
            return Err(OutboxError::Rejected {
                message: format!(
                    "the Discord interaction {interaction_id} expired {} minutes after the \
                     command ({} minutes ago); the reply cannot be delivered",
                    TOKEN_LIFETIME.as_secs() / 60,
                    now.saturating_sub(created_ms) / 60_000
                ),
            });
        }
        let chunks = chunk_text(&text, MESSAGE_LIMIT);
        let last = chunks.len().saturating_sub(1);
        for (index, chunk) in chunks.iter().enumerate() {
            let claim_id = format!("out:{CHANNEL_ID}:{}:{index}", reply.reply_id);
            let claim = self
                .inbox
                .claim(
                    &claim_id,
                    CHUNK_CLAIM_TTL,
                    clawless_base::clock::system_now_ms() / 1_000,
                )
                .await
                .map_err(|err| OutboxError::Failed {
                    message: format!("cannot claim {claim_id}"),
                    source: Some(Box::new(err)),
                })?;
            if claim == Claim::Duplicate {
                continue;
            }
            let mut body = json!({
                "content": chunk,
                // A model's text must not ping @everyone, roles or users.
                "allowed_mentions": { "parse": [] },
            });
            if index == last
                && let Some(code) = &reply.approval_code
            {
                body["components"] = json!([approval_buttons(code)]);
            }
            if let Err(err) = self.post_chunk(interaction_id, token, &body).await {
                if let Err(release) = self.inbox.release(&claim_id).await {
                    tracing::warn!(error = %release, claim_id, "could not release a chunk claim");
                }
                return Err(err);
            }
        }
        tracing::info!(
            reply_id = %reply.reply_id,
            chunks = chunks.len(),
            "Discord reply delivered"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interaction_ids_come_back_from_the_message_id() {
        assert_eq!(
            interaction_of(Some("123:abc.DEF-_")),
            Some(("123", "abc.DEF-_"))
        );
        for junk in ["", "123", "abc:tok", "123:", "123:to/../ken", "123:a b"] {
            assert_eq!(interaction_of(Some(junk)), None, "{junk:?}");
        }
        assert_eq!(interaction_of(None), None);
    }
}
