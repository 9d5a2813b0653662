//! The Telegram channel end to end: webhook calls as Telegram makes them (secret token, every
//! update type the agent meets), and the sender against a local fake Bot API that records each
//! call's method and JSON body.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, Uri};
use clawless_base::session_key::ChatType;
use clawless_channels::SecretError;
use clawless_channels::telegram::{
    self, BotIdentity, ConfigError, SECRET_HEADER, TelegramChannel, TelegramConfig, TelegramSender,
};
use clawless_channels::webhook::{
    MAX_WEBHOOK_BODY_BYTES, PlatformChannel, WebhookError, WebhookOutcome, WebhookRequest,
    parse_approval_button,
};
use clawless_core::outbox::{Outbox, OutboxError};
use clawless_core::testing::InMemoryInbox;
use clawless_core::turn::OutboundReply;
use clawless_core::turn::events::{ApprovalDecision, ChatRef};
use proptest::prelude::*;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};

const SECRET: &str = "s3cret_token-ABC";
const BOT_ID: i64 = 777;
const TOKEN: &str = "777:AAbbCCdd_ee-FF";

// ---------------------------------------------------------------------------------------------
// Webhook
// ---------------------------------------------------------------------------------------------

fn channel() -> TelegramChannel {
    TelegramChannel::new(
        SECRET,
        BotIdentity {
            id: Some(BOT_ID),
            username: Some("@ClawBot".to_owned()),
        },
        true,
    )
}

fn headers(secret: Option<&str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Some(secret) = secret {
        headers.insert(
            SECRET_HEADER,
            HeaderValue::from_str(secret).expect("test fixture"),
        );
    }
    headers
}

fn handle_with(secret: Option<&str>, body: &[u8]) -> Result<WebhookOutcome, WebhookError> {
    let headers = headers(secret);
    channel().handle(&WebhookRequest {
        sub_path: "",
        headers: &headers,
        body,
        now_ms: 1_700_000_000_000,
    })
}

fn handle(update: &Value) -> Result<WebhookOutcome, WebhookError> {
    handle_with(Some(SECRET), update.to_string().as_bytes())
}

fn message_outcome(update: &Value) -> clawless_channels::ChannelMessage {
    match handle(update) {
        Ok(WebhookOutcome::Message(message)) => message,
        other => panic!("expected a message, got {other:?}"),
    }
}

fn user(id: i64) -> Value {
    json!({"id": id, "is_bot": false, "first_name": "Ann", "username": "ann"})
}

fn group_message(text: &str, extra: Value) -> Value {
    let mut message = json!({
        "message_id": 31,
        "from": user(42),
        "chat": {"id": -100_555, "type": "supergroup", "title": "Team"},
        "date": 1_700_000_000,
        "text": text,
    });
    if let (Some(target), Some(extra)) = (message.as_object_mut(), extra.as_object()) {
        for (key, value) in extra {
            target.insert(key.clone(), value.clone());
        }
    }
    json!({"update_id": 9001, "message": message})
}

#[test]
fn a_valid_secret_is_accepted_and_a_wrong_or_missing_one_is_refused_before_parsing() {
    let update = json!({"update_id": 1, "message": {
        "message_id": 7, "from": user(42), "chat": {"id": 42, "type": "private"}, "text": "hi"}});
    assert!(handle(&update).is_ok());
    for secret in [None, Some("wrong"), Some(""), Some("s3cret_token-ABCD")] {
        let body = update.to_string();
        assert!(
            matches!(
                handle_with(secret, body.as_bytes()),
                Err(WebhookError::Unauthorized(_))
            ),
            "{secret:?}"
        );
        // A body that would be a 400 or 413 is never looked at without the secret.
        assert!(matches!(
            handle_with(secret, b"{not json"),
            Err(WebhookError::Unauthorized(_))
        ));
        let huge = vec![b' '; MAX_WEBHOOK_BODY_BYTES + 1];
        assert!(matches!(
            handle_with(secret, &huge),
            Err(WebhookError::Unauthorized(_))
        ));
    }
}

#[test]
fn a_channel_with_an_empty_secret_accepts_nothing() {
    let open = TelegramChannel::new("", BotIdentity::default(), true);
    let headers = headers(Some(""));
    let result = open.handle(&WebhookRequest {
        sub_path: "",
        headers: &headers,
        body: br#"{"update_id": 1}"#,
        now_ms: 0,
    });
    assert!(matches!(result, Err(WebhookError::Unauthorized(_))));
}

#[test]
fn malformed_json_is_a_bad_request_with_a_reason_and_oversized_is_too_large() {
    match handle_with(Some(SECRET), b"{not json") {
        Err(WebhookError::BadRequest(reason)) => assert!(reason.contains("invalid update")),
        other => panic!("{other:?}"),
    }
    match handle_with(Some(SECRET), br#"{"edited_message": {}}"#) {
        Err(WebhookError::BadRequest(reason)) => assert!(reason.contains("update_id"), "{reason}"),
        other => panic!("{other:?}"),
    }
    match handle_with(Some(SECRET), br#"{"update_id": 1, "message": {"chat": 5}}"#) {
        Err(WebhookError::BadRequest(reason)) => assert!(reason.contains("message"), "{reason}"),
        other => panic!("{other:?}"),
    }
    let huge = vec![b' '; MAX_WEBHOOK_BODY_BYTES + 1];
    assert_eq!(
        handle_with(Some(SECRET), &huge),
        Err(WebhookError::TooLarge(MAX_WEBHOOK_BODY_BYTES + 1))
    );
}

#[test]
fn a_private_message_is_a_direct_chat_addressed_to_the_bot() {
    let message = message_outcome(&json!({"update_id": 5150, "message": {
        "message_id": 7, "from": user(42), "chat": {"id": 42, "type": "private"},
        "date": 1, "text": "hello there"}}));
    assert_eq!(message.event_id, "5150");
    assert!(message.addressed_to_bot);
    assert_eq!(message.message.chat.channel, "telegram");
    assert_eq!(message.message.chat.chat_id, "42");
    assert_eq!(message.message.chat.chat_type, ChatType::Direct);
    assert_eq!(message.message.sender_id, "42");
    assert_eq!(message.message.text, "hello there");
    assert_eq!(message.message.message_id, "42:7");
    assert!(!message.message.sender_is_owner);
    assert_eq!(message.ack.status, 200);
}

#[test]
fn a_group_message_is_addressed_only_when_it_mentions_or_replies_to_the_bot() {
    let cases: Vec<(&str, Value, bool)> = vec![
        ("plain chatter", group_message("lunch?", json!({})), false),
        (
            "mention entity",
            group_message(
                "@clawbot what time is it",
                json!({"entities": [{"type": "mention", "offset": 0, "length": 8}]}),
            ),
            true,
        ),
        (
            "mention entity after an emoji (UTF-16 offsets)",
            group_message(
                "😀 @ClawBot hi",
                json!({"entities": [{"type": "mention", "offset": 3, "length": 8}]}),
            ),
            true,
        ),
        (
            "mention in text without entities",
            group_message("hey @ClawBot, status?", json!({})),
            true,
        ),
        (
            "mention of another bot",
            group_message(
                "@otherbot hi",
                json!({"entities": [{"type": "mention", "offset": 0, "length": 9}]}),
            ),
            false,
        ),
        (
            "a longer username that starts with the bot's",
            group_message("@clawbot2 hi", json!({})),
            false,
        ),
        (
            "text_mention of the bot",
            group_message(
                "Claw, hi",
                json!({"entities": [{"type": "text_mention", "offset": 0, "length": 4,
                    "user": {"id": BOT_ID, "is_bot": true, "first_name": "Claw"}}]}),
            ),
            true,
        ),
        (
            "command addressed to the bot",
            group_message(
                "/status@ClawBot",
                json!({"entities": [{"type": "bot_command", "offset": 0, "length": 15}]}),
            ),
            true,
        ),
        (
            "command addressed to another bot",
            group_message(
                "/status@OtherBot",
                json!({"entities": [{"type": "bot_command", "offset": 0, "length": 16}]}),
            ),
            false,
        ),
        (
            "reply to the bot",
            group_message(
                "and tomorrow?",
                json!({"reply_to_message": {"message_id": 30,
                    "from": {"id": BOT_ID, "is_bot": true, "first_name": "Claw", "username": "ClawBot"},
                    "chat": {"id": -100_555, "type": "supergroup"}, "text": "sunny"}}),
            ),
            true,
        ),
        (
            "reply to another bot",
            group_message(
                "and tomorrow?",
                json!({"reply_to_message": {"message_id": 30,
                    "from": {"id": 999, "is_bot": true, "first_name": "X", "username": "xbot"},
                    "chat": {"id": -100_555, "type": "supergroup"}, "text": "sunny"}}),
            ),
            false,
        ),
        (
            "reply to a person",
            group_message(
                "agreed",
                json!({"reply_to_message": {"message_id": 30, "from": user(43),
                    "chat": {"id": -100_555, "type": "supergroup"}, "text": "sunny"}}),
            ),
            false,
        ),
        (
            "a person whose id is the bot's, not a bot",
            group_message(
                "agreed",
                json!({"reply_to_message": {"message_id": 30,
                    "from": {"id": BOT_ID, "is_bot": false, "first_name": "Fake"},
                    "chat": {"id": -100_555, "type": "supergroup"}, "text": "sunny"}}),
            ),
            false,
        ),
    ];
    for (name, update, addressed) in cases {
        let message = message_outcome(&update);
        assert_eq!(message.addressed_to_bot, addressed, "{name}");
        assert_eq!(message.message.chat.chat_type, ChatType::Group, "{name}");
        assert_eq!(message.message.chat.chat_id, "-100555", "{name}");
    }
}

#[test]
fn basic_groups_and_supergroups_are_group_chats_keyed_by_chat_id() {
    let update = json!({"update_id": 3, "message": {"message_id": 2, "from": user(42),
        "chat": {"id": -4_242, "type": "group", "title": "Old group"}, "text": "hi"}});
    let message = message_outcome(&update);
    assert_eq!(message.message.chat.chat_type, ChatType::Group);
    assert_eq!(message.message.chat.chat_id, "-4242");
    assert_eq!(message.message.message_id, "-4242:2");
}

#[test]
fn a_forum_topic_message_gets_the_topic_in_its_chat_id() {
    let topic = message_outcome(&group_message(
        "@clawbot hi",
        json!({"message_thread_id": 42, "is_topic_message": true}),
    ));
    assert_eq!(topic.message.chat.chat_id, "-100555:topic:42");
    assert_eq!(topic.message.chat.chat_type, ChatType::Group);
    // A reply thread in a supergroup without topics is not a topic.
    let thread = message_outcome(&group_message("hi", json!({"message_thread_id": 42})));
    assert_eq!(thread.message.chat.chat_id, "-100555");
}

#[test]
fn the_topic_creation_message_does_not_count_as_a_reply_to_the_bot() {
    let update = group_message(
        "anyone here?",
        json!({"message_thread_id": 42, "is_topic_message": true,
            "reply_to_message": {"message_id": 42,
                "from": {"id": BOT_ID, "is_bot": true, "first_name": "Claw", "username": "ClawBot"},
                "chat": {"id": -100_555, "type": "supergroup"},
                "forum_topic_created": {"name": "Ops", "icon_color": 1}}}),
    );
    assert!(!message_outcome(&update).addressed_to_bot);
}

#[test]
fn edited_messages_other_update_types_and_textless_or_bot_messages_are_ignored() {
    let edited = json!({"update_id": 1, "edited_message": {"message_id": 7, "from": user(42),
        "chat": {"id": 42, "type": "private"}, "text": "hello (edited)", "edit_date": 2}});
    let channel_post = json!({"update_id": 2, "channel_post": {"message_id": 1,
        "chat": {"id": -1009, "type": "channel"}, "text": "news"}});
    let member = json!({"update_id": 3, "my_chat_member": {"chat": {"id": 1, "type": "private"}}});
    // A sticker is media now (`<media:sticker>`); a location has neither text nor a file.
    let location = json!({"update_id": 4, "message": {"message_id": 8, "from": user(42),
        "chat": {"id": 42, "type": "private"}, "location": {"latitude": 1.0, "longitude": 2.0}}});
    let from_bot = json!({"update_id": 5, "message": {"message_id": 9,
        "from": {"id": 999, "is_bot": true, "first_name": "X"},
        "chat": {"id": -100_555, "type": "supergroup"}, "text": "@clawbot beep"}});
    let empty = json!({"update_id": 6});
    for (name, update) in [
        ("edited", edited),
        ("channel post", channel_post),
        ("chat member", member),
        ("location", location),
        ("bot", from_bot),
        ("empty", empty),
    ] {
        assert!(
            matches!(handle(&update), Ok(WebhookOutcome::Ignored(_))),
            "{name}"
        );
    }
    match handle(&json!({"update_id": 1, "edited_message": {}})) {
        Ok(WebhookOutcome::Ignored(reason)) => assert!(reason.contains("edited")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_photo_caption_counts_as_the_text() {
    let update = json!({"update_id": 11, "message": {"message_id": 3, "from": user(42),
        "chat": {"id": 42, "type": "private"}, "photo": [], "caption": "what is this?"}});
    assert_eq!(message_outcome(&update).message.text, "what is this?");
}

#[test]
fn an_approval_button_press_is_an_approval_from_the_presser_in_the_buttons_chat() {
    let update = json!({"update_id": 777_001, "callback_query": {
        "id": "cbq-123", "from": user(42), "chat_instance": "ci",
        "data": "approve:allow-always:ab12cd34",
        "message": {"message_id": 50,
            "from": {"id": BOT_ID, "is_bot": true, "first_name": "Claw"},
            "chat": {"id": -100_555, "type": "supergroup"},
            "message_thread_id": 42, "is_topic_message": true, "text": "Run ls?"}}});
    let approval = match handle(&update) {
        Ok(WebhookOutcome::Approval(approval)) => approval,
        other => panic!("{other:?}"),
    };
    assert_eq!(approval.event_id, "777001");
    assert_eq!(approval.code, "ab12cd34");
    assert_eq!(approval.decision, ApprovalDecision::AllowAlways);
    assert_eq!(approval.message.text, "/approve ab12cd34 allow-always");
    assert_eq!(approval.message.sender_id, "42");
    assert_eq!(approval.message.chat.chat_id, "-100555:topic:42");
    assert_eq!(approval.message.chat.chat_type, ChatType::Group);
    assert!(!approval.message.sender_is_owner);
    assert_eq!(approval.ack.body["method"], "answerCallbackQuery");
    assert_eq!(approval.ack.body["callback_query_id"], "cbq-123");

    let other_button = json!({"update_id": 2, "callback_query": {"id": "c", "from": user(42),
        "data": "something-else", "message": {"message_id": 1, "chat": {"id": 42, "type": "private"}}}});
    assert!(matches!(
        handle(&other_button),
        Ok(WebhookOutcome::Ignored(_))
    ));
    let no_message = json!({"update_id": 3, "callback_query": {"id": "c", "from": user(42),
        "data": "approve:deny:ab12cd34", "inline_message_id": "x"}});
    assert!(matches!(
        handle(&no_message),
        Ok(WebhookOutcome::Ignored(_))
    ));
}

/// What a junk body must come to.
#[derive(Debug)]
enum JunkOutcome {
    /// Refused as malformed (HTTP 400).
    Malformed,
    /// Ignored, with a reason containing this text.
    Ignored(&'static str),
    /// A well-formed update whose junk is only in the parts the channel tolerates (entity
    /// offsets): still the message it carries.
    Message {
        text: &'static str,
        addressed_to_bot: bool,
    },
}

#[test]
fn junk_bodies_are_refused_or_ignored_never_mistaken_for_something_else() {
    use JunkOutcome::{Ignored, Malformed, Message};
    let junk: Vec<(Vec<u8>, JunkOutcome)> = vec![
        (b"".to_vec(), Malformed),
        (b"null".to_vec(), Malformed),
        (b"[]".to_vec(), Malformed),
        (b"\"update\"".to_vec(), Malformed),
        (
            b"{\"update_id\": -1}".to_vec(),
            Ignored("update type \"empty\" is not handled"),
        ),
        (b"{\"update_id\": 1e400}".to_vec(), Malformed),
        (b"{\"update_id\": 99999999999999999999}".to_vec(), Malformed),
        (
            br#"{"update_id": 1, "message": null}"#.to_vec(),
            Ignored("update type \"empty\" is not handled"),
        ),
        // A private chat is always addressed to the bot; the entity past the text's end is
        // skipped, not a reason to drop the message.
        (
            br#"{"update_id": 1, "message": {"message_id": 1, "chat": {"id": 1, "type": "private"}, "from": {"id": 1}, "text": "x", "entities": [{"type": "mention", "offset": 18446744073709551615, "length": 5}]}}"#.to_vec(),
            Message {
                text: "x",
                addressed_to_bot: true,
            },
        ),
        // A command entity cutting the emoji's surrogate pair mentions nobody.
        (
            br#"{"update_id": 1, "message": {"message_id": 1, "chat": {"id": 1, "type": "group"}, "from": {"id": 1}, "text": "\ud83d\ude00", "entities": [{"type": "bot_command", "offset": 1, "length": 1}]}}"#.to_vec(),
            Message {
                text: "\u{1f600}",
                addressed_to_bot: false,
            },
        ),
        (
            br#"{"update_id": 1, "callback_query": {"id": "", "from": {"id": 1}, "data": "approve:deny:", "message": {"chat": {"id": 1, "type": "private"}}}}"#.to_vec(),
            Ignored("button press that is not an approval"),
        ),
        (vec![0xff, 0xfe, 0x00], Malformed),
        (b"{\"update_id\": 1} trailing".to_vec(), Malformed),
    ];
    for (body, expected) in junk {
        let shown = String::from_utf8_lossy(&body);
        let outcome = handle_with(Some(SECRET), &body);
        let as_expected = match (&expected, &outcome) {
            (Malformed, Err(WebhookError::BadRequest(_))) => true,
            (Ignored(reason), Ok(WebhookOutcome::Ignored(got))) => got.contains(reason),
            (
                Message {
                    text,
                    addressed_to_bot,
                },
                Ok(WebhookOutcome::Message(got)),
            ) => got.message.text == *text && got.addressed_to_bot == *addressed_to_bot,
            _ => false,
        };
        assert!(
            as_expected,
            "{shown}: expected {expected:?}, got {outcome:?}"
        );
        // Without the secret token nothing is even read.
        let unsigned = handle_with(None, &body);
        assert!(
            matches!(unsigned, Err(WebhookError::Unauthorized(_))),
            "{shown}: {unsigned:?}"
        );
    }
}

proptest! {
    #[test]
    fn arbitrary_bodies_and_texts_are_never_mistaken_for_something_else(
        body in proptest::collection::vec(any::<u8>(), 0..512),
        text in ".{0,64}",
        offset in 0usize..80,
        length in 0usize..80,
    ) {
        // Random bytes are (all but certainly) no update: refused, never a message.
        let outcome = handle_with(Some(SECRET), &body);
        prop_assert!(
            matches!(outcome, Err(WebhookError::BadRequest(_)) | Ok(WebhookOutcome::Ignored(_))),
            "{:?}", outcome
        );
        // A group message with entities anywhere, even out of range or mid-character: the
        // message as sent (or ignored when it has no text), and addressed to the bot only when
        // it could name it.
        let update = group_message(
            &text,
            json!({"entities": [{"type": "mention", "offset": offset, "length": length},
                {"type": "bot_command", "offset": length, "length": offset}]}),
        );
        match handle(&update) {
            Ok(WebhookOutcome::Message(message)) => {
                prop_assert!(!text.trim().is_empty());
                prop_assert_eq!(&message.message.text, &text);
                // Every way of naming the bot (mention, `/command@bot`, plain text) needs an `@`.
                prop_assert!(text.contains('@') || !message.addressed_to_bot);
            }
            Ok(WebhookOutcome::Ignored(reason)) => {
                prop_assert!(text.trim().is_empty(), "{}: {}", text, reason);
            }
            other => prop_assert!(false, "{:?}", other),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------------------------

fn config(yaml_json: Value) -> TelegramConfig {
    serde_json::from_value(yaml_json).expect("test fixture")
}

fn env(name: &str) -> Option<String> {
    match name {
        "TG_TOKEN" => Some(TOKEN.to_owned()),
        "TG_SECRET" => Some(SECRET.to_owned()),
        "EMPTY" => Some(String::new()),
        _ => None,
    }
}

#[test]
fn secrets_come_from_the_literal_or_the_environment_and_defaults_apply() {
    let resolved = config(json!({"botTokenEnv": "TG_TOKEN", "secretToken": SECRET,
        "botUsername": "@ClawBot", "owners": ["42"]}))
    .resolve(&env)
    .unwrap();
    assert_eq!(resolved.bot_token, TOKEN);
    assert_eq!(resolved.secret_token, SECRET);
    assert_eq!(resolved.api_base_url, "https://api.telegram.org");
    assert_eq!(resolved.bot_username.as_deref(), Some("clawbot"));
    assert_eq!(resolved.bot_id(), Some(BOT_ID));
    assert!(resolved.require_mention);
    assert!(resolved.channel().require_mention());
    assert_eq!(resolved.owners, vec!["42".to_owned()]);

    let relaxed = config(json!({"botToken": TOKEN, "secretTokenEnv": "TG_SECRET",
        "apiBaseUrl": "http://127.0.0.1:9/", "requireMention": false}));
    assert!(!relaxed.require_mention());
    let resolved = relaxed.resolve(&env).unwrap();
    assert_eq!(resolved.api_base_url, "http://127.0.0.1:9");
    assert!(!resolved.channel().require_mention());
}

#[test]
fn missing_doubled_unset_or_malformed_secrets_are_config_errors() {
    let cases = [
        (
            json!({"secretToken": SECRET}),
            ConfigError::Secret(SecretError::Missing { field: "botToken" }),
        ),
        (
            json!({"botToken": TOKEN, "botTokenEnv": "TG_TOKEN", "secretToken": SECRET}),
            ConfigError::Secret(SecretError::Both { field: "botToken" }),
        ),
        (
            json!({"botToken": TOKEN, "secretTokenEnv": "NOPE"}),
            ConfigError::Secret(SecretError::EnvUnset {
                field: "secretToken",
                var: "NOPE".to_owned(),
            }),
        ),
        (
            json!({"botToken": TOKEN, "secretTokenEnv": "EMPTY"}),
            ConfigError::Secret(SecretError::EnvUnset {
                field: "secretToken",
                var: "EMPTY".to_owned(),
            }),
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(
            config(input.clone()).resolve(&env),
            Err(expected),
            "{input}"
        );
    }
    for (input, field) in [
        (
            json!({"botToken": "777:abc/../../x", "secretToken": SECRET}),
            "botToken",
        ),
        (
            json!({"botToken": "nocolon", "secretToken": SECRET}),
            "botToken",
        ),
        (
            json!({"botToken": TOKEN, "secretToken": "has space"}),
            "secretToken",
        ),
        (
            json!({"botToken": TOKEN, "secretToken": "x".repeat(257)}),
            "secretToken",
        ),
        (
            json!({"botToken": TOKEN, "secretToken": SECRET, "apiBaseUrl": "ftp://x"}),
            "apiBaseUrl",
        ),
        (
            json!({"botToken": TOKEN, "secretToken": SECRET, "botUsername": "bad name"}),
            "botUsername",
        ),
    ] {
        match config(input.clone()).resolve(&env) {
            Err(ConfigError::Invalid { field: got, .. }) => assert_eq!(got, field, "{input}"),
            other => panic!("{input}: {other:?}"),
        }
    }
    assert!(serde_json::from_value::<TelegramConfig>(json!({"botTokn": TOKEN})).is_err());
}

#[test]
fn debug_output_never_shows_a_secret() {
    let raw = config(json!({"botToken": TOKEN, "secretToken": SECRET}));
    let resolved = raw.resolve(&env).unwrap();
    let sender = resolved.sender(reqwest::Client::new(), Arc::new(InMemoryInbox::new()));
    for shown in [
        format!("{raw:?}"),
        format!("{resolved:?}"),
        format!("{:?}", resolved.channel()),
        format!("{sender:?}"),
    ] {
        assert!(!shown.contains("AAbbCCdd"), "{shown}");
        assert!(!shown.contains(SECRET), "{shown}");
    }
}

#[test]
fn generated_secret_tokens_are_64_url_safe_characters_and_differ() {
    let first = telegram::generate_secret_token().unwrap();
    let second = telegram::generate_secret_token().unwrap();
    assert_eq!(first.len(), 64);
    assert!(
        first
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    );
    assert_ne!(first, second);
    // A generated token is one the config accepts.
    let resolved = config(json!({"botToken": TOKEN, "secretToken": first}))
        .resolve(&env)
        .unwrap();
    assert_eq!(resolved.secret_token, first);
}

// ---------------------------------------------------------------------------------------------
// Sender, against a fake Bot API
// ---------------------------------------------------------------------------------------------

/// One recorded Bot API call: the URL path and the JSON body.
#[derive(Debug, Clone)]
struct Call {
    path: String,
    body: Value,
}

impl Call {
    fn method(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or_default()
    }
}

#[derive(Clone, Default)]
struct FakeApi {
    calls: Arc<Mutex<Vec<Call>>>,
    /// Answers to give, in order; once empty, every call succeeds.
    script: Arc<Mutex<VecDeque<(u16, Value)>>>,
}

impl FakeApi {
    fn calls(&self) -> Vec<Call> {
        self.calls.lock().expect("test fixture").clone()
    }

    fn answer_next(&self, status: u16, body: Value) {
        self.script
            .lock()
            .expect("test fixture")
            .push_back((status, body));
    }
}

async fn fake_api() -> (String, FakeApi) {
    let api = FakeApi::default();
    let state = api.clone();
    let app = Router::new().fallback(move |uri: Uri, body: Bytes| {
        let state = state.clone();
        async move {
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            state.calls.lock().expect("test fixture").push(Call {
                path: uri.path().to_owned(),
                body,
            });
            let (status, answer) = state
                .script
                .lock()
                .expect("test fixture")
                .pop_front()
                .unwrap_or((200, json!({"ok": true, "result": true})));
            (
                StatusCode::from_u16(status).expect("test fixture"),
                axum::Json(answer),
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("test fixture");
    let base = format!("http://{}", listener.local_addr().expect("test fixture"));
    tokio::spawn(async move { axum::serve(listener, app).await.expect("test fixture") });
    (base, api)
}

fn sender(base: &str) -> TelegramSender {
    TelegramSender::new(
        reqwest::Client::new(),
        base,
        TOKEN,
        Arc::new(InMemoryInbox::new()),
    )
}

fn topic_chat() -> ChatRef {
    ChatRef {
        channel: "telegram".to_owned(),
        chat_id: "-100555:topic:42".to_owned(),
        chat_type: ChatType::Group,
    }
}

fn reply(text: &str) -> OutboundReply {
    OutboundReply {
        reply_id: "sess-1-3".to_owned(),
        chat: ChatRef {
            channel: "telegram".to_owned(),
            chat_id: "42".to_owned(),
            chat_type: ChatType::Direct,
        },
        text: text.to_owned(),
        approval_code: None,
        in_reply_to: Some("42:7".to_owned()),
        media: Vec::new(),
    }
}

fn long_text() -> String {
    let paragraph = format!("{}end.", "lorem ipsum ".repeat(40)); // 484 chars
    let text = vec![paragraph.as_str(); 21].join("\n\n");
    assert!(text.chars().count() >= 10_000);
    text
}

fn sent_texts(api: &FakeApi) -> Vec<String> {
    api.calls()
        .iter()
        .filter(|call| call.method() == "sendMessage")
        .map(|call| call.body["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn a_long_reply_in_a_topic_goes_out_in_three_ordered_chunks_in_that_topic() {
    let (base, api) = fake_api().await;
    let text = long_text();
    let mut long = reply(&text);
    long.chat = topic_chat();
    sender(&base).send(&long).await.unwrap();
    let calls = api.calls();
    assert_eq!(calls.len(), 3);
    for call in &calls {
        assert_eq!(call.path, format!("/bot{TOKEN}/sendMessage"));
        assert_eq!(call.body["chat_id"], json!(-100_555));
        assert_eq!(call.body["message_thread_id"], json!(42));
        assert!(call.body["text"].as_str().unwrap().chars().count() <= 4_096);
        assert!(call.body.get("reply_parameters").is_none());
    }
    assert_eq!(
        sent_texts(&api).join("\n\n"),
        text,
        "in order, nothing lost"
    );
}

#[tokio::test]
async fn reply_directives_reply_to_that_message_on_the_first_chunk_only() {
    let (base, api) = fake_api().await;
    let telegram = sender(&base);
    telegram
        .send(&reply(&format!("[[reply_to_current]] {}", long_text())))
        .await
        .unwrap();
    let calls = api.calls();
    assert_eq!(calls[0].body["reply_parameters"]["message_id"], json!(7));
    assert_eq!(
        calls[0].body["reply_parameters"]["allow_sending_without_reply"],
        json!(true)
    );
    assert!(
        calls[1..]
            .iter()
            .all(|c| c.body.get("reply_parameters").is_none())
    );
    assert!(!calls[0].body["text"].as_str().unwrap().contains("[["));

    let mut explicit = reply("Yes [[reply_to:4711]]");
    explicit.reply_id = "other".to_owned();
    telegram.send(&explicit).await.unwrap();
    let last = api.calls().pop().unwrap();
    assert_eq!(last.body["reply_parameters"]["message_id"], json!(4711));
    assert_eq!(last.body["text"], "Yes");

    let mut plain = reply("no directive");
    plain.reply_id = "third".to_owned();
    telegram.send(&plain).await.unwrap();
    assert!(
        api.calls()
            .pop()
            .unwrap()
            .body
            .get("reply_parameters")
            .is_none()
    );
}

#[tokio::test]
async fn silent_replies_send_nothing() {
    let (base, api) = fake_api().await;
    sender(&base)
        .send(&reply("[[reply_to_current]] NO_REPLY"))
        .await
        .unwrap();
    assert!(api.calls().is_empty());
}

#[tokio::test]
async fn an_approval_request_carries_three_buttons_that_parse_back() {
    let (base, api) = fake_api().await;
    let mut ask = reply("May I run `ls -la`? Reply /approve ab12cd34 allow-once");
    ask.approval_code = Some("ab12cd34".to_owned());
    sender(&base).send(&ask).await.unwrap();
    let calls = api.calls();
    assert_eq!(calls.len(), 1);
    let rows = calls[0].body["reply_markup"]["inline_keyboard"]
        .as_array()
        .unwrap()
        .clone();
    let decisions: Vec<(String, ApprovalDecision)> = rows
        .iter()
        .flat_map(|row| row.as_array().unwrap().clone())
        .map(|button| {
            let data = button["callback_data"].as_str().unwrap();
            assert!(data.len() <= 64, "callback_data limit");
            parse_approval_button(data).unwrap()
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
async fn a_retry_after_the_second_chunk_failed_sends_only_the_missing_chunks() {
    let (base, api) = fake_api().await;
    let telegram = sender(&base);
    let text = long_text();
    let long = reply(&text);
    api.answer_next(200, json!({"ok": true, "result": {}}));
    api.answer_next(
        502,
        json!({"ok": false, "error_code": 502, "description": "Bad Gateway"}),
    );
    let first = telegram.send(&long).await;
    assert!(
        matches!(first, Err(OutboxError::Failed { .. })),
        "{first:?}"
    );
    assert_eq!(api.calls().len(), 2, "stopped at the failed chunk");

    telegram.send(&long).await.unwrap();
    let texts = sent_texts(&api);
    assert_eq!(texts.len(), 4, "chunk 1, failed chunk 2, chunk 2, chunk 3");
    assert_eq!(texts[1], texts[2], "the failed chunk was sent again");
    let delivered = [texts[0].clone(), texts[2].clone(), texts[3].clone()];
    assert_eq!(delivered.join("\n\n"), text);

    // A third attempt finds every chunk claimed and sends nothing.
    telegram.send(&long).await.unwrap();
    assert_eq!(api.calls().len(), 4);
}

#[tokio::test]
async fn refusals_are_rejected_and_rate_limits_and_server_errors_are_failures() {
    let (base, api) = fake_api().await;
    let telegram = sender(&base);
    let cases = [
        (
            403,
            json!({"ok": false, "error_code": 403, "description": "Forbidden: bot was blocked by the user"}),
            "rejected",
        ),
        (
            400,
            json!({"ok": false, "error_code": 400, "description": "Bad Request: chat not found"}),
            "rejected",
        ),
        (
            429,
            json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 7",
                "parameters": {"retry_after": 7}}),
            "failed",
        ),
        (
            500,
            json!({"ok": false, "error_code": 500, "description": "Internal Server Error"}),
            "failed",
        ),
    ];
    for (index, (status, body, expected)) in cases.into_iter().enumerate() {
        api.answer_next(status, body);
        let mut one = reply("hi");
        one.reply_id = format!("r{index}");
        let err = telegram.send(&one).await.unwrap_err();
        let message = err.to_string();
        assert!(!message.contains("AAbbCCdd"), "no token in {message}");
        match (expected, &err) {
            ("rejected", OutboxError::Rejected { .. }) => {}
            ("failed", OutboxError::Failed { .. }) => {}
            _ => panic!("HTTP {status}: {err:?}"),
        }
        if status == 429 {
            assert!(message.contains("retry after 7s"), "{message}");
        }
        assert!(message.contains(&status.to_string()), "{message}");
    }
}

#[tokio::test]
async fn an_unreachable_api_is_a_failure_without_the_token_and_the_chunk_is_sent_on_retry() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let inbox = Arc::new(InMemoryInbox::new());
    let down = TelegramSender::new(reqwest::Client::new(), &dead, TOKEN, inbox.clone());
    let err = down.send(&reply("hi")).await.unwrap_err();
    assert!(matches!(err, OutboxError::Failed { .. }));
    let chain = format!("{err} {:?}", std::error::Error::source(&err));
    assert!(!chain.contains("AAbbCCdd"), "{chain}");

    let (base, api) = fake_api().await;
    let up = TelegramSender::new(reqwest::Client::new(), &base, TOKEN, inbox);
    up.send(&reply("hi")).await.unwrap();
    assert_eq!(sent_texts(&api), vec!["hi".to_owned()]);
}

#[tokio::test]
async fn typing_and_callback_answers_call_their_methods() {
    let (base, api) = fake_api().await;
    let telegram = sender(&base);
    telegram.typing(&topic_chat()).await.unwrap();
    telegram
        .answer_callback("cbq-123", Some("Approved"))
        .await
        .unwrap();
    let calls = api.calls();
    assert_eq!(calls[0].method(), "sendChatAction");
    assert_eq!(
        calls[0].body,
        json!({"chat_id": -100_555, "action": "typing", "message_thread_id": 42})
    );
    assert_eq!(calls[1].method(), "answerCallbackQuery");
    assert_eq!(
        calls[1].body,
        json!({"callback_query_id": "cbq-123", "text": "Approved"})
    );
}

#[tokio::test]
async fn set_webhook_sends_the_url_secret_and_allowed_updates() {
    let (base, api) = fake_api().await;
    telegram::set_webhook(
        &reqwest::Client::new(),
        &base,
        TOKEN,
        "https://example.com/webhook/telegram",
        SECRET,
    )
    .await
    .unwrap();
    let calls = api.calls();
    assert_eq!(calls[0].path, format!("/bot{TOKEN}/setWebhook"));
    assert_eq!(
        calls[0].body,
        json!({"url": "https://example.com/webhook/telegram", "secret_token": SECRET,
            "allowed_updates": ["message", "callback_query"]})
    );
    api.answer_next(
        400,
        json!({"ok": false, "error_code": 400, "description": "Bad Request: bad webhook: HTTPS url must be provided"}),
    );
    let err = telegram::set_webhook(&reqwest::Client::new(), &base, TOKEN, "http://x", SECRET)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("HTTPS url must be provided"),
        "{err}"
    );
}

#[tokio::test]
async fn get_me_reads_the_bots_id_and_username() {
    let (base, api) = fake_api().await;
    api.answer_next(
        200,
        json!({"ok": true, "result": {"id": BOT_ID, "is_bot": true, "first_name": "Claw", "username": "ClawBot"}}),
    );
    let me = telegram::get_me(&reqwest::Client::new(), &base, TOKEN)
        .await
        .unwrap();
    assert_eq!(
        me,
        BotIdentity {
            id: Some(BOT_ID),
            username: Some("clawbot".to_owned())
        }
    );
}
