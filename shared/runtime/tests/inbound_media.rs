//! Files people send, end to end through ingress: a Telegram webhook with a photo, a voice
//! note or a document, the channel built from `clawless.yaml` against a fake Bot API on
//! 127.0.0.1 (`getFile`, then the file download), the blob store counted, and the turn event
//! read back from the queue.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::IntoResponse;
use clawless_base::clock::SystemClock;
use clawless_base::media::{Attachment, MediaKind};
use clawless_base::object_store::ObjectStore;
use clawless_base::session_key::DmScope;
use clawless_core::session::{Delivery, QueueError, QueuedMessage, TurnQueue};
use clawless_core::testing::{InMemoryInbox, InMemoryObjectStore, InMemoryTurnQueue};
use clawless_core::turn::events::{InboundMessage, SessionEvent, TurnEvent};
use clawless_runtime::ClawlessConfig;
use clawless_runtime::channels::{ChannelSet, ChannelSetup};
use clawless_runtime::ingress::{Ingress, IngressOutcome};
use serde_json::{Value, json};

const TOKEN: &str = "777:AAbbCCdd_ee-FF";
const SECRET: &str = "telegram-secret-token";
const PHOTO: &[u8] = b"\xff\xd8\xff\xe0 a jpeg";
const VOICE: &[u8] = b"OggS a voice note";

/// The fake Bot API: what it serves and what it was asked.
#[derive(Default)]
struct FakeBotApi {
    /// `getFile` answers 502 this many more times.
    get_file_failures: AtomicUsize,
    /// File downloads served.
    downloads: AtomicUsize,
    /// Methods and paths called, in order.
    calls: Mutex<Vec<String>>,
}

async fn fake_bot_api() -> (String, Arc<FakeBotApi>) {
    let state = Arc::new(FakeBotApi::default());
    let served = Arc::clone(&state);
    let app = Router::new().fallback(move |method: Method, uri: Uri, body: Bytes| {
        let state = Arc::clone(&served);
        async move { state.answer(&method, uri.path(), &body) }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), state)
}

impl FakeBotApi {
    fn answer(&self, method: &Method, path: &str, body: &[u8]) -> axum::response::Response {
        self.calls
            .lock()
            .expect("calls")
            .push(format!("{method} {path}"));
        if path == format!("/bot{TOKEN}/getFile") {
            if self
                .get_file_failures
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                let answer = json!({"ok": false, "description": "Bad Gateway"});
                return (StatusCode::BAD_GATEWAY, axum::Json(answer)).into_response();
            }
            let request: Value = serde_json::from_slice(body).unwrap_or_default();
            let answer = match request["file_id"].as_str().unwrap_or_default() {
                "photo-large" => {
                    json!({"ok": true, "result": {"file_id": "photo-large", "file_path": "photos/file_1.jpg"}})
                }
                "voice-1" => {
                    json!({"ok": true, "result": {"file_id": "voice-1", "file_path": "voice/file_2.oga"}})
                }
                "huge-doc" => {
                    let refusal = json!({"ok": false, "error_code": 400, "description": "Bad Request: file is too big"});
                    return (StatusCode::BAD_REQUEST, axum::Json(refusal)).into_response();
                }
                _ => {
                    let refusal = json!({"ok": false, "error_code": 400, "description": "Bad Request: invalid file_id"});
                    return (StatusCode::BAD_REQUEST, axum::Json(refusal)).into_response();
                }
            };
            return axum::Json(answer).into_response();
        }
        let file = match path.strip_prefix(&format!("/file/bot{TOKEN}/")) {
            Some("photos/file_1.jpg") => PHOTO,
            Some("voice/file_2.oga") => VOICE,
            _ => return StatusCode::NOT_FOUND.into_response(),
        };
        self.downloads.fetch_add(1, Ordering::SeqCst);
        (
            [("content-type", "application/octet-stream")],
            file.to_vec(),
        )
            .into_response()
    }
}

/// A queue that is down.
#[derive(Debug)]
struct DownQueue;

#[async_trait]
impl TurnQueue for DownQueue {
    async fn send(&self, _message: &QueuedMessage) -> Result<(), QueueError> {
        Err(QueueError::bare("queue unreachable".to_owned()))
    }
    async fn receive(&self, _max: usize, _wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        Ok(Vec::new())
    }
    async fn delete(&self, _receipt: &str) -> Result<(), QueueError> {
        Ok(())
    }
    async fn release(&self, _receipt: &str, _delay: Duration) -> Result<(), QueueError> {
        Ok(())
    }
}

struct Harness {
    ingress: Ingress,
    queue: Arc<InMemoryTurnQueue>,
    blobs: Arc<InMemoryObjectStore>,
    api: Arc<FakeBotApi>,
}

async fn harness() -> Harness {
    let (api_base, api) = fake_bot_api().await;
    let yaml = format!(
        "channels:\n  telegram:\n    botToken: \"{TOKEN}\"\n    secretToken: \"{SECRET}\"\n    apiBaseUrl: \"{api_base}\"\n    owners: [\"42\"]\n    mediaMaxMb: 1\n"
    );
    let config = ClawlessConfig::from_yaml(&yaml, "test.yaml").expect("config");
    let blobs = Arc::new(InMemoryObjectStore::new());
    let env = |_: &str| None;
    let channels = ChannelSet::build(&ChannelSetup {
        config: &config,
        env: &env,
        http: reqwest::Client::new(),
        generic_secret: None,
        generic_reply_url: None,
        generic_owners: Vec::new(),
        sent_chunks: Arc::new(InMemoryInbox::new()),
    })
    .with_blob_store(Arc::clone(&blobs) as Arc<dyn ObjectStore>);
    let queue = Arc::new(InMemoryTurnQueue::new());
    let ingress = Ingress {
        inbox: Arc::new(InMemoryInbox::new()),
        queue: Arc::clone(&queue) as Arc<dyn TurnQueue>,
        channels: channels.inbound,
        agent_id: "main".to_owned(),
        dm_scope: DmScope::PerPeer,
        clock: Arc::new(SystemClock),
    };
    Harness {
        ingress,
        queue,
        blobs,
        api,
    }
}

fn update(update_id: i64, message: &Value) -> Vec<u8> {
    let mut message = message.clone();
    message["message_id"] = json!(update_id);
    message["from"] = json!({"id": 42, "is_bot": false, "first_name": "Owner"});
    // A chat per update, so each queued event heads its own session group.
    message["chat"] = json!({"id": update_id, "type": "private"});
    json!({"update_id": update_id, "message": message})
        .to_string()
        .into_bytes()
}

fn photo_message() -> Value {
    json!({
        "caption": "what is this?",
        "photo": [
            {"file_id": "photo-small", "file_unique_id": "s", "width": 90, "height": 67, "file_size": 900},
            {"file_id": "photo-large", "file_unique_id": "l", "width": 1280, "height": 960, "file_size": PHOTO.len()},
        ],
    })
}

async fn deliver(ingress: &Ingress, body: &[u8]) -> IngressOutcome {
    let mut headers = HeaderMap::new();
    headers.insert(
        "x-telegram-bot-api-secret-token",
        HeaderValue::from_static(SECRET),
    );
    ingress.accept("telegram", "", &headers, body).await
}

/// The inbound messages waiting in `queue` (taken out).
async fn queued(queue: &InMemoryTurnQueue) -> Vec<InboundMessage> {
    queue
        .receive(10, Duration::ZERO)
        .await
        .expect("receive")
        .into_iter()
        .map(|delivery| {
            let event: SessionEvent = serde_json::from_str(&delivery.body).expect("event");
            match event.event {
                TurnEvent::Inbound(message) => message,
                other => panic!("{other:?}"),
            }
        })
        .collect()
}

async fn stored_keys(blobs: &InMemoryObjectStore) -> Vec<String> {
    let listing = blobs.list("media/inbound/", 100).await.expect("list");
    listing.objects.into_iter().map(|meta| meta.key).collect()
}

#[tokio::test]
async fn a_photo_is_fetched_with_get_file_and_stored_with_its_key_on_the_message() {
    let h = harness().await;
    let outcome = deliver(&h.ingress, &update(1001, &photo_message())).await;
    assert!(
        matches!(outcome, IngressOutcome::Accepted { .. }),
        "{outcome:?}"
    );
    let messages = queued(&h.queue).await;
    assert_eq!(messages.len(), 1);
    let message = &messages[0];
    assert_eq!(message.text, "what is this?", "the caption stays the text");
    let [attachment] = message.attachments.as_slice() else {
        panic!("one attachment: {:?}", message.attachments);
    };
    assert_eq!(attachment.kind, MediaKind::Image);
    assert_eq!(attachment.mime, "image/jpeg");
    assert_eq!(attachment.size, PHOTO.len() as u64);
    assert_eq!(attachment.skipped, None);
    let key = attachment.blob_key.clone().expect("stored");
    assert!(
        key.starts_with("media/inbound/telegram/") && key.ends_with("/0.jpg"),
        "{key}"
    );
    let object = h.blobs.get(&key, 1024).await.expect("get").expect("object");
    assert_eq!(object.bytes, PHOTO);
    // The largest size was asked for, then downloaded from the file path.
    let calls = h.api.calls.lock().expect("calls").clone();
    assert_eq!(
        calls,
        [
            format!("POST /bot{TOKEN}/getFile"),
            format!("GET /file/bot{TOKEN}/photos/file_1.jpg"),
        ]
    );
}

#[tokio::test]
async fn a_retried_webhook_reuses_the_stored_photo_and_stores_nothing_twice() {
    let mut h = harness().await;
    // First delivery: the photo is stored, but the queue is down, so ingress answers 503.
    let queue = std::mem::replace(&mut h.ingress.queue, Arc::new(DownQueue));
    let body = update(1002, &photo_message());
    let failed = deliver(&h.ingress, &body).await;
    assert!(
        matches!(failed, IngressOutcome::Unavailable(_)),
        "{failed:?}"
    );
    assert_eq!(stored_keys(&h.blobs).await.len(), 1);
    // Telegram retries the same update once the queue is back.
    h.ingress.queue = queue;
    let retried = deliver(&h.ingress, &body).await;
    assert!(
        matches!(retried, IngressOutcome::Accepted { .. }),
        "{retried:?}"
    );
    assert_eq!(stored_keys(&h.blobs).await.len(), 1, "stored once");
    assert_eq!(h.api.downloads.load(Ordering::SeqCst), 1, "downloaded once");
    let messages = queued(&h.queue).await;
    assert_eq!(messages.len(), 1);
    assert_eq!(
        messages[0].attachments[0].blob_key.as_deref(),
        stored_keys(&h.blobs).await.first().map(String::as_str)
    );
}

#[tokio::test]
async fn a_transient_get_file_failure_answers_503_and_the_retry_stores_the_photo() {
    let h = harness().await;
    h.api.get_file_failures.store(1, Ordering::SeqCst);
    let body = update(1003, &photo_message());
    let failed = deliver(&h.ingress, &body).await;
    assert!(
        matches!(failed, IngressOutcome::Unavailable(_)),
        "{failed:?}"
    );
    assert!(queued(&h.queue).await.is_empty());
    let retried = deliver(&h.ingress, &body).await;
    assert!(
        matches!(retried, IngressOutcome::Accepted { .. }),
        "the claim was given back: {retried:?}"
    );
    let messages = queued(&h.queue).await;
    assert!(messages[0].attachments[0].blob_key.is_some());
    assert_eq!(stored_keys(&h.blobs).await.len(), 1);
}

#[tokio::test]
async fn a_voice_note_without_text_starts_a_turn_with_the_audio_placeholder() {
    let h = harness().await;
    let voice = json!({
        "voice": {"file_id": "voice-1", "file_unique_id": "v", "duration": 3, "mime_type": "audio/ogg", "file_size": VOICE.len()},
    });
    let outcome = deliver(&h.ingress, &update(1004, &voice)).await;
    assert!(
        matches!(outcome, IngressOutcome::Accepted { .. }),
        "{outcome:?}"
    );
    let messages = queued(&h.queue).await;
    assert_eq!(messages[0].text, "<media:audio>");
    let attachment = &messages[0].attachments[0];
    assert_eq!(attachment.kind, MediaKind::Audio);
    assert_eq!(attachment.mime, "audio/ogg");
    assert!(
        attachment
            .blob_key
            .as_deref()
            .is_some_and(|key| key.ends_with("/0.ogg"))
    );
}

#[tokio::test]
async fn oversized_files_are_skipped_with_a_reason_and_the_message_still_queued() {
    let h = harness().await;
    // Announced over the 1 MB `mediaMaxMb`: not even asked for.
    let big = json!({
        "caption": "the report",
        "document": {"file_id": "big-doc", "file_unique_id": "d", "file_name": "report.pdf", "mime_type": "application/pdf", "file_size": 3 * 1024 * 1024},
    });
    let outcome = deliver(&h.ingress, &update(1005, &big)).await;
    assert!(
        matches!(outcome, IngressOutcome::Accepted { .. }),
        "{outcome:?}"
    );
    // Size not announced, and the Bot API refuses it (`file is too big`).
    let huge = json!({
        "document": {"file_id": "huge-doc", "file_unique_id": "h", "file_name": "movie.mkv"},
    });
    let outcome = deliver(&h.ingress, &update(1006, &huge)).await;
    assert!(
        matches!(outcome, IngressOutcome::Accepted { .. }),
        "{outcome:?}"
    );
    let messages = queued(&h.queue).await;
    assert_eq!(messages.len(), 2);
    let skipped: Vec<&Attachment> = messages.iter().map(|m| &m.attachments[0]).collect();
    assert_eq!(messages[0].text, "the report");
    assert_eq!(
        skipped[0].skipped.as_deref(),
        Some("too large: 3 MB over the 1 MB limit")
    );
    assert_eq!(skipped[0].name.as_deref(), Some("report.pdf"));
    assert_eq!(skipped[0].mime, "application/pdf");
    assert_eq!(messages[1].text, "<media:document>");
    assert!(
        skipped[1]
            .skipped
            .as_deref()
            .is_some_and(|reason| reason.starts_with("too large")),
        "{:?}",
        skipped[1]
    );
    assert!(skipped.iter().all(|a| a.blob_key.is_none()));
    assert!(stored_keys(&h.blobs).await.is_empty());
    assert_eq!(h.api.downloads.load(Ordering::SeqCst), 0);
}
