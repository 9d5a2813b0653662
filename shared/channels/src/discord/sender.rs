//! A turn's reply as follow-up messages of the interaction that started it, or, with a bot
//! token and no live interaction, as messages posted to the channel (`nonce` enforced): 2,000
//! characters a message, each claimed once in the inbox, with approval buttons on the last
//! message. Without a bot token, a reply is refused for good once the interaction token has
//! expired. Files (`reply.media`) follow the text, one message each (`multipart/form-data`
//! with `payload_json` and `files[0]`), claimed once like the chunks. A send reports the last
//! text message's id (a bare snowflake, as Discord names it).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_core::outbox::{ActionRequest, Delivery, MessageActionKind, Outbox, OutboxError};
use clawless_core::session::{Claim, Inbox};
use clawless_core::turn::OutboundReply;
use clawless_core::turn::events::{ApprovalDecision, ChatRef};
use serde_json::{Value, json};

use super::api::{
    API_TIMEOUT, BotApi, BotRequest, UPLOAD_TIMEOUT, retry_after_header, status_error,
};
use super::config::{DiscordActions, ResolvedDiscord};
use super::inbound::CHANNEL_ID;
use super::wire::{is_snowflake, is_token, snowflake_created_ms};
use crate::chunk::chunk_text;
use crate::directives::strip_directives;
use crate::multipart::Form;
use crate::webhook::approval_button_value;
use clawless_base::media::OutboundMedia;
use sha2::{Digest, Sha256};

/// Longest message Discord accepts, in characters.
pub const MESSAGE_LIMIT: usize = 2_000;
/// How long an interaction token can send follow-ups.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// How long a sent chunk stays claimed: well past the token's life, so no redelivery can
/// send it twice.
pub(super) const CHUNK_CLAIM_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Largest file a bot may attach to a message in a server without boosts (10 MiB); a larger
/// one is refused.
pub(super) const MAX_FILE_BYTES: usize = 10 << 20;

/// Longest `nonce` Discord takes.
const NONCE_CHARS: usize = 25;

/// Sends a turn's reply as follow-up messages of the interaction that started it: 2,000
/// characters a message, in order, each claimed once in the inbox (`out:discord:<reply id>:<n>`)
/// so a redelivery sends only what is missing.
#[derive(Clone)]
pub struct DiscordSender {
    client: reqwest::Client,
    api_base_url: String,
    application_id: String,
    pub(super) inbox: Arc<dyn Inbox>,
    /// The bot's REST access, when a bot token is configured.
    pub(super) bot: Option<BotApi>,
    pub(super) actions: DiscordActions,
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
            client: client.clone(),
            api_base_url: config.api_base_url.trim_end_matches('/').to_owned(),
            application_id: config.application_id.clone(),
            inbox,
            bot: config.bot_token.as_ref().map(|token| BotApi {
                client: client.clone(),
                api_base: config.api_base_url.trim_end_matches('/').to_owned(),
                bot_token: token.clone(),
            }),
            actions: config.actions,
        }
    }

    /// The bot's REST access, or why `what` cannot be done without it.
    pub(super) fn bot(&self, what: &str) -> Result<&BotApi, OutboxError> {
        self.bot.as_ref().ok_or_else(|| OutboxError::Rejected {
            message: format!(
                "{what} on Discord needs the bot token (channels.discord.botToken or botTokenEnv)"
            ),
        })
    }

    /// Posts `body` to `channel_id` as the bot, with a nonce from `idempotency_key` that
    /// Discord enforces (a repeat within minutes returns the first message); the new message.
    pub(super) async fn post_to_channel(
        &self, channel_id: &str, idempotency_key: &str, mut body: Value,
    ) -> Result<Value, OutboxError> {
        let bot = self.bot("posting to a channel")?;
        body["nonce"] = nonce(idempotency_key).into();
        body["enforce_nonce"] = true.into();
        bot.call(BotRequest {
            method: reqwest::Method::POST,
            path: format!("/channels/{channel_id}/messages"),
            body: Some(&body),
            what: "message post",
            tolerated: &[],
        })
        .await
    }

    /// Sends `body` once under the inbox claim `key` through `post`: `None` when an earlier
    /// try sent it already, else Discord's message. A failure gives the claim back.
    pub(super) async fn send_claimed<F>(
        &self, key: &str, post: F,
    ) -> Result<Option<Value>, OutboxError>
    where
        F: Future<Output = Result<Value, OutboxError>>,
    {
        let claim = self
            .inbox
            .claim(
                key,
                CHUNK_CLAIM_TTL,
                clawless_base::clock::system_now_ms() / 1_000,
            )
            .await
            .map_err(|err| OutboxError::Failed {
                message: format!("cannot claim {key}"),
                source: Some(Box::new(err)),
            })?;
        if claim == Claim::Duplicate {
            tracing::info!(claim = key, "already sent");
            return Ok(None);
        }
        match post.await {
            Ok(message) => Ok(Some(message)),
            Err(err) => {
                if let Err(release) = self.inbox.release(key).await {
                    tracing::warn!(error = %release, claim = key, "could not release a claim");
                }
                Err(err)
            }
        }
    }

    /// Where `reply` goes: the interaction's follow-up while its token lives, else the channel
    /// as the bot; refused when neither can carry it.
    fn route<'a>(&self, reply: &'a OutboundReply) -> Result<Route<'a>, OutboxError> {
        let interaction = interaction_of(reply.in_reply_to.as_deref());
        let expired = interaction.and_then(|(interaction_id, _)| {
            let created_ms = snowflake_created_ms(interaction_id).unwrap_or(0);
            let lifetime_ms = u64::try_from(TOKEN_LIFETIME.as_millis()).unwrap_or(u64::MAX);
            let now = clawless_base::clock::system_now_ms();
            (now > created_ms.saturating_add(lifetime_ms)).then(|| {
                format!(
                    "the Discord interaction {interaction_id} expired {} minutes after the \
                     command ({} minutes ago); the reply cannot be delivered",
                    TOKEN_LIFETIME.as_secs() / 60,
                    now.saturating_sub(created_ms) / 60_000
                )
            })
        });
        match (interaction, expired) {
            (Some((interaction_id, token)), None) => Ok(Route::FollowUp {
                interaction_id,
                token,
            }),
            _ if self.bot.is_some() && is_snowflake(&reply.chat.chat_id) => Ok(Route::Channel {
                channel_id: &reply.chat.chat_id,
            }),
            (_, Some(expired)) => Err(OutboxError::Rejected { message: expired }),
            (None, None) => Err(OutboxError::Rejected {
                message: "a Discord reply needs the interaction that started the turn, and \
                          this one has none (with a bot token, it would go to the channel)"
                    .to_owned(),
            }),
        }
    }

    async fn post_chunk(
        &self, interaction_id: &str, token: &str, body: &Value,
    ) -> Result<Value, OutboxError> {
        self.follow_up(interaction_id, token, FollowUpBody::Json(body))
            .await
    }

    /// Sends `form` (a `payload_json` part and a file) as a follow-up message.
    async fn post_file_follow_up(
        &self, interaction_id: &str, token: &str, form: Form,
    ) -> Result<Value, OutboxError> {
        self.follow_up(interaction_id, token, FollowUpBody::Form(form))
            .await
    }

    /// Sends `body` to the interaction's follow-up webhook; the message it created.
    async fn follow_up(
        &self, interaction_id: &str, token: &str, body: FollowUpBody<'_>,
    ) -> Result<Value, OutboxError> {
        // The token is a credential: it is in the URL, so neither goes into errors or logs.
        let url = format!(
            "{}/webhooks/{}/{token}",
            self.api_base_url, self.application_id
        );
        let request = match body {
            FollowUpBody::Json(body) => self.client.post(url).timeout(API_TIMEOUT).json(body),
            FollowUpBody::Form(form) => {
                let (content_type, body) = form.finish();
                self.client
                    .post(url)
                    .timeout(UPLOAD_TIMEOUT)
                    .header(reqwest::header::CONTENT_TYPE, content_type)
                    .body(body)
            }
        };
        let response = request.send().await.map_err(|err| OutboxError::Failed {
            message: format!("Discord follow-up for interaction {interaction_id} failed"),
            source: Some(Box::new(err.without_url())),
        })?;
        let status = response.status().as_u16();
        let retry_after = retry_after_header(&response);
        let text = response.text().await.unwrap_or_default();
        if (200..300).contains(&status) {
            // A follow-up answers with the message it created.
            return Ok(serde_json::from_str(&text).unwrap_or(Value::Null));
        }
        let what = format!("follow-up for interaction {interaction_id}");
        Err(status_error(&what, status, retry_after, &text))
    }
}

/// What a follow-up carries: a JSON message, or a form with a file.
enum FollowUpBody<'a> {
    Json(&'a Value),
    Form(Form),
}

/// The form that sends `media` as a message's only attachment, with `payload` (the message's
/// other fields) as `payload_json`.
pub(super) fn file_form(media: &OutboundMedia, mut payload: Value) -> Form {
    payload["attachments"] = json!([{ "id": 0, "filename": media.name }]);
    // A model's text must not ping @everyone, roles or users.
    payload["allowed_mentions"] = json!({ "parse": [] });
    Form::new().text("payload_json", &payload.to_string()).file(
        "files[0]",
        &media.name,
        &media.mime,
        &media.bytes,
    )
}

/// Where a reply goes on Discord.
enum Route<'a> {
    /// The follow-up webhook of the interaction that started the turn.
    FollowUp {
        interaction_id: &'a str,
        token: &'a str,
    },
    /// The channel, as the bot.
    Channel { channel_id: &'a str },
}

/// A `nonce` for `key`: the first 25 hex digits of its SHA-256, the same on every retry.
pub(super) fn nonce(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
        .chars()
        .take(NONCE_CHARS)
        .collect()
}

/// The `id` of a message Discord returned.
pub(super) fn message_id_of(message: &Value) -> Option<String> {
    message
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| is_snowflake(id))
        .map(str::to_owned)
}

/// `(interaction id, token)` from a message id `<interaction id>:<token>`.
pub(super) fn interaction_of(in_reply_to: Option<&str>) -> Option<(&str, &str)> {
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
        self.deliver(reply).await.map(|_| ())
    }

    async fn deliver(&self, reply: &OutboundReply) -> Result<Delivery, OutboxError> {
        let (text, directives) = strip_directives(&reply.text);
        if text.is_none() && reply.media.is_empty() {
            tracing::info!(reply_id = %reply.reply_id, "silent reply: nothing sent to Discord");
            return Ok(Delivery::default());
        }
        let route = self.route(reply)?;
        let reply_to = directives
            .reply_to
            .as_deref()
            .map(|id| id.rsplit(':').next().unwrap_or(id))
            .filter(|id| is_snowflake(id));
        let chunks = text
            .as_deref()
            .map(|text| chunk_text(text, MESSAGE_LIMIT))
            .unwrap_or_default();
        let last = chunks.len().saturating_sub(1);
        let mut delivery = Delivery::default();
        for (index, chunk) in chunks.iter().enumerate() {
            let claim_id = format!("out:{CHANNEL_ID}:{}:{index}", reply.reply_id);
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
            let sent = match route {
                Route::FollowUp {
                    interaction_id,
                    token,
                } => {
                    self.send_claimed(&claim_id, self.post_chunk(interaction_id, token, &body))
                        .await?
                }
                Route::Channel { channel_id } => {
                    if index == 0
                        && let Some(message_id) = reply_to
                    {
                        // The message may be gone by now; the answer still goes out.
                        body["message_reference"] =
                            json!({"message_id": message_id, "fail_if_not_exists": false});
                    }
                    self.send_claimed(&claim_id, self.post_to_channel(channel_id, &claim_id, body))
                        .await?
                }
            };
            if index == last {
                delivery.message_id = sent.as_ref().and_then(message_id_of);
            }
        }
        let mut refused = Vec::new();
        for (index, media) in reply.media.iter().enumerate() {
            if media.bytes.len() > MAX_FILE_BYTES {
                refused.push(format!(
                    "{:?} ({} bytes) is larger than the {} MiB Discord takes from a bot",
                    media.name,
                    media.bytes.len(),
                    MAX_FILE_BYTES >> 20
                ));
                continue;
            }
            let claim_id = format!("out:{CHANNEL_ID}:{}:media:{index}", reply.reply_id);
            let sent = match route {
                Route::FollowUp {
                    interaction_id,
                    token,
                } => {
                    let form = file_form(media, json!({}));
                    self.send_claimed(
                        &claim_id,
                        self.post_file_follow_up(interaction_id, token, form),
                    )
                    .await?
                }
                Route::Channel { channel_id } => {
                    let bot = self.bot("posting a file to a channel")?;
                    let mut payload = json!({ "nonce": nonce(&claim_id), "enforce_nonce": true });
                    if chunks.is_empty()
                        && index == 0
                        && let Some(message_id) = reply_to
                    {
                        // A reply of files only answers with its first file.
                        payload["message_reference"] =
                            json!({"message_id": message_id, "fail_if_not_exists": false});
                    }
                    let path = format!("/channels/{channel_id}/messages");
                    let post = bot.post_form(&path, file_form(media, payload), "file post");
                    self.send_claimed(&claim_id, post).await?
                }
            };
            if chunks.is_empty() {
                delivery.message_id = sent.as_ref().and_then(message_id_of);
            }
        }
        tracing::info!(
            reply_id = %reply.reply_id,
            chunks = chunks.len(),
            files = reply.media.len() - refused.len(),
            "Discord reply delivered"
        );
        if refused.is_empty() {
            Ok(delivery)
        } else {
            Err(OutboxError::Rejected {
                message: refused.join("; "),
            })
        }
    }

    fn message_actions(&self, _channel: &str) -> Vec<MessageActionKind> {
        self.enabled_actions()
    }

    async fn resolve_target(
        &self, channel: &str, target: &str, thread_id: Option<&str>,
    ) -> Result<ChatRef, OutboxError> {
        self.resolve(channel, target, thread_id).await
    }

    async fn act(&self, request: &ActionRequest) -> Result<Delivery, OutboxError> {
        self.carry_out(request).await
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
