//! Slack end to end at the channel's edges: signed Events API and interactive calls classified
//! (and forged, replayed, oversized or junk ones refused), and replies sent to a fake Slack Web
//! API on loopback that records every `chat.postMessage` call.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use clawless_base::session_key::ChatType;
use clawless_channels::slack::{
    ConfigError, REPLAY_WINDOW_MS, SlackChannel, SlackConfig, SlackSender,
};
use clawless_channels::webhook::{
    MAX_WEBHOOK_BODY_BYTES, PlatformChannel, WebhookError, WebhookOutcome, WebhookRequest,
    parse_approval_button,
};
use clawless_channels::{SecretError, sign};
use clawless_core::outbox::{Outbox, OutboxError};
use clawless_core::testing::InMemoryInbox;
use clawless_core::turn::OutboundReply;
use clawless_core::turn::events::{ApprovalDecision, ChatRef};
use proptest::prelude::*;
use serde_json::{Value, json};

const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const NOW_MS: u64 = 1_700_000_000_000;
const BOT: &str = "UBOT0001";

// ---------------------------------------------------------------------------------------------
// Inbound helpers
// ---------------------------------------------------------------------------------------------

fn slack_signature(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let mut base = format!("v0:{timestamp}:").into_bytes();
    base.extend_from_slice(body);
    let signed = sign(secret.as_bytes(), &base);
    format!("v0={}", signed.trim_start_matches("sha256="))
}

fn signed_headers(body: &[u8], timestamp_secs: u64) -> HeaderMap {
    let timestamp = timestamp_secs.to_string();
    let mut headers = HeaderMap::new();
    headers.insert(
        "x-slack-request-timestamp",
        HeaderValue::from_str(&timestamp).expect("test fixture"),
    );
    headers.insert(
        "x-slack-signature",
        HeaderValue::from_str(&slack_signature(SECRET, &timestamp, body)).expect("test fixture"),
    );
    headers
}

fn channel() -> SlackChannel {
    SlackChannel::new(SECRET.as_bytes(), Some(BOT.to_owned()))
}

fn call(
    channel: &SlackChannel, sub_path: &str, headers: &HeaderMap, body: &[u8],
) -> Result<WebhookOutcome, WebhookError> {
    channel.handle(&WebhookRequest {
        sub_path,
        headers,
        body,
        now_ms: NOW_MS,
    })
}

fn deliver(body: &Value) -> Result<WebhookOutcome, WebhookError> {
    let body = serde_json::to_vec(body).expect("test fixture");
    call(&channel(), "", &signed_headers(&body, NOW_MS / 1000), &body)
}

fn envelope(event_id: &str, event: Value) -> Value {
    json!({
        "token": "unused",
        "team_id": "T0001",
        "api_app_id": "A0001",
        "type": "event_callback",
        "event_id": event_id,
        "event_time": NOW_MS / 1000,
        "authorizations": [{"user_id": BOT, "is_bot": true}],
        "event": event,
    })
}

fn message_event(channel: &str, channel_type: &str, text: &str, ts: &str) -> Value {
    json!({
        "type": "message",
        "channel": channel,
        "channel_type": channel_type,
        "user": "UALICE01",
        "text": text,
        "ts": ts,
    })
}

fn expect_message(
    outcome: Result<WebhookOutcome, WebhookError>,
) -> clawless_channels::ChannelMessage {
    match outcome {
        Ok(WebhookOutcome::Message(message)) => message,
        other => panic!("expected a message, got {other:?}"),
    }
}

fn expect_ignored(outcome: Result<WebhookOutcome, WebhookError>) -> String {
    match outcome {
        Ok(WebhookOutcome::Ignored(why)) => why,
        other => panic!("expected ignored, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Signatures
// ---------------------------------------------------------------------------------------------

#[test]
fn a_correctly_signed_direct_message_is_a_direct_message_addressed_to_the_bot() {
    let body = envelope(
        "Ev001",
        message_event("D0001", "im", "hello", "1700000000.000100"),
    );
    let message = expect_message(deliver(&body));
    assert_eq!(message.event_id, "Ev001");
    assert!(message.addressed_to_bot);
    assert_eq!(message.message.chat.channel, "slack");
    assert_eq!(message.message.chat.chat_id, "D0001");
    assert_eq!(message.message.chat.chat_type, ChatType::Direct);
    assert_eq!(message.message.sender_id, "UALICE01");
    assert_eq!(message.message.text, "hello");
    assert!(!message.message.sender_is_owner);
    assert_eq!(message.ack.status, 200);
}

#[test]
fn forged_tampered_or_unsigned_calls_are_refused() {
    let body = serde_json::to_vec(&envelope(
        "Ev002",
        message_event("D0001", "im", "hello", "1700000000.000100"),
    ))
    .unwrap();
    let now = NOW_MS / 1000;
    let good = signed_headers(&body, now);

    // Another secret.
    let mut forged = good.clone();
    forged.insert(
        "x-slack-signature",
        HeaderValue::from_str(&slack_signature("not-the-secret", &now.to_string(), &body)).unwrap(),
    );
    // The body changed after signing.
    let mut tampered_body = body.clone();
    tampered_body.extend_from_slice(b" ");
    // The timestamp changed after signing (the signature covers it).
    let mut shifted = good.clone();
    shifted.insert(
        "x-slack-request-timestamp",
        HeaderValue::from_str(&(now + 1).to_string()).unwrap(),
    );
    let mut no_signature = good.clone();
    no_signature.remove("x-slack-signature");
    let mut no_timestamp = good.clone();
    no_timestamp.remove("x-slack-request-timestamp");
    let mut wrong_scheme = good.clone();
    let v0 = good["x-slack-signature"].to_str().unwrap().to_owned();
    wrong_scheme.insert(
        "x-slack-signature",
        HeaderValue::from_str(&v0.replace("v0=", "v1=")).unwrap(),
    );
    let mut short = good.clone();
    short.insert(
        "x-slack-signature",
        HeaderValue::from_str(&v0[..20]).unwrap(),
    );
    let mut junk_timestamp = good.clone();
    junk_timestamp.insert("x-slack-request-timestamp", HeaderValue::from_static("-5"));

    let cases: [(&str, &HeaderMap, &[u8]); 8] = [
        ("forged", &forged, &body),
        ("tampered", &good, &tampered_body),
        ("shifted", &shifted, &body),
        ("no signature", &no_signature, &body),
        ("no timestamp", &no_timestamp, &body),
        ("wrong scheme", &wrong_scheme, &body),
        ("short", &short, &body),
        ("junk timestamp", &junk_timestamp, &body),
    ];
    for (name, headers, body) in cases {
        let outcome = call(&channel(), "", headers, body);
        assert!(
            matches!(outcome, Err(WebhookError::Unauthorized(_))),
            "{name}: {outcome:?}"
        );
    }
    // The same call, untouched, passes: the refusals above are about what was changed.
    assert!(matches!(
        call(&channel(), "", &good, &body),
        Ok(WebhookOutcome::Message(_))
    ));
}

#[test]
fn a_signature_older_or_further_ahead_than_five_minutes_is_a_replay() {
    let body = serde_json::to_vec(&envelope(
        "Ev003",
        message_event("D0001", "im", "hello", "1700000000.000100"),
    ))
    .unwrap();
    let window_secs = REPLAY_WINDOW_MS / 1000;
    let now = NOW_MS / 1000;
    for (name, timestamp, accepted) in [
        ("six minutes old", now - window_secs - 60, false),
        ("one second too old", now - window_secs - 1, false),
        ("six minutes ahead", now + window_secs + 60, false),
        ("four minutes old", now - window_secs + 60, true),
        ("exactly at the edge", now - window_secs, true),
        ("a minute ahead", now + 60, true),
    ] {
        let outcome = call(&channel(), "", &signed_headers(&body, timestamp), &body);
        if accepted {
            assert!(
                matches!(outcome, Ok(WebhookOutcome::Message(_))),
                "{name}: {outcome:?}"
            );
        } else {
            assert!(
                matches!(outcome, Err(WebhookError::Unauthorized(_))),
                "{name}: {outcome:?}"
            );
        }
    }
}

#[test]
fn malformed_bodies_are_bad_requests_with_a_reason_and_huge_ones_too_large() {
    for (body, reason) in [
        (&b"{not json"[..], "invalid body"),
        (b"[]", "invalid body"),
        (br#"{"type": 5}"#, "type"),
        (br#"{"type":"event_callback","event":{"type":"message"}}"#, "event_id"),
        (br#"{"type":"event_callback","event_id":"Ev1"}"#, "event"),
        (br#"{"type":"url_verification"}"#, "challenge"),
        (
            br#"{"type":"event_callback","event_id":"Ev1","event":{"type":"message","user":"U1","text":7,"ts":"1.2","channel":"C1"}}"#,
            "text",
        ),
        (
            br#"{"type":"event_callback","event_id":"Ev1","event":{"type":"message","user":"U1","text":"hi","ts":"1.2"}}"#,
            "channel",
        ),
    ] {
        let outcome = call(&channel(), "", &signed_headers(body, NOW_MS / 1000), body);
        match outcome {
            Err(WebhookError::BadRequest(why)) => {
                assert!(why.contains(reason), "{}: {why}", String::from_utf8_lossy(body));
            }
            other => panic!("{}: {other:?}", String::from_utf8_lossy(body)),
        }
    }
    let huge = vec![b' '; MAX_WEBHOOK_BODY_BYTES + 1];
    assert_eq!(
        call(&channel(), "", &signed_headers(&huge, NOW_MS / 1000), &huge),
        Err(WebhookError::TooLarge(MAX_WEBHOOK_BODY_BYTES + 1))
    );
}

#[test]
fn an_unsigned_url_verification_gets_no_challenge_back() {
    let body = br#"{"type":"url_verification","challenge":"abc"}"#;
    let outcome = call(&channel(), "", &HeaderMap::new(), body);
    assert!(matches!(outcome, Err(WebhookError::Unauthorized(_))));
}

#[test]
fn url_verification_is_answered_with_its_challenge() {
    let outcome = deliver(&json!({
        "token": "unused",
        "type": "url_verification",
        "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
    }));
    match outcome {
        Ok(WebhookOutcome::Respond(reply)) => {
            assert_eq!(reply.status, 200);
            assert_eq!(
                reply.body,
                json!({"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"})
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_unknown_sub_path_is_refused() {
    let body = br#"{"type":"url_verification","challenge":"abc"}"#;
    let outcome = call(
        &channel(),
        "admin",
        &signed_headers(body, NOW_MS / 1000),
        body,
    );
    assert!(
        matches!(outcome, Err(WebhookError::BadRequest(_))),
        "{outcome:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------------

#[test]
fn a_top_level_channel_message_starts_its_own_thread_and_is_not_addressed_to_the_bot() {
    let message = expect_message(deliver(&envelope(
        "Ev010",
        message_event("C0001", "channel", "lunch?", "1700000001.000200"),
    )));
    assert_eq!(
        message.message.chat.chat_id,
        "C0001:thread:1700000001.000200"
    );
    assert_eq!(message.message.chat.chat_type, ChatType::Group);
    assert!(!message.addressed_to_bot);
    assert_eq!(message.message.message_id, "C0001:1700000001.000200");
}

#[test]
fn a_reply_in_a_thread_belongs_to_the_thread_session() {
    let mut event = message_event("C0001", "channel", "me too", "1700000009.000900");
    event["thread_ts"] = json!("1700000001.000200");
    let message = expect_message(deliver(&envelope("Ev011", event.clone())));
    assert_eq!(
        message.message.chat.chat_id,
        "C0001:thread:1700000001.000200"
    );

    event["subtype"] = json!("thread_broadcast");
    let broadcast = expect_message(deliver(&envelope("Ev012", event)));
    assert_eq!(
        broadcast.message.chat.chat_id,
        "C0001:thread:1700000001.000200"
    );

    let mut private = message_event("G0001", "group", "hi", "1700000002.000300");
    private["thread_ts"] = json!("1700000001.000100");
    let private = expect_message(deliver(&envelope("Ev013", private)));
    assert_eq!(
        private.message.chat.chat_id,
        "G0001:thread:1700000001.000100"
    );
    assert_eq!(private.message.chat.chat_type, ChatType::Group);
}

#[test]
fn an_app_mention_is_addressed_to_the_bot_with_the_mention_taken_off() {
    let mut event = message_event(
        "C0001",
        "channel",
        &format!("<@{BOT}> /status"),
        "1700000003.000100",
    );
    event["type"] = json!("app_mention");
    event.as_object_mut().unwrap().remove("channel_type");
    let message = expect_message(deliver(&envelope("Ev020", event)));
    assert!(message.addressed_to_bot);
    assert_eq!(message.message.text, "/status");
    assert_eq!(
        message.message.chat.chat_id,
        "C0001:thread:1700000003.000100"
    );
    assert_eq!(message.message.chat.chat_type, ChatType::Group);
}

#[test]
fn a_mention_delivered_as_message_and_app_mention_starts_exactly_one_turn() {
    let text = format!("hey <@{BOT}> what's up");
    let as_message = message_event("C0001", "channel", &text, "1700000004.000100");
    let mut as_mention = as_message.clone();
    as_mention["type"] = json!("app_mention");
    as_mention.as_object_mut().unwrap().remove("channel_type");

    let outcomes = [
        deliver(&envelope("Ev030", as_message.clone())),
        deliver(&envelope("Ev031", as_mention)),
    ];
    let messages: Vec<_> = outcomes
        .iter()
        .filter(|outcome| matches!(outcome, Ok(WebhookOutcome::Message(_))))
        .collect();
    assert_eq!(messages.len(), 1, "{outcomes:?}");
    assert_eq!(
        outcomes[0],
        Ok(WebhookOutcome::Ignored("handled as app_mention".to_owned()))
    );
    let Ok(WebhookOutcome::Message(turn)) = &outcomes[1] else {
        panic!("{outcomes:?}");
    };
    assert!(turn.addressed_to_bot);

    // Without a configured bot id, the id in `authorizations` recognises the mention.
    let unconfigured = SlackChannel::new(SECRET.as_bytes(), None);
    let body = serde_json::to_vec(&envelope("Ev032", as_message)).unwrap();
    let outcome = call(
        &unconfigured,
        "",
        &signed_headers(&body, NOW_MS / 1000),
        &body,
    );
    assert_eq!(
        outcome,
        Ok(WebhookOutcome::Ignored("handled as app_mention".to_owned()))
    );
}

#[test]
fn a_retried_delivery_carries_the_same_event_id() {
    let body = serde_json::to_vec(&envelope(
        "Ev040",
        message_event("D0001", "im", "hello", "1700000000.000100"),
    ))
    .unwrap();
    let first = expect_message(call(
        &channel(),
        "",
        &signed_headers(&body, NOW_MS / 1000),
        &body,
    ));
    let mut retry_headers = signed_headers(&body, NOW_MS / 1000 + 60);
    retry_headers.insert("x-slack-retry-num", HeaderValue::from_static("1"));
    retry_headers.insert(
        "x-slack-retry-reason",
        HeaderValue::from_static("http_timeout"),
    );
    let retry = expect_message(call(&channel(), "", &retry_headers, &body));
    assert_eq!(first.event_id, retry.event_id);
    assert_eq!(first.message, retry.message);
}

#[test]
fn bot_messages_edits_deletions_and_other_subtypes_are_ignored() {
    let base = message_event("C0001", "channel", "beep", "1700000005.000100");
    let mut from_bot = base.clone();
    from_bot["bot_id"] = json!("B0001");
    let mut own = base.clone();
    own["user"] = json!(BOT);
    let mut cases = vec![("bot_id", from_bot), ("own user", own)];
    for subtype in [
        "bot_message",
        "message_changed",
        "message_deleted",
        "channel_join",
        "me_message",
    ] {
        let mut event = base.clone();
        event["subtype"] = json!(subtype);
        cases.push((subtype, event));
    }
    // Even in a DM, where everything is addressed to the bot.
    let mut dm_bot = message_event("D0001", "im", "beep", "1700000005.000100");
    dm_bot["bot_id"] = json!("B0001");
    cases.push(("dm bot", dm_bot));
    for (name, event) in cases {
        let why = expect_ignored(deliver(&envelope("Ev050", event)));
        assert!(!why.is_empty(), "{name}");
    }
}

#[test]
fn other_event_and_envelope_types_are_ignored() {
    for event in [
        json!({"type": "reaction_added", "user": "U1", "reaction": "thumbsup", "item": {"type": "message", "channel": "C1", "ts": "1.2"}}),
        // `user` is an object here: must not be a 400.
        json!({"type": "user_change", "user": {"id": "U1", "name": "alice"}}),
        json!({"type": "app_home_opened", "user": "U1", "channel": "D1"}),
        json!({"no_type": true}),
    ] {
        let why = expect_ignored(deliver(&envelope("Ev060", event.clone())));
        assert!(why.contains("not handled"), "{event}: {why}");
    }
    let why = expect_ignored(deliver(
        &json!({"type": "app_rate_limited", "team_id": "T1"}),
    ));
    assert!(why.contains("app_rate_limited"));
}

// ---------------------------------------------------------------------------------------------
// Interactive
// ---------------------------------------------------------------------------------------------

fn form(payload: &Value) -> Vec<u8> {
    url::form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &payload.to_string())
        .finish()
        .into_bytes()
}

fn press(value: &str, channel_id: &str, thread_ts: Option<&str>) -> Value {
    let mut message = json!({"type": "message", "ts": "1700000100.000100", "text": "approve?"});
    if let Some(thread) = thread_ts {
        message["thread_ts"] = json!(thread);
    }
    json!({
        "type": "block_actions",
        "user": {"id": "UALICE01", "username": "alice"},
        "team": {"id": "T0001"},
        "container": {"type": "message", "message_ts": "1700000100.000100", "channel_id": channel_id, "is_ephemeral": false},
        "channel": {"id": channel_id, "name": "general"},
        "message": message,
        "trigger_id": "123.456.abc",
        "actions": [{
            "type": "button",
            "action_id": "clawless_approve_allow_once",
            "block_id": "clawless_approval_ab12cd34",
            "value": value,
            "action_ts": "1700000123.456789",
        }],
    })
}

fn interact(payload: &Value) -> Result<WebhookOutcome, WebhookError> {
    let body = form(payload);
    call(
        &channel(),
        "interactive",
        &signed_headers(&body, NOW_MS / 1000),
        &body,
    )
}

#[test]
fn an_approval_button_press_in_a_thread_is_an_approval_for_that_thread() {
    let payload = press(
        "approve:allow-always:ab12cd34",
        "C0001",
        Some("1700000001.000200"),
    );
    let Ok(WebhookOutcome::Approval(approval)) = interact(&payload) else {
        panic!("{:?}", interact(&payload));
    };
    assert_eq!(approval.code, "ab12cd34");
    assert_eq!(approval.decision, ApprovalDecision::AllowAlways);
    assert_eq!(approval.message.text, "/approve ab12cd34 allow-always");
    assert_eq!(approval.message.sender_id, "UALICE01");
    assert_eq!(
        approval.message.chat.chat_id,
        "C0001:thread:1700000001.000200"
    );
    assert_eq!(approval.message.chat.chat_type, ChatType::Group);
    assert_eq!(
        approval.event_id,
        "1700000100.000100:UALICE01:1700000123.456789"
    );
    assert_eq!(approval.ack.status, 200);
    assert_eq!(approval.ack.body, Value::Null);
    // A redelivery of the same press is the same event.
    let Ok(WebhookOutcome::Approval(again)) = interact(&payload) else {
        panic!("retry");
    };
    assert_eq!(again.event_id, approval.event_id);

    let dm = press("approve:deny:ab12cd34", "D0001", None);
    let Ok(WebhookOutcome::Approval(dm)) = interact(&dm) else {
        panic!("dm");
    };
    assert_eq!(dm.message.chat.chat_id, "D0001");
    assert_eq!(dm.message.chat.chat_type, ChatType::Direct);
    assert_eq!(dm.decision, ApprovalDecision::Deny);
}

#[test]
fn interactive_calls_that_are_not_approvals_are_ignored_or_refused() {
    let other_button = press("open-settings", "C0001", None);
    expect_ignored(interact(&other_button));
    let forged_value = press("approve:allow-always:../../etc", "C0001", None);
    expect_ignored(interact(&forged_value));
    expect_ignored(interact(
        &json!({"type": "view_submission", "user": {"id": "U1"}}),
    ));

    let body = b"not_payload=1";
    let outcome = call(
        &channel(),
        "interactive",
        &signed_headers(body, NOW_MS / 1000),
        body,
    );
    assert!(matches!(outcome, Err(WebhookError::BadRequest(why)) if why.contains("payload")));
    let body = b"payload=%7Bnope";
    let outcome = call(
        &channel(),
        "interactive",
        &signed_headers(body, NOW_MS / 1000),
        body,
    );
    assert!(
        matches!(outcome, Err(WebhookError::BadRequest(_))),
        "{outcome:?}"
    );

    let mut no_user = press("approve:deny:ab12cd34", "C0001", None);
    no_user.as_object_mut().unwrap().remove("user");
    assert!(matches!(
        interact(&no_user),
        Err(WebhookError::BadRequest(_))
    ));

    // Unsigned presses are refused before the payload is read.
    let body = form(&press("approve:deny:ab12cd34", "C0001", None));
    let outcome = call(&channel(), "interactive", &HeaderMap::new(), &body);
    assert!(matches!(outcome, Err(WebhookError::Unauthorized(_))));
}

// ---------------------------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------------------------

#[test]
fn config_takes_each_secret_literally_or_from_the_environment_but_not_both() {
    let config: SlackConfig = serde_json::from_value(json!({
        "botTokenEnv": "SLACK_BOT_TOKEN",
        "signingSecret": "shh",
        "owners": ["UALICE01"],
        "allowFrom": ["UBOB0001"],
        "botUserId": BOT,
    }))
    .unwrap();
    let env = |name: &str| (name == "SLACK_BOT_TOKEN").then(|| "xoxb-from-env".to_owned());
    let resolved = config.resolve(&env).unwrap();
    assert_eq!(resolved.bot_token, "xoxb-from-env");
    assert_eq!(resolved.signing_secret, "shh");
    assert_eq!(resolved.api_base_url, "https://slack.com/api");
    assert_eq!(resolved.owners, ["UALICE01"]);
    assert_eq!(resolved.allow_from, ["UBOB0001"]);
    assert_eq!(resolved.bot_user_id.as_deref(), Some(BOT));
    assert!(!format!("{resolved:?}").contains("xoxb-from-env"));
    assert!(!format!("{resolved:?}").contains("shh"));

    assert_eq!(
        config.resolve(&|_| None),
        Err(ConfigError::Secret(SecretError::EnvUnset {
            field: "botToken",
            var: "SLACK_BOT_TOKEN".to_owned()
        }))
    );
    let both = SlackConfig {
        bot_token: Some("xoxb".to_owned()),
        ..config.clone()
    };
    assert_eq!(
        both.resolve(&env),
        Err(ConfigError::Secret(SecretError::Both { field: "botToken" }))
    );
    let neither = SlackConfig {
        signing_secret: None,
        ..config.clone()
    };
    assert_eq!(
        neither.resolve(&env),
        Err(ConfigError::Secret(SecretError::Missing {
            field: "signingSecret"
        }))
    );
    let bad_url = SlackConfig {
        api_base_url: Some("ftp://example".to_owned()),
        ..config.clone()
    };
    assert!(matches!(
        bad_url.resolve(&env),
        Err(ConfigError::Invalid(_))
    ));
    let unknown = serde_json::from_value::<SlackConfig>(json!({"botToken": "x", "token": "y"}));
    assert!(unknown.is_err());
}

// ---------------------------------------------------------------------------------------------
// Outbound, against a fake Slack Web API
// ---------------------------------------------------------------------------------------------

/// One scripted answer of the fake: status, body, optional Retry-After.
#[derive(Clone)]
struct Answer {
    status: StatusCode,
    body: Value,
    retry_after: Option<&'static str>,
}

impl Answer {
    fn ok() -> Self {
        Self {
            status: StatusCode::OK,
            body: json!({"ok": true, "ts": "1700000200.000100"}),
            retry_after: None,
        }
    }

    fn slack_error(error: &str) -> Self {
        Self {
            status: StatusCode::OK,
            body: json!({"ok": false, "error": error}),
            retry_after: None,
        }
    }

    fn http(status: StatusCode) -> Self {
        Self {
            status,
            body: json!({"ok": false}),
            retry_after: None,
        }
    }
}

struct FakeSlack {
    base_url: String,
    /// Every call: (Authorization header, JSON body).
    calls: Arc<Mutex<Vec<(String, Value)>>>,
    /// Answers to give, in order; `ok` once empty.
    script: Arc<Mutex<VecDeque<Answer>>>,
}

impl FakeSlack {
    async fn start() -> Self {
        let calls: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
        let script: Arc<Mutex<VecDeque<Answer>>> = Arc::default();
        let (sink, answers) = (Arc::clone(&calls), Arc::clone(&script));
        let app = Router::new().route(
            "/api/chat.postMessage",
            post(move |headers: HeaderMap, body: axum::body::Bytes| {
                let (sink, answers) = (Arc::clone(&sink), Arc::clone(&answers));
                async move {
                    let auth = headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    sink.lock().expect("test fixture").push((auth, json));
                    let answer = answers
                        .lock()
                        .expect("test fixture")
                        .pop_front()
                        .unwrap_or_else(Answer::ok);
                    let mut response = (answer.status, axum::Json(answer.body)).into_response();
                    if let Some(retry_after) = answer.retry_after {
                        response
                            .headers_mut()
                            .insert("retry-after", HeaderValue::from_static(retry_after));
                    }
                    response
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("test fixture");
        let base_url = format!(
            "http://{}/api",
            listener.local_addr().expect("test fixture")
        );
        tokio::spawn(async move { axum::serve(listener, app).await.expect("test fixture") });
        Self {
            base_url,
            calls,
            script,
        }
    }

    fn sender(&self, inbox: &InMemoryInbox) -> SlackSender {
        SlackSender::new(
            reqwest::Client::new(),
            &self.base_url,
            "xoxb-test-token",
            Arc::new(inbox.clone()),
        )
    }

    fn answer_next(&self, answers: impl IntoIterator<Item = Answer>) {
        self.script.lock().expect("test fixture").extend(answers);
    }

    fn calls(&self) -> Vec<(String, Value)> {
        self.calls.lock().expect("test fixture").clone()
    }
}

fn reply(reply_id: &str, chat_id: &str, text: &str) -> OutboundReply {
    OutboundReply {
        reply_id: reply_id.to_owned(),
        chat: ChatRef {
            channel: "slack".to_owned(),
            chat_id: chat_id.to_owned(),
            chat_type: ChatType::Group,
        },
        text: text.to_owned(),
        approval_code: None,
        in_reply_to: None,
        media: Vec::new(),
    }
}

/// ~10,000 characters in paragraphs, each paragraph numbered so order can be checked.
fn long_text() -> String {
    let text = (0..34)
        .map(|n| format!("P{n:02} {}", "word ".repeat(59).trim_end()))
        .collect::<Vec<_>>()
        .join("\n\n");
    assert!(text.chars().count() >= 10_000);
    text
}

#[tokio::test]
async fn a_ten_thousand_character_reply_goes_into_the_thread_as_three_ordered_messages() {
    let slack = FakeSlack::start().await;
    let text = long_text();
    slack
        .sender(&InMemoryInbox::new())
        .send(&reply("r1", "C0001:thread:1700000001.000200", &text))
        .await
        .unwrap();
    let calls = slack.calls();
    assert_eq!(calls.len(), 3);
    let mut sent = Vec::new();
    for (auth, body) in &calls {
        assert_eq!(auth, "Bearer xoxb-test-token");
        assert_eq!(body["channel"], "C0001");
        assert_eq!(body["thread_ts"], "1700000001.000200");
        assert!(body.get("blocks").is_none());
        let chunk = body["text"].as_str().unwrap();
        assert!(chunk.chars().count() <= 4_000);
        sent.push(chunk.to_owned());
    }
    assert!(sent[0].starts_with("P00"));
    assert!(sent[2].contains("P33"));
    assert_eq!(sent.join("\n\n"), text, "in order, nothing lost");
}

#[tokio::test]
async fn a_direct_reply_has_no_thread_and_directives_and_silent_replies_are_not_sent() {
    let slack = FakeSlack::start().await;
    let sender = slack.sender(&InMemoryInbox::new());
    sender
        .send(&reply("r2", "D0001", "[[reply_to_current]] done"))
        .await
        .unwrap();
    sender
        .send(&reply("r3", "D0001", "NO_REPLY"))
        .await
        .unwrap();
    let calls = slack.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].1, json!({"channel": "D0001", "text": "done"}));
}

#[tokio::test]
async fn an_approval_reply_carries_three_buttons_whose_press_is_the_approval() {
    let slack = FakeSlack::start().await;
    let mut approval = reply(
        "r4",
        "C0001:thread:1700000001.000200",
        "Run `rm -rf build`? Approve with /approve ab12cd34 allow-once",
    );
    approval.approval_code = Some("ab12cd34".to_owned());
    slack
        .sender(&InMemoryInbox::new())
        .send(&approval)
        .await
        .unwrap();
    let calls = slack.calls();
    assert_eq!(calls.len(), 1);
    let body = &calls[0].1;
    assert_eq!(body["thread_ts"], "1700000001.000200");
    let blocks = body["blocks"].as_array().unwrap();
    assert_eq!(blocks[0]["text"]["text"], approval.text);
    let actions = blocks.iter().find(|b| b["type"] == "actions").unwrap();
    let buttons = actions["elements"].as_array().unwrap();
    assert_eq!(buttons.len(), 3);
    let mut action_ids: Vec<_> = buttons.iter().map(|b| b["action_id"].clone()).collect();
    action_ids.dedup();
    assert_eq!(action_ids.len(), 3, "distinct action ids");
    let decisions: Vec<_> = buttons
        .iter()
        .map(|b| parse_approval_button(b["value"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(
        decisions,
        [
            ("ab12cd34".to_owned(), ApprovalDecision::AllowOnce),
            ("ab12cd34".to_owned(), ApprovalDecision::AllowAlways),
            ("ab12cd34".to_owned(), ApprovalDecision::Deny),
        ]
    );

    // Slack posts the pressed button back to the interactive endpoint.
    let pressed = press(
        buttons[2]["value"].as_str().unwrap(),
        "C0001",
        Some("1700000001.000200"),
    );
    let Ok(WebhookOutcome::Approval(press)) = interact(&pressed) else {
        panic!("press");
    };
    assert_eq!(press.decision, ApprovalDecision::Deny);
    assert_eq!(press.code, "ab12cd34");
    assert_eq!(press.message.chat.chat_id, approval.chat.chat_id);
}

#[tokio::test]
async fn a_resend_after_the_second_chunk_failed_sends_only_the_missing_chunks() {
    let slack = FakeSlack::start().await;
    let inbox = InMemoryInbox::new();
    let text = long_text();
    let message = reply("r5", "C0001:thread:1700000001.000200", &text);
    slack.answer_next([Answer::ok(), Answer::http(StatusCode::BAD_GATEWAY)]);
    let err = slack.sender(&inbox).send(&message).await.unwrap_err();
    assert!(matches!(err, OutboxError::Failed { .. }), "{err:?}");
    assert_eq!(slack.calls().len(), 2, "stopped at the failed chunk");

    // The redelivery (a fresh sender, same inbox) sends chunks 2 and 3 only.
    slack.sender(&inbox).send(&message).await.unwrap();
    let texts: Vec<String> = slack
        .calls()
        .iter()
        .map(|(_, body)| body["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(texts.len(), 4);
    assert_eq!(texts[1], texts[2], "the failed chunk is sent again");
    assert_eq!(
        [texts[0].clone(), texts[2].clone(), texts[3].clone()].join("\n\n"),
        text
    );
    // A third send finds every chunk sent.
    slack.sender(&inbox).send(&message).await.unwrap();
    assert_eq!(slack.calls().len(), 4);
}

#[tokio::test]
async fn slack_errors_are_permanent_or_worth_a_retry() {
    let slack = FakeSlack::start().await;
    for error in [
        "channel_not_found",
        "not_in_channel",
        "is_archived",
        "invalid_auth",
        "account_inactive",
        "msg_too_long",
    ] {
        slack.answer_next([Answer::slack_error(error)]);
        let err = slack
            .sender(&InMemoryInbox::new())
            .send(&reply("r6", "C0001:thread:1.2", "hi"))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, OutboxError::Rejected { message } if message.contains(error)),
            "{error}: {err:?}"
        );
    }
    let rate_limited = Answer {
        status: StatusCode::TOO_MANY_REQUESTS,
        body: json!({"ok": false, "error": "ratelimited"}),
        retry_after: Some("30"),
    };
    for (name, answer) in [
        ("ratelimited", Answer::slack_error("ratelimited")),
        ("internal_error", Answer::slack_error("internal_error")),
        ("429", rate_limited),
        ("500", Answer::http(StatusCode::INTERNAL_SERVER_ERROR)),
        ("503", Answer::http(StatusCode::SERVICE_UNAVAILABLE)),
    ] {
        slack.answer_next([answer]);
        let err = slack
            .sender(&InMemoryInbox::new())
            .send(&reply("r7", "C0001:thread:1.2", "hi"))
            .await
            .unwrap_err();
        assert!(matches!(err, OutboxError::Failed { .. }), "{name}: {err:?}");
        if name == "429" {
            assert!(err.to_string().contains("30"), "{err}");
        }
    }

    // Nobody listening: a failure worth retrying.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = format!("http://{}/api", listener.local_addr().unwrap());
    drop(listener);
    let sender = SlackSender::new(
        reqwest::Client::new(),
        &closed,
        "xoxb",
        Arc::new(InMemoryInbox::new()),
    );
    let err = sender
        .send(&reply("r8", "C0001:thread:1.2", "hi"))
        .await
        .unwrap_err();
    assert!(matches!(err, OutboxError::Failed { .. }), "{err:?}");

    // A chat id that is not Slack's: refused without a call.
    let before = slack.calls().len();
    let err = slack
        .sender(&InMemoryInbox::new())
        .send(&reply("r9", "C0001:thread:1 2", "hi"))
        .await
        .unwrap_err();
    assert!(matches!(err, OutboxError::Rejected { .. }));
    assert_eq!(slack.calls().len(), before);
}

// ---------------------------------------------------------------------------------------------
// Junk
// ---------------------------------------------------------------------------------------------

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        ".{0,12}".prop_map(Value::String),
        prop::sample::select(vec![
            "message",
            "app_mention",
            "event_callback",
            "url_verification",
            "block_actions",
            "im",
            "channel",
            "thread_broadcast",
            "D1",
            "C1",
            "U1",
            "1.2",
            "approve:deny:ab",
        ])
        .prop_map(|s| Value::String(s.to_owned())),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let keys = prop::sample::select(vec![
        "type",
        "event",
        "event_id",
        "challenge",
        "authorizations",
        "user",
        "user_id",
        "text",
        "ts",
        "thread_ts",
        "channel",
        "channel_type",
        "subtype",
        "bot_id",
        "actions",
        "value",
        "action_ts",
        "container",
        "message_ts",
        "channel_id",
        "message",
        "id",
    ]);
    json_leaf().prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(keys.clone(), inner, 0..6).prop_map(|map| {
                Value::Object(map.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}

/// How a junk value was sent.
#[derive(Debug, Clone, Copy)]
enum JunkBody {
    /// The value as JSON (what the Events API posts).
    Json,
    /// Random bytes.
    Raw,
    /// The value as the `payload` form field (what the interactive endpoint receives).
    Form,
}

/// `value`'s field `name` read as serde reads a struct: by name from an object, or by
/// `position` from an array (serde takes `["url_verification", "c"]` for an envelope too).
fn field<'v>(value: &'v Value, name: &str, position: usize) -> &'v Value {
    match value {
        Value::Array(items) => items.get(position).unwrap_or(&Value::Null),
        _ => &value[name],
    }
}

/// Whether `outcome` is one signed junk `value`, sent as `body` to `sub_path`, may come to:
/// a 400 or an ignore anywhere it can be read; an answer only to a `url_verification` with
/// its challenge; a message only from a `message`/`app_mention` event, with text; an approval
/// only from a `block_actions` payload whose button carries it. Unknown routes and random
/// bytes are always a 400, and nothing signed is refused as unsigned.
fn junk_outcome_is_sound(
    value: &Value, body: JunkBody, sub_path: &str, outcome: &Result<WebhookOutcome, WebhookError>,
) -> bool {
    match (sub_path, body, outcome) {
        (_, _, Err(WebhookError::BadRequest(_))) => true,
        ("", JunkBody::Json, Ok(WebhookOutcome::Ignored(_)))
        | ("interactive", JunkBody::Form, Ok(WebhookOutcome::Ignored(_))) => true,
        // The envelope's fields, in order: type, challenge, event_id, event.
        ("", JunkBody::Json, Ok(WebhookOutcome::Respond(reply))) => {
            *field(value, "type", 0) == "url_verification"
                && reply.body == json!({ "challenge": field(value, "challenge", 1) })
        }
        ("", JunkBody::Json, Ok(WebhookOutcome::Message(message))) => {
            *field(value, "type", 0) == "event_callback"
                && matches!(
                    field(value, "event", 3)["type"].as_str(),
                    Some("message" | "app_mention")
                )
                && message.event_id == *field(value, "event_id", 2)
                && message.message.chat.channel == "slack"
                && !message.message.text.is_empty()
        }
        // The interaction's fields, in order: type, user, channel, container, message,
        // actions; an action's: value, action_ts.
        ("interactive", JunkBody::Form, Ok(WebhookOutcome::Approval(approval))) => {
            let pressed = (approval.code.clone(), approval.decision);
            *field(value, "type", 0) == "block_actions"
                && field(value, "actions", 5)
                    .as_array()
                    .is_some_and(|actions| {
                        actions.iter().any(|action| {
                            field(action, "value", 0)
                                .as_str()
                                .and_then(parse_approval_button)
                                == Some(pressed.clone())
                        })
                    })
        }
        _ => false,
    }
}

proptest! {
    #[test]
    fn signed_junk_is_refused_or_ignored_never_mistaken(
        value in json_value(),
        raw in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let bodies = [
            (JunkBody::Json, serde_json::to_vec(&value).unwrap()),
            (JunkBody::Raw, raw.clone()),
            (JunkBody::Form, form(&value)),
        ];
        for (kind, body) in bodies {
            for sub_path in ["", "interactive", "x"] {
                let headers = signed_headers(&body, NOW_MS / 1000);
                for channel in [channel(), SlackChannel::new(SECRET.as_bytes(), None)] {
                    let outcome = call(&channel, sub_path, &headers, &body);
                    prop_assert!(
                        junk_outcome_is_sound(&value, kind, sub_path, &outcome),
                        "{:?} to {:?}: {} -> {:?}", kind, sub_path, value, outcome
                    );
                }
            }
        }
    }
}

/// Junk timestamps and signatures never pass. The values lean on ASCII (a header cannot carry
/// anything else), and the test counts how many cases really sent both headers: with any
/// Unicode, almost none would, and only the "missing header" path would be tested.
#[test]
fn junk_headers_never_pass() {
    let timestamp = prop_oneof!["[0-9]{0,14}", "[ -~]{0,20}", ".{0,20}"];
    let signature = prop_oneof![
        "v0=[0-9a-f]{64}",
        "v0=[ -~]{0,80}",
        "[ -~]{0,80}",
        ".{0,80}"
    ];
    let now_ms = prop_oneof![Just(NOW_MS), any::<u64>()];
    let mut runner = proptest::test_runner::TestRunner::default();
    let cases = runner.config().cases;
    let both_sent = std::cell::Cell::new(0u32);
    let body = br#"{"type":"url_verification","challenge":"c"}"#;
    runner
        .run(
            &(timestamp, signature, now_ms),
            |(timestamp, signature, now_ms)| {
                let mut headers = HeaderMap::new();
                if let Ok(value) = HeaderValue::from_str(&timestamp) {
                    headers.insert("x-slack-request-timestamp", value);
                }
                if let Ok(value) = HeaderValue::from_str(&signature) {
                    headers.insert("x-slack-signature", value);
                }
                if headers.len() == 2 {
                    both_sent.set(both_sent.get() + 1);
                }
                let outcome = channel().handle(&WebhookRequest {
                    sub_path: "",
                    headers: &headers,
                    body,
                    now_ms,
                });
                prop_assert!(
                    matches!(outcome, Err(WebhookError::Unauthorized(_))),
                    "{:?}",
                    outcome
                );
                Ok(())
            },
        )
        .unwrap();
    assert!(
        both_sent.get() >= cases / 4,
        "only {} of {cases} cases sent both headers",
        both_sent.get()
    );
}

#[tokio::test]
async fn a_long_approval_reply_puts_the_buttons_on_its_last_message_only() {
    let slack = FakeSlack::start().await;
    let mut approval = reply("r10", "D0001", &long_text()[..5_000]);
    approval.approval_code = Some("ab12cd34".to_owned());
    slack
        .sender(&InMemoryInbox::new())
        .send(&approval)
        .await
        .expect("sent");
    let calls = slack.calls();
    assert_eq!(calls.len(), 2);
    assert!(calls[0].1.get("blocks").is_none());
    let blocks = calls[1].1["blocks"].as_array().expect("blocks");
    // Slack caps a section's text at 3,000 characters.
    for (_, body) in &calls {
        assert!(body["text"].as_str().expect("text").chars().count() <= 3_000);
    }
    assert_eq!(blocks[0]["text"]["text"], calls[1].1["text"]);

    // A code that a button could not carry back gets no buttons.
    approval.reply_id = "r11".to_owned();
    approval.text = "approve?".to_owned();
    approval.approval_code = Some("a b".to_owned());
    slack
        .sender(&InMemoryInbox::new())
        .send(&approval)
        .await
        .expect("sent");
    assert!(slack.calls()[2].1.get("blocks").is_none());
}
