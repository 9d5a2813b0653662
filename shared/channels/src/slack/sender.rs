//! Replies with `chat.postMessage`: one message a chunk, each claimed once in the inbox, in
//! the thread the chat id names, with approval buttons (Block Kit) under the last chunk. A
//! send reports the last message as `<channel>:<ts>`, the form inbound messages carry, so the
//! `message` tool's actions (in `actions`) can point at it. Files (`reply.media`) follow the
//! text through Slack's external upload flow, each claimed once like the chunks.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_core::outbox::{ActionRequest, Delivery, MessageActionKind, Outbox, OutboxError};
use clawless_core::session::{Claim, Inbox};
use clawless_core::turn::OutboundReply;
use clawless_core::turn::events::{ApprovalDecision, ChatRef};
use serde_json::{Value, json};

use super::api::{Post, post_message, upload_file};
use super::config::{ResolvedSlack, SlackActions};
use super::inbound::{CHANNEL_ID, THREAD_MARKER};
use super::wire::{is_slack_id, valid_token};
use crate::chunk::chunk_text;
use crate::directives::strip_directives;
use crate::webhook::{approval_button_value, parse_approval_button};

/// Longest text sent in one message (Slack truncates `text` well above this; 4,000 keeps
/// each message readable and under every documented limit).
pub const MAX_MESSAGE_CHARS: usize = 4_000;

/// Longest text in a `section` block (Slack's limit); an approval reply, whose last message
/// carries its text in a block next to the buttons, is cut to this.
pub const MAX_SECTION_CHARS: usize = 3_000;

/// How long a sent chunk stays claimed, so a resend of the same reply skips it.
const CHUNK_CLAIM_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Sends replies with `chat.postMessage`, one message per chunk, each chunk claimed in the
/// inbox first so a resend of the same reply only sends what is missing.
#[derive(Clone)]
pub struct SlackSender {
    client: reqwest::Client,
    api_base_url: String,
    bot_token: Arc<str>,
    inbox: Arc<dyn Inbox>,
    actions: SlackActions,
}

impl std::fmt::Debug for SlackSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackSender")
            .field("api_base_url", &self.api_base_url)
            .finish_non_exhaustive()
    }
}

impl SlackSender {
    /// A sender posting to `api_base_url` (e.g.
    /// [`DEFAULT_API_BASE_URL`](super::DEFAULT_API_BASE_URL)) with `bot_token`, claiming
    /// chunks in `inbox`.
    pub fn new(
        client: reqwest::Client, api_base_url: &str, bot_token: &str, inbox: Arc<dyn Inbox>,
    ) -> Self {
        Self {
            client,
            api_base_url: api_base_url.trim_end_matches('/').to_owned(),
            bot_token: Arc::from(bot_token),
            inbox,
            actions: SlackActions::default(),
        }
    }

    /// The same sender with the `message` tool's action gates `actions` (all on by default).
    pub fn with_actions(mut self, actions: SlackActions) -> Self {
        self.actions = actions;
        self
    }

    /// The action gates.
    pub(super) fn actions(&self) -> SlackActions {
        self.actions
    }

    /// Calls the Web API `method` as the bot (see [`super::api::call`]).
    pub(super) async fn call(
        &self, method: &str, body: &Value, tolerated: &[&str],
    ) -> Result<Value, OutboxError> {
        super::api::call(
            &self.client,
            &self.api_base_url,
            &self.bot_token,
            method,
            body,
            tolerated,
        )
        .await
    }

    /// Uploads `media` into `channel` (in thread `thread_ts`) with `comment` once under the
    /// inbox claim `key`: `false` when an earlier try did. A failure gives the claim back.
    pub(super) async fn upload_claimed(
        &self, key: &str, channel: &str, thread_ts: Option<&str>,
        media: &clawless_base::media::OutboundMedia, comment: Option<&str>,
    ) -> Result<bool, OutboxError> {
        if !self.claim(key).await? {
            return Ok(false);
        }
        let upload = upload_file(
            &self.client,
            &self.api_base_url,
            &self.bot_token,
            channel,
            thread_ts,
            media,
            comment,
        )
        .await;
        if let Err(err) = upload {
            if let Err(release) = self.inbox.release(key).await {
                tracing::warn!(%key, error = %release, "could not release a file claim");
            }
            return Err(err);
        }
        Ok(true)
    }

    /// The sender for a resolved config.
    pub fn from_config(
        client: reqwest::Client, config: &ResolvedSlack, inbox: Arc<dyn Inbox>,
    ) -> Self {
        Self::new(client, &config.api_base_url, &config.bot_token, inbox)
            .with_actions(config.actions)
    }
}

/// The Block Kit blocks of an approval message: its text, then one button per decision.
fn approval_blocks(text: &str, code: &str) -> Value {
    let button = |label: &str, decision: ApprovalDecision, action: &str, style: Option<&str>| {
        let mut button = json!({
            "type": "button",
            "text": { "type": "plain_text", "text": label },
            "action_id": format!("clawless_approve_{action}"),
            "value": approval_button_value(code, decision),
        });
        if let Some(style) = style {
            button["style"] = json!(style);
        }
        button
    };
    json!([
        { "type": "section", "text": { "type": "mrkdwn", "text": text } },
        {
            "type": "actions",
            "block_id": format!("clawless_approval_{code}"),
            "elements": [
                button("Allow once", ApprovalDecision::AllowOnce, "allow_once", Some("primary")),
                button("Always allow", ApprovalDecision::AllowAlways, "allow_always", None),
                button("Deny", ApprovalDecision::Deny, "deny", Some("danger")),
            ],
        },
    ])
}

/// `<channel>:thread:<ts>` split into the channel and the thread; a plain id has no thread.
pub(super) fn split_chat_id(chat_id: &str) -> (&str, Option<&str>) {
    match chat_id.split_once(THREAD_MARKER) {
        Some((channel, thread)) => (channel, Some(thread)),
        None => (chat_id, None),
    }
}

fn now_unix() -> u64 {
    clawless_base::clock::system_now_ms() / 1_000
}

impl SlackSender {
    /// Claims `key` in the inbox: `false` when an earlier try sent it already.
    async fn claim(&self, key: &str) -> Result<bool, OutboxError> {
        let claim = self
            .inbox
            .claim(key, CHUNK_CLAIM_TTL, now_unix())
            .await
            .map_err(|err| OutboxError::Failed {
                message: format!("could not claim {key}"),
                source: Some(Box::new(err)),
            })?;
        if claim == Claim::Duplicate {
            tracing::debug!(%key, "already sent");
        }
        Ok(claim == Claim::Claimed)
    }
}

#[async_trait]
impl Outbox for SlackSender {
    async fn send(&self, reply: &OutboundReply) -> Result<(), OutboxError> {
        self.deliver(reply).await.map(|_| ())
    }

    async fn deliver(&self, reply: &OutboundReply) -> Result<Delivery, OutboxError> {
        let (visible, _directives) = strip_directives(&reply.text);
        let text = match (visible, reply.approval_code.as_deref()) {
            (Some(text), _) => text,
            // The buttons still need a message to sit on.
            (None, Some(code)) => format!("Approval `{code}` is waiting for an answer."),
            (None, None) if reply.media.is_empty() => return Ok(Delivery::default()),
            // Only files: no text message.
            (None, None) => String::new(),
        };
        let (channel, thread_ts) = split_chat_id(&reply.chat.chat_id);
        if !is_slack_id(channel) || thread_ts.is_some_and(|thread| !valid_token(thread)) {
            return Err(OutboxError::Rejected {
                message: format!("{:?} is not a Slack chat id", reply.chat.chat_id),
            });
        }
        // A code the buttons could not carry back (the core makes 8 alphanumerics) gets no
        // buttons; the text still says how to answer with `/approve`.
        let approval = reply.approval_code.as_deref().filter(|code| {
            let usable =
                parse_approval_button(&approval_button_value(code, ApprovalDecision::Deny))
                    .is_some_and(|(parsed, _)| parsed == *code);
            if !usable {
                tracing::warn!(reply_id = %reply.reply_id, "approval code unusable in a button");
            }
            usable
        });
        let limit = if approval.is_some() {
            MAX_SECTION_CHARS
        } else {
            MAX_MESSAGE_CHARS
        };
        let chunks = if text.is_empty() {
            Vec::new()
        } else {
            chunk_text(&text, limit)
        };
        let last = chunks.len().saturating_sub(1);
        let mut delivery = Delivery::default();
        for (index, chunk) in chunks.iter().enumerate() {
            let key = format!("out:{CHANNEL_ID}:{}:{index}", reply.reply_id);
            let claim = self
                .inbox
                .claim(&key, CHUNK_CLAIM_TTL, now_unix())
                .await
                .map_err(|err| OutboxError::Failed {
                    message: format!("could not claim {key}"),
                    source: Some(Box::new(err)),
                })?;
            if claim == Claim::Duplicate {
                tracing::debug!(%key, "chunk already sent");
                continue;
            }
            let blocks = approval
                .filter(|_| index == last)
                .map(|code| approval_blocks(chunk, code));
            let post = Post {
                channel,
                thread_ts,
                text: chunk,
                blocks,
            };
            match post_message(&self.client, &self.api_base_url, &self.bot_token, &post).await {
                Ok(answer) => {
                    if index == last {
                        delivery.message_id = message_ref(&answer, channel);
                    }
                }
                Err(err) => {
                    // Give the claim back so a redelivery sends this chunk again.
                    if let Err(release) = self.inbox.release(&key).await {
                        tracing::warn!(%key, error = %release, "could not release a chunk claim");
                    }
                    return Err(err);
                }
            }
        }
        for (index, media) in reply.media.iter().enumerate() {
            let key = format!("out:{CHANNEL_ID}:{}:media:{index}", reply.reply_id);
            if !self.claim(&key).await? {
                continue;
            }
            let upload = upload_file(
                &self.client,
                &self.api_base_url,
                &self.bot_token,
                channel,
                thread_ts,
                media,
                None,
            )
            .await;
            if let Err(err) = upload {
                if let Err(release) = self.inbox.release(&key).await {
                    tracing::warn!(%key, error = %release, "could not release a file claim");
                }
                return Err(err);
            }
        }
        tracing::info!(
            reply_id = %reply.reply_id,
            chunks = chunks.len(),
            files = reply.media.len(),
            "Slack reply delivered"
        );
        Ok(delivery)
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

/// `<channel>:<ts>` of a posted message (Slack's answer names the channel; a post to a user id
/// lands in their DM, whose `D…` id is the one actions need), with `channel` as the fallback.
fn message_ref(answer: &Value, channel: &str) -> Option<String> {
    let ts = answer.get("ts").and_then(Value::as_str)?;
    let channel = answer
        .get("channel")
        .and_then(Value::as_str)
        .unwrap_or(channel);
    Some(format!("{channel}:{ts}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_ids_split_into_channel_and_thread() {
        assert_eq!(split_chat_id("C1:thread:17.5"), ("C1", Some("17.5")));
        assert_eq!(split_chat_id("D1"), ("D1", None));
    }
}
