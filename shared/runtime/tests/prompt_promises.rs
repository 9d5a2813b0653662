//! The prompt promises only what exists: for each tool profile, the system prompt a session is
//! sent names no tool it is not offered (as a call, a list entry, a heading or in backticks),
//! no slash command the deployment does not have, and no toggle or parameter that no tool
//! takes (`yieldMs`, a pty). `/reasoning` exists (`turn::directives`), so the runtime
//! section may offer it.

mod support;

use std::collections::BTreeSet;

use clawless_core::tool_policy::catalog::CORE_TOOLS;
use support::anthropic_text;
use support::subagent_harness::Harness;

/// The slash commands a chat can use in this deployment (`prepare.rs`, reset triggers,
/// `/approve`, `/stop`, the `/think` and `/reasoning` directives).
const COMMANDS: [&str; 18] = [
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
    "think",
    "t",
    "thinking",
    "reasoning",
    "reason",
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
        for promise in ["yieldMs", "pty", "process(action"] {
            assert!(
                !prompt.contains(promise),
                "{profile}: the prompt promises {promise}:\n{prompt}"
            );
        }
        // The toggle the runtime section offers is one a chat has.
        assert!(
            prompt.contains("Toggle /reasoning."),
            "{profile}: no reasoning toggle:\n{prompt}"
        );
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

/// Through `clawless local`: the owner's direct chat carries `MEMORY.md`; a group chat's
/// request never does, even the owner's own message there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_chats_request_through_clawless_local_carries_no_memory() {
    use clawless_channels::sign;
    use clawless_llm::testing::{ScriptedReply, ScriptedServer};
    use clawless_runtime::ClawlessConfig;
    use clawless_runtime::local_mode::{LocalOptions, start_local};
    use std::net::{Ipv4Addr, SocketAddr};
    use std::time::Duration;
    use support::{Fixture, ReplyReceiver, SECRET};

    const CANARY: &str = "CANARY-31d: the owner's private notes";
    let fixture = Fixture::new();
    std::fs::write(fixture.path().join("workspace/MEMORY.md"), CANARY).expect("test fixture");
    let model = ScriptedServer::start().await;
    model.always("/v1/messages", ScriptedReply::json(anthropic_text("ok")));
    let receiver = ReplyReceiver::start().await;
    let yaml = fixture
        .config_yaml(&model.base_url(), &receiver.url)
        .replace("    secret:", "    owners: [owner-1]\n    secret:");
    let config = ClawlessConfig::from_yaml(&yaml, "test").expect("test fixture");
    let built = clawless_llm::build_model(&config.models, &|_| None).expect("test fixture");
    let running = start_local(LocalOptions {
        config,
        state_dir: fixture.state_dir(),
        listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        model: built,
        secrets: Default::default(),
    })
    .await
    .expect("test fixture");
    let client = reqwest::Client::new();
    for (id, chat_id, chat_type) in [("m-1", "group-1", "group"), ("m-2", "chat-1", "direct")] {
        let body = serde_json::to_vec(&serde_json::json!({
            "message_id": id, "chat_id": chat_id, "sender_id": "owner-1",
            "text": "what do you remember?", "chat_type": chat_type
        }))
        .expect("test fixture");
        let status = client
            .post(format!("http://{}/webhook/generic", running.addr))
            .header("content-type", "application/json")
            .header("x-clawless-signature", sign(SECRET.as_bytes(), &body))
            .body(body)
            .send()
            .await
            .expect("test fixture")
            .status();
        assert_eq!(status.as_u16(), 202);
        let answered = if id == "m-1" { 1 } else { 2 };
        receiver.wait_for(answered, Duration::from_secs(20)).await;
    }
    let requests = model.requests_to("/v1/messages");
    assert_eq!(requests.len(), 2);
    let group = requests[0].body.to_string();
    assert!(
        !group.contains("CANARY"),
        "the group's request carries MEMORY.md"
    );
    let direct = requests[1].body.to_string();
    assert!(
        direct.contains("CANARY"),
        "the owner's direct chat carries MEMORY.md"
    );
    running.stop().await;
}
