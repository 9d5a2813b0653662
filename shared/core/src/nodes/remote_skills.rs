//! Skills and node hosts (spec §3.3): what paired nodes add to skill eligibility, and the
//! note that tells the model a macOS node is there.
//!
//! clawless differs from OpenClaw here on purpose. Every `exec` runs on a node host, never on
//! the backend, so every active node's platform and the skill bins it found count for
//! eligibility; OpenClaw counts only macOS nodes, its gateway machine being the other place
//! commands run. The note is OpenClaw's, and only for macOS nodes.

use super::NodeRecord;
use clawless_skills::eligibility::EligibilityContext;

/// True for a node OpenClaw would call a macOS node (platform mentions `mac` or `darwin`).
fn is_macos(node: &NodeRecord) -> bool {
    let platform = node.platform.to_ascii_lowercase();
    platform.contains("mac") || platform.contains("darwin")
}

/// `base` plus what the active (not revoked) `nodes` have: their platforms and the skill bins
/// they found on their PATH.
pub fn with_nodes(base: &EligibilityContext, nodes: &[NodeRecord]) -> EligibilityContext {
    let mut context = base.clone();
    for node in nodes.iter().filter(|node| !node.revoked) {
        let platform = node.platform.trim();
        if !platform.is_empty() {
            context.platforms.insert(platform.to_owned());
        }
        context
            .bins
            .extend(node.skill_bins.iter().map(|bin| bin.name.clone()));
    }
    context
}

/// The §3.3 note for the skills prompt when an active macOS node is paired, naming the nodes
/// (display name, else id, in the order given); `None` without one.
pub fn remote_node_note(nodes: &[NodeRecord]) -> Option<String> {
    let labels: Vec<&str> = nodes
        .iter()
        .filter(|node| !node.revoked && is_macos(node))
        .map(|node| {
            node.display_name
                .as_deref()
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .unwrap_or(node.node_id.as_str())
        })
        .collect();
    if labels.is_empty() {
        return None;
    }
    let named: Vec<&str> = labels
        .into_iter()
        .filter(|label| !label.is_empty())
        .collect();
    Some(if named.is_empty() {
        "Remote macOS node available. Run macOS-only skills via exec host=node on that node."
            .to_owned()
    } else {
        format!(
            "Remote macOS node available ({}). Run macOS-only skills via exec host=node on that node.",
            named.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clawless_exec::SkillBin;

    fn node(id: &str, name: Option<&str>, platform: &str, bins: &[&str]) -> NodeRecord {
        NodeRecord {
            node_id: id.to_owned(),
            display_name: name.map(str::to_owned),
            secret_hash: String::new(),
            platform: platform.to_owned(),
            path: Vec::new(),
            skill_bins: bins
                .iter()
                .map(|bin| SkillBin {
                    name: (*bin).to_owned(),
                    resolved_path: format!("/usr/bin/{bin}"),
                })
                .collect(),
            queue: String::new(),
            paired_at_ms: 0,
            last_seen_ms: 0,
            revoked: false,
            revoked_at_ms: None,
            granted: Vec::new(),
            policy_version: 0,
            exec: None,
        }
    }

    #[test]
    fn active_nodes_add_their_platforms_and_skill_bins_and_revoked_ones_add_nothing() {
        let base = EligibilityContext {
            platforms: ["linux".to_owned()].into_iter().collect(),
            ..EligibilityContext::empty()
        };
        let mut revoked = node("n3", None, "win32", &["choco"]);
        revoked.revoked = true;
        let nodes = [
            node("n1", None, "darwin", &["memo", "gh"]),
            node("n2", None, "linux", &["jq"]),
            revoked,
        ];
        let context = with_nodes(&base, &nodes);
        assert_eq!(
            context.platforms.iter().collect::<Vec<_>>(),
            ["darwin", "linux"]
        );
        assert_eq!(
            context.bins.iter().collect::<Vec<_>>(),
            ["gh", "jq", "memo"]
        );
    }

    #[test]
    fn the_note_names_active_macos_nodes_only() {
        assert_eq!(remote_node_note(&[node("n2", None, "linux", &[])]), None);
        let mut revoked = node("n4", Some("Old Mac"), "darwin", &[]);
        revoked.revoked = true;
        let nodes = [
            node("n1", Some("Studio"), "darwin", &[]),
            node("n2", None, "linux", &[]),
            node("n3", Some("  "), "macos", &[]),
            revoked,
        ];
        assert_eq!(
            remote_node_note(&nodes).as_deref(),
            Some(
                "Remote macOS node available (Studio, n3). Run macOS-only skills via exec host=node on that node."
            )
        );
    }
}
