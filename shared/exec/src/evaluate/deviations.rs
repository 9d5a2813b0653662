//! Every row of the deviations table (`docs/exec.md`) in both directions: the command shape
//! gets clawless's decision and names its rule, and the neighbouring shape (or the sanctioned
//! way to allow it) gets OpenClaw's decision with no deviation. Then the shapes where clawless
//! used to depart and now decides as the spec does.

use sha2::{Digest, Sha256};

use super::tests::{Run, allow, bound, check, safe, skills, strings};
use super::*;

const APPROVAL: &str = "SYSTEM_RUN_DENIED: approval required";

/// Asserts that `verdict` asks a person and names `rule`, on the verdict and on a segment.
#[track_caller]
fn asks_because(verdict: &ExecVerdict, rule: Deviation) {
    assert!(verdict.requires_approval, "{verdict:#?}");
    assert_eq!(verdict.node_decision.as_str(), APPROVAL, "{verdict:#?}");
    assert_eq!(verdict.deviation, Some(rule), "{verdict:#?}");
}

/// Asserts that `verdict` runs now, as on OpenClaw's node, with no deviation.
#[track_caller]
fn runs_as_in_openclaw(verdict: &ExecVerdict) {
    assert_eq!(verdict.node_decision, NodeDecision::Allowed, "{verdict:#?}");
    assert_eq!(verdict.deviation, None, "{verdict:#?}");
}

/// Asserts that `verdict` asks, as OpenClaw's node would, with no deviation.
#[track_caller]
fn asks_as_in_openclaw(verdict: &ExecVerdict) {
    assert!(verdict.requires_approval, "{verdict:#?}");
    assert_eq!(verdict.deviation, None, "{verdict:#?}");
}

fn segment_rules(verdict: &ExecVerdict) -> Vec<Option<Deviation>> {
    verdict.segments.iter().map(|s| s.deviation).collect()
}

// ---- the table, row by row ------------------------------------------------------------------

#[test]
fn inline_code_asks_even_with_a_path_entry_and_an_arg_pattern_entry_allows_it() {
    let verdict = check("python3 -c 'print(1)'", allow(&["/usr/bin/python3"]));
    asks_because(&verdict, Deviation::InlineCode);
    assert_eq!(segment_rules(&verdict), [Some(Deviation::InlineCode)]);
    // `*` too: OpenClaw's `*` would run any code.
    asks_because(&check("bash -c id", allow(&["*"])), Deviation::InlineCode);
    // The sanctioned way: an entry binding the arguments.
    let bound_entry = ExecPolicy {
        allowlist: vec![bound("/usr/bin/python3", r"-c print\(1\)")],
        ..ExecPolicy::default()
    };
    runs_as_in_openclaw(&check("python3 -c 'print(1)'", bound_entry));
    // Not a carrier: a script operand.
    runs_as_in_openclaw(&check("python3 script.py", allow(&["/usr/bin/python3"])));
}

#[test]
fn exec_carriers_ask_with_a_path_entry_and_their_plain_uses_run() {
    asks_because(
        &check(r"find . -exec rm {} \;", allow(&["/usr/bin/find"])),
        Deviation::ExecCarrier,
    );
    asks_because(
        &check("git -c core.pager=sh log", allow(&["/usr/bin/git"])),
        Deviation::ExecCarrier,
    );
    runs_as_in_openclaw(&check("find . -name x", allow(&["/usr/bin/find"])));
    runs_as_in_openclaw(&check("git log -3", allow(&["/usr/bin/git"])));
}

#[test]
fn privilege_wrappers_ask_where_openclaw_judges_them_as_binaries() {
    let verdict = check("su -c 'rm -rf /' root", allow(&["/usr/bin/*"]));
    asks_because(&verdict, Deviation::PrivilegeWrapper);
    // `sudo` is blocked by OpenClaw too: same decision, no deviation.
    asks_as_in_openclaw(&check("sudo ls", allow(&["/usr/bin/*"])));
    // Without an entry for `su`, OpenClaw asks as well.
    asks_as_in_openclaw(&check("su -c id root", allow(&["/usr/bin/ls"])));
}

#[test]
fn an_arg_pattern_binds_its_entry_on_linux() {
    let policy = ExecPolicy {
        allowlist: vec![bound("/usr/bin/rg", "-n needle")],
        ..ExecPolicy::default()
    };
    asks_because(&check("rg -n other", policy.clone()), Deviation::ArgPattern);
    runs_as_in_openclaw(&check("rg -n needle", policy));
    // An argPattern that does not compile matches nothing here; OpenClaw ignores it.
    let broken = ExecPolicy {
        allowlist: vec![bound("/usr/bin/rg", "(")],
        ..ExecPolicy::default()
    };
    asks_because(&check("rg x", broken), Deviation::ArgPattern);
}

#[test]
fn allow_always_entries_pin_the_arguments_they_were_granted_for() {
    let granted = check("rg -n needle", ExecPolicy::default())
        .allow_always
        .unwrap();
    let policy = ExecPolicy {
        allowlist: granted,
        ..ExecPolicy::default()
    };
    asks_because(
        &check("rg -n other", policy.clone()),
        Deviation::AllowAlwaysArgv,
    );
    let again = check("rg -n needle", policy);
    runs_as_in_openclaw(&again);
    assert!(again.durable_approval_satisfied);
}

#[test]
fn command_hash_entries_are_not_honoured() {
    let hash = |text: &str| {
        let digest = hex::encode(Sha256::digest(text.as_bytes()));
        AllowlistEntry {
            pattern: format!("=command:{}", &digest[..16]),
            arg_pattern: None,
            source: Some("allow-always".into()),
        }
    };
    let policy = ExecPolicy {
        allowlist: vec![hash("sudo ls")],
        ..ExecPolicy::default()
    };
    asks_because(&check("sudo ls", policy), Deviation::CommandHashEntry);
    // An entry for another command: OpenClaw asks too.
    let other = ExecPolicy {
        allowlist: vec![hash("sudo id")],
        ..ExecPolicy::default()
    };
    asks_as_in_openclaw(&check("sudo ls", other));
}

#[test]
fn a_safe_bin_linked_from_a_trusted_folder_to_elsewhere_is_not_safe() {
    let mut run = Run::new(safe(&["jq"]));
    run.fs.executables.remove("/usr/bin/jq");
    run.fs
        .symlinks
        .insert("/usr/bin/jq".into(), "/tmp/evil-bin/jq".into());
    asks_because(&run.shell("jq .foo"), Deviation::SafeBinRealPath);
    let verdict = check("jq .foo", safe(&["jq"]));
    runs_as_in_openclaw(&verdict);
    assert_eq!(
        verdict.segments[0].satisfied_by,
        Some(SatisfiedBy::SafeBins)
    );
}

#[test]
fn a_jq_safe_bin_may_not_load_modules() {
    asks_because(
        &check(r#"jq 'import "data" as $d; $d'"#, safe(&["jq"])),
        Deviation::JqModule,
    );
    asks_because(
        &check(r#"jq 'include "lib"; .a'"#, safe(&["jq"])),
        Deviation::JqModule,
    );
    runs_as_in_openclaw(&check("jq .foo", safe(&["jq"])));
    // Reading the environment is refused by OpenClaw too.
    asks_as_in_openclaw(&check("jq env", safe(&["jq"])));
}

#[test]
fn the_skill_prelude_needs_cat_from_a_trusted_folder() {
    let command = r"cat /home/me/skills/gog/SKILL.md && printf '\n---CMD---\n' && /usr/bin/gog-wrapper calendar";
    let mut run = Run::new(allow(&["/usr/bin/gog-wrapper"]));
    run.fs.executables.insert("/usr/local/bin/cat".into());
    let verdict = run.shell(command);
    asks_because(&verdict, Deviation::SkillPreludeBins);
    // The whole prelude falls with its `cat`.
    assert_eq!(
        segment_rules(&verdict),
        [
            Some(Deviation::SkillPreludeBins),
            Some(Deviation::SkillPreludeBins),
            None
        ]
    );
    runs_as_in_openclaw(&check(command, allow(&["/usr/bin/gog-wrapper"])));
}

#[test]
fn relative_path_entries_are_skipped() {
    let mut run = Run::new(allow(&["/tmp/work/*"]));
    run.cwd = "/tmp/work".into();
    run.path = strings(&[".", "/usr/bin"]);
    let verdict = run.shell("skill-bin --help");
    assert_eq!(verdict.segments[0].resolution.resolved_path, None);
    asks_because(&verdict, Deviation::RelativePathEntry);
    // Named by its path, the same file runs.
    runs_as_in_openclaw(&run.shell("./skill-bin --help"));
}

#[test]
fn a_comment_ends_at_the_newline() {
    let verdict = check("ls # note\nrm -rf /tmp/x", allow(&["/usr/bin/ls"]));
    assert!(!verdict.analysis_ok);
    assert_eq!(
        verdict.reason.as_deref(),
        Some("unsupported shell token: \n")
    );
    asks_because(&verdict, Deviation::ShParsing);
    runs_as_in_openclaw(&check("ls # note", allow(&["/usr/bin/ls"])));
    // A newline without a comment: OpenClaw refuses it too.
    asks_as_in_openclaw(&check("ls\nrm -rf /tmp/x", allow(&["/usr/bin/ls"])));
}

#[test]
fn unicode_spaces_do_not_split_words() {
    let verdict = check("ls\u{a0}-la", allow(&["/usr/bin/ls"]));
    assert_eq!(verdict.segments[0].argv, ["ls\u{a0}-la"]);
    asks_because(&verdict, Deviation::ShParsing);
    runs_as_in_openclaw(&check("ls -la", allow(&["/usr/bin/ls"])));
}

#[test]
fn nothing_runs_on_windows_without_approval() {
    let mut run = Run::new(allow(&["*"]));
    run.platform = Platform::Windows;
    let argv = strings(&["cmd.exe", "/d", "/s", "/c", "mybin x"]);
    let verdict = run.argv(&argv, None, None);
    assert!(verdict.allowlist_satisfied);
    asks_because(&verdict, Deviation::WindowsNoRebuild);
    // Not allowlisted: OpenClaw asks too.
    run.policy = allow(&[]);
    asks_as_in_openclaw(&run.argv(&argv, None, None));
}

#[test]
fn env_keys_only_clawless_refuses_are_named() {
    let run = Run::new(allow(&["/usr/bin/ls"]));
    let ls = strings(&["ls"]);
    let env = BTreeMap::from([("HOSTALIASES".to_owned(), "/tmp/hosts".to_owned())]);
    let verdict = run.argv(&ls, None, Some(&env));
    assert!(
        verdict
            .node_decision
            .as_str()
            .starts_with("SYSTEM_RUN_DENIED: environment override rejected")
    );
    assert_eq!(verdict.deviation, Some(Deviation::EnvOverrideKeys));
    // A key OpenClaw refuses too.
    let env = BTreeMap::from([("LD_PRELOAD".to_owned(), "/tmp/x.so".to_owned())]);
    let verdict = run.argv(&ls, None, Some(&env));
    assert!(matches!(verdict.node_decision, NodeDecision::Denied { .. }));
    assert_eq!(verdict.deviation, None);
    // An allowed key: it runs.
    let env = BTreeMap::from([("TZ".to_owned(), "UTC".to_owned())]);
    runs_as_in_openclaw(&run.argv(&ls, None, Some(&env)));
    // A shell-style assignment word: OpenClaw checks only `env NAME=value`.
    let verdict = check("LD_PRELOAD=/tmp/x.so head", allow(&["*"]));
    assert!(
        verdict
            .node_decision
            .as_str()
            .starts_with("SYSTEM_RUN_DENIED: command env assignment rejected")
    );
    assert_eq!(verdict.deviation, Some(Deviation::EnvOverrideKeys));
    let verdict = check("env LD_PRELOAD=/tmp/x.so head", allow(&["*"]));
    assert!(matches!(verdict.node_decision, NodeDecision::Denied { .. }));
    assert_eq!(verdict.deviation, None);
}

#[test]
fn an_unanswered_approval_is_denied_by_default() {
    let policy = ExecPolicy {
        ask: Ask::Always,
        ..allow(&["/usr/bin/ls"])
    };
    let verdict = check("ls", policy.clone());
    assert!(verdict.requires_approval);
    assert!(matches!(
        verdict.on_approval_timeout,
        FallbackOutcome::Deny(_)
    ));
    assert_eq!(verdict.deviation, Some(Deviation::AskFallbackDeny));
    // Configured like OpenClaw's node: it falls back to the allowlist and runs.
    let openclaw = ExecPolicy {
        ask_fallback: Security::Allowlist,
        ..policy
    };
    let verdict = check("ls", openclaw);
    assert_eq!(verdict.on_approval_timeout, FallbackOutcome::Run);
    assert_eq!(verdict.deviation, None);
}

#[test]
fn every_rule_has_a_test_here() {
    // The rows above, one per rule; a new rule needs its test.
    assert_eq!(Deviation::ALL.len(), 14);
}

// ---- where clawless used to depart and now follows the spec ---------------------------------

#[test]
fn env_or_any_wrapper_with_no_command_asks_as_in_openclaw() {
    for command in ["env", "nice", "timeout 5", "/usr/bin/env --"] {
        let verdict = check(command, allow(&["/usr/bin/*"]));
        assert!(verdict.segments[0].policy_blocked.is_some(), "{command}");
        asks_as_in_openclaw(&verdict);
    }
}

#[test]
fn stdbuf_option_forms_openclaw_does_not_read_ask() {
    let verdict = check("stdbuf -oL ls", allow(&["/usr/bin/*"]));
    assert!(verdict.segments[0].policy_blocked.is_some());
    asks_as_in_openclaw(&verdict);
    runs_as_in_openclaw(&check("stdbuf -o L ls", allow(&["/usr/bin/ls"])));
}

#[test]
fn time_writing_a_file_is_unwrapped_since_the_rebuilt_command_drops_it() {
    let verdict = check("time -o /tmp/out ls", allow(&["/usr/bin/ls"]));
    runs_as_in_openclaw(&verdict);
    assert_eq!(verdict.enforced_command.as_deref(), Some("'/usr/bin/ls'"));
}

#[test]
fn the_four_listed_shapes_run_as_on_openclaws_node() {
    runs_as_in_openclaw(&check(
        "/usr/bin/cat <<'EOF'\nx\nEOF",
        allow(&["/usr/bin/cat"]),
    ));
    runs_as_in_openclaw(&check("rg $X ${Y}", allow(&["/usr/bin/rg"])));
    let mut run = Run::new(allow(&["/tmp/work/*"]));
    run.cwd = "/tmp/work".into();
    runs_as_in_openclaw(&run.shell("./skill-bin"));
    runs_as_in_openclaw(&check("nosuchbin --flag", allow(&["*"])));
}

#[test]
fn skill_bins_compare_resolved_paths_as_openclaw_does() {
    // The node reported the bin through a link; the segment resolves to the link's target.
    let mut run = Run::new(skills(&[("gog", "/usr/local/bin/gog")]));
    run.fs.executables.remove("/usr/local/bin/gog");
    run.fs.executables.insert("/opt/gog/gog".into());
    run.fs
        .symlinks
        .insert("/usr/local/bin/gog".into(), "/opt/gog/gog".into());
    run.path = strings(&["/opt/gog", "/usr/local/bin", "/usr/bin"]);
    asks_as_in_openclaw(&run.shell("gog calendar"));
    run.path = strings(&["/usr/local/bin", "/usr/bin"]);
    runs_as_in_openclaw(&run.shell("gog calendar"));
}
