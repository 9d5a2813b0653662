//! `system.run` request rules (spec §8.3): the argv a node runs, the text a person approves,
//! and which environment overrides are allowed through.
//!
//! A node executes an argv, never a raw string. This module turns a request into that argv
//! (coercing JSON values), renders it for display (`format_exec_command`), checks that the
//! `rawCommand` a caller showed matches what will run, finds the payload of shell wrappers
//! (`sh -lc <payload>`, `cmd.exe /d /s /c <payload>`) so the policy layer can analyse it, and
//! refuses environment overrides and `env NAME=…` assignments that could change what a
//! binary loads or where it connects. It decides nothing about allowlists and does no I/O.
//!
//! Where clawless is stricter than OpenClaw:
//! - the blocked key list ([`is_blocked_env_key`]) is longer, and keys compare without case;
//! - override values containing NUL are refused;
//! - command items that are JSON arrays or objects are refused instead of stringified;
//! - `env NAME=… bash -c …` is not treated as a shell wrapper whose payload stands for the
//!   command (the assignments would vanish from the preview), but its environment
//!   overrides are still reduced like a shell wrapper's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::shell::executable_name;

#[cfg(test)]
mod tests;

/// Error code for a request that is malformed or refused before running.
pub const CODE_INVALID_REQUEST: &str = "INVALID_REQUEST";
/// Error code for a request without a command.
pub const CODE_MISSING_COMMAND: &str = "MISSING_COMMAND";
/// Error code for a `rawCommand` that does not describe the argv.
pub const CODE_RAW_COMMAND_MISMATCH: &str = "RAW_COMMAND_MISMATCH";

/// POSIX shells whose `-c` payload is analysed in place of the wrapper. fish is left out on
/// purpose: its syntax is not POSIX, so a POSIX analysis of its payload would mislead.
const POSIX_SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"];

/// Exact environment keys (upper case) that are never accepted from a request. Each can make
/// an allowlisted binary load code, run a helper command, trust another server, or read
/// configuration from somewhere the caller chose:
/// - shells: `BASH_ENV`, `ENV`, `SHELL`, `SHELLOPTS`, `BASHOPTS`, `IFS`, `PS1`, `PS2`, `PS4`,
///   `PROMPT_COMMAND`, `CDPATH`, `GLOBIGNORE`, `ZDOTDIR`, `FPATH`, `BASH_XTRACEFD`,
///   `BASH_LOADABLES_PATH`;
/// - where things are found: `PATH`, `HOME`, `XDG_CONFIG_HOME`, `XDG_CONFIG_DIRS`, `PATHEXT`,
///   `COMSPEC`, `PSMODULEPATH`;
/// - language runtimes: `NODE_OPTIONS`, `NODE_PATH`, `ELECTRON_RUN_AS_NODE`, `PYTHONPATH`,
///   `PYTHONSTARTUP`, `PYTHONHOME`, `PYTHONUSERBASE`, `PYTHONWARNINGS`, `PYTHONBREAKPOINT`,
///   `PERL5LIB`, `PERL5OPT`, `PERLLIB`, `PERL5DB`, `RUBYOPT`, `RUBYLIB`, `CLASSPATH`,
///   `JAVA_TOOL_OPTIONS`, `_JAVA_OPTIONS`, `JDK_JAVA_OPTIONS`, `PHPRC`, `PHP_INI_SCAN_DIR`;
/// - helper commands: `GIT_SSH`, `GIT_SSH_COMMAND`, `GIT_EXEC_PATH`, `GIT_PROXY_COMMAND`,
///   `GIT_ASKPASS`, `SSH_ASKPASS`, `SUDO_ASKPASS`, `GIT_EDITOR`, `GIT_SEQUENCE_EDITOR`,
///   `GIT_PAGER`, `GIT_EXTERNAL_DIFF`, `GIT_TEMPLATE_DIR`, `GIT_DIR`, `GIT_WORK_TREE`,
///   `GIT_CONFIG`, `EDITOR`, `VISUAL`, `PAGER`, `MANPAGER`, `LESSOPEN`, `LESSCLOSE`, `BROWSER`;
/// - build tools: `RUSTC`, `RUSTC_WRAPPER`, `RUSTC_WORKSPACE_WRAPPER`, `CARGO_HOME`,
///   `CARGO_BUILD_RUSTC`, `CARGO_BUILD_RUSTC_WRAPPER`, `GOFLAGS`, `GOPROXY`, `GOSUMDB`,
///   `GONOSUMDB`, `GONOSUMCHECK`, `GOINSECURE`, `GOTOOLCHAIN`, `TF_CLI_CONFIG_FILE`;
/// - the C library: `GCONV_PATH`, `LOCPATH`, `NLSPATH`, `HOSTALIASES`;
/// - network and trust: `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `FTP_PROXY`, `NO_PROXY`,
///   `SSL_CERT_FILE`, `SSL_CERT_DIR`, `CURL_CA_BUNDLE`, `REQUESTS_CA_BUNDLE`,
///   `NODE_EXTRA_CA_CERTS`, `NODE_TLS_REJECT_UNAUTHORIZED`, `PYTHONHTTPSVERIFY`,
///   `GIT_SSL_NO_VERIFY`, `OPENSSL_CONF`, `OPENSSL_ENGINES`, `OPENSSL_MODULES`, `DOCKER_HOST`,
///   `DOCKER_CONFIG`, `DOCKER_CERT_PATH`, `DOCKER_TLS_VERIFY`, `KUBECONFIG`.
const BLOCKED_ENV_KEYS: &[&str] = &[
    "BASH_ENV",
    "ENV",
    "SHELL",
    "SHELLOPTS",
    "BASHOPTS",
    "IFS",
    "PS1",
    "PS2",
    "PS4",
    "PROMPT_COMMAND",
    "CDPATH",
    "GLOBIGNORE",
    "ZDOTDIR",
    "FPATH",
    "BASH_XTRACEFD",
    "BASH_LOADABLES_PATH",
    "PATH",
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS",
    "PATHEXT",
    "COMSPEC",
    "PSMODULEPATH",
    "NODE_OPTIONS",
    "NODE_PATH",
    "ELECTRON_RUN_AS_NODE",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PYTHONUSERBASE",
    "PYTHONWARNINGS",
    "PYTHONBREAKPOINT",
    "PERL5LIB",
    "PERL5OPT",
    "PERLLIB",
    "PERL5DB",
    "RUBYOPT",
    "RUBYLIB",
    "CLASSPATH",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "PHPRC",
    "PHP_INI_SCAN_DIR",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_EXEC_PATH",
    "GIT_PROXY_COMMAND",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_PAGER",
    "GIT_EXTERNAL_DIFF",
    "GIT_TEMPLATE_DIR",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_CONFIG",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "MANPAGER",
    "LESSOPEN",
    "LESSCLOSE",
    "BROWSER",
    "RUSTC",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO_HOME",
    "CARGO_BUILD_RUSTC",
    "CARGO_BUILD_RUSTC_WRAPPER",
    "GOFLAGS",
    "GOPROXY",
    "GOSUMDB",
    "GONOSUMDB",
    "GONOSUMCHECK",
    "GOINSECURE",
    "GOTOOLCHAIN",
    "TF_CLI_CONFIG_FILE",
    "GCONV_PATH",
    "LOCPATH",
    "NLSPATH",
    "HOSTALIASES",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "FTP_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CURL_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "NODE_TLS_REJECT_UNAUTHORIZED",
    "PYTHONHTTPSVERIFY",
    "GIT_SSL_NO_VERIFY",
    "OPENSSL_CONF",
    "OPENSSL_ENGINES",
    "OPENSSL_MODULES",
    "DOCKER_HOST",
    "DOCKER_CONFIG",
    "DOCKER_CERT_PATH",
    "DOCKER_TLS_VERIFY",
    "KUBECONFIG",
];

/// Key prefixes (upper case) that are never accepted: the dynamic linkers (`LD_`, `DYLD_`),
/// bash exported functions (`BASH_FUNC_`), configuration injected through the environment
/// (`GIT_CONFIG_`, `NPM_CONFIG_`, `CARGO_REGISTRIES_`, `PIP_`), Terraform variables
/// (`TF_VAR_`), and Lua's start-up code and module paths (`LUA_INIT`, `LUA_PATH`,
/// `LUA_CPATH`, which have versioned variants such as `LUA_INIT_5_4`).
const BLOCKED_ENV_PREFIXES: &[&str] = &[
    "LD_",
    "DYLD_",
    "BASH_FUNC_",
    "GIT_CONFIG_",
    "NPM_CONFIG_",
    "CARGO_REGISTRIES_",
    "PIP_",
    "TF_VAR_",
    "LUA_INIT",
    "LUA_PATH",
    "LUA_CPATH",
];

/// Renders an argv for display and for comparing with `rawCommand`: arguments joined by
/// spaces; an empty argument becomes `""`; one containing whitespace or `"` is wrapped in
/// `"…"` with each `"` written `\"`.
pub fn format_exec_command(argv: &[String]) -> String {
    let mut out = String::new();
    for (k, arg) in argv.iter().enumerate() {
        if k > 0 {
            out.push(' ');
        }
        if arg.is_empty() {
            out.push_str("\"\"");
        } else if arg
            .chars()
            .any(|c| c.is_whitespace() || c == '"' || c == '\u{feff}')
        {
            out.push('"');
            out.push_str(&arg.replace('"', "\\\""));
            out.push('"');
        } else {
            out.push_str(arg);
        }
    }
    out
}

/// The command string a shell wrapper runs, when `argv` is one: `sh`/`bash`/… with `-c`
/// among their options (`["/bin/sh","-lc",p]`, `["bash","-c",p]`), the same behind a plain
/// `env` (`["/usr/bin/env","bash","-lc",p]`), `cmd.exe … /c p…` or `powershell … -Command p…`
/// (the rest of the argv joined by spaces). Returned untrimmed.
///
/// Recognition is by file name only: the caller must still check that `argv[0]` resolves to
/// a real shell before it lets the payload stand for the command.
pub fn extract_shell_payload(argv: &[String]) -> Option<String> {
    let start = usize::from(argv.first().is_some_and(|a| executable_name(a) == "env"));
    let exe = executable_name(argv.get(start)?);
    let args = argv.get(start + 1..)?;
    if POSIX_SHELLS.contains(&exe.as_str()) {
        posix_shell_payload(args)
    } else if exe == "cmd" {
        cmd_payload(args)
    } else if exe == "powershell" || exe == "pwsh" {
        powershell_payload(args)
    } else {
        None
    }
}

/// True when `argv` starts a shell, directly or behind `env` (with or without options and
/// assignments) or `busybox`/`toybox`. Wider than [`extract_shell_payload`]: it decides
/// whether environment overrides are reduced to the terminal and locale keys.
pub fn is_shell_invocation(argv: &[String]) -> bool {
    let (mut k, _) = skip_env_prefix(argv);
    if argv
        .get(k)
        .is_some_and(|a| matches!(executable_name(a).as_str(), "busybox" | "toybox"))
    {
        k += 1;
    }
    argv.get(k).is_some_and(|a| {
        let name = executable_name(a);
        POSIX_SHELLS.contains(&name.as_str())
            || matches!(name.as_str(), "cmd" | "powershell" | "pwsh" | "fish")
    })
}

/// Parses a POSIX shell's options: the payload is the first operand once `-c` was given.
fn posix_shell_payload(args: &[String]) -> Option<String> {
    let mut saw_c = false;
    let mut k = 0;
    while let Some(arg) = args.get(k) {
        if arg == "--" || arg == "-" {
            k += 1;
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            // Long options that read files (`--rcfile`, `--init-file`) are not accepted.
            if !matches!(
                long,
                "login" | "noprofile" | "norc" | "posix" | "noediting" | "verbose"
            ) {
                return None;
            }
            k += 1;
            continue;
        }
        let (minus, flags) = match (arg.strip_prefix('-'), arg.strip_prefix('+')) {
            (Some(flags), _) => (true, flags),
            (None, Some(flags)) => (false, flags),
            (None, None) => break,
        };
        if flags.is_empty() || !flags.bytes().all(|c| c.is_ascii_alphabetic()) {
            return None;
        }
        saw_c |= minus && flags.contains('c');
        // `-o name` / `-O name` take the next argument.
        k += 1 + flags.bytes().filter(|c| matches!(c, b'o' | b'O')).count();
    }
    if saw_c { args.get(k).cloned() } else { None }
}

/// `cmd.exe [/d] [/s] [/q] … /c <command…>`.
fn cmd_payload(args: &[String]) -> Option<String> {
    for (k, arg) in args.iter().enumerate() {
        let lower = arg.to_ascii_lowercase();
        if lower == "/c" {
            let rest = &args[k + 1..];
            return (!rest.is_empty()).then(|| rest.join(" "));
        }
        let known = matches!(lower.as_str(), "/d" | "/s" | "/q" | "/a" | "/u")
            || ["/e:", "/f:", "/v:", "/t:"]
                .iter()
                .any(|p| lower.starts_with(p));
        if !known {
            return None;
        }
    }
    None
}

/// `powershell [-NoProfile …] -Command <command…>`; `-File` and `-EncodedCommand` are not
/// payloads anyone can read.
fn powershell_payload(args: &[String]) -> Option<String> {
    let mut k = 0;
    while let Some(arg) = args.get(k) {
        let lower = arg.to_ascii_lowercase();
        if matches!(lower.as_str(), "-command" | "-c" | "/command" | "/c") {
            let rest = &args[k + 1..];
            return (!rest.is_empty()).then(|| rest.join(" "));
        }
        if !lower.starts_with('-') {
            return None;
        }
        match lower.as_str() {
            "-file" | "-f" | "-encodedcommand" | "-enc" | "-ec" | "-e" => return None,
            "-executionpolicy" | "-ep" | "-windowstyle" | "-w" | "-version" | "-v"
            | "-inputformat" | "-outputformat" | "-of" | "-configurationname"
            | "-workingdirectory" | "-wd" | "-psconsolefile" | "-settingsfile"
            | "-custompipename" => k += 2,
            _ => k += 1,
        }
    }
    None
}

/// A `system.run` request as it arrives (other fields of the wire shape are ignored here).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemRunRequest {
    /// The argv; items may be any JSON scalar and are coerced to strings.
    #[serde(default)]
    pub command: Vec<Value>,
    /// The command text the caller showed or approved; must describe `command`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_command: Option<String>,
    /// Environment overrides to apply on top of the node's environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
}

/// A request that passed every rule here, ready for the policy layer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreparedRun {
    /// What runs.
    pub argv: Vec<String>,
    /// `format_exec_command(argv)`: the canonical text of the command.
    pub command_text: String,
    /// What a person is shown: the trimmed shell payload for a shell wrapper, else
    /// `command_text`.
    pub preview_text: String,
    /// The shell wrapper's payload (untrimmed), which the allowlist analyses in place of argv.
    pub shell_payload: Option<String>,
    /// The overrides to apply, already checked, and reduced for shell invocations.
    pub env: BTreeMap<String, String>,
}

/// Why a `system.run` request was refused: a wire error code and its exact message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SystemRunError {
    /// `INVALID_REQUEST`, `MISSING_COMMAND` or `RAW_COMMAND_MISMATCH`.
    pub code: String,
    /// The message sent back to the caller.
    pub message: String,
}

impl SystemRunError {
    fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_string(),
            message: message.into(),
        }
    }
}

/// Applies the §8.3 request rules: a non-empty argv (JSON scalars coerced to strings), a
/// `rawCommand` that matches it, no blocked or non-portable override keys, no blocked
/// `env NAME=…` assignments in argv; then reduces overrides for shell invocations.
pub fn prepare_system_run(request: &SystemRunRequest) -> Result<PreparedRun, SystemRunError> {
    let argv = coerce_command(&request.command)?;
    if argv.first().is_none_or(|a| a.trim().is_empty()) {
        return Err(SystemRunError::new(
            CODE_MISSING_COMMAND,
            "INVALID_REQUEST: command required",
        ));
    }
    let shell_payload = extract_shell_payload(&argv);
    let command_text = format_exec_command(&argv);

    if let Some(raw) = request
        .raw_command
        .as_deref()
        .map(str::trim)
        .filter(|raw| !raw.is_empty())
    {
        let matches = raw == command_text
            || shell_payload
                .as_deref()
                .is_some_and(|payload| payload.trim() == raw);
        if !matches {
            return Err(SystemRunError::new(
                CODE_RAW_COMMAND_MISMATCH,
                "INVALID_REQUEST: rawCommand does not match command",
            ));
        }
    }

    let overrides = request.env.clone().unwrap_or_default();
    check_env_overrides(&overrides)?;
    check_env_assignments(&argv)
        .map_err(|message| SystemRunError::new(CODE_INVALID_REQUEST, message))?;

    let env = if is_shell_invocation(&argv) {
        overrides
            .into_iter()
            .filter(|(key, _)| is_terminal_or_locale_key(key))
            .collect()
    } else {
        overrides
    };
    let preview_text = match &shell_payload {
        Some(payload) => payload.trim().to_string(),
        None => command_text.clone(),
    };
    Ok(PreparedRun {
        argv,
        command_text,
        preview_text,
        shell_payload,
        env,
    })
}

/// Coerces JSON scalars the way a JavaScript `String(value)` would; arrays and objects are
/// refused rather than turned into `[object Object]`.
fn coerce_command(command: &[Value]) -> Result<Vec<String>, SystemRunError> {
    command
        .iter()
        .map(|item| match item {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            Value::Bool(b) => Ok(b.to_string()),
            Value::Null => Ok("null".to_string()),
            Value::Array(_) | Value::Object(_) => Err(SystemRunError::new(
                CODE_INVALID_REQUEST,
                "INVALID_REQUEST: command items must be strings, numbers, booleans or null",
            )),
        })
        .collect()
}

/// Refuses overrides with blocked or non-portable keys, or values containing NUL.
fn check_env_overrides(overrides: &BTreeMap<String, String>) -> Result<(), SystemRunError> {
    let mut blocked = Vec::new();
    let mut invalid = Vec::new();
    let mut nul = Vec::new();
    for (key, value) in overrides {
        if is_blocked_env_key(key) {
            blocked.push(key.as_str());
        } else if !is_portable_env_key(key) {
            invalid.push(key.as_str());
        } else if value.contains('\0') {
            nul.push(key.as_str());
        }
    }
    let mut details = Vec::new();
    if !blocked.is_empty() {
        details.push(format!("blocked override keys: {}", blocked.join(", ")));
    }
    if !invalid.is_empty() {
        details.push(format!(
            "invalid non-portable override keys: {}",
            invalid.join(", ")
        ));
    }
    if !nul.is_empty() {
        details.push(format!(
            "override values containing NUL: {}",
            nul.join(", ")
        ));
    }
    if details.is_empty() {
        Ok(())
    } else {
        Err(SystemRunError::new(
            CODE_INVALID_REQUEST,
            format!(
                "SYSTEM_RUN_DENIED: environment override rejected ({})",
                details.join("; ")
            ),
        ))
    }
}

/// Refuses blocked keys assigned in the argv itself: shell-style `NAME=value` words before
/// the command and the assignments of `env` (`env [-i] [-u NAME] NAME=value … cmd`), through
/// any number of nested `env`s. Call it on every analysed shell segment's argv too.
pub fn check_env_assignments(argv: &[String]) -> Result<(), String> {
    let (_, assigned) = skip_env_prefix(argv);
    let mut blocked: Vec<&str> = Vec::new();
    for key in assigned {
        if is_blocked_env_key(key) && !blocked.contains(&key) {
            blocked.push(key);
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

/// Walks the assignments and `env` invocations at the start of `argv`: returns the index of
/// the command after them and every key they assign.
fn skip_env_prefix(argv: &[String]) -> (usize, Vec<&str>) {
    let mut assigned = Vec::new();
    let mut k = 0;
    loop {
        // Shell-style assignments: `NAME=value cmd`.
        while let Some(key) = argv.get(k).and_then(|a| shell_assignment_key(a)) {
            assigned.push(key);
            k += 1;
        }
        if argv.get(k).is_none_or(|a| executable_name(a) != "env") {
            return (k, assigned);
        }
        k += 1;
        while let Some(arg) = argv.get(k) {
            if arg == "--" {
                k += 1;
            } else if matches!(arg.as_str(), "-u" | "-C" | "-P" | "--unset" | "--chdir") {
                k += 2;
            } else if matches!(arg.as_str(), "-S" | "--split-string") {
                // `env -S 'NAME=value cmd'` assigns inside one argument.
                if let Some(split) = argv.get(k + 1) {
                    assigned.extend(
                        split
                            .split_ascii_whitespace()
                            .filter_map(|word| word.split_once('=').map(|(key, _)| key))
                            .filter(|key| !key.is_empty() && !key.starts_with('-')),
                    );
                }
                k += 2;
            } else if arg.len() > 1 && arg.starts_with('-') {
                k += 1;
            } else if let Some((key, _)) = arg.split_once('=')
                && !key.is_empty()
            {
                // `env` accepts any name before `=`, portable or not.
                assigned.push(key);
                k += 1;
            } else {
                break;
            }
        }
    }
}

/// The name assigned by a shell-style `NAME=value` word, when it is one.
fn shell_assignment_key(word: &str) -> Option<&str> {
    let (key, _) = word.split_once('=')?;
    let key = key.strip_suffix('+').unwrap_or(key);
    is_portable_env_key(key).then_some(key)
}

/// True for a key `^[A-Za-z_][A-Za-z0-9_]*$`.
fn is_portable_env_key(key: &str) -> bool {
    let mut bytes = key.bytes();
    bytes
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && bytes.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// The keys a shell invocation keeps: `TERM`, `LANG`, `LC_*`, `COLORTERM`, `NO_COLOR`,
/// `FORCE_COLOR`.
fn is_terminal_or_locale_key(key: &str) -> bool {
    matches!(
        key,
        "TERM" | "LANG" | "COLORTERM" | "NO_COLOR" | "FORCE_COLOR"
    ) || key.starts_with("LC_")
}

/// True when a request may never set `key` (compared without case, since Windows keys have
/// none and tools such as curl read `http_proxy` too). See `BLOCKED_ENV_KEYS` and
/// `BLOCKED_ENV_PREFIXES` in this module for the list and the reason for each entry.
pub fn is_blocked_env_key(key: &str) -> bool {
    let upper = key.trim().to_ascii_uppercase();
    BLOCKED_ENV_KEYS.contains(&upper.as_str())
        || BLOCKED_ENV_PREFIXES.iter().any(|p| upper.starts_with(p))
}
