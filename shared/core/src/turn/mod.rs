//! The turn engine: a durable, sans-IO state machine over one session.
//!
//! Given a [`SessionState`] and an event, the engine records what happened and tells the
//! caller the next [`Effect`] to perform (persist, call the model, run a tool, send a job to a
//! node host, send a reply). The caller performs it, reports the outcome back, and asks again.
//! The next effect is derived only from the transcript (plus the jobs sent in this
//! invocation), so a turn killed at any point resumes from whatever was persisted: a persisted
//! model response is not requested again, a persisted tool result is not run again, and a
//! reply is sent under the id it was persisted with.
//!
//! The engine never performs I/O and never decides policy on its own: the caller passes the
//! set of offered tools ([`ToolRouting`]), and a call to anything else becomes an error
//! result without running.

pub mod directives;
pub mod events;
pub mod message_sends;
pub mod model_command;
pub mod prepare;
pub mod seen;
pub mod state;
pub mod subagent_run;

use clawless_base::reply_tokens::SILENT_REPLIES;
use std::collections::BTreeSet;

use crate::tools::ToolOutput;
use clawless_automation::heartbeat::reply::{HeartbeatOutcome, strip_stray_heartbeat_token};
use clawless_automation::heartbeat::state::{HeartbeatDelivery, SentAlert};
use clawless_base::model::ModelResponse;
use clawless_base::thinking::ReasoningLevel;
use clawless_base::transcript::{AssistantBlock, StopReason, ToolCall, assistant_text};

use clawless_base::session_key::ChatType;
use events::{ApprovalDecision, ChatRef, GroupScope, dedup_token};
use state::{
    CompactRequest, CompactionTrigger, PreparedMessage, ResetRecord, SessionState, Step, StepBody,
};

/// Prefix of the call ids given to tool calls made by slash commands.
pub const COMMAND_CALL_PREFIX: &str = "cmd_";

/// Default bound on model calls in one turn.
pub const DEFAULT_MAX_MODEL_CALLS: u32 = 12;

/// Longest tool name accepted from a model (spec §9.2).
const MAX_TOOL_NAME_CHARS: usize = 64;

/// Engine settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnSettings {
    /// Model calls allowed in one turn before it is stopped with a notice.
    pub max_model_calls: u32,
    /// Whether reasoning is shown in a session that never chose with `/reasoning` (the
    /// agent's `reasoningDefault`).
    pub reasoning_default: ReasoningLevel,
}

impl Default for TurnSettings {
    fn default() -> Self {
        Self {
            max_model_calls: DEFAULT_MAX_MODEL_CALLS,
            reasoning_default: ReasoningLevel::Off,
        }
    }
}

/// Which tools exist for this turn and where they run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolRouting {
    /// Tools offered to the model (already filtered by policy). Nothing else ever runs.
    pub offered: BTreeSet<String>,
    /// Offered tools that run on a node host instead of in the turn function. Whether a
    /// call needs a person's approval is the exec policy's answer for that command (the node
    /// or the backend's pre-check), reported with [`Incoming::ApprovalNeeded`].
    pub remote: BTreeSet<String>,
    /// Tools only a person's slash command runs (`/elevated`): never offered to the model,
    /// and a model's call of one is refused like any tool not offered.
    pub commands: BTreeSet<String>,
}

/// A reply to deliver to a chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundReply {
    /// Idempotency id: a resend after a crash carries the same id.
    pub reply_id: String,
    /// Where it goes.
    pub chat: ChatRef,
    /// The text.
    pub text: String,
    /// When this reply asks a person to approve an exec call: the code `/approve` takes, so
    /// a channel can offer buttons for it.
    pub approval_code: Option<String>,
    /// The platform id of the message that started the turn (for `[[reply_to_current]]`, and
    /// whatever a channel carries in it, such as Discord's interaction token).
    pub in_reply_to: Option<String>,
    /// Files sent with the text (a reply's `MEDIA:` lines), loaded for the send.
    pub media: Vec<clawless_base::media::OutboundMedia>,
}

/// The next thing the caller must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Commit [`SessionState::pending_commit`], then [`SessionState::mark_committed`].
    Persist,
    /// Call the model with [`SessionState::messages`]; report with [`TurnEngine::record_model_response`].
    CallModel,
    /// Run this offered tool in-process; report with [`TurnEngine::record_tool_result`].
    RunTool(ToolCall),
    /// Send this job to a node host, then [`SessionState::mark_dispatched`]; the result comes
    /// back later as a `ToolResult` or `ToolTimeout` event.
    SendToNode {
        /// Idempotent job id.
        job_id: String,
        /// The call to run.
        call: ToolCall,
        /// The person's decision when the call was approved in the chat (send a grant).
        approved: Option<ApprovalDecision>,
    },
    /// Deliver this reply; report with [`TurnEngine::record_reply_sent`].
    SendReply(OutboundReply),
    /// `/compact`: compact the session now (see `crate::compaction`), record it with
    /// [`TurnEngine::record_compaction`] if a summary was made, then report the outcome for
    /// the chat with [`TurnEngine::finish_compact_command`].
    Compact(CompactRequest),
    /// Everything is persisted; the turn waits for a node result or an approval.
    Wait,
    /// Everything is persisted; nothing is left to do.
    Idle,
}

/// An event for the engine. Chat messages arrive already prepared (slash commands resolved).
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A chat message or heartbeat poll.
    Message(Box<PreparedMessage>),
    /// A node host's result for a pending call.
    ToolResult {
        /// The call.
        call_id: String,
        /// Its output.
        output: ToolOutput,
        /// A note for the chat, sent before the turn goes on (`Exec finished …`).
        notice: Option<String>,
    },
    /// A pending call's deadline passed.
    ToolTimeout {
        /// The call.
        call_id: String,
    },
    /// A person answered an approval request.
    Approval {
        /// The call.
        call_id: String,
        /// The answer.
        decision: ApprovalDecision,
        /// A note for the chat (`Exec denied …` on a denial).
        notice: Option<String>,
    },
    /// The exec policy says a pending call needs a person's approval.
    ApprovalNeeded {
        /// The call.
        call_id: String,
        /// The approval request for the chat (spec §7.8).
        text: String,
    },
}

/// What [`TurnEngine::accept`] did with an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acceptance {
    /// The event started a turn.
    StartedTurn,
    /// A turn is running: the message waits as a follow-up.
    QueuedFollowUp,
    /// The event was applied to the running turn.
    Applied,
    /// Seen before (a redelivery) or no longer relevant: only resume.
    AlreadyHandled,
}

/// Text of the error result given to a call of a tool that is not offered.
pub fn tool_not_available(name: &str) -> String {
    format!("Tool \"{name}\" is not available in this session; it was not run.")
}

/// Text of the result of a node call whose deadline passed.
pub const TOOL_TIMEOUT_TEXT: &str =
    "Tool call timed out: the node host sent no result before the deadline.";

/// Text of the result of a call a person denied.
pub const APPROVAL_DENIED_TEXT: &str = "Denied: the user did not approve this call.";

/// The state machine. Cheap to build; holds only settings.
#[derive(Debug, Clone, Copy, Default)]
pub struct TurnEngine {
    settings: TurnSettings,
}

impl TurnEngine {
    /// An engine with these settings.
    pub fn new(settings: TurnSettings) -> Self {
        Self { settings }
    }

    /// Records an event. Follow with [`TurnEngine::next`] until it returns `Wait` or `Idle`.
    pub fn accept(&self, state: &mut SessionState, event: Incoming, now_ms: u64) -> Acceptance {
        match event {
            Incoming::Message(message) => {
                let message = *message;
                let id = message.message.message_id.clone();
                if state.has_seen_message(&id) {
                    return Acceptance::AlreadyHandled;
                }
                if message.heartbeat && (state.meta.turn_open || !state.meta.follow_ups.is_empty())
                {
                    // A busy session has no use for a heartbeat poll.
                    return Acceptance::AlreadyHandled;
                }
                state.remember_message_id(&id);
                if state.meta.turn_open {
                    state.meta.follow_ups.push_back(message);
                    state.touch(now_ms);
                    Acceptance::QueuedFollowUp
                } else {
                    start_turn(state, message, now_ms);
                    Acceptance::StartedTurn
                }
            }
            Incoming::ToolResult {
                call_id,
                output,
                notice,
            } => {
                let acceptance = self.resolve_pending(state, &call_id, output, now_ms);
                if acceptance == Acceptance::Applied
                    && let Some(notice) = notice
                {
                    push_notice(state, &call_id, "result", notice, now_ms);
                }
                acceptance
            }
            Incoming::ToolTimeout { call_id } => self.resolve_pending(
                state,
                &call_id,
                ToolOutput::error(TOOL_TIMEOUT_TEXT),
                now_ms,
            ),
            Incoming::Approval {
                call_id,
                decision,
                notice,
            } => {
                let awaiting = matches!(state.find_pending(&call_id), Some((true, _)));
                if !awaiting || state.find_result(&call_id).is_some() {
                    return Acceptance::AlreadyHandled;
                }
                if let Some(notice) = notice {
                    push_notice(state, &call_id, "decision", notice, now_ms);
                }
                match decision {
                    ApprovalDecision::AllowOnce | ApprovalDecision::AllowAlways => {
                        let job_id = job_id(state, &call_id);
                        state.push(
                            StepBody::ToolPending {
                                call_id,
                                job_id,
                                awaiting_approval: false,
                                approved: Some(decision),
                            },
                            now_ms,
                        );
                    }
                    ApprovalDecision::Deny => {
                        let name = state
                            .find_open_call(&call_id)
                            .map_or_else(|| "unknown".to_owned(), |call| call.name);
                        push_result(
                            state,
                            &call_id,
                            &name,
                            ToolOutput::error(APPROVAL_DENIED_TEXT),
                            now_ms,
                        );
                    }
                }
                Acceptance::Applied
            }
            Incoming::ApprovalNeeded { call_id, text } => {
                let Some(pending) = state.latest_pending(&call_id) else {
                    return Acceptance::AlreadyHandled;
                };
                if pending.awaiting_approval || state.find_result(&call_id).is_some() {
                    return Acceptance::AlreadyHandled;
                }
                if pending.approved.is_some() {
                    // Approved once already, and the node still asks: never ask in a loop.
                    let output = ToolOutput::error(format!(
                        "The node host refused the approved command.\n{text}"
                    ));
                    return self.resolve_pending(state, &call_id, output, now_ms);
                }
                let job_id = pending.job_id.to_owned();
                state.push(
                    StepBody::ToolPending {
                        call_id: call_id.clone(),
                        job_id,
                        awaiting_approval: true,
                        approved: None,
                    },
                    now_ms,
                );
                push_notice(state, &call_id, "approval", text, now_ms);
                Acceptance::Applied
            }
        }
    }

    fn resolve_pending(
        &self, state: &mut SessionState, call_id: &str, output: ToolOutput, now_ms: u64,
    ) -> Acceptance {
        let pending = matches!(state.find_pending(call_id), Some((false, _)));
        if !pending || state.find_result(call_id).is_some() {
            return Acceptance::AlreadyHandled;
        }
        let Some(call) = state.find_open_call(call_id) else {
            return Acceptance::AlreadyHandled;
        };
        self.record_tool_result(state, &call, output, now_ms);
        Acceptance::Applied
    }

    /// Records a model response. Calls without an id get a deterministic one.
    pub fn record_model_response(
        &self, state: &mut SessionState, response: ModelResponse, now_ms: u64,
    ) {
        let seq = state.next_seq();
        let mut seen_ids = BTreeSet::new();
        let content = response
            .content
            .into_iter()
            .enumerate()
            .map(|(index, block)| match block {
                AssistantBlock::ToolCall(mut call) => {
                    call.name = call.name.trim().to_owned();
                    if call.id.trim().is_empty() || seen_ids.contains(&call.id) {
                        call.id = format!("call_{seq}_{index}");
                    }
                    seen_ids.insert(call.id.clone());
                    AssistantBlock::ToolCall(call)
                }
                text => text,
            })
            .collect();
        state.meta.tokens_in += response.usage.input_tokens + response.usage.cache_read_tokens;
        state.meta.tokens_out += response.usage.output_tokens;
        state.push(
            StepBody::Assistant {
                content,
                stop_reason: response.stop_reason,
                model: response.model,
                usage: response.usage,
            },
            now_ms,
        );
    }

    /// Records that the model could not be reached (after retries and fallbacks): the turn
    /// ends with an error notice to the user instead of being retried forever.
    pub fn record_model_failure(&self, state: &mut SessionState, message: &str, now_ms: u64) {
        state.push(
            StepBody::Assistant {
                content: vec![AssistantBlock::Text {
                    text: format!("⚠️ The model could not be reached: {message}"),
                }],
                stop_reason: StopReason::Error,
                model: String::new(),
                usage: Default::default(),
            },
            now_ms,
        );
    }

    /// Ends the current turn where it stands, for `reason` (a cron run past its time limit):
    /// a failed outcome step says why, and nothing more of the turn runs: no model call, no
    /// tool, no reply.
    pub fn abandon_turn(&self, state: &mut SessionState, reason: &str, now_ms: u64) {
        if !state.meta.turn_open {
            return;
        }
        state.push(
            StepBody::HeartbeatOutcome {
                status: "failed".to_owned(),
                reason: Some(reason.to_owned()),
            },
            now_ms,
        );
        close_turn(state, now_ms);
    }

    /// `/stop`: ends the open turn where it stands and drops the messages queued behind it.
    /// Every tool call of the turn still without a result gets an error result saying it was
    /// stopped (so the transcript stays well-formed), and nothing more of the turn runs: no
    /// model call, no tool, no reply. The session remembers when it was stopped
    /// ([`SessionMeta::stopped_at_ms`](state::SessionMeta)), so a process still running a turn
    /// that began before (committed or not yet) learns at its next commit that it must go no
    /// further.
    pub fn stop_turn(&self, state: &mut SessionState, now_ms: u64) -> StoppedTurn {
        let dropped_follow_ups = state.meta.follow_ups.len();
        state.meta.follow_ups.clear();
        let was_running = state.meta.turn_open;
        if was_running {
            let unanswered: Vec<ToolCall> = state
                .current_turn_steps()
                .iter()
                .filter_map(|step| match &step.body {
                    StepBody::Assistant { content, .. } => Some(content),
                    _ => None,
                })
                .flatten()
                .filter_map(|block| match block {
                    AssistantBlock::ToolCall(call) => Some(call.clone()),
                    AssistantBlock::Text { .. } | AssistantBlock::Thinking { .. } => None,
                })
                .filter(|call| state.find_result(&call.id).is_none())
                .collect();
            for call in &unanswered {
                push_result(
                    state,
                    &call.id,
                    &call.name,
                    ToolOutput::error(STOPPED_RESULT),
                    now_ms,
                );
            }
            close_turn(state, now_ms);
        }
        state.meta.stopped_at_ms = Some(now_ms);
        state.touch_meta();
        StoppedTurn {
            was_running,
            dropped_follow_ups,
        }
    }

    /// Records that even a fresh context cannot hold the request (one giant message): the
    /// turn ends with `text`, which says what happened and what to do. Unlike
    /// [`TurnEngine::record_model_failure`], it never says the model could not be reached.
    pub fn record_context_overflow(&self, state: &mut SessionState, text: &str, now_ms: u64) {
        state.push(
            StepBody::Assistant {
                content: vec![AssistantBlock::Text {
                    text: text.to_owned(),
                }],
                stop_reason: StopReason::Error,
                model: String::new(),
                usage: Default::default(),
            },
            now_ms,
        );
    }

    /// Records a compaction: from now on the session's requests carry `summary` and the steps
    /// from `first_kept_seq` on, and turns load only from there.
    #[allow(clippy::too_many_arguments)]
    pub fn record_compaction(
        &self, state: &mut SessionState, summary: String, first_kept_seq: u64, tokens_before: u64,
        tokens_after: u64, trigger: CompactionTrigger, now_ms: u64,
    ) {
        state.push(
            StepBody::Compaction {
                summary,
                first_kept_seq,
                tokens_before,
                tokens_after,
                trigger,
            },
            now_ms,
        );
        state.meta.compaction_count += 1;
        state.meta.last_prompt_tokens = Some(tokens_after);
        // The open turn's steps stay loaded: the engine derives its next step from them.
        let keep_from = state
            .open_turn_start()
            .map_or(first_kept_seq, |start| start.min(first_kept_seq));
        state.meta.live_from = state.meta.live_from.max(keep_from);
    }

    /// Records that the pre-compaction memory flush ran (once per compaction cycle).
    pub fn record_memory_flush(
        &self, state: &mut SessionState, path: String, appended_bytes: u64, error: Option<String>,
        now_ms: u64,
    ) {
        state.push(
            StepBody::MemoryFlush {
                path,
                appended_bytes,
                error,
            },
            now_ms,
        );
        state.meta.memory_flush_compaction_count = Some(state.meta.compaction_count);
    }

    /// Ends a `/compact` turn with `text` for the chat (`⚙️ Compacted …`, or why not).
    pub fn finish_compact_command(&self, state: &mut SessionState, text: String, now_ms: u64) {
        if has_reply_after(state, 0) {
            return;
        }
        let reply_id = reply_id(state, "compact");
        state.push_reply(reply_id, text, now_ms);
    }

    /// Records a tool's output (capped for the transcript).
    pub fn record_tool_result(
        &self, state: &mut SessionState, call: &ToolCall, output: ToolOutput, now_ms: u64,
    ) {
        if state.find_result(&call.id).is_none() {
            push_result(state, &call.id, &call.name, output, now_ms);
        }
    }

    /// Records that a reply was delivered.
    pub fn record_reply_sent(&self, state: &mut SessionState, reply_id: &str, now_ms: u64) {
        record_reply_outcome(state, reply_id, None, now_ms);
    }

    /// Records that the platform refused the reply for good (`reason`): it is not sent again,
    /// and the session goes on.
    pub fn record_reply_rejected(
        &self, state: &mut SessionState, reply_id: &str, reason: &str, now_ms: u64,
    ) {
        record_reply_outcome(state, reply_id, Some(reason.to_owned()), now_ms);
    }

    /// The next effect to perform. Any state change it makes is reflected in the session, and
    /// an external effect is only returned once everything it depends on is persisted.
    pub fn next(&self, state: &mut SessionState, routing: &ToolRouting, now_ms: u64) -> Effect {
        loop {
            let derived = self.derive(state, routing, now_ms);
            let effect = match derived {
                Derived::Changed => continue,
                Derived::Effect(effect) => effect,
            };
            let must_persist_first = match &effect {
                Effect::Persist => false,
                // The message that started the turn is still in the queue: a crash during the
                // model call redelivers it. Anything else must be durable first.
                Effect::CallModel => state
                    .uncommitted_steps()
                    .iter()
                    .any(|step| !matches!(step.body, StepBody::Inbound { .. })),
                Effect::Wait | Effect::Idle => state.has_uncommitted(),
                Effect::RunTool(_)
                | Effect::SendToNode { .. }
                | Effect::SendReply(_)
                | Effect::Compact(_) => state.has_uncommitted(),
            };
            return if must_persist_first {
                Effect::Persist
            } else {
                effect
            };
        }
    }

    fn derive(&self, state: &mut SessionState, routing: &ToolRouting, now_ms: u64) -> Derived {
        if !state.meta.turn_open {
            if let Some(next) = state.meta.follow_ups.pop_front() {
                start_turn(state, next, now_ms);
                return Derived::Changed;
            }
            return Derived::Effect(Effect::Idle);
        }
        if let Some(reply) = unsent_reply(state) {
            return Derived::Effect(Effect::SendReply(reply));
        }
        let turn_steps = state.current_turn_steps();
        let Some(first) = turn_steps.first() else {
            close_turn(state, now_ms);
            return Derived::Changed;
        };
        if let StepBody::Inbound {
            compact: Some(request),
            ..
        } = &first.body
        {
            if has_reply_after(state, 0) {
                close_turn(state, now_ms);
                return Derived::Changed;
            }
            return Derived::Effect(Effect::Compact(request.clone()));
        }
        if let StepBody::Inbound {
            dispatch: Some(dispatch),
            ..
        } = &first.body
        {
            if dispatch.tool_name == directives::DIRECTIVES_COMMAND {
                // Directives only: the levels were stored when the turn started; the answer
                // is their acknowledgement (or the error that kept them from changing).
                let call_id = format!("{COMMAND_CALL_PREFIX}{}", first.seq);
                if state.find_result(&call_id).is_none() {
                    let reply = dispatch.params["reply"]
                        .as_str()
                        .unwrap_or("OK.")
                        .to_owned();
                    push_result(
                        state,
                        &call_id,
                        directives::DIRECTIVES_COMMAND,
                        ToolOutput::ok(reply),
                        now_ms,
                    );
                    return Derived::Changed;
                }
            }
            let call = ToolCall {
                id: format!("{COMMAND_CALL_PREFIX}{}", first.seq),
                name: dispatch.tool_name.clone(),
                input: dispatch.params.clone(),
            };
            return self.derive_command(state, routing, call, now_ms);
        }
        let last_assistant = turn_steps.iter().rev().find_map(|step| match &step.body {
            StepBody::Assistant {
                content,
                stop_reason,
                ..
            } => Some((step.seq, content.clone(), *stop_reason == StopReason::Error)),
            _ => None,
        });
        let Some((assistant_seq, content, failed)) = last_assistant else {
            return self.call_model_or_stop(state, now_ms);
        };
        let calls: Vec<ToolCall> = content
            .iter()
            .filter_map(|block| match block {
                AssistantBlock::ToolCall(call) => Some(call.clone()),
                AssistantBlock::Text { .. } | AssistantBlock::Thinking { .. } => None,
            })
            .collect();
        if calls.is_empty() {
            return self.finish_with_answer(state, assistant_seq, &content, failed, now_ms);
        }
        let mut waiting = false;
        for call in &calls {
            if state.find_result(&call.id).is_some() {
                continue;
            }
            if !tool_name_is_valid(&call.name) || !routing.offered.contains(&call.name) {
                let name = call.name.clone();
                push_result(
                    state,
                    &call.id,
                    &name,
                    ToolOutput::error(tool_not_available(&name)),
                    now_ms,
                );
                return Derived::Changed;
            }
            let pending = state
                .find_pending(&call.id)
                .map(|(awaiting, job)| (awaiting, job.to_owned()));
            match pending {
                Some((true, _)) => waiting = true,
                None if routing.remote.contains(&call.name) => {
                    let job_id = job_id(state, &call.id);
                    state.push(
                        StepBody::ToolPending {
                            call_id: call.id.clone(),
                            job_id,
                            awaiting_approval: false,
                            approved: None,
                        },
                        now_ms,
                    );
                    return Derived::Changed;
                }
                Some((false, job_id)) if routing.remote.contains(&call.name) => {
                    if state.was_dispatched(&job_id) {
                        waiting = true;
                    } else {
                        let approved = state
                            .latest_pending(&call.id)
                            .and_then(|pending| pending.approved);
                        return Derived::Effect(Effect::SendToNode {
                            job_id,
                            call: call.clone(),
                            approved,
                        });
                    }
                }
                _ => return Derived::Effect(Effect::RunTool(call.clone())),
            }
        }
        if waiting {
            return Derived::Effect(Effect::Wait);
        }
        // `sessions_yield` ends the turn here: what comes next (a child's result) arrives as
        // the next message, and the model is not called again now.
        let yielded = calls.iter().any(|call| {
            call.name == crate::subagents::sessions_tools::SESSIONS_YIELD
                && state.find_result(&call.id).is_some_and(|step| {
                    matches!(
                        step.body,
                        StepBody::ToolResult {
                            is_error: false,
                            ..
                        }
                    )
                })
        });
        if yielded {
            close_turn(state, now_ms);
            return Derived::Changed;
        }
        self.call_model_or_stop(state, now_ms)
    }

    fn derive_command(
        &self, state: &mut SessionState, routing: &ToolRouting, call: ToolCall, now_ms: u64,
    ) -> Derived {
        let result = state.find_result(&call.id).map(|step| step.body.clone());
        match result {
            None if !routing.offered.contains(&call.name)
                && !routing.commands.contains(&call.name) =>
            {
                let text = format!("Tool not available: {}", call.name);
                push_result(state, &call.id, &call.name, ToolOutput::error(text), now_ms);
                Derived::Changed
            }
            None => Derived::Effect(Effect::RunTool(call)),
            Some(StepBody::ToolResult { text, is_error, .. }) => {
                if has_reply_after(state, 0) {
                    close_turn(state, now_ms);
                    return Derived::Changed;
                }
                let trimmed = text.trim();
                let reply = if is_error {
                    format!("❌ {trimmed}")
                } else if trimmed.is_empty() {
                    "✅ Done.".to_owned()
                } else {
                    trimmed.to_owned()
                };
                let reply_id = reply_id(state, "command");
                state.push_reply(reply_id, reply, now_ms);
                Derived::Changed
            }
            Some(_) => Derived::Changed,
        }
    }

    fn finish_with_answer(
        &self, state: &mut SessionState, assistant_seq: u64, content: &[AssistantBlock],
        failed: bool, now_ms: u64,
    ) -> Derived {
        if let Some(delivery) = state.heartbeat_delivery().cloned() {
            return finish_heartbeat(state, assistant_seq, content, failed, &delivery, now_ms);
        }
        let text = assistant_text(content);
        let text = text.trim();
        // A stray `HEARTBEAT_OK` at either end of an ordinary reply is not for the chat.
        let text = if SILENT_REPLIES.contains(&text) {
            None
        } else {
            strip_stray_heartbeat_token(text)
        };
        let text = match text {
            Some(text)
                if !text.trim().is_empty()
                    && !has_reply_after(state, assistant_seq)
                    && !message_sends::suppresses_final_reply(
                        state.meta.chat.as_ref(),
                        &state.meta.message_sends,
                        &text,
                    ) =>
            {
                text
            }
            _ => {
                close_turn(state, now_ms);
                return Derived::Changed;
            }
        };
        // Shown reasoning goes first, as its own message (never for heartbeats, above).
        let shown = state
            .meta
            .reasoning_level
            .unwrap_or(self.settings.reasoning_default)
            .is_visible();
        if shown && let Some(reasoning) = directives::reasoning_message(&turn_thinking_text(state))
        {
            let reasoning_id = reply_id(state, &format!("{assistant_seq}-reasoning"));
            state.push_reply(reasoning_id, reasoning, now_ms);
        }
        let reply_id = reply_id(state, &assistant_seq.to_string());
        state.push_reply(reply_id, text, now_ms);
        Derived::Changed
    }

    fn call_model_or_stop(&self, state: &mut SessionState, now_ms: u64) -> Derived {
        if state.model_calls_this_turn() < self.settings.max_model_calls {
            return Derived::Effect(Effect::CallModel);
        }
        if state.heartbeat_delivery().is_some() {
            // A heartbeat that will not finish says so in the transcript, not in the chat.
            let text = format!(
                "reached the limit of {} model calls",
                self.settings.max_model_calls
            );
            state.push(
                StepBody::HeartbeatOutcome {
                    status: "failed".to_owned(),
                    reason: Some(text),
                },
                now_ms,
            );
            close_turn(state, now_ms);
            return Derived::Changed;
        }
        let reply_id = reply_id(state, "limit");
        let already = state.current_turn_steps().iter().any(
            |step| matches!(&step.body, StepBody::Reply { reply_id: id, .. } if *id == reply_id),
        );
        if already {
            close_turn(state, now_ms);
        } else {
            let text = format!(
                "⚠️ Stopped: this turn reached its limit of {} model calls.",
                self.settings.max_model_calls
            );
            state.push_reply(reply_id, text, now_ms);
        }
        Derived::Changed
    }
}

/// The result a tool call gets when `/stop` ended its turn first.
pub const STOPPED_RESULT: &str = "Stopped by /stop before this call finished.";

/// What [`TurnEngine::stop_turn`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoppedTurn {
    /// A turn was open, and is now closed.
    pub was_running: bool,
    /// How many queued messages were dropped.
    pub dropped_follow_ups: usize,
}

enum Derived {
    /// The session changed; derive again.
    Changed,
    /// Perform this.
    Effect(Effect),
}

fn start_turn(state: &mut SessionState, message: PreparedMessage, now_ms: u64) {
    if let Some(reset) = &message.reset {
        start_generation(state, reset, now_ms);
    }
    state.meta.turn += 1;
    state.meta.turn_open = true;
    // What the last turn sent with `message` says nothing about this turn's answer.
    state.meta.message_sends.clear();
    if message.heartbeat {
        // A heartbeat neither counts as interaction nor moves the session's chat; nothing
        // it sends replies to a message.
        state.meta.turn_message_id = None;
    } else {
        state.meta.last_interaction_at_ms = now_ms;
        state.meta.chat = Some(message.message.chat.clone());
        state.meta.turn_message_id = Some(message.message.message_id.clone());
        state.meta.sender_id = Some(message.message.sender_id.clone());
        let chat = &message.message.chat;
        if chat.chat_type == ChatType::Group {
            state.meta.group_scope = Some(GroupScope {
                channel: chat.channel.clone(),
                group_id: chat.chat_id.clone(),
                sender_id: Some(message.message.sender_id.clone()),
            });
        }
    }
    state.meta.sender_is_owner = message.message.sender_is_owner;
    if message.media_summary.is_some() {
        state.meta.last_media = message.media_summary;
    }
    state.meta.turn_thinking = message.turn_thinking;
    let mut acknowledgement = None;
    if let Some(plan) = &message.directives {
        if plan.thinking.is_some() {
            state.meta.thinking_level = plan.thinking;
        }
        if let Some(level) = plan.reasoning {
            state.meta.reasoning_level = Some(level);
            // The model hears of it with the next message.
            state
                .meta
                .pending_events
                .push(clawless_automation::heartbeat::PendingSystemEvent {
                    text: directives::reasoning_event(level).to_owned(),
                    context_key: None,
                    exec_completion: false,
                    at_ms: now_ms,
                });
        }
        // A message with more than directives is answered by the model; the directives'
        // acknowledgement goes first. A directive-only message's reply is its command's.
        if plan.text.is_some() {
            acknowledgement = Some(plan.reply.clone());
        }
    }
    state.push(
        StepBody::Inbound {
            message_id: message.message.message_id,
            sender_id: message.message.sender_id,
            text: message.text,
            dispatch: message.dispatch,
            heartbeat: message.heartbeat,
            heartbeat_delivery: message.heartbeat_delivery,
            compact: message.compact,
            images: message.images,
        },
        now_ms,
    );
    if let Some(text) = acknowledgement {
        let reply_id = reply_id(state, "directives");
        state.push_reply(reply_id, text, now_ms);
    }
}

/// The reasoning text of the current turn's model answers, in order.
fn turn_thinking_text(state: &SessionState) -> String {
    let parts: Vec<String> = state
        .current_turn_steps()
        .iter()
        .filter_map(|step| match &step.body {
            StepBody::Assistant { content, .. } => {
                Some(clawless_base::transcript::thinking_text(content))
            }
            _ => None,
        })
        .filter(|text| !text.is_empty())
        .collect();
    parts.join("\n\n")
}

/// Archives the current generation and starts a new one under the same key: a
/// [`StepBody::Reset`] marks the boundary (the earlier steps stay stored), turns load from
/// it on, and the generation's counters start over. The turn counter goes on, so ids derived
/// from it never repeat. An explicit reset keeps the session's model choice.
fn start_generation(state: &mut SessionState, reset: &state::ResetRequest, now_ms: u64) {
    let previous_session_id = state.meta.session_id.clone();
    let session_id = dedup_token(&format!("{previous_session_id}-{}", state.next_seq()));
    let seq = state.push(
        StepBody::Reset {
            reason: reset.reason,
            previous_session_id,
            session_id: session_id.clone(),
        },
        now_ms,
    );
    let meta = &mut state.meta;
    meta.session_id = session_id;
    meta.generation += 1;
    meta.generation_started_at_ms = now_ms;
    meta.last_reset = Some(ResetRecord {
        at_ms: now_ms,
        reason: reset.reason,
    });
    meta.live_from = seq;
    meta.compaction_count = 0;
    meta.memory_flush_compaction_count = None;
    meta.tokens_in = 0;
    meta.tokens_out = 0;
    meta.last_prompt_tokens = None;
    meta.skills_snapshot = None;
    // A new session starts with deferred tools in their short form again.
    meta.loaded_tools.clear();
    if reset.model.is_some() || !reset.reason.is_explicit() {
        meta.model_override.clone_from(&reset.model);
    }
    // `/new` and `/reset` keep the thinking and reasoning levels; an automatic reset does not.
    if !reset.reason.is_explicit() {
        meta.thinking_level = None;
        meta.reasoning_level = None;
    }
}

fn close_turn(state: &mut SessionState, now_ms: u64) {
    state.meta.turn_open = false;
    state.touch(now_ms);
}

/// Ends a heartbeat turn with its final answer: the outcome is decided once from the turn's
/// [`HeartbeatDelivery`] and recorded as a step; an alert to send follows as a reply to the
/// target, and becomes the session's last alert. An acknowledgement (or any answer with
/// nowhere to go) closes the turn without a word to the chat. A failed model call is recorded
/// as `failed` and not sent.
fn finish_heartbeat(
    state: &mut SessionState, assistant_seq: u64, content: &[AssistantBlock], failed: bool,
    delivery: &HeartbeatDelivery, now_ms: u64,
) -> Derived {
    let decided = state.current_turn_steps().iter().any(|step| {
        step.seq > assistant_seq && matches!(step.body, StepBody::HeartbeatOutcome { .. })
    });
    if decided {
        close_turn(state, now_ms);
        return Derived::Changed;
    }
    let text = assistant_text(content);
    // Shown only with `includeReasoning` (never otherwise: a heartbeat is not a conversation).
    let reasoning = delivery
        .include_reasoning
        .then(|| directives::reasoning_message(&turn_thinking_text(state)))
        .flatten();
    let heartbeat = state.meta.heartbeat.get_or_insert_with(Default::default);
    let outcome = if failed {
        None
    } else {
        Some(delivery.decide_with_reasoning(
            &text,
            reasoning.as_deref(),
            heartbeat.last_alert.as_ref(),
            now_ms,
        ))
    };
    let mut reasoning_first = Vec::new();
    let (status, reason, send) = match &outcome {
        None => ("failed", Some(text.trim().to_owned()), None),
        Some(outcome) => {
            let send = match outcome {
                HeartbeatOutcome::Alert {
                    text, reasoning, ..
                } => {
                    heartbeat.last_alert = Some(SentAlert {
                        text: text.clone(),
                        sent_at_ms: now_ms,
                    });
                    reasoning_first.clone_from(reasoning);
                    Some(text.clone())
                }
                HeartbeatOutcome::AckShowOk { text, .. } => Some(text.clone()),
                _ => None,
            };
            (
                outcome.event_status(),
                outcome.event_reason().map(str::to_owned),
                send,
            )
        }
    };
    state.push(
        StepBody::HeartbeatOutcome {
            status: status.to_owned(),
            reason,
        },
        now_ms,
    );
    match (send, delivery.target.chat()) {
        (Some(text), Some(chat)) => {
            for (index, reasoning) in reasoning_first.into_iter().enumerate() {
                let reply_id = reply_id(
                    state,
                    &format!("heartbeat-{assistant_seq}-reasoning-{index}"),
                );
                state.push(
                    StepBody::Reply {
                        reply_id,
                        text: reasoning,
                        to: Some(chat.clone()),
                    },
                    now_ms,
                );
            }
            let reply_id = reply_id(state, &format!("heartbeat-{assistant_seq}"));
            state.push(
                StepBody::Reply {
                    reply_id,
                    text,
                    to: Some(chat.clone()),
                },
                now_ms,
            );
        }
        _ => close_turn(state, now_ms),
    }
    Derived::Changed
}

fn push_result(
    state: &mut SessionState, call_id: &str, tool_name: &str, output: ToolOutput, now_ms: u64,
) {
    state.push(
        StepBody::ToolResult {
            call_id: call_id.to_owned(),
            tool_name: tool_name.to_owned(),
            text: crate::tool_results::cap_for_transcript(&output.text),
            is_error: output.is_error,
        },
        now_ms,
    );
}

/// Records a chat note about a call (an approval request, a decision, a finished command),
/// sent as a reply under an id derived from the call, so a redelivery never sends it twice.
fn push_notice(state: &mut SessionState, call_id: &str, what: &str, text: String, now_ms: u64) {
    let reply_id = reply_id(state, &format!("{what}-{call_id}"));
    let already = state
        .current_turn_steps()
        .iter()
        .any(|step| matches!(&step.body, StepBody::Reply { reply_id: id, .. } if *id == reply_id));
    if !already {
        state.push_reply(reply_id, text, now_ms);
    }
}

fn record_reply_outcome(
    state: &mut SessionState, reply_id: &str, rejected: Option<String>, now_ms: u64,
) {
    let already = state.current_turn_steps().iter().any(
        |step| matches!(&step.body, StepBody::ReplySent { reply_id: id, .. } if id == reply_id),
    );
    if !already {
        state.push(
            StepBody::ReplySent {
                reply_id: reply_id.to_owned(),
                rejected,
            },
            now_ms,
        );
    }
}

/// The first reply of the current turn that has no delivery record.
fn unsent_reply(state: &SessionState) -> Option<OutboundReply> {
    let steps = state.current_turn_steps();
    steps.iter().find_map(|step| {
        match &step.body {
        StepBody::Reply { reply_id, text, to }
            if !steps.iter().any(|other| {
                matches!(&other.body, StepBody::ReplySent { reply_id: sent, .. } if sent == reply_id)
            }) =>
        {
            Some(OutboundReply {
                reply_id: reply_id.clone(),
                chat: to.clone().or_else(|| state.meta.chat.clone())?,
                text: text.clone(),
                approval_code: approval_code_of(state, steps, reply_id),
                in_reply_to: state.meta.turn_message_id.clone(),
                media: Vec::new(),
            })
        }
        _ => None,
    }
    })
}

/// True when a final reply was recorded after step `seq` in the current turn.
fn has_reply_after(state: &SessionState, seq: u64) -> bool {
    state
        .current_turn_steps()
        .iter()
        .any(|step: &Step| step.seq > seq && matches!(step.body, StepBody::Reply { .. }))
}

/// The approval code when `reply_id` is the approval request of a call still awaiting one.
fn approval_code_of(state: &SessionState, steps: &[Step], reply_id: &str) -> Option<String> {
    steps.iter().find_map(|step| match &step.body {
        StepBody::ToolPending {
            call_id,
            job_id,
            awaiting_approval: true,
            ..
        } if reply_id == self::reply_id(state, &format!("approval-{call_id}")) => {
            Some(crate::nodes::notices::approval_slug(job_id).to_owned())
        }
        _ => None,
    })
}

fn reply_id(state: &SessionState, suffix: &str) -> String {
    dedup_token(&format!(
        "{}-{}-{suffix}",
        state.meta.session_id, state.meta.turn
    ))
}

fn job_id(state: &SessionState, call_id: &str) -> String {
    clawless_exec::node::wire::exec_job_id(&state.key.to_string(), state.meta.turn, call_id)
}

/// Spec §9.2: trimmed, at most 64 chars of `[A-Za-z0-9_:.-]`.
fn tool_name_is_valid(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_CHARS
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b':' | b'.' | b'-'))
}

#[cfg(test)]
mod tests;
