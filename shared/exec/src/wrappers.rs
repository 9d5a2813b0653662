//! Dispatch wrappers (spec §7.4): `env rg`, `nice -n 5 rg`, `timeout 10 rg` run `rg`, so
//! the policy judges `rg`. This module finds the command inside such wrappers and blocks
//! the ones the policy cannot see through.
//!
//! Each wrapper's options are read with OpenClaw's grammar, no wider and no narrower, so a
//! wrapped command is judged exactly where OpenClaw judges it:
//! - `env`: only `env [--|-] command` is transparent; any option or `NAME=value` is a
//!   modifier and blocks;
//! - `nice`: `-N`, `-nN`, `-n N`, `--adjustment[=]N`, `--priority[=]N`;
//! - `nohup`: `--help`, `--version`;
//! - `stdbuf`: `-i`/`-o`/`-e` and `--input`/`--output`/`--error`, each with `=VALUE` or the
//!   value as the next word (`-oL` is not understood and blocks);
//! - `timeout`: `--foreground`, `--preserve-status`, `-v`, `--verbose`, `-k`/`--kill-after`
//!   and `-s`/`--signal` with `=VALUE` or a next-word value, then the duration;
//! - `time`: `-a -h -l -p -q -v -V` and their long forms, `-f`/`--format` and `-o`/`--output`
//!   with a value;
//! - `caffeinate` (`-d -i -m -s -u`, `-t`/`-w` with a value) and `sandbox-exec` (`-f -p -d`
//!   with a value) on every platform;
//! - on macOS (and other BSDs for `script`) only: `arch` (`-32 -64`, `-arch NAME`, known
//!   architecture selectors), `xcrun` (`-k -l -n -r -v` and long forms) and
//!   `script [options] transcript command…`; elsewhere these three are blocked.
//!
//! `--` ends a wrapper's options (and `-` for `env`); empty words are skipped. A wrapper with
//! an option it does not understand, a missing option value, or no command after it blocks
//! the segment, as do wrappers nested deeper than [`MAX_WRAPPER_DEPTH`].
//!
//! Dropping a wrapper is safe because an allowed command runs rebuilt from its resolved
//! argv, without the wrappers (§7.6): whatever a wrapper was, only the command it wrapped
//! (the one the policy judged) runs.
//!
//! Policy-blocked (the segment is never allowlist-satisfied, whatever the allowlist says):
//! `sudo doas chrt ionice setsid taskset` as the spec lists, plus [`PRIVILEGE_WRAPPERS`]
//! `su pkexec runuser`, which OpenClaw judges as plain binaries. clawless is stricter there
//! (deviation `privilege-wrapper`): they run a command as another user, so an entry for them
//! would be an entry for every command as root.

use super::Platform;
use super::resolve::base_name;

/// Most dispatch wrappers unwrapped around one command (deeper nesting is blocked).
pub const MAX_WRAPPER_DEPTH: usize = 4;

/// Wrappers that change who or how a command runs in ways the policy cannot follow.
pub const BLOCKED_WRAPPERS: &[&str] = &[
    "sudo", "doas", "chrt", "ionice", "setsid", "taskset", "su", "pkexec", "runuser",
];

/// The blocked wrappers OpenClaw does not block (it judges them as plain binaries).
pub const PRIVILEGE_WRAPPERS: &[&str] = &["su", "pkexec", "runuser"];

/// Every dispatch wrapper this module looks through (on some platform). A node reports where
/// these resolve, so a pre-check can judge wrapped commands as the node would.
pub const DISPATCH_WRAPPERS: &[&str] = &[
    "env",
    "nohup",
    "nice",
    "stdbuf",
    "timeout",
    "time",
    "caffeinate",
    "sandbox-exec",
    "arch",
    "script",
    "xcrun",
];

/// The command inside a segment's dispatch wrappers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchPlan {
    /// Index in argv of the command the policy judges (the blocking wrapper when blocked).
    pub command_index: usize,
    /// Indices in argv of the wrappers unwrapped, outermost first.
    pub wrapper_indices: Vec<usize>,
    /// Why the segment can never be allowlist-satisfied, if it cannot.
    pub policy_blocked: Option<String>,
}

/// A command name as the policy compares it: the base name, lowercased, and on Windows
/// without an executable extension.
pub fn normalized_name(token: &str, platform: Platform) -> String {
    let mut name = base_name(token).to_ascii_lowercase();
    if platform.is_windows() {
        for ext in [".exe", ".com", ".cmd", ".bat"] {
            if let Some(stem) = name.strip_suffix(ext) {
                name = stem.to_owned();
                break;
            }
        }
    }
    name
}

/// True when `word` has the shape of a shell assignment (`NAME=value`).
pub(crate) fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// One wrapper's reading of the words after it.
enum Step {
    /// The wrapped command starts at this index.
    Command(usize),
    /// The policy cannot see through this invocation.
    Blocked(String),
    /// Not a dispatch wrapper.
    NotWrapper,
}

/// Unwraps the dispatch wrappers at the start of `argv`.
pub fn unwrap_dispatch(argv: &[String], platform: Platform) -> DispatchPlan {
    let mut plan = DispatchPlan {
        command_index: 0,
        wrapper_indices: Vec::new(),
        policy_blocked: None,
    };
    let mut index = 0;
    while let Some(token) = argv.get(index) {
        let name = normalized_name(token.trim(), platform);
        let blocked = |reason: String| DispatchPlan {
            command_index: index,
            wrapper_indices: plan.wrapper_indices.clone(),
            policy_blocked: Some(reason),
        };
        if BLOCKED_WRAPPERS.contains(&name.as_str()) {
            return blocked(format!("`{name}` is policy-blocked"));
        }
        match step(&name, argv, index, platform) {
            Step::NotWrapper => break,
            Step::Blocked(reason) => return blocked(reason),
            Step::Command(_) if plan.wrapper_indices.len() == MAX_WRAPPER_DEPTH => {
                return blocked(format!(
                    "more than {MAX_WRAPPER_DEPTH} nested dispatch wrappers"
                ));
            }
            Step::Command(next) => {
                plan.wrapper_indices.push(index);
                index = next;
            }
        }
    }
    plan.command_index = index.min(argv.len().saturating_sub(1));
    plan
}

/// How a wrapper reads one of its option words.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Token {
    /// An option on its own: read on.
    Flag,
    /// An option whose value is the next word.
    TakesValue,
    /// Not an option: the wrapper's operands start here.
    Operand,
    /// Not understood: the segment is blocked.
    Unknown,
}

/// Reads a wrapper's options from `at + 1`: empty words are skipped, a word in `separators`
/// ends the options (and is consumed). The index where the options end, or why the wrapper
/// cannot be read.
fn scan_options(
    argv: &[String], at: usize, separators: &[&str], read: impl Fn(&str, &str) -> Token,
) -> Result<usize, String> {
    let mut index = at + 1;
    let mut value_expected = false;
    while let Some(word) = argv.get(index) {
        let word = word.trim();
        if word.is_empty() {
            index += 1;
            continue;
        }
        if value_expected {
            value_expected = false;
            index += 1;
            continue;
        }
        if separators.contains(&word) {
            index += 1;
            break;
        }
        match read(word, &word.to_lowercase()) {
            Token::Operand => break,
            Token::Unknown => return Err(format!("unknown wrapper option `{word}`")),
            Token::TakesValue => value_expected = true,
            Token::Flag => {}
        }
        index += 1;
    }
    if value_expected {
        return Err("a wrapper option is missing its value".into());
    }
    Ok(index)
}

/// The option's name: the word up to `=`.
fn flag_of(lower: &str) -> &str {
    lower.split_once('=').map_or(lower, |(flag, _)| flag)
}

/// A value option: `--x=V` is one word, `--x V` two.
fn valued(lower: &str) -> Token {
    if lower.contains('=') {
        Token::Flag
    } else {
        Token::TakesValue
    }
}

/// The common reading: a word not starting with `-` (or exactly `-`) is the command; any
/// other word is read by `read` from its option name and its lowercased text.
fn dashed(read: impl Fn(&str, &str) -> Token) -> impl Fn(&str, &str) -> Token {
    move |word: &str, lower: &str| {
        if !word.starts_with('-') || word == "-" {
            Token::Operand
        } else {
            read(flag_of(lower), lower)
        }
    }
}

/// The command at `index`, or blocked when there is none.
fn command_at(argv: &[String], index: usize, wrapper: &str) -> Step {
    if index < argv.len() {
        Step::Command(index)
    } else {
        Step::Blocked(format!("`{wrapper}` with no command"))
    }
}

fn step(name: &str, argv: &[String], at: usize, platform: Platform) -> Step {
    let macos = matches!(platform, Platform::Darwin);
    let result = match name {
        "env" => return env_step(argv, at),
        "nice" => scan_options(
            argv,
            at,
            &["--"],
            dashed(|flag, lower| {
                if lower.len() > 1 && lower[1..].bytes().all(|c| c.is_ascii_digit()) {
                    Token::Flag
                } else if matches!(flag, "-n" | "--adjustment" | "--priority") {
                    valued(lower)
                } else if lower.starts_with("-n") && lower.len() > 2 {
                    Token::Flag
                } else {
                    Token::Unknown
                }
            }),
        ),
        "nohup" => scan_options(
            argv,
            at,
            &["--"],
            dashed(|_, lower| match lower {
                "--help" | "--version" => Token::Flag,
                _ => Token::Unknown,
            }),
        ),
        "stdbuf" => scan_options(
            argv,
            at,
            &["--"],
            dashed(|flag, lower| match flag {
                "-i" | "--input" | "-o" | "--output" | "-e" | "--error" => valued(lower),
                _ => Token::Unknown,
            }),
        ),
        "timeout" => {
            return match scan_options(
                argv,
                at,
                &["--"],
                dashed(|flag, lower| match flag {
                    "--foreground" | "--preserve-status" | "-v" | "--verbose" => Token::Flag,
                    "-k" | "--kill-after" | "-s" | "--signal" => valued(lower),
                    _ => Token::Unknown,
                }),
            ) {
                // The duration comes before the command.
                Ok(index) if index + 1 < argv.len() => Step::Command(index + 1),
                Ok(_) => Step::Blocked("`timeout` with no command".into()),
                Err(reason) => Step::Blocked(reason),
            };
        }
        "time" => scan_options(
            argv,
            at,
            &["--"],
            dashed(|flag, lower| match flag {
                "-a" | "--append" | "-h" | "--help" | "-l" | "-p" | "-q" | "--quiet" | "-v"
                | "--verbose" | "--version" => Token::Flag,
                "-f" | "--format" | "-o" | "--output" => valued(lower),
                _ => Token::Unknown,
            }),
        ),
        "caffeinate" => scan_options(
            argv,
            at,
            &["--"],
            dashed(|flag, lower| match flag {
                "-d" | "-i" | "-m" | "-s" | "-u" => Token::Flag,
                "-t" | "-w" => valued(lower),
                _ => Token::Unknown,
            }),
        ),
        "sandbox-exec" => scan_options(
            argv,
            at,
            &["--"],
            dashed(|flag, lower| match flag {
                "-f" | "-p" | "-d" => valued(lower),
                _ => Token::Unknown,
            }),
        ),
        "arch" if !macos => return Step::Blocked("`arch` runs no command here".into()),
        "arch" => scan_options(argv, at, &[], |word, lower| {
            if !word.starts_with('-') || word == "-" {
                return Token::Operand;
            }
            match lower {
                "-32" | "-64" | "-arm64" | "-arm64e" | "-i386" | "-x86_64" | "-x86_64h" => {
                    Token::Flag
                }
                "-arch" => Token::TakesValue,
                _ => Token::Unknown,
            }
        }),
        "xcrun" if !macos => return Step::Blocked("`xcrun` runs no command here".into()),
        "xcrun" => scan_options(argv, at, &[], |word, lower| {
            if !word.starts_with('-') || word == "-" {
                return Token::Operand;
            }
            match lower {
                "-k" | "--kill-cache" | "-l" | "--log" | "-n" | "--no-cache" | "-r" | "--run"
                | "-v" | "--verbose" => Token::Flag,
                _ => Token::Unknown,
            }
        }),
        "script" => return script_step(argv, at, platform),
        _ => return Step::NotWrapper,
    };
    match result {
        Ok(index) => command_at(argv, index, name),
        Err(reason) => Step::Blocked(reason),
    }
}

/// `env` is transparent only without modifiers: `env [--|-] command`.
fn env_step(argv: &[String], at: usize) -> Step {
    let mut index = at + 1;
    while let Some(word) = argv.get(index) {
        let word = word.trim();
        if word.is_empty() {
            index += 1;
            continue;
        }
        if word == "--" || word == "-" {
            return command_at(argv, index + 1, "env");
        }
        if is_assignment(word) {
            return Step::Blocked(format!("`env` with assignment `{word}`"));
        }
        if word.starts_with('-') {
            return Step::Blocked(format!("`env` with modifier `{word}`"));
        }
        return Step::Command(index);
    }
    Step::Blocked("`env` with no command".into())
}

/// BSD `script [-adkpqr] [-F pipe] [-t time] transcript command…`; elsewhere (`script -c`)
/// it is blocked.
fn script_step(argv: &[String], at: usize, platform: Platform) -> Step {
    if !matches!(platform, Platform::Darwin | Platform::Other) {
        return Step::Blocked("`script` runs a shell here".into());
    }
    let options = scan_options(argv, at, &["--"], |word, lower| {
        if !lower.starts_with('-') || lower == "-" {
            return Token::Operand;
        }
        match flag_of(word) {
            "-F" | "-t" => valued(word),
            "-a" | "-d" | "-k" | "-p" | "-q" | "-r" => Token::Flag,
            _ => Token::Unknown,
        }
    });
    let index = match options {
        Ok(index) => index,
        Err(reason) => return Step::Blocked(reason),
    };
    // The transcript file, then the command.
    let mut words = (index..argv.len()).filter(|at| !argv[*at].trim().is_empty());
    match (words.next(), words.next()) {
        (Some(_), Some(command)) => Step::Command(command),
        _ => Step::Blocked("`script` with no command".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|word| (*word).to_owned()).collect()
    }

    fn on(platform: Platform, words: &[&str]) -> (Vec<String>, Option<String>) {
        let argv = argv(words);
        let plan = unwrap_dispatch(&argv, platform);
        (argv[plan.command_index..].to_vec(), plan.policy_blocked)
    }

    fn effective(words: &[&str]) -> (Vec<String>, Option<String>) {
        on(Platform::Linux, words)
    }

    #[test]
    fn every_listed_dispatch_wrapper_is_looked_through() {
        for name in DISPATCH_WRAPPERS {
            let words = argv(&[name, "5", "file", "rg"]);
            assert!(
                !matches!(step(name, &words, 0, Platform::Darwin), Step::NotWrapper),
                "{name}"
            );
        }
        let words = argv(&["rg", "x"]);
        assert!(matches!(
            step("rg", &words, 0, Platform::Darwin),
            Step::NotWrapper
        ));
    }

    #[test]
    fn env_without_modifiers_is_unwrapped() {
        assert_eq!(
            effective(&["env", "rg", "-n", "x"]).0,
            argv(&["rg", "-n", "x"])
        );
        assert_eq!(effective(&["/usr/bin/env", "--", "rg"]).0, argv(&["rg"]));
        assert_eq!(effective(&["env", "-", "rg"]).0, argv(&["rg"]));
        assert_eq!(effective(&["env", "", "rg"]).0, argv(&["rg"]));
    }

    #[test]
    fn env_split_string_from_the_spec_is_policy_blocked() {
        let (rest, blocked) = effective(&["env", "-S", "sh -c \"echo pwned\"", "tr"]);
        assert!(blocked.is_some());
        assert_eq!(rest[0], "env");
    }

    #[test]
    fn env_with_options_or_assignments_is_blocked() {
        for words in [
            &["env", "-i", "rg"][..],
            &["env", "-u", "HOME", "rg"],
            &["env", "LD_PRELOAD=/tmp/x.so", "head"],
            &["env", "--split-string=sh -c id"],
        ] {
            assert!(effective(words).1.is_some(), "{words:?}");
        }
    }

    #[test]
    fn words_after_env_that_are_not_assignments_are_the_command() {
        // As in OpenClaw: after `--`, or for a word that is not NAME=value, env's command
        // starts there. The policy then judges that word, which names no file.
        let (rest, blocked) = effective(&["env", "--", "PAGER=sh", "git", "log"]);
        assert_eq!(blocked, None);
        assert_eq!(rest[0], "PAGER=sh");
        let (rest, blocked) = effective(&["env", "core.pager=sh", "git", "log"]);
        assert_eq!(blocked, None);
        assert_eq!(rest[0], "core.pager=sh");
    }

    #[test]
    fn a_leading_assignment_word_is_the_executable_as_in_the_spec() {
        let (rest, blocked) = effective(&["LD_PRELOAD=/tmp/x.so", "head"]);
        assert_eq!(blocked, None);
        assert_eq!(rest[0], "LD_PRELOAD=/tmp/x.so");
        let (rest, blocked) = effective(&["nice", "FOO=1", "head"]);
        assert_eq!(blocked, None);
        assert_eq!(rest[0], "FOO=1");
    }

    #[test]
    fn the_spec_blocklist_is_blocked_even_inside_transparent_wrappers() {
        for name in ["sudo", "doas", "chrt", "ionice", "setsid", "taskset"] {
            let (rest, blocked) = effective(&["nice", name, "rg"]);
            assert!(blocked.is_some(), "{name}");
            assert_eq!(rest[0], name);
        }
    }

    #[test]
    fn privilege_wrappers_are_blocked_too() {
        for name in PRIVILEGE_WRAPPERS {
            let (rest, blocked) = effective(&[name, "-c", "rg"]);
            assert!(blocked.is_some(), "{name}");
            assert_eq!(rest[0], *name);
        }
    }

    #[test]
    fn each_transparent_wrapper_reads_the_option_forms_openclaw_reads() {
        let cases: &[(&[&str], &str)] = &[
            (&["nice", "-n", "5", "rg"], "rg"),
            (&["nice", "-n5", "rg"], "rg"),
            (&["nice", "-10", "rg"], "rg"),
            (&["nice", "--adjustment=3", "rg"], "rg"),
            (&["nice", "--priority", "3", "rg"], "rg"),
            (&["nohup", "rg"], "rg"),
            (&["nohup", "--", "rg"], "rg"),
            (&["stdbuf", "-o", "L", "-e", "0", "rg"], "rg"),
            (&["stdbuf", "--output=L", "rg"], "rg"),
            (&["stdbuf", "-o=L", "rg"], "rg"),
            (&["timeout", "-s", "KILL", "10s", "rg"], "rg"),
            (&["timeout", "--kill-after=5", "10", "rg"], "rg"),
            (&["timeout", "--", "10", "rg"], "rg"),
            (&["time", "-p", "rg"], "rg"),
            (&["time", "-o", "/tmp/out", "-a", "rg"], "rg"),
            (&["time", "-V", "rg"], "rg"),
            (&["caffeinate", "-i", "-t", "5", "rg"], "rg"),
            (&["sandbox-exec", "-f", "profile.sb", "rg"], "rg"),
            (&["nice", "timeout", "5", "nohup", "env", "rg"], "rg"),
        ];
        for (words, expected) in cases {
            let (rest, blocked) = effective(words);
            assert_eq!(blocked, None, "{words:?}");
            assert_eq!(rest[0], *expected, "{words:?}");
        }
    }

    #[test]
    fn option_forms_openclaw_does_not_read_are_blocked() {
        for words in [
            &["stdbuf", "-oL", "rg"][..],
            &["stdbuf", "-o"],
            &["timeout", "-s9", "10", "rg"],
            &["timeout", "-f", "10", "rg"],
            &["timeout", "--bogus", "5", "rg"],
            &["nohup", "--weird", "rg"],
            &["nice", "-x", "rg"],
            &["caffeinate", "-di", "rg"],
            &["sandbox-exec", "-n", "name", "rg"],
        ] {
            assert!(effective(words).1.is_some(), "{words:?}");
        }
    }

    #[test]
    fn more_than_four_wrappers_are_blocked() {
        let (_, blocked) = effective(&["nice", "nice", "nice", "nice", "nice", "rg"]);
        assert!(blocked.is_some());
        let (rest, blocked) = effective(&["nice", "nice", "nice", "nice", "rg"]);
        assert_eq!(blocked, None);
        assert_eq!(rest[0], "rg");
    }

    #[test]
    fn a_wrapper_with_no_command_is_blocked() {
        for words in [
            &["env"][..],
            &["env", "--"],
            &["nice"],
            &["nohup"],
            &["timeout", "5"],
            &["time"],
            &["stdbuf", "-o", "L"],
        ] {
            let (rest, blocked) = effective(words);
            assert!(blocked.is_some(), "{words:?}");
            assert_eq!(rest[0], words[0], "{words:?}");
        }
    }

    #[test]
    fn macos_only_wrappers_are_blocked_elsewhere() {
        let script = argv(&["script", "-q", "/dev/null", "rg", "x"]);
        assert_eq!(unwrap_dispatch(&script, Platform::Darwin).command_index, 3);
        assert!(
            unwrap_dispatch(&script, Platform::Linux)
                .policy_blocked
                .is_some()
        );
        let no_command = argv(&["script", "-q", "/dev/null"]);
        assert!(
            unwrap_dispatch(&no_command, Platform::Darwin)
                .policy_blocked
                .is_some()
        );
        for words in [&["arch", "-arm64", "rg"][..], &["xcrun", "-r", "rg"]] {
            let words = argv(words);
            assert_eq!(unwrap_dispatch(&words, Platform::Darwin).command_index, 2);
            assert!(
                unwrap_dispatch(&words, Platform::Linux)
                    .policy_blocked
                    .is_some()
            );
        }
        let arch = argv(&["arch", "-e", "DYLD_INSERT_LIBRARIES=x", "rg"]);
        assert!(
            unwrap_dispatch(&arch, Platform::Darwin)
                .policy_blocked
                .is_some()
        );
        let arch = argv(&["arch", "-arch", "x86_64", "rg"]);
        assert_eq!(unwrap_dispatch(&arch, Platform::Darwin).command_index, 3);
    }
}
