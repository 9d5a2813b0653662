//! The `image` tool end to end through `clawless local`, with a scripted model (Anthropic
//! format) that is both the session's model and, since it sees images and no
//! `imageModel` is set, the tool's: the model calls `image` on a PNG of the workspace, the
//! tool's own request carries the image and the prompt, and the answer built on the
//! description reaches the chat. Everything but the model is the real system.

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use clawless_channels::sign;
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_runtime::ClawlessConfig;
use clawless_runtime::local_mode::{LocalOptions, RunningLocal, start_local};
use serde_json::{Value, json};
use support::{Fixture, ReplyReceiver, SECRET, anthropic_text, anthropic_tool_use};

const MESSAGES: &str = "/v1/messages";
/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0xF8, 0xCF, 0xC0, 0xF0,
    0x1F, 0x00, 0x05, 0x00, 0x01, 0xFF, 0x89, 0x99, 0x3D, 0x1D, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82,
];

async fn start(
    fixture: &Fixture, model: &ScriptedServer, receiver: &ReplyReceiver,
) -> RunningLocal {
    let yaml = fixture
        .config_yaml(&model.base_url(), &receiver.url)
        .replace("    secret:", "    owners: [user-1]\n    secret:");
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

/// The content blocks of the first message of `body`.
fn first_message_blocks(body: &Value) -> Vec<Value> {
    match &body["messages"][0]["content"] {
        Value::Array(blocks) => blocks.clone(),
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        _ => Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_looks_at_a_workspace_image_through_the_image_tool() {
    let fixture = Fixture::new();
    std::fs::write(fixture.path().join("workspace/chart.png"), PNG).expect("test fixture");
    let model = ScriptedServer::start().await;
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_tool_use(
            "toolu_img",
            "image",
            json!({"image": "chart.png", "prompt": "What does the chart show?"}),
        )),
    );
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("A single red dot.")),
    );
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("Your chart is one red dot.")),
    );
    let receiver = ReplyReceiver::start().await;
    let running = start(&fixture, &model, &receiver).await;

    send(&running, "m-1", "what is in chart.png?").await;
    let posted = receiver.wait_for(1, Duration::from_secs(20)).await;
    assert_eq!(posted[0].body["text"], "Your chart is one red dot.");

    let requests = model.requests_to(MESSAGES);
    assert_eq!(requests.len(), 3);
    let offered: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert!(offered.contains(&"image"), "{offered:?}");

    // The tool's own request: the prompt and the image, nothing else.
    let tool_request = &requests[1].body;
    assert_eq!(tool_request["messages"].as_array().map(Vec::len), Some(1));
    assert!(
        tool_request["tools"].as_array().is_none_or(Vec::is_empty),
        "{tool_request}"
    );
    let blocks = first_message_blocks(tool_request);
    let image = blocks
        .iter()
        .find(|block| block["type"] == "image")
        .unwrap_or_else(|| panic!("no image block: {blocks:?}"));
    assert_eq!(image["source"]["media_type"], "image/png");
    assert_eq!(image["source"]["data"], STANDARD.encode(PNG));
    assert!(
        blocks
            .iter()
            .any(|block| block["text"] == "What does the chart show?"),
        "{blocks:?}"
    );

    // The description comes back to the turn as the tool's result.
    let turn = requests[2].body.to_string();
    assert!(turn.contains("A single red dot."), "{turn}");
    running.stop().await;
}
