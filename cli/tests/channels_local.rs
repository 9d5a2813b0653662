//! Chat platforms end to end in local mode: the real `clawless local` binary with a channel
//! pointed at a fake of its platform's API on 127.0.0.1 that records every call.
//!
//! Covered: 20 concurrent deliveries of one update → one turn, one reply; 10 messages sent
//! quickly to one chat → answered in order, each turn seeing its own message; a stranger gets
//! no turn; an exec approval asked in the chat with inline buttons and answered by pressing
//! one (the press is acknowledged in the webhook's answer, the command runs on the node, and
//! the chat hears how it ended). Slack: `url_verification`, an `app_mention` answered once in
//! its thread, Slack's retry a duplicate. Discord: PING, a foreign signature refused, `/ask`
//! deferred and completed through the follow-up webhook.

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
    start_local_with_env(root, port, with_node, &[])
}

fn start_local_with_env(root: &Path, port: u16, with_node: bool, env: &[(&str, &str)]) -> Local {
    let mut command = Command::new(BIN);
    command.envs(env.iter().copied());
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

/// A fake of a platform's HTTP API: records `(path, body)` of every POST, answers `answer`.
#[derive(Clone, Default)]
struct FakeApi {
    calls: Arc<Mutex<Vec<(String, Value)>>>,
}

impl FakeApi {
    async fn start(&self, answer: Value) -> String {
        let calls = Arc::clone(&self.calls);
        let app = Router::new().fallback(move |uri: axum::http::Uri, Json(body): Json<Value>| {
            let calls = Arc::clone(&calls);
            let answer = answer.clone();
            async move {
                calls.lock().unwrap().push((uri.path().to_owned(), body));
                Json(answer)
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        url
    }

    async fn wait_for(&self, count: usize) -> Vec<(String, Value)> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let calls = self.calls.lock().unwrap().clone();
            if calls.len() >= count {
                return calls;
            }
            assert!(
                Instant::now() < deadline,
                "{} of {count} calls: {calls:?}",
                calls.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn scripted_model_yaml(model: &ScriptedServer) -> String {
    format!(
        "models:\n  primary: anthropic/claude-test\n  maxRetries: 0\n  providers:\n    anthropic:\n      apiKey: test-key\n      baseUrl: {}\n",
        model.base_url()
    )
}

fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slack_message_is_answered_once_in_its_thread() {
    const SIGNING: &str = "slack-signing-secret";
    let fake = FakeApi::default();
    let api = fake.start(json!({"ok": true, "ts": "1.1"})).await;
    let model = ScriptedServer::start().await;
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("Slack answer.")),
    );
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("clawless.yaml"),
        format!(
            "channels:\n  slack:\n    botToken: xoxb-test\n    signingSecret: {SIGNING}\n    apiBaseUrl: {api}\n    botUserId: UBOT\n    owners: [UOWNER]\n{}",
            scripted_model_yaml(&model)
        ),
    )
    .unwrap();
    let port = free_port();
    let _local = start_local(root.path(), port, false);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let post = |body: Value, retry: bool| {
        let http = http.clone();
        async move {
            let body = body.to_string();
            let timestamp = unix_seconds().to_string();
            let base = format!("v0:{timestamp}:{body}");
            let hmac = clawless_channels::sign(SIGNING.as_bytes(), base.as_bytes());
            let mut request = http
                .post(format!("http://127.0.0.1:{port}/webhook/slack"))
                .header("content-type", "application/json")
                .header("x-slack-request-timestamp", timestamp)
                .header(
                    "x-slack-signature",
                    format!("v0={}", hmac.trim_start_matches("sha256=")),
                );
            if retry {
                request = request.header("x-slack-retry-num", "1");
            }
            let response = request.body(body).send().await.unwrap();
            (
                response.status().as_u16(),
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };

    let (status, answer) = post(
        json!({"type": "url_verification", "challenge": "c-123"}),
        false,
    )
    .await;
    assert_eq!((status, &answer["challenge"]), (200, &json!("c-123")));

    let mention = json!({
        "type": "event_callback", "event_id": "Ev1", "team_id": "T1",
        "event": {"type": "app_mention", "channel": "C1", "user": "UOWNER",
                  "text": "<@UBOT> hello", "ts": "1700.0001"}
    });
    assert_eq!(post(mention.clone(), false).await.0, 200);
    // Slack's retry of the same event starts no second turn.
    let (status, answer) = post(mention, true).await;
    assert_eq!((status, &answer["duplicate"]), (200, &json!(true)));
    let calls = fake.wait_for(1).await;
    assert_eq!(calls[0].0, "/chat.postMessage");
    assert_eq!(calls[0].1["text"], "Slack answer.");
    assert_eq!(calls[0].1["channel"], "C1");
    assert_eq!(calls[0].1["thread_ts"], "1700.0001");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(fake.calls.lock().unwrap().len(), 1, "answered once");
    assert_eq!(model.requests_to(MESSAGES).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_discord_command_is_deferred_then_completed_through_the_follow_up_webhook() {
    use ed25519_dalek::{Signer, SigningKey};
    let key = SigningKey::from_bytes(&[9u8; 32]);
    let fake = FakeApi::default();
    let api = fake.start(json!({"id": "555"})).await;
    let model = ScriptedServer::start().await;
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("Discord answer.")),
    );
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("Skill answer.")),
    );
    let root = tempfile::tempdir().unwrap();
    // A skill whose command clashes with the generic `/ask`: Discord knows it by another name.
    let skill = root.path().join("skills/ask");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: ask\ndescription: Answers questions about asking.\n---\n\n# ask\n",
    )
    .unwrap();
    std::fs::write(
        root.path().join("clawless.yaml"),
        format!(
            "channels:\n  discord:\n    applicationId: \"1234567890\"\n    publicKey: \"{}\"\n    apiBaseUrl: {api}\n    owners: [\"777\"]\nskills:\n  bundled: {}\n{}",
            hex::encode(key.verifying_key().to_bytes()),
            root.path().join("skills").display(),
            scripted_model_yaml(&model)
        ),
    )
    .unwrap();
    let port = free_port();
    let _local = start_local(root.path(), port, false);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let post = |body: Value, signer: &SigningKey| {
        let http = http.clone();
        let timestamp = unix_seconds().to_string();
        let body = body.to_string();
        let signature = hex::encode(
            signer
                .sign(format!("{timestamp}{body}").as_bytes())
                .to_bytes(),
        );
        async move {
            let response = http
                .post(format!("http://127.0.0.1:{port}/webhook/discord"))
                .header("content-type", "application/json")
                .header("x-signature-timestamp", timestamp)
                .header("x-signature-ed25519", signature)
                .body(body)
                .send()
                .await
                .unwrap();
            (
                response.status().as_u16(),
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };

    let (status, pong) = post(
        json!({"id": "1", "type": 1, "application_id": "1234567890", "token": "t", "version": 1}),
        &key,
    )
    .await;
    assert_eq!((status, pong), (200, json!({"type": 1})));
    // Signed by someone else: refused.
    let stranger = SigningKey::from_bytes(&[8u8; 32]);
    let (status, _) = post(
        json!({"id": "1", "type": 1, "application_id": "1234567890", "token": "t", "version": 1}),
        &stranger,
    )
    .await;
    assert_eq!(status, 401);

    // An interaction id made now (a snowflake carries its time), so its token is fresh.
    let now_ms = unix_seconds() * 1000;
    let interaction_id = ((now_ms - 1_420_070_400_000) << 22).to_string();
    let ask = json!({
        "id": interaction_id, "application_id": "1234567890", "type": 2,
        "token": "interaction-token-abc", "version": 1,
        "channel_id": "2222", "guild_id": "3333",
        "member": {"user": {"id": "777", "username": "owner"}},
        "data": {"id": "9", "name": "ask", "type": 1,
                 "options": [{"name": "text", "type": 3, "value": "hello there"}]}
    });
    let (status, deferred) = post(ask, &key).await;
    assert_eq!((status, deferred), (200, json!({"type": 5})));
    let calls = fake.wait_for(1).await;
    assert_eq!(calls[0].0, "/webhooks/1234567890/interaction-token-abc");
    assert_eq!(calls[0].1["content"], "Discord answer.");
    assert!(
        last_user_text(&model.requests_to(MESSAGES)[0].body).contains("hello there"),
        "the turn saw the command's text"
    );

    // The skill registered under another name on Discord still reaches its skill.
    let definitions = clawless_channels::discord::command_definitions(&[
        clawless_skills::commands::SkillCommandSpec {
            name: "ask".to_owned(),
            skill_name: "ask".to_owned(),
            description: "Answers questions about asking.".to_owned(),
            dispatch: None,
        },
    ]);
    let renamed = definitions[1]["name"].as_str().unwrap().to_owned();
    assert_ne!(renamed, "ask");
    let interaction_id = (((unix_seconds() * 1000) - 1_420_070_400_000) << 22) + 1;
    let skill_command = json!({
        "id": interaction_id.to_string(), "application_id": "1234567890", "type": 2,
        "token": "interaction-token-def", "version": 1,
        "channel_id": "2222", "guild_id": "3333",
        "member": {"user": {"id": "777", "username": "owner"}},
        "data": {"id": "10", "name": renamed, "type": 1,
                 "options": [{"name": "args", "type": 3, "value": "politely"}]}
    });
    let (status, deferred) = post(skill_command, &key).await;
    assert_eq!((status, deferred), (200, json!({"type": 5})));
    let calls = fake.wait_for(2).await;
    assert_eq!(calls[1].1["content"], "Skill answer.");
    let user = last_user_text(&model.requests_to(MESSAGES)[1].body);
    assert!(
        user.contains("Use the \"ask\" skill for this request.") && user.contains("politely"),
        "{user}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn telegram_tokens_named_in_secrets_are_fetched_from_ssm() {
    use aws_sdk_ssm::types::ParameterType;
    let sdk = clawless_aws::testing::moto_sdk_config().await;
    let ssm = aws_sdk_ssm::Client::new(&sdk);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let bot_parameter = format!("/clawless/local-{nanos}/bot-token");
    let secret_parameter = format!("/clawless/local-{nanos}/secret-token");
    for (name, value) in [
        (&bot_parameter, BOT_TOKEN),
        (&secret_parameter, SECRET_TOKEN),
    ] {
        ssm.put_parameter()
            .name(name)
            .value(value)
            .r#type(ParameterType::SecureString)
            .send()
            .await
            .unwrap();
    }
    let fake = FakeTelegram::default();
    let api = fake.start().await;
    let model = ScriptedServer::start().await;
    model.push(MESSAGES, ScriptedReply::json(anthropic_text("From SSM.")));
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("clawless.yaml"),
        format!(
            "channels:\n  telegram:\n    botTokenEnv: TG_BOT_TOKEN_FROM_SSM\n    secretTokenEnv: TG_SECRET_FROM_SSM\n    apiBaseUrl: {api}\n    owners: [\"{OWNER}\"]\nsecrets:\n  TG_BOT_TOKEN_FROM_SSM: {{ssm: {bot_parameter}}}\n  TG_SECRET_FROM_SSM: {{ssm: {secret_parameter}}}\n{}",
            scripted_model_yaml(&model)
        ),
    )
    .unwrap();
    let port = free_port();
    let endpoint = clawless_aws::testing::moto_endpoint();
    // The machine's own AWS configuration, here pointing at the emulator.
    let _local = start_local_with_env(
        root.path(),
        port,
        false,
        &[
            ("AWS_ENDPOINT_URL", &endpoint),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ],
    );
    let http = reqwest::Client::builder().no_proxy().build().unwrap();

    // The secret token from SSM is the one checked…
    let forged = http
        .post(format!("http://127.0.0.1:{port}/webhook/telegram"))
        .header("content-type", "application/json")
        .header("x-telegram-bot-api-secret-token", "not-the-ssm-value")
        .body(update(700, OWNER, "forged").to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status().as_u16(), 401);
    let (status, _) = deliver(&http, port, &update(701, OWNER, "hello")).await;
    assert_eq!(status, 200);
    // …and the reply goes out with the bot token from SSM (the fake checks the URL's token).
    let sent = fake.wait_for_messages(1, Duration::from_secs(30)).await;
    assert_eq!(sent[0]["text"], "From SSM.");
}
