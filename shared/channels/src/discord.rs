//! Discord, through interactions (`POST /webhook/discord`): the Ed25519 signature check,
//! classifying an interaction (PING, slash command, button press), the slash command
//! definitions to register, and sending a turn's reply through the interaction's follow-up
//! webhook.
//!
//! Only interactions reach clawless. Plain messages typed into a Discord channel are delivered
//! by Discord over a persistent gateway (WebSocket) connection, which a serverless backend does
//! not keep open; so people talk to the agent through `/ask` and the skill commands, never by
//! writing in a channel or mentioning the bot.
//!
//! A command is answered at once with a deferred response (Discord's "thinking…"), and the
//! turn's reply follows later through `POST {apiBaseUrl}/webhooks/{applicationId}/{token}`. The
//! interaction token that URL needs travels with the message as its id
//! (`<interaction id>:<token>`) and comes back to the sender in
//! [`OutboundReply::in_reply_to`]. The token lives 15 minutes; a reply after that is refused for
//! good. An `/ask` without a usable question starts no turn: it is answered at once, visibly to
//! the invoker only, with what the command expects.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use clawless_base::session_key::ChatType;
use clawless_core::outbox::{Outbox, OutboxError};
use clawless_core::session::{Claim, Inbox};
use clawless_core::turn::OutboundReply;
use clawless_core::turn::events::{ApprovalDecision, ChatRef, InboundMessage};
use clawless_skills::commands::{SkillCommandSpec, unique_command_name};
use ed25519_dalek::{Signature, VerifyingKey};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::chunk::chunk_text;
use crate::config_values::{SecretLookup, api_base_url, optional_secret};
use crate::directives::strip_directives;
use crate::webhook::{
    ChannelApproval, ChannelMessage, MAX_WEBHOOK_BODY_BYTES, PlatformChannel, PlatformReply,
    WebhookError, WebhookOutcome, WebhookRequest, approval_button_value, approve_text,
    parse_approval_button,
};

/// The channel id: the route `/webhook/discord` and `ChatRef.channel`.
pub const CHANNEL_ID: &str = "discord";
/// Discord's API, when the config names none.
pub const DEFAULT_API_BASE_URL: &str = "https://discord.com/api/v10";
/// Header with the hex Ed25519 signature.
pub const SIGNATURE_HEADER: &str = "x-signature-ed25519";
/// Header with the timestamp the signature covers (Unix seconds, as Discord sends it).
pub const TIMESTAMP_HEADER: &str = "x-signature-timestamp";
/// Longest message Discord accepts, in characters.
pub const MESSAGE_LIMIT: usize = 2_000;
/// How long an interaction token can send follow-ups.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// The generic command: `/ask text:<what to ask>`.
pub const ASK_COMMAND: &str = "ask";
/// The option of [`ASK_COMMAND`] holding the question.
pub const ASK_OPTION: &str = "text";
/// The option of a skill command holding its arguments.
pub const ARGS_OPTION: &str = "args";

/// Discord's epoch (2015-01-01) in Unix milliseconds; snowflakes count from it.
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;
/// How far a signed timestamp may be from now: a captured request cannot be replayed later.
const REPLAY_WINDOW_SECS: u64 = 5 * 60;
/// Longest command name Discord accepts.
const MAX_NAME_CHARS: usize = 32;
/// Longest command or option description Discord accepts.
const MAX_DESCRIPTION_CHARS: usize = 100;
/// Longest interaction token accepted (Discord's are a few hundred characters).
const MAX_TOKEN_CHARS: usize = 1_000;
/// How long a sent chunk stays claimed: well past the token's life, so no redelivery can
/// send it twice.
const CHUNK_CLAIM_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// How long one Discord API call may take.
const API_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest excerpt of Discord's error body kept in an error message.
const MAX_ERROR_EXCERPT: usize = 300;

/// Interaction types (Discord's numbering).
const PING: u64 = 1;
const APPLICATION_COMMAND: u64 = 2;
const MESSAGE_COMPONENT: u64 = 3;
/// Interaction response types.
const PONG: u64 = 1;
const CHANNEL_MESSAGE_WITH_SOURCE: u64 = 4;
const DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE: u64 = 5;
const DEFERRED_UPDATE_MESSAGE: u64 = 6;
/// Command type of a slash command (others are context-menu commands).
const CHAT_INPUT: u64 = 1;
/// Option type of a string.
const STRING_OPTION: u64 = 3;
/// Message flag: only the invoking user sees it.
const EPHEMERAL: u64 = 1 << 6;
/// Most unknown option names an answer lists.
const MAX_NAMED_OPTIONS: usize = 5;
/// What to do when a command's options do not match what clawless registers.
const STALE_COMMANDS_HINT: &str = "If the command looks different in Discord, its registration \
     is out of date: run `clawless channels discord register-commands`.";

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

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
    /// The bot token, inline; only registering commands needs it. Prefer `botTokenEnv`;
    /// set at most one of the two.
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
}

impl std::fmt::Debug for DiscordConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token stays out of logs.
        f.debug_struct("DiscordConfig")
            .field("application_id", &self.application_id)
            .field("public_key", &self.public_key)
            .field("bot_token", &self.bot_token.as_ref().map(|_| "<redacted>"))
            .field("bot_token_env", &self.bot_token_env)
            .field("api_base_url", &self.api_base_url)
            .field("owners", &self.owners)
            .field("allow_from", &self.allow_from)
            .finish()
    }
}

/// Why a Discord config cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A field is malformed or contradicts another.
    #[error("channels.discord: {0}")]
    Invalid(String),
    /// `botTokenEnv` names a variable that is not set (or empty).
    #[error("channels.discord: environment variable {0} is not set")]
    MissingEnv(String),
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
    fn verifies(&self, timestamp: &[u8], body: &[u8], signature: &[u8; 64]) -> bool {
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
}

impl std::fmt::Debug for ResolvedDiscord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedDiscord")
            .field("application_id", &self.application_id)
            .field("public_key", &self.public_key)
            .field("bot_token", &self.bot_token.as_ref().map(|_| "<redacted>"))
            .field("api_base_url", &self.api_base_url)
            .field("owners", &self.owners)
            .field("allow_from", &self.allow_from)
            .finish()
    }
}

impl DiscordConfig {
    /// Checks the config and looks up `botTokenEnv` with `env`. A bot token is optional (only
    /// registering commands needs one), but `botToken` and `botTokenEnv` together are an error,
    /// and so is a `botTokenEnv` naming an unset variable.
    pub fn resolve(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ResolvedDiscord, ConfigError> {
        let application_id = self.application_id.trim();
        if !is_snowflake(application_id) {
            return Err(ConfigError::Invalid(
                "applicationId must be the application's numeric id".to_owned(),
            ));
        }
        let public_key = DiscordPublicKey::parse(&self.public_key)?;
        let bot_token = optional_secret(
            self.bot_token.as_deref(),
            self.bot_token_env.as_deref(),
            env,
        )
        .map_err(|lookup| match lookup {
            SecretLookup::Both => {
                ConfigError::Invalid("set botToken or botTokenEnv, not both".to_owned())
            }
            SecretLookup::Missing => {
                ConfigError::Invalid("the bot token is empty or malformed".to_owned())
            }
            SecretLookup::EnvUnset(var) => ConfigError::MissingEnv(var),
        })?
        .map(|token| non_blank_token(&token))
        .transpose()?;
        let api_base_url = api_base_url(self.api_base_url.as_deref(), DEFAULT_API_BASE_URL)
            .map_err(ConfigError::Invalid)?;
        Ok(ResolvedDiscord {
            application_id: application_id.to_owned(),
            public_key,
            bot_token,
            api_base_url,
            owners: self.owners.clone(),
            allow_from: self.allow_from.clone(),
        })
    }
}

fn non_blank_token(token: &str) -> Result<String, ConfigError> {
    let token = token.trim();
    if token.is_empty() || token.chars().any(|c| c.is_control() || c.is_whitespace()) {
        Err(ConfigError::Invalid(
            "the bot token is empty or malformed".to_owned(),
        ))
    } else {
        Ok(token.to_owned())
    }
}

/// A Discord id: 1–20 ASCII digits.
fn is_snowflake(id: &str) -> bool {
    !id.is_empty() && id.len() <= 20 && id.bytes().all(|b| b.is_ascii_digit())
}

/// When the snowflake `id` was made, in Unix milliseconds.
fn snowflake_created_ms(id: &str) -> Option<u64> {
    let id: u64 = id.parse().ok()?;
    Some((id >> 22) + DISCORD_EPOCH_MS)
}

/// An interaction token safe to put in a URL path: Discord's are URL-safe base64 with dots.
fn is_token(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= MAX_TOKEN_CHARS
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

// ---------------------------------------------------------------------------------------------
// Inbound: interactions
// ---------------------------------------------------------------------------------------------

/// Discord's inbound side: verifies and classifies interactions.
///
/// A skill command arrives as `/{discord name} {args}`; the webhook does not load skills, so
/// a name that had to change on Discord is mapped back by the turn, which loads them anyway
/// ([`skill_command_text`]).
#[derive(Debug, Clone)]
pub struct DiscordChannel {
    public_key: DiscordPublicKey,
}

impl DiscordChannel {
    /// A channel checking signatures against `public_key`.
    pub fn new(public_key: DiscordPublicKey) -> Self {
        Self { public_key }
    }

    fn verify(&self, request: &WebhookRequest<'_>) -> Result<(), WebhookError> {
        let header = |name: &str| {
            request
                .headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::trim)
                .filter(|value| !value.is_empty())
        };
        let signature =
            header(SIGNATURE_HEADER).ok_or_else(|| unauthorized("missing X-Signature-Ed25519"))?;
        let timestamp = header(TIMESTAMP_HEADER)
            .ok_or_else(|| unauthorized("missing X-Signature-Timestamp"))?;
        let signature: [u8; 64] = hex::decode(signature)
            .ok()
            .and_then(|bytes| bytes.try_into().ok())
            .ok_or_else(|| unauthorized("the signature is not 64 hex-encoded bytes"))?;
        if !self
            .public_key
            .verifies(timestamp.as_bytes(), request.body, &signature)
        {
            return Err(unauthorized("bad signature"));
        }
        // Checked after the signature, so the timestamp is Discord's own.
        let sent_secs: u64 = timestamp
            .parse()
            .map_err(|_| unauthorized("the timestamp is not Unix seconds"))?;
        let now_secs = request.now_ms / 1_000;
        if now_secs.abs_diff(sent_secs) > REPLAY_WINDOW_SECS {
            return Err(unauthorized("the timestamp is outside the replay window"));
        }
        Ok(())
    }

    fn classify(&self, interaction: Interaction) -> Result<WebhookOutcome, WebhookError> {
        match interaction.kind {
            PING => Ok(WebhookOutcome::Respond(PlatformReply::json(
                json!({ "type": PONG }),
            ))),
            APPLICATION_COMMAND => self.command(interaction),
            MESSAGE_COMPONENT => component(interaction),
            other => Ok(WebhookOutcome::Ignored(format!(
                "interaction type {other} is not handled"
            ))),
        }
    }

    fn command(&self, interaction: Interaction) -> Result<WebhookOutcome, WebhookError> {
        let data: CommandData = parse_data(interaction.data.as_ref(), "data")?;
        if data.kind != CHAT_INPUT {
            return Ok(WebhookOutcome::Ignored(format!(
                "command type {} is not a slash command",
                data.kind
            )));
        }
        let option = |wanted: &str| {
            data.options
                .iter()
                .find(|option| option.name == wanted && option.kind == STRING_OPTION)
                .and_then(|option| option.value.as_ref())
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|value| !value.is_empty())
        };
        let text = if data.name == ASK_COMMAND {
            match ask_question(&data.options) {
                Ok(question) => question.to_owned(),
                Err(problem) => return Ok(WebhookOutcome::Respond(ephemeral(&problem))),
            }
        } else {
            let name = data.name.as_str();
            match option(ARGS_OPTION) {
                Some(args) => format!("/{name} {args}"),
                None => format!("/{name}"),
            }
        };
        let context = Context::of(&interaction)?;
        Ok(WebhookOutcome::Message(ChannelMessage {
            event_id: context.interaction_id.clone(),
            message: context.message(text),
            addressed_to_bot: true,
            ack: PlatformReply::json(json!({ "type": DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE })),
        }))
    }
}

/// The question of an `/ask`, or what to tell the user when there is none: a blank `text`, no
/// `text` at all (no options, or only options `/ask` does not have, as a stale registration
/// would send), or a `text` that is not a string. Options besides a usable `text` are ignored.
fn ask_question(options: &[CommandOption]) -> Result<&str, String> {
    let Some(text) = options.iter().find(|option| option.name == ASK_OPTION) else {
        let unknown: Vec<String> = options
            .iter()
            .take(MAX_NAMED_OPTIONS)
            .map(|option| format!("`{}`", shown_option_name(&option.name)))
            .collect();
        return Err(if unknown.is_empty() {
            format!(
                "`/{ASK_COMMAND}` needs its `{ASK_OPTION}` option: what you want to ask, \
                 e.g. `/{ASK_COMMAND} {ASK_OPTION}: what's on today?`"
            )
        } else {
            format!(
                "`/{ASK_COMMAND}` has no option {}; it expects `{ASK_OPTION}` (what you want to \
                 ask). {STALE_COMMANDS_HINT}",
                unknown.join(", ")
            )
        });
    };
    if text.kind != STRING_OPTION {
        return Err(format!(
            "`/{ASK_COMMAND}` expects `{ASK_OPTION}` to be text. {STALE_COMMANDS_HINT}"
        ));
    }
    text.value
        .as_ref()
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|question| !question.is_empty())
        .ok_or_else(|| {
            format!(
                "Nothing to ask: put your question in the `{ASK_OPTION}` option of \
                 `/{ASK_COMMAND}`."
            )
        })
}

/// An option name as echoed back to the user: at most [`MAX_NAME_CHARS`] characters, with
/// nothing that could end the surrounding code span.
fn shown_option_name(name: &str) -> String {
    name.chars()
        .filter(|ch| *ch != '`' && !ch.is_control())
        .take(MAX_NAME_CHARS)
        .collect()
}

/// An answer only the invoking user sees, which mentions nobody.
fn ephemeral(content: &str) -> PlatformReply {
    PlatformReply::json(json!({
        "type": CHANNEL_MESSAGE_WITH_SOURCE,
        "data": {
            "content": content,
            "flags": EPHEMERAL,
            "allowed_mentions": { "parse": [] },
        },
    }))
}

fn component(interaction: Interaction) -> Result<WebhookOutcome, WebhookError> {
    let data: ComponentData = parse_data(interaction.data.as_ref(), "data")?;
    let Some((code, decision)) = parse_approval_button(&data.custom_id) else {
        return Ok(WebhookOutcome::Ignored(
            "a component that is not an approval button".to_owned(),
        ));
    };
    let context = Context::of(&interaction)?;
    Ok(WebhookOutcome::Approval(ChannelApproval {
        event_id: context.interaction_id.clone(),
        message: context.message(approve_text(&code, decision)),
        code,
        decision,
        ack: PlatformReply::json(json!({ "type": DEFERRED_UPDATE_MESSAGE })),
    }))
}

impl PlatformChannel for DiscordChannel {
    fn id(&self) -> &'static str {
        CHANNEL_ID
    }

    fn handle(&self, request: &WebhookRequest<'_>) -> Result<WebhookOutcome, WebhookError> {
        if request.body.len() > MAX_WEBHOOK_BODY_BYTES {
            return Err(WebhookError::TooLarge(request.body.len()));
        }
        self.verify(request)?;
        let mut deserializer = serde_json::Deserializer::from_slice(request.body);
        let interaction: Interaction = serde_path_to_error::deserialize(&mut deserializer)
            .map_err(|err| bad_request(format!("malformed interaction: {err}")))?;
        self.classify(interaction)
    }
}

fn unauthorized(reason: &str) -> WebhookError {
    WebhookError::Unauthorized(reason.to_owned())
}

fn bad_request(reason: String) -> WebhookError {
    WebhookError::BadRequest(reason)
}

fn parse_data<T: serde::de::DeserializeOwned>(
    data: Option<&Value>,
    field: &str,
) -> Result<T, WebhookError> {
    let data = data.ok_or_else(|| bad_request(format!("interaction without {field}")))?;
    serde_path_to_error::deserialize(data)
        .map_err(|err| bad_request(format!("malformed interaction {field}: {err}")))
}

/// The fields of an interaction this channel reads.
#[derive(Debug, Deserialize)]
struct Interaction {
    id: String,
    #[serde(rename = "type")]
    kind: u64,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    data: Option<Value>,
    #[serde(default)]
    guild_id: Option<String>,
    #[serde(default)]
    channel_id: Option<String>,
    #[serde(default)]
    channel: Option<Channel>,
    #[serde(default)]
    member: Option<Member>,
    #[serde(default)]
    user: Option<User>,
}

#[derive(Debug, Deserialize)]
struct Channel {
    id: String,
}

#[derive(Debug, Deserialize)]
struct Member {
    #[serde(default)]
    user: Option<User>,
}

#[derive(Debug, Deserialize)]
struct User {
    id: String,
}

#[derive(Debug, Deserialize)]
struct CommandData {
    name: String,
    #[serde(rename = "type", default = "chat_input")]
    kind: u64,
    #[serde(default)]
    options: Vec<CommandOption>,
}

fn chat_input() -> u64 {
    CHAT_INPUT
}

#[derive(Debug, Deserialize)]
struct CommandOption {
    name: String,
    #[serde(rename = "type")]
    kind: u64,
    #[serde(default)]
    value: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct ComponentData {
    custom_id: String,
}

/// Who and where, for a command or a button press.
struct Context {
    interaction_id: String,
    /// `<interaction id>:<token>`: what the sender needs back to answer.
    message_id: String,
    chat: ChatRef,
    sender_id: String,
}

impl Context {
    fn of(interaction: &Interaction) -> Result<Self, WebhookError> {
        if !is_snowflake(&interaction.id) {
            return Err(bad_request(
                "the interaction id is not a snowflake".to_owned(),
            ));
        }
        let token = interaction
            .token
            .as_deref()
            .filter(|token| is_token(token))
            .ok_or_else(|| bad_request("missing or malformed interaction token".to_owned()))?;
        let channel_id = interaction
            .channel_id
            .as_deref()
            .or(interaction
                .channel
                .as_ref()
                .map(|channel| channel.id.as_str()))
            .filter(|id| is_snowflake(id))
            .ok_or_else(|| bad_request("interaction without a channel".to_owned()))?;
        let sender_id = interaction
            .member
            .as_ref()
            .and_then(|member| member.user.as_ref())
            .or(interaction.user.as_ref())
            .map(|user| user.id.as_str())
            .filter(|id| is_snowflake(id))
            .ok_or_else(|| bad_request("interaction without a user".to_owned()))?;
        let chat_type = if interaction.guild_id.is_some() {
            ChatType::Group
        } else {
            ChatType::Direct
        };
        Ok(Self {
            interaction_id: interaction.id.clone(),
            message_id: format!("{}:{token}", interaction.id),
            chat: ChatRef {
                channel: CHANNEL_ID.to_owned(),
                chat_id: channel_id.to_owned(),
                chat_type,
            },
            sender_id: sender_id.to_owned(),
        })
    }

    fn message(self, text: String) -> InboundMessage {
        InboundMessage {
            message_id: self.message_id,
            chat: self.chat,
            sender_id: self.sender_id,
            text,
            sender_is_owner: false,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Command definitions
// ---------------------------------------------------------------------------------------------

/// A command name Discord accepts: lowercase ASCII letters, digits, `-` and `_`, 1–32 long
/// (a subset of Discord's `^[-_\p{L}\p{N}]{1,32}$`, so no script's casing rules are needed).
fn discord_command_name(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for ch in raw.to_lowercase().chars() {
        if ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-' || ch == '_' {
            out.push(ch);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let name: String = out.trim_matches('_').chars().take(MAX_NAME_CHARS).collect();
    if name.is_empty() {
        "skill".to_owned()
    } else {
        name
    }
}

/// `text` cut to Discord's 1–100 characters, with `…` when cut; `fallback` when blank.
fn discord_description(text: &str, fallback: &str) -> String {
    let text = match text.trim() {
        "" => fallback.trim(),
        text => text,
    };
    let text = if text.is_empty() { "clawless" } else { text };
    if text.chars().count() <= MAX_DESCRIPTION_CHARS {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(MAX_DESCRIPTION_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// The Discord name of each skill command, unique and never `ask`, in order.
fn discord_command_names(specs: &[SkillCommandSpec]) -> Vec<(String, &SkillCommandSpec)> {
    let mut used: HashSet<String> = HashSet::from([ASK_COMMAND.to_owned()]);
    let mut names = Vec::with_capacity(specs.len());
    for spec in specs {
        let mut name = unique_command_name(&discord_command_name(&spec.name), &used);
        if name.chars().count() > MAX_NAME_CHARS || used.contains(&name) {
            // Only past 999 clashes; unreachable with Discord's 100-command limit.
            continue;
        }
        name.make_ascii_lowercase();
        used.insert(name.clone());
        names.push((name, spec));
    }
    names
}

/// `text` with its leading Discord command name replaced by the skill command it was
/// registered for (see [`command_definitions`]), when Discord's name differs (e.g. a skill
/// called `ask` is `/ask_2` on Discord). `None` when the text needs no change.
pub fn skill_command_text(text: &str, specs: &[SkillCommandSpec]) -> Option<String> {
    let rest = text.strip_prefix('/')?;
    let (name, args) = rest
        .split_once(' ')
        .map_or((rest, None), |(name, args)| (name, Some(args)));
    let (_, spec) = discord_command_names(specs)
        .into_iter()
        .find(|(discord, _)| discord == name)?;
    if spec.name == name {
        return None;
    }
    Some(match args {
        Some(args) => format!("/{} {args}", spec.name),
        None => format!("/{}", spec.name),
    })
}

/// The slash commands to register: `/ask text:<…>` and one per user-invocable skill command
/// (with an optional `args` option), as Discord's JSON.
pub fn command_definitions(skill_specs: &[SkillCommandSpec]) -> Vec<Value> {
    let mut definitions = vec![json!({
        "name": ASK_COMMAND,
        "type": CHAT_INPUT,
        "description": "Ask the clawless agent",
        "options": [{
            "type": STRING_OPTION,
            "name": ASK_OPTION,
            "description": "What to ask",
            "required": true,
        }],
    })];
    for (name, spec) in discord_command_names(skill_specs) {
        definitions.push(json!({
            "name": name,
            "type": CHAT_INPUT,
            "description": discord_description(&spec.description, &spec.skill_name),
            "options": [{
                "type": STRING_OPTION,
                "name": ARGS_OPTION,
                "description": "Input for the skill",
                "required": false,
            }],
        }));
    }
    definitions
}

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
    client: &reqwest::Client,
    api_base: &str,
    application_id: &str,
    bot_token: &str,
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
fn error_excerpt(body: &str) -> String {
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

// ---------------------------------------------------------------------------------------------
// Outbound: follow-up messages
// ---------------------------------------------------------------------------------------------

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
        &self,
        interaction_id: &str,
        token: &str,
        body: &Value,
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

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        })
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
        let now = now_ms();
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
                .claim(&claim_id, CHUNK_CLAIM_TTL, now_ms() / 1_000)
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
    fn snowflakes_carry_their_creation_time() {
        // 175928847299117063 is Discord's documented example: 2016-04-30 11:18:25.796 UTC.
        assert_eq!(
            snowflake_created_ms("175928847299117063"),
            Some(1_462_015_105_796)
        );
        assert_eq!(snowflake_created_ms("not a number"), None);
    }

    #[test]
    fn names_are_sanitised_to_discords_rules() {
        assert_eq!(discord_command_name("Hello World!"), "hello_world");
        assert_eq!(discord_command_name("résumé-bot"), "r_sum_-bot");
        assert_eq!(discord_command_name("???"), "skill");
        assert_eq!(discord_command_name(&"x".repeat(40)).len(), 32);
    }

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
