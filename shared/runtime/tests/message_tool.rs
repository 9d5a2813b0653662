//! The `message` tool end to end, with a scripted model and a real reply receiver on loopback:
//! - through `clawless local`, a send to another chat of the generic channel arrives once and
//!   the turn still answers; a send to the current chat replaces the final reply; a send to
//!   another channel is refused by the cross-context policy;
//! - killed right after the send (before its result is stored), the redelivered turn runs
//!   the call again under the same idempotency key, so the receiver sees one delivery;
//! - the generic channel's reply URL: the request's shape, signature and idempotency header,
//!   and the answer's meaning (2xx with a message id, 4xx refused for good, 5xx retried).
//! - a send with a workspace file (`media`) reaches the other chat once with the file; paths
//!   out of the workspace, `~`, URLs and the agent's memory from a group are refused with
//!   their reasons and nothing goes out.

mod support;

use std::collections::{BTreeSet, VecDeque};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use clawless_base::clock::SystemClock;
use clawless_base::session_key::ChatType;
use clawless_channels::{HttpReplySender, sign, verify};
use clawless_core::outbox::{Outbox, OutboxError};
use clawless_core::session::{
    SessionCommit, SessionKey, SessionStore, SessionStoreError, StoredSession,
};
use clawless_core::turn::OutboundReply;
use clawless_core::turn::events::{ChatRef, InboundMessage, SessionEvent, TurnEvent};
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_local::sqlite::{SqliteDb, SqliteSessionStore};
use clawless_runtime::ClawlessConfig;
use clawless_runtime::local_mode::{LocalOptions, start_local};
use serde_json::{Value, json};
use support::{Fixture, SECRET, anthropic_text, anthropic_tool_use};

const MESSAGES: &str = "/v1/messages";
const PATIENCE: Duration = Duration::from_secs(30);

/// One POST as the receiver saw it.
#[derive(Debug, Clone)]
struct Received {
    signature_ok: bool,
    idempotency_key: String,
    body: Value,
}

/// A generic-channel receiver on loopback: records every POST, answers with the scripted
/// statuses first (then 200 with a `message_id`), and counts deliveries the way a receiver
/// honouring `Idempotency-Key` would.
#[derive(Clone)]
struct Receiver {
    url: String,
    received: Arc<Mutex<Vec<Received>>>,
    statuses: Arc<Mutex<VecDeque<u16>>>,
}

impl Receiver {
    async fn start() -> Self {
        let received: Arc<Mutex<Vec<Received>>> = Arc::default();
        let statuses: Arc<Mutex<VecDeque<u16>>> = Arc::default();
        let (sink, script) = (Arc::clone(&received), Arc::clone(&statuses));
        let app = Router::new().route(
            "/replies",
            post(move |headers: HeaderMap, body: Bytes| {
                let (sink, script) = (Arc::clone(&sink), Arc::clone(&script));
                async move {
                    let signature = headers
                        .get("x-clawless-signature")
                        .and_then(|v| v.to_str().ok());
                    let mut sink = sink.lock().expect("lock");
                    sink.push(Received {
                        signature_ok: verify(SECRET.as_bytes(), &body, signature).is_ok(),
                        idempotency_key: headers
                            .get("idempotency-key")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned(),
                        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                    });
                    let n = sink.len();
                    match script.lock().expect("lock").pop_front() {
                        Some(status) => (
                            StatusCode::from_u16(status).expect("a status"),
                            String::from("{\"error\": \"scripted\"}"),
                        ),
                        None => (StatusCode::OK, format!("{{\"message_id\": \"rcv-{n}\"}}")),
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/replies", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
        Self {
            url,
            received,
            statuses,
        }
    }

    fn answer_next(&self, statuses: &[u16]) {
        self.statuses.lock().expect("lock").extend(statuses);
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().expect("lock").clone()
    }

    /// The deliveries a receiver honouring `Idempotency-Key` keeps: the first POST of each
    /// key, as (chat id, text).
    fn deliveries(&self) -> Vec<(String, String)> {
        let mut keys = BTreeSet::new();
        self.received()
            .into_iter()
            .filter(|post| keys.insert(post.idempotency_key.clone()))
            .map(|post| {
                (
                    post.body["chat_id"].as_str().unwrap_or_default().to_owned(),
                    post.body["text"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    async fn wait_for_deliveries(&self, n: usize) -> Vec<(String, String)> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let deliveries = self.deliveries();
            if deliveries.len() >= n || tokio::time::Instant::now() >= deadline {
                return deliveries;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn webhook_body(id: &str, text: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "message_id": id, "chat_id": "chat-1", "sender_id": "user-1",
        "text": text, "chat_type": "direct"
    }))
    .expect("body")
}

async fn post_message(client: &reqwest::Client, webhook: &str, id: &str, text: &str) {
    let body = webhook_body(id, text);
    let signature = sign(SECRET.as_bytes(), &body);
    let status = client
        .post(webhook)
        .header("content-type", "application/json")
        .header("x-clawless-signature", signature)
        .body(body)
        .send()
        .await
        .expect("webhook reachable")
        .status();
    assert_eq!(status.as_u16(), 202);
}

/// The text of the tool result the model was shown in request `request`.
fn tool_result_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|message| message["content"].as_array().cloned().unwrap_or_default())
        .filter(|block| block["type"] == "tool_result")
        .map(|block| match &block["content"] {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|part| part["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_sends_through_clawless_local_follow_the_policy_and_replace_duplicate_replies() {
    // GIVEN clawless local with the generic channel posting to a receiver, and a model that
    // (1) messages another chat then answers, (2) messages the current chat then says so,
    // (3) tries another channel
    let fixture = Fixture::new();
    let model = ScriptedServer::start().await;
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_tool_use(
            "toolu_1",
            "message",
            json!({"action": "send", "target": "chat-2", "message": "Dinner at 8.\\nBring wine."}),
        )),
    );
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("I told chat-2 about dinner.")),
    );
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_tool_use(
            "toolu_2",
            "message",
            json!({"action": "send", "message": "Here is your answer: 42."}),
        )),
    );
    model.push(MESSAGES, ScriptedReply::json(anthropic_text("Sent above.")));
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_tool_use(
            "toolu_3",
            "message",
            json!({"action": "send", "channel": " Telegram ", "to": "12345", "message": "psst"}),
        )),
    );
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("I cannot reach Telegram from here.")),
    );
    let receiver = Receiver::start().await;
    // The sender is the owner: a stranger's session is sandboxed, and a sandbox offers no
    // `message` unless `tools.sandbox.tools.alsoAllow` names it.
    let yaml = fixture
        .config_yaml(&model.base_url(), &receiver.url)
        .replace("    replyUrl:", "    owners: [user-1]\n    replyUrl:");
    let config = ClawlessConfig::from_yaml(&yaml, "test").expect("config");
    let running = start_local(LocalOptions {
        config: config.clone(),
        state_dir: fixture.state_dir(),
        listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        model: clawless_llm::build_model(&config.models, &|_| None).expect("model"),
        secrets: Default::default(),
    })
    .await
    .expect("local mode starts");
    let webhook = format!("http://{}/webhook/generic", running.addr);
    let client = reqwest::Client::new();

    // WHEN the first message asks for a message to another chat
    post_message(&client, &webhook, "m-1", "Tell chat-2 about dinner").await;
    let deliveries = receiver.wait_for_deliveries(2).await;
    // THEN it arrives there once, with real newlines, and the turn still answers here
    assert_eq!(
        deliveries,
        [
            ("chat-2".to_owned(), "Dinner at 8.\nBring wine.".to_owned()),
            (
                "chat-1".to_owned(),
                "I told chat-2 about dinner.".to_owned()
            ),
        ]
    );
    let received = receiver.received();
    assert!(received.iter().all(|post| post.signature_ok));
    assert!(
        received
            .iter()
            .all(|post| { post.body["reply_id"].as_str() == Some(post.idempotency_key.as_str()) })
    );
    let requests = model.requests_to(MESSAGES);
    // Offered in short form at first; once called, the full schema.
    let tools = &requests[1].body["tools"];
    let message_tool = tools
        .as_array()
        .expect("tools")
        .iter()
        .find(|tool| tool["name"] == "message")
        .expect("message is offered");
    assert_eq!(
        message_tool["input_schema"]["properties"]["action"]["enum"],
        json!(["send"]),
        "the generic channel only sends"
    );
    let result = tool_result_text(&requests[1].body);
    assert!(result.contains(r#""chatId": "chat-2""#), "{result}");
    assert!(result.contains(r#""messageId": "rcv-1""#), "{result}");

    // WHEN the second message is answered through the message tool, to the current chat
    post_message(&client, &webhook, "m-2", "What is the answer?").await;
    let deliveries = receiver.wait_for_deliveries(3).await;
    // THEN the send arrives, and the final reply ("Sent above.") is not sent after it
    assert_eq!(
        deliveries[2],
        ("chat-1".to_owned(), "Here is your answer: 42.".to_owned())
    );

    // WHEN the third message makes the model try another channel
    post_message(&client, &webhook, "m-3", "Tell my Telegram friend").await;
    let deliveries = receiver.wait_for_deliveries(4).await;
    // THEN the policy refuses it and only the turn's answer arrives
    assert_eq!(
        deliveries[3..],
        [(
            "chat-1".to_owned(),
            "I cannot reach Telegram from here.".to_owned()
        )]
    );
    let requests = model.requests_to(MESSAGES);
    let refusal = tool_result_text(&requests[5].body);
    assert!(
        refusal.contains(
            r#"Cross-context messaging denied: action=send target provider \"telegram\" while bound to \"generic\"."#
        ),
        "{refusal}"
    );
    // AND nothing more went out: "Sent above." never did
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        receiver.deliveries().len(),
        4,
        "{:?}",
        receiver.deliveries()
    );
    assert!(
        receiver
            .received()
            .iter()
            .all(|post| post.body["text"] != "Sent above.")
    );
}

/// The smallest PNG header: enough for the file to be taken as an image.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR-chart";

fn group_body(id: &str, text: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "message_id": id, "chat_id": "group-1", "sender_id": "user-1",
        "text": text, "chat_type": "group"
    }))
    .expect("body")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_sends_a_workspace_file_once_and_refuses_files_out_of_reach() {
    // GIVEN clawless local (generic channel) with `chart.png` and `MEMORY.md` in the workspace,
    // and a model that sends the chart to chat-2, then tries files it may not send
    let fixture = Fixture::new();
    let workspace = fixture.path().join("workspace");
    std::fs::write(workspace.join("chart.png"), PNG).expect("chart");
    std::fs::write(workspace.join("MEMORY.md"), "The owner's secrets.\n").expect("memory");
    let model = ScriptedServer::start().await;
    let send = |id: &str, input: Value| {
        model.push(
            MESSAGES,
            ScriptedReply::json(anthropic_tool_use(id, "message", input)),
        );
    };
    send(
        "toolu_1",
        json!({"action": "send", "target": "chat-2", "message": "This week's chart", "media": "chart.png"}),
    );
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("Sent the chart.")),
    );
    send(
        "toolu_2",
        json!({"action": "send", "target": "chat-2", "message": "x", "media": "../../etc/passwd"}),
    );
    send(
        "toolu_3",
        json!({"action": "send", "target": "chat-2", "message": "x", "filePath": "~/x"}),
    );
    send(
        "toolu_4",
        json!({"action": "send", "target": "chat-2", "message": "x", "media": ["https://example.com/a.png"]}),
    );
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("None of those.")),
    );
    send(
        "toolu_5",
        json!({"action": "send", "target": "chat-2", "message": "notes", "media": "MEMORY.md"}),
    );
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("Memory stays here.")),
    );
    let receiver = Receiver::start().await;
    let yaml = fixture
        .config_yaml(&model.base_url(), &receiver.url)
        .replace("    replyUrl:", "    owners: [user-1]\n    replyUrl:");
    let config = ClawlessConfig::from_yaml(&yaml, "test").expect("config");
    let running = start_local(LocalOptions {
        config: config.clone(),
        state_dir: fixture.state_dir(),
        listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        model: clawless_llm::build_model(&config.models, &|_| None).expect("model"),
        secrets: Default::default(),
    })
    .await
    .expect("local mode starts");
    let webhook = format!("http://{}/webhook/generic", running.addr);
    let client = reqwest::Client::new();

    // WHEN the owner asks for the chart to be sent to chat-2
    post_message(&client, &webhook, "m-1", "Send chat-2 the chart").await;
    let deliveries = receiver.wait_for_deliveries(2).await;
    // THEN chat-2 gets the file once, with the text beside it, and the turn answers here
    assert_eq!(
        deliveries,
        [
            ("chat-2".to_owned(), "This week's chart".to_owned()),
            ("chat-1".to_owned(), "Sent the chart.".to_owned()),
        ]
    );
    let with_files: Vec<Received> = receiver
        .received()
        .into_iter()
        .filter(|post| post.body.get("attachments").is_some())
        .collect();
    assert_eq!(with_files.len(), 1, "one upload");
    assert!(with_files[0].signature_ok);
    let attachments = with_files[0].body["attachments"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(attachments.len(), 1, "{attachments:?}");
    let chart = &attachments[0];
    assert_eq!(chart["name"], "chart.png");
    assert_eq!(chart["mime"], "image/png");
    // The file travels inline or by a link the deployment serves: either way, these bytes.
    let bytes = match (chart["data"].as_str(), chart["url"].as_str()) {
        (Some(data), _) => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(data)
                .expect("base64")
        }
        (None, Some(url)) => client
            .get(url)
            .send()
            .await
            .expect("the link is served")
            .bytes()
            .await
            .expect("the file")
            .to_vec(),
        (None, None) => panic!("no file in {chart}"),
    };
    assert_eq!(bytes, PNG);
    let requests = model.requests_to(MESSAGES);
    let result = tool_result_text(&requests[1].body);
    assert!(result.contains(r#""media": ["#), "{result}");
    assert!(result.contains("chart.png"), "{result}");

    // WHEN the model names a path out of the workspace, a home path and a URL
    post_message(&client, &webhook, "m-2", "Now send the other files").await;
    let deliveries = receiver.wait_for_deliveries(3).await;
    // THEN each is refused with its reason, and only the turn's answer goes out
    assert_eq!(
        deliveries[2..],
        [("chat-1".to_owned(), "None of those.".to_owned())]
    );
    let requests = model.requests_to(MESSAGES);
    let refusals = tool_result_text(&requests[5].body);
    for expected in [
        "Cannot send ../../etc/passwd: paths with `..` segments are not delivered.",
        "Cannot send ~/x: paths under a home directory (~) are not delivered.",
        "Cannot send https://example.com/a.png: clawless does not download files to send them",
    ] {
        assert!(refusals.contains(expected), "{expected} in {refusals}");
    }

    // WHEN the owner, in a group, has the model send the agent's memory
    let body = group_body("m-3", "Share your notes with chat-2");
    let signature = sign(SECRET.as_bytes(), &body);
    let status = client
        .post(&webhook)
        .header("content-type", "application/json")
        .header("x-clawless-signature", signature)
        .body(body)
        .send()
        .await
        .expect("webhook reachable")
        .status();
    assert_eq!(status.as_u16(), 202);
    let deliveries = receiver.wait_for_deliveries(4).await;
    // THEN memory stays out of the group's reach: refused, nothing sent to chat-2
    assert_eq!(
        deliveries[3..],
        [("group-1".to_owned(), "Memory stays here.".to_owned())]
    );
    let requests = model.requests_to(MESSAGES);
    let refusal = tool_result_text(&requests[7].body);
    assert!(
        refusal.contains("Cannot send MEMORY.md: the agent's memory stays out of this chat."),
        "{refusal}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.received().len(), 4, "{:?}", receiver.deliveries());
}

/// A session store that fails the first commit carrying the `message` call's result, after
/// the send went out: the process "dies" between sending and recording.
#[derive(Debug)]
struct DiesAfterTheSend {
    inner: Arc<dyn SessionStore>,
    died: AtomicUsize,
}

#[async_trait]
impl SessionStore for DiesAfterTheSend {
    async fn load(&self, key: &SessionKey) -> Result<Option<StoredSession>, SessionStoreError> {
        self.inner.load(key).await
    }

    async fn load_live(
        &self, key: &SessionKey,
    ) -> Result<Option<StoredSession>, SessionStoreError> {
        self.inner.load_live(key).await
    }

    async fn commit(
        &self, key: &SessionKey, commit: &SessionCommit,
    ) -> Result<u64, SessionStoreError> {
        let carries_the_result = commit.steps.iter().any(|step| {
            step.body.contains(r#""type":"toolResult""#)
                && step.body.contains(r#""toolName":"message""#)
        });
        if carries_the_result && self.died.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(SessionStoreError::Unavailable {
                message: "killed right after the send".to_owned(),
                source: None,
            });
        }
        self.inner.commit(key, commit).await
    }

    fn max_record_bytes(&self) -> usize {
        self.inner.max_record_bytes()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_killed_right_after_the_send_delivers_it_once() {
    // GIVEN a model that messages another chat, then answers
    let fixture = Fixture::new();
    let model = ScriptedServer::start().await;
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_tool_use(
            "toolu_1",
            "message",
            json!({"action": "send", "target": "chat-2", "message": "The build is green."}),
        )),
    );
    model.push(MESSAGES, ScriptedReply::json(anthropic_text("Done.")));
    let receiver = Receiver::start().await;
    let config = ClawlessConfig::from_yaml(
        &fixture.config_yaml(&model.base_url(), &receiver.url),
        "test",
    )
    .expect("config");
    let db = SqliteDb::open(fixture.path().join("sessions.db")).expect("db");
    let sqlite: Arc<dyn SessionStore> = Arc::new(SqliteSessionStore::new(db));
    let sessions = Arc::new(DiesAfterTheSend {
        inner: sqlite,
        died: AtomicUsize::new(0),
    });
    let turns = support::turn_service(
        &config,
        sessions.clone(),
        &receiver.url,
        Arc::new(SystemClock),
    );
    let event = SessionEvent {
        session_key: "agent:main:main".to_owned(),
        agent_id: "main".to_owned(),
        event: TurnEvent::Inbound(InboundMessage {
            message_id: "m-1".to_owned(),
            chat: ChatRef {
                channel: "generic".to_owned(),
                chat_id: "chat-1".to_owned(),
                chat_type: ChatType::Direct,
            },
            sender_id: "user-1".to_owned(),
            text: "Tell chat-2 the build is green".to_owned(),
            sender_is_owner: true,
            attachments: Vec::new(),
        }),
    };

    // WHEN the turn dies right after the send, and the queue delivers the event again
    let first = turns.handle(&event).await;
    assert!(first.is_err(), "the first attempt dies");
    assert_eq!(
        receiver.received().len(),
        1,
        "the send went out before the crash"
    );
    turns
        .handle(&event)
        .await
        .expect("the redelivery finishes the turn");

    // THEN the call ran again under the same key, and the receiver keeps one copy
    let received = receiver.received();
    let to_chat_2: Vec<&Received> = received
        .iter()
        .filter(|post| post.body["chat_id"] == "chat-2")
        .collect();
    assert_eq!(to_chat_2.len(), 2, "re-sent after the crash");
    assert_eq!(to_chat_2[0].idempotency_key, to_chat_2[1].idempotency_key);
    assert_eq!(
        receiver.deliveries(),
        [
            ("chat-2".to_owned(), "The build is green.".to_owned()),
            ("chat-1".to_owned(), "Done.".to_owned()),
        ]
    );
    assert_eq!(
        model.requests_to(MESSAGES).len(),
        2,
        "the model is not asked again"
    );
}

fn reply(id: &str, chat_id: &str, text: &str) -> OutboundReply {
    OutboundReply {
        reply_id: id.to_owned(),
        chat: ChatRef {
            channel: "generic".to_owned(),
            chat_id: chat_id.to_owned(),
            chat_type: ChatType::Group,
        },
        text: text.to_owned(),
        approval_code: None,
        in_reply_to: None,
        media: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generic_reply_url_gets_signed_keyed_posts_and_its_answers_are_mapped() {
    let receiver = Receiver::start().await;
    let sender = HttpReplySender::new(reqwest::Client::new(), &receiver.url, SECRET.as_bytes());

    // A delivery: the body's shape, the signature, the key; the receiver's message id back.
    let delivery = sender
        .deliver(&reply("r-1", "room-9", "hello"))
        .await
        .expect("delivered");
    assert_eq!(delivery.message_id.as_deref(), Some("rcv-1"));
    let posted = &receiver.received()[0];
    assert!(posted.signature_ok);
    assert_eq!(posted.idempotency_key, "r-1");
    assert_eq!(
        posted.body,
        json!({"reply_id": "r-1", "channel": "generic", "chat_id": "room-9",
               "chat_type": "group", "text": "hello"})
    );

    // 4xx: refused for good (a retry cannot help), but 408 and 429 are worth retrying.
    receiver.answer_next(&[400, 404, 429, 408, 503, 500]);
    for expected_rejected in [true, true, false, false, false, false] {
        let err = sender
            .deliver(&reply("r-2", "room-9", "again"))
            .await
            .expect_err("scripted failure");
        assert_eq!(
            matches!(err, OutboxError::Rejected { .. }),
            expected_rejected,
            "{err}"
        );
        if !expected_rejected {
            assert!(matches!(err, OutboxError::Failed { .. }), "{err}");
        }
    }
    // Then it goes through, under the same key.
    sender
        .send(&reply("r-2", "room-9", "again"))
        .await
        .expect("delivered");
    let keys: Vec<String> = receiver
        .received()
        .iter()
        .map(|post| post.idempotency_key.clone())
        .collect();
    assert_eq!(keys[1..], ["r-2"; 7]);

    // Any chat id is reachable; threads are not, nor ids no inbound message could have.
    let chat = sender
        .resolve_target("generic", "room-10", None)
        .await
        .expect("resolves");
    assert_eq!(chat.chat_id, "room-10");
    for (target, thread) in [("room-10", Some("t-1")), ("bad\nid", None), (" ", None)] {
        let err = sender
            .resolve_target("generic", target, thread)
            .await
            .expect_err(target);
        assert!(matches!(err, OutboxError::Rejected { .. }), "{err}");
    }
}
