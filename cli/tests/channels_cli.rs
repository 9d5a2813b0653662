//! `clawless channels telegram set-webhook` and `clawless channels discord
//! register-commands`, run as the real binary against fakes of the platforms' APIs on
//! 127.0.0.1 that record what they receive.

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::extract::Path as UrlPath;
use axum::http::HeaderMap;
use axum::routing::{post, put};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_clawless");

type Recorded = Arc<Mutex<Vec<(String, String, Value)>>>;

/// Serves `app` on 127.0.0.1; returns its base URL.
async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

fn clawless(config: &std::path::Path, args: &[&str]) -> (bool, String) {
    let output = Command::new(BIN)
        .arg("channels")
        .args(args)
        .arg("--config")
        .arg(config)
        .env("DISCORD_TEST_TOKEN", "discord-bot-token")
        .output()
        .unwrap();
    (
        output.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_webhook_registers_the_url_with_a_fresh_secret_and_prints_it() {
    let recorded: Recorded = Arc::default();
    let sink = Arc::clone(&recorded);
    let api = serve(Router::new().route(
        "/{bot}/{method}",
        post(
            move |UrlPath((bot, method)): UrlPath<(String, String)>, Json(body): Json<Value>| {
                let sink = Arc::clone(&sink);
                async move {
                    sink.lock().unwrap().push((bot, method.clone(), body));
                    let result = if method == "getMe" {
                        json!({"id": 123456, "is_bot": true, "first_name": "Claw", "username": "claw_test_bot"})
                    } else {
                        json!(true)
                    };
                    Json(json!({"ok": true, "result": result}))
                }
            },
        ),
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("clawless.yaml");
    std::fs::write(
        &config,
        format!("channels:\n  telegram:\n    botToken: \"123456:abc-token\"\n    secretToken: unused-here\n    apiBaseUrl: {api}\n"),
    )
    .unwrap();

    let hook = "https://example.test/webhook/telegram";
    let (ok, out) = clawless(&config, &["telegram", "set-webhook", hook]);
    assert!(ok, "{out}");
    let calls = recorded.lock().unwrap().clone();
    let (bot, method, body) = &calls[0];
    assert_eq!(
        (bot.as_str(), method.as_str()),
        ("bot123456:abc-token", "setWebhook")
    );
    assert_eq!(body["url"], hook);
    let secret = body["secret_token"].as_str().unwrap();
    assert_eq!(secret.len(), 64);
    assert!(
        out.contains(secret),
        "the secret is printed to be configured: {out}"
    );
    assert!(out.contains("claw_test_bot"), "{out}");

    // Each run makes a new secret.
    let (ok, _) = clawless(&config, &["telegram", "set-webhook", hook]);
    assert!(ok);
    let calls = recorded.lock().unwrap().clone();
    let second = calls
        .iter()
        .filter(|(_, method, _)| method == "setWebhook")
        .nth(1)
        .unwrap();
    assert_ne!(second.2["secret_token"].as_str().unwrap(), secret);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_commands_puts_ask_and_the_skill_commands() {
    let recorded: Recorded = Arc::default();
    let sink = Arc::clone(&recorded);
    let api = serve(Router::new().route(
        "/applications/{id}/commands",
        put(
            move |UrlPath(id): UrlPath<String>, headers: HeaderMap, Json(body): Json<Value>| {
                let sink = Arc::clone(&sink);
                async move {
                    let auth = headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    sink.lock().unwrap().push((id, auth, body.clone()));
                    Json(body)
                }
            },
        ),
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let skills = dir.path().join("skills/deploy-site");
    std::fs::create_dir_all(&skills).unwrap();
    std::fs::write(
        skills.join("SKILL.md"),
        "---\nname: deploy-site\ndescription: Deploy the site to production.\n---\n# Deploy\n",
    )
    .unwrap();
    let config = dir.path().join("clawless.yaml");
    std::fs::write(
        &config,
        format!(
            "skills:\n  bundled: {}\nchannels:\n  discord:\n    applicationId: \"1234567890\"\n    publicKey: \"{}\"\n    botTokenEnv: DISCORD_TEST_TOKEN\n    apiBaseUrl: {api}\n",
            dir.path().join("skills").display(),
            // RFC 8032's first test public key.
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
        ),
    )
    .unwrap();

    let (ok, out) = clawless(&config, &["discord", "register-commands"]);
    assert!(ok, "{out}");
    let calls = recorded.lock().unwrap().clone();
    assert_eq!(calls.len(), 1);
    let (id, auth, body) = &calls[0];
    assert_eq!(id, "1234567890");
    assert_eq!(auth, "Bot discord-bot-token");
    let names: Vec<&str> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|command| command["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"ask"), "{names:?}");
    assert!(
        names.iter().any(|name| name.starts_with("deploy")),
        "{names:?}"
    );
    assert!(out.contains("/ask"), "{out}");
}
