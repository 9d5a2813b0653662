//! Webhook ingress, the same for every chat platform: the platform channel verifies the call
//! (signature, replay window) and says what it is; ingress then answers handshakes, checks
//! that the sender may talk to the agent, claims the platform's event id once, and enqueues
//! the message for the turn function, grouped by session. Ingress never calls a model.
//!
//! Order matters: the signature is checked before the body is even parsed (so unsigned junk
//! learns nothing and claims nothing), and a claim is given back if the enqueue fails, so the
//! platform's retry is not mistaken for a duplicate and the message is never lost.
//!
//! Attachments are stored between the claim and the enqueue (the channel's media step):
//! each once, under a key fixed by the event, so a retry reuses what an earlier delivery
//! stored. A transient download or store failure gives the claim back and answers 503.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use clawless_base::media::Attachment;
use clawless_base::session_key::{ChatType, DmScope};
use clawless_channels::media::{MediaError, PendingMedia};
use clawless_channels::webhook::MAX_WEBHOOK_BODY_BYTES;
use clawless_channels::{
    ChannelMessage, PlatformChannel, PlatformReply, WebhookError, WebhookOutcome, WebhookRequest,
};
use clawless_core::outbox::Outbox;
use clawless_core::session::{Claim, Inbox, QueuedMessage, SessionKey, TurnQueue};
use clawless_core::turn::OutboundReply;
use clawless_core::turn::events::{SessionEvent, TurnEvent};
use serde_json::json;

use clawless_base::clock::Clock;

/// How long a platform event id stays claimed: longer than any platform retries (Telegram
/// keeps undelivered updates for 24 hours).
pub const CLAIM_TTL: Duration = Duration::from_secs(48 * 60 * 60);

/// Largest webhook body accepted, in bytes (bigger gets 413).
pub const MAX_WEBHOOK_BODY: usize = MAX_WEBHOOK_BODY_BYTES;

pub use clawless_channels::webhook::GroupPolicy;

/// Who may talk to the agent on one channel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChannelAccess {
    /// Platform user ids of the agent's owners: always allowed, and the only ones who may
    /// use owner-only tools and `/approve`.
    pub owners: Vec<String>,
    /// Other platform user ids allowed to talk to the agent; `*` allows anyone.
    pub allow_from: Vec<String>,
    /// Group chats.
    pub group_policy: GroupPolicy,
    /// In groups, only messages that mention the bot or reply to it start a turn.
    pub require_mention: bool,
    /// Sent to someone not allowed (nothing when unset).
    pub unauthorized_reply: Option<String>,
}

impl ChannelAccess {
    fn is_owner(&self, sender: &str) -> bool {
        self.owners.iter().any(|owner| owner == sender)
    }

    fn is_allowed(&self, sender: &str) -> bool {
        self.is_owner(sender)
            || self
                .allow_from
                .iter()
                .any(|allowed| allowed == "*" || allowed == sender)
    }

    /// Why `message` starts no turn, if it does not.
    fn refusal(&self, message: &ChannelMessage) -> Option<Refusal> {
        let sender = message.message.sender_id.as_str();
        if message.message.chat.chat_type == ChatType::Group {
            match self.group_policy {
                GroupPolicy::Disabled => return Some(Refusal::Quiet("group chats are disabled")),
                GroupPolicy::Open => {}
                GroupPolicy::Allowlist if self.is_allowed(sender) => {}
                GroupPolicy::Allowlist => return Some(Refusal::NotAllowed),
            }
            if self.require_mention && !message.addressed_to_bot {
                return Some(Refusal::Quiet("not addressed to the bot"));
            }
            return None;
        }
        (!self.is_allowed(sender)).then_some(Refusal::NotAllowed)
    }
}

enum Refusal {
    /// Ignored without a word (the reason is logged).
    Quiet(&'static str),
    /// The sender is not allowed: the configured reply, if any.
    NotAllowed,
}

/// One chat channel: its platform side, who may use it, and (for the unauthorised reply) its
/// sender.
#[derive(Clone)]
pub struct ChatChannel {
    /// Verifies and classifies webhook calls.
    pub platform: Arc<dyn PlatformChannel>,
    /// Who may talk to the agent.
    pub access: ChannelAccess,
    /// Sends replies on this channel.
    pub outbox: Option<Arc<dyn Outbox>>,
}

impl std::fmt::Debug for ChatChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatChannel")
            .field("platform", &self.platform.id())
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

/// What ingress made of a webhook call.
#[derive(Debug)]
pub enum IngressOutcome {
    /// Enqueued for a turn: the platform's acknowledgement, or (for a null ack body) 202
    /// with the session.
    Accepted {
        /// The session it went to.
        session_key: String,
        /// The platform's answer.
        ack: PlatformReply,
    },
    /// Answered without a turn (a handshake).
    Responded(PlatformReply),
    /// Valid, but nothing for the agent (200, the reason shown).
    Ignored(String),
    /// Seen before (200, `"duplicate": true`).
    Duplicate,
    /// Bad or missing signature (401).
    Unauthorized(String),
    /// Malformed body (400, reason shown).
    BadRequest(String),
    /// Body over the limit (413).
    TooLarge(usize),
    /// No such channel configured (404).
    UnknownChannel(String),
    /// Storage or queue failure (503): nothing was kept, so the platform's retry will pass.
    Unavailable(String),
}

fn platform_response(reply: PlatformReply) -> Response {
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::OK);
    if reply.body.is_null() {
        status.into_response()
    } else {
        (status, Json(reply.body)).into_response()
    }
}

impl IntoResponse for IngressOutcome {
    fn into_response(self) -> Response {
        match self {
            Self::Accepted { session_key, ack } if ack.body.is_null() => (
                StatusCode::from_u16(ack.status).unwrap_or(StatusCode::ACCEPTED),
                Json(json!({ "accepted": true, "session": session_key })),
            )
                .into_response(),
            Self::Accepted { ack, .. } | Self::Responded(ack) => platform_response(ack),
            Self::Ignored(reason) => {
                (StatusCode::OK, Json(json!({ "ignored": reason }))).into_response()
            }
            Self::Duplicate => (StatusCode::OK, Json(json!({ "duplicate": true }))).into_response(),
            Self::Unauthorized(reason) => {
                (StatusCode::UNAUTHORIZED, Json(json!({ "error": reason }))).into_response()
            }
            Self::BadRequest(reason) => {
                (StatusCode::BAD_REQUEST, Json(json!({ "error": reason }))).into_response()
            }
            Self::TooLarge(bytes) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                Json(json!({ "error": format!("body of {bytes} bytes is over the {MAX_WEBHOOK_BODY}-byte limit") })),
            )
                .into_response(),
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
    /// Claims event ids once.
    pub inbox: Arc<dyn Inbox>,
    /// Where turn events go.
    pub queue: Arc<dyn TurnQueue>,
    /// The configured channels, by id.
    pub channels: BTreeMap<String, ChatChannel>,
    /// The agent answering chats.
    pub agent_id: String,
    /// How direct messages map to sessions.
    pub dm_scope: DmScope,
    /// Time source for claims and replay windows.
    pub clock: Arc<dyn Clock>,
}

impl Ingress {
    /// Handles one webhook call for `channel` (`sub_path` is what follows
    /// `/webhook/<channel>/`, usually empty).
    pub async fn accept(
        &self, channel: &str, sub_path: &str, headers: &HeaderMap, body: &[u8],
    ) -> IngressOutcome {
        let Some(chat_channel) = self.channels.get(channel) else {
            return IngressOutcome::UnknownChannel(channel.to_owned());
        };
        if body.len() > MAX_WEBHOOK_BODY {
            return IngressOutcome::TooLarge(body.len());
        }
        let request = WebhookRequest {
            sub_path,
            headers,
            body,
            now_ms: self.clock.now_ms(),
        };
        let outcome = match chat_channel.platform.handle(&request) {
            Ok(outcome) => outcome,
            Err(WebhookError::Unauthorized(reason)) => {
                return IngressOutcome::Unauthorized(reason);
            }
            Err(WebhookError::BadRequest(reason)) => return IngressOutcome::BadRequest(reason),
            Err(WebhookError::TooLarge(bytes)) => return IngressOutcome::TooLarge(bytes),
        };
        match outcome {
            WebhookOutcome::Respond(reply) => IngressOutcome::Responded(reply),
            WebhookOutcome::Ignored(reason) => {
                tracing::info!(%channel, %reason, "webhook call ignored");
                IngressOutcome::Ignored(reason)
            }
            WebhookOutcome::Message(message) => self.admit(chat_channel, message).await,
            WebhookOutcome::Approval(approval) => {
                // A button press is a typed `/approve` by the presser: the turn applies the
                // owner rule, exactly as for the text command.
                let mut message = approval.message;
                message.text =
                    clawless_channels::webhook::approve_text(&approval.code, approval.decision);
                let ack = approval.ack;
                self.admit(
                    chat_channel,
                    ChannelMessage {
                        event_id: approval.event_id,
                        message,
                        addressed_to_bot: true,
                        ack,
                        media: Vec::new(),
                    },
                )
                .await
            }
        }
    }

    /// Authorises, claims and enqueues one message.
    async fn admit(&self, channel: &ChatChannel, message: ChannelMessage) -> IngressOutcome {
        let channel_id = channel.platform.id();
        match channel.access.refusal(&message) {
            None => {}
            Some(Refusal::Quiet(reason)) => return IngressOutcome::Ignored(reason.to_owned()),
            Some(Refusal::NotAllowed) => {
                tracing::warn!(channel = %channel_id, sender = %message.message.sender_id, "message from a sender not allowed; no turn");
                self.tell_not_allowed(channel, &message).await;
                return IngressOutcome::Ignored("sender not allowed".to_owned());
            }
        }
        let ChannelMessage {
            event_id,
            mut message,
            ack,
            media,
            ..
        } = message;
        message.sender_is_owner = channel.access.is_owner(&message.sender_id);
        let session_key = SessionKey::for_chat(
            &self.agent_id,
            &message.chat.channel,
            message.chat.chat_type,
            &message.chat.chat_id,
            self.dm_scope,
        );
        let claim_id = format!("{channel_id}:{event_id}");
        let now = self.clock.now_ms() / 1000;
        match self.inbox.claim(&claim_id, CLAIM_TTL, now).await {
            Ok(Claim::Claimed) => {}
            Ok(Claim::Duplicate) => return IngressOutcome::Duplicate,
            Err(err) => return IngressOutcome::Unavailable(err.to_string()),
        }
        if !media.is_empty() {
            match store_media(channel, &event_id, &media).await {
                Ok(attachments) => message.attachments = attachments,
                Err(err) => {
                    // Transient: give the claim back so the platform's retry stores it.
                    self.release(&claim_id).await;
                    return IngressOutcome::Unavailable(err.to_string());
                }
            }
        }
        // An owner's stop request goes in a queue group of its own, so it is handled while
        // the turn it stops still runs; anyone else's "stop" is an ordinary message.
        let stop = message.sender_is_owner
            && clawless_core::session::reset::is_stop_request(&message.text);
        let event = SessionEvent {
            session_key: session_key.to_string(),
            agent_id: self.agent_id.clone(),
            event: if stop {
                TurnEvent::Stop(message)
            } else {
                TurnEvent::Inbound(message)
            },
        };
        if let Err(err) = enqueue(self.queue.as_ref(), &event).await {
            // Give the claim back so the platform's retry is processed, not dropped.
            self.release(&claim_id).await;
            return IngressOutcome::Unavailable(err.to_string());
        }
        tracing::info!(session = %session_key, "message accepted");
        IngressOutcome::Accepted {
            session_key: session_key.to_string(),
            ack,
        }
    }

    /// Gives a claim back, so the platform's retry is processed rather than dropped.
    async fn release(&self, claim_id: &str) {
        if let Err(err) = self.inbox.release(claim_id).await {
            tracing::error!(error = ?err, claim = %claim_id, "claim could not be released");
        }
    }

    /// Sends the channel's reply for senders not allowed, once per event, if one is set.
    async fn tell_not_allowed(&self, channel: &ChatChannel, message: &ChannelMessage) {
        let (Some(text), Some(outbox)) = (&channel.access.unauthorized_reply, &channel.outbox)
        else {
            return;
        };
        let reply = OutboundReply {
            reply_id: format!("not-allowed-{}", message.event_id),
            chat: message.message.chat.clone(),
            text: text.clone(),
            approval_code: None,
            in_reply_to: Some(message.message.message_id.clone()),
            media: Vec::new(),
        };
        if let Err(err) = outbox.send(&reply).await {
            tracing::warn!(error = %err, "the reply to a sender not allowed could not be sent");
        }
    }
}

/// Stores the attachments of a message through the channel's media step; without one (no
/// blob store on this deployment) each is recorded as skipped, and the message still goes on.
async fn store_media(
    channel: &ChatChannel, event_id: &str, media: &[PendingMedia],
) -> Result<Vec<Attachment>, MediaError> {
    match channel.platform.media() {
        Some(ingest) => ingest.store_all(event_id, media).await,
        None => Ok(media
            .iter()
            .map(|item| item.skipped("attachments are not stored on this deployment"))
            .collect()),
    }
}

/// Puts an event on the turn queue, grouped by session (a stop request in its own group),
/// deduplicated by its id.
pub async fn enqueue(
    queue: &dyn TurnQueue, event: &SessionEvent,
) -> Result<(), clawless_core::session::QueueError> {
    let body = serde_json::to_string(event).map_err(|err| {
        clawless_core::session::QueueError::new("turn event could not be encoded", err)
    })?;
    queue
        .send(&QueuedMessage {
            group: event.queue_group(),
            dedup_id: event.dedup_id(),
            body,
        })
        .await
}

/// `POST /webhook/{channel}` and `POST /webhook/{channel}/{sub}` (Slack's `interactive`).
pub fn webhook_router(ingress: Arc<Ingress>) -> Router {
    Router::new()
        .route("/webhook/{channel}", post(webhook))
        .route("/webhook/{channel}/{sub}", post(webhook_sub))
        // One byte over the limit is enough to answer 413 ourselves.
        .layer(DefaultBodyLimit::max(MAX_WEBHOOK_BODY + 1))
        .with_state(ingress)
}

async fn webhook(
    State(ingress): State<Arc<Ingress>>, Path(channel): Path<String>, headers: HeaderMap,
    body: Bytes,
) -> IngressOutcome {
    ingress.accept(&channel, "", &headers, &body).await
}

async fn webhook_sub(
    State(ingress): State<Arc<Ingress>>, Path((channel, sub)): Path<(String, String)>,
    headers: HeaderMap, body: Bytes,
) -> IngressOutcome {
    ingress.accept(&channel, &sub, &headers, &body).await
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use async_trait::async_trait;
    use axum::http::HeaderValue;
    use clawless_channels::{SIGNATURE_HEADER, sign};
    use clawless_core::session::{Delivery, QueueError, QueuedMessage};
    use clawless_core::testing::{InMemoryInbox, InMemoryTurnQueue};

    use super::*;
    use clawless_base::clock::SystemClock;

    const SECRET: &[u8] = b"ingress-test-secret";

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

    fn generic(access: ChannelAccess) -> ChatChannel {
        ChatChannel {
            platform: Arc::new(clawless_channels::GenericWebhook::new(SECRET)),
            access,
            outbox: None,
        }
    }

    fn open_access() -> ChannelAccess {
        ChannelAccess {
            owners: vec!["owner-1".to_owned()],
            allow_from: vec!["*".to_owned()],
            group_policy: GroupPolicy::Open,
            require_mention: false,
            unauthorized_reply: None,
        }
    }

    fn ingress_with(queue: Arc<dyn TurnQueue>, access: ChannelAccess) -> Ingress {
        Ingress {
            inbox: Arc::new(InMemoryInbox::new()),
            queue,
            channels: BTreeMap::from([("generic".to_owned(), generic(access))]),
            agent_id: "main".to_owned(),
            dm_scope: DmScope::PerPeer,
            clock: Arc::new(SystemClock),
        }
    }

    fn ingress(queue: Arc<dyn TurnQueue>) -> Ingress {
        ingress_with(queue, open_access())
    }

    fn signed(body: &[u8]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let signature = HeaderValue::from_str(&sign(SECRET, body)).expect("ascii");
        headers.insert(SIGNATURE_HEADER, signature);
        headers
    }

    const BODY: &[u8] = br#"{"message_id":"m1","chat_id":"c1","sender_id":"owner-1","text":"hi","chat_type":"direct"}"#;

    /// How many deliveries wait in `queue` (they are taken out).
    async fn queued_count(queue: &InMemoryTurnQueue) -> usize {
        queue
            .receive(10, Duration::ZERO)
            .await
            .expect("receive")
            .len()
    }

    #[tokio::test]
    async fn an_accepted_message_is_queued_once_in_its_session_group() {
        let queue = Arc::new(InMemoryTurnQueue::new());
        let ingress = ingress(Arc::clone(&queue) as Arc<dyn TurnQueue>);
        let outcome = ingress.accept("generic", "", &signed(BODY), BODY).await;
        assert!(
            matches!(&outcome, IngressOutcome::Accepted { session_key, .. } if session_key == "agent:main:direct:c1")
        );
        let again = ingress.accept("generic", "", &signed(BODY), BODY).await;
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
        let outcome = down.accept("generic", "", &signed(BODY), BODY).await;
        assert!(matches!(outcome, IngressOutcome::Unavailable(_)));
        // The platform retries once the queue is back: the message must not be dropped.
        let queue = Arc::new(InMemoryTurnQueue::new());
        let back = Ingress {
            queue: Arc::clone(&queue) as Arc<dyn TurnQueue>,
            ..down
        };
        let retried = back.accept("generic", "", &signed(BODY), BODY).await;
        assert!(
            matches!(retried, IngressOutcome::Accepted { .. }),
            "{retried:?}"
        );
        assert_eq!(queued_count(&queue).await, 1);
    }

    #[tokio::test]
    async fn unsigned_forged_or_unknown_channel_calls_are_refused_before_parsing() {
        let queue = Arc::new(InMemoryTurnQueue::new());
        let ingress = ingress(Arc::clone(&queue) as Arc<dyn TurnQueue>);
        let unsigned = ingress.accept("generic", "", &HeaderMap::new(), BODY).await;
        assert!(matches!(unsigned, IngressOutcome::Unauthorized(_)));
        // A signature made for another body does not cover this one.
        let forged = ingress
            .accept("generic", "", &signed(b"other body"), BODY)
            .await;
        assert!(matches!(forged, IngressOutcome::Unauthorized(_)));
        let junk = b"not json";
        let bad = ingress.accept("generic", "", &signed(junk), junk).await;
        assert!(matches!(bad, IngressOutcome::BadRequest(_)));
        let unknown = ingress.accept("telegram", "", &signed(BODY), BODY).await;
        assert!(matches!(unknown, IngressOutcome::UnknownChannel(_)));
        assert_eq!(queued_count(&queue).await, 0);
    }

    fn body(id: &str, sender: &str, chat_type: &str) -> Vec<u8> {
        // One chat per message, so each queued event heads its own session group.
        format!(r#"{{"message_id":"{id}","chat_id":"chat-{id}","sender_id":"{sender}","text":"hi","chat_type":"{chat_type}"}}"#).into_bytes()
    }

    #[tokio::test]
    async fn only_owners_and_allowed_senders_start_turns_and_groups_follow_their_policy() {
        let queue = Arc::new(InMemoryTurnQueue::new());
        let access = ChannelAccess {
            owners: vec!["owner-1".to_owned()],
            allow_from: vec!["friend-2".to_owned()],
            group_policy: GroupPolicy::Allowlist,
            require_mention: false,
            unauthorized_reply: None,
        };
        let ingress = ingress_with(Arc::clone(&queue) as Arc<dyn TurnQueue>, access.clone());
        let send = |ingress: &Ingress, body: Vec<u8>| {
            let ingress = ingress.clone();
            async move { ingress.accept("generic", "", &signed(&body), &body).await }
        };
        for (id, sender, chat_type, admitted) in [
            ("d1", "owner-1", "direct", true),
            ("d2", "friend-2", "direct", true),
            ("d3", "stranger-3", "direct", false),
            ("g1", "friend-2", "group", true),
            ("g2", "stranger-3", "group", false),
        ] {
            let outcome = send(&ingress, body(id, sender, chat_type)).await;
            assert_eq!(
                matches!(outcome, IngressOutcome::Accepted { .. }),
                admitted,
                "{id}: {outcome:?}"
            );
        }
        let queued = queue.receive(10, Duration::ZERO).await.expect("receive");
        assert_eq!(queued.len(), 3, "only admitted messages are queued");
        let owners: Vec<bool> = queued
            .iter()
            .map(|delivery| {
                let event: SessionEvent = serde_json::from_str(&delivery.body).expect("event");
                match event.event {
                    TurnEvent::Inbound(message) => message.sender_is_owner,
                    other => panic!("{other:?}"),
                }
            })
            .collect();
        assert_eq!(owners, [true, false, false], "only the owner is the owner");

        // Groups disabled: even the owner's group message starts nothing.
        let closed = ingress_with(
            Arc::new(InMemoryTurnQueue::new()),
            ChannelAccess {
                group_policy: GroupPolicy::Disabled,
                ..access
            },
        );
        let outcome = send(&closed, body("g3", "owner-1", "group")).await;
        assert!(matches!(outcome, IngressOutcome::Ignored(_)), "{outcome:?}");
    }

    #[tokio::test]
    async fn twenty_concurrent_deliveries_of_one_event_queue_one_turn() {
        let queue = Arc::new(InMemoryTurnQueue::new());
        let ingress = Arc::new(ingress(Arc::clone(&queue) as Arc<dyn TurnQueue>));
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let ingress = Arc::clone(&ingress);
                tokio::spawn(
                    async move { ingress.accept("generic", "", &signed(BODY), BODY).await },
                )
            })
            .collect();
        let mut accepted = 0;
        for task in tasks {
            match task.await.expect("task") {
                IngressOutcome::Accepted { .. } => accepted += 1,
                IngressOutcome::Duplicate => {}
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(accepted, 1);
        assert_eq!(queued_count(&queue).await, 1);
    }

    use clawless_base::object_store::ObjectStore;

    fn with_blob_store(
        ingress: Ingress, blobs: Arc<dyn clawless_base::object_store::ObjectStore>,
    ) -> Ingress {
        use clawless_channels::media::{InlineOnly, MediaIngest, WithMedia};
        let mut channels = ingress.channels.clone();
        for channel in channels.values_mut() {
            let ingest = MediaIngest::new(
                channel.platform.id(),
                Arc::clone(&blobs),
                Arc::new(InlineOnly { max_bytes: 16 }),
            );
            channel.platform = Arc::new(WithMedia::new(Arc::clone(&channel.platform), ingest));
        }
        Ingress {
            channels,
            ..ingress
        }
    }

    const WITH_FILES: &[u8] = br#"{"message_id":"m9","chat_id":"c9","sender_id":"owner-1","text":"","chat_type":"direct","attachments":[{"name":"note.txt","mime":"text/plain","data":"aGVsbG8="},{"name":"big.bin","data":"MDEyMzQ1Njc4OTAxMjM0NTY3ODk="}]}"#;

    async fn the_inbound(queue: &InMemoryTurnQueue) -> clawless_core::turn::events::InboundMessage {
        let deliveries = queue.receive(10, Duration::ZERO).await.expect("receive");
        assert_eq!(deliveries.len(), 1);
        let event: SessionEvent = serde_json::from_str(&deliveries[0].body).expect("event");
        match event.event {
            TurnEvent::Inbound(message) => message,
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn generic_base64_attachments_are_stored_once_and_an_oversized_one_skipped() {
        let blobs = Arc::new(clawless_core::testing::InMemoryObjectStore::new());
        let queue = Arc::new(InMemoryTurnQueue::new());
        let ingress = with_blob_store(
            ingress(Arc::clone(&queue) as Arc<dyn TurnQueue>),
            Arc::clone(&blobs) as Arc<dyn clawless_base::object_store::ObjectStore>,
        );
        let outcome = ingress
            .accept("generic", "", &signed(WITH_FILES), WITH_FILES)
            .await;
        assert!(
            matches!(outcome, IngressOutcome::Accepted { .. }),
            "{outcome:?}"
        );
        let message = the_inbound(&queue).await;
        assert_eq!(message.text, "<media:document>", "no text: the placeholder");
        let [note, big] = message.attachments.as_slice() else {
            panic!("{:?}", message.attachments);
        };
        assert_eq!(note.mime, "text/plain");
        assert_eq!(note.size, 5);
        let key = note.blob_key.as_deref().expect("stored");
        assert!(
            key.starts_with("media/inbound/generic/") && key.ends_with("/0.txt"),
            "{key}"
        );
        let object = blobs.get(key, 64).await.expect("get").expect("object");
        assert_eq!(object.bytes, b"hello");
        assert_eq!(big.blob_key, None);
        assert!(
            big.skipped
                .as_deref()
                .is_some_and(|why| why.starts_with("too large")),
            "{big:?}"
        );
        let listing = blobs.list("media/", 10).await.expect("list");
        assert_eq!(listing.objects.len(), 1);
    }

    #[tokio::test]
    async fn without_a_blob_store_attachments_are_skipped_and_the_message_still_queued() {
        let queue = Arc::new(InMemoryTurnQueue::new());
        let ingress = ingress(Arc::clone(&queue) as Arc<dyn TurnQueue>);
        let outcome = ingress
            .accept("generic", "", &signed(WITH_FILES), WITH_FILES)
            .await;
        assert!(
            matches!(outcome, IngressOutcome::Accepted { .. }),
            "{outcome:?}"
        );
        let message = the_inbound(&queue).await;
        assert_eq!(message.attachments.len(), 2);
        assert!(
            message
                .attachments
                .iter()
                .all(|a| a.blob_key.is_none() && a.skipped.is_some())
        );
        let bad = br#"{"message_id":"m8","chat_id":"c8","sender_id":"owner-1","text":"hi","chat_type":"direct","attachments":[{"data":"not base64!"}]}"#;
        let refused = ingress.accept("generic", "", &signed(bad), bad).await;
        assert!(
            matches!(&refused, IngressOutcome::BadRequest(why) if why.contains("base64")),
            "{refused:?}"
        );
        let by_file_url = br#"{"message_id":"m7","chat_id":"c7","sender_id":"owner-1","text":"hi","chat_type":"direct","attachments":[{"url":"file:///etc/passwd"}]}"#;
        let refused = ingress
            .accept("generic", "", &signed(by_file_url), by_file_url)
            .await;
        assert!(
            matches!(&refused, IngressOutcome::BadRequest(why) if why.contains("http or https")),
            "{refused:?}"
        );
    }

    #[tokio::test]
    async fn an_oversized_body_is_refused_with_413_before_anything_else() {
        let queue = Arc::new(InMemoryTurnQueue::new());
        let ingress = ingress(Arc::clone(&queue) as Arc<dyn TurnQueue>);
        let huge = vec![b' '; MAX_WEBHOOK_BODY + 1];
        let outcome = ingress.accept("generic", "", &signed(&huge), &huge).await;
        assert!(
            matches!(outcome, IngressOutcome::TooLarge(_)),
            "{outcome:?}"
        );
        assert_eq!(
            outcome.into_response().status(),
            StatusCode::PAYLOAD_TOO_LARGE
        );
    }
}
