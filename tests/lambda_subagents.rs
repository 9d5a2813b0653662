//! Sub-agents through the deployed code: the real `webhook` and `turn` Lambda binaries under
//! `cargo lambda watch`, with DynamoDB, S3 and SQS on moto, and a scripted model answering
//! by content. A message makes the parent spawn a child → the child's start is on the FIFO
//! sub-agent turn queue (`CLAWLESS_SUBAGENT_TURN_QUEUE_URL`) in its own group, and nothing on
//! the main turn queue → the turn function runs the child → its announce is on the main queue
//! in the parent's group → the turn function runs the parent, whose relay reaches the chat
//! once. A redelivered announce changes nothing.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_sqs::types::{Message, MessageSystemAttributeName};
use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::post;
use clawless_aws::S3ObjectStore;
use clawless_aws::testing::{
    dynamodb_client, fresh_bucket, fresh_fifo_queue, fresh_table, moto_endpoint, moto_sdk_config,
    s3_client, sqs_client,
};
use clawless_base::object_store::{ObjectStore, PutCondition};
use clawless_channels::{SIGNATURE_HEADER, sign};
use clawless_llm::testing::{RecordedRequest, ScriptedReply, ScriptedServer};
use clawless_system_tests::LambdaWatch;
use serde_json::{Value, json};

const MESSAGES: &str = "/v1/messages";
const SECRET: &str = "test-secret-0123456789";
const PARENT: &str = "agent:main:main";
const FIRST_BUILD: Duration = Duration::from_secs(900);
const WARM: Duration = Duration::from_secs(120);

fn text(text: &str) -> ScriptedReply {
    ScriptedReply::json(json!({
        "id": "msg_text", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "usage": {"input_tokens": 120, "output_tokens": 8}
    }))
}

fn last_text(request: &RecordedRequest) -> String {
    let Some(last) = request.body["messages"].as_array().and_then(|m| m.last()) else {
        return String::new();
    };
    last["content"].to_string()
}

/// Parent: spawns on "delegate", says "On it." after the tool, relays a completion event.
/// Child: reports its task.
fn script(model: &ScriptedServer) {
    model.respond_with(MESSAGES, |request| {
        let last = last_text(request);
        if request.raw_body.contains("[Subagent Task]: ") {
            return Some(text("RESULT(counted 3 files)"));
        }
        if last.contains("[Internal task completion event]") {
            return Some(text("Your helper counted 3 files."));
        }
        if last.contains("tool_result") {
            return Some(text("On it."));
        }
        if last.contains("delegate") {
            return Some(ScriptedReply::json(json!({
                "id": "msg_spawn", "type": "message", "role": "assistant", "model": "claude-test",
                "content": [{"type": "tool_use", "id": "toolu_spawn", "name": "sessions_spawn",
                             "input": {"task": "count the files", "label": "counter"}}],
                "stop_reason": "tool_use", "usage": {"input_tokens": 100, "output_tokens": 10}
            })));
        }
        None
    });
}

/// Records the texts POSTed to the reply URL.
async fn reply_receiver() -> (String, Arc<Mutex<Vec<String>>>) {
    let posted: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = Arc::clone(&posted);
    let app = Router::new().route(
        "/replies",
        post(move |body: Bytes| {
            let sink = Arc::clone(&sink);
            async move {
                let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                sink.lock()
                    .unwrap()
                    .push(body["text"].as_str().unwrap_or_default().to_owned());
                StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/replies", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, posted)
}

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// Takes the queued messages (one per group at a time, as FIFO hands them out) and deletes
/// them, as the event source mapping does after a successful batch.
async fn take(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> Vec<Message> {
    let received = sqs
        .receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await
        .unwrap();
    let messages = received.messages().to_vec();
    for message in &messages {
        sqs.delete_message()
            .queue_url(queue_url)
            .receipt_handle(message.receipt_handle().unwrap())
            .send()
            .await
            .unwrap();
    }
    messages
}

fn group(message: &Message) -> String {
    message
        .attributes()
        .and_then(|attributes| attributes.get(&MessageSystemAttributeName::MessageGroupId))
        .cloned()
        .unwrap_or_default()
}

fn batch(message: &Message, queue_url: &str, receive_count: u32) -> Value {
    let mut event = clawless_system_tests::sqs_event(message, queue_url);
    event["Records"][0]["attributes"]["ApproximateReceiveCount"] = json!(receive_count.to_string());
    event
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_spawn_the_childs_turn_and_the_announce_run_on_the_lambdas_once() {
    // GIVEN a deployment on moto and a scripted model
    let endpoint = moto_endpoint();
    let sdk = moto_sdk_config().await;
    let s3 = s3_client(&sdk);
    let dynamodb = dynamodb_client(&sdk);
    let sqs = sqs_client(&sdk);
    let bucket = fresh_bucket(&s3, "lambda-subagents").await;
    let blob_bucket = fresh_bucket(&s3, "lambda-subagents-blobs").await;
    let table = fresh_table(&dynamodb).await;
    let queue_url = fresh_fifo_queue(&sqs).await;
    let child_queue_url = fresh_fifo_queue(&sqs).await;
    let model = ScriptedServer::start().await;
    script(&model);
    let (reply_url, posted) = reply_receiver().await;
    let yaml = format!(
        "skills:\n  bundled: s3://{bucket}/skills/bundled\nagents:\n  defaults:\n    workspace: \
         s3://{bucket}/agents/main/workspace\nmodels:\n  primary: anthropic/claude-test\n  \
         maxRetries: 0\n  providers:\n    anthropic:\n      apiKey: test-key\n      baseUrl: {}\n\
         tools:\n  deny: [web_fetch]\nchannels:\n  generic:\n    secret: {SECRET}\n    \
         replyUrl: {reply_url}\n    owners: [user-1]\n",
        model.base_url()
    );
    S3ObjectStore::new(s3.clone(), bucket.clone())
        .put("clawless.yaml", yaml.into_bytes(), PutCondition::Always)
        .await
        .unwrap();
    let env = [
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_ACCESS_KEY_ID", "test".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
        ("CLAWLESS_S3_FORCE_PATH_STYLE", "true".to_owned()),
        ("CLAWLESS_TABLE", table.clone()),
        ("CLAWLESS_TURN_QUEUE_URL", queue_url.clone()),
        ("CLAWLESS_SUBAGENT_TURN_QUEUE_URL", child_queue_url.clone()),
        ("CLAWLESS_BLOB_BUCKET", blob_bucket.clone()),
        ("CLAWLESS_CONFIG", format!("s3://{bucket}/clawless.yaml")),
    ];
    let mut watch = LambdaWatch::start(&env);
    let json_type = ("content-type", "application/json");
    let (status, _) =
        blocking(|| watch.post("webhook", "/webhook/nope", &[json_type], b"{}", FIRST_BUILD));
    assert_eq!(status, 404);
    let (status, _) = blocking(|| watch.invoke("turn", &json!({"Records": []}), FIRST_BUILD));
    assert_eq!(status, 200);

    // WHEN the owner asks the agent to delegate
    let body = serde_json::to_vec(&json!({
        "message_id": "m-1", "chat_id": "chat-1", "sender_id": "user-1",
        "text": "please delegate counting the files", "chat_type": "direct"
    }))
    .unwrap();
    let signature = sign(SECRET.as_bytes(), &body);
    let (status, answer) = blocking(|| {
        watch.post(
            "webhook",
            "/webhook/generic",
            &[json_type, (SIGNATURE_HEADER, &signature)],
            &body,
            WARM,
        )
    });
    assert_eq!(status, 202, "{answer}");
    let inbound = take(&sqs, &queue_url).await;
    assert_eq!(inbound.len(), 1);
    let (status, _) = blocking(|| watch.invoke("turn", &batch(&inbound[0], &queue_url, 1), WARM));
    assert_eq!(status, 200);

    // THEN the parent answered and the child's start is queued in the child's own group, on
    // the sub-agent queue only
    assert_eq!(*posted.lock().unwrap(), ["On it."]);
    let on_main_queue = take(&sqs, &queue_url).await;
    assert!(on_main_queue.is_empty(), "{on_main_queue:?}");
    let starts = take(&sqs, &child_queue_url).await;
    assert_eq!(starts.len(), 1, "{starts:?}");
    let child_group = group(&starts[0]);
    assert!(
        child_group.starts_with("agent:main:subagent:"),
        "{child_group}"
    );

    // WHEN the turn function runs the child
    let (status, _) =
        blocking(|| watch.invoke("turn", &batch(&starts[0], &child_queue_url, 1), WARM));
    assert_eq!(status, 200);

    // THEN the child answered nobody, and its announce is queued in the parent's group, on the
    // main queue
    assert_eq!(*posted.lock().unwrap(), ["On it."]);
    let on_child_queue = take(&sqs, &child_queue_url).await;
    assert!(on_child_queue.is_empty(), "{on_child_queue:?}");
    let announces = take(&sqs, &queue_url).await;
    assert_eq!(announces.len(), 1, "{announces:?}");
    assert_eq!(group(&announces[0]), PARENT);

    // WHEN the turn function runs the parent with it, and then again (a redelivery)
    let (status, _) = blocking(|| watch.invoke("turn", &batch(&announces[0], &queue_url, 1), WARM));
    assert_eq!(status, 200);
    let calls = model.requests_to(MESSAGES).len();
    let (status, answer) =
        blocking(|| watch.invoke("turn", &batch(&announces[0], &queue_url, 2), WARM));
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&answer).unwrap()["batchItemFailures"],
        json!([])
    );

    // THEN the relay reached the chat once, and the redelivery changed nothing
    assert_eq!(
        *posted.lock().unwrap(),
        ["On it.", "Your helper counted 3 files."]
    );
    assert_eq!(model.requests_to(MESSAGES).len(), calls);
    assert!(take(&sqs, &queue_url).await.is_empty());
    assert!(take(&sqs, &child_queue_url).await.is_empty());
    drop(watch);
}
