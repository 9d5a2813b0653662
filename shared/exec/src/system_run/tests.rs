//! `system.run` rule tests: every §8.3 vector, the env override and assignment refusals, and
//! attempts to get around them.

use serde_json::json;

use super::*;

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn request(command: serde_json::Value) -> SystemRunRequest {
    serde_json::from_value(command).unwrap()
}

fn env_of(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

// --- §8.3 test vectors --------------------------------------------------------------------

#[test]
fn an_argument_with_a_space_is_double_quoted() {
    assert_eq!(
        format_exec_command(&strings(&["echo", "hi there"])),
        "echo \"hi there\""
    );
}

#[test]
fn a_trailing_space_is_kept_inside_quotes() {
    assert_eq!(format_exec_command(&strings(&["runner "])), "\"runner \"");
}

#[test]
fn a_shell_wrapper_is_previewed_by_its_trimmed_payload() {
    let prepared = prepare_system_run(&request(json!({
        "command": ["/bin/sh", "-lc", "echo hi"],
        "rawCommand": "  echo hi  ",
    })))
    .unwrap();
    assert_eq!(prepared.preview_text, "echo hi");
    assert_eq!(prepared.command_text, "/bin/sh -lc \"echo hi\"");
    assert_eq!(prepared.shell_payload.as_deref(), Some("echo hi"));
    assert_eq!(prepared.argv, strings(&["/bin/sh", "-lc", "echo hi"]));
}

#[test]
fn the_payload_is_found_behind_a_plain_env() {
    assert_eq!(
        extract_shell_payload(&strings(&["/usr/bin/env", "bash", "-lc", "echo hi"])).as_deref(),
        Some("echo hi")
    );
}

#[test]
fn json_scalars_in_the_command_are_coerced_to_strings() {
    let prepared =
        prepare_system_run(&request(json!({"command": ["echo", 123, false, null]}))).unwrap();
    assert_eq!(prepared.argv, strings(&["echo", "123", "false", "null"]));
    assert_eq!(prepared.command_text, "echo 123 false null");
    assert_eq!(prepared.preview_text, "echo 123 false null");
    assert_eq!(prepared.shell_payload, None);
}

#[test]
fn a_raw_command_without_a_command_is_missing_command() {
    let err = prepare_system_run(&request(json!({"rawCommand": "ls"}))).unwrap_err();
    assert_eq!(err.code, "MISSING_COMMAND");
}

#[test]
fn a_raw_command_that_does_not_match_is_refused() {
    let err = prepare_system_run(&request(json!({
        "command": ["ls", "-la"],
        "rawCommand": "ls",
    })))
    .unwrap_err();
    assert_eq!(err.code, "RAW_COMMAND_MISMATCH");
    assert_eq!(
        err.message,
        "INVALID_REQUEST: rawCommand does not match command"
    );
    assert_eq!(err.to_string(), err.message);
}

#[test]
fn a_blocked_override_is_refused_with_its_key() {
    let err = prepare_system_run(&request(json!({
        "command": ["java", "-version"],
        "env": {"CLASSPATH": "/tmp/evil-classpath"},
    })))
    .unwrap_err();
    assert_eq!(err.code, "INVALID_REQUEST");
    assert_eq!(
        err.message,
        "SYSTEM_RUN_DENIED: environment override rejected (blocked override keys: CLASSPATH)"
    );
}

#[test]
fn a_blocked_override_is_refused_for_a_shell_wrapper_too() {
    // Reduction to terminal keys comes after the check, so it cannot hide the blocked key.
    let err = prepare_system_run(&request(json!({
        "command": ["/bin/sh", "-lc", "echo ok"],
        "env": {"CLASSPATH": "/tmp/evil-classpath", "LANG": "C"},
    })))
    .unwrap_err();
    assert_eq!(
        err.message,
        "SYSTEM_RUN_DENIED: environment override rejected (blocked override keys: CLASSPATH)"
    );
}

#[test]
fn blocked_and_non_portable_keys_are_listed_in_two_parts() {
    let err = prepare_system_run(&SystemRunRequest {
        command: vec![json!("ls")],
        raw_command: None,
        env: Some(env_of(&[
            ("PATH", "/tmp/evil"),
            ("BAD-KEY", "1"),
            ("LD_PRELOAD", "/tmp/x.so"),
            ("1X", "1"),
        ])),
    })
    .unwrap_err();
    assert_eq!(
        err.message,
        "SYSTEM_RUN_DENIED: environment override rejected (blocked override keys: LD_PRELOAD, PATH; \
         invalid non-portable override keys: 1X, BAD-KEY)"
    );
}

#[test]
fn only_non_portable_keys_leave_out_the_blocked_part() {
    let err = prepare_system_run(&SystemRunRequest {
        command: vec![json!("ls")],
        raw_command: None,
        env: Some(env_of(&[("A.B", "1"), ("", "x")])),
    })
    .unwrap_err();
    assert_eq!(
        err.message,
        "SYSTEM_RUN_DENIED: environment override rejected (invalid non-portable override keys: , A.B)"
    );
}

#[test]
fn an_env_assignment_of_blocked_keys_in_argv_is_refused() {
    let err = prepare_system_run(&request(json!({
        "command": ["/usr/bin/env", "SHELLOPTS=xtrace", "PS4=$(id)", "bash", "-lc", "echo ok"],
    })))
    .unwrap_err();
    assert_eq!(err.code, "INVALID_REQUEST");
    assert_eq!(
        err.message,
        "SYSTEM_RUN_DENIED: command env assignment rejected (blocked env assignment keys: SHELLOPTS, PS4)"
    );
}

#[test]
fn shell_wrapper_overrides_are_reduced_to_terminal_and_locale_keys() {
    let prepared = prepare_system_run(&SystemRunRequest {
        command: vec![json!("/bin/sh"), json!("-lc"), json!("ls")],
        raw_command: None,
        env: Some(env_of(&[
            ("TERM", "xterm"),
            ("LANG", "C"),
            ("LC_ALL", "C"),
            ("COLORTERM", "truecolor"),
            ("NO_COLOR", "1"),
            ("FORCE_COLOR", "1"),
            ("X", "a[$(id)]"),
        ])),
    })
    .unwrap();
    let keys: Vec<&str> = prepared.env.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "COLORTERM",
            "FORCE_COLOR",
            "LANG",
            "LC_ALL",
            "NO_COLOR",
            "TERM"
        ]
    );
}

#[test]
fn direct_commands_keep_their_portable_overrides() {
    let prepared = prepare_system_run(&SystemRunRequest {
        command: vec![json!("ls")],
        raw_command: Some("ls".to_string()),
        env: Some(env_of(&[("FOO", "bar"), ("TERM", "dumb")])),
    })
    .unwrap();
    assert_eq!(prepared.env, env_of(&[("FOO", "bar"), ("TERM", "dumb")]));
}

// --- rawCommand ---------------------------------------------------------------------------

#[test]
fn a_raw_command_equal_to_the_formatted_argv_is_accepted() {
    let prepared = prepare_system_run(&request(json!({
        "command": ["echo", "hi there", ""],
        "rawCommand": "echo \"hi there\" \"\"",
    })))
    .unwrap();
    assert_eq!(prepared.command_text, "echo \"hi there\" \"\"");
}

#[test]
fn a_payload_is_no_raw_command_for_a_command_that_is_not_a_shell_wrapper() {
    // `env X=… bash -c p` runs with X set; showing only `p` would hide it.
    let err = prepare_system_run(&request(json!({
        "command": ["env", "X=a[$(id)]", "bash", "-c", "echo $[X]"],
        "rawCommand": "echo $[X]",
    })))
    .unwrap_err();
    assert_eq!(err.code, "RAW_COMMAND_MISMATCH");
}

#[test]
fn a_raw_command_cannot_name_only_part_of_a_payload() {
    let err = prepare_system_run(&request(json!({
        "command": ["bash", "-c", "echo hi; rm -rf ~"],
        "rawCommand": "echo hi",
    })))
    .unwrap_err();
    assert_eq!(err.code, "RAW_COMMAND_MISMATCH");
}

#[test]
fn an_empty_raw_command_counts_as_absent() {
    assert!(prepare_system_run(&request(json!({"command": ["ls"], "rawCommand": "  "}))).is_ok());
}

// --- request shape ------------------------------------------------------------------------

#[test]
fn an_empty_or_blank_first_argument_is_missing_command() {
    for command in [json!([]), json!([""]), json!(["  ", "ls"])] {
        let err = prepare_system_run(&request(json!({ "command": command }))).unwrap_err();
        assert_eq!(err.code, "MISSING_COMMAND", "{command}");
    }
}

#[test]
fn arrays_and_objects_in_the_command_are_coerced_as_javascript_string_does() {
    let prepared = prepare_system_run(&request(json!({
        "command": ["echo", ["a", null, ["b", 2]], {"a": 1}]
    })))
    .unwrap();
    assert_eq!(
        prepared.argv,
        strings(&["echo", "a,,b,2", "[object Object]"])
    );
}

#[test]
fn numbers_keep_their_json_spelling() {
    let prepared = prepare_system_run(&request(json!({"command": ["sleep", 1.5, -2]}))).unwrap();
    assert_eq!(prepared.argv, strings(&["sleep", "1.5", "-2"]));
}

#[test]
fn the_request_reads_the_camel_case_wire_shape_and_ignores_other_fields() {
    let parsed: SystemRunRequest = serde_json::from_str(
        r#"{"command":["ls"],"rawCommand":"ls","env":{"A":"1"},"cwd":"/tmp","timeoutMs":5}"#,
    )
    .unwrap();
    assert_eq!(parsed.raw_command.as_deref(), Some("ls"));
    assert_eq!(parsed.env, Some(env_of(&[("A", "1")])));
}

#[test]
fn override_values_with_nul_are_refused() {
    let err = prepare_system_run(&SystemRunRequest {
        command: vec![json!("ls")],
        raw_command: None,
        env: Some(env_of(&[("FOO", "a\0b")])),
    })
    .unwrap_err();
    assert_eq!(
        err.message,
        "SYSTEM_RUN_DENIED: environment override rejected (override values containing NUL: FOO)"
    );
}

// --- format_exec_command ------------------------------------------------------------------

#[test]
fn format_escapes_double_quotes_and_marks_empty_arguments() {
    assert_eq!(
        format_exec_command(&strings(&["say", "a\"b", "", "plain", "tab\there"])),
        "say \"a\\\"b\" \"\" plain \"tab\there\""
    );
    assert_eq!(format_exec_command(&strings(&["a\u{a0}b"])), "\"a\u{a0}b\"");
    assert_eq!(format_exec_command(&[]), "");
}

// --- extract_shell_payload ----------------------------------------------------------------

#[test]
fn posix_shell_payloads_follow_the_option_parsing() {
    let cases: &[(&[&str], Option<&str>)] = &[
        (&["/bin/sh", "-c", "ls"], Some("ls")),
        (&["bash", "-lc", " ls "], Some(" ls ")),
        (&["bash", "-c", "-x", "echo hi"], Some("echo hi")),
        (
            &["bash", "-o", "pipefail", "-c", "ls | wc"],
            Some("ls | wc"),
        ),
        (&["bash", "-c", "--", "ls"], Some("ls")),
        (&["bash", "--noprofile", "--norc", "-c", "ls"], Some("ls")),
        (
            &["/usr/local/bin/zsh", "-c", "ls", "zsh", "arg"],
            Some("ls"),
        ),
        (&["bash", "--rcfile", "/tmp/rc", "-c", "ls"], None),
        (&["bash", "script.sh"], None),
        (&["bash", "-l", "script.sh"], None),
        (&["sh", "-c"], None),
        (&["fish", "-c", "ls"], None),
        (&["/usr/bin/env", "-i", "bash", "-c", "ls"], None),
        (&["env", "X=1", "bash", "-c", "ls"], None),
        (&["env"], None),
        (&[], None),
        (&["ls", "-c", "x"], None),
    ];
    for (argv, payload) in cases {
        assert_eq!(
            extract_shell_payload(&strings(argv)).as_deref(),
            *payload,
            "{argv:?}"
        );
    }
}

#[test]
fn windows_shell_payloads_are_the_rest_of_the_argv() {
    let cases: &[(&[&str], Option<&str>)] = &[
        (&["cmd.exe", "/d", "/s", "/c", "dir C:\\"], Some("dir C:\\")),
        (
            &["C:\\Windows\\System32\\CMD.EXE", "/c", "dir", "x"],
            Some("dir x"),
        ),
        (&["cmd", "/v:on", "/c", "echo"], Some("echo")),
        (&["cmd", "/k", "dir"], None),
        (&["cmd", "/c"], None),
        (
            &["powershell", "-NoProfile", "-Command", "Get-Date"],
            Some("Get-Date"),
        ),
        (
            &["pwsh.exe", "-ExecutionPolicy", "Bypass", "-c", "a", "b"],
            Some("a b"),
        ),
        (&["pwsh", "-EncodedCommand", "ZQBjAGgAbwA="], None),
        (&["pwsh", "-File", "x.ps1"], None),
    ];
    for (argv, payload) in cases {
        assert_eq!(
            extract_shell_payload(&strings(argv)).as_deref(),
            *payload,
            "{argv:?}"
        );
    }
}

#[test]
fn shell_invocations_include_env_with_assignments_and_multiplexers() {
    assert!(is_shell_invocation(&strings(&[
        "env", "X=1", "bash", "-c", "ls"
    ])));
    assert!(is_shell_invocation(&strings(&[
        "busybox", "sh", "-c", "ls"
    ])));
    assert!(is_shell_invocation(&strings(&["fish", "-c", "ls"])));
    assert!(is_shell_invocation(&strings(&["/bin/sh", "script.sh"])));
    assert!(!is_shell_invocation(&strings(&["ls", "sh"])));
    assert!(!is_shell_invocation(&[]));
}

#[test]
fn env_with_assignments_before_a_shell_still_reduces_overrides() {
    let prepared = prepare_system_run(&SystemRunRequest {
        command: vec![
            json!("env"),
            json!("A=1"),
            json!("bash"),
            json!("-c"),
            json!("ls"),
        ],
        raw_command: None,
        env: Some(env_of(&[("X", "a[$(id)]"), ("TERM", "dumb")])),
    })
    .unwrap();
    assert_eq!(prepared.env, env_of(&[("TERM", "dumb")]));
    assert_eq!(prepared.shell_payload, None);
}

// --- check_env_assignments ----------------------------------------------------------------

#[test]
fn assignments_are_found_through_env_options_and_nesting() {
    let refused: &[(&[&str], &str)] = &[
        (&["LD_PRELOAD=/tmp/x.so", "ls"], "LD_PRELOAD"),
        (&["PATH+=:/tmp", "ls"], "PATH"),
        (
            &["env", "--", "NODE_OPTIONS=--require x", "node"],
            "NODE_OPTIONS",
        ),
        (
            &["env", "-i", "-u", "FOO", "BASH_ENV=/tmp/x", "bash"],
            "BASH_ENV",
        ),
        (&["env", "A=1", "env", "PATH=/tmp", "ls"], "PATH"),
        (&["env", "-S", "LD_PRELOAD=/tmp/x.so ls"], "LD_PRELOAD"),
        (
            &["/usr/bin/env", "http_proxy=http://evil", "curl", "x"],
            "http_proxy",
        ),
        (
            &["FOO=1", "env", "GIT_SSH_COMMAND=sh", "git", "pull"],
            "GIT_SSH_COMMAND",
        ),
    ];
    for (argv, key) in refused {
        assert_eq!(
            check_env_assignments(&strings(argv)),
            Err(format!(
                "SYSTEM_RUN_DENIED: command env assignment rejected (blocked env assignment keys: {key})"
            )),
            "{argv:?}"
        );
    }
}

#[test]
fn harmless_assignments_and_lookalike_arguments_pass() {
    for argv in [
        &["FOO=1", "ls"][..],
        &["env", "-u", "HOME", "ls"],
        &["env", "LANG=C", "sort"],
        &["ls", "PATH=/tmp"],
        &["grep", "LD_PRELOAD=x", "file"],
        &["env"],
        &[],
    ] {
        assert_eq!(check_env_assignments(&strings(argv)), Ok(()), "{argv:?}");
    }
}

#[test]
fn a_repeated_blocked_key_is_listed_once() {
    assert_eq!(
        check_env_assignments(&strings(&["env", "PATH=/a", "PATH=/b", "ls"])),
        Err(
            "SYSTEM_RUN_DENIED: command env assignment rejected (blocked env assignment keys: PATH)"
                .to_string()
        )
    );
}

// --- is_blocked_env_key -------------------------------------------------------------------

#[test]
fn the_spec_keys_and_prefixes_are_blocked() {
    for key in [
        "NODE_OPTIONS",
        "BASH_ENV",
        "ENV",
        "SHELL",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "DYLD_INSERT_LIBRARIES",
        "HOME",
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "ALL_PROXY",
        "DOCKER_HOST",
        "NODE_TLS_REJECT_UNAUTHORIZED",
        "OPENSSL_CONF",
        "PATH",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_KEY_0",
        "NPM_CONFIG_REGISTRY",
        "CARGO_REGISTRIES_CRATES_IO_INDEX",
        "TF_VAR_region",
    ] {
        assert!(is_blocked_env_key(key), "{key}");
    }
}

#[test]
fn clawless_blocks_more_code_loading_keys() {
    for key in [
        "IFS",
        "PS4",
        "SHELLOPTS",
        "PROMPT_COMMAND",
        "BASH_FUNC_ls%%",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PERL5LIB",
        "PERL5OPT",
        "RUBYOPT",
        "GIT_SSH_COMMAND",
        "CLASSPATH",
        "JAVA_TOOL_OPTIONS",
        "RUSTC_WRAPPER",
        "GCONV_PATH",
        "PAGER",
        "LUA_INIT_5_4",
        "PIP_INDEX_URL",
    ] {
        assert!(is_blocked_env_key(key), "{key}");
    }
}

#[test]
fn openclaw_refuses_only_its_own_prefixes() {
    for key in [
        "LD_PRELOAD",
        "DYLD_INSERT_LIBRARIES",
        "BASH_FUNC_ls%%",
        "GIT_CONFIG_KEY_0",
        "npm_config_registry",
        "CARGO_REGISTRIES_CRATES_IO_INDEX",
    ] {
        assert!(openclaw_blocks_env_key(key), "{key}");
    }
    for key in [
        "PIP_NO_CACHE_DIR",
        "TF_VAR_region",
        "LUA_INIT_5_4",
        "LUA_PATH_5_4",
    ] {
        assert!(is_blocked_env_key(key), "{key}");
        assert!(!openclaw_blocks_env_key(key), "{key}");
    }
}

#[test]
fn blocked_keys_compare_without_case() {
    for key in ["https_proxy", "Path", "ld_preload", "node_options"] {
        assert!(is_blocked_env_key(key), "{key}");
    }
}

#[test]
fn ordinary_keys_are_not_blocked() {
    for key in [
        "TERM",
        "LANG",
        "LC_ALL",
        "OPENAI_API_KEY",
        "RUST_LOG",
        "FOO",
        "PATHNAME",
        "HOMEBREW_NO_ANALYTICS",
        "ENVIRONMENT",
    ] {
        assert!(!is_blocked_env_key(key), "{key}");
    }
}
