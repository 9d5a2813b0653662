//! Shared fixtures of the runtime's system tests: a skills tree and workspace on disk, a
//! scripted Anthropic server, and a reply receiver that checks signatures.

#![allow(dead_code, unreachable_pub)]

pub mod subagent_harness;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use clawless_channels::verify;
use serde_json::{Value, json};

pub const SECRET: &str = "test-secret-0123456789";

/// A temporary deployment: `skills/weather/SKILL.md`, `workspace/AGENTS.md`, a state dir.
pub struct Fixture {
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("test fixture");
        let skill = dir.path().join("skills/weather");
        std::fs::create_dir_all(&skill).expect("test fixture");
        std::fs::write(
            skill.join("SKILL.md"),
            "---\nname: weather\ndescription: Get the current weather for a city.\n---\n# Weather\nAsk wttr.in for the forecast.\n",
        )
        .expect("test fixture");
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(&workspace).expect("test fixture");
        std::fs::write(workspace.join("AGENTS.md"), "Be brief and friendly.\n")
            .expect("test fixture");
        Self { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn skill_location(&self) -> String {
        self.path()
            .join("skills/weather/SKILL.md")
            .display()
            .to_string()
    }

    pub fn state_dir(&self) -> PathBuf {
        self.path().join("state")
    }

    /// `clawless.yaml` for this fixture.
    pub fn config_yaml(&self, model_base_url: &str, reply_url: &str) -> String {
        format!(
            r#"
skills:
  bundled: {skills}
agents:
  defaults:
    workspace: {workspace}
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
"#,
            skills = self.path().join("skills").display(),
            workspace = self.path().join("workspace").display(),
        )
    }
}

/// An Anthropic Messages response asking for a tool.
pub fn anthropic_tool_use(id: &str, name: &str, input: Value) -> Value {
    json!({
        "id": format!("msg_{id}"),
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "tool_use", "id": id, "name": name, "input": input}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 100, "output_tokens": 10}
    })
}

/// An Anthropic Messages response with text.
pub fn anthropic_text(text: &str) -> Value {
    json!({
        "id": "msg_text",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 120, "output_tokens": 8}
    })
}

/// One reply POST as received.
#[derive(Debug, Clone)]
pub struct Posted {
    pub signature_ok: bool,
    pub idempotency_key: String,
    pub body: Value,
}

/// A reply receiver on loopback that records every POST (and can refuse the first N).
#[derive(Clone)]
pub struct ReplyReceiver {
    pub url: String,
    posted: Arc<Mutex<Vec<Posted>>>,
    refuse: Arc<Mutex<usize>>,
}

impl ReplyReceiver {
    pub async fn start() -> Self {
        let posted: Arc<Mutex<Vec<Posted>>> = Arc::default();
        let refuse: Arc<Mutex<usize>> = Arc::default();
        let (sink, refusals) = (Arc::clone(&posted), Arc::clone(&refuse));
        let app = Router::new().route(
            "/replies",
            post(move |headers: HeaderMap, body: Bytes| {
                let (sink, refusals) = (Arc::clone(&sink), Arc::clone(&refusals));
                async move {
                    let mut refuse = refusals.lock().expect("test fixture");
                    if *refuse > 0 {
                        *refuse -= 1;
                        return StatusCode::SERVICE_UNAVAILABLE;
                    }
                    let signature = headers
                        .get("x-clawless-signature")
                        .and_then(|v| v.to_str().ok());
                    sink.lock().expect("test fixture").push(Posted {
                        signature_ok: verify(SECRET.as_bytes(), &body, signature).is_ok(),
                        idempotency_key: headers
                            .get("idempotency-key")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned(),
                        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                    });
                    StatusCode::OK
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("test fixture");
        let url = format!(
            "http://{}/replies",
            listener.local_addr().expect("test fixture")
        );
        tokio::spawn(async move { axum::serve(listener, app).await.expect("test fixture") });
        Self {
            url,
            posted,
            refuse,
        }
    }

    pub fn posted(&self) -> Vec<Posted> {
        self.posted.lock().expect("test fixture").clone()
    }

    /// Answers 503 to the next `n` POSTs.
    pub fn refuse_next(&self, n: usize) {
        *self.refuse.lock().expect("test fixture") = n;
    }

    /// Waits until at least `n` replies arrived.
    pub async fn wait_for(&self, n: usize, patience: Duration) -> Vec<Posted> {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let posted = self.posted();
            if posted.len() >= n || tokio::time::Instant::now() >= deadline {
                return posted;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A turn service for `config` over `sessions`, as the tests build it: no S3, the model the
/// config names, replies signed and POSTed to `reply_url` on the generic channel, time from
/// `clock`, no node hosts.
pub fn turn_service(
    config: &clawless_runtime::ClawlessConfig,
    sessions: Arc<dyn clawless_core::session::SessionStore>, reply_url: &str,
    clock: Arc<dyn clawless_base::clock::Clock>,
) -> clawless_runtime::turn_service::TurnService {
    turn_service_with_nodes(config, sessions, reply_url, clock, None)
}

/// [`turn_service`] with the node hosts of `nodes`.
pub fn turn_service_with_nodes(
    config: &clawless_runtime::ClawlessConfig,
    sessions: Arc<dyn clawless_core::session::SessionStore>, reply_url: &str,
    clock: Arc<dyn clawless_base::clock::Clock>,
    nodes: Option<Arc<clawless_runtime::nodes_service::NodesService>>,
) -> clawless_runtime::turn_service::TurnService {
    use clawless_runtime::turn_service::{HostFacts, TurnDeps, TurnService};
    let stores = Arc::new(clawless_runtime::StoreFactory::new(|| {
        unreachable!("no S3 in this test")
    }));
    let skills = Arc::new(
        clawless_runtime::SkillsService::new(config.clone(), &stores).expect("test fixture"),
    );
    let outbox = clawless_channels::ChannelOutbox::new().with_channel(
        "generic",
        Arc::new(clawless_channels::HttpReplySender::new(
            reqwest::Client::new(),
            reply_url.to_owned(),
            SECRET.as_bytes(),
        )),
    );
    TurnService::new(TurnDeps {
        skills,
        stores,
        sessions,
        model: clawless_llm::build_model(&config.models, &|_| None).expect("test fixture"),
        outbox: Arc::new(outbox),
        web: None,
        clock,
        eligibility: clawless_skills::eligibility::EligibilityContext::empty(),
        home_dirs: Vec::new(),
        host: HostFacts::default(),
        nodes,
    })
}
