//! A backgrounded command end to end in local mode (issue 35): a real `clawless local`, a
//! scripted model, and a real `clawless node run`. `exec {command: "sleep 2; echo <word>",
//! background: true}` answers at once with a process session id; about two seconds later the
//! node reports the exit, and the agent gets the `Exec completed (…) :: <word>` system event
//! and a turn, in which `process poll` returns the output. The same exit posted again by the
//! node (signed, as a retrying node would), also after the backend restarted, wakes nobody;
//! `clawless sessions show` marks the backgrounded command and the turn its end woke.

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clawless_exec::node::wire::{Envelope, NodeResult, ProcessExit, secret_hash, signing_key};
use clawless_llm::testing::{RecordedRequest, ScriptedReply, ScriptedServer};
use serde_json::{Value, json};
use support::{
    BIN, Local, free_port, local_secret, post_message, replies, start_local, text_reply,
};

const MESSAGES: &str = "/v1/messages";
const CHAT: &str = "background-chat";
/// What the backgrounded command prints.
const WORD: &str = "quokka-7341";

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

/// The model: "start the job" backgrounds the command; the running result gets "started";
/// a request carrying the exit event polls the process; the poll's result gets "polled".
fn script(model: &ScriptedServer) {
    model.respond_with(MESSAGES, move |request| {
        if let Some(result) = tool_result_text(request) {
            if result.starts_with("Command still running") {
                return Some(text_reply("started", "started"));
            }
            return Some(text_reply("polled", "polled"));
        }
        let body = request.body["messages"].to_string();
        if body.contains("Exec completed (") {
            let session = body
                .split("Exec completed (")
                .nth(1)
                .and_then(|rest| rest.split(',').next())
                .unwrap_or_default()
                .to_owned();
            // The event names the first 8 chars of the id; the full id is in the earlier
            // running result.
            let full = body
                .split("Command still running (session ")
                .nth(1)
                .and_then(|rest| rest.split(',').next())
                .filter(|full| full.starts_with(&session))
                .unwrap_or(&session)
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
                json!({"command": format!("sleep 2; echo {WORD}"), "background": true}),
            ));
        }
        Some(text_reply("other", "ok"))
    });
}

struct Node(Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _killed = self.0.kill();
        let _reaped = self.0.wait();
    }
}

fn clawless(args: &[&str]) -> String {
    let output = Command::new(BIN).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "clawless {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Pairs a node host (security=full) with the local system on `port` and starts it.
fn start_node(root: &Path, port: u16) -> Node {
    let state = root.join("state");
    let home = root.join("node");
    let code = clawless(&["nodes", "pair", "--state-dir", state.to_str().unwrap()]);
    clawless(&[
        "node",
        "pair",
        "--node-home",
        home.to_str().unwrap(),
        "--url",
        &format!("http://127.0.0.1:{port}"),
        "--code",
        code.trim(),
    ]);
    std::fs::write(
        home.join("exec-approvals.json"),
        json!({"version": 1, "defaults": {"security": "full", "ask": "off"}}).to_string(),
    )
    .unwrap();
    let node = Command::new(BIN)
        .args(["node", "run", "--heartbeat-secs", "1", "--node-home"])
        .arg(&home)
        .env("CLAWLESS_NODE_JAIL", "off")
        .stdout(Stdio::null())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(root.join("node.log"))
                .unwrap(),
        )
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2_000));
    Node(node)
}

/// Waits until `check` holds for the model's requests, or fails with `what`.
async fn wait_for(model: &ScriptedServer, what: &str, check: impl Fn(&[RecordedRequest]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        if check(&model.requests_to(MESSAGES)) {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How many model requests carry the exit event of `WORD`.
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

/// The index rows of the local state: (session key, session id, node id, status).
fn index_rows(root: &Path) -> Vec<(String, String, String, String)> {
    let db = rusqlite::Connection::open(root.join("state/clawless.db")).unwrap();
    let mut statement = db
        .prepare("SELECT session_key, session_id, node_id, status FROM background_processes")
        .unwrap();
    statement
        .query_map([], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

/// Posts `exit` to `/nodes/results` as the node in `home` would (signed with its key).
async fn post_exit_as_node(
    http: &reqwest::Client, port: u16, home: &Path, exit: ProcessExit,
) -> u16 {
    let pairing: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join("node.json")).unwrap()).unwrap();
    let node_id = pairing["nodeId"].as_str().unwrap();
    let secret = pairing["secret"].as_str().unwrap();
    let envelope =
        Envelope::seal(&NodeResult::Exit(exit), &signing_key(&secret_hash(secret))).unwrap();
    http.post(format!("http://127.0.0.1:{port}/nodes/results"))
        .header("authorization", format!("Bearer {node_id}:{secret}"))
        .header("content-type", "application/json")
        .body(envelope.to_json())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backgrounded_command_answers_at_once_and_its_end_wakes_the_agent_once() {
    let model = ScriptedServer::start().await;
    script(&model);
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("clawless.yaml"),
        format!(
            "models:\n  primary: anthropic/claude-test\n  maxRetries: 0\n  providers:\n    \
             anthropic:\n      apiKey: test-key\n      baseUrl: {}\n\
             exec:\n  timeoutSec: 30\n  nodeOfflineAfterSec: 10\n\
             tools:\n  exec:\n    notifyOnExit: true\n",
            model.base_url()
        ),
    )
    .unwrap();
    let port = free_port();
    let local: Local = start_local(root.path(), port);
    let registry = root.path().join("state/clawless.db");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !registry.is_file() {
        assert!(Instant::now() < deadline, "no local registry");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _node = start_node(root.path(), port);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let secret = local_secret(root.path());

    // WHEN the model backgrounds `sleep 2; echo <word>`
    let asked = Instant::now();
    post_message(&http, port, &secret, CHAT, "m-1", "start the job").await;
    while replies(&http, port, CHAT).await.is_empty() {
        assert!(
            asked.elapsed() < Duration::from_secs(30),
            "no reply to the start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // THEN the call answered at once, with a process session id and no output
    let answered_in = asked.elapsed();
    let running: Vec<String> = model
        .requests_to(MESSAGES)
        .iter()
        .filter_map(tool_result_text)
        .collect();
    assert_eq!(running.len(), 1, "{running:?}");
    let session_id =
        session_id_in(&running[0]).unwrap_or_else(|| panic!("no session id in {:?}", running[0]));
    assert!(
        running[0].ends_with("Use process (list/poll/log/write/kill/clear/remove) for follow-up."),
        "{}",
        running[0]
    );
    assert!(!running[0].contains(WORD), "{}", running[0]);
    assert!(
        answered_in < Duration::from_millis(1_900),
        "the start took {answered_in:?}: it waited for the command"
    );
    let rows = index_rows(root.path());
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].1, session_id);

    // AND about two seconds later the agent gets the exit event and a turn, which polls
    wait_for(&model, "the exit event", |requests| {
        exit_requests(requests) == 1
    })
    .await;
    let exit_request = model
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
    assert!(
        asked.elapsed() >= Duration::from_secs(2),
        "the exit came before the command could end"
    );
    wait_for(&model, "the poll's result", |requests| {
        requests
            .iter()
            .filter_map(tool_result_text)
            .any(|text| text.contains(WORD))
    })
    .await;
    let polled: Vec<String> = model
        .requests_to(MESSAGES)
        .iter()
        .filter_map(tool_result_text)
        .collect();
    assert!(
        polled.last().unwrap().contains(WORD),
        "process poll returns the output: {polled:?}"
    );
    let rows = index_rows(root.path());
    assert_eq!(rows[0].3, "completed", "{rows:?}");

    // WHEN the node posts the same exit again (a retry after a lost answer)
    let (session_key, _, node_id, _) = rows[0].clone();
    let again = ProcessExit {
        event_id: ProcessExit::event_id_for(&node_id, &session_id),
        node_id,
        agent_id: "main".into(),
        session_key,
        session_id: session_id.clone(),
        exec_job_id: "whatever".into(),
        command: format!("sleep 2; echo {WORD}"),
        exit_code: Some(0),
        signal: None,
        success: true,
        tail: format!("{WORD}\n"),
        started_at_ms: 1,
        ended_at_ms: 2,
    };
    let status = post_exit_as_node(&http, port, &root.path().join("node"), again.clone()).await;
    assert!((200..300).contains(&status), "status {status}");
    // AND again after the backend restarted
    drop(local);
    let _local: Local = start_local(root.path(), port);
    let status = post_exit_as_node(&http, port, &root.path().join("node"), again).await;
    assert!((200..300).contains(&status), "status {status}");
    // THEN nothing wakes: after a while there is still exactly one exit turn
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(exit_requests(&model.requests_to(MESSAGES)), 1);

    // AND `clawless sessions show` marks the backgrounded command and the turn its end woke
    let shown = clawless(&[
        "sessions",
        "--state-dir",
        root.path().join("state").to_str().unwrap(),
        "show",
        &rows[0].0,
    ]);
    assert!(
        shown.contains(&format!(
            "(BACKGROUND: process {session_id} runs on the node host; its end wakes this session)"
        )),
        "{shown}"
    );
    assert!(
        shown.contains("BACKGROUND COMMAND ENDED (exec-event heartbeat)"),
        "{shown}"
    );
}
