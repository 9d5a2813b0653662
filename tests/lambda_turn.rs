//! The local end-to-end scenario through the deployed code: the real `webhook` and `turn`
//! Lambda binaries under `cargo lambda watch`, with S3, DynamoDB and SQS on moto.
//!
//! A signed message goes to the webhook's function URL → it lands on the FIFO turn queue →
//! the test hands the queued message to `turn` as an SQS batch, as the event source mapping
//! would → the model (a scripted server speaking the Anthropic Messages format) sees the
//! skills block from S3 and only the allowed tools → it reads the SKILL.md from S3 through
//! `read` → it answers → the signed reply reaches the channel's reply URL, once, and the
//! session is in DynamoDB. A redelivered batch changes nothing.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use clawless_aws::S3ObjectStore;
use clawless_aws::testing::{
    dynamodb_client, fresh_bucket, fresh_fifo_queue, fresh_table, moto_endpoint, moto_sdk_config,
    s3_client, sqs_client,
};
use clawless_base::object_store::{ObjectStore, PutCondition};
use clawless_channels::{SIGNATURE_HEADER, sign, verify};
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_system_tests::LambdaWatch;
use serde_json::{Value, json};

const MESSAGES: &str = "/v1/messages";
const SECRET: &str = "test-secret-0123456789";
const SESSION_KEY: &str = "agent:main:main";
const SKILL_MD: &str = "---\nname: weather\ndescription: Get the current weather for a city.\n---\n# Weather\nAsk wttr.in for the forecast.\n";

/// The first call to each function waits for `cargo lambda` to build it.
const FIRST_BUILD: Duration = Duration::from_secs(900);
/// Later calls answer from a running function.
const WARM: Duration = Duration::from_secs(120);

/// `clawless.yaml` of the deployment in `bucket`.
fn config_yaml(bucket: &str, model_base_url: &str, reply_url: &str) -> String {
    format!(
        r#"
skills:
  bundled: s3://{bucket}/skills/bundled
agents:
  defaults:
    workspace: s3://{bucket}/agents/main/workspace
models:
  primary: anthropic/claude-test
  maxRetries: 0
  providers:
    anthropic:
      apiKey: test-key
      baseUrl: {model_base_url}
tools:
  deny: [web_fetch, write]
channels:
  generic:
    secret: {SECRET}
    replyUrl: {reply_url}
    owners: [user-1]
"#
    )
}

fn message(id: &str, text: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "message_id": id, "chat_id": "chat-1", "sender_id": "user-1",
        "text": text, "chat_type": "direct"
    }))
    .unwrap()
}

fn anthropic_tool_use(id: &str, name: &str, input: Value) -> Value {
    json!({
        "id": format!("msg_{id}"), "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "tool_use", "id": id, "name": name, "input": input}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 100, "output_tokens": 10}
    })
}

fn anthropic_text(text: &str) -> Value {
    json!({
        "id": "msg_text", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "usage": {"input_tokens": 120, "output_tokens": 8}
    })
}

/// One reply POST as received.
#[derive(Debug, Clone)]
struct Posted {
    signature_ok: bool,
    idempotency_key: String,
    body: Value,
}

/// Records every reply POSTed to `url` (on 127.0.0.1).
#[derive(Clone)]
struct ReplyReceiver {
    url: String,
    posted: Arc<Mutex<Vec<Posted>>>,
}

impl ReplyReceiver {
    async fn start() -> Self {
        let posted: Arc<Mutex<Vec<Posted>>> = Arc::default();
        let sink = Arc::clone(&posted);
        let app = Router::new().route(
            "/replies",
            post(move |headers: HeaderMap, body: Bytes| {
                let sink = Arc::clone(&sink);
                async move {
                    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
                    sink.lock().unwrap().push(Posted {
                        signature_ok: verify(SECRET.as_bytes(), &body, header(SIGNATURE_HEADER))
                            .is_ok(),
                        idempotency_key: header("idempotency-key").unwrap_or_default().to_owned(),
                        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                    });
                    StatusCode::OK
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/replies", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, posted }
    }

    fn posted(&self) -> Vec<Posted> {
        self.posted.lock().unwrap().clone()
    }
}

/// The SQS event the turn queue's event source mapping would deliver for `message`, as its
/// `receive_count`-th delivery.
fn sqs_event(message: &aws_sdk_sqs::types::Message, queue_url: &str, receive_count: u32) -> Value {
    let mut event = clawless_system_tests::sqs_event(message, queue_url);
    event["Records"][0]["attributes"]["ApproximateReceiveCount"] = json!(receive_count.to_string());
    event
}

fn system_prompt(request: &Value) -> String {
    request["system"]
        .as_array()
        .unwrap()
        .iter()
        .map(|block| block["text"].as_str().unwrap_or_default())
        .collect()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Runs `f` on the watch from this (multi-threaded) runtime's worker thread; the watch's
/// HTTP calls block, and the model and reply servers keep answering on the other workers.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_message_through_the_lambdas_is_answered_after_the_model_reads_a_skill_from_s3() {
    // GIVEN a deployment on moto: skills and workspace in a bucket, config in the bucket,
    // a blob bucket, the table and the FIFO turn queue
    let started = Instant::now();
    let endpoint = moto_endpoint();
    let sdk = moto_sdk_config().await;
    let s3 = s3_client(&sdk);
    let dynamodb = dynamodb_client(&sdk);
    let sqs = sqs_client(&sdk);
    let bucket = fresh_bucket(&s3, "lambda-turn").await;
    let blob_bucket = fresh_bucket(&s3, "lambda-turn-blobs").await;
    let table = fresh_table(&dynamodb).await;
    let queue_url = fresh_fifo_queue(&sqs).await;
    let store = S3ObjectStore::new(s3.clone(), bucket.clone());
    let put = |key: &'static str, bytes: Vec<u8>| {
        let store = &store;
        async move {
            store
                .put(key, bytes, PutCondition::Always)
                .await
                .unwrap_or_else(|err| panic!("uploading {key}: {err}"));
        }
    };
    put(
        "skills/bundled/weather/SKILL.md",
        SKILL_MD.as_bytes().to_vec(),
    )
    .await;
    put(
        "agents/main/workspace/AGENTS.md",
        b"Be brief and friendly.\n".to_vec(),
    )
    .await;

    // AND a model that reads the weather skill, then answers
    let model_server = ScriptedServer::start().await;
    let location = format!("s3://{bucket}/skills/bundled/weather/SKILL.md");
    model_server.push(
        MESSAGES,
        ScriptedReply::json(anthropic_tool_use(
            "toolu_1",
            "read",
            json!({ "path": location }),
        )),
    );
    model_server.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("It is sunny in Paris.")),
    );
    let receiver = ReplyReceiver::start().await;
    let yaml = config_yaml(&bucket, &model_server.base_url(), &receiver.url);
    put("clawless.yaml", yaml.into_bytes()).await;

    // AND both functions under one `cargo lambda watch`, configured as the template does
    let env = [
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_ACCESS_KEY_ID", "test".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
        ("CLAWLESS_S3_FORCE_PATH_STYLE", "true".to_owned()),
        ("CLAWLESS_TABLE", table.clone()),
        ("CLAWLESS_TURN_QUEUE_URL", queue_url.clone()),
        ("CLAWLESS_BLOB_BUCKET", blob_bucket.clone()),
        ("CLAWLESS_CONFIG", format!("s3://{bucket}/clawless.yaml")),
    ];
    let mut watch = LambdaWatch::start(&env);
    let json_type = ("content-type", "application/json");
    let post_webhook = |watch: &mut LambdaWatch, body: &[u8], signature: Option<&str>| {
        let mut headers = vec![json_type];
        if let Some(signature) = signature {
            headers.push((SIGNATURE_HEADER, signature));
        }
        let (status, text) =
            blocking(|| watch.post("webhook", "/webhook/generic", &headers, body, WARM));
        (
            status,
            serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text)),
        )
    };

    // Warm both functions up with calls that change nothing, so every call below reaches a
    // running function exactly once.
    let (status, answer) =
        blocking(|| watch.post("webhook", "/webhook/nope", &[json_type], b"{}", FIRST_BUILD));
    assert_eq!(status, 404, "an unknown channel: {answer}");
    let (status, answer) = blocking(|| watch.invoke("turn", &json!({"Records": []}), FIRST_BUILD));
    assert_eq!(status, 200, "an empty batch: {answer}");
    let built = started.elapsed();

    // WHEN a signed message arrives at the webhook
    let body = message("m-1", "What's the weather in Paris?");
    let signature = sign(SECRET.as_bytes(), &body);
    let (status, answer) = post_webhook(&mut watch, &body, Some(&signature));
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["session"], SESSION_KEY);

    // THEN a redelivery is a duplicate; unsigned, forged and malformed calls are refused
    let (status, answer) = post_webhook(&mut watch, &body, Some(&signature));
    assert_eq!((status, &answer), (200, &json!({"duplicate": true})));
    let (status, _) = post_webhook(&mut watch, &body, None);
    assert_eq!(status, 401);
    let other = message("m-2", "hi");
    let forged = sign(b"wrong-secret", &other);
    let (status, _) = post_webhook(&mut watch, &other, Some(&forged));
    assert_eq!(status, 401);
    let junk = b"{\"message_id\": 3}".to_vec();
    let junk_signature = sign(SECRET.as_bytes(), &junk);
    let (status, answer) = post_webhook(&mut watch, &junk, Some(&junk_signature));
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("message_id"),
        "the reason is shown: {answer}"
    );

    // AND exactly one turn event is queued, grouped by the session
    let received = sqs
        .receive_message()
        .queue_url(&queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await
        .unwrap();
    let queued = received.messages();
    assert_eq!(
        queued.len(),
        1,
        "one event for one accepted message: {queued:?}"
    );
    let group = queued[0]
        .attributes()
        .and_then(|attributes| attributes.get(&MessageSystemAttributeName::MessageGroupId));
    assert_eq!(group.map(String::as_str), Some(SESSION_KEY));
    let event = sqs_event(&queued[0], &queue_url, 1);

    // WHEN the turn function gets the batch
    let (status, answer) = blocking(|| watch.invoke("turn", &event, WARM));
    assert_eq!(status, 200, "{answer}");
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["batchItemFailures"], json!([]), "{answer}");

    // THEN the model saw the skills block from S3 and only the allowed tools
    let requests = model_server.requests_to(MESSAGES);
    assert_eq!(requests.len(), 2, "a tool call and an answer");
    let first = &requests[0].body;
    let system = system_prompt(first);
    assert!(system.contains("<available_skills>"), "{system}");
    assert!(system.contains("<name>weather</name>"), "{system}");
    assert!(
        system.contains(&format!("<location>{location}</location>")),
        "{system}"
    );
    assert!(
        system.contains("Be brief and friendly."),
        "AGENTS.md is injected"
    );
    let tools = tool_names(first);
    assert!(tools.iter().any(|tool| tool == "read"), "{tools:?}");
    assert!(
        !tools.iter().any(|tool| tool == "write"),
        "denied by policy: {tools:?}"
    );
    assert!(
        !tools.iter().any(|tool| tool == "web_fetch"),
        "denied by policy: {tools:?}"
    );
    // AND the second call carried the SKILL.md from S3 as the read result
    let second = requests[1].body.to_string();
    assert!(second.contains("tool_result"), "{second}");
    assert!(second.contains("Ask wttr.in for the forecast."), "{second}");

    // AND the signed reply reached the reply URL once
    let posted = receiver.posted();
    assert_eq!(posted.len(), 1, "one reply: {posted:?}");
    assert!(posted[0].signature_ok, "signed with the channel secret");
    assert_eq!(posted[0].body["text"], "It is sunny in Paris.");
    assert_eq!(posted[0].body["chat_id"], "chat-1");
    assert_eq!(
        posted[0].idempotency_key,
        posted[0].body["reply_id"].as_str().unwrap()
    );

    // AND the session is in DynamoDB: its meta, then its steps
    let items = dynamodb
        .query()
        .table_name(&table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", AttributeValue::S(SESSION_KEY.to_owned()))
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    let sort_keys: Vec<&str> = items
        .items()
        .iter()
        .map(|item| item["sk"].as_s().unwrap().as_str())
        .collect();
    assert_eq!(sort_keys.last(), Some(&"tail"), "{sort_keys:?}");
    let steps = &items.items()[..items.items().len() - 1];
    assert!(
        steps.len() >= 4,
        "message, tool call, tool result, answer: {sort_keys:?}"
    );
    assert!(
        steps
            .iter()
            .all(|item| item["sk"].as_s().unwrap().starts_with("step#")),
        "{sort_keys:?}"
    );
    let transcript: String = steps
        .iter()
        .map(|item| item["body"].as_s().unwrap().as_str())
        .collect();
    assert!(
        transcript.contains("What's the weather in Paris?"),
        "{transcript}"
    );
    assert!(transcript.contains("It is sunny in Paris."), "{transcript}");

    // WHEN SQS delivers the same batch again (the function's acknowledgement was lost)
    let redelivery = sqs_event(&queued[0], &queue_url, 2);
    let (status, answer) = blocking(|| watch.invoke("turn", &redelivery, WARM));
    assert_eq!(status, 200, "{answer}");
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["batchItemFailures"], json!([]), "{answer}");

    // THEN nothing is asked or sent twice
    assert_eq!(
        model_server.requests_to(MESSAGES).len(),
        2,
        "no new model request"
    );
    assert_eq!(receiver.posted().len(), 1, "no second reply");
    drop(watch);
    eprintln!(
        "lambda_turn: functions ready after {built:?}, whole test {:?}",
        started.elapsed()
    );
}
