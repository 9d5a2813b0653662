//! `subagents` (spec `openclaw-automation.md` §3.6): `list`, `info` and `log` of the
//! caller's children, `kill` (the whole subtree) and `steer` (a new run in the same
//! session), also behind the chat commands `/subagents`, `/kill` and `/steer`. A killed or
//! steered child stops at its next step: its session gets a versioned write, so a run in
//! progress elsewhere loses its next commit, is redelivered into the mark, and announces
//! nothing.

use std::sync::Arc;

use async_trait::async_trait;
use clawless_base::model::ToolSpec;
use clawless_base::transcript::ToolCall;
use clawless_core::session::{SessionStore, TurnQueue};
use clawless_core::subagents::control::{RunStatus, subagents_tool_spec};
use clawless_core::tools::ToolOutput;
use clawless_core::turn::events::{SubagentStart, dedup_token};
use clawless_core::turn::state::{ChildRun, SessionState, SubagentRun};

use super::{RuntimeTool, ToolCallContext, ToolOutcome};
use crate::turn_service::subagents::start_event;
use crate::turn_service::{TurnError, TurnService};
use clawless_base::clock::Clock;

/// `subagents`, over the children's sessions and the turn queue (a steer's new run).
pub(super) struct SubagentsTool {
    queue: Arc<dyn TurnQueue>,
    sessions: Arc<dyn SessionStore>,
    clock: Arc<dyn Clock>,
}

impl SubagentsTool {
    pub(super) fn new(service: &TurnService, queue: Arc<dyn TurnQueue>) -> Self {
        Self {
            queue,
            sessions: Arc::clone(&service.deps.sessions),
            clock: Arc::clone(&service.deps.clock),
        }
    }

    /// Runs a `subagents` call of `state`'s turn: `list` its children, `kill` one (or all)
    /// of them. A killed child stops at its next step: its session is marked killed (a
    /// version write, so a run in progress elsewhere loses its next commit and is
    /// redelivered into the mark), and it announces nothing. `steer` is not offered yet.
    async fn run(&self, call: &ToolCall, state: &mut SessionState) -> ToolOutput {
        let output = self.subagents_answer(call, state).await;
        if !call
            .id
            .starts_with(clawless_core::turn::COMMAND_CALL_PREFIX)
        {
            return output;
        }
        // A chat command (`/subagents …`, `/kill`, `/steer`) answers in words.
        let answer: serde_json::Value = serde_json::from_str(&output.text).unwrap_or_default();
        let text = answer["text"]
            .as_str()
            .or_else(|| answer["error"].as_str())
            .map_or_else(|| output.text.clone(), str::to_owned);
        ToolOutput {
            text,
            is_error: output.is_error,
        }
    }

    /// [`SubagentsTool::run`]'s answer as the tool gives it (JSON).
    async fn subagents_answer(&self, call: &ToolCall, state: &mut SessionState) -> ToolOutput {
        use clawless_core::subagents::control::{
            SubagentsAction, parse_subagents_call, resolve_target, split_runs, subagents_error_json,
        };
        let action = match parse_subagents_call(&call.input) {
            Ok(action) => action,
            Err(error) => return ToolOutput::error(subagents_error_json(&error).to_string()),
        };
        let now = self.clock.now_ms();
        match action {
            SubagentsAction::List { recent_minutes } => {
                let lists = split_runs(child_views(state, now), now, recent_minutes);
                ToolOutput::ok(
                    lists
                        .to_json(state.key.as_str(), state.key.as_str())
                        .to_string(),
                )
            }
            SubagentsAction::Kill { target } => self.kill(state, &target, now).await,
            SubagentsAction::Steer { target, message } => {
                self.steer(call, state, &target, &message, now).await
            }
            SubagentsAction::Info { target } => {
                let lists = split_runs(child_views(state, now), now, 24 * 60);
                match resolve_target(&target, &lists.active, &lists.recent) {
                    Ok(run) => ToolOutput::ok(
                        serde_json::json!({"status": "ok", "action": "info", "text": run.info_text()})
                            .to_string(),
                    ),
                    Err(error) => ToolOutput::error(subagents_error_json(&error).to_string()),
                }
            }
            SubagentsAction::Log { target, limit } => {
                let lists = split_runs(child_views(state, now), now, 24 * 60);
                let run = match resolve_target(&target, &lists.active, &lists.recent) {
                    Ok(run) => run.clone(),
                    Err(error) => {
                        return ToolOutput::error(subagents_error_json(&error).to_string());
                    }
                };
                match self.child_log(&run.session_key, limit).await {
                    Ok(text) => ToolOutput::ok(
                        serde_json::json!({"status": "ok", "action": "log", "text": text})
                            .to_string(),
                    ),
                    Err(err) => ToolOutput::error(
                        subagents_error_json(&format!("log unavailable: {err}")).to_string(),
                    ),
                }
            }
            SubagentsAction::Help => ToolOutput::ok(
                serde_json::json!({
                    "status": "ok",
                    "action": "help",
                    "text": clawless_core::subagents::control::SUBAGENTS_COMMAND_USAGE
                })
                .to_string(),
            ),
        }
    }

    /// `/subagents log`: the child's latest `limit` user and assistant messages, a line each
    /// (long ones cut).
    async fn child_log(&self, child_key: &str, limit: usize) -> Result<String, TurnError> {
        const LINE_CHARS: usize = 500;
        let key = clawless_core::session::SessionKey::parse(child_key)
            .ok_or_else(|| TurnError::BadEvent(format!("bad child key {child_key:?}")))?;
        let Some(stored) = self.sessions.load_live(&key).await? else {
            return Ok("(not started yet)".to_owned());
        };
        let child = SessionState::from_stored(key, &stored)?;
        let lines: Vec<String> = child
            .messages()
            .iter()
            .map(clawless_core::subagents::sessions_tools::history_message_json)
            .filter_map(|message| {
                let role = message["role"].as_str()?.to_owned();
                let text: Vec<&str> = message["content"]
                    .as_array()?
                    .iter()
                    .filter_map(|block| block["text"].as_str())
                    .collect();
                let text = text
                    .join(" ")
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ");
                if text.is_empty() || !matches!(role.as_str(), "user" | "assistant") {
                    return None;
                }
                let cut: String = text.chars().take(LINE_CHARS).collect();
                let more = if cut.len() < text.len() { "…" } else { "" };
                Some(format!("{role}: {cut}{more}"))
            })
            .collect();
        let start = lines.len().saturating_sub(limit);
        Ok(if lines.is_empty() {
            "(no messages)".to_owned()
        } else {
            lines[start..].join("\n")
        })
    }

    /// `subagents steer`: the child's current run stops at its next step (its announce
    /// suppressed), and a new run starts in the same session with `message`, replacing it
    /// in this session's record.
    async fn steer(
        &self, call: &ToolCall, state: &mut SessionState, target: &str, message: &str, now: u64,
    ) -> ToolOutput {
        use clawless_core::subagents::control::{
            check_steer, resolve_target, split_runs, steer_accepted_json, subagents_error_json,
        };
        let views: Vec<_> = state
            .meta
            .children
            .iter()
            .map(|child| child_view(child, now))
            .collect();
        let lists = split_runs(views, now, 24 * 60);
        let run = match resolve_target(target, &lists.active, &lists.recent) {
            Ok(run) => run.clone(),
            Err(error) => return ToolOutput::error(subagents_error_json(&error).to_string()),
        };
        if run.session_key == state.key.as_str() {
            return ToolOutput::error(
                subagents_error_json("Subagents cannot steer themselves.").to_string(),
            );
        }
        let last_steer = state
            .meta
            .children
            .iter()
            .find(|child| child.run_id == run.run_id)
            .and_then(|child| child.last_steer_at_ms);
        if let Err(refusal) = check_steer(message, last_steer, now) {
            return ToolOutput::error(refusal.to_json().to_string());
        }
        let new_run_id = dedup_token(&format!(
            "{}:{}:{}",
            state.meta.session_id, state.meta.turn, call.id
        ));
        let previous = match self
            .replace_run(&run.session_key, &run.run_id, "steered")
            .await
        {
            Ok(Some(previous)) => previous,
            Ok(None) => {
                return ToolOutput::error(
                    subagents_error_json(&format!("{} has not started yet.", run.display_name()))
                        .to_string(),
                );
            }
            Err(err) => return ToolOutput::error(format!("steer failed: {err}")),
        };
        let start = SubagentStart {
            run_id: new_run_id.clone(),
            first_message: message.to_owned(),
            timeout_ms: None,
            ..previous
        };
        let agent_id = clawless_core::subagents::agent_id_of_key(&run.session_key)
            .unwrap_or_else(|| state.meta.agent_id.clone());
        let event = start_event(start, &run.session_key, &agent_id);
        if let Err(err) = crate::ingress::enqueue(self.queue.as_ref(), &event).await {
            return ToolOutput::error(format!("steer failed: {err}"));
        }
        if let Some(child) = state
            .meta
            .children
            .iter_mut()
            .find(|child| child.run_id == run.run_id)
        {
            child.run_id.clone_from(&new_run_id);
            child.status = "running".to_owned();
            child.ended_at_ms = None;
            child.last_steer_at_ms = Some(now);
        }
        state.touch_meta();
        ToolOutput::ok(steer_accepted_json(&run, &new_run_id).to_string())
    }

    /// Ends `child_key`'s run `run_id` as `status` in its own session (a versioned write,
    /// retried on a lost race) and returns how it was started; `None` when the child has
    /// not started.
    async fn replace_run(
        &self, child_key: &str, run_id: &str, status: &str,
    ) -> Result<Option<SubagentStart>, TurnError> {
        let key = clawless_core::session::SessionKey::parse(child_key)
            .ok_or_else(|| TurnError::BadEvent(format!("bad child key {child_key:?}")))?;
        for _ in 0..5 {
            let Some(stored) = self.sessions.load_live(&key).await? else {
                return Ok(None);
            };
            let mut child = SessionState::from_stored(key.clone(), &stored)?;
            let Some(run) = child.meta.subagent.as_mut() else {
                return Ok(None);
            };
            if run.start.run_id != run_id {
                return Ok(None);
            }
            let start = run.start.clone();
            if run.status == "running" {
                run.status = status.to_owned();
                run.ended_at_ms = Some(self.clock.now_ms());
                child.touch_meta();
                let commit = child.pending_commit()?;
                if self.sessions.commit(&key, &commit).await.is_err() {
                    continue;
                }
            }
            return Ok(Some(start));
        }
        Err(TurnError::BadEvent("the child kept changing".to_owned()))
    }

    /// Marks `child` killed in its own session. A child that has not started yet gets its
    /// session created killed, so its start, when it comes, starts nothing.
    async fn mark_killed(&self, child: &ChildRun, parent_key: &str) -> Result<(), TurnError> {
        if self
            .replace_run(&child.child_key, &child.run_id, "killed")
            .await?
            .is_some()
        {
            return Ok(());
        }
        let key = clawless_core::session::SessionKey::parse(&child.child_key)
            .ok_or_else(|| TurnError::BadEvent(format!("bad child key {:?}", child.child_key)))?;
        if self.sessions.load_live(&key).await?.is_some() {
            // Started under another run (a steer): that run is not this kill's.
            return Ok(());
        }
        let now = self.clock.now_ms();
        let mut state = SessionState::new(key.clone(), dedup_token(&child.run_id), now);
        state.meta.subagent = Some(SubagentRun {
            start: SubagentStart {
                run_id: child.run_id.clone(),
                parent_key: parent_key.to_owned(),
                task: child.task.clone(),
                label: child.label.clone(),
                depth: 0,
                max_depth: 0,
                first_message: String::new(),
                extra_system_prompt: String::new(),
                model: None,
                thinking: None,
                light_context: false,
                timeout_ms: None,
                parent_is_internal: false,
                archive_when_announced: false,
                parent_untrusted: false,
                sandbox_key: None,
                group_scope: None,
            },
            started_at_ms: now,
            ended_at_ms: Some(now),
            status: "killed".to_owned(),
            announced: false,
            archived: false,
        });
        state.touch_meta();
        let commit = state.pending_commit()?;
        match self.sessions.commit(&key, &commit).await {
            Ok(_) => Ok(()),
            // It started meanwhile: mark that run.
            Err(_) => self
                .replace_run(&child.child_key, &child.run_id, "killed")
                .await
                .map(|_| ()),
        }
    }

    /// Kills the running sub-agents below `child_key` (its children, theirs, …), so a kill
    /// stops the whole subtree and nothing of it is announced. Returns how many were killed.
    async fn kill_descendants(&self, child_key: &str) -> u32 {
        let mut killed = 0;
        let mut parents = vec![child_key.to_owned()];
        while let Some(parent) = parents.pop() {
            let Some(key) = clawless_core::session::SessionKey::parse(&parent) else {
                continue;
            };
            let stored = match self.sessions.load_live(&key).await {
                Ok(Some(stored)) => stored,
                Ok(None) => continue,
                Err(err) => {
                    tracing::warn!(session = %parent, error = %err, "descendants not killed");
                    continue;
                }
            };
            let Ok(session) = SessionState::from_stored(key, &stored) else {
                continue;
            };
            for child in session
                .meta
                .children
                .iter()
                .filter(|child| child.status == "running")
            {
                match self.mark_killed(child, &parent).await {
                    Ok(()) => {
                        killed += 1;
                        parents.push(child.child_key.clone());
                    }
                    Err(err) => {
                        tracing::warn!(child = %child.child_key, error = %err, "descendant not killed");
                    }
                }
            }
        }
        killed
    }

    /// `subagents kill`: marks the target (or every active child) killed in its own session,
    /// with the whole subtree below it, and records that here.
    async fn kill(&self, state: &mut SessionState, target: &str, now: u64) -> ToolOutput {
        use clawless_core::subagents::control::{
            already_finished_text, is_kill_all, kill_all_text, kill_json, kill_text,
            resolve_target, split_runs, subagents_error_json,
        };
        let lists = split_runs(child_views(state, now), now, 24 * 60);
        let targets: Vec<String> = if is_kill_all(target) {
            lists.active.iter().map(|run| run.run_id.clone()).collect()
        } else {
            match resolve_target(target, &lists.active, &lists.recent) {
                Ok(run) if run.status != RunStatus::Running => {
                    return ToolOutput::ok(kill_json(&already_finished_text(run)).to_string());
                }
                Ok(run) => vec![run.run_id.clone()],
                Err(error) => {
                    return ToolOutput::error(subagents_error_json(&error).to_string());
                }
            }
        };
        let mut killed = Vec::new();
        let mut descendants = 0;
        let parent_key = state.key.to_string();
        for run_id in &targets {
            let Some(child) = state.meta.children.iter().find(|c| c.run_id == *run_id) else {
                continue;
            };
            match self.mark_killed(child, &parent_key).await {
                Ok(()) => {
                    killed.push(run_id.clone());
                    descendants += self.kill_descendants(&child.child_key).await;
                }
                Err(err) => {
                    tracing::warn!(child = %child.child_key, error = %err, "sub-agent not killed");
                }
            }
        }
        for child in state.meta.children.iter_mut() {
            if killed.contains(&child.run_id) {
                child.status = "killed".to_owned();
                child.ended_at_ms = Some(now);
            }
        }
        state.touch_meta();
        let text = if is_kill_all(target) {
            kill_all_text(killed.len())
        } else {
            let lists = split_runs(child_views(state, now), now, 24 * 60);
            lists
                .recent
                .iter()
                .chain(&lists.active)
                .find(|run| killed.contains(&run.run_id))
                .map_or_else(|| kill_all_text(0), |run| kill_text(run, descendants))
        };
        ToolOutput::ok(kill_json(&text).to_string())
    }
}

#[async_trait]
impl RuntimeTool for SubagentsTool {
    fn spec(&self) -> ToolSpec {
        subagents_tool_spec()
    }

    fn deferred(&self) -> bool {
        true
    }

    async fn call(&self, context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError> {
        Ok(ToolOutcome::Done(
            self.run(context.call, context.state).await,
        ))
    }
}

/// How `child` looks to the `subagents` tool.
/// The views of every child run of the session, as of `now_ms`.
fn child_views(
    state: &SessionState, now_ms: u64,
) -> Vec<clawless_core::subagents::control::RunView> {
    state
        .meta
        .children
        .iter()
        .map(|child| child_view(child, now_ms))
        .collect()
}

fn child_view(child: &ChildRun, now_ms: u64) -> clawless_core::subagents::control::RunView {
    let status = match child.status.as_str() {
        "running" => RunStatus::Running,
        "error" => RunStatus::Error,
        "timeout" => RunStatus::Timeout,
        "killed" => RunStatus::Killed,
        _ => RunStatus::Done,
    };
    clawless_core::subagents::control::RunView {
        index: 0,
        run_id: child.run_id.clone(),
        session_key: child.child_key.clone(),
        label: child.label.clone(),
        task: child.task.clone(),
        status,
        model: None,
        runtime_ms: Some(
            child
                .ended_at_ms
                .unwrap_or(now_ms)
                .saturating_sub(child.started_at_ms),
        ),
        total_tokens: None,
        started_at_ms: child.started_at_ms,
        ended_at_ms: child.ended_at_ms,
        pending_descendants: 0,
        child_sessions: Vec::new(),
    }
}
