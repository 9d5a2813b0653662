//! The sandbox as a turn sees it: whether this session runs sandboxed (decided from the
//! session and the config, never from a tool argument), the workspace its file tools, prompt
//! and memory flush use, the seeding of that workspace, and what the sandbox and memory rules
//! take out of the offered tools.
//!
//! A sandbox workspace lives inside the agent's workspace store, under
//! [`SANDBOXES_PREFIX`]`<slug>/`: the session's file tools are rooted there and refuse `..`,
//! so it never reaches the agent's own files (`SOUL.md`, `MEMORY.md`, `memory/`). Its `exec`
//! jobs carry a jail block ([`SessionSandbox::job_sandbox`]) and go only to a node host that
//! runs a jail; the node keeps its own folder of the sandbox for `/workspace`.

use clawless_base::object_store::{PutCondition, StoreError};
use clawless_base::transcript::ToolCall;
use clawless_core::elevated::{ElevatedGate, ElevatedLevel, elevated_unavailable_text};
use clawless_core::sandbox::{
    self, MEMORY_TOOLS, SandboxNetwork, SandboxSettings, WRITE_TOOLS, WorkspaceAccess,
};
use clawless_core::subagents::config::SessionVisibility;
use clawless_core::system_prompt::bootstrap::BOOTSTRAP_FILE_NAMES;
use clawless_core::system_prompt::{ElevatedPrompt, SandboxPrompt};
use clawless_core::tools::{SandboxView, Workspace};
use clawless_core::turn::state::SessionState;
use clawless_exec::node::wire::JobSandbox;

use super::{TurnError, TurnService};
use crate::config::ClawlessConfig;
use crate::nodes_service::JobPlacement;

/// Where, inside the agent's workspace, the sandbox workspaces are.
const SANDBOXES_PREFIX: &str = ".sandboxes/";

/// The largest bootstrap file copied into a sandbox workspace.
const SEED_MAX_BYTES: u64 = 1024 * 1024;

/// The chat channels a sandboxed session may not drive as tools.
pub(super) const CHANNEL_TOOL_IDS: [&str; 4] = ["telegram", "slack", "discord", "generic"];

/// How the current session is sandboxed, when it is.
#[derive(Debug, Clone)]
pub(super) struct SessionSandbox {
    /// The agent's sandbox settings.
    pub settings: SandboxSettings,
    /// The key naming its sandbox workspace.
    pub scope_key: String,
}

impl SessionSandbox {
    /// The workspace of the session's files: its sandbox workspace inside `agent_workspace`
    /// (`workspaceAccess` `none` or `ro`), or `None` when it works in the agent's (`rw`).
    pub(super) fn own_workspace(&self, agent_workspace: &Workspace) -> Option<Workspace> {
        self.settings.uses_own_workspace().then(|| Workspace {
            prefix: format!(
                "{}{SANDBOXES_PREFIX}{}",
                agent_workspace.prefix,
                sandbox::sandbox_dir(self.settings.scope, &self.scope_key)
            ),
            store: agent_workspace.store.clone(),
        })
    }

    /// The jail block of this session's exec jobs: its sandbox's name (a node host keeps
    /// its own folder of that name as `/workspace`), its network, the default limits.
    pub(super) fn job_sandbox(&self) -> JobSandbox {
        JobSandbox {
            network: self.settings.network == SandboxNetwork::Node,
            ..JobSandbox::new(sandbox::sandbox_name(self.settings.scope, &self.scope_key))
        }
    }
}

/// How `state` of `agent_id` runs sandboxed, or `None` when it runs as the owner's own.
pub(super) fn session_sandbox(
    config: &ClawlessConfig, agent_id: &str, state: &SessionState,
) -> Option<SessionSandbox> {
    let settings = config.sandbox_settings(agent_id);
    if !settings.is_sandboxed(agent_id, state.key.as_str(), state.meta.untrusted) {
        return None;
    }
    let owner = state
        .meta
        .sandbox_key
        .as_deref()
        .unwrap_or(state.key.as_str());
    Some(SessionSandbox {
        settings,
        scope_key: sandbox::scope_key(settings.scope, agent_id, owner),
    })
}

impl TurnService {
    /// Where an `exec` call of session `state` runs: as the node's user for the owner's own
    /// sessions; in a node's jail for a sandboxed one, unless an owner set `/elevated on`
    /// and the sender is allowed (then on the node's bare host, each command approved by an
    /// owner). A call's `elevated: false` stays in the jail, and `elevated: true` leaves it
    /// only under `/elevated on` (clawless honours `off` against the model); asked by a sender
    /// the gates keep out, it is refused with OpenClaw's text.
    pub(super) fn exec_placement(
        &self, agent_id: &str, state: &SessionState, call: &ToolCall,
    ) -> Result<JobPlacement, String> {
        let Some(sandboxed) = self.sandbox_of(agent_id, state) else {
            return Ok(JobPlacement::Host);
        };
        let jail = JobPlacement::Jail(sandboxed.job_sandbox());
        let asked = call
            .input
            .get("elevated")
            .and_then(serde_json::Value::as_bool);
        if asked == Some(false) || (asked.is_none() && state.meta.elevated.is_off()) {
            return Ok(jail);
        }
        let gates = self.sender_elevated_gates(agent_id, state);
        if !gates.is_empty() {
            return match asked {
                Some(true) => Err(elevated_unavailable_text(
                    true,
                    &gates,
                    state.meta.chat.as_ref().map_or("", |chat| &chat.channel),
                    state.key.as_str(),
                )),
                _ => Ok(jail),
            };
        }
        Ok(match state.meta.elevated {
            ElevatedLevel::Ask => JobPlacement::ElevatedHost,
            ElevatedLevel::Off => jail,
        })
    }

    /// Which gates keep the sender of `state`'s current turn from elevated exec.
    fn sender_elevated_gates(&self, agent_id: &str, state: &SessionState) -> Vec<ElevatedGate> {
        let channel = state.meta.chat.as_ref().map(|chat| chat.channel.as_str());
        self.config()
            .elevated_gates(agent_id, channel, state.meta.sender_id.as_deref())
    }

    /// The `## Sandbox` section of a sandboxed session whose file tools use `workspace_dir`.
    pub(super) fn sandbox_prompt<'a>(
        &self, agent_id: &str, state: &SessionState, sandboxed: &SessionSandbox,
        workspace_dir: &'a str, exec: bool,
    ) -> SandboxPrompt<'a> {
        let gates = self.sender_elevated_gates(agent_id, state);
        SandboxPrompt {
            workspace_dir,
            workspace_access: sandboxed.settings.workspace_access.as_str(),
            exec,
            elevated: if gates.contains(&ElevatedGate::Enabled) {
                ElevatedPrompt::Disabled
            } else if gates.is_empty() {
                ElevatedPrompt::Available(state.meta.elevated.as_str())
            } else {
                ElevatedPrompt::Unavailable
            },
        }
    }

    /// The workspace of `state`'s file tools (a sandboxed session's own, seeded on first
    /// use), and what else a sandboxed session's file tools see: with `ro`, the agent's
    /// workspace at `/agent/…` (never its memory).
    pub(super) async fn session_workspace(
        &self, agent_id: &str, state: &mut SessionState, sandboxed: Option<&SessionSandbox>,
    ) -> Result<(Workspace, Option<SandboxView>), TurnError> {
        let agent_workspace = self.workspace(agent_id)?;
        let view = sandboxed.map(|sandboxed| SandboxView {
            agent: (sandboxed.settings.workspace_access == WorkspaceAccess::Ro)
                .then(|| agent_workspace.clone()),
        });
        let Some(own) = sandboxed.and_then(|sandboxed| sandboxed.own_workspace(&agent_workspace))
        else {
            return Ok((agent_workspace, view));
        };
        if !state.meta.sandbox_seeded {
            seed_sandbox(&agent_workspace, &own).await;
            state.meta.sandbox_seeded = true;
            state.touch_meta();
        }
        Ok((own, view))
    }

    /// How `state` runs sandboxed, or `None` when it runs as the owner's own.
    pub(super) fn sandbox_of(
        &self, agent_id: &str, state: &SessionState,
    ) -> Option<SessionSandbox> {
        session_sandbox(self.config(), agent_id, state)
    }

    /// Whether session `state` may see the agent's memory (`MEMORY.md`, `memory/`, the memory
    /// tools), given whether it is sandboxed: never once anyone but an owner has spoken in it.
    pub(super) fn memory_reaches(&self, state: &SessionState, sandboxed: bool) -> bool {
        self.config()
            .memory
            .reaches(state.key.as_str(), sandboxed, state.meta.untrusted)
    }
}

/// Copies the bootstrap files of `agent_workspace` into `sandbox_workspace`, each only where
/// the copy does not exist yet (never refreshed, never `MEMORY.md` or `memory/`). Best effort:
/// a file that cannot be copied is logged and left out.
pub(super) async fn seed_sandbox(agent_workspace: &Workspace, sandbox_workspace: &Workspace) {
    for name in BOOTSTRAP_FILE_NAMES {
        let source = format!("{}{name}", agent_workspace.prefix);
        let object = match agent_workspace.store.get(&source, SEED_MAX_BYTES).await {
            Ok(Some(object)) => object,
            Ok(None) => continue,
            Err(err) => {
                tracing::warn!(file = name, error = %err, "sandbox seed file unreadable");
                continue;
            }
        };
        let target = format!("{}{name}", sandbox_workspace.prefix);
        match sandbox_workspace
            .store
            .put(&target, object.bytes, PutCondition::IfAbsent)
            .await
        {
            Ok(_) | Err(StoreError::Conflict(_)) => {}
            Err(err) => tracing::warn!(file = name, error = %err, "sandbox seed not written"),
        }
    }
}

/// Which sessions `state`'s session tools see: `tools.sessions.visibility`, narrowed to its
/// own tree when sandboxed (a group member never reads the owner's chats).
pub(super) fn session_visibility(
    config: &ClawlessConfig, state: &SessionState,
) -> SessionVisibility {
    let sandboxed = session_sandbox(config, &state.meta.agent_id, state).is_some();
    match config.tools.session_visibility() {
        SessionVisibility::Agent | SessionVisibility::All if sandboxed => SessionVisibility::Tree,
        other => other,
    }
}

/// The tools neither the sandbox's workspace access nor the memory rule allow.
pub(super) fn withheld_tools(
    sandboxed: Option<&SessionSandbox>, memory_reaches: bool,
) -> Vec<&'static str> {
    let mut withheld = Vec::new();
    if sandboxed.is_some_and(|sandboxed| sandboxed.settings.workspace_access == WorkspaceAccess::Ro)
    {
        withheld.extend(WRITE_TOOLS);
    }
    if !memory_reaches {
        withheld.extend(MEMORY_TOOLS);
    }
    withheld
}
