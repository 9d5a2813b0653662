//! A session as the turn engine sees it: meta, the transcript steps, and what is not yet persisted.
//!
//! Steps are append-only and numbered without gaps; the engine derives its next action from
//! them, so whatever was persisted before a crash decides where a redelivered event resumes.

use std::collections::{HashSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::model::Usage;
use crate::session::{SessionCommit, SessionKey, StoredSession, StoredStep};
use crate::skills::snapshot::SkillSnapshot;
use crate::transcript::{AssistantBlock, Message, StopReason, ToolCall};

use super::events::{ApprovalDecision, ChatRef, InboundMessage};

/// How many processed message ids a session remembers for deduplication.
const SEEN_MESSAGE_IDS: usize = 256;

/// A tool call made by a slash command instead of the model (spec §5.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandDispatch {
    /// The tool to call.
    pub tool_name: String,
    /// Its arguments (`{command, commandName, skillName}`).
    pub params: serde_json::Value,
}

/// A chat message ready to start a turn: the text the model sees, or a direct tool dispatch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreparedMessage {
    /// The message as received.
    pub message: InboundMessage,
    /// Text for the model (a skill command may have rewritten it).
    pub text: String,
    /// Set when a skill command calls a tool directly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch: Option<CommandDispatch>,
    /// True for heartbeat polls.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub heartbeat: bool,
}

impl PreparedMessage {
    /// A message the model sees as written.
    pub fn plain(message: InboundMessage) -> Self {
        Self {
            text: message.text.clone(),
            message,
            dispatch: None,
            heartbeat: false,
        }
    }
}

/// One persisted transcript step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// Position, from 1.
    pub seq: u64,
    /// Turn number it belongs to.
    pub turn: u64,
    /// When it was recorded (ms since the Unix epoch).
    pub at_ms: u64,
    /// What happened.
    pub body: StepBody,
}

/// What a step records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum StepBody {
    /// The message that started a turn (after any slash-command rewrite).
    #[serde(rename_all = "camelCase")]
    Inbound {
        /// Platform message id.
        message_id: String,
        /// Sender.
        sender_id: String,
        /// Text the model sees.
        text: String,
        /// Set when a skill command calls a tool directly; the model is not invoked.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dispatch: Option<CommandDispatch>,
        /// True for heartbeat polls.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        heartbeat: bool,
    },
    /// A model response.
    #[serde(rename_all = "camelCase")]
    Assistant {
        /// Text and tool calls.
        content: Vec<AssistantBlock>,
        /// Why the model stopped.
        stop_reason: StopReason,
        /// `provider/model` that answered.
        model: String,
        /// Tokens used.
        usage: Usage,
    },
    /// A tool's result (capped for the transcript).
    #[serde(rename_all = "camelCase")]
    ToolResult {
        /// The call answered.
        call_id: String,
        /// The tool's name.
        tool_name: String,
        /// Result text.
        text: String,
        /// True when it failed or was refused.
        is_error: bool,
    },
    /// A tool call handed to a node host (or awaiting a person's approval first).
    #[serde(rename_all = "camelCase")]
    ToolPending {
        /// The call.
        call_id: String,
        /// Idempotent job id derived from session, turn and call id.
        job_id: String,
        /// True while the call waits for `/approve`.
        awaiting_approval: bool,
        /// The person's decision when this pending step follows an approval.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        approved: Option<ApprovalDecision>,
    },
    /// A reply about to be sent (persisted first, so a resend reuses its id).
    #[serde(rename_all = "camelCase")]
    Reply {
        /// Idempotency id for the channel.
        reply_id: String,
        /// The text.
        text: String,
    },
    /// The reply with this id was delivered, or refused for good by the platform (then
    /// `rejected` says why): either way it is done, and later messages go on.
    #[serde(rename_all = "camelCase")]
    ReplySent {
        /// The reply delivered.
        reply_id: String,
        /// The platform's permanent refusal (bot blocked, chat not found), when it was one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rejected: Option<String>,
    },
}

/// A call handed to a node host, as its latest pending step records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingCall<'a> {
    /// The call.
    pub call_id: &'a str,
    /// Its job id.
    pub job_id: &'a str,
    /// True while it waits for `/approve`.
    pub awaiting_approval: bool,
    /// The person's decision, once given.
    pub approved: Option<ApprovalDecision>,
}

/// Session-wide state stored next to the transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMeta {
    /// Stable id of the session.
    pub session_id: String,
    /// The agent.
    pub agent_id: String,
    /// Where replies go (from the latest message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<ChatRef>,
    /// The platform id of the message that started the current (or last) turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_message_id: Option<String>,
    /// The current (or last) turn number; 0 before the first.
    pub turn: u64,
    /// True while the current turn has not finished.
    pub turn_open: bool,
    /// Messages that arrived while a turn was running, in arrival order.
    #[serde(default)]
    pub follow_ups: VecDeque<PreparedMessage>,
    /// Recently accepted message ids (turn starts and follow-ups), newest last.
    #[serde(default)]
    pub seen_message_ids: VecDeque<String>,
    /// Whether the sender of the current turn is the owner.
    #[serde(default)]
    pub sender_is_owner: bool,
    /// Skills snapshot reused while it is not stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills_snapshot: Option<SkillSnapshot>,
    /// Input tokens used so far.
    #[serde(default)]
    pub tokens_in: u64,
    /// Output tokens used so far.
    #[serde(default)]
    pub tokens_out: u64,
    /// Creation time (ms).
    pub created_at_ms: u64,
    /// Last change (ms).
    pub updated_at_ms: u64,
}

/// Failures turning stored documents back into a session.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A stored document does not parse.
    #[error("session {key}: stored {what} is unreadable: {source}")]
    Corrupt {
        /// The session.
        key: String,
        /// `meta` or `step <seq>`.
        what: String,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// A document could not be serialised.
    #[error("session state could not be encoded: {0}")]
    Encode(#[source] serde_json::Error),
}

/// A loaded session plus the changes not yet committed.
#[derive(Debug, Clone)]
pub struct SessionState {
    /// The session key.
    pub key: SessionKey,
    /// Version loaded (0 = never committed).
    pub version: u64,
    /// Meta (possibly changed since loading).
    pub meta: SessionMeta,
    /// All steps, committed first.
    pub steps: Vec<Step>,
    committed_steps: usize,
    meta_dirty: bool,
    /// Node jobs sent during this invocation (not persisted: a redelivery resends, and the
    /// job id makes that harmless).
    dispatched_jobs: HashSet<String>,
}

impl SessionState {
    /// A session that has never been stored.
    pub fn new(key: SessionKey, session_id: String, now_ms: u64) -> Self {
        let agent_id = key.agent_id().to_owned();
        Self {
            key,
            version: 0,
            meta: SessionMeta {
                session_id,
                agent_id,
                chat: None,
                turn_message_id: None,
                turn: 0,
                turn_open: false,
                follow_ups: VecDeque::new(),
                seen_message_ids: VecDeque::new(),
                sender_is_owner: false,
                skills_snapshot: None,
                tokens_in: 0,
                tokens_out: 0,
                created_at_ms: now_ms,
                updated_at_ms: now_ms,
            },
            steps: Vec::new(),
            committed_steps: 0,
            meta_dirty: true,
            dispatched_jobs: HashSet::new(),
        }
    }

    /// Rebuilds a session from storage.
    pub fn from_stored(key: SessionKey, stored: &StoredSession) -> Result<Self, StateError> {
        let corrupt = |what: String| {
            let key = key.to_string();
            move |source| StateError::Corrupt { key, what, source }
        };
        let meta: SessionMeta =
            serde_json::from_str(&stored.meta).map_err(corrupt("meta".to_owned()))?;
        let steps = stored
            .steps
            .iter()
            .map(|step| {
                serde_json::from_str::<Step>(&step.body)
                    .map_err(corrupt(format!("step {}", step.seq)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            committed_steps: steps.len(),
            key,
            version: stored.version,
            meta,
            steps,
            meta_dirty: false,
            dispatched_jobs: HashSet::new(),
        })
    }

    /// True when something changed since the last commit.
    pub fn has_uncommitted(&self) -> bool {
        self.meta_dirty || self.committed_steps < self.steps.len()
    }

    /// The steps not yet committed.
    pub fn uncommitted_steps(&self) -> &[Step] {
        &self.steps[self.committed_steps..]
    }

    /// The commit that persists every pending change.
    pub fn pending_commit(&self) -> Result<SessionCommit, StateError> {
        let steps = self
            .uncommitted_steps()
            .iter()
            .map(|step| {
                Ok(StoredStep {
                    seq: step.seq,
                    body: serde_json::to_string(step).map_err(StateError::Encode)?,
                })
            })
            .collect::<Result<Vec<_>, StateError>>()?;
        Ok(SessionCommit {
            expected_version: self.version,
            meta: serde_json::to_string(&self.meta).map_err(StateError::Encode)?,
            steps,
        })
    }

    /// Records that the pending commit was stored at `version`.
    pub fn mark_committed(&mut self, version: u64) {
        self.version = version;
        self.committed_steps = self.steps.len();
        self.meta_dirty = false;
    }

    /// Appends a step to the current turn.
    pub(crate) fn push(&mut self, body: StepBody, now_ms: u64) -> u64 {
        let seq = self.steps.last().map_or(1, |step| step.seq + 1);
        self.steps.push(Step {
            seq,
            turn: self.meta.turn,
            at_ms: now_ms,
            body,
        });
        self.touch(now_ms);
        seq
    }

    /// Records that a node job was sent in this invocation.
    pub fn mark_dispatched(&mut self, job_id: &str) {
        self.dispatched_jobs.insert(job_id.to_owned());
    }

    /// True when the job was sent in this invocation.
    pub(crate) fn was_dispatched(&self, job_id: &str) -> bool {
        self.dispatched_jobs.contains(job_id)
    }

    /// Marks meta as changed.
    pub(crate) fn touch(&mut self, now_ms: u64) {
        self.meta.updated_at_ms = now_ms;
        self.meta_dirty = true;
    }

    /// Remembers an accepted message id (bounded).
    pub(crate) fn remember_message_id(&mut self, id: &str) {
        self.meta.seen_message_ids.push_back(id.to_owned());
        while self.meta.seen_message_ids.len() > SEEN_MESSAGE_IDS {
            self.meta.seen_message_ids.pop_front();
        }
        self.meta_dirty = true;
    }

    /// True when this message id was accepted before.
    pub fn has_seen_message(&self, id: &str) -> bool {
        self.meta.seen_message_ids.iter().any(|seen| seen == id)
    }

    /// Steps of the current turn.
    pub fn current_turn_steps(&self) -> &[Step] {
        let turn = self.meta.turn;
        let start = self
            .steps
            .iter()
            .rposition(|step| step.turn != turn)
            .map_or(0, |index| index + 1);
        &self.steps[start..]
    }

    /// Model calls made in the current turn.
    pub fn model_calls_this_turn(&self) -> u32 {
        let calls = self
            .current_turn_steps()
            .iter()
            .filter(|step| matches!(step.body, StepBody::Assistant { .. }))
            .count();
        u32::try_from(calls).unwrap_or(u32::MAX)
    }

    /// The conversation as the model sees it: user messages, assistant turns, tool results.
    pub fn messages(&self) -> Vec<Message> {
        self.steps
            .iter()
            .filter_map(|step| match &step.body {
                StepBody::Inbound {
                    text,
                    dispatch: None,
                    ..
                } => Some(Message::User { text: text.clone() }),
                StepBody::Assistant {
                    content,
                    stop_reason,
                    ..
                } => Some(Message::Assistant {
                    content: content.clone(),
                    stop_reason: *stop_reason,
                }),
                StepBody::ToolResult {
                    call_id,
                    tool_name,
                    text,
                    is_error,
                } if !is_command_result(&self.steps, call_id) => Some(Message::ToolResult {
                    tool_call_id: call_id.clone(),
                    tool_name: tool_name.clone(),
                    text: text.clone(),
                    is_error: *is_error,
                }),
                _ => None,
            })
            .collect()
    }

    /// Every tool call of the session's assistant steps, with its result if any.
    pub(crate) fn find_result(&self, call_id: &str) -> Option<&Step> {
        self.current_turn_steps().iter().find(
            |step| matches!(&step.body, StepBody::ToolResult { call_id: id, .. } if id == call_id),
        )
    }

    /// The pending record of a call in the current turn, if any.
    pub(crate) fn find_pending(&self, call_id: &str) -> Option<(bool, &str)> {
        self.latest_pending(call_id)
            .map(|pending| (pending.awaiting_approval, pending.job_id))
    }

    /// The latest pending step of a call in the current turn.
    pub fn latest_pending(&self, call_id: &str) -> Option<PendingCall<'_>> {
        self.current_turn_steps()
            .iter()
            .rev()
            .find_map(|step| match &step.body {
                StepBody::ToolPending {
                    call_id: id,
                    job_id,
                    awaiting_approval,
                    approved,
                } if id == call_id => Some(PendingCall {
                    call_id: id,
                    job_id,
                    awaiting_approval: *awaiting_approval,
                    approved: *approved,
                }),
                _ => None,
            })
    }

    /// The call awaiting approval that `id` names: its call id, its full job id, or the
    /// job id's first 8 characters (the short code shown in the chat). `None` when nothing
    /// awaits, or when a short code is ambiguous.
    pub fn call_awaiting_approval(&self, id: &str) -> Option<String> {
        let id = id.trim();
        if id.is_empty() {
            return None;
        }
        let mut awaiting: Vec<PendingCall<'_>> = Vec::new();
        for step in self.current_turn_steps() {
            if let StepBody::ToolPending { call_id, .. } = &step.body
                && !awaiting.iter().any(|seen| seen.call_id == call_id)
                && let Some(pending) = self.latest_pending(call_id)
                && pending.awaiting_approval
                && self.find_result(call_id).is_none()
            {
                awaiting.push(pending);
            }
        }
        if let Some(exact) = awaiting
            .iter()
            .find(|pending| pending.call_id == id || pending.job_id == id)
        {
            return Some(exact.call_id.to_owned());
        }
        let mut by_prefix = awaiting
            .iter()
            .filter(|pending| id.len() >= 8 && pending.job_id.starts_with(id));
        match (by_prefix.next(), by_prefix.next()) {
            (Some(only), None) => Some(only.call_id.to_owned()),
            _ => None,
        }
    }

    /// The tool call with this id in the current turn's last assistant step.
    pub(crate) fn find_open_call(&self, call_id: &str) -> Option<ToolCall> {
        self.current_turn_steps()
            .iter()
            .rev()
            .find_map(|step| match &step.body {
                StepBody::Assistant { content, .. } => Some(content),
                _ => None,
            })?
            .iter()
            .find_map(|block| match block {
                AssistantBlock::ToolCall(call) if call.id == call_id => Some(call.clone()),
                _ => None,
            })
    }
}

/// Command dispatch results are shown to the user, not replayed to the model.
fn is_command_result(steps: &[Step], call_id: &str) -> bool {
    call_id.starts_with(super::COMMAND_CALL_PREFIX)
        && !steps.iter().any(|step| {
            matches!(&step.body, StepBody::Assistant { content, .. }
                if content.iter().any(|b| matches!(b, AssistantBlock::ToolCall(c) if c.id == call_id)))
        })
}
