//! Code and exec carriers: binaries that, once allowed, run code their arguments (or their
//! stdin) choose. clawless is stricter than OpenClaw here (deviations `inline-code` and
//! `exec-carrier`): a segment whose executable is a carrier is satisfied only by an allowlist
//! entry with an `argPattern` binding its arguments; a path-only entry (even a bare `*`),
//! safe bins and skill bins do not count. The attack: with `/usr/bin/python3` allowlisted,
//! `python3 -c 'import os; os.system("…")'` runs anything, and brings back the shell syntax
//! (`>`, `$(…)`, `&`) the analysis refuses.
//!
//! Two kinds, which matter for "allow always" (see [`CarrierKind`]):
//! - [`CarrierKind::Code`]: the program text is in the arguments or on stdin — shells (any
//!   invocation), `python*`/`node`/`perl`/`ruby`/`php` with inline code (`-c`, `-m`, `-e`,
//!   `-p`, `-r`, `-M`, …) or with no script operand (program on stdin), the long tail of
//!   interpreters and REPLs (always), `awk` in every flavour (always), `sed` with `e`,
//!   `s///e`, `w`/`W`, `-f` or anything it cannot parse, editors (`vi`, `emacs`, `ed`),
//!   `xargs` (commands from stdin), terminal multiplexers (`tmux`, `screen`, …), command
//!   runners (`watch`, `flock`, `chroot`, `strace`, `gdb`, `parallel`, `at`, `xcrun`, …),
//!   database shells with shell escapes (`sqlite3`, `psql`, `mysql`, …), `ssh`/`scp`/`sftp`
//!   with a remote command, `-o`/`-F` (ProxyCommand) or `-S`, `rsync -e`/`--rsync-path`, and
//!   `busybox`/`toybox` applets that are shells, interpreters, wrappers or runners, and the
//!   shell builtins that run code (`.`, `source`, `eval`, `exec`, `trap`, `fc`, `command`,
//!   `mapfile -C`, …), which a bare `*` entry would otherwise cover.
//! - [`CarrierKind::Exec`]: the command runs other code but its exact arguments pin it —
//!   `find -exec/-execdir/-ok/-okdir/-delete/-fprint*/-fls`, `tar` with
//!   `--to-command/--checkpoint-action/--use-compress-program/--info-script/--new-volume-script/--rsh-command/--rmt-command/-I/-F`
//!   (GNU abbreviations included), `git` with any global option but a few harmless ones
//!   (`-c`, `--config-env`, `-C`, `--exec-path`, …), with a subcommand outside a fixed list
//!   (an alias may be `!sh`; `config`, `rebase`, `bisect`, `submodule`, `filter-branch`,
//!   `difftool`, … are outside it) or with `--exec`/`--upload-pack`/`--receive-pack`/
//!   `--template`/`--config`/`--ext-diff`/`-O`/… options; build and package runners (`make`
//!   in every flavour, `just`, `ninja`, `cargo`, `go`, `npm`, `npx`, `yarn`, `pnpm`, `pip`,
//!   `uv`, `gradle`, `mvn`, …: they run project files); container CLIs (`docker`, `podman`,
//!   `kubectl`, `nerdctl`); `zip -T/-TT`; `man -P/-H`; other `busybox`/`toybox` applets.
//!
//! Names are compared lowercased with version suffixes dropped (`python3.12` -> `python`),
//! and every name a segment goes by counts (as written, as resolved, and its real path's
//! base name), so a symlink called `harmless` pointing at `bash` is still a shell.

use serde::Serialize;

use super::Platform;
use super::wrappers::normalized_name;

/// How a carrier runs other code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CarrierKind {
    /// The command's arguments pin what runs; an exact-argument entry may be derived.
    Exec,
    /// The program text is in the arguments or on stdin; no entry is ever derived for it.
    Code,
}

/// Why a segment's executable carries code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Carrier {
    /// Which kind of carrier.
    pub kind: CarrierKind,
    /// A sentence for people (`bash runs shell code`).
    pub reason: String,
}

impl Carrier {
    fn code(reason: impl Into<String>) -> Self {
        Self {
            kind: CarrierKind::Code,
            reason: reason.into(),
        }
    }

    fn exec(reason: impl Into<String>) -> Self {
        Self {
            kind: CarrierKind::Exec,
            reason: reason.into(),
        }
    }
}

const SHELLS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "mksh",
    "pdksh",
    "oksh",
    "lksh",
    "loksh",
    "ash",
    "hush",
    "msh",
    "fish",
    "csh",
    "tcsh",
    "yash",
    "posh",
    "rbash",
    "rzsh",
    "elvish",
    "nu",
    "xonsh",
    "pwsh",
    "powershell",
    "cmd",
    "ion",
    "osh",
    "ysh",
    "oil",
    "es",
    "rc",
    "scsh",
    "sash",
];

/// Interpreters and REPLs refused whatever their arguments (too many ways to pass code).
const ALWAYS_CODE: &[&str] = &[
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "goawk",
    "original-awk",
    "bwk",
    "deno",
    "bun",
    "bunx",
    "lua",
    "luajit",
    "tclsh",
    "wish",
    "expect",
    "rscript",
    "r",
    "osascript",
    "julia",
    "elixir",
    "iex",
    "erl",
    "escript",
    "groovy",
    "scala",
    "jshell",
    "irb",
    "pry",
    "guile",
    "racket",
    "sbcl",
    "clisp",
    "ghci",
    "runghc",
    "runhaskell",
    "ocaml",
    "swift",
    "kotlin",
    "jrunscript",
    "jjs",
    "gnuplot",
    "octave",
    "sqlite",
    "psql",
    "mysql",
    "mariadb",
    "duckdb",
    "dc",
    "ed",
    "red",
    "ex",
    "vi",
    "vim",
    "nvim",
    "view",
    "vimdiff",
    "gvim",
    "emacs",
    "emacsclient",
    "xargs",
    "tmux",
    "screen",
    "byobu",
    "zellij",
    "dtach",
    "abduco",
    "watch",
    "flock",
    "nsenter",
    "unshare",
    "chroot",
    "setpriv",
    "prlimit",
    "cgexec",
    "firejail",
    "bwrap",
    "proot",
    "fakeroot",
    "fakechroot",
    "strace",
    "ltrace",
    "gdb",
    "lldb",
    "valgrind",
    "perf",
    "parallel",
    "sem",
    "at",
    "batch",
    "crontab",
    "systemd-run",
    "start-stop-daemon",
    "run-parts",
    "dbus-run-session",
    "dbus-launch",
    "numactl",
    "catchsegv",
    // Shell builtins that run code or commands they are given.
    "command",
    "builtin",
    "exec",
    "eval",
    "source",
    ".",
    "trap",
    "fc",
    "enable",
    "coproc",
    "bind",
    "complete",
    "compgen",
    "mapfile",
    "readarray",
    "xcrun",
    "open",
    "launchctl",
    "script",
    "unbuffer",
    "chronic",
    "ifne",
    "entr",
    "sg",
    "newgrp",
    "ssh-agent",
    "xvfb-run",
];

/// Build and package runners: they run code from project files.
const RUNNERS: &[&str] = &[
    "make", "gmake", "bmake", "pmake", "remake", "just", "ninja", "rake", "task", "gradle",
    "gradlew", "mvn", "mvnw", "ant", "cmake", "meson", "scons", "bazel", "bazelisk", "buck", "npm",
    "npx", "yarn", "pnpm", "pnpx", "corepack", "cargo", "go", "uv", "uvx", "pip", "pipx", "poetry",
    "pdm", "hatch", "tox", "nox", "pytest", "composer", "bundle", "bundler", "gem", "mix",
    "dotnet", "docker", "podman", "kubectl", "nerdctl",
];

/// Dispatch wrappers, as busybox/toybox applets (they run another command).
const WRAPPER_APPLETS: &[&str] = &[
    "env", "nice", "nohup", "stdbuf", "timeout", "time", "setsid", "chrt", "ionice", "taskset",
    "su", "sudo",
];

/// `git` subcommands that run nothing but git (aliases and the rest are carriers).
const GIT_SUBCOMMANDS: &[&str] = &[
    "status",
    "log",
    "diff",
    "show",
    "branch",
    "tag",
    "add",
    "commit",
    "checkout",
    "switch",
    "restore",
    "reset",
    "fetch",
    "pull",
    "push",
    "clone",
    "merge",
    "stash",
    "remote",
    "rev-parse",
    "rev-list",
    "ls-files",
    "ls-tree",
    "ls-remote",
    "cat-file",
    "describe",
    "blame",
    "shortlog",
    "grep",
    "mv",
    "rm",
    "init",
    "cherry-pick",
    "revert",
    "format-patch",
    "apply",
    "am",
    "clean",
    "show-ref",
    "symbolic-ref",
    "reflog",
    "notes",
    "worktree",
    "version",
    "archive",
    "range-diff",
    "whatchanged",
    "merge-base",
    "name-rev",
    "count-objects",
    "fsck",
    "gc",
    "prune",
    "sparse-checkout",
];

/// `git` global options that do not change what code git runs.
const GIT_SAFE_GLOBALS: &[&str] = &[
    "--no-pager",
    "-P",
    "--bare",
    "--no-replace-objects",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-optional-locks",
    "--no-lazy-fetch",
    "--version",
    "--help",
    "-h",
];

/// `git` options (any subcommand) that name a program, a hook source or config to run.
const GIT_DANGEROUS_LONG: &[&str] = &[
    "--exec",
    "--upload-pack",
    "--receive-pack",
    "--template",
    "--config",
    "--ext-diff",
    "--open-files-in-pager",
    "--extcmd",
    "--tool",
    "--textconv",
];

/// GNU `tar` options that run a program.
const TAR_DANGEROUS_LONG: &[&str] = &[
    "--to-command",
    "--checkpoint-action",
    "--use-compress-program",
    "--info-script",
    "--new-volume-script",
    "--rsh-command",
    "--rmt-command",
];

/// `find` actions that run commands or write or delete files.
const FIND_ACTIONS: &[&str] = &[
    "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls",
];

/// A name without its version suffix (`python3.12` -> `python`, `perl5.36` -> `perl`).
fn stem(name: &str) -> &str {
    let trimmed =
        name.trim_end_matches(|c: char| c.is_ascii_digit() || matches!(c, '.' | '-' | '_'));
    if trimmed.is_empty() { name } else { trimmed }
}

/// Classifies a segment's executable, known by each of `tokens` (as written, resolved and
/// real), run with `args` (`argv[1..]` after dispatch wrappers). The strictest finding wins.
pub fn classify_carrier(tokens: &[&str], args: &[String], platform: Platform) -> Option<Carrier> {
    let mut found: Option<Carrier> = None;
    let mut seen: Vec<String> = Vec::with_capacity(tokens.len());
    for token in tokens {
        let name = normalized_name(token, platform);
        if seen.contains(&name) {
            continue;
        }
        if let Some(carrier) = classify_name(&name, args) {
            let stricter = found
                .as_ref()
                .is_none_or(|current| carrier.kind > current.kind);
            if stricter {
                found = Some(carrier);
            }
        }
        seen.push(name);
    }
    found
}

fn classify_name(name: &str, args: &[String]) -> Option<Carrier> {
    let family = stem(name);
    if SHELLS.contains(&name) || SHELLS.contains(&family) {
        return Some(Carrier::code(format!("{name} runs shell code")));
    }
    if ALWAYS_CODE.contains(&name) || ALWAYS_CODE.contains(&family) {
        return Some(Carrier::code(format!(
            "{name} runs code or commands it is given"
        )));
    }
    if RUNNERS.contains(&name) || RUNNERS.contains(&family) {
        return Some(Carrier::exec(format!("{name} runs project-defined code")));
    }
    match family {
        "python" | "pypy" => interpreter(name, args, &PYTHON),
        "node" | "nodejs" => interpreter(name, args, &NODE),
        "perl" => interpreter(name, args, &PERL),
        "ruby" => interpreter(name, args, &RUBY),
        "php" => interpreter(name, args, &PHP),
        "sed" | "gsed" => sed(name, args),
        "find" | "gfind" => find(args),
        "tar" | "gtar" | "bsdtar" => tar(args),
        "git" => git(args),
        "ssh" => ssh(args),
        "scp" | "sftp" => scp(name, args),
        "rsync" => rsync(args),
        "zip" => args
            .iter()
            .any(|arg| {
                arg == "-T" || arg == "-TT" || arg.starts_with("--unzip-command") || arg == "--test"
            })
            .then(|| Carrier::exec("zip -T/-TT runs a test command")),
        "man" => args
            .iter()
            .any(|arg| {
                arg.starts_with("-P")
                    || arg.starts_with("--pager")
                    || arg.starts_with("-H")
                    || arg.starts_with("--html")
            })
            .then(|| Carrier::exec("man -P/-H runs a pager or browser it is given")),
        "busybox" | "toybox" => multiplexer(name, args),
        _ => None,
    }
}

/// How an interpreter's options read.
struct InterpreterSpec {
    /// Short letters that run code from the arguments (or load code: modules, libraries).
    code_letters: &'static str,
    /// Short letters whose value is the next word when they end a cluster.
    value_letters: &'static str,
    /// Short letters whose value is the script file.
    script_letters: &'static str,
    /// Short boolean letters that run no code; any other letter is not understood, so the
    /// invocation counts as a carrier rather than being guessed past.
    plain_letters: &'static str,
    /// Long options that neither run code nor take a value.
    safe_long: &'static [&'static str],
    /// Long options that take a value and do not run code.
    value_long: &'static [&'static str],
}

const PYTHON: InterpreterSpec = InterpreterSpec {
    code_letters: "cmi",
    value_letters: "WX",
    script_letters: "",
    plain_letters: "bBdEhIOPqRsSuvVx",
    safe_long: &["--version", "--help"],
    value_long: &["--check-hash-based-pycs"],
};

const NODE: InterpreterSpec = InterpreterSpec {
    code_letters: "epri",
    value_letters: "",
    script_letters: "",
    plain_letters: "vhc",
    safe_long: &["--version", "--help", "--check"],
    value_long: &[],
};

const PERL: InterpreterSpec = InterpreterSpec {
    code_letters: "eEMmdxS",
    value_letters: "I",
    script_letters: "",
    plain_letters: "acnpstTuUvwWXh0lFCDi",
    safe_long: &["--version", "--help"],
    value_long: &[],
};

const RUBY: InterpreterSpec = InterpreterSpec {
    code_letters: "erxS",
    value_letters: "ICE",
    script_letters: "",
    plain_letters: "acdlnpsvwWyhKTU0Fi",
    safe_long: &["--version", "--help", "--verbose", "--disable-gems"],
    value_long: &[],
};

const PHP: InterpreterSpec = InterpreterSpec {
    code_letters: "rBREFadczSi",
    value_letters: "t",
    script_letters: "f",
    plain_letters: "bhHilmnqsvw",
    safe_long: &["--version", "--help"],
    value_long: &[],
};

/// Informational invocations that run no program.
fn is_informational(args: &[String]) -> bool {
    matches!(args, [only] if matches!(only.as_str(), "--version" | "-V" | "--help" | "-h" | "-v"))
}

fn interpreter(name: &str, args: &[String], spec: &InterpreterSpec) -> Option<Carrier> {
    if is_informational(args) {
        return None;
    }
    let stdin = || {
        Some(Carrier::code(format!(
            "{name} reads its program from stdin"
        )))
    };
    let mut index = 0;
    let mut script = false;
    while let Some(word) = args.get(index) {
        index += 1;
        if word == "--" {
            script = args.get(index).is_some_and(|next| next != "-");
            break;
        }
        if word == "-" {
            return stdin();
        }
        if let Some(long) = word.strip_prefix("--") {
            let option = format!("--{}", long.split_once('=').map_or(long, |(name, _)| name));
            if spec.value_long.contains(&option.as_str()) {
                if !long.contains('=') {
                    index += 1;
                }
                continue;
            }
            if spec.safe_long.contains(&option.as_str()) {
                continue;
            }
            return Some(Carrier::code(format!(
                "{name} {option} may load or run code"
            )));
        }
        if let Some(cluster) = word.strip_prefix('-') {
            if let Some(letter) = cluster.chars().find(|c| spec.code_letters.contains(*c)) {
                return Some(Carrier::code(format!("{name} -{letter} runs inline code")));
            }
            let known = |c: char| {
                spec.value_letters.contains(c)
                    || spec.script_letters.contains(c)
                    || spec.plain_letters.contains(c)
            };
            if let Some(letter) = cluster.chars().find(|c| !known(*c)) {
                return Some(Carrier::code(format!(
                    "{name} option -{letter} is not understood"
                )));
            }
            for (offset, letter) in cluster.char_indices() {
                let at_end = offset + letter.len_utf8() == cluster.len();
                if spec.script_letters.contains(letter) {
                    script = true;
                    if at_end {
                        index += 1;
                    }
                    break;
                }
                if spec.value_letters.contains(letter) {
                    if at_end {
                        index += 1;
                    }
                    break;
                }
            }
            if script {
                break;
            }
            continue;
        }
        script = true;
        break;
    }
    if script { None } else { stdin() }
}

fn sed(name: &str, args: &[String]) -> Option<Carrier> {
    let mut scripts: Vec<&str> = Vec::new();
    let mut positional_script: Option<&str> = None;
    let mut index = 0;
    let unknown = |word: &str| {
        Some(Carrier::code(format!(
            "{name} option {word} is not understood"
        )))
    };
    while let Some(word) = args.get(index) {
        index += 1;
        if word == "--" {
            if scripts.is_empty() && positional_script.is_none() {
                positional_script = args.get(index).map(String::as_str);
            }
            break;
        }
        if let Some(long) = word.strip_prefix("--") {
            let (option, value) = match long.split_once('=') {
                Some((option, value)) => (option, Some(value)),
                None => (long, None),
            };
            match option {
                "expression" => match value {
                    Some(value) => scripts.push(value),
                    None => {
                        scripts.push(args.get(index).map_or("", String::as_str));
                        index += 1;
                    }
                },
                "file" => {
                    return Some(Carrier::code(format!(
                        "{name} --file reads a script from disk"
                    )));
                }
                "line-length" if value.is_none() => index += 1,
                "quiet" | "silent" | "regexp-extended" | "separate" | "unbuffered"
                | "null-data" | "posix" | "debug" | "sandbox" | "follow-symlinks" | "binary"
                | "in-place" | "line-length" => {}
                _ => return unknown(word),
            }
            continue;
        }
        if let Some(cluster) = word.strip_prefix('-').filter(|rest| !rest.is_empty()) {
            for (offset, letter) in cluster.char_indices() {
                let rest = &cluster[offset + letter.len_utf8()..];
                match letter {
                    'n' | 'E' | 'r' | 's' | 'u' | 'z' | 'b' => continue,
                    'i' => break,
                    'l' => {
                        if rest.is_empty() {
                            index += 1;
                        }
                        break;
                    }
                    'e' => {
                        if rest.is_empty() {
                            scripts.push(args.get(index).map_or("", String::as_str));
                            index += 1;
                        } else {
                            scripts.push(rest);
                        }
                        break;
                    }
                    'f' => {
                        return Some(Carrier::code(format!("{name} -f reads a script from disk")));
                    }
                    _ => return unknown(word),
                }
            }
            continue;
        }
        if scripts.is_empty() && positional_script.is_none() {
            positional_script = Some(word);
        }
    }
    if scripts.is_empty() {
        scripts.extend(positional_script);
    }
    scripts
        .iter()
        .find_map(|script| sed_script_problem(script).err())
        .map(|problem| Carrier::code(format!("{name} script {problem}")))
}

/// Walks a sed script's commands; `Err` for commands that run programs or write files, and
/// for anything this parser does not understand.
fn sed_script_problem(script: &str) -> Result<(), String> {
    let chars: Vec<char> = script.chars().collect();
    let mut at = 0;
    let skip_blank = |at: &mut usize| {
        while *at < chars.len() && (chars[*at].is_whitespace() || chars[*at] == ';') {
            *at += 1;
        }
    };
    let to_line_end = |at: &mut usize| {
        while *at < chars.len() && chars[*at] != '\n' {
            if chars[*at] == '\\' {
                *at += 1;
            }
            *at += 1;
        }
    };
    let to_label_end = |at: &mut usize| {
        while *at < chars.len() && !matches!(chars[*at], '\n' | ';' | '}') {
            *at += 1;
        }
    };
    // Reads a delimited part (`/re/`), handling backslash escapes; returns false if open.
    let delimited = |at: &mut usize, delim: char| -> bool {
        while *at < chars.len() {
            match chars[*at] {
                '\\' => *at += 2,
                c if c == delim => {
                    *at += 1;
                    return true;
                }
                '\n' => return false,
                _ => *at += 1,
            }
        }
        false
    };
    let address = |at: &mut usize| -> Result<(), String> {
        match chars.get(*at) {
            Some(c) if c.is_ascii_digit() => {
                while chars
                    .get(*at)
                    .is_some_and(|c| c.is_ascii_digit() || *c == '~')
                {
                    *at += 1;
                }
            }
            Some('$') => *at += 1,
            Some('/') => {
                *at += 1;
                if !delimited(at, '/') {
                    return Err("has an unterminated address".into());
                }
                while chars.get(*at).is_some_and(|c| matches!(c, 'I' | 'M')) {
                    *at += 1;
                }
            }
            Some('\\') => {
                let Some(&delim) = chars.get(*at + 1) else {
                    return Err("has an unterminated address".into());
                };
                *at += 2;
                if !delimited(at, delim) {
                    return Err("has an unterminated address".into());
                }
            }
            _ => {}
        }
        Ok(())
    };
    loop {
        skip_blank(&mut at);
        let Some(&first) = chars.get(at) else {
            return Ok(());
        };
        if first == '#' {
            to_line_end(&mut at);
            continue;
        }
        address(&mut at)?;
        if chars.get(at) == Some(&',') {
            at += 1;
            if chars.get(at) == Some(&'+') {
                at += 1;
            }
            address(&mut at)?;
        }
        while chars
            .get(at)
            .is_some_and(|c| *c == ' ' || *c == '\t' || *c == '!')
        {
            at += 1;
        }
        let Some(&command) = chars.get(at) else {
            return Err("ends after an address".into());
        };
        at += 1;
        match command {
            '{' | '}' => {}
            'e' => return Err("runs a command (e)".into()),
            'w' | 'W' => return Err(format!("writes a file ({command})")),
            ':' | 'b' | 't' | 'T' | 'v' => to_label_end(&mut at),
            'a' | 'i' | 'c' | 'r' | 'R' => to_line_end(&mut at),
            'q' | 'Q' | 'l' | 'L' => {
                while chars
                    .get(at)
                    .is_some_and(|c| c.is_ascii_digit() || *c == ' ')
                {
                    at += 1;
                }
            }
            '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x' | 'z' | 'F' => {}
            's' | 'y' => {
                let Some(&delim) = chars.get(at) else {
                    return Err(format!("has an unterminated {command} command"));
                };
                if delim == '\n' || delim == '\\' {
                    return Err(format!("has an unusual {command} delimiter"));
                }
                at += 1;
                if !delimited(&mut at, delim) || !delimited(&mut at, delim) {
                    return Err(format!("has an unterminated {command} command"));
                }
                if command == 's' {
                    while let Some(&flag) = chars.get(at) {
                        match flag {
                            'e' => return Err("runs the pattern space as a command (s///e)".into()),
                            'w' | 'W' => return Err("writes a file (s///w)".into()),
                            'g' | 'p' | 'i' | 'I' | 'm' | 'M' => at += 1,
                            c if c.is_ascii_digit() => at += 1,
                            _ => break,
                        }
                    }
                }
            }
            other => return Err(format!("uses a command this check does not know ({other})")),
        }
    }
}

fn find(args: &[String]) -> Option<Carrier> {
    args.iter()
        .find(|arg| FIND_ACTIONS.contains(&arg.as_str()))
        .map(|action| Carrier::exec(format!("find {action} runs commands or changes files")))
}

/// True when `word` is `option`, `option=…`, or a GNU abbreviation of it (3+ letters).
fn long_option_matches(word: &str, option: &str) -> bool {
    let given = word.split_once('=').map_or(word, |(name, _)| name);
    given.len() >= 5 && option.starts_with(given)
}

fn tar(args: &[String]) -> Option<Carrier> {
    for (position, arg) in args.iter().enumerate() {
        if arg == "--" {
            break;
        }
        if arg.starts_with("--") {
            if let Some(option) = TAR_DANGEROUS_LONG
                .iter()
                .find(|option| long_option_matches(arg, option))
            {
                return Some(Carrier::exec(format!("tar {option} runs a program")));
            }
            continue;
        }
        // Short clusters, and the old-style first word (`tar xIf …`).
        let cluster = match arg.strip_prefix('-') {
            Some(cluster) => Some(cluster),
            None if position == 0 => Some(arg.as_str()),
            None => None,
        };
        if cluster.is_some_and(|cluster| cluster.contains(['I', 'F'])) {
            return Some(Carrier::exec("tar -I/-F runs a program"));
        }
    }
    None
}

fn git(args: &[String]) -> Option<Carrier> {
    let mut index = 0;
    while let Some(word) = args.get(index) {
        if !word.starts_with('-') {
            break;
        }
        if !GIT_SAFE_GLOBALS.contains(&word.as_str()) {
            return Some(Carrier::exec(format!(
                "git {word} can change which programs git runs"
            )));
        }
        index += 1;
    }
    let subcommand = args.get(index)?;
    if !GIT_SUBCOMMANDS.contains(&subcommand.as_str()) {
        return Some(Carrier::exec(format!(
            "git {subcommand} is not a known safe subcommand (it may be an alias)"
        )));
    }
    let rest = &args[index + 1..];
    for arg in rest {
        if arg == "--" {
            break;
        }
        if let Some(option) = GIT_DANGEROUS_LONG.iter().find(|option| {
            arg == *option
                || arg.starts_with(&format!("{option}="))
                || arg.starts_with(&format!("{option}-"))
        }) {
            return Some(Carrier::exec(format!(
                "git {subcommand} {option} runs a program"
            )));
        }
        let short_danger = match subcommand.as_str() {
            "fetch" | "pull" | "clone" | "ls-remote" | "archive" => {
                arg.starts_with("-u") && !arg.starts_with("--")
            }
            "grep" => arg.starts_with("-O"),
            _ => false,
        } || (subcommand == "clone" && arg == "-c");
        if short_danger {
            return Some(Carrier::exec(format!(
                "git {subcommand} {arg} runs a program"
            )));
        }
    }
    None
}

fn ssh(args: &[String]) -> Option<Carrier> {
    const VALUED: &str = "BbcDEeFIiJLlmOoPpQRSWw";
    let mut index = 0;
    while let Some(word) = args.get(index) {
        index += 1;
        if word == "--" {
            break;
        }
        let Some(cluster) = word.strip_prefix('-').filter(|rest| !rest.is_empty()) else {
            index -= 1;
            break;
        };
        for (offset, letter) in cluster.char_indices() {
            if matches!(letter, 'o' | 'F') {
                return Some(Carrier::code(format!(
                    "ssh -{letter} can name a local command (ProxyCommand, LocalCommand)"
                )));
            }
            if VALUED.contains(letter) {
                if offset + letter.len_utf8() == cluster.len() {
                    index += 1;
                }
                break;
            }
        }
    }
    // The destination, then anything after it is a remote command.
    (args.len() > index + 1).then(|| Carrier::code("ssh runs a remote command"))
}

fn scp(name: &str, args: &[String]) -> Option<Carrier> {
    args.iter()
        .take_while(|arg| *arg != "--")
        .find(|arg| {
            arg.strip_prefix('-').is_some_and(|cluster| {
                !cluster.starts_with('-') && cluster.contains(['S', 'o', 'F', 'D', 'b'])
            })
        })
        .map(|arg| Carrier::code(format!("{name} {arg} can run a program")))
}

fn rsync(args: &[String]) -> Option<Carrier> {
    args.iter()
        .take_while(|arg| *arg != "--")
        .find(|arg| {
            if arg.starts_with("--") {
                long_option_matches(arg, "--rsh") || long_option_matches(arg, "--rsync-path")
            } else {
                arg.strip_prefix('-')
                    .is_some_and(|cluster| cluster.contains('e'))
            }
        })
        .map(|arg| Carrier::code(format!("rsync {arg} runs a program")))
}

fn multiplexer(name: &str, args: &[String]) -> Option<Carrier> {
    let applet = args.first()?;
    let applet_name = applet.to_ascii_lowercase();
    if applet_name.starts_with('-') {
        return Some(Carrier::exec(format!("{name} {applet}")));
    }
    if WRAPPER_APPLETS.contains(&applet_name.as_str()) {
        return Some(Carrier::code(format!(
            "{name} {applet_name} runs another command"
        )));
    }
    if let Some(inner) = classify_name(&applet_name, &args[1..]) {
        return Some(Carrier::code(format!(
            "{name} {applet_name}: {}",
            inner.reason
        )));
    }
    Some(Carrier::exec(format!(
        "{name} applets run only as exact commands"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn carrier(tokens: &[&str], args: &[&str]) -> Option<CarrierKind> {
        let args: Vec<String> = args.iter().map(|arg| (*arg).to_owned()).collect();
        classify_carrier(tokens, &args, Platform::Linux).map(|carrier| carrier.kind)
    }

    #[test]
    fn every_shell_invocation_is_a_code_carrier() {
        for shell in [
            "sh",
            "bash",
            "/bin/zsh",
            "dash",
            "ksh",
            "fish",
            "/usr/bin/bash5.2",
        ] {
            assert_eq!(
                carrier(&[shell], &["-c", "id"]),
                Some(CarrierKind::Code),
                "{shell}"
            );
            assert_eq!(
                carrier(&[shell], &["script.sh"]),
                Some(CarrierKind::Code),
                "{shell}"
            );
            assert_eq!(carrier(&[shell], &[]), Some(CarrierKind::Code), "{shell}");
        }
    }

    #[test]
    fn a_symlink_name_does_not_hide_the_real_binary() {
        assert_eq!(
            carrier(
                &["harmless", "/home/me/bin/harmless", "/usr/bin/bash"],
                &["-c", "id"]
            ),
            Some(CarrierKind::Code)
        );
    }

    #[test]
    fn python_inline_code_modules_and_stdin_are_carriers_but_a_script_is_not() {
        for args in [
            &["-c", "print(1)"][..],
            &["-uc", "print(1)"],
            &["-m", "http.server"],
            &["-"],
            &[],
            &["-i", "x.py"],
            &["-W", "ignore"],
            &["--some-new-flag", "x.py"],
        ] {
            assert_eq!(
                carrier(&["python3.12"], args),
                Some(CarrierKind::Code),
                "{args:?}"
            );
        }
        assert_eq!(carrier(&["python3"], &["script.py", "-c", "x"]), None);
        assert_eq!(carrier(&["python3"], &["-W", "ignore", "script.py"]), None);
        assert_eq!(carrier(&["python3"], &["--version"]), None);
        assert_eq!(
            carrier(&["python3"], &["-n", "x.py"]),
            Some(CarrierKind::Code)
        );
        assert_eq!(carrier(&["python3"], &["-u", "x.py"]), None);
    }

    #[test]
    fn node_perl_ruby_and_php_inline_flags_are_carriers() {
        assert_eq!(carrier(&["node"], &["-e", "1"]), Some(CarrierKind::Code));
        assert_eq!(carrier(&["node"], &["-p", "1"]), Some(CarrierKind::Code));
        assert_eq!(carrier(&["node"], &["--eval=1"]), Some(CarrierKind::Code));
        assert_eq!(
            carrier(&["node"], &["--require", "x", "a.js"]),
            Some(CarrierKind::Code)
        );
        assert_eq!(carrier(&["node"], &["app.js"]), None);
        assert_eq!(carrier(&["perl"], &["-e", "1"]), Some(CarrierKind::Code));
        assert_eq!(
            carrier(&["perl"], &["-lne", "print"]),
            Some(CarrierKind::Code)
        );
        assert_eq!(
            carrier(&["perl"], &["-E", "say 1"]),
            Some(CarrierKind::Code)
        );
        assert_eq!(
            carrier(&["perl"], &["-Mstrict;system(1)", "x.pl"]),
            Some(CarrierKind::Code)
        );
        assert_eq!(carrier(&["perl"], &["x.pl"]), None);
        assert_eq!(carrier(&["ruby"], &["-e", "1"]), Some(CarrierKind::Code));
        assert_eq!(carrier(&["ruby"], &["x.rb"]), None);
        assert_eq!(carrier(&["php"], &["-r", "1;"]), Some(CarrierKind::Code));
        assert_eq!(
            carrier(&["php"], &["-d", "auto_prepend_file=x", "a.php"]),
            Some(CarrierKind::Code)
        );
        assert_eq!(carrier(&["php"], &["-f", "a.php"]), None);
        assert_eq!(carrier(&["php"], &["a.php"]), None);
    }

    #[test]
    fn awk_is_always_a_carrier() {
        for name in ["awk", "gawk", "mawk", "nawk"] {
            assert_eq!(carrier(&[name], &["{print $1}"]), Some(CarrierKind::Code));
            assert_eq!(
                carrier(&[name], &["BEGIN { system(\"id\") }"]),
                Some(CarrierKind::Code)
            );
        }
    }

    #[test]
    fn sed_e_and_w_commands_and_flags_are_carriers_and_plain_edits_are_not() {
        for args in [
            &["e"][..],
            &["1e id"],
            &["s/x/id/e"],
            &["s|x|y|gw /tmp/out"],
            &["w /tmp/out"],
            &["-n", "-e", "p", "-e", "e id"],
            &["--expression=s/a/b/e"],
            &["-f", "script.sed"],
            &["-nf", "script.sed"],
            &["/x/ { e id\n}"],
            &["$!W out"],
            &["--bogus", "p"],
            &["s/a/b"],
        ] {
            assert_eq!(carrier(&["sed"], args), Some(CarrierKind::Code), "{args:?}");
        }
        for args in [
            &["s/hello/world/g"][..],
            &["-n", "1,5p"],
            &["-E", "s/(a|b)+/x/2", "file.txt"],
            &["-i.bak", "s/\\/old/\\/new/", "f"],
            &["/start/,/end/d"],
            &["y/abc/xyz/"],
            &["1!G;h;$!d"],
            &["-e", "s/a/b/", "-e", "s/c/d/"],
            &["a\\appended text with w and e"],
            &[":a;N;$!ba;s/\\n/ /g"],
        ] {
            assert_eq!(carrier(&["gsed"], args), None, "{args:?}");
        }
    }

    #[test]
    fn find_carries_only_with_exec_or_write_actions() {
        assert_eq!(
            carrier(&["find"], &[".", "-exec", "sh", ";"]),
            Some(CarrierKind::Exec)
        );
        assert_eq!(
            carrier(&["find"], &[".", "-okdir", "rm", "{}", "+"]),
            Some(CarrierKind::Exec)
        );
        assert_eq!(
            carrier(&["find"], &[".", "-delete"]),
            Some(CarrierKind::Exec)
        );
        assert_eq!(
            carrier(&["find"], &[".", "-fprint", "/tmp/x"]),
            Some(CarrierKind::Exec)
        );
        assert_eq!(carrier(&["find"], &[".", "-name", "*.rs"]), None);
    }

    #[test]
    fn tar_program_options_carry_even_abbreviated() {
        for args in [
            &["--to-command=sh", "-xf", "a.tar"][..],
            &["--to-comm=sh", "-xf", "a.tar"],
            &["--checkpoint-action=exec=sh", "-cf", "a.tar", "."],
            &["--use-compress-program", "sh", "-xf", "a"],
            &["-I", "sh", "-xf", "a.tar"],
            &["-xIsh", "a.tar"],
            &["xIf", "sh", "a.tar"],
            &["-F", "sh", "-cf", "a"],
        ] {
            assert_eq!(carrier(&["tar"], args), Some(CarrierKind::Exec), "{args:?}");
        }
        assert_eq!(carrier(&["tar"], &["-xzf", "a.tar.gz"]), None);
        assert_eq!(carrier(&["tar"], &["--totals", "-cf", "a.tar", "."]), None);
    }

    #[test]
    fn git_config_aliases_and_program_options_carry() {
        for args in [
            &["-c", "core.pager=sh", "log"][..],
            &["--config-env=core.pager=X", "log"],
            &["-C", "/tmp/repo", "status"],
            &["--exec-path=/tmp", "status"],
            &["pwn"],
            &["config", "core.pager", "sh"],
            &["rebase", "-x", "sh"],
            &["submodule", "foreach", "sh"],
            &["fetch", "--upload-pack=sh", "origin"],
            &["clone", "-u", "sh", "x"],
            &["push", "--receive-pack", "sh"],
            &["diff", "--ext-diff"],
            &["grep", "-Osh", "x"],
            &["clone", "--template=/tmp/t", "x"],
        ] {
            assert_eq!(carrier(&["git"], args), Some(CarrierKind::Exec), "{args:?}");
        }
        for args in [
            &["status"][..],
            &["--no-pager", "log", "--oneline"],
            &["diff", "--stat"],
            &["push", "-u", "origin", "main"],
            &["add", "-u"],
            &[],
        ] {
            assert_eq!(carrier(&["git"], args), None, "{args:?}");
        }
    }

    #[test]
    fn ssh_with_a_remote_command_or_proxy_options_carries() {
        assert_eq!(carrier(&["ssh"], &["host", "id"]), Some(CarrierKind::Code));
        assert_eq!(
            carrier(&["ssh"], &["-p", "22", "host", "id"]),
            Some(CarrierKind::Code)
        );
        assert_eq!(
            carrier(&["ssh"], &["-oProxyCommand=sh", "host"]),
            Some(CarrierKind::Code)
        );
        assert_eq!(
            carrier(&["ssh"], &["-F", "cfg", "host"]),
            Some(CarrierKind::Code)
        );
        assert_eq!(carrier(&["ssh"], &["-p", "22", "host"]), None);
        assert_eq!(
            carrier(&["scp"], &["-S", "sh", "a", "b:"]),
            Some(CarrierKind::Code)
        );
        assert_eq!(
            carrier(&["rsync"], &["-avze", "sh", "a", "b:"]),
            Some(CarrierKind::Code)
        );
        assert_eq!(
            carrier(&["rsync"], &["--rsh=sh", "a", "b:"]),
            Some(CarrierKind::Code)
        );
        assert_eq!(carrier(&["rsync"], &["-av", "a", "b"]), None);
    }

    #[test]
    fn runners_multiplexers_and_xargs_carry() {
        assert_eq!(carrier(&["xargs"], &["rm"]), Some(CarrierKind::Code));
        assert_eq!(carrier(&["tmux"], &["new", "sh"]), Some(CarrierKind::Code));
        assert_eq!(
            carrier(&["screen"], &["-dm", "sh"]),
            Some(CarrierKind::Code)
        );
        assert_eq!(carrier(&["make"], &[]), Some(CarrierKind::Exec));
        assert_eq!(carrier(&["gmake"], &["test"]), Some(CarrierKind::Exec));
        assert_eq!(carrier(&["cargo"], &["build"]), Some(CarrierKind::Exec));
        assert_eq!(carrier(&["watch"], &["id"]), Some(CarrierKind::Code));
        assert_eq!(carrier(&["."], &["./x.sh"]), Some(CarrierKind::Code));
        assert_eq!(carrier(&["trap"], &["id", "EXIT"]), Some(CarrierKind::Code));
        assert_eq!(
            carrier(&["busybox"], &["sh", "-c", "id"]),
            Some(CarrierKind::Code)
        );
        assert_eq!(
            carrier(&["toybox"], &["xargs", "rm"]),
            Some(CarrierKind::Code)
        );
        assert_eq!(
            carrier(&["busybox"], &["env", "sh"]),
            Some(CarrierKind::Code)
        );
        assert_eq!(carrier(&["busybox"], &["ls"]), Some(CarrierKind::Exec));
        assert_eq!(carrier(&["rg"], &["-n", "x"]), None);
        assert_eq!(carrier(&["head"], &["-n", "5"]), None);
    }
}
