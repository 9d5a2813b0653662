//! Retries, timeouts and the fallback chain, over real HTTP with recorded (not real) waits.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use clawless_base::model::{ModelError, ModelProvider};
use clawless_base::transcript::AssistantBlock;
use clawless_llm::testing::{RecordingSleeper, ScriptedReply, ScriptedServer};
use clawless_llm::{AnthropicModel, ApiKey, FallbackChain, OpenAiModel, RetryPolicy, Retrying};
use serde_json::json;

use crate::support::{http, request, user};

const ANTHROPIC: &str = "/v1/messages";
const OPENAI: &str = "/v1/chat/completions";

fn anthropic(server: &ScriptedServer) -> Arc<dyn ModelProvider> {
    Arc::new(
        AnthropicModel::new(http(), "claude-sonnet-4-5")
            .with_api_key(ApiKey::new("sk-ant-test"))
            .with_base_url(server.base_url()),
    )
}

fn openai(server: &ScriptedServer) -> Arc<dyn ModelProvider> {
    Arc::new(
        OpenAiModel::new(http(), "gpt-4o-mini")
            .with_api_key(ApiKey::new("sk-openai-test"))
            .with_base_url(format!("{}/v1", server.base_url())),
    )
}

fn retrying(inner: Arc<dyn ModelProvider>, sleeper: &RecordingSleeper) -> Retrying {
    Retrying::new(inner, RetryPolicy::default(), Arc::new(sleeper.clone()))
}

fn anthropic_ok(text: &str) -> ScriptedReply {
    ScriptedReply::json(
        json!({ "content": [{ "type": "text", "text": text }], "stop_reason": "end_turn" }),
    )
}

fn server_error(status: u16) -> ScriptedReply {
    ScriptedReply::status_json(
        status,
        json!({ "type": "error", "error": { "type": "api_error", "message": "boom" } }),
    )
}

#[tokio::test]
async fn rate_limit_waits_for_retry_after_then_succeeds() {
    // GIVEN a 429 asking for 7 s, then an answer
    let server = ScriptedServer::start().await;
    server.push(
        ANTHROPIC,
        ScriptedReply::status_json(429, json!({ "type": "error", "error": { "type": "rate_limit_error", "message": "slow down" } }))
            .with_header("retry-after", "7"),
    );
    server.push(ANTHROPIC, anthropic_ok("finally"));
    let sleeper = RecordingSleeper::new();
    // WHEN called through the retry wrapper
    let response = retrying(anthropic(&server), &sleeper)
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect("answer after retry");
    // THEN it waited exactly the retry-after once and asked twice
    assert_eq!(
        response.content,
        vec![AssistantBlock::Text {
            text: "finally".into()
        }]
    );
    assert_eq!(sleeper.sleeps(), vec![Duration::from_secs(7)]);
    assert_eq!(server.requests_to(ANTHROPIC).len(), 2);
}

#[tokio::test]
async fn rate_limit_honours_an_http_date_and_caps_long_waits() {
    let server = ScriptedServer::start().await;
    let in_a_while = httpdate_in(Duration::from_secs(20));
    server.push(
        ANTHROPIC,
        ScriptedReply::status_json(429, json!({})).with_header("retry-after", in_a_while),
    );
    server.push(
        ANTHROPIC,
        ScriptedReply::status_json(429, json!({})).with_header("retry-after", "3600"),
    );
    server.push(ANTHROPIC, anthropic_ok("ok"));
    let sleeper = RecordingSleeper::new();
    retrying(anthropic(&server), &sleeper)
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect("answer");
    let sleeps = sleeper.sleeps();
    assert_eq!(sleeps.len(), 2);
    // The date is whole seconds, so the wait is a little under 20 s.
    assert!(
        sleeps[0] > Duration::from_secs(17) && sleeps[0] <= Duration::from_secs(20),
        "{sleeps:?}"
    );
    assert_eq!(sleeps[1], RetryPolicy::default().max_retry_after);
}

fn httpdate_in(after: Duration) -> String {
    httpdate::fmt_http_date(SystemTime::now() + after)
}

#[tokio::test]
async fn server_errors_twice_then_success_backs_off_exponentially() {
    // GIVEN two 500s, then an answer
    let server = ScriptedServer::start().await;
    server.push(ANTHROPIC, server_error(500));
    server.push(ANTHROPIC, server_error(502));
    server.push(ANTHROPIC, anthropic_ok("third time"));
    let sleeper = RecordingSleeper::new();
    // WHEN called with the default policy (3 attempts)
    let response = retrying(anthropic(&server), &sleeper)
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect("answer");
    // THEN the third attempt answers after two jittered, growing waits
    assert_eq!(
        response.content,
        vec![AssistantBlock::Text {
            text: "third time".into()
        }]
    );
    let sleeps = sleeper.sleeps();
    assert_eq!(sleeps.len(), 2);
    assert!(
        sleeps[0] >= Duration::from_millis(250) && sleeps[0] <= Duration::from_millis(500),
        "{sleeps:?}"
    );
    assert!(
        sleeps[1] >= Duration::from_millis(500) && sleeps[1] <= Duration::from_millis(1000),
        "{sleeps:?}"
    );
    assert_eq!(server.requests_to(ANTHROPIC).len(), 3);
}

#[tokio::test]
async fn retries_give_up_after_max_attempts_with_the_last_error() {
    let server = ScriptedServer::start().await;
    server.always(ANTHROPIC, server_error(503));
    let sleeper = RecordingSleeper::new();
    let policy = RetryPolicy {
        max_attempts: 4,
        ..RetryPolicy::default()
    };
    let err = Retrying::new(anthropic(&server), policy, Arc::new(sleeper.clone()))
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect_err("exhausted");
    assert!(
        matches!(err, ModelError::Server { status: 503, .. }),
        "{err:?}"
    );
    assert_eq!(server.requests_to(ANTHROPIC).len(), 4);
    assert_eq!(sleeper.sleeps().len(), 3);
}

#[tokio::test]
async fn bad_request_is_not_retried_and_surfaces_the_provider_message() {
    let server = ScriptedServer::start().await;
    server.push(
        OPENAI,
        ScriptedReply::status_json(
            400,
            json!({ "error": { "message": "Invalid 'messages[1].content': string too long.", "type": "invalid_request_error" } }),
        ),
    );
    let sleeper = RecordingSleeper::new();
    let err = retrying(openai(&server), &sleeper)
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect_err("400");
    assert!(
        matches!(&err, ModelError::Invalid { message, .. } if message == "HTTP 400: Invalid 'messages[1].content': string too long."),
        "{err:?}"
    );
    assert!(sleeper.sleeps().is_empty());
    assert_eq!(server.requests_to(OPENAI).len(), 1);
}

#[tokio::test]
async fn slow_response_is_a_timeout_error() {
    let server = ScriptedServer::start().await;
    server.push(
        OPENAI,
        ScriptedReply::json(json!({})).with_delay(Duration::from_secs(5)),
    );
    let model = OpenAiModel::new(http(), "gpt-4o-mini")
        .with_base_url(format!("{}/v1", server.base_url()))
        .with_timeout(Duration::from_millis(300));
    let started = std::time::Instant::now();
    let err = model
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect_err("timeout");
    assert!(
        matches!(err, ModelError::Timeout { after, .. } if after == Duration::from_millis(300)),
        "{err:?}"
    );
    assert!(err.is_retryable());
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn refused_connection_is_a_transport_error() {
    // A port that was just free: nothing listens there now.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let err = OpenAiModel::new(http(), "m")
        .with_base_url(format!("http://127.0.0.1:{port}/v1"))
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect_err("refused");
    assert!(matches!(err, ModelError::Transport { .. }), "{err:?}");
}

#[tokio::test]
async fn fallback_answers_from_the_secondary_after_the_primary_exhausts_its_retries() {
    // GIVEN a primary that only ever answers 503 and a healthy secondary
    let server = ScriptedServer::start().await;
    server.always(ANTHROPIC, server_error(503));
    server.push(
        OPENAI,
        ScriptedReply::json(json!({
            "choices": [{ "message": { "role": "assistant", "content": "from the fallback" }, "finish_reason": "stop" }],
        })),
    );
    let sleeper = RecordingSleeper::new();
    let chain = FallbackChain::new(
        Arc::new(retrying(anthropic(&server), &sleeper)),
        vec![Arc::new(retrying(openai(&server), &sleeper))],
    );
    // WHEN asked
    let response = chain
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect("fallback answer");
    // THEN the primary was tried max_attempts times and the secondary answered, named in the response
    assert_eq!(server.requests_to(ANTHROPIC).len(), 3);
    assert_eq!(server.requests_to(OPENAI).len(), 1);
    assert_eq!(response.model, "openai/gpt-4o-mini");
    assert_eq!(
        response.content,
        vec![AssistantBlock::Text {
            text: "from the fallback".into()
        }]
    );
    assert_eq!(chain.model_ref(), "anthropic/claude-sonnet-4-5");
    assert_eq!(
        chain.model_refs(),
        vec!["anthropic/claude-sonnet-4-5", "openai/gpt-4o-mini"]
    );
}

#[tokio::test]
async fn fallback_moves_on_after_an_auth_failure_but_not_after_a_bad_request() {
    let server = ScriptedServer::start().await;
    server.push(
        ANTHROPIC,
        ScriptedReply::status_json(401, json!({ "type": "error", "error": { "type": "authentication_error", "message": "invalid x-api-key" } })),
    );
    server.push(
        OPENAI,
        ScriptedReply::json(
            json!({ "choices": [{ "message": { "content": "ok" }, "finish_reason": "stop" }] }),
        ),
    );
    let chain = FallbackChain::new(anthropic(&server), vec![openai(&server)]);
    let response = chain
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect("fallback after auth");
    assert_eq!(response.model, "openai/gpt-4o-mini");

    // A malformed request would fail everywhere: the first model's message is returned.
    server.push(
        ANTHROPIC,
        ScriptedReply::status_json(400, json!({ "error": { "message": "bad tool schema" } })),
    );
    let err = chain
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect_err("no fallback on 400");
    assert!(err.to_string().contains("bad tool schema"), "{err}");
    assert_eq!(server.requests_to(OPENAI).len(), 1);
}

#[tokio::test]
async fn fallback_returns_the_last_error_when_every_model_fails() {
    let server = ScriptedServer::start().await;
    server.push(ANTHROPIC, server_error(503));
    server.push(
        OPENAI,
        ScriptedReply::status_json(429, json!({ "error": { "message": "quota" } })),
    );
    let err = FallbackChain::new(anthropic(&server), vec![openai(&server)])
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect_err("all down");
    assert!(
        matches!(&err, ModelError::RateLimited { provider, .. } if provider == "openai"),
        "{err:?}"
    );
}
