//! Interactions as they arrive: the Ed25519 signature and replay-window check, then
//! classifying each one: a PING is answered, a slash command becomes a message (or, for an
//! `/ask` without a usable question, an answer only the invoker sees), an approval button
//! becomes an approval, anything else is ignored.

use clawless_base::media::MediaKind;
use clawless_base::session_key::ChatType;
use clawless_core::turn::events::{ChatRef, InboundMessage};
use serde_json::{Value, json};

use super::commands::{ARGS_OPTION, ASK_COMMAND, ASK_OPTION, MAX_NAME_CHARS};
use super::config::DiscordPublicKey;
use super::wire::{
    APPLICATION_COMMAND, ATTACHMENT_OPTION, CHANNEL_MESSAGE_WITH_SOURCE, CHAT_INPUT, CommandData,
    CommandOption, ComponentData, DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE, DEFERRED_UPDATE_MESSAGE,
    EPHEMERAL, Interaction, MESSAGE_COMPONENT, PING, PONG, STRING_OPTION, is_snowflake, is_token,
};
use crate::media::{MediaSource, PendingMedia, placeholder_body};
use crate::webhook::{
    ChannelApproval, ChannelMessage, MAX_WEBHOOK_BODY_BYTES, PlatformChannel, PlatformReply,
    WebhookError, WebhookOutcome, WebhookRequest, approve_text, parse_approval_button,
};

/// The channel id: the route `/webhook/discord` and `ChatRef.channel`.
pub const CHANNEL_ID: &str = "discord";

/// Header with the hex Ed25519 signature.
pub const SIGNATURE_HEADER: &str = "x-signature-ed25519";
/// Header with the timestamp the signature covers (Unix seconds, as Discord sends it).
pub const TIMESTAMP_HEADER: &str = "x-signature-timestamp";

/// How far a signed timestamp may be from now: a captured request cannot be replayed later.
const REPLAY_WINDOW_SECS: u64 = 5 * 60;

/// Most unknown option names an answer lists.
const MAX_NAMED_OPTIONS: usize = 5;
/// What to do when a command's options do not match what clawless registers.
const STALE_COMMANDS_HINT: &str = "If the command looks different in Discord, its registration \
     is out of date: run `clawless channels discord register-commands`.";

/// Discord's inbound side: verifies and classifies interactions.
///
/// A skill command arrives as `/{discord name} {args}`; the webhook does not load skills, so
/// a name that had to change on Discord is mapped back by the turn, which loads them anyway
/// ([`skill_command_text`](super::skill_command_text)).
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
        let media = pending_media(&data);
        let text = if data.name == ASK_COMMAND {
            match (ask_question(&data.options), placeholder_body(&media)) {
                (Ok(question), _) => question.to_owned(),
                // A file without a question: the placeholder starts the turn.
                (Err(_), Some(placeholder)) => placeholder,
                (Err(problem), None) => return Ok(WebhookOutcome::Respond(ephemeral(&problem))),
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
            media,
        }))
    }
}

/// The files uploaded with a command: its attachment options in order, each looked up in
/// `resolved.attachments` (an id without an object is left out).
fn pending_media(data: &CommandData) -> Vec<PendingMedia> {
    let Some(resolved) = &data.resolved else {
        return Vec::new();
    };
    data.options
        .iter()
        .filter(|option| option.kind == ATTACHMENT_OPTION)
        .filter_map(|option| option.value.as_ref().and_then(Value::as_str))
        .filter_map(|id| resolved.attachments.get(id))
        .map(|attachment| {
            let mime = attachment
                .content_type
                .clone()
                .filter(|mime| !mime.trim().is_empty());
            PendingMedia {
                kind: mime
                    .as_deref()
                    .map_or(MediaKind::Document, MediaKind::of_mime),
                mime,
                name: attachment.filename.clone(),
                size: attachment.size,
                source: MediaSource::Url(attachment.url.clone()),
            }
        })
        .collect()
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
    data: Option<&Value>, field: &str,
) -> Result<T, WebhookError> {
    let data = data.ok_or_else(|| bad_request(format!("interaction without {field}")))?;
    serde_path_to_error::deserialize(data)
        .map_err(|err| bad_request(format!("malformed interaction {field}: {err}")))
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
            attachments: Vec::new(),
        }
    }
}
