//! Local mode's own reply receiver: the default `reply_url` of the generic channel when
//! `clawless local` runs, so `clawless chat` can show the answer.
//!
//! `POST /local/replies` accepts replies exactly as any receiver would (signature checked,
//! resends with a known `reply_id` dropped); `GET /local/replies/{chat_id}?after=N&wait=S`
//! returns the replies of a chat after the first N, waiting up to S seconds for one, each
//! with the files sent with it (name, type and link).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clawless_channels::{SIGNATURE_HEADER, verify};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::Notify;

/// Longest a `GET` waits for a reply.
const MAX_WAIT: Duration = Duration::from_secs(120);

/// One received reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceivedReply {
    /// Its idempotency id.
    pub reply_id: String,
    /// The text.
    pub text: String,
    /// The files sent with it, as linked (the local server's signed `/media/` route).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<ReceivedFile>,
}

/// A file sent with a reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceivedFile {
    /// Its name.
    pub name: String,
    /// Its MIME type.
    #[serde(default)]
    pub mime: String,
    /// Where it can be fetched (absent when it came inline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

#[derive(Debug, Deserialize)]
struct PostedReply {
    reply_id: String,
    chat_id: String,
    text: String,
    #[serde(default)]
    attachments: Vec<ReceivedFile>,
}

#[derive(Debug, Default)]
struct Inner {
    by_chat: BTreeMap<String, Vec<ReceivedReply>>,
    seen: HashSet<String>,
}

/// Replies received, per chat.
#[derive(Debug, Clone)]
pub struct LocalReplies {
    inner: Arc<Mutex<Inner>>,
    arrived: Arc<Notify>,
    secret: Arc<[u8]>,
}

impl LocalReplies {
    /// A receiver checking signatures with `secret`.
    pub fn new(secret: &[u8]) -> Self {
        Self {
            inner: Arc::default(),
            arrived: Arc::new(Notify::new()),
            secret: Arc::from(secret),
        }
    }

    /// Replies of `chat_id` after the first `after`.
    pub fn since(&self, chat_id: &str, after: usize) -> Vec<ReceivedReply> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner
            .by_chat
            .get(chat_id)
            .map(|replies| replies.iter().skip(after).cloned().collect())
            .unwrap_or_default()
    }

    fn record(&self, reply: PostedReply) -> bool {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if !inner.seen.insert(reply.reply_id.clone()) {
            return false;
        }
        inner
            .by_chat
            .entry(reply.chat_id)
            .or_default()
            .push(ReceivedReply {
                reply_id: reply.reply_id,
                text: reply.text,
                attachments: reply.attachments,
            });
        drop(inner);
        self.arrived.notify_waiters();
        true
    }

    /// `POST /local/replies` and `GET /local/replies/{chat_id}`.
    pub fn router(self) -> Router {
        Router::new()
            .route("/local/replies", post(receive))
            .route("/local/replies/{chat_id}", get(list))
            .with_state(self)
    }
}

async fn receive(State(replies): State<LocalReplies>, headers: HeaderMap, body: Bytes) -> Response {
    let signature = headers
        .get(SIGNATURE_HEADER)
        .map(|value| value.to_str().unwrap_or(""));
    if let Err(err) = verify(&replies.secret, &body, signature) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({ "error": err.to_string() })),
        )
            .into_response();
    }
    match serde_json::from_slice::<PostedReply>(&body) {
        Ok(reply) => {
            let fresh = replies.record(reply);
            (StatusCode::OK, Json(json!({ "duplicate": !fresh }))).into_response()
        }
        Err(err) => (
            StatusCode::BAD_REQUEST,
            Json(json!({ "error": err.to_string() })),
        )
            .into_response(),
    }
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    #[serde(default)]
    after: usize,
    #[serde(default)]
    wait: u64,
}

async fn list(
    State(replies): State<LocalReplies>, Path(chat_id): Path<String>,
    Query(query): Query<ListQuery>,
) -> Json<Vec<ReceivedReply>> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(query.wait).min(MAX_WAIT);
    loop {
        let arrived = replies.arrived.notified();
        let found = replies.since(&chat_id, query.after);
        if !found.is_empty() || tokio::time::Instant::now() >= deadline {
            return Json(found);
        }
        if tokio::time::timeout_at(deadline, arrived).await.is_err() {
            return Json(replies.since(&chat_id, query.after));
        }
    }
}
