//! Slack's calls as they arrive: the `v0` signature and replay-window check, then the Events
//! API (URL verification, `message` and `app_mention` events) and the interactive endpoint
//! (approval buttons), each classified into a message, an approval, an answer or something
//! ignored; and the chat ids of direct messages and threads.

use std::sync::Arc;

use clawless_base::media::MediaKind;
use clawless_base::session_key::ChatType;
use clawless_core::turn::events::{ChatRef, InboundMessage};
use serde_json::{Value, json};

use super::config::ResolvedSlack;
use super::wire::{Envelope, Interaction, MessageEvent, SharedFile, is_slack_id, valid_token};
use crate::media::{MediaSource, PendingMedia, placeholder_body};
use crate::signature;
use crate::webhook::{
    ChannelApproval, ChannelMessage, MAX_WEBHOOK_BODY_BYTES, PlatformChannel, PlatformReply,
    WebhookError, WebhookOutcome, WebhookRequest, approve_text, parse_approval_button,
};

/// Channel id of Slack (`/webhook/slack`, `ChatRef.channel`).
pub const CHANNEL_ID: &str = "slack";

/// Header carrying `v0=<hex HMAC-SHA256>`.
pub const SIGNATURE_HEADER: &str = "x-slack-signature";

/// Header carrying the Unix seconds the signature covers.
pub const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";

/// Header Slack adds to a redelivery (the body, and so the `event_id`, is unchanged).
pub const RETRY_NUM_HEADER: &str = "x-slack-retry-num";

/// How far a request's timestamp may be from now, either way, before it counts as a replay.
pub const REPLAY_WINDOW_MS: u64 = 5 * 60 * 1000;

/// Sub-path of the interactive endpoint.
pub const INTERACTIVE_SUB_PATH: &str = "interactive";

/// Marks a thread in a chat id: `<channel>:thread:<thread_ts>`.
pub(super) const THREAD_MARKER: &str = ":thread:";

/// Slack's inbound side: signature check, then events and button presses.
#[derive(Clone)]
pub struct SlackChannel {
    signing_secret: Arc<[u8]>,
    bot_user_id: Option<String>,
}

impl std::fmt::Debug for SlackChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackChannel")
            .field("bot_user_id", &self.bot_user_id)
            .finish_non_exhaustive()
    }
}

impl SlackChannel {
    /// A channel checking signatures with `signing_secret`; `bot_user_id` recognises mentions
    /// (when `None`, each event's `authorizations[0].user_id` is used).
    pub fn new(signing_secret: &[u8], bot_user_id: Option<String>) -> Self {
        Self {
            signing_secret: Arc::from(signing_secret),
            bot_user_id,
        }
    }

    /// The channel for a resolved config.
    pub fn from_config(config: &ResolvedSlack) -> Self {
        Self::new(config.signing_secret.as_bytes(), config.bot_user_id.clone())
    }

    fn verify(&self, request: &WebhookRequest<'_>) -> Result<(), WebhookError> {
        let unauthorized = |why: &str| WebhookError::Unauthorized(why.to_owned());
        let header = |name: &str| {
            request
                .headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::trim)
        };
        let timestamp = header(TIMESTAMP_HEADER)
            .ok_or_else(|| unauthorized("missing X-Slack-Request-Timestamp header"))?;
        let signature = header(SIGNATURE_HEADER)
            .ok_or_else(|| unauthorized("missing X-Slack-Signature header"))?;
        if timestamp.is_empty()
            || timestamp.len() > 12
            || !timestamp.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(unauthorized("malformed X-Slack-Request-Timestamp header"));
        }
        let seconds: u64 = timestamp
            .parse()
            .map_err(|_| unauthorized("malformed X-Slack-Request-Timestamp header"))?;
        if seconds.saturating_mul(1000).abs_diff(request.now_ms) > REPLAY_WINDOW_MS {
            return Err(unauthorized(
                "request timestamp is more than 5 minutes from now",
            ));
        }
        let digest = signature.strip_prefix("v0=").ok_or_else(|| {
            unauthorized("malformed X-Slack-Signature header (expected v0=<hex>)")
        })?;
        // Slack signs `v0:<timestamp>:<body>`; the shared helper checks an HMAC-SHA256 in
        // constant time once the base string is built.
        let mut base = Vec::with_capacity(timestamp.len() + request.body.len() + 4);
        base.extend_from_slice(b"v0:");
        base.extend_from_slice(timestamp.as_bytes());
        base.push(b':');
        base.extend_from_slice(request.body);
        signature::verify(
            &self.signing_secret,
            &base,
            Some(&format!("sha256={digest}")),
        )
        .map_err(|err| match err {
            signature::SignatureError::Mismatch => unauthorized("signature does not match"),
            _ => unauthorized("malformed X-Slack-Signature header (expected v0=<hex>)"),
        })
    }

    fn handle_events(&self, body: &[u8]) -> Result<WebhookOutcome, WebhookError> {
        let envelope: Envelope = parse_json(body)?;
        match envelope.kind.as_str() {
            "url_verification" => {
                let challenge = envelope
                    .challenge
                    .filter(|challenge| !challenge.is_empty())
                    .ok_or_else(|| {
                        WebhookError::BadRequest("url_verification without a challenge".to_owned())
                    })?;
                Ok(WebhookOutcome::Respond(PlatformReply::json(
                    json!({ "challenge": challenge }),
                )))
            }
            "event_callback" => {
                let event_id = envelope
                    .event_id
                    .filter(|id| valid_token(id))
                    .ok_or_else(|| {
                        WebhookError::BadRequest(
                            "event_callback without a valid event_id".to_owned(),
                        )
                    })?;
                let event = envelope.event.ok_or_else(|| {
                    WebhookError::BadRequest("event_callback without an event".to_owned())
                })?;
                let bot_user_id = self.bot_user_id.clone().or_else(|| {
                    envelope
                        .authorizations
                        .as_ref()
                        .and_then(|all| all.first())
                        .and_then(|first| first.get("user_id"))
                        .and_then(Value::as_str)
                        .filter(|id| is_slack_id(id))
                        .map(str::to_owned)
                });
                classify_event(event_id, &event, bot_user_id.as_deref())
            }
            other => Ok(WebhookOutcome::Ignored(format!(
                "Slack envelope type {other:?} is not handled"
            ))),
        }
    }

    fn handle_interactive(&self, body: &[u8]) -> Result<WebhookOutcome, WebhookError> {
        let payload = url::form_urlencoded::parse(body)
            .find(|(name, _)| name == "payload")
            .map(|(_, value)| value.into_owned())
            .ok_or_else(|| {
                WebhookError::BadRequest("interactive call without a payload field".to_owned())
            })?;
        let payload: Interaction = parse_json(payload.as_bytes())?;
        if payload.kind != "block_actions" {
            return Ok(WebhookOutcome::Ignored(format!(
                "interaction type {:?} is not handled",
                payload.kind
            )));
        }
        // The first button carrying an approval value; other buttons are not ours.
        let Some((code, decision, action_ts)) = payload.actions.iter().find_map(|action| {
            let (code, decision) = action.value.as_deref().and_then(parse_approval_button)?;
            Some((code, decision, action.action_ts.clone()))
        }) else {
            return Ok(WebhookOutcome::Ignored(
                "no approval button in the interaction".to_owned(),
            ));
        };
        let action_ts = action_ts.filter(|ts| valid_token(ts)).ok_or_else(|| {
            WebhookError::BadRequest("interaction without an action_ts".to_owned())
        })?;
        let user = payload
            .user
            .and_then(|user| user.id)
            .filter(|id| is_slack_id(id))
            .ok_or_else(|| WebhookError::BadRequest("interaction without a user id".to_owned()))?;
        let container = payload.container.unwrap_or_default();
        let message = payload.message.unwrap_or_default();
        let channel = container
            .channel_id
            .or(payload.channel.and_then(|channel| channel.id))
            .filter(|id| is_slack_id(id))
            .ok_or_else(|| {
                WebhookError::BadRequest("interaction without a channel id".to_owned())
            })?;
        let message_ts = container
            .message_ts
            .or(message.ts)
            .filter(|ts| valid_token(ts));
        let thread_ts = container
            .thread_ts
            .or(message.thread_ts)
            .filter(|ts| valid_token(ts))
            .or_else(|| message_ts.clone());
        let chat = chat_ref(
            &channel,
            is_direct_channel(&channel, None),
            thread_ts.as_deref(),
        );
        // Slack redelivers the same payload, so these parts are the same on a retry.
        let event_id = format!(
            "{}:{user}:{action_ts}",
            message_ts.as_deref().unwrap_or(&action_ts)
        );
        Ok(WebhookOutcome::Approval(ChannelApproval {
            event_id,
            message: InboundMessage {
                message_id: format!("{channel}:{action_ts}"),
                chat,
                sender_id: user,
                text: approve_text(&code, decision),
                sender_is_owner: false,
                attachments: Vec::new(),
            },
            code,
            decision,
            ack: PlatformReply {
                status: 200,
                body: Value::Null,
            },
        }))
    }
}

impl PlatformChannel for SlackChannel {
    fn id(&self) -> &'static str {
        CHANNEL_ID
    }

    fn handle(&self, request: &WebhookRequest<'_>) -> Result<WebhookOutcome, WebhookError> {
        if request.body.len() > MAX_WEBHOOK_BODY_BYTES {
            return Err(WebhookError::TooLarge(request.body.len()));
        }
        self.verify(request)?;
        match request.sub_path.trim_matches('/') {
            "" => self.handle_events(request.body),
            INTERACTIVE_SUB_PATH => self.handle_interactive(request.body),
            other => Err(WebhookError::BadRequest(format!(
                "unknown Slack route {other:?}"
            ))),
        }
    }
}

fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, WebhookError> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if path == "." || path.is_empty() {
            WebhookError::BadRequest(format!("invalid body: {inner}"))
        } else {
            WebhookError::BadRequest(format!("invalid body at {path}: {inner}"))
        }
    })?;
    deserializer
        .end()
        .map_err(|err| WebhookError::BadRequest(format!("invalid body: {err}")))?;
    Ok(value)
}

/// DM channels have `channel_type: im` in message events; where that field is absent
/// (`app_mention`, interactions) their `D` prefix tells them apart.
fn is_direct_channel(channel: &str, channel_type: Option<&str>) -> bool {
    match channel_type {
        Some(kind) => kind == "im",
        None => channel.starts_with('D'),
    }
}

fn chat_ref(channel: &str, direct: bool, thread_ts: Option<&str>) -> ChatRef {
    match (direct, thread_ts) {
        (false, Some(thread)) => ChatRef {
            channel: CHANNEL_ID.to_owned(),
            chat_id: format!("{channel}{THREAD_MARKER}{thread}"),
            chat_type: ChatType::Group,
        },
        (false, None) => ChatRef {
            channel: CHANNEL_ID.to_owned(),
            chat_id: channel.to_owned(),
            chat_type: ChatType::Group,
        },
        (true, _) => ChatRef {
            channel: CHANNEL_ID.to_owned(),
            chat_id: channel.to_owned(),
            chat_type: ChatType::Direct,
        },
    }
}

/// True when `text` mentions `bot` (`<@U123>` or `<@U123|name>`).
fn mentions(text: &str, bot: &str) -> bool {
    text.contains(&format!("<@{bot}>")) || text.contains(&format!("<@{bot}|"))
}

/// `text` without a leading mention of the bot, so `@bot /approve …` reads as `/approve …`.
fn strip_leading_mention(text: &str, bot: Option<&str>) -> String {
    let trimmed = text.trim_start();
    if let Some(bot) = bot
        && let Some(rest) = trimmed.strip_prefix("<@")
        && let Some(rest) = rest.strip_prefix(bot)
        && let Some(end) = rest.find('>')
        && (end == 0 || rest.starts_with('|'))
    {
        return rest[end + 1..].trim().to_owned();
    }
    text.trim().to_owned()
}

fn classify_event(
    event_id: String, event: &Value, bot_user_id: Option<&str>,
) -> Result<WebhookOutcome, WebhookError> {
    let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
    let is_mention = match kind {
        "app_mention" => true,
        "message" => false,
        other => {
            return Ok(WebhookOutcome::Ignored(format!(
                "Slack event type {other:?} is not handled"
            )));
        }
    };
    let event: MessageEvent = serde_path_to_error::deserialize(event).map_err(|err| {
        let path = err.path().to_string();
        WebhookError::BadRequest(format!(
            "invalid body at event.{path}: {}",
            err.into_inner()
        ))
    })?;
    if event.bot_id.is_some() {
        return Ok(WebhookOutcome::Ignored("message from a bot".to_owned()));
    }
    match event.subtype.as_deref() {
        None | Some("thread_broadcast" | "file_share") => {}
        Some(subtype) => {
            return Ok(WebhookOutcome::Ignored(format!(
                "message subtype {subtype:?} is not handled"
            )));
        }
    }
    let Some(user) = event.user.filter(|user| is_slack_id(user)) else {
        return Ok(WebhookOutcome::Ignored("message without a user".to_owned()));
    };
    if bot_user_id == Some(user.as_str()) {
        return Ok(WebhookOutcome::Ignored("the bot's own message".to_owned()));
    }
    let channel = event
        .channel
        .filter(|channel| is_slack_id(channel))
        .ok_or_else(|| WebhookError::BadRequest(format!("{kind} event without a channel")))?;
    let ts = event
        .ts
        .filter(|ts| valid_token(ts))
        .ok_or_else(|| WebhookError::BadRequest(format!("{kind} event without a ts")))?;
    let thread_ts = match event.thread_ts {
        Some(thread) if valid_token(&thread) => thread,
        Some(_) => {
            return Err(WebhookError::BadRequest(format!(
                "{kind} event with a malformed thread_ts"
            )));
        }
        None => ts.clone(),
    };
    let text = event.text.unwrap_or_default();
    let direct = !is_mention && is_direct_channel(&channel, event.channel_type.as_deref());
    let addressed_to_bot = if direct || is_mention {
        true
    } else if bot_user_id.is_some_and(|bot| mentions(&text, bot)) {
        return Ok(WebhookOutcome::Ignored("handled as app_mention".to_owned()));
    } else {
        false
    };
    let media = pending_media(&event.files);
    let mut text = strip_leading_mention(&text, bot_user_id);
    if text.is_empty() {
        match placeholder_body(&media) {
            Some(placeholder) => text = placeholder,
            None => return Ok(WebhookOutcome::Ignored("message without text".to_owned())),
        }
    }
    let chat = chat_ref(&channel, direct, Some(&thread_ts));
    Ok(WebhookOutcome::Message(ChannelMessage {
        event_id,
        message: InboundMessage {
            message_id: format!("{channel}:{ts}"),
            chat,
            sender_id: user,
            text,
            sender_is_owner: false,
            attachments: Vec::new(),
        },
        addressed_to_bot,
        ack: PlatformReply::ok(),
        media,
    }))
}

/// The files shared with a message, fetched later from their private URL with the bot token.
fn pending_media(files: &[SharedFile]) -> Vec<PendingMedia> {
    files
        .iter()
        .map(|file| {
            let mime = file.mimetype.clone().filter(|mime| !mime.trim().is_empty());
            PendingMedia {
                kind: mime
                    .as_deref()
                    .map_or(MediaKind::Document, MediaKind::of_mime),
                mime,
                name: file.name.clone(),
                size: file.size,
                source: match (&file.url_private_download, &file.url_private, &file.id) {
                    (Some(url), _, _) | (None, Some(url), _) => MediaSource::Url(url.clone()),
                    // Slack Connect and some shares carry only the id (`file_access:
                    // check_file_info`): `files.info` gives the URL at download time.
                    (None, None, Some(id)) if is_slack_id(id) => MediaSource::SlackFile(id.clone()),
                    _ => MediaSource::Url(String::new()),
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_bot_mentions_are_stripped_and_others_kept() {
        assert_eq!(strip_leading_mention("<@UBOT> hi", Some("UBOT")), "hi");
        assert_eq!(
            strip_leading_mention("<@UBOT|clawless> hi", Some("UBOT")),
            "hi"
        );
        assert_eq!(
            strip_leading_mention("<@UBOTX> hi", Some("UBOT")),
            "<@UBOTX> hi"
        );
        assert_eq!(
            strip_leading_mention("hi <@UBOT>", Some("UBOT")),
            "hi <@UBOT>"
        );
        assert_eq!(strip_leading_mention(" <@UBOT> hi", None), "<@UBOT> hi");
    }
}
