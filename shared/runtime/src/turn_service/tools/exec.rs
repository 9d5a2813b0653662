//! `exec`: a shell command run on a paired node host (spec §3.3). The call is a pending job:
//! the node registry sends it (with the person's grant when it was approved in the chat), and
//! the result comes back as a `ToolResult` event. Offered only while a node is active (for a
//! sandboxed session: a node that runs a jail, and the job says it must run in it).

use std::sync::Arc;

use async_trait::async_trait;
use clawless_base::model::ToolSpec;
use clawless_core::nodes::exec_tool::exec_tool_spec;
use clawless_core::tools::ToolOutput;

use super::{Placement, RuntimeTool, ToolCallContext, ToolOutcome, ToolScope};
use crate::nodes_service::{Dispatch, ExecOptions, NodesService};
use crate::turn_service::TurnError;

/// Who approves a call approved in the chat.
const APPROVER: &str = "owner";

/// `exec`, over the node registry.
pub(super) struct ExecTool {
    nodes: Arc<NodesService>,
}

impl ExecTool {
    pub(super) fn new(nodes: Arc<NodesService>) -> Self {
        Self { nodes }
    }
}

#[async_trait]
impl RuntimeTool for ExecTool {
    fn spec(&self) -> ToolSpec {
        exec_tool_spec()
    }

    fn placement(&self) -> Placement {
        Placement::OnNode
    }

    fn available(&self, scope: ToolScope) -> bool {
        scope.exec_ready
    }

    async fn call(&self, context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError> {
        let Some(job) = context.job else {
            return Ok(ToolOutcome::Done(ToolOutput::error(
                "exec runs on a node host only.",
            )));
        };
        let placement = match job.placement {
            Ok(placement) => placement,
            Err(refused) => return Ok(ToolOutcome::Done(ToolOutput::error(refused))),
        };
        let approved = job.approved.map(|decision| (decision, APPROVER.to_owned()));
        let dispatched = self
            .nodes
            .dispatch_exec(
                context.session_key,
                context.agent_id,
                job.job_id,
                context.call,
                approved,
                placement,
                ExecOptions {
                    background_allowed: job.background_allowed,
                },
            )
            .await?;
        Ok(match dispatched {
            Dispatch::Sent => ToolOutcome::Pending,
            Dispatch::Resolved(output) => ToolOutcome::Done(output),
        })
    }
}
