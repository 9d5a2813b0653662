//! The `message` tool's channel side on Telegram, Slack and Discord, against one fake platform
//! API on loopback that records every call (method, path, `Authorization`, JSON body) and
//! answers from a script: what each action sends, which actions each channel offers and how
//! its gates turn them off, how a model's targets are read, how refusals and failures are told
//! apart, and that a retried send or poll with the same id reaches the platform once. A send
//! with files goes through each platform's real upload (Telegram multipart with a caption,
//! Slack's external upload flow with an `initial_comment`, Discord multipart with `content`,
//! the generic channel's inline attachments), once per action id.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::IntoResponse;
use clawless_base::media::{MediaKind, OutboundMedia};
use clawless_base::session_key::ChatType;
use clawless_channels::HttpReplySender;
use clawless_channels::discord::{DiscordConfig, DiscordSender};
use clawless_channels::slack::{SlackConfig, SlackSender};
use clawless_channels::telegram::{TelegramConfig, TelegramSender};
use clawless_core::outbox::{
    ActionRequest, MediaSend, MessageAction, MessageActionKind, Outbox, OutboxError, PollRequest,
};
use clawless_core::testing::InMemoryInbox;
use clawless_core::turn::OutboundReply;
use clawless_core::turn::events::ChatRef;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// A fake platform API
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Call {
    method: Method,
    path: String,
    auth: String,
    body: Value,
    /// The `Content-Type` header.
    content_type: String,
    /// The `Idempotency-Key` header.
    idempotency_key: String,
    /// The body as it came.
    raw: Vec<u8>,
}

impl Call {
    /// The parts of a `multipart/form-data` body.
    fn parts(&self) -> Vec<Part> {
        parse_multipart(&self.content_type, &self.raw)
    }

    /// The fields of a form-encoded body.
    fn form(&self) -> Vec<(String, String)> {
        assert_eq!(self.content_type, "application/x-www-form-urlencoded");
        url::form_urlencoded::parse(&self.raw)
            .into_owned()
            .collect()
    }

    /// The form field `name`, when present.
    fn field(&self, name: &str) -> Option<String> {
        self.form()
            .into_iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value)
    }
}

/// One part of a `multipart/form-data` body.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Part {
    name: String,
    filename: Option<String>,
    content_type: Option<String>,
    bytes: Vec<u8>,
}

impl Part {
    fn text(&self) -> String {
        String::from_utf8(self.bytes.clone()).expect("utf-8 field")
    }
}

/// A small RFC 7578 reader: enough to check what the senders write.
fn parse_multipart(content_type: &str, body: &[u8]) -> Vec<Part> {
    let boundary = content_type
        .strip_prefix("multipart/form-data; boundary=")
        .unwrap_or_else(|| panic!("not multipart: {content_type}"));
    let delimiter = format!("--{boundary}");
    let mut parts = Vec::new();
    let mut rest = body;
    loop {
        assert!(rest.starts_with(delimiter.as_bytes()), "no delimiter");
        rest = &rest[delimiter.len()..];
        if rest.starts_with(b"--") {
            break;
        }
        rest = rest.strip_prefix(b"\r\n").expect("line break");
        let header_end = find(rest, b"\r\n\r\n").expect("part headers");
        let headers = std::str::from_utf8(&rest[..header_end]).expect("headers");
        rest = &rest[header_end + 4..];
        let next = find(rest, format!("\r\n{delimiter}").as_bytes()).expect("part end");
        let mut part = Part {
            name: String::new(),
            filename: None,
            content_type: None,
            bytes: rest[..next].to_vec(),
        };
        rest = &rest[next + 2..];
        for header in headers.split("\r\n") {
            if let Some(value) = header.strip_prefix("Content-Disposition: form-data; ") {
                for param in value.split("; ") {
                    let (key, value) = param.split_once('=').expect("param");
                    let value = value.trim_matches('"').to_owned();
                    match key {
                        "name" => part.name = value,
                        "filename" => part.filename = Some(value),
                        other => panic!("unexpected parameter {other}"),
                    }
                }
            } else if let Some(value) = header.strip_prefix("Content-Type: ") {
                part.content_type = Some(value.to_owned());
            }
        }
        parts.push(part);
    }
    parts
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// The part `name` of `parts`, when there is one.
fn part<'a>(parts: &'a [Part], name: &str) -> Option<&'a Part> {
    parts.iter().find(|part| part.name == name)
}

#[derive(Clone)]
struct FakeApi {
    /// `http://127.0.0.1:<port>`.
    origin: String,
    base: String,
    calls: Arc<Mutex<Vec<Call>>>,
    /// Answers to give, in order; `default` once empty.
    script: Arc<Mutex<VecDeque<(u16, Value)>>>,
}

impl FakeApi {
    /// A fake answering `default` unless scripted otherwise; `prefix` is the API's base path.
    async fn start(prefix: &str, default: Value) -> Self {
        let calls: Arc<Mutex<Vec<Call>>> = Arc::default();
        let script: Arc<Mutex<VecDeque<(u16, Value)>>> = Arc::default();
        let (sink, answers) = (Arc::clone(&calls), Arc::clone(&script));
        let app = Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let (sink, answers, default) =
                    (Arc::clone(&sink), Arc::clone(&answers), default.clone());
                async move {
                    let header = |name: &str| {
                        headers
                            .get(name)
                            .and_then(|value| value.to_str().ok())
                            .unwrap_or_default()
                            .to_owned()
                    };
                    sink.lock().expect("test fixture").push(Call {
                        method,
                        path: uri.path().to_owned(),
                        auth: header("authorization"),
                        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                        content_type: header("content-type"),
                        idempotency_key: header("idempotency-key"),
                        raw: body.to_vec(),
                    });
                    let (status, answer) = answers
                        .lock()
                        .expect("test fixture")
                        .pop_front()
                        .unwrap_or((200, default));
                    let status = StatusCode::from_u16(status).expect("test fixture");
                    if status == StatusCode::NO_CONTENT {
                        return status.into_response();
                    }
                    (status, axum::Json(answer)).into_response()
                }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("test fixture");
        let origin = format!("http://{}", listener.local_addr().expect("test fixture"));
        tokio::spawn(async move { axum::serve(listener, app).await.expect("test fixture") });
        Self {
            base: format!("{origin}{prefix}"),
            origin,
            calls,
            script,
        }
    }

    fn answer_next(&self, status: u16, body: Value) {
        self.script
            .lock()
            .expect("test fixture")
            .push_back((status, body));
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().expect("test fixture").clone()
    }
}

fn chat(channel: &str, chat_id: &str, chat_type: ChatType) -> ChatRef {
    ChatRef {
        channel: channel.to_owned(),
        chat_id: chat_id.to_owned(),
        chat_type,
    }
}

fn request(chat: ChatRef, action: MessageAction) -> ActionRequest {
    ActionRequest {
        action_id: "call-7".to_owned(),
        chat,
        action,
    }
}

fn react(message_id: &str, emoji: &str, remove: bool) -> MessageAction {
    MessageAction::React {
        message_id: message_id.to_owned(),
        emoji: emoji.to_owned(),
        remove,
    }
}

fn edit(message_id: &str, text: &str) -> MessageAction {
    MessageAction::Edit {
        message_id: message_id.to_owned(),
        text: text.to_owned(),
    }
}

fn delete(message_id: &str) -> MessageAction {
    MessageAction::Delete {
        message_id: message_id.to_owned(),
    }
}

fn poll(duration_hours: Option<u32>) -> MessageAction {
    MessageAction::Poll(PollRequest {
        question: "Lunch?".to_owned(),
        options: vec!["Pizza".to_owned(), "Soup".to_owned()],
        allow_multiple: true,
        duration_hours,
    })
}

fn reply(reply_id: &str, chat: ChatRef, text: &str) -> OutboundReply {
    OutboundReply {
        reply_id: reply_id.to_owned(),
        chat,
        text: text.to_owned(),
        approval_code: None,
        in_reply_to: None,
        media: Vec::new(),
    }
}

fn rejected(result: Result<impl std::fmt::Debug, OutboxError>) -> String {
    match result {
        Err(OutboxError::Rejected { message }) => message,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

fn failed(result: Result<impl std::fmt::Debug, OutboxError>) -> String {
    match result {
        Err(OutboxError::Failed { message, .. }) => message,
        other => panic!("expected a retryable failure, got {other:?}"),
    }
}

use MessageActionKind::{Delete, Edit, Poll, React};

// ---------------------------------------------------------------------------------------------
// Telegram
// ---------------------------------------------------------------------------------------------

const TG_TOKEN: &str = "777:AAbbCCdd_ee-FF";

async fn telegram() -> FakeApi {
    FakeApi::start(
        "",
        json!({"ok": true, "result": {"message_id": 501, "chat": {"id": -100_555}}}),
    )
    .await
}

fn telegram_sender(api: &FakeApi, actions: Value) -> TelegramSender {
    let config: TelegramConfig = serde_json::from_value(json!({
        "botToken": TG_TOKEN,
        "secretToken": "s3cret",
        "apiBaseUrl": api.base,
        "actions": actions,
    }))
    .expect("test fixture");
    config
        .resolve(&|_| None)
        .expect("test fixture")
        .sender(reqwest::Client::new(), Arc::new(InMemoryInbox::new()))
}

fn tg_group() -> ChatRef {
    chat("telegram", "-100555:topic:42", ChatType::Group)
}

#[tokio::test]
async fn telegram_deliver_reports_the_last_chunk_as_chat_and_message_id_and_a_resend_sends_nothing()
{
    let api = telegram().await;
    let sender = telegram_sender(&api, json!({}));
    let long = format!("{}\n\n{}", "a".repeat(4_000), "b".repeat(100));
    let out = reply("r-1", tg_group(), &long);
    let delivery = sender.deliver(&out).await.unwrap();
    assert_eq!(delivery.message_id.as_deref(), Some("-100555:501"));
    let calls = api.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].path, format!("/bot{TG_TOKEN}/sendMessage"));
    assert_eq!(calls[1].body["message_thread_id"], json!(42));
    // The same reply again (a redelivered turn): claimed already, nothing goes out.
    let again = sender.deliver(&out).await.unwrap();
    assert_eq!(again.message_id, None);
    sender.send(&out).await.unwrap();
    assert_eq!(api.calls().len(), 2);
}

#[tokio::test]
async fn telegram_actions_send_the_bot_api_methods_and_bodies() {
    let api = telegram().await;
    let sender = telegram_sender(&api, json!({}));
    assert_eq!(
        sender.message_actions("telegram"),
        vec![React, Edit, Delete, Poll]
    );
    let done = sender
        .act(&request(tg_group(), react("-100555:31", "👍", false)))
        .await
        .unwrap();
    assert_eq!(done.message_id.as_deref(), Some("-100555:31"));
    sender
        .act(&request(tg_group(), react("31", "👍", true)))
        .await
        .unwrap();
    sender
        .act(&request(tg_group(), edit("-100555:31", "better")))
        .await
        .unwrap();
    sender
        .act(&request(tg_group(), delete("-100555:31")))
        .await
        .unwrap();
    let calls = api.calls();
    let methods: Vec<&str> = calls
        .iter()
        .map(|call| call.path.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(
        methods,
        [
            "setMessageReaction",
            "setMessageReaction",
            "editMessageText",
            "deleteMessage"
        ]
    );
    for call in &calls {
        assert_eq!(call.method, Method::POST);
        assert!(
            call.path.starts_with(&format!("/bot{TG_TOKEN}/")),
            "{}",
            call.path
        );
    }
    assert_eq!(
        calls[0].body,
        json!({"chat_id": -100_555, "message_id": 31,
               "reaction": [{"type": "emoji", "emoji": "👍"}]})
    );
    assert_eq!(
        calls[1].body,
        json!({"chat_id": -100_555, "message_id": 31, "reaction": []})
    );
    assert_eq!(
        calls[2].body,
        json!({"chat_id": -100_555, "message_id": 31, "text": "better"})
    );
    assert_eq!(
        calls[3].body,
        json!({"chat_id": -100_555, "message_id": 31})
    );
}

#[tokio::test]
async fn a_telegram_poll_goes_to_the_topic_once_per_action_id() {
    let api = telegram().await;
    let sender = telegram_sender(&api, json!({}));
    let ask = request(tg_group(), poll(Some(3)));
    let posted = sender.act(&ask).await.unwrap();
    assert_eq!(posted.message_id.as_deref(), Some("-100555:501"));
    // The retried tool call carries the same action id: no second poll.
    sender.act(&ask).await.unwrap();
    let calls = api.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].path, format!("/bot{TG_TOKEN}/sendPoll"));
    assert_eq!(
        calls[0].body,
        json!({"chat_id": -100_555, "message_thread_id": 42, "question": "Lunch?",
               "options": [{"text": "Pizza"}, {"text": "Soup"}],
               "allows_multiple_answers": true})
    );
    // A new call (a new action id) is a new poll.
    let mut other = ask.clone();
    other.action_id = "call-8".to_owned();
    sender.act(&other).await.unwrap();
    assert_eq!(api.calls().len(), 2);
}

#[tokio::test]
async fn a_failed_telegram_poll_is_sent_again_on_retry() {
    let api = telegram().await;
    let sender = telegram_sender(&api, json!({}));
    let ask = request(tg_group(), poll(None));
    api.answer_next(502, json!({"ok": false, "description": "Bad Gateway"}));
    failed(sender.act(&ask).await);
    sender.act(&ask).await.unwrap();
    assert_eq!(api.calls().len(), 2);
}

#[tokio::test]
async fn telegram_refusals_are_rejected_failures_retryable_and_retries_of_edits_and_deletes_pass() {
    let api = telegram().await;
    let sender = telegram_sender(&api, json!({}));
    api.answer_next(
        400,
        json!({"ok": false, "description": "Bad Request: message is not modified: specified new message content and reply markup are exactly the same"}),
    );
    sender
        .act(&request(tg_group(), edit("-100555:31", "same")))
        .await
        .unwrap();
    api.answer_next(
        400,
        json!({"ok": false, "description": "Bad Request: message to delete not found"}),
    );
    sender
        .act(&request(tg_group(), delete("-100555:31")))
        .await
        .unwrap();
    api.answer_next(
        400,
        json!({"ok": false, "description": "Bad Request: message can't be deleted for everyone"}),
    );
    let message = rejected(sender.act(&request(tg_group(), delete("-100555:31"))).await);
    assert!(message.contains("can't be deleted"), "{message}");
    api.answer_next(
        403,
        json!({"ok": false, "description": "Forbidden: bot was kicked from the supergroup chat"}),
    );
    let message = rejected(
        sender
            .act(&request(tg_group(), react("-100555:31", "👍", false)))
            .await,
    );
    assert!(message.contains("bot was kicked"), "{message}");
    assert!(!message.contains(TG_TOKEN));
    api.answer_next(
        400,
        json!({"ok": false, "description": "Bad Request: message to edit not found"}),
    );
    rejected(
        sender
            .act(&request(tg_group(), edit("-100555:31", "x")))
            .await,
    );
    api.answer_next(
        429,
        json!({"ok": false, "description": "Too Many Requests", "parameters": {"retry_after": 3}}),
    );
    failed(
        sender
            .act(&request(tg_group(), edit("-100555:31", "x")))
            .await,
    );
    api.answer_next(
        500,
        json!({"ok": false, "description": "Internal Server Error"}),
    );
    failed(sender.act(&request(tg_group(), delete("-100555:31"))).await);
    // A message id that is no Telegram message id never reaches the API.
    let before = api.calls().len();
    rejected(
        sender
            .act(&request(tg_group(), delete("callback:abc")))
            .await,
    );
    assert_eq!(api.calls().len(), before);
}

#[tokio::test]
async fn telegram_gates_turned_off_are_not_offered_and_refused_without_a_call() {
    let api = telegram().await;
    let sender = telegram_sender(
        &api,
        json!({"reactions": false, "poll": false, "deleteMessage": false}),
    );
    assert_eq!(sender.message_actions("telegram"), vec![Edit]);
    for action in [
        react("-100555:31", "👍", false),
        poll(None),
        delete("-100555:31"),
    ] {
        let kind = action.kind();
        let message = rejected(sender.act(&request(tg_group(), action)).await);
        assert_eq!(
            message,
            format!(
                "Message action {} not supported for channel telegram.",
                kind.name()
            )
        );
    }
    assert!(api.calls().is_empty());
    let unknown_gate = serde_json::from_value::<TelegramConfig>(json!({
        "botToken": TG_TOKEN, "secretToken": "s", "actions": {"sticker": true}
    }));
    assert!(unknown_gate.is_err(), "unknown keys stay errors");
}

#[tokio::test]
async fn telegram_targets_are_chat_ids_usernames_and_topics() {
    let api = telegram().await;
    let sender = telegram_sender(&api, json!({}));
    let resolve = |target: &'static str, thread: Option<&'static str>| {
        let sender = sender.clone();
        async move { sender.resolve_target("telegram", target, thread).await }
    };
    assert_eq!(
        resolve("-1001234567890", None).await.unwrap(),
        chat("telegram", "-1001234567890", ChatType::Group)
    );
    assert_eq!(
        resolve(" 42 ", None).await.unwrap(),
        chat("telegram", "42", ChatType::Direct)
    );
    assert_eq!(
        resolve("@News_Room", None).await.unwrap(),
        chat("telegram", "@news_room", ChatType::Group)
    );
    assert_eq!(
        resolve("-100555", Some("42")).await.unwrap(),
        chat("telegram", "-100555:topic:42", ChatType::Group)
    );
    assert_eq!(
        resolve("-100555:topic:42", None).await.unwrap(),
        chat("telegram", "-100555:topic:42", ChatType::Group)
    );
    for junk in [
        "",
        "john",
        "@",
        "@bad name",
        "#general",
        "channel:5",
        "12ab",
    ] {
        let message = rejected(resolve(junk, None).await);
        assert!(
            message.starts_with(&format!("Unknown target \"{junk}\" for telegram. Hint: ")),
            "{message}"
        );
        assert!(message.contains("@username"), "{message}");
    }
    rejected(resolve("-100555", Some("general")).await);
    assert!(api.calls().is_empty(), "Telegram targets need no lookup");
    // A resolved username is where a send goes.
    let target = resolve("@news_room", None).await.unwrap();
    sender.send(&reply("r-2", target, "hello")).await.unwrap();
    assert_eq!(api.calls()[0].body["chat_id"], json!("@news_room"));
}

// ---------------------------------------------------------------------------------------------
// Slack
// ---------------------------------------------------------------------------------------------

const SLACK_TOKEN: &str = "xoxb-test-token";

async fn slack() -> FakeApi {
    FakeApi::start(
        "/api",
        json!({"ok": true, "channel": "C0CHAN", "ts": "1700000200.000100"}),
    )
    .await
}

fn slack_sender(api: &FakeApi, actions: Value) -> SlackSender {
    let config: SlackConfig = serde_json::from_value(json!({
        "botToken": SLACK_TOKEN,
        "signingSecret": "signing",
        "apiBaseUrl": api.base,
        "actions": actions,
    }))
    .expect("test fixture");
    SlackSender::from_config(
        reqwest::Client::new(),
        &config.resolve(&|_| None).expect("test fixture"),
        Arc::new(InMemoryInbox::new()),
    )
}

fn slack_thread() -> ChatRef {
    chat("slack", "C0CHAN:thread:1700000000.000100", ChatType::Group)
}

#[tokio::test]
async fn slack_deliver_reports_channel_and_ts_and_a_resend_sends_nothing() {
    let api = slack().await;
    let sender = slack_sender(&api, json!({}));
    let out = reply("r-1", slack_thread(), "hello");
    let delivery = sender.deliver(&out).await.unwrap();
    assert_eq!(
        delivery.message_id.as_deref(),
        Some("C0CHAN:1700000200.000100")
    );
    sender.deliver(&out).await.unwrap();
    let calls = api.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].path, "/api/chat.postMessage");
    assert_eq!(calls[0].auth, format!("Bearer {SLACK_TOKEN}"));
    assert_eq!(calls[0].body["thread_ts"], json!("1700000000.000100"));
}

#[tokio::test]
async fn slack_actions_call_reactions_and_chat_methods() {
    let api = slack().await;
    let sender = slack_sender(&api, json!({}));
    assert_eq!(sender.message_actions("slack"), vec![React, Edit, Delete]);
    let id = "C0CHAN:1700000100.000200";
    let done = sender
        .act(&request(slack_thread(), react(id, ":tada:", false)))
        .await
        .unwrap();
    assert_eq!(done.message_id.as_deref(), Some(id));
    sender
        .act(&request(
            slack_thread(),
            react("1700000100.000200", "👍", true),
        ))
        .await
        .unwrap();
    sender
        .act(&request(slack_thread(), edit(id, "better")))
        .await
        .unwrap();
    sender
        .act(&request(slack_thread(), delete(id)))
        .await
        .unwrap();
    let calls = api.calls();
    let paths: Vec<&str> = calls.iter().map(|call| call.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/api/reactions.add",
            "/api/reactions.remove",
            "/api/chat.update",
            "/api/chat.delete"
        ]
    );
    for call in &calls {
        assert_eq!(call.method, Method::POST);
        assert_eq!(call.auth, format!("Bearer {SLACK_TOKEN}"));
    }
    assert_eq!(
        calls[0].body,
        json!({"channel": "C0CHAN", "timestamp": "1700000100.000200", "name": "tada"})
    );
    assert_eq!(
        calls[1].body,
        json!({"channel": "C0CHAN", "timestamp": "1700000100.000200", "name": "+1"})
    );
    assert_eq!(
        calls[2].body,
        json!({"channel": "C0CHAN", "ts": "1700000100.000200", "text": "better"})
    );
    assert_eq!(
        calls[3].body,
        json!({"channel": "C0CHAN", "ts": "1700000100.000200"})
    );
}

#[tokio::test]
async fn slack_refusals_failures_and_retried_actions() {
    let api = slack().await;
    let sender = slack_sender(&api, json!({}));
    let id = "C0CHAN:1700000100.000200";
    // Retries that find the work done.
    api.answer_next(200, json!({"ok": false, "error": "already_reacted"}));
    sender
        .act(&request(slack_thread(), react(id, "eyes", false)))
        .await
        .unwrap();
    api.answer_next(200, json!({"ok": false, "error": "message_not_found"}));
    sender
        .act(&request(slack_thread(), delete(id)))
        .await
        .unwrap();
    // Refusals for good.
    api.answer_next(200, json!({"ok": false, "error": "cant_update_message"}));
    let message = rejected(sender.act(&request(slack_thread(), edit(id, "x"))).await);
    assert!(message.contains("cant_update_message"), "{message}");
    api.answer_next(200, json!({"ok": false, "error": "message_not_found"}));
    rejected(sender.act(&request(slack_thread(), edit(id, "x"))).await);
    api.answer_next(403, json!({"ok": false}));
    rejected(sender.act(&request(slack_thread(), edit(id, "x"))).await);
    // Worth a retry.
    api.answer_next(429, json!({"ok": false, "error": "ratelimited"}));
    failed(sender.act(&request(slack_thread(), edit(id, "x"))).await);
    api.answer_next(500, json!({"ok": false}));
    failed(sender.act(&request(slack_thread(), delete(id))).await);
    // Refused before any call: an emoji without a Slack name, a bad id, a poll.
    let before = api.calls().len();
    let message = rejected(
        sender
            .act(&request(slack_thread(), react(id, "🦩", false)))
            .await,
    );
    assert!(message.contains("emoji name"), "{message}");
    rejected(
        sender
            .act(&request(slack_thread(), delete("C0CHAN:now")))
            .await,
    );
    let message = rejected(sender.act(&request(slack_thread(), poll(None))).await);
    assert_eq!(
        message,
        "Message action poll not supported for channel slack."
    );
    assert_eq!(api.calls().len(), before);
}

#[tokio::test]
async fn slack_gates_turned_off_are_not_offered_and_refused_without_a_call() {
    let api = slack().await;
    let sender = slack_sender(&api, json!({"messages": false}));
    assert_eq!(sender.message_actions("slack"), vec![React]);
    let id = "C0CHAN:1700000100.000200";
    for action in [edit(id, "x"), delete(id)] {
        rejected(sender.act(&request(slack_thread(), action)).await);
    }
    let sender = slack_sender(&api, json!({"reactions": false}));
    assert_eq!(sender.message_actions("slack"), vec![Edit, Delete]);
    let message = rejected(
        sender
            .act(&request(slack_thread(), react(id, "eyes", false)))
            .await,
    );
    assert_eq!(
        message,
        "Message action react not supported for channel slack."
    );
    assert!(api.calls().is_empty());
    assert!(
        serde_json::from_value::<SlackConfig>(json!({"actions": {"polls": true}})).is_err(),
        "unknown keys stay errors"
    );
}

#[tokio::test]
async fn slack_targets_are_channels_raw_ids_threads_and_users_in_their_dm() {
    let api = slack().await;
    let sender = slack_sender(&api, json!({}));
    assert_eq!(
        sender
            .resolve_target("slack", "channel:C0CHAN", None)
            .await
            .unwrap(),
        chat("slack", "C0CHAN", ChatType::Group)
    );
    assert_eq!(
        sender
            .resolve_target("slack", "G0PRIV", None)
            .await
            .unwrap(),
        chat("slack", "G0PRIV", ChatType::Group)
    );
    assert_eq!(
        sender.resolve_target("slack", "D0DM", None).await.unwrap(),
        chat("slack", "D0DM", ChatType::Direct)
    );
    assert_eq!(
        sender
            .resolve_target("slack", "C0CHAN", Some("1700000000.000100"))
            .await
            .unwrap(),
        slack_thread()
    );
    assert!(api.calls().is_empty(), "channel targets need no lookup");
    api.answer_next(200, json!({"ok": true, "channel": {"id": "D0ANN"}}));
    assert_eq!(
        sender
            .resolve_target("slack", "user:U0ANN", None)
            .await
            .unwrap(),
        chat("slack", "D0ANN", ChatType::Direct)
    );
    api.answer_next(200, json!({"ok": true, "channel": {"id": "D0ANN"}}));
    sender
        .resolve_target("slack", "<@U0ANN>", None)
        .await
        .unwrap();
    let calls = api.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].path, "/api/conversations.open");
    assert_eq!(calls[0].auth, format!("Bearer {SLACK_TOKEN}"));
    assert_eq!(calls[0].body, json!({"users": "U0ANN"}));
    api.answer_next(200, json!({"ok": false, "error": "missing_scope"}));
    let message = rejected(sender.resolve_target("slack", "user:U0ANN", None).await);
    assert!(message.contains("im:write"), "{message}");
    for junk in [
        "",
        "#general",
        "general",
        "channel:U0ANN",
        "user:C0CHAN",
        "c0chan",
    ] {
        let message = rejected(sender.resolve_target("slack", junk, None).await);
        assert!(
            message.starts_with(&format!("Unknown target \"{junk}\" for slack. Hint: ")),
            "{message}"
        );
        assert!(message.contains("channel:<id>"), "{message}");
    }
    rejected(
        sender
            .resolve_target("slack", "C0CHAN", Some("yesterday"))
            .await,
    );
    assert_eq!(api.calls().len(), 3);
}

// ---------------------------------------------------------------------------------------------
// Discord
// ---------------------------------------------------------------------------------------------

const APP_ID: &str = "1100000000000000001";
const BOT_TOKEN: &str = "bot-token-xyz";
const CHANNEL: &str = "3300000000000000003";
const MESSAGE: &str = "4400000000000000004";
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

async fn discord() -> FakeApi {
    FakeApi::start("/api/v10", json!({"id": MESSAGE, "channel_id": CHANNEL})).await
}

fn discord_sender(api: &FakeApi, bot_token: Option<&str>, actions: Value) -> DiscordSender {
    let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let mut config = json!({
        "applicationId": APP_ID,
        "publicKey": hex::encode(key.verifying_key().as_bytes()),
        "apiBaseUrl": api.base,
        "actions": actions,
    });
    if let Some(token) = bot_token {
        config["botToken"] = json!(token);
    }
    let config: DiscordConfig = serde_json::from_value(config).expect("test fixture");
    DiscordSender::new(
        reqwest::Client::new(),
        &config.resolve(&|_| None).expect("test fixture"),
        Arc::new(InMemoryInbox::new()),
    )
}

fn discord_channel() -> ChatRef {
    chat("discord", CHANNEL, ChatType::Group)
}

/// An interaction id made now, so its token is still alive.
fn fresh_interaction_id() -> String {
    let now_ms = u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("clock");
    ((now_ms - DISCORD_EPOCH_MS) << 22).to_string()
}

#[tokio::test]
async fn a_discord_send_without_an_interaction_posts_to_the_channel_once_with_an_enforced_nonce() {
    let api = discord().await;
    let sender = discord_sender(&api, Some(BOT_TOKEN), json!({}));
    let out = reply(
        "cron-1",
        discord_channel(),
        "[[reply_to:5500000000000000005]] Good morning",
    );
    let delivery = sender.deliver(&out).await.unwrap();
    assert_eq!(delivery.message_id.as_deref(), Some(MESSAGE));
    sender.deliver(&out).await.unwrap();
    let calls = api.calls();
    assert_eq!(calls.len(), 1, "the resend is claimed already");
    let call = &calls[0];
    assert_eq!(call.method, Method::POST);
    assert_eq!(call.path, format!("/api/v10/channels/{CHANNEL}/messages"));
    assert_eq!(call.auth, format!("Bot {BOT_TOKEN}"));
    assert_eq!(call.body["content"], json!("Good morning"));
    assert_eq!(call.body["enforce_nonce"], json!(true));
    let nonce = call.body["nonce"].as_str().unwrap();
    assert_eq!(nonce.len(), 25);
    assert_eq!(
        call.body["message_reference"],
        json!({"message_id": "5500000000000000005", "fail_if_not_exists": false})
    );
    assert_eq!(call.body["allowed_mentions"], json!({"parse": []}));
    // The same reply id always makes the same nonce, so Discord drops a resend it already has.
    let other = discord_sender(&api, Some(BOT_TOKEN), json!({}));
    other.deliver(&out).await.unwrap();
    assert_eq!(api.calls()[1].body["nonce"], json!(nonce));
}

#[tokio::test]
async fn a_discord_reply_to_a_live_interaction_is_a_follow_up_reporting_its_message_id() {
    let api = discord().await;
    let sender = discord_sender(&api, Some(BOT_TOKEN), json!({}));
    let mut out = reply("r-1", discord_channel(), "hi");
    out.in_reply_to = Some(format!("{}:tok.en-x", fresh_interaction_id()));
    let delivery = sender.deliver(&out).await.unwrap();
    assert_eq!(delivery.message_id.as_deref(), Some(MESSAGE));
    let calls = api.calls();
    assert_eq!(
        calls[0].path,
        format!("/api/v10/webhooks/{APP_ID}/tok.en-x")
    );
    assert_eq!(calls[0].auth, "", "the interaction token is the credential");
}

#[tokio::test]
async fn discord_actions_call_the_channel_message_endpoints() {
    let api = discord().await;
    let sender = discord_sender(&api, Some(BOT_TOKEN), json!({}));
    assert_eq!(
        sender.message_actions("discord"),
        vec![React, Edit, Delete, Poll]
    );
    let done = sender
        .act(&request(discord_channel(), react(MESSAGE, "👍", false)))
        .await
        .unwrap();
    assert_eq!(done.message_id.as_deref(), Some(MESSAGE));
    sender
        .act(&request(
            discord_channel(),
            react(MESSAGE, "<:party:1234567890>", true),
        ))
        .await
        .unwrap();
    sender
        .act(&request(discord_channel(), edit(MESSAGE, "better")))
        .await
        .unwrap();
    sender
        .act(&request(
            discord_channel(),
            delete(&format!("3300000000000000009:{MESSAGE}")),
        ))
        .await
        .unwrap();
    let calls = api.calls();
    let summary: Vec<(Method, String)> = calls
        .iter()
        .map(|call| (call.method.clone(), call.path.clone()))
        .collect();
    let message_path = format!("/api/v10/channels/{CHANNEL}/messages/{MESSAGE}");
    assert_eq!(
        summary,
        [
            (
                Method::PUT,
                format!("{message_path}/reactions/%F0%9F%91%8D/@me")
            ),
            (
                Method::DELETE,
                format!("{message_path}/reactions/party%3A1234567890/@me")
            ),
            (Method::PATCH, message_path.clone()),
            (
                Method::DELETE,
                format!("/api/v10/channels/3300000000000000009/messages/{MESSAGE}")
            ),
        ]
    );
    for call in &calls {
        assert_eq!(call.auth, format!("Bot {BOT_TOKEN}"));
    }
    assert_eq!(
        calls[2].body,
        json!({"content": "better", "allowed_mentions": {"parse": []}})
    );
}

#[tokio::test]
async fn a_discord_poll_is_one_message_per_action_id() {
    let api = discord().await;
    let sender = discord_sender(&api, Some(BOT_TOKEN), json!({}));
    let ask = request(discord_channel(), poll(Some(6)));
    let posted = sender.act(&ask).await.unwrap();
    assert_eq!(posted.message_id.as_deref(), Some(MESSAGE));
    sender.act(&ask).await.unwrap();
    let calls = api.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].method, Method::POST);
    assert_eq!(
        calls[0].path,
        format!("/api/v10/channels/{CHANNEL}/messages")
    );
    assert_eq!(
        calls[0].body["poll"],
        json!({"question": {"text": "Lunch?"},
               "answers": [{"poll_media": {"text": "Pizza"}}, {"poll_media": {"text": "Soup"}}],
               "duration": 6, "allow_multiselect": true})
    );
    assert_eq!(calls[0].body["enforce_nonce"], json!(true));
    assert_eq!(calls[0].body["nonce"].as_str().unwrap().len(), 25);
    // Out of Discord's range: refused before any call.
    rejected(sender.act(&request(discord_channel(), poll(Some(0)))).await);
    rejected(
        sender
            .act(&request(discord_channel(), poll(Some(10_000))))
            .await,
    );
    assert_eq!(api.calls().len(), 1);
}

#[tokio::test]
async fn discord_refusals_failures_and_a_retried_delete() {
    let api = discord().await;
    let sender = discord_sender(&api, Some(BOT_TOKEN), json!({}));
    api.answer_next(404, json!({"message": "Unknown Message", "code": 10008}));
    sender
        .act(&request(discord_channel(), delete(MESSAGE)))
        .await
        .unwrap();
    api.answer_next(404, json!({"message": "Unknown Channel", "code": 10003}));
    let message = rejected(
        sender
            .act(&request(discord_channel(), delete(MESSAGE)))
            .await,
    );
    assert!(message.contains("Unknown Channel"), "{message}");
    api.answer_next(404, json!({"message": "Unknown Message", "code": 10008}));
    rejected(
        sender
            .act(&request(discord_channel(), edit(MESSAGE, "x")))
            .await,
    );
    api.answer_next(
        403,
        json!({"message": "Missing Permissions", "code": 50013}),
    );
    let message = rejected(
        sender
            .act(&request(discord_channel(), react(MESSAGE, "👍", false)))
            .await,
    );
    assert!(message.contains("Missing Permissions"), "{message}");
    assert!(!message.contains(BOT_TOKEN));
    api.answer_next(
        400,
        json!({"message": "Invalid Form Body", "code": 50035,
               "errors": {"poll": {"answers": {"_errors": [{"message": "Too long"}]}}}}),
    );
    let message = rejected(sender.act(&request(discord_channel(), poll(None))).await);
    assert!(message.contains("Too long"), "{message}");
    api.answer_next(
        429,
        json!({"message": "You are being rate limited.", "retry_after": 1.5}),
    );
    let message = failed(
        sender
            .act(&request(discord_channel(), edit(MESSAGE, "x")))
            .await,
    );
    assert!(message.contains("1.5"), "{message}");
    api.answer_next(502, json!({"message": "Bad Gateway"}));
    failed(
        sender
            .act(&request(discord_channel(), delete(MESSAGE)))
            .await,
    );
    // The failed poll (400) gave its claim back; a 5xx'd poll is posted again on retry.
    api.answer_next(503, json!({"message": "Service Unavailable"}));
    let ask = request(discord_channel(), poll(None));
    failed(sender.act(&ask).await);
    sender.act(&ask).await.unwrap();
    // The id of the slash command that started the turn is no message.
    let before = api.calls().len();
    let message = rejected(
        sender
            .act(&request(
                discord_channel(),
                react(&format!("{}:tok.en-x", fresh_interaction_id()), "👍", false),
            ))
            .await,
    );
    assert!(message.contains("slash command"), "{message}");
    assert_eq!(api.calls().len(), before);
}

#[tokio::test]
async fn discord_gates_and_a_missing_bot_token_turn_actions_off() {
    let api = discord().await;
    let sender = discord_sender(
        &api,
        Some(BOT_TOKEN),
        json!({"polls": false, "messages": false}),
    );
    assert_eq!(sender.message_actions("discord"), vec![React]);
    for action in [poll(None), edit(MESSAGE, "x"), delete(MESSAGE)] {
        let kind = action.kind();
        assert_eq!(
            rejected(sender.act(&request(discord_channel(), action)).await),
            format!(
                "Message action {} not supported for channel discord.",
                kind.name()
            )
        );
    }
    let tokenless = discord_sender(&api, None, json!({}));
    assert!(tokenless.message_actions("discord").is_empty());
    let message = rejected(
        tokenless
            .act(&request(discord_channel(), react(MESSAGE, "👍", false)))
            .await,
    );
    assert!(message.contains("bot token"), "{message}");
    // Without a token and an interaction a reply still has nowhere to go.
    rejected(
        tokenless
            .deliver(&reply("r-1", discord_channel(), "hi"))
            .await,
    );
    let message = rejected(tokenless.resolve_target("discord", "user:5", None).await);
    assert!(message.contains("bot token"), "{message}");
    assert!(api.calls().is_empty());
}

#[tokio::test]
async fn discord_targets_are_channels_threads_and_users_in_their_dm() {
    let api = discord().await;
    let sender = discord_sender(&api, Some(BOT_TOKEN), json!({}));
    assert_eq!(
        sender
            .resolve_target("discord", &format!("channel:{CHANNEL}"), None)
            .await
            .unwrap(),
        discord_channel()
    );
    assert_eq!(
        sender
            .resolve_target("discord", CHANNEL, None)
            .await
            .unwrap(),
        discord_channel()
    );
    assert_eq!(
        sender
            .resolve_target("discord", CHANNEL, Some("3300000000000000042"))
            .await
            .unwrap(),
        chat("discord", "3300000000000000042", ChatType::Group)
    );
    assert!(api.calls().is_empty(), "channel targets need no lookup");
    for target in [
        "user:6600000000000000006",
        "<@6600000000000000006>",
        "<@!6600000000000000006>",
    ] {
        api.answer_next(200, json!({"id": "7700000000000000007", "type": 1}));
        assert_eq!(
            sender
                .resolve_target("discord", target, None)
                .await
                .unwrap(),
            chat("discord", "7700000000000000007", ChatType::Direct),
            "{target}"
        );
    }
    let calls = api.calls();
    assert_eq!(calls.len(), 3);
    for call in &calls {
        assert_eq!(call.method, Method::POST);
        assert_eq!(call.path, "/api/v10/users/@me/channels");
        assert_eq!(call.auth, format!("Bot {BOT_TOKEN}"));
        assert_eq!(call.body, json!({"recipient_id": "6600000000000000006"}));
    }
    api.answer_next(
        400,
        json!({"message": "Cannot send messages to this user", "code": 50007}),
    );
    rejected(
        sender
            .resolve_target("discord", "user:6600000000000000006", None)
            .await,
    );
    for junk in [
        "", "#general", "general", "user:ann", "<@ann>", "channel:", "12a",
    ] {
        let message = rejected(sender.resolve_target("discord", junk, None).await);
        assert!(
            message.starts_with(&format!("Unknown target \"{junk}\" for discord. Hint: ")),
            "{message}"
        );
        assert!(message.contains("channel:<id>"), "{message}");
    }
    rejected(
        sender
            .resolve_target("discord", CHANNEL, Some("main-thread"))
            .await,
    );
    assert_eq!(api.calls().len(), 4);
}

// ---------------------------------------------------------------------------------------------
// Sends with files
// ---------------------------------------------------------------------------------------------

fn file(kind: MediaKind, name: &str, mime: &str, bytes: &[u8]) -> OutboundMedia {
    OutboundMedia {
        kind,
        name: name.to_owned(),
        mime: mime.to_owned(),
        bytes: bytes.to_vec(),
        as_voice: false,
    }
}

fn photo() -> OutboundMedia {
    file(
        MediaKind::Image,
        "chart.png",
        "image/png",
        b"\x89PNG\r\n\x1a\n-chart",
    )
}

fn pdf() -> OutboundMedia {
    file(
        MediaKind::Document,
        "report.pdf",
        "application/pdf",
        b"%PDF-1.7 report",
    )
}

fn send_files(text: &str, media: Vec<OutboundMedia>) -> MessageAction {
    MessageAction::Send(MediaSend {
        text: text.to_owned(),
        media,
        in_reply_to: None,
    })
}

#[tokio::test]
async fn a_telegram_send_with_files_captions_the_first_upload_and_uploads_once() {
    let api = telegram().await;
    // Every gate off: a send is not gated.
    let sender = telegram_sender(
        &api,
        json!({"reactions": false, "editMessage": false, "deleteMessage": false, "poll": false}),
    );
    let send = request(
        tg_group(),
        send_files("[[reply_to:77]] Chart of the week", vec![photo(), pdf()]),
    );
    let delivery = sender.act(&send).await.unwrap();
    assert_eq!(delivery.message_id.as_deref(), Some("-100555:501"));
    let calls = api.calls();
    let paths: Vec<&str> = calls.iter().map(|call| call.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            format!("/bot{TG_TOKEN}/sendPhoto"),
            format!("/bot{TG_TOKEN}/sendDocument"),
        ],
        "no separate text message"
    );
    let first = calls[0].parts();
    assert_eq!(part(&first, "chat_id").unwrap().text(), "-100555");
    assert_eq!(part(&first, "message_thread_id").unwrap().text(), "42");
    assert_eq!(part(&first, "caption").unwrap().text(), "Chart of the week");
    let reply_to: Value =
        serde_json::from_str(&part(&first, "reply_parameters").unwrap().text()).unwrap();
    assert_eq!(reply_to["message_id"], json!(77));
    let upload = part(&first, "photo").unwrap();
    assert_eq!(upload.bytes, photo().bytes);
    assert_eq!(upload.filename.as_deref(), Some("chart.png"));
    assert_eq!(upload.content_type.as_deref(), Some("image/png"));
    let second = calls[1].parts();
    assert!(part(&second, "caption").is_none(), "one caption");
    assert!(part(&second, "reply_parameters").is_none());
    assert_eq!(part(&second, "document").unwrap().bytes, pdf().bytes);
    // The same call again (a redelivered turn): both uploads are claimed already.
    sender.act(&send).await.unwrap();
    assert_eq!(api.calls().len(), 2);
    // A failed upload gives its claim back: the retry sends that file alone.
    let retried = ActionRequest {
        action_id: "call-8".to_owned(),
        ..request(tg_group(), send_files("Again", vec![photo(), pdf()]))
    };
    api.answer_next(200, json!({"ok": true, "result": {"message_id": 502}}));
    api.answer_next(502, json!({"ok": false, "description": "Bad Gateway"}));
    failed(sender.act(&retried).await);
    sender.act(&retried).await.unwrap();
    let paths: Vec<String> = api.calls()[2..]
        .iter()
        .map(|call| call.path.clone())
        .collect();
    assert_eq!(
        paths,
        [
            format!("/bot{TG_TOKEN}/sendPhoto"),
            format!("/bot{TG_TOKEN}/sendDocument"),
            format!("/bot{TG_TOKEN}/sendDocument"),
        ]
    );
}

#[tokio::test]
async fn a_telegram_text_too_long_for_a_caption_goes_before_the_files() {
    let api = telegram().await;
    let sender = telegram_sender(&api, json!({}));
    let long = "x".repeat(1_025);
    sender
        .act(&request(tg_group(), send_files(&long, vec![photo()])))
        .await
        .unwrap();
    let calls = api.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].path, format!("/bot{TG_TOKEN}/sendMessage"));
    assert_eq!(calls[0].body["text"], json!(long));
    assert_eq!(calls[1].path, format!("/bot{TG_TOKEN}/sendPhoto"));
    assert!(part(&calls[1].parts(), "caption").is_none());
}

#[tokio::test]
async fn a_slack_send_with_files_uploads_into_the_thread_with_the_text_as_comment_once() {
    let api = slack().await;
    // Every gate off: a send is not gated.
    let sender = slack_sender(&api, json!({"reactions": false, "messages": false}));
    api.answer_next(
        200,
        json!({"ok": true, "upload_url": format!("{}/upload/F1", api.origin), "file_id": "F1"}),
    );
    api.answer_next(200, json!("OK"));
    api.answer_next(200, json!({"ok": true, "files": [{"id": "F1"}]}));
    let send = request(slack_thread(), send_files("The report", vec![pdf()]));
    sender.act(&send).await.unwrap();
    let calls = api.calls();
    let paths: Vec<&str> = calls.iter().map(|call| call.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/api/files.getUploadURLExternal",
            "/upload/F1",
            "/api/files.completeUploadExternal",
        ],
        "no chat.postMessage"
    );
    assert_eq!(calls[0].field("filename").as_deref(), Some("report.pdf"));
    assert_eq!(calls[1].raw, pdf().bytes);
    assert_eq!(calls[1].auth, format!("Bearer {SLACK_TOKEN}"));
    let complete = &calls[2];
    assert_eq!(complete.field("channel_id").as_deref(), Some("C0CHAN"));
    assert_eq!(
        complete.field("thread_ts").as_deref(),
        Some("1700000000.000100")
    );
    assert_eq!(
        complete.field("initial_comment").as_deref(),
        Some("The report")
    );
    let files: Value = serde_json::from_str(&complete.field("files").unwrap()).unwrap();
    assert_eq!(files, json!([{"id": "F1", "title": "report.pdf"}]));
    sender.act(&send).await.unwrap();
    assert_eq!(api.calls().len(), 3, "the same id uploads nothing again");
    // A file alone into a channel: no comment, no thread.
    api.answer_next(
        200,
        json!({"ok": true, "upload_url": format!("{}/upload/F2", api.origin), "file_id": "F2"}),
    );
    api.answer_next(200, json!("OK"));
    api.answer_next(200, json!({"ok": true, "files": [{"id": "F2"}]}));
    let alone = ActionRequest {
        action_id: "call-9".to_owned(),
        ..request(
            chat("slack", "C0CHAN", ChatType::Group),
            send_files("", vec![photo()]),
        )
    };
    sender.act(&alone).await.unwrap();
    let complete = &api.calls()[5];
    assert_eq!(complete.path, "/api/files.completeUploadExternal");
    assert_eq!(complete.field("initial_comment"), None);
    assert_eq!(complete.field("thread_ts"), None);
}

#[tokio::test]
async fn a_discord_send_with_files_posts_multipart_with_the_text_as_content_once() {
    let api = discord().await;
    let sender = discord_sender(&api, Some(BOT_TOKEN), json!({}));
    let send = request(
        discord_channel(),
        send_files("Two files", vec![photo(), pdf()]),
    );
    let delivery = sender.act(&send).await.unwrap();
    assert!(delivery.message_id.is_some());
    let calls = api.calls();
    assert_eq!(calls.len(), 2, "no separate text message");
    let mut nonces = Vec::new();
    for (index, (call, media)) in calls.iter().zip([photo(), pdf()]).enumerate() {
        assert_eq!(call.path, format!("/api/v10/channels/{CHANNEL}/messages"));
        assert_eq!(call.auth, format!("Bot {BOT_TOKEN}"));
        let parts = call.parts();
        let payload: Value =
            serde_json::from_str(&part(&parts, "payload_json").unwrap().text()).unwrap();
        let content = (index == 0).then(|| json!("Two files"));
        assert_eq!(payload.get("content").cloned(), content, "{payload}");
        assert_eq!(payload["allowed_mentions"], json!({"parse": []}));
        assert_eq!(payload["enforce_nonce"], json!(true));
        nonces.push(payload["nonce"].as_str().unwrap().to_owned());
        let upload = part(&parts, "files[0]").unwrap();
        assert_eq!(upload.bytes, media.bytes);
        assert_eq!(upload.filename.as_deref(), Some(media.name.as_str()));
    }
    assert_ne!(nonces[0], nonces[1]);
    sender.act(&send).await.unwrap();
    assert_eq!(api.calls().len(), 2, "the same id uploads nothing again");
    // A file Discord does not take refuses the whole send before anything goes out.
    let huge = file(
        MediaKind::Document,
        "big.bin",
        "application/octet-stream",
        &vec![0; (10 << 20) + 1],
    );
    let refused = ActionRequest {
        action_id: "call-10".to_owned(),
        ..request(discord_channel(), send_files("x", vec![photo(), huge]))
    };
    let message = rejected(sender.act(&refused).await);
    assert!(message.contains("big.bin"), "{message}");
    assert_eq!(api.calls().len(), 2);
}

#[tokio::test]
async fn a_generic_send_with_files_is_one_reply_with_attachments_keyed_by_the_action_id() {
    let api = FakeApi::start("", json!({"message_id": "m-1"})).await;
    let sender = HttpReplySender::new(
        reqwest::Client::new(),
        format!("{}/replies", api.origin),
        b"secret",
    );
    let chat = chat("generic", "c1", ChatType::Direct);
    let delivery = sender
        .act(&request(chat.clone(), send_files("hi", vec![pdf()])))
        .await
        .unwrap();
    assert_eq!(delivery.message_id.as_deref(), Some("m-1"));
    let calls = api.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].idempotency_key, "call-7");
    assert_eq!(calls[0].body["reply_id"], json!("call-7"));
    assert_eq!(calls[0].body["chat_id"], json!("c1"));
    assert_eq!(calls[0].body["text"], json!("hi"));
    assert_eq!(
        calls[0].body["attachments"],
        json!([{"name": "report.pdf", "mime": "application/pdf", "data": "JVBERi0xLjcgcmVwb3J0"}])
    );
    // The generic channel has no other action.
    let message = rejected(sender.act(&request(chat, react("1", "👍", false))).await);
    assert_eq!(
        message,
        "Message action react not supported for channel generic."
    );
}
