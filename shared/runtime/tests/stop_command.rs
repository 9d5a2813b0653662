//! `/stop` end to end through `clawless local`: a slow turn (its model call takes seconds and
//! asks for a tool) is stopped from the chat while the call is in flight. The tool never
//! runs, no second model call is made, no final reply is sent, the chat is told it stopped,
//! and the session answers the next message as usual. Someone not an owner cannot stop it.

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use clawless_channels::sign;
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_runtime::ClawlessConfig;
use clawless_runtime::local_mode::{LocalOptions, RunningLocal, start_local};
use serde_json::json;
use support::{Fixture, ReplyReceiver, SECRET, anthropic_text, anthropic_tool_use};

const MESSAGES: &str = "/v1/messages";
const OWNER: &str = "owner-1";
/// How long the first model call takes.
const SLOW_CALL: Duration = Duration::from_secs(3);

async fn start(
    fixture: &Fixture, model: &ScriptedServer, receiver: &ReplyReceiver,
) -> RunningLocal {
    let yaml = fixture
        .config_yaml(&model.base_url(), &receiver.url)
        .replace(
            "    secret:",
            &format!("    owners: [{OWNER}]\n    allowFrom: [\"*\"]\n    secret:"),
        );
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

async fn say(running: &RunningLocal, id: &str, sender: &str, text: &str) {
    let body = serde_json::to_vec(&json!({
        "message_id": id, "chat_id": "chat-1", "sender_id": sender,
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

/// Waits until the model has been asked `n` times.
async fn wait_for_model_calls(model: &ScriptedServer, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while model.requests_to(MESSAGES).len() < n {
        assert!(tokio::time::Instant::now() < deadline, "model never asked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn texts(receiver: &ReplyReceiver) -> Vec<String> {
    receiver
        .posted()
        .iter()
        .map(|posted| posted.body["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_ends_a_slow_turn_before_its_next_model_call_or_tool() {
    // GIVEN a turn whose model call is slow and asks to write a file
    let fixture = Fixture::new();
    let model = ScriptedServer::start().await;
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_tool_use(
            "toolu_1",
            "read",
            json!({"path": "AGENTS.md"}),
        ))
        .with_delay(SLOW_CALL),
    );
    model.push(MESSAGES, ScriptedReply::json(anthropic_text("never asked")));
    let receiver = ReplyReceiver::start().await;
    let running = start(&fixture, &model, &receiver).await;
    say(&running, "m-1", OWNER, "do the slow thing").await;
    wait_for_model_calls(&model, 1).await;

    // WHEN the owner says stop while the model call is in flight
    say(&running, "m-2", OWNER, "/stop").await;

    // THEN the chat is told at once, while the call is still running
    let posted = receiver.wait_for(1, Duration::from_secs(10)).await;
    assert_eq!(texts(&receiver), ["⏹️ Stopped."], "{posted:?}");
    // AND once the slow call returns, the turn goes no further: no tool result, no second
    // call, no final reply
    tokio::time::sleep(SLOW_CALL + Duration::from_secs(2)).await;
    assert_eq!(model.requests_to(MESSAGES).len(), 1);
    assert_eq!(
        model.pending(MESSAGES),
        1,
        "the second answer was never taken"
    );
    assert_eq!(texts(&receiver), ["⏹️ Stopped."]);

    // AND the session answers the next message, its transcript well-formed
    say(&running, "m-3", OWNER, "hello again").await;
    receiver.wait_for(2, Duration::from_secs(20)).await;
    assert_eq!(texts(&receiver), ["⏹️ Stopped.", "never asked"]);
    let requests = model.requests_to(MESSAGES);
    assert_eq!(requests.len(), 2);
    let second = requests[1].body.to_string();
    assert!(second.contains("hello again"), "{second}");
    assert!(
        !second.contains("toolu_1"),
        "the stopped call left nothing: {second}"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_from_someone_not_an_owner_is_an_ordinary_message() {
    // GIVEN a slow turn of the owner's
    let fixture = Fixture::new();
    let model = ScriptedServer::start().await;
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("the slow answer")).with_delay(SLOW_CALL),
    );
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("a second answer")),
    );
    let receiver = ReplyReceiver::start().await;
    let running = start(&fixture, &model, &receiver).await;
    say(&running, "m-1", OWNER, "do the slow thing").await;
    wait_for_model_calls(&model, 1).await;

    // WHEN another sender says stop
    say(&running, "m-2", "friend-2", "stop").await;

    // THEN the turn finishes and the "stop" is answered as a message of its own
    let posted = receiver.wait_for(2, Duration::from_secs(20)).await;
    assert_eq!(
        texts(&receiver),
        ["the slow answer", "a second answer"],
        "{posted:?}"
    );
    running.stop().await;
}
