//! Media end to end through `clawless local`, with a scripted model (Anthropic format) and a
//! stand-in of the OpenAI transcription endpoint on the same scripted server: a photo with a
//! caption reaches the model as an image block; a voice note without text is transcribed and
//! answered; a text file's content reaches the model fenced as untrusted; a reply's `MEDIA:`
//! line reaches the chat with a signed link that serves the file (and nothing once tampered
//! with). Everything but the model is the real system: the signed webhook, the blob store,
//! the turn queue, the turn engine, the reply sender, the local media route.

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use clawless_channels::sign;
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_runtime::ClawlessConfig;
use clawless_runtime::local_mode::{LocalOptions, RunningLocal, start_local};
use serde_json::{Value, json};
use support::{Fixture, ReplyReceiver, SECRET, anthropic_text};

const MESSAGES: &str = "/v1/messages";
const TRANSCRIPTIONS: &str = "/v1/audio/transcriptions";
/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0xF8, 0xCF, 0xC0, 0xF0,
    0x1F, 0x00, 0x05, 0x00, 0x01, 0xFF, 0x89, 0x99, 0x3D, 0x1D, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82,
];

async fn start(
    fixture: &Fixture, model: &ScriptedServer, receiver: &ReplyReceiver,
) -> RunningLocal {
    let yaml = fixture
        .config_yaml(&model.base_url(), &receiver.url)
        .replace("    secret:", "    owners: [user-1]\n    secret:")
        .replace(
            "  providers:\n",
            &format!(
                "  providers:\n    openai:\n      apiKey: test-openai\n      baseUrl: {}/v1\n",
                model.base_url()
            ),
        );
    let config = ClawlessConfig::from_yaml(&yaml, "test").expect("test fixture");
    let built = clawless_llm::build_model(&config.models, &|_| None).expect("test fixture");
    start_local(LocalOptions {
        config,
        state_dir: fixture.state_dir(),
        listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        model: built,
        secrets: Default::default(),
    })
    .await
    .expect("test fixture")
}

async fn send(running: &RunningLocal, id: &str, text: &str, attachments: Value) {
    let body = serde_json::to_vec(&json!({
        "message_id": id, "chat_id": "chat-1", "sender_id": "user-1",
        "text": text, "chat_type": "direct", "attachments": attachments
    }))
    .expect("test fixture");
    let status = reqwest::Client::new()
        .post(format!("http://{}/webhook/generic", running.addr))
        .header("content-type", "application/json")
        .header("x-clawless-signature", sign(SECRET.as_bytes(), &body))
        .body(body)
        .send()
        .await
        .expect("test fixture")
        .status();
    assert_eq!(status.as_u16(), 202, "{id}");
}

/// The content blocks of the last user message of model request `index`.
fn user_blocks(model: &ScriptedServer, index: usize) -> Vec<Value> {
    let requests = model.requests_to(MESSAGES);
    let messages = requests[index].body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let user = messages
        .iter()
        .rev()
        .find(|message| message["role"] == "user")
        .cloned()
        .unwrap_or(Value::Null);
    match &user["content"] {
        Value::Array(blocks) => blocks.clone(),
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        _ => Vec::new(),
    }
}

fn text_of(blocks: &[Value]) -> String {
    blocks
        .iter()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn photos_voice_notes_files_and_media_lines_travel_both_ways() {
    let fixture = Fixture::new();
    std::fs::write(fixture.path().join("workspace/chart.png"), PNG).expect("test fixture");
    let model = ScriptedServer::start().await;
    model.push(MESSAGES, ScriptedReply::json(anthropic_text("A receipt.")));
    model.push(
        TRANSCRIPTIONS,
        ScriptedReply::json(json!({"text": "remind me to buy milk"})),
    );
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("Noted: milk.")),
    );
    model.push(MESSAGES, ScriptedReply::json(anthropic_text("Two rows.")));
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("Here is the chart.\nMEDIA:chart.png")),
    );
    let receiver = ReplyReceiver::start().await;
    let running = start(&fixture, &model, &receiver).await;

    // A photo with a caption: an image block after the caption.
    send(
        &running,
        "m-1",
        "what is this?",
        json!([{"name": "receipt.png", "mime": "image/png", "data": STANDARD.encode(PNG)}]),
    )
    .await;
    receiver.wait_for(1, Duration::from_secs(20)).await;
    let blocks = user_blocks(&model, 0);
    let image = blocks
        .iter()
        .find(|block| block["type"] == "image")
        .unwrap_or_else(|| panic!("no image block: {blocks:?}"));
    assert_eq!(image["source"]["media_type"], "image/png");
    assert_eq!(image["source"]["data"], STANDARD.encode(PNG));
    let text = text_of(&blocks);
    assert!(text.contains("what is this?"), "{text}");
    assert!(text.contains("[media attached: "), "{text}");

    // A voice note without text: transcribed, and answered from the transcript.
    let voice = vec![b'O'; 2048];
    send(
        &running,
        "m-2",
        "",
        json!([{"name": "voice.ogg", "mime": "audio/ogg", "data": STANDARD.encode(&voice)}]),
    )
    .await;
    receiver.wait_for(2, Duration::from_secs(20)).await;
    let transcription = &model.requests_to(TRANSCRIPTIONS)[0];
    assert_eq!(
        transcription.header("authorization"),
        Some("Bearer test-openai")
    );
    let text = text_of(&user_blocks(&model, 1));
    assert!(
        text.contains("Transcript:\nremind me to buy milk"),
        "{text}"
    );
    assert!(
        !text.contains("voice.ogg"),
        "a transcribed note is not listed: {text}"
    );

    // A text file: its content, fenced as untrusted.
    send(
        &running,
        "m-3",
        "sum these",
        json!([{"name": "rows.csv", "mime": "text/csv", "data": STANDARD.encode("a,1\nb,2\n")}]),
    )
    .await;
    receiver.wait_for(3, Duration::from_secs(20)).await;
    let text = text_of(&user_blocks(&model, 2));
    assert!(text.contains("<file name=\"rows.csv\""), "{text}");
    assert!(
        text.contains("<<<EXTERNAL_UNTRUSTED_CONTENT id=\""),
        "{text}"
    );
    assert!(text.contains("a,1\nb,2"), "{text}");

    // A reply with a MEDIA: line: the file goes with it, the line does not.
    send(&running, "m-4", "draw me the chart", json!([])).await;
    let posted = receiver.wait_for(4, Duration::from_secs(20)).await;
    let last = &posted[3].body;
    assert_eq!(last["text"], "Here is the chart.");
    assert_eq!(last["attachments"][0]["name"], "chart.png");
    assert_eq!(last["attachments"][0]["mime"], "image/png");
    assert_eq!(last["attachments"][0]["size"], PNG.len());
    assert!(last["attachments"][0].get("data").is_none(), "{last}");
    // The file goes by link: the local server's signed /media/ route serves the PNG.
    let url = last["attachments"][0]["url"].as_str().expect("a link");
    assert!(
        url.starts_with(&format!("http://{}/media/outbound/", running.addr)),
        "{url}"
    );
    let fetched = reqwest::get(url).await.expect("GET the link");
    assert_eq!(fetched.status().as_u16(), 200);
    assert_eq!(
        fetched
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok()),
        Some("image/png")
    );
    assert_eq!(fetched.bytes().await.expect("body").as_ref(), PNG);
    // A link with its signature, type or expiry changed serves nothing.
    let (unsigned, signature) = url.rsplit_once("&sig=").expect("signed");
    let flipped = if signature.starts_with('0') { "1" } else { "0" };
    for tampered in [
        format!("{unsigned}&sig={flipped}{}", &signature[1..]),
        url.replace("type=image%2Fpng", "type=text%2Fhtml"),
        url.replace("&expires=", "&expires=9"),
    ] {
        let status = reqwest::get(&tampered).await.expect("GET").status();
        assert_eq!(status.as_u16(), 403, "{tampered}");
    }
    let status = reqwest::get(unsigned).await.expect("GET").status();
    assert_eq!(status.as_u16(), 401);

    // /status says what was done with the last attachments.
    send(&running, "m-5", "/status", json!([])).await;
    let posted = receiver.wait_for(5, Duration::from_secs(20)).await;
    let status = posted[4].body["text"].as_str().unwrap_or_default();
    assert!(status.contains("📎 Media: file read"), "{status}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_photo_is_scaled_down_before_the_model_sees_it() {
    let fixture = Fixture::new();
    let model = ScriptedServer::start().await;
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("A wide photo.")),
    );
    let receiver = ReplyReceiver::start().await;
    let running = start(&fixture, &model, &receiver).await;
    let mut wide = std::io::Cursor::new(Vec::new());
    image::RgbImage::new(2400, 600)
        .write_to(&mut wide, image::ImageFormat::Png)
        .expect("test fixture");
    send(
        &running,
        "m-1",
        "",
        json!([{"name": "wide.png", "mime": "image/png", "data": STANDARD.encode(wide.get_ref())}]),
    )
    .await;
    receiver.wait_for(1, Duration::from_secs(20)).await;
    let blocks = user_blocks(&model, 0);
    let image = blocks
        .iter()
        .find(|block| block["type"] == "image")
        .unwrap_or_else(|| panic!("no image block: {blocks:?}"));
    let data = STANDARD
        .decode(image["source"]["data"].as_str().expect("base64"))
        .expect("base64");
    let shown = image::load_from_memory(&data).expect("an image");
    assert_eq!((shown.width(), shown.height()), (1200, 300));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_photo_for_a_model_without_vision_is_described_by_the_image_model() {
    let fixture = Fixture::new();
    let model = ScriptedServer::start().await;
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("A till receipt for 12.40 EUR.")),
    );
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("You spent 12.40 EUR.")),
    );
    let receiver = ReplyReceiver::start().await;
    let yaml = fixture
        .config_yaml(&model.base_url(), &receiver.url)
        .replace("    secret:", "    owners: [user-1]\n    secret:")
        .replace("      apiKey: test-key\n", "      apiKey: test-key\n      images: false\n")
        .replace(
            "  providers:\n",
            &format!(
                "  providers:\n    eyes:\n      api: anthropic\n      apiKey: test-eyes\n      baseUrl: {}\n      images: true\n",
                model.base_url()
            ),
        )
        .replace(
            "  defaults:\n",
            "  defaults:\n    imageModel: eyes/claude-eyes\n",
        );
    let config = ClawlessConfig::from_yaml(&yaml, "test").expect("test fixture");
    let built = clawless_llm::build_model(&config.models, &|_| None).expect("test fixture");
    let running = start_local(LocalOptions {
        config,
        state_dir: fixture.state_dir(),
        listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        model: built,
        secrets: Default::default(),
    })
    .await
    .expect("test fixture");

    send(
        &running,
        "m-1",
        "how much was it?",
        json!([{"name": "receipt.png", "mime": "image/png", "data": STANDARD.encode(PNG)}]),
    )
    .await;
    let posted = receiver.wait_for(1, Duration::from_secs(20)).await;
    assert_eq!(posted[0].body["text"], "You spent 12.40 EUR.");
    let requests = model.requests_to(MESSAGES);
    assert_eq!(requests.len(), 2);
    // First the image model, shown the photo with the default prompt.
    assert_eq!(requests[0].body["model"], "claude-eyes");
    assert_eq!(requests[0].header("x-api-key"), Some("test-eyes"));
    let shown = user_blocks(&model, 0);
    assert!(
        shown.iter().any(|block| block["type"] == "image"),
        "{shown:?}"
    );
    assert_eq!(text_of(&shown), "Describe the image.");
    // Then the chat model: no image, the description in its text.
    assert_eq!(requests[1].body["model"], "claude-test");
    let blocks = user_blocks(&model, 1);
    assert!(
        !blocks.iter().any(|block| block["type"] == "image"),
        "{blocks:?}"
    );
    let text = text_of(&blocks);
    assert!(
        text.contains(
            "[Image]\nUser text:\nhow much was it?\nDescription:\nA till receipt for 12.40 EUR."
        ),
        "{text}"
    );
    assert!(text.contains("[media attached: media/inbound/"), "{text}");

    send(&running, "m-2", "/status", json!([])).await;
    let posted = receiver.wait_for(2, Duration::from_secs(20)).await;
    let status = posted[1].body["text"].as_str().unwrap_or_default();
    assert!(
        status.contains("📎 Media: image ok (eyes/claude-eyes)"),
        "{status}"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_sends_back_a_stored_photo_only_when_its_chat_has_seen_it() {
    let fixture = Fixture::new();
    let model = ScriptedServer::start().await;
    model.push(MESSAGES, ScriptedReply::json(anthropic_text("Got it.")));
    let receiver = ReplyReceiver::start().await;
    let running = start(&fixture, &model, &receiver).await;
    send(
        &running,
        "m-1",
        "keep this",
        json!([{"name": "receipt.png", "mime": "image/png", "data": STANDARD.encode(PNG)}]),
    )
    .await;
    receiver.wait_for(1, Duration::from_secs(20)).await;
    let text = text_of(&user_blocks(&model, 0));
    let key = text
        .split("[media attached: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("no media note: {text}"))
        .to_owned();
    assert!(key.starts_with("media/inbound/generic/"), "{key}");

    // The photo this chat sent, and a stored file it never saw.
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text(&format!(
            "Here it is.\nMEDIA:{key}\nMEDIA:media/outbound/0000.png"
        ))),
    );
    send(&running, "m-2", "send it back", json!([])).await;
    let posted = receiver.wait_for(2, Duration::from_secs(20)).await;
    let reply = &posted[1].body;
    assert_eq!(
        reply["text"],
        "Here it is.\n\n(Not sent: media/outbound/0000.png (not a file this chat has seen).)"
    );
    let attachments = reply["attachments"].as_array().cloned().unwrap_or_default();
    assert_eq!(attachments.len(), 1, "{reply}");
    assert_eq!(attachments[0]["mime"], "image/png");
    running.stop().await;
}
