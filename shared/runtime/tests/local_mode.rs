//! Local mode end to end: a signed message to `POST /webhook/generic` → the model (a scripted
//! server speaking the Anthropic Messages format) sees the skills block and only the allowed
//! tools → it reads a SKILL.md through `read` → it answers → the signed reply reaches
//! `reply_url`. Everything but the model is the real system: HTTP routes, SQLite, directories.

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use clawless_channels::sign;
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_runtime::ClawlessConfig;
use clawless_runtime::local_mode::{LocalOptions, start_local};
use serde_json::json;
use support::{Fixture, ReplyReceiver, SECRET, anthropic_text, anthropic_tool_use};

const MESSAGES: &str = "/v1/messages";

fn message(id: &str, text: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "message_id": id, "chat_id": "chat-1", "sender_id": "user-1",
        "text": text, "chat_type": "direct"
    }))
    .expect("test fixture")
}

async fn post(
    client: &reqwest::Client, url: &str, body: Vec<u8>, signature: Option<String>,
) -> (u16, serde_json::Value) {
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .body(body);
    if let Some(signature) = signature {
        request = request.header("x-clawless-signature", signature);
    }
    let response = request.send().await.expect("test fixture");
    let status = response.status().as_u16();
    (
        status,
        response.json().await.unwrap_or(serde_json::Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_is_answered_after_the_model_reads_a_skill() {
    // GIVEN a local system whose model reads the weather skill, then answers
    let fixture = Fixture::new();
    let model_server = ScriptedServer::start().await;
    let location = fixture.skill_location();
    model_server.push(
        MESSAGES,
        ScriptedReply::json(anthropic_tool_use(
            "toolu_1",
            "read",
            json!({"path": location}),
        )),
    );
    model_server.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("It is sunny in Paris.")),
    );
    let receiver = ReplyReceiver::start().await;
    let yaml = fixture.config_yaml(&model_server.base_url(), &receiver.url);
    let config = ClawlessConfig::from_yaml(&yaml, "test").expect("test fixture");
    let model = clawless_llm::build_model(&config.models, &|_| None).expect("test fixture");
    let running = start_local(LocalOptions {
        config,
        state_dir: fixture.state_dir(),
        listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        model,
        secrets: Default::default(),
    })
    .await
    .expect("test fixture");
    let webhook = format!("http://{}/webhook/generic", running.addr);
    let client = reqwest::Client::new();

    // WHEN a signed message arrives
    let body = message("m-1", "What's the weather in Paris?");
    let signature = sign(SECRET.as_bytes(), &body);
    let (status, answer) = post(&client, &webhook, body.clone(), Some(signature.clone())).await;
    assert_eq!(status, 202, "{answer}");

    // THEN the reply reaches reply_url, signed, once
    let posted = receiver.wait_for(1, Duration::from_secs(30)).await;
    assert_eq!(posted.len(), 1, "one reply");
    assert!(
        posted[0].signature_ok,
        "the reply is signed with the channel secret"
    );
    assert_eq!(posted[0].body["text"], "It is sunny in Paris.");
    assert_eq!(posted[0].body["chat_id"], "chat-1");
    assert_eq!(
        posted[0].idempotency_key,
        posted[0].body["reply_id"].as_str().expect("test fixture")
    );

    // AND the model saw the skills block and only the allowed tools
    let requests = model_server.requests_to(MESSAGES);
    assert_eq!(requests.len(), 2);
    let first = &requests[0].body;
    let system: String = first["system"]
        .as_array()
        .expect("test fixture")
        .iter()
        .map(|block| block["text"].as_str().unwrap_or_default())
        .collect();
    assert!(system.contains("<available_skills>"), "{system}");
    assert!(system.contains("<name>weather</name>"));
    assert!(system.contains(&format!("<location>{location}</location>")));
    assert!(
        system.contains("Be brief and friendly."),
        "AGENTS.md is injected"
    );
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .expect("test fixture")
        .iter()
        .map(|t| t["name"].as_str().expect("test fixture"))
        .collect();
    assert!(tools.contains(&"read"));
    assert!(!tools.contains(&"write"), "denied by policy: {tools:?}");
    assert!(!tools.contains(&"web_fetch"), "denied by policy: {tools:?}");
    // AND the second call carried the SKILL.md content as the read result
    let second = requests[1].body.to_string();
    assert!(second.contains("tool_result"), "{second}");
    assert!(second.contains("Ask wttr.in for the forecast."), "{second}");

    // AND a redelivered message is a duplicate; bad signatures and bodies are refused
    let (status, answer) = post(&client, &webhook, body.clone(), Some(signature)).await;
    assert_eq!((status, answer["duplicate"].as_bool()), (200, Some(true)));
    let (status, _) = post(&client, &webhook, body.clone(), None).await;
    assert_eq!(status, 401);
    let forged = sign(b"wrong-secret", &body);
    let (status, _) = post(&client, &webhook, message("m-2", "hi"), Some(forged)).await;
    assert_eq!(status, 401);
    let junk = b"{\"message_id\": 3}".to_vec();
    let junk_signature = sign(SECRET.as_bytes(), &junk);
    let (status, answer) = post(&client, &webhook, junk, Some(junk_signature)).await;
    assert_eq!(status, 400);
    assert!(
        answer["error"]
            .as_str()
            .expect("test fixture")
            .contains("message_id"),
        "{answer}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.posted().len(), 1, "nothing was sent twice");
    assert_eq!(
        model_server.requests_to(MESSAGES).len(),
        2,
        "the duplicate never reached the model"
    );
    running.stop().await;
}

/// Starts a local system over `fixture` whose model answers from `model_server`.
async fn start(
    fixture: &Fixture, model_server: &ScriptedServer, receiver: &ReplyReceiver,
) -> clawless_runtime::local_mode::RunningLocal {
    let yaml = fixture.config_yaml(&model_server.base_url(), &receiver.url);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_to_a_denied_tool_is_refused_and_never_runs() {
    // GIVEN a policy denying `write`, and a model that calls it anyway (and then `exec`,
    // which this deployment does not have at all)
    let fixture = Fixture::new();
    let model_server = ScriptedServer::start().await;
    let target = fixture.path().join("workspace/pwned.txt");
    model_server.push(
        MESSAGES,
        ScriptedReply::json(anthropic_tool_use(
            "toolu_w",
            "write",
            json!({"path": "pwned.txt", "content": "gotcha"}),
        )),
    );
    model_server.push(
        MESSAGES,
        ScriptedReply::json(anthropic_tool_use(
            "toolu_x",
            "exec",
            json!({"command": "touch /tmp/x"}),
        )),
    );
    model_server.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("I could not do that.")),
    );
    let receiver = ReplyReceiver::start().await;
    let running = start(&fixture, &model_server, &receiver).await;
    let webhook = format!("http://{}/webhook/generic", running.addr);

    // WHEN a message triggers those calls
    let body = message("m-denied", "Write a file");
    let signature = sign(SECRET.as_bytes(), &body);
    let (status, _) = post(&reqwest::Client::new(), &webhook, body, Some(signature)).await;
    assert_eq!(status, 202);
    let posted = receiver.wait_for(1, Duration::from_secs(30)).await;

    // THEN nothing was written, and the model got error results for both calls
    assert_eq!(posted[0].body["text"], "I could not do that.");
    assert!(!target.exists(), "a denied tool must never run");
    let requests = model_server.requests_to(MESSAGES);
    assert_eq!(requests.len(), 3);
    let (text, is_error) = tool_result(&requests[1].body, "toolu_w").expect("a result for write");
    assert!(
        is_error && text.contains("\"write\" is not available"),
        "{text}"
    );
    let (text, is_error) = tool_result(&requests[2].body, "toolu_x").expect("a result for exec");
    assert!(
        is_error && text.contains("\"exec\" is not available"),
        "{text}"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_slash_command_rewrites_the_message_for_the_model() {
    let fixture = Fixture::new();
    let model_server = ScriptedServer::start().await;
    model_server.push(MESSAGES, ScriptedReply::json(anthropic_text("Sunny.")));
    let receiver = ReplyReceiver::start().await;
    let running = start(&fixture, &model_server, &receiver).await;
    let webhook = format!("http://{}/webhook/generic", running.addr);

    let body = message("m-command", "/weather Paris tomorrow");
    let signature = sign(SECRET.as_bytes(), &body);
    let (status, _) = post(&reqwest::Client::new(), &webhook, body, Some(signature)).await;
    assert_eq!(status, 202);
    receiver.wait_for(1, Duration::from_secs(30)).await;

    let requests = model_server.requests_to(MESSAGES);
    let user = requests[0].body["messages"][0].to_string();
    assert!(
        user.contains(
            "Use the \\\"weather\\\" skill for this request.\\n\\nUser input:\\nParis tomorrow"
        ),
        "{user}"
    );
    running.stop().await;
}

/// The text and error flag of the Anthropic `tool_result` block answering `id` in a request.
fn tool_result(request: &serde_json::Value, id: &str) -> Option<(String, bool)> {
    let messages = request["messages"].as_array()?;
    messages
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .find_map(|block| {
            (block["type"] == "tool_result" && block["tool_use_id"] == id).then(|| {
                let text = match &block["content"] {
                    serde_json::Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                (text, block["is_error"].as_bool().unwrap_or(false))
            })
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_right_after_the_start_stops_the_worker() {
    // A stop sent before the worker first waits for one must not be lost.
    let fixture = Fixture::new();
    let model_server = ScriptedServer::start().await;
    let receiver = ReplyReceiver::start().await;
    let yaml = fixture.config_yaml(&model_server.base_url(), &receiver.url);
    let config = ClawlessConfig::from_yaml(&yaml, "test").expect("test fixture");
    for _ in 0..20 {
        let model = clawless_llm::build_model(&config.models, &|_| None).expect("test fixture");
        let running = start_local(LocalOptions {
            config: config.clone(),
            state_dir: fixture.state_dir(),
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            model,
            secrets: Default::default(),
        })
        .await
        .expect("test fixture");
        tokio::time::timeout(Duration::from_secs(10), running.stop())
            .await
            .expect("the worker stops");
    }
}
