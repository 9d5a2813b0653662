//! Which sessions run sandboxed, and where a sandboxed session keeps its files.
//!
//! This module owns `agents.defaults.sandbox` / `agents.list[].sandbox` ([`SandboxConfig`],
//! merged key by key into a [`SandboxSettings`]), the decision whether a session is sandboxed
//! ([`SandboxSettings::is_sandboxed`]), the scope key and slug that name a sandbox workspace
//! ([`scope_key`], [`slug`]), and who sees the agent's memory ([`MemoryConfig`]). It is pure:
//! the runtime opens the store, seeds the sandbox workspace with the bootstrap files and
//! narrows the tools.
//!
//! The decision is made from the session (its key and its recorded trust), never from a tool
//! argument or anything the model says. clawless adds a mode to OpenClaw's `off`, `non-main`
//! and `all`: **`untrusted`, the default**, which sandboxes a session once a message from anyone
//! but an owner has started a turn in it. Sub-agents inherit their parent's trust.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use clawless_base::session_key::{SessionKey, normalize_agent_id};

use crate::subagents::sessions_tools::SessionKind;

/// When a session is sandboxed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Never.
    Off,
    /// Every session but the agent's main one (`agent:<id>:main`).
    NonMain,
    /// Every session, the main one included.
    All,
    /// A session in which a message from anyone but an owner has started a turn (a group
    /// with members, an `allowFrom` direct chat, a generic-channel sender), from then on.
    #[default]
    Untrusted,
}

impl SandboxMode {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::NonMain => "non-main",
            Self::All => "all",
            Self::Untrusted => "untrusted",
        }
    }
}

/// Which sessions share one sandbox workspace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum SandboxScope {
    /// One per session: one group never sees another's files.
    #[default]
    Session,
    /// One per agent: every sandboxed session of the agent shares it.
    Agent,
    /// One for the whole deployment.
    Shared,
}

/// What a sandboxed session may do with the agent's own workspace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum WorkspaceAccess {
    /// Nothing: the session works in a writable sandbox workspace of its own, seeded once
    /// with the bootstrap files (never `MEMORY.md` or `memory/`).
    #[default]
    None,
    /// Its own sandbox workspace, read-only: no write tools are offered.
    Ro,
    /// The agent's workspace itself, read-write.
    Rw,
}

impl WorkspaceAccess {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Ro => "ro",
            Self::Rw => "rw",
        }
    }
}

/// Whether a sandboxed session's commands reach a network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum SandboxNetwork {
    /// None at all: the jail has only its own loopback device.
    #[default]
    None,
    /// The node host's own network.
    Node,
}

/// `agents.defaults.sandbox` and `agents.list[].sandbox`: every key optional; an agent's key
/// replaces the default's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxConfig {
    /// `off`, `non-main`, `all` or `untrusted` (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = "untrusted")))]
    pub mode: Option<SandboxMode>,
    /// `session` (the default), `agent` or `shared`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = "session")))]
    pub scope: Option<SandboxScope>,
    /// `none` (the default), `ro` or `rw`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = "none")))]
    pub workspace_access: Option<WorkspaceAccess>,
    /// OpenClaw's older spelling of `scope`: `true` is `session`, `false` is `shared`; an
    /// explicit `scope` wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub per_session: Option<bool>,
    /// `none` (the default: the jail of a command has no network) or `node` (the node
    /// host's own network).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = "none")))]
    pub network: Option<SandboxNetwork>,
}

impl SandboxConfig {
    /// `scope`, else what `perSession` says.
    fn scope(&self) -> Option<SandboxScope> {
        self.scope
            .or(self.per_session.map(|per_session| match per_session {
                true => SandboxScope::Session,
                false => SandboxScope::Shared,
            }))
    }
}

/// Whether memory (`MEMORY.md`, `memory/`, the memory tools) reaches group and channel
/// sessions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum MemoryInGroups {
    /// Never: a group's prompt has no `MEMORY.md` and its tools no `memory_search` or
    /// `memory_get`.
    #[default]
    Deny,
    /// As in the owner's own chats, while only owners speak in the group (and it is not
    /// sandboxed).
    Allow,
}

/// `memory:`: who may see the agent's memory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryConfig {
    /// `deny` (the default) or `allow`: whether group and channel sessions get `MEMORY.md`
    /// and the memory tools. A sandboxed session never does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = "deny")))]
    pub groups: Option<MemoryInGroups>,
}

impl MemoryConfig {
    /// Whether the session `key` may see the agent's memory: never when it is sandboxed or
    /// when anyone but an owner has spoken in it (`untrusted`, spec seed 002 §2: memory is for
    /// the owner's private chats); a group or channel session only with `groups: allow`.
    pub fn reaches(&self, key: &str, sandboxed: bool, untrusted: bool) -> bool {
        !sandboxed
            && !untrusted
            && (SessionKind::of_key(key) != SessionKind::Group
                || self.groups.unwrap_or_default() == MemoryInGroups::Allow)
    }
}

/// The memory tools, which read `MEMORY.md` and `memory/`.
pub const MEMORY_TOOLS: [&str; 2] = ["memory_search", "memory_get"];

/// The sandbox settings of one agent, defaults applied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SandboxSettings {
    /// When a session is sandboxed.
    pub mode: SandboxMode,
    /// Which sessions share a sandbox workspace.
    pub scope: SandboxScope,
    /// What the session may do with the agent's workspace.
    pub workspace_access: WorkspaceAccess,
    /// Whether its commands reach a network.
    pub network: SandboxNetwork,
}

impl SandboxSettings {
    /// `agent` over `defaults`, key by key.
    pub fn resolve(defaults: Option<&SandboxConfig>, agent: Option<&SandboxConfig>) -> Self {
        Self {
            mode: agent
                .and_then(|config| config.mode)
                .or(defaults.and_then(|config| config.mode))
                .unwrap_or_default(),
            scope: agent
                .and_then(SandboxConfig::scope)
                .or(defaults.and_then(SandboxConfig::scope))
                .unwrap_or_default(),
            workspace_access: agent
                .and_then(|config| config.workspace_access)
                .or(defaults.and_then(|config| config.workspace_access))
                .unwrap_or_default(),
            network: agent
                .and_then(|config| config.network)
                .or(defaults.and_then(|config| config.network))
                .unwrap_or_default(),
        }
    }

    /// Whether the session `key` of `agent_id` runs sandboxed; `untrusted` is the session's
    /// recorded trust (a non-owner has started a turn in it, or its parent is untrusted).
    pub fn is_sandboxed(&self, agent_id: &str, key: &str, untrusted: bool) -> bool {
        match self.mode {
            SandboxMode::Off => false,
            SandboxMode::All => true,
            SandboxMode::NonMain => !is_main_key(agent_id, key),
            SandboxMode::Untrusted => untrusted,
        }
    }

    /// Whether a sandboxed session works in a sandbox workspace rather than the agent's.
    pub fn uses_own_workspace(&self) -> bool {
        self.workspace_access != WorkspaceAccess::Rw
    }
}

/// Whether `key` is the main session of `agent_id`: `main`, `agent:<id>:main`, or the
/// default agent's `agent:main:main`.
pub fn is_main_key(agent_id: &str, key: &str) -> bool {
    let key = key.trim().to_ascii_lowercase();
    key == "main" || key == SessionKey::main(agent_id).as_str() || key == "agent:main:main"
}

/// The key naming the sandbox workspace of session `key`: the session key itself, the agent
/// (`agent:<id>`), or `shared`.
pub fn scope_key(scope: SandboxScope, agent_id: &str, key: &str) -> String {
    match scope {
        SandboxScope::Session => {
            let key = key.trim();
            if key.is_empty() {
                "main".to_owned()
            } else {
                key.to_owned()
            }
        }
        SandboxScope::Agent => format!("agent:{}", normalize_agent_id(agent_id)),
        SandboxScope::Shared => "shared".to_owned(),
    }
}

/// The folder name of a scope key: lowercased, runs of characters outside `[a-z0-9._-]` as
/// one `-`, trimmed of `-`, at most 32 characters (`session` when empty), then `-` and the
/// first 8 hex digits of the SHA-256 of the trimmed key. `agent:main` → `agent-main-f331f052`.
pub fn slug(scope_key: &str) -> String {
    let trimmed = scope_key.trim();
    let mut cleaned = String::with_capacity(trimmed.len());
    for character in trimmed.to_lowercase().chars() {
        if character.is_ascii_lowercase()
            || character.is_ascii_digit()
            || matches!(character, '.' | '_' | '-')
        {
            cleaned.push(character);
        } else if !cleaned.ends_with('-') {
            cleaned.push('-');
        }
    }
    let base: String = cleaned.trim_matches('-').chars().take(32).collect();
    let base = if base.is_empty() {
        "session".to_owned()
    } else {
        base
    };
    let digest = Sha256::digest(trimmed.as_bytes());
    let hash: String = digest[..4]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("{base}-{hash}")
}

/// The folder, below the sandboxes root, of the sandbox workspace of `scope_key`: its slug,
/// or `shared/` for the deployment-wide one (OpenClaw uses the root itself; a folder of its
/// own keeps it apart from the per-session ones).
pub fn sandbox_dir(scope: SandboxScope, scope_key: &str) -> String {
    format!("{}/", sandbox_name(scope, scope_key))
}

/// The name of the sandbox workspace of `scope_key`: [`sandbox_dir`] without its `/`, which
/// a node host uses for its own folder of the same sandbox.
pub fn sandbox_name(scope: SandboxScope, scope_key: &str) -> String {
    match scope {
        SandboxScope::Shared => "shared".to_owned(),
        _ => slug(scope_key),
    }
}

/// The tools a read-only sandbox workspace does not offer.
pub const WRITE_TOOLS: [&str; 3] = ["write", "edit", "apply_patch"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_untrusted_session_none() {
        let settings = SandboxSettings::resolve(None, None);
        assert_eq!(settings.mode, SandboxMode::Untrusted);
        assert_eq!(settings.scope, SandboxScope::Session);
        assert_eq!(settings.workspace_access, WorkspaceAccess::None);
    }

    #[test]
    fn an_agents_keys_replace_the_defaults_one_by_one() {
        let defaults: SandboxConfig =
            serde_json::from_str(r#"{"mode": "all", "scope": "agent", "workspaceAccess": "ro"}"#)
                .expect("parses");
        let agent: SandboxConfig = serde_json::from_str(r#"{"mode": "off"}"#).expect("parses");
        let settings = SandboxSettings::resolve(Some(&defaults), Some(&agent));
        assert_eq!(settings.mode, SandboxMode::Off);
        assert_eq!(settings.scope, SandboxScope::Agent);
        assert_eq!(settings.workspace_access, WorkspaceAccess::Ro);
        let unknown = serde_json::from_str::<SandboxConfig>(r#"{"mode": "sometimes"}"#);
        assert!(unknown.is_err());
        let typo = serde_json::from_str::<SandboxConfig>(r#"{"scopes": "agent"}"#);
        assert!(typo.is_err());
    }

    #[test]
    fn non_main_sandboxes_every_key_but_the_main_one() {
        // TV-3, TV-4, TV-5.
        let non_main = SandboxSettings {
            mode: SandboxMode::NonMain,
            ..SandboxSettings::default()
        };
        let cases = [
            ("agent:main:main", false),
            ("main", false),
            ("agent:main:telegram:direct:42", true),
            ("agent:main:main:heartbeat", true),
            ("agent:main:subagent:abc", true),
            ("agent:main:cron:J:run:R", true),
            ("agent:main:slack:channel:c1", true),
        ];
        for (key, expected) in cases {
            assert_eq!(non_main.is_sandboxed("main", key, false), expected, "{key}");
        }
        let all = SandboxSettings {
            mode: SandboxMode::All,
            ..SandboxSettings::default()
        };
        assert!(all.is_sandboxed("main", "agent:main:main", false));
        assert!(
            !SandboxSettings {
                mode: SandboxMode::Off,
                ..SandboxSettings::default()
            }
            .is_sandboxed("main", "agent:main:slack:channel:c1", true)
        );
        assert!(non_main.is_sandboxed("ops", "agent:main:main:x", false));
        assert!(!non_main.is_sandboxed("ops", "agent:ops:main", false));
    }

    #[test]
    fn untrusted_follows_the_sessions_trust_not_its_key() {
        let settings = SandboxSettings::default();
        assert!(!settings.is_sandboxed("main", "agent:main:telegram:group:-100", false));
        assert!(settings.is_sandboxed("main", "agent:main:telegram:group:-100", true));
        assert!(settings.is_sandboxed("main", "agent:main:main", true));
    }

    #[test]
    fn slugs_match_openclaws() {
        // TV-7.
        assert_eq!(slug("agent:main"), "agent-main-f331f052");
        assert_eq!(
            slug("agent:main:telegram:group:-1001234567890"),
            "agent-main-telegram-group--10012-ef7c0b9c"
        );
        assert_eq!(
            scope_key(SandboxScope::Agent, "Main", "agent:main:telegram:group:-1"),
            "agent:main"
        );
        assert_eq!(scope_key(SandboxScope::Session, "main", "  "), "main");
        assert_eq!(scope_key(SandboxScope::Shared, "main", "x"), "shared");
        assert!(slug("::").starts_with("session-"));
        assert_eq!(sandbox_dir(SandboxScope::Shared, "shared"), "shared/");
        assert_eq!(
            sandbox_dir(SandboxScope::Agent, "agent:main"),
            "agent-main-f331f052/"
        );
    }

    #[test]
    fn a_slug_never_leaves_its_folder() {
        for key in [
            "../../etc",
            "a/b",
            "..",
            "agent:main:generic:direct:../x",
            "\0",
        ] {
            let slug = slug(key);
            assert!(!slug.contains(['/', '\0']), "{key} → {slug}");
            assert!(slug != ".." && slug != ".", "{key} → {slug}");
        }
    }

    /// TV-1, with clawless's departures: `untrusted` (not `off`) and scope `session` (not
    /// `agent`) by default; `none` and no network as in OpenClaw.
    #[test]
    fn tv1_the_defaults_of_an_empty_config() {
        let settings = SandboxSettings::resolve(None, None);
        assert_eq!(settings.mode, SandboxMode::Untrusted);
        assert_eq!(settings.scope, SandboxScope::Session);
        assert_eq!(settings.workspace_access, WorkspaceAccess::None);
        assert_eq!(settings.network, SandboxNetwork::None);
    }

    #[test]
    fn tv2_per_session_is_the_older_spelling_of_scope() {
        let scope = |json: serde_json::Value| {
            let config: SandboxConfig = serde_json::from_value(json).expect("parses");
            SandboxSettings::resolve(Some(&config), None).scope
        };
        assert_eq!(
            scope(serde_json::json!({"perSession": true})),
            SandboxScope::Session
        );
        assert_eq!(
            scope(serde_json::json!({"perSession": false})),
            SandboxScope::Shared
        );
        assert_eq!(
            scope(serde_json::json!({"perSession": false, "scope": "session"})),
            SandboxScope::Session
        );
    }

    #[test]
    fn memory_reaches_groups_only_when_allowed_and_never_a_sandbox() {
        let default = MemoryConfig::default();
        assert!(default.reaches("agent:main:main", false, false));
        assert!(default.reaches("agent:main:telegram:direct:42", false, false));
        assert!(!default.reaches("agent:main:telegram:group:-100", false, false));
        assert!(!default.reaches("agent:main:slack:channel:c1:thread:9", false, false));
        assert!(!default.reaches("agent:main:main", true, false));
        let allow: MemoryConfig = serde_json::from_str(r#"{"groups": "allow"}"#).expect("parses");
        assert!(allow.reaches("agent:main:discord:channel:1", false, false));
        assert!(!allow.reaches("agent:main:discord:channel:1", true, false));
        // Another sender's session never gets it, whatever the kind or the config.
        for memory in [&default, &allow] {
            for key in ["agent:main:main", "agent:main:telegram:direct:42"] {
                assert!(!memory.reaches(key, false, true), "{key}");
            }
        }
        assert!(!allow.reaches("agent:main:discord:channel:1", false, true));
    }

    #[test]
    fn seeds_never_include_memory() {
        // A sandbox workspace is seeded with the bootstrap files: memory must not be one.
        let seeded = crate::system_prompt::bootstrap::BOOTSTRAP_FILE_NAMES;
        assert!(
            !seeded
                .iter()
                .any(|file| file.to_lowercase().contains("memory"))
        );
    }
}
