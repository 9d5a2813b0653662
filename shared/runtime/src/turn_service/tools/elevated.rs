//! `/elevated on|ask|off`: an owner's command setting whether an allowed sender's sandboxed
//! commands leave the jail (each still waits for an owner's `/approve`). A command-only tool:
//! never offered to the model, run only by the command, and only an owner's.

use std::sync::Arc;

use async_trait::async_trait;
use clawless_base::model::ToolSpec;
use clawless_core::elevated::{
    ElevatedGate, ElevatedLevel, elevated_ack, elevated_current, elevated_unavailable_text,
    elevated_unrecognized,
};
use clawless_core::tools::ToolOutput;

use super::{RuntimeTool, ToolCallContext, ToolOutcome};
use crate::skills_service::SkillsService;
use crate::turn_service::TurnError;
use crate::turn_service::sandbox::session_sandbox;

/// The command tool's name (`/elevated` dispatches to it).
pub(crate) const ELEVATED_COMMAND: &str = "elevated";

/// `/elevated`, over the config.
pub(super) struct ElevatedCommand {
    skills: Arc<SkillsService>,
}

impl ElevatedCommand {
    pub(super) fn new(skills: Arc<SkillsService>) -> Self {
        Self { skills }
    }
}

#[async_trait]
impl RuntimeTool for ElevatedCommand {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: ELEVATED_COMMAND.to_owned(),
            description: "Show or set the session's elevated exec level (owners' /elevated)."
                .to_owned(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {"level": {"type": "string", "enum": ["on", "ask", "off"]}},
            }),
        }
    }

    fn command_only(&self) -> bool {
        true
    }

    async fn call(&self, context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError> {
        let state = context.state;
        if !state.meta.sender_is_owner {
            return Ok(ToolOutcome::Done(ToolOutput::error(
                "Only an owner can change elevated mode.",
            )));
        }
        let level = context.call.input["level"].as_str().map(str::trim);
        let Some(level) = level.filter(|level| !level.is_empty()) else {
            return Ok(ToolOutcome::Done(ToolOutput::ok(elevated_current(
                state.meta.elevated,
            ))));
        };
        let Some(parsed) = ElevatedLevel::parse(level) else {
            return Ok(ToolOutcome::Done(ToolOutput::ok(elevated_unrecognized(
                level,
            ))));
        };
        let config = self.skills.config();
        let sandboxed = session_sandbox(config, context.agent_id, state).is_some();
        if parsed == ElevatedLevel::Ask {
            // The owner turns it on; who may then use it is checked per command.
            let gates = config.elevated_gates(context.agent_id, None, None);
            if gates.contains(&ElevatedGate::Enabled) {
                let channel = state.meta.chat.as_ref().map_or("", |chat| &chat.channel);
                return Ok(ToolOutcome::Done(ToolOutput::error(
                    elevated_unavailable_text(
                        sandboxed,
                        &[ElevatedGate::Enabled],
                        channel,
                        state.key.as_str(),
                    ),
                )));
            }
        }
        state.meta.elevated = parsed;
        state.touch_meta();
        Ok(ToolOutcome::Done(ToolOutput::ok(elevated_ack(
            parsed, sandboxed,
        ))))
    }
}
