//! What a node reports about its exec policy with every heartbeat: each agent's effective
//! policy as the node resolved it, its home, and a described filesystem covering the
//! executables those policies can name. The pre-check ([`super::facts`]) evaluates against it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::evaluate::ExecPolicy;
use crate::fs::DescribedFs;

/// Most paths (executables plus symlinks) a node describes; beyond it the report is marked
/// [`truncated`](NodeExecReport::truncated) and the pre-check trusts no absence in it.
pub const MAX_REPORTED_PATHS: usize = 512;

/// Most agents a node reports a policy for; beyond it the report is marked truncated.
pub const MAX_REPORTED_AGENTS: usize = 64;

/// A node's exec policy and the part of its filesystem that policy can name, as the node
/// reported it. No secrets: the approvals file's socket settings are never included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeExecReport {
    /// The node user's home folder.
    #[serde(default)]
    pub home: Option<String>,
    /// The policy of an agent the approvals file does not name (its `"*"` entry and
    /// defaults), without skill bins or entries granted from the chat.
    pub default_policy: ExecPolicy,
    /// The policy of each agent the approvals file names, resolved as the node resolves it
    /// (the agent's settings over `"*"`'s over the defaults; `"*"`'s entries then its own).
    #[serde(default)]
    pub agents: BTreeMap<String, ExecPolicy>,
    /// Where the executables the policies can name resolve on the node's PATH.
    #[serde(default)]
    pub fs: DescribedFs,
    /// True when the node left something out ([`MAX_REPORTED_PATHS`],
    /// [`MAX_REPORTED_AGENTS`]): then a path missing from `fs` proves nothing.
    #[serde(default)]
    pub truncated: bool,
    /// The jails the node tested at start and can run sandboxed commands in (`bwrap`);
    /// empty when it has none, and then it refuses every sandbox job.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sandbox_backends: Vec<String>,
}

impl NodeExecReport {
    /// The policy the node applies to `agent_id` (before grants and skill bins).
    pub fn policy_for(&self, agent_id: &str) -> &ExecPolicy {
        self.agents.get(agent_id).unwrap_or(&self.default_policy)
    }
}
