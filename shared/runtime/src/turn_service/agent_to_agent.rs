//! `sessions_send` and the agent-to-agent exchange it starts (spec
//! `openclaw-automation.md` §3.8), on the turn queue: every step is a turn of its own,
//! queued when the step before it ended, so no invocation ever waits for another session.
//!
//! - **The send.** The caller's call is a pending tool call, like a node's exec: the message
//!   goes to the target's FIFO group as an [`AgentMessage`] request, and the caller's turn
//!   waits. The target's answer comes back as the call's result; a durable timer answers
//!   `timeout` after `timeoutSeconds`, whichever comes first wins. `timeoutSeconds: 0` answers
//!   `accepted` at once.
//! - **The steps.** The target answers the request; then, between two different sessions,
//!   up to `session.agentToAgent.maxPingPongTurns` (5) reply steps alternate, the requester
//!   first, until one replies empty or exactly `REPLY_SKIP`; then the target takes the
//!   announce step, whose reply is posted to the target's own chat unless it is
//!   `ANNOUNCE_SKIP` (or `NO_REPLY`). A step's turn sees the step's context in its system
//!   prompt and sends nothing to any chat by itself.
//! - **Durable and once.** A session records a step it takes (`a2a_steps` in its meta) until
//!   the step's turn has ended and what follows is queued; every step has its own id
//!   (`a2a:<exchange>:<step>`), deduplicated by the queue and by the session taking it, so a
//!   crash in between queues it again and it is taken once.
//! - **Stricter than OpenClaw**: the step turns run without owner rights (the sender is
//!   another agent, not the owner), a session cannot send to itself, and a step that never
//!   ends (say, an exec awaiting approval) holds the exchange rather than being cut off.

use clawless_base::session_key::ChatType;
use clawless_core::subagents::A2A_SENDER_ID;
use clawless_core::subagents::sessions_tools::{
    A2A_ANNOUNCE_STEP_MESSAGE, A2aSessions, SendOutcome, a2a_announce_is_silent,
    a2a_announce_step_prompt, a2a_message_context, a2a_reply_step_prompt, ping_pong_stops,
    send_result_json,
};
use clawless_core::turn::events::{
    A2aExchange, A2aStep, AgentMessage, ChatRef, InboundMessage, SessionEvent, TurnEvent,
};
use clawless_core::turn::state::{PreparedMessage, SessionState, StepBody};
use clawless_core::turn::{Incoming, OutboundReply};

use super::{TurnError, TurnService};

/// The channel a step names when its session has no chat of its own.
const INTERNAL_CHANNEL: &str = "internal";

/// How a step's turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum StepReply {
    /// Its final answer (empty when it said nothing).
    Text(String),
    /// Its model failed.
    Failed(String),
}

impl TurnService {
    /// Takes a step of an exchange in `state` (the session it is for): records it and returns
    /// its turn. A redelivered step does nothing.
    pub(super) fn take_agent_message(
        &self, state: &mut SessionState, message: &AgentMessage,
    ) -> Option<Incoming> {
        if state.has_seen_message(&message.message_id)
            || state
                .meta
                .a2a_steps
                .iter()
                .any(|step| step.message_id == message.message_id)
        {
            tracing::info!(session = %state.key, step = %message.message_id, "agent-to-agent step already taken");
            return None;
        }
        state.meta.a2a_steps.push(message.clone());
        state.touch_meta();
        // The session's own chat stays its chat; nothing the step's turn says is sent to it.
        let chat = state.meta.chat.clone().unwrap_or_else(|| ChatRef {
            channel: INTERNAL_CHANNEL.to_owned(),
            chat_id: message.exchange.requester_key.clone(),
            chat_type: ChatType::Direct,
        });
        let inbound = InboundMessage {
            message_id: message.message_id.clone(),
            chat,
            sender_id: A2A_SENDER_ID.to_owned(),
            text: message.text.clone(),
            sender_is_owner: false,
            attachments: Vec::new(),
        };
        let mut prepared = PreparedMessage::plain(inbound);
        prepared.heartbeat_delivery = Some(super::subagents::to_no_chat());
        Some(Incoming::Message(Box::new(prepared)))
    }

    /// The exchange context of the step `state`'s current turn takes, for its system prompt.
    pub(super) fn a2a_step_prompt(&self, state: &SessionState) -> Option<String> {
        let current = state.meta.turn_message_id.as_deref()?;
        let message = state
            .meta
            .a2a_steps
            .iter()
            .find(|step| step.message_id == current)?;
        let exchange = &message.exchange;
        let sessions = A2aSessions {
            requester_session_key: &exchange.requester_key,
            requester_channel: exchange.requester_channel.as_deref(),
            target_session_key: &exchange.target_key,
            target_channel: exchange.target_channel.as_deref(),
        };
        Some(match message.step {
            A2aStep::Request => a2a_message_context(&sessions),
            A2aStep::Reply { turn } => a2a_reply_step_prompt(&sessions, turn, exchange.max_turns),
            A2aStep::Announce => a2a_announce_step_prompt(
                &sessions,
                &exchange.original,
                exchange.round_one_reply.as_deref(),
                exchange.latest_reply.as_deref(),
            ),
        })
    }

    /// At the end of `state`'s turns: follows up every step whose turn has ended (the answer
    /// back to a waiting sender, the next step queued, the announce posted), then forgets it
    /// (the caller commits). True when the meta changed.
    pub(super) async fn finish_a2a_steps(
        &self, state: &mut SessionState,
    ) -> Result<bool, TurnError> {
        if state.meta.a2a_steps.is_empty() || state.meta.turn_open {
            return Ok(false);
        }
        for message in state.meta.a2a_steps.clone() {
            let reply = step_reply(state, &message.message_id);
            self.follow_up_step(state, &message, reply).await?;
            state
                .meta
                .a2a_steps
                .retain(|step| step.message_id != message.message_id);
            state.remember_message_id(&message.message_id);
            state.touch_meta();
        }
        Ok(true)
    }

    /// What follows step `message` of `state`'s session, given how its turn ended.
    async fn follow_up_step(
        &self, state: &SessionState, message: &AgentMessage, reply: StepReply,
    ) -> Result<(), TurnError> {
        let Some(queue) = &self.subagent_queue else {
            return Ok(());
        };
        let mut exchange = message.exchange.clone();
        let text = match &reply {
            StepReply::Text(text) => text.trim().to_owned(),
            StepReply::Failed(_) => String::new(),
        };
        let next = match message.step {
            A2aStep::Request => {
                if let Some(call_id) = &exchange.reply_call_id {
                    let outcome = match &reply {
                        StepReply::Text(_) => SendOutcome::Reply(text.clone()),
                        StepReply::Failed(error) => SendOutcome::Error(error.clone()),
                    };
                    let answer = send_result_json(
                        &exchange.exchange_id,
                        &exchange.target_key,
                        exchange.timeout_seconds,
                        &outcome,
                    );
                    let event = SessionEvent {
                        session_key: exchange.requester_key.clone(),
                        agent_id: exchange.requester_agent_id.clone(),
                        event: TurnEvent::ToolResult {
                            call_id: call_id.clone(),
                            text: answer.to_string(),
                            is_error: matches!(reply, StepReply::Failed(_)),
                            notice: None,
                        },
                    };
                    crate::ingress::enqueue(queue.as_ref(), &event).await?;
                }
                if matches!(reply, StepReply::Failed(_)) || text.is_empty() {
                    None
                } else {
                    exchange.round_one_reply = Some(text.clone());
                    exchange.latest_reply = Some(text.clone());
                    Some(if exchange.max_turns > 0 && !ping_pong_stops(&text) {
                        (A2aStep::Reply { turn: 1 }, text)
                    } else {
                        (A2aStep::Announce, A2A_ANNOUNCE_STEP_MESSAGE.to_owned())
                    })
                }
            }
            A2aStep::Reply { turn } => {
                let stops = matches!(reply, StepReply::Failed(_)) || ping_pong_stops(&text);
                if !stops {
                    exchange.latest_reply = Some(text.clone());
                }
                Some(if stops || turn >= exchange.max_turns {
                    (A2aStep::Announce, A2A_ANNOUNCE_STEP_MESSAGE.to_owned())
                } else {
                    (A2aStep::Reply { turn: turn + 1 }, text)
                })
            }
            A2aStep::Announce => {
                if !a2a_announce_is_silent(&text) {
                    self.post_announce(state, &exchange, &text).await?;
                }
                None
            }
        };
        if let Some((step, text)) = next {
            let event = step_event(exchange, step, text);
            crate::ingress::enqueue(queue.as_ref(), &event).await?;
            tracing::info!(session = %state.key, step = %event.dedup_id(), "agent-to-agent step queued");
        }
        Ok(())
    }

    /// Posts the announce step's reply to the target's own chat (a session without one
    /// keeps it in its transcript only).
    async fn post_announce(
        &self, state: &SessionState, exchange: &A2aExchange, text: &str,
    ) -> Result<(), TurnError> {
        let Some(chat) = state
            .meta
            .chat
            .clone()
            .filter(|chat| state.meta.subagent.is_none() && chat.channel != INTERNAL_CHANNEL)
        else {
            tracing::info!(session = %state.key, "agent-to-agent announce kept in the transcript: the session has no chat");
            return Ok(());
        };
        let reply = OutboundReply {
            reply_id: format!("a2a-{}-announce", exchange.exchange_id),
            chat,
            text: text.to_owned(),
            approval_code: None,
            in_reply_to: None,
            media: Vec::new(),
        };
        if let Some(reason) = self.deliver(&reply).await? {
            tracing::warn!(session = %state.key, %reason, "agent-to-agent announce refused by the chat");
        }
        Ok(())
    }
}

/// The event taking step `step` of `exchange` to the session whose turn it is.
pub(super) fn step_event(exchange: A2aExchange, step: A2aStep, text: String) -> SessionEvent {
    let requester_speaks = matches!(step, A2aStep::Reply { turn } if turn % 2 == 1);
    let (session_key, agent_id) = if requester_speaks {
        (
            exchange.requester_key.clone(),
            exchange.requester_agent_id.clone(),
        )
    } else {
        (
            exchange.target_key.clone(),
            exchange.target_agent_id.clone(),
        )
    };
    SessionEvent {
        session_key,
        agent_id,
        event: TurnEvent::AgentMessage(Box::new(AgentMessage {
            message_id: exchange.step_id(&step),
            exchange,
            step,
            text,
        })),
    }
}

/// How the turn that took step `message_id` ended: its latest visible assistant text, or
/// its model's failure.
fn step_reply(state: &SessionState, message_id: &str) -> StepReply {
    let Some(start) = state.steps.iter().position(
        |step| matches!(&step.body, StepBody::Inbound { message_id: id, .. } if id == message_id),
    ) else {
        return StepReply::Text(String::new());
    };
    let turn = state.steps[start].turn;
    let mut text = String::new();
    for step in state.steps[start..]
        .iter()
        .take_while(|step| step.turn == turn)
    {
        match &step.body {
            StepBody::Assistant { content, .. } => {
                let said = clawless_base::transcript::assistant_text(content);
                if !said.trim().is_empty() {
                    text = said;
                }
            }
            StepBody::HeartbeatOutcome { status, reason } if status == "failed" => {
                return StepReply::Failed(
                    reason
                        .clone()
                        .unwrap_or_else(|| "the session's turn failed".to_owned()),
                );
            }
            _ => {}
        }
    }
    StepReply::Text(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange() -> A2aExchange {
        A2aExchange {
            exchange_id: "x1".to_owned(),
            requester_key: "agent:main:main".to_owned(),
            requester_agent_id: "main".to_owned(),
            requester_channel: Some("telegram".to_owned()),
            target_key: "agent:main:subagent:abc".to_owned(),
            target_agent_id: "main".to_owned(),
            target_channel: None,
            original: "hello".to_owned(),
            round_one_reply: None,
            latest_reply: None,
            max_turns: 5,
            reply_call_id: None,
            timeout_seconds: 0,
        }
    }

    #[test]
    fn odd_reply_steps_go_to_the_requester_and_the_rest_to_the_target() {
        let to = |step| step_event(exchange(), step, String::new()).session_key;
        assert_eq!(to(A2aStep::Request), "agent:main:subagent:abc");
        assert_eq!(to(A2aStep::Reply { turn: 1 }), "agent:main:main");
        assert_eq!(to(A2aStep::Reply { turn: 2 }), "agent:main:subagent:abc");
        assert_eq!(to(A2aStep::Reply { turn: 5 }), "agent:main:main");
        assert_eq!(to(A2aStep::Announce), "agent:main:subagent:abc");
    }

    #[test]
    fn every_step_has_its_own_dedup_id() {
        let ids: std::collections::BTreeSet<String> = [
            A2aStep::Request,
            A2aStep::Reply { turn: 1 },
            A2aStep::Reply { turn: 2 },
            A2aStep::Announce,
        ]
        .into_iter()
        .map(|step| step_event(exchange(), step, String::new()).dedup_id())
        .collect();
        assert_eq!(ids.len(), 4);
    }
}
