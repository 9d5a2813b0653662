//! What the tests that drive a real `clawless local` share: starting it on a free port (killed
//! on drop), talking to it as a chat platform would (signed webhook in, the local reply
//! receiver read back), and waiting for what should happen.

// Each test file uses part of this.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clawless_channels::sign;
use clawless_llm::testing::ScriptedReply;
use serde_json::{Value, json};

/// The binary under test.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_clawless");

/// A free port on loopback.
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address")
        .port()
}

/// A `clawless local` process, killed on drop.
pub(crate) struct Local(Child);

impl Drop for Local {
    fn drop(&mut self) {
        let _killed = self.0.kill();
        let _reaped = self.0.wait();
    }
}

/// Starts `clawless local` without a node host on `port`, with `root/clawless.yaml` and its
/// state in `root/state`, logging to `root/local.log`; returns once it listens.
pub(crate) fn start_local(root: &Path, port: u16) -> Local {
    let child = Command::new(BIN)
        .args(["local", "--no-node", "--port", &port.to_string()])
        .arg("--state-dir")
        .arg(root.join("state"))
        .arg("--config")
        .arg(root.join("clawless.yaml"))
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .stdout(Stdio::null())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(root.join("local.log"))
                .expect("log file"),
        )
        .spawn()
        .expect("clawless local starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "clawless local did not listen: {}",
            std::fs::read_to_string(root.join("local.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Local(child)
}

/// The generic channel's secret of the local system in `root`.
pub(crate) fn local_secret(root: &Path) -> String {
    std::fs::read_to_string(root.join("state/generic.secret")).expect("the local secret")
}

/// Posts one signed direct message of `local-user` in `chat` to the generic webhook; it must
/// be accepted.
pub(crate) async fn post_message(
    http: &reqwest::Client, port: u16, secret: &str, chat: &str, id: &str, text: &str,
) {
    let body = serde_json::to_vec(&json!({
        "message_id": id, "chat_id": chat, "sender_id": "local-user",
        "text": text, "chat_type": "direct",
    }))
    .expect("a body");
    let accepted = http
        .post(format!("http://127.0.0.1:{port}/webhook/generic"))
        .header("content-type", "application/json")
        .header(
            "x-clawless-signature",
            sign(secret.trim().as_bytes(), &body),
        )
        .body(body)
        .send()
        .await
        .expect("the webhook answers");
    assert_eq!(accepted.status().as_u16(), 202, "message {id} accepted");
}

/// The texts this `clawless local` process has sent to `chat`, in order.
pub(crate) async fn replies(http: &reqwest::Client, port: u16, chat: &str) -> Vec<String> {
    let replies: Vec<Value> = http
        .get(format!(
            "http://127.0.0.1:{port}/local/replies/{chat}?after=0&wait=0"
        ))
        .send()
        .await
        .expect("the reply receiver answers")
        .json()
        .await
        .expect("replies as JSON");
    replies
        .iter()
        .map(|reply| reply["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// How many of `replies` are exactly `text`.
pub(crate) fn count(replies: &[String], text: &str) -> usize {
    replies.iter().filter(|reply| *reply == text).count()
}

/// Waits until `done` holds, failing with `what` after `patience`.
pub(crate) async fn wait_until<F, Fut>(patience: Duration, what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + patience;
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An Anthropic Messages answer with `text`.
pub(crate) fn text_reply(id: &str, text: &str) -> ScriptedReply {
    ScriptedReply::json(json!({
        "id": format!("msg_{id}"), "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 3}
    }))
}
