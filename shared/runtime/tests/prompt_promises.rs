//! The prompt promises only what exists: for each tool profile, the system prompt a session is
//! sent names no tool it is not offered (as a call, a list entry, a heading or in backticks),
//! no slash command the deployment does not have, and no toggle or parameter that no tool
//! takes (`/reasoning`, `yieldMs`, a pty).

mod support;

use std::collections::BTreeSet;

use clawless_core::tool_policy::catalog::CORE_TOOLS;
use support::anthropic_text;
use support::subagent_harness::Harness;

/// The slash commands a chat can use in this deployment (`prepare.rs`, reset triggers,
/// `/approve`, `/stop`).
const COMMANDS: [&str; 13] = [
    "new",
    "reset",
    "compact",
    "status",
    "context",
    "elevated",
    "elev",
    "subagents",
    "kill",
    "steer",
    "approve",
    "stop",
    "abort",
];

/// Every `/word` of `prompt` that reads as a command: after a blank, a quote or a bracket, and
/// not followed by another `/` (a path such as `/tmp/x` or `s3://…`).
fn commands(prompt: &str) -> BTreeSet<String> {
    let bytes = prompt.as_bytes();
    let mut found = BTreeSet::new();
    for (at, _) in prompt.match_indices('/') {
        let before = at.checked_sub(1).map(|i| bytes[i]);
        if !matches!(
            before,
            None | Some(b' ' | b'\n' | b'`' | b'(' | b'"' | b'\'')
        ) {
            continue;
        }
        let word: String = prompt[at + 1..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        let after = prompt[at + 1 + word.len()..].chars().next();
        if word.is_empty()
            || after == Some('/')
            || !word.starts_with(|c: char| c.is_ascii_lowercase())
        {
            continue;
        }
        found.insert(word);
    }
    found
}

/// How `prompt` would point the model at tool `name`, if it did.
fn mentions(prompt: &str, name: &str) -> Option<String> {
    [
        format!("`{name}`"),
        format!("{name}("),
        format!("- {name}:"),
        format!("### {name} tool"),
        format!("use {name} "),
        format!("run {name} "),
    ]
    .into_iter()
    .find(|pattern| prompt.contains(pattern.as_str()))
}

#[tokio::test]
async fn each_profiles_prompt_names_only_tools_commands_and_toggles_that_exist() {
    for profile in ["minimal", "coding", "messaging", "full"] {
        let mut harness = Harness::new("", &format!("  profile: {profile}\n"), true).await;
        harness.script(anthropic_text("hello"));
        harness.say("hi").await;
        let prompt = harness.system_prompt(0);
        let offered: BTreeSet<String> = harness.offered(0).into_iter().collect();

        for tool in CORE_TOOLS {
            if !offered.contains(tool.id) {
                assert_eq!(
                    mentions(&prompt, tool.id),
                    None,
                    "{profile}: the prompt names `{}`, not offered ({offered:?}):\n{prompt}",
                    tool.id
                );
            }
        }
        for command in commands(&prompt) {
            assert!(
                COMMANDS.contains(&command.as_str()),
                "{profile}: the prompt names /{command}, which no chat can use:\n{prompt}"
            );
        }
        for promise in ["yieldMs", "pty", "/reasoning", "process(action"] {
            assert!(
                !prompt.contains(promise),
                "{profile}: the prompt promises {promise}:\n{prompt}"
            );
        }
        // The check can fail: the full profile's prompt names tools it does offer.
        if profile == "full" {
            assert!(mentions(&prompt, "read").is_some() || prompt.contains("- read"));
        }
    }
}

#[test]
fn the_command_scan_finds_commands_and_skips_paths() {
    let found =
        commands("Run /status or `/new`; files in /tmp/x and s3://b/agents/ (see /approve).");
    assert_eq!(
        found.into_iter().collect::<Vec<_>>(),
        ["approve", "new", "status"]
    );
}
