//! Sub-agents in the turn service (spec `openclaw-automation.md` §3): a child's run in its
//! own session, and its completion pushed back to the session that spawned it.
//!
//! - **Spawn.** `sessions_spawn` (in the parent's turn) writes the call's attachments to
//!   `attachments/<uuid>/` in the child agent's workspace, queues a [`SubagentStart`] for
//!   `agent:<id>:subagent:<uuid>` on the turn queue and records the child in the parent's
//!   meta. The child's key and run id derive from the parent's session, turn and tool call,
//!   so a spawn redone after a crash writes the same files again and queues the same child,
//!   which the queue and the child take once.
//! - **Parallel.** Each child is its own FIFO group: children of one parent run side by side,
//!   and the parent keeps answering its chat while they work; nobody waits for anybody.
//! - **The child's run** sees its task and the sub-agent prompt, never the parent's
//!   transcript. Its answer goes nowhere by itself (its turn's replies have no target).
//! - **Completion.** When the child's turn ends, its result becomes an announce event on the
//!   parent's queue, deduplicated by `announce:v1:<child>:<run>`; the child records that it
//!   was queued only after it was, so a crash in between queues it again, and the parent
//!   takes it once (its id is remembered as a message id). There is no retry limit to give
//!   up at: the event waits on the queue until the parent's session takes it.
//! - **The parent** turns the announce into a turn of its own (a user-role message with the
//!   internal completion block), so the model rewrites the result for its chat.
//! - **Control.** `subagents kill` and `steer`, and `runTimeoutSeconds` (a durable timer),
//!   end the child's run with a versioned write to its session: a run in progress elsewhere
//!   loses its next commit, is redelivered, and takes no further step. A steer starts a new
//!   run in the same session. A finished child is archived by a timer after
//!   `archiveAfterMinutes`.

use clawless_automation::heartbeat::{AlertTarget, HeartbeatDelivery};
use clawless_base::object_store::PutCondition;
use clawless_base::session_key::ChatType;
use clawless_base::transcript::{ToolCall, assistant_text};
use clawless_core::subagents::announce::{
    AnnounceOutcome, AnnounceSource, CompletionEvent, RunStats, announce_idempotency_key,
    announce_task_name, cap_result, is_announce_silent, render_completion_events,
    reply_instruction, stats_line,
};
use clawless_core::subagents::attachments::SpawnAttachments;
use clawless_core::subagents::control::RunStatus;
use clawless_core::subagents::spawn::{
    CallerFacts, PastChild, SESSIONS_SPAWN, SpawnRefusal, check_failure_breaker, parse_spawn_call,
    plan_spawn,
};
use clawless_core::subagents::{SUBAGENT_SENDER_ID, caller_depth, is_cron_session_key};
use clawless_core::tools::ToolOutput;
use clawless_core::turn::Incoming;
use clawless_core::turn::events::{
    ChatRef, InboundMessage, SessionEvent, SubagentStart, TurnEvent, dedup_token,
};
use clawless_core::turn::state::{ChildRun, PreparedMessage, SessionState, StepBody, SubagentRun};

use super::{TurnError, TurnService};

/// The channel a child's turns name: its replies have nowhere to go.
const SUBAGENT_CHANNEL: &str = "subagent";

/// How a child's run ended, read from its transcript.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct ChildResult {
    /// `ok`, `error` or `timeout`.
    pub status: String,
    /// The error, for `error`.
    pub error: Option<String>,
    /// The latest visible assistant text.
    pub text: Option<String>,
    /// Tokens in and out over the run.
    pub tokens_in: u64,
    pub tokens_out: u64,
}

impl TurnService {
    /// Runs a `sessions_spawn` call of `state`'s turn: plans the child (gates, key, prompt),
    /// writes its attachments into the target agent's workspace, queues its start and records
    /// it among the session's children. The child's key and run id derive from the session
    /// and the call, so a spawn redone after a crash names the same child (and rewrites the
    /// same files), which starts once. A failed write queues nothing.
    pub(super) async fn run_spawn_tool(
        &self,
        call: &ToolCall,
        state: &mut SessionState,
    ) -> ToolOutput {
        let Some(queue) = &self.subagent_queue else {
            return ToolOutput::error(format!("{SESSIONS_SPAWN} is not available here"));
        };
        let request = match parse_spawn_call(&call.input) {
            Ok(request) => request,
            Err(err) => return ToolOutput::error(err.to_json().to_string()),
        };
        let agent_id = state.meta.agent_id.clone();
        let config = self.subagents_config(&agent_id);
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
        let channel = state.meta.chat.as_ref().map(|chat| chat.channel.clone());
        let start = SubagentStart {
            run_id: run_id.clone(),
            parent_key: state.key.to_string(),
            task: plan.task.clone(),
            label: plan.label.clone(),
            depth: plan.depth,
            max_depth: plan.max_spawn_depth,
            first_message: plan.task_message(),
            extra_system_prompt: plan.extra_system_prompt(channel.as_deref()),
            model: plan.model.clone(),
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
        };
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
        if let Err(err) = crate::ingress::enqueue(queue.as_ref(), &event).await {
            return registration_failed(&err);
        }
        if earlier.is_none() {
            state.meta.children.push(ChildRun {
                run_id: run_id.clone(),
                child_key: plan.child_session_key.clone(),
                task: plan.task.clone(),
                label: plan.label.clone(),
                started_at_ms: self.deps.clock.now_ms(),
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
        &self,
        agent_id: &str,
        rel_dir: &str,
        attachments: &SpawnAttachments,
    ) -> Result<(), TurnError> {
        let workspace = self.workspace(agent_id)?;
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

    /// Runs a `subagents` call of `state`'s turn: `list` its children, `kill` one (or all)
    /// of them. A killed child stops at its next step: its session is marked killed (a
    /// version write, so a run in progress elsewhere loses its next commit and is
    /// redelivered into the mark), and it announces nothing. `steer` is not offered yet.
    pub(super) async fn run_subagents_tool(
        &self,
        call: &ToolCall,
        state: &mut SessionState,
    ) -> ToolOutput {
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

    /// [`TurnService::run_subagents_tool`]'s answer as the tool gives it (JSON).
    async fn subagents_answer(&self, call: &ToolCall, state: &mut SessionState) -> ToolOutput {
        use clawless_core::subagents::control::{
            SubagentsAction, already_finished_text, is_kill_all, kill_all_text, kill_json,
            kill_text, parse_subagents_call, resolve_target, split_runs, subagents_error_json,
        };
        let action = match parse_subagents_call(&call.input) {
            Ok(action) => action,
            Err(error) => return ToolOutput::error(subagents_error_json(&error).to_string()),
        };
        let now = self.deps.clock.now_ms();
        let views = |state: &SessionState| {
            state
                .meta
                .children
                .iter()
                .map(|child| child_view(child, now))
                .collect::<Vec<_>>()
        };
        match action {
            SubagentsAction::List { recent_minutes } => {
                let lists = split_runs(views(state), now, recent_minutes);
                ToolOutput::ok(
                    lists
                        .to_json(state.key.as_str(), state.key.as_str())
                        .to_string(),
                )
            }
            SubagentsAction::Kill { target } => {
                let lists = split_runs(views(state), now, 24 * 60);
                let targets: Vec<String> = if is_kill_all(&target) {
                    lists.active.iter().map(|run| run.run_id.clone()).collect()
                } else {
                    match resolve_target(&target, &lists.active, &lists.recent) {
                        Ok(run) if run.status != RunStatus::Running => {
                            return ToolOutput::ok(
                                kill_json(&already_finished_text(run)).to_string(),
                            );
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
                    let Some(child) = state.meta.children.iter().find(|c| c.run_id == *run_id)
                    else {
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
                let text = if is_kill_all(&target) {
                    kill_all_text(killed.len())
                } else {
                    let lists = split_runs(views(state), now, 24 * 60);
                    lists
                        .recent
                        .iter()
                        .chain(&lists.active)
                        .find(|run| killed.contains(&run.run_id))
                        .map_or_else(|| kill_all_text(0), |run| kill_text(run, descendants))
                };
                ToolOutput::ok(kill_json(&text).to_string())
            }
            SubagentsAction::Steer { target, message } => {
                self.steer(call, state, &target, &message, now).await
            }
            SubagentsAction::Info { target } => {
                let lists = split_runs(views(state), now, 24 * 60);
                match resolve_target(&target, &lists.active, &lists.recent) {
                    Ok(run) => ToolOutput::ok(
                        serde_json::json!({"status": "ok", "action": "info", "text": run.info_text()})
                            .to_string(),
                    ),
                    Err(error) => ToolOutput::error(subagents_error_json(&error).to_string()),
                }
            }
            SubagentsAction::Log { target, limit } => {
                let lists = split_runs(views(state), now, 24 * 60);
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
        let Some(stored) = self.deps.sessions.load_live(&key).await? else {
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
        &self,
        call: &ToolCall,
        state: &mut SessionState,
        target: &str,
        message: &str,
        now: u64,
    ) -> ToolOutput {
        use clawless_core::subagents::control::{
            check_steer, resolve_target, split_runs, steer_accepted_json, subagents_error_json,
        };
        let Some(queue) = &self.subagent_queue else {
            return ToolOutput::error(
                subagents_error_json("sub-agents are not available here").to_string(),
            );
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
        if let Err(err) = crate::ingress::enqueue(queue.as_ref(), &event).await {
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
        &self,
        child_key: &str,
        run_id: &str,
        status: &str,
    ) -> Result<Option<SubagentStart>, TurnError> {
        let key = clawless_core::session::SessionKey::parse(child_key)
            .ok_or_else(|| TurnError::BadEvent(format!("bad child key {child_key:?}")))?;
        for _ in 0..5 {
            let Some(stored) = self.deps.sessions.load_live(&key).await? else {
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
                run.ended_at_ms = Some(self.deps.clock.now_ms());
                child.touch_meta();
                let commit = child.pending_commit()?;
                if self.deps.sessions.commit(&key, &commit).await.is_err() {
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
        if self.deps.sessions.load_live(&key).await?.is_some() {
            // Started under another run (a steer): that run is not this kill's.
            return Ok(());
        }
        let now = self.deps.clock.now_ms();
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
                light_context: false,
                timeout_ms: None,
                parent_is_internal: false,
                archive_when_announced: false,
            },
            started_at_ms: now,
            ended_at_ms: Some(now),
            status: "killed".to_owned(),
            announced: false,
            archived: false,
        });
        state.touch_meta();
        let commit = state.pending_commit()?;
        match self.deps.sessions.commit(&key, &commit).await {
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
            let stored = match self.deps.sessions.load_live(&key).await {
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

    /// A killed or timed-out child goes no further: the turn it was in is closed without
    /// another model call or tool run. True when `state` is such a child (the caller then
    /// commits and stops).
    pub(super) fn stop_if_ended(&self, state: &mut SessionState) -> bool {
        let Some(run) = &state.meta.subagent else {
            return false;
        };
        if !matches!(run.status.as_str(), "killed" | "timeout" | "steered") {
            return false;
        }
        if state.meta.turn_open || !state.meta.follow_ups.is_empty() {
            tracing::info!(session = %state.key, status = %run.status, "sub-agent stopped before its next step");
            state.meta.turn_open = false;
            state.meta.follow_ups.clear();
            state.touch_meta();
        }
        true
    }

    /// A child's time limit came: if its run is still going, it stops at its next step and
    /// its end is announced as `timed out`. True when the meta changed.
    pub(super) async fn time_out_subagent(
        &self,
        state: &mut SessionState,
        run_id: &str,
    ) -> Result<bool, TurnError> {
        let Some(run) = state.meta.subagent.as_mut() else {
            return Ok(false);
        };
        if run.start.run_id != run_id || run.status != "running" || run.announced {
            return Ok(false);
        }
        tracing::info!(session = %state.key, run_id, "sub-agent timed out");
        run.status = "timeout".to_owned();
        state.touch_meta();
        self.stop_if_ended(state);
        self.announce_if_done(state).await?;
        Ok(true)
    }

    /// The timer that archives `state`'s finished run after `archiveAfterMinutes` (none
    /// when archiving is off).
    pub(super) fn archive_timer(
        &self,
        state: &SessionState,
        agent_id: &str,
    ) -> Option<clawless_core::nodes::Timer> {
        let run = state.meta.subagent.as_ref()?;
        let after = self.subagents_config(agent_id).archive_after_ms()?;
        Some(clawless_core::nodes::Timer {
            timer_id: format!("subagent-archive:{}", run.start.run_id),
            due_at_ms: run
                .ended_at_ms
                .unwrap_or_else(|| self.deps.clock.now_ms())
                .saturating_add(after),
            event: SessionEvent {
                session_key: state.key.to_string(),
                agent_id: agent_id.to_owned(),
                event: TurnEvent::SubagentArchive {
                    run_id: run.start.run_id.clone(),
                },
            },
        })
    }

    /// Marks `state`'s finished run archived. True when the meta changed.
    pub(super) fn archive_subagent(&self, state: &mut SessionState, run_id: &str) -> bool {
        let Some(run) = state.meta.subagent.as_mut() else {
            return false;
        };
        if run.start.run_id != run_id || run.archived || run.status == "running" {
            return false;
        }
        run.archived = true;
        state.touch_meta();
        tracing::info!(session = %state.key, run_id, "finished sub-agent archived; its transcript stays");
        true
    }

    /// The sub-agent settings for `agent_id`: `agents.defaults.subagents` under its own.
    pub(super) fn subagents_config(
        &self,
        agent_id: &str,
    ) -> clawless_core::subagents::config::SubagentsConfig {
        let config = self.config();
        let defaults = config.agents.defaults.subagents.clone().unwrap_or_default();
        let own = config
            .agents
            .list
            .iter()
            .find(|agent| agent.id.eq_ignore_ascii_case(agent_id))
            .and_then(|agent| agent.subagents.as_ref());
        defaults.for_agent(own)
    }

    /// The announce of `run`'s end for its parent.
    fn announce_event(
        &self,
        state: &SessionState,
        run: &SubagentRun,
        result: &ChildResult,
        now_ms: u64,
    ) -> SessionEvent {
        let start = &run.start;
        let outcome = match result.status.as_str() {
            "ok" => AnnounceOutcome::Ok,
            "timeout" => AnnounceOutcome::Timeout,
            _ => AnnounceOutcome::Error(result.error.clone()),
        };
        let text = result.text.clone().unwrap_or_default();
        let silent = outcome == AnnounceOutcome::Ok && is_announce_silent(&text);
        let stats = stats_line(&RunStats {
            runtime_ms: Some(now_ms.saturating_sub(run.started_at_ms)),
            input_tokens: Some(result.tokens_in),
            output_tokens: Some(result.tokens_out),
            session_total_tokens: None,
        });
        let event = CompletionEvent {
            source: AnnounceSource::Subagent,
            child_session_key: state.key.to_string(),
            child_session_id: Some(state.meta.session_id.clone()),
            task: announce_task_name(start.label.as_deref(), &start.task),
            status: outcome.status_label(),
            result: if text.trim().is_empty() {
                clawless_core::subagents::announce::NO_OUTPUT.to_owned()
            } else {
                cap_result(&text)
            },
            stats: Some(stats),
            reply_instruction: reply_instruction(start.parent_is_internal, true).to_owned(),
        };
        SessionEvent {
            session_key: start.parent_key.clone(),
            agent_id: clawless_core::subagents::agent_id_of_key(&start.parent_key)
                .unwrap_or_else(|| state.meta.agent_id.clone()),
            event: TurnEvent::SubagentAnnounce {
                announce_id: announce_idempotency_key(state.key.as_str(), &start.run_id),
                child_key: state.key.to_string(),
                run_id: start.run_id.clone(),
                status: match result.status.as_str() {
                    "ok" => "done".to_owned(),
                    other => other.to_owned(),
                },
                text: render_completion_events(&[event]),
                silent,
            },
        }
    }

    /// Starts a child's run in `state` (the child's session): records how it was started
    /// and returns its first message. A redelivered start does nothing.
    pub(super) fn start_subagent(
        &self,
        state: &mut SessionState,
        start: &SubagentStart,
        now_ms: u64,
    ) -> Option<Incoming> {
        if let Some(run) = &state.meta.subagent {
            if run.start.run_id == start.run_id {
                tracing::info!(session = %state.key, run_id = %start.run_id, "sub-agent start redelivered");
                return None;
            }
            if run.status != "steered" {
                tracing::warn!(session = %state.key, run_id = %start.run_id, "a sub-agent session started twice with different runs; ignored");
                return None;
            }
            // Steered: the new run takes over the session (the old one stopped).
            state.meta.turn_open = false;
            state.meta.follow_ups.clear();
        }
        state.meta.subagent = Some(SubagentRun {
            start: start.clone(),
            started_at_ms: now_ms,
            ended_at_ms: None,
            status: "running".to_owned(),
            announced: false,
            archived: false,
        });
        if let Some(model) = start.model.clone().filter(|model| !model.trim().is_empty()) {
            state.meta.model_override = Some(model);
        }
        state.touch_meta();
        let message = InboundMessage {
            message_id: format!("subagent:{}", start.run_id),
            chat: ChatRef {
                channel: SUBAGENT_CHANNEL.to_owned(),
                chat_id: start.parent_key.clone(),
                chat_type: ChatType::Direct,
            },
            sender_id: SUBAGENT_SENDER_ID.to_owned(),
            text: start.first_message.clone(),
            sender_is_owner: false,
        };
        let mut prepared = PreparedMessage::plain(message);
        // Its final answer is its result, for the parent: nothing is sent to any chat.
        prepared.heartbeat_delivery = Some(to_no_chat());
        Some(Incoming::Message(Box::new(prepared)))
    }

    /// When `state` is a child whose run has ended and whose result is not yet on its
    /// parent's queue: queues the announce, then records it (the caller commits). True when
    /// the meta changed.
    pub(super) async fn announce_if_done(
        &self,
        state: &mut SessionState,
    ) -> Result<bool, TurnError> {
        let Some(run) = state.meta.subagent.clone() else {
            return Ok(false);
        };
        if run.announced
            || run.status == "killed"
            || run.status == "steered"
            || state.meta.turn_open
            || !state.meta.follow_ups.is_empty()
        {
            return Ok(false);
        }
        let Some(queue) = &self.subagent_queue else {
            return Ok(false);
        };
        // An orchestrator whose own children still run waits for them (spec §3.5): each of
        // their announces is a turn here, and the announce goes up once the last has settled.
        if run.status == "running"
            && state
                .meta
                .children
                .iter()
                .any(|child| child.status == "running")
        {
            tracing::info!(session = %state.key, "sub-agent's announce waits for its own children");
            return Ok(false);
        }
        let now = self.deps.clock.now_ms();
        let mut result = child_result(state);
        if run.status == "timeout" {
            result.status = "timeout".to_owned();
        }
        let event = self.announce_event(state, &run, &result, now);
        crate::ingress::enqueue(queue.as_ref(), &event).await?;
        tracing::info!(child = %state.key, parent = %run.start.parent_key, run_id = %run.start.run_id, status = %result.status, "sub-agent result announced to its parent");
        if let Some(run) = state.meta.subagent.as_mut() {
            run.announced = true;
            run.archived = run.start.archive_when_announced;
            run.ended_at_ms = Some(now);
            run.status = match result.status.as_str() {
                "ok" => "done".to_owned(),
                other => other.to_owned(),
            };
        }
        state.touch_meta();
        Ok(true)
    }

    /// Takes a child's announce in the parent's session: the child's record is updated, and
    /// unless the result was silent the announce becomes a turn. A redelivery does nothing.
    pub(super) fn take_announce(
        &self,
        state: &mut SessionState,
        announce: AnnounceFacts<'_>,
        now_ms: u64,
    ) -> Option<Incoming> {
        if state.has_seen_message(announce.announce_id) {
            tracing::info!(session = %state.key, announce = announce.announce_id, "announce already taken");
            return None;
        }
        if let Some(child) = state
            .meta
            .children
            .iter_mut()
            .find(|child| child.run_id == announce.run_id)
        {
            child.status = announce.status.to_owned();
            child.ended_at_ms = Some(now_ms);
        }
        state.touch_meta();
        if announce.silent {
            state.remember_message_id(announce.announce_id);
            return None;
        }
        let chat = state.meta.chat.clone().unwrap_or_else(|| ChatRef {
            channel: SUBAGENT_CHANNEL.to_owned(),
            chat_id: state.key.to_string(),
            chat_type: ChatType::Direct,
        });
        let message = InboundMessage {
            message_id: announce.announce_id.to_owned(),
            chat,
            sender_id: SUBAGENT_SENDER_ID.to_owned(),
            text: announce.text.to_owned(),
            sender_is_owner: state.meta.sender_is_owner,
        };
        let mut prepared = PreparedMessage::plain(message);
        if state.meta.subagent.is_some() {
            // An orchestrator's turn on its child's result is internal: what it says becomes
            // its own result, announced once its last child has settled.
            prepared.heartbeat_delivery = Some(to_no_chat());
        }
        Some(Incoming::Message(Box::new(prepared)))
    }
}

/// The reply rules of a turn whose answer goes to no chat (a sub-agent's, an
/// agent-to-agent step's): its final text stays in the transcript, for whoever reads it.
pub(super) fn to_no_chat() -> HeartbeatDelivery {
    HeartbeatDelivery {
        slot_ms: None,
        ack_max_chars: 0,
        show_ok: false,
        show_alerts: false,
        target: AlertTarget::TargetNone,
        cron_run: true,
    }
}

/// A child's announce as its event carries it.
#[derive(Debug, Clone, Copy)]
pub(super) struct AnnounceFacts<'a> {
    pub announce_id: &'a str,
    pub run_id: &'a str,
    pub status: &'a str,
    pub text: &'a str,
    pub silent: bool,
}

/// How the child's run ended, from its transcript: an error when its model failed, the
/// latest visible assistant text as its result. Turns answering another session's
/// `sessions_send` are not the run's: their answers went to that session.
fn child_result(state: &SessionState) -> ChildResult {
    let mut result = ChildResult {
        status: "ok".to_owned(),
        ..ChildResult::default()
    };
    let mut agent_to_agent_turn = false;
    for step in &state.steps {
        if let StepBody::Inbound { sender_id, .. } = &step.body {
            agent_to_agent_turn = sender_id == clawless_core::subagents::A2A_SENDER_ID;
        }
        if agent_to_agent_turn {
            continue;
        }
        match &step.body {
            StepBody::Assistant { content, usage, .. } => {
                result.tokens_in += usage.input_tokens;
                result.tokens_out += usage.output_tokens;
                let text = assistant_text(content);
                if !text.trim().is_empty() {
                    result.text = Some(text.trim().to_owned());
                }
            }
            StepBody::HeartbeatOutcome { status, reason } if status == "failed" => {
                result.status = "error".to_owned();
                result.error = reason.clone();
                result.text = None;
            }
            _ => {}
        }
    }
    result
}

/// `sessions_spawn`'s answer when the child could not be set up (its files written, its start
/// queued): `{status:"error", error:"Failed to register subagent run: <err>"}`.
fn registration_failed(err: &dyn std::fmt::Display) -> ToolOutput {
    let refusal = SpawnRefusal::Error(format!("Failed to register subagent run: {err}"));
    ToolOutput::error(refusal.to_json().to_string())
}

/// The event that takes `event`'s child start to its session.
pub(super) fn start_event(start: SubagentStart, child_key: &str, agent_id: &str) -> SessionEvent {
    SessionEvent {
        session_key: child_key.to_owned(),
        agent_id: agent_id.to_owned(),
        event: TurnEvent::SubagentStart(Box::new(start)),
    }
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

/// How `child` looks to the `subagents` tool.
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

/// The timer of `start`'s time limit, if it has one.
pub(super) fn timeout_timer(
    start: &SubagentStart,
    child_key: &str,
    agent_id: &str,
    now_ms: u64,
) -> Option<clawless_core::nodes::Timer> {
    let timeout = start.timeout_ms.filter(|timeout| *timeout > 0)?;
    Some(clawless_core::nodes::Timer {
        timer_id: format!("subagent-timeout:{}", start.run_id),
        due_at_ms: now_ms.saturating_add(timeout),
        event: SessionEvent {
            session_key: child_key.to_owned(),
            agent_id: agent_id.to_owned(),
            event: TurnEvent::SubagentTimeout {
                run_id: start.run_id.clone(),
            },
        },
    })
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
