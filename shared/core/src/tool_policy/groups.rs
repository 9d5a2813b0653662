//! The group step of the tool policy (spec `openclaw-sandbox.md` §3.4): what a group chat's
//! members may have the agent do, from `channels.<channel>.groups.<groupId>.{tools,
//! toolsBySender}` with a `"*"` entry for every other group.
//!
//! One policy applies, the first that matches — never a merge: the group's `toolsBySender`
//! entry for the sender, the group's `tools`, the `"*"` group's `toolsBySender` entry, the
//! `"*"` group's `tools`. A sender entry therefore *replaces* its group's `tools` (an entry
//! of `{alsoAllow: [exec]}` under a group that denies `exec` gives that sender every tool,
//! OpenClaw's TV-14). Direct chats have no group step.
//!
//! Sender keys are `id:<senderId>`, an unprefixed id (the same), or `"*"`; compared
//! lowercased. OpenClaw's `e164:`, `username:` and `name:` keys are accepted but never match:
//! clawless keys people by their platform id only, which a member cannot choose.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::policy::ToolPolicy;

/// The group entry that applies to every group without its own entry.
pub const ANY_GROUP: &str = "*";

/// `channels.<channel>.groups.<groupId>`: the tools the agent may use there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GroupToolsConfig {
    /// The group's tool policy (`allow`, `alsoAllow`, `deny`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub tools: Option<ToolPolicy>,
    /// Policies for single senders, keyed `id:<senderId>` (or the bare id) or `"*"`; a match
    /// replaces the group's `tools`.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub tools_by_sender: IndexMap<String, ToolPolicy>,
}

impl GroupToolsConfig {
    /// The entry of `tools_by_sender` for `sender_id`: its `id:` key first, then `"*"`.
    fn for_sender(&self, sender_id: Option<&str>) -> Option<&ToolPolicy> {
        let wanted = sender_id.map(|id| id.trim().to_lowercase());
        let mut wildcard = None;
        for (key, policy) in &self.tools_by_sender {
            let key = key.trim().to_lowercase();
            if key == "*" {
                wildcard.get_or_insert(policy);
                continue;
            }
            let id = match key.split_once(':') {
                Some(("id", id)) => id.trim(),
                Some(_) => continue,
                None => key.as_str(),
            };
            if wanted.as_deref().is_some_and(|wanted| wanted == id) {
                return Some(policy);
            }
        }
        wildcard
    }
}

/// The policy of the group step for `sender_id` in `group_id`, from a channel's `groups`;
/// `None` when no entry applies (no group step).
pub fn group_tool_policy<'a>(
    groups: &'a IndexMap<String, GroupToolsConfig>, group_id: &str, sender_id: Option<&str>,
) -> Option<&'a ToolPolicy> {
    let own = groups
        .iter()
        .find(|(key, _)| key.as_str() != ANY_GROUP && key.trim() == group_id.trim())
        .map(|(_, entry)| entry);
    let any = groups.get(ANY_GROUP);
    for entry in [own, any].into_iter().flatten() {
        if let Some(policy) = entry.for_sender(sender_id).or(entry.tools.as_ref()) {
            return Some(policy);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool_policy::ToolPolicyMatcher;

    /// OpenClaw's TV-14 configuration.
    fn tv14() -> IndexMap<String, GroupToolsConfig> {
        serde_json::from_value(serde_json::json!({
            "*": {"tools": {"deny": ["exec"]}},
            "-100123": {
                "tools": {"deny": ["exec", "read", "write"]},
                "toolsBySender": {"id:42": {"alsoAllow": ["exec"]}}
            }
        }))
        .expect("TV-14 parses")
    }

    fn allowed(policy: Option<&ToolPolicy>, tool: &str) -> bool {
        policy.is_none_or(|policy| ToolPolicyMatcher::new(policy).allows(tool))
    }

    #[test]
    fn tv14_the_first_match_wins_and_replaces_the_groups_own_policy() {
        let groups = tv14();
        // 42 in -100123: their own entry, which denies nothing.
        let for_42 = group_tool_policy(&groups, "-100123", Some("42"));
        for tool in ["exec", "read", "write", "cron"] {
            assert!(allowed(for_42, tool), "42: {tool}");
        }
        // 7 in -100123: the group's tools.
        let for_7 = group_tool_policy(&groups, "-100123", Some("7"));
        for tool in ["exec", "read", "write"] {
            assert!(!allowed(for_7, tool), "7 in -100123: {tool}");
        }
        assert!(allowed(for_7, "web_fetch"));
        // 7 in -100999: the "*" group.
        let elsewhere = group_tool_policy(&groups, "-100999", Some("7"));
        assert!(!allowed(elsewhere, "exec"));
        assert!(allowed(elsewhere, "read"));
    }

    #[test]
    fn sender_keys_match_ids_only_and_a_wildcard_last() {
        let groups: IndexMap<String, GroupToolsConfig> =
            serde_json::from_value(serde_json::json!({
                "g": {
                    "tools": {"deny": ["read"]},
                    "toolsBySender": {
                        "username:alice": {"deny": ["exec"]},
                        "*": {"deny": ["write"]},
                        "ID:Bob": {"deny": ["cron"]},
                        "carol": {"deny": ["browser"]}
                    }
                }
            }))
            .expect("parses");
        let deny_of = |sender: Option<&str>| {
            group_tool_policy(&groups, "g", sender)
                .and_then(|policy| policy.deny.clone())
                .unwrap_or_default()
        };
        assert_eq!(deny_of(Some("bob")), ["cron"]);
        assert_eq!(deny_of(Some("carol")), ["browser"]);
        // `username:` never matches (a display handle is not an identity); the wildcard does.
        assert_eq!(deny_of(Some("alice")), ["write"]);
        assert_eq!(deny_of(None), ["write"]);
    }

    #[test]
    fn no_entry_means_no_group_step() {
        let groups: IndexMap<String, GroupToolsConfig> =
            serde_json::from_value(serde_json::json!({"-1": {"tools": {"deny": ["exec"]}}}))
                .expect("parses");
        assert!(group_tool_policy(&groups, "-2", Some("7")).is_none());
        assert!(group_tool_policy(&IndexMap::new(), "-1", Some("7")).is_none());
        assert!(group_tool_policy(&groups, "-1", Some("7")).is_some());
    }
}
