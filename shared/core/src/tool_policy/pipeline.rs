//! The tool policy pipeline (spec §11 "Pipeline order"): which of the tools this runtime has
//! are offered to the model for one turn, and the check every tool call must pass before it
//! runs.
//!
//! Each step filters what the previous one let through, so a tool is offered only when every
//! step allows it; no later step can bring back a tool an earlier one removed. Step 1 of the
//! spec (what a channel or a model can use at all) is the runtime's knowledge: it passes the
//! candidates already filtered for both.
//!
//! This module decides; it never runs a tool and does not know what the tools do.

use std::collections::BTreeSet;

use indexmap::IndexMap;

use super::catalog::{
    CORE_TOOLS, PLUGINS_GROUP, ToolProfile, expand_tool_groups, is_owner_only, normalize_tool_name,
    tool_group,
};
use super::policy::{
    AgentToolsConfig, Pattern, ProviderToolPolicy, ToolPolicy, ToolPolicyMatcher, ToolsConfig,
};

/// `agents.defaults.subagents.maxSpawnDepth` when not configured.
pub const DEFAULT_MAX_SPAWN_DEPTH: u32 = 1;

/// Tools no sub-agent gets, unless `tools.subagents.tools` lifts the deny by name.
pub const SUBAGENT_DENIED_TOOLS: &[&str] = &[
    "gateway",
    "agents_list",
    "whatsapp_login",
    "session_status",
    "cron",
    "sessions_send",
];

/// Tools a leaf sub-agent (one that may not spawn further) additionally does not get.
pub const LEAF_SUBAGENT_DENIED_TOOLS: &[&str] = &[
    "subagents",
    "sessions_list",
    "sessions_history",
    "sessions_spawn",
];

/// The sandbox allowlist when none is configured. OpenClaw's, plus the read-only search
/// tools `grep`, `find` and `ls` it never builds: they see no more than `read` does.
pub const SANDBOX_DEFAULT_ALLOW: &[&str] = &[
    "exec",
    "process",
    "read",
    "write",
    "edit",
    "apply_patch",
    "grep",
    "find",
    "ls",
    "image",
    "sessions_list",
    "sessions_history",
    "sessions_send",
    "sessions_spawn",
    "sessions_yield",
    "subagents",
    "session_status",
];

/// The sandbox denylist when none is configured (channel ids are added to it, and explicit
/// sandbox `allow`/`alsoAllow` entries take out what they match).
pub const SANDBOX_DEFAULT_DENY: &[&str] = &["browser", "canvas", "nodes", "cron", "gateway"];

/// Longest tool name quoted back in a [`ToolNotAllowed`] message.
const MAX_QUOTED_NAME_CHARS: usize = 64;

/// Who is asking and where, for one turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyContext<'a> {
    /// Model provider id (`openai`, `anthropic`, …).
    pub provider: &'a str,
    /// Model id within the provider.
    pub model_id: &'a str,
    /// Whether the sender is known to be the owner. Unknown senders are not owners.
    pub sender_is_owner: bool,
    /// 0 for a top-level agent, 1 for its sub-agents, and so on.
    pub subagent_depth: u32,
    /// Depth at which a sub-agent may no longer spawn ([`DEFAULT_MAX_SPAWN_DEPTH`]).
    pub max_spawn_depth: u32,
    /// The group or channel tools policy, when the turn runs in one.
    pub group_policy: Option<&'a ToolPolicy>,
    /// Whether the turn runs in a sandboxed session: adds the "sandbox tools.allow" step,
    /// resolved by [`sandbox_tool_policy`] from `tools.sandbox.tools` and the agent's
    /// `tools.sandbox.tools`.
    pub sandboxed: bool,
    /// Chat channel ids added to the default sandbox denylist (`telegram`, `slack`, …).
    pub channel_ids: &'a [&'a str],
}

impl Default for PolicyContext<'_> {
    fn default() -> Self {
        PolicyContext {
            provider: "",
            model_id: "",
            sender_is_owner: false,
            subagent_depth: 0,
            max_spawn_depth: DEFAULT_MAX_SPAWN_DEPTH,
            group_policy: None,
            sandboxed: false,
            channel_ids: &[],
        }
    }
}

impl<'a> PolicyContext<'a> {
    /// A top-level, unsandboxed turn for a non-owner sender on this provider and model, with
    /// no group policy.
    pub fn new(provider: &'a str, model_id: &'a str) -> Self {
        PolicyContext {
            provider,
            model_id,
            ..PolicyContext::default()
        }
    }
}

/// The tools offered for one turn, in candidate order, and what the pipeline had to say about
/// the config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedTools {
    names: Vec<String>,
    warnings: Vec<String>,
}

impl AllowedTools {
    /// The tool names to offer the model, in the order the candidates came in.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Config problems found on the way (unknown allowlist entries, unknown profiles).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The offered name a call refers to, or `None` when the call must not run.
    ///
    /// The model must call a tool by exactly the name it was offered; only surrounding
    /// whitespace is forgiven. Case variants and aliases (`READ`, `bash` for `exec`) are
    /// refused even when the tool they normalise to is offered, so the name dispatched on is
    /// always one the policy passed. Dispatch on the returned name, not the raw one.
    pub fn resolve(&self, name: &str) -> Option<&str> {
        let name = name.trim();
        self.names
            .iter()
            .find(|offered| offered.as_str() == name)
            .map(String::as_str)
    }

    /// Whether a call with this name may run (see [`AllowedTools::resolve`]).
    pub fn is_allowed(&self, name: &str) -> bool {
        self.resolve(name).is_some()
    }

    /// [`AllowedTools::resolve`] as a result, with the tool error to hand back to the model.
    pub fn check(&self, name: &str) -> Result<&str, ToolNotAllowed> {
        self.resolve(name).ok_or_else(|| ToolNotAllowed::new(name))
    }
}

/// A tool call refused because the tool was not offered this turn. The call is never run;
/// the error goes back to the model as the tool's result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool {name:?} is not available in this session; call one of the tools you were given")]
pub struct ToolNotAllowed {
    /// The name the model used, trimmed and cut to a bounded length.
    pub name: String,
}

impl ToolNotAllowed {
    fn new(name: &str) -> Self {
        let name = name.trim();
        let name = match name.char_indices().nth(MAX_QUOTED_NAME_CHARS) {
            Some((cut, _)) => format!("{}…", &name[..cut]),
            None => name.to_owned(),
        };
        ToolNotAllowed { name }
    }
}

/// Runs the policy pipeline over the tools this runtime can offer and returns the ones every
/// step allows.
///
/// Steps, in order (spec §11): owner-only tools removed for non-owners; the profile (the
/// agent's wins) plus `alsoAllow`, where a `tools.exec` section implies `exec`/`process` and a
/// `tools.fs` section implies `read`/`write`/`edit`; the `byProvider` profile; global
/// allow/deny; `byProvider` allow/deny; agent allow/deny; agent `byProvider` allow/deny; the
/// group policy; the sandbox policy (sandboxed turns only); the sub-agent policy.
///
/// An allowlist naming only plugin tools is ignored (clawless has none, so honouring it would
/// remove every core tool). One that names only unknown tools is kept and so lets nothing
/// through: a typo should not open everything up. Both produce a warning.
pub fn resolve_allowed_tools(
    candidates: &[&str], global: &ToolsConfig, agent: Option<&AgentToolsConfig>,
    ctx: &PolicyContext<'_>,
) -> AllowedTools {
    let mut names: Vec<&str> = Vec::new();
    for &candidate in candidates {
        if !candidate.trim().is_empty() && !names.contains(&candidate) {
            names.push(candidate);
        }
    }
    if !ctx.sender_is_owner {
        names.retain(|name| !is_owner_only(name));
    }

    let known: BTreeSet<String> = CORE_TOOLS
        .iter()
        .map(|tool| tool.id.to_owned())
        .chain(names.iter().map(|name| normalize_tool_name(name)))
        .collect();
    let mut warnings = Vec::new();
    for step in pipeline_steps(global, agent, ctx, &mut warnings) {
        let Some(policy) = checked_policy(step, &known, &mut warnings) else {
            continue;
        };
        let matcher = ToolPolicyMatcher::new(&policy);
        names.retain(|name| matcher.allows(name));
    }

    AllowedTools {
        names: names.into_iter().map(str::to_owned).collect(),
        warnings,
    }
}

/// The sandbox tools policy (spec `openclaw-sandbox.md` §2.1), from `tools.sandbox.tools`
/// (`global`) and the agent's `tools.sandbox.tools` (`agent`).
///
/// Each of `allow`, `alsoAllow` and `deny` is taken from the agent when it sets that list,
/// else from the global config; the two are never merged. The returned policy has no
/// `alsoAllow`; it is folded into `allow`:
/// - allow: unset → [`SANDBOX_DEFAULT_ALLOW`] plus `alsoAllow`; `[]` → every tool (`alsoAllow`
///   ignored); otherwise the list plus `alsoAllow`.
/// - deny: set → exactly that list; unset → [`SANDBOX_DEFAULT_DENY`] and `channel_ids`, minus
///   every entry an explicit `allow` or `alsoAllow` entry matches (groups expanded, globs
///   honoured, so `allow: ["*"]` empties it).
/// - `image` is added to a non-empty allowlist unless the denylist names it (exactly, after
///   group expansion) or the allowlist already does.
pub fn sandbox_tool_policy(
    global: Option<&ToolPolicy>, agent: Option<&ToolPolicy>, channel_ids: &[&str],
) -> ToolPolicy {
    let pick = |list: fn(&ToolPolicy) -> &Option<Vec<String>>| {
        agent
            .and_then(|policy| list(policy).clone())
            .or_else(|| global.and_then(|policy| list(policy).clone()))
    };
    let configured_allow = pick(|policy| &policy.allow);
    let also_allow = pick(|policy| &policy.also_allow).unwrap_or_default();
    let configured_deny = pick(|policy| &policy.deny);

    let explicit: Vec<Pattern> =
        expand_tool_groups(configured_allow.iter().flatten().chain(&also_allow))
            .into_iter()
            .map(Pattern::compile)
            .collect();
    let mut allow = configured_allow.unwrap_or_else(|| {
        SANDBOX_DEFAULT_ALLOW
            .iter()
            .map(|s| (*s).to_owned())
            .collect()
    });
    // `allow: []` allows every tool; `alsoAllow` cannot narrow that.
    if !allow.is_empty() {
        allow.extend(also_allow);
    }
    let deny = configured_deny.unwrap_or_else(|| {
        expand_tool_groups(SANDBOX_DEFAULT_DENY.iter().chain(channel_ids))
            .into_iter()
            .filter(|denied| !explicit.iter().any(|pattern| pattern.matches(denied)))
            .collect()
    });

    let image_denied = expand_tool_groups(&deny).iter().any(|name| name == "image");
    let image_allowed = expand_tool_groups(&allow)
        .iter()
        .any(|name| name == "image");
    // An empty allowlist already allows everything; adding `image` would shrink it to one tool.
    if !allow.is_empty() && !image_denied && !image_allowed {
        allow.push("image".to_owned());
    }
    ToolPolicy {
        allow: Some(allow),
        deny: Some(deny),
        also_allow: None,
    }
}

/// One labelled step of the pipeline.
struct Step {
    /// The allowlist as named in warnings (`tools.allow`, `tools.profile (coding)`, …).
    label: String,
    policy: ToolPolicy,
}

fn pipeline_steps(
    global: &ToolsConfig, agent: Option<&AgentToolsConfig>, ctx: &PolicyContext<'_>,
    warnings: &mut Vec<String>,
) -> Vec<Step> {
    let mut steps = Vec::new();
    let global_provider = provider_entry(&global.by_provider, ctx);
    let agent_provider = agent.and_then(|agent| provider_entry(&agent.by_provider, ctx));

    let agent_profile = agent.and_then(|agent| agent.profile.as_deref());
    let (profile_label, profile) = match agent_profile {
        Some(profile) => ("agent tools.profile", Some(profile)),
        None => ("tools.profile", global.profile.as_deref()),
    };
    let mut also_allow = agent
        .and_then(|agent| agent.also_allow.clone())
        .or_else(|| global.also_allow.clone())
        .unwrap_or_default();
    if global.exec.is_some() {
        also_allow.extend(["exec".to_owned(), "process".to_owned()]);
    }
    if global.fs.is_some() {
        also_allow.extend(["read".to_owned(), "write".to_owned(), "edit".to_owned()]);
    }
    steps.extend(profile_step(profile_label, profile, also_allow, warnings));

    let (provider_label, provider_profile) = match (agent_provider, global_provider) {
        (Some((key, entry)), _) if entry.profile.is_some() => {
            (format!("agent tools.byProvider.{key}.profile"), Some(entry))
        }
        (_, Some((key, entry))) => (format!("tools.byProvider.{key}.profile"), Some(entry)),
        _ => (String::new(), None),
    };
    if let Some(entry) = provider_profile {
        let also_allow = entry.also_allow.clone().unwrap_or_default();
        steps.extend(profile_step(
            &provider_label,
            entry.profile.as_deref(),
            also_allow,
            warnings,
        ));
    }

    let allowlists = [
        Some(("tools.allow".to_owned(), global.policy())),
        global_provider
            .map(|(key, entry)| (format!("tools.byProvider.{key}.allow"), entry.policy())),
        agent.map(|agent| ("agent tools.allow".to_owned(), agent.policy())),
        agent_provider.map(|(key, entry)| {
            (
                format!("agent tools.byProvider.{key}.allow"),
                entry.policy(),
            )
        }),
        ctx.group_policy
            .map(|policy| ("group tools.allow".to_owned(), policy.clone())),
        ctx.sandboxed.then(|| {
            let global = global.sandbox.as_ref().map(|sandbox| &sandbox.tools);
            let agent = agent
                .and_then(|agent| agent.sandbox.as_ref())
                .map(|sandbox| &sandbox.tools);
            (
                "sandbox tools.allow".to_owned(),
                sandbox_tool_policy(global, agent, ctx.channel_ids),
            )
        }),
    ];
    steps.extend(
        allowlists
            .into_iter()
            .flatten()
            .map(|(label, policy)| Step { label, policy }),
    );
    if ctx.subagent_depth > 0 {
        let configured = global.subagents.as_ref().map(|subagents| &subagents.tools);
        steps.push(Step {
            label: "subagent tools.allow".to_owned(),
            policy: subagent_policy(configured, ctx.subagent_depth >= ctx.max_spawn_depth),
        });
    }
    steps
}

/// The profile as an allowlist step; `None` when there is no profile or it restricts nothing.
fn profile_step(
    label: &str, profile: Option<&str>, also_allow: Vec<String>, warnings: &mut Vec<String>,
) -> Option<Step> {
    let raw = profile?;
    let Some(profile) = ToolProfile::parse(raw) else {
        warnings.push(format!(
            "tools: {label} {raw:?} is not a known profile (minimal, coding, messaging, full); \
             it restricts nothing."
        ));
        return None;
    };
    let tools = profile.tools()?;
    Some(Step {
        label: format!("{label} ({})", profile.id()),
        policy: ToolPolicy {
            allow: Some(tools.into_iter().map(str::to_owned).collect()),
            deny: None,
            also_allow: Some(also_allow),
        },
    })
}

/// The entry for `<provider>/<modelId>`, else for `<provider>`; keys compare lowercased and
/// trimmed, and the first of several keys that differ only in case wins.
fn provider_entry<'c>(
    by_provider: &'c IndexMap<String, ProviderToolPolicy>, ctx: &PolicyContext<'_>,
) -> Option<(&'c str, &'c ProviderToolPolicy)> {
    let provider = ctx.provider.trim().to_lowercase();
    if provider.is_empty() || by_provider.is_empty() {
        return None;
    }
    let model = ctx.model_id.trim().to_lowercase();
    let mut lookups = Vec::with_capacity(2);
    if !model.is_empty() {
        lookups.push(format!("{provider}/{model}"));
    }
    lookups.push(provider);
    lookups.iter().find_map(|wanted| {
        by_provider
            .iter()
            .find(|(key, _)| key.trim().to_lowercase() == *wanted)
            .map(|(key, entry)| (key.as_str(), entry))
    })
}

/// The built-in sub-agent denies, minus those `allow`/`alsoAllow` name (exactly, or through
/// a group; a glob lifts nothing, so `*` does not reopen `gateway`), plus the configured
/// denies. The configured `allow` still restricts like any allowlist.
fn subagent_policy(configured: Option<&ToolPolicy>, leaf: bool) -> ToolPolicy {
    let configured = configured.cloned().unwrap_or_default();
    let lifted: BTreeSet<String> = expand_tool_groups(
        configured
            .allow
            .iter()
            .flatten()
            .chain(configured.also_allow.iter().flatten()),
    )
    .into_iter()
    .collect();
    let base = SUBAGENT_DENIED_TOOLS.iter().chain(if leaf {
        LEAF_SUBAGENT_DENIED_TOOLS
    } else {
        &[]
    });
    let mut deny: Vec<String> = base
        .filter(|tool| !lifted.contains(**tool))
        .map(|tool| (*tool).to_owned())
        .collect();
    deny.extend(configured.deny.into_iter().flatten());
    ToolPolicy {
        allow: configured.allow,
        deny: Some(deny),
        also_allow: configured.also_allow,
    }
}

/// How an allowlist entry relates to the tools that exist.
enum EntryKind {
    /// Names or matches at least one core or candidate tool.
    Known,
    /// Names plugin tools only.
    Plugin,
    /// Matches nothing.
    Unknown,
}

fn classify_entry(entry: &str, known: &BTreeSet<String>) -> EntryKind {
    let name = normalize_tool_name(entry);
    if name == PLUGINS_GROUP {
        return EntryKind::Plugin;
    }
    if let Some(members) = tool_group(&name) {
        return if members.is_empty() {
            EntryKind::Unknown
        } else {
            EntryKind::Known
        };
    }
    if name.is_empty() {
        return EntryKind::Unknown;
    }
    let pattern = Pattern::compile(name);
    if known.iter().any(|tool| pattern.matches(tool)) {
        EntryKind::Known
    } else {
        EntryKind::Unknown
    }
}

/// Checks a step's allowlist against the known tools, warning about entries that match
/// nothing, and drops a plugin-only allowlist. `None` when the step restricts nothing.
fn checked_policy(
    step: Step, known: &BTreeSet<String>, warnings: &mut Vec<String>,
) -> Option<ToolPolicy> {
    let Step { label, mut policy } = step;
    if policy.is_unrestricted() {
        return None;
    }
    let Some(entries) = policy.effective_allow() else {
        return Some(policy);
    };
    let mut unknown = Vec::new();
    let mut plugin = Vec::new();
    let mut any_known = false;
    for entry in entries {
        match classify_entry(entry, known) {
            EntryKind::Known => any_known = true,
            EntryKind::Plugin => plugin.push(quoted_entry(entry)),
            EntryKind::Unknown => unknown.push(quoted_entry(entry)),
        }
    }
    if !any_known && unknown.is_empty() {
        warnings.push(format!(
            "tools: {label} allowlist contains unknown entries ({}). It names only plugin \
             tools and none are installed, so it is ignored and core tools stay available; \
             use alsoAllow to add tools without restricting.",
            plugin.join(", ")
        ));
        policy.allow = None;
        policy.also_allow = None;
        return (!policy.is_unrestricted()).then_some(policy);
    }
    if !unknown.is_empty() {
        let tail = if any_known {
            "They match no tool and are ignored; check their spelling."
        } else {
            "Nothing in it matches a tool, so this step lets no tool through; check the \
             spelling or remove the allowlist."
        };
        unknown.extend(plugin);
        warnings.push(format!(
            "tools: {label} allowlist contains unknown entries ({}). {tail}",
            unknown.join(", ")
        ));
    }
    Some(policy)
}

fn quoted_entry(entry: &str) -> String {
    let trimmed = entry.trim();
    if trimmed.is_empty() {
        "\"\"".to_owned()
    } else {
        trimmed.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::super::policy::SandboxToolsConfig;
    use super::*;

    /// Every core tool plus one the catalog does not know.
    fn all_tools() -> Vec<&'static str> {
        CORE_TOOLS
            .iter()
            .map(|tool| tool.id)
            .chain(["whatsapp_login"])
            .collect()
    }

    fn owner() -> PolicyContext<'static> {
        PolicyContext {
            sender_is_owner: true,
            ..PolicyContext::new("openai", "gpt-5")
        }
    }

    fn strings(list: &[&str]) -> Option<Vec<String>> {
        Some(list.iter().map(|s| (*s).to_owned()).collect())
    }

    fn resolve(
        global: &ToolsConfig, agent: Option<&AgentToolsConfig>, ctx: &PolicyContext<'_>,
    ) -> AllowedTools {
        resolve_allowed_tools(&all_tools(), global, agent, ctx)
    }

    fn offered(allowed: &AllowedTools) -> Vec<&str> {
        allowed.names().iter().map(String::as_str).collect()
    }

    #[test]
    fn with_no_config_an_owner_gets_every_candidate_in_order() {
        // GIVEN no tools config WHEN the owner asks THEN every candidate is offered, in order
        let allowed = resolve(&ToolsConfig::default(), None, &owner());
        assert_eq!(offered(&allowed), all_tools());
        assert!(allowed.warnings().is_empty());
    }

    #[test]
    fn owner_only_tools_are_removed_for_non_owners_whatever_the_config_says() {
        let global = ToolsConfig {
            allow: strings(&["*"]),
            also_allow: strings(&["cron", "gateway"]),
            ..ToolsConfig::default()
        };
        let allowed = resolve_allowed_tools(
            &["read", "cron", "CRON", "gateway", "nodes", "whatsapp_login"],
            &global,
            None,
            &PolicyContext::new("openai", "gpt-5"),
        );
        assert_eq!(offered(&allowed), vec!["read"]);
        assert!(!allowed.is_allowed("cron"));
    }

    #[test]
    fn the_owner_keeps_owner_only_tools() {
        let allowed = resolve_allowed_tools(
            &["read", "cron", "nodes"],
            &ToolsConfig::default(),
            None,
            &owner(),
        );
        assert_eq!(offered(&allowed), vec!["read", "cron", "nodes"]);
    }

    #[test]
    fn calls_must_use_the_exact_offered_name() {
        let global = ToolsConfig {
            allow: strings(&["read", "exec"]),
            ..ToolsConfig::default()
        };
        let allowed = resolve(&global, None, &owner());
        assert_eq!(offered(&allowed), vec!["read", "exec"]);
        assert!(allowed.is_allowed("read"));
        assert_eq!(allowed.resolve(" read\n"), Some("read"));
        for bypass in [
            "READ",
            "Read",
            "bash",
            "BASH",
            "Exec",
            "re ad",
            "read\u{200b}",
            "read*",
            "*",
            "",
            "group:fs",
            "apply_patch",
            "write",
        ] {
            assert!(!allowed.is_allowed(bypass), "{bypass:?} got through");
        }
    }

    #[test]
    fn a_refused_call_gets_a_bounded_tool_error() {
        let allowed = resolve(&ToolsConfig::default(), None, &owner());
        let long = "x".repeat(500);
        let error = allowed.check(&long).expect_err("unknown tool");
        assert_eq!(error.name.chars().count(), MAX_QUOTED_NAME_CHARS + 1);
        assert!(error.to_string().contains("is not available"));
        assert_eq!(allowed.check("read"), Ok("read"));
    }

    #[test]
    fn a_candidate_named_by_an_alias_is_matched_as_its_canonical_tool() {
        let global = ToolsConfig {
            deny: strings(&["exec"]),
            ..ToolsConfig::default()
        };
        let allowed = resolve_allowed_tools(&["bash", "BASH", "read"], &global, None, &owner());
        assert_eq!(offered(&allowed), vec!["read"]);
    }

    #[test]
    fn every_step_must_allow_so_an_agent_cannot_widen_the_global_allowlist() {
        let global = ToolsConfig {
            allow: strings(&["read"]),
            ..ToolsConfig::default()
        };
        let agent = AgentToolsConfig {
            allow: strings(&["exec", "read"]),
            ..AgentToolsConfig::default()
        };
        assert_eq!(
            offered(&resolve(&global, Some(&agent), &owner())),
            vec!["read"]
        );

        let agent = AgentToolsConfig {
            allow: strings(&["exec"]),
            ..AgentToolsConfig::default()
        };
        assert!(resolve(&global, Some(&agent), &owner()).names().is_empty());
    }

    #[test]
    fn the_coding_profile_drops_tools_outside_it_and_also_allow_adds_them_back() {
        let global = ToolsConfig {
            profile: Some("coding".into()),
            ..ToolsConfig::default()
        };
        let allowed = resolve(&global, None, &owner());
        assert!(allowed.is_allowed("read") && allowed.is_allowed("cron"));
        assert!(!allowed.is_allowed("browser") && !allowed.is_allowed("message"));

        let global = ToolsConfig {
            also_allow: strings(&["browser"]),
            ..global
        };
        let allowed = resolve(&global, None, &owner());
        assert!(allowed.is_allowed("browser"));
        assert!(!allowed.is_allowed("canvas"));
    }

    #[test]
    fn the_agent_profile_replaces_the_global_one() {
        let global = ToolsConfig {
            profile: Some("minimal".into()),
            ..ToolsConfig::default()
        };
        let agent = AgentToolsConfig {
            profile: Some("Coding".into()),
            ..AgentToolsConfig::default()
        };
        let allowed = resolve(&global, Some(&agent), &owner());
        assert!(allowed.is_allowed("read"));
        assert!(!allowed.is_allowed("browser"));
    }

    #[test]
    fn exec_and_fs_sections_imply_their_tools_under_a_profile() {
        let global = ToolsConfig {
            profile: Some("minimal".into()),
            exec: Some(serde_json::json!({})),
            fs: Some(serde_json::json!({"workspaceOnly": true})),
            ..ToolsConfig::default()
        };
        let allowed = resolve(&global, None, &owner());
        // `apply_patch` rides along with `write`.
        assert_eq!(
            offered(&allowed),
            vec![
                "read",
                "write",
                "edit",
                "apply_patch",
                "exec",
                "process",
                "session_status"
            ]
        );
    }

    #[test]
    fn an_unknown_profile_restricts_nothing_and_warns() {
        let global = ToolsConfig {
            profile: Some("everything".into()),
            ..ToolsConfig::default()
        };
        let allowed = resolve(&global, None, &owner());
        assert_eq!(allowed.names().len(), all_tools().len());
        assert_eq!(allowed.warnings().len(), 1);
        assert!(allowed.warnings()[0].contains("\"everything\" is not a known profile"));
    }

    #[test]
    fn by_provider_keys_match_case_insensitively_and_the_model_key_wins() {
        let mut by_provider = IndexMap::new();
        by_provider.insert(
            "OpenAI".to_owned(),
            ProviderToolPolicy {
                deny: strings(&["read"]),
                ..ProviderToolPolicy::default()
            },
        );
        by_provider.insert(
            " OpenAI/GPT-5 ".to_owned(),
            ProviderToolPolicy {
                deny: strings(&["exec"]),
                ..ProviderToolPolicy::default()
            },
        );
        let global = ToolsConfig {
            by_provider,
            ..ToolsConfig::default()
        };

        let ctx = PolicyContext {
            sender_is_owner: true,
            ..PolicyContext::new("OPENAI", "gpt-5")
        };
        let allowed = resolve(&global, None, &ctx);
        assert!(!allowed.is_allowed("exec"));
        assert!(
            allowed.is_allowed("read"),
            "only the most specific entry applies"
        );

        let ctx = PolicyContext {
            sender_is_owner: true,
            ..PolicyContext::new("openai", "gpt-4o")
        };
        let allowed = resolve(&global, None, &ctx);
        assert!(!allowed.is_allowed("read"));
        assert!(allowed.is_allowed("exec"));

        let ctx = PolicyContext {
            sender_is_owner: true,
            ..PolicyContext::new("anthropic", "gpt-5")
        };
        assert_eq!(
            resolve(&global, None, &ctx).names().len(),
            all_tools().len()
        );
    }

    #[test]
    fn a_by_provider_profile_narrows_the_base_profile() {
        let mut by_provider = IndexMap::new();
        by_provider.insert(
            "openai".to_owned(),
            ProviderToolPolicy {
                profile: Some("minimal".into()),
                ..ProviderToolPolicy::default()
            },
        );
        let global = ToolsConfig {
            profile: Some("coding".into()),
            by_provider,
            ..ToolsConfig::default()
        };
        assert_eq!(
            offered(&resolve(&global, None, &owner())),
            vec!["session_status"]
        );
    }

    #[test]
    fn agent_by_provider_policy_applies_after_the_agent_policy() {
        let mut by_provider = IndexMap::new();
        by_provider.insert(
            "OPENAI/gpt-5".to_owned(),
            ProviderToolPolicy {
                deny: strings(&["group:web"]),
                ..ProviderToolPolicy::default()
            },
        );
        let agent = AgentToolsConfig {
            allow: strings(&["group:web", "read"]),
            by_provider,
            ..AgentToolsConfig::default()
        };
        assert_eq!(
            offered(&resolve(&ToolsConfig::default(), Some(&agent), &owner())),
            vec!["read"]
        );
    }

    fn sandboxed(channel_ids: &'static [&'static str]) -> PolicyContext<'static> {
        PolicyContext {
            sandboxed: true,
            channel_ids,
            ..owner()
        }
    }

    fn with_sandbox_tools(tools: ToolPolicy) -> ToolsConfig {
        ToolsConfig {
            sandbox: Some(SandboxToolsConfig { tools }),
            ..ToolsConfig::default()
        }
    }

    fn default_deny_without(removed: &[&str], channel_ids: &[&str]) -> Option<Vec<String>> {
        Some(
            SANDBOX_DEFAULT_DENY
                .iter()
                .chain(channel_ids)
                .filter(|tool| !removed.contains(tool))
                .map(|tool| (*tool).to_owned())
                .collect(),
        )
    }

    #[test]
    fn group_and_sandbox_policies_filter_too() {
        let group = ToolPolicy::deny(["exec"]);
        let ctx = PolicyContext {
            group_policy: Some(&group),
            ..sandboxed(&["telegram"])
        };
        let allowed = resolve_allowed_tools(
            &["read", "exec", "browser", "telegram", "image"],
            &ToolsConfig::default(),
            None,
            &ctx,
        );
        assert_eq!(offered(&allowed), vec!["read", "image"]);
    }

    #[test]
    fn an_unsandboxed_turn_ignores_the_sandbox_tool_config() {
        let global = with_sandbox_tools(ToolPolicy::allow(["read"]));
        assert_eq!(
            resolve(&global, None, &owner()).names().len(),
            all_tools().len()
        );
    }

    /// Spec `openclaw-sandbox.md` §6 TV-8.
    #[test]
    fn tv8_a_sandboxed_turn_without_config_offers_only_the_default_allowlist() {
        let candidates = [
            "exec",
            "memory_search",
            "browser",
            "message",
            "web_fetch",
            "session_status",
        ];
        for ctx in [
            sandboxed(&["telegram"]),
            PolicyContext {
                sender_is_owner: false,
                ..sandboxed(&["telegram"])
            },
        ] {
            let allowed = resolve_allowed_tools(&candidates, &ToolsConfig::default(), None, &ctx);
            assert_eq!(offered(&allowed), vec!["exec", "session_status"]);
            assert!(allowed.warnings().is_empty(), "{:?}", allowed.warnings());
        }
    }

    /// Spec `openclaw-sandbox.md` §6 TV-9.
    #[test]
    fn tv9_an_explicit_sandbox_allow_takes_its_tools_out_of_the_default_deny() {
        let configured = ToolPolicy::allow(["browser"]);
        let policy = sandbox_tool_policy(Some(&configured), None, &["telegram"]);
        assert_eq!(policy.allow, strings(&["browser", "image"]));
        assert_eq!(
            policy.deny,
            default_deny_without(&["browser"], &["telegram"])
        );

        let allowed = resolve(
            &with_sandbox_tools(configured),
            None,
            &sandboxed(&["telegram"]),
        );
        assert_eq!(offered(&allowed), vec!["browser", "image"]);
        assert!(!allowed.is_allowed("read"));
    }

    /// Spec `openclaw-sandbox.md` §6 TV-10, first part.
    #[test]
    fn tv10_an_empty_sandbox_allow_allows_all_and_also_allow_only_lifts_the_deny() {
        let configured = ToolPolicy {
            allow: strings(&[]),
            also_allow: strings(&["browser"]),
            ..ToolPolicy::default()
        };
        let policy = sandbox_tool_policy(Some(&configured), None, &["telegram"]);
        assert_eq!(policy.allow, strings(&[]));
        assert_eq!(
            policy.deny,
            default_deny_without(&["browser"], &["telegram"])
        );

        let allowed = resolve(
            &with_sandbox_tools(configured),
            None,
            &sandboxed(&["telegram"]),
        );
        assert!(allowed.is_allowed("read") && allowed.is_allowed("browser"));
        assert!(allowed.is_allowed("web_fetch"));
        assert!(!allowed.is_allowed("canvas") && !allowed.is_allowed("gateway"));
    }

    /// Spec `openclaw-sandbox.md` §6 TV-10, second part.
    #[test]
    fn tv10_an_explicit_sandbox_deny_wins_over_allow_and_also_allow() {
        let configured = ToolPolicy {
            allow: strings(&["browser"]),
            also_allow: strings(&["message"]),
            deny: strings(&["browser", "message"]),
        };
        let policy = sandbox_tool_policy(Some(&configured), None, &["telegram"]);
        assert_eq!(policy.deny, strings(&["browser", "message"]));

        let allowed = resolve(
            &with_sandbox_tools(configured),
            None,
            &sandboxed(&["telegram"]),
        );
        assert_eq!(offered(&allowed), vec!["image"]);
    }

    /// Spec `openclaw-sandbox.md` §6 TV-11.
    #[test]
    fn tv11_the_agent_sandbox_allow_replaces_the_global_one() {
        let global = with_sandbox_tools(ToolPolicy::allow(["exec"]));
        let agent = AgentToolsConfig {
            sandbox: Some(SandboxToolsConfig {
                tools: ToolPolicy::allow(["read"]),
            }),
            ..AgentToolsConfig::default()
        };
        let policy = sandbox_tool_policy(
            Some(&ToolPolicy::allow(["exec"])),
            Some(&ToolPolicy::allow(["read"])),
            &[],
        );
        assert_eq!(policy.allow, strings(&["read", "image"]));

        let allowed = resolve(&global, Some(&agent), &sandboxed(&[]));
        assert_eq!(offered(&allowed), vec!["read", "image"]);
        assert!(!allowed.is_allowed("exec"));
    }

    #[test]
    fn sandbox_lists_are_picked_one_by_one_from_the_agent_else_the_global_config() {
        let global = ToolPolicy {
            also_allow: strings(&["web_fetch"]),
            deny: strings(&["exec"]),
            ..ToolPolicy::default()
        };
        let agent = ToolPolicy::allow(["read", "exec"]);
        let policy = sandbox_tool_policy(Some(&global), Some(&agent), &[]);
        assert_eq!(
            policy.allow,
            strings(&["read", "exec", "web_fetch", "image"])
        );
        assert_eq!(policy.deny, strings(&["exec"]));
        assert_eq!(policy.also_allow, None);

        // The agent's deny replaces the global one; the global alsoAllow still applies and
        // extends the default allowlist.
        let agent = ToolPolicy::deny(["process"]);
        let policy = sandbox_tool_policy(Some(&global), Some(&agent), &[]);
        let mut expected: Vec<&str> = SANDBOX_DEFAULT_ALLOW.to_vec();
        expected.push("web_fetch");
        assert_eq!(policy.allow, strings(&expected));
        assert_eq!(policy.deny, strings(&["process"]));
    }

    /// Spec `openclaw-sandbox.md` §6 TV-12.
    #[test]
    fn tv12_a_star_sandbox_allow_empties_the_default_deny() {
        let configured = ToolPolicy::allow(["*"]);
        let policy = sandbox_tool_policy(Some(&configured), None, &["telegram"]);
        assert_eq!(policy.deny, strings(&[]));

        let global = with_sandbox_tools(configured);
        let mut candidates = all_tools();
        candidates.push("telegram");
        let allowed = resolve_allowed_tools(&candidates, &global, None, &sandboxed(&["telegram"]));
        assert_eq!(offered(&allowed), candidates);

        // Owner-only tools are still removed, earlier, for anyone else.
        let ctx = PolicyContext {
            sender_is_owner: false,
            ..sandboxed(&["telegram"])
        };
        let allowed = resolve_allowed_tools(&candidates, &global, None, &ctx);
        for owner_only in ["cron", "gateway", "nodes", "whatsapp_login"] {
            assert!(!allowed.is_allowed(owner_only), "{owner_only}");
        }
        assert!(allowed.is_allowed("browser") && allowed.is_allowed("telegram"));
    }

    #[test]
    fn sandbox_allow_groups_and_globs_lift_default_denies_they_match() {
        let policy = sandbox_tool_policy(
            Some(&ToolPolicy::allow(["group:ui", "TELE*"])),
            None,
            &["telegram", "slack"],
        );
        assert_eq!(policy.deny, strings(&["nodes", "cron", "gateway", "slack"]));
    }

    #[test]
    fn sandbox_adds_image_to_an_explicit_allowlist() {
        let configured = ToolPolicy {
            allow: strings(&["read"]),
            deny: strings(&["browser"]),
            also_allow: None,
        };
        let policy = sandbox_tool_policy(Some(&configured), None, &[]);
        assert_eq!(policy.allow, strings(&["read", "image"]));
        assert_eq!(policy.deny, strings(&["browser"]));
    }

    #[test]
    fn sandbox_leaves_image_out_when_denied_listed_or_when_the_allowlist_is_empty() {
        for deny in ["IMAGE", "group:media"] {
            let denied = ToolPolicy {
                allow: strings(&["read"]),
                deny: strings(&[deny]),
                also_allow: None,
            };
            assert_eq!(
                sandbox_tool_policy(Some(&denied), None, &[]).allow,
                strings(&["read"]),
                "{deny}"
            );
        }
        let listed = ToolPolicy::allow(["group:media"]);
        assert_eq!(
            sandbox_tool_policy(Some(&listed), None, &[]).allow,
            strings(&["group:media"])
        );
        let open = ToolPolicy::allow(Vec::<String>::new());
        assert_eq!(
            sandbox_tool_policy(None, Some(&open), &[]).allow,
            strings(&[])
        );
    }

    #[test]
    fn sandbox_image_is_added_when_only_a_glob_denies_it() {
        // Only an exact deny entry keeps `image` out of the allowlist; the deny still wins.
        let configured = ToolPolicy {
            allow: strings(&["read"]),
            deny: strings(&["ima*"]),
            also_allow: None,
        };
        let policy = sandbox_tool_policy(Some(&configured), None, &[]);
        assert_eq!(policy.allow, strings(&["read", "image"]));
        assert!(!ToolPolicyMatcher::new(&policy).allows("image"));
    }

    #[test]
    fn sandbox_defaults_deny_channels() {
        let policy = sandbox_tool_policy(None, None, &["discord"]);
        let matcher = ToolPolicyMatcher::new(&policy);
        assert!(!matcher.allows("discord"));
        assert!(!matcher.allows("gateway"));
        assert!(matcher.allows("apply_patch"));
        assert!(!matcher.allows("web_fetch"));
    }

    #[test]
    fn sandbox_tool_config_parses_globally_and_per_agent() {
        let global: ToolsConfig = serde_json::from_value(serde_json::json!({
            "sandbox": {"tools": {"allow": ["browser"], "alsoAllow": ["message"], "deny": ["canvas"]}}
        }))
        .expect("valid tools config");
        assert_eq!(
            global.sandbox.expect("present").tools,
            ToolPolicy {
                allow: strings(&["browser"]),
                also_allow: strings(&["message"]),
                deny: strings(&["canvas"]),
            }
        );
        // `agents.list[].tools`
        let agent: AgentToolsConfig = serde_json::from_value(serde_json::json!({
            "sandbox": {"tools": {"allow": []}}
        }))
        .expect("valid agent tools config");
        assert_eq!(
            agent.sandbox.expect("present").tools,
            ToolPolicy::allow(Vec::<String>::new())
        );
        // The lists live under `sandbox.tools`, not directly under `sandbox`.
        for misplaced in [
            serde_json::json!({"sandbox": {"allow": ["browser"]}}),
            serde_json::json!({"sandbox": {"tools": {"alowed": ["browser"]}}}),
        ] {
            assert!(serde_json::from_value::<ToolsConfig>(misplaced.clone()).is_err());
            assert!(serde_json::from_value::<AgentToolsConfig>(misplaced).is_err());
        }
    }

    fn subagent(depth: u32, max: u32) -> PolicyContext<'static> {
        PolicyContext {
            subagent_depth: depth,
            max_spawn_depth: max,
            ..owner()
        }
    }

    #[test]
    fn a_leaf_subagent_loses_session_management_and_owner_tools_even_for_the_owner() {
        let allowed = resolve(
            &ToolsConfig::default(),
            None,
            &subagent(1, DEFAULT_MAX_SPAWN_DEPTH),
        );
        for denied in SUBAGENT_DENIED_TOOLS
            .iter()
            .chain(LEAF_SUBAGENT_DENIED_TOOLS)
        {
            assert!(!allowed.is_allowed(denied), "{denied}");
        }
        assert!(allowed.is_allowed("read") && allowed.is_allowed("sessions_yield"));
    }

    #[test]
    fn a_subagent_that_may_spawn_keeps_spawning_tools() {
        let allowed = resolve(&ToolsConfig::default(), None, &subagent(1, 2));
        assert!(allowed.is_allowed("sessions_spawn") && allowed.is_allowed("subagents"));
        assert!(!allowed.is_allowed("sessions_send") && !allowed.is_allowed("cron"));
        let leaf = resolve(&ToolsConfig::default(), None, &subagent(2, 2));
        assert!(!leaf.is_allowed("sessions_spawn"));
    }

    #[test]
    fn a_top_level_agent_gets_no_subagent_denies() {
        let allowed = resolve(&ToolsConfig::default(), None, &subagent(0, 1));
        assert!(allowed.is_allowed("sessions_send") && allowed.is_allowed("cron"));
    }

    fn with_subagent_tools(tools: ToolPolicy) -> ToolsConfig {
        ToolsConfig {
            subagents: Some(super::super::policy::SubagentToolsConfig { tools }),
            ..ToolsConfig::default()
        }
    }

    #[test]
    fn subagent_also_allow_lifts_a_named_deny_without_restricting() {
        let global = with_subagent_tools(ToolPolicy {
            also_allow: strings(&[" SESSIONS_SEND "]),
            ..ToolPolicy::default()
        });
        let allowed = resolve(&global, None, &subagent(1, 1));
        assert!(allowed.is_allowed("sessions_send") && allowed.is_allowed("read"));
        assert!(!allowed.is_allowed("cron"));
    }

    #[test]
    fn subagent_allow_lifts_a_deny_and_restricts() {
        let global = with_subagent_tools(ToolPolicy::allow(["group:automation", "read"]));
        let allowed = resolve(&global, None, &subagent(1, 1));
        assert_eq!(offered(&allowed), vec!["read", "cron", "gateway"]);
    }

    #[test]
    fn a_subagent_star_does_not_lift_the_builtin_denies() {
        let global = with_subagent_tools(ToolPolicy {
            allow: strings(&["*"]),
            also_allow: strings(&["session*", "gate*"]),
            ..ToolPolicy::default()
        });
        let allowed = resolve(&global, None, &subagent(1, 1));
        assert!(!allowed.is_allowed("gateway") && !allowed.is_allowed("session_status"));
        assert!(allowed.is_allowed("read"));
    }

    /// Spec `openclaw-automation.md` §6 vector 47.
    #[test]
    fn vector_47_a_leaf_loses_ten_tools_and_also_allow_brings_sessions_list_back() {
        let leaf = resolve(&ToolsConfig::default(), None, &subagent(1, 1));
        for denied in [
            "gateway",
            "agents_list",
            "whatsapp_login",
            "session_status",
            "cron",
            "sessions_send",
            "subagents",
            "sessions_list",
            "sessions_history",
            "sessions_spawn",
        ] {
            assert!(!offered(&leaf).contains(&denied), "{denied}");
        }
        let global = with_subagent_tools(ToolPolicy {
            also_allow: strings(&["sessions_list"]),
            ..ToolPolicy::default()
        });
        let lifted = resolve(&global, None, &subagent(1, 1));
        assert!(offered(&lifted).contains(&"sessions_list"));
        assert!(!lifted.is_allowed("sessions_history") && lifted.is_allowed("read"));
    }

    #[test]
    fn subagent_deny_adds_to_the_builtin_denies() {
        let global = with_subagent_tools(ToolPolicy::deny(["exec"]));
        let allowed = resolve(&global, None, &subagent(1, 3));
        assert!(!allowed.is_allowed("exec") && !allowed.is_allowed("cron"));
        assert!(allowed.is_allowed("read"));
    }

    #[test]
    fn an_allowlist_of_only_unknown_entries_allows_nothing_and_warns() {
        let global = ToolsConfig {
            allow: strings(&["reed", "wirte*"]),
            ..ToolsConfig::default()
        };
        let allowed = resolve(&global, None, &owner());
        assert!(allowed.names().is_empty());
        assert_eq!(
            allowed.warnings(),
            [
                "tools: tools.allow allowlist contains unknown entries (reed, wirte*). Nothing in \
                 it matches a tool, so this step lets no tool through; check the spelling or \
                 remove the allowlist."
            ]
        );
    }

    #[test]
    fn unknown_entries_next_to_known_ones_are_ignored_with_a_warning() {
        let agent = AgentToolsConfig {
            allow: strings(&["read", "reed"]),
            ..AgentToolsConfig::default()
        };
        let allowed = resolve(&ToolsConfig::default(), Some(&agent), &owner());
        assert_eq!(offered(&allowed), vec!["read"]);
        assert_eq!(allowed.warnings().len(), 1);
        assert!(
            allowed.warnings()[0]
                .starts_with("tools: agent tools.allow allowlist contains unknown entries (reed).")
        );
    }

    #[test]
    fn unknown_also_allow_entries_are_reported_against_the_profile() {
        let agent = AgentToolsConfig {
            profile: Some("minimal".into()),
            also_allow: strings(&["brwoser"]),
            ..AgentToolsConfig::default()
        };
        let allowed = resolve(&ToolsConfig::default(), Some(&agent), &owner());
        assert_eq!(offered(&allowed), vec!["session_status"]);
        assert_eq!(
            allowed.warnings(),
            [
                "tools: agent tools.profile (minimal) allowlist contains unknown entries \
                 (brwoser). They match no tool and are ignored; check their spelling."
            ]
        );
    }

    #[test]
    fn a_plugin_only_allowlist_is_ignored_so_core_tools_stay() {
        let global = ToolsConfig {
            allow: strings(&["group:plugins"]),
            deny: strings(&["exec"]),
            ..ToolsConfig::default()
        };
        let allowed = resolve(&global, None, &owner());
        assert_eq!(allowed.names().len(), all_tools().len() - 1);
        assert!(!allowed.is_allowed("exec"));
        assert!(allowed.warnings()[0].contains("(group:plugins)"));
    }

    #[test]
    fn candidates_outside_the_catalog_count_as_known() {
        let global = ToolsConfig {
            allow: strings(&["my_mcp_*"]),
            ..ToolsConfig::default()
        };
        let allowed = resolve_allowed_tools(&["read", "my_mcp_search"], &global, None, &owner());
        assert_eq!(offered(&allowed), vec!["my_mcp_search"]);
        assert!(allowed.warnings().is_empty());
    }

    #[test]
    fn blank_and_duplicate_candidates_are_dropped() {
        let allowed = resolve_allowed_tools(
            &["read", " ", "", "read"],
            &ToolsConfig::default(),
            None,
            &owner(),
        );
        assert_eq!(offered(&allowed), vec!["read"]);
    }
}
