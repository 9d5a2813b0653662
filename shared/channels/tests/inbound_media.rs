//! Files people send, per platform: what each webhook reports (signed as the platform signs
//! it), and each downloader against a fake file server on 127.0.0.1 that records the headers
//! it was asked with (Slack's bot token) and refuses anything else.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::IntoResponse;
use clawless_base::media::MediaKind;
use clawless_channels::discord::{DiscordChannel, DiscordMedia, DiscordPublicKey};
use clawless_channels::media::{
    DownloadError, MB, MediaDownloader, MediaSource, PendingMedia, url_is_allowed,
};
use clawless_channels::slack::{SlackChannel, SlackMedia};
use clawless_channels::telegram::{BotIdentity, SECRET_HEADER, TelegramChannel};
use clawless_channels::webhook::{
    ChannelMessage, PlatformChannel, WebhookError, WebhookOutcome, WebhookRequest,
};
use clawless_channels::{GenericWebhook, SIGNATURE_HEADER, sign};
use ed25519_dalek::{Signer, SigningKey};
use serde_json::{Value, json};

const NOW_SECS: u64 = 1_700_000_000;
const SLACK_SECRET: &str = "slack-signing-secret";
const SLACK_TOKEN: &str = "xoxb-test-token";
const PNG: &[u8] = b"\x89PNG fake image";

/// A file server: `/slack/F1/photo.png` wants the Slack bot token, `/attachments/...` is
/// open, anything else is 404.
#[derive(Default)]
struct FileServer {
    authorizations: Mutex<Vec<Option<String>>>,
}

async fn file_server() -> (String, Arc<FileServer>) {
    let state = Arc::new(FileServer::default());
    let served = Arc::clone(&state);
    let app = Router::new().fallback(move |uri: Uri, headers: HeaderMap, body: String| {
        let state = Arc::clone(&served);
        async move {
            let base = headers
                .get("host")
                .and_then(|value| value.to_str().ok())
                .map(|host| format!("http://{host}"))
                .unwrap_or_default();
            let authorization = headers
                .get("authorization")
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned);
            state
                .authorizations
                .lock()
                .expect("test fixture")
                .push(authorization.clone());
            match uri.path() {
                "/slack/F1/photo.png"
                    if authorization.as_deref() == Some(&format!("Bearer {SLACK_TOKEN}")) =>
                {
                    ([("content-type", "image/png")], PNG.to_vec()).into_response()
                }
                "/slack/F1/photo.png" => StatusCode::FORBIDDEN.into_response(),
                "/attachments/1/2/cat.png" => {
                    ([("content-type", "image/png")], PNG.to_vec()).into_response()
                }
                "/busy" => StatusCode::SERVICE_UNAVAILABLE.into_response(),
                "/files.info" if body == "file=F2" => axum::Json(json!({
                    "ok": true,
                    "file": {"id": "F2", "url_private_download": format!("{base}/slack/F1/photo.png")},
                }))
                .into_response(),
                "/files.info" => {
                    axum::Json(json!({"ok": false, "error": "file_not_found"})).into_response()
                }
                _ => StatusCode::NOT_FOUND.into_response(),
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("test fixture");
    let addr = listener.local_addr().expect("test fixture");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), state)
}

fn url_media(url: &str, size: Option<u64>) -> PendingMedia {
    PendingMedia {
        kind: MediaKind::Image,
        mime: Some("image/png".to_owned()),
        name: Some("photo.png".to_owned()),
        size,
        source: MediaSource::Url(url.to_owned()),
    }
}

fn expect_message(outcome: Result<WebhookOutcome, WebhookError>) -> ChannelMessage {
    match outcome {
        Ok(WebhookOutcome::Message(message)) => message,
        other => panic!("expected a message, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Telegram
// ---------------------------------------------------------------------------------------------

fn telegram(message: &Value) -> Result<WebhookOutcome, WebhookError> {
    let mut message = message.clone();
    message["message_id"] = json!(9);
    message["from"] = json!({"id": 42, "is_bot": false});
    message["chat"] = json!({"id": 42, "type": "private"});
    let body = json!({"update_id": 500, "message": message}).to_string();
    let mut headers = HeaderMap::new();
    headers.insert(SECRET_HEADER, HeaderValue::from_static("tg-secret"));
    TelegramChannel::new("tg-secret", BotIdentity::default(), true).handle(&WebhookRequest {
        sub_path: "",
        headers: &headers,
        body: body.as_bytes(),
        now_ms: NOW_SECS * 1000,
    })
}

#[test]
fn telegram_reports_the_largest_photo_and_each_kind_of_file_with_placeholders() {
    let photo = expect_message(telegram(&json!({
        "caption": "look",
        "photo": [
            {"file_id": "small", "width": 90, "height": 90, "file_size": 900},
            {"file_id": "large", "width": 1280, "height": 1280, "file_size": 90_000},
            {"file_id": "medium", "width": 320, "height": 320, "file_size": 9_000},
        ],
    })));
    assert_eq!(photo.message.text, "look");
    assert_eq!(photo.media.len(), 1);
    assert_eq!(
        photo.media[0].source,
        MediaSource::TelegramFile("large".to_owned())
    );
    assert_eq!(photo.media[0].size, Some(90_000));

    for (field, file, placeholder, kind) in [
        (
            "voice",
            json!({"file_id": "v", "mime_type": "audio/ogg"}),
            "<media:audio>",
            MediaKind::Audio,
        ),
        (
            "audio",
            json!({"file_id": "a", "mime_type": "audio/mpeg", "file_name": "song.mp3"}),
            "<media:audio>",
            MediaKind::Audio,
        ),
        (
            "video",
            json!({"file_id": "vi"}),
            "<media:video>",
            MediaKind::Video,
        ),
        (
            "video_note",
            json!({"file_id": "vn", "length": 240}),
            "<media:video>",
            MediaKind::Video,
        ),
        (
            "document",
            json!({"file_id": "d", "file_name": "a.pdf", "mime_type": "application/pdf"}),
            "<media:document>",
            MediaKind::Document,
        ),
        (
            "sticker",
            json!({"file_id": "s", "is_animated": false, "is_video": false}),
            "<media:sticker>",
            MediaKind::Sticker,
        ),
    ] {
        let message = expect_message(telegram(&json!({ field: file })));
        assert_eq!(message.message.text, placeholder, "{field}");
        assert_eq!(message.media.len(), 1, "{field}");
        assert_eq!(message.media[0].kind, kind, "{field}");
    }
    // No text and no file: still nothing to answer.
    assert!(matches!(
        telegram(&json!({"location": {"latitude": 1.0, "longitude": 2.0}})),
        Ok(WebhookOutcome::Ignored(_))
    ));
}

// ---------------------------------------------------------------------------------------------
// Slack
// ---------------------------------------------------------------------------------------------

fn slack(event: &Value) -> Result<WebhookOutcome, WebhookError> {
    let body = json!({
        "type": "event_callback",
        "event_id": "EvMedia1",
        "event": event,
    })
    .to_string();
    let timestamp = NOW_SECS.to_string();
    let mut base = format!("v0:{timestamp}:").into_bytes();
    base.extend_from_slice(body.as_bytes());
    let signature = format!(
        "v0={}",
        sign(SLACK_SECRET.as_bytes(), &base).trim_start_matches("sha256=")
    );
    let mut headers = HeaderMap::new();
    headers.insert(
        "x-slack-request-timestamp",
        HeaderValue::from_str(&timestamp).expect("test fixture"),
    );
    headers.insert(
        "x-slack-signature",
        HeaderValue::from_str(&signature).expect("test fixture"),
    );
    SlackChannel::new(SLACK_SECRET.as_bytes(), Some("UBOT0001".to_owned())).handle(
        &WebhookRequest {
            sub_path: "",
            headers: &headers,
            body: body.as_bytes(),
            now_ms: NOW_SECS * 1000,
        },
    )
}

#[tokio::test]
async fn a_slack_file_share_is_downloaded_with_the_bot_token_from_slack_only() {
    let (base, server) = file_server().await;
    let url = format!("{base}/slack/F1/photo.png");
    let message = expect_message(slack(&json!({
        "type": "message",
        "subtype": "file_share",
        "channel": "D0001",
        "channel_type": "im",
        "user": "UALICE01",
        "text": "",
        "ts": "1700000000.000100",
        "files": [{
            "id": "F1", "name": "photo.png", "mimetype": "image/png", "size": PNG.len(),
            "url_private": format!("{base}/slack/F1/private"),
            "url_private_download": url,
        }],
    })));
    assert_eq!(message.message.text, "<media:image>");
    let [pending] = message.media.as_slice() else {
        panic!("{:?}", message.media);
    };
    assert_eq!(pending.source, MediaSource::Url(url.clone()));
    assert_eq!(pending.name.as_deref(), Some("photo.png"));

    let media = SlackMedia::new(reqwest::Client::new(), &base, SLACK_TOKEN, 20 * MB);
    let downloaded = media.download(pending).await.expect("downloaded");
    assert_eq!(downloaded.bytes, PNG);
    assert_eq!(downloaded.mime.as_deref(), Some("image/png"));
    assert_eq!(
        server.authorizations.lock().expect("test fixture").clone(),
        [Some(format!("Bearer {SLACK_TOKEN}"))]
    );

    // The token goes to Slack's file host only: another host is refused without a request.
    let elsewhere = url_media("https://files.example.com/F1/photo.png", None);
    assert!(matches!(
        media.download(&elsewhere).await,
        Err(DownloadError::Refused(_))
    ));
    assert!(!url_is_allowed(
        "http://files.slack.com/x",
        &["files.slack.com"],
        None
    ));
    assert_eq!(server.authorizations.lock().expect("test fixture").len(), 1);
    // A file over the limit is cut off while reading.
    let tiny = SlackMedia::new(reqwest::Client::new(), &base, SLACK_TOKEN, 4);
    assert!(matches!(
        tiny.download(pending).await,
        Err(DownloadError::TooLarge { limit: 4, .. })
    ));
    // A file shared with its id only is looked up with `files.info` first.
    let by_id = PendingMedia {
        source: MediaSource::SlackFile("F2".to_owned()),
        ..url_media("", None)
    };
    assert_eq!(media.download(&by_id).await.expect("downloaded").bytes, PNG);
    let missing = PendingMedia {
        source: MediaSource::SlackFile("F404".to_owned()),
        ..url_media("", None)
    };
    assert!(matches!(
        media.download(&missing).await,
        Err(DownloadError::Refused(why)) if why.contains("file_not_found")
    ));
    // A 503 is transient (the webhook is answered 503 and retried); a 404 is for good.
    let busy = url_media(&format!("{base}/busy"), None);
    assert!(matches!(
        media.download(&busy).await,
        Err(DownloadError::Transient(_))
    ));
    let gone = url_media(&format!("{base}/slack/F9/gone.png"), None);
    assert!(matches!(
        media.download(&gone).await,
        Err(DownloadError::Refused(_))
    ));
}

// ---------------------------------------------------------------------------------------------
// Discord
// ---------------------------------------------------------------------------------------------

fn discord(interaction: &Value) -> Result<WebhookOutcome, WebhookError> {
    let key = SigningKey::from_bytes(&[7; 32]);
    let public = DiscordPublicKey::parse(&hex::encode(key.verifying_key().as_bytes()))
        .expect("test fixture");
    let body = serde_json::to_vec(interaction).expect("test fixture");
    let timestamp = NOW_SECS.to_string();
    let mut signed = timestamp.as_bytes().to_vec();
    signed.extend_from_slice(&body);
    let mut headers = HeaderMap::new();
    headers.insert(
        "X-Signature-Ed25519",
        HeaderValue::from_str(&hex::encode(key.sign(&signed).to_bytes())).expect("test fixture"),
    );
    headers.insert(
        "X-Signature-Timestamp",
        HeaderValue::from_str(&timestamp).expect("test fixture"),
    );
    DiscordChannel::new(public).handle(&WebhookRequest {
        sub_path: "",
        headers: &headers,
        body: &body,
        now_ms: NOW_SECS * 1000,
    })
}

#[tokio::test]
async fn a_discord_attachment_is_reported_and_fetched_from_the_cdn_only() {
    let (base, _server) = file_server().await;
    let url = format!("{base}/attachments/1/2/cat.png");
    let id = ((NOW_SECS * 1000 - 1_420_070_400_000) << 22).to_string();
    let message = expect_message(discord(&json!({
        "id": id,
        "type": 2,
        "token": "aW50ZXJhY3Rpb24.dG9rZW4-_x",
        "channel": { "id": "6600000000000000006", "type": 1 },
        "channel_id": "6600000000000000006",
        "user": { "id": "7700000000000000007", "username": "bob" },
        "data": {
            "name": "ask", "type": 1,
            "options": [{"name": "file", "type": 11, "value": "900"}],
            "resolved": {"attachments": {"900": {
                "id": "900", "url": url, "filename": "cat.png",
                "content_type": "image/png", "size": PNG.len(),
            }}},
        },
    })));
    assert_eq!(
        message.message.text, "<media:image>",
        "a file without a question"
    );
    let [pending] = message.media.as_slice() else {
        panic!("{:?}", message.media);
    };
    assert_eq!(pending.source, MediaSource::Url(url.clone()));
    assert_eq!(pending.mime.as_deref(), Some("image/png"));

    let media = DiscordMedia::new(reqwest::Client::new(), &base, 100 * MB);
    let downloaded = media.download(pending).await.expect("downloaded");
    assert_eq!(downloaded.bytes, PNG);
    // Discord never resends a command: a server error skips the file instead of failing it.
    assert!(matches!(
        media.download(&url_media(&format!("{base}/busy"), None)).await,
        Err(DownloadError::Refused(why)) if why.contains("503")
    ));
    // Only Discord's CDN hosts, over https.
    let cdn = DiscordMedia::new(reqwest::Client::new(), "https://discord.com/api/v10", MB);
    for refused in [
        url.as_str(),
        "https://evil.example/attachments/1/2/cat.png",
        "http://cdn.discordapp.com/attachments/1/2/cat.png",
    ] {
        assert!(
            matches!(
                cdn.download(&url_media(refused, None)).await,
                Err(DownloadError::Refused(_))
            ),
            "{refused}"
        );
    }
    assert!(url_is_allowed(
        "https://media.discordapp.net/attachments/1/2/cat.png",
        &clawless_channels::discord::CDN_HOSTS,
        None
    ));
}

// ---------------------------------------------------------------------------------------------
// Generic
// ---------------------------------------------------------------------------------------------

#[test]
fn generic_attachments_are_decoded_from_base64_or_announced_by_an_http_url() {
    let handle = |body: &str| {
        let mut headers = HeaderMap::new();
        headers.insert(
            SIGNATURE_HEADER,
            HeaderValue::from_str(&sign(b"generic-secret", body.as_bytes())).expect("ascii"),
        );
        GenericWebhook::new(b"generic-secret").handle(&WebhookRequest {
            sub_path: "",
            headers: &headers,
            body: body.as_bytes(),
            now_ms: NOW_SECS * 1000,
        })
    };
    let message = expect_message(handle(
        r#"{"message_id":"g1","chat_id":"c","sender_id":"u","text":"see","chat_type":"direct","attachments":[{"name":"a.png","mime":"image/png","data":"iVBORw=="}]}"#,
    ));
    assert_eq!(message.message.text, "see");
    assert_eq!(message.media[0].kind, MediaKind::Image);
    assert_eq!(
        message.media[0].source,
        MediaSource::Inline(b"\x89PNG".to_vec())
    );
    // A URL is only announced here; ingress fetches it (under web_fetch's address policy).
    let by_url = expect_message(handle(
        r#"{"message_id":"g5","chat_id":"c","sender_id":"u","text":"","chat_type":"direct","attachments":[{"name":"a.pdf","url":"https://example.com/a.pdf"}]}"#,
    ));
    assert_eq!(by_url.message.text, "<media:document>");
    assert_eq!(
        by_url.media[0].source,
        MediaSource::Url("https://example.com/a.pdf".to_owned())
    );
    assert_eq!(by_url.media[0].size, None);
    for (body, why) in [
        (
            r#"{"message_id":"g2","chat_id":"c","sender_id":"u","text":"x","chat_type":"direct","attachments":[{"url":"file:///etc/passwd"}]}"#,
            "http or https",
        ),
        (
            r#"{"message_id":"g6","chat_id":"c","sender_id":"u","text":"x","chat_type":"direct","attachments":[{"url":"https://example.com/a","data":"aGk="}]}"#,
            "exactly one",
        ),
        (
            r#"{"message_id":"g3","chat_id":"c","sender_id":"u","text":"x","chat_type":"direct","attachments":[{"data":""}]}"#,
            "empty",
        ),
        (
            r#"{"message_id":"g4","chat_id":"c","sender_id":"u","text":"","chat_type":"direct"}"#,
            "text must not be empty",
        ),
    ] {
        match handle(body) {
            Err(WebhookError::BadRequest(reason)) => assert!(reason.contains(why), "{reason}"),
            other => panic!("{body}: {other:?}"),
        }
    }
}
