//! `process`: follow-up on commands `exec` backgrounded on a node host (spec §4.4). `list`
//! is answered from the backend's index (so it works while the node is offline); every
//! other action goes to the node that runs the process as a signed job, like `exec`, and its
//! answer comes back as a `ToolResult` event. Deferred: offered in short form until called.

use std::sync::Arc;

use async_trait::async_trait;
use clawless_base::model::ToolSpec;
use clawless_core::nodes::process_tool::{
    ProcessCall, list_text, parse_process_call, process_tool_spec,
};
use clawless_core::tools::ToolOutput;

use super::{Placement, RuntimeTool, ToolCallContext, ToolOutcome, ToolScope};
use crate::nodes_service::{Dispatch, NodesService};
use crate::turn_service::TurnError;

/// `process`, over the node registry and the background process index.
pub(super) struct ProcessTool {
    nodes: Arc<NodesService>,
}

impl ProcessTool {
    pub(super) fn new(nodes: Arc<NodesService>) -> Self {
        Self { nodes }
    }
}

#[async_trait]
impl RuntimeTool for ProcessTool {
    fn spec(&self) -> ToolSpec {
        process_tool_spec()
    }

    fn placement(&self) -> Placement {
        Placement::OnNode
    }

    fn available(&self, scope: ToolScope) -> bool {
        scope.exec_ready
    }

    fn deferred(&self) -> bool {
        true
    }

    async fn call(&self, context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError> {
        let call = match parse_process_call(&context.call.input) {
            Ok(call) => call,
            Err(text) => return Ok(ToolOutcome::Done(ToolOutput::error(text))),
        };
        let (action, session_id, wait_ms) = match call {
            ProcessCall::List => {
                let Some(entries) = self.nodes.process_list(context.session_key).await? else {
                    return Ok(ToolOutcome::Done(ToolOutput::error(
                        "Background processes are not available in this deployment.",
                    )));
                };
                let now = self.nodes.now_ms();
                return Ok(ToolOutcome::Done(ToolOutput::ok(list_text(&entries, now))));
            }
            ProcessCall::OnNode {
                action,
                session_id,
                wait_ms,
            } => (action, session_id, wait_ms),
        };
        let Some(job) = context.job else {
            return Ok(ToolOutcome::Done(ToolOutput::error(
                "process runs on a node host only.",
            )));
        };
        let dispatched = self
            .nodes
            .dispatch_process(
                context.session_key,
                context.agent_id,
                job.job_id,
                context.call,
                &action,
                &session_id,
                wait_ms,
            )
            .await?;
        Ok(match dispatched {
            Dispatch::Sent => ToolOutcome::Pending,
            Dispatch::Resolved(output) => ToolOutcome::Done(output),
        })
    }
}
