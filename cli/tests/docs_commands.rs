//! The README and the pages under `docs/` only show commands that work. Every fenced shell
//! block is read command by command:
//! - a `clawless` command (or `cargo run -p clawless -- …`) walks the real binary's `--help`:
//!   each subcommand must exist at its level, each flag must be one that level accepts;
//! - `infra/test` and `infra/bench` lines run through the scripts' `--dry-run`, which checks
//!   their arguments and runs nothing;
//! - a `cargo` line's packages (`-p`) and features (`--features`) must exist in the workspace;
//! - anything else must be one of the few outside tools the docs use (`sam`, `aws`, …).
//!
//! Every relative link points at a file that exists, and the README stays at most 300 lines
//! (`config_cli.rs` checks that every `yaml` block is a valid `clawless.yaml`).
//! So a renamed flag, a removed subcommand or a stale example fails CI.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Outside tools a doc may show; they are not run.
const OUTSIDE_TOOLS: &[&str] = &["sam", "aws", "export", "git", "curl", "cd", "jq", "echo"];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `README.md` and every `docs/*.md`, as (path relative to the repo, text).
fn doc_pages() -> Vec<(String, String)> {
    let root = repo_root();
    let mut names = vec!["README.md".to_owned()];
    let mut pages: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    pages.sort();
    names.extend(pages);
    names
        .into_iter()
        .map(|name| {
            let text = std::fs::read_to_string(root.join(&name)).unwrap();
            (name, text)
        })
        .collect()
}

/// A fenced code block: where it starts, its language tag and its text (indentation of the
/// fence removed, as inside a list item).
struct Block {
    at: String,
    lang: String,
    text: String,
}

fn fenced_blocks(page: &str, text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, usize, String, Vec<String>)> = None;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match open.take() {
            None => {
                if let Some(lang) = trimmed.strip_prefix("```") {
                    open = Some((index + 1, indent, lang.trim().to_owned(), Vec::new()));
                }
            }
            Some((start, fence_indent, lang, mut body)) => {
                if trimmed.starts_with("```") {
                    blocks.push(Block {
                        at: format!("{page}:{start}"),
                        lang,
                        text: body.join("\n"),
                    });
                } else {
                    let cut = line
                        .char_indices()
                        .take_while(|(i, c)| *i < fence_indent && *c == ' ')
                        .count();
                    body.push(line[cut..].to_owned());
                    open = Some((start, fence_indent, lang, body));
                }
            }
        }
    }
    assert!(open.is_none(), "{page}: a code fence is never closed");
    blocks
}

/// The block's commands: continuation lines joined, comments dropped, and lines split at
/// `&&`, `||`, `;` and pipes (outside quotes).
fn commands(block: &str) -> Vec<String> {
    let mut joined = Vec::new();
    let mut pending = String::new();
    for line in block.lines() {
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(line);
        joined.push(std::mem::take(&mut pending));
    }
    if !pending.is_empty() {
        joined.push(pending);
    }
    let mut out = Vec::new();
    for line in joined {
        let mut current = String::new();
        let mut quote: Option<char> = None;
        let mut depth = 0usize;
        let mut chars = line.chars().peekable();
        let mut previous = ' ';
        while let Some(c) = chars.next() {
            match (quote, c) {
                (Some(q), _) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '\'' | '"') => quote = Some(c),
                (None, '(') => depth += 1,
                (None, ')') => depth = depth.saturating_sub(1),
                (None, '#') if depth == 0 && previous.is_whitespace() => break,
                (None, ';') if depth == 0 => {
                    out.push(std::mem::take(&mut current));
                    previous = c;
                    continue;
                }
                (None, '&' | '|') if depth == 0 && chars.peek() == Some(&c) => {
                    chars.next();
                    out.push(std::mem::take(&mut current));
                    previous = c;
                    continue;
                }
                (None, '|') if depth == 0 && previous.is_whitespace() => {
                    out.push(std::mem::take(&mut current));
                    previous = c;
                    continue;
                }
                _ => {}
            }
            current.push(c);
            previous = c;
        }
        out.push(current);
    }
    out.into_iter()
        .map(|command| command.trim().to_owned())
        .filter(|command| !command.is_empty())
        .collect()
}

/// Shell words: quotes removed, `$(…)` kept whole, redirections and their targets dropped,
/// and the `[…]` of an optional flag in a usage line taken off.
fn words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut has_word = false;
    let mut quote: Option<char> = None;
    let mut depth = 0usize;
    for c in command.chars() {
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => current.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                has_word = true;
            }
            (None, '(') => {
                depth += 1;
                current.push(c);
            }
            (None, ')') => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            (None, c) if c.is_whitespace() && depth == 0 => {
                if has_word || !current.is_empty() {
                    words.push(std::mem::take(&mut current));
                }
                has_word = false;
            }
            (None, c) => current.push(c),
        }
    }
    if has_word || !current.is_empty() {
        words.push(current);
    }
    let mut kept = Vec::new();
    let mut skip_next = false;
    for word in words {
        if std::mem::take(&mut skip_next) {
            continue;
        }
        if matches!(word.as_str(), "<" | ">" | ">>" | "2>" | "2>&1") {
            skip_next = word != "2>&1";
            continue;
        }
        let word = match word.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
            Some(inner) if inner.starts_with('-') => inner.to_owned(),
            _ => word,
        };
        kept.push(word);
    }
    kept
}

/// What one level of `clawless … --help` offers.
struct HelpLevel {
    subcommands: BTreeSet<String>,
    /// Long flags, with whether each takes a value.
    long_flags: BTreeMap<String, bool>,
    short_flags: BTreeMap<char, bool>,
    /// The usage line asks for a subcommand.
    needs_subcommand: bool,
}

fn clawless_help(path: &[String]) -> HelpLevel {
    let output = Command::new(env!("CARGO_BIN_EXE_clawless"))
        .args(path)
        .arg("--help")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "`clawless {} --help` failed: {}",
        path.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    let mut level = HelpLevel {
        subcommands: BTreeSet::new(),
        long_flags: BTreeMap::new(),
        short_flags: BTreeMap::new(),
        needs_subcommand: false,
    };
    let mut section = "";
    for line in text.lines() {
        if let Some(usage) = line.strip_prefix("Usage:") {
            level.needs_subcommand = usage.contains("<COMMAND>") && !usage.contains("[COMMAND]");
            continue;
        }
        if !line.starts_with(' ') && line.ends_with(':') {
            section = line;
            continue;
        }
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if section == "Commands:"
            && indent == 2
            && let Some(name) = trimmed.split_whitespace().next()
        {
            level.subcommands.insert(name.to_owned());
        }
        if trimmed.starts_with('-') && indent <= 6 {
            // `-j, --json`, `--config <CONFIG>`, `-n <N>`.
            let spec: Vec<&str> = trimmed.split("  ").next().unwrap().split(", ").collect();
            for part in spec {
                let mut pieces = part.split_whitespace();
                let flag = pieces.next().unwrap_or("");
                let takes_value =
                    pieces.next().is_some_and(|value| value.starts_with('<')) || flag.contains('=');
                let flag = flag.split(['=', '[']).next().unwrap();
                if let Some(long) = flag.strip_prefix("--") {
                    level.long_flags.insert(long.to_owned(), takes_value);
                } else if let Some(short) = flag.strip_prefix('-')
                    && let Some(c) = short.chars().next()
                {
                    level.short_flags.insert(c, takes_value);
                }
            }
        }
    }
    level
}

/// Checks `clawless <args>` against the binary's help, level by level.
fn check_clawless(at: &str, command: &str, args: &[String]) -> Result<(), String> {
    let mut path: Vec<String> = Vec::new();
    let mut level = clawless_help(&path);
    let mut index = 0;
    while index < args.len() {
        let word = &args[index];
        index += 1;
        if word == "--" {
            break;
        }
        if let Some(long) = word.strip_prefix("--") {
            let (name, inline_value) = match long.split_once('=') {
                Some((name, _)) => (name, true),
                None => (long, false),
            };
            let Some(takes_value) = level.long_flags.get(name) else {
                return Err(format!(
                    "{at}: `{command}`: `clawless {}` has no flag --{name}",
                    path.join(" ")
                ));
            };
            if *takes_value && !inline_value {
                index += 1;
            }
            continue;
        }
        if let Some(short) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            let c = short.chars().next().unwrap();
            let Some(takes_value) = level.short_flags.get(&c) else {
                return Err(format!(
                    "{at}: `{command}`: `clawless {}` has no flag -{c}",
                    path.join(" ")
                ));
            };
            if *takes_value && short.len() == 1 {
                index += 1;
            }
            continue;
        }
        if level.subcommands.contains(word.as_str()) {
            path.push(word.clone());
            level = clawless_help(&path);
            continue;
        }
        if level.needs_subcommand {
            return Err(format!(
                "{at}: `{command}`: `{word}` is not a subcommand of `clawless {}` (it has: {})",
                path.join(" "),
                level
                    .subcommands
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        // A positional argument (a path, a URL, a message, a placeholder).
    }
    if level.needs_subcommand {
        return Err(format!(
            "{at}: `{command}`: `clawless {}` needs a subcommand",
            path.join(" ")
        ));
    }
    Ok(())
}

/// The workspace's packages and each one's features, from `cargo metadata`.
fn workspace_features() -> BTreeMap<String, BTreeSet<String>> {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|package| {
            let features = package["features"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            (package["name"].as_str().unwrap().to_owned(), features)
        })
        .collect()
}

fn check_cargo(
    at: &str, command: &str, args: &[String], workspace: &BTreeMap<String, BTreeSet<String>>,
) -> Result<(), String> {
    // `cargo run … -p clawless -- <clawless arguments>`
    if args.first().map(String::as_str) == Some("run")
        && let Some(split) = args.iter().position(|arg| arg == "--")
    {
        let package = args
            .windows(2)
            .find(|pair| pair[0] == "-p")
            .map(|pair| pair[1].as_str());
        if package == Some("clawless") {
            return check_clawless(at, command, &args[split + 1..]);
        }
    }
    let mut packages = Vec::new();
    for pair in args.windows(2) {
        if pair[0] == "-p" || pair[0] == "--package" {
            if !workspace.contains_key(&pair[1]) {
                return Err(format!(
                    "{at}: `{command}`: no package {} in the workspace",
                    pair[1]
                ));
            }
            packages.push(pair[1].clone());
        }
    }
    for pair in args.windows(2) {
        if pair[0] != "--features" && pair[0] != "-F" {
            continue;
        }
        for feature in pair[1].split([',', ' ']).filter(|f| !f.is_empty()) {
            let (owners, name) = match feature.split_once('/') {
                Some((package, name)) => (vec![package.to_owned()], name),
                None => (packages.clone(), feature),
            };
            for owner in owners {
                let known = workspace.get(&owner).is_some_and(|set| set.contains(name));
                if !known {
                    return Err(format!(
                        "{at}: `{command}`: package {owner} has no feature {name}"
                    ));
                }
            }
        }
    }
    Ok(())
}

fn check_script(at: &str, command: &str, script: &str, args: &[String]) -> Result<(), String> {
    let output = Command::new(repo_root().join(script))
        .arg("--dry-run")
        .args(args)
        .current_dir(repo_root())
        .output()
        .unwrap();
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{at}: `{command}`: {script} --dry-run refused it: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

#[test]
fn every_shell_command_in_the_docs_works() {
    let workspace = workspace_features();
    let mut failures = Vec::new();
    let mut checked = 0;
    for (page, text) in doc_pages() {
        for block in fenced_blocks(&page, &text) {
            if !matches!(block.lang.as_str(), "sh" | "bash" | "shell" | "console") {
                continue;
            }
            for command in commands(&block.text) {
                let mut words = words(&command);
                // `NAME=value command …`: the assignments are the command's environment.
                while words.first().is_some_and(|w| {
                    w.split_once('=')
                        .is_some_and(|(name, _)| !name.is_empty() && !name.starts_with('-'))
                        && !w.starts_with("--")
                }) && words.len() > 1
                {
                    words.remove(0);
                }
                let Some((program, args)) = words.split_first() else {
                    continue;
                };
                checked += 1;
                let result = match program.as_str() {
                    "clawless" => check_clawless(&block.at, &command, args),
                    "cargo" => check_cargo(&block.at, &command, args, &workspace),
                    "infra/test" | "infra/bench" => {
                        check_script(&block.at, &command, program, args)
                    }
                    other if OUTSIDE_TOOLS.contains(&other) => Ok(()),
                    other => Err(format!(
                        "{}: `{command}`: `{other}` is neither clawless, cargo, an infra script \
                         nor a known outside tool",
                        block.at
                    )),
                };
                if let Err(failure) = result {
                    failures.push(failure);
                }
            }
        }
    }
    assert!(
        checked > 30,
        "only {checked} commands found: is the parser broken?"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_checker_catches_a_renamed_flag_and_a_removed_subcommand() {
    let at = "test";
    let args = |text: &str| words(text)[1..].to_vec();
    assert!(check_clawless(at, "", &args("clawless skills list --json")).is_ok());
    let renamed = check_clawless(at, "", &args("clawless skills list --jsonn")).unwrap_err();
    assert!(renamed.contains("--jsonn"), "{renamed}");
    let removed = check_clawless(at, "", &args("clawless skills frobnicate")).unwrap_err();
    assert!(removed.contains("frobnicate"), "{removed}");
    assert!(check_clawless(at, "", &args("clawless skills")).is_err());
    assert!(check_script(at, "", "infra/bench", &args("infra/bench bogus")).is_err());
    let workspace = workspace_features();
    assert!(
        check_cargo(
            at,
            "",
            &args("cargo build -p turn --features bedrock"),
            &workspace
        )
        .is_ok()
    );
    assert!(
        check_cargo(
            at,
            "",
            &args("cargo build -p turn --features nope"),
            &workspace
        )
        .is_err()
    );
    assert!(
        check_cargo(
            at,
            "",
            &args("cargo run -q -p clawless -- skills nope"),
            &workspace
        )
        .is_err()
    );
    assert_eq!(
        commands("a --x 'b # c' # note\nd \\\n  e && f | g"),
        vec!["a --x 'b # c'", "d    e", "f", "g"]
    );
}

#[test]
fn every_relative_link_in_the_docs_points_at_a_file() {
    let root = repo_root();
    let mut failures = Vec::new();
    for (page, text) in doc_pages() {
        let base = root.join(&page).parent().unwrap().to_path_buf();
        let mut rest = text.as_str();
        while let Some(start) = rest.find("](") {
            rest = &rest[start + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = &rest[..end];
            rest = &rest[end..];
            if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
                continue;
            }
            let file = target.split('#').next().unwrap();
            if !base.join(file).exists() {
                failures.push(format!("{page}: link to {target}: no such file"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_readme_stays_short() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines; move detail into docs/"
    );
}
