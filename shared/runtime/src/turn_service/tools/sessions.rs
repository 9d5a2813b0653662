//! The session tools (spec `openclaw-automation.md` §3.7–§3.9): `agents_list`,
//! `sessions_list`, `sessions_history` and `sessions_yield` (which ends the turn), each a
//! struct over the [`SessionDirectory`], which also finds and checks the target of
//! `sessions_send` (`sessions_send.rs`).
//!
//! - **What a session sees** follows `tools.sessions.visibility` (default `tree`): itself
//!   and the sub-agents it spawned, found by walking the `children` its meta records (and
//!   theirs, transitively); `agent` and `all` need a session listing (the service's
//!   [`SessionLister`]), without which they see the tree too. Every session passes the
//!   core's [`check_visibility`], so other agents' sessions also need
//!   `tools.agentToAgent`.
//! - **Registered** when the service has what they need: `agents_list` and `sessions_yield`
//!   with sub-agents (`agents_list` names the agents `sessions_spawn` may run as), the list
//!   and history tools with sub-agents or a session listing; always offered within the tool
//!   policy, which keeps `agents_list` from sub-agents and the list and history tools from
//!   leaf sub-agents.
//! - **Archived** sub-agents (after `archiveAfterMinutes`) are no longer listed, but their
//!   history stays readable.
//! - **Reads only**: nothing here writes a session. A session is read as its live part (the
//!   steps since its latest reset or compaction), the caller's own from the turn in memory.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use clawless_base::model::{ModelProvider, ToolSpec};
use clawless_core::session::{SessionKey, SessionLister, SessionStore};
use clawless_core::subagents::config::{AgentToAgentConfig, SessionVisibility};
use clawless_core::subagents::control::{ConfiguredAgent, agents_list_json, agents_list_tool_spec};
use clawless_core::subagents::sessions_tools::{
    ListRequest, SendTarget, SessionAction, SessionKind, check_visibility, history_message_json,
    history_page, no_session_with_label, parse_history_call, parse_list_call,
    resolve_session_alias, sessions_history_tool_spec, sessions_list_tool_spec,
    sessions_yield_tool_spec, yield_json,
};
use clawless_core::tools::ToolOutput;
use clawless_core::turn::state::{SessionMeta, SessionState};
use serde_json::{Value, json};

use async_trait::async_trait;

use super::{RuntimeTool, ToolCallContext, ToolOutcome};
use crate::config::ClawlessConfig;
use crate::skills_service::SkillsService;
use crate::turn_service::subagents::subagents_config;
use crate::turn_service::{TurnError, TurnService};
use clawless_base::clock::Clock;

/// The most sessions one call reads while walking a spawned tree.
const MAX_TREE_SESSIONS: usize = 200;

/// A session a tool looked at: its key and meta, and its live transcript when read.
struct Seen {
    meta: SessionMeta,
    state: Option<SessionState>,
}

/// The sessions as the session tools read them: the store, the listing when there is one,
/// the config (visibility, agent-to-agent rules, agents), time and the default model.
pub(crate) struct SessionDirectory {
    skills: Arc<SkillsService>,
    sessions: Arc<dyn SessionStore>,
    lister: Option<Arc<dyn SessionLister>>,
    clock: Arc<dyn Clock>,
    model: Arc<dyn ModelProvider>,
}

impl SessionDirectory {
    /// The directory over `service`'s ports.
    pub(crate) fn of(service: &TurnService) -> Self {
        Self {
            skills: Arc::clone(&service.deps.skills),
            sessions: Arc::clone(&service.deps.sessions),
            lister: service.session_lister.clone(),
            clock: Arc::clone(&service.deps.clock),
            model: Arc::clone(&service.deps.model),
        }
    }

    pub(super) fn config(&self) -> &ClawlessConfig {
        self.skills.config()
    }

    pub(super) fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }
}

/// A tool's JSON answer (or refusal) as its output.
fn answered(answer: Result<Value, Value>) -> Result<ToolOutcome, TurnError> {
    Ok(ToolOutcome::Done(match answer {
        Ok(answer) => ToolOutput::ok(answer.to_string()),
        Err(refusal) => ToolOutput::error(refusal.to_string()),
    }))
}

/// `agents_list`: the agents `sessions_spawn` may run as.
pub(super) struct AgentsListTool {
    directory: Arc<SessionDirectory>,
}

impl AgentsListTool {
    pub(super) fn new(directory: Arc<SessionDirectory>) -> Self {
        Self { directory }
    }
}

#[async_trait]
impl RuntimeTool for AgentsListTool {
    fn spec(&self) -> ToolSpec {
        agents_list_tool_spec()
    }

    fn deferred(&self) -> bool {
        true
    }

    async fn call(&self, context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError> {
        answered(Ok(self.directory.agents_list(context.state)))
    }
}

/// `sessions_list`: the sessions the caller sees.
pub(super) struct SessionsListTool {
    directory: Arc<SessionDirectory>,
}

impl SessionsListTool {
    pub(super) fn new(directory: Arc<SessionDirectory>) -> Self {
        Self { directory }
    }
}

#[async_trait]
impl RuntimeTool for SessionsListTool {
    fn spec(&self) -> ToolSpec {
        sessions_list_tool_spec()
    }

    fn deferred(&self) -> bool {
        true
    }

    async fn call(&self, context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError> {
        answered(
            self.directory
                .sessions_list(&context.call.input, context.state)
                .await,
        )
    }
}

/// `sessions_history`: one visible session's latest messages.
pub(super) struct SessionsHistoryTool {
    directory: Arc<SessionDirectory>,
}

impl SessionsHistoryTool {
    pub(super) fn new(directory: Arc<SessionDirectory>) -> Self {
        Self { directory }
    }
}

#[async_trait]
impl RuntimeTool for SessionsHistoryTool {
    fn spec(&self) -> ToolSpec {
        sessions_history_tool_spec()
    }

    fn deferred(&self) -> bool {
        true
    }

    async fn call(&self, context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError> {
        answered(
            self.directory
                .sessions_history(&context.call.input, context.state)
                .await,
        )
    }
}

/// `sessions_yield`: ends the turn (the engine calls the model no more after its result),
/// so the children's results arrive as the next messages.
pub(super) struct SessionsYieldTool;

#[async_trait]
impl RuntimeTool for SessionsYieldTool {
    fn spec(&self) -> ToolSpec {
        sessions_yield_tool_spec()
    }

    fn deferred(&self) -> bool {
        true
    }

    async fn call(&self, context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError> {
        answered(Ok(yield_json(&context.call.input)))
    }
}

impl SessionDirectory {
    /// `agents_list`: the caller's agent first, then the agents its sub-agents may run as.
    fn agents_list(&self, state: &SessionState) -> Value {
        let config = self.config();
        let agent_id = &state.meta.agent_id;
        let configured: Vec<ConfiguredAgent> = config
            .agents()
            .into_iter()
            .map(|agent| ConfiguredAgent {
                id: agent.id,
                name: None,
            })
            .collect();
        agents_list_json(
            agent_id,
            &subagents_config(self.config(), agent_id),
            &configured,
        )
    }

    /// `sessions_list`: the sessions the caller sees, most recently active first.
    async fn sessions_list(&self, args: &Value, state: &SessionState) -> Result<Value, Value> {
        let request = parse_list_call(args);
        let visibility = crate::turn_service::sandbox::session_visibility(self.config(), state);
        let a2a = self.config().tools.agent_to_agent();
        let caller = state.key.as_str();
        let mut seen = self
            .candidates(state, visibility)
            .await
            .map_err(store_error)?;
        let tree: BTreeSet<String> = self.tree_keys(state, &seen);
        // An archived sub-agent is no longer listed; its history stays readable.
        seen.retain(|key, session| {
            visible(SessionAction::List, visibility, caller, key, &tree, &a2a).is_ok()
                && !session
                    .meta
                    .subagent
                    .as_ref()
                    .is_some_and(|run| run.archived)
        });
        let visible_keys: BTreeSet<String> = seen.keys().cloned().collect();
        let now = self.clock.now_ms();
        let mut rows: Vec<(&String, &Seen)> = seen
            .iter()
            .filter(|(key, session)| wanted(&request, key, &session.meta, now))
            .collect();
        rows.sort_by(|(a_key, a), (b_key, b)| {
            b.meta
                .updated_at_ms
                .cmp(&a.meta.updated_at_ms)
                .then_with(|| a_key.cmp(b_key))
        });
        if let Some(limit) = request.limit.and_then(|limit| usize::try_from(limit).ok()) {
            rows.truncate(limit);
        }
        let mut sessions = Vec::with_capacity(rows.len());
        for (key, session) in rows {
            let mut row = self.session_row(key, &session.meta, &visible_keys);
            if request.message_limit > 0 {
                let messages = match &session.state {
                    Some(state) => last_messages(state, request.message_limit),
                    None if key == caller => last_messages(state, request.message_limit),
                    None => match self.load(key).await.map_err(store_error)? {
                        Some(state) => last_messages(&state, request.message_limit),
                        None => Vec::new(),
                    },
                };
                row["messages"] = Value::Array(messages);
            }
            sessions.push(row);
        }
        Ok(json!({"count": sessions.len(), "sessions": sessions}))
    }

    /// `sessions_history`: the latest messages of one session the caller sees, capped.
    async fn sessions_history(&self, args: &Value, state: &SessionState) -> Result<Value, Value> {
        let request = parse_history_call(args).map_err(|error| error_json(&error))?;
        let visibility = crate::turn_service::sandbox::session_visibility(self.config(), state);
        let a2a = self.config().tools.agent_to_agent();
        let caller = state.key.as_str();
        let given = request.session_key.trim();
        let wanted_key = resolve_session_alias(given, &state.meta.agent_id);
        let mut tree = if visibility == SessionVisibility::SelfOnly {
            BTreeMap::new()
        } else {
            self.spawned_tree(state).await.map_err(store_error)?
        };
        // A key, or a session id: the caller's, a tree member's, or (with a listing, when
        // other sessions are visible at all) any session's.
        let target = if wanted_key == caller || given == state.meta.session_id {
            caller.to_owned()
        } else if tree.contains_key(&wanted_key) {
            wanted_key.clone()
        } else if let Some((key, _)) = tree
            .iter()
            .find(|(_, session)| session.meta.session_id == given)
        {
            key.clone()
        } else if SessionKey::parse(&wanted_key).is_some() {
            wanted_key.clone()
        } else {
            self.key_of_session_id(given, visibility)
                .await
                .map_err(store_error)?
                .ok_or_else(|| error_json(&format!("Session not found: {given}")))?
        };
        let tree_keys: BTreeSet<String> = tree.keys().cloned().collect();
        visible(
            SessionAction::History,
            visibility,
            caller,
            &target,
            &tree_keys,
            &a2a,
        )
        .map_err(|error| json!({"status": "forbidden", "error": error}))?;
        let loaded;
        let session: &SessionState = if target == caller {
            state
        } else if let Some(state) = tree.remove(&target).and_then(|seen| seen.state) {
            loaded = state;
            &loaded
        } else {
            loaded = self
                .load(&target)
                .await
                .map_err(store_error)?
                .ok_or_else(|| error_json(&format!("Session not found: {target}")))?;
            &loaded
        };
        let messages: Vec<Value> = session
            .messages()
            .iter()
            .map(history_message_json)
            .collect();
        let page = history_page(messages, request.limit, request.include_tools);
        Ok(page.to_json(&target))
    }

    /// The session a `sessions_send` goes to (by key or label) with its meta, once it passes
    /// the visibility check; the refusal as the tool's answer otherwise. A session cannot
    /// send to itself.
    pub(super) async fn send_target(
        &self, target: &SendTarget, state: &SessionState,
    ) -> Result<(String, SessionMeta), Value> {
        let visibility = crate::turn_service::sandbox::session_visibility(self.config(), state);
        let a2a = self.config().tools.agent_to_agent();
        let caller = state.key.as_str();
        let (key, meta, tree) = match target {
            SendTarget::Key(given) => {
                let key = resolve_session_alias(given, &state.meta.agent_id);
                let tree = if visibility == SessionVisibility::SelfOnly || key == caller {
                    BTreeMap::new()
                } else {
                    self.spawned_tree(state).await.map_err(store_error)?
                };
                let meta = match tree.get(&key) {
                    Some(seen) => Some(seen.meta.clone()),
                    None if key == caller => Some(state.meta.clone()),
                    None => self
                        .load(&key)
                        .await
                        .map_err(store_error)?
                        .map(|loaded| loaded.meta),
                };
                let tree: BTreeSet<String> = tree.keys().cloned().collect();
                let meta = meta.ok_or_else(|| error_json(&format!("Session not found: {key}")))?;
                (key, meta, tree)
            }
            SendTarget::Label { label, agent_id } => {
                let seen = self
                    .candidates(state, visibility)
                    .await
                    .map_err(store_error)?;
                let tree = self.tree_keys(state, &seen);
                let agent_id = agent_id.as_deref().unwrap_or(&state.meta.agent_id);
                let found = seen.into_iter().find(|(key, session)| {
                    let labelled = session
                        .meta
                        .subagent
                        .as_ref()
                        .and_then(|run| run.start.label.as_deref())
                        .is_some_and(|own| own.trim().eq_ignore_ascii_case(label.trim()));
                    labelled
                        && clawless_core::subagents::agent_id_of_key(key)
                            .is_some_and(|id| id.eq_ignore_ascii_case(agent_id))
                });
                let (key, session) =
                    found.ok_or_else(|| error_json(&no_session_with_label(label)))?;
                (key, session.meta, tree)
            }
        };
        visible(SessionAction::Send, visibility, caller, &key, &tree, &a2a)
            .map_err(|error| json!({"status": "forbidden", "error": error}))?;
        if key == caller {
            return Err(error_json(
                "sessions_send cannot target the calling session: answer in this turn instead.",
            ));
        }
        Ok((key, meta))
    }

    /// The sessions `sessions_list` considers before the visibility check: the caller, the
    /// tree it spawned, and under `agent`/`all` every listed session.
    async fn candidates(
        &self, state: &SessionState, visibility: SessionVisibility,
    ) -> Result<BTreeMap<String, Seen>, TurnError> {
        let mut seen = match visibility {
            SessionVisibility::SelfOnly => BTreeMap::new(),
            _ => self.spawned_tree(state).await?,
        };
        if matches!(
            visibility,
            SessionVisibility::Agent | SessionVisibility::All
        ) {
            match &self.lister {
                Some(lister) => {
                    for summary in lister.list_sessions().await? {
                        let key = summary.key.to_string();
                        if seen.contains_key(&key) || key == state.key.as_str() {
                            continue;
                        }
                        // A meta too large for one record was offloaded: a load brings it.
                        let meta = match serde_json::from_str::<SessionMeta>(&summary.meta) {
                            Ok(meta) => Some(Seen { meta, state: None }),
                            Err(_) => self.load(&key).await?.map(|state| Seen {
                                meta: state.meta.clone(),
                                state: Some(state),
                            }),
                        };
                        if let Some(session) = meta {
                            seen.insert(key, session);
                        }
                    }
                }
                None => {
                    tracing::debug!(session = %state.key, "no session listing here: sessions_list sees the spawned tree");
                }
            }
        }
        seen.insert(
            state.key.to_string(),
            Seen {
                meta: state.meta.clone(),
                state: None,
            },
        );
        Ok(seen)
    }

    /// The sub-agent sessions `state` spawned, transitively, read through the `children`
    /// each meta records (a child whose start has not run yet has no session and is left
    /// out). At most [`MAX_TREE_SESSIONS`] are read.
    async fn spawned_tree(
        &self, state: &SessionState,
    ) -> Result<BTreeMap<String, Seen>, TurnError> {
        let mut tree = BTreeMap::new();
        let mut next: VecDeque<(String, String)> = state
            .meta
            .children
            .iter()
            .map(|child| (child.child_key.clone(), state.key.to_string()))
            .collect();
        while let Some((key, parent)) = next.pop_front() {
            if tree.len() >= MAX_TREE_SESSIONS {
                tracing::warn!(session = %state.key, "spawned tree cut at {MAX_TREE_SESSIONS} sessions");
                break;
            }
            if key == state.key.as_str() || tree.contains_key(&key) {
                continue;
            }
            let Some(child) = self.load(&key).await? else {
                continue;
            };
            // Only a session that names this parent as its spawner belongs to the tree.
            let spawned_by = child
                .meta
                .subagent
                .as_ref()
                .map(|run| run.start.parent_key.as_str());
            if spawned_by.is_none_or(|by| !by.eq_ignore_ascii_case(&parent)) {
                continue;
            }
            next.extend(
                child
                    .meta
                    .children
                    .iter()
                    .map(|grandchild| (grandchild.child_key.clone(), key.clone())),
            );
            tree.insert(
                key,
                Seen {
                    meta: child.meta.clone(),
                    state: Some(child),
                },
            );
        }
        Ok(tree)
    }

    /// The keys of `state`'s spawned tree among `seen` (whose sub-agents name their parent).
    fn tree_keys(&self, state: &SessionState, seen: &BTreeMap<String, Seen>) -> BTreeSet<String> {
        let mut tree = BTreeSet::new();
        let mut frontier = vec![state.key.to_string()];
        while let Some(parent) = frontier.pop() {
            for (key, session) in seen {
                let spawned_by = session
                    .meta
                    .subagent
                    .as_ref()
                    .map(|run| &run.start.parent_key);
                if spawned_by.is_some_and(|by| by.eq_ignore_ascii_case(&parent))
                    && tree.insert(key.clone())
                {
                    frontier.push(key.clone());
                }
            }
        }
        tree
    }

    /// The key of the session whose id is `session_id`, when other sessions are visible
    /// and the service can list them.
    async fn key_of_session_id(
        &self, session_id: &str, visibility: SessionVisibility,
    ) -> Result<Option<String>, TurnError> {
        let Some(lister) = &self.lister else {
            return Ok(None);
        };
        if !matches!(
            visibility,
            SessionVisibility::Agent | SessionVisibility::All
        ) {
            return Ok(None);
        }
        for summary in lister.list_sessions().await? {
            let id = match serde_json::from_str::<SessionMeta>(&summary.meta) {
                Ok(meta) => meta.session_id,
                Err(_) => continue,
            };
            if id == session_id {
                return Ok(Some(summary.key.to_string()));
            }
        }
        Ok(None)
    }

    /// The live part of session `key`, if it exists.
    async fn load(&self, key: &str) -> Result<Option<SessionState>, TurnError> {
        let Some(parsed) = SessionKey::parse(key) else {
            return Ok(None);
        };
        match self.sessions.load_live(&parsed).await? {
            Some(stored) => Ok(Some(SessionState::from_stored(parsed, &stored)?)),
            None => Ok(None),
        }
    }

    /// One `sessions_list` row.
    fn session_row(&self, key: &str, meta: &SessionMeta, visible: &BTreeSet<String>) -> Value {
        let run = meta.subagent.as_ref();
        let mut row = json!({
            "key": key,
            "kind": SessionKind::of_key(key),
            "channel": channel_of(meta),
            "updatedAt": meta.updated_at_ms,
            "sessionId": meta.session_id,
            "model": meta
                .model_override
                .clone()
                .unwrap_or_else(|| self.model.model_ref()),
            "totalTokens": meta.tokens_in.saturating_add(meta.tokens_out),
            "status": status_of(meta),
            "startedAt": run.map_or_else(|| meta.generation_started(), |run| run.started_at_ms),
        });
        if let Some(run) = run {
            row["spawnedBy"] = json!(run.start.parent_key);
            if let Some(label) = &run.start.label {
                row["label"] = json!(label);
            }
            if let Some(ended) = run.ended_at_ms {
                row["endedAt"] = json!(ended);
                row["runtimeMs"] = json!(ended.saturating_sub(run.started_at_ms));
            }
        }
        let children: Vec<&str> = meta
            .children
            .iter()
            .map(|child| child.child_key.as_str())
            .filter(|child| visible.contains(*child))
            .collect();
        if !children.is_empty() {
            row["childSessions"] = json!(children);
        }
        row
    }
}

/// The core's visibility check over a set of tree keys.
fn visible(
    action: SessionAction, visibility: SessionVisibility, caller: &str, target: &str,
    tree: &BTreeSet<String>, a2a: &AgentToAgentConfig,
) -> Result<(), String> {
    let in_tree = |key: &str| tree.contains(key);
    check_visibility(action, visibility, caller, target, &in_tree, a2a)
}

/// Whether a session passes `sessions_list`'s `kinds` and `activeMinutes` filters.
fn wanted(request: &ListRequest, key: &str, meta: &SessionMeta, now_ms: u64) -> bool {
    let kind_ok = request.kinds.is_empty() || request.kinds.contains(&SessionKind::of_key(key));
    let active_ok = request.active_minutes.is_none_or(|minutes| {
        meta.updated_at_ms >= now_ms.saturating_sub(minutes.saturating_mul(60_000))
    });
    kind_ok && active_ok
}

/// The session's latest `limit` user and assistant messages (tool results left out), capped
/// as `sessions_history` caps them.
fn last_messages(state: &SessionState, limit: u64) -> Vec<Value> {
    let messages: Vec<Value> = state.messages().iter().map(history_message_json).collect();
    history_page(messages, Some(limit), false).messages
}

/// The channel a session talks on; `internal` for sub-agents and sessions without a chat.
pub(crate) fn channel_of(meta: &SessionMeta) -> String {
    match &meta.chat {
        Some(chat) if meta.subagent.is_none() && !chat.channel.trim().is_empty() => {
            chat.channel.clone()
        }
        _ => "internal".to_owned(),
    }
}

/// `running`, `done`, `failed`, `killed` or `timeout`: a sub-agent's run, else whether the
/// session is in a turn.
fn status_of(meta: &SessionMeta) -> &'static str {
    match &meta.subagent {
        Some(run) => match run.status.as_str() {
            "running" => "running",
            "error" => "failed",
            "killed" => "killed",
            "timeout" => "timeout",
            _ => "done",
        },
        None if meta.turn_open => "running",
        None => "done",
    }
}

/// `{status:"error", error}`.
pub(crate) fn error_json(error: &str) -> Value {
    json!({"status": "error", "error": error})
}

/// A store failure, as the tool's answer.
fn store_error(err: TurnError) -> Value {
    tracing::warn!(error = %err, "session tool could not read the sessions");
    error_json(&format!("sessions unavailable: {err}"))
}
