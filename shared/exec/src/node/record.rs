//! A paired node host as the backend keeps it: its id rules, the facts it reports on every
//! heartbeat, and the policy entries granted to it from the chat. Secrets never appear here: a
//! node's secret is kept only as its hex SHA-256.

use serde::{Deserialize, Serialize};

use super::report::NodeExecReport;
use crate::{AllowlistEntry, SkillBin};

/// Longest node id, in bytes. Node ids name SQS queues (`<prefix>node-<id>-dlq`, at most 80
/// characters), so they stay short.
pub const MAX_NODE_ID_LEN: usize = 40;

/// True for a node id every adapter can use in queue names and keys: 1 to
/// [`MAX_NODE_ID_LEN`] ASCII letters, digits, `-` or `_`.
pub fn is_valid_node_id(node_id: &str) -> bool {
    !node_id.is_empty()
        && node_id.len() <= MAX_NODE_ID_LEN
        && node_id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
}

/// A paired node host as the backend keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRecord {
    /// Stable id, assigned at pairing (see [`is_valid_node_id`]).
    pub node_id: String,
    /// A name for people, as the node reported it.
    pub display_name: Option<String>,
    /// Hex SHA-256 of the node's secret; never the secret itself.
    pub secret_hash: String,
    /// The node's platform as it reported it (`linux`, `darwin`, `win32`).
    pub platform: String,
    /// The node's PATH entries, in order.
    pub path: Vec<String>,
    /// Skill binaries the node found on its PATH.
    pub skill_bins: Vec<SkillBin>,
    /// The node's exec queue: a queue URL on AWS, a queue name locally.
    pub queue: String,
    /// When the node was paired (Unix milliseconds).
    pub paired_at_ms: u64,
    /// The last heartbeat (Unix milliseconds); `paired_at_ms` until the first.
    pub last_seen_ms: u64,
    /// True once revoked: the node gets no more jobs, grants or credentials.
    pub revoked: bool,
    /// When it was first revoked (Unix milliseconds).
    pub revoked_at_ms: Option<u64>,
    /// Allowlist entries granted from the chat (`allow-always`), in grant order.
    pub granted: Vec<GrantedEntry>,
    /// Incremented by each grant that changes `granted`, so a node can tell its policy moved.
    pub policy_version: u64,
    /// The node's exec policy and described filesystem, as last reported; `None` for a node
    /// that never reported them (an older node, or one whose approvals file is unusable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<NodeExecReport>,
}

/// An allowlist entry a person granted to one agent on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantedEntry {
    /// The agent the entry applies to.
    pub agent_id: String,
    /// The entry.
    pub entry: AllowlistEntry,
    /// When it was granted (Unix milliseconds).
    pub granted_at_ms: u64,
}

impl GrantedEntry {
    /// True when `other` grants the same entry to the same agent (whenever it was granted).
    pub fn same_grant(&self, other: &GrantedEntry) -> bool {
        self.agent_id == other.agent_id && self.entry == other.entry
    }
}

/// What a node reports about itself with every heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeFacts {
    /// Its platform.
    pub platform: String,
    /// Its PATH entries, in order.
    pub path: Vec<String>,
    /// Skill binaries it found.
    pub skill_bins: Vec<SkillBin>,
    /// Its name for people; `None` keeps the name the registry has.
    pub display_name: Option<String>,
    /// Its exec policy and the executables that policy can name; `None` (an older node, or
    /// an approvals file the node cannot use) clears what the registry had, so no stale
    /// policy is pre-checked against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<NodeExecReport>,
}

impl NodeRecord {
    /// True when the node's last report advertised a jail for sandboxed sessions' commands.
    pub fn can_jail(&self) -> bool {
        self.exec
            .as_ref()
            .is_some_and(|exec| !exec.sandbox_backends.is_empty())
    }

    /// Applies a heartbeat: the facts replace the stored ones (a `None` display name keeps
    /// the stored one; `None` exec facts clear them) and `last_seen_ms` becomes `now_ms`.
    /// Every adapter applies the same.
    pub fn apply_heartbeat(&mut self, facts: &NodeFacts, now_ms: u64) {
        self.platform.clone_from(&facts.platform);
        self.path.clone_from(&facts.path);
        self.skill_bins.clone_from(&facts.skill_bins);
        self.exec.clone_from(&facts.exec);
        if let Some(name) = &facts.display_name {
            self.display_name = Some(name.clone());
        }
        self.last_seen_ms = now_ms;
    }

    /// Applies a grant: appends `entry` and increments `policy_version`, unless the same
    /// agent already holds the same entry (then nothing changes). Returns whether it changed.
    pub fn apply_grant(&mut self, entry: &GrantedEntry) -> bool {
        if self.granted.iter().any(|held| held.same_grant(entry)) {
            return false;
        }
        self.granted.push(entry.clone());
        self.policy_version = self.policy_version.saturating_add(1);
        true
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn node_ids_are_short_and_safe_for_queue_names() {
        for valid in ["a", "node-1", "N_2", &"x".repeat(MAX_NODE_ID_LEN)] {
            assert!(is_valid_node_id(valid), "{valid:?}");
        }
        let too_long = "x".repeat(MAX_NODE_ID_LEN + 1);
        for invalid in ["", "a b", "a/b", "ünï", "a.b", "a:b", too_long.as_str()] {
            assert!(!is_valid_node_id(invalid), "{invalid:?}");
        }
    }

    /// Node `n1`, unnamed, on linux with `/usr/local/bin:/usr/bin`, paired and seen at 1 ms,
    /// with no grants and the given exec report.
    pub(crate) fn node(exec: Option<NodeExecReport>) -> NodeRecord {
        NodeRecord {
            node_id: "n1".into(),
            display_name: None,
            secret_hash: "00".into(),
            platform: "linux".into(),
            path: vec!["/usr/local/bin".into(), "/usr/bin".into()],
            skill_bins: vec![],
            queue: "node-n1".into(),
            paired_at_ms: 1,
            last_seen_ms: 1,
            revoked: false,
            revoked_at_ms: None,
            granted: vec![],
            policy_version: 0,
            exec,
        }
    }

    fn record() -> NodeRecord {
        NodeRecord {
            display_name: Some("laptop".into()),
            ..node(None)
        }
    }

    #[test]
    fn a_heartbeat_without_a_name_keeps_the_stored_name() {
        let mut node = record();
        let facts = NodeFacts {
            platform: "darwin".into(),
            path: vec!["/opt/homebrew/bin".into()],
            skill_bins: vec![SkillBin {
                name: "jq".into(),
                resolved_path: "/opt/homebrew/bin/jq".into(),
            }],
            display_name: None,
            exec: None,
        };
        node.apply_heartbeat(&facts, 99);
        assert_eq!(node.display_name.as_deref(), Some("laptop"));
        assert_eq!((node.platform.as_str(), node.last_seen_ms), ("darwin", 99));
        assert_eq!(node.skill_bins, facts.skill_bins);
    }

    #[test]
    fn a_repeated_grant_changes_nothing_but_another_agent_gets_its_own() {
        let mut node = record();
        let grant = |agent: &str, at| GrantedEntry {
            agent_id: agent.into(),
            entry: AllowlistEntry::pattern("/usr/bin/jq"),
            granted_at_ms: at,
        };
        assert!(node.apply_grant(&grant("main", 1)));
        assert!(
            !node.apply_grant(&grant("main", 2)),
            "same agent, same entry"
        );
        assert!(node.apply_grant(&grant("ops", 3)));
        assert_eq!(node.policy_version, 2);
        assert_eq!(node.granted.len(), 2);
    }
}
