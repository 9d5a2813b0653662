//! The core's built-in tools (`read`, `write`, `edit`, `web_fetch`, `session_status`,
//! `memory_search`, `memory_get`) in the registry: one wrapper over [`Tool`], run with the
//! turn's [`ToolContext`](clawless_core::tools::ToolContext).

use std::sync::Arc;

use async_trait::async_trait;
use clawless_base::model::ToolSpec;
use clawless_core::tools::{Tool, ToolOutput};

use super::{RuntimeTool, ToolCallContext, ToolOutcome};
use crate::turn_service::TurnError;

/// A core tool, run in-process.
pub(super) struct CoreTool {
    tool: Arc<dyn Tool>,
}

impl CoreTool {
    pub(super) fn new(tool: Arc<dyn Tool>) -> Self {
        Self { tool }
    }
}

#[async_trait]
impl RuntimeTool for CoreTool {
    fn spec(&self) -> ToolSpec {
        self.tool.spec()
    }

    async fn call(&self, context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError> {
        let name = &context.call.name;
        let output = match context.tool_context {
            Some(tool_context) => self.tool.run(&context.call.input, tool_context).await,
            None => ToolOutput::error(clawless_core::turn::tool_not_available(name)),
        };
        Ok(ToolOutcome::Done(output))
    }
}
