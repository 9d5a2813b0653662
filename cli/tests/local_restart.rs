//! `clawless local` killed with SIGKILL in the middle of a turn, then started again on the
//! same state dir: the message is answered exactly once, within seconds of the restart (not
//! after the local queue's visibility timeout).

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use serde_json::json;
use support::{free_port, post_message, replies, start_local};

const MESSAGES: &str = "/v1/messages";
const CHAT: &str = "restart-chat";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_killed_mid_way_is_answered_once_within_seconds_of_the_restart() {
    // GIVEN a model whose first answer takes a minute and whose second is instant
    let model = ScriptedServer::start().await;
    let slow = json!({
        "id": "msg_slow", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": "The slow answer."}],
        "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 3}
    });
    let fast = json!({
        "id": "msg_fast", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": "Answered after the restart."}],
        "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 4}
    });
    model.push(
        MESSAGES,
        ScriptedReply::json(slow).with_delay(Duration::from_secs(60)),
    );
    model.push(MESSAGES, ScriptedReply::json(fast));
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("clawless.yaml"),
        format!(
            "models:\n  primary: anthropic/claude-test\n  maxRetries: 0\n  providers:\n    anthropic:\n      apiKey: test-key\n      baseUrl: {}\n",
            model.base_url()
        ),
    )
    .unwrap();
    let port = free_port();
    let local = start_local(root.path(), port);

    // WHEN a message arrives and the process is killed while the model is thinking
    let secret = std::fs::read_to_string(root.path().join("state/generic.secret")).unwrap();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    post_message(&http, port, &secret, CHAT, "m-1", "Hello?").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while model.requests_to(MESSAGES).is_empty() {
        assert!(Instant::now() < deadline, "the model was never called");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(local); // SIGKILL
    let restarted_at = Instant::now();
    let _local = start_local(root.path(), port);

    // THEN the restarted system answers within 10 s, once
    let answer = loop {
        let texts = replies(&http, port, CHAT).await;
        if let Some(first) = texts.first() {
            break first.clone();
        }
        assert!(
            restarted_at.elapsed() < Duration::from_secs(10),
            "no answer within 10 s of the restart"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(answer, "Answered after the restart.");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(replies(&http, port, CHAT).await.len(), 1, "answered once");
    assert_eq!(model.requests_to(MESSAGES).len(), 2);
}

/// The session's stored steps, read from the state directory's database.
async fn stored_steps(root: &Path) -> Vec<clawless_core::turn::state::StepBody> {
    use clawless_core::session::{SessionKey, SessionStore};
    let db = clawless_local::sqlite::SqliteDb::open(root.join("state/clawless.db")).unwrap();
    let store = clawless_local::sqlite::SqliteSessionStore::new(db);
    let key = SessionKey::parse("agent:main:main").unwrap();
    let stored = store.load(&key).await.unwrap().unwrap();
    stored
        .steps
        .iter()
        .map(|step| {
            serde_json::from_str::<clawless_core::turn::state::Step>(&step.body)
                .unwrap()
                .body
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_killed_mid_compaction_keeps_one_summary_and_every_message() {
    use clawless_core::turn::state::StepBody;
    use clawless_llm::testing::windowed::{RequestKind, WindowedModel};
    // GIVEN an 8k-window model whose first summary takes a minute
    let model = WindowedModel::start(8_000, false).await;
    model.stall_first_summary(Duration::from_secs(60));
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("clawless.yaml"),
        format!(
            // The 8k window holds the conversation, not the automation tools' schemas.
            "agents:\n  defaults:\n    contextTokens: 8000\nmodels:\n  primary: anthropic/claude-test\n  \
             maxRetries: 0\n  providers:\n    anthropic:\n      apiKey: test-key\n      baseUrl: {}\n\
             tools:\n  deny: [cron, sessions_spawn, subagents, sessions_list, sessions_history, sessions_send, sessions_yield, agents_list]\n",
            model.base_url()
        ),
    )
    .unwrap();
    let port = free_port();
    let mut local = Some(start_local(root.path(), port));
    let secret = std::fs::read_to_string(root.path().join("state/generic.secret")).unwrap();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let filler = "Filler words for a small context window to hold. ".repeat(24);
    let mut sent = 0;
    let mut killed = false;
    // The local reply receiver lives in the process: replies the killed one received.
    let mut before_kill: Vec<String> = Vec::new();
    // WHEN numbered messages arrive one by one, and the process is killed (SIGKILL) while
    // the model writes the first summary
    while sent < MESSAGES_SENT {
        sent += 1;
        let text = format!("Message {sent}: {filler}");
        post_message(&http, port, &secret, CHAT, &format!("m-{sent}"), &text).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if before_kill.len() + replies(&http, port, CHAT).await.len() >= sent {
                break;
            }
            let summarizing = model.seen().iter().any(|r| r.kind == RequestKind::Summary);
            if summarizing && !killed {
                before_kill = replies(&http, port, CHAT).await;
                drop(local.take()); // SIGKILL
                killed = true;
                local = Some(start_local(root.path(), port));
            }
            assert!(
                Instant::now() < deadline,
                "message {sent} got no answer; the model saw {:?}; log: {}",
                model
                    .seen()
                    .iter()
                    .map(|r| (r.kind, r.tokens, r.refused))
                    .collect::<Vec<_>>(),
                std::fs::read_to_string(root.path().join("local.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert!(killed, "the process was killed mid-compaction");
    // THEN every message was answered once, in order
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut answers = before_kill;
    answers.extend(replies(&http, port, CHAT).await);
    assert_eq!(answers, expected_answers());
    drop(local);
    // AND the session holds one summary per compaction and every message once
    let steps = stored_steps(root.path()).await;
    let inbound: Vec<String> = steps
        .iter()
        .filter_map(|body| match body {
            StepBody::Inbound { message_id, .. } => Some(message_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        inbound,
        (1..=MESSAGES_SENT)
            .map(|n| format!("m-{n}"))
            .collect::<Vec<_>>()
    );
    let summaries = model
        .seen()
        .iter()
        .filter(|r| r.kind == RequestKind::Summary)
        .count();
    let compactions = steps
        .iter()
        .filter(|body| matches!(body, StepBody::Compaction { .. }))
        .count();
    assert!(compactions >= 1);
    assert_eq!(
        summaries,
        compactions + 1,
        "the killed summary was asked again once; every other one once"
    );
    let answers: Vec<String> = steps
        .iter()
        .filter_map(|body| match body {
            StepBody::Reply { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(answers, expected_answers());
}

fn expected_answers() -> Vec<String> {
    (1..=MESSAGES_SENT)
        .map(|n| format!("Answer to message {n}."))
        .collect()
}

/// Messages of the mid-compaction test: enough to compact at least twice in an 8k window.
const MESSAGES_SENT: usize = 24;
