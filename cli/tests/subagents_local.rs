//! Sub-agents through the real `clawless local`, driven as a chat platform would (signed
//! webhooks in, the reply receiver read back) with a scripted model that answers each
//! request by its content (parent and children call it at the same time): a child runs in
//! its own session with the minimal prompt and without `sessions_spawn`, never sees the
//! parent's transcript, and its result reaches the chat once through the parent; three
//! children spawned in one message run in parallel; the parent answers a new message while
//! its child is still working.

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use clawless_llm::testing::{RecordedRequest, ScriptedReply, ScriptedServer};
use serde_json::{Value, json};
use support::{BIN, Local, count, free_port, post_message, replies, start_local, wait_until};

const MESSAGES: &str = "/v1/messages";
const CHAT: &str = "subagent-chat";
/// How long a child's model call takes.
const CHILD_TIME: Duration = Duration::from_secs(2);
/// A word only the parent's conversation contains.
const PARENT_SECRET: &str = "parent-only-word-7731";

fn text(text: &str) -> ScriptedReply {
    ScriptedReply::json(json!({
        "id": "msg_text", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "usage": {"input_tokens": 1200, "output_tokens": 300}
    }))
}

fn spawns(tasks: &[&str]) -> ScriptedReply {
    let calls: Vec<Value> = tasks
        .iter()
        .enumerate()
        .map(|(n, task)| {
            json!({"type": "tool_use", "id": format!("toolu_spawn_{n}"), "name": "sessions_spawn",
                   "input": {"task": task, "label": format!("worker-{n}")}})
        })
        .collect();
    ScriptedReply::json(json!({
        "id": "msg_spawn", "type": "message", "role": "assistant", "model": "claude-test",
        "content": calls, "stop_reason": "tool_use", "usage": {"input_tokens": 100, "output_tokens": 10}
    }))
}

/// The text of the request's last message.
fn last_text(request: &RecordedRequest) -> String {
    let Some(last) = request.body["messages"].as_array().and_then(|m| m.last()) else {
        return String::new();
    };
    match &last["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|block| {
                block["text"]
                    .as_str()
                    .or_else(|| block["content"].as_str())
                    .unwrap_or_else(|| block["type"].as_str().unwrap_or_default())
                    .to_owned()
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn is_child(request: &RecordedRequest) -> bool {
    request.raw_body.contains("[Subagent Task]: ")
}

/// The scripted model: children take two seconds and report their task; the parent spawns,
/// relays completion events, and answers small talk.
fn script(model: &ScriptedServer) {
    model.respond_with(MESSAGES, |request| {
        let last = last_text(request);
        if is_child(request) {
            let task = request
                .raw_body
                .split("[Subagent Task]: ")
                .nth(1)
                .and_then(|rest| rest.split(['"', '\\']).next())
                .unwrap_or("?")
                .to_owned();
            return Some(text(&format!("RESULT({task})")).with_delay(CHILD_TIME));
        }
        if last.contains("tool_result") || last.contains("\"status\":\"accepted\"") {
            return Some(text("On it."));
        }
        if last.contains("[Internal task completion event]") {
            let result = last
                .split("RESULT(")
                .nth(1)
                .and_then(|rest| rest.split(')').next())
                .unwrap_or("?");
            return Some(text(&format!("Relay: {result}")));
        }
        if last.contains("spawn one") {
            return Some(spawns(&["count the words"]));
        }
        if last.contains("spawn three") {
            return Some(spawns(&["topic A", "topic B", "topic C"]));
        }
        if last.contains("are you there") {
            return Some(text("Yes, still here."));
        }
        Some(text("Hello!"))
    });
}

struct Setup {
    model: ScriptedServer,
    root: tempfile::TempDir,
    port: u16,
    _local: Local,
    secret: String,
    http: reqwest::Client,
}

async fn setup() -> Setup {
    let model = ScriptedServer::start().await;
    script(&model);
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("clawless.yaml"),
        format!(
            "models:\n  primary: anthropic/claude-test\n  maxRetries: 0\n  providers:\n    \
             anthropic:\n      apiKey: test-key\n      baseUrl: {}\n",
            model.base_url()
        ),
    )
    .unwrap();
    let port = free_port();
    let local = start_local(root.path(), port);
    let secret = std::fs::read_to_string(root.path().join("state/generic.secret")).unwrap();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    Setup {
        model,
        root,
        port,
        _local: local,
        secret,
        http,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_works_alone_and_its_result_reaches_the_chat_once_while_the_parent_talks() {
    let s = setup().await;
    // GIVEN a conversation the child must not see
    post_message(
        &s.http,
        s.port,
        &s.secret,
        CHAT,
        "m-0",
        &format!("remember {PARENT_SECRET}"),
    )
    .await;
    wait_until(Duration::from_secs(20), "the greeting", || async {
        count(&replies(&s.http, s.port, CHAT).await, "Hello!") == 1
    })
    .await;

    // WHEN the parent spawns one child, and the user writes again while it works
    post_message(
        &s.http,
        s.port,
        &s.secret,
        CHAT,
        "m-1",
        "please spawn one helper",
    )
    .await;
    wait_until(
        Duration::from_secs(20),
        "the spawn is acknowledged",
        || async { count(&replies(&s.http, s.port, CHAT).await, "On it.") == 1 },
    )
    .await;
    post_message(&s.http, s.port, &s.secret, CHAT, "m-2", "are you there?").await;

    // THEN the parent answers at once, and the child's result arrives after, once
    wait_until(Duration::from_secs(20), "the relay arrives", || async {
        count(
            &replies(&s.http, s.port, CHAT).await,
            "Relay: count the words",
        ) == 1
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let all = replies(&s.http, s.port, CHAT).await;
    assert_eq!(count(&all, "Relay: count the words"), 1, "{all:?}");
    let still_here = all.iter().position(|r| r == "Yes, still here.").unwrap();
    let relay = all
        .iter()
        .position(|r| r == "Relay: count the words")
        .unwrap();
    assert!(
        still_here < relay,
        "the parent answered while its child worked: {all:?}"
    );

    // AND the child ran alone: minimal prompt, no sessions_spawn, nothing of the parent's
    let requests = s.model.requests_to(MESSAGES);
    let child: Vec<&RecordedRequest> = requests.iter().filter(|r| is_child(r)).collect();
    assert_eq!(child.len(), 1);
    let tools: Vec<&str> = child[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert!(!tools.contains(&"sessions_spawn"), "{tools:?}");
    assert!(!tools.contains(&"cron"), "{tools:?}");
    assert!(!child[0].raw_body.contains(PARENT_SECRET));
    assert!(child[0].raw_body.contains("Subagent Context"));
    let parent = requests
        .iter()
        .find(|r| last_text(r).contains("[Internal task completion event]"))
        .unwrap();
    assert!(parent.raw_body.contains("status: completed successfully"));

    // AND `clawless sessions list` shows the child under its parent
    let listed = Command::new(BIN)
        .args(["sessions", "--state-dir"])
        .arg(s.root.path().join("state"))
        .arg("list")
        .env("HOME", s.root.path())
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    let lines: Vec<&str> = listed.lines().collect();
    let parent_line = lines
        .iter()
        .position(|line| line.starts_with("agent:main:main "))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(
        lines[parent_line + 1].starts_with("  └ agent:main:subagent:")
            && lines[parent_line + 1].contains("sub-agent done"),
        "the child right under its parent: {listed}"
    );

    // AND `clawless sessions show` shows the spawn, the child's key and the announce
    let child_key = lines[parent_line + 1]
        .trim_start_matches("  └ ")
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    let show = |key: &str| {
        let shown = Command::new(BIN)
            .args(["sessions", "--state-dir"])
            .arg(s.root.path().join("state"))
            .args(["show", key])
            .env("HOME", s.root.path())
            .output()
            .unwrap();
        String::from_utf8_lossy(&shown.stdout).into_owned()
    };
    let parent = show("agent:main:main");
    assert!(parent.contains("sessions_spawn"), "{parent}");
    assert!(parent.contains(&format!("spawned {child_key}")), "{parent}");
    assert!(parent.contains("SUB-AGENT RESULT (announced)"), "{parent}");
    let child = show(&child_key);
    assert!(child.contains("SUB-AGENT TASK"), "{child}");
    assert!(child.contains("sub-agent of agent:main:main"), "{child}");
    assert!(child.contains("result announced"), "{child}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_children_of_one_message_run_in_parallel() {
    let s = setup().await;
    post_message(
        &s.http,
        s.port,
        &s.secret,
        CHAT,
        "m-1",
        "spawn three researchers",
    )
    .await;
    let started = Instant::now();
    wait_until(Duration::from_secs(30), "three relays", || async {
        let all = replies(&s.http, s.port, CHAT).await;
        ["A", "B", "C"]
            .iter()
            .all(|topic| count(&all, &format!("Relay: topic {topic}")) == 1)
    })
    .await;
    let took = started.elapsed();
    assert!(
        took < CHILD_TIME * 2 + Duration::from_secs(1),
        "three children of {CHILD_TIME:?} each took {took:?}: not in parallel"
    );
    let children = s
        .model
        .requests_to(MESSAGES)
        .iter()
        .filter(|r| is_child(r))
        .count();
    assert_eq!(children, 3);
}
