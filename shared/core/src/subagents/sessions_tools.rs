//! `sessions_list`, `sessions_history`, `sessions_send` and `sessions_yield` (spec §3.8) and
//! session visibility (§3.9): the tools' contracts with the model, argument reading with
//! OpenClaw's exact errors, the visibility check every access passes, the capping of a
//! history answer, the `sessions_send` result shapes, and the agent-to-agent prompts of the
//! exchange that follows a send.
//!
//! The runtime lists and reads sessions, resolves labels and the spawned tree, runs the
//! target turns and the ping-pong, and delivers the announce step's reply.

use clawless_base::reply_tokens::REPLY_SKIP;
use serde_json::{Map, Value, json};

use super::agent_id_of_key;
use super::announce::is_announce_silent;
use super::config::{AgentToAgentConfig, SessionVisibility, non_blank};
use super::spawn::{seconds_arg, string_arg};
use clawless_base::model::ToolSpec;
use clawless_base::transcript::{AssistantBlock, Message};

/// `sessions_list`'s name.
pub const SESSIONS_LIST: &str = "sessions_list";

/// `sessions_history`'s name.
pub const SESSIONS_HISTORY: &str = "sessions_history";

/// `sessions_send`'s name.
pub const SESSIONS_SEND: &str = "sessions_send";

/// `sessions_yield`'s name.
pub const SESSIONS_YIELD: &str = "sessions_yield";

/// `sessions_list`'s description.
pub const SESSIONS_LIST_DESCRIPTION: &str = "List the sessions you can see (by default this one and the sub-agents it spawned), most recently active first, with their status and usage; messageLimit adds each session's last messages.";

/// `sessions_history`'s description.
pub const SESSIONS_HISTORY_DESCRIPTION: &str = "Read the recent messages of a session you can see, by session key or session id. Tool results are left out unless includeTools is true; long messages are shortened.";

/// `sessions_send`'s description.
pub const SESSIONS_SEND_DESCRIPTION: &str = "Send a message into another session you can see (by sessionKey, or by label) and wait up to timeoutSeconds (default 30) for its reply; timeoutSeconds 0 sends without waiting. The two sessions may then exchange a few follow-up turns, and the target may post a final reply to its own chat.";

/// `sessions_yield`'s description.
pub const SESSIONS_YIELD_DESCRIPTION: &str =
    "End your turn now, so that results of sub-agents you spawned arrive as your next message.";

/// `sessions_yield`'s answer when no message is given.
pub const TURN_YIELDED: &str = "Turn yielded.";

/// The longest `messageLimit` of `sessions_list`.
pub const MAX_LIST_MESSAGE_LIMIT: u64 = 20;

/// The longest label `sessions_send` accepts, in characters.
pub const MAX_SEND_LABEL_CHARS: usize = 512;

/// The longest agent id `sessions_send` accepts, in characters.
pub const MAX_SEND_AGENT_ID_CHARS: usize = 64;

/// `sessions_send`'s wait when `timeoutSeconds` is unset, and the step timeout of the
/// follow-up exchange when it is 0.
pub const DEFAULT_SEND_TIMEOUT_SECONDS: u64 = 30;

/// Both a key and a label were given.
pub const SEND_KEY_AND_LABEL: &str = "Provide either sessionKey or label (not both).";

/// Neither a key nor a label was given.
pub const SEND_KEY_OR_LABEL_REQUIRED: &str = "Either sessionKey or label is required";

/// Characters kept of each text block of a history answer.
pub const HISTORY_TEXT_MAX_CHARS: usize = 4_000;

/// Appended to a text block cut at [`HISTORY_TEXT_MAX_CHARS`].
pub const HISTORY_TRUNCATION_MARKER: &str = "\n…(truncated)…";

/// The largest history answer (80 KB of JSON messages); the oldest messages are dropped.
pub const HISTORY_MAX_BYTES: usize = 80 * 1024;

/// What replaces a single message that alone exceeds [`HISTORY_MAX_BYTES`].
pub const HISTORY_OMITTED: &str = "[sessions_history omitted: message too large]";

/// The user message of the agent-to-agent announce step.
pub const A2A_ANNOUNCE_STEP_MESSAGE: &str = "Agent-to-agent announce step.";

/// `sessions_list` as offered to the model.
pub fn sessions_list_tool_spec() -> ToolSpec {
    ToolSpec {
        name: SESSIONS_LIST.to_owned(),
        description: SESSIONS_LIST_DESCRIPTION.to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "kinds": {
                    "type": "array",
                    "items": {"type": "string", "enum": ["main", "group", "cron", "hook", "node", "other"]},
                    "description": "Only sessions of these kinds."
                },
                "limit": {"type": "number", "minimum": 1, "description": "At most this many sessions."},
                "activeMinutes": {"type": "number", "minimum": 1, "description": "Only sessions active in the last this many minutes."},
                "messageLimit": {"type": "number", "minimum": 0, "maximum": MAX_LIST_MESSAGE_LIMIT, "description": "Include each session's last this many messages (0-20, default 0)."}
            }
        }),
    }
}

/// `sessions_history` as offered to the model.
pub fn sessions_history_tool_spec() -> ToolSpec {
    ToolSpec {
        name: SESSIONS_HISTORY.to_owned(),
        description: SESSIONS_HISTORY_DESCRIPTION.to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "sessionKey": {"type": "string", "description": "The session's key (or its session id)."},
                "limit": {"type": "number", "minimum": 1, "description": "At most this many of the latest messages."},
                "includeTools": {"type": "boolean", "description": "Include tool results (default false)."}
            },
            "required": ["sessionKey"]
        }),
    }
}

/// `sessions_send` as offered to the model.
pub fn sessions_send_tool_spec() -> ToolSpec {
    ToolSpec {
        name: SESSIONS_SEND.to_owned(),
        description: SESSIONS_SEND_DESCRIPTION.to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "sessionKey": {"type": "string", "description": "The target session's key (or `main`). Give this or label."},
                "label": {"type": "string", "minLength": 1, "maxLength": MAX_SEND_LABEL_CHARS, "description": "The target session's label. Give this or sessionKey."},
                "agentId": {"type": "string", "minLength": 1, "maxLength": MAX_SEND_AGENT_ID_CHARS, "description": "With label: the agent whose sessions to search."},
                "message": {"type": "string", "description": "The message to send."},
                "timeoutSeconds": {"type": "number", "minimum": 0, "description": "Seconds to wait for the reply (default 30; 0: do not wait)."}
            },
            "required": ["message"]
        }),
    }
}

/// `sessions_yield` as offered to the model.
pub fn sessions_yield_tool_spec() -> ToolSpec {
    ToolSpec {
        name: SESSIONS_YIELD.to_owned(),
        description: SESSIONS_YIELD_DESCRIPTION.to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "message": {"type": "string", "description": "Optional note to end the turn with."}
            }
        }),
    }
}

/// `sessions_yield`'s answer: `{status:"yielded", message}`.
pub fn yield_json(args: &Value) -> Value {
    let message = args
        .get("message")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|message| !message.is_empty())
        .unwrap_or(TURN_YIELDED);
    json!({"status": "yielded", "message": message})
}

/// What kind of conversation a session is, for `sessions_list`'s `kinds` filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionKind {
    /// An agent's main session.
    Main,
    /// A group chat or channel.
    Group,
    /// A cron run.
    Cron,
    /// A webhook run.
    Hook,
    /// A node host's session.
    Node,
    /// Anything else (direct chats per peer, sub-agents).
    Other,
}

impl SessionKind {
    /// The kind of a session key.
    pub fn of_key(session_key: &str) -> Self {
        let lowered = session_key.trim().to_ascii_lowercase();
        let parts: Vec<&str> = lowered.split(':').collect();
        let rest: &[&str] = match parts.as_slice() {
            ["agent", _, rest @ ..] => rest,
            other => other,
        };
        match rest {
            ["main"] => Self::Main,
            ["cron", ..] => Self::Cron,
            ["hook", ..] => Self::Hook,
            ["node", ..] => Self::Node,
            _ if rest.iter().any(|part| matches!(*part, "group" | "channel")) => Self::Group,
            _ => Self::Other,
        }
    }

    fn parse(raw: &str) -> Option<Self> {
        Some(match raw.trim().to_ascii_lowercase().as_str() {
            "main" => Self::Main,
            "group" => Self::Group,
            "cron" => Self::Cron,
            "hook" => Self::Hook,
            "node" => Self::Node,
            "other" => Self::Other,
            _ => return None,
        })
    }
}

/// A `sessions_list` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRequest {
    /// Only these kinds (empty: all).
    pub kinds: Vec<SessionKind>,
    /// At most this many sessions.
    pub limit: Option<u64>,
    /// Only sessions updated in the last this many minutes.
    pub active_minutes: Option<u64>,
    /// Last messages per session (0–20).
    pub message_limit: u64,
}

/// Reads a `sessions_list` call; unknown kinds and unusable numbers are ignored.
pub fn parse_list_call(args: &Value) -> ListRequest {
    let positive = |key: &str| seconds_arg(args.get(key)).filter(|&n| n >= 1);
    ListRequest {
        kinds: args
            .get("kinds")
            .and_then(Value::as_array)
            .map(|kinds| {
                kinds
                    .iter()
                    .filter_map(Value::as_str)
                    .filter_map(SessionKind::parse)
                    .collect()
            })
            .unwrap_or_default(),
        limit: positive("limit"),
        active_minutes: positive("activeMinutes"),
        message_limit: seconds_arg(args.get("messageLimit"))
            .unwrap_or(0)
            .min(MAX_LIST_MESSAGE_LIMIT),
    }
}

/// A `sessions_history` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryRequest {
    /// The session's key or id, as given.
    pub session_key: String,
    /// At most this many of the latest messages.
    pub limit: Option<u64>,
    /// Whether tool results are included.
    pub include_tools: bool,
}

/// Reads a `sessions_history` call (`sessionKey required`).
pub fn parse_history_call(args: &Value) -> Result<HistoryRequest, String> {
    let empty = Map::new();
    let object = args.as_object().unwrap_or(&empty);
    Ok(HistoryRequest {
        session_key: string_arg(object, "sessionKey").ok_or("sessionKey required")?,
        limit: seconds_arg(object.get("limit")).filter(|&n| n >= 1),
        include_tools: object.get("includeTools").and_then(Value::as_bool) == Some(true),
    })
}

/// Which session a `sessions_send` goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendTarget {
    /// By key (`main` and other aliases still to be resolved, see
    /// [`resolve_session_alias`]).
    Key(String),
    /// By label, optionally within one agent.
    Label {
        /// The label.
        label: String,
        /// The agent whose sessions are searched (default: the caller's).
        agent_id: Option<String>,
    },
}

/// A `sessions_send` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendRequest {
    /// The target.
    pub target: SendTarget,
    /// The message.
    pub message: String,
    /// Seconds to wait for the reply; 0: do not wait.
    pub timeout_seconds: u64,
}

/// Reads a `sessions_send` call. Errors: `Provide either sessionKey or label (not both).`,
/// `Either sessionKey or label is required`, a label or agent id that is too long, and
/// `message required`.
pub fn parse_send_call(args: &Value) -> Result<SendRequest, String> {
    let empty = Map::new();
    let object = args.as_object().unwrap_or(&empty);
    let target = match (
        string_arg(object, "sessionKey"),
        string_arg(object, "label"),
    ) {
        (Some(_), Some(_)) => return Err(SEND_KEY_AND_LABEL.to_owned()),
        (None, None) => return Err(SEND_KEY_OR_LABEL_REQUIRED.to_owned()),
        (Some(key), None) => SendTarget::Key(key),
        (None, Some(label)) => {
            if label.chars().count() > MAX_SEND_LABEL_CHARS {
                return Err(format!(
                    "label must be at most {MAX_SEND_LABEL_CHARS} characters"
                ));
            }
            let agent_id = string_arg(object, "agentId");
            if agent_id
                .as_ref()
                .is_some_and(|id| id.chars().count() > MAX_SEND_AGENT_ID_CHARS)
            {
                return Err(format!(
                    "agentId must be at most {MAX_SEND_AGENT_ID_CHARS} characters"
                ));
            }
            SendTarget::Label {
                label,
                agent_id: agent_id.map(|id| id.to_ascii_lowercase()),
            }
        }
    };
    let message = object
        .get("message")
        .and_then(Value::as_str)
        .filter(|message| !message.trim().is_empty())
        .ok_or("message required")?
        .to_owned();
    Ok(SendRequest {
        target,
        message,
        timeout_seconds: seconds_arg(object.get("timeoutSeconds"))
            .unwrap_or(DEFAULT_SEND_TIMEOUT_SECONDS),
    })
}

/// A session key with the `main` alias resolved to the caller agent's main session;
/// anything else lowercased as is.
pub fn resolve_session_alias(session_key: &str, caller_agent_id: &str) -> String {
    let key = session_key.trim().to_ascii_lowercase();
    if key == "main" {
        format!("agent:{}:main", caller_agent_id.trim().to_ascii_lowercase())
    } else {
        key
    }
}

/// `No session found with label: <label>`.
pub fn no_session_with_label(label: &str) -> String {
    format!("No session found with label: {label}")
}

/// The delivery of a send's follow-up: the announce step is still to come.
fn pending_announce() -> Value {
    json!({"status": "pending", "mode": "announce"})
}

/// `sessions_send`'s answer when it does not wait (`timeoutSeconds: 0`): `{runId,
/// status:"accepted", sessionKey, delivery:{status:"pending", mode:"announce"}}`.
pub fn send_accepted_json(run_id: &str, session_key: &str) -> Value {
    json!({
        "runId": run_id,
        "status": "accepted",
        "sessionKey": session_key,
        "delivery": pending_announce(),
    })
}

/// How a waited-for send ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    /// The target replied.
    Reply(String),
    /// No reply within the wait.
    Timeout,
    /// The target's run failed.
    Error(String),
}

/// `sessions_send`'s answer after waiting: `{runId, status:"ok", reply, sessionKey,
/// delivery}`, or `status` `timeout` / `error` with an `error`.
pub fn send_result_json(
    run_id: &str, session_key: &str, timeout_seconds: u64, outcome: &SendOutcome,
) -> Value {
    match outcome {
        SendOutcome::Reply(reply) => json!({
            "runId": run_id,
            "status": "ok",
            "reply": reply,
            "sessionKey": session_key,
            "delivery": pending_announce(),
        }),
        SendOutcome::Timeout => json!({
            "runId": run_id,
            "status": "timeout",
            "error": format!("No reply within {timeout_seconds}s. The message was delivered; the session may still answer."),
            "sessionKey": session_key,
        }),
        SendOutcome::Error(error) => json!({
            "runId": run_id,
            "status": "error",
            "error": error,
            "sessionKey": session_key,
        }),
    }
}

/// What a session tool does with the target session, for visibility errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionAction {
    /// `sessions_list`.
    List,
    /// `sessions_history`.
    History,
    /// `sessions_send`.
    Send,
    /// A status lookup.
    Status,
}

impl SessionAction {
    /// `list`, `history`, `send` or `status`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::List => "list",
            Self::History => "history",
            Self::Send => "send",
            Self::Status => "status",
        }
    }
}

/// Whether the caller may `action` the target session under `visibility`, with OpenClaw's
/// errors. Cross-agent targets need `visibility: all`, then `tools.agentToAgent.enabled`,
/// then both agents in `tools.agentToAgent.allow`; same-agent targets need `agent`/`all`,
/// or for `tree` a session in the caller's spawned tree (`in_spawned_tree`), and for `self`
/// the caller itself.
pub fn check_visibility(
    action: SessionAction, visibility: SessionVisibility, caller_session_key: &str,
    target_session_key: &str, in_spawned_tree: &dyn Fn(&str) -> bool,
    agent_to_agent: &AgentToAgentConfig,
) -> Result<(), String> {
    let caller = caller_session_key.trim().to_ascii_lowercase();
    let target = target_session_key.trim().to_ascii_lowercase();
    let verb = action.as_str();
    let caller_agent = agent_id_of_key(&caller).unwrap_or_default();
    let target_agent = agent_id_of_key(&target).unwrap_or_default();
    if caller_agent != target_agent {
        if visibility != SessionVisibility::All {
            return Err(format!(
                "Session {verb} visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access."
            ));
        }
        let subject = match action {
            SessionAction::Send => "messaging",
            other => other.as_str(),
        };
        if !agent_to_agent.enabled() {
            return Err(match action {
                SessionAction::Send => "Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent sends.".to_owned(),
                _ => format!("Agent-to-agent {subject} is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access."),
            });
        }
        if !agent_to_agent.allows(&caller_agent, &target_agent) {
            return Err(format!(
                "Agent-to-agent {subject} denied by tools.agentToAgent.allow."
            ));
        }
        return Ok(());
    }
    if caller == target {
        return Ok(());
    }
    match visibility {
        SessionVisibility::SelfOnly => Err(format!(
            "Session {verb} visibility is restricted to the current session (tools.sessions.visibility=self)."
        )),
        SessionVisibility::Tree if !in_spawned_tree(&target) => Err(format!(
            "Session {verb} visibility is restricted to the current session tree (tools.sessions.visibility=tree)."
        )),
        SessionVisibility::Tree | SessionVisibility::Agent | SessionVisibility::All => Ok(()),
    }
}

/// A `sessions_history` answer after capping.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPage {
    /// The messages, oldest first.
    pub messages: Vec<Value>,
    /// Whether anything was cut or dropped.
    pub truncated: bool,
    /// Whether older messages were dropped (or one replaced by the omitted placeholder).
    pub dropped_messages: bool,
    /// Whether a text block was cut.
    pub content_truncated: bool,
    /// Whether secrets were redacted (clawless does not redact yet: always false).
    pub content_redacted: bool,
    /// The size of `messages` as JSON.
    pub bytes: usize,
}

impl HistoryPage {
    /// `{sessionKey, messages, truncated, droppedMessages, contentTruncated,
    /// contentRedacted, bytes}`.
    pub fn to_json(&self, session_key: &str) -> Value {
        json!({
            "sessionKey": session_key,
            "messages": self.messages,
            "truncated": self.truncated,
            "droppedMessages": self.dropped_messages,
            "contentTruncated": self.content_truncated,
            "contentRedacted": self.content_redacted,
            "bytes": self.bytes,
        })
    }
}

/// A transcript message as `sessions_history` shows it: `{role, content:[blocks]}` with
/// `text` and `toolCall` blocks (tool results also carry `toolCallId`, `toolName`,
/// `isError`).
pub fn history_message_json(message: &Message) -> Value {
    let text_block = |text: &str| json!({"type": "text", "text": text});
    match message {
        Message::User { text } => json!({"role": "user", "content": [text_block(text)]}),
        Message::Assistant { content, .. } => {
            // Reasoning stays with the session that had it.
            let blocks: Vec<Value> = content
                .iter()
                .filter_map(|block| match block {
                    AssistantBlock::Text { text } => Some(text_block(text)),
                    AssistantBlock::ToolCall(call) => Some(json!({
                        "type": "toolCall",
                        "id": call.id,
                        "name": call.name,
                        "arguments": call.input,
                    })),
                    AssistantBlock::Thinking { .. } => None,
                })
                .collect();
            json!({"role": "assistant", "content": blocks})
        }
        Message::ToolResult {
            tool_call_id,
            tool_name,
            text,
            is_error,
        } => json!({
            "role": "toolResult",
            "toolCallId": tool_call_id,
            "toolName": tool_name,
            "content": [text_block(text)],
            "isError": is_error,
        }),
    }
}

/// Caps a session's messages (JSON, oldest first) for `sessions_history`: tool results go
/// unless `include_tools`, only the latest `limit` stay, every text block is cut to 4000
/// characters plus [`HISTORY_TRUNCATION_MARKER`], and the oldest messages are dropped until
/// the JSON fits in 80 KB; a newest message that alone is too large becomes
/// `{"role":"assistant","content":"[sessions_history omitted: message too large]"}`.
pub fn history_page(messages: Vec<Value>, limit: Option<u64>, include_tools: bool) -> HistoryPage {
    let mut messages: Vec<Value> = messages
        .into_iter()
        .filter(|message| include_tools || !is_tool_message(message))
        .collect();
    if let Some(limit) = limit.and_then(|limit| usize::try_from(limit).ok()) {
        let excess = messages.len().saturating_sub(limit);
        messages.drain(..excess);
    }
    let mut content_truncated = false;
    for message in &mut messages {
        content_truncated |= truncate_text_blocks(message);
    }
    // Bytes of the messages as a JSON array: brackets, the messages, commas between them.
    let array_len =
        |sizes: &[usize]| 2 + sizes.iter().sum::<usize>() + sizes.len().saturating_sub(1);
    let sizes: Vec<usize> = messages.iter().map(json_len).collect();
    let mut bytes = array_len(&sizes);
    let mut first = 0;
    while bytes > HISTORY_MAX_BYTES && first + 1 < sizes.len() {
        bytes -= sizes[first] + 1;
        first += 1;
    }
    let mut dropped_messages = first > 0;
    messages.drain(..first);
    if bytes > HISTORY_MAX_BYTES {
        messages = vec![json!({"role": "assistant", "content": HISTORY_OMITTED})];
        bytes = array_len(&[json_len(&messages[0])]);
        dropped_messages = true;
    }
    HistoryPage {
        bytes,
        messages,
        truncated: content_truncated || dropped_messages,
        dropped_messages,
        content_truncated,
        content_redacted: false,
    }
}

fn is_tool_message(message: &Value) -> bool {
    matches!(
        message.get("role").and_then(Value::as_str),
        Some("toolResult" | "tool")
    )
}

/// Cuts a message's string content or its `text` blocks; true when anything was cut.
fn truncate_text_blocks(message: &mut Value) -> bool {
    match message.get_mut("content") {
        Some(Value::String(text)) => truncate_text(text),
        Some(Value::Array(blocks)) => {
            let mut cut = false;
            for block in blocks {
                if let Some(Value::String(text)) = block.get_mut("text") {
                    cut |= truncate_text(text);
                }
            }
            cut
        }
        _ => false,
    }
}

fn truncate_text(text: &mut String) -> bool {
    match text.char_indices().nth(HISTORY_TEXT_MAX_CHARS) {
        Some((end, _)) => {
            text.truncate(end);
            text.push_str(HISTORY_TRUNCATION_MARKER);
            true
        }
        None => false,
    }
}

fn json_len(value: &Value) -> usize {
    serde_json::to_string(value).map_or(0, |text| text.len())
}

/// The sessions taking part in an agent-to-agent exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct A2aSessions<'a> {
    /// The session that called `sessions_send` (Agent 1).
    pub requester_session_key: &'a str,
    /// Its channel, when known.
    pub requester_channel: Option<&'a str>,
    /// The session it sent to (Agent 2).
    pub target_session_key: &'a str,
    /// Its channel, when known.
    pub target_channel: Option<&'a str>,
}

impl A2aSessions<'_> {
    fn lines(&self, with_target_channel: bool) -> Vec<String> {
        let mut lines = vec![format!(
            "Agent 1 (requester) session: {}.",
            self.requester_session_key
        )];
        if let Some(channel) = non_blank(self.requester_channel) {
            lines.push(format!("Agent 1 (requester) channel: {channel}."));
        }
        lines.push(format!(
            "Agent 2 (target) session: {}.",
            self.target_session_key
        ));
        if let Some(channel) = non_blank(self.target_channel).filter(|_| with_target_channel) {
            lines.push(format!("Agent 2 (target) channel: {channel}."));
        }
        lines
    }

    /// Whether there is an exchange at all: a session sending to itself gets none.
    pub fn is_cross_session(&self) -> bool {
        !self
            .requester_session_key
            .trim()
            .eq_ignore_ascii_case(self.target_session_key.trim())
    }
}

/// The extra system prompt of the target's turn that answers a `sessions_send`.
pub fn a2a_message_context(sessions: &A2aSessions<'_>) -> String {
    let mut lines = vec!["Agent-to-agent message context:".to_owned()];
    lines.extend(sessions.lines(false));
    lines.join("\n")
}

/// One side of the exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum A2aAgent {
    /// Agent 1, the session that sent.
    Requester,
    /// Agent 2, the session sent to.
    Target,
}

/// Who speaks at ping-pong turn `turn` (1-based): the requester answers the target's reply
/// first, then they alternate.
pub fn ping_pong_speaker(turn: u32) -> A2aAgent {
    if turn % 2 == 1 {
        A2aAgent::Requester
    } else {
        A2aAgent::Target
    }
}

/// The extra system prompt of ping-pong turn `turn` of `max_turns`.
pub fn a2a_reply_step_prompt(sessions: &A2aSessions<'_>, turn: u32, max_turns: u32) -> String {
    let current = match ping_pong_speaker(turn) {
        A2aAgent::Requester => "Agent 1 (requester)",
        A2aAgent::Target => "Agent 2 (target)",
    };
    let mut lines = vec![
        "Agent-to-agent reply step:".to_owned(),
        format!("Current agent: {current}."),
        format!("Turn {turn} of {max_turns}."),
    ];
    lines.extend(sessions.lines(true));
    lines.push(format!(
        "If you want to stop the ping-pong, reply exactly \"{REPLY_SKIP}\"."
    ));
    lines.join("\n")
}

/// Whether a ping-pong reply ends the exchange: empty, or exactly `REPLY_SKIP`.
pub fn ping_pong_stops(reply: &str) -> bool {
    let reply = reply.trim();
    reply.is_empty() || reply == REPLY_SKIP
}

/// The extra system prompt of the announce step that closes the exchange in the target
/// session (its message is [`A2A_ANNOUNCE_STEP_MESSAGE`]).
pub fn a2a_announce_step_prompt(
    sessions: &A2aSessions<'_>, original_request: &str, round_one_reply: Option<&str>,
    latest_reply: Option<&str>,
) -> String {
    let or_missing = |reply: Option<&str>| {
        non_blank(reply).map_or_else(|| "(not available).".to_owned(), str::to_owned)
    };
    let mut lines = vec!["Agent-to-agent announce step:".to_owned()];
    lines.extend(sessions.lines(true));
    lines.extend([
        format!("Original request: {}", original_request.trim()),
        format!("Round 1 reply: {}", or_missing(round_one_reply)),
        format!("Latest reply: {}", or_missing(latest_reply)),
        "If you want to remain silent, reply exactly \"ANNOUNCE_SKIP\".".to_owned(),
        "Any other reply will be posted to the target channel.".to_owned(),
        "After this reply, the agent-to-agent conversation is over.".to_owned(),
    ]);
    lines.join("\n")
}

/// Whether the announce step's reply posts nothing: empty, `ANNOUNCE_SKIP` or `NO_REPLY`.
pub fn a2a_announce_is_silent(reply: &str) -> bool {
    reply.trim().is_empty() || is_announce_silent(reply)
}

/// The timeout of each follow-up step: the send's `timeoutSeconds`, 30 when that is 0.
pub fn a2a_step_timeout_seconds(timeout_seconds: u64) -> u64 {
    if timeout_seconds == 0 {
        DEFAULT_SEND_TIMEOUT_SECONDS
    } else {
        timeout_seconds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a2a(value: Value) -> AgentToAgentConfig {
        serde_json::from_value(value).expect("valid config")
    }

    fn visible(
        action: SessionAction, visibility: SessionVisibility, caller: &str, target: &str,
        config: &AgentToAgentConfig,
    ) -> Result<(), String> {
        let tree = |key: &str| key.starts_with("agent:main:subagent:");
        check_visibility(action, visibility, caller, target, &tree, config)
    }

    /// Spec §6 vector 48.
    #[test]
    fn vector_48_send_needs_exactly_one_target_and_zero_timeout_is_accepted_at_once() {
        assert_eq!(
            parse_send_call(&json!({"sessionKey": "a", "label": "b"})),
            Err("Provide either sessionKey or label (not both).".to_owned())
        );
        assert_eq!(
            parse_send_call(&json!({"message": "hi"})),
            Err("Either sessionKey or label is required".to_owned())
        );
        let request =
            parse_send_call(&json!({"sessionKey": "main", "message": "hi", "timeoutSeconds": 0}))
                .expect("valid");
        assert_eq!(request.timeout_seconds, 0);
        assert_eq!(request.target, SendTarget::Key("main".to_owned()));
        let key = match &request.target {
            SendTarget::Key(key) => resolve_session_alias(key, "main"),
            SendTarget::Label { .. } => unreachable!("a key was given"),
        };
        assert_eq!(key, "agent:main:main");
        assert_eq!(
            send_accepted_json("run-1", &key),
            json!({
                "runId": "run-1",
                "status": "accepted",
                "sessionKey": "agent:main:main",
                "delivery": {"status": "pending", "mode": "announce"}
            })
        );
    }

    #[test]
    fn send_calls_default_their_wait_and_check_labels() {
        let request =
            parse_send_call(&json!({"label": "build", "agentId": "Ops", "message": "status?"}))
                .expect("valid");
        assert_eq!(request.timeout_seconds, 30);
        assert_eq!(
            request.target,
            SendTarget::Label {
                label: "build".to_owned(),
                agent_id: Some("ops".to_owned())
            }
        );
        assert_eq!(
            parse_send_call(&json!({"sessionKey": "k"})),
            Err("message required".to_owned())
        );
        assert!(parse_send_call(&json!({"label": "x".repeat(513), "message": "m"})).is_err());
        assert_eq!(no_session_with_label("x"), "No session found with label: x");
        let ok = send_result_json("r", "k", 30, &SendOutcome::Reply("pong".to_owned()));
        assert_eq!(ok["status"], "ok");
        assert_eq!(ok["reply"], "pong");
        assert_eq!(ok["delivery"]["mode"], "announce");
        assert_eq!(
            send_result_json("r", "k", 30, &SendOutcome::Timeout)["status"],
            "timeout"
        );
    }

    /// Spec §6 vector 50.
    #[test]
    fn vector_50_cross_agent_history_needs_visibility_all_and_agent_to_agent() {
        let off = AgentToAgentConfig::default();
        assert_eq!(
            visible(SessionAction::History, SessionVisibility::Tree, "agent:main:main", "agent:ops:main", &off),
            Err("Session history visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access.".to_owned())
        );
        let disabled = visible(
            SessionAction::History,
            SessionVisibility::All,
            "agent:main:main",
            "agent:ops:main",
            &off,
        )
        .expect_err("disabled");
        assert!(
            disabled.starts_with("Agent-to-agent history is disabled. "),
            "{disabled}"
        );
        assert_eq!(
            visible(SessionAction::Send, SessionVisibility::All, "agent:main:main", "agent:ops:main", &off),
            Err("Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent sends.".to_owned())
        );
        let only_main = a2a(json!({"enabled": true, "allow": ["main"]}));
        assert_eq!(
            visible(
                SessionAction::Send,
                SessionVisibility::All,
                "agent:main:main",
                "agent:ops:main",
                &only_main
            ),
            Err("Agent-to-agent messaging denied by tools.agentToAgent.allow.".to_owned())
        );
        assert_eq!(
            visible(
                SessionAction::List,
                SessionVisibility::All,
                "agent:main:main",
                "agent:ops:main",
                &only_main
            ),
            Err("Agent-to-agent list denied by tools.agentToAgent.allow.".to_owned())
        );
        let open = a2a(json!({"enabled": true}));
        assert_eq!(
            visible(
                SessionAction::History,
                SessionVisibility::All,
                "agent:main:main",
                "agent:ops:main",
                &open
            ),
            Ok(())
        );
    }

    #[test]
    fn same_agent_visibility_follows_self_tree_agent() {
        let off = AgentToAgentConfig::default();
        let check = |visibility, target: &str| {
            visible(
                SessionAction::Send,
                visibility,
                "agent:main:main",
                target,
                &off,
            )
        };
        assert_eq!(
            check(SessionVisibility::SelfOnly, "agent:main:main"),
            Ok(())
        );
        assert_eq!(
            check(SessionVisibility::SelfOnly, "agent:main:subagent:x"),
            Err("Session send visibility is restricted to the current session (tools.sessions.visibility=self).".to_owned())
        );
        assert_eq!(
            check(SessionVisibility::Tree, "agent:main:subagent:x"),
            Ok(())
        );
        assert_eq!(
            check(SessionVisibility::Tree, "agent:main:telegram:group:1"),
            Err("Session send visibility is restricted to the current session tree (tools.sessions.visibility=tree).".to_owned())
        );
        assert_eq!(
            check(SessionVisibility::Agent, "agent:main:telegram:group:1"),
            Ok(())
        );
        assert_eq!(
            check(SessionVisibility::All, "agent:main:telegram:group:1"),
            Ok(())
        );
    }

    fn text_message(role: &str, chars: usize) -> Value {
        json!({"role": role, "content": [{"type": "text", "text": "a".repeat(chars)}]})
    }

    /// Spec §6 vector 51.
    #[test]
    fn vector_51_history_blocks_are_cut_and_an_oversized_newest_message_is_omitted() {
        let page = history_page(
            vec![
                text_message("user", 10_000),
                text_message("assistant", 10_000),
            ],
            None,
            false,
        );
        assert_eq!(page.messages.len(), 2);
        for message in &page.messages {
            let text = message["content"][0]["text"].as_str().expect("text");
            assert_eq!(text, format!("{}\n…(truncated)…", "a".repeat(4_000)));
        }
        assert!(page.content_truncated && page.truncated && !page.dropped_messages);
        assert_eq!(
            page.bytes,
            serde_json::to_string(&page.messages).expect("json").len()
        );

        let blocks: Vec<Value> = (0..25)
            .map(|_| json!({"type": "text", "text": "b".repeat(10_000)}))
            .collect();
        let huge = json!({"role": "assistant", "content": blocks});
        let page = history_page(vec![text_message("user", 10), huge], None, false);
        assert_eq!(
            page.messages,
            [
                json!({"role": "assistant", "content": "[sessions_history omitted: message too large]"})
            ]
        );
        assert!(page.dropped_messages && page.truncated);
        assert_eq!(page.to_json("agent:main:main")["droppedMessages"], true);
    }

    #[test]
    fn history_drops_the_oldest_messages_to_fit_and_leaves_out_tool_results() {
        let messages: Vec<Value> = (0..30).map(|_| text_message("user", 3_900)).collect();
        let page = history_page(messages, None, false);
        assert!(page.bytes <= HISTORY_MAX_BYTES && page.messages.len() < 30);
        assert!(page.dropped_messages && !page.content_truncated && page.truncated);

        let with_tool = vec![
            history_message_json(&Message::User {
                text: "hi".to_owned(),
            }),
            history_message_json(&Message::ToolResult {
                tool_call_id: "t".to_owned(),
                tool_name: "read".to_owned(),
                text: "file".to_owned(),
                is_error: false,
            }),
            text_message("assistant", 5),
        ];
        assert_eq!(
            history_page(with_tool.clone(), None, false).messages.len(),
            2
        );
        assert_eq!(
            history_page(with_tool.clone(), None, true).messages.len(),
            3
        );
        let last = history_page(with_tool, Some(1), true);
        assert_eq!(last.messages, [text_message("assistant", 5)]);
        assert!(!last.truncated);
    }

    #[test]
    fn list_and_history_calls_parse() {
        let list = parse_list_call(
            &json!({"kinds": ["main", "bogus", "Cron"], "limit": 0, "activeMinutes": 15, "messageLimit": 50}),
        );
        assert_eq!(list.kinds, [SessionKind::Main, SessionKind::Cron]);
        assert_eq!(
            (list.limit, list.active_minutes, list.message_limit),
            (None, Some(15), 20)
        );
        assert_eq!(
            parse_history_call(&json!({})),
            Err("sessionKey required".to_owned())
        );
        let history =
            parse_history_call(&json!({"sessionKey": "main", "limit": 5, "includeTools": true}))
                .expect("valid");
        assert_eq!((history.limit, history.include_tools), (Some(5), true));
        for (key, kind) in [
            ("agent:main:main", SessionKind::Main),
            ("agent:main:cron:job:run:1", SessionKind::Cron),
            ("agent:main:discord:group:1", SessionKind::Group),
            ("agent:main:subagent:x", SessionKind::Other),
        ] {
            assert_eq!(SessionKind::of_key(key), kind, "{key}");
        }
        assert_eq!(
            yield_json(&json!({})),
            json!({"status": "yielded", "message": "Turn yielded."})
        );
    }

    #[test]
    fn agent_to_agent_prompts_name_both_sessions() {
        let sessions = A2aSessions {
            requester_session_key: "agent:main:main",
            requester_channel: Some("telegram"),
            target_session_key: "agent:ops:slack:group:c1",
            target_channel: Some("slack"),
        };
        assert_eq!(
            a2a_message_context(&sessions),
            "Agent-to-agent message context:\nAgent 1 (requester) session: agent:main:main.\nAgent 1 (requester) channel: telegram.\nAgent 2 (target) session: agent:ops:slack:group:c1."
        );
        let step = a2a_reply_step_prompt(&sessions, 2, 5);
        assert!(step.starts_with(
            "Agent-to-agent reply step:\nCurrent agent: Agent 2 (target).\nTurn 2 of 5.\n"
        ));
        assert!(step.ends_with("If you want to stop the ping-pong, reply exactly \"REPLY_SKIP\"."));
        assert_eq!(ping_pong_speaker(1), A2aAgent::Requester);
        assert!(ping_pong_stops(" REPLY_SKIP ") && ping_pong_stops("") && !ping_pong_stops("ok"));
        let announce = a2a_announce_step_prompt(&sessions, "status?", None, Some("all green"));
        for line in [
            "Original request: status?",
            "Round 1 reply: (not available).",
            "Latest reply: all green",
            "If you want to remain silent, reply exactly \"ANNOUNCE_SKIP\".",
            "Any other reply will be posted to the target channel.",
        ] {
            assert!(announce.contains(line), "{line}");
        }
        assert!(announce.ends_with("After this reply, the agent-to-agent conversation is over."));
        assert!(a2a_announce_is_silent("ANNOUNCE_SKIP") && !a2a_announce_is_silent("Posted."));
        assert_eq!(
            (a2a_step_timeout_seconds(0), a2a_step_timeout_seconds(12)),
            (30, 12)
        );
        assert!(sessions.is_cross_session());
    }

    #[test]
    fn tool_specs_name_their_tools() {
        assert_eq!(sessions_list_tool_spec().name, "sessions_list");
        assert_eq!(
            sessions_history_tool_spec().input_schema["required"],
            json!(["sessionKey"])
        );
        assert_eq!(
            sessions_send_tool_spec().input_schema["required"],
            json!(["message"])
        );
        assert_eq!(sessions_yield_tool_spec().name, "sessions_yield");
    }
}
