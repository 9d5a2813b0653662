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
//! Where clawless is stricter than OpenClaw (deviation `env-override-keys`): the blocked key
//! list ([`is_blocked_env_key`]) holds every key OpenClaw's node refuses plus
//! [`CLAWLESS_ONLY_ENV_KEYS`] and a few prefixes; override values containing NUL are refused
//! before anything runs; and the assignments checked include shell-style `NAME=value` words
//! before the command and `env -S` strings, not only `env NAME=value`.
//!
//! As in OpenClaw: command items are coerced with JavaScript's `String()` (arrays joined by
//! `,`, objects `[object Object]`); `env NAME=… bash -c …` is not shown as its payload (the
//! assignments would vanish from the preview), and its environment overrides are reduced
//! like a shell wrapper's. (The policy still analyses its payload, see
//! [`evaluate`](super::evaluate).)

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
    // Also refused by OpenClaw's node (its own list), so never looser than it:
    "GIT_COMMON_DIR",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONFIG_FILE",
    "AZURE_AUTH_LOCATION",
    "CC",
    "CXX",
    "CMAKE_C_COMPILER",
    "CMAKE_CXX_COMPILER",
    "HELM_HOME",
    "SSLKEYLOGFILE",
    "JAVA_OPTS",
    "DOTNET_STARTUP_HOOKS",
    "DOTNET_ADDITIONAL_DEPS",
    "CORECLR_PROFILER_PATH",
    "GLIBC_TUNABLES",
    "MAVEN_OPTS",
    "MAKEFLAGS",
    "MFLAGS",
    "SBT_OPTS",
    "GRADLE_OPTS",
    "GRADLE_USER_HOME",
    "ANT_OPTS",
    "HGRCPATH",
    "FCEDIT",
    "SUDO_EDITOR",
    "HISTFILE",
    "PERL5DBCMD",
    "WGETRC",
    "CURL_HOME",
    "CGO_CFLAGS",
    "CGO_LDFLAGS",
    "RUSTFLAGS",
    "DENO_DIR",
    "BUN_CONFIG_REGISTRY",
    "YARN_RC_FILENAME",
    "UV_INDEX",
    "UV_INDEX_URL",
    "UV_PYTHON",
    "UV_EXTRA_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "PIP_INDEX_URL",
    "PIP_PYPI_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_CONFIG_FILE",
    "PIP_FIND_LINKS",
    "PIP_TRUSTED_HOST",
    "DOCKER_CONTEXT",
    "LIBRARY_PATH",
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "OBJC_INCLUDE_PATH",
    "GONOPROXY",
    "GOPRIVATE",
    "GOENV",
    "GOPATH",
    "VIRTUAL_ENV",
    "GEM_HOME",
    "GEM_PATH",
    "BUNDLE_GEMFILE",
    "COMPOSER_HOME",
    "LUA_PATH",
    "LUA_CPATH",
];

/// The keys of [`BLOCKED_ENV_KEYS`] that OpenClaw's node accepts (deviation
/// `env-override-keys`). Each names a file or program the process then trusts: shell start-up
/// and word-splitting settings, other interpreters' search paths and hooks, askpass programs,
/// git's config file, compiler wrappers, locale and host-alias files read by the C library,
/// and proxies and TLS trust for other tools.
pub const CLAWLESS_ONLY_ENV_KEYS: &[&str] = &[
    "BASHOPTS",
    "PS1",
    "PS2",
    "CDPATH",
    "GLOBIGNORE",
    "FPATH",
    "BASH_XTRACEFD",
    "BASH_LOADABLES_PATH",
    "XDG_CONFIG_DIRS",
    "PATHEXT",
    "COMSPEC",
    "PSMODULEPATH",
    "ELECTRON_RUN_AS_NODE",
    "PYTHONWARNINGS",
    "PERLLIB",
    "SUDO_ASKPASS",
    "GIT_CONFIG",
    "RUSTC",
    "RUSTC_WORKSPACE_WRAPPER",
    "GOSUMDB",
    "GOINSECURE",
    "GOTOOLCHAIN",
    "TF_CLI_CONFIG_FILE",
    "LOCPATH",
    "NLSPATH",
    "HOSTALIASES",
    "FTP_PROXY",
    "PYTHONHTTPSVERIFY",
    "OPENSSL_MODULES",
    "DOCKER_CONFIG",
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

/// The prefixes of [`BLOCKED_ENV_PREFIXES`] that OpenClaw's node accepts (the others it
/// refuses too).
const CLAWLESS_ONLY_ENV_PREFIXES: &[&str] =
    &["PIP_", "TF_VAR_", "LUA_INIT", "LUA_PATH", "LUA_CPATH"];

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
    let argv = coerce_command(&request.command);
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

/// Coerces each item the way OpenClaw's node does, with JavaScript's `String(value)`: an
/// array becomes its items joined by `,` (null items empty), an object `[object Object]`.
/// The argv is what runs and what `rawCommand` is compared with, so this is only spelling.
fn coerce_command(command: &[Value]) -> Vec<String> {
    command.iter().map(js_string).collect()
}

/// JavaScript's `String(value)` for a JSON value.
fn js_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".to_string(),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::Null => String::new(),
                other => js_string(other),
            })
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(_) => "[object Object]".to_string(),
    }
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
    let (k, assigned) = env_prefix_assignments(argv);
    (k, assigned.into_iter().map(|(key, _)| key).collect())
}

/// [`skip_env_prefix`], with each key marked true when a plain `env NAME=value` word assigns
/// it (the only assignments OpenClaw's node checks).
fn env_prefix_assignments(argv: &[String]) -> (usize, Vec<(&str, bool)>) {
    let mut assigned = Vec::new();
    let mut k = 0;
    loop {
        // Shell-style assignments: `NAME=value cmd`.
        while let Some(key) = argv.get(k).and_then(|a| shell_assignment_key(a)) {
            assigned.push((key, false));
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
                            .filter(|key| !key.is_empty() && !key.starts_with('-'))
                            .map(|key| (key, false)),
                    );
                }
                k += 2;
            } else if arg.len() > 1 && arg.starts_with('-') {
                k += 1;
            } else if let Some((key, _)) = arg.split_once('=')
                && !key.is_empty()
            {
                // `env` accepts any name before `=`, portable or not.
                assigned.push((key, true));
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

/// True when OpenClaw's node also refuses `key` (as an override or an `env` assignment).
pub fn openclaw_blocks_env_key(key: &str) -> bool {
    let upper = key.trim().to_ascii_uppercase();
    (BLOCKED_ENV_KEYS.contains(&upper.as_str())
        && !CLAWLESS_ONLY_ENV_KEYS.contains(&upper.as_str()))
        || BLOCKED_ENV_PREFIXES
            .iter()
            .filter(|prefix| !CLAWLESS_ONLY_ENV_PREFIXES.contains(prefix))
            .any(|prefix| upper.starts_with(prefix))
}

/// True when clawless refuses these env overrides but OpenClaw's node would accept them:
/// every refused key is one of clawless's own, or only a value holds NUL (deviation
/// `env-override-keys`).
pub fn env_overrides_refused_only_by_clawless(overrides: &BTreeMap<String, String>) -> bool {
    check_env_overrides(overrides).is_err()
        && overrides
            .keys()
            .all(|key| !openclaw_blocks_env_key(key) && is_portable_env_key(key))
}

/// True when clawless refuses the assignments at the start of `argv` but OpenClaw's node
/// would not: it checks only plain `env NAME=value` words, against its own list.
pub fn env_assignments_refused_only_by_clawless(argv: &[String]) -> bool {
    let (_, assigned) = env_prefix_assignments(argv);
    check_env_assignments(argv).is_err()
        && !assigned
            .iter()
            .any(|(key, in_env)| *in_env && openclaw_blocks_env_key(key))
}

/// True when a request may never set `key` (compared without case, since Windows keys have
/// none and tools such as curl read `http_proxy` too). See `BLOCKED_ENV_KEYS` and
/// `BLOCKED_ENV_PREFIXES` in this module for the list and the reason for each entry.
pub fn is_blocked_env_key(key: &str) -> bool {
    let upper = key.trim().to_ascii_uppercase();
    BLOCKED_ENV_KEYS.contains(&upper.as_str())
        || BLOCKED_ENV_PREFIXES.iter().any(|p| upper.starts_with(p))
}
