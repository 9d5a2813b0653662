//! Sub-agents in the turn service (spec `openclaw-automation.md` §3): a child's run in its
//! own session, and its completion pushed back to the session that spawned it.
//!
//! - **Spawn.** `sessions_spawn` (in the parent's turn) writes the call's attachments to
//!   `attachments/<uuid>/` in the child agent's workspace, queues a [`SubagentStart`] for
//!   `agent:<id>:subagent:<uuid>` on the turn queue and records the child in the parent's
//!   meta. The child's key and run id derive from the parent's session, turn and tool call,
//!   so a spawn redone after a crash writes the same files again and queues the same child,
//!   which the queue and the child take once.
//! - **Parallel.** Each child is its own FIFO group: children of one parent run side by side,
//!   and the parent keeps answering its chat while they work; nobody waits for anybody.
//! - **The child's run** sees its task and the sub-agent prompt, never the parent's
//!   transcript. Its answer goes nowhere by itself (its turn's replies have no target).
//! - **Completion.** When the child's turn ends, its result becomes an announce event on the
//!   parent's queue, deduplicated by `announce:v1:<child>:<run>`; the child records that it
//!   was queued only after it was, so a crash in between queues it again, and the parent
//!   takes it once (its id is remembered as a message id). There is no retry limit to give
//!   up at: the event waits on the queue until the parent's session takes it.
//! - **The parent** turns the announce into a turn of its own (a user-role message with the
//!   internal completion block), so the model rewrites the result for its chat.
//! - **Control.** `subagents kill` and `steer`, and `runTimeoutSeconds` (a durable timer),
//!   end the child's run with a versioned write to its session: a run in progress elsewhere
//!   loses its next commit, is redelivered, and takes no further step. A steer starts a new
//!   run in the same session. A finished child is archived by a timer after
//!   `archiveAfterMinutes`.

use clawless_automation::heartbeat::{AlertTarget, HeartbeatDelivery};
use clawless_base::session_key::ChatType;
use clawless_core::subagents::SUBAGENT_SENDER_ID;
use clawless_core::subagents::announce::{
    AnnounceOutcome, AnnounceSource, CompletionEvent, RunStats, announce_idempotency_key,
    announce_task_name, cap_result, is_announce_silent, render_completion_events,
    reply_instruction, stats_line,
};
use clawless_core::turn::Incoming;
use clawless_core::turn::events::{
    ChatRef, InboundMessage, SessionEvent, SubagentStart, TurnEvent,
};
use clawless_core::turn::state::{PreparedMessage, SessionState, SubagentRun};
use clawless_core::turn::subagent_run::{
    AnnounceState, ChildResult, announce_state, announced_status, child_result, run_has_ended,
};

use super::{TurnError, TurnService};

/// The channel a child's turns name: its replies have nowhere to go.
const SUBAGENT_CHANNEL: &str = "subagent";

impl TurnService {
    /// A killed or timed-out child goes no further: the turn it was in is closed without
    /// another model call or tool run. True when `state` is such a child (the caller then
    /// commits and stops).
    pub(super) fn stop_if_ended(&self, state: &mut SessionState) -> bool {
        let Some(run) = &state.meta.subagent else {
            return false;
        };
        if !run_has_ended(run) {
            return false;
        }
        if state.meta.turn_open || !state.meta.follow_ups.is_empty() {
            tracing::info!(session = %state.key, status = %run.status, "sub-agent stopped before its next step");
            state.meta.turn_open = false;
            state.meta.follow_ups.clear();
            state.touch_meta();
        }
        true
    }

    /// A child's time limit came: if its run is still going, it stops at its next step and
    /// its end is announced as `timed out`. True when the meta changed.
    pub(super) async fn time_out_subagent(
        &self, state: &mut SessionState, run_id: &str,
    ) -> Result<bool, TurnError> {
        let Some(run) = state.meta.subagent.as_mut() else {
            return Ok(false);
        };
        if run.start.run_id != run_id || run.status != "running" || run.announced {
            return Ok(false);
        }
        tracing::info!(session = %state.key, run_id, "sub-agent timed out");
        run.status = "timeout".to_owned();
        state.touch_meta();
        self.stop_if_ended(state);
        self.announce_if_done(state).await?;
        Ok(true)
    }

    /// The timer that archives `state`'s finished run after `archiveAfterMinutes` (none
    /// when archiving is off).
    pub(super) fn archive_timer(
        &self, state: &SessionState, agent_id: &str,
    ) -> Option<clawless_core::timers::Timer> {
        let run = state.meta.subagent.as_ref()?;
        let after = self.subagents_config(agent_id).archive_after_ms()?;
        Some(clawless_core::timers::Timer {
            timer_id: format!("subagent-archive:{}", run.start.run_id),
            due_at_ms: run
                .ended_at_ms
                .unwrap_or_else(|| self.deps.clock.now_ms())
                .saturating_add(after),
            event: SessionEvent {
                session_key: state.key.to_string(),
                agent_id: agent_id.to_owned(),
                event: TurnEvent::SubagentArchive {
                    run_id: run.start.run_id.clone(),
                },
            },
        })
    }

    /// Marks `state`'s finished run archived. True when the meta changed.
    pub(super) fn archive_subagent(&self, state: &mut SessionState, run_id: &str) -> bool {
        let Some(run) = state.meta.subagent.as_mut() else {
            return false;
        };
        if run.start.run_id != run_id || run.archived || run.status == "running" {
            return false;
        }
        run.archived = true;
        state.touch_meta();
        tracing::info!(session = %state.key, run_id, "finished sub-agent archived; its transcript stays");
        true
    }

    /// The sub-agent settings for `agent_id`.
    pub(super) fn subagents_config(
        &self, agent_id: &str,
    ) -> clawless_core::subagents::config::SubagentsConfig {
        subagents_config(self.config(), agent_id)
    }

    /// The announce of `run`'s end for its parent.
    fn announce_event(
        &self, state: &SessionState, run: &SubagentRun, result: &ChildResult, now_ms: u64,
    ) -> SessionEvent {
        let start = &run.start;
        let outcome = match result.status.as_str() {
            "ok" => AnnounceOutcome::Ok,
            "timeout" => AnnounceOutcome::Timeout,
            _ => AnnounceOutcome::Error(result.error.clone()),
        };
        let text = result.text.clone().unwrap_or_default();
        let silent = outcome == AnnounceOutcome::Ok && is_announce_silent(&text);
        let stats = stats_line(&RunStats {
            runtime_ms: Some(now_ms.saturating_sub(run.started_at_ms)),
            input_tokens: Some(result.tokens_in),
            output_tokens: Some(result.tokens_out),
            session_total_tokens: None,
        });
        let event = CompletionEvent {
            source: AnnounceSource::Subagent,
            child_session_key: state.key.to_string(),
            child_session_id: Some(state.meta.session_id.clone()),
            task: announce_task_name(start.label.as_deref(), &start.task),
            status: outcome.status_label(),
            result: if text.trim().is_empty() {
                clawless_core::subagents::announce::NO_OUTPUT.to_owned()
            } else {
                cap_result(&text)
            },
            stats: Some(stats),
            reply_instruction: reply_instruction(start.parent_is_internal, true).to_owned(),
        };
        SessionEvent {
            session_key: start.parent_key.clone(),
            agent_id: clawless_core::subagents::agent_id_of_key(&start.parent_key)
                .unwrap_or_else(|| state.meta.agent_id.clone()),
            event: TurnEvent::SubagentAnnounce {
                announce_id: announce_idempotency_key(state.key.as_str(), &start.run_id),
                child_key: state.key.to_string(),
                run_id: start.run_id.clone(),
                status: announced_status(&result.status),
                text: render_completion_events(&[event]),
                silent,
            },
        }
    }

    /// Starts a child's run in `state` (the child's session): records how it was started
    /// and returns its first message. A redelivered start does nothing.
    pub(super) fn start_subagent(
        &self, state: &mut SessionState, start: &SubagentStart, now_ms: u64,
    ) -> Option<Incoming> {
        if let Some(run) = &state.meta.subagent {
            if run.start.run_id == start.run_id {
                tracing::info!(session = %state.key, run_id = %start.run_id, "sub-agent start redelivered");
                return None;
            }
            if run.status != "steered" {
                tracing::warn!(session = %state.key, run_id = %start.run_id, "a sub-agent session started twice with different runs; ignored");
                return None;
            }
            // Steered: the new run takes over the session (the old one stopped).
            state.meta.turn_open = false;
            state.meta.follow_ups.clear();
        }
        state.meta.subagent = Some(SubagentRun {
            start: start.clone(),
            started_at_ms: now_ms,
            ended_at_ms: None,
            status: "running".to_owned(),
            announced: false,
            archived: false,
        });
        if let Some(model) = start.model.clone().filter(|model| !model.trim().is_empty()) {
            state.meta.model_override = Some(model);
        }
        if start.thinking.is_some() {
            state.meta.thinking_level = start.thinking;
        }
        // Trust only ever narrows: a child of an untrusted session is untrusted.
        state.meta.untrusted |= start.parent_untrusted;
        if state.meta.group_scope.is_none() {
            state.meta.group_scope = start.group_scope.clone();
        }
        if state.meta.sandbox_key.is_none() {
            state.meta.sandbox_key = start.sandbox_key.clone();
        }
        state.touch_meta();
        let message = InboundMessage {
            message_id: format!("subagent:{}", start.run_id),
            chat: ChatRef {
                channel: SUBAGENT_CHANNEL.to_owned(),
                chat_id: start.parent_key.clone(),
                chat_type: ChatType::Direct,
            },
            sender_id: SUBAGENT_SENDER_ID.to_owned(),
            text: start.first_message.clone(),
            sender_is_owner: false,
            attachments: Vec::new(),
        };
        let mut prepared = PreparedMessage::plain(message);
        // Its final answer is its result, for the parent: nothing is sent to any chat.
        prepared.heartbeat_delivery = Some(to_no_chat());
        Some(Incoming::Message(Box::new(prepared)))
    }

    /// When `state` is a child whose run has ended and whose result is not yet on its
    /// parent's queue: queues the announce, then records it (the caller commits). True when
    /// the meta changed.
    pub(super) async fn announce_if_done(
        &self, state: &mut SessionState,
    ) -> Result<bool, TurnError> {
        let Some(run) = state.meta.subagent.clone() else {
            return Ok(false);
        };
        let due = announce_state(&state.meta);
        if due == AnnounceState::NotDue {
            return Ok(false);
        }
        let Some(queue) = &self.subagent_queue else {
            return Ok(false);
        };
        // An orchestrator whose own children still run waits for them (spec §3.5): each of
        // their announces is a turn here, and the announce goes up once the last has settled.
        if due == AnnounceState::WaitsForChildren {
            tracing::info!(session = %state.key, "sub-agent's announce waits for its own children");
            return Ok(false);
        }
        let now = self.deps.clock.now_ms();
        let result = child_result(&run, &state.steps);
        let event = self.announce_event(state, &run, &result, now);
        crate::ingress::enqueue(queue.as_ref(), &event).await?;
        tracing::info!(child = %state.key, parent = %run.start.parent_key, run_id = %run.start.run_id, status = %result.status, "sub-agent result announced to its parent");
        if let Some(run) = state.meta.subagent.as_mut() {
            run.announced = true;
            run.archived = run.start.archive_when_announced;
            run.ended_at_ms = Some(now);
            run.status = announced_status(&result.status);
        }
        state.touch_meta();
        Ok(true)
    }

    /// Takes a child's announce in the parent's session: the child's record is updated, and
    /// unless the result was silent the announce becomes a turn. A redelivery does nothing.
    pub(super) fn take_announce(
        &self, state: &mut SessionState, announce: AnnounceFacts<'_>, now_ms: u64,
    ) -> Option<Incoming> {
        if state.has_seen_message(announce.announce_id) {
            tracing::info!(session = %state.key, announce = announce.announce_id, "announce already taken");
            return None;
        }
        if let Some(child) = state
            .meta
            .children
            .iter_mut()
            .find(|child| child.run_id == announce.run_id)
        {
            child.status = announce.status.to_owned();
            child.ended_at_ms = Some(now_ms);
        }
        state.touch_meta();
        if announce.silent {
            state.remember_message_id(announce.announce_id);
            return None;
        }
        let chat = state.meta.chat.clone().unwrap_or_else(|| ChatRef {
            channel: SUBAGENT_CHANNEL.to_owned(),
            chat_id: state.key.to_string(),
            chat_type: ChatType::Direct,
        });
        let message = InboundMessage {
            message_id: announce.announce_id.to_owned(),
            chat,
            sender_id: SUBAGENT_SENDER_ID.to_owned(),
            text: announce.text.to_owned(),
            sender_is_owner: state.meta.sender_is_owner,
            attachments: Vec::new(),
        };
        let mut prepared = PreparedMessage::plain(message);
        if state.meta.subagent.is_some() {
            // An orchestrator's turn on its child's result is internal: what it says becomes
            // its own result, announced once its last child has settled.
            prepared.heartbeat_delivery = Some(to_no_chat());
        }
        Some(Incoming::Message(Box::new(prepared)))
    }
}

/// The reply rules of a turn whose answer goes to no chat (a sub-agent's, an
/// agent-to-agent step's): its final text stays in the transcript, for whoever reads it.
pub(super) fn to_no_chat() -> HeartbeatDelivery {
    HeartbeatDelivery {
        slot_ms: None,
        ack_max_chars: 0,
        show_ok: false,
        show_alerts: false,
        target: AlertTarget::TargetNone,
        cron_run: true,
        include_reasoning: false,
    }
}

/// A child's announce as its event carries it.
#[derive(Debug, Clone, Copy)]
pub(super) struct AnnounceFacts<'a> {
    pub announce_id: &'a str,
    pub run_id: &'a str,
    pub status: &'a str,
    pub text: &'a str,
    pub silent: bool,
}

/// The event that takes `event`'s child start to its session.
pub(super) fn start_event(start: SubagentStart, child_key: &str, agent_id: &str) -> SessionEvent {
    SessionEvent {
        session_key: child_key.to_owned(),
        agent_id: agent_id.to_owned(),
        event: TurnEvent::SubagentStart(Box::new(start)),
    }
}

/// The timer of `start`'s time limit, if it has one.
pub(super) fn timeout_timer(
    start: &SubagentStart, child_key: &str, agent_id: &str, now_ms: u64,
) -> Option<clawless_core::timers::Timer> {
    let timeout = start.timeout_ms.filter(|timeout| *timeout > 0)?;
    Some(clawless_core::timers::Timer {
        timer_id: format!("subagent-timeout:{}", start.run_id),
        due_at_ms: now_ms.saturating_add(timeout),
        event: SessionEvent {
            session_key: child_key.to_owned(),
            agent_id: agent_id.to_owned(),
            event: TurnEvent::SubagentTimeout {
                run_id: start.run_id.clone(),
            },
        },
    })
}

/// The sub-agent settings for `agent_id`: `agents.defaults.subagents` under its own.
pub(super) fn subagents_config(
    config: &crate::config::ClawlessConfig, agent_id: &str,
) -> clawless_core::subagents::config::SubagentsConfig {
    let defaults = config.agents.defaults.subagents.clone().unwrap_or_default();
    let own = config
        .agents
        .list
        .iter()
        .find(|agent| agent.id.eq_ignore_ascii_case(agent_id))
        .and_then(|agent| agent.subagents.as_ref());
    defaults.for_agent(own)
}
