//! What a node reports about its exec policy, and the backend's pre-check against it.
//!
//! A node's own approvals file decides what it runs; the backend only knows what the node
//! last reported ([`NodeExecReport`], carried in [`NodeFacts`](super::NodeFacts) with every
//! heartbeat): each agent's effective policy as the node resolved it, its home, and a
//! [`DescribedFs`] covering the executables its policy can name. With that,
//! `clawless exec check --node` and [`precheck`] evaluate a command exactly as the node would,
//! as far as the report reaches.
//!
//! The node stays authoritative. The pre-check only ever *asks earlier*: when the node's policy
//! needs a person's approval and every executable the command names resolved in the report, so
//! the miss is a policy miss and not a gap in what the backend knows. Anything else goes to
//! the node, which may still ask.

use super::record::{GrantedEntry, NodeRecord};
use super::report::{MAX_REPORTED_PATHS, NodeExecReport};
use super::wire::ExecJob;
use crate::check::NodeExecFacts;
use crate::evaluate::{
    ExecEvaluation, ExecPolicy, ExecVerdict, NodeDecision, PreparedPolicy, TRANSPORT_SHELLS,
    evaluate_exec,
};
use crate::fs::{DescribedFs, NodeFs};
use crate::policy::{ApprovalDecision, NodeDenial};
use crate::resolve::{ResolveContext, base_name, resolve_executable};
use crate::safe_bins::DEFAULT_SAFE_BINS;
use crate::system_run::extract_shell_payload;
use crate::wrappers::{BLOCKED_WRAPPERS, DISPATCH_WRAPPERS, unwrap_dispatch};
use crate::{AllowlistEntry, Ask, Platform, SkillBin};

/// The agent key of an approvals file's entry for every agent.
pub const ANY_AGENT: &str = "*";

/// The argv every `exec` job runs its command through; a node reports where it resolves.
pub const SHELL_TRANSPORT: &str = "/bin/sh";

/// Programs the exec engine may resolve besides those a policy names: the skill display
/// prelude's `cat` and `printf`.
const PRELUDE_BINS: &[&str] = &["cat", "printf"];

impl NodeRecord {
    /// What the node reported, as `clawless exec check` takes it for `agent_id` (see
    /// [`node_exec_facts`]). `None` when the node never reported exec facts.
    pub fn exec_facts(&self, agent_id: &str) -> Option<NodeExecFacts> {
        let report = self.exec.as_ref()?;
        Some(node_exec_facts(
            report,
            &NodeFactsRef {
                platform: &self.platform,
                path: &self.path,
                skill_bins: &self.skill_bins,
                granted: &self.granted,
            },
            agent_id,
        ))
    }
}

/// The rest of what the registry holds about a node, besides its exec report.
#[derive(Debug, Clone, Copy)]
pub struct NodeFactsRef<'a> {
    /// The node's reported platform name.
    pub platform: &'a str,
    /// Its PATH.
    pub path: &'a [String],
    /// Its skill bins.
    pub skill_bins: &'a [SkillBin],
    /// Entries granted from the chat.
    pub granted: &'a [GrantedEntry],
}

/// A node's exec facts for `agent_id`: its platform, PATH, home and described filesystem, and
/// the agent's policy with the entries granted from the chat (the agent's and `"*"`'s, after
/// the file's, as the node adds them) and, under autoAllowSkills, the node's skill bins.
pub fn node_exec_facts(
    report: &NodeExecReport, node: &NodeFactsRef<'_>, agent_id: &str,
) -> NodeExecFacts {
    let mut policy = report.policy_for(agent_id).clone();
    let granted = node
        .granted
        .iter()
        .filter(|granted| granted.agent_id == agent_id || granted.agent_id == ANY_AGENT)
        .map(|granted| &granted.entry);
    for entry in granted {
        if !policy.allowlist.contains(entry) {
            policy.allowlist.push(entry.clone());
        }
    }
    policy.skill_bins = if policy.auto_allow_skills {
        node.skill_bins.to_vec()
    } else {
        Vec::new()
    };
    NodeExecFacts {
        platform: Platform::parse(node.platform),
        path: node.path.to_vec(),
        home: report.home.clone(),
        policy,
        fs: report.fs.clone(),
    }
}

/// The executables a node describes so its policies can be evaluated elsewhere: the shell
/// transport and known shells, every dispatch and blocked wrapper, the skill prelude, and per
/// policy its allowlist patterns (a glob-free pattern itself, and the base name of any
/// pattern whose base name has no glob), its safe bins and safe-bin profiles; then the skill
/// bins (names and the paths the node resolved). In that order, without repeats.
pub fn probe_tokens<'a>(
    policies: impl IntoIterator<Item = &'a ExecPolicy>, extra_entries: &[AllowlistEntry],
    skill_bins: &[SkillBin],
) -> Vec<String> {
    fn push(tokens: &mut Vec<String>, token: &str) {
        let token = token.trim();
        if !token.is_empty() && !tokens.iter().any(|known| known == token) {
            tokens.push(token.to_owned());
        }
    }
    fn push_pattern(tokens: &mut Vec<String>, entry: &AllowlistEntry) {
        let is_glob = |text: &str| text.contains(['*', '?', '[']);
        if !is_glob(&entry.pattern) {
            push(tokens, &entry.pattern);
        }
        let base = base_name(&entry.pattern);
        if !is_glob(base) {
            push(tokens, base);
        }
    }
    let mut tokens: Vec<String> = Vec::new();
    push(&mut tokens, SHELL_TRANSPORT);
    for name in TRANSPORT_SHELLS
        .iter()
        .chain(DISPATCH_WRAPPERS)
        .chain(BLOCKED_WRAPPERS)
        .chain(PRELUDE_BINS)
    {
        push(&mut tokens, name);
    }
    for policy in policies {
        for entry in &policy.allowlist {
            push_pattern(&mut tokens, entry);
        }
        match &policy.safe_bins {
            Some(bins) => bins.iter().for_each(|bin| push(&mut tokens, bin)),
            None => DEFAULT_SAFE_BINS
                .iter()
                .for_each(|bin| push(&mut tokens, bin)),
        }
        for bin in policy.safe_bin_profiles.keys() {
            push(&mut tokens, bin);
        }
    }
    for entry in extra_entries {
        push_pattern(&mut tokens, entry);
    }
    for bin in skill_bins {
        push(&mut tokens, &bin.name);
        push(&mut tokens, &bin.resolved_path);
    }
    tokens
}

/// Resolves each token as the exec engine would on the node (`context`, `fs`: the node's own
/// disk) and describes what it found: each resolved path's real file as an executable, and the
/// path as a symlink to it when they differ. Returns the description and whether it stopped at
/// [`MAX_REPORTED_PATHS`].
pub fn describe_fs(
    tokens: &[String], context: &ResolveContext<'_>, fs: &dyn NodeFs,
) -> (DescribedFs, bool) {
    let mut described = DescribedFs::default();
    for token in tokens {
        let resolution = resolve_executable(token, context, fs);
        let Some(path) = resolution.resolved_path else {
            continue;
        };
        let real = resolution
            .resolved_real_path
            .unwrap_or_else(|| path.clone());
        let new_paths = usize::from(!described.executables.contains(&real))
            + usize::from(path != real && !described.symlinks.contains_key(&path));
        if described.executables.len() + described.symlinks.len() + new_paths > MAX_REPORTED_PATHS {
            return (described, true);
        }
        if path != real {
            described.symlinks.insert(path, real.clone());
        }
        described.executables.insert(real);
    }
    (described, false)
}

/// What the backend's pre-check concluded about a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Precheck {
    /// The node's reported policy needs a person's approval, whatever the node's disk holds
    /// beyond what it reported: ask now instead of sending the job.
    NeedsApproval {
        /// Whether `allow-always` may be offered.
        allow_always: bool,
        /// Warnings to show with the request (heredocs, …).
        warnings: Vec<String>,
    },
    /// Send the job; the node decides (allowed by its reported policy, denied for another
    /// reason, or the report does not cover the command).
    Send,
}

/// Evaluates `job` (attempt 0, no grant) as `node` would from what it reported. Only the
/// `approval required` answer with complete knowledge becomes [`Precheck::NeedsApproval`]:
/// every executable the command names (the shell transport, each segment's wrappers and
/// command) resolved in the report, or the policy asks every time (`ask=always`), where the
/// filesystem cannot change the answer. A node that reported no exec facts, a truncated
/// report, and a job that carries a grant are always [`Precheck::Send`].
pub fn precheck(node: &NodeRecord, job: &ExecJob) -> Precheck {
    if job.grant.is_some() || node.exec.as_ref().is_none_or(|report| report.truncated) {
        return Precheck::Send;
    }
    let Some(facts) = node.exec_facts(&job.agent_id) else {
        return Precheck::Send;
    };
    let policy = PreparedPolicy::new(facts.policy.clone());
    let home = facts.home.as_deref();
    let cwd = job.cwd.as_deref().or(home).unwrap_or("/");
    let evaluation = ExecEvaluation {
        platform: facts.platform,
        policy: &policy,
        path: &facts.path,
        cwd,
        home,
        path_ext: None,
        argv: &job.argv,
        raw_command: Some(&job.raw_command),
        env: Some(&job.env),
        approved: false,
    };
    let verdict = evaluate_exec(&evaluation, &facts.fs);
    let asks = verdict.requires_approval
        && matches!(&verdict.node_decision, NodeDecision::Denied { message, .. }
            if message == NodeDenial::ApprovalRequired.message());
    if !asks {
        return Precheck::Send;
    }
    let context = ResolveContext {
        platform: facts.platform,
        path: &facts.path,
        cwd,
        home,
        path_ext: None,
    };
    if facts.policy.ask != Ask::Always && !heads_known(&verdict, &job.argv, &context, &facts.fs) {
        return Precheck::Send;
    }
    Precheck::NeedsApproval {
        allow_always: verdict
            .allowed_decisions
            .contains(&ApprovalDecision::AllowAlways),
        warnings: verdict.warnings,
    }
}

/// True when every executable the verdict depended on resolved in the described filesystem:
/// the shell transport and its wrappers, and per segment its wrappers and its command (a
/// policy-blocked segment is never satisfied, so its command need not resolve).
fn heads_known(
    verdict: &ExecVerdict, argv: &[String], context: &ResolveContext<'_>, fs: &DescribedFs,
) -> bool {
    let known = |token: &str| {
        resolve_executable(token, context, fs)
            .resolved_path
            .is_some()
    };
    if extract_shell_payload(argv).is_some() {
        let plan = unwrap_dispatch(argv, context.platform);
        let transport_known = plan
            .wrapper_indices
            .iter()
            .chain(std::iter::once(&plan.command_index))
            .filter_map(|index| argv.get(*index))
            .all(|token| known(token));
        if !transport_known {
            return false;
        }
    }
    verdict.segments.iter().all(|segment| {
        segment.wrappers.iter().all(|wrapper| known(wrapper))
            && (segment.policy_blocked.is_some() || segment.resolution.resolved_path.is_some())
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::node::record::tests::node;

    fn report() -> NodeExecReport {
        NodeExecReport {
            home: Some("/home/me".into()),
            default_policy: ExecPolicy::default(),
            agents: [(
                "ops".to_owned(),
                ExecPolicy {
                    allowlist: vec![AllowlistEntry::pattern("/usr/bin/ls")],
                    ..ExecPolicy::default()
                },
            )]
            .into(),
            fs: DescribedFs {
                executables: ["/usr/bin/ls", "/usr/bin/dash", "/usr/bin/rm"]
                    .map(str::to_owned)
                    .into(),
                symlinks: [("/bin/sh", "/usr/bin/dash")]
                    .map(|(a, b)| (a.to_owned(), b.to_owned()))
                    .into(),
                ..DescribedFs::default()
            },
            truncated: false,
            sandbox_backends: Vec::new(),
        }
    }

    fn job(agent: &str, command: &str) -> ExecJob {
        ExecJob {
            job_id: "j1".into(),
            attempt: 0,
            node_id: "n1".into(),
            agent_id: agent.into(),
            session_key: "s".into(),
            call_id: "c".into(),
            argv: vec!["/bin/sh".into(), "-lc".into(), command.into()],
            raw_command: command.into(),
            cwd: None,
            env: BTreeMap::new(),
            timeout_ms: 1_000,
            deadline_ms: 2_000,
            issued_at_ms: 1,
            nonce: "j1-0".into(),
            grant: None,
            sandbox: None,
            yield_ms: None,
            pty: false,
        }
    }

    fn asks(outcome: &Precheck) -> bool {
        matches!(outcome, Precheck::NeedsApproval { .. })
    }

    #[test]
    fn a_policy_miss_on_a_known_executable_asks_before_sending() {
        let node = node(Some(report()));
        let outcome = precheck(&node, &job("ops", "rm -rf /tmp/x"));
        assert_eq!(
            outcome,
            Precheck::NeedsApproval {
                allow_always: true,
                warnings: vec![]
            }
        );
    }

    #[test]
    fn an_allowlisted_command_is_sent() {
        let node = node(Some(report()));
        assert_eq!(precheck(&node, &job("ops", "ls /tmp")), Precheck::Send);
    }

    #[test]
    fn an_executable_the_node_did_not_describe_is_left_to_the_node() {
        let node = node(Some(report()));
        assert_eq!(precheck(&node, &job("ops", "ls | rg x")), Precheck::Send);
        assert_eq!(
            precheck(&node, &job("ops", "nice rm x")),
            Precheck::Send,
            "an unreported wrapper is unknown too"
        );
    }

    #[test]
    fn an_unknown_transport_shell_is_left_to_the_node() {
        let mut report = report();
        report.fs.symlinks.clear();
        let node = node(Some(report));
        assert_eq!(precheck(&node, &job("ops", "rm x")), Precheck::Send);
    }

    #[test]
    fn without_facts_a_truncated_report_or_a_grant_the_job_is_sent() {
        assert_eq!(precheck(&node(None), &job("ops", "rm x")), Precheck::Send);
        let mut truncated = report();
        truncated.truncated = true;
        assert_eq!(
            precheck(&node(Some(truncated)), &job("ops", "rm x")),
            Precheck::Send
        );
        let mut granted = job("ops", "rm x");
        granted.grant = Some(crate::node::wire::SignedGrant(
            crate::node::wire::Envelope {
                payload: "{}".into(),
                signature: "00".into(),
            },
        ));
        assert_eq!(precheck(&node(Some(report())), &granted), Precheck::Send);
    }

    #[test]
    fn ask_always_asks_even_for_an_unknown_executable_and_offers_no_allow_always() {
        let mut report = report();
        report.default_policy.ask = Ask::Always;
        let node = node(Some(report));
        assert_eq!(
            precheck(&node, &job("main", "rg x")),
            Precheck::NeedsApproval {
                allow_always: false,
                warnings: vec![]
            }
        );
    }

    #[test]
    fn security_full_and_security_deny_are_sent() {
        for security in [crate::Security::Full, crate::Security::Deny] {
            let mut report = report();
            report.default_policy.security = security;
            assert_eq!(
                precheck(&node(Some(report)), &job("main", "rm x")),
                Precheck::Send,
                "{security:?}"
            );
        }
    }

    #[test]
    fn agents_the_file_does_not_name_get_the_default_policy_plus_their_grants() {
        let mut node = node(Some(report()));
        assert!(asks(&precheck(&node, &job("main", "ls"))));
        node.granted.push(GrantedEntry {
            agent_id: "main".into(),
            entry: AllowlistEntry::pattern("/usr/bin/ls"),
            granted_at_ms: 1,
        });
        assert_eq!(precheck(&node, &job("main", "ls")), Precheck::Send);
        assert!(
            asks(&precheck(&node, &job("other", "ls"))),
            "another agent's grant does not count"
        );
        node.granted.push(GrantedEntry {
            agent_id: ANY_AGENT.into(),
            entry: AllowlistEntry::pattern("/usr/bin/ls"),
            granted_at_ms: 2,
        });
        assert_eq!(precheck(&node, &job("other", "ls")), Precheck::Send);
    }

    #[test]
    fn skill_bins_count_only_under_auto_allow_skills() {
        let mut node = node(Some(report()));
        node.skill_bins = vec![SkillBin {
            name: "ls".into(),
            resolved_path: "/usr/bin/ls".into(),
        }];
        assert!(
            node.exec_facts("main")
                .is_some_and(|facts| facts.policy.skill_bins.is_empty())
        );
        if let Some(report) = node.exec.as_mut() {
            report.default_policy.auto_allow_skills = true;
        }
        assert_eq!(precheck(&node, &job("main", "ls")), Precheck::Send);
    }

    #[test]
    fn probe_tokens_cover_transport_wrappers_patterns_safe_bins_and_skill_bins() {
        let policy = ExecPolicy {
            allowlist: vec![
                AllowlistEntry::pattern("/opt/tools/bin/jq"),
                AllowlistEntry::pattern("~/bin/tool"),
                AllowlistEntry::pattern("/usr/*/rg"),
                AllowlistEntry::pattern("/usr/bin/*"),
            ],
            safe_bins: Some(vec!["sort".into()]),
            ..ExecPolicy::default()
        };
        let tokens = probe_tokens(
            [&policy],
            &[AllowlistEntry::pattern("/usr/bin/git")],
            &[SkillBin {
                name: "gh".into(),
                resolved_path: "/opt/gh/bin/gh".into(),
            }],
        );
        for expected in [
            "/bin/sh",
            "sh",
            "bash",
            "env",
            "nice",
            "sudo",
            "cat",
            "/opt/tools/bin/jq",
            "jq",
            "~/bin/tool",
            "tool",
            "rg",
            "sort",
            "/usr/bin/git",
            "git",
            "gh",
            "/opt/gh/bin/gh",
        ] {
            assert!(tokens.iter().any(|token| token == expected), "{expected}");
        }
        assert!(!tokens.iter().any(|token| token.contains('*')));
        assert!(
            !tokens.iter().any(|token| token == "head"),
            "a policy's own safe bins replace the defaults"
        );
        let unique: std::collections::BTreeSet<&String> = tokens.iter().collect();
        assert_eq!(unique.len(), tokens.len(), "no repeats");
    }

    #[test]
    fn describe_fs_records_real_files_and_symlinks_and_stops_at_the_cap() {
        let disk = DescribedFs {
            executables: ["/usr/bin/dash", "/usr/bin/ls"].map(str::to_owned).into(),
            symlinks: [("/bin/sh", "/usr/bin/dash")]
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
                .into(),
            ..DescribedFs::default()
        };
        let path = vec!["/usr/local/bin".to_owned(), "/usr/bin".to_owned()];
        let context = ResolveContext {
            platform: Platform::Linux,
            path: &path,
            cwd: "/",
            home: None,
            path_ext: None,
        };
        let tokens: Vec<String> = ["/bin/sh", "ls", "rg"].map(str::to_owned).into();
        let (described, truncated) = describe_fs(&tokens, &context, &disk);
        assert!(!truncated);
        assert_eq!(described, disk, "what resolved is described, rg is absent");

        let many: Vec<String> = (0..MAX_REPORTED_PATHS + 10)
            .map(|n| format!("/x/bin{n}"))
            .collect();
        let big = DescribedFs {
            executables: many.iter().cloned().collect(),
            ..DescribedFs::default()
        };
        let (described, truncated) = describe_fs(&many, &context, &big);
        assert!(truncated);
        assert_eq!(described.executables.len(), MAX_REPORTED_PATHS);
    }

    #[test]
    fn an_old_report_without_optional_fields_loads() {
        let parsed: NodeExecReport =
            serde_json::from_value(serde_json::json!({"defaultPolicy": {}})).unwrap();
        assert_eq!(parsed.default_policy, ExecPolicy::default());
        assert!(!parsed.truncated && parsed.agents.is_empty() && parsed.home.is_none());
    }
}
