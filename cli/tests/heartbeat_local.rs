//! Heartbeats through the real `clawless local`, driven as a chat platform would (signed
//! webhooks in, the reply receiver read back) with a scripted model, every 2 seconds: while
//! `HEARTBEAT.md` is the seeded one (headings only) no heartbeat calls the model; once it
//! holds a check, the model's `HEARTBEAT_OK` replies never reach the chat and its alert
//! reaches it exactly once, however often it repeats.

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use clawless_llm::testing::ScriptedServer;
use serde_json::Value;
use support::{BIN, free_port, post_message, replies, start_local, text_reply, wait_until};

const MESSAGES: &str = "/v1/messages";
const CHAT: &str = "heartbeat-chat";
const ALERT: &str = "Disk almost full: 97% used on /.";

/// The main session's heartbeat state (`meta.heartbeat`), read from the state database.
async fn heartbeat_meta(root: &Path) -> Value {
    use clawless_core::session::{SessionKey, SessionStore};
    let db = clawless_local::sqlite::SqliteDb::open(root.join("state/clawless.db")).unwrap();
    let store = clawless_local::sqlite::SqliteSessionStore::new(db);
    let key = SessionKey::parse("agent:main:main").unwrap();
    let stored = store.load(&key).await.unwrap().unwrap();
    let meta: Value = serde_json::from_str(&stored.meta).unwrap();
    meta["heartbeat"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_every_two_seconds_stay_silent_until_an_alert_which_is_sent_once() {
    // GIVEN `clawless local` with heartbeats every 2 s alerting the last chat, a scripted
    // model, and the seeded workspace (HEARTBEAT.md has only headings)
    let model = ScriptedServer::start().await;
    model.push(MESSAGES, text_reply("hello", "Hello!"));
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("clawless.yaml"),
        format!(
            "agents:\n  defaults:\n    heartbeat: {{every: 2s, target: last}}\nmodels:\n  \
             primary: anthropic/claude-test\n  maxRetries: 0\n  providers:\n    anthropic:\n      \
             apiKey: test-key\n      baseUrl: {}\n",
            model.base_url()
        ),
    )
    .unwrap();
    let port = free_port();
    let _local = start_local(root.path(), port);
    let secret = std::fs::read_to_string(root.path().join("state/generic.secret")).unwrap();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();

    // WHEN the user talks to the agent, and three heartbeat slots pass
    post_message(&http, port, &secret, CHAT, "m-1", "hi").await;
    wait_until(
        Duration::from_secs(15),
        "the greeting is answered",
        || async { replies(&http, port, CHAT).await == ["Hello!"] },
    )
    .await;
    let first_skip = Instant::now();
    wait_until(
        Duration::from_secs(10),
        "a heartbeat skips the seeded HEARTBEAT.md",
        || async {
            heartbeat_meta(root.path()).await["lastRun"]["reason"] == "empty-heartbeat-file"
        },
    )
    .await;
    let skipped_slot = heartbeat_meta(root.path()).await["lastSlotMs"]
        .as_u64()
        .unwrap();
    wait_until(Duration::from_secs(10), "two more slots pass", || async {
        heartbeat_meta(root.path()).await["lastSlotMs"]
            .as_u64()
            .is_some_and(|slot| slot >= skipped_slot + 4_000)
    })
    .await;

    // THEN none of them called the model
    assert_eq!(model.requests_to(MESSAGES).len(), 1, "only the greeting");
    assert!(first_skip.elapsed() < Duration::from_secs(10));

    // WHEN HEARTBEAT.md gets a check, and the model acknowledges twice, then alerts on
    // every heartbeat
    model.push(MESSAGES, text_reply("ok-1", "HEARTBEAT_OK"));
    model.push(MESSAGES, text_reply("ok-2", "HEARTBEAT_OK 🦞"));
    model.always(MESSAGES, text_reply("alert", ALERT));
    std::fs::write(
        root.path().join("state/workspace/HEARTBEAT.md"),
        "# HEARTBEAT.md\n- Tell me when the disk is almost full.\n",
    )
    .unwrap();
    wait_until(
        Duration::from_secs(20),
        "five heartbeats call the model",
        || async { model.requests_to(MESSAGES).len() >= 6 },
    )
    .await;

    // THEN the acknowledgements never reached the chat, and the alert reached it once
    assert_eq!(replies(&http, port, CHAT).await, ["Hello!", ALERT]);
    let heartbeat = heartbeat_meta(root.path()).await;
    assert_eq!(heartbeat["lastAlert"]["text"], ALERT);
    let polls = model.requests_to(MESSAGES);
    assert!(
        polls[1].raw_body.contains("Read HEARTBEAT.md if it exists"),
        "{}",
        polls[1].raw_body
    );

    // AND `clawless sessions show` marks the heartbeat turns and what became of them
    let shown = Command::new(BIN)
        .args(["sessions", "--state-dir"])
        .arg(root.path().join("state"))
        .args(["show", "agent:main:main"])
        .env("HOME", root.path())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("HEARTBEAT heartbeat"), "{shown}");
    assert!(
        shown.contains("=== HEARTBEAT ACK (ok-token): nothing needed attention; nothing sent"),
        "{shown}"
    );
    assert!(shown.contains("=== HEARTBEAT ALERT: sent"), "{shown}");
    assert!(
        shown.contains("=== HEARTBEAT ALERT not sent: duplicate"),
        "{shown}"
    );
    assert!(shown.contains("heartbeats: next slot "), "{shown}");
}
