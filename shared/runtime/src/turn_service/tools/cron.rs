//! `cron`: the owner's scheduled jobs (spec `openclaw-automation.md` §2), over the cron
//! store. Offered to owners only by the tool policy, and never to sub-agents.

use std::sync::Arc;

use async_trait::async_trait;
use clawless_automation::cron::run::CRON_SENDER_ID;
use clawless_automation::cron::tool::{
    ContextMessage, ContextRole, CronAction, CronCaller, cron_tool_spec, parse_cron_call,
    reminder_context_lines,
};
use clawless_base::model::ToolSpec;
use clawless_core::tools::ToolOutput;
use clawless_core::turn::state::{SessionState, StepBody};

use super::{RuntimeTool, ToolCallContext, ToolOutcome};
use crate::cron_service::CronService;
use crate::turn_service::TurnError;

/// `cron`, over the service's cron jobs.
pub(super) struct CronTool {
    cron: Arc<CronService>,
}

impl CronTool {
    pub(super) fn new(cron: Arc<CronService>) -> Self {
        Self { cron }
    }
}

#[async_trait]
impl RuntimeTool for CronTool {
    fn spec(&self) -> ToolSpec {
        cron_tool_spec()
    }

    fn deferred(&self) -> bool {
        true
    }

    async fn call(&self, context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError> {
        let state = &*context.state;
        let action = match parse_cron_call(&context.call.input) {
            Ok(action) => action,
            Err(err) => return Ok(ToolOutcome::Done(ToolOutput::error(err.message()))),
        };
        // A job made or changed from a session others talk in would run outside its sandbox
        // (a cron run is the owner's own session): such a session only reads the schedule.
        if state.meta.untrusted
            && matches!(
                action,
                CronAction::Add { .. }
                    | CronAction::Update { .. }
                    | CronAction::Remove { .. }
                    | CronAction::Run { .. }
                    | CronAction::Wake { .. }
            )
        {
            return Ok(ToolOutcome::Done(ToolOutput::error(UNTRUSTED_CRON)));
        }
        let recent = match &action {
            CronAction::Add {
                context_messages, ..
            } if *context_messages > 0 => recent_context(state, *context_messages),
            _ => Vec::new(),
        };
        let caller = CronCaller {
            session_key: Some(state.key.as_str()),
            agent_id: Some(&state.meta.agent_id),
        };
        let output = match self.cron.call_with_context(action, &caller, &recent).await {
            Ok(answer) => ToolOutput::ok(
                serde_json::to_string_pretty(&answer).unwrap_or_else(|_| answer.to_string()),
            ),
            Err(err) => ToolOutput::error(err.to_string()),
        };
        Ok(ToolOutcome::Done(output))
    }
}

/// The refusal of a schedule change from an untrusted session.
const UNTRUSTED_CRON: &str = "cron: this session is sandboxed (someone other than an owner talks in it), \
     so it cannot add, change, run or wake jobs: their runs would not be sandboxed. Ask an owner \
     to schedule it from their own chat.";

/// The last `count` user and assistant texts of the session, for `contextMessages`.
fn recent_context(state: &SessionState, count: u8) -> Vec<String> {
    let messages: Vec<ContextMessage<'_>> = state
        .steps
        .iter()
        .filter_map(|step| match &step.body {
            StepBody::Inbound {
                text,
                heartbeat: false,
                sender_id,
                ..
            } if sender_id != CRON_SENDER_ID => Some(ContextMessage {
                role: ContextRole::User,
                text,
            }),
            StepBody::Reply { text, to: None, .. } => Some(ContextMessage {
                role: ContextRole::Assistant,
                text,
            }),
            _ => None,
        })
        .collect();
    reminder_context_lines(&messages, count)
}
