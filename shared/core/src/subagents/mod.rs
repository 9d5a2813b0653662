//! Sub-agents and the session tools (spec `openclaw-automation.md` §3), as pure logic with no
//! I/O.
//!
//! This module owns the contracts of `sessions_spawn`, `subagents`, `agents_list`,
//! `sessions_list`, `sessions_history`, `sessions_send` and `sessions_yield` (names, exact
//! descriptions, schemas, argument parsing and OpenClaw's exact errors), the spawn gates and
//! the plan of a child run (its key, depth, role, model, prompt, first message and attached
//! files), the announce of a finished child back to its requester (status, stats, the
//! internal-context block, idempotency keys, retry timing), target resolution and the texts
//! of the `subagents` tool, session visibility, history capping and the agent-to-agent
//! prompts, and the `agents.defaults.subagents` / `tools.sessions` / `tools.agentToAgent` /
//! `session.agentToAgent` settings.
//!
//! It knows no store, clock, queue or model: the runtime keeps the run registry and the
//! sessions, starts the child turns, waits for them, delivers announces and passes in every
//! fact (depths, counts, times in epoch milliseconds, uuids) these functions decide on.
//! Which tools a sub-agent is offered is the tool policy's (`crate::tool_policy`, layer 11).

pub mod announce;
pub mod attachments;
pub mod config;
pub mod control;
pub mod prompt;
pub mod sessions_tools;
pub mod spawn;

use serde::{Deserialize, Serialize};

pub use config::{
    AgentSubagentsConfig, AgentToAgentConfig, SessionAgentToAgentConfig, SessionToolsConfig,
    SessionVisibility, SubagentsConfig,
};

/// The marker of a sub-agent session in a key (`agent:<id>:subagent:<uuid>`).
pub const SUBAGENT_KEY_MARKER: &str = ":subagent:";

/// The workspace files a sub-agent's prompt carries (issue 23 narrows OpenClaw's five to
/// these two: a child works on its task, not as the agent's persona).
pub const SUBAGENT_BOOTSTRAP_FILES: [&str; 2] = ["AGENTS.md", "TOOLS.md"];

/// Who a sub-agent's first message and its announce to the parent come from, as the
/// transcript records them.
pub const SUBAGENT_SENDER_ID: &str = "subagent";

/// Who the steps of an agent-to-agent exchange (`sessions_send`) come from, as the
/// transcript records them: another agent, never the owner.
pub const A2A_SENDER_ID: &str = "agent-to-agent";

/// A session's sub-agent depth read from its key: how many `:subagent:` segments it has (0
/// for a top-level session). The runtime prefers the depth stored with the session and the
/// `spawnedBy` chain; this is the last resort.
pub fn caller_depth(session_key: &str) -> u32 {
    let hops = session_key
        .to_ascii_lowercase()
        .matches(SUBAGENT_KEY_MARKER)
        .count();
    u32::try_from(hops).unwrap_or(u32::MAX)
}

/// Whether a key is a sub-agent's session (it has a `:subagent:` segment, at any depth).
pub fn is_subagent_session_key(session_key: &str) -> bool {
    caller_depth(session_key) > 0
}

/// Whether a key is a cron run's session (`agent:<id>:cron:…`).
pub fn is_cron_session_key(session_key: &str) -> bool {
    let lowered = session_key.trim().to_ascii_lowercase();
    let mut parts = lowered.split(':');
    parts.next() == Some("agent") && parts.nth(1) == Some("cron")
}

/// The agent id of an `agent:<id>:…` key, if it has one.
pub fn agent_id_of_key(session_key: &str) -> Option<String> {
    let lowered = session_key.trim().to_ascii_lowercase();
    let mut parts = lowered.split(':');
    (parts.next() == Some("agent"))
        .then(|| parts.next())
        .flatten()
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

/// What a sub-agent session may do about sub-agents of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SubagentRole {
    /// Below `maxSpawnDepth`: it may spawn and control sub-agents.
    Orchestrator,
    /// At `maxSpawnDepth`: it may not spawn, list or steer sub-agents.
    Leaf,
}

impl SubagentRole {
    /// The role of a session at `depth` (1 for a top-level agent's children).
    pub fn for_depth(depth: u32, max_spawn_depth: u32) -> Self {
        if depth < max_spawn_depth {
            Self::Orchestrator
        } else {
            Self::Leaf
        }
    }

    /// Which sub-agents a session in this role controls.
    pub fn control_scope(self) -> ControlScope {
        match self {
            Self::Orchestrator => ControlScope::Children,
            Self::Leaf => ControlScope::None,
        }
    }

    /// `orchestrator` or `leaf`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Orchestrator => "orchestrator",
            Self::Leaf => "leaf",
        }
    }
}

/// Which runs a session's `subagents` tool may list, kill and steer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ControlScope {
    /// The runs it spawned.
    Children,
    /// None.
    None,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_subagent_segments() {
        assert_eq!(caller_depth("agent:main:main"), 0);
        assert_eq!(caller_depth("agent:main:subagent:x"), 1);
        assert_eq!(caller_depth("agent:main:subagent:a:subagent:b"), 2);
        assert_eq!(caller_depth("agent:main:SUBAGENT:x"), 1);
    }

    #[test]
    fn keys_tell_cron_sessions_and_agents() {
        assert!(is_cron_session_key("agent:main:cron:job-1:run:abc"));
        assert!(!is_cron_session_key("agent:main:main"));
        assert!(!is_cron_session_key("cron:job-1"));
        assert_eq!(agent_id_of_key("agent:Ops:main").as_deref(), Some("ops"));
        assert_eq!(agent_id_of_key("main"), None);
    }

    #[test]
    fn only_keys_with_a_subagent_segment_are_sub_agent_sessions() {
        assert!(is_subagent_session_key("agent:main:subagent:0b6f"));
        assert!(is_subagent_session_key(
            "agent:main:subagent:0b6f:subagent:77aa"
        ));
        assert!(is_subagent_session_key("agent:Main:SUBAGENT:0b6f"));
        assert!(!is_subagent_session_key("agent:main:main"));
        assert!(!is_subagent_session_key("agent:main:cron:job-1:run:2"));
        assert!(!is_subagent_session_key(
            "agent:main:telegram:direct:subagent"
        ));
    }

    #[test]
    fn roles_follow_depth_against_the_limit() {
        assert_eq!(SubagentRole::for_depth(1, 1), SubagentRole::Leaf);
        assert_eq!(SubagentRole::for_depth(1, 2), SubagentRole::Orchestrator);
        assert_eq!(SubagentRole::for_depth(2, 2), SubagentRole::Leaf);
        assert_eq!(
            SubagentRole::Orchestrator.control_scope(),
            ControlScope::Children
        );
        assert_eq!(SubagentRole::Leaf.control_scope(), ControlScope::None);
    }
}
