//! `sessions_spawn` (spec `openclaw-automation.md` §3): plans a child (gates, key, prompt),
//! writes the call's attachments to `attachments/<uuid>/` in the child agent's workspace,
//! queues its [`SubagentStart`] on the turn queue and records it among the caller's
//! children. The child's key and run id derive from the session, turn and call, so a spawn
//! redone after a crash names the same child (and rewrites the same files), which starts
//! once. See `turn_service/subagents.rs` for the child's run and its announce.

use std::sync::Arc;

use async_trait::async_trait;
use clawless_base::model::ToolSpec;
use clawless_base::object_store::PutCondition;
use clawless_base::transcript::ToolCall;
use clawless_core::session::TurnQueue;
use clawless_core::subagents::attachments::SpawnAttachments;
use clawless_core::subagents::spawn::{
    CallerFacts, PastChild, SpawnPlan, SpawnRefusal, check_failure_breaker, parse_spawn_call,
    plan_spawn, sessions_spawn_tool_spec,
};
use clawless_core::subagents::{caller_depth, is_cron_session_key};
use clawless_core::tools::ToolOutput;
use clawless_core::turn::events::{SubagentStart, dedup_token};
use clawless_core::turn::state::{ChildRun, SessionState};

use super::{RuntimeTool, ToolCallContext, ToolOutcome};
use crate::skills_service::SkillsService;
use crate::sources::StoreFactory;
use crate::turn_service::subagents::{start_event, subagents_config};
use crate::turn_service::{TurnError, TurnService, open_workspace};
use clawless_base::clock::Clock;

/// `sessions_spawn`, over the turn queue (the children's starts), the agents' workspaces
/// (their attachments) and the config (the sub-agent gates).
pub(super) struct SpawnTool {
    queue: Arc<dyn TurnQueue>,
    skills: Arc<SkillsService>,
    stores: Arc<StoreFactory>,
    clock: Arc<dyn Clock>,
}

impl SpawnTool {
    pub(super) fn new(service: &TurnService, queue: Arc<dyn TurnQueue>) -> Self {
        Self {
            queue,
            skills: Arc::clone(&service.deps.skills),
            stores: Arc::clone(&service.deps.stores),
            clock: Arc::clone(&service.deps.clock),
        }
    }

    /// Runs a `sessions_spawn` call of `state`'s turn: plans the child (gates, key, prompt),
    /// writes its attachments into the target agent's workspace, queues its start and records
    /// it among the session's children. The child's key and run id derive from the session
    /// and the call, so a spawn redone after a crash names the same child (and rewrites the
    /// same files), which starts once. A failed write queues nothing.
    async fn spawn(&self, call: &ToolCall, state: &mut SessionState) -> ToolOutput {
        let request = match parse_spawn_call(&call.input) {
            Ok(request) => request,
            Err(err) => return ToolOutput::error(err.to_json().to_string()),
        };
        let agent_id = state.meta.agent_id.clone();
        let config = subagents_config(self.skills.config(), &agent_id);
        // The same call of the same turn (a redone spawn) names the same run.
        let run_id = dedup_token(&format!(
            "{}:{}:{}",
            state.meta.session_id, state.meta.turn, call.id
        ));
        // An earlier attempt of this very call (a crash before the result was recorded)
        // spawned this child already: answer as it did.
        let earlier = state
            .meta
            .children
            .iter()
            .find(|child| child.run_id == run_id)
            .cloned();
        let depth = state
            .meta
            .subagent
            .as_ref()
            .map_or_else(|| caller_depth(state.key.as_str()), |run| run.start.depth);
        let active = state
            .meta
            .children
            .iter()
            .filter(|child| child.status == "running" && child.run_id != run_id)
            .count();
        let caller = CallerFacts {
            session_key: state.key.as_str(),
            agent_id: &agent_id,
            depth,
            active_children: u32::try_from(active).unwrap_or(u32::MAX),
            is_cron: is_cron_session_key(state.key.as_str()),
        };
        let agent_ids: Vec<String> = self
            .skills
            .config()
            .agents()
            .into_iter()
            .map(|agent| agent.id)
            .collect();
        // Earlier children of this session, oldest first (this call's own, if redone, aside).
        let history: Vec<PastChild<'_>> = state
            .meta
            .children
            .iter()
            .filter(|child| child.run_id != run_id)
            .map(|child| PastChild {
                task: &child.task,
                failed: matches!(child.status.as_str(), "error" | "timeout"),
            })
            .collect();
        if earlier.is_none()
            && let Err(refusal) = check_failure_breaker(&history, &request.task)
        {
            tracing::warn!(session = %state.key, "sub-agent failure breaker refused a spawn");
            return ToolOutput::error(refusal.to_json().to_string());
        }
        let plan = match plan_spawn(&request, &caller, &config, &agent_ids, &child_uuid(&run_id)) {
            Ok(plan) => plan,
            Err(refusal) => return ToolOutput::error(refusal.to_json().to_string()),
        };
        let start = child_start(state, &plan, &run_id);
        if let Some(attachments) = &plan.attachments
            && let Err(err) = self
                .write_attachments(
                    &plan.target_agent_id,
                    &plan.attachments_rel_dir(),
                    attachments,
                )
                .await
        {
            return registration_failed(&err);
        }
        let event = start_event(start, &plan.child_session_key, &plan.target_agent_id);
        if let Err(err) = crate::ingress::enqueue(self.queue.as_ref(), &event).await {
            return registration_failed(&err);
        }
        if earlier.is_none() {
            state.meta.children.push(ChildRun {
                run_id: run_id.clone(),
                child_key: plan.child_session_key.clone(),
                task: plan.task.clone(),
                label: plan.label.clone(),
                started_at_ms: self.clock.now_ms(),
                ended_at_ms: None,
                status: "running".to_owned(),
                last_steer_at_ms: None,
            });
            state.touch_meta();
        }
        tracing::info!(parent = %state.key, child = %plan.child_session_key, %run_id, "sub-agent spawned");
        let answer = plan.accepted_json(&run_id);
        ToolOutput::ok(answer.to_string())
    }

    /// Writes a spawn's files to `<rel_dir><name>` below `agent_id`'s workspace root, each
    /// overwriting what a redone spawn wrote there before (the same bytes).
    async fn write_attachments(
        &self, agent_id: &str, rel_dir: &str, attachments: &SpawnAttachments,
    ) -> Result<(), TurnError> {
        let workspace = open_workspace(&self.skills, &self.stores, agent_id)?;
        for file in &attachments.files {
            let key = format!("{}{rel_dir}{}", workspace.prefix, file.name);
            workspace
                .store
                .put(&key, file.bytes.clone(), PutCondition::Always)
                .await?;
        }
        tracing::info!(agent = %agent_id, dir = %rel_dir, files = attachments.files.len(), "sub-agent attachments written");
        Ok(())
    }
}

#[async_trait]
impl RuntimeTool for SpawnTool {
    fn spec(&self) -> ToolSpec {
        sessions_spawn_tool_spec()
    }

    fn deferred(&self) -> bool {
        true
    }

    async fn call(&self, context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError> {
        Ok(ToolOutcome::Done(
            self.spawn(context.call, context.state).await,
        ))
    }
}

/// How the child `plan` names starts, as its start event carries it.
fn child_start(state: &SessionState, plan: &SpawnPlan, run_id: &str) -> SubagentStart {
    let channel = state.meta.chat.as_ref().map(|chat| chat.channel.clone());
    SubagentStart {
        run_id: run_id.to_owned(),
        parent_key: state.key.to_string(),
        task: plan.task.clone(),
        label: plan.label.clone(),
        depth: plan.depth,
        max_depth: plan.max_spawn_depth,
        first_message: plan.task_message(),
        extra_system_prompt: plan.extra_system_prompt(channel.as_deref()),
        model: plan.model.clone(),
        // The spawn's (or the configured) level; else the parent's own choice carries over.
        thinking: plan
            .thinking
            .as_deref()
            .and_then(clawless_base::thinking::ThinkingLevel::parse)
            .or(state.meta.turn_thinking)
            .or(state.meta.thinking_level),
        light_context: plan.light_context,
        timeout_ms: plan
            .run_timeout_seconds
            .map(|seconds| seconds.saturating_mul(1_000)),
        // A cron run's child is announced through the run's session, whose replies go to
        // the job's delivery target: its result is for the user (spec issue #116507).
        parent_is_internal: state.meta.subagent.is_some()
            || (clawless_core::subagents::announce::requester_is_internal(state.key.as_str())
                && !is_cron_session_key(state.key.as_str())),
        archive_when_announced: plan.cleanup
            == clawless_core::subagents::spawn::SpawnCleanup::Delete,
        parent_untrusted: state.meta.untrusted,
        group_scope: state.meta.group_scope.clone(),
        sandbox_key: Some(
            state
                .meta
                .sandbox_key
                .clone()
                .unwrap_or_else(|| state.key.to_string()),
        ),
    }
}

/// `sessions_spawn`'s answer when the child could not be set up (its files written, its start
/// queued): `{status:"error", error:"Failed to register subagent run: <err>"}`.
fn registration_failed(err: &dyn std::fmt::Display) -> ToolOutput {
    let refusal = SpawnRefusal::Error(format!("Failed to register subagent run: {err}"));
    ToolOutput::error(refusal.to_json().to_string())
}

/// A UUID-shaped (v4 layout) id derived from `run_id`: the child's session is named by the
/// spawn, so redoing the spawn names the same session.
fn child_uuid(run_id: &str) -> String {
    // `dedup_token` hashes text it cannot keep (the space here) to 32 hex digits at its end.
    let token = dedup_token(&format!("subagent child {run_id}"));
    let hex = &token[token.len().saturating_sub(32)..];
    let mut bytes = [0u8; 16];
    for (index, byte) in bytes.iter_mut().enumerate() {
        *byte =
            u8::from_str_radix(hex.get(index * 2..index * 2 + 2).unwrap_or("00"), 16).unwrap_or(0);
    }
    clawless_base::ids::uuid_from_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spawn_names_its_child_the_same_every_time() {
        let first = child_uuid("session-1:toolu_1");
        assert_eq!(first, child_uuid("session-1:toolu_1"));
        assert_ne!(first, child_uuid("session-1:toolu_2"));
        assert_eq!(first.len(), 36);
        assert_eq!(&first[14..15], "4");
    }
}
