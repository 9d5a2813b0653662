//! Sessions that last, end to end through local mode: signed chat messages → the real turn
//! engine with SQLite and directories → a scripted model that enforces its context window
//! and answers summary and memory-flush prompts ([`WindowedModel`]) → signed replies.
//!
//! - 80 messages of ~1.2 KB through a 12k-token window with the default config: every one is
//!   answered correctly, in at most 200 model calls; summaries reach later requests, a memory
//!   note is written, and nothing but the answers reaches the chat. The model's first try at
//!   each summary is weak, so the quality check asks again, and no message goes unanswered.
//! - A model whose real window is smaller than configured recovers through its overflow error.
//! - After `/new`, the next request carries nothing from before; after `/compact`, the next
//!   request is smaller and carries the summary.
//! - One giant paste is answered with a plain explanation, never "could not be reached".

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use clawless_channels::sign;
use clawless_llm::testing::windowed::{RequestKind, SeenRequest, WindowedModel};
use clawless_runtime::ClawlessConfig;
use clawless_runtime::local_mode::{LocalOptions, RunningLocal, start_local};
use serde_json::{Value, json};
use support::{ReplyReceiver, SECRET};

/// A message of about 1.2 KB, numbered so the model's answer can be checked.
fn numbered(n: u64) -> String {
    let filler = "The quick brown fox jumps over the lazy dog while we talk. ".repeat(20);
    format!("Message {n}: please acknowledge this note. {filler}")
}

struct Chat {
    _dir: tempfile::TempDir,
    workspace: std::path::PathBuf,
    running: RunningLocal,
    receiver: ReplyReceiver,
    client: reqwest::Client,
    sent: u64,
    replies_before: usize,
}

/// The tools of cron, sub-agents and the session tools (see [`Chat::start_with`]).
const AUTOMATION_TOOLS: [&str; 8] = [
    "cron",
    "sessions_spawn",
    "subagents",
    "sessions_list",
    "sessions_history",
    "sessions_send",
    "sessions_yield",
    "agents_list",
];

impl Chat {
    async fn start(model: &WindowedModel, context_tokens: u64) -> Self {
        Self::start_with(model, context_tokens, "", &[]).await
    }

    /// A chat whose config adds `extra` (top-level YAML sections other than `tools`) and
    /// denies `deny` on top of the automation tools. These windows are a few thousand
    /// tokens, so the chat leaves out the tools of cron, sub-agents and the session tools,
    /// whose schemas alone would fill them; what is measured is the conversation.
    async fn start_with(
        model: &WindowedModel, context_tokens: u64, extra: &str, deny: &[&str],
    ) -> Self {
        let denied: Vec<&str> = AUTOMATION_TOOLS.iter().chain(deny).copied().collect();
        Self::start_config(model, context_tokens, extra, &denied, None).await
    }

    /// A chat with the default config: nothing denied, and the repository's bundled skills
    /// (those a `clawless local` started from a clone loads).
    async fn start_default(model: &WindowedModel, context_tokens: u64) -> Self {
        let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../skills");
        Self::start_config(model, context_tokens, "", &[], Some(&bundled)).await
    }

    async fn start_config(
        model: &WindowedModel, context_tokens: u64, extra: &str, denied: &[&str],
        bundled: Option<&Path>,
    ) -> Self {
        let denied = denied.join(", ");
        let dir = tempfile::tempdir().expect("test fixture");
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(dir.path().join("skills")).expect("test fixture");
        let skills = bundled.map_or_else(|| dir.path().join("skills"), Path::to_path_buf);
        let receiver = ReplyReceiver::start().await;
        let yaml = format!(
            r#"
skills:
  bundled: {skills}
agents:
  defaults:
    workspace: {workspace}
    contextTokens: {context_tokens}
models:
  primary: anthropic/claude-test
  allowed: [anthropic/claude-other]
  maxRetries: 0
  providers:
    anthropic:
      apiKey: test-key
      baseUrl: {base}
channels:
  generic:
    secret: {SECRET}
    replyUrl: {reply}
    owners: [user-1]
    groupPolicy: open
tools:
  deny: [{denied}]
{extra}
"#,
            skills = skills.display(),
            workspace = workspace.display(),
            base = model.base_url(),
            reply = receiver.url,
        );
        let config = ClawlessConfig::from_yaml(&yaml, "test").expect("test fixture");
        let models = clawless_llm::build_model(&config.models, &|_| None).expect("test fixture");
        let running = start_local(LocalOptions {
            config,
            state_dir: dir.path().join("state"),
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            model: models,
            secrets: Default::default(),
        })
        .await
        .expect("test fixture");
        Self {
            _dir: dir,
            workspace,
            running,
            receiver,
            client: reqwest::Client::new(),
            sent: 0,
            replies_before: 0,
        }
    }

    /// Sends one chat message from the owner in a direct chat and waits for its reply.
    async fn say(&mut self, text: &str) -> String {
        self.post("user-1", "direct", text).await;
        self.wait_reply().await
    }

    /// Sends the numbered messages one by one; each must get its own correct answer.
    async fn say_numbered(&mut self, numbers: std::ops::RangeInclusive<u64>) {
        for n in numbers {
            let reply = self.say(&numbered(n)).await;
            assert_eq!(
                reply,
                format!("Answer to message {n}."),
                "reply to message {n}"
            );
        }
    }

    /// Posts one message without waiting for a reply.
    async fn post(&mut self, sender: &str, chat_type: &str, text: &str) {
        self.sent += 1;
        self.replies_before = self.receiver.posted().len();
        let body = serde_json::to_vec(&json!({
            "message_id": format!("m-{}", self.sent), "chat_id": "chat-1",
            "sender_id": sender, "text": text, "chat_type": chat_type
        }))
        .expect("test fixture");
        let signature = sign(SECRET.as_bytes(), &body);
        let response = self
            .client
            .post(format!("http://{}/webhook/generic", self.running.addr))
            .header("content-type", "application/json")
            .header("x-clawless-signature", signature)
            .body(body)
            .send()
            .await
            .expect("test fixture");
        assert_eq!(
            response.status().as_u16(),
            202,
            "message {} accepted",
            self.sent
        );
    }

    /// Waits for the reply to the last message posted.
    async fn wait_reply(&mut self) -> String {
        let before = self.replies_before;
        let posted = self
            .receiver
            .wait_for(before + 1, Duration::from_secs(60))
            .await;
        assert!(posted.len() > before, "message {} got no reply", self.sent);
        posted[before].body["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    fn replies(&self) -> Vec<String> {
        self.receiver
            .posted()
            .iter()
            .map(|posted| posted.body["text"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

fn chats(seen: &[SeenRequest]) -> Vec<&SeenRequest> {
    seen.iter()
        .filter(|request| request.kind == RequestKind::Chat && !request.refused)
        .collect()
}

/// The latest chat request the model answered.
fn last_chat(model: &WindowedModel) -> SeenRequest {
    chats(&model.seen())
        .last()
        .copied()
        .cloned()
        .expect("a chat request")
}

fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|message| message["role"] == "user")
        .map(|message| match &message["content"] {
            Value::String(text) => text.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|block| block["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        })
        .collect()
}

fn memory_notes(workspace: &Path) -> Vec<String> {
    std::fs::read_dir(workspace.join("memory"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|entry| std::fs::read_to_string(entry.path()).ok())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eighty_messages_through_a_12k_window_are_all_answered() {
    let model = WindowedModel::start(12_000, true).await;
    let mut chat = Chat::start_default(&model, 12_000).await;
    chat.say_numbered(1..=80).await;
    let seen = model.seen();
    let count = |kind: RequestKind| seen.iter().filter(|r| r.kind == kind).count();
    println!(
        "80 messages: {} model calls ({} chat, {} summary, {} memory flush)",
        seen.len(),
        count(RequestKind::Chat),
        count(RequestKind::Summary),
        count(RequestKind::MemoryFlush)
    );
    assert!(seen.len() <= 120, "{} model calls", seen.len());
    assert!(
        seen.iter().all(|request| !request.refused),
        "nothing was refused"
    );
    let summaries = seen
        .iter()
        .filter(|r| r.kind == RequestKind::Summary)
        .count();
    assert!(summaries >= 2, "compacted: {summaries} summary calls");
    // The summaries reach later requests.
    let last = chats(&seen).last().expect("chat requests").body.clone();
    assert!(
        user_texts(&last)
            .iter()
            .any(|text| text.contains("SUMMARY-")),
        "the latest request carries a summary"
    );
    // A memory note was written, and the flushes' output never reached the chat.
    let kinds: Vec<(RequestKind, u64)> = seen.iter().map(|r| (r.kind, r.tokens)).collect();
    assert!(
        seen.iter().any(|r| r.kind == RequestKind::MemoryFlush),
        "no memory flush among {kinds:?}"
    );
    let notes = memory_notes(&chat.workspace);
    assert!(
        notes.iter().any(|note| note.contains("numbered messages")),
        "memory notes: {notes:?}"
    );
    assert!(seen.iter().any(|r| r.kind == RequestKind::MemoryFlush));
    assert_eq!(
        chat.replies().len(),
        80,
        "nothing but the 80 answers reached the chat"
    );
    // Every request stayed inside the window minus the reserve (a quarter of 12k).
    let peak = seen.iter().map(|request| request.tokens).max().unwrap_or(0);
    assert!(peak <= 9_000, "peak request {peak} tokens");
    // No thrash: the request after each compaction leaves a quarter of the window (3,000)
    // free below the compaction threshold (9,000).
    assert_room_after_compactions(&seen, 6_000);
}

/// Each chat request that follows a compaction holds at most `most` tokens.
fn assert_room_after_compactions(seen: &[SeenRequest], most: u64) {
    for (index, request) in seen.iter().enumerate() {
        if request.kind != RequestKind::Summary {
            continue;
        }
        let next = seen[index..]
            .iter()
            .find(|later| later.kind == RequestKind::Chat)
            .expect("the turn goes on after its compaction");
        assert!(
            next.tokens <= most,
            "after a compaction: {} tokens",
            next.tokens
        );
    }
}

/// An 8k window, the default config: every message is answered, in at most 1.75 model calls
/// a message, and no request is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_messages_through_an_8k_window_are_all_answered() {
    let model = WindowedModel::start(8_000, false).await;
    let mut chat = Chat::start_default(&model, 8_000).await;
    chat.say_numbered(1..=40).await;
    let seen = model.seen();
    let count = |kind: RequestKind| seen.iter().filter(|r| r.kind == kind).count();
    println!(
        "40 messages at 8k: {} model calls ({} chat, {} summary, {} memory flush)",
        seen.len(),
        count(RequestKind::Chat),
        count(RequestKind::Summary),
        count(RequestKind::MemoryFlush)
    );
    assert!(seen.len() <= 70, "{} model calls", seen.len());
    assert!(seen.iter().all(|request| !request.refused));
    // The fixed part took at most 40% of the window, and the model was told what was cut.
    let first = chats(&seen)[0].body.clone();
    let fixed = (first["system"].to_string().len() + first["tools"].to_string().len()) / 4;
    println!("fixed part at 8k: {fixed} tokens");
    assert!(fixed <= 3_200, "fixed part {fixed} tokens");
    assert!(
        first["system"]
            .to_string()
            .contains("Shortened for this small context window"),
        "the model is told"
    );
    assert!(count(RequestKind::Summary) >= 1, "it compacted");
    assert_eq!(chat.replies().len(), 40);
    // Threshold 6,000 (8k minus its reserve); a quarter of the window (2,000) stays free.
    assert_room_after_compactions(&seen, 4_000);
    // `/context` lists what a request carries, and what was shortened for the window.
    let calls = model.seen().len();
    let listed = chat.say("/context").await;
    for part in [
        "Window: 8000 tok",
        "- Tooling: ",
        "Project Context files: ",
        "AGENTS.md: ",
        "Tool schemas: ",
        "Transcript: ~",
        "Summary: ",
        "Shortened for the window: optional prompt sections left out",
    ] {
        assert!(listed.contains(part), "{part:?} in {listed}");
    }
    assert!(!listed.contains("Summary: none"), "{listed}");
    let detail = chat.say("/context detail").await;
    assert!(
        detail.contains("- cron: ") && detail.contains("- read: "),
        "{detail}"
    );
    assert_eq!(model.seen().len(), calls, "no model call for /context");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_whose_real_window_is_smaller_recovers_through_its_overflow_error() {
    let model = WindowedModel::start(7_000, false).await;
    let mut chat = Chat::start(&model, 12_000).await;
    chat.say_numbered(1..=30).await;
    let seen = model.seen();
    assert!(
        seen.iter().any(|request| request.refused),
        "the model refused something"
    );
    let last = seen.last().expect("requests");
    assert!(!last.refused && last.tokens <= 7_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_starts_fresh_and_compact_shrinks_the_next_request() {
    let model = WindowedModel::start(32_000, false).await;
    let mut chat = Chat::start(&model, 32_000).await;
    for n in 1..=6 {
        chat.say(&numbered(n)).await;
    }
    // /compact: the next request is smaller and carries the summary.
    let before = last_chat(&model).tokens;
    let reply = chat.say("/compact keep the numbers").await;
    assert!(reply.starts_with("⚙️ Compacted ("), "{reply}");
    assert_eq!(chat.say(&numbered(7)).await, "Answer to message 7.");
    let after = last_chat(&model);
    assert!(after.tokens < before, "{} < {before}", after.tokens);
    let texts = user_texts(&after.body);
    assert!(texts[0].contains("SUMMARY-"), "{texts:?}");
    assert!(!texts.iter().any(|text| text.starts_with("Message 1:")));
    // /new with a first message: the next request carries nothing from before.
    assert_eq!(
        chat.say(&format!("/new {}", numbered(50))).await,
        "Answer to message 50."
    );
    let fresh = last_chat(&model);
    let texts = user_texts(&fresh.body);
    assert_eq!(texts.len(), 1, "{texts:?}");
    assert!(texts[0].starts_with("Message 50:"));
    // A bare /reset gets the greeting turn.
    let greeting = chat.say("/reset").await;
    assert_eq!(greeting, "Greetings!");
    let greet = last_chat(&model);
    let texts = user_texts(&greet.body);
    assert_eq!(texts.len(), 1);
    assert!(texts[0].contains("A new session was started via /new or /reset."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_giant_paste_is_explained_plainly() {
    let model = WindowedModel::start(8_000, false).await;
    let mut chat = Chat::start(&model, 8_000).await;
    assert_eq!(chat.say(&numbered(1)).await, "Answer to message 1.");
    let giant = format!("Message 2: {}", "x".repeat(60_000));
    let reply = chat.say(&giant).await;
    assert!(reply.contains("too large for the model"), "{reply}");
    assert!(!reply.contains("could not be reached"), "{reply}");
    // And the chat goes on.
    assert_eq!(chat.say(&numbered(3)).await, "Answer to message 3.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_memory_flush_runs_where_write_is_denied() {
    let model = WindowedModel::start(8_000, false).await;
    let mut chat = Chat::start_with(&model, 8_000, "", &["write"]).await;
    chat.say_numbered(1..=20).await;
    let seen = model.seen();
    assert!(
        seen.iter().any(|r| r.kind == RequestKind::Summary),
        "it compacted"
    );
    assert!(
        !seen.iter().any(|r| r.kind == RequestKind::MemoryFlush),
        "but never flushed"
    );
    assert!(memory_notes(&chat.workspace).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_group_only_the_owner_may_reset() {
    let model = WindowedModel::start(32_000, false).await;
    let mut chat = Chat::start_with(&model, 32_000, "session:\n  dmScope: main\n", &[]).await;
    chat.post("user-1", "group", &numbered(1)).await;
    assert_eq!(chat.wait_reply().await, "Answer to message 1.");
    // A member who is not the owner: the command is ignored, without a reply.
    chat.post("user-2", "group", "/new").await;
    chat.post("user-1", "group", &numbered(2)).await;
    assert_eq!(chat.wait_reply().await, "Answer to message 2.");
    let texts = user_texts(&last_chat(&model).body);
    assert!(
        texts.iter().any(|text| text.starts_with("Message 1:")),
        "nothing was reset"
    );
    assert_eq!(chat.replies().len(), 2, "the ignored command got no reply");
    // The owner may.
    chat.post("user-1", "group", &format!("/reset {}", numbered(3)))
        .await;
    assert_eq!(chat.wait_reply().await, "Answer to message 3.");
    let texts = user_texts(&last_chat(&model).body);
    assert_eq!(texts.len(), 1, "{texts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_with_a_model_switches_the_sessions_model() {
    let model = WindowedModel::start(32_000, false).await;
    let mut chat = Chat::start(&model, 32_000).await;
    assert_eq!(chat.say(&numbered(1)).await, "Answer to message 1.");
    assert_eq!(last_chat(&model).body["model"], "claude-test");
    // An allowed model is chosen; the rest of the command is the first message.
    let reply = chat
        .say(&format!("/new anthropic/claude-other {}", numbered(2)))
        .await;
    assert_eq!(reply, "Answer to message 2.");
    let request = last_chat(&model);
    assert_eq!(request.body["model"], "claude-other");
    assert_eq!(user_texts(&request.body).len(), 1);
    // The choice stays with the session.
    assert_eq!(chat.say(&numbered(3)).await, "Answer to message 3.");
    assert_eq!(last_chat(&model).body["model"], "claude-other");
    // A model that is not allowed is just words of the first message.
    chat.say(&format!("/new openai/gpt-9 {}", numbered(4)))
        .await;
    let request = last_chat(&model);
    assert_eq!(
        request.body["model"], "claude-other",
        "an explicit reset keeps the choice"
    );
    assert!(user_texts(&request.body)[0].starts_with("openai/gpt-9 Message 4:"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_flush_offers_only_what_the_policy_allows() {
    let model = WindowedModel::start(8_000, false).await;
    let mut chat = Chat::start_with(&model, 8_000, "", &["read"]).await;
    chat.say_numbered(1..=20).await;
    let seen = model.seen();
    let flush = seen
        .iter()
        .find(|r| r.kind == RequestKind::MemoryFlush)
        .expect("a memory flush");
    let tools: Vec<&str> = flush.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(
        tools,
        vec!["write"],
        "read is denied, and write is narrowed"
    );
    let description = flush.body["tools"][0]["description"]
        .as_str()
        .unwrap_or_default();
    assert!(description.contains("memory/"), "{description}");
    // Its output never reached the chat.
    assert_eq!(chat.replies().len(), 20);
}

/// The memory flush is a turn of its own (spec §3): its request ends with the flush prompt as
/// the only new user message, and the chat message waiting for an answer is not in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_flush_never_carries_the_pending_chat_message() {
    let model = WindowedModel::start(12_000, false).await;
    let mut chat = Chat::start(&model, 12_000).await;
    chat.say_numbered(1..=20).await;
    let seen = model.seen();
    let flushes: Vec<usize> = seen
        .iter()
        .enumerate()
        .filter(|(_, request)| request.kind == RequestKind::MemoryFlush)
        .map(|(index, _)| index)
        .collect();
    assert!(!flushes.is_empty(), "no memory flush ran");
    for index in flushes {
        let flush = &seen[index];
        let pending = seen[index..]
            .iter()
            .find(|request| request.kind == RequestKind::Chat)
            .and_then(|request| user_texts(&request.body).pop())
            .expect("the turn goes on after its flush");
        let texts = user_texts(&flush.body);
        let last = texts.last().expect("a flush prompt");
        assert!(!last.contains("Message "), "{last}");
        let body = flush.body.to_string();
        let pending_head: String = pending.chars().take(40).collect();
        assert!(
            !body.contains(&pending_head),
            "the flush saw the pending message {pending_head:?}"
        );
    }
    assert_eq!(chat.replies().len(), 20);
}

/// The part every request repeats (system prompt and tool schemas), on the first request of a
/// fresh agent with the default config and the repository's bundled skills.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fixed_part_of_a_fresh_agents_first_request_is_small() {
    let model = WindowedModel::start(200_000, false).await;
    let mut chat = Chat::start_default(&model, 200_000).await;
    assert_eq!(chat.say(&numbered(1)).await, "Answer to message 1.");
    let first = last_chat(&model);
    let system = first.body["system"].to_string().len();
    let tools = first.body["tools"].as_array().cloned().unwrap_or_default();
    let mut sizes: Vec<(String, usize)> = tools
        .iter()
        .map(|tool| {
            (
                tool["name"].as_str().unwrap_or("?").to_owned(),
                tool.to_string().len(),
            )
        })
        .collect();
    sizes.sort_by_key(|(_, size)| std::cmp::Reverse(*size));
    let tool_bytes: usize = sizes.iter().map(|(_, size)| size).sum();
    println!("system {system} bytes, tools {tool_bytes} bytes: {sizes:?}");
    let fixed_tokens = (system + tool_bytes) / 4;
    println!("fixed part: {fixed_tokens} tokens");
    if std::env::var_os("SHOW_FIXED").is_some() {
        println!("{}", first.body["system"][0]["text"].as_str().unwrap_or(""));
        println!(
            "{}",
            serde_json::to_string_pretty(&first.body["tools"]).unwrap()
        );
    }
    assert!(fixed_tokens <= 4_000, "fixed part {fixed_tokens} tokens");
}
