//! `build_model` from config plus an environment closure (the process env is never touched).

use std::collections::HashMap;
use std::sync::Arc;

use clawless_base::model::ModelProvider;
use clawless_llm::testing::{RecordingSleeper, ScriptedReply, ScriptedServer};
use clawless_llm::{ConfigError, ModelsConfig, build_model, build_model_with};
use serde_json::json;

use crate::support::{request, user};

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| map.get(name).cloned()
}

fn config(value: serde_json::Value) -> ModelsConfig {
    serde_json::from_value(value).expect("models config")
}

fn anthropic_ok() -> ScriptedReply {
    ScriptedReply::json(
        json!({ "content": [{ "type": "text", "text": "hi" }], "stop_reason": "end_turn" }),
    )
}

fn openai_ok() -> ScriptedReply {
    ScriptedReply::json(
        json!({ "choices": [{ "message": { "content": "hi" }, "finish_reason": "stop" }] }),
    )
}

#[tokio::test]
async fn anthropic_key_and_base_url_come_from_the_environment() {
    let server = ScriptedServer::start().await;
    server.push("/v1/messages", anthropic_ok());
    let base = server.base_url();
    let env = env_of(&[
        ("ANTHROPIC_API_KEY", "sk-ant-from-env"),
        ("ANTHROPIC_BASE_URL", &base),
    ]);
    // No primary configured: the key in the environment selects Anthropic.
    let model = build_model(&ModelsConfig::default(), &env).expect("builds");
    assert_eq!(model.model_ref(), "anthropic/claude-sonnet-4-5");
    let response = model
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect("answer");
    assert_eq!(response.model, "anthropic/claude-sonnet-4-5");
    assert_eq!(
        server.requests()[0].header("x-api-key"),
        Some("sk-ant-from-env")
    );
}

#[tokio::test]
async fn openai_key_and_base_url_come_from_the_environment() {
    let server = ScriptedServer::start().await;
    server.push("/v1/chat/completions", openai_ok());
    let base = format!("{}/v1", server.base_url());
    let env = env_of(&[
        ("OPENAI_API_KEY", "sk-from-env"),
        ("OPENAI_BASE_URL", &base),
    ]);
    let model = build_model(&config(json!({ "primary": "openai/gpt-4.1" })), &env).expect("builds");
    model
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect("answer");
    let sent = &server.requests()[0];
    assert_eq!(sent.header("authorization"), Some("Bearer sk-from-env"));
    assert_eq!(sent.body["model"], "gpt-4.1");
}

#[tokio::test]
async fn config_values_win_over_the_environment() {
    let server = ScriptedServer::start().await;
    server.push("/v1/messages", anthropic_ok());
    let env = env_of(&[
        ("ANTHROPIC_API_KEY", "sk-env"),
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9"),
    ]);
    let models = config(json!({
        "primary": "anthropic/claude-haiku-4-5",
        "providers": { "anthropic": { "apiKey": "sk-config", "baseUrl": server.base_url() } },
    }));
    build_model(&models, &env)
        .expect("builds")
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect("answer");
    assert_eq!(server.requests()[0].header("x-api-key"), Some("sk-config"));
}

#[tokio::test]
async fn ollama_needs_only_a_base_url_and_never_gets_the_openai_key() {
    let server = ScriptedServer::start().await;
    server.push("/v1/chat/completions", openai_ok());
    let env = env_of(&[("OPENAI_API_KEY", "sk-must-not-leak")]);
    let models = config(json!({
        "primary": "ollama/llama3.2",
        "providers": { "ollama": { "api": "openai", "baseUrl": format!("{}/v1", server.base_url()) } },
    }));
    let model = build_model(&models, &env).expect("builds");
    let response = model
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect("answer");
    assert_eq!(response.model, "ollama/llama3.2");
    assert_eq!(server.requests()[0].header("authorization"), None);
}

#[tokio::test]
async fn api_key_env_names_a_custom_variable() {
    let server = ScriptedServer::start().await;
    server.push("/v1/chat/completions", openai_ok());
    let env = env_of(&[("VLLM_TOKEN", "tok-123")]);
    let models = config(json!({
        "primary": "vllm/qwen3",
        "providers": { "vllm": { "baseUrl": format!("{}/v1", server.base_url()), "apiKeyEnv": "VLLM_TOKEN" } },
    }));
    build_model(&models, &env)
        .expect("builds")
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect("answer");
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some("Bearer tok-123")
    );
}

#[tokio::test]
async fn configured_chain_retries_then_falls_back() {
    // GIVEN primary Anthropic (always 503) with one retry, then OpenAI
    let server = ScriptedServer::start().await;
    server.always(
        "/v1/messages",
        ScriptedReply::status_json(503, json!({ "error": { "message": "unavailable" } })),
    );
    server.push("/v1/chat/completions", openai_ok());
    let models = config(json!({
        "primary": "anthropic/claude-sonnet-4-5",
        "fallbacks": ["openai/gpt-4o-mini"],
        "maxRetries": 1,
        "timeoutSeconds": 5,
        "providers": {
            "anthropic": { "apiKey": "sk-a", "baseUrl": server.base_url() },
            "openai": { "apiKey": "sk-o", "baseUrl": format!("{}/v1", server.base_url()) },
        },
    }));
    let sleeper = RecordingSleeper::new();
    let model: Arc<dyn ModelProvider> =
        build_model_with(&models, &env_of(&[]), Arc::new(sleeper.clone())).expect("builds");
    // WHEN asked
    let response = model
        .complete(&request("sys", vec![user("hi")], vec![]))
        .await
        .expect("fallback answer");
    // THEN two primary attempts, one wait, and the secondary's answer
    assert_eq!(server.requests_to("/v1/messages").len(), 2);
    assert_eq!(sleeper.sleeps().len(), 1);
    assert_eq!(response.model, "openai/gpt-4o-mini");
    assert_eq!(model.model_ref(), "anthropic/claude-sonnet-4-5");
}

#[tokio::test]
async fn missing_key_for_a_public_endpoint_is_a_clear_config_error() {
    let models = config(json!({ "primary": "openai/gpt-4o-mini" }));
    let err = build_model(&models, &env_of(&[])).expect_err("no key");
    assert!(matches!(err, ConfigError::MissingApiKey { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "model openai/gpt-4o-mini: no API key for openai; set OPENAI_API_KEY or models.providers.openai.apiKey"
    );
}

#[tokio::test]
async fn no_primary_and_no_key_is_the_offline_model() {
    let model = build_model(
        &ModelsConfig::default(),
        &env_of(&[("ANTHROPIC_API_KEY", " ")]),
    )
    .expect("builds");
    assert_eq!(model.model_ref(), "offline/scripted");
}
