//! `clawless exec check` as a user runs it: the built binary, a JSON request on stdin with an
//! `fs` block describing the node, and the JSON verdict on stdout. Every test vector of spec
//! §7 and §8.3 goes through it, plus attacks on the rules where clawless is stricter.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// A Debian-like node: `/bin` links to `/usr/bin`, `/usr/bin/sh` is dash.
fn node_fs() -> Value {
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
        "timeout",
        "xargs",
        "find",
        "git",
        "tar",
        "make",
        "python3",
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
        "false",
        "busybox",
        "gog-wrapper",
        "tee",
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
            "/tmp/gog",
            "/usr/local/bin/gog",
            "/usr/local/bin/head",
            "/tmp/work/skill-bin",
        ]
        .map(str::to_owned),
    );
    json!({
        "executables": executables,
        "files": ["/home/me/skills/gog/SKILL.md"],
        "symlinks": {"/bin": "usr/bin", "/usr/bin/sh": "dash", "/home/me/bin/harmless": "/usr/bin/bash"},
    })
}

/// A request for `command` on the node, with `extra` fields merged over the defaults.
fn request(command: &str, extra: Value) -> Value {
    let mut base = json!({
        "command": command,
        "platform": "linux",
        "path": ["/usr/bin", "/bin"],
        "cwd": "/tmp",
        "home": "/home/me",
        "fs": node_fs(),
        "policy": {},
    });
    if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
        for (key, value) in extra {
            base.insert(key.clone(), value.clone());
        }
    }
    base
}

fn run_check(input: &Value, args: &[&str]) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_clawless"))
        .arg("exec")
        .arg("check")
        .args(args)
        .env_clear()
        .env("PATH", "/nonexistent")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn check(input: &Value) -> Value {
    let (ok, stdout, stderr) = run_check(input, &[]);
    assert!(ok, "exec check failed: {stderr}\ninput: {input}");
    serde_json::from_str(&stdout).unwrap()
}

/// What a case expects of the response, at a JSON pointer.
enum Expect {
    Is(&'static str, Value),
    StartsWith(&'static str, &'static str),
    Contains(&'static str, &'static str),
}
use Expect::{Contains, Is, StartsWith};

fn assert_case(name: &str, input: &Value, expects: &[Expect]) {
    let response = check(input);
    for expect in expects {
        let (pointer, ok, wanted) = match expect {
            Is(pointer, value) => (
                pointer,
                response.pointer(pointer) == Some(value),
                value.to_string(),
            ),
            StartsWith(pointer, prefix) => (
                pointer,
                response
                    .pointer(pointer)
                    .and_then(Value::as_str)
                    .is_some_and(|s| s.starts_with(prefix)),
                format!("starts with {prefix:?}"),
            ),
            Contains(pointer, part) => (
                pointer,
                response
                    .pointer(pointer)
                    .and_then(Value::as_str)
                    .is_some_and(|s| s.contains(part)),
                format!("contains {part:?}"),
            ),
        };
        assert!(
            ok,
            "case {name:?}: {pointer} should be {wanted}, got {}\nresponse: {response:#}",
            response
                .pointer(pointer)
                .map_or("nothing".into(), Value::to_string)
        );
    }
}

fn policy(value: Value) -> Value {
    json!({ "policy": value })
}

const APPROVAL: &str = "SYSTEM_RUN_DENIED: approval required";

#[test]
fn shell_analysis_vectors_of_section_7_3() {
    let star = policy(json!({"allowlist": ["*"]}));
    let cases: Vec<(&str, Vec<Expect>)> = vec![
        (
            "echo ok | jq .foo",
            vec![Is("/heads", json!(["echo", "jq"]))],
        ),
        ("ls && rm -rf /", vec![Is("/heads", json!(["ls", "rm"]))]),
        (
            "echo \"output: $(whoami)\"",
            vec![Is("/reason", json!("unsupported shell token: $()"))],
        ),
        (
            "echo \"output: `id`\"",
            vec![Is("/reason", json!("unsupported shell token: `"))],
        ),
        (
            "echo $(whoami)",
            vec![Is("/reason", json!("unsupported shell token: $()"))],
        ),
        (
            "cat < input.txt",
            vec![Is("/reason", json!("unsupported shell token: <"))],
        ),
        (
            "echo ok > output.txt",
            vec![Is("/reason", json!("unsupported shell token: >"))],
        ),
        (
            "/usr/bin/echo first line\n/usr/bin/echo second line",
            vec![Is("/reason", json!("unsupported shell token: \n"))],
        ),
        (
            "echo \"ok $\\\n(id -u)\"",
            vec![Is("/analysisOk", json!(false))],
        ),
        (
            "echo \"output: \\$(whoami)\"",
            vec![
                Is("/analysisOk", json!(true)),
                Is("/heads", json!(["echo"])),
            ],
        ),
        (
            "echo 'output: $(whoami)'",
            vec![
                Is("/analysisOk", json!(true)),
                Is("/heads", json!(["echo"])),
            ],
        ),
        (
            "/usr/bin/tee /tmp/file << 'EOF'\nEOF",
            vec![Is("/heads", json!(["/usr/bin/tee"]))],
        ),
        (
            "/usr/bin/cat << 'EOF' | /usr/bin/grep pattern\npattern\nEOF",
            vec![Is("/heads", json!(["/usr/bin/cat", "/usr/bin/grep"]))],
        ),
        (
            "/usr/bin/cat <<EOF\n\\$(id)\nEOF",
            vec![Is("/analysisOk", json!(true))],
        ),
        (
            "/usr/bin/cat <<'EOF'\n$(id)\nEOF",
            vec![Is("/analysisOk", json!(true))],
        ),
        (
            "/usr/bin/cat <<EOF\n$(id)\nEOF",
            vec![Is(
                "/reason",
                json!("command substitution in unquoted heredoc"),
            )],
        ),
        (
            "/usr/bin/cat <<EOF\n`whoami`\nEOF",
            vec![Is(
                "/reason",
                json!("command substitution in unquoted heredoc"),
            )],
        ),
        (
            "/usr/bin/cat <<EOF\n${PATH}\nEOF",
            vec![Is(
                "/reason",
                json!("command substitution in unquoted heredoc"),
            )],
        ),
        (
            "/usr/bin/cat <<EOF\nline one",
            vec![Is("/reason", json!("unterminated heredoc"))],
        ),
    ];
    for (command, expects) in cases {
        assert_case(command, &request(command, star.clone()), &expects);
    }
    let windows = request("ping 127.0.0.1 -n 1 & whoami", json!({"platform": "win32"}));
    assert_case(
        "windows &",
        &windows,
        &[Is("/reason", json!("unsupported windows shell token: &"))],
    );
}

#[test]
fn allowlist_chain_vectors_of_section_7_3() {
    let cases = [
        (
            "/usr/bin/obsidian-cli print-default && /usr/bin/obsidian-cli search foo | /usr/bin/head",
            json!(["/usr/bin/obsidian-cli", "/usr/bin/head"]),
            true,
            true,
        ),
        (
            "/usr/bin/obsidian-cli print-default && /usr/bin/rm -rf /",
            json!(["/usr/bin/obsidian-cli"]),
            true,
            false,
        ),
        (
            "/usr/bin/echo ok &&",
            json!(["/usr/bin/echo"]),
            false,
            false,
        ),
        (
            "/usr/bin/echo \"foo && bar\"",
            json!(["/usr/bin/echo"]),
            true,
            true,
        ),
        (
            "/usr/bin/echo \"foo\\\" && bar\"",
            json!(["/usr/bin/echo"]),
            true,
            true,
        ),
        ("mybin --flag", json!([{"pattern": "*"}]), true, true),
    ];
    for (command, allowlist, ok, satisfied) in cases {
        assert_case(
            command,
            &request(command, policy(json!({"allowlist": allowlist}))),
            &[
                Is("/analysisOk", json!(ok)),
                Is("/allowlistSatisfied", json!(satisfied)),
            ],
        );
    }
}

#[test]
fn resolution_and_wrapper_vectors_of_section_7_4() {
    assert_case(
        "env -S",
        &request(
            "env -S 'sh -c \"echo pwned\"' tr",
            policy(json!({"allowlist": ["*"]})),
        ),
        &[
            Is("/analysisOk", json!(true)),
            Is("/allowlistSatisfied", json!(false)),
            StartsWith("/segments/0/policyBlocked", "`env` with modifier"),
        ],
    );
    assert_case(
        "env rg",
        &request(
            "env rg -n needle",
            policy(json!({"allowlist": ["/usr/bin/rg"]})),
        ),
        &[Is("/enforcedCommand", json!("'/usr/bin/rg' '-n' 'needle'"))],
    );
    assert_case(
        "~ and real path",
        &request("python3 x.py", json!({})),
        &[
            Is("/segments/0/resolvedPath", json!("/usr/bin/python3")),
            Is("/segments/0/executableName", json!("python3")),
        ],
    );
}

#[test]
fn allowlist_pattern_vectors_of_section_7_5() {
    let homebrew = |pattern: &str| {
        request(
            "rg x",
            json!({"path": ["/opt/homebrew/bin"], "policy": {"allowlist": [pattern]}}),
        )
    };
    for (pattern, satisfied) in [
        ("RG", false),
        ("rg", false),
        ("/opt/**/rg", true),
        ("/opt/*/rg", false),
    ] {
        assert_case(
            pattern,
            &homebrew(pattern),
            &[Is("/allowlistSatisfied", json!(satisfied))],
        );
    }
    let bound =
        policy(json!({"allowlist": [{"pattern": "/usr/bin/rg", "argPattern": "-n \"a b\""}]}));
    assert_case(
        "argPattern quoted",
        &request("rg -n \"a b\"", bound.clone()),
        &[Is("/allowlistSatisfied", json!(true))],
    );
    assert_case(
        "argPattern split",
        &request("rg -n a b", bound),
        &[Is("/allowlistSatisfied", json!(false))],
    );
}

#[test]
fn safe_bin_vectors_of_section_7_6() {
    let bins = |names: Value| policy(json!({"safeBins": names}));
    let all = json!(["jq", "grep", "sort", "tr", "head"]);
    let mut cases: Vec<(&str, bool)> = vec![
        ("jq .foo", true),
        ("jq env", false),
        ("jq '$ENV'", false),
        ("jq '($ENV).OPENAI_API_KEY'", false),
        ("jq .foo secret.json", false),
        ("tr -S a b", false),
        ("grep -e needle", true),
        ("grep --regexp=needle", true),
        ("grep -e needle -- -", true),
        ("grep -R x", false),
        ("grep --recursive x", false),
        ("grep --file x", false),
        ("grep -e needle .env", false),
        ("grep -e needle -- .env", false),
        ("grep needle", false),
        ("sort -S 1M", true),
        ("sort --key=1,1", true),
        ("sort --ke=1,1", true),
        ("sort --key", false),
        ("sort --key ./fields.txt", false),
    ];
    for denied in [
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
    ] {
        cases.push((denied, false));
    }
    for (command, satisfied) in cases {
        assert_case(
            command,
            &request(command, bins(all.clone())),
            &[Is("/allowlistSatisfied", json!(satisfied))],
        );
    }
    assert_case(
        "jq from an untrusted folder",
        &request(
            "jq .foo",
            json!({"path": ["/tmp/evil-bin", "/usr/bin"], "policy": {"safeBins": ["jq"]}}),
        ),
        &[Is("/allowlistSatisfied", json!(false))],
    );
    assert_case(
        "head from /usr/local/bin",
        &request("head -n 1", json!({"path": ["/usr/local/bin", "/usr/bin"]})),
        &[Is("/allowlistSatisfied", json!(false))],
    );
    let profiles = json!({"safeBins": ["awk", "sed", "python3"], "safeBinProfiles": {
        "awk": {"maxPositional": 2}, "sed": {"maxPositional": 2}}});
    for command in [
        "awk 'BEGIN { system(\"id\") }'",
        "sed e",
        "python3 -c \"print('owned')\"",
    ] {
        assert_case(
            command,
            &request(command, policy(profiles.clone())),
            &[
                Is("/analysisOk", json!(true)),
                Is("/allowlistSatisfied", json!(false)),
            ],
        );
    }
    assert_case(
        "enforced command keeps unsatisfied segments",
        &request(
            "rg foo src/*.ts | head -n 5 && echo ok",
            bins(json!(["head"])),
        ),
        &[
            Contains("/enforcedCommand", "rg foo src/*.ts"),
            Contains("/enforcedCommand", "'/usr/bin/head' '-n' '5'"),
        ],
    );
}

#[test]
fn skill_vectors_of_section_7_7() {
    let skill = |name: &str, path: &str| json!({"autoAllowSkills": true, "skillBins": [{"name": name, "resolvedPath": path}]});
    assert_case(
        "bare skill bin",
        &request(
            "gog calendar",
            json!({"path": ["/usr/local/bin", "/usr/bin"], "policy": skill("gog", "/usr/local/bin/gog")}),
        ),
        &[Is("/satisfiedBy", json!(["skills"]))],
    );
    assert_case(
        "path-scoped skill token",
        &request(
            "./skill-bin --help",
            json!({"cwd": "/tmp/work", "policy": skill("skill-bin", "/tmp/work/skill-bin")}),
        ),
        &[
            Is("/allowlistSatisfied", json!(false)),
            Is("/nodeDecision", json!(APPROVAL)),
        ],
    );
    let prelude = "cat /home/me/skills/gog/SKILL.md && printf '\\n---CMD---\\n' && /usr/bin/gog-wrapper calendar list";
    assert_case(
        "prelude",
        &request(
            prelude,
            policy(json!({"allowlist": ["/usr/bin/gog-wrapper"]})),
        ),
        &[Is(
            "/satisfiedBy",
            json!(["skillPrelude", "skillPrelude", "allowlist"]),
        )],
    );
    for (command, allowlist) in [
        (
            "cat /home/me/skills/gog/SKILL.md && printf '\\n---CMD---\\n' && /usr/bin/echo x",
            "/usr/bin/echo",
        ),
        (
            "cat /home/me/skills/gog/SKILL.md && printf '\\n---CMD---\\n'",
            "/usr/bin/gog-wrapper",
        ),
        (
            "cat /home/me/skills/gog/SKILL.md && printf '\\n---CMD---\\n' && false && /usr/bin/gog-wrapper x",
            "/usr/bin/gog-wrapper",
        ),
    ] {
        assert_case(
            command,
            &request(command, policy(json!({"allowlist": [allowlist]}))),
            &[Is("/allowlistSatisfied", json!(false))],
        );
    }
}

#[test]
fn mode_and_decision_vectors_of_sections_7_1_and_7_8() {
    let cases: Vec<(&str, Value, Vec<Expect>)> = vec![
        (
            "openclaw status; id",
            json!({}),
            vec![Is("/nodeDecision", json!(APPROVAL))],
        ),
        (
            "ls",
            json!({"security": "deny", "allowlist": ["*"]}),
            vec![Is(
                "/nodeDecision",
                json!("SYSTEM_RUN_DISABLED: security=deny"),
            )],
        ),
        (
            "ls",
            json!({"ask": "off"}),
            vec![
                Is("/nodeDecision", json!("SYSTEM_RUN_DENIED: allowlist miss")),
                Is("/requiresApproval", json!(false)),
            ],
        ),
        (
            "ls",
            json!({"ask": "always", "allowlist": ["/usr/bin/ls"]}),
            vec![
                Is("/requiresApproval", json!(true)),
                Is("/allowedDecisions", json!(["allow-once", "deny"])),
            ],
        ),
        (
            "ls",
            json!({"ask": "off", "allowlist": ["/usr/bin/ls"]}),
            vec![
                Is("/requiresApproval", json!(false)),
                Is("/nodeDecision", json!("allowed")),
            ],
        ),
        (
            "rm -rf /x",
            json!({"security": "full", "ask": "on-miss"}),
            vec![
                Is("/requiresApproval", json!(false)),
                Is("/nodeDecision", json!("allowed")),
            ],
        ),
        (
            "/usr/bin/tee /tmp/file << 'EOF'\nx\nEOF",
            json!({"allowlist": ["/usr/bin/tee"]}),
            vec![
                // As on OpenClaw's node: the body travels literally with the rebuilt command.
                Is("/requiresApproval", json!(false)),
                Is("/nodeDecision", json!("allowed")),
                Is(
                    "/enforcedCommand",
                    json!("'/usr/bin/tee' '/tmp/file' <<'CLAWLESS_EOF'\nx\nCLAWLESS_EOF\n"),
                ),
                Is("/deviation", Value::Null),
            ],
        ),
        (
            "mybin --flag",
            json!({"allowlist": ["*"]}),
            vec![
                Is("/nodeDecision", json!("allowed")),
                Is("/enforcedCommand", json!("'mybin' '--flag'")),
                Is("/deviation", Value::Null),
            ],
        ),
        (
            "rm x",
            json!({}),
            vec![Is(
                "/onApprovalTimeout",
                json!({"outcome": "deny", "reason": "approval-timeout"}),
            )],
        ),
        (
            "rm x",
            json!({"askFallback": "full"}),
            vec![Is("/onApprovalTimeout", json!({"outcome": "run"}))],
        ),
        (
            "rm x",
            json!({"askFallback": "allowlist"}),
            vec![Is(
                "/onApprovalTimeout",
                json!({"outcome": "deny", "reason": "approval-timeout (allowlist-miss)"}),
            )],
        ),
        (
            "ls",
            json!({"askFallback": "allowlist", "allowlist": ["/usr/bin/ls"]}),
            vec![Is("/onApprovalTimeout", json!({"outcome": "run"}))],
        ),
        (
            "rg -n 'a b'",
            json!({}),
            vec![
                Is("/allowAlways/0/pattern", json!("/usr/bin/rg")),
                Is("/allowAlways/0/source", json!("allow-always")),
                Is("/allowAlways/0/argPattern", json!("^\\-n \"a b\"$")),
            ],
        ),
        (
            "bash -c id",
            json!({}),
            vec![Is("/allowAlways", Value::Null)],
        ),
    ];
    for (command, policy_json, expects) in cases {
        assert_case(command, &request(command, policy(policy_json)), &expects);
    }
    let approved = request("rm x", json!({"approved": true}));
    assert_case(
        "approved",
        &approved,
        &[Is("/nodeDecision", json!("allowed"))],
    );
}

#[test]
fn system_run_vectors_of_section_8_3() {
    let run = |argv: Value, extra: Value| {
        let mut system_run = json!({"command": argv});
        if let (Some(target), Some(extra)) = (system_run.as_object_mut(), extra.as_object()) {
            for (key, value) in extra {
                target.insert(key.clone(), value.clone());
            }
        }
        let mut input = request("", json!({"request": system_run}));
        input.as_object_mut().unwrap().remove("command");
        input
    };
    assert_case(
        "hi there",
        &run(json!(["echo", "hi there"]), json!({})),
        &[Is("/systemRun/commandText", json!("echo \"hi there\""))],
    );
    assert_case(
        "runner",
        &run(json!(["runner "]), json!({})),
        &[Is("/systemRun/commandText", json!("\"runner \""))],
    );
    assert_case(
        "preview",
        &run(
            json!(["/bin/sh", "-lc", "echo hi"]),
            json!({"rawCommand": "  echo hi  "}),
        ),
        &[
            Is("/systemRun/previewText", json!("echo hi")),
            Is("/systemRun/commandText", json!("/bin/sh -lc \"echo hi\"")),
        ],
    );
    assert_case(
        "env bash",
        &run(json!(["/usr/bin/env", "bash", "-lc", "echo hi"]), json!({})),
        &[Is("/shellPayload", json!("echo hi"))],
    );
    assert_case(
        "coercion",
        &run(json!(["echo", 123, false, null]), json!({})),
        &[Is(
            "/systemRun/argv",
            json!(["echo", "123", "false", "null"]),
        )],
    );
    assert_case(
        "mismatch",
        &run(json!(["echo", "hi"]), json!({"rawCommand": "echo bye"})),
        &[
            Is("/systemRun/errorCode", json!("RAW_COMMAND_MISMATCH")),
            Is(
                "/nodeDecision",
                json!("INVALID_REQUEST: rawCommand does not match command"),
            ),
        ],
    );
    assert_case(
        "missing command",
        &run(json!([]), json!({"rawCommand": "echo hi"})),
        &[Is("/systemRun/errorCode", json!("MISSING_COMMAND"))],
    );
    assert_case(
        "env override",
        &run(
            json!(["ls"]),
            json!({"env": {"LD_PRELOAD": "/tmp/x.so", "bad-key": "1"}}),
        ),
        &[StartsWith(
            "/nodeDecision",
            "SYSTEM_RUN_DENIED: environment override rejected",
        )],
    );
    assert_case(
        "env assignment",
        &run(
            json!(["/usr/bin/env", "LD_PRELOAD=/tmp/x.so", "ls"]),
            json!({}),
        ),
        &[StartsWith(
            "/nodeDecision",
            "SYSTEM_RUN_DENIED: command env assignment rejected",
        )],
    );
    assert_case(
        "transport is not a miss",
        &run(json!(["/bin/sh", "-lc", "ls"]), json!({})),
        &[
            Is("/heads", json!(["ls"])),
            Is("/nodeDecision", json!(APPROVAL)),
        ],
    );
}

#[test]
fn attacks_on_the_stricter_rules_stay_unsatisfied() {
    let everything = policy(json!({
        "allowlist": ["*", "/usr/bin/*", "/**"],
        "safeBins": ["head", "jq", "tr", "wc"],
        "autoAllowSkills": true,
        "skillBins": [{"name": "gog", "resolvedPath": "/usr/local/bin/gog"}],
    }));
    for (command, rule) in [
        ("bash -c 'rm -rf /'", json!("inline-code")),
        ("/usr/bin/env bash -c id", json!("inline-code")),
        ("nice xargs sh -c id", json!("inline-code")),
        ("find . -exec sh \\;", json!("exec-carrier")),
        ("git -c core.pager=sh log", json!("exec-carrier")),
        ("git pwn", json!("exec-carrier")),
        ("tar --to-command=sh -xf a.tar", json!("exec-carrier")),
        ("make", json!("exec-carrier")),
        ("python3 -c 'import os'", json!("inline-code")),
        ("node -e 1", json!("inline-code")),
        ("perl -e 1", json!("inline-code")),
        ("awk '{print}' /etc/passwd", json!("inline-code")),
        ("sed 's/x/id/e'", json!("inline-code")),
        ("busybox sh -c id", json!("inline-code")),
        ("ssh host id", json!("inline-code")),
        ("/home/me/bin/harmless -c id", json!("inline-code")),
        ("echo id | sh", json!("inline-code")),
        // Blocked by OpenClaw too: no deviation.
        ("sudo ls", Value::Null),
        ("env LD_PRELOAD=/tmp/x.so ls", Value::Null),
    ] {
        assert_case(
            command,
            &request(command, everything.clone()),
            &[
                Is("/allowlistSatisfied", json!(false)),
                Is("/deviation", rule),
            ],
        );
    }
    assert_case(
        "shadowed skill bin",
        &request(
            "gog calendar",
            json!({"path": ["/tmp", "/usr/local/bin"], "policy": {"autoAllowSkills": true,
                "skillBins": [{"name": "gog", "resolvedPath": "/usr/local/bin/gog"}]}}),
        ),
        &[
            Is("/segments/0/resolvedPath", json!("/tmp/gog")),
            Is("/allowlistSatisfied", json!(false)),
            Is("/deviation", Value::Null),
        ],
    );
}

#[test]
fn shapes_clawless_used_to_refuse_decide_as_the_spec_does() {
    let everything = policy(json!({"allowlist": ["*", "/usr/bin/*", "/**"]}));
    for (command, enforced) in [
        ("/usr/bin/../../tmp/evil", "'/tmp/evil'"),
        ("ca${IFS}t /etc/passwd", "'ca${IFS}t' '/etc/passwd'"),
        ("head $SECRET", "'/usr/bin/head' '$SECRET'"),
        (
            "cat <<'EOF'\n$HOME\nEOF",
            "'/usr/bin/cat' <<'CLAWLESS_EOF'\n$HOME\nCLAWLESS_EOF\n",
        ),
    ] {
        assert_case(
            command,
            &request(command, everything.clone()),
            &[
                Is("/nodeDecision", json!("allowed")),
                Is("/enforcedCommand", json!(enforced)),
                Is("/deviation", Value::Null),
            ],
        );
    }
}

#[test]
fn the_deviation_field_names_the_rule_that_changed_the_decision() {
    // Each row: clawless's decision with its rule, then the neighbouring shape with none.
    let cases: Vec<(&str, Value, Value, Value)> = vec![
        (
            "python3 -c 'print(1)'",
            json!({"allowlist": ["/usr/bin/python3"]}),
            json!(APPROVAL),
            json!("inline-code"),
        ),
        (
            "python3 -c 'print(1)'",
            json!({"allowlist": [{"pattern": "/usr/bin/python3", "argPattern": "-c print\\(1\\)"}]}),
            json!("allowed"),
            Value::Null,
        ),
        (
            "rg -n other",
            json!({"allowlist": [{"pattern": "/usr/bin/rg", "argPattern": "-n needle"}]}),
            json!(APPROVAL),
            json!("arg-pattern"),
        ),
        (
            "rg -n needle",
            json!({"allowlist": [{"pattern": "/usr/bin/rg", "argPattern": "-n needle"}]}),
            json!("allowed"),
            Value::Null,
        ),
        (
            "ls # note\nrm -rf /tmp/x",
            json!({"allowlist": ["/usr/bin/ls"]}),
            json!(APPROVAL),
            json!("sh-parsing"),
        ),
        (
            "ls # note",
            json!({"allowlist": ["/usr/bin/ls"]}),
            json!("allowed"),
            Value::Null,
        ),
        (
            "ls",
            json!({"ask": "always", "allowlist": ["/usr/bin/ls"]}),
            json!(APPROVAL),
            json!("ask-fallback-deny"),
        ),
        (
            "ls",
            json!({"ask": "always", "askFallback": "allowlist", "allowlist": ["/usr/bin/ls"]}),
            json!(APPROVAL),
            Value::Null,
        ),
    ];
    for (command, policy_json, decision, rule) in cases {
        assert_case(
            command,
            &request(command, policy(policy_json)),
            &[Is("/nodeDecision", decision), Is("/deviation", rule)],
        );
    }
    // A request-level rule: an env override only clawless refuses.
    let env_request = |env: Value| {
        let mut input = request(
            "",
            json!({"request": {"command": ["ls"], "env": env}, "policy": {"allowlist": ["/usr/bin/ls"]}}),
        );
        input.as_object_mut().unwrap().remove("command");
        input
    };
    assert_case(
        "HOSTALIASES",
        &env_request(json!({"HOSTALIASES": "/tmp/hosts"})),
        &[
            StartsWith(
                "/nodeDecision",
                "SYSTEM_RUN_DENIED: environment override rejected",
            ),
            Is("/deviation", json!("env-override-keys")),
        ],
    );
    assert_case(
        "LD_PRELOAD",
        &env_request(json!({"LD_PRELOAD": "/tmp/x.so"})),
        &[
            StartsWith(
                "/nodeDecision",
                "SYSTEM_RUN_DENIED: environment override rejected",
            ),
            Is("/deviation", Value::Null),
        ],
    );
    assert_case(
        "TZ",
        &env_request(json!({"TZ": "UTC"})),
        &[
            Is("/nodeDecision", json!("allowed")),
            Is("/deviation", Value::Null),
        ],
    );
}

/// The example in `docs/exec.md` runs as written and prints what the page says.
#[test]
fn the_docs_example_works() {
    let page =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/exec.md")).unwrap();
    let line = page
        .lines()
        .find(|line| line.starts_with("echo '") && line.ends_with("| clawless exec check"))
        .expect("docs/exec.md has an `echo '…' | clawless exec check` example");
    let json_text = line
        .strip_prefix("echo '")
        .and_then(|rest| rest.strip_suffix("' | clawless exec check"))
        .unwrap();
    let input: Value = serde_json::from_str(json_text).unwrap();
    let response = check(&input);
    assert_eq!(
        response["nodeDecision"],
        json!("SYSTEM_RUN_DENIED: approval required")
    );
    assert_eq!(response["deviation"], json!("inline-code"));
    assert!(page.contains(r#""deviation": "inline-code""#));
    // And through a shell, exactly as the page shows it.
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_clawless"))
        .parent()
        .unwrap()
        .to_owned();
    let output = Command::new("sh")
        .arg("-c")
        .arg(line)
        .env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display()))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed["deviation"], json!("inline-code"));
}

#[test]
fn node_flag_without_a_local_registry_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let (ok, stdout, stderr) = run_check(
        &request("ls", json!({})),
        &["--node", "laptop", "--state-dir", state.to_str().unwrap()],
    );
    assert!(!ok);
    assert!(stdout.is_empty());
    assert!(
        stderr.starts_with("error: no local registry at"),
        "{stderr}"
    );
}

#[test]
fn agent_without_node_is_a_usage_error() {
    let (ok, stdout, stderr) = run_check(&request("ls", json!({})), &["--agent", "ops"]);
    assert!(!ok);
    assert!(stdout.is_empty());
    assert!(stderr.contains("--node"), "{stderr}");
}

#[test]
fn without_an_fs_block_this_machines_disk_is_used() {
    let mut input = request("sh -c id", json!({"path": ["/bin", "/usr/bin"]}));
    input.as_object_mut().unwrap().remove("fs");
    let response = check(&input);
    // Every Unix machine has a shell; it resolves, and is still not allowed.
    assert!(
        response
            .pointer("/segments/0/resolvedPath")
            .is_some_and(Value::is_string)
    );
    assert_eq!(response["allowlistSatisfied"], json!(false));
}

#[test]
fn a_malformed_request_is_an_error_not_a_verdict() {
    let (ok, stdout, stderr) = run_check(&json!({"command": "ls", "polcy": {}}), &[]);
    assert!(!ok);
    assert!(stdout.is_empty());
    assert!(stderr.contains("parsing the check request"), "{stderr}");
}
