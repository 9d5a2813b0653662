//! The reply sender against a real HTTP receiver on loopback: the body is signed, carries its
//! id, and non-2xx answers are errors (so a redelivery retries).

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use clawless_base::session_key::ChatType;
use clawless_channels::{HttpReplySender, verify};
use clawless_core::outbox::Outbox;
use clawless_core::turn::OutboundReply;
use clawless_core::turn::events::ChatRef;

type Received = Arc<Mutex<Vec<(HeaderMap, Bytes)>>>;

async fn receiver(status: StatusCode) -> (String, Received) {
    let received: Received = Arc::default();
    let sink = Arc::clone(&received);
    let app = Router::new().route(
        "/replies",
        post(move |headers: HeaderMap, body: Bytes| {
            let sink = Arc::clone(&sink);
            async move {
                sink.lock().expect("test fixture").push((headers, body));
                status
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("test fixture");
    let url = format!(
        "http://{}/replies",
        listener.local_addr().expect("test fixture")
    );
    tokio::spawn(async move { axum::serve(listener, app).await.expect("test fixture") });
    (url, received)
}

fn reply() -> OutboundReply {
    OutboundReply {
        reply_id: "s1-1-2".to_owned(),
        chat: ChatRef {
            channel: "generic".to_owned(),
            chat_id: "c1".to_owned(),
            chat_type: ChatType::Group,
        },
        text: "Hello ✓".to_owned(),
        approval_code: None,
        in_reply_to: None,
        media: Vec::new(),
    }
}

#[tokio::test]
async fn a_reply_is_posted_signed_with_its_id() {
    let (url, received) = receiver(StatusCode::OK).await;
    let sender = HttpReplySender::new(reqwest::Client::new(), url, b"secret");
    sender.send(&reply()).await.expect("test fixture");
    let received = received.lock().expect("test fixture");
    let (headers, body) = &received[0];
    let signature = headers
        .get("x-clawless-signature")
        .and_then(|v| v.to_str().ok());
    assert_eq!(verify(b"secret", body, signature), Ok(()));
    assert_eq!(
        headers.get("idempotency-key").expect("test fixture"),
        "s1-1-2"
    );
    let json: serde_json::Value = serde_json::from_slice(body).expect("test fixture");
    assert_eq!(json["reply_id"], "s1-1-2");
    assert_eq!(json["chat_id"], "c1");
    assert_eq!(json["chat_type"], "group");
    assert_eq!(json["text"], "Hello ✓");
}

#[tokio::test]
async fn a_refused_reply_is_an_error() {
    let (url, _) = receiver(StatusCode::INTERNAL_SERVER_ERROR).await;
    let sender = HttpReplySender::new(reqwest::Client::new(), url, b"secret");
    let err = sender.send(&reply()).await.unwrap_err();
    assert!(err.to_string().contains("500"), "{err}");
}
