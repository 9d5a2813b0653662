//! The whole system as Lambdas: the real `webhook`, `turn`, `nodes` and `timers` binaries
//! under `cargo lambda watch`, S3, DynamoDB, SQS and STS on moto, the scripted model server
//! speaking the Anthropic Messages API, a fake Telegram Bot API, and a real `clawless node
//! run` worker reading its own SQS queue and running real commands.
//!
//! A Telegram update reaches the webhook → the turn reads a skill from S3 → calls `exec` →
//! the node's policy asks → the approval request reaches Telegram with its buttons → the
//! owner presses "allow once" → the node runs the command → the answer goes back to
//! Telegram. The same update delivered again changes nothing. Then a command is interrupted
//! by killing the node mid-job; the restarted node does not run it again and the turn hears
//! it was interrupted.
//!
//! The event source mappings are played by the test (see [`pump_queue`]).

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::Path as UrlPath;
use axum::routing::post;
use axum::{Json, Router};
use clawless_aws::S3ObjectStore;
use clawless_aws::testing::{
    dynamodb_client, fresh_bucket, fresh_fifo_queue, fresh_standard_queue, fresh_table,
    moto_endpoint, moto_sdk_config, s3_client, sqs_client, unique_queue_prefix,
};
use clawless_base::object_store::{ObjectStore, PutCondition};
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_system_tests::{LambdaWatch, pump_queue};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_clawless");
const MESSAGES: &str = "/v1/messages";
const BOT_TOKEN: &str = "4242:system-test-bot";
const SECRET_TOKEN: &str = "system-test-webhook-secret";
const ADMIN_TOKEN: &str = "operator-token-0123456789";
const OWNER: i64 = 4242;
/// The first call to each function waits for `cargo lambda` to build it.
const FIRST_BUILD: Duration = Duration::from_secs(900);
/// Later calls answer from a running function.
const WARM: Duration = Duration::from_secs(120);

/// A fake Telegram Bot API: records `(method, body)` of every call and answers `ok`.
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
                        if bot != format!("bot{BOT_TOKEN}") {
                            return Json(json!({"ok": false, "error_code": 401}));
                        }
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

    fn sent_messages(&self) -> Vec<Value> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(method, _)| method == "sendMessage")
            .map(|(_, body)| body.clone())
            .collect()
    }
}

/// A node process, killed on drop.
struct NodeProcess(Child);

impl Drop for NodeProcess {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _killed = self.0.kill();
            let _reaped = self.0.wait();
        }
    }
}

fn start_node(home: &str) -> NodeProcess {
    NodeProcess(
        Command::new(BIN)
            .args(["node", "run", "--heartbeat-secs", "1", "--node-home", home])
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    )
}

fn anthropic(content: Value, stop_reason: &str) -> ScriptedReply {
    ScriptedReply::json(json!({
        "id": "msg_system", "type": "message", "role": "assistant",
        "model": "claude-test", "content": content, "stop_reason": stop_reason,
        "usage": {"input_tokens": 100, "output_tokens": 10}
    }))
}

fn tool_use(id: &str, name: &str, input: Value) -> ScriptedReply {
    anthropic(
        json!([{"type": "tool_use", "id": id, "name": name, "input": input}]),
        "tool_use",
    )
}

fn text(answer: &str) -> ScriptedReply {
    anthropic(json!([{"type": "text", "text": answer}]), "end_turn")
}

/// The text of the `tool_result` answering `id` in a model request.
fn tool_result(request: &Value, id: &str) -> Option<String> {
    request["messages"]
        .as_array()?
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .find(|block| block["type"] == "tool_result" && block["tool_use_id"] == id)
        .map(|block| match &block["content"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
}

struct System {
    watch: LambdaWatch,
    sqs: aws_sdk_sqs::Client,
    turn_queue: String,
    timer_queue: String,
    telegram: FakeTelegram,
}

impl System {
    /// Posts a Telegram update to the webhook function with the webhook secret.
    fn deliver(&mut self, update: &Value) -> (u16, Value) {
        let body = update.to_string().into_bytes();
        let headers = [
            ("content-type", "application/json"),
            ("x-telegram-bot-api-secret-token", SECRET_TOKEN),
        ];
        let (status, answer) = tokio::task::block_in_place(|| {
            self.watch
                .post("webhook", "/webhook/telegram", &headers, &body, WARM)
        });
        (status, serde_json::from_str(&answer).unwrap_or(Value::Null))
    }

    /// Plays the event source mappings until Telegram has been sent `count` messages.
    async fn wait_for_messages(&mut self, count: usize, within: Duration) -> Vec<Value> {
        let deadline = Instant::now() + within;
        loop {
            let sent = self.telegram.sent_messages();
            if sent.len() >= count {
                return sent;
            }
            assert!(
                Instant::now() < deadline,
                "{} of {count} Telegram messages within {within:?}: {sent:?}",
                sent.len()
            );
            let (turns, timers) = (self.turn_queue.clone(), self.timer_queue.clone());
            pump_queue(&mut self.watch, &self.sqs, "turn", &turns, WARM).await;
            pump_queue(&mut self.watch, &self.sqs, "timers", &timers, WARM).await;
        }
    }

    fn admin(&mut self, method: &'static str, path: &str) -> (u16, Value) {
        let auth = format!("Bearer {ADMIN_TOKEN}");
        let headers = [("authorization", auth.as_str())];
        let (status, body) = tokio::task::block_in_place(|| {
            self.watch.call(method, "nodes", path, &headers, b"", WARM)
        });
        (status, serde_json::from_str(&body).unwrap_or(Value::Null))
    }
}

fn message_update(update_id: u64, text: &str) -> Value {
    json!({
        "update_id": update_id,
        "message": {
            "message_id": update_id,
            "date": 0,
            "chat": {"id": OWNER, "type": "private"},
            "from": {"id": OWNER, "is_bot": false, "first_name": "Owner"},
            "text": text,
        }
    })
}

/// The "allow once" button's callback data on an approval request.
fn allow_once_button(request: &Value) -> String {
    request["reply_markup"]["inline_keyboard"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|row| row.as_array().unwrap().iter())
        .map(|button| button["callback_data"].as_str().unwrap().to_owned())
        .find(|data| data.starts_with("approve:allow-once:"))
        .unwrap_or_else(|| panic!("no allow-once button: {request}"))
}

fn press(update_id: u64, data: &str) -> Value {
    json!({
        "update_id": update_id,
        "callback_query": {
            "id": format!("cb-{update_id}"),
            "from": {"id": OWNER, "is_bot": false, "first_name": "Owner"},
            "message": {"message_id": 1, "date": 0, "chat": {"id": OWNER, "type": "private"}},
            "chat_instance": "1",
            "data": data,
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_telegram_message_runs_a_skill_command_on_a_node_after_a_button_press() {
    // GIVEN a deployment on moto with two skills in S3, a Telegram bot, the scripted model
    let endpoint = moto_endpoint();
    let sdk = moto_sdk_config().await;
    let s3 = s3_client(&sdk);
    let sqs = sqs_client(&sdk);
    let bucket = fresh_bucket(&s3, "system").await;
    let blob_bucket = fresh_bucket(&s3, "system-blobs").await;
    let table = fresh_table(&dynamodb_client(&sdk)).await;
    let turn_queue = fresh_fifo_queue(&sqs).await;
    let timer_queue = fresh_standard_queue(&sqs, Duration::from_secs(30)).await;
    let store = S3ObjectStore::new(s3.clone(), bucket.clone());
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("marker.log");
    let marker_command = format!(
        "echo start >> {m}; sleep 4; echo end >> {m}",
        m = marker.display()
    );
    let skills = [
        ("disk-listing", "ls /".to_owned()),
        ("slow-marker", marker_command.clone()),
    ];
    for (name, command) in &skills {
        store
            .put(
                &format!("skills/bundled/{name}/SKILL.md"),
                format!(
                    "---\nname: {name}\ndescription: System test skill {name}.\n---\n\n# {name}\n\nRun `{command}` with exec.\n"
                )
                .into_bytes(),
                PutCondition::Always,
            )
            .await
            .unwrap();
    }
    let telegram = FakeTelegram::default();
    let telegram_url = telegram.start().await;
    let model = ScriptedServer::start().await;
    let location = |name: &str| format!("s3://{bucket}/skills/bundled/{name}/SKILL.md");
    for reply in [
        tool_use("read-1", "read", json!({"path": location("disk-listing")})),
        tool_use("exec-1", "exec", json!({"command": "ls /"})),
        text("The root directory is listed above."),
        tool_use("read-2", "read", json!({"path": location("slow-marker")})),
        tool_use("exec-2", "exec", json!({"command": marker_command})),
        text("The marker command was interrupted."),
    ] {
        model.push(MESSAGES, reply);
    }
    let config = format!(
        "skills:\n  bundled: s3://{bucket}/skills/bundled\nagents:\n  defaults:\n    workspace: s3://{bucket}/agents/main/workspace\nchannels:\n  telegram:\n    botTokenEnv: TELEGRAM_BOT_TOKEN\n    secretTokenEnv: TELEGRAM_SECRET_TOKEN\n    apiBaseUrl: {telegram_url}\n    owners: [\"{OWNER}\"]\nmodels:\n  primary: anthropic/claude-test\n  maxRetries: 0\n  providers:\n    anthropic:\n      apiKey: test-key\n      baseUrl: {model_url}\nexec:\n  timeoutSec: 20\n  approvalTimeoutSec: 120\n  nodeOfflineAfterSec: 4\n",
        model_url = model.base_url()
    );
    store
        .put("clawless.yaml", config.into_bytes(), PutCondition::Always)
        .await
        .unwrap();
    let env = [
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_ACCESS_KEY_ID", "test".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
        ("ANTHROPIC_API_KEY", String::new()),
        ("OPENAI_API_KEY", String::new()),
        ("TELEGRAM_BOT_TOKEN", BOT_TOKEN.to_owned()),
        ("TELEGRAM_SECRET_TOKEN", SECRET_TOKEN.to_owned()),
        ("CLAWLESS_S3_FORCE_PATH_STYLE", "true".to_owned()),
        ("CLAWLESS_TABLE", table),
        ("CLAWLESS_TURN_QUEUE_URL", turn_queue.clone()),
        ("CLAWLESS_TIMER_QUEUE_URL", timer_queue.clone()),
        ("CLAWLESS_NODE_QUEUE_PREFIX", unique_queue_prefix()),
        (
            "CLAWLESS_NODE_QUEUE_ROLE_ARN",
            "arn:aws:iam::123456789012:role/clawless-node-queue".to_owned(),
        ),
        ("CLAWLESS_ADMIN_TOKEN", ADMIN_TOKEN.to_owned()),
        ("CLAWLESS_BLOB_BUCKET", blob_bucket),
        ("CLAWLESS_CONFIG", format!("s3://{bucket}/clawless.yaml")),
    ];
    let mut system = System {
        watch: LambdaWatch::start(&env),
        sqs,
        turn_queue,
        timer_queue,
        telegram,
    };
    for function in ["turn", "timers"] {
        let (status, answer) = tokio::task::block_in_place(|| {
            system
                .watch
                .invoke(function, &json!({"Records": []}), FIRST_BUILD)
        });
        assert_eq!(status, 200, "{function}: {answer}");
    }
    let (status, _) = tokio::task::block_in_place(|| {
        system
            .watch
            .call("GET", "nodes", "/nodes/admin/nodes", &[], b"", FIRST_BUILD)
    });
    assert_eq!(status, 401, "the operator routes need the token");
    let (status, _) = tokio::task::block_in_place(|| {
        system.watch.post(
            "webhook",
            "/webhook/telegram",
            &[("content-type", "application/json")],
            b"{}",
            FIRST_BUILD,
        )
    });
    assert_eq!(status, 401, "no webhook secret, no entry");

    // AND a real node, paired with an operator's code, whose policy asks for everything
    let (status, code) = system.admin("POST", "/nodes/admin/pairing-codes");
    assert_eq!(status, 200, "{code}");
    let node_home = tempfile::tempdir().unwrap();
    let home = node_home.path().to_str().unwrap().to_owned();
    let nodes_url = format!("http://127.0.0.1:{}/lambda-url/nodes", system.watch.port());
    let paired = Command::new(BIN)
        .args(["node", "pair", "--node-home", &home, "--url", &nodes_url])
        .args(["--code", code["code"].as_str().unwrap()])
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap();
    assert!(
        paired.status.success(),
        "{}",
        String::from_utf8_lossy(&paired.stderr)
    );
    std::fs::write(
        node_home.path().join("exec-approvals.json"),
        json!({"version": 1,
               "defaults": {"security": "allowlist", "ask": "on-miss", "askFallback": "deny"},
               "agents": {"*": {"allowlist": []}}})
        .to_string(),
    )
    .unwrap();
    let node_id = serde_json::from_str::<Value>(
        &std::fs::read_to_string(node_home.path().join("node.json")).unwrap(),
    )
    .unwrap()["nodeId"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut node = start_node(&home);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, shown) = system.admin("GET", &format!("/nodes/admin/nodes/{node_id}"));
        assert_eq!(status, 200, "{shown}");
        if shown["lastSeenMs"].as_u64() > shown["pairedAtMs"].as_u64() {
            break;
        }
        assert!(Instant::now() < deadline, "no heartbeat: {shown}");
        std::thread::sleep(Duration::from_millis(500));
    }

    // WHEN the owner writes to the bot, and Telegram delivers the update twice
    let update = message_update(9001, "What is in the root directory?");
    let (status, _) = system.deliver(&update);
    assert_eq!(status, 200);
    let (status, again) = system.deliver(&update);
    assert_eq!(status, 200, "a retried delivery is acknowledged: {again}");

    // THEN the turn reads the skill from S3, calls exec, and the node's policy asks in the
    // chat, with buttons
    let sent = system.wait_for_messages(1, Duration::from_secs(120)).await;
    let request = &sent[0];
    assert!(
        request["text"]
            .as_str()
            .unwrap()
            .contains("Approval required"),
        "{request}"
    );
    let requests = model.requests_to(MESSAGES);
    assert!(
        tool_result(&requests[1].body, "read-1").is_some_and(|skill| skill.contains("ls /")),
        "the model read the skill from S3"
    );

    // WHEN the owner presses "allow once"
    let (status, answer) = system.deliver(&press(9002, &allow_once_button(request)));
    assert_eq!(status, 200);
    assert_eq!(answer["method"], "answerCallbackQuery", "{answer}");

    // THEN the node runs it, and the answer reaches Telegram
    let sent = system.wait_for_messages(3, Duration::from_secs(120)).await;
    assert!(
        sent[1]["text"]
            .as_str()
            .unwrap()
            .starts_with("Exec finished (node="),
        "{sent:?}"
    );
    assert_eq!(sent[2]["text"], "The root directory is listed above.");
    let requests = model.requests_to(MESSAGES);
    let listing = tool_result(&requests[2].body, "exec-1").unwrap();
    assert!(
        listing.contains("usr") && listing.contains("etc"),
        "the command's real output went to the model: {listing}"
    );
    // AND the duplicate delivery started no second turn
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (turns, timers) = (system.turn_queue.clone(), system.timer_queue.clone());
    pump_queue(&mut system.watch, &system.sqs, "turn", &turns, WARM).await;
    pump_queue(&mut system.watch, &system.sqs, "timers", &timers, WARM).await;
    assert_eq!(
        system.telegram.sent_messages().len(),
        3,
        "nothing sent twice"
    );
    assert_eq!(model.requests_to(MESSAGES).len(), 3, "one turn");

    // WHEN a second command is approved and the node is killed while it runs
    let (status, _) = system.deliver(&message_update(9003, "Run the slow marker."));
    assert_eq!(status, 200);
    let sent = system.wait_for_messages(4, Duration::from_secs(120)).await;
    let (status, _) = system.deliver(&press(9004, &allow_once_button(&sent[3])));
    assert_eq!(status, 200);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&marker).is_ok_and(|text| text.contains("start")) {
        assert!(Instant::now() < deadline, "the command never started");
        pump_queue(&mut system.watch, &system.sqs, "turn", &turns, WARM).await;
    }
    drop(node);
    node = start_node(&home);

    // THEN the restarted node does not run it again, and the turn hears it was interrupted
    let sent = system.wait_for_messages(6, Duration::from_secs(120)).await;
    assert_eq!(sent[5]["text"], "The marker command was interrupted.");
    let requests = model.requests_to(MESSAGES);
    let interrupted = tool_result(&requests[5].body, "exec-2").unwrap();
    assert!(
        interrupted.contains("stopped while the command was running"),
        "{interrupted}"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let log = std::fs::read_to_string(&marker).unwrap();
    assert_eq!(log.matches("start").count(), 1, "ran twice: {log}");
    drop(node);
}
