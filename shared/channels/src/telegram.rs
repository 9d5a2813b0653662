//! Telegram: the `POST /webhook/telegram` channel (secret-token check, update classification,
//! session addressing for private chats, groups and forum topics), the Bot API sender
//! (`sendMessage` in 4,096-character chunks, typing, approval buttons, callback answers), the
//! `setWebhook`/`getMe` calls the CLI needs, and the `channels.telegram` config.
//!
//! Addressing (spec §12): a private chat is `ChatType::Direct` with the chat id; a group or
//! supergroup is `ChatType::Group` with the chat id; a forum topic is
//! `<chat id>:topic:<thread id>`, so the session key gets the `:topic:` suffix and the sender
//! knows which `message_thread_id` to post in.
//!
//! Edited messages are ignored on purpose: the agent answered the original already, and a
//! second turn for a typo fix would only repeat itself.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use clawless_base::session_key::ChatType;
use clawless_core::outbox::{Outbox, OutboxError};
use clawless_core::session::{Claim, Inbox};
use clawless_core::turn::OutboundReply;
use clawless_core::turn::events::{ApprovalDecision, ChatRef, InboundMessage};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::chunk::chunk_text;
use crate::config_values::{SecretLookup, api_base_url, required_secret};
use crate::directives::strip_directives;
use crate::webhook::{
    ChannelApproval, ChannelMessage, MAX_WEBHOOK_BODY_BYTES, PlatformChannel, PlatformReply,
    WebhookError, WebhookOutcome, WebhookRequest, approval_button_value, approve_text,
    parse_approval_button,
};

/// Channel id of Telegram (route `/webhook/telegram`, `ChatRef.channel`).
pub const CHANNEL_ID: &str = "telegram";

/// Header in which Telegram repeats the webhook's secret token.
pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// Longest text of one Telegram message, in characters.
pub const MESSAGE_LIMIT: usize = 4_096;

/// The public Bot API.
pub const DEFAULT_API_BASE_URL: &str = "https://api.telegram.org";

/// The update types the webhook asks for; everything else is ignored anyway.
pub const ALLOWED_UPDATES: [&str; 2] = ["message", "callback_query"];

/// Infix of a forum topic's chat id: `<chat id>:topic:<thread id>`.
const TOPIC_INFIX: &str = ":topic:";

/// How long one Bot API call may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a sent chunk stays claimed: longer than any redelivery of its turn.
const CHUNK_CLAIM_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// Longest platform error description kept in an error message.
const MAX_DESCRIPTION_CHARS: usize = 300;

/// Longest secret token Telegram accepts.
const MAX_SECRET_TOKEN_CHARS: usize = 256;

/// Whether group messages must be addressed to the bot when `requireMention` is unset.
pub const DEFAULT_REQUIRE_MENTION: bool = true;

/// Length of a generated secret token.
const GENERATED_SECRET_CHARS: usize = 64;

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

/// `channels.telegram` in `clawless.yaml`. Each secret is given inline or by the name of an
/// environment variable, never both.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct TelegramConfig {
    /// The bot token from BotFather, inline. Prefer `botTokenEnv`; set exactly one of the
    /// two.
    pub bot_token: Option<String>,
    /// The name of the environment variable (or `secrets:` entry) holding the bot token.
    pub bot_token_env: Option<String>,
    /// The webhook's secret token (what `clawless channels telegram set-webhook` prints),
    /// inline. Prefer `secretTokenEnv`; set exactly one of the two.
    pub secret_token: Option<String>,
    /// The name of the environment variable (or `secrets:` entry) holding the webhook's
    /// secret token.
    pub secret_token_env: Option<String>,
    /// Bot API base URL (a local Bot API server or a proxy; tests point it at a fake).
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_API_BASE_URL)))]
    pub api_base_url: Option<String>,
    /// The bot's `@username` (with or without `@`), to recognise `@username` mentions and
    /// `/command@username` in groups; unset, only replies to the bot and mentions that carry
    /// its user id count as addressed to it.
    pub bot_username: Option<String>,
    /// Telegram user ids of the agent's owners: always allowed, and the only ones who may
    /// use owner-only tools and `/approve`.
    pub owners: Vec<String>,
    /// Telegram user ids of other people allowed to talk to the agent (`*`: anyone).
    pub allow_from: Vec<String>,
    /// In groups, answer only messages that mention the bot or reply to it.
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_REQUIRE_MENTION)))]
    pub require_mention: Option<bool>,
    /// Who may talk to the agent in group chats: `open` (anyone in a group the bot is in),
    /// `allowlist` (owners and `allowFrom` only) or `disabled` (group messages start no turn).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = crate::webhook::GroupPolicy::default())))]
    pub group_policy: Option<crate::webhook::GroupPolicy>,
    /// Sent to a sender who may not talk to the agent; unset, such a message gets no answer.
    #[serde(default)]
    pub unauthorized_reply: Option<String>,
}

impl std::fmt::Debug for TelegramConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramConfig")
            .field("bot_token", &self.bot_token.as_ref().map(|_| "<redacted>"))
            .field("bot_token_env", &self.bot_token_env)
            .field(
                "secret_token",
                &self.secret_token.as_ref().map(|_| "<redacted>"),
            )
            .field("secret_token_env", &self.secret_token_env)
            .field("api_base_url", &self.api_base_url)
            .field("bot_username", &self.bot_username)
            .field("owners", &self.owners)
            .field("allow_from", &self.allow_from)
            .field("require_mention", &self.require_mention)
            .finish()
    }
}

/// Why `channels.telegram` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Neither the value nor its environment variable is given.
    #[error("channels.telegram: set {field} or {field}Env")]
    Missing {
        /// `botToken` or `secretToken`.
        field: &'static str,
    },
    /// Both the value and its environment variable are given.
    #[error("channels.telegram: set only one of {field} and {field}Env")]
    Both {
        /// `botToken` or `secretToken`.
        field: &'static str,
    },
    /// The named environment variable is not set (or empty).
    #[error("channels.telegram.{field}Env: environment variable {var} is not set")]
    EnvUnset {
        /// `botToken` or `secretToken`.
        field: &'static str,
        /// The variable's name.
        var: String,
    },
    /// A value has the wrong shape (the value itself is not shown).
    #[error("channels.telegram.{field}: {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// `channels.telegram` with its secrets looked up and checked.
#[derive(Clone, PartialEq, Eq)]
pub struct ResolvedTelegram {
    /// The bot token.
    pub bot_token: String,
    /// The webhook secret token.
    pub secret_token: String,
    /// Bot API base URL, without a trailing `/`.
    pub api_base_url: String,
    /// The bot's username, lowercase, without `@`.
    pub bot_username: Option<String>,
    /// Owners' user ids.
    pub owners: Vec<String>,
    /// Allowed senders' user ids.
    pub allow_from: Vec<String>,
    /// In groups, answer only messages addressed to the bot.
    pub require_mention: bool,
}

impl std::fmt::Debug for ResolvedTelegram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedTelegram")
            .field("bot_token", &"<redacted>")
            .field("secret_token", &"<redacted>")
            .field("api_base_url", &self.api_base_url)
            .field("bot_username", &self.bot_username)
            .field("owners", &self.owners)
            .field("allow_from", &self.allow_from)
            .field("require_mention", &self.require_mention)
            .finish()
    }
}

impl TelegramConfig {
    /// Whether unaddressed group messages are skipped (default true).
    pub fn require_mention(&self) -> bool {
        self.require_mention.unwrap_or(DEFAULT_REQUIRE_MENTION)
    }

    /// Looks up the secrets (`env` reads an environment variable) and checks every value.
    pub fn resolve(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ResolvedTelegram, ConfigError> {
        let bot_token = pick(
            "botToken",
            self.bot_token.as_deref(),
            self.bot_token_env.as_deref(),
            env,
        )?;
        if !is_bot_token(&bot_token) {
            // The token goes into request paths, so anything but `<digits>:<token chars>` is
            // refused rather than escaped.
            return Err(ConfigError::Invalid {
                field: "botToken",
                reason: "expected <bot id>:<secret> as BotFather gives it".to_owned(),
            });
        }
        let secret_token = pick(
            "secretToken",
            self.secret_token.as_deref(),
            self.secret_token_env.as_deref(),
            env,
        )?;
        if !is_secret_token(&secret_token) {
            return Err(ConfigError::Invalid {
                field: "secretToken",
                reason: format!(
                    "expected 1 to {MAX_SECRET_TOKEN_CHARS} characters of A-Z, a-z, 0-9, _ and -"
                ),
            });
        }
        let api_base_url = api_base_url(self.api_base_url.as_deref(), DEFAULT_API_BASE_URL)
            .map_err(|reason| ConfigError::Invalid {
                field: "apiBaseUrl",
                reason,
            })?;
        let bot_username = match self.bot_username.as_deref().map(normalise_username) {
            Some(Some(name)) => Some(name),
            Some(None) => {
                return Err(ConfigError::Invalid {
                    field: "botUsername",
                    reason: "expected 1 to 64 characters of A-Z, a-z, 0-9 and _".to_owned(),
                });
            }
            None => None,
        };
        Ok(ResolvedTelegram {
            bot_token,
            secret_token,
            api_base_url,
            bot_username,
            owners: self.owners.clone(),
            allow_from: self.allow_from.clone(),
            require_mention: self.require_mention(),
        })
    }
}

impl ResolvedTelegram {
    /// The bot's user id: the number before the `:` of its token.
    pub fn bot_id(&self) -> Option<i64> {
        bot_id_from_token(&self.bot_token)
    }

    /// The webhook channel for this bot.
    pub fn channel(&self) -> TelegramChannel {
        TelegramChannel::new(
            self.secret_token.clone(),
            BotIdentity {
                id: self.bot_id(),
                username: self.bot_username.clone(),
            },
            self.require_mention,
        )
    }

    /// The reply sender for this bot; `inbox` keeps each chunk from being sent twice.
    pub fn sender(&self, client: reqwest::Client, inbox: Arc<dyn Inbox>) -> TelegramSender {
        TelegramSender::new(client, &self.api_base_url, &self.bot_token, inbox)
    }
}

fn pick(
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

fn is_bot_token(token: &str) -> bool {
    let Some((id, secret)) = token.split_once(':') else {
        return false;
    };
    !id.is_empty()
        && id.len() <= 20
        && id.bytes().all(|b| b.is_ascii_digit())
        && !secret.is_empty()
        && secret.len() <= 128
        && secret
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn bot_id_from_token(token: &str) -> Option<i64> {
    token.split_once(':')?.0.parse().ok()
}

fn is_secret_token(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= MAX_SECRET_TOKEN_CHARS
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `@Name` or `Name` as lowercase `name`, or `None` when it is not a Telegram username.
fn normalise_username(name: &str) -> Option<String> {
    let name = name.trim();
    let name = name.strip_prefix('@').unwrap_or(name);
    let valid = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    valid.then(|| name.to_ascii_lowercase())
}

/// A fresh webhook secret token: 64 characters of `A-Z a-z 0-9 _ -` from the operating
/// system's randomness (`/dev/urandom`, as the runtime's secrets).
pub fn generate_secret_token() -> std::io::Result<String> {
    use std::io::Read;
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
    let mut bytes = [0u8; GENERATED_SECRET_CHARS];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    // 256 is a multiple of 64, so the low six bits are uniform.
    Ok(bytes
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(b & 63)]))
        .collect())
}

// ---------------------------------------------------------------------------------------------
// Inbound: the webhook
// ---------------------------------------------------------------------------------------------

/// Who the bot is, to tell which group messages are addressed to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BotIdentity {
    /// The bot's user id (the number before the `:` of its token).
    pub id: Option<i64>,
    /// The bot's username, lowercase, without `@`.
    pub username: Option<String>,
}

/// The Telegram webhook channel.
#[derive(Clone)]
pub struct TelegramChannel {
    secret_token: String,
    bot: BotIdentity,
    require_mention: bool,
}

impl std::fmt::Debug for TelegramChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramChannel")
            .field("bot", &self.bot)
            .field("require_mention", &self.require_mention)
            .finish_non_exhaustive()
    }
}

impl TelegramChannel {
    /// A channel accepting calls that carry `secret_token`, for the bot `bot`. An empty secret
    /// token accepts nothing.
    pub fn new(secret_token: impl Into<String>, bot: BotIdentity, require_mention: bool) -> Self {
        let bot = BotIdentity {
            id: bot.id,
            username: bot.username.as_deref().and_then(normalise_username),
        };
        Self {
            secret_token: secret_token.into(),
            bot,
            require_mention,
        }
    }

    /// Whether ingress should skip group messages not addressed to the bot.
    pub fn require_mention(&self) -> bool {
        self.require_mention
    }

    fn check_secret(&self, headers: &reqwest::header::HeaderMap) -> Result<(), WebhookError> {
        let given = headers
            .get(SECRET_HEADER)
            .ok_or_else(|| WebhookError::Unauthorized("missing secret token".to_owned()))?;
        if self.secret_token.is_empty() || !constant_time_eq(&self.secret_token, given.as_bytes()) {
            return Err(WebhookError::Unauthorized(
                "secret token does not match".to_owned(),
            ));
        }
        Ok(())
    }

    fn classify(&self, update: Update) -> WebhookOutcome {
        let event_id = update.update_id.to_string();
        if let Some(message) = update.message {
            return self.classify_message(event_id, message);
        }
        if let Some(query) = update.callback_query {
            return classify_callback(event_id, query);
        }
        if update.edited_message.is_some() {
            return WebhookOutcome::Ignored("edited messages are not answered".to_owned());
        }
        let kind = update
            .rest
            .keys()
            .next()
            .map_or("empty", String::as_str)
            .chars()
            .take(64)
            .collect::<String>();
        WebhookOutcome::Ignored(format!("update type {kind:?} is not handled"))
    }

    fn classify_message(&self, event_id: String, message: Message) -> WebhookOutcome {
        let Some(chat_type) = chat_type(&message.chat.kind) else {
            return WebhookOutcome::Ignored(format!(
                "messages in {:?} chats are not handled",
                truncate(&message.chat.kind, 32)
            ));
        };
        let Some(from) = &message.from else {
            return WebhookOutcome::Ignored("message without a sender".to_owned());
        };
        if from.is_bot {
            return WebhookOutcome::Ignored("message from a bot".to_owned());
        }
        let (text, entities) = match (&message.text, &message.caption) {
            (Some(text), _) => (text, &message.entities),
            (None, Some(caption)) => (caption, &message.caption_entities),
            (None, None) => return WebhookOutcome::Ignored("message without text".to_owned()),
        };
        if text.trim().is_empty() {
            return WebhookOutcome::Ignored("message without text".to_owned());
        }
        let addressed_to_bot = chat_type == ChatType::Direct
            || self.mentions_bot(text, entities)
            || self.replies_to_bot(message.reply_to_message.as_deref());
        let chat = ChatRef {
            channel: CHANNEL_ID.to_owned(),
            chat_id: chat_id(
                message.chat.id,
                message.message_thread_id,
                message.is_topic_message,
            ),
            chat_type,
        };
        WebhookOutcome::Message(ChannelMessage {
            event_id,
            message: InboundMessage {
                // Message ids are unique per chat only; the chat makes them unique per channel.
                message_id: format!("{}:{}", message.chat.id, message.message_id),
                chat,
                sender_id: from.id.to_string(),
                text: text.clone(),
                sender_is_owner: false,
            },
            addressed_to_bot,
            ack: PlatformReply::ok(),
        })
    }

    /// `@username` in the text or its entities, a `text_mention` of the bot, or a command
    /// written `/command@username`. A bare `/command` is not counted: in a group with several
    /// bots it is not clearly for this one.
    fn mentions_bot(&self, text: &str, entities: &[Entity]) -> bool {
        let username = self.bot.username.as_deref();
        let by_entity = entities.iter().any(|entity| match entity.kind.as_str() {
            "text_mention" => entity
                .user
                .as_ref()
                .is_some_and(|user| Some(user.id) == self.bot.id),
            "mention" => username.is_some_and(|name| {
                utf16_slice(text, entity.offset, entity.length).is_some_and(|mention| {
                    mention
                        .strip_prefix('@')
                        .is_some_and(|m| m.eq_ignore_ascii_case(name))
                })
            }),
            "bot_command" => username.is_some_and(|name| {
                utf16_slice(text, entity.offset, entity.length).is_some_and(|command| {
                    command
                        .split_once('@')
                        .is_some_and(|(_, target)| target.eq_ignore_ascii_case(name))
                })
            }),
            _ => false,
        });
        by_entity || username.is_some_and(|name| text_mentions(text, name))
    }

    fn replies_to_bot(&self, reply_to: Option<&ReplyTo>) -> bool {
        let Some(reply_to) = reply_to else {
            return false;
        };
        // In a forum topic every message "replies" to the topic's creation message; that is no
        // reply to the bot even when the bot opened the topic.
        if reply_to.forum_topic_created.is_some() {
            return false;
        }
        let Some(author) = &reply_to.from else {
            return false;
        };
        author.is_bot
            && (self.bot.id.is_some_and(|id| id == author.id)
                || self.bot.username.as_deref().is_some_and(|name| {
                    author
                        .username
                        .as_deref()
                        .is_some_and(|u| u.eq_ignore_ascii_case(name))
                }))
    }
}

impl PlatformChannel for TelegramChannel {
    fn id(&self) -> &'static str {
        CHANNEL_ID
    }

    fn handle(&self, request: &WebhookRequest<'_>) -> Result<WebhookOutcome, WebhookError> {
        self.check_secret(request.headers)?;
        if request.body.len() > MAX_WEBHOOK_BODY_BYTES {
            return Err(WebhookError::TooLarge(request.body.len()));
        }
        let update = parse_update(request.body)?;
        Ok(self.classify(update))
    }
}

fn classify_callback(event_id: String, query: CallbackQuery) -> WebhookOutcome {
    let Some((code, decision)) = query.data.as_deref().and_then(parse_approval_button) else {
        return WebhookOutcome::Ignored("button press that is not an approval".to_owned());
    };
    let Some(message) = query.message else {
        return WebhookOutcome::Ignored("button press without its message".to_owned());
    };
    let Some(chat_type) = chat_type(&message.chat.kind) else {
        return WebhookOutcome::Ignored("button press in an unhandled chat".to_owned());
    };
    let chat = ChatRef {
        channel: CHANNEL_ID.to_owned(),
        chat_id: chat_id(
            message.chat.id,
            message.message_thread_id,
            message.is_topic_message,
        ),
        chat_type,
    };
    WebhookOutcome::Approval(ChannelApproval {
        event_id,
        message: InboundMessage {
            message_id: format!("callback:{}", truncate(&query.id, 128)),
            chat,
            sender_id: query.from.id.to_string(),
            text: approve_text(&code, decision),
            sender_is_owner: false,
        },
        code,
        decision,
        // Telegram takes a Bot API call as the webhook's answer: this stops the button's
        // spinner without a call of our own. `TelegramSender::answer_callback` can add a text.
        ack: PlatformReply::json(json!({
            "method": "answerCallbackQuery",
            "callback_query_id": query.id,
        })),
    })
}

fn chat_type(kind: &str) -> Option<ChatType> {
    match kind {
        "private" => Some(ChatType::Direct),
        "group" | "supergroup" => Some(ChatType::Group),
        _ => None,
    }
}

fn chat_id(chat: i64, thread: Option<i64>, is_topic_message: bool) -> String {
    match thread {
        Some(thread) if is_topic_message => format!("{chat}{TOPIC_INFIX}{thread}"),
        _ => chat.to_string(),
    }
}

/// Compares a secret without leaking, through timing, how much of it matched: both sides are
/// hashed first, so neither their lengths nor their common prefix change the work done.
fn constant_time_eq(expected: &str, given: &[u8]) -> bool {
    let expected = Sha256::digest(expected.as_bytes());
    let given = Sha256::digest(given);
    let difference = expected
        .iter()
        .zip(given.iter())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    std::hint::black_box(difference) == 0
}

/// The text at a Telegram entity's UTF-16 offset and length (`None` when out of range or cut
/// through a surrogate pair).
fn utf16_slice(text: &str, offset: usize, length: usize) -> Option<String> {
    let units: Vec<u16> = text.encode_utf16().collect();
    let end = offset.checked_add(length)?;
    String::from_utf16(units.get(offset..end)?).ok()
}

/// `@name` in plain text, not as part of a longer word or username.
fn text_mentions(text: &str, name: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    let needle = format!("@{name}");
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    lower.match_indices(&needle).any(|(at, _)| {
        let before = lower[..at].chars().next_back();
        let after = lower[at + needle.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

fn truncate(text: &str, max_chars: usize) -> String {
    text.chars().take(max_chars).collect()
}

fn parse_update(body: &[u8]) -> Result<Update, WebhookError> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let update: Update = serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if path == "." || path.is_empty() {
            WebhookError::BadRequest(format!("invalid update: {inner}"))
        } else {
            WebhookError::BadRequest(format!("invalid update at {path}: {inner}"))
        }
    })?;
    deserializer
        .end()
        .map_err(|err| WebhookError::BadRequest(format!("invalid update: {err}")))?;
    Ok(update)
}

// The parts of the Bot API's `Update` the channel reads. Unknown fields are allowed: Telegram
// adds fields without notice.

#[derive(Debug, Deserialize)]
struct Update {
    update_id: i64,
    message: Option<Message>,
    edited_message: Option<IgnoredAny>,
    callback_query: Option<CallbackQuery>,
    /// The other update types, named in the log.
    #[serde(flatten)]
    rest: std::collections::BTreeMap<String, IgnoredAny>,
}

#[derive(Debug, Deserialize)]
struct Message {
    message_id: i64,
    from: Option<User>,
    chat: Chat,
    message_thread_id: Option<i64>,
    #[serde(default)]
    is_topic_message: bool,
    text: Option<String>,
    #[serde(default)]
    entities: Vec<Entity>,
    caption: Option<String>,
    #[serde(default)]
    caption_entities: Vec<Entity>,
    reply_to_message: Option<Box<ReplyTo>>,
}

#[derive(Debug, Deserialize)]
struct ReplyTo {
    from: Option<User>,
    forum_topic_created: Option<IgnoredAny>,
}

#[derive(Debug, Deserialize)]
struct User {
    id: i64,
    #[serde(default)]
    is_bot: bool,
    username: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Chat {
    id: i64,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Debug, Deserialize)]
struct Entity {
    #[serde(rename = "type")]
    kind: String,
    offset: usize,
    length: usize,
    user: Option<User>,
}

#[derive(Debug, Deserialize)]
struct CallbackQuery {
    id: String,
    from: User,
    message: Option<CallbackMessage>,
    data: Option<String>,
}

/// The message a button sits on (possibly "inaccessible": chat and id only).
#[derive(Debug, Deserialize)]
struct CallbackMessage {
    chat: Chat,
    message_thread_id: Option<i64>,
    #[serde(default)]
    is_topic_message: bool,
}

// ---------------------------------------------------------------------------------------------
// Outbound: the Bot API
// ---------------------------------------------------------------------------------------------

/// Why a Bot API call failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Telegram could not be reached or did not answer in time.
    #[error("telegram {method} failed: {source}")]
    Transport {
        /// The Bot API method.
        method: String,
        /// The HTTP client's error (its URL, which holds the token, removed).
        #[source]
        source: reqwest::Error,
    },
    /// HTTP 429: too many requests.
    #[error("telegram {method} rate-limited (HTTP 429){}: {description}", retry_hint(*.retry_after))]
    RateLimited {
        /// The Bot API method.
        method: String,
        /// Seconds to wait, as Telegram asked (`parameters.retry_after`).
        retry_after: Option<u64>,
        /// Telegram's description.
        description: String,
    },
    /// HTTP 5xx or 408, or an answer that is not the Bot API's: worth retrying.
    #[error("telegram {method} failed (HTTP {status}): {description}")]
    Unavailable {
        /// The Bot API method.
        method: String,
        /// HTTP status.
        status: u16,
        /// Telegram's description.
        description: String,
    },
    /// Any other 4xx (bad request, bot blocked, chat not found, bad token): retrying cannot help.
    #[error("telegram {method} refused (HTTP {status}): {description}")]
    Refused {
        /// The Bot API method.
        method: String,
        /// HTTP status.
        status: u16,
        /// Telegram's description.
        description: String,
    },
}

fn retry_hint(retry_after: Option<u64>) -> String {
    retry_after
        .map(|secs| format!(", retry after {secs}s"))
        .unwrap_or_default()
}

impl From<ApiError> for OutboxError {
    fn from(err: ApiError) -> Self {
        match err {
            ApiError::Refused { .. } => OutboxError::Rejected {
                message: err.to_string(),
            },
            ApiError::Transport { .. } => OutboxError::Failed {
                message: err.to_string(),
                source: Some(Box::new(err)),
            },
            ApiError::RateLimited { .. } | ApiError::Unavailable { .. } => OutboxError::Failed {
                message: err.to_string(),
                source: None,
            },
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct ApiAnswer {
    #[serde(default)]
    ok: bool,
    description: Option<String>,
    parameters: Option<ApiParameters>,
    #[serde(default)]
    result: Value,
}

#[derive(Debug, Default, Deserialize)]
struct ApiParameters {
    retry_after: Option<u64>,
}

/// Calls `{api_base}/bot{token}/{method}` with a JSON body; the answer's `result` on success.
async fn call(
    client: &reqwest::Client,
    api_base: &str,
    token: &str,
    method: &str,
    body: &Value,
) -> Result<Value, ApiError> {
    let url = format!("{}/bot{token}/{method}", api_base.trim_end_matches('/'));
    let response = client
        .post(url)
        .timeout(REQUEST_TIMEOUT)
        .json(body)
        .send()
        .await
        .map_err(|err| ApiError::Transport {
            method: method.to_owned(),
            source: err.without_url(),
        })?;
    let status = response.status().as_u16();
    let bytes = response.bytes().await.map_err(|err| ApiError::Transport {
        method: method.to_owned(),
        source: err.without_url(),
    })?;
    let answer: ApiAnswer = serde_json::from_slice(&bytes).unwrap_or_default();
    let description = truncate(
        answer
            .description
            .as_deref()
            .unwrap_or("no description given"),
        MAX_DESCRIPTION_CHARS,
    );
    let method = method.to_owned();
    match status {
        200..=299 if answer.ok => Ok(answer.result),
        429 => Err(ApiError::RateLimited {
            method,
            retry_after: answer.parameters.and_then(|p| p.retry_after),
            description,
        }),
        400..=499 if status != 408 => Err(ApiError::Refused {
            method,
            status,
            description,
        }),
        _ => Err(ApiError::Unavailable {
            method,
            status,
            description,
        }),
    }
}

/// Points the bot's webhook at `url` with `secret_token`, asking only for the update types
/// the channel handles ([`ALLOWED_UPDATES`]). For `clawless channels telegram set-webhook`.
pub async fn set_webhook(
    client: &reqwest::Client,
    api_base: &str,
    token: &str,
    url: &str,
    secret_token: &str,
) -> Result<(), ApiError> {
    let body = json!({
        "url": url,
        "secret_token": secret_token,
        "allowed_updates": ALLOWED_UPDATES,
    });
    call(client, api_base, token, "setWebhook", &body)
        .await
        .map(|_| ())
}

/// Asks Telegram who the bot is (`getMe`): its id and username, for `botUsername`.
pub async fn get_me(
    client: &reqwest::Client,
    api_base: &str,
    token: &str,
) -> Result<BotIdentity, ApiError> {
    let result = call(client, api_base, token, "getMe", &json!({})).await?;
    Ok(BotIdentity {
        id: result.get("id").and_then(Value::as_i64),
        username: result
            .get("username")
            .and_then(Value::as_str)
            .and_then(normalise_username),
    })
}

/// Sends replies through the Bot API. Each chunk of a reply is claimed in the inbox as
/// `out:telegram:<reply_id>:<index>` before it is sent, so a retried turn sends only the chunks
/// that did not go out.
#[derive(Clone)]
pub struct TelegramSender {
    client: reqwest::Client,
    api_base: String,
    token: String,
    inbox: Arc<dyn Inbox>,
}

impl std::fmt::Debug for TelegramSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is part of every URL, so neither appears here.
        f.debug_struct("TelegramSender")
            .field("api_base", &self.api_base)
            .finish_non_exhaustive()
    }
}

/// Where a `ChatRef` points on Telegram.
struct Target {
    chat_id: Value,
    thread_id: Option<i64>,
}

fn target(chat: &ChatRef) -> Target {
    let (chat_id, thread_id) = match chat.chat_id.split_once(TOPIC_INFIX) {
        Some((chat_id, thread)) => (chat_id, thread.parse::<i64>().ok()),
        None => (chat.chat_id.as_str(), None),
    };
    let chat_id = chat_id
        .parse::<i64>()
        .map_or_else(|_| Value::from(chat_id), Value::from);
    Target { chat_id, thread_id }
}

/// A Telegram message id from `4711` or `<chat id>:4711` (the channel's `message_id`).
fn telegram_message_id(id: &str) -> Option<i64> {
    id.rsplit(':').next()?.trim().parse().ok()
}

fn approval_keyboard(code: &str) -> Value {
    let button = |label: &str, decision| json!({"text": label, "callback_data": approval_button_value(code, decision)});
    json!({
        "inline_keyboard": [[
            button("Allow once", ApprovalDecision::AllowOnce),
            button("Always allow", ApprovalDecision::AllowAlways),
            button("Deny", ApprovalDecision::Deny),
        ]]
    })
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

impl TelegramSender {
    /// A sender for the bot with `token`, at `api_base` (e.g. [`DEFAULT_API_BASE_URL`]).
    pub fn new(
        client: reqwest::Client,
        api_base: &str,
        token: &str,
        inbox: Arc<dyn Inbox>,
    ) -> Self {
        Self {
            client,
            api_base: api_base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            inbox,
        }
    }

    async fn call(&self, method: &str, body: &Value) -> Result<Value, ApiError> {
        call(&self.client, &self.api_base, &self.token, method, body).await
    }

    /// Shows "typing…" in `chat` (`sendChatAction`), in its topic if it has one.
    pub async fn send_typing(&self, chat: &ChatRef) -> Result<(), OutboxError> {
        let target = target(chat);
        let mut body = json!({"chat_id": target.chat_id, "action": "typing"});
        if let Some(thread) = target.thread_id {
            body["message_thread_id"] = thread.into();
        }
        self.call("sendChatAction", &body).await?;
        Ok(())
    }

    /// Answers a button press (`answerCallbackQuery`), with a short notice when `text` is
    /// given.
    pub async fn answer_callback(
        &self,
        callback_query_id: &str,
        text: Option<&str>,
    ) -> Result<(), OutboxError> {
        let mut body = json!({"callback_query_id": callback_query_id});
        if let Some(text) = text {
            // Telegram shows at most 200 characters.
            body["text"] = truncate(text, 200).into();
        }
        self.call("answerCallbackQuery", &body).await?;
        Ok(())
    }

    async fn send_chunk(&self, key: &str, body: &Value) -> Result<(), OutboxError> {
        let claim = self
            .inbox
            .claim(key, CHUNK_CLAIM_TTL, now_unix())
            .await
            .map_err(|err| OutboxError::Failed {
                message: format!("cannot claim reply chunk {key}"),
                source: Some(Box::new(err)),
            })?;
        if claim == Claim::Duplicate {
            tracing::info!(chunk = key, "reply chunk already sent");
            return Ok(());
        }
        match self.call("sendMessage", body).await {
            Ok(_) => Ok(()),
            Err(err) => {
                // Give the claim back so the retry sends this chunk.
                if let Err(release) = self.inbox.release(key).await {
                    tracing::warn!(chunk = key, error = %release, "reply chunk claim not released");
                }
                Err(err.into())
            }
        }
    }
}

#[async_trait]
impl Outbox for TelegramSender {
    async fn typing(&self, chat: &ChatRef) -> Result<(), OutboxError> {
        self.send_typing(chat).await
    }

    async fn send(&self, reply: &OutboundReply) -> Result<(), OutboxError> {
        let (text, directives) = strip_directives(&reply.text);
        let Some(text) = text else {
            return Ok(());
        };
        let target = target(&reply.chat);
        let reply_to = directives
            .reply_to
            .as_deref()
            .and_then(telegram_message_id)
            .or_else(|| {
                directives
                    .reply_to_current
                    .then_some(reply.in_reply_to.as_deref())
                    .flatten()
                    .and_then(telegram_message_id)
            });
        let chunks = chunk_text(&text, MESSAGE_LIMIT);
        let last = chunks.len().saturating_sub(1);
        for (index, chunk) in chunks.iter().enumerate() {
            let mut body = json!({"chat_id": target.chat_id, "text": chunk});
            if let Some(thread) = target.thread_id {
                body["message_thread_id"] = thread.into();
            }
            if index == 0
                && let Some(message_id) = reply_to
            {
                // `reply_parameters` replaced the older `reply_to_message_id` in Bot API 7.0.
                // The message may be gone by now; the answer still goes out.
                body["reply_parameters"] =
                    json!({"message_id": message_id, "allow_sending_without_reply": true});
            }
            if index == last
                && let Some(code) = &reply.approval_code
            {
                body["reply_markup"] = approval_keyboard(code);
            }
            let key = format!("out:{CHANNEL_ID}:{}:{index}", reply.reply_id);
            self.send_chunk(&key, &body).await?;
        }
        tracing::info!(reply_id = %reply.reply_id, chunks = chunks.len(), "telegram reply delivered");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entity_offsets_count_utf16_units() {
        let text = "😀 @Bot hi";
        // The emoji is two UTF-16 units, so the mention starts at 3.
        assert_eq!(utf16_slice(text, 3, 4).as_deref(), Some("@Bot"));
        assert_eq!(utf16_slice(text, 1, 2), None, "cut through a surrogate");
        assert_eq!(utf16_slice(text, 100, 4), None);
        assert_eq!(utf16_slice(text, usize::MAX, 2), None);
    }

    #[test]
    fn plain_text_mentions_need_word_boundaries() {
        assert!(text_mentions("hey @ClawBot, hi", "clawbot"));
        assert!(text_mentions("@clawbot", "clawbot"));
        assert!(!text_mentions("hey @clawbot2", "clawbot"));
        assert!(!text_mentions("mail a@clawbot", "clawbot"));
    }

    #[test]
    fn topic_chat_ids_round_trip_to_a_target() {
        let chat = ChatRef {
            channel: CHANNEL_ID.to_owned(),
            chat_id: chat_id(-100_123, Some(42), true),
            chat_type: ChatType::Group,
        };
        assert_eq!(chat.chat_id, "-100123:topic:42");
        let target = target(&chat);
        assert_eq!(target.chat_id, json!(-100_123));
        assert_eq!(target.thread_id, Some(42));
        assert_eq!(chat_id(-100_123, Some(42), false), "-100123");
    }

    #[test]
    fn secrets_compare_equal_only_when_identical() {
        assert!(constant_time_eq("abc", b"abc"));
        assert!(!constant_time_eq("abc", b"abd"));
        assert!(!constant_time_eq("abc", b"abcd"));
        assert!(!constant_time_eq("abc", b""));
    }

    #[test]
    fn message_ids_are_read_from_the_last_segment() {
        assert_eq!(telegram_message_id("4711"), Some(4711));
        assert_eq!(telegram_message_id("-100123:4711"), Some(4711));
        assert_eq!(telegram_message_id("callback:abc"), None);
    }
}
