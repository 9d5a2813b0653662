//! Exec on a node host through the deployed code: the real `webhook`, `turn`, `nodes` and
//! `timers` Lambda binaries under `cargo lambda watch`, with S3, DynamoDB, SQS and STS on
//! moto, and a real `clawless node run` process reading its own SQS queue with credentials
//! the `nodes` function vends (STS AssumeRole), running real commands.
//!
//! The event source mappings are played by the test: it receives from the turn FIFO queue
//! and the timer queue and hands each message to `turn` / `timers` as an SQS batch.
//!
//! Covered: the operator's pairing code and `clawless nodes --url`; pairing and heartbeats; an
//! allowlisted command runs and the answer carries its output; approval asked in the chat,
//! then `allow-once` runs it; `allow-always` (the same command then runs without asking);
//! denied in the chat; the approval timeout through the timer queue applies askFallback
//! (deny); a command timeout; a node killed mid-job and restarted (not run twice, the turn
//! hears it was interrupted); a node offline; security=deny on the node; hostile jobs put on the node's queue (forged,
//! expired, for another node, a grant for another command: each deleted unrun); a forged
//! result (401); a revoked node (no credentials, its worker stops).

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
use clawless_system_tests::{LambdaWatch, control_job, hostile_jobs, pump_queue};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_clawless");
const SECRET: &str = "test-secret-0123456789";
const ADMIN_TOKEN: &str = "operator-token-0123456789";
const OWNER: &str = "owner-1";
/// The first call to each function waits for `cargo lambda` to build it.
const FIRST_BUILD: Duration = Duration::from_secs(900);
/// Later calls answer from a running function.
const WARM: Duration = Duration::from_secs(120);

/// `(skill name, command)`: the offline model reads the skill the message names and runs
/// its ` ```sh exec ` block.
const SKILLS: &[(&str, &str)] = &[
    ("alpha-greeting", "echo hello-from-lambda-node"),
    ("bravo-listing", "ls /"),
    ("charlie-sleeper", "sleep 30"),
    ("echo-year", "date -u +%Y"),
];

fn skill_md(name: &str, command: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: Test skill {name} for exec on a node host.\n---\n\n# {name}\n\nRun with exec:\n\n```sh exec\n{command}\n```\n"
    )
}

/// Runs `f` on this (multi-threaded) runtime's worker thread: the watch's HTTP calls block.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// Every chat reply POSTed to `url`, as text.
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

/// The deployment on moto, the functions under one watch, and the test's side of the event
/// source mappings.
struct Deployment {
    watch: LambdaWatch,
    sqs: aws_sdk_sqs::Client,
    turn_queue: String,
    timer_queue: String,
    receiver: ReplyReceiver,
    seen: usize,
    sent: usize,
}

impl Deployment {
    /// Hands what is on `queue_url` to `function`, as the event source mapping would.
    async fn pump(&mut self, function: &str, queue_url: &str) -> usize {
        pump_queue(&mut self.watch, &self.sqs, function, queue_url, WARM).await
    }

    /// Signs and posts a chat message to the webhook function.
    fn say(&mut self, text: &str) {
        self.sent += 1;
        let body = serde_json::to_vec(&json!({
            "message_id": format!("m-{}", self.sent),
            "chat_id": "exec-chat",
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

    /// Plays the event source mappings until the next chat reply arrives.
    async fn reply(&mut self, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            if let Some(text) = self.receiver.texts().get(self.seen) {
                self.seen += 1;
                return text.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no reply within {within:?}; replies so far: {:?}",
                self.receiver.texts()
            );
            let (turns, timers) = (self.turn_queue.clone(), self.timer_queue.clone());
            self.pump("turn", &turns).await;
            self.pump("timers", &timers).await;
        }
    }

    /// Says `text` and returns the `/approve` code of the approval request that follows.
    async fn ask(&mut self, text: &str) -> String {
        self.say(text);
        let request = self.reply(Duration::from_secs(60)).await;
        assert!(request.contains("Approval required (id "), "{request}");
        request
            .split("Reply with: /approve ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap()
            .to_owned()
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

fn write_policy(node_home: &Path, security: &str) {
    let approvals = json!({
        "version": 1,
        "defaults": {"security": security, "ask": "on-miss", "askFallback": "deny"},
        "agents": {"*": {"allowlist": [
            {"pattern": "/usr/bin/echo", "argPattern": "^hello-from-lambda-node$"},
            {"pattern": "/bin/echo", "argPattern": "^hello-from-lambda-node$"},
            {"pattern": "/usr/bin/sleep", "argPattern": "^30$"},
            {"pattern": "/bin/sleep", "argPattern": "^30$"},
            {"pattern": "/usr/bin/touch"},
            {"pattern": "/bin/touch"}
        ]}}
    });
    std::fs::write(
        node_home.join("exec-approvals.json"),
        serde_json::to_string_pretty(&approvals).unwrap(),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exec_through_the_lambdas_runs_asks_and_refuses_on_a_real_node_reading_sqs() {
    // GIVEN a deployment on moto: skills and config in a bucket, the table, the turn FIFO
    // queue, the timer queue, and a prefix for the node queues the nodes function creates
    let started = Instant::now();
    let endpoint = moto_endpoint();
    let sdk = moto_sdk_config().await;
    let s3 = s3_client(&sdk);
    let sqs = sqs_client(&sdk);
    let bucket = fresh_bucket(&s3, "lambda-exec").await;
    let blob_bucket = fresh_bucket(&s3, "lambda-exec-blobs").await;
    let table = fresh_table(&dynamodb_client(&sdk)).await;
    let turn_queue = fresh_fifo_queue(&sqs).await;
    let timer_queue = fresh_standard_queue(&sqs, Duration::from_secs(30)).await;
    // The operator token is a Secrets Manager secret resolved at cold start, as the template
    // deploys it (`CLAWLESS_SECRETS`), never a plain environment value.
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
    let store = S3ObjectStore::new(s3.clone(), bucket.clone());
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("marker.log");
    let marker_command = format!(
        "echo start >> {m}; sleep 4; echo end >> {m}",
        m = marker.display()
    );
    let skills = SKILLS
        .iter()
        .copied()
        .chain([("delta-marker", marker_command.as_str())]);
    for (name, command) in skills {
        store
            .put(
                &format!("skills/bundled/{name}/SKILL.md"),
                skill_md(name, command).into_bytes(),
                PutCondition::Always,
            )
            .await
            .unwrap();
    }
    let receiver = ReplyReceiver::start().await;
    let config = format!(
        "skills:\n  bundled: s3://{bucket}/skills/bundled\nagents:\n  defaults:\n    workspace: s3://{bucket}/agents/main/workspace\nchannels:\n  generic:\n    secret: {SECRET}\n    replyUrl: {url}\n    owners: [{OWNER}]\nexec:\n  timeoutSec: 6\n  approvalTimeoutSec: 8\n  nodeOfflineAfterSec: 4\n",
        url = receiver.url
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
        receiver,
        seen: 0,
        sent: 0,
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

    // WHEN the operator makes a pairing code and a real node pairs with it
    let (status, code) = deployment.admin("POST", "/nodes/admin/pairing-codes");
    assert_eq!(status, 200, "{code}");
    let code = code["code"].as_str().unwrap().to_owned();
    let node_home = tempfile::tempdir().unwrap();
    let home = node_home.path().to_str().unwrap().to_owned();
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
    let (ok, again) = clawless(&[
        "node",
        "pair",
        "--node-home",
        &home,
        "--url",
        &nodes_url,
        "--code",
        &code,
    ]);
    assert!(!ok, "a pairing code works once: {again}");
    write_policy(node_home.path(), "allowlist");
    let node_config: Value =
        serde_json::from_str(&std::fs::read_to_string(node_home.path().join("node.json")).unwrap())
            .unwrap();
    let node_id = node_config["nodeId"].as_str().unwrap().to_owned();
    let node_secret = node_config["secret"].as_str().unwrap().to_owned();
    assert!(
        node_config["queue"]
            .as_str()
            .is_some_and(|queue| queue.starts_with("http")),
        "the node was given its SQS queue URL: {node_config}"
    );
    let mut node = start_node(&home);

    // THEN its heartbeats reach the registry
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

    // WHEN a message needs an allowlisted command
    deployment.say("alpha greeting");
    // THEN the node runs it from its queue and the answer carries the output
    let answer = deployment.reply(Duration::from_secs(90)).await;
    assert!(answer.contains("hello-from-lambda-node"), "{answer}");

    // WHEN a command is not in the node's allowlist, the chat is asked; allow-once runs it
    let slug = deployment.ask("bravo listing").await;
    deployment.say(&format!("/approve {slug} allow-once"));
    let finished = deployment.reply(Duration::from_secs(90)).await;
    assert!(finished.starts_with("Exec finished (node="), "{finished}");
    let answer = deployment.reply(Duration::from_secs(60)).await;
    assert!(answer.contains("I ran `ls /`"), "{answer}");

    // WHEN the chat denies, nothing runs and the model hears why
    let slug = deployment.ask("bravo listing").await;
    deployment.say(&format!("/approve {slug} deny"));
    let denied = deployment.reply(Duration::from_secs(60)).await;
    assert!(
        denied.starts_with("Exec denied (node=") && denied.ends_with("user-denied): ls /"),
        "{denied}"
    );
    let answer = deployment.reply(Duration::from_secs(60)).await;
    assert!(answer.contains("did not approve"), "{answer}");

    // WHEN the chat allows always, the entry is recorded (seen through the operator CLI
    // against the deployed API) and the same command then runs without asking
    let slug = deployment.ask("echo year").await;
    deployment.say(&format!("/approve {slug} allow-always"));
    let finished = deployment.reply(Duration::from_secs(90)).await;
    assert!(finished.starts_with("Exec finished"), "{finished}");
    let year = deployment.reply(Duration::from_secs(60)).await;
    assert!(year.contains("I ran `date -u +%Y`"), "{year}");
    let listed = Command::new(BIN)
        .args(["nodes", "--url", &nodes_url, "list", "--json"])
        .env("CLAWLESS_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .unwrap();
    assert!(listed.status.success(), "{listed:?}");
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let granted = listed[0]["granted"].as_array().unwrap();
    assert_eq!(granted.len(), 1, "{listed}");
    assert!(granted[0]["argPattern"].as_str().is_some(), "{listed}");
    // The node takes the signed policy update from its queue or its next heartbeat.
    tokio::time::sleep(Duration::from_secs(2)).await;
    deployment.say("echo year");
    let again = deployment.reply(Duration::from_secs(90)).await;
    assert!(
        again.contains("I ran `date -u +%Y`"),
        "asked again: {again}"
    );

    // WHEN nobody answers, the approval timeout comes back through the timer queue and the
    // timers function, and askFallback (deny) applies
    deployment.ask("bravo listing").await;
    let timed_out = deployment.reply(Duration::from_secs(60)).await;
    assert!(timed_out.contains("approval-timeout): ls /"), "{timed_out}");
    deployment.reply(Duration::from_secs(60)).await;

    // WHEN a command outlives its timeout, the node kills it and says so
    deployment.say("charlie sleeper");
    let answer = deployment.reply(Duration::from_secs(90)).await;
    assert!(answer.contains("timed out"), "{answer}");

    // WHEN the node is killed mid-command and restarted, the command is not run again and
    // the turn hears it was interrupted
    let slug = deployment.ask("delta marker").await;
    deployment.say(&format!("/approve {slug} allow-once"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&marker).is_ok_and(|text| text.contains("start")) {
        assert!(Instant::now() < deadline, "the command never started");
        let turns = deployment.turn_queue.clone();
        deployment.pump("turn", &turns).await;
    }
    drop(node);
    node = start_node(&home);
    let notice = deployment.reply(Duration::from_secs(90)).await;
    assert!(notice.starts_with("Exec finished"), "{notice}");
    let answer = deployment.reply(Duration::from_secs(60)).await;
    assert!(
        answer.contains("stopped while the command was running"),
        "{answer}"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let log = std::fs::read_to_string(&marker).unwrap();
    assert_eq!(log.matches("start").count(), 1, "ran twice: {log}");

    // WHEN hostile jobs land on the node's queue (forged, expired, for another node, with a
    // grant for another command), each is deleted without running
    let node_queue = node_config["queue"].as_str().unwrap().to_owned();
    let hostile = hostile_jobs(&node_id, &node_secret, scratch.path());
    // And their well-formed twin, which runs: the hostile ones fail for what they are.
    let (control, control_marker) = control_job(&node_id, &node_secret, scratch.path());
    let bodies = hostile.iter().map(|(_, body, _)| body).chain([&control]);
    for body in bodies {
        deployment
            .sqs
            .send_message()
            .queue_url(&node_queue)
            .message_body(body)
            .send()
            .await
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let attributes = deployment
            .sqs
            .get_queue_attributes()
            .queue_url(&node_queue)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All)
            .send()
            .await
            .unwrap();
        let count = |name: aws_sdk_sqs::types::QueueAttributeName| {
            attributes
                .attributes()
                .and_then(|all| all.get(&name))
                .and_then(|value| value.parse::<u64>().ok())
                .unwrap_or(0)
        };
        // The killed node's job may still be in flight (hidden) until its lease ends; the
        // hostile ones must be neither visible nor in flight beyond that one.
        let visible = count(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages);
        let hidden =
            count(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible);
        if visible == 0 && hidden <= 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "hostile jobs stayed on the queue: {visible} visible, {hidden} in flight"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    for (what, _, marker) in &hostile {
        assert!(!marker.exists(), "a job {what} ran");
    }
    assert!(control_marker.exists(), "the well-formed twin did not run");

    // WHEN the node stops, it is offline once not seen for nodeOfflineAfterSec
    drop(node);
    tokio::time::sleep(Duration::from_secs(6)).await;
    deployment.say("alpha greeting");
    let answer = deployment.reply(Duration::from_secs(60)).await;
    assert!(answer.contains("offline"), "{answer}");
    // The stopped node's last long poll may take the next job as it arrives; the job comes
    // back to the restarted node when that poll's lease ends (30 s).
    node = start_node(&home);

    // WHEN the node's own policy says security=deny, nothing runs, with the exact reason
    write_policy(node_home.path(), "deny");
    deployment.say("alpha greeting");
    let answer = deployment.reply(Duration::from_secs(60)).await;
    assert!(
        answer.contains("SYSTEM_RUN_DISABLED: security=deny"),
        "{answer}"
    );

    // THEN a result with a forged signature is refused
    let node_auth = format!("Bearer {node_id}:{node_secret}");
    let headers = [
        ("authorization", node_auth.as_str()),
        ("content-type", "application/json"),
    ];
    let forged = json!({"payload": "{\"jobId\":\"x\"}", "signature": "00"}).to_string();
    let (status, _) = blocking(|| {
        deployment
            .watch
            .post("nodes", "/nodes/results", &headers, forged.as_bytes(), WARM)
    });
    assert_eq!(status, 401, "a result with a bad signature");

    // WHEN the operator revokes the node
    let (status, revoked) =
        deployment.admin("POST", &format!("/nodes/admin/nodes/{node_id}/revoke"));
    assert_eq!((status, revoked), (200, json!({"revoked": true})));
    // THEN it gets no more credentials, and its worker stops on the 401
    let (status, _) = blocking(|| {
        deployment
            .watch
            .post("nodes", "/nodes/credentials", &headers, b"{}", WARM)
    });
    assert_eq!(status, 401);
    let deadline = Instant::now() + Duration::from_secs(60);
    let exit = loop {
        if let Some(status) = node.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the revoked node kept running");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(!exit.success(), "a revoked node exits with an error");
    eprintln!(
        "exec_lambda: functions ready after {built:?}, whole test {:?}",
        started.elapsed()
    );
}
