//! What this node tells the backend about its exec policy with every heartbeat
//! ([`NodeExecReport`]): each agent's rules as [`decide`](crate::policy::decide) applies them,
//! its home, and where the executables those rules can name resolve on this machine.
//!
//! The backend uses it for `clawless exec check --node` and to ask a person before sending a
//! job this node would refuse anyway. Entries granted from the chat are left out (the backend
//! holds them), and so are the approvals file's socket settings. An approvals file the node
//! cannot use gives no report at all, so the backend never judges from rules the node is not
//! applying.

use clawless_exec::node::facts::{describe_fs, probe_tokens};
use clawless_exec::node::report::{MAX_REPORTED_AGENTS, NodeExecReport};
use clawless_exec::resolve::ResolveContext;
use clawless_exec::{AllowlistEntry, Platform, SkillBin};

use crate::approvals_file::{ANY_AGENT, ApprovalsFile};
use crate::local_fs::LocalFs;
use crate::policy::{exec_policy, path_dirs};

/// This machine's facts for the report.
#[derive(Debug, Clone, Copy)]
pub struct ReportContext<'a> {
    /// This machine's platform.
    pub platform: Platform,
    /// The PATH jobs are resolved on.
    pub path_env: &'a str,
    /// The node user's home (also the default working directory).
    pub home: &'a str,
    /// Entries granted from the chat, whose executables are described too.
    pub granted: &'a [(String, AllowlistEntry)],
    /// The skill bins as resolved here.
    pub skill_bins: &'a [SkillBin],
}

/// The report for `file` on this machine, or `None` when a policy in it cannot be used (an
/// invalid `safeBinProfiles`: the node refuses every job then).
pub fn exec_report(file: &ApprovalsFile, context: &ReportContext<'_>) -> Option<NodeExecReport> {
    let policy_of = |agent: &str| exec_policy(&file.resolve(agent, &[]), &[]).ok();
    // `"*"` resolves exactly as an agent the file does not name.
    let default_policy = policy_of(ANY_AGENT)?;
    let named: Vec<&String> = file
        .agents
        .keys()
        .filter(|agent| agent.as_str() != ANY_AGENT)
        .collect();
    let mut truncated = named.len() > MAX_REPORTED_AGENTS;
    let mut agents = std::collections::BTreeMap::new();
    for agent in named.into_iter().take(MAX_REPORTED_AGENTS) {
        agents.insert(agent.clone(), policy_of(agent)?);
    }
    let granted: Vec<AllowlistEntry> = context
        .granted
        .iter()
        .map(|(_, entry)| entry.clone())
        .collect();
    let tokens = probe_tokens(
        std::iter::once(&default_policy).chain(agents.values()),
        &granted,
        context.skill_bins,
    );
    let path = path_dirs(context.path_env);
    let resolve = ResolveContext {
        platform: context.platform,
        path: &path,
        cwd: context.home,
        home: Some(context.home),
        path_ext: None,
    };
    let (fs, fs_truncated) = describe_fs(&tokens, &resolve, &LocalFs);
    truncated |= fs_truncated;
    Some(NodeExecReport {
        home: Some(context.home.to_owned()),
        default_policy,
        agents,
        fs,
        truncated,
        sandbox_backends: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{PermissionsExt, symlink};
    use std::path::Path;

    use clawless_exec::check::{CheckRequest, run_check};
    use clawless_exec::fs::DescribedFs;
    use clawless_exec::node::record::NodeRecord;
    use clawless_exec::{Ask, Security};

    use super::*;

    fn executable(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn file(json: serde_json::Value) -> ApprovalsFile {
        ApprovalsFile::parse(&json.to_string(), Path::new("exec-approvals.json")).unwrap()
    }

    fn record(report: NodeExecReport, path_env: &str) -> NodeRecord {
        NodeRecord {
            node_id: "n1".into(),
            display_name: None,
            secret_hash: "00".into(),
            platform: "linux".into(),
            path: path_env.split(':').map(str::to_owned).collect(),
            skill_bins: vec![],
            queue: "q".into(),
            paired_at_ms: 0,
            last_seen_ms: 0,
            revoked: false,
            revoked_at_ms: None,
            granted: vec![],
            policy_version: 0,
            exec: Some(report),
        }
    }

    #[test]
    fn the_report_describes_named_executables_and_agrees_with_the_node_on_this_disk() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap().to_owned();
        let tools = format!("{root}/tools");
        let bin = format!("{root}/bin");
        executable(Path::new(&format!("{tools}/real-deploy")));
        executable(Path::new(&format!("{bin}/other")));
        std::fs::create_dir_all(&bin).unwrap();
        symlink(format!("{tools}/real-deploy"), format!("{bin}/deploy")).unwrap();
        let path_env = format!("{bin}:/usr/bin:/bin");
        let approvals = file(serde_json::json!({
            "version": 1,
            "defaults": {"security": "allowlist", "ask": "on-miss"},
            "agents": {
                "ops": {"allowlist": [format!("{bin}/deploy")], "ask": "always"},
                "*": {"allowlist": ["/nowhere/*"]},
            },
            "socket": {"token": "secret-token"},
        }));
        let report = exec_report(
            &approvals,
            &ReportContext {
                platform: Platform::Linux,
                path_env: &path_env,
                home: &root,
                granted: &[],
                skill_bins: &[],
            },
        )
        .unwrap();

        assert!(!report.truncated);
        assert_eq!(report.home.as_deref(), Some(root.as_str()));
        assert_eq!(report.policy_for("ops").ask, Ask::Always);
        assert_eq!(report.policy_for("main"), &report.default_policy);
        assert_eq!(report.default_policy.security, Security::Allowlist);
        assert!(
            report
                .fs
                .executables
                .contains(&format!("{tools}/real-deploy")),
            "{:?}",
            report.fs
        );
        assert_eq!(
            report.fs.symlinks.get(&format!("{bin}/deploy")),
            Some(&format!("{tools}/real-deploy"))
        );
        assert!(
            !report.fs.executables.contains(&format!("{bin}/other")),
            "only what a policy can name is described"
        );
        assert!(
            !serde_json::to_string(&report)
                .unwrap()
                .contains("secret-token"),
            "socket settings never leave the node"
        );

        // The backend's check from the report answers as the node's own check on this disk.
        let node = record(report, &path_env);
        for (agent, command) in [
            ("ops", "deploy --now"),
            ("main", "deploy --now"),
            ("main", "head -n 1"),
        ] {
            let facts = node.exec_facts(agent).unwrap();
            let request = CheckRequest {
                command: Some(command.into()),
                ..CheckRequest::default()
            };
            let from_report = run_check(
                &request.clone().with_node_facts(facts.clone()),
                &DescribedFs::default(),
            )
            .unwrap();
            let mut local = request;
            local.platform = Some(facts.platform);
            local.path = facts.path;
            local.home = facts.home;
            local.policy = facts.policy;
            let on_disk = run_check(&local, &LocalFs).unwrap();
            assert_eq!(
                (from_report.node_decision, from_report.requires_approval),
                (on_disk.node_decision, on_disk.requires_approval),
                "{agent}: {command}"
            );
        }
    }

    #[test]
    fn an_unusable_safe_bin_profile_gives_no_report() {
        let approvals = file(serde_json::json!({
            "version": 1,
            "safeBinProfiles": {"head": {"maxPositional": "many"}},
        }));
        let context = ReportContext {
            platform: Platform::Linux,
            path_env: "/usr/bin",
            home: "/",
            granted: &[],
            skill_bins: &[],
        };
        assert_eq!(exec_report(&approvals, &context), None);
    }
}
