//! A file a node command prints as `MEDIA:<path>` travels with its result, end to end in local
//! mode: a real `clawless local`, a scripted model that calls `exec`, and a real
//! `clawless node run` whose command writes `chart.png` in its working directory and prints
//! `MEDIA:./chart.png` and `MEDIA:/etc/passwd`. The tool result the model sees names a
//! `media/outbound/<sha256>.png` key whose blob (in the state's `blobs/`) holds the bytes, and
//! says the other file was not sent and why; the same chart made again is stored once.

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clawless_llm::testing::{RecordedRequest, ScriptedReply, ScriptedServer};
use serde_json::{Value, json};
use support::{
    BIN, Local, free_port, local_secret, post_message, replies, start_local, text_reply,
};

const MESSAGES: &str = "/v1/messages";
const CHAT: &str = "media-chat";
/// What the command writes into `chart.png`.
const CHART: &[u8] = b"\x89PNG-chart-from-the-node";

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

/// The model: "draw the chart <n>" calls `exec` in `work`; a tool result gets "done".
fn script(model: &ScriptedServer, work: PathBuf) {
    model.respond_with(MESSAGES, move |request| {
        if tool_result_text(request).is_some() {
            return Some(text_reply("done", "done"));
        }
        let last = request.body["messages"].as_array()?.last()?["content"].to_string();
        let round = ["chart one", "chart two"]
            .iter()
            .position(|words| last.contains(words))?;
        let command = "printf '\\211PNG-chart-from-the-node' > chart.png && echo drawn \
                       && echo MEDIA:./chart.png && echo MEDIA:/etc/passwd";
        Some(ScriptedReply::json(json!({
            "id": format!("msg_exec_{round}"), "type": "message", "role": "assistant",
            "model": "claude-test",
            "content": [{"type": "tool_use", "id": format!("toolu_exec_{round}"), "name": "exec",
                         "input": {"command": command, "workdir": work.display().to_string()}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 3}
        })))
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
fn start_node(root: &std::path::Path, port: u16) -> Node {
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
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The first heartbeat reports the node active.
    std::thread::sleep(Duration::from_millis(2_000));
    Node(node)
}

/// Says `text` and waits for the reply after the `seen` ones.
async fn ask(http: &reqwest::Client, port: u16, secret: &str, id: &str, text: &str, seen: usize) {
    post_message(http, port, secret, CHAT, id, text).await;
    let deadline = Instant::now() + Duration::from_secs(40);
    while replies(http, port, CHAT).await.len() <= seen {
        assert!(Instant::now() < deadline, "no reply to {text:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn outbound_blobs(root: &std::path::Path) -> Vec<PathBuf> {
    match std::fs::read_dir(root.join("state/blobs/media/outbound")) {
        Ok(entries) => entries.map(|entry| entry.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_a_node_command_prints_reaches_the_model_as_a_stored_blob_key() {
    let model = ScriptedServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let work = root.path().join("work");
    std::fs::create_dir(&work).unwrap();
    script(&model, work.clone());
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
    let _local: Local = start_local(root.path(), port);
    let registry = root.path().join("state/clawless.db");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !registry.is_file() {
        assert!(Instant::now() < deadline, "no local registry");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _node = start_node(root.path(), port);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let secret = local_secret(root.path());

    ask(&http, port, &secret, "m-1", "draw the chart one", 0).await;
    let results: Vec<String> = model
        .requests_to(MESSAGES)
        .iter()
        .filter_map(tool_result_text)
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    let result = &results[0];
    let lines: Vec<&str> = result.lines().collect();
    assert_eq!(lines[0], "drawn", "{result}");
    let key = lines[1]
        .strip_prefix("MEDIA:media/outbound/")
        .unwrap_or_else(|| panic!("no blob key in {result}"));
    assert!(key.ends_with(".png") && key.len() == 64 + 4, "{key}");
    assert_eq!(
        lines[2], "(MEDIA:/etc/passwd not sent: outside the command's directory)",
        "{result}"
    );
    assert!(!result.contains("./chart.png"), "{result}");
    let blob = root.path().join("state/blobs/media/outbound").join(key);
    assert_eq!(std::fs::read(&blob).unwrap(), CHART);
    // The reply that follows carries the file, linked by the local server.
    let posted: Vec<Value> = http
        .get(format!(
            "http://127.0.0.1:{port}/local/replies/{CHAT}?after=0&wait=0"
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(posted[0]["text"], "done");
    let files = posted[0]["attachments"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(files.len(), 1, "{posted:?}");
    assert_eq!(files[0]["name"].as_str(), Some(key));
    let url = files[0]["url"].as_str().expect("a link");
    let fetched = http.get(url).send().await.unwrap();
    assert_eq!(fetched.status().as_u16(), 200);
    assert_eq!(fetched.bytes().await.unwrap().as_ref(), CHART);

    // The same chart again: a second result names the same key, and one blob is stored.
    ask(&http, port, &secret, "m-2", "draw the chart two", 1).await;
    let results: Vec<String> = model
        .requests_to(MESSAGES)
        .iter()
        .filter_map(tool_result_text)
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results[1].contains(&format!("MEDIA:media/outbound/{key}")),
        "{}",
        results[1]
    );
    assert_eq!(outbound_blobs(root.path()), vec![blob]);
}
