//! `/model` end to end through `clawless local`, with a scripted model (Anthropic format):
//! `/model` lists the aliases of `agents.defaults.models`, `/model opus` (a built-in alias)
//! switches the session so the next request goes to that model with the earlier messages and
//! a `Model switched to …` event, the window follows the model, spec §10 vectors 22–23, the
//! model's own `session_status` switch under the same allowlist, and a stored choice the
//! config no longer allows reverting. Everything but the model is the real system.

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use clawless_channels::sign;
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_runtime::ClawlessConfig;
use clawless_runtime::local_mode::{LocalOptions, RunningLocal, start_local};
use serde_json::{Value, json};
use support::{Fixture, ReplyReceiver, SECRET, anthropic_text, anthropic_tool_use};

const MESSAGES: &str = "/v1/messages";

/// `agents.defaults.models` with opus (no alias of its own: `opus` is built in, and its own
/// 50k window) and a haiku under the alias `quick`.
const MODELS: &str = "    models:
      anthropic/claude-opus-4-6: { contextTokens: 50000 }
      anthropic/claude-haiku-9: { alias: quick }
";

async fn start(
    fixture: &Fixture, model: &ScriptedServer, receiver: &ReplyReceiver, models: &str,
) -> RunningLocal {
    let yaml = fixture
        .config_yaml(&model.base_url(), &receiver.url)
        .replace("    secret:", "    owners: [user-1]\n    secret:")
        .replace("    workspace:", &format!("{models}    workspace:"));
    let config = ClawlessConfig::from_yaml(&yaml, "test").expect("test fixture");
    let built = clawless_llm::build_model(&config.models, &|_| None).expect("test fixture");
    start_local(LocalOptions {
        config,
        state_dir: fixture.state_dir(),
        listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        model: built,
        secrets: Default::default(),
    })
    .await
    .expect("test fixture")
}

async fn send(running: &RunningLocal, id: &str, text: &str) {
    let body = serde_json::to_vec(&json!({
        "message_id": id, "chat_id": "chat-1", "sender_id": "user-1",
        "text": text, "chat_type": "direct"
    }))
    .expect("test fixture");
    let status = reqwest::Client::new()
        .post(format!("http://{}/webhook/generic", running.addr))
        .header("content-type", "application/json")
        .header("x-clawless-signature", sign(SECRET.as_bytes(), &body))
        .body(body)
        .send()
        .await
        .expect("test fixture")
        .status();
    assert_eq!(status.as_u16(), 202, "{id}");
}

/// Sends `text` and returns the chat's reply to it (the `count`th reply posted).
async fn ask(
    running: &RunningLocal, receiver: &ReplyReceiver, id: &str, text: &str, count: usize,
) -> String {
    send(running, id, text).await;
    let posted = receiver.wait_for(count, Duration::from_secs(20)).await;
    assert_eq!(posted.len(), count, "{posted:?}");
    posted[count - 1].body["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Every text of a request's messages, in order.
fn texts(body: &Value) -> Vec<String> {
    let mut texts = Vec::new();
    for message in body["messages"].as_array().into_iter().flatten() {
        match &message["content"] {
            Value::String(text) => texts.push(text.clone()),
            Value::Array(blocks) => texts.extend(
                blocks
                    .iter()
                    .filter_map(|block| block["text"].as_str().map(str::to_owned)),
            ),
            _ => {}
        }
    }
    texts
}

fn system_text(body: &Value) -> String {
    match &body["system"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| block["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_opus_switches_the_next_turn_and_keeps_the_conversation() {
    let fixture = Fixture::new();
    let model = ScriptedServer::start().await;
    model.push(MESSAGES, ScriptedReply::json(anthropic_text("Hi there.")));
    model.push(MESSAGES, ScriptedReply::json(anthropic_text("Opus here.")));
    let receiver = ReplyReceiver::start().await;
    let running = start(&fixture, &model, &receiver, MODELS).await;

    assert_eq!(
        ask(&running, &receiver, "m-1", "hello", 1).await,
        "Hi there."
    );
    let first = model.requests_to(MESSAGES)[0].body.clone();
    assert_eq!(first["model"], "claude-test");
    let system = system_text(&first);
    assert!(system.contains("## Model Aliases"), "{system}");
    assert!(
        system.contains("- opus: anthropic/claude-opus-4-6"),
        "{system}"
    );
    assert!(
        system.contains("- quick: anthropic/claude-haiku-9"),
        "{system}"
    );

    // `/model` lists the aliases; no model is asked.
    let summary = ask(&running, &receiver, "m-2", "/model", 2).await;
    assert!(
        summary.starts_with("Current: anthropic/claude-test\n"),
        "{summary}"
    );
    assert!(
        summary.contains("opus → anthropic/claude-opus-4-6")
            && summary.contains("quick → anthropic/claude-haiku-9"),
        "{summary}"
    );
    // Vector 22, first half.
    let numeric = ask(&running, &receiver, "m-3", "/model 2", 3).await;
    assert!(
        numeric.contains("Numeric model selection is not supported in chat."),
        "{numeric}"
    );
    // Vector 22, second half.
    let set = ask(&running, &receiver, "m-4", "/model opus", 4).await;
    assert!(
        set.contains("Model set to opus (anthropic/claude-opus-4-6)."),
        "{set}"
    );
    let status = ask(&running, &receiver, "m-5", "/status", 5).await;
    assert!(
        status.contains("Model: anthropic/claude-opus-4-6"),
        "{status}"
    );
    // The window follows the model: opus's own 50k.
    assert!(status.contains("/50k"), "{status}");
    assert_eq!(
        model.requests_to(MESSAGES).len(),
        1,
        "commands ask no model"
    );

    assert_eq!(
        ask(&running, &receiver, "m-6", "and now?", 6).await,
        "Opus here."
    );
    let requests = model.requests_to(MESSAGES);
    assert_eq!(requests.len(), 2);
    let next = &requests[1].body;
    assert_eq!(next["model"], "claude-opus-4-6");
    let seen = texts(next);
    assert!(seen.iter().any(|text| text == "hello"), "{seen:?}");
    assert!(seen.iter().any(|text| text == "Hi there."), "{seen:?}");
    let last = seen.last().cloned().unwrap_or_default();
    assert!(
        last.contains("Model switched to opus (anthropic/claude-opus-4-6).")
            && last.ends_with("and now?"),
        "{last}"
    );
    // No command text reached the model.
    assert!(!seen.iter().any(|text| text.contains("/model")), "{seen:?}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disallowed_and_unknown_models_are_refused_and_aliases_are_commands() {
    let fixture = Fixture::new();
    let model = ScriptedServer::start().await;
    model.push(MESSAGES, ScriptedReply::json(anthropic_text("Quick one.")));
    let receiver = ReplyReceiver::start().await;
    // Vector 23: the allowlist has only openai/gpt-5.4 (besides the default).
    let running = start(
        &fixture,
        &model,
        &receiver,
        "    models:\n      openai/gpt-5.4: {}\n",
    )
    .await;
    let refused = ask(
        &running,
        &receiver,
        "m-1",
        "/model anthropic/claude-opus-4-6",
        1,
    )
    .await;
    assert!(
        refused.contains("Model \"anthropic/claude-opus-4-6\" is not allowed. Use /models to list providers, or /models <provider> to list models."),
        "{refused}"
    );
    let unknown = ask(&running, &receiver, "m-2", "/model llama", 2).await;
    assert!(
        unknown.contains("Unrecognized model \"llama\""),
        "{unknown}"
    );
    // The built-in alias names a model this deployment has no key for: refused, not stored.
    let unbuildable = ask(&running, &receiver, "m-3", "/gpt", 3).await;
    assert!(unbuildable.contains("cannot be used here"), "{unbuildable}");
    let providers = ask(&running, &receiver, "m-4", "/models", 4).await;
    assert!(
        providers.starts_with("Providers:\n- anthropic (1)\n- openai (1)"),
        "{providers}"
    );
    assert_eq!(
        ask(&running, &receiver, "m-5", "still there?", 5).await,
        "Quick one."
    );
    assert_eq!(model.requests_to(MESSAGES)[0].body["model"], "claude-test");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_switches_itself_through_session_status_within_the_allowlist() {
    let fixture = Fixture::new();
    let model = ScriptedServer::start().await;
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_tool_use(
            "toolu_1",
            "session_status",
            json!({"model": "openai/gpt-4o"}),
        )),
    );
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_tool_use(
            "toolu_2",
            "session_status",
            json!({"model": "quick"}),
        )),
    );
    model.push(MESSAGES, ScriptedReply::json(anthropic_text("Switched.")));
    let receiver = ReplyReceiver::start().await;
    let running = start(&fixture, &model, &receiver, MODELS).await;

    assert_eq!(
        ask(&running, &receiver, "m-1", "use the quick model", 1).await,
        "Switched."
    );
    let requests = model.requests_to(MESSAGES);
    assert_eq!(requests.len(), 3);
    let schema = requests[0].body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|tool| tool["name"] == "session_status")
        .map(|tool| tool["input_schema"].clone())
        .expect("session_status offered");
    assert_eq!(schema["properties"]["model"]["type"], "string");
    let second = requests[1].body.to_string();
    assert!(second.contains("not allowed"), "{second}");
    // The switch holds from the next call on.
    assert_eq!(requests[2].body["model"], "claude-haiku-9");
    let third = requests[2].body.to_string();
    assert!(third.contains("Model: anthropic/claude-haiku-9"), "{third}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_choice_the_config_no_longer_allows_reverts_to_the_default() {
    let fixture = Fixture::new();
    let model = ScriptedServer::start().await;
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("Back on the default.")),
    );
    let receiver = ReplyReceiver::start().await;
    let running = start(&fixture, &model, &receiver, MODELS).await;
    let set = ask(&running, &receiver, "m-1", "/quick", 1).await;
    assert!(
        set.contains("Model set to quick (anthropic/claude-haiku-9)."),
        "{set}"
    );
    running.stop().await;

    // Restarted without `agents.defaults.models`: haiku is no longer allowed.
    let running = start(&fixture, &model, &receiver, "").await;
    assert_eq!(
        ask(&running, &receiver, "m-2", "hi again", 2).await,
        "Back on the default."
    );
    let request = &model.requests_to(MESSAGES)[0].body;
    assert_eq!(request["model"], "claude-test");
    let last = texts(request).pop().unwrap_or_default();
    assert!(
        last.contains(
            "Model override not allowed for this agent; reverted to anthropic/claude-test."
        ),
        "{last}"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_takes_an_alias_and_a_model_choice_survives_a_reset() {
    let fixture = Fixture::new();
    let model = ScriptedServer::start().await;
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("Fresh and quick.")),
    );
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("Fresh again.")),
    );
    let receiver = ReplyReceiver::start().await;
    let running = start(&fixture, &model, &receiver, MODELS).await;

    assert_eq!(
        ask(&running, &receiver, "m-1", "/new quick", 1).await,
        "Fresh and quick."
    );
    let requests = model.requests_to(MESSAGES);
    assert_eq!(requests[0].body["model"], "claude-haiku-9");
    // A bare `/reset` keeps the session's choice.
    assert_eq!(
        ask(&running, &receiver, "m-2", "/reset", 2).await,
        "Fresh again."
    );
    assert_eq!(
        model.requests_to(MESSAGES)[1].body["model"],
        "claude-haiku-9"
    );
    running.stop().await;
}
