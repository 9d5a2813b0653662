//! The sandbox end to end: a real `clawless local`, a scripted model, and a real node host
//! (`clawless node run`, with bubblewrap, which the test command installs). A friend in a
//! group chat (admitted, not an owner) and the owner in their own chat ask for the same
//! things:
//! - "write SOUL.md": the friend's write lands in the group's sandbox copy; the agent's
//!   `SOUL.md` and the owner's next prompt are unchanged; the owner's own write lands;
//! - `MEMORY.md` and `memory/*.md`: the friend gets them by neither `read`, `memory_search`
//!   nor `memory_get` (the memory tools are not even offered), and no prompt of theirs holds them;
//! - `id -u`, allowlisted on the node: the owner's runs as the node's user, the friend's as
//!   uid 65534 in the node's jail;
//! - a node host without a jail: the friend is not offered `exec`, and a sandbox job put on its
//!   queue is refused, never run on the bare host.

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clawless_channels::sign;
use clawless_core::nodes::ExecQueue;
use clawless_llm::testing::{RecordedRequest, ScriptedReply, ScriptedServer};
use clawless_local::sqlite::{SqliteDb, SqliteExecQueue};
use serde_json::{Value, json};
use support::{BIN, Local, free_port, replies, start_local, text_reply};

const MESSAGES: &str = "/v1/messages";
const GROUP: &str = "family-group";
const FRIEND: &str = "friend-7";
const OWNER_CHAT: &str = "owner-dm";
const OWNER: &str = "local-user";
const SOUL: &str = "# SOUL.md\n\nCalm and kind. soul-original-5150\n";
const MEMORY_CANARY: &str = "memory-canary-8812";
const DAILY_CANARY: &str = "daily-canary-3391";
/// The uid a jailed command runs as.
const JAIL_UID: &str = "65534";

/// The text of the last message of a request: its text blocks and tool results.
fn last_text(request: &RecordedRequest) -> String {
    let Some(last) = request.body["messages"].as_array().and_then(|m| m.last()) else {
        return String::new();
    };
    match &last["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|block| match &block["content"] {
                Value::String(text) => text.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|part| part["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => block["text"].as_str().unwrap_or_default().to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn is_tool_result(request: &RecordedRequest) -> bool {
    request.body["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .and_then(|last| last["content"].as_array())
        .is_some_and(|blocks| blocks.iter().any(|block| block["type"] == "tool_result"))
}

fn tool_use(name: &str, input: Value) -> ScriptedReply {
    ScriptedReply::json(json!({
        "id": "msg_tool", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "tool_use", "id": format!("toolu_{name}"), "name": name, "input": input}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 3}
    }))
}

/// The model: each request asks for one tool by the words of the message, and a tool's
/// result comes back to the chat as `RESULT: <result>`.
fn script(model: &ScriptedServer) {
    model.respond_with(MESSAGES, |request| {
        let last = last_text(request);
        if is_tool_result(request) {
            return Some(text_reply("result", &format!("RESULT: {last}")));
        }
        let asks = [
            (
                "friend writes soul",
                "write",
                json!({"path": "SOUL.md", "content": "PWNED by a friend-8080"}),
            ),
            (
                "owner writes soul",
                "write",
                json!({"path": "SOUL.md", "content": "# SOUL.md\n\nowner-edit-77\n"}),
            ),
            ("read memory", "read", json!({"path": "MEMORY.md"})),
            (
                "read the daily note",
                "read",
                json!({"path": "memory/2026-11-28.md"}),
            ),
            (
                "read through dots",
                "read",
                json!({"path": "../../MEMORY.md"}),
            ),
            ("search memory", "memory_search", json!({"query": "canary"})),
            ("get memory", "memory_get", json!({"path": "MEMORY.md"})),
            ("who runs", "exec", json!({"command": "id -u"})),
        ];
        for (words, tool, input) in asks {
            if last.contains(words) {
                return Some(tool_use(tool, input));
            }
        }
        Some(text_reply("hello", "Hello!"))
    });
}

struct System {
    model: ScriptedServer,
    root: tempfile::TempDir,
    port: u16,
    local: Option<Local>,
    node: Option<Child>,
    secret: String,
    http: reqwest::Client,
    sent: usize,
}

impl Drop for System {
    fn drop(&mut self) {
        self.stop_node();
    }
}

impl System {
    async fn start() -> Self {
        let model = ScriptedServer::start().await;
        script(&model);
        let root = tempfile::tempdir().unwrap();
        // The agent's workspace, in use already: its soul and its private memory.
        let workspace = root.path().join("state/workspace");
        std::fs::create_dir_all(workspace.join("memory")).unwrap();
        std::fs::write(workspace.join("SOUL.md"), SOUL).unwrap();
        std::fs::write(
            workspace.join("MEMORY.md"),
            format!("# Memory\n\nThe owner's bank PIN hint: {MEMORY_CANARY}\n"),
        )
        .unwrap();
        std::fs::write(
            workspace.join("memory/2026-11-28.md"),
            format!("Private day note {DAILY_CANARY}\n"),
        )
        .unwrap();
        std::fs::write(
            root.path().join("clawless.yaml"),
            format!(
                "models:\n  primary: anthropic/claude-test\n  maxRetries: 0\n  providers:\n    \
                 anthropic:\n      apiKey: test-key\n      baseUrl: {}\n\
                 exec:\n  timeoutSec: 10\n  nodeOfflineAfterSec: 4\n",
                model.base_url()
            ),
        )
        .unwrap();
        let port = free_port();
        let local = start_local(root.path(), port);
        let registry = root.path().join("state/clawless.db");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !registry.is_file() {
            assert!(Instant::now() < deadline, "no local registry");
            std::thread::sleep(Duration::from_millis(50));
        }
        let secret = std::fs::read_to_string(root.path().join("state/generic.secret")).unwrap();
        Self {
            model,
            root,
            port,
            local: Some(local),
            node: None,
            secret,
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
            sent: 0,
        }
    }

    fn state(&self) -> PathBuf {
        self.root.path().join("state")
    }

    fn workspace(&self) -> PathBuf {
        self.state().join("workspace")
    }

    fn node_home(&self) -> PathBuf {
        self.root.path().join("node")
    }

    fn clawless(&self, args: &[&str]) -> String {
        let output = Command::new(BIN).args(args).output().unwrap();
        assert!(
            output.status.success(),
            "clawless {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Pairs a node host whose policy allows exactly `id -u` and `touch`.
    fn pair_node(&self) {
        let state = self.state();
        let code = self.clawless(&["nodes", "pair", "--state-dir", state.to_str().unwrap()]);
        let home = self.node_home();
        self.clawless(&[
            "node",
            "pair",
            "--node-home",
            home.to_str().unwrap(),
            "--url",
            &format!("http://127.0.0.1:{}", self.port),
            "--code",
            code.trim(),
        ]);
        let mut allowlist = Vec::new();
        for dir in ["/usr/bin", "/bin"] {
            allowlist.push(json!({"pattern": format!("{dir}/id"), "argPattern": "^-u$"}));
            allowlist.push(json!({"pattern": format!("{dir}/touch")}));
        }
        std::fs::write(
            home.join("exec-approvals.json"),
            json!({
                "version": 1,
                "defaults": {"security": "allowlist", "ask": "off", "askFallback": "deny"},
                "agents": {"*": {"allowlist": allowlist}}
            })
            .to_string(),
        )
        .unwrap();
    }

    /// Starts `clawless node run` (`jail: false` starts it without one) and waits for its
    /// first heartbeat.
    fn start_node(&mut self, jail: bool) {
        let mut command = Command::new(BIN);
        command
            .args(["node", "run", "--heartbeat-secs", "1", "--node-home"])
            .arg(self.node_home())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if !jail {
            command.env("CLAWLESS_NODE_JAIL", "off");
        }
        self.node = Some(command.spawn().unwrap());
        std::thread::sleep(Duration::from_millis(2_000));
    }

    fn stop_node(&mut self) {
        if let Some(mut node) = self.node.take() {
            let _killed = node.kill();
            let _reaped = node.wait();
        }
    }

    async fn post(&mut self, chat: &str, sender: &str, chat_type: &str, text: &str) {
        self.sent += 1;
        let body = serde_json::to_vec(&json!({
            "message_id": format!("m-{}", self.sent), "chat_id": chat, "sender_id": sender,
            "text": text, "chat_type": chat_type,
        }))
        .unwrap();
        let accepted = self
            .http
            .post(format!("http://127.0.0.1:{}/webhook/generic", self.port))
            .header("content-type", "application/json")
            .header(
                "x-clawless-signature",
                sign(self.secret.trim().as_bytes(), &body),
            )
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(accepted.status().as_u16(), 202);
    }

    /// Says `text` in `chat` and returns the reply that follows.
    async fn ask(&mut self, chat: &str, sender: &str, text: &str) -> String {
        let chat_type = if chat == GROUP { "group" } else { "direct" };
        let before = replies(&self.http, self.port, chat).await.len();
        self.post(chat, sender, chat_type, text).await;
        let deadline = Instant::now() + Duration::from_secs(40);
        loop {
            if let Some(reply) = replies(&self.http, self.port, chat).await.get(before) {
                return reply.clone();
            }
            assert!(Instant::now() < deadline, "no reply to {text:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn friend(&mut self, text: &str) -> String {
        self.ask(GROUP, FRIEND, text).await
    }

    async fn owner(&mut self, text: &str) -> String {
        self.ask(OWNER_CHAT, OWNER, text).await
    }

    /// The model requests made for the message whose text contains `words`, first one.
    fn request_for(&self, words: &str) -> RecordedRequest {
        self.model
            .requests_to(MESSAGES)
            .into_iter()
            .find(|request| last_text(request).contains(words))
            .unwrap_or_else(|| panic!("no model request for {words:?}"))
    }

    /// Every model request made in the group's session.
    fn group_requests(&self) -> Vec<RecordedRequest> {
        self.model
            .requests_to(MESSAGES)
            .into_iter()
            .filter(|request| request.raw_body.contains(FRIEND))
            .collect()
    }

    fn read_workspace(&self, file: &str) -> String {
        std::fs::read_to_string(self.workspace().join(file)).unwrap()
    }
}

fn tool_names(request: &RecordedRequest) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
        .collect()
}

fn own_uid() -> String {
    let output = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_friend_in_a_group_is_sandboxed_and_the_owner_is_not() {
    let mut system = System::start().await;
    system.pair_node();
    system.start_node(true);

    // GIVEN a friend in a group chat, WHEN they have SOUL.md rewritten
    let wrote = system.friend("please, friend writes soul").await;
    assert!(wrote.starts_with("RESULT:"), "{wrote}");
    // THEN the agent's SOUL.md is untouched, and so is the owner's next prompt
    assert_eq!(system.read_workspace("SOUL.md"), SOUL);
    let hello = system.owner("owner says hello-after-the-friend").await;
    assert_eq!(hello, "Hello!");
    let owner_prompt = system.request_for("hello-after-the-friend").raw_body;
    assert!(owner_prompt.contains("soul-original-5150"));
    assert!(!owner_prompt.contains("friend-8080"));
    // (the friend's write went to the group's own copy)
    let sandboxes = system.workspace().join(".sandboxes");
    let copies: Vec<String> = std::fs::read_dir(&sandboxes)
        .unwrap()
        .map(|entry| {
            std::fs::read_to_string(entry.unwrap().path().join("SOUL.md")).unwrap_or_default()
        })
        .collect();
    assert!(
        copies.iter().any(|soul| soul.contains("friend-8080")),
        "{copies:?}"
    );

    // WHEN the friend goes for the owner's memory, by every road
    for ask in [
        "read memory",
        "read the daily note",
        "read through dots",
        "search memory",
        "get memory",
    ] {
        let answer = system.friend(ask).await;
        // THEN nothing of it comes back
        assert!(answer.starts_with("RESULT:"), "{ask}: {answer}");
        assert!(!answer.contains(MEMORY_CANARY), "{ask}: {answer}");
        assert!(!answer.contains(DAILY_CANARY), "{ask}: {answer}");
    }
    for request in system.group_requests() {
        assert!(!request.raw_body.contains(MEMORY_CANARY));
        assert!(!request.raw_body.contains(DAILY_CANARY));
        let tools = tool_names(&request);
        assert!(
            !tools.iter().any(|tool| tool.starts_with("memory_")),
            "{tools:?}"
        );
    }
    // WHEN both run the allowlisted `id -u`
    let friend_uid = system.friend("who runs this?").await;
    let owner_uid = system.owner("who runs this, for me?").await;
    // THEN the friend's ran in the jail as another uid, the owner's as the node's user
    assert_ne!(own_uid(), JAIL_UID);
    assert_eq!(friend_uid, format!("RESULT: {JAIL_UID}"));
    assert_eq!(owner_uid, format!("RESULT: {}", own_uid()));
    assert!(
        tool_names(&system.request_for("who runs this?"))
            .iter()
            .any(|tool| tool == "exec"),
        "the friend is offered exec while a node runs a jail"
    );

    // AND the owner's own chat keeps writing the agent's workspace
    let wrote = system.owner("owner writes soul").await;
    assert!(wrote.starts_with("RESULT:"), "{wrote}");
    assert!(system.read_workspace("SOUL.md").contains("owner-edit-77"));
    drop(system.local.take());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_a_jail_gets_no_sandboxed_command_and_refuses_one_sent_to_it() {
    let mut system = System::start().await;
    system.pair_node();
    system.start_node(false);

    // The friend is not offered exec: no node runs a jail.
    let answer = system.friend("who runs this?").await;
    assert_ne!(answer, format!("RESULT: {JAIL_UID}"));
    assert_ne!(answer, format!("RESULT: {}", own_uid()));
    let tools = tool_names(&system.request_for("who runs this?"));
    assert!(!tools.iter().any(|tool| tool == "exec"), "{tools:?}");
    // The owner still is, and it runs.
    let owner_uid = system.owner("who runs this, for me?").await;
    assert_eq!(owner_uid, format!("RESULT: {}", own_uid()));

    // A well-signed sandbox job put straight on its queue is refused, not run bare.
    let node: Value = serde_json::from_str(
        &std::fs::read_to_string(system.node_home().join("node.json")).unwrap(),
    )
    .unwrap();
    let markers = system.root.path().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let (body, bare_marker) = clawless_system_tests::sandbox_job(
        node["nodeId"].as_str().unwrap(),
        node["secret"].as_str().unwrap(),
        &markers,
    );
    let queue = node["queue"].as_str().unwrap();
    let queues = SqliteExecQueue::new(SqliteDb::open(system.state().join("clawless.db")).unwrap());
    queues.send(queue, &body).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while queues.live_count(queue).await.unwrap() > 0 {
        assert!(Instant::now() < deadline, "the sandbox job stayed queued");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(!bare_marker.exists(), "a sandbox job ran on the bare host");
    assert!(
        !jailed_marker_exists(&system.node_home()),
        "a node without a jail ran a sandbox job"
    );

    // The same job on a node with a jail runs, inside it.
    system.stop_node();
    system.start_node(true);
    let (body, bare_marker) = clawless_system_tests::sandbox_job(
        node["nodeId"].as_str().unwrap(),
        node["secret"].as_str().unwrap(),
        &markers,
    );
    queues.send(queue, &body).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !jailed_marker_exists(&system.node_home()) {
        assert!(Instant::now() < deadline, "the jailed job did not run");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(!bare_marker.exists(), "the jailed job touched the host");
    drop(system.local.take());
}

/// Whether a sandbox job's `/workspace/jailed.marker` exists in the node's sandbox folders.
fn jailed_marker_exists(node_home: &Path) -> bool {
    std::fs::read_dir(node_home.join("sandboxes"))
        .into_iter()
        .flatten()
        .any(|entry| {
            entry
                .map(|entry| entry.path().join("jailed.marker").exists())
                .unwrap_or(false)
        })
}
