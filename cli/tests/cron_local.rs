//! Cron through the real `clawless local`, driven as a chat platform would (signed webhooks
//! in, the reply receiver read back) with a scripted model that calls `cron` with
//! OpenClaw's schema: "remind me in 8 s" reaches the chat once within a minute of its time,
//! also when the process is killed and restarted before the due time, and when it is down
//! at the due time (an overdue one-shot runs once after the restart); an `every` job fires
//! repeatedly, each slot once.

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use serde_json::{Value, json};
use support::{BIN, count, free_port, post_message, replies, start_local, text_reply, wait_until};

const MESSAGES: &str = "/v1/messages";
const CHAT: &str = "cron-chat";

fn write_config(root: &Path, model: &ScriptedServer) {
    std::fs::write(
        root.join("clawless.yaml"),
        format!(
            "models:\n  primary: anthropic/claude-test\n  maxRetries: 0\n  providers:\n    \
             anthropic:\n      apiKey: test-key\n      baseUrl: {}\n",
            model.base_url()
        ),
    )
    .unwrap();
}

fn cron_call(id: &str, input: Value) -> ScriptedReply {
    ScriptedReply::json(json!({
        "id": format!("msg_{id}"), "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "tool_use", "id": format!("toolu_{id}"), "name": "cron", "input": input}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 100, "output_tokens": 10}
    }))
}

fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// `ms` as an ISO-8601 UTC timestamp with milliseconds.
fn iso(ms: u64) -> String {
    clawless_automation::cron::schedule::iso_millis(ms)
}

/// The model's `cron add` of a main-session reminder `text` due at `due_ms`.
fn reminder(id: &str, name: &str, due_ms: u64, text: &str) -> ScriptedReply {
    cron_call(
        id,
        json!({
            "action": "add",
            "job": {
                "name": name,
                "schedule": {"kind": "at", "at": iso(due_ms)},
                "sessionTarget": "main",
                "wakeMode": "now",
                "payload": {"kind": "systemEvent", "text": text}
            }
        }),
    )
}

/// The cron jobs and their run logs, read from the state database.
async fn jobs_and_runs(root: &Path) -> (Vec<Value>, Vec<Value>) {
    use clawless_automation::cron::CronStore;
    use clawless_automation::cron::run_log::RunsQuery;
    let db = clawless_local::sqlite::SqliteDb::open(root.join("state/clawless.db")).unwrap();
    let store = clawless_local::sqlite::SqliteCronStore::new(db);
    let jobs = store
        .list_jobs()
        .await
        .unwrap()
        .into_iter()
        .map(|stored| serde_json::to_value(stored.job).unwrap())
        .collect();
    let runs = store
        .runs(
            None,
            &RunsQuery {
                limit: Some(200),
                ..RunsQuery::default()
            },
        )
        .await
        .unwrap()
        .entries
        .into_iter()
        .map(|entry| serde_json::to_value(entry).unwrap())
        .collect();
    (jobs, runs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reminder_reaches_the_chat_once_across_a_kill_and_restart() {
    let model = ScriptedServer::start().await;
    let root = tempfile::tempdir().unwrap();
    write_config(root.path(), &model);
    let port = free_port();
    let mut local = Some(start_local(root.path(), port));
    let secret = std::fs::read_to_string(root.path().join("state/generic.secret")).unwrap();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();

    // GIVEN the user asks for a reminder in 8 s, and the model schedules it
    let due = now_ms() + 8_000;
    model.push(
        MESSAGES,
        reminder("a", "Stretch", due, "Reminder: stand up and stretch."),
    );
    model.push(
        MESSAGES,
        text_reply("a-ok", "I'll remind you in 8 seconds."),
    );
    post_message(
        &http,
        port,
        &secret,
        CHAT,
        "m-1",
        "remind me in 8 s to stretch",
    )
    .await;
    wait_until(Duration::from_secs(20), "the reminder is set", || async {
        replies(&http, port, CHAT).await == ["I'll remind you in 8 seconds."]
    })
    .await;
    assert!(now_ms() < due, "set before its time");

    // WHEN the process is killed and restarted before the due time (a process keeps only
    // the replies it sent, so each one's are collected before it stops)
    let mut earlier = replies(&http, port, CHAT).await;
    drop(local.take());
    local = Some(start_local(root.path(), port));
    model.push(
        MESSAGES,
        text_reply("a-fire", "⏰ Time to stand up and stretch!"),
    );

    // THEN the reminder reaches the chat once, within a minute of its time
    wait_until(Duration::from_secs(60), "the reminder arrives", || async {
        count(
            &replies(&http, port, CHAT).await,
            "⏰ Time to stand up and stretch!",
        ) == 1
    })
    .await;
    let late = now_ms().saturating_sub(due);
    assert!(late < 60_000, "{late} ms late");
    let requests = model.requests_to(MESSAGES);
    assert!(
        requests
            .last()
            .unwrap()
            .raw_body
            .contains("A scheduled reminder has been triggered"),
        "{}",
        requests.last().unwrap().raw_body
    );

    // WHEN a second reminder is set, and the process is down at its due time
    let due = now_ms() + 4_000;
    model.push(
        MESSAGES,
        reminder("b", "Tea", due, "Reminder: the tea is ready."),
    );
    model.push(MESSAGES, text_reply("b-ok", "Tea reminder set."));
    post_message(
        &http,
        port,
        &secret,
        CHAT,
        "m-2",
        "remind me about the tea in 4 s",
    )
    .await;
    wait_until(
        Duration::from_secs(20),
        "the tea reminder is set",
        || async { count(&replies(&http, port, CHAT).await, "Tea reminder set.") == 1 },
    )
    .await;
    earlier.extend(replies(&http, port, CHAT).await);
    drop(local.take());
    while now_ms() < due + 1_500 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    model.push(MESSAGES, text_reply("b-fire", "🍵 Your tea is ready."));
    local = Some(start_local(root.path(), port));

    // THEN the overdue one-shot runs once after the restart
    wait_until(
        Duration::from_secs(60),
        "the overdue reminder arrives",
        || async { count(&replies(&http, port, CHAT).await, "🍵 Your tea is ready.") == 1 },
    )
    .await;
    // Nothing more arrives, and both one-shots are gone with one ok run each.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut all = earlier;
    all.extend(replies(&http, port, CHAT).await);
    assert_eq!(
        count(&all, "⏰ Time to stand up and stretch!"),
        1,
        "{all:?}"
    );
    assert_eq!(count(&all, "🍵 Your tea is ready."), 1, "{all:?}");
    assert_eq!(all.len(), 4, "{all:?}");
    let (jobs, runs) = jobs_and_runs(root.path()).await;
    assert!(jobs.is_empty(), "{jobs:?}");
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert!(runs.iter().all(|run| run["status"] == "ok"), "{runs:?}");
    assert_eq!(model.requests_to(MESSAGES).len(), 6);

    // AND `clawless sessions show` marks the cron turns
    drop(local.take());
    let shown = Command::new(BIN)
        .args(["sessions", "--state-dir"])
        .arg(root.path().join("state"))
        .args(["show", "agent:main:main"])
        .env("HOME", root.path())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("CRON REMINDER (heartbeat)"), "{shown}");
    assert!(
        shown.contains("=== CRON RESULT: announced (the reply below)"),
        "{shown}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_every_job_fires_repeatedly_each_slot_once() {
    let model = ScriptedServer::start().await;
    let root = tempfile::tempdir().unwrap();
    write_config(root.path(), &model);
    let port = free_port();
    let _local = start_local(root.path(), port);
    let secret = std::fs::read_to_string(root.path().join("state/generic.secret")).unwrap();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();

    // GIVEN the model schedules an isolated job every 2 s
    model.push(
        MESSAGES,
        cron_call(
            "every",
            json!({
                "action": "add",
                "job": {
                    "name": "Sheep",
                    "schedule": {"kind": "every", "everyMs": 2_000},
                    "payload": {"kind": "agentTurn", "message": "Count one sheep."}
                }
            }),
        ),
    );
    model.push(
        MESSAGES,
        text_reply("every-ok", "Counting sheep every 2 seconds."),
    );
    post_message(&http, port, &secret, CHAT, "m-1", "count sheep every 2 s").await;
    wait_until(Duration::from_secs(20), "the job is set", || async {
        count(
            &replies(&http, port, CHAT).await,
            "Counting sheep every 2 seconds.",
        ) == 1
    })
    .await;
    model.always(MESSAGES, text_reply("sheep", "Another sheep."));

    // WHEN four runs have been announced
    wait_until(Duration::from_secs(40), "four runs announce", || async {
        count(&replies(&http, port, CHAT).await, "Another sheep.") >= 4
    })
    .await;

    // THEN every run is logged once, on its own slot 2 s apart, and each announced once
    let (jobs, runs) = jobs_and_runs(root.path()).await;
    assert_eq!(jobs.len(), 1);
    let announced = count(&replies(&http, port, CHAT).await, "Another sheep.");
    let mut slots: Vec<u64> = runs
        .iter()
        .map(|run| run["runAtMs"].as_u64().unwrap())
        .collect();
    slots.sort_unstable();
    slots.dedup();
    assert_eq!(slots.len(), runs.len(), "no run twice: {runs:?}");
    assert!(
        announced == runs.len() || announced == runs.len() + 1,
        "one announce per run: {announced} announced, {} runs",
        runs.len()
    );
    assert!(runs.iter().all(|run| run["status"] == "ok"), "{runs:?}");
    // OpenClaw's `every`: the next run is `everyMs` after the last run started.
    for pair in slots.windows(2) {
        assert!(pair[1] - pair[0] >= 2_000, "runs 2 s apart: {slots:?}");
    }
}
