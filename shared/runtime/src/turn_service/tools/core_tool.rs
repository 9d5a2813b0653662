//! The core's built-in tools (`read`, `write`, `edit`, `web_fetch`, `session_status`,
//! `memory_search`, `memory_get`) in the registry: one wrapper over [`Tool`], run with the
//! turn's [`ToolContext`](clawless_core::tools::ToolContext).

use std::sync::Arc;

use async_trait::async_trait;
use clawless_base::model::ToolSpec;
use clawless_core::tools::{Tool, ToolOutput};

use super::{RuntimeTool, ToolCallContext, ToolOutcome};
use crate::turn_service::TurnError;

/// The core tools offered in short form until a session first calls them (see the
/// `deferred` module): useful, but not on most turns, and their schemas are among the largest.
const DEFERRED_CORE_TOOLS: [&str; 3] = ["grep", "find", "apply_patch"];

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

    fn deferred(&self) -> bool {
        DEFERRED_CORE_TOOLS.contains(&self.tool.spec().name.as_str())
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
