//! `sessions_spawn` (spec §3.1–3.3): the tool's contract with the model (name, exact
//! description, schema), reading a call into a [`SpawnRequest`] with OpenClaw's exact
//! errors, and [`plan_spawn`]: the gates a spawn must pass, in OpenClaw's order, and the
//! [`SpawnPlan`] of the child run (key, depth, role, model, timeout, cleanup, prompt, first
//! message, attachments, and the `accepted` answer).
//!
//! The runtime resolves the caller (its depth, active children) beforehand, then writes the
//! attachments into the target agent's workspace, creates the child session, starts its run
//! and registers it from the plan.
//!
//! Where clawless lacks what a parameter needs, the call is refused with a clear error rather
//! than half done: `runtime: "acp"` (no ACP harness), `thread: true` and so `mode: "session"`
//! (no channel binds threads to sub-agents) and `sandbox: "require"` (no sandboxed runtime).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::attachments::{
    MAX_ATTACHMENTS, SpawnAttachments, SpawnError, attachments_rel_dir, parse_attachments,
};
use super::config::SubagentsConfig;
use super::prompt::{ChildPrompt, child_task_message, subagent_system_prompt};
use super::{ControlScope, SubagentRole};
use clawless_base::model::ToolSpec;
use clawless_base::session_key::is_valid_agent_id;

/// The tool's name.
pub const SESSIONS_SPAWN: &str = "sessions_spawn";

/// The display label of the `sessions_*` tools.
pub const SESSIONS_TOOL_LABEL: &str = "Sessions";

/// The tool's description, as the model sees it.
pub const SESSIONS_SPAWN_DESCRIPTION: &str = r#"Spawn an isolated session with `runtime="subagent"` or `runtime="acp"`. `mode="run"` is one-shot and `mode="session"` is persistent or thread-bound. Subagents inherit the parent workspace directory automatically. Use this when the work should happen in a fresh child session instead of the current one."#;

/// Keys that ask for channel delivery, which spawning does not do.
pub const REJECTED_SPAWN_KEYS: [&str; 8] = [
    "target",
    "transport",
    "channel",
    "to",
    "threadId",
    "thread_id",
    "replyTo",
    "reply_to",
];

/// The `note` of an accepted one-shot spawn (left out for cron requesters).
pub const SPAWN_ACCEPTED_NOTE: &str = "Auto-announce is push-based. After spawning children, do NOT call sessions_list, sessions_history, exec sleep, or any polling tool. Wait for completion events to arrive as user messages, track expected child session keys, and only send your final answer after ALL expected completions arrive. If a child completion event arrives AFTER your final answer, reply ONLY with NO_REPLY.";

/// The `note` of an accepted persistent (`mode: "session"`) spawn.
pub const SESSION_MODE_NOTE: &str =
    "thread-bound session stays active after this task; continue in-thread for follow-ups.";

/// `mode: "session"` without `thread: true`.
pub const MODE_SESSION_REQUIRES_THREAD: &str =
    r#"mode="session" requires thread=true so the subagent can stay bound to a thread."#;

/// `thread: true` where no channel can bind a thread to a sub-agent (every clawless channel).
pub const THREAD_UNAVAILABLE: &str =
    "thread=true is unavailable because no channel plugin registered subagent_spawning hooks.";

/// `lightContext` with a runtime other than `subagent`.
pub const LIGHT_CONTEXT_SUBAGENT_ONLY: &str =
    "lightContext is only supported for runtime='subagent'.";

/// `runtime: "acp"`: clawless has no ACP harness.
pub const ACP_UNAVAILABLE: &str = r#"runtime="acp" is not available: clawless runs no ACP coding harness. Use runtime="subagent" (the default)."#;

/// `requireAgentId` is on and the call named no `agentId`.
pub const AGENT_ID_REQUIRED: &str = "sessions_spawn requires explicit agentId when requireAgentId is configured. Use agents_list to see allowed agent ids.";

/// `sandbox: "require"`: clawless has no sandboxed runtime to spawn into.
pub const SANDBOX_REQUIRE_UNAVAILABLE: &str = r#"sessions_spawn sandbox="require" needs a sandboxed target runtime. Pick a sandboxed agentId or use sandbox="inherit"."#;

/// The thinking levels a spawn may ask for.
pub const THINKING_LEVELS: [&str; 6] = ["off", "minimal", "low", "medium", "high", "xhigh"];

/// `sessions_spawn`'s JSON result when the child run was accepted.
pub const STATUS_ACCEPTED: &str = "accepted";

/// The tool as offered to the model.
pub fn sessions_spawn_tool_spec() -> ToolSpec {
    ToolSpec {
        name: SESSIONS_SPAWN.to_owned(),
        description: SESSIONS_SPAWN_DESCRIPTION.to_owned(),
        input_schema: sessions_spawn_schema(),
    }
}

/// The argument schema. It leaves out the parameters only ACP uses (clawless has no ACP
/// harness; [`parse_spawn_call`] still answers them with an error) and admits extra keys, so a
/// call with a channel-delivery key gets the helpful rejection instead of a schema error.
pub fn sessions_spawn_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "task": {"type": "string", "description": "What the sub-agent should do, with everything it needs to know."},
            "label": {"type": "string", "description": "A short name for the run, shown in lists and in its completion."},
            "runtime": {"type": "string", "enum": ["subagent", "acp"], "description": "subagent (the default; acp is not available here)."},
            "agentId": {"type": "string", "description": "The agent to run as (see agents_list). Default: your own."},
            "model": {"type": "string", "description": "Model of the sub-agent (provider/model). Default: configured, else yours."},
            "thinking": {"type": "string", "description": "Thinking level: off, minimal, low, medium, high or xhigh."},
            "runTimeoutSeconds": {"type": "number", "minimum": 0, "description": "Stop the run after this many seconds (0: no limit)."},
            "thread": {"type": "boolean", "description": "Bind the sub-agent to a chat thread (needs a channel that supports it)."},
            "mode": {"type": "string", "enum": ["run", "session"], "description": "run: one-shot (default); session: persistent, needs thread=true."},
            "cleanup": {"type": "string", "enum": ["delete", "keep"], "description": "delete: the sub-agent's session is archived (no longer listed) as soon as it reports; keep (default): archived later."},
            "sandbox": {"type": "string", "enum": ["inherit", "require"], "description": "inherit (default) or require a sandboxed runtime."},
            "lightContext": {"type": "boolean", "description": "Start the sub-agent with a lighter context (fewer workspace files)."},
            "attachments": {
                "type": "array",
                "maxItems": MAX_ATTACHMENTS,
                "description": "Files for the sub-agent, written to attachments/<child id>/ in its workspace (at most 50, 1 MiB each, 5 MiB in all).",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "description": "A plain file name (no directories)."},
                        "content": {"type": "string", "description": "The file's content, as text or base64."},
                        "encoding": {"type": "string", "enum": ["utf8", "base64"], "description": "How content is encoded (default utf8)."},
                        "mimeType": {"type": "string", "description": "The file's media type, if known."}
                    },
                    "required": ["name", "content"]
                }
            },
            "attachAs": {
                "type": "object",
                "description": "How the sub-agent should see the attachments.",
                "properties": {
                    "mountPath": {"type": "string", "description": "A path hint passed on to the sub-agent (letters, digits, . _ - / : only)."}
                }
            }
        },
        "required": ["task"],
        "additionalProperties": true
    })
}

/// How long a child session lives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpawnMode {
    /// One task, then it reports and ends.
    #[default]
    Run,
    /// Stays open for follow-ups in a bound thread (not reachable in clawless yet).
    Session,
}

impl SpawnMode {
    /// `run` or `session`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Run => "run",
            Self::Session => "session",
        }
    }
}

/// What happens to a finished child's session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpawnCleanup {
    /// Gone right after the announce: OpenClaw deletes the session and its transcript;
    /// clawless archives it then (unlisted, its transcript still readable), losing nothing.
    Delete,
    /// Kept, and archived after `archiveAfterMinutes`.
    #[default]
    Keep,
}

/// Whether the child must run sandboxed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpawnSandbox {
    /// Whatever the target agent runs with.
    #[default]
    Inherit,
    /// Only a sandboxed target runtime.
    Require,
}

/// A `sessions_spawn` call, read and checked for shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnRequest {
    /// The task, trimmed.
    pub task: String,
    /// The label, trimmed, if any.
    pub label: Option<String>,
    /// The requested agent, lowercased, if any.
    pub agent_id: Option<String>,
    /// The requested model, if any.
    pub model: Option<String>,
    /// The requested thinking level, lowercased and known, if any.
    pub thinking: Option<String>,
    /// `runTimeoutSeconds` (or its alias `timeoutSeconds`), whole seconds, if given.
    pub run_timeout_seconds: Option<u64>,
    /// `thread: true`.
    pub thread: bool,
    /// The mode (`session` when `thread` is set and `mode` is not).
    pub mode: SpawnMode,
    /// The cleanup.
    pub cleanup: SpawnCleanup,
    /// The sandbox requirement.
    pub sandbox: SpawnSandbox,
    /// `lightContext: true`.
    pub light_context: bool,
    /// Whether the completion should be turned into a user-facing message (hidden parameter
    /// `expectsCompletionMessage`, default true).
    pub expects_completion_message: bool,
    /// The files to put in the child's workspace (`attachments`, `attachAs`), if any.
    pub attachments: Option<SpawnAttachments>,
}

/// A spawn the caller may not make (`forbidden`) or that cannot be made (`error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpawnRefusal {
    /// A gate said no: `{status:"forbidden", error}`.
    #[error("{0}")]
    Forbidden(String),
    /// Something the spawn needs is missing: `{status:"error", error}`.
    #[error("{0}")]
    Error(String),
}

impl SpawnRefusal {
    /// `forbidden` or `error`.
    pub fn status(&self) -> &'static str {
        match self {
            Self::Forbidden(_) => "forbidden",
            Self::Error(_) => "error",
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        match self {
            Self::Forbidden(message) | Self::Error(message) => message,
        }
    }

    /// The tool result.
    pub fn to_json(&self) -> Value {
        json!({"status": self.status(), "error": self.message()})
    }
}

impl From<SpawnError> for SpawnRefusal {
    fn from(error: SpawnError) -> Self {
        Self::Error(error.message().to_owned())
    }
}

/// Reads a `sessions_spawn` call. Checks, in order: channel-delivery keys
/// (`sessions_spawn does not support "<key>". …`), `task`, the runtime (`lightContext` and
/// ACP), `streamTo`, attachments ([`parse_attachments`]), `agentId` (`Invalid agentId
/// "<id>". …`; valid ids are lowercased), `thinking`, then `mode`/`thread`, `cleanup` and
/// `sandbox`.
pub fn parse_spawn_call(args: &Value) -> Result<SpawnRequest, SpawnError> {
    let empty = Map::new();
    let args = args.as_object().unwrap_or(&empty);
    if let Some(key) = REJECTED_SPAWN_KEYS
        .iter()
        .find(|key| args.get(**key).is_some_and(|value| !value.is_null()))
    {
        return Err(SpawnError::new(format!(
            r#"sessions_spawn does not support "{key}". Use "message" or "sessions_send" for channel delivery."#
        )));
    }
    let task = string_arg(args, "task").ok_or_else(|| SpawnError::new("task required"))?;
    let light_context = bool_arg(args, "lightContext");
    let runtime = string_arg(args, "runtime")
        .map(|runtime| runtime.to_ascii_lowercase())
        .unwrap_or_else(|| "subagent".to_owned());
    match runtime.as_str() {
        "subagent" => {}
        "acp" if light_context => return Err(SpawnError::new(LIGHT_CONTEXT_SUBAGENT_ONLY)),
        "acp" => return Err(SpawnError::new(ACP_UNAVAILABLE)),
        other => {
            return Err(SpawnError::new(format!(
                r#"Invalid runtime "{other}". Use runtime="subagent"."#
            )));
        }
    }
    if string_arg(args, "streamTo").is_some() {
        return Err(SpawnError::new(
            "streamTo is only supported for runtime=acp; got runtime=subagent",
        ));
    }
    let attachments = parse_attachments(args)?;
    let agent_id = match string_arg(args, "agentId") {
        None => None,
        Some(id) if is_valid_agent_id(&id) => Some(id.to_ascii_lowercase()),
        Some(id) => {
            return Err(SpawnError::new(format!(
                "Invalid agentId \"{id}\". Agent IDs must match [a-z0-9][a-z0-9_-]{{0,63}}. Use agents_list to discover valid targets."
            )));
        }
    };
    let thinking = string_arg(args, "thinking")
        .map(|level| normalize_thinking(&level))
        .transpose()?;
    let thread = bool_arg(args, "thread");
    let mode = match string_arg(args, "mode").map(|mode| mode.to_ascii_lowercase()) {
        None if thread => SpawnMode::Session,
        None => SpawnMode::Run,
        Some(mode) if mode == "run" => SpawnMode::Run,
        Some(mode) if mode == "session" => SpawnMode::Session,
        Some(other) => {
            return Err(SpawnError::new(format!(
                r#"Invalid mode "{other}". Use mode="run" or mode="session"."#
            )));
        }
    };
    if mode == SpawnMode::Session && !thread {
        return Err(SpawnError::new(MODE_SESSION_REQUIRES_THREAD));
    }
    let cleanup = match string_arg(args, "cleanup").map(|value| value.to_ascii_lowercase()) {
        None => SpawnCleanup::Keep,
        Some(value) if value == "keep" => SpawnCleanup::Keep,
        Some(value) if value == "delete" => SpawnCleanup::Delete,
        Some(other) => {
            return Err(SpawnError::new(format!(
                r#"Invalid cleanup "{other}". Use cleanup="delete" or cleanup="keep"."#
            )));
        }
    };
    let sandbox = match string_arg(args, "sandbox").map(|value| value.to_ascii_lowercase()) {
        None => SpawnSandbox::Inherit,
        Some(value) if value == "inherit" => SpawnSandbox::Inherit,
        Some(value) if value == "require" => SpawnSandbox::Require,
        Some(other) => {
            return Err(SpawnError::new(format!(
                r#"Invalid sandbox "{other}". Use sandbox="inherit" or sandbox="require"."#
            )));
        }
    };
    Ok(SpawnRequest {
        task,
        label: string_arg(args, "label"),
        agent_id,
        model: string_arg(args, "model"),
        thinking,
        run_timeout_seconds: seconds_arg(args.get("runTimeoutSeconds"))
            .or_else(|| seconds_arg(args.get("timeoutSeconds"))),
        thread,
        mode,
        cleanup,
        sandbox,
        light_context,
        expects_completion_message: args
            .get("expectsCompletionMessage")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        attachments,
    })
}

/// A known thinking level, lowercased, or OpenClaw's error listing the levels.
pub fn normalize_thinking(level: &str) -> Result<String, SpawnError> {
    let lowered = level.trim().to_ascii_lowercase();
    if THINKING_LEVELS.contains(&lowered.as_str()) {
        Ok(lowered)
    } else {
        Err(SpawnError::new(format!(
            "Invalid thinking level \"{}\". Use one of: {}.",
            level.trim(),
            THINKING_LEVELS.join(", ")
        )))
    }
}

/// What the runtime knows about the session calling `sessions_spawn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallerFacts<'a> {
    /// The caller's session key (aliases such as `main` already resolved).
    pub session_key: &'a str,
    /// The caller's agent.
    pub agent_id: &'a str,
    /// The caller's sub-agent depth: stored with the session, else from the `spawnedBy`
    /// chain, else [`super::caller_depth`] of its key.
    pub depth: u32,
    /// The caller's children that are running or still have running descendants.
    pub active_children: u32,
    /// Whether the caller is a cron run's session (its spawns get no polling note).
    pub is_cron: bool,
}

/// How many children of one session with the same task may fail in a row before that task
/// is refused (clawless's breaker for OpenClaw's runaway re-spawning, issue #65817).
pub const MAX_FAILED_SAME_TASK: usize = 3;

/// How many children of one session may fail in a row, whatever their tasks, before the
/// session may spawn no more until one succeeds or a person steps in.
pub const MAX_FAILED_IN_A_ROW: usize = 5;

/// One earlier child of the caller, for the failure breaker: its task and whether its run
/// failed (error or timeout). Oldest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PastChild<'a> {
    /// Its task.
    pub task: &'a str,
    /// Its run ended in an error or a timeout.
    pub failed: bool,
}

/// The failure breaker, clawless's own: OpenClaw lets a parent re-spawn a failing child
/// forever. `task` is refused when its last [`MAX_FAILED_SAME_TASK`] runs in this session
/// all failed, and any spawn when the session's last [`MAX_FAILED_IN_A_ROW`] children did.
/// A child that succeeded (or still runs) resets the count.
pub fn check_failure_breaker(history: &[PastChild<'_>], task: &str) -> Result<(), SpawnRefusal> {
    let same = |child: &&PastChild<'_>| child.task.trim().eq_ignore_ascii_case(task.trim());
    let failed_same = history
        .iter()
        .rev()
        .filter(same)
        .take_while(|child| child.failed)
        .count();
    if failed_same >= MAX_FAILED_SAME_TASK {
        return Err(SpawnRefusal::Forbidden(format!(
            "sessions_spawn refused: the last {failed_same} sub-agents given this task failed. Fix what makes it fail, or tell the user, instead of spawning it again."
        )));
    }
    let failed_in_a_row = history
        .iter()
        .rev()
        .take_while(|child| child.failed)
        .count();
    if failed_in_a_row >= MAX_FAILED_IN_A_ROW {
        return Err(SpawnRefusal::Forbidden(format!(
            "sessions_spawn refused: the last {failed_in_a_row} sub-agents of this session failed. Tell the user what went wrong instead of spawning more."
        )));
    }
    Ok(())
}

/// A spawn that passed every gate: what the runtime creates, starts and registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnPlan {
    /// `agent:<targetAgentId>:subagent:<uuid>`.
    pub child_session_key: String,
    /// The agent the child runs as.
    pub target_agent_id: String,
    /// The session that spawned it (its `spawnedBy`, the announce's requester and the
    /// runs' controller).
    pub requester_session_key: String,
    /// Whether the requester is a cron run's session.
    pub requester_is_cron: bool,
    /// The child's `spawnDepth`: the caller's plus one.
    pub depth: u32,
    /// `maxSpawnDepth` at spawn time.
    pub max_spawn_depth: u32,
    /// `orchestrator` below the limit, else `leaf`.
    pub role: SubagentRole,
    /// Which sub-agents the child may control.
    pub control_scope: ControlScope,
    /// The task.
    pub task: String,
    /// The label, if any.
    pub label: Option<String>,
    /// The child's model: requested, else configured; `None` keeps the caller's.
    pub model: Option<String>,
    /// The child's thinking level: requested, else configured; `None` keeps the caller's.
    pub thinking: Option<String>,
    /// The run's time limit in seconds; `None` for none.
    pub run_timeout_seconds: Option<u64>,
    /// The mode.
    pub mode: SpawnMode,
    /// The cleanup (`keep` in session mode).
    pub cleanup: SpawnCleanup,
    /// Whether the child loads the light bootstrap context.
    pub light_context: bool,
    /// Whether the completion should become a user-facing message.
    pub expects_completion_message: bool,
    /// The files the runtime writes to [`SpawnPlan::attachments_rel_dir`] in the target
    /// agent's workspace before the child starts, if any.
    pub attachments: Option<SpawnAttachments>,
}

/// Decides a spawn for `caller` under `config` (the caller's agent's merged settings), with
/// `child_uuid` naming the child session. The gates run in OpenClaw's order: depth, active
/// children, `requireAgentId`, the cross-agent allowlist (`*` allows any agent in
/// `configured_agent_ids`), the sandbox; then what clawless cannot do (threads) and the
/// configured thinking level.
pub fn plan_spawn<S: AsRef<str>>(
    request: &SpawnRequest, caller: &CallerFacts<'_>, config: &SubagentsConfig,
    configured_agent_ids: &[S], child_uuid: &str,
) -> Result<SpawnPlan, SpawnRefusal> {
    let max_spawn_depth = config.max_spawn_depth();
    if caller.depth >= max_spawn_depth {
        return Err(SpawnRefusal::Forbidden(format!(
            "sessions_spawn is not allowed at this depth (current depth: {}, max: {max_spawn_depth})",
            caller.depth
        )));
    }
    let max_children = config.max_children_per_agent();
    if caller.active_children >= max_children {
        return Err(SpawnRefusal::Forbidden(format!(
            "sessions_spawn has reached max active children for this session ({}/{max_children})",
            caller.active_children
        )));
    }
    if config.require_agent_id() && request.agent_id.is_none() {
        return Err(SpawnRefusal::Forbidden(AGENT_ID_REQUIRED.to_owned()));
    }
    let caller_agent = caller.agent_id.trim().to_ascii_lowercase();
    let target_agent = request
        .agent_id
        .clone()
        .unwrap_or_else(|| caller_agent.clone());
    if target_agent != caller_agent {
        check_allowlist(&target_agent, config, configured_agent_ids)?;
    }
    if request.sandbox == SpawnSandbox::Require {
        return Err(SpawnRefusal::Forbidden(
            SANDBOX_REQUIRE_UNAVAILABLE.to_owned(),
        ));
    }
    if request.thread {
        return Err(SpawnRefusal::Error(THREAD_UNAVAILABLE.to_owned()));
    }
    let thinking = match &request.thinking {
        Some(level) => Some(level.clone()),
        None => config
            .thinking()
            .map(normalize_thinking)
            .transpose()
            .map_err(SpawnRefusal::from)?,
    };
    let depth = caller.depth.saturating_add(1);
    let role = SubagentRole::for_depth(depth, max_spawn_depth);
    Ok(SpawnPlan {
        child_session_key: format!(
            "agent:{target_agent}:subagent:{}",
            child_uuid.trim().to_ascii_lowercase()
        ),
        target_agent_id: target_agent,
        requester_session_key: caller.session_key.to_owned(),
        requester_is_cron: caller.is_cron,
        depth,
        max_spawn_depth,
        role,
        control_scope: role.control_scope(),
        task: request.task.clone(),
        label: request.label.clone(),
        model: request
            .model
            .clone()
            .or_else(|| config.model().map(str::to_owned)),
        thinking,
        run_timeout_seconds: request
            .run_timeout_seconds
            .map(|seconds| Some(seconds).filter(|&s| s > 0))
            .unwrap_or_else(|| config.run_timeout_seconds()),
        mode: request.mode,
        cleanup: match request.mode {
            SpawnMode::Session => SpawnCleanup::Keep,
            SpawnMode::Run => request.cleanup,
        },
        light_context: request.light_context,
        expects_completion_message: request.expects_completion_message,
        attachments: request.attachments.clone(),
    })
}

/// The allowlist gate for a spawn as another agent.
fn check_allowlist<S: AsRef<str>>(
    target: &str, config: &SubagentsConfig, configured_agent_ids: &[S],
) -> Result<(), SpawnRefusal> {
    let mut allowed = config.allowed_agent_ids();
    if config.allows_any_agent() {
        allowed.extend(
            configured_agent_ids
                .iter()
                .map(|id| id.as_ref().trim().to_ascii_lowercase()),
        );
        allowed.sort();
        allowed.dedup();
    }
    if allowed.iter().any(|id| id == target) {
        return Ok(());
    }
    let allowed_text = if allowed.is_empty() {
        "none".to_owned()
    } else {
        allowed.join(", ")
    };
    Err(SpawnRefusal::Forbidden(format!(
        "agentId is not allowed for sessions_spawn (allowed: {allowed_text})"
    )))
}

impl SpawnPlan {
    /// The tool result once the child run `run_id` was accepted: `{status:"accepted",
    /// childSessionKey, runId, mode, note?, modelApplied?, attachments?}`. One-shot spawns
    /// carry the push-based note unless the requester is a cron run; persistent ones the
    /// thread note. `attachments` (`{count, totalBytes, files, relDir}`) is there when the
    /// spawn attached files.
    pub fn accepted_json(&self, run_id: &str) -> Value {
        let mut result = json!({
            "status": STATUS_ACCEPTED,
            "childSessionKey": self.child_session_key,
            "runId": run_id,
            "mode": self.mode.as_str(),
        });
        let note = match self.mode {
            SpawnMode::Run if self.requester_is_cron => None,
            SpawnMode::Run => Some(SPAWN_ACCEPTED_NOTE),
            SpawnMode::Session => Some(SESSION_MODE_NOTE),
        };
        if let Some(note) = note {
            result["note"] = Value::from(note);
        }
        if self.model.is_some() {
            result["modelApplied"] = Value::Bool(true);
        }
        if let Some(attachments) = &self.attachments {
            result["attachments"] = attachments.result_json(&self.attachments_rel_dir());
        }
        result
    }

    /// Where the child's attachments go, relative to the target agent's workspace root:
    /// `attachments/<child uuid>/`.
    pub fn attachments_rel_dir(&self) -> String {
        attachments_rel_dir(&self.child_session_key)
    }

    /// The facts the child's prompt and first message are built from.
    pub fn child_prompt<'a>(&'a self, requester_channel: Option<&'a str>) -> ChildPrompt<'a> {
        ChildPrompt {
            task: &self.task,
            label: self.label.as_deref(),
            depth: self.depth,
            max_spawn_depth: self.max_spawn_depth,
            requester_session_key: &self.requester_session_key,
            requester_channel,
            child_session_key: &self.child_session_key,
            persistent: self.mode == SpawnMode::Session,
        }
    }

    /// The child run's extra system prompt.
    pub fn extra_system_prompt(&self, requester_channel: Option<&str>) -> String {
        subagent_system_prompt(&self.child_prompt(requester_channel))
    }

    /// The child run's first user message; when the spawn attached files, it ends with the
    /// `[Subagent Attachments]` line that says where they are.
    pub fn task_message(&self) -> String {
        let message = child_task_message(&self.child_prompt(None));
        match &self.attachments {
            Some(attachments) => format!(
                "{message}\n\n{}",
                attachments.message_line(&self.attachments_rel_dir())
            ),
            None => message,
        }
    }
}

/// A non-blank string argument, trimmed.
pub(super) fn string_arg(args: &Map<String, Value>, key: &str) -> Option<String> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .map(str::to_owned)
}

/// `true`, or the string `"true"`.
fn bool_arg(args: &Map<String, Value>, key: &str) -> bool {
    args.get(key)
        .is_some_and(|value| value.as_bool() == Some(true) || value.as_str() == Some("true"))
}

/// A number of seconds (or a numeric string), floored and at least 0.
pub(super) fn seconds_arg(value: Option<&Value>) -> Option<u64> {
    let seconds = match value? {
        Value::Number(number) => number.as_f64()?,
        Value::String(text) => text.trim().parse::<f64>().ok()?,
        _ => return None,
    };
    if !seconds.is_finite() {
        return None;
    }
    // `as` saturates: huge values become u64::MAX.
    Some(seconds.floor().max(0.0) as u64)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::subagents::caller_depth;

    const UUID: &str = "0b3f6c1e-6a43-4d7e-9a53-2f1c8d9e7a10";

    fn main_caller() -> CallerFacts<'static> {
        CallerFacts {
            session_key: "agent:main:main",
            agent_id: "main",
            depth: 0,
            active_children: 0,
            is_cron: false,
        }
    }

    fn request(args: Value) -> SpawnRequest {
        parse_spawn_call(&args).expect("valid call")
    }

    fn config(value: Value) -> SubagentsConfig {
        serde_json::from_value(value).expect("valid config")
    }

    fn plan(
        args: Value, caller: &CallerFacts<'_>, cfg: &SubagentsConfig,
    ) -> Result<SpawnPlan, SpawnRefusal> {
        plan_spawn(&request(args), caller, cfg, &["main", "ops"], UUID)
    }

    fn error(args: Value) -> String {
        parse_spawn_call(&args)
            .expect_err("refused")
            .message()
            .to_owned()
    }

    /// Spec §6 vector 38.
    #[test]
    fn vector_38_a_top_level_spawn_with_defaults_is_accepted_as_a_one_shot_leaf() {
        let plan = plan(
            json!({"task": "check the build"}),
            &main_caller(),
            &SubagentsConfig::default(),
        )
        .expect("accepted");
        let key_shape = regex::Regex::new("^agent:main:subagent:[0-9a-f-]{36}$").expect("regex");
        assert!(
            key_shape.is_match(&plan.child_session_key),
            "{}",
            plan.child_session_key
        );
        assert_eq!((plan.depth, plan.role), (1, SubagentRole::Leaf));
        assert_eq!(plan.control_scope, ControlScope::None);
        assert_eq!(plan.cleanup, SpawnCleanup::Keep);
        let accepted = plan.accepted_json("run-1");
        assert_eq!(
            accepted,
            json!({
                "status": "accepted",
                "childSessionKey": plan.child_session_key,
                "runId": "run-1",
                "mode": "run",
                "note": SPAWN_ACCEPTED_NOTE
            })
        );
    }

    #[test]
    fn a_cron_requester_gets_no_polling_note() {
        let caller = CallerFacts {
            session_key: "agent:main:cron:job-1:run:s1",
            is_cron: true,
            ..main_caller()
        };
        let plan =
            plan(json!({"task": "x"}), &caller, &SubagentsConfig::default()).expect("accepted");
        assert!(plan.accepted_json("r").get("note").is_none());
    }

    /// Spec §6 vector 39.
    #[test]
    fn vector_39_depth_is_gated_by_max_spawn_depth() {
        let caller = CallerFacts {
            session_key: "agent:main:subagent:x",
            depth: caller_depth("agent:main:subagent:x"),
            ..main_caller()
        };
        let refused = plan(json!({"task": "x"}), &caller, &SubagentsConfig::default())
            .expect_err("forbidden");
        assert_eq!(
            refused.to_json(),
            json!({"status": "forbidden", "error": "sessions_spawn is not allowed at this depth (current depth: 1, max: 1)"})
        );
        let plan = plan(
            json!({"task": "x"}),
            &caller,
            &config(json!({"maxSpawnDepth": 2})),
        )
        .expect("accepted");
        assert_eq!((plan.depth, plan.role), (2, SubagentRole::Leaf));
        assert_eq!(plan.requester_session_key, "agent:main:subagent:x");
    }

    #[test]
    fn a_child_below_the_limit_is_an_orchestrator() {
        let plan = plan(
            json!({"task": "x"}),
            &main_caller(),
            &config(json!({"maxSpawnDepth": 2})),
        )
        .expect("accepted");
        assert_eq!((plan.depth, plan.role), (1, SubagentRole::Orchestrator));
        assert_eq!(plan.control_scope, ControlScope::Children);
    }

    /// Spec §6 vector 40.
    #[test]
    fn vector_40_the_sixth_active_child_is_forbidden() {
        let caller = CallerFacts {
            active_children: 5,
            ..main_caller()
        };
        let refused = plan(json!({"task": "x"}), &caller, &SubagentsConfig::default())
            .expect_err("forbidden");
        assert_eq!(refused.status(), "forbidden");
        assert_eq!(
            refused.message(),
            "sessions_spawn has reached max active children for this session (5/5)"
        );
    }

    /// Spec §6 vector 41.
    #[test]
    fn vector_41_malformed_calls_and_the_allowlist() {
        assert_eq!(
            error(json!({"task": "x", "mode": "session"})),
            r#"mode="session" requires thread=true so the subagent can stay bound to a thread."#
        );
        assert_eq!(
            parse_spawn_call(&json!({"task": "x", "channel": "telegram"}))
                .expect_err("rejected")
                .to_json(),
            json!({"status": "error", "error": r#"sessions_spawn does not support "channel". Use "message" or "sessions_send" for channel delivery."#})
        );
        assert_eq!(
            error(json!({"task": "x", "agentId": "Bad Id"})),
            r#"Invalid agentId "Bad Id". Agent IDs must match [a-z0-9][a-z0-9_-]{0,63}. Use agents_list to discover valid targets."#
        );
        assert_eq!(
            request(json!({"task": "x", "agentId": "Ops"}))
                .agent_id
                .as_deref(),
            Some("ops")
        );
        let refused = plan(
            json!({"task": "x", "agentId": "ops"}),
            &main_caller(),
            &SubagentsConfig::default(),
        )
        .expect_err("forbidden");
        assert_eq!(
            refused.to_json(),
            json!({"status": "forbidden", "error": "agentId is not allowed for sessions_spawn (allowed: none)"})
        );
    }

    #[test]
    fn every_channel_delivery_key_is_rejected_by_name() {
        for key in REJECTED_SPAWN_KEYS {
            let mut args = json!({"task": "x"});
            args[key] = json!("v");
            assert_eq!(
                error(args),
                format!(
                    r#"sessions_spawn does not support "{key}". Use "message" or "sessions_send" for channel delivery."#
                )
            );
        }
        assert_eq!(error(json!({"label": "x"})), "task required");
    }

    #[test]
    fn the_allowlist_admits_named_agents_and_star_any_configured_one() {
        let named = config(json!({"allowAgents": ["ops", "research"]}));
        let ok = plan(
            json!({"task": "x", "agentId": "ops"}),
            &main_caller(),
            &named,
        )
        .expect("allowed");
        assert_eq!(ok.child_session_key, format!("agent:ops:subagent:{UUID}"));
        assert_eq!(ok.target_agent_id, "ops");
        let refused = plan(
            json!({"task": "x", "agentId": "qa"}),
            &main_caller(),
            &named,
        )
        .expect_err("forbidden");
        assert_eq!(
            refused.message(),
            "agentId is not allowed for sessions_spawn (allowed: ops, research)"
        );
        let any = config(json!({"allowAgents": ["*"]}));
        assert!(plan(json!({"task": "x", "agentId": "ops"}), &main_caller(), &any).is_ok());
        assert_eq!(
            plan(
                json!({"task": "x", "agentId": "ghost"}),
                &main_caller(),
                &any
            )
            .expect_err("not configured")
            .message(),
            "agentId is not allowed for sessions_spawn (allowed: main, ops)"
        );
        assert!(
            plan(
                json!({"task": "x", "agentId": "main"}),
                &main_caller(),
                &SubagentsConfig::default()
            )
            .is_ok(),
            "the caller's own agent needs no allowlist"
        );
    }

    #[test]
    fn gates_run_in_order_depth_children_agent_id_allowlist_sandbox() {
        let strict = config(json!({"requireAgentId": true}));
        let busy_and_deep = CallerFacts {
            depth: 1,
            active_children: 9,
            ..main_caller()
        };
        let message = |caller: &CallerFacts<'_>, args: Value| {
            plan(args, caller, &strict)
                .expect_err("refused")
                .message()
                .to_owned()
        };
        assert!(message(&busy_and_deep, json!({"task": "x"})).contains("at this depth"));
        let busy = CallerFacts {
            depth: 0,
            ..busy_and_deep
        };
        assert!(message(&busy, json!({"task": "x"})).contains("max active children"));
        assert_eq!(
            message(&main_caller(), json!({"task": "x"})),
            AGENT_ID_REQUIRED
        );
        assert!(
            message(
                &main_caller(),
                json!({"task": "x", "agentId": "ops", "sandbox": "require"})
            )
            .contains("not allowed")
        );
        let refused = plan(
            json!({"task": "x", "agentId": "main", "sandbox": "require"}),
            &main_caller(),
            &strict,
        )
        .expect_err("no sandbox");
        assert_eq!(refused.to_json()["status"], "forbidden");
        assert_eq!(refused.message(), SANDBOX_REQUIRE_UNAVAILABLE);
    }

    #[test]
    fn threads_are_refused_after_the_gates() {
        let request = request(json!({"task": "x", "thread": true}));
        assert_eq!(request.mode, SpawnMode::Session);
        let refused = plan_spawn(
            &request,
            &main_caller(),
            &SubagentsConfig::default(),
            &["main"],
            UUID,
        )
        .expect_err("no threads");
        assert_eq!(
            refused.to_json(),
            json!({"status": "error", "error": THREAD_UNAVAILABLE})
        );
        let deep = CallerFacts {
            depth: 1,
            ..main_caller()
        };
        assert_eq!(
            plan_spawn(
                &request,
                &deep,
                &SubagentsConfig::default(),
                &["main"],
                UUID
            )
            .expect_err("depth first")
            .status(),
            "forbidden"
        );
    }

    #[test]
    fn runtimes_and_options_clawless_lacks_are_refused_clearly() {
        assert_eq!(
            error(json!({"task": "x", "runtime": "acp"})),
            ACP_UNAVAILABLE
        );
        assert_eq!(
            error(json!({"task": "x", "runtime": "acp", "lightContext": true})),
            LIGHT_CONTEXT_SUBAGENT_ONLY
        );
        assert_eq!(
            error(json!({"task": "x", "streamTo": "parent"})),
            "streamTo is only supported for runtime=acp; got runtime=subagent"
        );
        assert_eq!(
            error(json!({"task": "x", "thinking": "max"})),
            r#"Invalid thinking level "max". Use one of: off, minimal, low, medium, high, xhigh."#
        );
        assert!(request(json!({"task": "x", "lightContext": true})).light_context);
    }

    #[test]
    fn model_thinking_and_timeout_take_the_call_then_the_config() {
        let cfg = config(
            json!({"model": "anthropic/claude-haiku", "thinking": "Low", "runTimeoutSeconds": 600}),
        );
        let defaults = plan(json!({"task": "x"}), &main_caller(), &cfg).expect("accepted");
        assert_eq!(defaults.model.as_deref(), Some("anthropic/claude-haiku"));
        assert_eq!(defaults.thinking.as_deref(), Some("low"));
        assert_eq!(defaults.run_timeout_seconds, Some(600));
        assert_eq!(defaults.accepted_json("r")["modelApplied"], true);
        let explicit = plan(
            json!({"task": "x", "model": "openai/gpt-5", "thinking": "HIGH", "timeoutSeconds": 42.9}),
            &main_caller(),
            &cfg,
        )
        .expect("accepted");
        assert_eq!(explicit.model.as_deref(), Some("openai/gpt-5"));
        assert_eq!(explicit.thinking.as_deref(), Some("high"));
        assert_eq!(explicit.run_timeout_seconds, Some(42));
        let no_limit = plan(
            json!({"task": "x", "runTimeoutSeconds": 0, "timeoutSeconds": 5}),
            &main_caller(),
            &cfg,
        )
        .expect("accepted");
        assert_eq!(
            no_limit.run_timeout_seconds, None,
            "an explicit 0 means no limit"
        );
        let inherit = plan(
            json!({"task": "x"}),
            &main_caller(),
            &SubagentsConfig::default(),
        )
        .expect("accepted");
        assert_eq!(
            (inherit.model, inherit.thinking, inherit.run_timeout_seconds),
            (None, None, None)
        );
        let bad = config(json!({"thinking": "turbo"}));
        assert_eq!(
            plan(json!({"task": "x"}), &main_caller(), &bad)
                .expect_err("bad config")
                .status(),
            "error"
        );
    }

    #[test]
    fn the_plan_builds_the_child_prompt_and_first_message() {
        let plan = plan(
            json!({"task": "count\nfiles", "label": " files ", "cleanup": "delete"}),
            &main_caller(),
            &SubagentsConfig::default(),
        )
        .expect("accepted");
        assert_eq!(plan.label.as_deref(), Some("files"));
        assert_eq!(plan.cleanup, SpawnCleanup::Delete);
        let prompt = plan.extra_system_prompt(Some("slack"));
        assert!(prompt.contains("- Your task: count files\n"));
        assert!(prompt.contains("- Requester channel: slack.\n"));
        assert!(prompt.contains(&format!("- Your session: agent:main:subagent:{UUID}.")));
        assert!(
            plan.task_message()
                .ends_with("[Subagent Task]: count\nfiles")
        );
    }

    #[test]
    fn attachments_ride_on_the_plan_into_the_first_message_and_the_answer() {
        let plan = plan(
            json!({
                "task": "summarise",
                "attachments": [
                    {"name": "a.txt", "content": "abc"},
                    {"name": "b.bin", "content": "AAEC", "encoding": "base64"}
                ],
                "attachAs": {"mountPath": "/data"}
            }),
            &main_caller(),
            &SubagentsConfig::default(),
        )
        .expect("accepted");
        let rel_dir = format!("attachments/{UUID}/");
        assert_eq!(plan.attachments_rel_dir(), rel_dir);
        let attachments = plan.attachments.as_ref().expect("attachments");
        assert_eq!(attachments.files.len(), 2);
        assert!(
            plan.task_message().ends_with(&format!(
                "[Subagent Task]: summarise\n\n[Subagent Attachments] 2 file(s) in {rel_dir}: a.txt, b.bin (the requester's mount path hint: /data; the files are in {rel_dir})"
            )),
            "{}",
            plan.task_message()
        );
        let accepted = plan.accepted_json("run-1");
        assert_eq!(accepted["status"], "accepted");
        assert_eq!(accepted["attachments"], attachments.result_json(&rel_dir));
        assert_eq!(accepted["attachments"]["count"], 2);
        assert_eq!(accepted["attachments"]["totalBytes"], 6);
    }

    #[test]
    fn a_spawn_without_files_says_nothing_about_attachments() {
        let plan = plan(
            json!({"task": "x", "attachments": []}),
            &main_caller(),
            &SubagentsConfig::default(),
        )
        .expect("accepted");
        assert_eq!(plan.attachments, None);
        assert!(!plan.task_message().contains("[Subagent Attachments]"));
        assert!(plan.accepted_json("r").get("attachments").is_none());
    }

    #[test]
    fn bad_attachments_refuse_the_call_as_an_error() {
        assert_eq!(
            parse_spawn_call(&json!({
                "task": "x",
                "attachments": [{"name": "../../etc/passwd", "content": "root"}]
            }))
            .expect_err("refused")
            .to_json(),
            json!({
                "status": "error",
                "error": r#"Invalid attachment name "../../etc/passwd": use a plain file name, without "/" or "\"."#
            })
        );
        assert!(
            error(json!({"task": "x", "attachAs": {"mountPath": "a b"}}))
                .starts_with("Invalid attachAs.mountPath")
        );
    }

    #[test]
    fn the_tool_spec_has_the_exact_description_and_requires_a_task() {
        let spec = sessions_spawn_tool_spec();
        assert_eq!(spec.name, "sessions_spawn");
        assert_eq!(spec.description, SESSIONS_SPAWN_DESCRIPTION);
        assert_eq!(spec.input_schema["required"], json!(["task"]));
        assert_eq!(
            spec.input_schema["properties"]["mode"]["enum"],
            json!(["run", "session"])
        );
        let attachments = &spec.input_schema["properties"]["attachments"];
        assert_eq!(attachments["maxItems"], 50);
        assert_eq!(
            attachments["items"]["properties"]["encoding"]["enum"],
            json!(["utf8", "base64"])
        );
        assert_eq!(attachments["items"]["required"], json!(["name", "content"]));
        assert_eq!(
            spec.input_schema["properties"]["attachAs"]["properties"]["mountPath"]["type"],
            "string"
        );
    }
}

#[cfg(test)]
mod breaker_tests {
    use super::*;

    fn child(task: &str, failed: bool) -> PastChild<'_> {
        PastChild { task, failed }
    }

    #[test]
    fn a_task_that_failed_three_times_in_a_row_is_refused() {
        let history = [
            child("fetch the report", true),
            child("Fetch the report ", true),
            child("fetch the report", true),
        ];
        let refusal = check_failure_breaker(&history, "fetch the report").unwrap_err();
        assert_eq!(refusal.status(), "forbidden");
        assert!(
            refusal
                .message()
                .contains("last 3 sub-agents given this task failed")
        );
        // Another task is still allowed.
        assert!(check_failure_breaker(&history, "summarize the inbox").is_ok());
    }

    #[test]
    fn a_success_resets_the_count() {
        let history = [
            child("fetch", true),
            child("fetch", true),
            child("fetch", false),
            child("fetch", true),
            child("fetch", true),
        ];
        assert!(check_failure_breaker(&history, "fetch").is_ok());
    }

    #[test]
    fn five_failures_in_a_row_stop_every_spawn() {
        let history: Vec<PastChild<'_>> = ["a", "b", "c", "d", "e"]
            .into_iter()
            .map(|task| child(task, true))
            .collect();
        let refusal = check_failure_breaker(&history, "f").unwrap_err();
        assert!(
            refusal
                .message()
                .contains("last 5 sub-agents of this session failed")
        );
        assert!(check_failure_breaker(&history[1..], "f").is_ok());
    }
}
