//! Files sent by URL on the generic channel, and a Discord `/ask` with a file, end to end
//! through ingress: the channels built from `clawless.yaml`, a fake file server on 127.0.0.1
//! (reached through `web_fetch`'s own fetcher, allowed that one address as its tests do),
//! the blob store counted, and the turn event read back from the queue.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::IntoResponse;
use clawless_base::clock::Clock;
use clawless_base::media::MediaKind;
use clawless_base::object_store::ObjectStore;
use clawless_base::session_key::DmScope;
use clawless_channels::{SIGNATURE_HEADER, sign};
use clawless_core::session::{Delivery, QueueError, QueuedMessage, TurnQueue};
use clawless_core::testing::{InMemoryInbox, InMemoryObjectStore, InMemoryTurnQueue};
use clawless_core::turn::events::{InboundMessage, SessionEvent, TurnEvent};
use clawless_runtime::ClawlessConfig;
use clawless_runtime::channels::{ChannelSet, ChannelSetup};
use clawless_runtime::ingress::{Ingress, IngressOutcome};
use clawless_runtime::web_fetcher::HttpWebFetcher;
use ed25519_dalek::{Signer, SigningKey};
use serde_json::{Value, json};

const SECRET: &str = "generic-secret";
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n a chart";
const MB: usize = 1024 * 1024;
/// When the Discord interactions are signed, and what the ingress clock says.
const NOW_MS: u64 = 1_700_000_000_000;

#[derive(Debug)]
struct FixedClock;

impl Clock for FixedClock {
    fn now_ms(&self) -> u64 {
        NOW_MS
    }
}

/// The file server: `/chart.png`, `/big.bin` (one MB and a bit), anything else 404; it
/// counts the requests it answers.
async fn file_server() -> (SocketAddr, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&hits);
    let app = Router::new().fallback(move |uri: Uri| {
        let hits = Arc::clone(&counted);
        async move {
            hits.fetch_add(1, Ordering::SeqCst);
            match uri.path() {
                "/chart.png" | "/attachments/1/2/chart.png" => {
                    ([("content-type", "image/png")], PNG.to_vec()).into_response()
                }
                "/big.bin" => vec![b'x'; MB + 10].into_response(),
                _ => StatusCode::NOT_FOUND.into_response(),
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("test fixture");
    let addr = listener.local_addr().expect("test fixture");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, hits)
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
}

/// Ingress over the channels of `yaml`, the generic channel fetching URLs through
/// `web_fetch`'s fetcher with `server` allowed.
fn harness(yaml: &str, server: SocketAddr) -> Harness {
    let config = ClawlessConfig::from_yaml(yaml, "test.yaml").expect("test fixture");
    let blobs = Arc::new(InMemoryObjectStore::new());
    let env = |_: &str| None;
    let fetcher = HttpWebFetcher::with_allowed_test_addresses([server]).expect("test fixture");
    let channels = ChannelSet::build(&ChannelSetup {
        config: &config,
        env: &env,
        http: reqwest::Client::new(),
        generic_secret: None,
        generic_reply_url: None,
        generic_owners: Vec::new(),
        sent_chunks: Arc::new(InMemoryInbox::new()),
    })
    .with_generic_fetcher(Arc::new(fetcher))
    .with_blob_store(Arc::clone(&blobs) as Arc<dyn ObjectStore>);
    let queue = Arc::new(InMemoryTurnQueue::new());
    let ingress = Ingress {
        inbox: Arc::new(InMemoryInbox::new()),
        queue: Arc::clone(&queue) as Arc<dyn TurnQueue>,
        channels: channels.inbound,
        agent_id: "main".to_owned(),
        dm_scope: DmScope::PerPeer,
        clock: Arc::new(FixedClock),
    };
    Harness {
        ingress,
        queue,
        blobs,
    }
}

fn generic_yaml() -> String {
    format!("channels:\n  generic:\n    secret: {SECRET}\n    owners: [u1]\n    mediaMaxMb: 1\n")
}

async fn send_generic(ingress: &Ingress, id: &str, attachments: Value) -> IngressOutcome {
    let body = serde_json::to_vec(&json!({
        "message_id": id, "chat_id": format!("chat-{id}"), "sender_id": "u1",
        "text": "", "chat_type": "direct", "attachments": attachments,
    }))
    .expect("test fixture");
    let mut headers = HeaderMap::new();
    headers.insert(
        SIGNATURE_HEADER,
        HeaderValue::from_str(&sign(SECRET.as_bytes(), &body)).expect("test fixture"),
    );
    ingress.accept("generic", "", &headers, &body).await
}

/// The inbound messages waiting in `queue` (taken out).
async fn queued(queue: &InMemoryTurnQueue) -> Vec<InboundMessage> {
    queue
        .receive(10, Duration::ZERO)
        .await
        .expect("receive")
        .into_iter()
        .map(|delivery| {
            match serde_json::from_str::<SessionEvent>(&delivery.body)
                .expect("event")
                .event
            {
                TurnEvent::Inbound(message) => message,
                other => panic!("{other:?}"),
            }
        })
        .collect()
}

async fn stored_count(blobs: &InMemoryObjectStore) -> usize {
    blobs.list("media/", 100).await.expect("list").objects.len()
}

#[tokio::test]
async fn a_url_attachment_is_fetched_once_even_when_the_webhook_is_retried() {
    let (server, hits) = file_server().await;
    let up = harness(&generic_yaml(), server);
    let down = Ingress {
        queue: Arc::new(DownQueue),
        ..up.ingress.clone()
    };
    let attachments = json!([
        {"name": "chart.png", "mime": "image/png", "url": format!("http://{server}/chart.png")}
    ]);
    // The queue is down: the file is stored, the claim given back, the sender told to retry.
    let first = send_generic(&down, "m1", attachments.clone()).await;
    assert!(matches!(first, IngressOutcome::Unavailable(_)), "{first:?}");
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    assert_eq!(stored_count(&up.blobs).await, 1);
    // The retry reuses the stored file: no second download, nothing stored twice.
    let retried = send_generic(&up.ingress, "m1", attachments).await;
    assert!(
        matches!(retried, IngressOutcome::Accepted { .. }),
        "{retried:?}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    assert_eq!(stored_count(&up.blobs).await, 1);
    let messages = queued(&up.queue).await;
    let [message] = messages.as_slice() else {
        panic!("{messages:?}");
    };
    let [attachment] = message.attachments.as_slice() else {
        panic!("{:?}", message.attachments);
    };
    assert_eq!(attachment.skipped, None);
    assert_eq!(attachment.size, PNG.len() as u64);
    assert_eq!(attachment.kind, MediaKind::Image);
    assert_eq!(attachment.mime, "image/png");
    let key = attachment.blob_key.as_deref().expect("stored");
    assert!(
        key.starts_with("media/inbound/generic/") && key.ends_with("/0.png"),
        "{key}"
    );
    let object = up.blobs.get(key, 1024).await.expect("get").expect("object");
    assert_eq!(object.bytes, PNG);
}

#[tokio::test]
async fn private_oversized_and_missing_urls_are_skipped_with_a_note() {
    let (server, hits) = file_server().await;
    let h = harness(&generic_yaml(), server);
    let port = server.port();
    let outcome = send_generic(
        &h.ingress,
        "m2",
        json!([
            // The file server itself, by a name the policy refuses, and the metadata address.
            {"name": "chart.png", "url": format!("http://localhost:{port}/chart.png")},
            {"url": "http://169.254.169.254/latest/meta-data/"},
            {"url": format!("http://{server}/big.bin")},
            {"url": format!("http://{server}/gone")},
            // No MIME type named: the server's Content-Type is recorded.
            {"url": format!("http://{server}/chart.png")},
        ]),
    )
    .await;
    assert!(
        matches!(outcome, IngressOutcome::Accepted { .. }),
        "{outcome:?}"
    );
    let messages = queued(&h.queue).await;
    let [skipped @ .., fetched] = messages[0].attachments.as_slice() else {
        panic!("{:?}", messages[0].attachments);
    };
    assert_eq!(fetched.skipped, None);
    assert_eq!(fetched.mime, "image/png", "the server's Content-Type");
    assert_eq!(fetched.size, PNG.len() as u64);
    let notes: Vec<&str> = skipped
        .iter()
        .map(|attachment| {
            assert_eq!(attachment.blob_key, None, "{attachment:?}");
            attachment.skipped.as_deref().expect("a note")
        })
        .collect();
    assert!(
        notes[0].starts_with("the URL was not fetched: refused: localhost"),
        "{notes:?}"
    );
    assert!(
        notes[1].starts_with("the URL was not fetched: refused: 169.254.169.254"),
        "{notes:?}"
    );
    assert!(
        notes[2].starts_with("too large: 2 MB over the 1 MB limit"),
        "{notes:?}"
    );
    assert_eq!(notes[3], "the URL answered HTTP 404", "{notes:?}");
    assert_eq!(messages[0].text, "<media:document>");
    assert_eq!(stored_count(&h.blobs).await, 1);
    // Only the allowed address was ever reached: the big file, the missing one, the chart.
    assert_eq!(hits.load(Ordering::SeqCst), 3);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[tokio::test]
async fn a_discord_ask_with_a_file_reaches_the_queue_with_the_file_stored() {
    let (server, hits) = file_server().await;
    let key = SigningKey::from_bytes(&[7; 32]);
    let yaml = format!(
        "channels:\n  discord:\n    applicationId: \"1234\"\n    publicKey: \"{}\"\n    apiBaseUrl: \"http://{server}\"\n    owners: [\"7700000000000000007\"]\n",
        hex(key.verifying_key().as_bytes())
    );
    let h = harness(&yaml, server);
    let id = ((NOW_MS - 1_420_070_400_000) << 22).to_string();
    let interaction = json!({
        "id": id,
        "type": 2,
        "token": "aW50ZXJhY3Rpb24.dG9rZW4-_x",
        "channel": { "id": "6600000000000000006", "type": 1 },
        "channel_id": "6600000000000000006",
        "user": { "id": "7700000000000000007", "username": "bob" },
        "data": {
            "name": "ask", "type": 1,
            "options": [
                {"name": "text", "type": 3, "value": "what does this show?"},
                {"name": "file", "type": 11, "value": "900"},
            ],
            "resolved": {"attachments": {"900": {
                "id": "900", "url": format!("http://{server}/attachments/1/2/chart.png"),
                "filename": "chart.png", "content_type": "image/png", "size": PNG.len(),
            }}},
        },
    });
    let body = serde_json::to_vec(&interaction).expect("test fixture");
    let timestamp = (NOW_MS / 1000).to_string();
    let mut signed = timestamp.as_bytes().to_vec();
    signed.extend_from_slice(&body);
    let mut headers = HeaderMap::new();
    headers.insert(
        "X-Signature-Ed25519",
        HeaderValue::from_str(&hex(&key.sign(&signed).to_bytes())).expect("test fixture"),
    );
    headers.insert(
        "X-Signature-Timestamp",
        HeaderValue::from_str(&timestamp).expect("test fixture"),
    );
    let outcome = h.ingress.accept("discord", "", &headers, &body).await;
    assert!(
        matches!(outcome, IngressOutcome::Accepted { .. }),
        "{outcome:?}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    let messages = queued(&h.queue).await;
    let [message] = messages.as_slice() else {
        panic!("{messages:?}");
    };
    assert_eq!(message.text, "what does this show?");
    let [attachment] = message.attachments.as_slice() else {
        panic!("{:?}", message.attachments);
    };
    assert_eq!(attachment.kind, MediaKind::Image);
    assert_eq!(attachment.name.as_deref(), Some("chart.png"));
    let key = attachment.blob_key.as_deref().expect("stored");
    assert!(key.starts_with("media/inbound/discord/"), "{key}");
    let object = h.blobs.get(key, 1024).await.expect("get").expect("object");
    assert_eq!(object.bytes, PNG);
}
