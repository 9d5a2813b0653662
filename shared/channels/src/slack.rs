//! Slack: the Events API webhook (`POST /webhook/slack`) and its interactive sub-route
//! (`POST /webhook/slack/interactive`, approval buttons), checked with Slack's `v0` request
//! signature, and replies sent with `chat.postMessage`.
//!
//! Conversations map to sessions like this: a direct message (`channel_type: im`) is a
//! direct chat keyed by its channel id; in a channel, every thread is its own group session,
//! `<channel>:thread:<thread_ts>`, and a top-level channel message starts a thread keyed by
//! its own `ts`, so the reply lands in that thread.
//!
//! Slack sends both a `message` and an `app_mention` event when someone mentions the bot in a
//! channel; the `app_mention` one starts the turn and the `message` one is ignored, so one
//! mention is one turn.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use clawless_base::session_key::ChatType;
use clawless_core::outbox::{Outbox, OutboxError};
use clawless_core::session::{Claim, Inbox};
use clawless_core::turn::OutboundReply;
use clawless_core::turn::events::{ApprovalDecision, ChatRef, InboundMessage};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::chunk::chunk_text;
use crate::config_values::{SecretLookup, api_base_url, required_secret};
use crate::directives::strip_directives;
use crate::signature;
use crate::webhook::{
    ChannelApproval, ChannelMessage, MAX_WEBHOOK_BODY_BYTES, PlatformChannel, PlatformReply,
    WebhookError, WebhookOutcome, WebhookRequest, approval_button_value, approve_text,
    parse_approval_button,
};

/// Channel id of Slack (`/webhook/slack`, `ChatRef.channel`).
pub const CHANNEL_ID: &str = "slack";

/// Where the Web API lives unless the config says otherwise.
pub const DEFAULT_API_BASE_URL: &str = "https://slack.com/api";

/// Header carrying `v0=<hex HMAC-SHA256>`.
pub const SIGNATURE_HEADER: &str = "x-slack-signature";

/// Header carrying the Unix seconds the signature covers.
pub const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";

/// Header Slack adds to a redelivery (the body, and so the `event_id`, is unchanged).
pub const RETRY_NUM_HEADER: &str = "x-slack-retry-num";

/// How far a request's timestamp may be from now, either way, before it counts as a replay.
pub const REPLAY_WINDOW_MS: u64 = 5 * 60 * 1000;

/// Longest text sent in one message (Slack truncates `text` well above this; 4,000 keeps
/// each message readable and under every documented limit).
pub const MAX_MESSAGE_CHARS: usize = 4_000;

/// Longest text in a `section` block (Slack's limit); an approval reply, whose last message
/// carries its text in a block next to the buttons, is cut to this.
pub const MAX_SECTION_CHARS: usize = 3_000;

/// Sub-path of the interactive endpoint.
pub const INTERACTIVE_SUB_PATH: &str = "interactive";

/// How long a sent chunk stays claimed, so a resend of the same reply skips it.
const CHUNK_CLAIM_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// How long one `chat.postMessage` call may take.
const POST_TIMEOUT: Duration = Duration::from_secs(10);

/// Marks a thread in a chat id: `<channel>:thread:<thread_ts>`.
const THREAD_MARKER: &str = ":thread:";

/// Slack `error` codes that no retry can fix.
const PERMANENT_ERRORS: &[&str] = &[
    "channel_not_found",
    "not_in_channel",
    "is_archived",
    "invalid_auth",
    "account_inactive",
    "msg_too_long",
    "token_revoked",
    "not_authed",
    "missing_scope",
    "no_text",
    "invalid_blocks",
    "invalid_blocks_format",
    "invalid_arguments",
    "restricted_action",
];

// ---------------------------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------------------------

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
}

fn redacted(secret: Option<&String>) -> Option<&'static str> {
    secret.map(|_| "<redacted>")
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
            .finish()
    }
}

/// Why a Slack config could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Neither the literal nor the `…Env` field is set.
    #[error("channels.slack: set {field} or {field}Env")]
    Missing {
        /// The field, e.g. `botToken`.
        field: &'static str,
    },
    /// Both the literal and the `…Env` field are set.
    #[error("channels.slack: set only one of {field} and {field}Env")]
    Both {
        /// The field, e.g. `botToken`.
        field: &'static str,
    },
    /// The named environment variable is unset or empty.
    #[error("channels.slack: {field}Env names {var}, which is not set")]
    EnvUnset {
        /// The field, e.g. `botToken`.
        field: &'static str,
        /// The variable's name.
        var: String,
    },
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
}

impl std::fmt::Debug for ResolvedSlack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedSlack")
            .field("bot_token", &"<redacted>")
            .field("signing_secret", &"<redacted>")
            .field("api_base_url", &self.api_base_url)
            .field("owners", &self.owners)
            .field("allow_from", &self.allow_from)
            .field("bot_user_id", &self.bot_user_id)
            .finish()
    }
}

impl SlackConfig {
    /// Reads the secrets (from the literal fields or through `env`) and checks the rest.
    pub fn resolve(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ResolvedSlack, ConfigError> {
        let bot_token = pick_secret(
            "botToken",
            self.bot_token.as_deref(),
            self.bot_token_env.as_deref(),
            env,
        )?;
        let signing_secret = pick_secret(
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
        Ok(ResolvedSlack {
            bot_token,
            signing_secret,
            api_base_url,
            owners: self.owners.clone(),
            allow_from: self.allow_from.clone(),
            bot_user_id,
        })
    }
}

fn pick_secret(
    field: &'static str,
    literal: Option<&str>,
    env_name: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ConfigError> {
    required_secret(literal, env_name, env).map_err(|lookup| match lookup {
        SecretLookup::Missing => ConfigError::Missing { field },
        SecretLookup::Both => ConfigError::Both { field },
        SecretLookup::EnvUnset(var) => ConfigError::EnvUnset { field, var },
    })
}

/// Slack ids (users, channels, teams) are short upper-case alphanumerics.
fn is_slack_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 32 && id.chars().all(|c| c.is_ascii_alphanumeric())
}

// ---------------------------------------------------------------------------------------------
// Inbound
// ---------------------------------------------------------------------------------------------

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

/// The outer Events API body.
#[derive(Debug, Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    challenge: Option<String>,
    #[serde(default)]
    event_id: Option<String>,
    /// Kept loose: only `message` and `app_mention` are read further, and other event types
    /// have other shapes (a `user` object, say) that must not turn into a 400.
    #[serde(default)]
    event: Option<Value>,
    #[serde(default)]
    authorizations: Option<Vec<Value>>,
}

/// A `message` or `app_mention` event.
#[derive(Debug, Deserialize)]
struct MessageEvent {
    #[serde(default)]
    subtype: Option<String>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    bot_id: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    ts: Option<String>,
    #[serde(default)]
    thread_ts: Option<String>,
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    channel_type: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Interaction {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    user: Option<IdOnly>,
    #[serde(default)]
    channel: Option<IdOnly>,
    #[serde(default)]
    container: Option<Container>,
    #[serde(default)]
    message: Option<InteractionMessage>,
    #[serde(default)]
    actions: Vec<Action>,
}

#[derive(Debug, Default, Deserialize)]
struct IdOnly {
    #[serde(default)]
    id: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Container {
    #[serde(default)]
    message_ts: Option<String>,
    #[serde(default)]
    thread_ts: Option<String>,
    #[serde(default)]
    channel_id: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct InteractionMessage {
    #[serde(default)]
    ts: Option<String>,
    #[serde(default)]
    thread_ts: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Action {
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    action_ts: Option<String>,
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

/// Ids and timestamps Slack sends: short, printable, no spaces (they end up in keys).
fn valid_token(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= 64
        && token
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
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
    event_id: String,
    event: &Value,
    bot_user_id: Option<&str>,
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
        None | Some("thread_broadcast") => {}
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
    let text = strip_leading_mention(&text, bot_user_id);
    if text.is_empty() {
        return Ok(WebhookOutcome::Ignored("message without text".to_owned()));
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
        },
        addressed_to_bot,
        ack: PlatformReply::ok(),
    }))
}

// ---------------------------------------------------------------------------------------------
// Outbound
// ---------------------------------------------------------------------------------------------

/// Sends replies with `chat.postMessage`, one message per chunk, each chunk claimed in the
/// inbox first so a resend of the same reply only sends what is missing.
#[derive(Clone)]
pub struct SlackSender {
    client: reqwest::Client,
    api_base_url: String,
    bot_token: Arc<str>,
    inbox: Arc<dyn Inbox>,
}

impl std::fmt::Debug for SlackSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackSender")
            .field("api_base_url", &self.api_base_url)
            .finish_non_exhaustive()
    }
}

/// One message to post: `channel`, `thread_ts` (none in a DM), text and optional blocks.
#[derive(Debug)]
struct Post<'a> {
    channel: &'a str,
    thread_ts: Option<&'a str>,
    text: &'a str,
    blocks: Option<Value>,
}

impl SlackSender {
    /// A sender posting to `api_base_url` (e.g. [`DEFAULT_API_BASE_URL`]) with `bot_token`,
    /// claiming chunks in `inbox`.
    pub fn new(
        client: reqwest::Client,
        api_base_url: &str,
        bot_token: &str,
        inbox: Arc<dyn Inbox>,
    ) -> Self {
        Self {
            client,
            api_base_url: api_base_url.trim_end_matches('/').to_owned(),
            bot_token: Arc::from(bot_token),
            inbox,
        }
    }

    /// The sender for a resolved config.
    pub fn from_config(
        client: reqwest::Client,
        config: &ResolvedSlack,
        inbox: Arc<dyn Inbox>,
    ) -> Self {
        Self::new(client, &config.api_base_url, &config.bot_token, inbox)
    }

    async fn post(&self, post: &Post<'_>) -> Result<(), OutboxError> {
        let url = format!("{}/chat.postMessage", self.api_base_url);
        let mut body = json!({ "channel": post.channel, "text": post.text });
        if let Some(thread) = post.thread_ts {
            body["thread_ts"] = json!(thread);
        }
        if let Some(blocks) = &post.blocks {
            body["blocks"] = blocks.clone();
        }
        let response = self
            .client
            .post(&url)
            .timeout(POST_TIMEOUT)
            .bearer_auth(&*self.bot_token)
            .json(&body)
            .send()
            .await
            .map_err(|err| OutboxError::Failed {
                message: format!("POST {url} failed"),
                source: Some(Box::new(err)),
            })?;
        let status = response.status();
        if status.as_u16() == 429 {
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|value| value.to_str().ok())
                .unwrap_or("?")
                .to_owned();
            return Err(failed(format!(
                "chat.postMessage rate limited (Retry-After: {retry_after}s)"
            )));
        }
        if status.is_server_error() || status.as_u16() == 408 {
            return Err(failed(format!("chat.postMessage answered HTTP {status}")));
        }
        if !status.is_success() {
            return Err(OutboxError::Rejected {
                message: format!("chat.postMessage answered HTTP {status}"),
            });
        }
        let answer: Value = response.json().await.map_err(|err| OutboxError::Failed {
            message: "chat.postMessage answered with a body that is not JSON".to_owned(),
            source: Some(Box::new(err)),
        })?;
        if answer.get("ok").and_then(Value::as_bool) == Some(true) {
            return Ok(());
        }
        let error = answer
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("unknown_error");
        if PERMANENT_ERRORS.contains(&error) {
            Err(OutboxError::Rejected {
                message: format!("chat.postMessage: {error}"),
            })
        } else {
            Err(failed(format!("chat.postMessage: {error}")))
        }
    }
}

fn failed(message: String) -> OutboxError {
    OutboxError::Failed {
        message,
        source: None,
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
fn split_chat_id(chat_id: &str) -> (&str, Option<&str>) {
    match chat_id.split_once(THREAD_MARKER) {
        Some((channel, thread)) => (channel, Some(thread)),
        None => (chat_id, None),
    }
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

#[async_trait]
impl Outbox for SlackSender {
    async fn send(&self, reply: &OutboundReply) -> Result<(), OutboxError> {
        let (visible, _directives) = strip_directives(&reply.text);
        let text = match (visible, reply.approval_code.as_deref()) {
            (Some(text), _) => text,
            // The buttons still need a message to sit on.
            (None, Some(code)) => format!("Approval `{code}` is waiting for an answer."),
            (None, None) => return Ok(()),
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
        let chunks = chunk_text(&text, limit);
        let last = chunks.len().saturating_sub(1);
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
            if let Err(err) = self.post(&post).await {
                // Give the claim back so a redelivery sends this chunk again.
                if let Err(release) = self.inbox.release(&key).await {
                    tracing::warn!(%key, error = %release, "could not release a chunk claim");
                }
                return Err(err);
            }
        }
        tracing::info!(reply_id = %reply.reply_id, chunks = chunks.len(), "Slack reply delivered");
        Ok(())
    }
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

    #[test]
    fn chat_ids_split_into_channel_and_thread() {
        assert_eq!(split_chat_id("C1:thread:17.5"), ("C1", Some("17.5")));
        assert_eq!(split_chat_id("D1"), ("D1", None));
    }

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
