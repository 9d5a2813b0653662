//! `/stop` (also `stop`, `abort` as the whole message, from an owner): the session's running
//! turn ends at its next step, the messages queued behind it are dropped, its running
//! sub-agents are killed (with their descendants), and the chat is told.
//!
//! Ingress queues the request in a group of its own (`SessionEvent::queue_group`), so it is
//! handled while the turn it stops still runs, in another invocation. The stop is a commit:
//! the engine closes the turn in the stored session ([`TurnEngine::stop_turn`]), which moves
//! the session's version on. The process running the turn learns of it when its next commit
//! loses to the stop's (`effects.rs`), so no model call, tool run or reply of that turn
//! starts after it, and the happy path pays no extra read per step.
//!
//! [`TurnEngine::stop_turn`]: clawless_core::turn::TurnEngine::stop_turn

use clawless_base::transcript::ToolCall;
use clawless_core::session::SessionStoreError;
use clawless_core::subagents::control::SUBAGENTS_TOOL_NAME;
use clawless_core::turn::events::InboundMessage;
use clawless_core::turn::state::SessionState;
use clawless_core::turn::{COMMAND_CALL_PREFIX, OutboundReply, StoppedTurn};

use super::handlers::{EventRun, Flow};
use super::tools::{ToolCallContext, ToolOutcome};
use super::{TurnError, TurnService};

/// How often the stop retries its commit when the running turn commits in between.
const STOP_COMMIT_ATTEMPTS: u32 = 8;

/// True when `stored` says `/stop` was asked for after the turn `running` is in began (its
/// start committed or not): the process running it must go no further.
pub(super) fn ended_by_stop(stored: &SessionState, running: &SessionState) -> bool {
    match (running.open_turn_started_at(), stored.meta.stopped_at_ms) {
        (Some(started), Some(stopped)) => stopped >= started,
        _ => false,
    }
}

impl TurnService {
    /// Handles a stop request for `run`'s session: kills its running sub-agents, ends its
    /// turn and drops its queued messages in one commit (retried on a conflict with the
    /// running turn, from the session as stored), then says what was stopped.
    pub(super) async fn on_stop(
        &self, run: &mut EventRun<'_>, message: &InboundMessage,
    ) -> Result<Flow, TurnError> {
        let mut attempt = 0;
        let (stopped, killed) = loop {
            attempt += 1;
            let killed = self.kill_children(run).await?;
            // Committed even when the stored session shows no turn: one may be running whose
            // start is not stored yet, and this commit is what its next commit loses to.
            let stopped = run.engine.stop_turn(&mut run.state, run.now);
            let commit = run.state.pending_commit()?;
            match self.deps.sessions.commit(&run.key, &commit).await {
                Ok(version) => {
                    run.state.mark_committed(version);
                    run.report.commits += 1;
                    break (stopped, killed);
                }
                Err(SessionStoreError::Conflict { .. }) if attempt < STOP_COMMIT_ATTEMPTS => {
                    run.state = self.load_state(&run.key, run.now).await?;
                }
                Err(err) => return Err(err.into()),
            }
        };
        run.report.acceptance = Some(format!("{stopped:?}"));
        let reply = OutboundReply {
            reply_id: format!("stop-{}", message.message_id),
            chat: message.chat.clone(),
            text: stop_text(stopped, killed.as_deref()),
            approval_code: None,
            in_reply_to: Some(message.message_id.clone()),
            media: Vec::new(),
        };
        if self.deliver(&reply).await?.is_none() {
            run.report.replies_sent += 1;
        }
        Ok(Flow::Done)
    }

    /// Kills every running sub-agent of `run`'s session (the `subagents kill all` a chat
    /// command would run); the answer, when there were any to kill.
    async fn kill_children(&self, run: &mut EventRun<'_>) -> Result<Option<String>, TurnError> {
        let running = run
            .state
            .meta
            .children
            .iter()
            .any(|child| child.status == "running");
        let tool = self.registry().get(SUBAGENTS_TOOL_NAME);
        let (true, Some(tool)) = (running, tool) else {
            return Ok(None);
        };
        let call = ToolCall {
            id: format!("{COMMAND_CALL_PREFIX}stop"),
            name: SUBAGENTS_TOOL_NAME.to_owned(),
            input: serde_json::json!({"action": "kill", "target": "all"}),
        };
        let context = ToolCallContext {
            call: &call,
            state: &mut run.state,
            session_key: &run.event.session_key,
            agent_id: &run.agent_id,
            tool_context: None,
            prompt: None,
            job: None,
        };
        Ok(match tool.call(context).await? {
            ToolOutcome::Done(output) => Some(output.text),
            ToolOutcome::Pending => None,
        })
    }
}

/// What the chat is told after a stop. The same whether or not the stored session showed a
/// running turn: one may be running whose start is not stored yet.
fn stop_text(stopped: StoppedTurn, killed: Option<&str>) -> String {
    let mut text = "⏹️ Stopped.".to_owned();
    if stopped.dropped_follow_ups > 0 {
        text.push_str(&format!(
            " Dropped {} queued message(s).",
            stopped.dropped_follow_ups
        ));
    }
    if let Some(killed) = killed {
        text.push_str(&format!(" Sub-agents: {killed}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stop_answer_says_what_was_stopped() {
        let stopped = |was_running, dropped_follow_ups| StoppedTurn {
            was_running,
            dropped_follow_ups,
        };
        assert_eq!(stop_text(stopped(true, 0), None), "⏹️ Stopped.");
        assert_eq!(stop_text(stopped(false, 0), None), "⏹️ Stopped.");
        assert_eq!(
            stop_text(stopped(true, 2), Some("killed 1 subagents.")),
            "⏹️ Stopped. Dropped 2 queued message(s). Sub-agents: killed 1 subagents."
        );
    }
}
