//! Discord interactions end to end: requests signed with a key made in the test, classified by
//! the channel, and replies sent to a fake Discord API on loopback that records every call.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use clawless_base::session_key::ChatType;
use clawless_channels::SecretError;
use clawless_channels::discord::{
    ConfigError, DiscordChannel, DiscordConfig, DiscordPublicKey, DiscordSender, MESSAGE_LIMIT,
    ResolvedDiscord, command_definitions, register_commands, skill_command_text,
};
use clawless_channels::webhook::{
    MAX_WEBHOOK_BODY_BYTES, PlatformChannel, WebhookError, WebhookOutcome, WebhookRequest,
    parse_approval_button,
};
use clawless_core::outbox::{Outbox, OutboxError};
use clawless_core::testing::InMemoryInbox;
use clawless_core::turn::OutboundReply;
use clawless_core::turn::events::{ApprovalDecision, ChatRef};
use clawless_skills::commands::SkillCommandSpec;
use ed25519_dalek::{Signer, SigningKey};
use proptest::prelude::*;
use serde_json::{Value, json};

const APP_ID: &str = "1100000000000000001";
const TOKEN: &str = "aW50ZXJhY3Rpb24.dG9rZW4-_x";
/// The request time in the inbound tests (Unix seconds).
const NOW_SECS: u64 = 1_700_000_000;
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;
const EMPTY_OBJECT: &[u8] = b"{}";

fn signing_key() -> SigningKey {
    SigningKey::from_bytes(&[7; 32])
}

fn public_key_hex() -> String {
    hex::encode(signing_key().verifying_key().as_bytes())
}

fn skill(name: &str, description: &str) -> SkillCommandSpec {
    SkillCommandSpec {
        name: name.to_owned(),
        skill_name: name.replace('_', "-"),
        description: description.to_owned(),
        dispatch: None,
    }
}

fn channel() -> DiscordChannel {
    let key = DiscordPublicKey::parse(&public_key_hex()).expect("test fixture");
    DiscordChannel::new(key)
}

fn signed_headers(key: &SigningKey, timestamp: &str, body: &[u8]) -> HeaderMap {
    let mut message = timestamp.as_bytes().to_vec();
    message.extend_from_slice(body);
    let signature = key.sign(&message);
    let mut headers = HeaderMap::new();
    headers.insert(
        "X-Signature-Ed25519",
        hex::encode(signature.to_bytes())
            .parse()
            .expect("test fixture"),
    );
    headers.insert(
        "X-Signature-Timestamp",
        timestamp.parse().expect("test fixture"),
    );
    headers
}

fn handle_with(headers: &HeaderMap, body: &[u8]) -> Result<WebhookOutcome, WebhookError> {
    channel().handle(&WebhookRequest {
        sub_path: "",
        headers,
        body,
        now_ms: NOW_SECS * 1_000,
    })
}

fn handle_signed(body: &[u8]) -> Result<WebhookOutcome, WebhookError> {
    handle_with(
        &signed_headers(&signing_key(), &NOW_SECS.to_string(), body),
        body,
    )
}

/// A snowflake made at `ms` (Unix milliseconds).
fn snowflake_at(ms: u64) -> String {
    ((ms - DISCORD_EPOCH_MS) << 22).to_string()
}

fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("test fixture")
            .as_millis(),
    )
    .expect("test fixture")
}

fn guild_command(name: &str, options: Value) -> Value {
    json!({
        "id": snowflake_at(NOW_SECS * 1_000),
        "application_id": APP_ID,
        "type": 2,
        "token": TOKEN,
        "guild_id": "2200000000000000002",
        "channel_id": "3300000000000000003",
        "member": { "user": { "id": "4400000000000000004", "username": "ada" } },
        "data": { "id": "5500000000000000005", "name": name, "type": 1, "options": options },
    })
}

fn dm_command(name: &str, options: Value) -> Value {
    json!({
        "id": snowflake_at(NOW_SECS * 1_000),
        "type": 2,
        "token": TOKEN,
        "channel": { "id": "6600000000000000006", "type": 1 },
        "channel_id": "6600000000000000006",
        "user": { "id": "7700000000000000007", "username": "bob" },
        "data": { "name": name, "type": 1, "options": options },
    })
}

fn bytes(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).expect("test fixture")
}

// ---------------------------------------------------------------------------------------------
// Inbound
// ---------------------------------------------------------------------------------------------

#[test]
fn a_signed_ping_is_answered_with_pong() {
    let outcome = handle_signed(br#"{"id":"1","type":1,"application_id":"1"}"#);
    let Ok(WebhookOutcome::Respond(reply)) = outcome else {
        panic!("expected Respond, got {outcome:?}");
    };
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, json!({ "type": 1 }));
}

#[test]
fn unsigned_missigned_or_tampered_calls_are_refused() {
    let body = br#"{"id":"1","type":1}"#;
    let timestamp = NOW_SECS.to_string();
    let good = signed_headers(&signing_key(), &timestamp, body);

    let mut no_signature = good.clone();
    no_signature.remove("x-signature-ed25519");
    let mut no_timestamp = good.clone();
    no_timestamp.remove("x-signature-timestamp");
    let mut bad_hex = good.clone();
    bad_hex.insert("x-signature-ed25519", "zz".repeat(64).parse().expect("hex"));
    let mut short = good.clone();
    short.insert("x-signature-ed25519", "ab".repeat(32).parse().expect("hex"));
    let other_key = signed_headers(&SigningKey::from_bytes(&[9; 32]), &timestamp, body);
    // The signature covers the timestamp: moving it breaks the signature.
    let mut moved_timestamp = good.clone();
    moved_timestamp.insert(
        "x-signature-timestamp",
        (NOW_SECS + 1).to_string().parse().expect("ts"),
    );

    for (name, headers, body) in [
        ("no signature", &no_signature, &body[..]),
        ("no timestamp", &no_timestamp, &body[..]),
        ("bad hex", &bad_hex, &body[..]),
        ("short signature", &short, &body[..]),
        ("another key", &other_key, &body[..]),
        ("moved timestamp", &moved_timestamp, &body[..]),
        ("tampered body", &good, &br#"{"id":"2","type":1}"#[..]),
        ("empty headers", &HeaderMap::new(), &body[..]),
    ] {
        let outcome = handle_with(headers, body);
        assert!(
            matches!(outcome, Err(WebhookError::Unauthorized(_))),
            "{name}: {outcome:?}"
        );
    }
    assert!(
        handle_with(&good, body).is_ok(),
        "the untouched call passes"
    );
}

#[test]
fn a_correctly_signed_but_old_call_is_refused_as_a_replay() {
    let body = br#"{"id":"1","type":1}"#;
    let old = (NOW_SECS - 3_600).to_string();
    let outcome = handle_with(&signed_headers(&signing_key(), &old, body), body);
    assert!(
        matches!(&outcome, Err(WebhookError::Unauthorized(reason)) if reason.contains("replay")),
        "{outcome:?}"
    );
}

#[test]
fn a_signed_malformed_body_is_a_bad_request_with_a_reason() {
    for (body, expected) in [
        (&b"{not json"[..], "malformed interaction"),
        (&br#"{"id":"1"}"#[..], "type"),
        (&br#"{"id":"1","type":"ping"}"#[..], "type"),
    ] {
        let outcome = handle_signed(body);
        assert!(
            matches!(&outcome, Err(WebhookError::BadRequest(reason)) if reason.contains(expected)),
            "{}: {outcome:?}",
            String::from_utf8_lossy(body)
        );
    }
    // A command without a user cannot be attributed to anyone.
    let mut command = guild_command("ask", json!([{ "name": "text", "type": 3, "value": "hi" }]));
    command["member"] = Value::Null;
    let outcome = handle_signed(&bytes(&command));
    assert!(
        matches!(&outcome, Err(WebhookError::BadRequest(reason)) if reason.contains("user")),
        "{outcome:?}"
    );
}

#[test]
fn a_body_over_the_limit_is_too_large_even_when_signed() {
    let body = vec![b' '; MAX_WEBHOOK_BODY_BYTES + 1];
    assert_eq!(
        handle_signed(&body),
        Err(WebhookError::TooLarge(MAX_WEBHOOK_BODY_BYTES + 1))
    );
}

#[test]
fn ask_in_a_guild_is_a_group_message_answered_with_a_deferred_response() {
    let command = guild_command(
        "ask",
        json!([{ "name": "text", "type": 3, "value": "  What is 2+2?  " }]),
    );
    let outcome = handle_signed(&bytes(&command));
    let Ok(WebhookOutcome::Message(message)) = outcome else {
        panic!("expected Message, got {outcome:?}");
    };
    let id = command["id"].as_str().expect("id");
    assert_eq!(message.event_id, id);
    assert_eq!(message.message.message_id, format!("{id}:{TOKEN}"));
    assert_eq!(message.message.text, "What is 2+2?");
    assert_eq!(message.message.sender_id, "4400000000000000004");
    assert!(!message.message.sender_is_owner);
    assert_eq!(
        message.message.chat,
        ChatRef {
            channel: "discord".to_owned(),
            chat_id: "3300000000000000003".to_owned(),
            chat_type: ChatType::Group,
        }
    );
    assert!(message.addressed_to_bot);
    assert_eq!(message.ack.body, json!({ "type": 5 }));
}

#[test]
fn a_skill_command_in_a_dm_becomes_its_slash_text() {
    let command = dm_command(
        "weather",
        json!([{ "name": "args", "type": 3, "value": "Berlin tomorrow" }]),
    );
    let Ok(WebhookOutcome::Message(message)) = handle_signed(&bytes(&command)) else {
        panic!("expected Message");
    };
    assert_eq!(message.message.text, "/weather Berlin tomorrow");
    assert_eq!(message.message.sender_id, "7700000000000000007");
    assert_eq!(message.message.chat.chat_type, ChatType::Direct);
    assert_eq!(message.message.chat.chat_id, "6600000000000000006");
    assert_eq!(message.ack.body, json!({ "type": 5 }));

    let bare = dm_command("weather", json!([]));
    let Ok(WebhookOutcome::Message(message)) = handle_signed(&bytes(&bare)) else {
        panic!("expected Message");
    };
    assert_eq!(message.message.text, "/weather");
}

#[test]
fn a_skill_renamed_on_discord_still_reaches_its_skill() {
    let definitions = command_definitions(&[skill("ask", "clashes")]);
    let renamed = definitions[1]["name"].as_str().expect("name");
    assert_ne!(renamed, "ask", "the generic /ask keeps its name");
    let command = dm_command(
        renamed,
        json!([{ "name": "args", "type": 3, "value": "x" }]),
    );
    let Ok(WebhookOutcome::Message(message)) = handle_signed(&bytes(&command)) else {
        panic!("expected Message");
    };
    let specs = [skill("weather", "Forecasts"), skill("ask", "clashes")];
    assert_eq!(
        skill_command_text(&message.message.text, &specs).as_deref(),
        Some("/ask x"),
        "the turn maps Discord's name back to the skill's"
    );
    assert_eq!(skill_command_text("/weather Paris", &specs), None);
    assert_eq!(skill_command_text("/unknown", &specs), None);
    assert_eq!(skill_command_text("hello", &specs), None);
}

#[test]
fn ask_without_text_is_answered_privately_and_starts_no_turn() {
    let command = guild_command("ask", json!([{ "name": "text", "type": 3, "value": "  " }]));
    let content = private_answer(&command);
    assert!(content.contains("`text`"), "{content}");
}

/// The content of the ephemeral answer `command` gets instead of a turn.
fn private_answer(command: &Value) -> String {
    let outcome = handle_signed(&bytes(command));
    let Ok(WebhookOutcome::Respond(reply)) = outcome else {
        panic!("expected an immediate answer and no turn, got {outcome:?}");
    };
    assert_eq!(reply.body["type"], 4, "a message, not a deferred response");
    assert_eq!(reply.body["data"]["flags"], 64, "only the invoker sees it");
    assert_eq!(
        reply.body["data"]["allowed_mentions"],
        json!({ "parse": [] }),
        "it pings nobody"
    );
    reply.body["data"]["content"]
        .as_str()
        .expect("content")
        .to_owned()
}

#[test]
fn ask_with_no_option_says_which_option_it_needs() {
    // Discord leaves `options` out when none was given.
    let mut bare = dm_command("ask", json!([]));
    bare["data"]
        .as_object_mut()
        .expect("data")
        .remove("options");
    for command in [guild_command("ask", json!([])), bare] {
        let content = private_answer(&command);
        assert!(
            content.contains("`/ask` needs its `text` option"),
            "{content}"
        );
    }
}

#[test]
fn ask_with_an_unknown_option_names_it_and_the_expected_one() {
    // A registration from before the option was called `text` sends another name.
    let command = guild_command(
        "ask",
        json!([
            { "name": "question", "type": 3, "value": "What is 2+2?" },
            { "name": "sneaky`@everyone", "type": 3, "value": "x" },
        ]),
    );
    let content = private_answer(&command);
    assert!(content.contains("`question`"), "{content}");
    assert!(content.contains("`sneaky@everyone`"), "{content}");
    assert!(content.contains("it expects `text`"), "{content}");
    assert!(
        content.contains("clawless channels discord register-commands"),
        "{content}"
    );
}

#[test]
fn ask_with_a_text_that_is_not_a_string_says_what_it_expects() {
    let command = guild_command("ask", json!([{ "name": "text", "type": 4, "value": 4 }]));
    let content = private_answer(&command);
    assert!(content.contains("expects `text` to be text"), "{content}");
}

#[test]
fn ask_with_text_and_an_extra_option_still_asks() {
    let command = guild_command(
        "ask",
        json!([
            { "name": "text", "type": 3, "value": "Hi" },
            { "name": "private", "type": 5, "value": true },
        ]),
    );
    let Ok(WebhookOutcome::Message(message)) = handle_signed(&bytes(&command)) else {
        panic!("expected Message");
    };
    assert_eq!(message.message.text, "Hi");
}

#[test]
fn an_approval_button_press_is_an_approval_with_a_deferred_update() {
    let press = json!({
        "id": snowflake_at(NOW_SECS * 1_000),
        "type": 3,
        "token": TOKEN,
        "guild_id": "2200000000000000002",
        "channel_id": "3300000000000000003",
        "member": { "user": { "id": "4400000000000000004" } },
        "message": { "id": "8800000000000000008" },
        "data": { "custom_id": "approve:allow-always:ab12cd34", "component_type": 2 },
    });
    let outcome = handle_signed(&bytes(&press));
    let Ok(WebhookOutcome::Approval(approval)) = outcome else {
        panic!("expected Approval, got {outcome:?}");
    };
    assert_eq!(approval.event_id, press["id"].as_str().expect("id"));
    assert_eq!(approval.code, "ab12cd34");
    assert_eq!(approval.decision, ApprovalDecision::AllowAlways);
    assert_eq!(approval.message.text, "/approve ab12cd34 allow-always");
    assert_eq!(approval.message.sender_id, "4400000000000000004");
    assert_eq!(approval.message.chat.chat_type, ChatType::Group);
    assert_eq!(approval.ack.body, json!({ "type": 6 }));
}

#[test]
fn other_interactions_and_foreign_buttons_are_ignored() {
    let mut autocomplete = guild_command("ask", json!([]));
    autocomplete["type"] = json!(4);
    let mut modal = guild_command("ask", json!([]));
    modal["type"] = json!(5);
    let mut context_menu = guild_command("ask", json!([]));
    context_menu["data"]["type"] = json!(2);
    let mut foreign_button = guild_command("ask", json!([]));
    foreign_button["type"] = json!(3);
    foreign_button["data"] = json!({ "custom_id": "approve:maybe:ab12", "component_type": 2 });
    for interaction in [autocomplete, modal, context_menu, foreign_button] {
        let outcome = handle_signed(&bytes(&interaction));
        assert!(
            matches!(outcome, Ok(WebhookOutcome::Ignored(_))),
            "{interaction}: {outcome:?}"
        );
    }
}

#[test]
fn a_token_that_could_escape_the_url_path_is_refused() {
    let mut command = guild_command("ask", json!([{ "name": "text", "type": 3, "value": "hi" }]));
    command["token"] = json!("../../applications/1/commands");
    let outcome = handle_signed(&bytes(&command));
    assert!(
        matches!(outcome, Err(WebhookError::BadRequest(_))),
        "{outcome:?}"
    );
}

/// Whether `id` is a snowflake and `token` an interaction token the channel accepts: what an
/// interaction needs, besides a channel and a user, to become a message or an approval.
fn answerable(id: &str, token: &str) -> bool {
    let snowflake = !id.is_empty() && id.len() <= 20 && id.bytes().all(|b| b.is_ascii_digit());
    let token_ok = !token.is_empty()
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    snowflake && token_ok
}

proptest! {
    #[test]
    fn signed_junk_is_refused_as_malformed(body in proptest::collection::vec(any::<u8>(), 0..512)) {
        // Random bytes are (all but certainly) no interaction; signed, they get a 400.
        let outcome = handle_signed(&body);
        prop_assert!(matches!(outcome, Err(WebhookError::BadRequest(_))), "{:?}", outcome);
    }

    #[test]
    fn signed_json_shapes_get_the_outcome_their_type_and_ids_call_for(
        kind in 0u64..8,
        id in prop_oneof!["[0-9]{1,20}", "[0-9a-z]{0,22}"],
        token in prop_oneof!["[A-Za-z0-9._-]{1,40}", "[ -~]{0,40}"],
        name in prop_oneof![
            "[ -~]{0,40}",
            Just("ask".to_owned()),
            "approve:(deny|allow-once|allow-always):[a-z0-9]{1,8}",
        ],
        guild in proptest::option::of("[0-9]{1,20}"),
    ) {
        let body = bytes(&json!({
            "id": id, "type": kind, "token": token, "guild_id": guild,
            "channel_id": "1", "user": { "id": "2" },
            "data": { "name": name, "custom_id": name, "options": [{ "name": "text", "type": 3, "value": name }] },
        }));
        let outcome = handle_signed(&body);
        let answerable = answerable(&id, &token);
        let chat_type = if guild.is_some() { ChatType::Group } else { ChatType::Direct };
        match (kind, outcome) {
            (1, Ok(WebhookOutcome::Respond(reply))) => prop_assert_eq!(&reply.body, &json!({ "type": 1 })),
            (2, Ok(WebhookOutcome::Message(message))) => {
                prop_assert!(answerable);
                let expected = if name == "ask" { "ask".to_owned() } else { format!("/{name}") };
                prop_assert_eq!(&message.message.text, &expected);
                prop_assert_eq!(&message.message.message_id, &format!("{id}:{token}"));
                prop_assert_eq!(message.message.chat.chat_type, chat_type);
            }
            (3, Ok(WebhookOutcome::Approval(approval))) => {
                prop_assert!(answerable);
                prop_assert_eq!(Some((approval.code, approval.decision)), parse_approval_button(&name));
            }
            (3, Ok(WebhookOutcome::Ignored(_))) => prop_assert!(parse_approval_button(&name).is_none()),
            (2 | 3, Err(WebhookError::BadRequest(_))) => prop_assert!(!answerable),
            (0 | 4..=7, Ok(WebhookOutcome::Ignored(_))) => {}
            (kind, other) => prop_assert!(false, "type {}: {:?}", kind, other),
        }
    }

    #[test]
    fn junk_headers_never_pass(signature in "[ -~]{0,140}", timestamp in "[ -~]{0,20}") {
        // Printable ASCII is always a valid header value, so every case sends both headers.
        let mut headers = HeaderMap::new();
        headers.insert("x-signature-ed25519", signature.parse().expect("printable ASCII"));
        headers.insert("x-signature-timestamp", timestamp.parse().expect("printable ASCII"));
        let outcome = handle_with(&headers, EMPTY_OBJECT);
        prop_assert!(matches!(outcome, Err(WebhookError::Unauthorized(_))), "{:?}", outcome);
    }
}

// ---------------------------------------------------------------------------------------------
// Fake Discord API
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Call {
    method: Method,
    path: String,
    headers: HeaderMap,
    body: Value,
}

#[derive(Clone, Default)]
struct FakeDiscord {
    calls: Arc<Mutex<Vec<Call>>>,
    /// Statuses to answer with, in order; 200 once empty.
    statuses: Arc<Mutex<VecDeque<u16>>>,
}

impl FakeDiscord {
    async fn start() -> (String, Self) {
        let fake = Self::default();
        let state = fake.clone();
        let app = Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let state = state.clone();
                async move {
                    let status = state
                        .statuses
                        .lock()
                        .expect("test fixture")
                        .pop_front()
                        .unwrap_or(200);
                    state.calls.lock().expect("test fixture").push(Call {
                        method,
                        path: uri.path().to_owned(),
                        headers,
                        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                    });
                    let body = if status == 429 {
                        r#"{"message":"You are being rate limited.","retry_after":1.5}"#
                    } else if status >= 400 {
                        r#"{"message":"Unknown Webhook","code":10015}"#
                    } else {
                        r#"{"id":"1"}"#
                    };
                    (StatusCode::from_u16(status).expect("status"), body)
                }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("test fixture");
        let base = format!("http://{}/api/v10", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
        (base, fake)
    }

    fn fail_next(&self, statuses: &[u16]) {
        self.statuses
            .lock()
            .expect("test fixture")
            .extend(statuses.iter().copied());
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().expect("test fixture").clone()
    }
}

fn resolved(api_base: &str) -> ResolvedDiscord {
    let config: DiscordConfig = serde_json::from_value(json!({
        "applicationId": APP_ID,
        "publicKey": public_key_hex(),
        "apiBaseUrl": api_base,
    }))
    .expect("test fixture");
    config.resolve(&|_| None).expect("test fixture")
}

fn sender(api_base: &str, inbox: &InMemoryInbox) -> DiscordSender {
    DiscordSender::new(
        reqwest::Client::new(),
        &resolved(api_base),
        Arc::new(inbox.clone()),
    )
}

fn reply_to(interaction_id: &str, text: &str) -> OutboundReply {
    OutboundReply {
        reply_id: "s1-1-2".to_owned(),
        chat: ChatRef {
            channel: "discord".to_owned(),
            chat_id: "3300000000000000003".to_owned(),
            chat_type: ChatType::Group,
        },
        text: text.to_owned(),
        approval_code: None,
        in_reply_to: Some(format!("{interaction_id}:{TOKEN}")),
        media: Vec::new(),
    }
}

/// ~10,000 characters in paragraphs.
fn long_text() -> String {
    (0..100)
        .map(|n| format!("Paragraph {n:03}: {}", "lorem ipsum ".repeat(7).trim_end()))
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn contents(calls: &[Call]) -> Vec<String> {
    calls
        .iter()
        .map(|call| call.body["content"].as_str().expect("content").to_owned())
        .collect()
}

#[tokio::test]
async fn a_long_reply_goes_out_as_follow_ups_of_at_most_2000_characters_in_order() {
    let (base, fake) = FakeDiscord::start().await;
    let inbox = InMemoryInbox::new();
    let text = long_text();
    assert!((9_500..=10_500).contains(&text.chars().count()));
    let fresh = snowflake_at(now_ms());
    sender(&base, &inbox)
        .send(&reply_to(&fresh, &text))
        .await
        .expect("sent");

    let calls = fake.calls();
    assert_eq!(calls.len(), 5);
    for call in &calls {
        assert_eq!(call.method, Method::POST);
        assert_eq!(call.path, format!("/api/v10/webhooks/{APP_ID}/{TOKEN}"));
        assert!(call.headers.get("authorization").is_none());
        assert_eq!(call.body["allowed_mentions"], json!({ "parse": [] }));
        assert!(call.body.get("components").is_none());
    }
    let sent = contents(&calls);
    assert!(
        sent.iter()
            .all(|chunk| chunk.chars().count() <= MESSAGE_LIMIT)
    );
    assert_eq!(sent.join("\n\n"), text, "in order, nothing lost");
}

#[tokio::test]
async fn an_approval_reply_carries_three_buttons_on_its_last_message() {
    let (base, fake) = FakeDiscord::start().await;
    let mut reply = reply_to(
        &snowflake_at(now_ms()),
        "Run `rm -rf build`? Approve below.",
    );
    reply.approval_code = Some("ab12cd34".to_owned());
    sender(&base, &InMemoryInbox::new())
        .send(&reply)
        .await
        .expect("sent");

    let calls = fake.calls();
    assert_eq!(calls.len(), 1);
    let rows = calls[0].body["components"].as_array().expect("components");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["type"], 1);
    let decisions: Vec<_> = rows[0]["components"]
        .as_array()
        .expect("buttons")
        .iter()
        .map(|button| {
            assert_eq!(button["type"], 2);
            parse_approval_button(button["custom_id"].as_str().expect("custom_id"))
                .expect("an approval button")
        })
        .collect();
    assert_eq!(
        decisions,
        vec![
            ("ab12cd34".to_owned(), ApprovalDecision::AllowOnce),
            ("ab12cd34".to_owned(), ApprovalDecision::AllowAlways),
            ("ab12cd34".to_owned(), ApprovalDecision::Deny),
        ]
    );
}

#[tokio::test]
async fn a_reply_after_the_token_expired_is_rejected_without_calling_discord() {
    let (base, fake) = FakeDiscord::start().await;
    let stale = snowflake_at(now_ms() - 16 * 60 * 1_000);
    let err = sender(&base, &InMemoryInbox::new())
        .send(&reply_to(&stale, "Too late"))
        .await
        .expect_err("expired");
    assert!(
        matches!(&err, OutboxError::Rejected { message } if message.contains("expired")),
        "{err}"
    );
    assert!(fake.calls().is_empty());
}

#[tokio::test]
async fn a_reply_without_an_interaction_is_rejected() {
    let (base, fake) = FakeDiscord::start().await;
    let mut reply = reply_to("1", "hi");
    reply.in_reply_to = None;
    let err = sender(&base, &InMemoryInbox::new())
        .send(&reply)
        .await
        .expect_err("no token");
    assert!(matches!(err, OutboxError::Rejected { .. }), "{err}");
    assert!(fake.calls().is_empty());
}

#[tokio::test]
async fn a_retried_send_after_a_failure_sends_only_the_missing_chunks() {
    let (base, fake) = FakeDiscord::start().await;
    let inbox = InMemoryInbox::new();
    let sender = sender(&base, &inbox);
    let reply = reply_to(&snowflake_at(now_ms()), &long_text());
    fake.fail_next(&[200, 200, 503]);

    let err = sender.send(&reply).await.expect_err("third chunk fails");
    assert!(
        matches!(&err, OutboxError::Failed { message, .. } if message.contains("503")),
        "{err}"
    );
    assert!(
        !err.to_string().contains(TOKEN),
        "the token stays out of errors"
    );
    let first_try = contents(&fake.calls());
    assert_eq!(first_try.len(), 3);

    sender.send(&reply).await.expect("retry succeeds");
    let all = contents(&fake.calls());
    assert_eq!(all.len(), 6, "the retry sent chunks 3, 4 and 5 only");
    // The failed chunk is sent again, then the rest; the two delivered ones are not repeated.
    assert_eq!(all[3], first_try[2]);
    let delivered: Vec<_> = [&all[0], &all[1], &all[3], &all[4], &all[5]]
        .iter()
        .map(|chunk| chunk.as_str())
        .collect();
    assert_eq!(delivered.join("\n\n"), long_text());

    sender.send(&reply).await.expect("a third delivery");
    assert_eq!(fake.calls().len(), 6, "nothing is sent twice");
}

#[tokio::test]
async fn permanent_and_temporary_refusals_are_told_apart() {
    let (base, fake) = FakeDiscord::start().await;
    let inbox = InMemoryInbox::new();
    let sender = sender(&base, &inbox);
    let fresh = snowflake_at(now_ms());

    fake.fail_next(&[404]);
    let err = sender.send(&reply_to(&fresh, "hi")).await.expect_err("404");
    assert!(
        matches!(&err, OutboxError::Rejected { message } if message.contains("Unknown Webhook")),
        "{err}"
    );

    fake.fail_next(&[429]);
    let mut second = reply_to(&fresh, "again");
    second.reply_id = "s1-1-3".to_owned();
    let err = sender.send(&second).await.expect_err("429");
    assert!(
        matches!(&err, OutboxError::Failed { message, .. } if message.contains("retry after 1.5")),
        "{err}"
    );
    // The rate-limited chunk was released, so the retry goes out.
    sender.send(&second).await.expect("retry");
    assert_eq!(fake.calls().len(), 3);
}

#[tokio::test]
async fn a_silent_reply_sends_nothing() {
    let (base, fake) = FakeDiscord::start().await;
    sender(&base, &InMemoryInbox::new())
        .send(&reply_to(
            &snowflake_at(now_ms()),
            "[[reply_to_current]] NO_REPLY",
        ))
        .await
        .expect("nothing to do");
    assert!(fake.calls().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

fn valid_name(name: &str) -> bool {
    (1..=32).contains(&name.chars().count())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

#[test]
fn command_definitions_follow_discords_naming_and_length_rules() {
    let specs = vec![
        skill("weather", "Forecasts"),
        skill("ask", ""),
        skill("Weird Name!", "x"),
        skill("weird_name", "y"),
        skill(&"long".repeat(20), &"A very long description. ".repeat(10)),
    ];
    let definitions = command_definitions(&specs);
    assert_eq!(definitions.len(), specs.len() + 1);

    let ask = &definitions[0];
    assert_eq!(ask["name"], "ask");
    assert_eq!(ask["type"], 1);
    assert_eq!(ask["options"][0]["name"], "text");
    assert_eq!(ask["options"][0]["type"], 3);
    // Both optional: a question, a file, or both.
    assert_eq!(ask["options"][0]["required"], false);
    assert_eq!(ask["options"][1]["name"], "file");
    assert_eq!(ask["options"][1]["type"], 11);
    assert_eq!(ask["options"][1]["required"], false);

    let names: Vec<&str> = definitions
        .iter()
        .map(|d| d["name"].as_str().expect("name"))
        .collect();
    for name in &names {
        assert!(valid_name(name), "{name:?}");
    }
    let unique: std::collections::HashSet<_> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    assert_eq!(names[1], "weather");

    for definition in &definitions {
        let description = definition["description"].as_str().expect("description");
        assert!(
            (1..=100).contains(&description.chars().count()),
            "{description:?}"
        );
    }
    let long = definitions[5]["description"].as_str().expect("description");
    assert_eq!(long.chars().count(), 100);
    assert!(long.ends_with('…'));
    // A blank description falls back to the skill's name.
    assert_eq!(definitions[2]["description"], "ask");
    for skill in &definitions[1..] {
        assert_eq!(skill["options"][0]["name"], "args");
        assert_eq!(skill["options"][0]["required"], false);
    }
}

#[tokio::test]
async fn register_commands_puts_the_definitions_with_the_bot_token() {
    let (base, fake) = FakeDiscord::start().await;
    let definitions = command_definitions(&[skill("weather", "Forecasts")]);
    register_commands(
        &reqwest::Client::new(),
        &base,
        APP_ID,
        "bot-secret",
        &definitions,
    )
    .await
    .expect("registered");
    let calls = fake.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].method, Method::PUT);
    assert_eq!(
        calls[0].path,
        format!("/api/v10/applications/{APP_ID}/commands")
    );
    assert_eq!(
        calls[0].headers.get("authorization").expect("auth"),
        "Bot bot-secret"
    );
    assert_eq!(calls[0].body, Value::Array(definitions.clone()));

    fake.fail_next(&[401]);
    let err = register_commands(&reqwest::Client::new(), &base, APP_ID, "bad", &definitions)
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("401"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------------------------

fn config(extra: Value) -> Result<DiscordConfig, serde_json::Error> {
    let mut value = json!({ "applicationId": APP_ID, "publicKey": public_key_hex() });
    value
        .as_object_mut()
        .expect("object")
        .extend(extra.as_object().expect("object").clone());
    serde_json::from_value(value)
}

#[test]
fn config_resolves_the_token_from_the_environment_and_keeps_it_out_of_debug() {
    let config = config(json!({ "botTokenEnv": "DISCORD_TOKEN", "owners": ["1"] })).expect("ok");
    let resolved = config
        .resolve(&|name| (name == "DISCORD_TOKEN").then(|| "sekrit-token".to_owned()))
        .expect("resolves");
    assert_eq!(resolved.bot_token.as_deref(), Some("sekrit-token"));
    assert_eq!(resolved.api_base_url, "https://discord.com/api/v10");
    assert_eq!(resolved.owners, vec!["1"]);
    assert!(!format!("{resolved:?}").contains("sekrit"));

    let inline = self::config(json!({ "botToken": "inline-sekrit" })).expect("ok");
    assert!(!format!("{inline:?}").contains("sekrit"));
    assert!(
        !format!("{:?}", inline.resolve(&|_| None).expect("ok")).contains("sekrit"),
        "resolved Debug redacts too"
    );
}

#[test]
fn bad_configs_are_refused_with_a_reason() {
    assert!(
        config(json!({ "botTokn": "x" })).is_err(),
        "unknown fields are refused"
    );
    let cases = [
        json!({ "publicKey": "not hex" }),
        json!({ "publicKey": "abcd" }),
        json!({ "applicationId": "my-app" }),
        json!({ "apiBaseUrl": "ftp://example" }),
    ];
    for case in cases {
        let err = config(case.clone())
            .expect("parses")
            .resolve(&|_| None)
            .expect_err("refused");
        assert!(matches!(err, ConfigError::Invalid(_)), "{case}: {err}");
    }
    let both = config(json!({ "botToken": "a", "botTokenEnv": "B" }))
        .expect("parses")
        .resolve(&|_| None);
    assert_eq!(
        both,
        Err(ConfigError::Secret(SecretError::Both { field: "botToken" }))
    );
    let blank = config(json!({ "botToken": "  " }))
        .expect("parses")
        .resolve(&|_| None);
    assert!(matches!(blank, Err(ConfigError::Invalid(_))), "{blank:?}");
    let err = config(json!({ "botTokenEnv": "UNSET_VAR" }))
        .expect("parses")
        .resolve(&|_| None)
        .expect_err("unset");
    assert_eq!(
        err,
        ConfigError::Secret(SecretError::EnvUnset {
            field: "botToken",
            var: "UNSET_VAR".to_owned()
        })
    );
}
