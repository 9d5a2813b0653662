//! Tool allow/deny policies, the `tools` config sections that hold them, and the matcher that
//! decides whether one policy lets a tool through (spec §11 "Matching").
//!
//! A matcher judges one policy in isolation. Combining policies (profile, provider, agent,
//! group, sandbox, sub-agent) is the pipeline's job, and so is knowing which tools exist.

use clawless_base::wildcard::wildcard_matches;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::catalog::{expand_tool_groups, normalize_tool_name};

/// An allow/deny policy as written in config (`tools`, `agents.<id>.tools`, group, sandbox and
/// sub-agent policies).
///
/// Entries are tool names, group names (`group:fs`) or globs where `*` matches any run of
/// characters; all are compared after [`normalize_tool_name`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolPolicy {
    /// Only these tools (names, `group:…` names or `*` globs). Unset or `[]` allows every
    /// tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub allow: Option<Vec<String>>,
    /// Never these tools (names, `group:…` names or `*` globs), whatever the allowlist says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub deny: Option<Vec<String>>,
    /// Added to a non-empty allowlist (or a profile); never narrows anything by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub also_allow: Option<Vec<String>>,
}

impl ToolPolicy {
    /// A policy with only an allowlist.
    pub fn allow<I, S>(entries: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ToolPolicy {
            allow: Some(entries.into_iter().map(Into::into).collect()),
            ..ToolPolicy::default()
        }
    }

    /// A policy with only a denylist.
    pub fn deny<I, S>(entries: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ToolPolicy {
            deny: Some(entries.into_iter().map(Into::into).collect()),
            ..ToolPolicy::default()
        }
    }

    /// Whether the policy restricts nothing: no allowlist entries and no denylist entries.
    pub fn is_unrestricted(&self) -> bool {
        self.effective_allow().is_none() && self.deny.as_ref().is_none_or(Vec::is_empty)
    }

    /// The allowlist the matcher applies: `allow` followed by `alsoAllow`, or `None` (every
    /// tool) when `allow` is absent or empty.
    ///
    /// Whether an allowlist restricts depends on whether it has entries, not on what they
    /// name: `["  "]` or `["group:plugins"]` restricts to nothing rather than opening up.
    pub fn effective_allow(&self) -> Option<Vec<&str>> {
        let allow = self.allow.as_ref().filter(|allow| !allow.is_empty())?;
        Some(
            allow
                .iter()
                .chain(self.also_allow.iter().flatten())
                .map(String::as_str)
                .collect(),
        )
    }
}

/// The global `tools` config section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolsConfig {
    /// Base tool profile: `minimal`, `coding`, `messaging` or `full`. An agent's own profile
    /// replaces it; unset, no profile restricts the tools (an unknown name restricts nothing
    /// and logs a warning).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub profile: Option<String>,
    /// Global allowlist: tool names, `group:…` names or `*` globs. Unset or `[]` allows every
    /// tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub allow: Option<Vec<String>>,
    /// Global denylist: tool names, `group:…` names or `*` globs. Deny always wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub deny: Option<Vec<String>>,
    /// Tools added to the profile and to a non-empty global allowlist; never narrows
    /// anything by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub also_allow: Option<Vec<String>>,
    /// Policies per `<provider>` or `<provider>/<modelId>` (keys compared lowercased; the
    /// model's entry wins over its provider's), applied after the global ones.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub by_provider: IndexMap<String, ProviderToolPolicy>,
    /// The tool policy of sub-agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub subagents: Option<SubagentToolsConfig>,
    /// The tool policy of sandboxed sessions (`sandbox.tools.{allow,alsoAllow,deny}`); an
    /// agent's own `tools.sandbox.tools` lists replace these list by list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub sandbox: Option<SandboxToolsConfig>,
    /// Elevated exec: whether a sandboxed session's commands may leave the jail for a node
    /// host's bare host (`enabled`, and who: `allowFrom.<channel>`); nobody by default, and
    /// each session's level starts `off`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub elevated: Option<crate::elevated::ElevatedConfig>,
    /// Exec tool settings. Read: `backgroundMs` (10000: how long an `exec` waits before its
    /// command goes on in the background, 10 to 120000), `notifyOnExit` (true: a background
    /// command's end wakes the session) and `notifyOnExitEmptySuccess` (false: also when it
    /// succeeded silently); OpenClaw's other keys are accepted and not read. Being present at
    /// all adds `exec` and `process` to the profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub exec: Option<serde_json::Value>,
    /// File tool settings (free-form, not read yet). Being present at all adds `read`,
    /// `write` and `edit` to the profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub fs: Option<serde_json::Value>,
}

impl ToolsConfig {
    /// The `allow`/`deny`/`alsoAllow` part as a policy.
    pub fn policy(&self) -> ToolPolicy {
        ToolPolicy {
            allow: self.allow.clone(),
            deny: self.deny.clone(),
            also_allow: self.also_allow.clone(),
        }
    }
}

/// `agents.<id>.tools`: per-agent settings, applied after the global ones.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentToolsConfig {
    /// This agent's tool profile (`minimal`, `coding`, `messaging` or `full`), replacing
    /// `tools.profile`; unset, the global profile applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub profile: Option<String>,
    /// Agent allowlist: it can only narrow what the global policies let through. Unset or
    /// `[]` narrows nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub allow: Option<Vec<String>>,
    /// Agent denylist, on top of the global one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub deny: Option<Vec<String>>,
    /// Tools added to the profile (replacing the global `alsoAllow`) and to a non-empty agent
    /// allowlist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub also_allow: Option<Vec<String>>,
    /// This agent's policies per `<provider>` or `<provider>/<modelId>`.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub by_provider: IndexMap<String, ProviderToolPolicy>,
    /// This agent's sandbox tool policy: each of `allow`, `alsoAllow` and `deny` set here
    /// replaces the same list of `tools.sandbox.tools` (no merging).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub sandbox: Option<SandboxToolsConfig>,
    /// This agent's elevated exec: `enabled: false` turns it off, an `allowFrom` narrows the
    /// global one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub elevated: Option<crate::elevated::ElevatedConfig>,
}

impl AgentToolsConfig {
    /// The `allow`/`deny`/`alsoAllow` part as a policy.
    pub fn policy(&self) -> ToolPolicy {
        ToolPolicy {
            allow: self.allow.clone(),
            deny: self.deny.clone(),
            also_allow: self.also_allow.clone(),
        }
    }
}

/// `tools.byProvider.<key>` (and the agent-level equivalent).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderToolPolicy {
    /// Profile (`minimal`, `coding`, `messaging` or `full`) applied on top of the base
    /// profile for this provider or model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub profile: Option<String>,
    /// Allowlist for this provider or model. Unset or `[]` narrows nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub allow: Option<Vec<String>>,
    /// Denylist for this provider or model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub deny: Option<Vec<String>>,
    /// Tools added to this entry's profile and to its non-empty allowlist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub also_allow: Option<Vec<String>>,
}

impl ProviderToolPolicy {
    /// The `allow`/`deny`/`alsoAllow` part as a policy.
    pub fn policy(&self) -> ToolPolicy {
        ToolPolicy {
            allow: self.allow.clone(),
            deny: self.deny.clone(),
            also_allow: self.also_allow.clone(),
        }
    }
}

/// `tools.subagents`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubagentToolsConfig {
    /// Sub-agents' tools: `allow`/`alsoAllow` entries lift matching built-in sub-agent
    /// denies (and `allow` also restricts); `deny` adds more.
    #[serde(default)]
    pub tools: ToolPolicy,
}

/// `tools.sandbox` and `agents.list[].tools.sandbox`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxToolsConfig {
    /// Sandboxed sessions' tools. `allow` unset: the default sandbox allowlist (plus
    /// `alsoAllow`); `[]`: every tool. `deny` unset: the default sandbox denylist minus
    /// whatever `allow`/`alsoAllow` name. Deny wins.
    #[serde(default)]
    pub tools: ToolPolicy,
}

/// One compiled allow or deny entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Pattern {
    /// `*`: every name.
    Any,
    /// No `*`: the name itself.
    Exact(String),
    /// Contains `*`: every other character is literal.
    Glob(String),
}

impl Pattern {
    /// Compiles an already normalised entry.
    pub(super) fn compile(entry: String) -> Self {
        if entry == "*" {
            Pattern::Any
        } else if entry.contains('*') {
            Pattern::Glob(entry)
        } else {
            Pattern::Exact(entry)
        }
    }

    /// Whether a normalised name matches.
    pub(super) fn matches(&self, name: &str) -> bool {
        match self {
            Pattern::Any => true,
            Pattern::Exact(exact) => exact == name,
            Pattern::Glob(glob) => wildcard_matches(glob, name),
        }
    }
}

fn compile_all<I>(entries: I) -> Vec<Pattern>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    expand_tool_groups(entries)
        .into_iter()
        .map(Pattern::compile)
        .collect()
}

fn matches_any(patterns: &[Pattern], name: &str) -> bool {
    patterns.iter().any(|pattern| pattern.matches(name))
}

/// A [`ToolPolicy`] compiled for repeated checks: groups expanded, names normalised, globs
/// parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolPolicyMatcher {
    /// `None`: every tool not denied.
    allow: Option<Vec<Pattern>>,
    deny: Vec<Pattern>,
}

impl ToolPolicyMatcher {
    /// Compiles a policy.
    pub fn new(policy: &ToolPolicy) -> Self {
        ToolPolicyMatcher {
            allow: policy.effective_allow().map(compile_all),
            deny: compile_all(policy.deny.iter().flatten()),
        }
    }

    /// Whether the policy lets `tool` through. The denylist is checked first and wins;
    /// `apply_patch` is denied and allowed along with `write` as well as on its own.
    /// A blank name is never allowed.
    pub fn allows(&self, tool: &str) -> bool {
        let name = normalize_tool_name(tool);
        if name.is_empty() {
            return false;
        }
        let follows_write = name == "apply_patch";
        if matches_any(&self.deny, &name) || (follows_write && matches_any(&self.deny, "write")) {
            return false;
        }
        let Some(allow) = &self.allow else {
            return true;
        };
        matches_any(allow, &name) || (follows_write && matches_any(allow, "write"))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn policy(allow: Option<&[&str]>, deny: Option<&[&str]>) -> ToolPolicyMatcher {
        let owned = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect();
        ToolPolicyMatcher::new(&ToolPolicy {
            allow: allow.map(owned),
            deny: deny.map(owned),
            also_allow: None,
        })
    }

    // Spec §11 test vectors.

    #[test]
    fn star_allowlist_allows_browser() {
        assert!(policy(Some(&["*"]), None).allows("browser"));
    }

    #[test]
    fn star_denylist_denies_read() {
        assert!(!policy(None, Some(&["*"])).allows("read"));
    }

    #[test]
    fn prefix_glob_allows_matching_tools_only() {
        let matcher = policy(Some(&["web_*"]), None);
        assert!(matcher.allows("web_fetch"));
        assert!(!matcher.allows("read"));
    }

    #[test]
    fn deny_glob_wins_over_star_allow() {
        assert!(!policy(Some(&["*"]), Some(&["web_*"])).allows("web_fetch"));
    }

    #[test]
    fn empty_allowlist_allows_everything_not_denied() {
        let matcher = policy(Some(&[]), Some(&["web_*"]));
        assert!(matcher.allows("read"));
        assert!(!matcher.allows("web_search"));
    }

    #[test]
    fn groups_aliases_and_deny_globs_combine() {
        let matcher = policy(Some(&["group:fs", "BASH"]), Some(&["apply_*"]));
        assert!(matcher.allows("read"));
        assert!(matcher.allows("exec"));
        assert!(!matcher.allows("apply_patch"));
    }

    #[test]
    fn entries_and_names_are_normalised_before_matching() {
        assert!(policy(Some(&[" WEB_* "]), None).allows("WEB_FETCH"));
    }

    // Attempts to get around a policy.

    #[test]
    fn case_and_whitespace_do_not_escape_a_deny() {
        let matcher = policy(None, Some(&["exec"]));
        for name in [
            "exec", "EXEC", " Exec ", "\texec\n", "bash", "BASH", " Bash ",
        ] {
            assert!(!matcher.allows(name), "{name:?}");
        }
    }

    #[test]
    fn an_alias_entry_denies_the_canonical_tool() {
        let matcher = policy(None, Some(&["Apply-Patch", "bash"]));
        assert!(!matcher.allows("apply_patch"));
        assert!(!matcher.allows("exec"));
        assert!(matcher.allows("process"));
    }

    #[test]
    fn a_denied_tool_stays_denied_when_its_group_is_allowed() {
        let matcher = policy(Some(&["group:runtime"]), Some(&["exec"]));
        assert!(!matcher.allows("exec"));
        assert!(matcher.allows("process"));
        assert!(!matcher.allows("read"));
    }

    #[test]
    fn a_denied_group_wins_over_an_allowed_member() {
        let matcher = policy(Some(&["exec", "read"]), Some(&["GROUP:RUNTIME"]));
        assert!(!matcher.allows("exec"));
        assert!(matcher.allows("read"));
    }

    #[test]
    fn denying_the_openclaw_group_alias_denies_the_core_group() {
        let matcher = policy(None, Some(&["group:openclaw"]));
        assert!(!matcher.allows("browser"));
        assert!(!matcher.allows("sessions_spawn"));
        assert!(matcher.allows("read"));
        assert!(matcher.allows("exec"));
    }

    #[test]
    fn apply_patch_follows_a_write_deny() {
        for deny in ["write", " WRITE ", "wri*", "group:fs"] {
            let matcher = policy(None, Some(&[deny]));
            assert!(!matcher.allows("apply_patch"), "{deny}");
            assert!(!matcher.allows("Apply-Patch"), "{deny}");
        }
    }

    #[test]
    fn apply_patch_follows_a_write_allow() {
        let matcher = policy(Some(&["write"]), None);
        assert!(matcher.allows("apply_patch"));
        assert!(!matcher.allows("edit"));
    }

    #[test]
    fn apply_patch_can_be_denied_while_write_is_allowed() {
        let matcher = policy(Some(&["write"]), Some(&["apply_patch"]));
        assert!(matcher.allows("write"));
        assert!(!matcher.allows("apply_patch"));
    }

    #[test]
    fn regex_metacharacters_in_patterns_are_literal() {
        for pattern in [
            ".*",
            "re.d",
            "(read|write)",
            "read|exec",
            "[a-z]*",
            "rea?",
            "^read$",
            "\\w+",
        ] {
            let matcher = policy(Some(&[pattern]), None);
            for tool in ["read", "write", "exec", "web_fetch"] {
                assert!(!matcher.allows(tool), "{pattern} let {tool} through");
            }
        }
    }

    #[test]
    fn regex_metacharacters_in_a_deny_do_not_deny_everything() {
        let matcher = policy(None, Some(&[".*", "[^x]*", "a|read"]));
        assert!(matcher.allows("read"));
        assert!(matcher.allows("exec"));
    }

    #[test]
    fn a_trailing_star_only_extends_its_own_prefix() {
        let matcher = policy(Some(&["read*"]), None);
        assert!(matcher.allows("read"));
        assert!(!matcher.allows("write"));
        assert!(!matcher.allows("xread"));
    }

    #[test]
    fn blank_names_are_never_allowed() {
        let matcher = policy(None, None);
        assert!(!matcher.allows(""));
        assert!(!matcher.allows("   "));
    }

    #[test]
    fn an_allowlist_of_blank_or_empty_groups_allows_nothing() {
        assert!(!policy(Some(&["  "]), None).allows("read"));
        assert!(!policy(Some(&["group:plugins"]), None).allows("read"));
    }

    #[test]
    fn also_allow_extends_an_allowlist_but_never_creates_one() {
        let extended = ToolPolicyMatcher::new(&ToolPolicy {
            allow: Some(vec!["read".into()]),
            also_allow: Some(vec!["browser".into()]),
            deny: None,
        });
        assert!(extended.allows("browser") && extended.allows("read"));
        assert!(!extended.allows("exec"));

        let alone = ToolPolicyMatcher::new(&ToolPolicy {
            also_allow: Some(vec!["browser".into()]),
            ..ToolPolicy::default()
        });
        assert!(alone.allows("exec"));
    }

    #[test]
    fn also_allow_does_not_override_a_deny() {
        let matcher = ToolPolicyMatcher::new(&ToolPolicy {
            allow: Some(vec!["read".into()]),
            also_allow: Some(vec!["exec".into()]),
            deny: Some(vec!["bash".into()]),
        });
        assert!(!matcher.allows("exec"));
    }

    #[test]
    fn policy_config_uses_camel_case() {
        let policy: ToolPolicy =
            serde_json::from_value(serde_json::json!({"allow": ["read"], "alsoAllow": ["exec"]}))
                .expect("parses");
        assert_eq!(policy.also_allow, Some(vec!["exec".to_owned()]));
        assert_eq!(
            serde_json::to_value(&policy).expect("serialises"),
            serde_json::json!({"allow": ["read"], "alsoAllow": ["exec"]})
        );
    }

    #[test]
    fn tools_config_reads_provider_subagent_exec_and_fs_sections() {
        let config: ToolsConfig = serde_json::from_value(serde_json::json!({
            "profile": "coding",
            "alsoAllow": ["browser"],
            "byProvider": {"OpenAI/GPT-5": {"profile": "minimal", "deny": ["exec"]}},
            "subagents": {"tools": {"alsoAllow": ["sessions_send"]}},
            "exec": {"host": "sandbox"},
            "fs": {}
        }))
        .expect("parses");
        assert_eq!(config.profile.as_deref(), Some("coding"));
        assert_eq!(
            config.by_provider["OpenAI/GPT-5"].deny,
            Some(vec!["exec".to_owned()])
        );
        assert!(config.exec.is_some() && config.fs.is_some());
        let subagents = config.subagents.expect("present");
        assert_eq!(
            subagents.tools.also_allow,
            Some(vec!["sessions_send".to_owned()])
        );
        let unknown = serde_json::from_value::<ToolsConfig>(serde_json::json!({"web": {}}))
            .expect_err("a section clawless does not model is a typo, not a setting");
        assert!(
            unknown.to_string().contains("unknown field `web`"),
            "{unknown}"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

        #[test]
        fn a_denied_name_is_never_allowed(name in "[a-zA-Z_ ]{1,12}", allow in prop::collection::vec("[a-z_*]{0,6}", 0..4)) {
            let matcher = ToolPolicyMatcher::new(&ToolPolicy {
                allow: Some(allow),
                deny: Some(vec![name.clone()]),
                also_allow: None,
            });
            prop_assert!(!matcher.allows(&name));
        }
    }
}
