//! A backgrounded command through the deployed code (issue 35): the real `webhook`, `turn`,
//! `nodes` and `timers` Lambda binaries under `cargo lambda watch`, with S3, DynamoDB, SQS,
//! STS and Secrets Manager on moto, a scripted model on a local fake Anthropic server, and a
//! real `clawless node run` reading its own SQS queue.
//!
//! `exec {command: "sleep 6; echo <word>; touch <end marker>", background: true}` answers at
//! once with a process session id. Right after that answer the node host is killed (SIGKILL)
//! while the command still runs, and a new one is started on the same node home. The command
//! ends under its supervisor; the restarted node reports the exit, and the agent gets the
//! `Exec completed (<id>, code 0) :: <word>` system event exactly once and a turn, in which
//! `process poll` (a job on the node's queue) returns the output.
//!
//! The event source mappings are played by the test: it receives from the turn FIFO queue and
//! the timer queue and hands each message to `turn` / `timers` as an SQS batch.

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::post;
use clawless_aws::S3ObjectStore;
use clawless_aws::testing::{
    dynamodb_client, fresh_bucket, fresh_fifo_queue, fresh_standard_queue, fresh_table,
    moto_endpoint, moto_sdk_config, s3_client, sqs_client, unique_queue_prefix,
};
use clawless_base::object_store::{ObjectStore, PutCondition};
use clawless_channels::{SIGNATURE_HEADER, sign};
use clawless_llm::testing::{RecordedRequest, ScriptedReply, ScriptedServer};
use clawless_system_tests::{LambdaWatch, pump_queue};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_clawless");
const SECRET: &str = "test-secret-0123456789";
const ADMIN_TOKEN: &str = "operator-token-0123456789";
const OWNER: &str = "owner-1";
const MESSAGES: &str = "/v1/messages";
/// What the backgrounded command prints.
const WORD: &str = "wombat-5519";
/// The first call to each function waits for `cargo lambda` to build it.
const FIRST_BUILD: Duration = Duration::from_secs(900);
/// Later calls answer from a running function.
const WARM: Duration = Duration::from_secs(120);
/// How long each step of the flow may take on two loaded cores.
const STEP: Duration = Duration::from_secs(120);

/// Runs `f` on this (multi-threaded) runtime's worker thread: the watch's HTTP calls block.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// The chat replies the generic channel POSTs, counted (the channel needs somewhere to post).
#[derive(Clone)]
struct ReplyReceiver {
    url: String,
    texts: Arc<Mutex<Vec<String>>>,
}

impl ReplyReceiver {
    async fn start() -> Self {
        let texts: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = Arc::clone(&texts);
        let app = Router::new().route(
            "/replies",
            post(move |body: Bytes| {
                let sink = Arc::clone(&sink);
                async move {
                    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let text = body["text"].as_str().unwrap_or_default().to_owned();
                    sink.lock().unwrap().push(text);
                    StatusCode::OK
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/replies", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, texts }
    }

    fn texts(&self) -> Vec<String> {
        self.texts.lock().unwrap().clone()
    }
}

/// A node process, killed (SIGKILL) on drop.
struct NodeProcess(Child);

impl Drop for NodeProcess {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _killed = self.0.kill();
            let _reaped = self.0.wait();
        }
    }
}

/// Starts `clawless node run` on `home`, logging to `home/../node.log`.
fn start_node(home: &Path) -> NodeProcess {
    let log = home.with_file_name("node.log");
    NodeProcess(
        Command::new(BIN)
            .args(["node", "run", "--heartbeat-secs", "1", "--node-home"])
            .arg(home)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("CLAWLESS_NODE_JAIL", "off")
            .stdout(Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(log)
                    .unwrap(),
            )
            .spawn()
            .unwrap(),
    )
}

/// The tool results in the last message of a model request, joined.
fn tool_result_text(request: &RecordedRequest) -> Option<String> {
    let last = request.body["messages"].as_array()?.last()?;
    let blocks = last["content"].as_array()?;
    let texts: Vec<String> = blocks
        .iter()
        .filter(|block| block["type"] == "tool_result")
        .map(|block| match &block["content"] {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|part| part["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        })
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

/// The process session id in a `Command still running (session <id>, …` text.
fn session_id_in(text: &str) -> Option<String> {
    let rest = text.split("Command still running (session ").nth(1)?;
    Some(rest.split(',').next()?.to_owned())
}

fn tool_use(id: &str, name: &str, input: Value) -> ScriptedReply {
    ScriptedReply::json(json!({
        "id": format!("msg_{id}"), "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "tool_use", "id": format!("toolu_{id}"), "name": name, "input": input}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 3}
    }))
}

fn text_reply(id: &str, text: &str) -> ScriptedReply {
    ScriptedReply::json(json!({
        "id": format!("msg_{id}"), "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 3}
    }))
}

/// The model: "start the job" backgrounds `command`; the running result gets "started"; a
/// request carrying the exit event polls the process; the poll's result gets "polled".
fn script(model: &ScriptedServer, command: String) {
    model.respond_with(MESSAGES, move |request| {
        if let Some(result) = tool_result_text(request) {
            if result.starts_with("Command still running") {
                return Some(text_reply("started", "started"));
            }
            return Some(text_reply("polled", "polled"));
        }
        let body = request.body["messages"].to_string();
        if body.contains("Exec completed (") {
            // The event names the first 8 chars of the id; the full id is in the earlier
            // running result.
            let full = body
                .split("Command still running (session ")
                .nth(1)
                .and_then(|rest| rest.split(',').next())
                .unwrap_or_default()
                .to_owned();
            return Some(tool_use(
                "poll",
                "process",
                json!({"action": "poll", "sessionId": full}),
            ));
        }
        let last = request.body["messages"].as_array()?.last()?["content"].to_string();
        if last.contains("start the job") {
            return Some(tool_use(
                "exec",
                "exec",
                json!({"command": command.clone(), "background": true}),
            ));
        }
        Some(text_reply("other", "ok"))
    });
}

/// How many model requests carry the exit event of `WORD` as news (not as the history under
/// a later tool result).
fn exit_requests(requests: &[RecordedRequest]) -> usize {
    requests
        .iter()
        .filter(|request| {
            let body = request.body["messages"].to_string();
            body.contains("Exec completed (") && body.contains(WORD)
        })
        .filter(|request| tool_result_text(request).is_none())
        .count()
}

/// The deployment on moto, the functions under one watch, and the test's side of the event
/// source mappings.
struct Deployment {
    watch: LambdaWatch,
    sqs: aws_sdk_sqs::Client,
    turn_queue: String,
    timer_queue: String,
    model: ScriptedServer,
}

impl Deployment {
    /// Hands what is on the turn and timer queues to `turn` / `timers` once.
    async fn pump(&mut self) {
        let (turns, timers) = (self.turn_queue.clone(), self.timer_queue.clone());
        pump_queue(&mut self.watch, &self.sqs, "turn", &turns, WARM).await;
        pump_queue(&mut self.watch, &self.sqs, "timers", &timers, WARM).await;
    }

    /// Plays the event source mappings until `check` holds for the model's requests, or
    /// fails with `what` after `within`.
    async fn until(
        &mut self, within: Duration, what: &str, check: impl Fn(&[RecordedRequest]) -> bool,
    ) {
        let deadline = Instant::now() + within;
        loop {
            let requests = self.model.requests_to(MESSAGES);
            if check(&requests) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; model requests: {:#?}",
                requests
                    .iter()
                    .map(|request| request.body["messages"].to_string())
                    .collect::<Vec<_>>()
            );
            self.pump().await;
        }
    }

    /// Signs and posts a chat message to the webhook function.
    fn say(&mut self, id: &str, text: &str) {
        let body = serde_json::to_vec(&json!({
            "message_id": id,
            "chat_id": "background-chat",
            "sender_id": OWNER,
            "text": text,
            "chat_type": "direct",
        }))
        .unwrap();
        let signature = sign(SECRET.as_bytes(), &body);
        let headers = [
            ("content-type", "application/json"),
            (SIGNATURE_HEADER, signature.as_str()),
        ];
        let (status, answer) = blocking(|| {
            self.watch
                .post("webhook", "/webhook/generic", &headers, &body, WARM)
        });
        assert_eq!(status, 202, "{answer}");
    }

    fn admin(&mut self, method: &'static str, path: &str) -> (u16, Value) {
        let auth = format!("Bearer {ADMIN_TOKEN}");
        let headers = [("authorization", auth.as_str())];
        let (status, body) =
            blocking(|| self.watch.call(method, "nodes", path, &headers, b"", WARM));
        (status, serde_json::from_str(&body).unwrap_or(Value::Null))
    }
}

fn clawless(args: &[&str]) -> (bool, String) {
    let output = Command::new(BIN)
        .args(args)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap();
    (
        output.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backgrounded_command_survives_a_node_restart_and_its_end_wakes_the_agent_once() {
    // GIVEN a deployment on moto with a scripted model, and a node host paired with it
    let started = Instant::now();
    let endpoint = moto_endpoint();
    let sdk = moto_sdk_config().await;
    let s3 = s3_client(&sdk);
    let sqs = sqs_client(&sdk);
    let bucket = fresh_bucket(&s3, "lambda-bg").await;
    let blob_bucket = fresh_bucket(&s3, "lambda-bg-blobs").await;
    let table = fresh_table(&dynamodb_client(&sdk)).await;
    let turn_queue = fresh_fifo_queue(&sqs).await;
    let timer_queue = fresh_standard_queue(&sqs, Duration::from_secs(30)).await;
    let admin_secret = aws_sdk_secretsmanager::Client::new(&sdk)
        .create_secret()
        .name(format!("clawless/admin-token-{}", unique_queue_prefix()))
        .secret_string(ADMIN_TOKEN)
        .send()
        .await
        .unwrap()
        .arn()
        .unwrap()
        .to_owned();
    let model = ScriptedServer::start().await;
    let scratch = tempfile::tempdir().unwrap();
    let end_marker = scratch.path().join("ended");
    let command = format!("sleep 6; echo {WORD}; touch {}", end_marker.display());
    script(&model, command);
    let receiver = ReplyReceiver::start().await;
    let config = format!(
        "agents:\n  defaults:\n    workspace: s3://{bucket}/agents/main/workspace\n\
         models:\n  primary: anthropic/claude-test\n  maxRetries: 0\n  providers:\n    \
         anthropic:\n      apiKey: test-key\n      baseUrl: {model_url}\n\
         channels:\n  generic:\n    secret: {SECRET}\n    replyUrl: {reply_url}\n    owners: [{OWNER}]\n\
         exec:\n  timeoutSec: 30\n  nodeOfflineAfterSec: 20\n\
         tools:\n  exec:\n    notifyOnExit: true\n",
        model_url = model.base_url(),
        reply_url = receiver.url,
    );
    S3ObjectStore::new(s3.clone(), bucket.clone())
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
        ("CLAWLESS_S3_FORCE_PATH_STYLE", "true".to_owned()),
        ("CLAWLESS_TABLE", table),
        ("CLAWLESS_TURN_QUEUE_URL", turn_queue.clone()),
        ("CLAWLESS_TIMER_QUEUE_URL", timer_queue.clone()),
        ("CLAWLESS_NODE_QUEUE_PREFIX", unique_queue_prefix()),
        (
            "CLAWLESS_NODE_QUEUE_ROLE_ARN",
            "arn:aws:iam::123456789012:role/clawless-node-queue".to_owned(),
        ),
        (
            "CLAWLESS_SECRETS",
            json!({"CLAWLESS_ADMIN_TOKEN": {"secretsManager": admin_secret}}).to_string(),
        ),
        ("CLAWLESS_BLOB_BUCKET", blob_bucket),
        ("CLAWLESS_CONFIG", format!("s3://{bucket}/clawless.yaml")),
    ];
    let mut deployment = Deployment {
        watch: LambdaWatch::start(&env),
        sqs,
        turn_queue,
        timer_queue,
        model,
    };
    // Warm every function up with calls that change nothing.
    let (status, _) = blocking(|| {
        deployment
            .watch
            .call("GET", "nodes", "/nodes/admin/nodes", &[], b"", FIRST_BUILD)
    });
    assert_eq!(status, 401, "the operator routes need the token");
    for function in ["turn", "timers"] {
        let (status, answer) = blocking(|| {
            deployment
                .watch
                .invoke(function, &json!({"Records": []}), FIRST_BUILD)
        });
        assert_eq!(status, 200, "{function}: {answer}");
    }
    let (status, _) = blocking(|| {
        deployment.watch.post(
            "webhook",
            "/webhook/nope",
            &[("content-type", "application/json")],
            b"{}",
            FIRST_BUILD,
        )
    });
    assert_eq!(status, 404);
    let built = started.elapsed();

    let (status, code) = deployment.admin("POST", "/nodes/admin/pairing-codes");
    assert_eq!(status, 200, "{code}");
    let code = code["code"].as_str().unwrap().to_owned();
    let node_home = scratch.path().join("node");
    let home = node_home.to_str().unwrap().to_owned();
    let nodes_url = format!(
        "http://127.0.0.1:{}/lambda-url/nodes",
        deployment.watch.port()
    );
    let (ok, out) = clawless(&[
        "node",
        "pair",
        "--node-home",
        &home,
        "--url",
        &nodes_url,
        "--code",
        &code,
    ]);
    assert!(ok, "{out}");
    std::fs::write(
        node_home.join("exec-approvals.json"),
        json!({"version": 1, "defaults": {"security": "full", "ask": "off"}}).to_string(),
    )
    .unwrap();
    let node_config: Value =
        serde_json::from_str(&std::fs::read_to_string(node_home.join("node.json")).unwrap())
            .unwrap();
    let node_id = node_config["nodeId"].as_str().unwrap().to_owned();
    let node = start_node(&node_home);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, shown) = deployment.admin("GET", &format!("/nodes/admin/nodes/{node_id}"));
        assert_eq!(status, 200, "{shown}");
        if shown["lastSeenMs"].as_u64() > shown["pairedAtMs"].as_u64() {
            break;
        }
        assert!(Instant::now() < deadline, "no heartbeat: {shown}");
        std::thread::sleep(Duration::from_millis(500));
    }

    // WHEN the model backgrounds the command
    deployment.say("m-1", "start the job");
    // THEN the call answers with a process session id and no output
    deployment
        .until(STEP, "the running result", |requests| {
            requests.iter().filter_map(tool_result_text).count() >= 1
        })
        .await;
    let results: Vec<String> = deployment
        .model
        .requests_to(MESSAGES)
        .iter()
        .filter_map(tool_result_text)
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    let session_id =
        session_id_in(&results[0]).unwrap_or_else(|| panic!("no session id in {:?}", results[0]));
    assert!(
        results[0].ends_with("Use process (list/poll/log/write/kill/clear/remove) for follow-up."),
        "{}",
        results[0]
    );
    assert!(!results[0].contains(WORD), "{}", results[0]);

    // WHEN the node host is killed while the command still runs, and started again
    drop(node);
    assert!(
        !end_marker.exists(),
        "the command ended before the node was killed: the restart proves nothing"
    );
    let _node = start_node(&node_home);

    // THEN the command ends under its supervisor, the restarted node reports it, and the
    // agent gets the exit event with the output and a turn, which polls the process
    deployment
        .until(STEP, "the exit event", |requests| {
            exit_requests(requests) >= 1
        })
        .await;
    assert!(end_marker.exists(), "the command did not run to its end");
    let exit_request = deployment
        .model
        .requests_to(MESSAGES)
        .into_iter()
        .find(|request| exit_requests(std::slice::from_ref(request)) == 1)
        .unwrap();
    let body = exit_request.body["messages"].to_string();
    let short: String = session_id.chars().take(8).collect();
    assert!(
        body.contains(&format!("Exec completed ({short}, code 0) :: {WORD}")),
        "{body}"
    );
    deployment
        .until(STEP, "the poll's result", |requests| {
            requests.iter().filter_map(tool_result_text).count() >= 2
        })
        .await;
    let polled: Vec<String> = deployment
        .model
        .requests_to(MESSAGES)
        .iter()
        .filter_map(tool_result_text)
        .collect();
    assert_eq!(polled.len(), 2, "{polled:?}");
    assert!(
        polled[1].contains(WORD),
        "process poll returns the output: {polled:?}"
    );

    // AND the exit wakes the agent exactly once: the queues stay drained of more exit turns
    let settle = Instant::now() + Duration::from_secs(15);
    while Instant::now() < settle {
        deployment.pump().await;
    }
    assert_eq!(
        exit_requests(&deployment.model.requests_to(MESSAGES)),
        1,
        "the exit event woke the agent more than once"
    );
    // The first turn's answer reached the chat through the generic channel.
    let replies = receiver.texts();
    assert!(
        replies.iter().any(|text| text == "started"),
        "the chat got the first turn's answer: {replies:?}"
    );
    eprintln!(
        "exec_background_lambda: functions ready after {built:?}, whole test {:?}",
        started.elapsed()
    );
}
