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
