//! Webhook ingress: verify the platform's signature, parse the body into a normalised message,
//! claim its id once, and enqueue it for the turn function. Ingress never calls a model.
//!
//! Order matters: the signature is checked before the body is even parsed (so unsigned junk
//! learns nothing), and a claim is given back if the enqueue fails, so the platform's retry
//! is not mistaken for a duplicate and the message is never lost.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use clawless_channels::generic::{CHANNEL_ID as GENERIC, GenericMessage};
use clawless_channels::{SIGNATURE_HEADER, verify};
use clawless_core::session::key::DmScope;
use clawless_core::session::{Claim, Inbox, QueuedMessage, SessionKey, TurnQueue};
use clawless_core::turn::events::{SessionEvent, TurnEvent};
use serde_json::json;

use crate::clock::Clock;

/// How long a message id stays claimed (platforms retry within minutes; keep a day).
pub const CLAIM_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Largest webhook body accepted, in bytes.
pub const MAX_WEBHOOK_BODY: usize = 256 * 1024;

/// The generic channel's settings as ingress needs them.
#[derive(Clone)]
pub struct GenericChannel {
    /// HMAC secret shared with the sender.
    pub secret: Arc<[u8]>,
    /// Sender ids treated as the agent's owner.
    pub owners: Vec<String>,
}

impl std::fmt::Debug for GenericChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GenericChannel")
            .field("owners", &self.owners)
            .finish_non_exhaustive()
    }
}

/// What ingress made of a webhook call.
#[derive(Debug)]
pub enum IngressOutcome {
    /// Enqueued for a turn (202).
    Accepted {
        /// The session it went to.
        session_key: String,
    },
    /// Seen before (200, `"duplicate": true`).
    Duplicate,
    /// Bad or missing signature (401).
    Unauthorized(String),
    /// Malformed body (400, reason shown).
    BadRequest(String),
    /// No such channel configured (404).
    UnknownChannel(String),
    /// Storage or queue failure (503): nothing was kept, so the platform's retry will pass.
    Unavailable(String),
}

impl IntoResponse for IngressOutcome {
    fn into_response(self) -> Response {
        match self {
            Self::Accepted { session_key } => (
                StatusCode::ACCEPTED,
                Json(json!({ "accepted": true, "session": session_key })),
            )
                .into_response(),
            Self::Duplicate => (StatusCode::OK, Json(json!({ "duplicate": true }))).into_response(),
            Self::Unauthorized(reason) => {
                (StatusCode::UNAUTHORIZED, Json(json!({ "error": reason }))).into_response()
            }
            Self::BadRequest(reason) => {
                (StatusCode::BAD_REQUEST, Json(json!({ "error": reason }))).into_response()
            }
            Self::UnknownChannel(channel) => (
                StatusCode::NOT_FOUND,
                Json(json!({ "error": format!("no channel {channel:?} is configured") })),
            )
                .into_response(),
            Self::Unavailable(reason) => {
                tracing::error!(%reason, "ingress failed");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    Json(json!({ "error": "temporarily unavailable, retry" })),
                )
                    .into_response()
            }
        }
    }
}

/// Accepts webhook calls and enqueues turn events.
#[derive(Clone)]
pub struct Ingress {
    /// Claims message ids once.
    pub inbox: Arc<dyn Inbox>,
    /// Where turn events go.
    pub queue: Arc<dyn TurnQueue>,
    /// The generic channel, if configured.
    pub generic: Option<GenericChannel>,
    /// The agent answering chats.
    pub agent_id: String,
    /// How direct messages map to sessions.
    pub dm_scope: DmScope,
    /// Time source for claim expiry.
    pub clock: Arc<dyn Clock>,
}

impl Ingress {
    /// Handles one webhook call for `channel`.
    pub async fn accept(&self, channel: &str, headers: &HeaderMap, body: &[u8]) -> IngressOutcome {
        let generic = match &self.generic {
            Some(generic) if channel == GENERIC => generic,
            _ => return IngressOutcome::UnknownChannel(channel.to_owned()),
        };
        let signature = headers
            .get(SIGNATURE_HEADER)
            .map(|value| value.to_str().unwrap_or(""));
        if let Err(err) = verify(&generic.secret, body, signature) {
            return IngressOutcome::Unauthorized(err.to_string());
        }
        let message = match GenericMessage::parse(body) {
            Ok(message) => message,
            Err(err) => return IngressOutcome::BadRequest(err.0),
        };
        let owner = generic.owners.contains(&message.sender_id);
        let inbound = message.into_inbound(owner);
        let session_key = SessionKey::for_chat(
            &self.agent_id,
            &inbound.chat.channel,
            inbound.chat.chat_type,
            &inbound.chat.chat_id,
            self.dm_scope,
        );
        let claim_id = format!("{}:{}", inbound.chat.channel, inbound.message_id);
        let now = self.clock.now_ms() / 1000;
        match self.inbox.claim(&claim_id, CLAIM_TTL, now).await {
            Ok(Claim::Claimed) => {}
            Ok(Claim::Duplicate) => return IngressOutcome::Duplicate,
            Err(err) => return IngressOutcome::Unavailable(err.to_string()),
        }
        let event = SessionEvent {
            session_key: session_key.to_string(),
            agent_id: self.agent_id.clone(),
            event: TurnEvent::Inbound(inbound),
        };
        if let Err(err) = enqueue(self.queue.as_ref(), &event).await {
            // Give the claim back so the platform's retry is processed, not dropped.
            if let Err(release) = self.inbox.release(&claim_id).await {
                tracing::error!(error = ?release, claim = %claim_id, "claim could not be released");
            }
            return IngressOutcome::Unavailable(err.to_string());
        }
        tracing::info!(session = %session_key, "message accepted");
        IngressOutcome::Accepted {
            session_key: session_key.to_string(),
        }
    }
}

/// Puts an event on the turn queue, grouped by session, deduplicated by its id.
pub async fn enqueue(
    queue: &dyn TurnQueue,
    event: &SessionEvent,
) -> Result<(), clawless_core::session::QueueError> {
    let body = serde_json::to_string(event).map_err(|err| {
        clawless_core::session::QueueError::new("turn event could not be encoded", err)
    })?;
    queue
        .send(&QueuedMessage {
            group: event.session_key.clone(),
            dedup_id: event.dedup_id(),
            body,
        })
        .await
}

/// `POST /webhook/{channel}`.
pub fn webhook_router(ingress: Arc<Ingress>) -> Router {
    Router::new()
        .route("/webhook/{channel}", post(webhook))
        .layer(DefaultBodyLimit::max(MAX_WEBHOOK_BODY))
        .with_state(ingress)
}

async fn webhook(
    State(ingress): State<Arc<Ingress>>,
    Path(channel): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> IngressOutcome {
    ingress.accept(&channel, &headers, &body).await
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use async_trait::async_trait;
    use axum::http::HeaderValue;
    use clawless_channels::sign;
    use clawless_core::session::{Delivery, QueueError, QueuedMessage};
    use clawless_core::testing::{InMemoryInbox, InMemoryTurnQueue};

    use super::*;
    use crate::clock::SystemClock;

    const SECRET: &[u8] = b"ingress-test-secret";

    /// A queue that is down.
    #[derive(Debug)]
    struct DownQueue;

    #[async_trait]
    impl TurnQueue for DownQueue {
        async fn send(&self, _message: &QueuedMessage) -> Result<(), QueueError> {
            Err(QueueError {
                message: "queue unreachable".to_owned(),
                source: None,
            })
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

    fn ingress(queue: Arc<dyn TurnQueue>) -> Ingress {
        Ingress {
            inbox: Arc::new(InMemoryInbox::new()),
            queue,
            generic: Some(GenericChannel {
                secret: Arc::from(SECRET),
                owners: vec!["owner-1".to_owned()],
            }),
            agent_id: "main".to_owned(),
            dm_scope: DmScope::PerPeer,
            clock: Arc::new(SystemClock),
        }
    }

    fn signed(body: &[u8]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let signature = HeaderValue::from_str(&sign(SECRET, body)).expect("ascii");
        headers.insert(SIGNATURE_HEADER, signature);
        headers
    }

    const BODY: &[u8] = br#"{"message_id":"m1","chat_id":"c1","sender_id":"owner-1","text":"hi","chat_type":"direct"}"#;

    #[tokio::test]
    async fn an_accepted_message_is_queued_once_in_its_session_group() {
        let queue = Arc::new(InMemoryTurnQueue::new());
        let ingress = ingress(Arc::clone(&queue) as Arc<dyn TurnQueue>);
        let outcome = ingress.accept("generic", &signed(BODY), BODY).await;
        assert!(
            matches!(&outcome, IngressOutcome::Accepted { session_key } if session_key == "agent:main:direct:c1")
        );
        let again = ingress.accept("generic", &signed(BODY), BODY).await;
        assert!(matches!(again, IngressOutcome::Duplicate));
        let deliveries = queue.receive(10, Duration::ZERO).await.expect("receive");
        assert_eq!(deliveries.len(), 1);
        assert_eq!(deliveries[0].group, "agent:main:direct:c1");
        let event: SessionEvent = serde_json::from_str(&deliveries[0].body).expect("event");
        let TurnEvent::Inbound(message) = event.event else {
            panic!("an inbound event");
        };
        assert!(
            message.sender_is_owner,
            "owner-1 is configured as the owner"
        );
    }

    #[tokio::test]
    async fn a_failed_enqueue_gives_the_claim_back_so_the_retry_is_not_a_duplicate() {
        let down = ingress(Arc::new(DownQueue));
        let outcome = down.accept("generic", &signed(BODY), BODY).await;
        assert!(matches!(outcome, IngressOutcome::Unavailable(_)));
        // The platform retries once the queue is back: the message must not be dropped.
        let queue = Arc::new(InMemoryTurnQueue::new());
        let back = Ingress {
            queue: Arc::clone(&queue) as Arc<dyn TurnQueue>,
            ..down
        };
        let retried = back.accept("generic", &signed(BODY), BODY).await;
        assert!(
            matches!(retried, IngressOutcome::Accepted { .. }),
            "{retried:?}"
        );
        assert_eq!(
            queue
                .receive(10, Duration::ZERO)
                .await
                .expect("receive")
                .len(),
            1
        );
    }

    #[tokio::test]
    async fn unsigned_forged_or_unknown_channel_calls_are_refused_before_parsing() {
        let queue = Arc::new(InMemoryTurnQueue::new());
        let ingress = ingress(Arc::clone(&queue) as Arc<dyn TurnQueue>);
        let unsigned = ingress.accept("generic", &HeaderMap::new(), BODY).await;
        assert!(matches!(unsigned, IngressOutcome::Unauthorized(_)));
        // A signature made for another body does not cover this one.
        let forged = ingress
            .accept("generic", &signed(b"other body"), BODY)
            .await;
        assert!(matches!(forged, IngressOutcome::Unauthorized(_)));
        let junk = b"not json";
        let bad = ingress.accept("generic", &signed(junk), junk).await;
        assert!(matches!(bad, IngressOutcome::BadRequest(_)));
        let unknown = ingress.accept("telegram", &signed(BODY), BODY).await;
        assert!(matches!(unknown, IngressOutcome::UnknownChannel(_)));
        assert!(
            queue
                .receive(10, Duration::ZERO)
                .await
                .expect("receive")
                .is_empty()
        );
    }
}
