//! The contract between webhook ingress and one chat platform: a platform channel checks that
//! a call really comes from the platform (signature, replay window), then says what the call
//! is: a handshake it answers itself, a chat message to claim once and start a turn with, an
//! approval button press, or something the agent ignores. Ingress (in `clawless-runtime`)
//! does the claiming, sender authorisation and enqueueing, the same way for every platform.
//!
//! Platform channels are pure over the request: no storage, no clock of their own (ingress
//! passes `now_ms`), no network.

use clawless_core::turn::events::{ApprovalDecision, InboundMessage};
use reqwest::header::HeaderMap;
use serde_json::Value;

/// Who may talk to the agent in group chats (`groupPolicy` of a channel's config).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum GroupPolicy {
    /// Anyone in a group the bot is in.
    Open,
    /// Only owners and `allowFrom` (the default, except on the generic channel).
    #[default]
    Allowlist,
    /// Group messages start no turn.
    Disabled,
}

/// Largest webhook body a channel accepts (bigger gets 413).
pub const MAX_WEBHOOK_BODY_BYTES: usize = 1024 * 1024;

/// One webhook call as the platform made it.
#[derive(Debug, Clone, Copy)]
pub struct WebhookRequest<'a> {
    /// The path after `/webhook/<channel>`, without the leading `/`: empty, or a sub-route
    /// such as Slack's `interactive`.
    pub sub_path: &'a str,
    /// The request headers (names are case-insensitive).
    pub headers: &'a HeaderMap,
    /// The raw body, exactly as received (signatures cover these bytes).
    pub body: &'a [u8],
    /// Now, in Unix milliseconds (replay windows).
    pub now_ms: u64,
}

/// A JSON answer for the platform.
#[derive(Debug, Clone, PartialEq)]
pub struct PlatformReply {
    /// HTTP status.
    pub status: u16,
    /// JSON body (`Value::Null` for an empty body).
    pub body: Value,
}

impl PlatformReply {
    /// `200` with an empty JSON object.
    pub fn ok() -> Self {
        Self {
            status: 200,
            body: Value::Object(serde_json::Map::new()),
        }
    }

    /// `200` with `body`.
    pub fn json(body: Value) -> Self {
        Self { status: 200, body }
    }
}

/// What a verified webhook call is.
#[derive(Debug, Clone, PartialEq)]
pub enum WebhookOutcome {
    /// Answer the platform with this and do nothing else (Slack `url_verification`, Discord
    /// PING).
    Respond(PlatformReply),
    /// A chat message: claim `event_id` once, authorise the sender, start a turn.
    Message(ChannelMessage),
    /// A button press answering an approval request.
    Approval(ChannelApproval),
    /// A valid call with nothing for the agent (an edited message, a bot's own message, an
    /// unknown event type): answered 200 so the platform keeps the endpoint enabled. The
    /// text says why, for the log.
    Ignored(String),
}

/// A chat message from a platform.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelMessage {
    /// The platform's id of this delivery (Telegram `update_id`, Slack `event_id`, Discord
    /// interaction id); a retry carries the same id and must not start a second turn.
    pub event_id: String,
    /// The message, normalised. `chat.chat_id` addresses the conversation the way the
    /// platform's sender needs it back, thread or topic included (e.g. `C123:thread:1700.1`,
    /// `-100123:topic:42`), so the session key gets §12's `:thread:`/`:topic:` suffix.
    /// `sender_is_owner` is left `false`: ingress decides it from the config.
    pub message: InboundMessage,
    /// True in a direct chat, or when a group message mentions the bot or replies to it.
    pub addressed_to_bot: bool,
    /// What to answer the platform once the message is safely queued (Discord: a deferred
    /// response; others: 200).
    pub ack: PlatformReply,
    /// The files the message carries, not yet downloaded: ingress stores them (after the
    /// claim, before the enqueue) and fills `message.attachments`.
    pub media: Vec<crate::media::PendingMedia>,
}

/// A button press on an approval request.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelApproval {
    /// The platform's id of this press (a retry carries the same id).
    pub event_id: String,
    /// The conversation and presser, as for a message; `text` is `/approve <code> <decision>`,
    /// so the press takes exactly the path (and the owner rule) of a typed `/approve`.
    pub message: InboundMessage,
    /// The approval code the button carried.
    pub code: String,
    /// The decision on the button.
    pub decision: ApprovalDecision,
    /// What to answer the platform (Telegram: an `answerCallbackQuery` call as the webhook's
    /// answer, which Telegram carries out; Slack/Discord: an acknowledgement).
    pub ack: PlatformReply,
}

/// Why a webhook call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookError {
    /// Missing, invalid or replayed signature (401). Nothing may be claimed.
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    /// Malformed body (400, the reason shown).
    #[error("{0}")]
    BadRequest(String),
    /// Body over [`MAX_WEBHOOK_BODY_BYTES`] (413).
    #[error("body of {0} bytes is over the limit")]
    TooLarge(usize),
}

/// One chat platform's inbound side.
pub trait PlatformChannel: Send + Sync + std::fmt::Debug {
    /// The channel id (`telegram`, `slack`, `discord`): the route's `/webhook/<id>` and
    /// `ChatRef.channel`.
    fn id(&self) -> &'static str;

    /// Verifies and classifies one call. Must not panic on any input, and must refuse an
    /// unverified call before looking at its body.
    fn handle(&self, request: &WebhookRequest<'_>) -> Result<WebhookOutcome, WebhookError>;

    /// The step that stores the attachments of this channel's messages, when the deployment
    /// has a blob store; `None` (the default) leaves them skipped.
    fn media(&self) -> Option<&crate::media::MediaIngest> {
        None
    }
}

/// The `/approve` text a button press stands for.
pub fn approve_text(code: &str, decision: ApprovalDecision) -> String {
    let decision = match decision {
        ApprovalDecision::AllowOnce => "allow-once",
        ApprovalDecision::AllowAlways => "allow-always",
        ApprovalDecision::Deny => "deny",
    };
    format!("/approve {code} {decision}")
}

/// Parses a button's value `<decision>:<code>` (what channels put in `callback_data`,
/// `value` or `custom_id`, prefixed `approve:`): `None` for anything else.
pub fn parse_approval_button(value: &str) -> Option<(String, ApprovalDecision)> {
    let rest = value.strip_prefix("approve:")?;
    let (decision, code) = rest.split_once(':')?;
    let decision = match decision {
        "allow-once" => ApprovalDecision::AllowOnce,
        "allow-always" => ApprovalDecision::AllowAlways,
        "deny" => ApprovalDecision::Deny,
        _ => return None,
    };
    let code = code.trim();
    let valid = !code.is_empty()
        && code.len() <= 64
        && code
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    valid.then(|| (code.to_owned(), decision))
}

/// The value of the approval button for `code` and `decision`. With the 8-character code
/// ([`OutboundReply::approval_code`](clawless_core::turn::OutboundReply)) it stays well under
/// Telegram's 64-byte `callback_data` limit.
pub fn approval_button_value(code: &str, decision: ApprovalDecision) -> String {
    let decision = match decision {
        ApprovalDecision::AllowOnce => "allow-once",
        ApprovalDecision::AllowAlways => "allow-always",
        ApprovalDecision::Deny => "deny",
    };
    format!("approve:{decision}:{code}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn button_values_round_trip_and_junk_is_refused() {
        for decision in [
            ApprovalDecision::AllowOnce,
            ApprovalDecision::AllowAlways,
            ApprovalDecision::Deny,
        ] {
            let value = approval_button_value("ab12cd34", decision);
            assert_eq!(
                parse_approval_button(&value),
                Some(("ab12cd34".to_owned(), decision))
            );
        }
        for junk in [
            "",
            "approve:",
            "approve:allow-once:",
            "approve:maybe:ab12",
            "approve:deny:a b",
            "deny:ab12",
        ] {
            assert_eq!(parse_approval_button(junk), None, "{junk:?}");
        }
        assert_eq!(
            approve_text("ab12cd34", ApprovalDecision::AllowAlways),
            "/approve ab12cd34 allow-always"
        );
    }
}
