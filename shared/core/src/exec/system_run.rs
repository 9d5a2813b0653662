//! The `system.run` request rules (spec §8.3): argv coercion, the display forms of a command,
//! the `rawCommand` check, shell payload extraction, and which environment overrides a
//! request may carry.
//!
//! Blocked environment keys (rejected outright, never passed to a command): the keys that
//! change what a shell, loader or interpreter executes (`BASH_ENV`, `ENV`, `SHELL`,
//! `SHELLOPTS`, `BASHOPTS`, `PS4`, `PROMPT_COMMAND`, `IFS`, `BASH_FUNC_*`, `LD_*`, `DYLD_*`,
//! `NODE_OPTIONS`, `NODE_PATH`, `PYTHONPATH`, `PYTHONSTARTUP`, `PYTHONHOME`, `PERL5LIB`,
//! `PERL5OPT`, `PERLLIB`, `RUBYOPT`, `RUBYLIB`, `JAVA_TOOL_OPTIONS`, `GCONV_PATH`,
//! `GIT_SSH_COMMAND`, `GIT_EXEC_PATH`, `EDITOR`, `VISUAL`, `PAGER`, `GIT_PAGER`), where commands
//! are found (`PATH`), whose identity or files they use (`HOME`), and where traffic or
//! trust goes (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY` in any case,
//! `DOCKER_HOST`, `NODE_TLS_REJECT_UNAUTHORIZED`, `OPENSSL_CONF`, `SSL_CERT_FILE`,
//! `SSL_CERT_DIR`), plus the prefixes `GIT_CONFIG_`, `NPM_CONFIG_`, `CARGO_REGISTRIES_` and
//! `TF_VAR_` (spec §3.4). clawless adds the interpreter, pager and editor keys to the spec's
//! list: each lets an allowlisted binary run other code.

use std::collections::BTreeMap;

use serde::Deserialize;

/// Exact keys (compared case-insensitively) that a request may never set.
const BLOCKED_KEYS: &[&str] = &[
    "PATH",
    "HOME",
    "SHELL",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "IFS",
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_TLS_REJECT_UNAUTHORIZED",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PERL5LIB",
    "PERL5OPT",
    "PERLLIB",
    "RUBYOPT",
    "RUBYLIB",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "GCONV_PATH",
    "GIT_SSH_COMMAND",
    "GIT_SSH",
    "GIT_EXEC_PATH",
    "GIT_PAGER",
    "PAGER",
    "EDITOR",
    "VISUAL",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "DOCKER_HOST",
    "OPENSSL_CONF",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

/// Prefixes (compared case-insensitively) a request may never set.
const BLOCKED_PREFIXES: &[&str] = &[
    "LD_",
    "DYLD_",
    "BASH_FUNC_",
    "GIT_CONFIG_",
    "NPM_CONFIG_",
    "CARGO_REGISTRIES_",
    "TF_VAR_",
];

/// Overrides a shell-wrapped command keeps (spec §8.3); the rest are dropped.
const SHELL_WRAPPER_ENV: &[&str] = &["TERM", "LANG", "COLORTERM", "NO_COLOR", "FORCE_COLOR"];

/// True when a request may not set `key`.
pub fn is_blocked_env_key(key: &str) -> bool {
    let upper = key.to_ascii_uppercase();
    BLOCKED_KEYS.contains(&upper.as_str())
        || BLOCKED_PREFIXES
            .iter()
            .any(|prefix| upper.starts_with(prefix))
}

/// True for a portable variable name: `^[A-Za-z_][A-Za-z0-9_]*$`.
fn is_portable_key(key: &str) -> bool {
    let mut bytes = key.bytes();
    bytes
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == b'_')
        && bytes.all(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
}

/// `formatExecCommand`: an empty argument becomes `""`; an argument with whitespace or `"` is
/// wrapped in `"…"` with `"` escaped as `\"`; the rest are joined by spaces.
pub fn format_exec_command(argv: &[String]) -> String {
    argv.iter()
        .map(|arg| {
            if arg.is_empty() {
                "\"\"".to_owned()
            } else if arg.chars().any(|ch| ch.is_whitespace() || ch == '"') {
                format!("\"{}\"", arg.replace('"', "\\\""))
            } else {
                arg.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Shells whose `-c` payload is the command (`sh -lc "<payload>"`).
const POSIX_SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish"];

fn base_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// The payload of a shell-wrapped argv: `sh -c P`, `/bin/sh -lc P`, `bash -c P`, the same
/// behind `env` (without options or assignments), `cmd.exe /c P` (after `/d`, `/s`), and
/// `powershell`/`pwsh` `-Command P`. `None` for anything else.
pub fn extract_shell_payload(argv: &[String]) -> Option<String> {
    let mut rest = argv;
    if rest
        .first()
        .is_some_and(|first| base_name(first) == "env" && rest.len() > 1)
        && !rest[1].starts_with('-')
        && !rest[1].contains('=')
    {
        rest = &rest[1..];
    }
    let program = base_name(rest.first()?).to_ascii_lowercase();
    let program = program.strip_suffix(".exe").unwrap_or(&program);
    if POSIX_SHELLS.contains(&program) {
        let flag = rest.get(1)?;
        let is_command_flag = flag.len() > 1
            && flag.starts_with('-')
            && !flag.starts_with("--")
            && flag[1..].bytes().all(|b| b.is_ascii_alphabetic())
            && flag.contains('c');
        return (is_command_flag && rest.len() == 3).then(|| rest[2].clone());
    }
    if program == "cmd" {
        let mut index = 1;
        while rest
            .get(index)
            .is_some_and(|flag| matches!(flag.to_ascii_lowercase().as_str(), "/d" | "/s" | "/q"))
        {
            index += 1;
        }
        let flag = rest.get(index)?.to_ascii_lowercase();
        return (flag == "/c" && rest.len() > index + 1).then(|| rest[index + 1..].join(" "));
    }
    if program == "powershell" || program == "pwsh" {
        let position = rest.iter().position(|arg| {
            matches!(
                arg.to_ascii_lowercase().as_str(),
                "-command" | "-c" | "/command"
            )
        })?;
        return (rest.len() == position + 2).then(|| rest[position + 1].clone());
    }
    None
}

/// A `system.run` request as a node receives it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemRunRequest {
    /// The argv; numbers, booleans and null are coerced to strings.
    #[serde(default)]
    pub command: Vec<serde_json::Value>,
    /// The command as displayed to whoever approved it.
    #[serde(default)]
    pub raw_command: Option<String>,
    /// Environment overrides.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
}

/// A request that passed §8.3's checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedRun {
    /// The argv to run.
    pub argv: Vec<String>,
    /// `format_exec_command(argv)`.
    pub command_text: String,
    /// What a person is shown: the trimmed shell payload, else the command text.
    pub preview_text: String,
    /// The payload when argv is a shell wrapper.
    pub shell_payload: Option<String>,
    /// The overrides the command gets (reduced for shell wrappers).
    pub env: BTreeMap<String, String>,
}

/// Why a request was refused: a stable code and the exact message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SystemRunError {
    /// `MISSING_COMMAND`, `RAW_COMMAND_MISMATCH`, `ENV_OVERRIDE_REJECTED`, `ENV_ASSIGNMENT_REJECTED`.
    pub code: String,
    /// The node's exact answer.
    pub message: String,
}

impl SystemRunError {
    fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
        }
    }
}

/// Checks a request (§8.3) and returns what would run.
pub fn prepare_system_run(request: &SystemRunRequest) -> Result<PreparedRun, SystemRunError> {
    if request.command.is_empty() {
        return Err(SystemRunError::new(
            "MISSING_COMMAND",
            "INVALID_REQUEST: command required",
        ));
    }
    let argv: Vec<String> = request
        .command
        .iter()
        .map(|value| match value {
            serde_json::Value::String(text) => text.clone(),
            other => other.to_string(),
        })
        .collect();
    let command_text = format_exec_command(&argv);
    let shell_payload = extract_shell_payload(&argv);
    if let Some(raw) = &request.raw_command {
        let matches_argv = raw == &command_text;
        let matches_payload = shell_payload
            .as_deref()
            .is_some_and(|payload| raw.trim() == payload.trim());
        if !matches_argv && !matches_payload {
            return Err(SystemRunError::new(
                "RAW_COMMAND_MISMATCH",
                "INVALID_REQUEST: rawCommand does not match command",
            ));
        }
    }
    let env = check_env_overrides(
        request.env.as_ref().unwrap_or(&BTreeMap::new()),
        shell_payload.is_some(),
    )?;
    check_env_assignments(&argv)
        .map_err(|message| SystemRunError::new("ENV_ASSIGNMENT_REJECTED", message))?;
    let preview_text = shell_payload
        .as_deref()
        .map_or_else(|| command_text.clone(), |payload| payload.trim().to_owned());
    Ok(PreparedRun {
        argv,
        command_text,
        preview_text,
        shell_payload,
        env,
    })
}

/// Refuses blocked and non-portable override keys; for a shell wrapper keeps only the
/// terminal and locale keys.
pub fn check_env_overrides(
    env: &BTreeMap<String, String>,
    shell_wrapper: bool,
) -> Result<BTreeMap<String, String>, SystemRunError> {
    let blocked: Vec<&str> = env
        .keys()
        .filter(|key| is_portable_key(key) && is_blocked_env_key(key))
        .map(String::as_str)
        .collect();
    let non_portable: Vec<&str> = env
        .keys()
        .filter(|key| !is_portable_key(key))
        .map(String::as_str)
        .collect();
    if !blocked.is_empty() || !non_portable.is_empty() {
        let mut parts = Vec::new();
        if !blocked.is_empty() {
            parts.push(format!("blocked override keys: {}", blocked.join(", ")));
        }
        if !non_portable.is_empty() {
            parts.push(format!(
                "invalid non-portable override keys: {}",
                non_portable.join(", ")
            ));
        }
        return Err(SystemRunError::new(
            "ENV_OVERRIDE_REJECTED",
            format!(
                "SYSTEM_RUN_DENIED: environment override rejected ({})",
                parts.join("; ")
            ),
        ));
    }
    Ok(env
        .iter()
        .filter(|(key, _)| {
            !shell_wrapper || SHELL_WRAPPER_ENV.contains(&key.as_str()) || key.starts_with("LC_")
        })
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect())
}

/// Refuses `env KEY=value … cmd` (anywhere in argv's leading `env` wrappers) that sets a
/// blocked key.
pub fn check_env_assignments(argv: &[String]) -> Result<(), String> {
    let mut blocked = Vec::new();
    let mut index = 0;
    while argv.get(index).is_some_and(|arg| base_name(arg) == "env") {
        index += 1;
        while let Some(arg) = argv.get(index) {
            if arg.starts_with('-') {
                index += 1;
                continue;
            }
            match arg.split_once('=') {
                Some((key, _)) if !key.is_empty() => {
                    if is_blocked_env_key(key) || !is_portable_key(key) {
                        blocked.push(key.to_owned());
                    }
                    index += 1;
                }
                _ => break,
            }
        }
    }
    if blocked.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "SYSTEM_RUN_DENIED: command env assignment rejected (blocked env assignment keys: {})",
            blocked.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|arg| (*arg).to_owned()).collect()
    }

    fn request(command: serde_json::Value, raw: Option<&str>) -> SystemRunRequest {
        serde_json::from_value(json!({"command": command, "rawCommand": raw})).unwrap()
    }

    #[test]
    fn format_exec_command_quotes_empty_spaced_and_quoted_arguments() {
        assert_eq!(
            format_exec_command(&strings(&["echo", "hi there"])),
            "echo \"hi there\""
        );
        assert_eq!(format_exec_command(&strings(&["runner "])), "\"runner \"");
        assert_eq!(format_exec_command(&strings(&["a", ""])), "a \"\"");
        assert_eq!(
            format_exec_command(&strings(&["say", "x\"y"])),
            "say \"x\\\"y\""
        );
    }

    #[test]
    fn a_shell_payload_with_padding_previews_trimmed_and_shows_the_argv() {
        let prepared = prepare_system_run(&request(
            json!(["/bin/sh", "-lc", "echo hi"]),
            Some("  echo hi  "),
        ))
        .unwrap();
        assert_eq!(prepared.preview_text, "echo hi");
        assert_eq!(prepared.command_text, "/bin/sh -lc \"echo hi\"");
    }

    #[test]
    fn the_payload_is_found_behind_env_and_in_common_shell_forms() {
        assert_eq!(
            extract_shell_payload(&strings(&["/usr/bin/env", "bash", "-lc", "echo hi"])).as_deref(),
            Some("echo hi")
        );
        assert_eq!(
            extract_shell_payload(&strings(&["sh", "-c", "id"])).as_deref(),
            Some("id")
        );
        assert_eq!(
            extract_shell_payload(&strings(&["cmd.exe", "/d", "/s", "/c", "dir"])).as_deref(),
            Some("dir")
        );
        assert_eq!(extract_shell_payload(&strings(&["sh", "script.sh"])), None);
        assert_eq!(
            extract_shell_payload(&strings(&["sh", "-c", "id", "extra"])),
            None
        );
        assert_eq!(
            extract_shell_payload(&strings(&["python3", "-c", "x"])),
            None
        );
        assert_eq!(
            extract_shell_payload(&strings(&["env", "-S", "sh -c id"])),
            None
        );
    }

    #[test]
    fn non_string_arguments_are_coerced() {
        let prepared =
            prepare_system_run(&request(json!(["echo", 123, false, null]), None)).unwrap();
        assert_eq!(prepared.argv, strings(&["echo", "123", "false", "null"]));
    }

    #[test]
    fn a_missing_command_and_a_mismatched_raw_command_are_refused() {
        let missing = prepare_system_run(&request(json!([]), Some("echo hi"))).unwrap_err();
        assert_eq!(missing.code, "MISSING_COMMAND");
        let mismatch = prepare_system_run(&request(
            json!(["/bin/sh", "-lc", "echo hi"]),
            Some("echo bye"),
        ))
        .unwrap_err();
        assert_eq!(mismatch.code, "RAW_COMMAND_MISMATCH");
        assert_eq!(
            mismatch.message,
            "INVALID_REQUEST: rawCommand does not match command"
        );
        // Without a shell wrapper only the formatted argv matches.
        assert!(
            prepare_system_run(&request(
                json!(["echo", "hi there"]),
                Some("echo \"hi there\"")
            ))
            .is_ok()
        );
        assert!(
            prepare_system_run(&request(json!(["echo", "hi there"]), Some("echo hi there")))
                .is_err()
        );
    }

    #[test]
    fn blocked_and_non_portable_env_overrides_are_rejected_with_both_lists() {
        let env = BTreeMap::from([
            ("NODE_OPTIONS".to_owned(), "--require /tmp/x.js".to_owned()),
            ("PATH".to_owned(), "/tmp".to_owned()),
            ("BAD-KEY".to_owned(), "1".to_owned()),
            ("OK".to_owned(), "1".to_owned()),
        ]);
        let err = check_env_overrides(&env, false).unwrap_err();
        assert_eq!(
            err.message,
            "SYSTEM_RUN_DENIED: environment override rejected (blocked override keys: NODE_OPTIONS, PATH; invalid non-portable override keys: BAD-KEY)"
        );
        for key in [
            "ld_preload",
            "DYLD_INSERT_LIBRARIES",
            "BASH_ENV",
            "https_proxy",
            "GIT_CONFIG_COUNT",
            "TF_VAR_x",
        ] {
            assert!(is_blocked_env_key(key), "{key}");
        }
        assert!(!is_blocked_env_key("TERM"));
    }

    #[test]
    fn a_shell_wrapper_keeps_only_terminal_and_locale_overrides() {
        let env = BTreeMap::from([
            ("TERM".to_owned(), "xterm".to_owned()),
            ("LC_ALL".to_owned(), "C".to_owned()),
            ("FOO".to_owned(), "bar".to_owned()),
        ]);
        let kept = check_env_overrides(&env, true).unwrap();
        assert_eq!(kept.keys().collect::<Vec<_>>(), ["LC_ALL", "TERM"]);
        assert_eq!(check_env_overrides(&env, false).unwrap().len(), 3);
    }

    #[test]
    fn env_assignments_of_blocked_keys_are_rejected() {
        let err = check_env_assignments(&strings(&["env", "LD_PRELOAD=/tmp/x.so", "FOO=1", "ls"]))
            .unwrap_err();
        assert_eq!(
            err,
            "SYSTEM_RUN_DENIED: command env assignment rejected (blocked env assignment keys: LD_PRELOAD)"
        );
        assert!(check_env_assignments(&strings(&["env", "FOO=1", "ls"])).is_ok());
        assert!(
            check_env_assignments(&strings(&["/usr/bin/env", "-i", "BASH_ENV=x", "sh"])).is_err()
        );
    }
}
