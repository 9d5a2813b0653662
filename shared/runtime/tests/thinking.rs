//! Thinking levels and reasoning visibility end to end through `clawless local` with a
//! scripted model: `/think` acknowledgements and errors (spec `openclaw-tools.md` §7.2,
//! vectors 19–21), the level on the next Anthropic and OpenAI requests, the level kept
//! across `/new`, the runtime line, signed thinking resent within a tool-use turn, and
//! `/reasoning on` sending the model's reasoning as its own message before the answer.

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use clawless_channels::sign;
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_runtime::ClawlessConfig;
use clawless_runtime::local_mode::{LocalOptions, RunningLocal, start_local};
use serde_json::{Value, json};
use support::{Fixture, ReplyReceiver, SECRET, anthropic_text};

const MESSAGES: &str = "/v1/messages";
const COMPLETIONS: &str = "/v1/chat/completions";
const OWNER: &str = "owner-1";

async fn start(fixture: &Fixture, yaml: String) -> RunningLocal {
    let config = ClawlessConfig::from_yaml(&yaml, "test").expect("test fixture");
    let model = clawless_llm::build_model(&config.models, &|_| None).expect("test fixture");
    start_local(LocalOptions {
        config,
        state_dir: fixture.state_dir(),
        listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        model,
        secrets: Default::default(),
    })
    .await
    .expect("test fixture")
}

fn anthropic_yaml(fixture: &Fixture, model: &ScriptedServer, receiver: &ReplyReceiver) -> String {
    fixture
        .config_yaml(&model.base_url(), &receiver.url)
        .replace(
            "    secret:",
            &format!("    owners: [{OWNER}]\n    allowFrom: [\"*\"]\n    secret:"),
        )
}

async fn say(running: &RunningLocal, id: &str, text: &str) {
    let body = serde_json::to_vec(&json!({
        "message_id": id, "chat_id": "chat-1", "sender_id": OWNER,
        "text": text, "chat_type": "direct"
    }))
    .expect("test fixture");
    let signature = sign(SECRET.as_bytes(), &body);
    let status = reqwest::Client::new()
        .post(format!("http://{}/webhook/generic", running.addr))
        .header("content-type", "application/json")
        .header("x-clawless-signature", signature)
        .body(body)
        .send()
        .await
        .expect("test fixture")
        .status();
    assert_eq!(status.as_u16(), 202, "{id}");
}

fn texts(receiver: &ReplyReceiver) -> Vec<String> {
    receiver
        .posted()
        .iter()
        .map(|posted| posted.body["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Says `text` and waits for the chat to have `replies` replies in all.
async fn exchange(
    running: &RunningLocal, receiver: &ReplyReceiver, id: &str, text: &str, replies: usize,
) {
    say(running, id, text).await;
    let posted = receiver.wait_for(replies, Duration::from_secs(20)).await;
    assert!(posted.len() >= replies, "{id}: {:?}", texts(receiver));
}

/// The text of the last user turn of an Anthropic request.
fn last_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "user"))
        .map(|message| message["content"].to_string())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn think_high_raises_the_next_anthropic_request_and_off_removes_it() {
    let fixture = Fixture::new();
    let model = ScriptedServer::start().await;
    for answer in ["one", "two", "three", "four", "five"] {
        model.push(MESSAGES, ScriptedReply::json(anthropic_text(answer)));
    }
    let receiver = ReplyReceiver::start().await;
    let running = start(&fixture, anthropic_yaml(&fixture, &model, &receiver)).await;

    // GIVEN a first turn without thinking
    exchange(&running, &receiver, "m-1", "hello", 1).await;
    let first = model.requests_to(MESSAGES)[0].body.clone();
    assert!(first.get("thinking").is_none());
    let base = first["max_tokens"].as_u64().expect("max_tokens");
    assert!(first.to_string().contains("thinking=off"));

    // WHEN the owner asks for xhigh on a Claude model (vector 19): refused, nothing changes
    exchange(&running, &receiver, "m-2", "/think:xhigh", 2).await;
    assert_eq!(
        texts(&receiver)[1],
        "Thinking level \"xhigh\" is only supported for provider models that advertise xhigh reasoning."
    );
    // AND `/t ultrathink` (vector 20) sets high, with no model call
    exchange(&running, &receiver, "m-3", "/t ultrathink", 3).await;
    assert_eq!(texts(&receiver)[2], "Thinking level set to high.");
    assert_eq!(model.requests_to(MESSAGES).len(), 1);

    // THEN the next request thinks with 16384 tokens and max_tokens raised by them
    exchange(&running, &receiver, "m-4", "what is 17 * 23?", 4).await;
    let second = model.requests_to(MESSAGES)[1].body.clone();
    assert_eq!(
        second["thinking"],
        json!({"type": "enabled", "budget_tokens": 16384})
    );
    assert_eq!(
        second["max_tokens"].as_u64(),
        Some((base + 16384).min(64_000))
    );
    assert!(second.to_string().contains("thinking=high"), "runtime line");
    assert!(last_user_text(&second).contains("what is 17 * 23?"));

    // AND the level survives /new
    exchange(&running, &receiver, "m-5", "/new hi again", 5).await;
    let third = model.requests_to(MESSAGES)[2].body.clone();
    assert_eq!(third["thinking"]["budget_tokens"], 16384);

    // WHEN turned off
    exchange(&running, &receiver, "m-6", "/think off", 6).await;
    assert_eq!(texts(&receiver)[5], "Thinking disabled.");
    exchange(&running, &receiver, "m-7", "and now?", 7).await;
    // THEN no thinking is sent, and the limit is back
    let fourth = model.requests_to(MESSAGES)[3].body.clone();
    assert!(fourth.get("thinking").is_none());
    assert_eq!(fourth["max_tokens"].as_u64(), Some(base));
    assert!(fourth.to_string().contains("thinking=off"));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directive_with_text_runs_that_turn_at_the_level_and_keeps_it() {
    // Vector 21: `/think high tell me a joke`.
    let fixture = Fixture::new();
    let model = ScriptedServer::start().await;
    model.push(MESSAGES, ScriptedReply::json(anthropic_text("a joke")));
    model.push(MESSAGES, ScriptedReply::json(anthropic_text("another")));
    let receiver = ReplyReceiver::start().await;
    let running = start(&fixture, anthropic_yaml(&fixture, &model, &receiver)).await;

    exchange(&running, &receiver, "m-1", "/think high tell me a joke", 2).await;
    assert_eq!(texts(&receiver), ["Thinking level set to high.", "a joke"]);
    let first = model.requests_to(MESSAGES)[0].body.clone();
    assert_eq!(first["thinking"]["budget_tokens"], 16384);
    let asked = last_user_text(&first);
    assert!(asked.contains("tell me a joke"), "{asked}");
    assert!(
        !asked.contains("/think"),
        "the directive is not the model's: {asked}"
    );

    // AND the level was stored: the next plain message runs at it too
    exchange(&running, &receiver, "m-2", "one more", 3).await;
    let second = model.requests_to(MESSAGES)[1].body.clone();
    assert_eq!(second["thinking"]["budget_tokens"], 16384);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_thinking_goes_back_in_the_tool_use_turn_and_reasoning_on_shows_it() {
    let fixture = Fixture::new();
    std::fs::write(fixture.path().join("workspace").join("notes.txt"), "42\n").ok();
    let model = ScriptedServer::start().await;
    model.push(
        MESSAGES,
        ScriptedReply::json(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [
                {"type": "thinking", "thinking": "The user wants the notes.\nRead them first.", "signature": "sig-abc"},
                {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "notes.txt"}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 100, "output_tokens": 30}
        })),
    );
    model.push(
        MESSAGES,
        ScriptedReply::json(json!({
            "id": "msg_2", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [
                {"type": "thinking", "thinking": "It says 42.", "signature": "sig-def"},
                {"type": "text", "text": "The notes say 42."},
            ],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 100, "output_tokens": 10}
        })),
    );
    model.push(MESSAGES, ScriptedReply::json(anthropic_text("later")));
    let receiver = ReplyReceiver::start().await;
    let running = start(&fixture, anthropic_yaml(&fixture, &model, &receiver)).await;

    // GIVEN thinking and reasoning visibility on, in one directive-only message
    exchange(&running, &receiver, "m-1", "/think low /reasoning on", 1).await;
    assert_eq!(
        texts(&receiver),
        ["Thinking level set to low. ⚙️ Reasoning visibility enabled."]
    );
    // WHEN a turn thinks, calls a tool, then answers
    exchange(&running, &receiver, "m-2", "what do my notes say?", 3).await;
    // THEN the reasoning arrives first, as its own message, each line in italics
    assert_eq!(
        texts(&receiver)[1..],
        [
            "Reasoning:\n_The user wants the notes._\n_Read them first._\n_It says 42._",
            "The notes say 42."
        ]
    );
    // AND the model told of the change with that message
    let requests = model.requests_to(MESSAGES);
    assert!(
        last_user_text(&requests[0].body).contains("Reasoning ON - include <think>."),
        "{}",
        last_user_text(&requests[0].body)
    );
    // AND the tool-use turn's signed thinking went back unchanged before the tool call
    let continued = &requests[1].body;
    let assistant = continued["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .rev()
        .find(|message| message["role"] == "assistant")
        .expect("an assistant turn")
        .clone();
    assert_eq!(
        assistant["content"][0],
        json!({"type": "thinking", "thinking": "The user wants the notes.\nRead them first.", "signature": "sig-abc"})
    );
    assert_eq!(assistant["content"][1]["type"], "tool_use");

    // WHEN the next turn starts, the finished turn's reasoning is not resent
    exchange(&running, &receiver, "m-3", "thanks", 4).await;
    let later = model.requests_to(MESSAGES)[2].body.to_string();
    assert!(
        !later.contains("sig-abc") && !later.contains("sig-def"),
        "{later}"
    );
    assert!(later.contains("The notes say 42."));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn think_medium_on_an_openai_reasoning_model_sends_that_effort() {
    let fixture = Fixture::new();
    let model = ScriptedServer::start().await;
    let answer = |text: &str| {
        ScriptedReply::json(json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-5-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 5}
        }))
    };
    model.push(COMPLETIONS, answer("first"));
    model.push(COMPLETIONS, answer("second"));
    let receiver = ReplyReceiver::start().await;
    let yaml = anthropic_yaml(&fixture, &model, &receiver)
        .replace("primary: anthropic/claude-test", "primary: openai/gpt-5-mini")
        .replace(
            "    anthropic:\n      apiKey: test-key\n",
            &format!(
                "    openai:\n      apiKey: test-key\n      baseUrl: {}/v1\n    anthropic:\n      apiKey: test-key\n",
                model.base_url()
            ),
        );
    let running = start(&fixture, yaml).await;

    exchange(&running, &receiver, "m-1", "hello", 1).await;
    assert!(
        model.requests_to(COMPLETIONS)[0]
            .body
            .get("reasoning_effort")
            .is_none()
    );
    exchange(&running, &receiver, "m-2", "/think medium", 2).await;
    assert_eq!(texts(&receiver)[1], "Thinking level set to medium.");
    exchange(&running, &receiver, "m-3", "think about it", 3).await;
    let sent = &model.requests_to(COMPLETIONS)[1].body;
    assert_eq!(sent["reasoning_effort"], "medium");
    assert!(sent.to_string().contains("thinking=medium"));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agent_runs_at_its_spawns_thinking_level() {
    use support::subagent_harness::{Harness, MESSAGES as HARNESS_MESSAGES};
    let mut h = Harness::new("", "", false).await;
    // GIVEN a parent without thinking that spawns a child with `thinking: medium`
    h.script(support::anthropic_tool_use(
        "toolu_spawn",
        "sessions_spawn",
        json!({"task": "count the files", "label": "helper", "thinking": "medium"}),
    ));
    h.script(anthropic_text("On it."));
    h.say("please delegate counting").await;
    let mut queued = h.take_queued().await;
    assert_eq!(queued.len(), 1, "{queued:?}");
    let start = queued.remove(0);
    let parent = h.model.requests_to(HARNESS_MESSAGES)[0].body.clone();
    assert!(parent.get("thinking").is_none());
    // WHEN the child runs
    h.script(anthropic_text("Done: 3 files"));
    h.turns.handle(&start).await.expect("child");
    // THEN its request thinks at medium, and its session keeps the level
    let requests = h.model.requests_to(HARNESS_MESSAGES);
    let child = &requests[2].body;
    assert_eq!(
        child["thinking"],
        json!({"type": "enabled", "budget_tokens": 8192})
    );
    assert!(child.to_string().contains("thinking=medium"));
    let state = h.state(&start.session_key).await;
    assert_eq!(
        state.meta.thinking_level,
        Some(clawless_base::thinking::ThinkingLevel::Medium)
    );
}
