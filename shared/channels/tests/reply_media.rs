//! Replies that send files, against fake platform APIs on loopback that record every request
//! raw (method, path, `Authorization`, `Content-Type`, body bytes): Telegram's multipart
//! `sendPhoto` / `sendVoice` / `sendAudio` / `sendDocument`, Slack's three-step external
//! upload, Discord's multipart message with `payload_json` (to a channel and as an
//! interaction follow-up), and the generic channel's attachments (links to files stored once
//! in the blob store, or inline base64 without a link maker); a resend of
//! the same reply uploads nothing again, and refusals and failures are told apart.

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
use clawless_core::outbox::{Outbox, OutboxError};
use clawless_core::testing::InMemoryInbox;
use clawless_core::turn::OutboundReply;
use clawless_core::turn::events::ChatRef;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// A fake platform API recording raw requests
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Call {
    method: Method,
    path: String,
    auth: String,
    content_type: String,
    body: Vec<u8>,
}

impl Call {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The parts of a `multipart/form-data` body.
    fn parts(&self) -> Vec<Part> {
        parse_multipart(&self.content_type, &self.body)
    }

    /// The fields of a form-encoded body.
    fn form(&self) -> Vec<(String, String)> {
        assert_eq!(self.content_type, "application/x-www-form-urlencoded");
        url::form_urlencoded::parse(&self.body)
            .into_owned()
            .collect()
    }
}

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
    let close = format!("--{boundary}--\r\n");
    assert!(body.ends_with(close.as_bytes()), "unterminated body");
    let mut parts = Vec::new();
    let mut rest = body;
    loop {
        assert!(rest.starts_with(delimiter.as_bytes()), "no delimiter");
        rest = &rest[delimiter.len()..];
        if rest.starts_with(b"--") {
            break;
        }
        rest = rest
            .strip_prefix(b"\r\n")
            .expect("line break after delimiter");
        let header_end = find(rest, b"\r\n\r\n").expect("part headers");
        let headers = std::str::from_utf8(&rest[..header_end]).expect("headers");
        rest = &rest[header_end + 4..];
        let next = find(rest, format!("\r\n{delimiter}").as_bytes()).expect("part end");
        let bytes = rest[..next].to_vec();
        rest = &rest[next + 2..];
        let mut part = Part {
            name: String::new(),
            filename: None,
            content_type: None,
            bytes,
        };
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
            } else {
                panic!("unexpected part header {header}");
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

fn part<'a>(parts: &'a [Part], name: &str) -> &'a Part {
    parts
        .iter()
        .find(|part| part.name == name)
        .unwrap_or_else(|| panic!("no part {name} in {parts:?}"))
}

#[derive(Clone)]
struct FakeApi {
    /// `http://127.0.0.1:<port>`.
    origin: String,
    base: String,
    calls: Arc<Mutex<Vec<Call>>>,
    script: Arc<Mutex<VecDeque<(u16, Value)>>>,
}

impl FakeApi {
    async fn start(prefix: &str, default: Value) -> Self {
        let calls: Arc<Mutex<Vec<Call>>> = Arc::default();
        let script: Arc<Mutex<VecDeque<(u16, Value)>>> = Arc::default();
        let (sink, answers) = (Arc::clone(&calls), Arc::clone(&script));
        let app = Router::new()
            .fallback(
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
                            content_type: header("content-type"),
                            body: body.to_vec(),
                        });
                        let (status, answer) = answers
                            .lock()
                            .expect("test fixture")
                            .pop_front()
                            .unwrap_or((200, default));
                        let status = StatusCode::from_u16(status).expect("test fixture");
                        (status, axum::Json(answer)).into_response()
                    }
                },
            )
            .layer(axum::extract::DefaultBodyLimit::disable());
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

    fn paths(&self) -> Vec<String> {
        self.calls().into_iter().map(|call| call.path).collect()
    }
}

fn chat(channel: &str, chat_id: &str) -> ChatRef {
    ChatRef {
        channel: channel.to_owned(),
        chat_id: chat_id.to_owned(),
        chat_type: ChatType::Group,
    }
}

fn file(kind: MediaKind, name: &str, mime: &str, bytes: &[u8], as_voice: bool) -> OutboundMedia {
    OutboundMedia {
        kind,
        name: name.to_owned(),
        mime: mime.to_owned(),
        bytes: bytes.to_vec(),
        as_voice,
    }
}

fn photo() -> OutboundMedia {
    file(
        MediaKind::Image,
        "chart.png",
        "image/png",
        &[0x89, b'P', b'N', b'G', 0, 13, 10],
        false,
    )
}

fn voice() -> OutboundMedia {
    file(
        MediaKind::Audio,
        "note.ogg",
        "audio/ogg",
        b"OggS\x00\x02",
        true,
    )
}

fn pdf() -> OutboundMedia {
    file(
        MediaKind::Document,
        "report \"q3\".pdf",
        "application/pdf",
        b"%PDF-1.7\r\n--x--\r\n",
        false,
    )
}

fn reply(reply_id: &str, chat: ChatRef, text: &str, media: Vec<OutboundMedia>) -> OutboundReply {
    OutboundReply {
        reply_id: reply_id.to_owned(),
        chat,
        text: text.to_owned(),
        approval_code: None,
        in_reply_to: None,
        media,
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

fn telegram_sender(api: &FakeApi) -> TelegramSender {
    let config: TelegramConfig = serde_json::from_value(json!({
        "botToken": TG_TOKEN,
        "secretToken": "s3cret",
        "apiBaseUrl": api.base,
    }))
    .expect("test fixture");
    config
        .resolve(&|_| None)
        .expect("test fixture")
        .sender(reqwest::Client::new(), Arc::new(InMemoryInbox::new()))
}

#[tokio::test]
async fn telegram_sends_photo_voice_and_document_as_multipart_after_the_text_once() {
    let api = telegram().await;
    let sender = telegram_sender(&api);
    let out = reply(
        "r-1",
        chat("telegram", "-100555:topic:42"),
        "Here you go",
        vec![photo(), voice(), pdf()],
    );
    sender.deliver(&out).await.unwrap();
    let method = |name: &str| format!("/bot{TG_TOKEN}/{name}");
    assert_eq!(
        api.paths(),
        vec![
            method("sendMessage"),
            method("sendPhoto"),
            method("sendVoice"),
            method("sendDocument"),
        ]
    );
    let calls = api.calls();
    assert_eq!(calls[0].json()["text"], json!("Here you go"));
    for (call, (field, media)) in
        calls[1..]
            .iter()
            .zip([("photo", photo()), ("voice", voice()), ("document", pdf())])
    {
        assert_eq!(call.method, Method::POST);
        let parts = call.parts();
        assert_eq!(part(&parts, "chat_id").text(), "-100555");
        assert_eq!(part(&parts, "message_thread_id").text(), "42");
        let upload = part(&parts, field);
        assert_eq!(upload.bytes, media.bytes, "{field} bytes");
        assert_eq!(upload.content_type.as_deref(), Some(media.mime.as_str()));
        assert_eq!(parts.len(), 3, "{parts:?}");
    }
    // A quote in a file name cannot end the header.
    assert_eq!(
        part(&calls[3].parts(), "document").filename.as_deref(),
        Some("report %22q3%22.pdf")
    );
    // The same reply again: everything is claimed already.
    sender.deliver(&out).await.unwrap();
    assert_eq!(api.calls().len(), 4);
}

#[tokio::test]
async fn telegram_files_alone_follow_the_voice_directive_and_the_size_limits() {
    let api = telegram().await;
    let sender = telegram_sender(&api);
    let plain_audio = file(MediaKind::Audio, "song.mp3", "audio/mpeg", b"ID3", false);
    let delivery = sender
        .deliver(&reply(
            "r-2",
            chat("telegram", "-100555"),
            "[[audio_as_voice]] [[reply_to:-100555:77]]",
            vec![plain_audio.clone()],
        ))
        .await
        .unwrap();
    assert_eq!(delivery.message_id.as_deref(), Some("-100555:501"));
    sender
        .deliver(&reply(
            "r-3",
            chat("telegram", "-100555"),
            "",
            vec![plain_audio],
        ))
        .await
        .unwrap();
    let big_image = file(
        MediaKind::Image,
        "huge.png",
        "image/png",
        &vec![7; 10_000_001],
        false,
    );
    sender
        .deliver(&reply(
            "r-4",
            chat("telegram", "-100555"),
            "",
            vec![big_image],
        ))
        .await
        .unwrap();
    let paths = api.paths();
    assert_eq!(
        paths,
        vec![
            format!("/bot{TG_TOKEN}/sendVoice"),
            format!("/bot{TG_TOKEN}/sendAudio"),
            format!("/bot{TG_TOKEN}/sendDocument"),
        ],
        "no text message for a reply of files only"
    );
    let calls = api.calls();
    let parts = calls[0].parts();
    assert_eq!(part(&parts, "chat_id").text(), "-100555");
    assert!(parts.iter().all(|part| part.name != "message_thread_id"));
    assert_eq!(
        serde_json::from_str::<Value>(&part(&parts, "reply_parameters").text()).unwrap(),
        json!({"message_id": 77, "allow_sending_without_reply": true})
    );
    assert!(
        calls[1]
            .parts()
            .iter()
            .all(|part| part.name != "reply_parameters"),
        "no reply tag, no reply"
    );
    assert_eq!(part(&calls[2].parts(), "document").bytes.len(), 10_000_001);
    // Over 50 MB: refused, nothing sent, and the other file still goes.
    let too_big = file(
        MediaKind::Document,
        "dump.bin",
        "application/octet-stream",
        &vec![0; 50_000_001],
        false,
    );
    let message = rejected(
        sender
            .deliver(&reply(
                "r-5",
                chat("telegram", "-100555"),
                "",
                vec![too_big, pdf()],
            ))
            .await,
    );
    assert!(
        message.contains("dump.bin") && message.contains("50 MB"),
        "{message}"
    );
    assert_eq!(api.paths().len(), 4);
    assert_eq!(api.paths()[3], format!("/bot{TG_TOKEN}/sendDocument"));
}

#[tokio::test]
async fn telegram_upload_refusals_are_rejected_and_a_failed_upload_alone_is_sent_again() {
    let api = telegram().await;
    let sender = telegram_sender(&api);
    let out = reply("r-6", chat("telegram", "-100555"), "Look", vec![photo()]);
    api.answer_next(200, json!({"ok": true, "result": {"message_id": 1}}));
    api.answer_next(
        500,
        json!({"ok": false, "error_code": 500, "description": "Internal"}),
    );
    let message = failed(sender.deliver(&out).await);
    assert!(message.contains("sendPhoto"), "{message}");
    sender.deliver(&out).await.unwrap();
    let paths = api.paths();
    assert_eq!(
        paths,
        vec![
            format!("/bot{TG_TOKEN}/sendMessage"),
            format!("/bot{TG_TOKEN}/sendPhoto"),
            format!("/bot{TG_TOKEN}/sendPhoto"),
        ],
        "the text went once, the photo again after its failure"
    );
    api.answer_next(
        400,
        json!({"ok": false, "error_code": 400, "description": "Bad Request: IMAGE_PROCESS_FAILED"}),
    );
    let message = rejected(
        sender
            .deliver(&reply(
                "r-7",
                chat("telegram", "-100555"),
                "",
                vec![photo()],
            ))
            .await,
    );
    assert!(message.contains("IMAGE_PROCESS_FAILED"), "{message}");
    api.answer_next(
        429,
        json!({"ok": false, "error_code": 429, "description": "Too Many Requests", "parameters": {"retry_after": 3}}),
    );
    failed(
        sender
            .deliver(&reply(
                "r-8",
                chat("telegram", "-100555"),
                "",
                vec![photo()],
            ))
            .await,
    );
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

fn slack_sender(api: &FakeApi) -> SlackSender {
    let config: SlackConfig = serde_json::from_value(json!({
        "botToken": SLACK_TOKEN,
        "signingSecret": "signing",
        "apiBaseUrl": api.base,
    }))
    .expect("test fixture");
    SlackSender::from_config(
        reqwest::Client::new(),
        &config.resolve(&|_| None).expect("test fixture"),
        Arc::new(InMemoryInbox::new()),
    )
}

/// Scripts the answers of one upload: the ticket, the upload, the completion.
fn script_upload(api: &FakeApi, file_id: &str) {
    api.answer_next(
        200,
        json!({"ok": true, "upload_url": format!("{}/upload/{file_id}", api.origin), "file_id": file_id}),
    );
    api.answer_next(200, json!("OK"));
    api.answer_next(200, json!({"ok": true, "files": [{"id": file_id}]}));
}

#[tokio::test]
async fn slack_uploads_each_file_in_three_steps_with_the_bot_token_once() {
    let api = slack().await;
    let sender = slack_sender(&api);
    let out = reply(
        "r-1",
        chat("slack", "C0CHAN:thread:1700000000.000100"),
        "The report",
        vec![pdf()],
    );
    api.answer_next(200, json!({"ok": true, "channel": "C0CHAN", "ts": "1.2"}));
    script_upload(&api, "F0001");
    let delivery = sender.deliver(&out).await.unwrap();
    assert_eq!(delivery.message_id.as_deref(), Some("C0CHAN:1.2"));
    assert_eq!(
        api.paths(),
        vec![
            "/api/chat.postMessage",
            "/api/files.getUploadURLExternal",
            "/upload/F0001",
            "/api/files.completeUploadExternal",
        ]
    );
    let calls = api.calls();
    for call in &calls {
        assert_eq!(call.auth, format!("Bearer {SLACK_TOKEN}"), "{}", call.path);
        assert_eq!(call.method, Method::POST);
    }
    let pdf = pdf();
    assert_eq!(
        calls[1].form(),
        vec![
            ("filename".to_owned(), pdf.name.clone()),
            ("length".to_owned(), pdf.bytes.len().to_string()),
        ]
    );
    assert_eq!(calls[2].body, pdf.bytes);
    assert_eq!(calls[2].content_type, "application/pdf");
    let complete = calls[3].form();
    let field = |name: &str| {
        complete
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert_eq!(
        serde_json::from_str::<Value>(&field("files")).unwrap(),
        json!([{"id": "F0001", "title": pdf.name}])
    );
    assert_eq!(field("channel_id"), "C0CHAN");
    assert_eq!(field("thread_ts"), "1700000000.000100");
    sender.deliver(&out).await.unwrap();
    assert_eq!(api.calls().len(), 4, "a resend uploads nothing");
}

#[tokio::test]
async fn slack_upload_refusals_are_rejected_and_failures_retried_from_the_start() {
    let api = slack().await;
    let sender = slack_sender(&api);
    api.answer_next(200, json!({"ok": false, "error": "invalid_auth"}));
    let message = rejected(
        sender
            .deliver(&reply("r-2", chat("slack", "C0CHAN"), "", vec![photo()]))
            .await,
    );
    assert!(message.contains("invalid_auth"), "{message}");
    assert_eq!(api.paths(), vec!["/api/files.getUploadURLExternal"]);
    // The upload itself fails with a 503: worth a retry, which starts over and completes.
    let out = reply("r-3", chat("slack", "C0CHAN"), "", vec![photo()]);
    api.answer_next(
        200,
        json!({"ok": true, "upload_url": format!("{}/upload/F2", api.origin), "file_id": "F2"}),
    );
    api.answer_next(503, json!("busy"));
    let message = failed(sender.deliver(&out).await);
    assert!(message.contains("503"), "{message}");
    script_upload(&api, "F3");
    sender.deliver(&out).await.unwrap();
    let paths = api.paths();
    assert_eq!(
        paths[1..],
        [
            "/api/files.getUploadURLExternal",
            "/upload/F2",
            "/api/files.getUploadURLExternal",
            "/upload/F3",
            "/api/files.completeUploadExternal",
        ]
    );
    let complete = api.calls()[5].form();
    assert!(complete.iter().all(|(key, _)| key != "thread_ts"));
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

fn discord_sender(api: &FakeApi) -> DiscordSender {
    let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let config: DiscordConfig = serde_json::from_value(json!({
        "applicationId": APP_ID,
        "publicKey": hex::encode(key.verifying_key().as_bytes()),
        "apiBaseUrl": api.base,
        "botToken": BOT_TOKEN,
    }))
    .expect("test fixture");
    DiscordSender::new(
        reqwest::Client::new(),
        &config.resolve(&|_| None).expect("test fixture"),
        Arc::new(InMemoryInbox::new()),
    )
}

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
async fn discord_posts_each_file_as_multipart_with_payload_json_once() {
    let api = discord().await;
    let sender = discord_sender(&api);
    let out = reply(
        "r-1",
        chat("discord", CHANNEL),
        "Two files",
        vec![photo(), voice()],
    );
    sender.deliver(&out).await.unwrap();
    let calls = api.calls();
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0].json()["content"], json!("Two files"));
    let mut nonces = Vec::new();
    for (call, media) in calls[1..].iter().zip([photo(), voice()]) {
        assert_eq!(call.path, format!("/api/v10/channels/{CHANNEL}/messages"));
        assert_eq!(call.auth, format!("Bot {BOT_TOKEN}"));
        let parts = call.parts();
        assert_eq!(parts.len(), 2);
        let payload: Value = serde_json::from_str(&part(&parts, "payload_json").text()).unwrap();
        assert_eq!(
            payload["attachments"],
            json!([{"id": 0, "filename": media.name}])
        );
        assert_eq!(payload["allowed_mentions"], json!({"parse": []}));
        assert_eq!(payload["enforce_nonce"], json!(true));
        nonces.push(payload["nonce"].as_str().unwrap().to_owned());
        let upload = part(&parts, "files[0]");
        assert_eq!(upload.bytes, media.bytes);
        assert_eq!(upload.filename.as_deref(), Some(media.name.as_str()));
        assert_eq!(upload.content_type.as_deref(), Some(media.mime.as_str()));
    }
    assert_ne!(nonces[0], nonces[1], "each file has its own nonce");
    sender.deliver(&out).await.unwrap();
    assert_eq!(api.calls().len(), 3, "a resend uploads nothing");
}

#[tokio::test]
async fn discord_files_for_a_live_interaction_go_as_follow_ups() {
    let api = discord().await;
    let sender = discord_sender(&api);
    let mut out = reply("r-2", chat("discord", CHANNEL), "", vec![pdf()]);
    out.in_reply_to = Some(format!("{}:tok.en-x", fresh_interaction_id()));
    let delivery = sender.deliver(&out).await.unwrap();
    assert_eq!(delivery.message_id.as_deref(), Some(MESSAGE));
    let calls = api.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0].path,
        format!("/api/v10/webhooks/{APP_ID}/tok.en-x")
    );
    assert_eq!(calls[0].auth, "", "the interaction token is the credential");
    let parts = calls[0].parts();
    let payload: Value = serde_json::from_str(&part(&parts, "payload_json").text()).unwrap();
    assert!(payload.get("nonce").is_none());
    assert_eq!(part(&parts, "files[0]").bytes, pdf().bytes);
}

#[tokio::test]
async fn discord_upload_refusals_failures_and_the_size_limit() {
    let api = discord().await;
    let sender = discord_sender(&api);
    api.answer_next(
        403,
        json!({"message": "Missing Permissions", "code": 50013}),
    );
    let message = rejected(
        sender
            .deliver(&reply("r-3", chat("discord", CHANNEL), "", vec![photo()]))
            .await,
    );
    assert!(message.contains("Missing Permissions"), "{message}");
    let out = reply("r-4", chat("discord", CHANNEL), "", vec![photo()]);
    api.answer_next(
        429,
        json!({"message": "You are being rate limited.", "retry_after": 1.5}),
    );
    failed(sender.deliver(&out).await);
    sender.deliver(&out).await.unwrap();
    assert_eq!(api.calls().len(), 3, "the failed upload is sent again");
    let too_big = file(
        MediaKind::Video,
        "clip.mp4",
        "video/mp4",
        &vec![0; (10 << 20) + 1],
        false,
    );
    let message = rejected(
        sender
            .deliver(&reply("r-5", chat("discord", CHANNEL), "", vec![too_big]))
            .await,
    );
    assert!(message.contains("clip.mp4"), "{message}");
    assert_eq!(api.calls().len(), 3);
    // Files alone answer a tagged message with the first file.
    sender
        .deliver(&reply(
            "r-6",
            chat("discord", CHANNEL),
            "[[reply_to:5500000000000000005]]",
            vec![photo(), pdf()],
        ))
        .await
        .unwrap();
    let calls = api.calls();
    let payload = |call: &Call| -> Value {
        serde_json::from_str(&part(&call.parts(), "payload_json").text()).unwrap()
    };
    assert_eq!(
        payload(&calls[3])["message_reference"],
        json!({"message_id": "5500000000000000005", "fail_if_not_exists": false})
    );
    assert!(payload(&calls[4]).get("message_reference").is_none());
}

// ---------------------------------------------------------------------------------------------
// Generic
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn generic_replies_carry_their_files_as_base64_attachments() {
    let api = FakeApi::start("", json!({"message_id": "m-1"})).await;
    let sender = HttpReplySender::new(
        reqwest::Client::new(),
        format!("{}/replies", api.origin),
        b"secret",
    );
    sender
        .deliver(&reply(
            "r-1",
            chat("generic", "c1"),
            "hi",
            vec![photo(), pdf()],
        ))
        .await
        .unwrap();
    sender
        .deliver(&reply("r-2", chat("generic", "c1"), "plain", Vec::new()))
        .await
        .unwrap();
    let calls = api.calls();
    assert_eq!(
        calls[0].json()["attachments"],
        json!([
            {"name": "chart.png", "mime": "image/png", "data": "iVBORwANCg=="},
            {"name": "report \"q3\".pdf", "mime": "application/pdf", "data": "JVBERi0xLjcNCi0teC0tDQo="},
        ])
    );
    assert!(calls[1].json().get("attachments").is_none());
    api.answer_next(413, json!({}));
    rejected(
        sender
            .deliver(&reply("r-3", chat("generic", "c1"), "", vec![photo()]))
            .await,
    );
}

#[derive(Debug)]
struct FixedClock(u64);

impl clawless_base::clock::Clock for FixedClock {
    fn now_ms(&self) -> u64 {
        self.0
    }
}

#[tokio::test]
async fn generic_replies_link_their_files_stored_once_in_the_blob_store() {
    use clawless_base::media_links::MediaLinks;
    use clawless_base::object_store::ObjectStore;
    use clawless_channels::media_links::{LinkQuery, MediaPublisher, SignedMediaLinks};

    let api = FakeApi::start("", json!({"message_id": "m-1"})).await;
    let blobs = Arc::new(clawless_core::testing::InMemoryObjectStore::new());
    let links = SignedMediaLinks::new("http://127.0.0.1:8787", b"secret", Arc::new(FixedClock(0)));
    let sender = HttpReplySender::new(
        reqwest::Client::new(),
        format!("{}/replies", api.origin),
        b"secret",
    )
    .with_media_publisher(MediaPublisher::new(
        Arc::clone(&blobs) as Arc<dyn ObjectStore>,
        Arc::new(links.clone()),
    ));
    let sent = reply("r-1", chat("generic", "c1"), "hi", vec![photo(), pdf()]);
    sender.deliver(&sent).await.unwrap();
    // A resend (a retried turn) links the same files and stores nothing again.
    sender.deliver(&sent).await.unwrap();
    let calls = api.calls();
    assert_eq!(
        calls[0].json()["attachments"],
        calls[1].json()["attachments"]
    );
    let attachments = calls[0].json()["attachments"].clone();
    assert_eq!(attachments.as_array().map(Vec::len), Some(2));
    for (attachment, media) in attachments.as_array().unwrap().iter().zip([photo(), pdf()]) {
        assert_eq!(attachment["name"], media.name.as_str());
        assert_eq!(attachment["mime"], media.mime.as_str());
        assert_eq!(attachment["size"], media.bytes.len());
        assert!(attachment.get("data").is_none(), "{attachment}");
        let url = url::Url::parse(attachment["url"].as_str().unwrap()).unwrap();
        let key = url.path().trim_start_matches('/').to_owned();
        assert!(key.starts_with("media/outbound/"), "{key}");
        let query = LinkQuery {
            mime: url
                .query_pairs()
                .find(|(k, _)| k == "type")
                .map(|(_, v)| v.into_owned()),
            expires: url
                .query_pairs()
                .find(|(k, _)| k == "expires")
                .map(|(_, v)| v.into_owned()),
            sig: url
                .query_pairs()
                .find(|(k, _)| k == "sig")
                .map(|(_, v)| v.into_owned()),
        };
        assert_eq!(links.check(&key, &query, 1), Ok(media.mime.clone()));
        let stored = blobs.get(&key, 1 << 20).await.unwrap().expect("stored");
        assert_eq!(stored.bytes, media.bytes);
    }
    assert_eq!(blobs.list("media/", 10).await.unwrap().objects.len(), 2);
    // Links are never made outside media/.
    assert!(
        links
            .link("sessions/s.json", "application/json")
            .await
            .is_err()
    );
}
