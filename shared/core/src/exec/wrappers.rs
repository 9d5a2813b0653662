//! Dispatch wrappers (spec §7.4): `env rg`, `nice -n 5 rg`, `timeout 10 rg` run `rg`, so
//! the policy judges `rg`. This module finds the command inside such wrappers and blocks
//! the ones the policy cannot see through.
//!
//! Transparent (unwrapped, at most [`MAX_WRAPPER_DEPTH`] deep): `env` with no options and no
//! assignments, `nice`, `nohup`, `stdbuf`, `timeout`, `time`, and on macOS `caffeinate`,
//! `script` (with a command), `sandbox-exec` and `arch`. Each wrapper's own options are parsed;
//! an option it does not know blocks the segment rather than being guessed past.
//!
//! Policy-blocked (the segment is never allowlist-satisfied, whatever the allowlist says):
//! `sudo doas chrt ionice setsid taskset` as the spec lists, plus `su pkexec runuser`
//! (clawless: they change the user a command runs as); `env` with any option (`-S`, `-i`,
//! `-u`, `-C`, …) or any `NAME=value` assignment (clawless: OpenClaw unwraps assignments, but
//! `LD_PRELOAD=`, `PAGER=`, `GIT_SSH_COMMAND=`, … let an allowlisted binary run other code);
//! a leading `NAME=value` word; `time -o/-a` (writes a file); wrappers nested deeper than
//! four; a wrapper option this module does not know.

use super::Platform;
use super::resolve::base_name;

/// Most dispatch wrappers unwrapped around one command (deeper nesting is blocked).
pub const MAX_WRAPPER_DEPTH: usize = 4;

/// Wrappers that change who or how a command runs in ways the policy cannot follow.
pub const BLOCKED_WRAPPERS: &[&str] = &[
    "sudo", "doas", "chrt", "ionice", "setsid", "taskset", "su", "pkexec", "runuser",
];

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
    /// The wrapper runs on its own (no command): it is the executable.
    Alone,
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
        if is_assignment(token) {
            plan.command_index = index;
            plan.policy_blocked = Some(format!(
                "environment assignment `{token}` before the command"
            ));
            return plan;
        }
        let name = normalized_name(token, platform);
        if BLOCKED_WRAPPERS.contains(&name.as_str()) {
            plan.command_index = index;
            plan.policy_blocked = Some(format!("`{name}` is policy-blocked"));
            return plan;
        }
        match step(&name, argv, index, platform) {
            Step::Command(next) => {
                if plan.wrapper_indices.len() == MAX_WRAPPER_DEPTH {
                    plan.command_index = index;
                    plan.policy_blocked = Some(format!(
                        "more than {MAX_WRAPPER_DEPTH} nested dispatch wrappers"
                    ));
                    return plan;
                }
                plan.wrapper_indices.push(index);
                index = next;
            }
            Step::Blocked(reason) => {
                plan.command_index = index;
                plan.policy_blocked = Some(reason);
                return plan;
            }
            Step::Alone | Step::NotWrapper => break,
        }
    }
    plan.command_index = index.min(argv.len().saturating_sub(1));
    plan
}

fn step(name: &str, argv: &[String], at: usize, platform: Platform) -> Step {
    let darwin = matches!(platform, Platform::Darwin);
    match name {
        "env" => env_step(argv, at),
        "nohup" => options_then_command(argv, at, &[], &[]),
        "nice" => nice_step(argv, at),
        "stdbuf" => options_then_command(
            argv,
            at,
            &["-i", "-o", "-e"],
            &["--input", "--output", "--error"],
        ),
        "timeout" => timeout_step(argv, at),
        "time" => time_step(argv, at),
        "caffeinate" if darwin => flags_then_command(argv, at, "dimsu", "tw"),
        "sandbox-exec" if darwin => options_then_command(argv, at, &["-f", "-n", "-p", "-D"], &[]),
        "arch" if darwin => arch_step(argv, at),
        "script" if darwin => script_step(argv, at),
        _ => Step::NotWrapper,
    }
}

fn command_at(argv: &[String], index: usize) -> Step {
    if index < argv.len() {
        Step::Command(index)
    } else {
        Step::Alone
    }
}

fn env_step(argv: &[String], at: usize) -> Step {
    let mut index = at + 1;
    if argv.get(index).is_some_and(|word| word == "--") {
        index += 1;
    }
    match argv.get(index) {
        Some(word) if word.starts_with('-') => {
            Step::Blocked(format!("`env` with modifier `{word}`"))
        }
        // `env` sets any `NAME=value` word, whatever the name (`core.pager=sh` too).
        Some(word) if word.contains('=') => {
            Step::Blocked(format!("`env` with assignment `{word}`"))
        }
        _ => command_at(argv, index),
    }
}

/// Parses `-x VALUE`/`-xVALUE` short options and `--long=VALUE`/`--long VALUE` long options
/// (every listed option takes a value), then the command. Anything else starting with `-`
/// blocks.
fn options_then_command(argv: &[String], at: usize, short: &[&str], long: &[&str]) -> Step {
    let mut index = at + 1;
    while let Some(word) = argv.get(index) {
        if word == "--" {
            return command_at(argv, index + 1);
        }
        if !word.starts_with('-') || word == "-" {
            break;
        }
        if let Some(option) = long
            .iter()
            .find(|option| word == *option || word.starts_with(&format!("{option}=")))
        {
            index += if word == option { 2 } else { 1 };
            continue;
        }
        if let Some(option) = short.iter().find(|option| word.starts_with(**option)) {
            index += if word == option { 2 } else { 1 };
            continue;
        }
        return Step::Blocked(format!("unknown wrapper option `{word}`"));
    }
    command_at(argv, index)
}

/// Short boolean flag clusters from `flags`, and `-x VALUE` for letters in `valued`.
fn flags_then_command(argv: &[String], at: usize, flags: &str, valued: &str) -> Step {
    let mut index = at + 1;
    while let Some(word) = argv.get(index) {
        if word == "--" {
            return command_at(argv, index + 1);
        }
        let Some(cluster) = word.strip_prefix('-').filter(|rest| !rest.is_empty()) else {
            break;
        };
        let mut consumed = 1;
        for (offset, letter) in cluster.char_indices() {
            if valued.contains(letter) {
                if offset + letter.len_utf8() == cluster.len() {
                    consumed = 2;
                }
                break;
            }
            if !flags.contains(letter) {
                return Step::Blocked(format!("unknown wrapper option `{word}`"));
            }
        }
        index += consumed;
    }
    command_at(argv, index)
}

fn nice_step(argv: &[String], at: usize) -> Step {
    let mut index = at + 1;
    while let Some(word) = argv.get(index) {
        if word == "--" {
            return command_at(argv, index + 1);
        }
        if word == "-n" || word == "--adjustment" {
            index += 2;
        } else if word.starts_with("--adjustment=")
            || (word.starts_with("-n") && word.len() > 2)
            || (word.len() > 1
                && word.starts_with('-')
                && word[1..].trim_start_matches('-').parse::<i64>().is_ok())
        {
            index += 1;
        } else if word.starts_with('-') {
            return Step::Blocked(format!("unknown wrapper option `{word}`"));
        } else {
            break;
        }
    }
    command_at(argv, index)
}

fn timeout_step(argv: &[String], at: usize) -> Step {
    let mut index = at + 1;
    while let Some(word) = argv.get(index) {
        match word.as_str() {
            "--" => {
                index += 1;
                break;
            }
            "--preserve-status" | "--foreground" | "-v" | "--verbose" | "-f" => index += 1,
            "-s" | "--signal" | "-k" | "--kill-after" => index += 2,
            _ if word.starts_with("--signal=")
                || word.starts_with("--kill-after=")
                || (word.starts_with("-s") && word.len() > 2)
                || (word.starts_with("-k") && word.len() > 2) =>
            {
                index += 1
            }
            _ if word.starts_with('-') => {
                return Step::Blocked(format!("unknown wrapper option `{word}`"));
            }
            _ => break,
        }
    }
    // The duration comes before the command.
    if index >= argv.len() {
        return Step::Alone;
    }
    command_at(argv, index + 1)
}

fn time_step(argv: &[String], at: usize) -> Step {
    let mut index = at + 1;
    while let Some(word) = argv.get(index) {
        match word.as_str() {
            "--" => return command_at(argv, index + 1),
            "-p" | "--portability" | "-v" | "--verbose" | "-q" | "--quiet" => index += 1,
            "-f" | "--format" => index += 2,
            _ if word.starts_with("--format=") => index += 1,
            "-o" | "-a" | "--append" => {
                return Step::Blocked(format!("`time {word}` writes a file"));
            }
            _ if word.starts_with("--output") || word.starts_with("-o") => {
                return Step::Blocked(format!("`time {word}` writes a file"));
            }
            _ if word.starts_with('-') => {
                return Step::Blocked(format!("unknown wrapper option `{word}`"));
            }
            _ => break,
        }
    }
    command_at(argv, index)
}

fn arch_step(argv: &[String], at: usize) -> Step {
    const ARCHES: &[&str] = &[
        "-x86_64", "-x86_64h", "-arm64", "-arm64e", "-i386", "-32", "-64",
    ];
    let mut index = at + 1;
    while let Some(word) = argv.get(index) {
        if ARCHES.contains(&word.as_str()) {
            index += 1;
        } else if word.starts_with('-') {
            return Step::Blocked(format!("`arch {word}` changes the environment"));
        } else {
            break;
        }
    }
    command_at(argv, index)
}

/// macOS `script [-adeFkqr] [-t time] file command…`; without a command it starts a shell,
/// so it is left to the carrier rules.
fn script_step(argv: &[String], at: usize) -> Step {
    let mut index = at + 1;
    while let Some(word) = argv.get(index) {
        if word == "-t" {
            index += 2;
        } else if let Some(cluster) = word.strip_prefix('-').filter(|rest| !rest.is_empty()) {
            if !cluster.chars().all(|letter| "adeFkqr".contains(letter)) {
                return Step::Blocked(format!("unknown wrapper option `{word}`"));
            }
            index += 1;
        } else {
            break;
        }
    }
    // The transcript file, then the command.
    if index + 1 < argv.len() {
        Step::Command(index + 1)
    } else {
        Step::NotWrapper
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|word| (*word).to_owned()).collect()
    }

    fn effective(words: &[&str]) -> (Vec<String>, Option<String>) {
        let argv = argv(words);
        let plan = unwrap_dispatch(&argv, Platform::Linux);
        (argv[plan.command_index..].to_vec(), plan.policy_blocked)
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
            &["env", "--", "PAGER=sh", "git", "log"],
            &["env", "core.pager=sh", "git", "log"],
            &["env", "--split-string=sh -c id"],
        ] {
            assert!(effective(words).1.is_some(), "{words:?}");
        }
    }

    #[test]
    fn a_leading_assignment_word_is_blocked() {
        assert!(effective(&["LD_PRELOAD=/tmp/x.so", "head"]).1.is_some());
        assert!(effective(&["nice", "FOO=1", "head"]).1.is_some());
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
    fn each_transparent_wrapper_parses_its_own_options() {
        let cases: &[(&[&str], &str)] = &[
            (&["nice", "-n", "5", "rg"], "rg"),
            (&["nice", "-10", "rg"], "rg"),
            (&["nice", "--adjustment=3", "rg"], "rg"),
            (&["nohup", "rg"], "rg"),
            (&["stdbuf", "-oL", "-e", "0", "rg"], "rg"),
            (&["stdbuf", "--output=L", "rg"], "rg"),
            (&["timeout", "-s", "KILL", "10s", "rg"], "rg"),
            (&["timeout", "--kill-after=5", "10", "rg"], "rg"),
            (&["time", "-p", "rg"], "rg"),
            (&["nice", "timeout", "5", "nohup", "env", "rg"], "rg"),
        ];
        for (words, expected) in cases {
            let (rest, blocked) = effective(words);
            assert_eq!(blocked, None, "{words:?}");
            assert_eq!(rest[0], *expected, "{words:?}");
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
    fn unknown_wrapper_options_and_file_writing_time_are_blocked() {
        assert!(effective(&["timeout", "--bogus", "5", "rg"]).1.is_some());
        assert!(effective(&["time", "-o", "/tmp/out", "rg"]).1.is_some());
        assert!(effective(&["nohup", "--weird", "rg"]).1.is_some());
    }

    #[test]
    fn a_wrapper_with_no_command_is_itself_the_executable() {
        let (rest, blocked) = effective(&["env"]);
        assert_eq!(blocked, None);
        assert_eq!(rest, argv(&["env"]));
        let (rest, _) = effective(&["timeout", "5"]);
        assert_eq!(rest[0], "timeout");
    }

    #[test]
    fn macos_only_wrappers_are_plain_commands_elsewhere() {
        let words = argv(&["caffeinate", "-i", "rg"]);
        let linux = unwrap_dispatch(&words, Platform::Linux);
        assert_eq!(linux.command_index, 0);
        let mac = unwrap_dispatch(&words, Platform::Darwin);
        assert_eq!(mac.command_index, 2);
        let script = argv(&["script", "-q", "/dev/null", "rg", "x"]);
        assert_eq!(unwrap_dispatch(&script, Platform::Darwin).command_index, 3);
        assert_eq!(unwrap_dispatch(&script, Platform::Linux).command_index, 0);
        let arch = argv(&["arch", "-e", "DYLD_INSERT_LIBRARIES=x", "rg"]);
        assert!(
            unwrap_dispatch(&arch, Platform::Darwin)
                .policy_blocked
                .is_some()
        );
    }
}
