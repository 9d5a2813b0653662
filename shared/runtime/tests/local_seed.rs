//! A first start of local mode: the empty workspace gets the default bootstrap files, the
//! model's first system prompt carries them (and the first-conversation ritual) with no
//! `[MISSING]` line, the agent retires the ritual with `write`, and a restart brings back
//! nothing the user or the agent removed.

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use clawless_channels::sign;
use clawless_core::system_prompt::seed::SEED_FILES;
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_runtime::ClawlessConfig;
use clawless_runtime::local_mode::{LOCAL_CHAT_SENDER, LocalOptions, RunningLocal, start_local};
use serde_json::{Value, json};
use support::{ReplyReceiver, SECRET, anthropic_text, anthropic_tool_use};

const MESSAGES: &str = "/v1/messages";

async fn start(state_dir: &Path, model: &ScriptedServer, receiver: &ReplyReceiver) -> RunningLocal {
    // No workspace configured: local mode uses `<state>/workspace`.
    let yaml = format!(
        r#"
models:
  primary: anthropic/claude-test
  maxRetries: 0
  providers:
    anthropic:
      apiKey: test-key
      baseUrl: {}
channels:
  generic:
    secret: {SECRET}
    replyUrl: {}
"#,
        model.base_url(),
        receiver.url
    );
    let config = ClawlessConfig::from_yaml(&yaml, "test").expect("test fixture");
    let provider = clawless_llm::build_model(&config.models, &|_| None).expect("test fixture");
    start_local(LocalOptions {
        config,
        state_dir: state_dir.to_owned(),
        listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        model: provider,
        secrets: Default::default(),
    })
    .await
    .expect("local mode starts")
}

async fn send(running: &RunningLocal, id: &str, text: &str) {
    let body = serde_json::to_vec(&json!({
        // The owner, as `clawless chat` sends: anyone else's chat is sandboxed.
        "message_id": id, "chat_id": "chat-1", "sender_id": LOCAL_CHAT_SENDER,
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
    assert_eq!(status.as_u16(), 202);
}

fn system_text(request: &Value) -> String {
    match &request["system"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|block| block["text"].as_str().unwrap_or_default())
            .collect(),
        other => panic!("unexpected system field {other}"),
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).expect("test fixture")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_start_seeds_the_workspace_and_the_ritual_can_be_retired() {
    // GIVEN a model that empties BOOTSTRAP.md, then answers, then answers the next message
    let model = ScriptedServer::start().await;
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_tool_use(
            "toolu_1",
            "write",
            json!({"path": "BOOTSTRAP.md", "content": ""}),
        )),
    );
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("Nice to meet you.")),
    );
    model.push(MESSAGES, ScriptedReply::json(anthropic_text("Sure.")));
    let receiver = ReplyReceiver::start().await;
    let state = tempfile::tempdir().expect("test fixture");
    let workspace = state.path().join("workspace");

    // WHEN local mode starts for the first time
    let running = start(state.path(), &model, &receiver).await;

    // THEN its workspace holds every default file
    for file in SEED_FILES {
        assert_eq!(
            read(&workspace.join(file.name)),
            file.content,
            "{}",
            file.name
        );
    }

    // AND the first prompt carries the ritual and no missing-file line
    send(&running, "m-1", "Hello?").await;
    let replies = receiver.wait_for(1, Duration::from_secs(30)).await;
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].body["text"], "Nice to meet you.");
    let requests = model.requests_to(MESSAGES);
    assert_eq!(requests.len(), 2);
    let first = system_text(&requests[0].body);
    let ritual_heading = format!("## {}", workspace.join("BOOTSTRAP.md").display());
    assert!(!first.contains("[MISSING]"), "{first}");
    assert!(first.contains(&ritual_heading), "{first}");
    assert!(first.contains("# SOUL.md: your character"), "{first}");
    assert!(
        requests[1]
            .body
            .to_string()
            .contains("Successfully wrote 0 bytes to BOOTSTRAP.md")
    );

    // AND once the agent emptied BOOTSTRAP.md, the next prompt no longer carries it
    send(&running, "m-2", "Can you help me?").await;
    receiver.wait_for(2, Duration::from_secs(30)).await;
    let requests = model.requests_to(MESSAGES);
    assert_eq!(requests.len(), 3);
    let later = system_text(&requests[2].body);
    assert!(!later.contains(&ritual_heading), "{later}");
    assert!(!later.contains("[MISSING]"), "{later}");
    assert!(later.contains("# SOUL.md: your character"));
    running.stop().await;

    // WHEN the user removes SOUL.md and local mode starts again
    std::fs::remove_file(workspace.join("SOUL.md")).expect("test fixture");
    let running = start(state.path(), &model, &receiver).await;

    // THEN nothing comes back: the workspace is no longer new
    assert!(
        !workspace.join("SOUL.md").exists(),
        "SOUL.md was written back"
    );
    assert_eq!(read(&workspace.join("BOOTSTRAP.md")), "");
    running.stop().await;
}
