//! A session as the turn engine sees it: meta, the transcript steps, and what is not yet persisted.
//!
//! Steps are append-only and numbered without gaps; the engine derives its next action from
//! them, so whatever was persisted before a crash decides where a redelivered event resumes.

use std::collections::{HashSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::elevated::ElevatedLevel;
use crate::session::{SessionCommit, SessionKey, StoredSession, StoredStep};
use clawless_automation::heartbeat::state::{HeartbeatDelivery, HeartbeatState};
use clawless_base::model::Usage;
use clawless_base::thinking::{ReasoningLevel, ThinkingLevel};
use clawless_base::transcript::{AssistantBlock, Message, StopReason, ToolCall};
use clawless_skills::snapshot::SkillSnapshot;

use super::events::{ApprovalDecision, ChatRef, GroupScope, InboundMessage};
use super::seen::SeenMessages;

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
    /// A heartbeat's reply rules: its final answer is an acknowledgement (never sent) or an
    /// alert for the target (see [`HeartbeatDelivery::decide`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_delivery: Option<HeartbeatDelivery>,
    /// Set when the message starts a new generation of the session first (`/new`, `/reset`,
    /// or a daily or idle reset found when it arrived).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset: Option<ResetRequest>,
    /// Set for `/compact [instructions]`: the turn compacts instead of calling the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compact: Option<CompactRequest>,
    /// Blob-store keys of the message's images the model is shown (a model that sees
    /// images); the text already carries the media note.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<String>,
    /// What was done with the message's attachments, for `/status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_summary: Option<String>,
    /// The message's `/think` and `/reasoning` directives: the levels are stored in the
    /// session when its turn starts, and a message that also has text is acknowledged first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directives: Option<super::directives::DirectivePlan>,
    /// A thinking level for this turn only (a cron job's or a sub-agent's `thinking`),
    /// ahead of the session's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_thinking: Option<ThinkingLevel>,
}

impl PreparedMessage {
    /// A message the model sees as written.
    pub fn plain(message: InboundMessage) -> Self {
        Self {
            text: message.text.clone(),
            message,
            dispatch: None,
            heartbeat: false,
            heartbeat_delivery: None,
            reset: None,
            compact: None,
            images: Vec::new(),
            media_summary: None,
            directives: None,
            turn_thinking: None,
        }
    }
}

/// Why a session starts a new generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ResetReason {
    /// `/new`.
    New,
    /// `/reset`.
    Reset,
    /// The daily reset hour passed since the generation began.
    Daily,
    /// The session was idle longer than allowed.
    Idle,
    /// An isolated heartbeat session (`isolatedSession`) starts every run afresh.
    Heartbeat,
    /// An isolated cron job's session starts every run afresh.
    Cron,
}

impl ResetReason {
    /// `new`, `reset`, `daily`, `idle`, `heartbeat` or `cron`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Reset => "reset",
            Self::Daily => "daily",
            Self::Idle => "idle",
            Self::Heartbeat => "heartbeat",
            Self::Cron => "cron",
        }
    }

    /// True for `/new` and `/reset`, which keep the session's settings (model choice).
    pub fn is_explicit(self) -> bool {
        matches!(self, Self::New | Self::Reset)
    }
}

/// A new generation asked for with a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResetRequest {
    /// Why.
    pub reason: ResetReason,
    /// A model chosen with the command (`/new <model> …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// `/compact [instructions]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactRequest {
    /// What the summary should focus on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

/// When and why the current generation began.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResetRecord {
    /// When (ms).
    pub at_ms: u64,
    /// Why.
    pub reason: ResetReason,
}

/// What started a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CompactionTrigger {
    /// The request crossed the compaction threshold.
    Threshold,
    /// The provider refused the request as too large.
    Overflow,
    /// `/compact`.
    Manual,
}

/// The live part of a session as the model sees it: the summary in force, if any, and the
/// steps shown verbatim.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    /// The latest compaction's summary in this generation.
    pub summary: Option<&'a str>,
    /// The steps from the latest compaction's cut (or the generation's start) on.
    pub steps: &'a [Step],
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
// The inbound step is the largest; steps live one per record in storage and a few hundred in
// memory at most, so boxing it would buy nothing but indirection.
#[allow(clippy::large_enum_variant)]
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
        /// A heartbeat's reply rules, fixed when it started.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        heartbeat_delivery: Option<HeartbeatDelivery>,
        /// Set for `/compact`: the turn compacts; the text never reaches the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        compact: Option<CompactRequest>,
        /// Blob-store keys of the images shown with this message (loaded when the request
        /// is built, for the turn it starts).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<String>,
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
        /// Where it goes when not to the session's chat (a heartbeat alert's target).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<ChatRef>,
    },
    /// What a heartbeat's final answer became (`ok-token`, `ok-empty`, `sent`, `skipped`,
    /// `failed`), decided once: an alert to send follows as a [`StepBody::Reply`].
    #[serde(rename_all = "camelCase")]
    HeartbeatOutcome {
        /// `ok-empty`, `ok-token`, `sent`, `skipped` or `failed`.
        status: String,
        /// Why nothing was sent, for `skipped` (`duplicate`, `target-none`, …) and `failed`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A new generation starts after this step (`/new`, `/reset`, daily, idle). Steps before
    /// it are the archived generations: stored, readable, never sent to the model again.
    #[serde(rename_all = "camelCase")]
    Reset {
        /// Why.
        reason: ResetReason,
        /// The ended generation's session id.
        previous_session_id: String,
        /// The new generation's session id.
        session_id: String,
    },
    /// Everything in this generation before `first_kept_seq` is this summary. Later requests
    /// carry the summary, then the steps from `first_kept_seq` on.
    #[serde(rename_all = "camelCase")]
    Compaction {
        /// The summary.
        summary: String,
        /// The first step kept verbatim.
        first_kept_seq: u64,
        /// Estimated tokens of the live context before.
        tokens_before: u64,
        /// Estimated tokens of the live context after.
        tokens_after: u64,
        /// What started it.
        trigger: CompactionTrigger,
    },
    /// The silent pre-compaction memory flush ran (its exchange is not kept; what it wrote
    /// is in the workspace's `memory/` notes).
    #[serde(rename_all = "camelCase")]
    MemoryFlush {
        /// The note it could append to (`memory/YYYY-MM-DD.md`).
        path: String,
        /// Bytes appended.
        appended_bytes: u64,
        /// Set when the flush failed (the turn went on).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
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
    /// Recently accepted message ids (turn starts, follow-ups, runs, announcements), hashed
    /// and bounded.
    #[serde(default)]
    pub seen_message_ids: SeenMessages,
    /// Whether the sender of the current turn is the owner.
    #[serde(default)]
    pub sender_is_owner: bool,
    /// Set once a message from anyone but an owner has started a turn here, or inherited from
    /// the parent that spawned this session; never cleared. Under the default sandbox mode
    /// (`untrusted`) such a session runs sandboxed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub untrusted: bool,
    /// The session whose sandbox workspace this one shares (a sub-agent's root parent);
    /// unset: its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_key: Option<String>,
    /// Whether this session has seeded its sandbox workspace with the bootstrap files.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sandbox_seeded: bool,
    /// Whether an allowed sender's sandboxed commands leave the jail (set by an owner's
    /// `/elevated`); `off` unless set.
    #[serde(default, skip_serializing_if = "ElevatedLevel::is_off")]
    pub elevated: ElevatedLevel,
    /// The sender of the current (or last) turn's message, by platform id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_id: Option<String>,
    /// The group chat whose tool policy (`channels.<channel>.groups`) this session follows:
    /// its own group's, or (for a sub-agent) the group its root parent talks in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_scope: Option<GroupScope>,
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
    /// How many resets the session has had: its current generation, from 0.
    #[serde(default)]
    pub generation: u64,
    /// When the current generation began (ms; 0 for sessions older than generations, which
    /// began at `created_at_ms`).
    #[serde(default)]
    pub generation_started_at_ms: u64,
    /// The last message from a person or channel (heartbeats and node results not counted).
    #[serde(default)]
    pub last_interaction_at_ms: u64,
    /// The reset that began the current generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reset: Option<ResetRecord>,
    /// Compactions in the current generation.
    #[serde(default)]
    pub compaction_count: u64,
    /// `compaction_count` when the memory flush last ran: it runs once per compaction cycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_flush_compaction_count: Option<u64>,
    /// The first step a turn loads (a reset or a compaction's kept tail moves it on).
    #[serde(default)]
    pub live_from: u64,
    /// Estimated tokens of the last request sent to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_prompt_tokens: Option<u64>,
    /// A window smaller than configured, learned from the provider's overflow errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_window: Option<u64>,
    /// A model chosen for this session (`/new <model>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_override: Option<String>,
    /// The thinking level set with `/think` (kept across `/new` and `/reset`, not across a
    /// daily or idle reset); unset: the agent's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_level: Option<ThinkingLevel>,
    /// The reasoning visibility set with `/reasoning` (`off` stored when chosen; kept like
    /// the thinking level); unset: the agent's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_level: Option<ReasoningLevel>,
    /// The current turn's own thinking level (a cron job's `thinking`), ahead of
    /// `thinking_level`; cleared when the next turn starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_thinking: Option<ThinkingLevel>,
    /// Heartbeats run in this session: their schedule, the last slot handled, the last alert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<HeartbeatState>,
    /// System events waiting for the session's next turn (a cron reminder waiting for the
    /// next heartbeat, a job's result for the main session's awareness), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_events: Vec<clawless_automation::heartbeat::PendingSystemEvent>,
    /// The cron run in progress in this session, until the job records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron_run: Option<clawless_automation::cron::run::CronRunMark>,
    /// This session is a sub-agent's: how it was started and how its run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent: Option<SubagentRun>,
    /// The sub-agents this session spawned, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<ChildRun>,
    /// Deferred tools whose full schema this session has been given (by calling one in its
    /// short form): from then on its requests carry the full schema.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub loaded_tools: std::collections::BTreeSet<String>,
    /// What was done with the attachments of the last message that had any (`/status`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_media: Option<String>,
    /// When `/stop` was last asked for (epoch ms): a process still running a turn that began
    /// before it stops at its next commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_at_ms: Option<u64>,
    /// Agent-to-agent steps this session took whose turns have not yet been followed up
    /// (the next step queued, the answer returned or posted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub a2a_steps: Vec<crate::turn::events::AgentMessage>,
    /// What the `message` tool sent in the current turn (cleared when a turn starts): the
    /// turn's final reply is dropped when it would repeat one (see `message_sends`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub message_sends: Vec<MessageSend>,
}

/// One successful `message` send of the current turn (see `message_sends`, which records
/// them and decides what they suppress).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageSend {
    /// Where it went, as the channel resolved the target.
    pub chat: ChatRef,
    /// The text sent (without reply directives), capped.
    pub text: String,
}

/// A sub-agent session's run (spec `openclaw-automation.md` §3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentRun {
    /// How it was started.
    pub start: crate::turn::events::SubagentStart,
    /// When it started.
    pub started_at_ms: u64,
    /// When its run ended, once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<u64>,
    /// `running`, `done`, `error`, `timeout` or `killed`.
    pub status: String,
    /// The announce is on the parent's queue.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub announced: bool,
    /// Archived after `archiveAfterMinutes`: no longer listed as recent; its transcript stays.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub archived: bool,
}

/// A sub-agent a session spawned, as the parent keeps track of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildRun {
    /// The run.
    pub run_id: String,
    /// The child's session.
    pub child_key: String,
    /// The task.
    pub task: String,
    /// Its label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// When it was spawned.
    pub started_at_ms: u64,
    /// When its announce arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<u64>,
    /// `running` until its announce arrives, then how it ended.
    pub status: String,
    /// When this session last steered it (steers are rate-limited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_steer_at_ms: Option<u64>,
}

impl SessionMeta {
    /// When the current generation began.
    pub fn generation_started(&self) -> u64 {
        if self.generation_started_at_ms == 0 {
            self.created_at_ms
        } else {
            self.generation_started_at_ms
        }
    }
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
    /// The `seq` the next step gets (the steps before the live part are not loaded).
    next_seq: u64,
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
                seen_message_ids: SeenMessages::default(),
                sender_is_owner: false,
                untrusted: false,
                sandbox_key: None,
                sandbox_seeded: false,
                elevated: ElevatedLevel::Off,
                sender_id: None,
                group_scope: None,
                skills_snapshot: None,
                tokens_in: 0,
                tokens_out: 0,
                created_at_ms: now_ms,
                updated_at_ms: now_ms,
                generation: 0,
                generation_started_at_ms: now_ms,
                last_interaction_at_ms: now_ms,
                last_reset: None,
                compaction_count: 0,
                memory_flush_compaction_count: None,
                live_from: 0,
                last_prompt_tokens: None,
                observed_window: None,
                model_override: None,
                thinking_level: None,
                reasoning_level: None,
                turn_thinking: None,
                heartbeat: None,
                pending_events: Vec::new(),
                cron_run: None,
                subagent: None,
                children: Vec::new(),
                a2a_steps: Vec::new(),
                loaded_tools: std::collections::BTreeSet::new(),
                last_media: None,
                stopped_at_ms: None,
                message_sends: Vec::new(),
            },
            steps: Vec::new(),
            committed_steps: 0,
            meta_dirty: true,
            next_seq: 1,
            dispatched_jobs: HashSet::new(),
        }
    }

    /// Rebuilds a session from storage: a whole load, or a live one (then `steps` are the
    /// live part only, and new steps continue after the stored `last_seq`).
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
        let next_seq = steps.last().map_or(0, |step| step.seq).max(stored.last_seq) + 1;
        Ok(Self {
            committed_steps: steps.len(),
            key,
            version: stored.version,
            meta,
            steps,
            meta_dirty: false,
            next_seq,
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
            live_from: self.meta.live_from,
            last_seq: self.next_seq - 1,
        })
    }

    /// Records that the pending commit was stored at `version`.
    pub fn mark_committed(&mut self, version: u64) {
        self.version = version;
        self.committed_steps = self.steps.len();
        self.meta_dirty = false;
    }

    /// Appends a reply to this session's own chat to the current turn.
    pub(crate) fn push_reply(&mut self, reply_id: String, text: String, now_ms: u64) -> u64 {
        self.push(
            StepBody::Reply {
                reply_id,
                text,
                to: None,
            },
            now_ms,
        )
    }

    /// Appends a step to the current turn.
    pub(crate) fn push(&mut self, body: StepBody, now_ms: u64) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
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

    /// Marks meta as changed by the caller (without touching `updated_at_ms`), so the next
    /// commit stores it.
    pub fn touch_meta(&mut self) {
        self.meta_dirty = true;
    }

    /// Marks meta as changed.
    pub(crate) fn touch(&mut self, now_ms: u64) {
        self.meta.updated_at_ms = now_ms;
        self.meta_dirty = true;
    }

    /// Remembers an accepted message id (bounded).
    pub fn remember_message_id(&mut self, id: &str) {
        self.meta.seen_message_ids.remember(id);
        self.meta_dirty = true;
    }

    /// True when this message id was accepted before.
    pub fn has_seen_message(&self, id: &str) -> bool {
        self.meta.seen_message_ids.contains(id)
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

    /// True when the current turn is a heartbeat poll.
    pub fn is_heartbeat_turn(&self) -> bool {
        matches!(
            self.current_turn_steps().first().map(|step| &step.body),
            Some(StepBody::Inbound {
                heartbeat: true,
                ..
            })
        )
    }

    /// The reply rules of the current turn when it is a heartbeat started with them.
    pub fn heartbeat_delivery(&self) -> Option<&HeartbeatDelivery> {
        match self.current_turn_steps().first().map(|step| &step.body) {
            Some(StepBody::Inbound {
                heartbeat_delivery, ..
            }) => heartbeat_delivery.as_ref(),
            _ => None,
        }
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

    /// The `seq` the next step will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The live part as the model sees it: after the latest reset, the latest compaction's
    /// summary and the steps from its cut on (or every step of the generation).
    pub fn view(&self) -> View<'_> {
        let generation_start = self
            .steps
            .iter()
            .rposition(|step| matches!(step.body, StepBody::Reset { .. }))
            .map_or(0, |index| index + 1);
        let generation = &self.steps[generation_start..];
        let latest = generation.iter().rev().find_map(|step| match &step.body {
            StepBody::Compaction {
                summary,
                first_kept_seq,
                ..
            } => Some((summary.as_str(), *first_kept_seq)),
            _ => None,
        });
        match latest {
            Some((summary, first_kept)) => {
                let from = generation.partition_point(|step| step.seq < first_kept);
                View {
                    summary: Some(summary),
                    steps: &generation[from..],
                }
            }
            None => View {
                summary: None,
                steps: generation,
            },
        }
    }

    /// The message a step shows the model, if any.
    pub fn step_message(&self, step: &Step) -> Option<Message> {
        match &step.body {
            StepBody::Inbound {
                text,
                dispatch: None,
                compact: None,
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
        }
    }

    /// The conversation as the model sees it: the summary in force (as a user message), then
    /// user messages, assistant turns and tool results of the live view.
    pub fn messages(&self) -> Vec<Message> {
        let view = self.view();
        view.summary
            .map(clawless_base::transcript::summary_message)
            .into_iter()
            .chain(view.steps.iter().filter_map(|step| self.step_message(step)))
            .collect()
    }

    /// When the current turn began (its first step's time), when a turn is open.
    pub fn open_turn_started_at(&self) -> Option<u64> {
        if !self.meta.turn_open {
            return None;
        }
        self.current_turn_steps().first().map(|step| step.at_ms)
    }

    /// The seq of the current turn's first step, when a turn is open.
    pub fn open_turn_start(&self) -> Option<u64> {
        if !self.meta.turn_open {
            return None;
        }
        self.current_turn_steps().first().map(|step| step.seq)
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
