//! A Telegram bot end to end in local mode: the real `clawless local` binary with
//! `channels.telegram` pointed at a fake Bot API on 127.0.0.1 that records every call.
//!
//! Covered: 20 concurrent deliveries of one update → one turn, one reply; 10 messages sent
//! quickly to one chat → answered in order, each turn seeing its own message; a stranger gets
//! no turn; an exec approval asked in the chat with inline buttons and answered by pressing
//! one (the press is acknowledged in the webhook's answer, the command runs on the node, and
//! the chat hears how it ended).

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::extract::Path as UrlPath;
use axum::routing::post;
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_clawless");
const MESSAGES: &str = "/v1/messages";
const BOT_TOKEN: &str = "123456:test-bot-token";
const SECRET_TOKEN: &str = "telegram-webhook-secret";
const OWNER: i64 = 4242;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A fake Telegram Bot API: records `(method, body)` of every call, answers `ok`.
#[derive(Clone, Default)]
struct FakeTelegram {
    calls: Arc<Mutex<Vec<(String, Value)>>>,
}

impl FakeTelegram {
    async fn start(&self) -> String {
        let calls = Arc::clone(&self.calls);
        let app = Router::new().route(
            "/{bot}/{method}",
            post(
                move |UrlPath((bot, method)): UrlPath<(String, String)>,
                      Json(body): Json<Value>| {
                    let calls = Arc::clone(&calls);
                    async move {
                        assert_eq!(bot, format!("bot{BOT_TOKEN}"));
                        let mut calls = calls.lock().unwrap();
                        calls.push((method, body));
                        let message_id = calls.len();
                        Json(json!({"ok": true, "result": {
                            "message_id": message_id, "date": 0,
                            "chat": {"id": OWNER, "type": "private"}
                        }}))
                    }
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        url
    }

    /// The bodies of the `method` calls so far.
    fn sent(&self, method: &str) -> Vec<Value> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(called, _)| called == method)
            .map(|(_, body)| body.clone())
            .collect()
    }

    /// Waits until `count` messages were sent; returns their texts.
    async fn wait_for_messages(&self, count: usize, within: Duration) -> Vec<Value> {
        let deadline = Instant::now() + within;
        loop {
            let sent = self.sent("sendMessage");
            if sent.len() >= count {
                return sent;
            }
            assert!(
                Instant::now() < deadline,
                "{} of {count} messages within {within:?}: {sent:?}",
                sent.len()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A `clawless local` process, killed on drop.
struct Local(Child);

impl Drop for Local {
    fn drop(&mut self) {
        let _killed = self.0.kill();
        let _reaped = self.0.wait();
    }
}

fn start_local(root: &Path, port: u16, with_node: bool) -> Local {
    let mut command = Command::new(BIN);
    command.args(["local", "--port", &port.to_string()]);
    if !with_node {
        command.arg("--no-node");
    }
    let child = command
        .arg("--state-dir")
        .arg(root.join("state"))
        .arg("--config")
        .arg(root.join("clawless.yaml"))
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "clawless local did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    Local(child)
}

fn telegram_yaml(api: &str) -> String {
    format!(
        "channels:\n  telegram:\n    botToken: \"{BOT_TOKEN}\"\n    secretToken: {SECRET_TOKEN}\n    apiBaseUrl: {api}\n    owners: [\"{OWNER}\"]\n"
    )
}

fn update(update_id: u64, from: i64, text: &str) -> Value {
    json!({
        "update_id": update_id,
        "message": {
            "message_id": update_id,
            "date": 0,
            "chat": {"id": from, "type": "private"},
            "from": {"id": from, "is_bot": false, "first_name": "Someone"},
            "text": text,
        }
    })
}

async fn deliver(http: &reqwest::Client, port: u16, update: &Value) -> (u16, Value) {
    let response = http
        .post(format!("http://127.0.0.1:{port}/webhook/telegram"))
        .header("content-type", "application/json")
        .header("x-telegram-bot-api-secret-token", SECRET_TOKEN)
        .body(update.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, body)
}

fn anthropic_text(text: &str) -> Value {
    json!({
        "id": "msg", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 3}
    })
}

/// The text of the last user message a model request carried.
fn last_user_text(request: &Value) -> String {
    let messages = request["messages"].as_array().unwrap();
    let last = messages
        .iter()
        .rev()
        .find(|message| message["role"] == "user")
        .unwrap();
    match &last["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| block["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        other => other.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn telegram_deliveries_are_answered_once_and_in_order() {
    let fake = FakeTelegram::default();
    let api = fake.start().await;
    let model = ScriptedServer::start().await;
    for n in 0..=10 {
        model.push(
            MESSAGES,
            ScriptedReply::json(anthropic_text(&format!("answer {n}"))),
        );
    }
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("clawless.yaml"),
        format!(
            "{}models:\n  primary: anthropic/claude-test\n  maxRetries: 0\n  providers:\n    anthropic:\n      apiKey: test-key\n      baseUrl: {}\n",
            telegram_yaml(&api),
            model.base_url()
        ),
    )
    .unwrap();
    let port = free_port();
    let _local = start_local(root.path(), port, false);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();

    // A wrong secret is refused and starts nothing.
    let response = http
        .post(format!("http://127.0.0.1:{port}/webhook/telegram"))
        .header("x-telegram-bot-api-secret-token", "wrong")
        .body(update(1, OWNER, "hi").to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 401);

    // 20 concurrent deliveries of one update: one turn, one reply.
    let first = update(100, OWNER, "message 0");
    let deliveries: Vec<_> = (0..20)
        .map(|_| {
            let (http, first) = (http.clone(), first.clone());
            tokio::spawn(async move { deliver(&http, port, &first).await })
        })
        .collect();
    for delivery in deliveries {
        assert_eq!(delivery.await.unwrap().0, 200);
    }
    let sent = fake.wait_for_messages(1, Duration::from_secs(30)).await;
    assert_eq!(sent[0]["text"], "answer 0");
    assert_eq!(sent[0]["chat_id"], json!(OWNER));

    // A stranger starts no turn.
    let (status, answer) = deliver(&http, port, &update(150, 9999, "let me in")).await;
    assert_eq!(status, 200);
    assert_eq!(answer["ignored"], "sender not allowed");

    // 10 messages in quick succession: answered in order, each turn seeing its message.
    for n in 1..=10 {
        let (status, _) = deliver(
            &http,
            port,
            &update(200 + n, OWNER, &format!("message {n}")),
        )
        .await;
        assert_eq!(status, 200);
    }
    let sent = fake.wait_for_messages(11, Duration::from_secs(60)).await;
    let texts: Vec<&str> = sent
        .iter()
        .map(|body| body["text"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (0..=10).map(|n| format!("answer {n}")).collect();
    assert_eq!(texts, expected);
    let requests = model.requests_to(MESSAGES);
    assert_eq!(requests.len(), 11, "one model call per message");
    for (n, request) in requests.iter().enumerate() {
        assert!(
            last_user_text(&request.body).contains(&format!("message {n}")),
            "turn {n} saw: {}",
            last_user_text(&request.body)
        );
    }
    assert!(
        !fake.sent("sendChatAction").is_empty(),
        "typing is shown while turns run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_exec_approval_is_answered_by_pressing_its_button() {
    let fake = FakeTelegram::default();
    let api = fake.start().await;
    let root = tempfile::tempdir().unwrap();
    let skill = root.path().join("skills/bravo-listing");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: bravo-listing\ndescription: Test skill bravo-listing for exec on a node host.\n---\n\n# bravo-listing\n\nRun with exec:\n\n```sh exec\nls /\n```\n",
    )
    .unwrap();
    std::fs::write(
        root.path().join("clawless.yaml"),
        format!(
            "{}skills:\n  bundled: {}\n",
            telegram_yaml(&api),
            root.path().join("skills").display()
        ),
    )
    .unwrap();
    let port = free_port();
    // The offline model, and the in-process node with the demo policy (`ls` is not in it).
    let _local = start_local(root.path(), port, true);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    // The in-process node pairs itself once the server listens; exec is offered after that.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listed = Command::new(BIN)
            .args(["nodes", "list", "--json", "--state-dir"])
            .arg(root.path().join("state"))
            .output()
            .unwrap();
        let nodes: Value = serde_json::from_slice(&listed.stdout).unwrap_or(Value::Null);
        if nodes.as_array().is_some_and(|nodes| !nodes.is_empty()) {
            break;
        }
        assert!(Instant::now() < deadline, "the local node never paired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let (status, _) = deliver(&http, port, &update(1, OWNER, "bravo listing")).await;
    assert_eq!(status, 200);
    let sent = fake.wait_for_messages(1, Duration::from_secs(60)).await;
    assert!(
        sent[0]["text"]
            .as_str()
            .unwrap()
            .contains("Approval required"),
        "{sent:?}"
    );
    let buttons = sent[0]["reply_markup"]["inline_keyboard"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|row| row.as_array().unwrap().iter())
        .map(|button| button["callback_data"].as_str().unwrap().to_owned())
        .collect::<Vec<_>>();
    let allow_once = buttons
        .iter()
        .find(|data| data.starts_with("approve:allow-once:"))
        .unwrap();

    // A stranger's press changes nothing; the owner's runs the command.
    let press = |id: &str, from: i64| {
        json!({
            "update_id": 50 + from,
            "callback_query": {
                "id": id,
                "from": {"id": from, "is_bot": false, "first_name": "Presser"},
                "message": {"message_id": 1, "date": 0, "chat": {"id": OWNER, "type": "private"}},
                "chat_instance": "1",
                "data": allow_once,
            }
        })
    };
    let (status, answer) = deliver(&http, port, &press("cb-stranger", 9999)).await;
    assert_eq!(
        (status, &answer["ignored"]),
        (200, &json!("sender not allowed"))
    );
    let (status, answer) = deliver(&http, port, &press("cb-owner", OWNER)).await;
    assert_eq!(status, 200);
    assert_eq!(answer["method"], "answerCallbackQuery", "{answer}");
    assert_eq!(answer["callback_query_id"], "cb-owner");
    let sent = fake.wait_for_messages(3, Duration::from_secs(60)).await;
    let finished = sent[1]["text"].as_str().unwrap();
    assert!(finished.starts_with("Exec finished (node="), "{finished}");
    let answer = sent[2]["text"].as_str().unwrap();
    assert!(answer.contains("I ran `ls /`"), "{answer}");
}
