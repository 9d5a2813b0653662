//! Spec vectors of §7 and §8.3 through [`evaluate_exec`], and attacks on every rule where
//! clawless is stricter than OpenClaw.

use super::*;
use crate::fs::DescribedFs;

pub(super) const PATH: &[&str] = &["/usr/local/bin", "/usr/bin", "/bin"];

/// A Debian-like node: `/bin` links to `/usr/bin`, `/usr/bin/sh` is dash.
pub(super) fn node() -> DescribedFs {
    let usr_bin = [
        "echo",
        "rg",
        "head",
        "tail",
        "cut",
        "wc",
        "tr",
        "jq",
        "grep",
        "sort",
        "uniq",
        "cat",
        "printf",
        "env",
        "nice",
        "nohup",
        "timeout",
        "xargs",
        "find",
        "git",
        "tar",
        "make",
        "python3.12",
        "node",
        "perl",
        "dash",
        "bash",
        "obsidian-cli",
        "rm",
        "ls",
        "awk",
        "sed",
        "sudo",
        "su",
        "false",
        "busybox",
        "gog-wrapper",
        "ssh",
    ];
    let mut executables: Vec<String> = usr_bin
        .iter()
        .map(|bin| format!("/usr/bin/{bin}"))
        .collect();
    executables.extend(
        [
            "/opt/homebrew/bin/rg",
            "/tmp/evil-bin/jq",
            "/tmp/evil",
            "/tmp/sh",
            "/tmp/gog",
            "/tmp/nice",
            "/usr/local/bin/gog",
            "/usr/local/bin/head",
            "/tmp/work/skill-bin",
            "/home/me/bin/harmless-target",
        ]
        .map(str::to_owned),
    );
    DescribedFs {
        executables: executables.into_iter().collect(),
        files: ["/home/me/skills/gog/SKILL.md", "/tmp/work/notes.txt"]
            .map(str::to_owned)
            .into(),
        symlinks: [
            ("/bin", "usr/bin"),
            ("/usr/bin/sh", "dash"),
            ("/usr/bin/python3", "python3.12"),
            ("/home/me/bin/harmless", "/usr/bin/bash"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .into(),
    }
}

pub(super) fn strings(words: &[&str]) -> Vec<String> {
    words.iter().map(|word| (*word).to_owned()).collect()
}

pub(super) fn allow(patterns: &[&str]) -> ExecPolicy {
    ExecPolicy {
        allowlist: patterns
            .iter()
            .map(|p| AllowlistEntry::pattern(*p))
            .collect(),
        ..ExecPolicy::default()
    }
}

pub(super) fn bound(pattern: &str, arg_pattern: &str) -> AllowlistEntry {
    AllowlistEntry {
        pattern: pattern.into(),
        arg_pattern: Some(arg_pattern.into()),
        source: None,
    }
}

pub(super) struct Run {
    pub(super) policy: ExecPolicy,
    pub(super) path: Vec<String>,
    pub(super) cwd: String,
    pub(super) platform: Platform,
    pub(super) fs: DescribedFs,
    pub(super) approved: bool,
}

impl Run {
    pub(super) fn new(policy: ExecPolicy) -> Self {
        Self {
            policy,
            path: strings(PATH),
            cwd: "/tmp".into(),
            platform: Platform::Linux,
            fs: node(),
            approved: false,
        }
    }

    pub(super) fn argv(
        &self, argv: &[String], raw: Option<&str>, env: Option<&BTreeMap<String, String>>,
    ) -> ExecVerdict {
        let prepared = PreparedPolicy::new(self.policy.clone());
        let request = ExecEvaluation {
            platform: self.platform,
            policy: &prepared,
            path: &self.path,
            cwd: &self.cwd,
            home: Some("/home/me"),
            path_ext: None,
            argv,
            raw_command: raw,
            env,
            approved: self.approved,
        };
        evaluate_exec(&request, &self.fs)
    }

    pub(super) fn shell(&self, command: &str) -> ExecVerdict {
        self.argv(&strings(&["/bin/sh", "-lc", command]), None, None)
    }
}

pub(super) fn check(command: &str, policy: ExecPolicy) -> ExecVerdict {
    Run::new(policy).shell(command)
}

pub(super) fn by(verdict: &ExecVerdict) -> Vec<Option<&'static str>> {
    verdict
        .satisfied_by()
        .into_iter()
        .map(|s| s.map(SatisfiedBy::as_str))
        .collect()
}

// ---- §7.3 chains and analysis ---------------------------------------------------------------

#[test]
fn chains_of_allowlisted_binaries_are_satisfied() {
    let verdict = check(
        "/usr/bin/obsidian-cli print-default && /usr/bin/obsidian-cli search foo | /usr/bin/head",
        allow(&["/usr/bin/obsidian-cli", "/usr/bin/head"]),
    );
    assert!(verdict.analysis_ok);
    assert!(verdict.allowlist_satisfied);
    assert_eq!(verdict.node_decision, NodeDecision::Allowed);
}

#[test]
fn one_unlisted_link_in_a_chain_leaves_it_unsatisfied() {
    let verdict = check(
        "/usr/bin/obsidian-cli print-default && /usr/bin/rm -rf /",
        allow(&["/usr/bin/obsidian-cli"]),
    );
    assert!(verdict.analysis_ok);
    assert!(!verdict.allowlist_satisfied);
    assert_eq!(by(&verdict), [Some("allowlist"), None]);
}

#[test]
fn a_trailing_operator_fails_analysis() {
    let verdict = check("/usr/bin/echo ok &&", allow(&["/usr/bin/echo"]));
    assert!(!verdict.analysis_ok);
    assert!(!verdict.allowlist_satisfied);
    assert!(verdict.requires_approval);
}

#[test]
fn quoted_operators_stay_inside_their_argument() {
    for command in [
        r#"/usr/bin/echo "foo && bar""#,
        r#"/usr/bin/echo "foo\" && bar""#,
    ] {
        let verdict = check(command, allow(&["/usr/bin/echo"]));
        assert!(verdict.analysis_ok, "{command}");
        assert!(verdict.allowlist_satisfied, "{command}");
        assert_eq!(verdict.segments.len(), 1);
    }
}

#[test]
fn a_bare_star_satisfies_even_an_unresolved_binary() {
    let verdict = check("mybin --flag", allow(&["*"]));
    assert!(verdict.allowlist_satisfied);
    assert_eq!(verdict.segments[0].resolution.resolved_path, None);
}

#[test]
fn heads_are_each_segments_first_word_as_written() {
    assert_eq!(
        check("echo ok | jq .foo", allow(&[])).heads(),
        ["echo", "jq"]
    );
    assert_eq!(check("ls && rm -rf /", allow(&[])).heads(), ["ls", "rm"]);
}

#[test]
fn analysis_refusals_pass_their_reason_through() {
    let verdict = check("echo $(whoami)", allow(&["*"]));
    assert!(!verdict.analysis_ok);
    assert_eq!(
        verdict.reason.as_deref(),
        Some("unsupported shell token: $()")
    );
    assert!(!verdict.allowlist_satisfied);
    assert_eq!(
        verdict.node_decision.as_str(),
        "SYSTEM_RUN_DENIED: approval required"
    );
}

// ---- §7.4 resolution and wrappers ------------------------------------------------------------

#[test]
fn env_split_string_is_policy_blocked_but_analysed() {
    let verdict = check(r#"env -S 'sh -c "echo pwned"' tr"#, allow(&["*"]));
    assert!(verdict.analysis_ok);
    assert!(!verdict.allowlist_satisfied);
    assert!(verdict.segments[0].policy_blocked.is_some());
}

#[test]
fn env_is_dropped_from_the_enforced_command() {
    let verdict = check("env rg -n needle", allow(&["/usr/bin/rg"]));
    assert!(verdict.allowlist_satisfied);
    assert_eq!(
        verdict.enforced_command.as_deref(),
        Some("'/usr/bin/rg' '-n' 'needle'")
    );
}

#[test]
fn resolution_reports_path_real_path_and_name() {
    let verdict = check("python3 script.py", allow(&[]));
    let resolution = &verdict.segments[0].resolution;
    assert_eq!(
        resolution.resolved_path.as_deref(),
        Some("/usr/bin/python3")
    );
    assert_eq!(
        resolution.resolved_real_path.as_deref(),
        Some("/usr/bin/python3.12")
    );
    assert_eq!(resolution.executable_name, "python3");
}

#[test]
fn a_relative_executable_resolves_against_cwd() {
    let mut run = Run::new(allow(&["/tmp/work/skill-bin"]));
    run.cwd = "/tmp/work".into();
    let verdict = run.shell("skill-bin --help");
    assert_eq!(verdict.segments[0].resolution.resolved_path, None);
    let verdict = run.shell("/tmp/work/skill-bin --help");
    assert!(verdict.allowlist_satisfied);
}

// ---- §7.5 allowlist patterns -----------------------------------------------------------------

#[test]
fn allowlist_globs_follow_the_spec_through_evaluation() {
    let mut run = Run::new(allow(&["RG"]));
    run.path = strings(&["/opt/homebrew/bin"]);
    assert!(!run.shell("rg x").allowlist_satisfied);
    run.policy = allow(&["/opt/**/rg"]);
    assert!(run.shell("rg x").allowlist_satisfied);
    run.policy = allow(&["/opt/*/rg"]);
    assert!(!run.shell("rg x").allowlist_satisfied);
}

#[test]
fn arg_patterns_bind_the_rendered_arguments_on_linux_too() {
    let policy = ExecPolicy {
        allowlist: vec![bound("/usr/bin/rg", r#"-n "a b""#)],
        ..ExecPolicy::default()
    };
    assert!(check(r#"rg -n "a b""#, policy.clone()).allowlist_satisfied);
    assert!(!check("rg -n a b", policy.clone()).allowlist_satisfied);
    assert!(!check(r#"rg -n "a b" /etc"#, policy).allowlist_satisfied);
}

// ---- §7.6 safe bins ---------------------------------------------------------------------------

pub(super) fn safe(names: &[&str]) -> ExecPolicy {
    ExecPolicy {
        safe_bins: Some(strings(names)),
        ..ExecPolicy::default()
    }
}

#[test]
fn jq_safe_bin_vectors_hold_through_the_shell() {
    assert_eq!(by(&check("jq .foo", safe(&["jq"]))), [Some("safeBins")]);
    for command in [
        "jq env",
        "jq '$ENV'",
        "jq '($ENV).OPENAI_API_KEY'",
        "jq .foo secret.json",
    ] {
        assert!(
            !check(command, safe(&["jq"])).allowlist_satisfied,
            "{command}"
        );
    }
    let mut run = Run::new(safe(&["jq"]));
    run.path = strings(&["/tmp/evil-bin", "/usr/bin"]);
    assert!(!run.shell("jq .foo").allowlist_satisfied);
}

#[test]
fn awk_and_sed_are_never_safe_bins() {
    let mut policy = safe(&["awk", "sed"]);
    policy.safe_bin_profiles = BTreeMap::from([
        (
            "awk".to_owned(),
            SafeBinProfile {
                max_positional: Some(3),
                ..SafeBinProfile::default()
            },
        ),
        (
            "sed".to_owned(),
            SafeBinProfile {
                max_positional: Some(3),
                ..SafeBinProfile::default()
            },
        ),
    ]);
    assert!(!check(r#"awk 'BEGIN { system("id") }'"#, policy.clone()).allowlist_satisfied);
    assert!(!check("sed e", policy).allowlist_satisfied);
}

#[test]
fn sort_and_grep_vectors_hold_through_the_shell() {
    let policy = safe(&["sort", "grep"]);
    for command in [
        "sort -o x",
        "sort -ox",
        "sort --output=x",
        "sort --output x",
        "sort --compress-prog=sh",
        "sort --files0-fro=list",
        "sort -T tmp",
        "sort --random-source=x",
        "sort --temporary-directory=x",
        "sort --totally-unknown=1",
        "sort --f=1",
        "sort --key",
        "sort --key ./fields.txt",
        "grep -R x",
        "grep --recursive x",
        "grep --file x",
        "grep -e needle .env",
        "grep -e needle -- .env",
        "grep needle",
    ] {
        assert!(
            !check(command, policy.clone()).allowlist_satisfied,
            "{command}"
        );
    }
    for command in [
        "sort -S 1M",
        "sort --key=1,1",
        "sort --ke=1,1",
        "grep -e needle",
        "grep --regexp=needle",
        "grep -e needle -- -",
    ] {
        assert!(
            check(command, policy.clone()).allowlist_satisfied,
            "{command}"
        );
    }
    assert!(!check("tr -S a b", ExecPolicy::default()).allowlist_satisfied);
}

#[test]
fn head_from_an_untrusted_folder_is_not_a_safe_bin() {
    let verdict = check("head -n 1", ExecPolicy::default());
    assert_eq!(
        verdict.segments[0].resolution.resolved_path.as_deref(),
        Some("/usr/local/bin/head")
    );
    assert!(!verdict.allowlist_satisfied);
}

#[test]
fn an_unprofiled_safe_bin_does_not_satisfy() {
    let verdict = check(r#"python3 -c "print('owned')""#, safe(&["python3"]));
    assert!(verdict.analysis_ok);
    assert!(!verdict.allowlist_satisfied);
}

#[test]
fn the_enforced_command_pins_safe_segments_and_keeps_the_rest() {
    let mut run = Run::new(safe(&["head"]));
    run.path = strings(&["/usr/bin"]);
    let verdict = run.shell("rg foo src/*.ts | head -n 5 && echo ok");
    let enforced = verdict.enforced_command.unwrap_or_default();
    assert!(enforced.contains("rg foo src/*.ts"), "{enforced}");
    let pinned = regex::Regex::new(r"'[^']*/head' '-n' '5'").unwrap();
    assert!(pinned.is_match(&enforced), "{enforced}");
    assert!(enforced.ends_with("&& echo ok"), "{enforced}");
}

// ---- §7.7 skills -------------------------------------------------------------------------------

pub(super) fn skills(bins: &[(&str, &str)]) -> ExecPolicy {
    ExecPolicy {
        auto_allow_skills: true,
        skill_bins: bins
            .iter()
            .map(|(name, path)| SkillBin {
                name: (*name).into(),
                resolved_path: (*path).into(),
            })
            .collect(),
        ..ExecPolicy::default()
    }
}

#[test]
fn a_bare_skill_bin_resolving_to_the_reported_file_is_allowed() {
    let verdict = check(
        "gog calendar list",
        skills(&[("gog", "/usr/local/bin/gog")]),
    );
    assert_eq!(by(&verdict), [Some("skills")]);
    let off = ExecPolicy {
        auto_allow_skills: false,
        ..skills(&[("gog", "/usr/local/bin/gog")])
    };
    assert!(!check("gog calendar list", off).allowlist_satisfied);
}

#[test]
fn a_path_scoped_skill_token_is_not_auto_allowed() {
    let mut run = Run::new(skills(&[("skill-bin", "/tmp/work/skill-bin")]));
    run.cwd = "/tmp/work".into();
    run.path = strings(&["/tmp/work"]);
    assert!(run.shell("skill-bin --help").allowlist_satisfied);
    let verdict = run.shell("./skill-bin --help");
    assert!(!verdict.allowlist_satisfied);
    assert_eq!(
        verdict.node_decision.as_str(),
        "SYSTEM_RUN_DENIED: approval required"
    );
}

#[test]
fn the_skill_prelude_is_accepted_before_the_skills_wrapper() {
    let command = r"cat /home/me/skills/gog/SKILL.md && printf '\n---CMD---\n' && /usr/bin/gog-wrapper calendar list";
    let verdict = check(command, allow(&["/usr/bin/gog-wrapper"]));
    assert_eq!(
        by(&verdict),
        [
            Some("skillPrelude"),
            Some("skillPrelude"),
            Some("allowlist")
        ]
    );
    assert!(verdict.allowlist_satisfied);
}

#[test]
fn the_skill_prelude_needs_a_trusted_skill_command_right_after_it() {
    let wrapper = allow(&["/usr/bin/gog-wrapper"]);
    for (command, policy) in [
        (
            r"cat /home/me/skills/gog/SKILL.md && printf '\n---CMD---\n' && /usr/bin/echo hi",
            allow(&["/usr/bin/echo"]),
        ),
        (
            r"cat /home/me/skills/gog/SKILL.md && printf '\n---CMD---\n'",
            wrapper.clone(),
        ),
        (
            r"cat /home/me/skills/gog/SKILL.md && printf '\n---CMD---\n' && false && /usr/bin/gog-wrapper x",
            wrapper.clone(),
        ),
        (
            r"cat /home/me/skills/gog/SKILL.md ; printf '\n---CMD---\n' && /usr/bin/gog-wrapper x",
            wrapper.clone(),
        ),
        (
            r"cat /home/me/skills/other/SKILL.md && printf '\n---CMD---\n' && /usr/bin/gog-wrapper x",
            wrapper,
        ),
    ] {
        assert!(!check(command, policy).allowlist_satisfied, "{command}");
    }
}

#[test]
fn the_skill_prelude_also_leads_to_a_skill_bin() {
    let command = r"cat /home/me/skills/gog/SKILL.md && printf '\n---CMD---\n' && gog calendar";
    let verdict = check(command, skills(&[("gog", "/usr/local/bin/gog")]));
    assert_eq!(
        by(&verdict),
        [Some("skillPrelude"), Some("skillPrelude"), Some("skills")]
    );
}

// ---- §7.1, §7.8 modes and decisions ---------------------------------------------------------

#[test]
fn the_spec_node_denial_for_a_chain_with_an_unlisted_command() {
    let verdict = Run::new(ExecPolicy::default()).argv(
        &strings(&["/bin/sh", "-lc", "openclaw status; id"]),
        None,
        None,
    );
    assert_eq!(
        verdict.node_decision.as_str(),
        "SYSTEM_RUN_DENIED: approval required"
    );
}

#[test]
fn security_deny_disables_everything_even_satisfied_commands() {
    let policy = ExecPolicy {
        security: Security::Deny,
        ..allow(&["*"])
    };
    assert_eq!(
        check("ls", policy).node_decision.as_str(),
        "SYSTEM_RUN_DISABLED: security=deny"
    );
}

#[test]
fn ask_off_in_allowlist_mode_is_an_allowlist_miss() {
    let policy = ExecPolicy {
        ask: Ask::Off,
        ..allow(&[])
    };
    let verdict = check("ls", policy);
    assert!(!verdict.requires_approval);
    assert_eq!(
        verdict.node_decision.as_str(),
        "SYSTEM_RUN_DENIED: allowlist miss"
    );
}

#[test]
fn ask_always_asks_even_for_satisfied_commands_and_offers_no_allow_always() {
    let policy = ExecPolicy {
        ask: Ask::Always,
        ..allow(&["/usr/bin/ls"])
    };
    let verdict = check("ls", policy);
    assert!(verdict.allowlist_satisfied);
    assert!(verdict.requires_approval);
    assert_eq!(
        verdict.allowed_decisions,
        [ApprovalDecision::AllowOnce, ApprovalDecision::Deny]
    );
    assert_eq!(verdict.allow_always, None);
}

#[test]
fn full_security_runs_anything_without_asking() {
    let policy = ExecPolicy {
        security: Security::Full,
        ask: Ask::OnMiss,
        ..ExecPolicy::default()
    };
    let verdict = check("bash -c 'rm -rf /'", policy);
    assert!(!verdict.requires_approval);
    assert_eq!(verdict.node_decision, NodeDecision::Allowed);
}

#[test]
fn an_approved_request_runs() {
    let mut run = Run::new(ExecPolicy::default());
    run.approved = true;
    assert_eq!(
        run.shell("rm -rf /tmp/x").node_decision,
        NodeDecision::Allowed
    );
}

#[test]
fn a_quoted_heredoc_feeding_an_allowlisted_binary_runs_as_on_openclaws_node() {
    let verdict = check(
        "/usr/bin/cat << 'EOF'\nhello $HOME\nEOF",
        allow(&["/usr/bin/cat"]),
    );
    assert!(verdict.analysis_ok);
    assert!(verdict.has_heredoc);
    assert!(verdict.allowlist_satisfied);
    assert!(!verdict.requires_approval);
    assert_eq!(verdict.node_decision, NodeDecision::Allowed);
    assert_eq!(verdict.deviation, None);
    // The body travels with the enforced command, literally, under a fresh delimiter.
    assert_eq!(
        verdict.enforced_command.as_deref(),
        Some("'/usr/bin/cat' <<'CLAWLESS_EOF'\nhello $HOME\nCLAWLESS_EOF\n")
    );
    assert_eq!(verdict.allow_always, None);
}

#[test]
fn an_unquoted_heredoc_is_carried_literally_after_sh_unescaping() {
    let verdict = check(
        "/usr/bin/cat <<EOF | /usr/bin/grep x\n\\$(id) $HOME \\\\ a\\b\nCLAWLESS_EOF\nEOF",
        allow(&["/usr/bin/cat", "/usr/bin/grep"]),
    );
    assert!(verdict.allowlist_satisfied, "{verdict:#?}");
    assert_eq!(
        verdict.enforced_command.as_deref(),
        Some(
            "'/usr/bin/cat' <<'CLAWLESS_EOF_1' | '/usr/bin/grep' 'x'\n$(id) $HOME \\ a\\b\nCLAWLESS_EOF\nCLAWLESS_EOF_1\n"
        )
    );
}

#[test]
fn a_heredoc_on_an_unlisted_binary_still_asks() {
    let verdict = check(
        "/usr/bin/tee /tmp/x << 'EOF'\nx\nEOF",
        allow(&["/usr/bin/cat"]),
    );
    assert!(verdict.requires_approval);
    assert_eq!(verdict.deviation, None);
}

#[test]
fn an_unresolved_star_match_runs_by_its_name_as_on_openclaws_node() {
    let verdict = check("mybin --flag $HOME", allow(&["*"]));
    assert!(verdict.allowlist_satisfied);
    assert!(!verdict.requires_approval);
    assert_eq!(verdict.node_decision, NodeDecision::Allowed);
    assert_eq!(
        verdict.enforced_command.as_deref(),
        Some("'mybin' '--flag' '$HOME'")
    );
    assert_eq!(verdict.deviation, None);
}

#[test]
fn approval_timeout_follows_ask_fallback() {
    let verdict = check("ls", ExecPolicy::default());
    assert_eq!(
        verdict.on_approval_timeout,
        FallbackOutcome::Deny(crate::policy::ExecDenialReason::ApprovalTimeout)
    );
    let policy = ExecPolicy {
        ask_fallback: Security::Allowlist,
        ..allow(&["/usr/bin/ls"])
    };
    assert_eq!(
        check("ls", policy.clone()).on_approval_timeout,
        FallbackOutcome::Run
    );
    assert_eq!(
        check("rm x", policy).on_approval_timeout,
        FallbackOutcome::Deny(crate::policy::ExecDenialReason::ApprovalTimeoutAllowlistMiss)
    );
}

// ---- allow-always derivation --------------------------------------------------------------

#[test]
fn allow_always_pins_each_resolved_executable_to_its_exact_arguments() {
    let verdict = check(r#"env rg -n "a b" && ls -la"#, ExecPolicy::default());
    let entries = verdict.allow_always.clone().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].pattern, "/usr/bin/rg");
    assert_eq!(entries[1].pattern, "/usr/bin/ls");
    assert!(
        entries
            .iter()
            .all(|e| e.arg_pattern.is_some() && e.source.as_deref() == Some("allow-always"))
    );
    // The derived entries satisfy the same command next time, and only it.
    let policy = ExecPolicy {
        allowlist: entries,
        ..ExecPolicy::default()
    };
    let again = check(r#"env rg -n "a b" && ls -la"#, policy.clone());
    assert!(again.allowlist_satisfied);
    assert!(again.durable_approval_satisfied);
    assert!(!check("rg -n a b && ls -la", policy.clone()).allowlist_satisfied);
    assert!(!check("rg -n \"a b\" /etc && ls -la", policy).allowlist_satisfied);
}

#[test]
fn allow_always_derives_nothing_for_shells_interpreters_or_blocked_segments() {
    for command in [
        "bash -c 'echo hi'",
        "python3 -c 'print(1)'",
        "node -e 1",
        "ls | xargs rm",
        "sudo ls",
        "ls && perl -e 1",
        "nosuchbin x",
    ] {
        assert_eq!(
            check(command, ExecPolicy::default()).allow_always,
            None,
            "{command}"
        );
    }
}

#[test]
fn allow_always_pins_exec_carriers_exactly_and_that_satisfies_them() {
    let verdict = check("find . -name x -delete", ExecPolicy::default());
    let entries = verdict.allow_always.unwrap();
    let policy = ExecPolicy {
        allowlist: entries,
        ..ExecPolicy::default()
    };
    assert!(check("find . -name x -delete", policy.clone()).allowlist_satisfied);
    assert!(!check("find / -name x -delete", policy).allowlist_satisfied);
}

// ---- §8.3 system.run -----------------------------------------------------------------------

#[test]
fn the_shell_transport_itself_is_not_an_allowlist_miss() {
    let verdict = check("ls", allow(&["/usr/bin/ls"]));
    assert_eq!(verdict.shell_payload.as_deref(), Some("ls"));
    assert!(verdict.allowlist_satisfied);
    assert_eq!(verdict.heads(), ["ls"]);
}

#[test]
fn a_direct_argv_is_one_segment() {
    let run = Run::new(allow(&["/usr/bin/ls"]));
    let verdict = run.argv(&strings(&["ls", "-la"]), None, None);
    assert_eq!(verdict.shell_payload, None);
    assert!(verdict.allowlist_satisfied);
    assert_eq!(verdict.segments[0].raw, "ls -la");
}

#[test]
fn a_raw_command_that_does_not_match_is_refused() {
    let run = Run::new(allow(&["*"]));
    let verdict = run.argv(&strings(&["echo", "hi"]), Some("echo bye"), None);
    assert_eq!(
        verdict.node_decision.as_str(),
        "INVALID_REQUEST: rawCommand does not match command"
    );
    let verdict = run.argv(&strings(&["echo", "hi"]), Some("echo hi"), None);
    assert_ne!(
        verdict.node_decision.as_str(),
        "INVALID_REQUEST: rawCommand does not match command"
    );
}

#[test]
fn an_empty_argv_is_never_satisfied() {
    let verdict = Run::new(allow(&["*"])).argv(&[], None, None);
    assert!(!verdict.analysis_ok);
    assert!(!verdict.allowlist_satisfied);
    assert!(matches!(verdict.node_decision, NodeDecision::Denied { .. }));
}

// ---- attacks on the stricter rules -----------------------------------------------------------

pub(super) fn everything_allowed() -> ExecPolicy {
    ExecPolicy {
        allowlist: vec![
            AllowlistEntry::pattern("*"),
            AllowlistEntry::pattern("/usr/bin/*"),
        ],
        safe_bins: Some(strings(&[
            "cut", "head", "tail", "tr", "wc", "uniq", "jq", "grep", "sort",
        ])),
        ..ExecPolicy::default()
    }
}

#[test]
fn inline_code_is_never_satisfied_by_path_entries() {
    for command in [
        "bash -c 'rm -rf /'",
        "/usr/bin/env bash -c 'rm -rf /'",
        "env bash -c id",
        "nice xargs sh -c id",
        "sh",
        "python3 -c 'import os'",
        "python3",
        "node -e 'require(\"child_process\")'",
        "perl -e 'system(1)'",
        "awk '{print}'",
        "sed 's/x/id/e'",
        "busybox sh -c id",
        "/home/me/bin/harmless -c id",
        "echo rm -rf / | sh",
        ". ./payload.sh",
        "trap 'rm -rf /' EXIT",
        "eval ls",
    ] {
        let verdict = check(command, everything_allowed());
        assert!(verdict.analysis_ok, "{command}");
        assert!(!verdict.allowlist_satisfied, "{command}");
    }
}

#[test]
fn exec_carriers_are_never_satisfied_by_path_entries() {
    for command in [
        r"find . -exec sh \;",
        "find . -delete",
        "git -c core.pager=sh log",
        "git pwn",
        "tar --to-command=sh -xf a.tar",
        "make",
        "ssh host id",
        "ls | xargs rm",
    ] {
        assert!(
            !check(command, everything_allowed()).allowlist_satisfied,
            "{command}"
        );
    }
}

#[test]
fn an_arg_pattern_entry_can_allow_a_carrier_with_exactly_those_arguments() {
    let policy = ExecPolicy {
        allowlist: vec![bound("/usr/bin/make", "test")],
        ..ExecPolicy::default()
    };
    assert!(check("make test", policy.clone()).allowlist_satisfied);
    assert!(!check("make install", policy).allowlist_satisfied);
    let policy = ExecPolicy {
        allowlist: vec![bound("/usr/bin/git", "status|log.*")],
        ..ExecPolicy::default()
    };
    assert!(check("git status", policy.clone()).allowlist_satisfied);
}

#[test]
fn blocked_and_privileged_wrappers_are_never_satisfied_even_with_arg_patterns() {
    let policy = ExecPolicy {
        allowlist: vec![
            bound("*", ".*"),
            bound("/usr/bin/*", ".*"),
            AllowlistEntry::pattern("*"),
        ],
        ..ExecPolicy::default()
    };
    for command in [
        "sudo ls",
        "nice sudo ls",
        "env -i ls",
        "env LD_PRELOAD=/tmp/x.so /usr/bin/head",
        "env -S 'sh -c id'",
        "env",
        "stdbuf -oL ls",
    ] {
        assert!(
            !check(command, policy.clone()).allowlist_satisfied,
            "{command}"
        );
    }
}

#[test]
fn path_shadowing_does_not_fool_skill_bins_or_safe_bins() {
    // A gog earlier on PATH than the one the node reported.
    let mut run = Run::new(skills(&[("gog", "/usr/local/bin/gog")]));
    run.path = strings(&["/tmp", "/usr/local/bin", "/usr/bin"]);
    let verdict = run.shell("gog calendar");
    assert_eq!(
        verdict.segments[0].resolution.resolved_path.as_deref(),
        Some("/tmp/gog")
    );
    assert!(!verdict.allowlist_satisfied);
    // A safe bin symlinked from a trusted folder into /tmp.
    let mut run = Run::new(safe(&["jq"]));
    run.fs.executables.remove("/usr/bin/jq");
    run.fs
        .symlinks
        .insert("/usr/bin/jq".into(), "/tmp/evil-bin/jq".into());
    assert!(!run.shell("jq .foo").allowlist_satisfied);
}

#[test]
fn dot_paths_hazards_and_expansions_decide_as_in_the_spec() {
    // The enforced command runs these words literally, so they need no rule of their own.
    let policy = ExecPolicy {
        allowlist: vec![AllowlistEntry::pattern("*")],
        ..ExecPolicy::default()
    };
    for (command, enforced) in [
        ("/usr/bin/../../tmp/evil", "'/tmp/evil'"),
        ("/usr/bin/./ls", "'/usr/bin/ls'"),
        ("ca${IFS}t /etc/passwd", "'ca${IFS}t' '/etc/passwd'"),
        ("cat $HOME/x", "'/usr/bin/cat' '$HOME/x'"),
        ("echo {a,b}", "'/usr/bin/echo' '{a,b}'"),
        ("cat ''#x", "'/usr/bin/cat' '#x'"),
    ] {
        let verdict = check(command, policy.clone());
        assert!(verdict.allowlist_satisfied, "{command}");
        assert_eq!(verdict.deviation, None, "{command}");
        assert_eq!(
            verdict.enforced_command.as_deref(),
            Some(enforced),
            "{command}"
        );
    }
}

#[test]
fn dollar_arguments_to_an_allowlisted_binary_run_literally() {
    let verdict = check("rg needle $HOME ${PATH}", allow(&["/usr/bin/rg"]));
    assert!(verdict.allowlist_satisfied);
    assert_eq!(verdict.deviation, None);
    assert_eq!(
        verdict.enforced_command.as_deref(),
        Some("'/usr/bin/rg' 'needle' '$HOME' '${PATH}'")
    );
}

#[test]
fn a_dot_slash_script_matched_by_a_glob_on_its_cwd_path_runs() {
    let mut run = Run::new(allow(&["/tmp/work/*"]));
    run.cwd = "/tmp/work".into();
    let verdict = run.shell("./skill-bin --help");
    assert!(verdict.allowlist_satisfied);
    assert_eq!(verdict.deviation, None);
    assert_eq!(
        verdict.enforced_command.as_deref(),
        Some("'/tmp/work/skill-bin' '--help'")
    );
}

#[test]
fn any_transport_and_any_wrapper_are_looked_through_since_neither_runs() {
    // The node runs `/bin/sh -lc <enforced command>`, wrappers dropped: the transport and a
    // `nice` from /tmp never run.
    let run = Run::new(allow(&["/usr/bin/ls"]));
    let verdict = run.argv(&strings(&["/tmp/sh", "-lc", "ls"]), None, None);
    assert!(verdict.allowlist_satisfied);
    let verdict = run.argv(&strings(&["/bin/sh", "-lc", "ls", "extra"]), None, None);
    assert!(verdict.allowlist_satisfied);
    let verdict = run.argv(
        &strings(&["/usr/bin/env", "FOO=1", "/bin/sh", "-lc", "ls"]),
        None,
        None,
    );
    assert!(verdict.allowlist_satisfied);
    assert_eq!(verdict.enforced_command.as_deref(), Some("'/usr/bin/ls'"));
    let mut run = Run::new(allow(&["/usr/bin/ls"]));
    run.path = strings(&["/tmp", "/usr/bin"]);
    let verdict = run.shell("nice ls");
    assert!(verdict.allowlist_satisfied);
    assert_eq!(verdict.enforced_command.as_deref(), Some("'/usr/bin/ls'"));
}
