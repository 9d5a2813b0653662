//! `sessions_send` (spec `openclaw-automation.md` §3.8): a message to another session the
//! caller sees, whose exchange (`agent_to_agent.rs`) runs on the turn queue. The call waits
//! for the target's answer like a node's job: a `ToolResult` event brings it, or the durable
//! timer armed here answers `timeout` after `timeoutSeconds`.

use std::sync::Arc;

use async_trait::async_trait;
use clawless_base::model::ToolSpec;
use clawless_base::transcript::ToolCall;
use clawless_core::session::TurnQueue;
use clawless_core::subagents::sessions_tools::{
    SendOutcome, parse_send_call, send_accepted_json, send_result_json, sessions_send_tool_spec,
};
use clawless_core::timers::Timers;
use clawless_core::tools::ToolOutput;
use clawless_core::turn::events::{A2aExchange, A2aStep, SessionEvent, TurnEvent, dedup_token};
use clawless_core::turn::state::{SessionState, StepBody};

use super::sessions::{SessionDirectory, channel_of, error_json};
use super::{Placement, RuntimeTool, ToolCallContext, ToolOutcome};
use crate::turn_service::TurnError;
use crate::turn_service::agent_to_agent::step_event;

/// `sessions_send`, over the turn queue (where the exchange's steps go) and the timers
/// (where its wait's limit goes; without them the wait has none).
pub(super) struct SessionsSendTool {
    directory: Arc<SessionDirectory>,
    queue: Arc<dyn TurnQueue>,
    timers: Option<Arc<dyn Timers>>,
}

impl SessionsSendTool {
    pub(super) fn new(
        directory: Arc<SessionDirectory>, queue: Arc<dyn TurnQueue>,
        timers: Option<Arc<dyn Timers>>,
    ) -> Self {
        Self {
            directory,
            queue,
            timers,
        }
    }

    /// Sends a `sessions_send` call of `state`'s turn: queues the request to the target and,
    /// when the caller waits for the answer, arms the timer that answers `timeout`. `Some`
    /// is the call's result now (a refusal, or `accepted` for `timeoutSeconds: 0`); `None`
    /// means the result comes later, as a `ToolResult` event.
    async fn send(&self, call: &ToolCall, state: &SessionState) -> Option<ToolOutput> {
        let queue = &self.queue;
        let request = match parse_send_call(&call.input) {
            Ok(request) => request,
            Err(error) => return Some(ToolOutput::error(error_json(&error).to_string())),
        };
        let (target_key, target_meta) =
            match self.directory.send_target(&request.target, state).await {
                Ok(found) => found,
                Err(refusal) => return Some(ToolOutput::error(refusal.to_string())),
            };
        let exchange_id = dedup_token(&format!(
            "{}:{}:{}",
            state.meta.session_id, state.meta.turn, call.id
        ));
        let waits = request.timeout_seconds > 0;
        let exchange = A2aExchange {
            exchange_id: exchange_id.clone(),
            requester_key: state.key.to_string(),
            requester_agent_id: state.meta.agent_id.clone(),
            requester_channel: Some(channel_of(&state.meta)),
            target_key: target_key.clone(),
            target_agent_id: target_meta.agent_id.clone(),
            target_channel: Some(channel_of(&target_meta)),
            original: request.message.clone(),
            round_one_reply: None,
            latest_reply: None,
            max_turns: self
                .directory
                .config()
                .session
                .agent_to_agent
                .max_ping_pong_turns(),
            reply_call_id: waits.then(|| call.id.clone()),
            timeout_seconds: request.timeout_seconds,
        };
        let event = step_event(exchange, A2aStep::Request, request.message);
        if let Err(err) = crate::ingress::enqueue(queue.as_ref(), &event).await {
            return Some(ToolOutput::error(
                error_json(&format!("sessions_send failed: {err}")).to_string(),
            ));
        }
        tracing::info!(from = %state.key, to = %target_key, exchange = %exchange_id, "agent-to-agent message queued");
        if !waits {
            return Some(ToolOutput::ok(
                send_accepted_json(&exchange_id, &target_key).to_string(),
            ));
        }
        // The wait counts from when the call was made, however often it is re-sent.
        let sent_at = state
            .current_turn_steps()
            .iter()
            .find(|step| {
                matches!(&step.body, StepBody::ToolPending { call_id, .. } if *call_id == call.id)
            })
            .map_or_else(|| self.directory.now_ms(), |step| step.at_ms);
        let timeout = send_result_json(
            &exchange_id,
            &target_key,
            request.timeout_seconds,
            &SendOutcome::Timeout,
        );
        let timer = clawless_core::timers::Timer {
            timer_id: format!("a2a-timeout:{exchange_id}"),
            due_at_ms: sent_at.saturating_add(request.timeout_seconds.saturating_mul(1_000)),
            event: SessionEvent {
                session_key: state.key.to_string(),
                agent_id: state.meta.agent_id.clone(),
                event: TurnEvent::ToolResult {
                    call_id: call.id.clone(),
                    text: timeout.to_string(),
                    is_error: false,
                    notice: None,
                },
            },
        };
        let scheduled = match &self.timers {
            Some(timers) => timers.schedule(&timer).await,
            None => Ok(()),
        };
        if let Err(err) = scheduled {
            tracing::warn!(error = %err, exchange = %exchange_id, "sessions_send wait has no time limit: its timer was not armed");
        }
        None
    }
}

#[async_trait]
impl RuntimeTool for SessionsSendTool {
    fn spec(&self) -> ToolSpec {
        sessions_send_tool_spec()
    }

    fn deferred(&self) -> bool {
        true
    }

    fn placement(&self) -> Placement {
        Placement::Awaited
    }

    async fn call(&self, context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError> {
        Ok(match self.send(context.call, context.state).await {
            Some(output) => ToolOutcome::Done(output),
            None => ToolOutcome::Pending,
        })
    }
}
