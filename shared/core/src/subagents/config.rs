//! The sub-agent and session-tool settings of `clawless.yaml`, as plain structs the runtime
//! config embeds where the keys live:
//!
//! - [`SubagentsConfig`]: `agents.defaults.subagents` (limits, defaults of spawned runs, the
//!   cross-agent allowlist), with [`AgentSubagentsConfig`] (`agents.list[].subagents`)
//!   merged over it by [`SubagentsConfig::for_agent`];
//! - [`SessionToolsConfig`]: `tools.sessions` (which sessions the `sessions_*` tools see);
//! - [`AgentToAgentConfig`]: `tools.agentToAgent` (cross-agent access);
//! - [`SessionAgentToAgentConfig`]: `session.agentToAgent` (ping-pong turns of `sessions_send`).
//!
//! Every key is optional; the accessors apply OpenClaw's defaults and clamps. Nothing here
//! spawns, lists or reads a session.

use serde::{Deserialize, Serialize};

use clawless_base::session_key::normalize_agent_id;

/// `maxSpawnDepth` when unset: sub-agents may not spawn their own (no nesting).
pub const DEFAULT_MAX_SPAWN_DEPTH: u32 = crate::tool_policy::DEFAULT_MAX_SPAWN_DEPTH;

/// The deepest `maxSpawnDepth` honoured.
pub const MAX_SPAWN_DEPTH_LIMIT: u32 = 5;

/// `maxChildrenPerAgent` when unset.
pub const DEFAULT_MAX_CHILDREN_PER_AGENT: u32 = 5;

/// The largest `maxChildrenPerAgent` honoured.
pub const MAX_CHILDREN_PER_AGENT_LIMIT: u32 = 20;

/// `maxConcurrent` when unset: sub-agent runs at the same time, across all sessions.
pub const DEFAULT_MAX_CONCURRENT: u32 = 8;

/// `archiveAfterMinutes` when unset.
pub const DEFAULT_ARCHIVE_AFTER_MINUTES: u64 = 60;

/// `runTimeoutSeconds` when unset: no time limit.
pub const DEFAULT_RUN_TIMEOUT_SECONDS: u64 = 0;

/// `announceTimeoutMs` when unset (2 minutes).
pub const DEFAULT_ANNOUNCE_TIMEOUT_MS: u64 = 120_000;

/// The largest `announceTimeoutMs` honoured.
pub const MAX_ANNOUNCE_TIMEOUT_MS: u64 = 2_147_000_000;

/// `requireAgentId` when unset.
pub const DEFAULT_REQUIRE_AGENT_ID: bool = false;

/// The `allowAgents` entry that allows every configured agent.
pub const ALLOW_ANY_AGENT: &str = "*";

/// `tools.sessions.visibility` when unset.
pub const DEFAULT_SESSION_VISIBILITY: SessionVisibility = SessionVisibility::Tree;

/// `tools.agentToAgent.enabled` when unset.
pub const DEFAULT_AGENT_TO_AGENT_ENABLED: bool = false;

/// `session.agentToAgent.maxPingPongTurns` when unset, and the most honoured.
pub const DEFAULT_MAX_PING_PONG_TURNS: u32 = 5;

/// `agents.defaults.subagents`: how deep and how wide sub-agents may spawn, the defaults of
/// their runs and which other agents they may run as. Every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubagentsConfig {
    /// How deep sub-agents nest (1–5). 1: a top-level agent may spawn sub-agents, which may
    /// not spawn their own; 2: its sub-agents may orchestrate one more level of workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_MAX_SPAWN_DEPTH)))]
    pub max_spawn_depth: Option<u32>,
    /// How many sub-agents one session may have active at once (1–20); a child counts while
    /// it runs or while its own children are still running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(extend("default" = DEFAULT_MAX_CHILDREN_PER_AGENT))
    )]
    pub max_children_per_agent: Option<u32>,
    /// How many sub-agent runs may run at the same time across all sessions (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_MAX_CONCURRENT)))]
    pub max_concurrent: Option<u32>,
    /// Minutes after a finished sub-agent (spawned with `cleanup: "keep"`) its session is
    /// archived; 0 keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(extend("default" = DEFAULT_ARCHIVE_AFTER_MINUTES))
    )]
    pub archive_after_minutes: Option<u64>,
    /// Time limit of a sub-agent run in seconds when `sessions_spawn` names none; 0: no
    /// limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_RUN_TIMEOUT_SECONDS)))]
    pub run_timeout_seconds: Option<u64>,
    /// Milliseconds one attempt to announce a finished sub-agent to its requester may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_ANNOUNCE_TIMEOUT_MS)))]
    pub announce_timeout_ms: Option<u64>,
    /// The model of sub-agent runs (`provider/model`) when `sessions_spawn` names none.
    /// Unset: the requester's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub model: Option<String>,
    /// The thinking level of sub-agent runs when `sessions_spawn` names none. Unset: the
    /// requester's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub thinking: Option<String>,
    /// Other agents a sub-agent may be spawned as (`agentId`). `[]`: only the requester's
    /// own agent; `["*"]`: any configured agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = [])))]
    pub allow_agents: Option<Vec<String>>,
    /// Whether `sessions_spawn` must name its `agentId` explicitly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_REQUIRE_AGENT_ID)))]
    pub require_agent_id: Option<bool>,
}

/// `agents.list[].subagents`: one agent's own sub-agent settings, each set key replacing
/// the one of `agents.defaults.subagents` for sub-agents this agent spawns. The limits
/// (depth, children, concurrency, timeouts, archiving) are global and stay in the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentSubagentsConfig {
    /// The model of this agent's sub-agents. Unset: `agents.defaults.subagents.model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub model: Option<String>,
    /// The thinking level of this agent's sub-agents. Unset:
    /// `agents.defaults.subagents.thinking`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub thinking: Option<String>,
    /// Other agents this agent may spawn sub-agents as (`["*"]`: any configured agent).
    /// Unset: `agents.defaults.subagents.allowAgents`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub allow_agents: Option<Vec<String>>,
    /// Whether this agent's `sessions_spawn` calls must name `agentId`. Unset:
    /// `agents.defaults.subagents.requireAgentId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub require_agent_id: Option<bool>,
}

impl SubagentsConfig {
    /// The settings for sub-agents spawned by an agent with its own block `own` (or none):
    /// each key the agent sets replaces the default one.
    pub fn for_agent(&self, own: Option<&AgentSubagentsConfig>) -> SubagentsConfig {
        let Some(own) = own else {
            return self.clone();
        };
        SubagentsConfig {
            model: own.model.clone().or_else(|| self.model.clone()),
            thinking: own.thinking.clone().or_else(|| self.thinking.clone()),
            allow_agents: own
                .allow_agents
                .clone()
                .or_else(|| self.allow_agents.clone()),
            require_agent_id: own.require_agent_id.or(self.require_agent_id),
            ..self.clone()
        }
    }

    /// How deep sub-agents nest, 1–5.
    pub fn max_spawn_depth(&self) -> u32 {
        self.max_spawn_depth
            .unwrap_or(DEFAULT_MAX_SPAWN_DEPTH)
            .clamp(1, MAX_SPAWN_DEPTH_LIMIT)
    }

    /// Active children one session may have, 1–20.
    pub fn max_children_per_agent(&self) -> u32 {
        self.max_children_per_agent
            .unwrap_or(DEFAULT_MAX_CHILDREN_PER_AGENT)
            .clamp(1, MAX_CHILDREN_PER_AGENT_LIMIT)
    }

    /// Sub-agent runs at the same time across all sessions (at least 1).
    pub fn max_concurrent(&self) -> u32 {
        self.max_concurrent.unwrap_or(DEFAULT_MAX_CONCURRENT).max(1)
    }

    /// How long after it ended a kept sub-agent session is archived; `None` never.
    pub fn archive_after_ms(&self) -> Option<u64> {
        let minutes = self
            .archive_after_minutes
            .unwrap_or(DEFAULT_ARCHIVE_AFTER_MINUTES);
        (minutes > 0).then(|| minutes.saturating_mul(60_000))
    }

    /// The default run time limit in seconds; `None` for no limit.
    pub fn run_timeout_seconds(&self) -> Option<u64> {
        Some(
            self.run_timeout_seconds
                .unwrap_or(DEFAULT_RUN_TIMEOUT_SECONDS),
        )
        .filter(|&seconds| seconds > 0)
    }

    /// Milliseconds one announce attempt may take, 1…2,147,000,000.
    pub fn announce_timeout_ms(&self) -> u64 {
        self.announce_timeout_ms
            .unwrap_or(DEFAULT_ANNOUNCE_TIMEOUT_MS)
            .clamp(1, MAX_ANNOUNCE_TIMEOUT_MS)
    }

    /// The configured model of sub-agent runs, if any (blank counts as unset).
    pub fn model(&self) -> Option<&str> {
        non_blank(self.model.as_deref())
    }

    /// The configured thinking level of sub-agent runs, if any (blank counts as unset).
    pub fn thinking(&self) -> Option<&str> {
        non_blank(self.thinking.as_deref())
    }

    /// Whether `sessions_spawn` must name `agentId`.
    pub fn require_agent_id(&self) -> bool {
        self.require_agent_id.unwrap_or(DEFAULT_REQUIRE_AGENT_ID)
    }

    /// Whether `allowAgents` contains `*`.
    pub fn allows_any_agent(&self) -> bool {
        self.allow_agents
            .iter()
            .flatten()
            .any(|entry| entry.trim() == ALLOW_ANY_AGENT)
    }

    /// The agents `allowAgents` names (normalised, sorted, without `*` and duplicates).
    pub fn allowed_agent_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .allow_agents
            .iter()
            .flatten()
            .map(|entry| entry.trim())
            .filter(|entry| !entry.is_empty() && *entry != ALLOW_ANY_AGENT)
            .map(normalize_agent_id)
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }
}

/// Which sessions the `sessions_*` tools may see and act on (`tools.sessions.visibility`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum SessionVisibility {
    /// Only the calling session.
    #[serde(rename = "self")]
    SelfOnly,
    /// The calling session and the sub-agent sessions it spawned, transitively.
    #[default]
    Tree,
    /// Every session of the caller's agent.
    Agent,
    /// Every session, other agents' too (those also need `tools.agentToAgent`).
    All,
}

impl SessionVisibility {
    /// The value as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SelfOnly => "self",
            Self::Tree => "tree",
            Self::Agent => "agent",
            Self::All => "all",
        }
    }
}

/// `tools.sessions`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionToolsConfig {
    /// Which sessions `sessions_list`, `sessions_history` and `sessions_send` may reach:
    /// `self` (only the calling session), `tree` (it and the sub-agents it spawned),
    /// `agent` (every session of its agent) or `all` (other agents' too, when
    /// `tools.agentToAgent` allows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(extend("default" = DEFAULT_SESSION_VISIBILITY.as_str()))
    )]
    pub visibility: Option<SessionVisibility>,
}

impl SessionToolsConfig {
    /// The visibility, `tree` when unset.
    pub fn visibility(&self) -> SessionVisibility {
        self.visibility.unwrap_or(DEFAULT_SESSION_VISIBILITY)
    }
}

/// `tools.agentToAgent`: whether sessions of one agent may reach another agent's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentToAgentConfig {
    /// Whether cross-agent session access (with `tools.sessions.visibility: all`) is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(extend("default" = DEFAULT_AGENT_TO_AGENT_ENABLED))
    )]
    pub enabled: Option<bool>,
    /// Agent ids (`*` globs allowed) that may take part; both sides must match. Unset or
    /// `[]`: any agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = [])))]
    pub allow: Option<Vec<String>>,
}

impl AgentToAgentConfig {
    /// Whether cross-agent access is on.
    pub fn enabled(&self) -> bool {
        self.enabled.unwrap_or(DEFAULT_AGENT_TO_AGENT_ENABLED)
    }

    /// Whether both agents match `allow` (compared case-insensitively; an empty list
    /// allows any agent).
    pub fn allows(&self, requester_agent_id: &str, target_agent_id: &str) -> bool {
        let patterns: Vec<String> = self
            .allow
            .iter()
            .flatten()
            .map(|pattern| pattern.trim().to_ascii_lowercase())
            .filter(|pattern| !pattern.is_empty())
            .collect();
        if patterns.is_empty() {
            return true;
        }
        let matches = |agent: &str| {
            let agent = agent.trim().to_ascii_lowercase();
            patterns
                .iter()
                .any(|pattern| clawless_exec::allowlist::glob_matches(pattern, &agent))
        };
        matches(requester_agent_id) && matches(target_agent_id)
    }
}

/// `session.agentToAgent`: the follow-up exchange after `sessions_send`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionAgentToAgentConfig {
    /// How many alternating reply turns two agents' sessions may take after a
    /// `sessions_send` (0–5; 0: none, only the final announce step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_MAX_PING_PONG_TURNS)))]
    pub max_ping_pong_turns: Option<i64>,
}

impl SessionAgentToAgentConfig {
    /// The ping-pong turns, clamped to 0–5.
    pub fn max_ping_pong_turns(&self) -> u32 {
        let turns = self
            .max_ping_pong_turns
            .unwrap_or(i64::from(DEFAULT_MAX_PING_PONG_TURNS))
            .clamp(0, i64::from(DEFAULT_MAX_PING_PONG_TURNS));
        u32::try_from(turns).unwrap_or(DEFAULT_MAX_PING_PONG_TURNS)
    }
}

/// `text` trimmed, or `None` when it is blank.
pub(super) fn non_blank(text: Option<&str>) -> Option<&str> {
    text.map(str::trim).filter(|text| !text.is_empty())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn subagents(value: serde_json::Value) -> SubagentsConfig {
        serde_json::from_value(value).expect("valid subagents config")
    }

    #[test]
    fn defaults_match_openclaw() {
        let config = SubagentsConfig::default();
        assert_eq!(config.max_spawn_depth(), 1);
        assert_eq!(config.max_children_per_agent(), 5);
        assert_eq!(config.max_concurrent(), 8);
        assert_eq!(config.archive_after_ms(), Some(60 * 60_000));
        assert_eq!(config.run_timeout_seconds(), None);
        assert_eq!(config.announce_timeout_ms(), 120_000);
        assert_eq!((config.model(), config.thinking()), (None, None));
        assert!(!config.require_agent_id() && !config.allows_any_agent());
        assert!(config.allowed_agent_ids().is_empty());
        assert_eq!(
            SessionToolsConfig::default().visibility(),
            SessionVisibility::Tree
        );
        assert!(!AgentToAgentConfig::default().enabled());
        assert_eq!(
            SessionAgentToAgentConfig::default().max_ping_pong_turns(),
            5
        );
    }

    #[test]
    fn limits_are_clamped_and_zero_switches_off() {
        let config = subagents(json!({
            "maxSpawnDepth": 9, "maxChildrenPerAgent": 0, "maxConcurrent": 0,
            "archiveAfterMinutes": 0, "runTimeoutSeconds": 90, "announceTimeoutMs": 0
        }));
        assert_eq!(config.max_spawn_depth(), 5);
        assert_eq!(config.max_children_per_agent(), 1);
        assert_eq!(config.max_concurrent(), 1);
        assert_eq!(config.archive_after_ms(), None);
        assert_eq!(config.run_timeout_seconds(), Some(90));
        assert_eq!(config.announce_timeout_ms(), 1);
        let config = subagents(json!({"maxSpawnDepth": 0, "maxChildrenPerAgent": 50}));
        assert_eq!(config.max_spawn_depth(), 1);
        assert_eq!(config.max_children_per_agent(), 20);
    }

    #[test]
    fn an_agents_own_block_replaces_the_default_keys_it_sets() {
        let defaults = subagents(json!({
            "maxSpawnDepth": 2, "model": "anthropic/claude-haiku", "thinking": "low",
            "allowAgents": ["ops"]
        }));
        let own: AgentSubagentsConfig =
            serde_json::from_value(json!({"allowAgents": ["*"], "requireAgentId": true}))
                .expect("valid agent block");
        let merged = defaults.for_agent(Some(&own));
        assert_eq!(merged.max_spawn_depth(), 2);
        assert_eq!(merged.model(), Some("anthropic/claude-haiku"));
        assert!(merged.allows_any_agent() && merged.require_agent_id());
        assert_eq!(defaults.for_agent(None), defaults);
        assert!(
            serde_json::from_value::<AgentSubagentsConfig>(json!({"maxSpawnDepth": 2})).is_err(),
            "limits are global"
        );
    }

    #[test]
    fn allow_agents_lists_normalised_ids_and_star() {
        let config = subagents(json!({"allowAgents": [" Ops ", "research", "*", "ops", ""]}));
        assert!(config.allows_any_agent());
        assert_eq!(config.allowed_agent_ids(), ["ops", "research"]);
    }

    #[test]
    fn unknown_keys_are_refused() {
        for bad in [
            json!({"maxDepth": 2}),
            json!({"allowAgent": ["x"]}),
            json!({"model": {"primary": "x"}}),
        ] {
            assert!(
                serde_json::from_value::<SubagentsConfig>(bad.clone()).is_err(),
                "{bad}"
            );
        }
        assert!(
            serde_json::from_value::<SessionToolsConfig>(json!({"visibility": "spawned"})).is_err()
        );
        assert!(serde_json::from_value::<AgentToAgentConfig>(json!({"allowed": []})).is_err());
    }

    #[test]
    fn visibility_and_agent_to_agent_parse() {
        let sessions: SessionToolsConfig =
            serde_json::from_value(json!({"visibility": "self"})).expect("valid");
        assert_eq!(sessions.visibility(), SessionVisibility::SelfOnly);
        let a2a: AgentToAgentConfig =
            serde_json::from_value(json!({"enabled": true, "allow": ["main", "ops-*"]}))
                .expect("valid");
        assert!(a2a.enabled());
        assert!(a2a.allows("main", "ops-eu") && a2a.allows("Main", "OPS-us"));
        assert!(!a2a.allows("main", "research") && !a2a.allows("research", "main"));
        assert!(AgentToAgentConfig::default().allows("a", "b"));
    }

    /// Spec §6 vector 49.
    #[test]
    fn vector_49_ping_pong_turns_are_clamped_to_0_through_5() {
        let turns = |value: i64| {
            serde_json::from_value::<SessionAgentToAgentConfig>(
                json!({ "maxPingPongTurns": value }),
            )
            .expect("valid")
            .max_ping_pong_turns()
        };
        assert_eq!(turns(9), 5);
        assert_eq!(turns(-1), 0);
        assert_eq!(turns(3), 3);
    }

    #[cfg(feature = "schema")]
    #[test]
    fn the_schema_documents_every_key_with_its_default() {
        fn check(schema: serde_json::Value) {
            let properties = schema["properties"].as_object().expect("properties");
            assert_eq!(schema["additionalProperties"], false);
            for (key, property) in properties {
                assert!(
                    property["description"]
                        .as_str()
                        .is_some_and(|d| !d.is_empty()),
                    "{key} has no description"
                );
                assert!(property.get("default").is_some(), "{key} has no default");
            }
        }
        let defaults =
            serde_json::to_value(schemars::schema_for!(SubagentsConfig)).expect("schema");
        assert_eq!(defaults["properties"]["maxSpawnDepth"]["default"], 1);
        assert_eq!(defaults["properties"]["allowAgents"]["default"], json!([]));
        check(defaults);
        check(serde_json::to_value(schemars::schema_for!(AgentSubagentsConfig)).expect("schema"));
        let sessions =
            serde_json::to_value(schemars::schema_for!(SessionToolsConfig)).expect("schema");
        assert_eq!(sessions["properties"]["visibility"]["default"], "tree");
        check(sessions);
        check(serde_json::to_value(schemars::schema_for!(AgentToAgentConfig)).expect("schema"));
        check(
            serde_json::to_value(schemars::schema_for!(SessionAgentToAgentConfig)).expect("schema"),
        );
    }
}
