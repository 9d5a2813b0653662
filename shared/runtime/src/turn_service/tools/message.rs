//! `message` (spec `openclaw-tools.md` §2): a send to any chat of a configured channel, and
//! the channel actions the outbox reports for it (react, edit, delete, poll).
//!
//! This module owns the tool's side only: reading the arguments (camelCase or snake_case,
//! legacy `to`/`channelId`), picking the channel and the target, the cross-context policy
//! (§2.7), and recording a send for the final-reply suppression (`message_sends` in the
//! core). Addressing and carrying out belong to the channels, behind the [`Outbox`] port
//! (`resolve_target`, `deliver`, `act`).
//!
//! - **Policy, in code.** A session is bound to its conversation (a sub-agent to its root
//!   parent's). Another chat of the same channel is allowed unless
//!   `tools.message.crossContext.allowWithinProvider: false`; another channel is refused
//!   unless `allowAcrossProviders: true`. Unlike OpenClaw, every action is checked, not only
//!   sends, and an unavailable channel is an error instead of a silent fallback.
//! - **Sub-agents** must name their target: they have no conversation of their own.
//! - **Exactly once.** The idempotency id is derived from the session, the turn and the call
//!   id, so a redelivered turn that runs the persisted call again reuses it and the channel
//!   drops the second copy. A failure worth retrying is retried, then fails the event (the
//!   queue redelivers it); a refusal for good is the call's error result.
//! - **Cron runs** that deliver their own answer refuse the tool (their answer is the
//!   delivery).
//! - **Files** (`media`, or `path`/`filePath`/`mediaUrl`/`fileUrl`, or `MEDIA:` lines in the
//!   text) are the session's own workspace files, read as a reply's `MEDIA:` files are
//!   (`reply_media::workspace_file`: no `..`, `~` or absolute path, no memory where it does not
//!   reach, no other session's sandbox), or stored files (`media/inbound/…`,
//!   `media/outbound/…`) this session has seen, as a reply's are (`tool_media`). URLs are refused: clawless fetches nothing to send on the
//!   model's say-so. One refused file refuses the whole send before anything goes out; the
//!   files go as [`MessageAction::Send`] with the text as their caption.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use clawless_base::media::OutboundMedia;
use clawless_base::model::ToolSpec;
use clawless_base::object_store::ObjectStore;
use clawless_channels::media_lines::{MediaRef, check_reference, extract_media_lines};
use clawless_core::outbox::{
    ActionRequest, Delivery, MediaSend, MessageAction, MessageActionKind, Outbox, OutboxError,
    PollRequest,
};
use clawless_core::sandbox::MemoryConfig;
use clawless_core::session::{SessionKey, SessionStore};
use clawless_core::tools::{ToolContext, ToolOutput};
use clawless_core::turn::OutboundReply;
use clawless_core::turn::events::{ChatRef, dedup_token};
use clawless_core::turn::message_sends::same_conversation;
use clawless_core::turn::state::{SessionMeta, SessionState};
use serde_json::{Map, Value, json};

use super::{RuntimeTool, ToolCallContext, ToolOutcome};
use crate::tools_section::message::CrossContextConfig;
use crate::turn_service::reply_media::{outbound_file, workspace_file};
use crate::turn_service::tool_media::{is_blob_key, session_has_seen};
use crate::turn_service::{REPLY_RETRY_DELAYS, TurnError};

/// The tool's name.
pub(crate) const MESSAGE_TOOL: &str = "message";

/// The channel ids clawless knows, configured or not: a name outside these is unknown.
const KNOWN_CHANNELS: [&str; 4] = ["discord", "generic", "slack", "telegram"];

/// Sub-agent levels walked up to find the conversation a sub-agent is bound to.
const MAX_PARENT_HOPS: usize = 8;

/// The refusal for a sub-agent's call without a target.
pub(crate) const EXPLICIT_TARGET_REQUIRED: &str = "Explicit message target required for this run. Provide target/targets (and channel when needed).";

/// The refusal for poll fields on a `send`.
const POLL_FIELDS_ON_SEND: &str =
    "Poll fields require action \"poll\"; use action \"poll\" instead of \"send\".";

/// The refusal in a cron run whose answer is delivered for it.
const CRON_OWNS_DELIVERY: &str = "The message tool is not available in a cron run that delivers its own result: your final answer is delivered to the job's target.";

/// The arguments that name files to send (OpenClaw's names), merged.
const MEDIA_KEYS: [&str; 5] = ["media", "mediaUrl", "path", "filePath", "fileUrl"];

/// Largest attachment a send takes from the blob store (a workspace file's cap is the same).
const MAX_BLOB_FILE_BYTES: u64 = 50 * 1024 * 1024;

/// Why a URL is not sent.
const URL_NOT_SENT: &str = "clawless does not download files to send them; send a workspace file or an attachment (media/…)";

/// The arguments that make a call a poll.
const POLL_KEYS: [&str; 4] = [
    "pollQuestion",
    "pollOption",
    "pollMulti",
    "pollDurationHours",
];

/// `message`, over the outbox (the channels and what each carries out) and the session store
/// (a sub-agent's root conversation).
pub(super) struct MessageTool {
    outbox: Arc<dyn Outbox>,
    sessions: Arc<dyn SessionStore>,
    /// Each configured channel, with the actions it carries out besides `send`.
    channels: BTreeMap<String, Vec<MessageActionKind>>,
    cross_context: CrossContextConfig,
    /// Who may see the agent's memory (`memory`): a send of `MEMORY.md` follows it.
    memory: MemoryConfig,
    /// The blob store of attachments (`media/inbound/…`) and node files (`media/outbound/…`).
    blobs: Option<Arc<dyn ObjectStore>>,
}

impl MessageTool {
    /// The tool over `outbox`'s channels, or `None` when it has none.
    pub(super) fn new(
        outbox: Arc<dyn Outbox>, sessions: Arc<dyn SessionStore>,
        cross_context: CrossContextConfig, memory: MemoryConfig,
        blobs: Option<Arc<dyn ObjectStore>>,
    ) -> Option<Self> {
        let channels: BTreeMap<String, Vec<MessageActionKind>> = outbox
            .channel_ids()
            .into_iter()
            .map(|channel| {
                let mut actions = outbox.message_actions(&channel);
                actions.retain(|kind| *kind != MessageActionKind::Send);
                actions.sort();
                actions.dedup();
                (channel, actions)
            })
            .collect();
        (!channels.is_empty()).then_some(Self {
            outbox,
            sessions,
            channels,
            cross_context,
            memory,
            blobs,
        })
    }

    /// Every action some configured channel carries out, `send` first.
    fn offered_actions(&self) -> Vec<MessageActionKind> {
        let mut actions = vec![MessageActionKind::Send];
        for kind in self.channels.values().flatten() {
            if !actions.contains(kind) {
                actions.push(*kind);
            }
        }
        actions[1..].sort();
        actions
    }

    fn is_configured(&self, channel: &str) -> bool {
        self.channels.contains_key(channel)
    }

    /// The conversation the session talks in, when its channel is configured (a sub-agent,
    /// a cron run without a chat and an internal session have none).
    fn current_conversation(&self, meta: &SessionMeta) -> Option<ChatRef> {
        if meta.subagent.is_some() {
            return None;
        }
        meta.chat
            .clone()
            .filter(|chat| self.is_configured(&chat.channel))
    }

    /// The conversation the cross-context policy holds the session to: its own, or for a
    /// sub-agent its root parent's.
    async fn bound_conversation(&self, meta: &SessionMeta) -> Result<Option<ChatRef>, String> {
        let mut run = match &meta.subagent {
            None => return Ok(self.current_conversation(meta)),
            Some(run) => run.clone(),
        };
        for _ in 0..MAX_PARENT_HOPS {
            let parent_key = run.start.parent_key.clone();
            let unreadable = || format!("The parent session {parent_key} could not be read.");
            let key = SessionKey::parse(&parent_key).ok_or_else(unreadable)?;
            let stored = match self.sessions.load_live(&key).await {
                Ok(Some(stored)) => stored,
                Ok(None) => return Ok(None),
                Err(err) => {
                    tracing::warn!(error = %err, parent = %parent_key, "message: parent session unreadable");
                    return Err(unreadable());
                }
            };
            let parent: SessionMeta =
                serde_json::from_str(&stored.meta).map_err(|_| unreadable())?;
            match parent.subagent.clone() {
                Some(next) => run = next,
                None => return Ok(self.current_conversation(&parent)),
            }
        }
        Ok(None)
    }

    /// Runs one call: the result to show, or the refusal to show as an error. `Err` only for
    /// a delivery failure worth a redelivery of the event.
    async fn run(
        &self, call_id: &str, input: &Value, state: &mut SessionState, session_key: &str,
        files: Option<&ToolContext>,
    ) -> Result<Result<Value, String>, TurnError> {
        let plan = match self.plan(input, state).await {
            Ok(plan) => plan,
            Err(refusal) => return Ok(Err(refusal)),
        };
        let media = match &plan.work {
            Work::Send {
                media, as_voice, ..
            } if !media.is_empty() => match self.load_media(media, *as_voice, state, files).await {
                Ok(loaded) => loaded,
                Err(refusal) => return Ok(Err(refusal)),
            },
            _ => Vec::new(),
        };
        let action_id = dedup_token(&format!(
            "message:{session_key}:{}:{call_id}",
            state.meta.turn
        ));
        let current = self.current_conversation(&state.meta);
        let is_current = current
            .as_ref()
            .is_some_and(|current| same_conversation(current, &plan.chat));
        let mut sent_files: Vec<String> = Vec::new();
        let delivery = match &plan.work {
            Work::Send { text, reply_to, .. } => {
                let text_with_directive = match reply_to {
                    Some(id) => format!("[[reply_to:{id}]] {text}"),
                    None => text.clone(),
                };
                // The turn's message id means nothing in another chat.
                let in_reply_to = is_current
                    .then(|| state.meta.turn_message_id.clone())
                    .flatten();
                let sent = if media.is_empty() {
                    let reply = OutboundReply {
                        reply_id: action_id,
                        chat: plan.chat.clone(),
                        text: text_with_directive,
                        approval_code: None,
                        in_reply_to,
                        media: Vec::new(),
                    };
                    self.with_retries(|| self.outbox.deliver(&reply)).await?
                } else {
                    sent_files = media.iter().map(|file| file.name.clone()).collect();
                    let request = ActionRequest {
                        action_id,
                        chat: plan.chat.clone(),
                        action: MessageAction::Send(MediaSend {
                            text: text_with_directive,
                            media,
                            in_reply_to,
                        }),
                    };
                    self.with_retries(|| self.outbox.act(&request)).await?
                };
                let delivery = match sent {
                    Ok(delivery) => delivery,
                    Err(refusal) => return Ok(Err(refusal)),
                };
                state.record_message_send(plan.chat.clone(), text);
                delivery
            }
            Work::Act(action) => {
                let request = ActionRequest {
                    action_id,
                    chat: plan.chat.clone(),
                    action: action.clone(),
                };
                match self.with_retries(|| self.outbox.act(&request)).await? {
                    Ok(delivery) => delivery,
                    Err(refusal) => return Ok(Err(refusal)),
                }
            }
        };
        tracing::info!(session = %session_key, action = plan.kind.name(), channel = %plan.chat.channel, files = sent_files.len(), "message tool call carried out");
        let mut result = json!({
            "channel": plan.chat.channel,
            "to": plan.chat.chat_id,
            "result": {
                "messageId": delivery.message_id,
                "chatId": plan.chat.chat_id,
            },
        });
        if !sent_files.is_empty() {
            result["media"] = json!(sent_files);
        }
        Ok(Ok(result))
    }

    /// The files a send names, read; the refusal of the first one that may not be sent.
    async fn load_media(
        &self, references: &[MediaRef], as_voice: bool, state: &SessionState,
        files: Option<&ToolContext>,
    ) -> Result<Vec<OutboundMedia>, String> {
        let files = files.ok_or("Files cannot be sent from here (no workspace).")?;
        // Exactly as a reply's `MEDIA:` files: the session's own workspace (its sandbox's),
        // memory only where it reaches.
        let memory_reaches = self.memory.reaches(
            state.key.as_str(),
            files.sandbox.is_some(),
            state.meta.untrusted,
        );
        let mut loaded = Vec::with_capacity(references.len());
        for reference in references {
            let path = match reference {
                MediaRef::Url(url) => return Err(not_sent(url, URL_NOT_SENT)),
                MediaRef::Workspace(path) => path,
            };
            if let Some(file) = self.named_attachment(path, as_voice, state).await? {
                loaded.push(file);
                continue;
            }
            let file = workspace_file(&files.workspace, path, memory_reaches, as_voice)
                .await
                .map_err(|reason| not_sent(path, &reason))?;
            loaded.push(file);
        }
        Ok(loaded)
    }

    /// The stored file `path` names (`media/inbound/…`, `media/outbound/…`), under the rule a
    /// reply's `MEDIA:` lines follow: only one this session has seen (its key in a message the
    /// session received or a tool result), so no session sends another chat's file by
    /// guessing its key. `None` for any other path (a workspace file).
    async fn named_attachment(
        &self, path: &str, as_voice: bool, state: &SessionState,
    ) -> Result<Option<OutboundMedia>, String> {
        if !is_blob_key(path) {
            return Ok(None);
        }
        if !session_has_seen(&state.steps, path) {
            return Err(not_sent(path, "not a file this chat has seen"));
        }
        let Some(blobs) = &self.blobs else {
            return Err(not_sent(path, "no blob store here"));
        };
        match blobs.get(path, MAX_BLOB_FILE_BYTES + 1).await {
            Ok(Some(object)) if object.bytes.len() as u64 > MAX_BLOB_FILE_BYTES => {
                Err(not_sent(path, "larger than 50 MB"))
            }
            Ok(Some(object)) => Ok(Some(outbound_file(path, object.bytes, as_voice))),
            Ok(None) => Err(not_sent(path, "no such stored file")),
            Err(err) => {
                tracing::warn!(%path, error = %err, "stored file to send unreadable");
                Err(not_sent(path, "unreadable"))
            }
        }
    }

    /// Calls `attempt` until it succeeds, is refused for good (the refusal's text), or has
    /// failed after every retry (`Err`: the event is redelivered and the call runs again
    /// under the same idempotency id).
    async fn with_retries<'a, F, Fut>(
        &'a self, attempt: F,
    ) -> Result<Result<Delivery, String>, TurnError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<Delivery, OutboxError>> + 'a,
    {
        let mut delays = REPLY_RETRY_DELAYS.iter();
        loop {
            match attempt().await {
                Ok(delivery) => return Ok(Ok(delivery)),
                Err(OutboxError::Rejected { message }) => return Ok(Err(message)),
                Err(OutboxError::UnknownChannel(channel)) => {
                    return Ok(Err(format!("Channel is unavailable: {channel}")));
                }
                Err(err) => match delays.next() {
                    Some(delay) => {
                        tracing::warn!(error = %err, ?delay, "message delivery failed; retrying");
                        tokio::time::sleep(*delay).await;
                    }
                    None => return Err(err.into()),
                },
            }
        }
    }

    /// Reads the call, picks the channel and the target, and applies the policy.
    async fn plan(&self, input: &Value, state: &SessionState) -> Result<Plan, String> {
        let args = Args::of(input)?;
        let action = args.required("action")?.to_ascii_lowercase();
        let kind = action_kind(&action).ok_or_else(|| {
            let names: Vec<&str> = self.offered_actions().iter().map(|k| k.name()).collect();
            format!(
                "Unknown action: {action}. Use one of: {}.",
                names.join(", ")
            )
        })?;
        if crate::turn_service::cron::current_cron_run(state).is_some()
            && state
                .heartbeat_delivery()
                .is_some_and(|delivery| delivery.target.chat().is_some())
        {
            return Err(CRON_OWNS_DELIVERY.to_owned());
        }
        if kind == MessageActionKind::Send && POLL_KEYS.iter().any(|key| args.present(key)) {
            return Err(POLL_FIELDS_ON_SEND.to_owned());
        }
        // Legacy `to` / `channelId` count only when `target` is absent.
        let target = args
            .string("target")?
            .or(args.string("to")?)
            .or(args.string("channelId")?);
        if state.meta.subagent.is_some() && target.is_none() {
            return Err(EXPLICIT_TARGET_REQUIRED.to_owned());
        }
        let current = self.current_conversation(&state.meta);
        let bound = self.bound_conversation(&state.meta).await?;
        let channel = self.pick_channel(args.string("channel")?, current.as_ref())?;
        if let Some(bound) = &bound
            && bound.channel != channel
            && !self.cross_context.allows_across_providers()
        {
            return Err(across_denied(&action, &channel, &bound.channel));
        }
        if !self.is_configured(&channel) {
            return Err(format!("Channel is unavailable: {channel}"));
        }
        if kind != MessageActionKind::Send
            && !self
                .channels
                .get(&channel)
                .is_some_and(|k| k.contains(&kind))
        {
            return Err(format!(
                "Message action {action} not supported for channel {channel}."
            ));
        }
        let thread = args.string("threadId")?;
        let chat = match (&target, &current) {
            (Some(target), _) => self.resolve(&channel, target, thread.as_deref()).await?,
            (None, Some(current)) if current.channel == channel => match &thread {
                None => current.clone(),
                Some(_) => {
                    self.resolve(&channel, &current.chat_id, thread.as_deref())
                        .await?
                }
            },
            (None, _) => return Err(format!("Action {action} requires a target.")),
        };
        if let Some(bound) = &bound {
            if chat.channel != bound.channel && !self.cross_context.allows_across_providers() {
                return Err(across_denied(&action, &chat.channel, &bound.channel));
            }
            if chat.channel == bound.channel
                && !same_conversation(&chat, bound)
                && !self.cross_context.allows_within_provider()
            {
                let shown = target.as_deref().unwrap_or(&chat.chat_id);
                return Err(format!(
                    "Cross-context messaging denied: action={action} target=\"{shown}\" while bound to \"{}\" (channel={channel}).",
                    bound.chat_id
                ));
            }
        }
        // The chat as the session knows it keeps its chat type.
        let chat = match &current {
            Some(current) if same_conversation(current, &chat) => current.clone(),
            _ => chat,
        };
        let inbound_here = current
            .as_ref()
            .is_some_and(|current| same_conversation(current, &chat))
            .then(|| state.meta.turn_message_id.clone())
            .flatten();
        let work = work_of(kind, &args, inbound_here)?;
        Ok(Plan { kind, chat, work })
    }

    /// The channel: named (`Unknown channel` for a name clawless does not know), else the
    /// current conversation's, else the only configured one.
    fn pick_channel(
        &self, named: Option<String>, current: Option<&ChatRef>,
    ) -> Result<String, String> {
        if let Some(named) = named {
            let channel = named.to_ascii_lowercase();
            if !KNOWN_CHANNELS.contains(&channel.as_str()) && !self.is_configured(&channel) {
                return Err(format!("Unknown channel: {named}"));
            }
            return Ok(channel);
        }
        if let Some(current) = current {
            return Ok(current.channel.clone());
        }
        let configured: Vec<&str> = self.channels.keys().map(String::as_str).collect();
        match configured.as_slice() {
            [] => Err("Channel is required (no configured channels detected).".to_owned()),
            [only] => Ok((*only).to_owned()),
            many => Err(format!(
                "Channel is required when multiple channels are configured: {}",
                many.join(", ")
            )),
        }
    }

    /// The chat `target` names on `channel`, as the channel reads it.
    async fn resolve(
        &self, channel: &str, target: &str, thread: Option<&str>,
    ) -> Result<ChatRef, String> {
        match self.outbox.resolve_target(channel, target, thread).await {
            Ok(chat) => Ok(chat),
            Err(OutboxError::UnknownChannel(_)) => {
                Err(format!("Channel is unavailable: {channel}"))
            }
            Err(OutboxError::Rejected { message }) => Err(message),
            Err(err @ OutboxError::Failed { .. }) => {
                tracing::warn!(error = %err, channel, "message target could not be resolved");
                Err(format!(
                    "Target \"{target}\" for {channel} could not be resolved now: {err}"
                ))
            }
        }
    }
}

/// The refusal of a file a send names.
fn not_sent(candidate: &str, reason: &str) -> String {
    format!("Cannot send {candidate}: {reason}.")
}

fn across_denied(action: &str, channel: &str, bound: &str) -> String {
    format!(
        "Cross-context messaging denied: action={action} target provider \"{channel}\" while bound to \"{bound}\"."
    )
}

/// What a call comes to once read.
struct Plan {
    kind: MessageActionKind,
    chat: ChatRef,
    work: Work,
}

enum Work {
    Send {
        /// The text as sent, without the reply directive (the files' caption when there are
        /// files; may then be empty).
        text: String,
        reply_to: Option<String>,
        /// The files named, checked for form (no URL loaded, no path outside read).
        media: Vec<MediaRef>,
        /// Audio goes as a voice note.
        as_voice: bool,
    },
    Act(MessageAction),
}

fn action_kind(name: &str) -> Option<MessageActionKind> {
    [
        MessageActionKind::Send,
        MessageActionKind::React,
        MessageActionKind::Edit,
        MessageActionKind::Delete,
        MessageActionKind::Poll,
    ]
    .into_iter()
    .find(|kind| kind.name() == name)
}

/// The action's own arguments. `inbound_here` is the turn's message id when the target is
/// the turn's own chat (a reaction's default).
fn work_of(
    kind: MessageActionKind, args: &Args<'_>, inbound_here: Option<String>,
) -> Result<Work, String> {
    Ok(match kind {
        MessageActionKind::Send => {
            let mut media = Vec::new();
            for key in MEDIA_KEYS {
                for candidate in args.strings(key)? {
                    let reference = check_reference(&candidate)
                        .map_err(|reason| not_sent(&candidate, &reason))?;
                    if !media.contains(&reference) {
                        media.push(reference);
                    }
                }
            }
            let text = match args.text("message")?.or(args.text("caption")?) {
                Some(text) => text,
                None if !media.is_empty() => String::new(),
                None => return Err("message required".to_owned()),
            };
            // `MEDIA:` lines in the text name files too.
            let lines = extract_media_lines(&strip_reasoning(&text));
            if let Some(refused) = lines.refused.first() {
                return Err(not_sent(&refused.candidate, &refused.reason));
            }
            for reference in lines.media {
                if !media.contains(&reference) {
                    media.push(reference);
                }
            }
            if lines.text.trim().is_empty() && media.is_empty() {
                return Err("send requires text or media".to_owned());
            }
            Work::Send {
                text: lines.text.trim().to_owned(),
                reply_to: args.string("replyTo")?,
                media,
                as_voice: args.flag("asVoice")?
                    || args.flag("audioAsVoice")?
                    || lines.audio_as_voice,
            }
        }
        MessageActionKind::React => Work::Act(MessageAction::React {
            message_id: match args.string("messageId")? {
                Some(id) => id,
                None => inbound_here.ok_or("messageId required")?,
            },
            emoji: args.required("emoji")?,
            remove: args.flag("remove")?,
        }),
        MessageActionKind::Edit => Work::Act(MessageAction::Edit {
            message_id: args.required("messageId")?,
            text: args.text("message")?.ok_or("message required")?,
        }),
        MessageActionKind::Delete => Work::Act(MessageAction::Delete {
            message_id: args.required("messageId")?,
        }),
        MessageActionKind::Poll => {
            let question = args.required("pollQuestion")?;
            let options = args.strings("pollOption")?;
            if options.len() < 2 {
                return Err("pollOption requires at least two values".to_owned());
            }
            Work::Act(MessageAction::Poll(PollRequest {
                question,
                options,
                allow_multiple: args.flag("pollMulti")?,
                duration_hours: args.whole_number("pollDurationHours")?,
            }))
        }
    })
}

/// Drops `<think>…</think>`-style reasoning a model left in a text.
fn strip_reasoning(text: &str) -> String {
    let mut out = text.to_owned();
    for tag in ["think", "thinking", "thought", "antthinking"] {
        let open = format!("<{tag}>");
        let close = format!("</{tag}>");
        while let Some(start) = out.to_ascii_lowercase().find(&open) {
            let end = match out.to_ascii_lowercase()[start..].find(&close) {
                Some(end) => start + end + close.len(),
                None => out.len(),
            };
            out.replace_range(start..end, "");
        }
    }
    out
}

/// The call's arguments: each key read as declared (camelCase) or in snake_case.
struct Args<'a>(&'a Map<String, Value>);

impl<'a> Args<'a> {
    fn of(input: &'a Value) -> Result<Self, String> {
        input
            .as_object()
            .map(Args)
            .ok_or_else(|| "action required".to_owned())
    }

    fn raw(&self, key: &str) -> Option<&'a Value> {
        self.0
            .get(key)
            .or_else(|| self.0.get(&snake_case(key)))
            .filter(|value| !value.is_null())
    }

    fn present(&self, key: &str) -> bool {
        self.raw(key).is_some()
    }

    /// A trimmed string (a number is taken as its digits); blank is absent.
    fn string(&self, key: &str) -> Result<Option<String>, String> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::String(text)) => {
                Ok(Some(text.trim().to_owned()).filter(|text| !text.is_empty()))
            }
            Some(Value::Number(number)) => Ok(Some(number.to_string())),
            Some(_) => Err(format!("{key} must be a string")),
        }
    }

    fn required(&self, key: &str) -> Result<String, String> {
        self.string(key)?.ok_or_else(|| format!("{key} required"))
    }

    /// A message text: literal `\n` sequences become newlines.
    fn text(&self, key: &str) -> Result<Option<String>, String> {
        Ok(self.string(key)?.map(|text| text.replace("\\n", "\n")))
    }

    fn flag(&self, key: &str) -> Result<bool, String> {
        match self.raw(key) {
            None => Ok(false),
            Some(Value::Bool(flag)) => Ok(*flag),
            Some(Value::String(text)) if text.trim().eq_ignore_ascii_case("true") => Ok(true),
            Some(Value::String(text)) if text.trim().eq_ignore_ascii_case("false") => Ok(false),
            Some(_) => Err(format!("{key} must be true or false")),
        }
    }

    fn whole_number(&self, key: &str) -> Result<Option<u32>, String> {
        match self.raw(key) {
            None => Ok(None),
            Some(value) => value
                .as_u64()
                .or_else(|| value.as_str().and_then(|text| text.trim().parse().ok()))
                .and_then(|number| u32::try_from(number).ok())
                .map(Some)
                .ok_or_else(|| format!("{key} must be a whole number")),
        }
    }

    /// A list of trimmed, non-blank strings (a single string is a list of one).
    fn strings(&self, key: &str) -> Result<Vec<String>, String> {
        let values = match self.raw(key) {
            None => return Ok(Vec::new()),
            Some(Value::Array(values)) => values.iter().collect(),
            Some(value) => vec![value],
        };
        values
            .into_iter()
            .filter_map(|value| match value {
                Value::String(text) => {
                    let text = text.trim();
                    (!text.is_empty()).then(|| Ok(text.to_owned()))
                }
                Value::Number(number) => Some(Ok(number.to_string())),
                _ => Some(Err(format!("{key} must be a list of strings"))),
            })
            .collect()
    }
}

/// `messageId` → `message_id`.
fn snake_case(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The error envelope every refusal is shown in.
fn error_output(error: &str) -> ToolOutput {
    let envelope = json!({"status": "error", "tool": MESSAGE_TOOL, "error": error});
    ToolOutput::error(pretty(&envelope))
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

#[async_trait]
impl RuntimeTool for MessageTool {
    fn spec(&self) -> ToolSpec {
        let actions = self.offered_actions();
        let has = |kind| actions.contains(&kind);
        let per_channel: Vec<String> = self
            .channels
            .iter()
            .map(|(channel, kinds)| {
                let names: Vec<&str> = std::iter::once("send")
                    .chain(kinds.iter().map(|kind| kind.name()))
                    .collect();
                format!("{channel} ({})", names.join(", "))
            })
            .collect();
        // Terse, and only what the configured channels use: this schema rides on every request.
        let description = format!(
            "Send a message to a chat, or act on one. Channels: {}. Default target: the current chat.",
            per_channel.join("; ")
        );
        let platform = |name: &str| self.channels.contains_key(name);
        let mut properties = Map::new();
        let names: Vec<&str> = actions.iter().map(|kind| kind.name()).collect();
        properties.insert("action".into(), json!({"type": "string", "enum": names}));
        if self.channels.len() > 1 {
            let channels: Vec<&String> = self.channels.keys().collect();
            properties.insert(
                "channel".into(),
                json!({"type": "string", "enum": channels}),
            );
        }
        let target = if platform("slack") || platform("discord") {
            "Chat id, or `channel:<id>` / `user:<id>` (Slack, Discord)."
        } else {
            "Chat id."
        };
        properties.insert(
            "target".into(),
            json!({"type": "string", "description": target}),
        );
        properties.insert("message".into(), json!({"type": "string"}));
        // Every channel sends files.
        properties.insert(
            "media".into(),
            json!({"type": ["string", "array"], "items": {"type": "string"}, "description": "Workspace file(s) or attachment (media/…) to send; message is the caption."}),
        );
        properties.insert("asVoice".into(), json!({"type": "boolean"}));
        if self
            .channels
            .keys()
            .any(|channel| clawless_channels::directives::honours_reply_tags(channel))
        {
            properties.insert(
                "replyTo".into(),
                json!({"type": "string", "description": "Message id to reply to."}),
            );
            properties.insert(
                "threadId".into(),
                json!({"type": "string", "description": "Thread or topic."}),
            );
        }
        if has(MessageActionKind::React)
            || has(MessageActionKind::Edit)
            || has(MessageActionKind::Delete)
        {
            properties.insert(
                "messageId".into(),
                json!({"type": "string", "description": "Default for react: the message you answer."}),
            );
        }
        if has(MessageActionKind::React) {
            properties.insert("emoji".into(), json!({"type": "string"}));
            properties.insert("remove".into(), json!({"type": "boolean"}));
        }
        if has(MessageActionKind::Poll) {
            properties.insert("pollQuestion".into(), json!({"type": "string"}));
            properties.insert(
                "pollOption".into(),
                json!({"type": "array", "items": {"type": "string"}}),
            );
            properties.insert("pollMulti".into(), json!({"type": "boolean"}));
            properties.insert(
                "pollDurationHours".into(),
                json!({"type": "integer", "minimum": 1}),
            );
        }
        ToolSpec {
            name: MESSAGE_TOOL.to_owned(),
            description,
            input_schema: json!({
                "type": "object",
                "properties": properties,
                "required": ["action"],
            }),
        }
    }

    /// Offered in short form until first called: a call with its arguments runs at once.
    fn deferred(&self) -> bool {
        true
    }

    async fn call(&self, context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError> {
        let outcome = self
            .run(
                &context.call.id,
                &context.call.input,
                context.state,
                context.session_key,
                context.tool_context,
            )
            .await?;
        Ok(ToolOutcome::Done(match outcome {
            Ok(result) => ToolOutput::ok(pretty(&result)),
            Err(refusal) => error_output(&refusal),
        }))
    }
}

#[cfg(test)]
mod tests {
    //! The policy against calls that try to get around it: a channel spelled differently,
    //! `to`/`channelId` beside or instead of `target`, a target that names the current chat in
    //! another form, a sub-agent relying on the implicit target or on its own lack of a chat.

    use std::sync::Mutex;

    use clawless_base::session_key::ChatType;
    use clawless_core::testing::{InMemoryObjectStore, InMemorySessionStore};
    use clawless_core::tools::Workspace;
    use clawless_core::turn::state::Step;

    use super::*;

    /// `generic` (send only) and `telegram` (react and poll too), where `@me` is chat `42`.
    #[derive(Debug, Default)]
    struct TwoChannels {
        sent: Mutex<Vec<OutboundReply>>,
        acted: Mutex<Vec<ActionRequest>>,
    }

    #[async_trait]
    impl Outbox for TwoChannels {
        async fn send(&self, reply: &OutboundReply) -> Result<(), OutboxError> {
            self.sent.lock().expect("lock").push(reply.clone());
            Ok(())
        }

        fn channel_ids(&self) -> Vec<String> {
            vec!["generic".to_owned(), "telegram".to_owned()]
        }

        fn message_actions(&self, channel: &str) -> Vec<MessageActionKind> {
            match channel {
                "telegram" => vec![MessageActionKind::Poll, MessageActionKind::React],
                _ => Vec::new(),
            }
        }

        async fn resolve_target(
            &self, channel: &str, target: &str, _thread_id: Option<&str>,
        ) -> Result<ChatRef, OutboxError> {
            let chat_id = if channel == "telegram" && target == "@me" {
                "42"
            } else {
                target
            };
            Ok(chat(channel, chat_id))
        }

        async fn act(&self, request: &ActionRequest) -> Result<Delivery, OutboxError> {
            self.acted.lock().expect("lock").push(request.clone());
            Ok(Delivery {
                message_id: Some("m-9".to_owned()),
            })
        }
    }

    fn chat(channel: &str, chat_id: &str) -> ChatRef {
        ChatRef {
            channel: channel.to_owned(),
            chat_id: chat_id.to_owned(),
            chat_type: ChatType::Direct,
        }
    }

    struct Harness {
        outbox: Arc<TwoChannels>,
        sessions: Arc<InMemorySessionStore>,
        tool: MessageTool,
    }

    fn harness(within: Option<bool>, across: Option<bool>) -> Harness {
        let outbox = Arc::new(TwoChannels::default());
        let sessions = Arc::new(InMemorySessionStore::new());
        let tool = MessageTool::new(
            outbox.clone(),
            sessions.clone(),
            CrossContextConfig {
                allow_within_provider: within,
                allow_across_providers: across,
            },
            MemoryConfig::default(),
            None,
        )
        .expect("two channels");
        Harness {
            outbox,
            sessions,
            tool,
        }
    }

    /// A session talking in telegram chat `42`, its turn started by message `in-1`.
    fn telegram_session() -> SessionState {
        let key = SessionKey::parse("agent:main:main").expect("key");
        let mut state = SessionState::new(key, "s1".to_owned(), 0);
        state.meta.chat = Some(chat("telegram", "42"));
        state.meta.turn = 3;
        state.meta.turn_message_id = Some("in-1".to_owned());
        state
    }

    async fn call(
        harness: &Harness, state: &mut SessionState, input: Value,
    ) -> Result<Value, String> {
        harness
            .tool
            .run("toolu_1", &input, state, "agent:main:main", None)
            .await
            .expect("no delivery failure")
    }

    #[tokio::test]
    async fn another_channel_is_refused_however_it_is_spelled() {
        let harness = harness(None, None);
        for channel in ["generic", " GENERIC ", "Generic"] {
            let mut state = telegram_session();
            let refusal = call(
                &harness,
                &mut state,
                json!({"action": "send", "channel": channel, "target": "c-1", "message": "x"}),
            )
            .await
            .expect_err(channel);
            assert_eq!(
                refusal,
                "Cross-context messaging denied: action=send target provider \"generic\" while bound to \"telegram\"."
            );
        }
        let mut state = telegram_session();
        let unknown = call(
            &harness,
            &mut state,
            json!({"action": "send", "channel": "teams", "target": "1", "message": "x"}),
        )
        .await
        .expect_err("unknown");
        assert_eq!(unknown, "Unknown channel: teams");
        // A known but unconfigured channel is not reached by falling back either.
        let across = harness_with_across();
        let mut state = telegram_session();
        let unavailable = call(
            &across,
            &mut state,
            json!({"action": "send", "channel": "slack", "target": "channel:C1", "message": "x"}),
        )
        .await
        .expect_err("unavailable");
        assert_eq!(unavailable, "Channel is unavailable: slack");
        assert!(harness.outbox.sent.lock().expect("lock").is_empty());
    }

    fn harness_with_across() -> Harness {
        harness(None, Some(true))
    }

    #[tokio::test]
    async fn vector_8_slack_from_telegram_is_denied_by_default() {
        let harness = harness(None, None);
        let mut state = telegram_session();
        let refusal = call(
            &harness,
            &mut state,
            json!({"action": "send", "channel": "slack", "target": "channel:C1", "message": "x"}),
        )
        .await
        .expect_err("denied");
        assert_eq!(
            refusal,
            "Cross-context messaging denied: action=send target provider \"slack\" while bound to \"telegram\"."
        );
    }

    #[tokio::test]
    async fn legacy_to_and_channel_id_cannot_slip_past_the_within_provider_switch() {
        let harness = harness(Some(false), None);
        for input in [
            json!({"action": "send", "to": "99", "message": "x"}),
            json!({"action": "send", "channelId": "99", "message": "x"}),
            // `target` wins over `to` (vector 9): the current chat in `to` does not help.
            json!({"action": "send", "to": "42", "target": "99", "message": "x"}),
            json!({"action": "react", "target": "99", "messageId": "5", "emoji": "👍"}),
        ] {
            let mut state = telegram_session();
            let refusal = call(&harness, &mut state, input.clone())
                .await
                .expect_err("denied");
            assert!(
                refusal.starts_with("Cross-context messaging denied: action=")
                    && refusal.ends_with("target=\"99\" while bound to \"42\" (channel=telegram)."),
                "{input} → {refusal}"
            );
        }
        // `to` + `channelId` without `target`: `to` is the target (vector 9).
        let mut state = telegram_session();
        let refusal = call(
            &harness,
            &mut state,
            json!({"action": "send", "to": "1", "channelId": "42", "message": "x"}),
        )
        .await
        .expect_err("to wins");
        assert!(refusal.contains("target=\"1\""), "{refusal}");
        assert!(harness.outbox.sent.lock().expect("lock").is_empty());
        assert!(harness.outbox.acted.lock().expect("lock").is_empty());
    }

    #[tokio::test]
    async fn the_current_chat_named_another_way_is_the_current_chat() {
        // Within-provider sends are off, but `@me` resolves to this very chat.
        let harness = harness(Some(false), None);
        let mut state = telegram_session();
        let result = call(
            &harness,
            &mut state,
            json!({"action": "send", "target": "@me", "message": "hi there friend"}),
        )
        .await
        .expect("allowed");
        assert_eq!(result["to"], "42");
        assert_eq!(result["channel"], "telegram");
        // The send is recorded against the resolved chat: the final reply will be dropped.
        assert_eq!(state.meta.message_sends.len(), 1);
        assert!(clawless_core::turn::message_sends::suppresses_final_reply(
            state.meta.chat.as_ref(),
            &state.meta.message_sends,
            "anything at all"
        ));
        let sent = harness.outbox.sent.lock().expect("lock").clone();
        assert_eq!(sent[0].in_reply_to.as_deref(), Some("in-1"));
    }

    #[tokio::test]
    async fn a_sub_agent_must_name_its_target_and_stays_on_its_roots_channel() {
        let harness = harness(None, None);
        // The root session talks in telegram chat 42.
        let mut root = telegram_session();
        let commit = root.pending_commit().expect("encodes");
        harness
            .sessions
            .commit(&root.key, &commit)
            .await
            .expect("stored");
        root.mark_committed(1);
        let key = SessionKey::parse("agent:main:subagent:abc").expect("key");
        let mut child = SessionState::new(key, "s2".to_owned(), 0);
        child.meta.chat = Some(chat("subagent", "agent:main:main"));
        child.meta.subagent = Some(
            serde_json::from_value(json!({
                "start": {"runId": "r1", "parentKey": "agent:main:main", "task": "t", "depth": 1,
                          "maxDepth": 2, "firstMessage": "go", "extraSystemPrompt": ""},
                "startedAtMs": 0, "status": "running"
            }))
            .expect("a run"),
        );
        // Vector 11: no target.
        let refusal = call(
            &harness,
            &mut child,
            json!({"action": "send", "message": "x"}),
        )
        .await
        .expect_err("explicit target");
        assert_eq!(refusal, EXPLICIT_TARGET_REQUIRED);
        let refusal = call(
            &harness,
            &mut child,
            json!({"action": "send", "channel": "telegram", "message": "x"}),
        )
        .await
        .expect_err("a channel is no target");
        assert_eq!(refusal, EXPLICIT_TARGET_REQUIRED);
        // Its own "subagent" chat does not free it from its root's conversation.
        let refusal = call(
            &harness,
            &mut child,
            json!({"action": "send", "channel": "generic", "target": "c-1", "message": "x"}),
        )
        .await
        .expect_err("bound to the root's channel");
        assert!(refusal.contains("while bound to \"telegram\""), "{refusal}");
        // Another telegram chat is within the provider: allowed by default.
        call(
            &harness,
            &mut child,
            json!({"action": "send", "channel": "telegram", "target": "7", "message": "x"}),
        )
        .await
        .expect("allowed");
    }

    #[tokio::test]
    async fn arguments_are_read_in_either_case_and_checked() {
        let harness = harness(None, None);
        let mut state = telegram_session();
        // Vector 10.
        let refusal = call(
            &harness,
            &mut state,
            json!({"action": "poll", "pollQuestion": "Q", "pollOption": ["a"]}),
        )
        .await
        .expect_err("one option");
        assert_eq!(refusal, "pollOption requires at least two values");
        let refusal = call(
            &harness,
            &mut state,
            json!({"action": "send", "message": "x", "pollQuestion": "Q"}),
        )
        .await
        .expect_err("poll fields on send");
        assert_eq!(refusal, POLL_FIELDS_ON_SEND);
        call(&harness, &mut state, json!({"action": "poll", "poll_question": " Lunch? ", "poll_option": ["pizza", " ", "sushi"], "poll_multi": true, "pollDurationHours": 2}))
            .await
            .expect("a poll");
        // A reaction defaults to the turn's message.
        call(
            &harness,
            &mut state,
            json!({"action": "react", "emoji": "👍"}),
        )
        .await
        .expect("a reaction");
        let acted = harness.outbox.acted.lock().expect("lock").clone();
        assert_eq!(
            acted[0].action,
            MessageAction::Poll(PollRequest {
                question: "Lunch?".to_owned(),
                options: vec!["pizza".to_owned(), "sushi".to_owned()],
                allow_multiple: true,
                duration_hours: Some(2),
            })
        );
        assert_eq!(
            acted[1].action,
            MessageAction::React {
                message_id: "in-1".to_owned(),
                emoji: "👍".to_owned(),
                remove: false
            }
        );
        // The same call run again (a redelivered turn) has the same id; another call not.
        call(
            &harness,
            &mut state,
            json!({"action": "react", "emoji": "👍"}),
        )
        .await
        .expect("again");
        harness
            .tool
            .run(
                "toolu_2",
                &json!({"action": "react", "emoji": "👍"}),
                &mut state,
                "agent:main:main",
                None,
            )
            .await
            .expect("no delivery failure")
            .expect("another call");
        let acted = harness.outbox.acted.lock().expect("lock").clone();
        assert_eq!(acted[1].action_id, acted[2].action_id);
        assert_ne!(acted[2].action_id, acted[3].action_id);
        // The generic channel has no reactions; missing keys are named.
        for (input, expected) in [
            (
                json!({"action": "react", "channel": "telegram", "target": "42"}),
                "emoji required",
            ),
            (
                json!({"action": "edit", "message": "x"}),
                "Message action edit not supported for channel telegram.",
            ),
            (json!({"action": "send"}), "message required"),
            (
                json!({"action": "send", "message": "<think>plan</think> "}),
                "send requires text or media",
            ),
            (
                json!({"action": "fly"}),
                "Unknown action: fly. Use one of: send, react, poll.",
            ),
            (json!({}), "action required"),
        ] {
            let refusal = call(&harness, &mut state, input.clone())
                .await
                .expect_err("refused");
            assert_eq!(refusal, expected, "{input}");
        }
    }

    #[tokio::test]
    async fn send_texts_get_newlines_and_the_reply_directive() {
        let harness = harness(None, None);
        let mut state = telegram_session();
        call(
            &harness,
            &mut state,
            json!({"action": "send", "target": "7", "message": "a\\nb", "replyTo": "55"}),
        )
        .await
        .expect("sent");
        let sent = harness.outbox.sent.lock().expect("lock").clone();
        assert_eq!(sent[0].text, "[[reply_to:55]] a\nb");
        assert_eq!(sent[0].in_reply_to, None, "another chat");
        assert_eq!(state.meta.message_sends[0].text, "a\nb");
    }

    /// A workspace at `ws/` with a chart, the agent's memory and another session's sandbox
    /// file, and an attachment in the same store's `media/`.
    fn files() -> ToolContext {
        let store = file_store();
        ToolContext {
            workspace: Workspace {
                store: Arc::new(store),
                prefix: "ws/".to_owned(),
            },
            skill_sources: Vec::new(),
            home_dirs: Vec::new(),
            web: None,
            session: Default::default(),
            sandbox: None,
        }
    }

    fn file_store() -> InMemoryObjectStore {
        let store = InMemoryObjectStore::named("bucket");
        for (key, bytes) in [
            ("ws/chart.png", b"\x89PNG\r\n\x1a\n-chart".as_slice()),
            ("ws/MEMORY.md", b"secret".as_slice()),
            ("ws/.sandboxes/s9/x.txt", b"theirs".as_slice()),
            (
                "media/inbound/generic/ab/0.png",
                b"\x89PNG\r\n\x1a\n-in".as_slice(),
            ),
        ] {
            store.insert(key, bytes).expect("in-memory store");
        }
        store
    }

    async fn call_with_files(
        harness: &Harness, state: &mut SessionState, input: Value,
    ) -> Result<Value, String> {
        harness
            .tool
            .run("toolu_1", &input, state, "agent:main:main", Some(&files()))
            .await
            .expect("no delivery failure")
    }

    #[tokio::test]
    async fn a_send_with_files_reads_the_workspace_and_goes_as_one_send_action() {
        let harness = harness(None, None);
        let mut state = telegram_session();
        // `media`, a `MEDIA:` line and `path` naming the same file: sent once.
        let result = call_with_files(
            &harness,
            &mut state,
            json!({"action": "send", "target": "7", "message": "Look\nMEDIA:chart.png",
                   "media": ["./chart.png"], "path": "chart.png", "replyTo": "5"}),
        )
        .await
        .expect("sent");
        assert_eq!(result["media"], json!(["chart.png"]));
        assert!(harness.outbox.sent.lock().expect("lock").is_empty());
        let acted = harness.outbox.acted.lock().expect("lock").clone();
        let MessageAction::Send(send) = &acted[0].action else {
            panic!("a send: {:?}", acted[0].action);
        };
        assert_eq!(send.text, "[[reply_to:5]] Look");
        assert_eq!(send.in_reply_to, None, "another chat");
        assert_eq!(send.media.len(), 1);
        assert_eq!(send.media[0].name, "chart.png");
        assert_eq!(send.media[0].mime, "image/png");
        assert_eq!(acted[0].chat, chat("telegram", "7"));
        assert_eq!(state.meta.message_sends[0].text, "Look");
        // Files alone need no text; voice is asked for by either name.
        call_with_files(
            &harness,
            &mut state,
            json!({"action": "send", "target": "7", "filePath": "chart.png", "audioAsVoice": true}),
        )
        .await
        .expect("files alone");
        let acted = harness.outbox.acted.lock().expect("lock").clone();
        let MessageAction::Send(send) = &acted[1].action else {
            panic!("a send");
        };
        assert_eq!(send.text, "");
        assert!(send.media[0].as_voice);
    }

    #[tokio::test]
    async fn files_out_of_reach_are_refused_and_nothing_is_sent() {
        let harness = harness(None, None);
        for (media, expected) in [
            (
                "../../etc/passwd",
                "Cannot send ../../etc/passwd: paths with `..` segments are not delivered.",
            ),
            (
                "~/x",
                "Cannot send ~/x: paths under a home directory (~) are not delivered.",
            ),
            (
                "/etc/passwd",
                "Cannot send /etc/passwd: absolute paths are not delivered; name a path in the workspace.",
            ),
            (
                "https://example.com/a.png",
                "Cannot send https://example.com/a.png: clawless does not download files to send them; send a workspace file or an attachment (media/…).",
            ),
            (
                ".sandboxes/s9/x.txt",
                "Cannot send .sandboxes/s9/x.txt: another session's files.",
            ),
            (
                "missing.png",
                "Cannot send missing.png: no such file in the workspace.",
            ),
            // A stored file this session has not seen is not its to send.
            (
                "media/inbound/generic/ab/0.png",
                "Cannot send media/inbound/generic/ab/0.png: not a file this chat has seen.",
            ),
            (
                "media/outbound/../MEMORY.md",
                "Cannot send media/outbound/../MEMORY.md: paths with `..` segments are not delivered.",
            ),
        ] {
            let mut state = telegram_session();
            let refusal = call_with_files(
                &harness,
                &mut state,
                json!({"action": "send", "target": "7", "message": "x", "media": [media]}),
            )
            .await
            .expect_err(media);
            assert_eq!(refusal, expected);
        }
        // The agent's memory leaves only where it reaches: not from a group.
        let mut group = SessionState::new(
            SessionKey::parse("agent:main:telegram:group:-100").expect("key"),
            "s3".to_owned(),
            0,
        );
        group.meta.chat = Some(ChatRef {
            chat_type: ChatType::Group,
            ..chat("telegram", "-100")
        });
        let refusal = call_with_files(
            &harness,
            &mut group,
            json!({"action": "send", "message": "x", "media": "MEMORY.md"}),
        )
        .await
        .expect_err("memory");
        assert_eq!(
            refusal,
            "Cannot send MEMORY.md: the agent's memory stays out of this chat."
        );
        // A `MEDIA:` line in the text is checked the same way.
        let mut state = telegram_session();
        let refusal = call_with_files(
            &harness,
            &mut state,
            json!({"action": "send", "target": "7", "message": "see\nMEDIA:../up.png"}),
        )
        .await
        .expect_err("media line");
        assert!(refusal.starts_with("Cannot send ../up.png:"), "{refusal}");
        // Without a workspace (no tool context) files cannot be sent at all.
        let refusal = call(
            &harness,
            &mut state,
            json!({"action": "send", "target": "7", "media": "chart.png"}),
        )
        .await
        .expect_err("no workspace");
        assert_eq!(refusal, "Files cannot be sent from here (no workspace).");
        assert!(harness.outbox.acted.lock().expect("lock").is_empty());
        assert!(harness.outbox.sent.lock().expect("lock").is_empty());
    }

    #[tokio::test]
    async fn a_stored_file_the_session_has_seen_is_sent_from_the_blob_store() {
        let outbox = Arc::new(TwoChannels::default());
        let tool = MessageTool::new(
            outbox.clone(),
            Arc::new(InMemorySessionStore::new()),
            CrossContextConfig::default(),
            MemoryConfig::default(),
            Some(Arc::new(file_store())),
        )
        .expect("two channels");
        let mut state = telegram_session();
        let key = "media/inbound/generic/ab/0.png";
        state.steps.push(Step {
            seq: 1,
            turn: 3,
            at_ms: 0,
            body: serde_json::from_value(json!({
                "type": "inbound", "messageId": "in-1", "senderId": "u1",
                "text": format!("[media attached: {key} (image/png)]"),
            }))
            .expect("an inbound step"),
        });
        let input = json!({"action": "send", "target": "7", "media": key});
        let result = tool
            .run(
                "toolu_1",
                &input,
                &mut state,
                "agent:main:main",
                Some(&files()),
            )
            .await
            .expect("no delivery failure")
            .expect("sent");
        assert_eq!(result["media"], json!(["0.png"]));
        let acted = outbox.acted.lock().expect("lock").clone();
        let MessageAction::Send(send) = &acted[0].action else {
            panic!("a send");
        };
        assert_eq!(send.media[0].bytes, b"\x89PNG\r\n\x1a\n-in");
        assert_eq!(send.media[0].kind, clawless_base::media::MediaKind::Image);
    }

    #[test]
    fn the_schema_offers_only_the_actions_that_exist() {
        let harness = harness(None, None);
        let spec = harness.tool.spec();
        assert_eq!(
            spec.input_schema["properties"]["action"]["enum"],
            json!(["send", "react", "poll"])
        );
        assert!(
            spec.input_schema["properties"]
                .get("pollQuestion")
                .is_some()
        );
        assert!(spec.input_schema["properties"].get("messageId").is_some());
        assert_eq!(
            spec.input_schema["properties"]["channel"]["enum"],
            json!(["generic", "telegram"])
        );
        assert!(spec.input_schema["properties"].get("threadId").is_some());
        assert!(
            spec.description.contains("telegram (send, react, poll)"),
            "{}",
            spec.description
        );
        assert!(spec.description.contains("generic (send)"));
        assert!(spec.input_schema["properties"].get("media").is_some());
    }
}
