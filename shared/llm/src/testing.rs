//! Test support (feature `test-support`): a scripted HTTP server that answers each route with
//! replies queued in advance and records every request, so provider code (and system tests
//! elsewhere) run against real HTTP on `127.0.0.1`; plus a [`RecordingSleeper`] and a Bedrock
//! client pointed at the server.
//!
//! ```text
//! let server = ScriptedServer::start().await;
//! server.push("/v1/messages", ScriptedReply::json(json!({ … })));
//! // … call the model with base URL `server.base_url()` …
//! assert_eq!(server.requests()[0].body["model"], "claude-sonnet-4-5");
//! ```

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::retry::Sleeper;

pub mod windowed;

/// Largest request body the server records.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// One scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedReply {
    /// HTTP status.
    pub status: u16,
    /// Extra response headers.
    pub headers: Vec<(String, String)>,
    /// Response body (sent as `application/json` unless a content-type header is given).
    pub body: String,
    /// Wait this long before answering (for timeout tests).
    pub delay: Option<Duration>,
}

impl ScriptedReply {
    /// 200 with a JSON body.
    pub fn json(body: Value) -> Self {
        Self::status_json(200, body)
    }

    /// Any status with a JSON body.
    pub fn status_json(status: u16, body: Value) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: body.to_string(),
            delay: None,
        }
    }

    /// Any status with a raw body.
    pub fn raw(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: body.into(),
            delay: None,
        }
    }

    /// Adds a response header.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Delays the answer.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }
}

/// One request the server received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// HTTP method.
    pub method: String,
    /// Path as sent (percent-encoding kept).
    pub path: String,
    /// Headers, names lower-cased (the last value wins for repeated names).
    pub headers: BTreeMap<String, String>,
    /// Body parsed as JSON; `Value::Null` when it is not JSON.
    pub body: Value,
    /// Body as text.
    pub raw_body: String,
}

impl RecordedRequest {
    /// A header value by (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

/// Answers a request by what it carries (`None`: fall back to the queued replies).
pub type Responder = Arc<dyn Fn(&RecordedRequest) -> Option<ScriptedReply> + Send + Sync>;

#[derive(Default)]
struct Script {
    queued: HashMap<String, VecDeque<ScriptedReply>>,
    always: HashMap<String, ScriptedReply>,
    responders: HashMap<String, Responder>,
    requests: Vec<RecordedRequest>,
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Script")
            .field("queued", &self.queued)
            .field("always", &self.always)
            .field("responders", &self.responders.keys().collect::<Vec<_>>())
            .field("requests", &self.requests.len())
            .finish()
    }
}

type Shared = Arc<Mutex<Script>>;

fn lock(script: &Mutex<Script>) -> MutexGuard<'_, Script> {
    // A panicking test thread must not hide the script from the others.
    script.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An HTTP server on `127.0.0.1:<free port>` answering from a script. Stops when dropped.
#[derive(Debug)]
pub struct ScriptedServer {
    addr: SocketAddr,
    script: Shared,
    // Dropping the sender (with the server) ends the serve task gracefully.
    _shutdown: oneshot::Sender<()>,
}

/// Serves `app` on `127.0.0.1:<free port>` until the returned sender is dropped (then the
/// server shuts down gracefully). `what` names it in the log if it fails.
///
/// # Panics
/// When no loopback port can be bound (test support only).
pub(crate) async fn serve_on_loopback(
    app: Router, what: &'static str,
) -> (SocketAddr, oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|err| panic!("bind a loopback port for the {what}: {err}"));
    let addr = listener
        .local_addr()
        .unwrap_or_else(|err| panic!("read the {what}'s address: {err}"));
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async {
                // Resolves (with `Err`) when the sender is dropped.
                rx.await.unwrap_or_default();
            })
            .await;
        if let Err(err) = served {
            tracing::error!(error = %err, "{what} stopped");
        }
    });
    (addr, tx)
}

impl ScriptedServer {
    /// Binds a free loopback port and starts serving.
    ///
    /// # Panics
    /// When no loopback port can be bound (test support only).
    pub async fn start() -> Self {
        let script: Shared = Arc::default();
        let app = Router::new().fallback(answer).with_state(script.clone());
        let (addr, shutdown) = serve_on_loopback(app, "scripted server").await;
        Self {
            addr,
            script,
            _shutdown: shutdown,
        }
    }

    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues `reply` for the next request to `route` (a path such as `/v1/messages`;
    /// matched against the raw and the percent-decoded request path). Replies go out in
    /// the order queued.
    pub fn push(&self, route: &str, reply: ScriptedReply) -> &Self {
        lock(&self.script)
            .queued
            .entry(route.to_owned())
            .or_default()
            .push_back(reply);
        self
    }

    /// Answers requests to `route` with `responder` first: for sessions that call the model
    /// concurrently, a reply chosen by the request's content rather than by arrival order.
    pub fn respond_with(
        &self, route: &str,
        responder: impl Fn(&RecordedRequest) -> Option<ScriptedReply> + Send + Sync + 'static,
    ) -> &Self {
        lock(&self.script)
            .responders
            .insert(route.to_owned(), Arc::new(responder));
        self
    }

    /// Answers `route` with `reply` whenever its queue is empty.
    pub fn always(&self, route: &str, reply: ScriptedReply) -> &Self {
        lock(&self.script).always.insert(route.to_owned(), reply);
        self
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.script).requests.clone()
    }

    /// The requests received on `route`.
    pub fn requests_to(&self, route: &str) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|request| matches_route(route, &request.path))
            .collect()
    }

    /// Replies still queued for `route`.
    pub fn pending(&self, route: &str) -> usize {
        lock(&self.script)
            .queued
            .get(route)
            .map_or(0, VecDeque::len)
    }
}

fn matches_route(route: &str, path: &str) -> bool {
    route == path || route == percent_decode(path)
}

fn percent_decode(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'?'));
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn answer(State(script): State<Shared>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    let headers = parts
        .headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    let raw_body = match to_bytes(body, MAX_BODY_BYTES).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(err) => format!("<unreadable body: {err}>"),
    };
    let reply = {
        let mut script = lock(&script);
        let recorded = RecordedRequest {
            method: parts.method.as_str().to_owned(),
            path: path.clone(),
            headers,
            body: serde_json::from_str(&raw_body).unwrap_or(Value::Null),
            raw_body,
        };
        let decoded = percent_decode(&path);
        let responder = script
            .responders
            .get(&path)
            .or_else(|| script.responders.get(&decoded))
            .cloned();
        script.requests.push(recorded.clone());
        let responded = responder.and_then(|responder| responder(&recorded));
        let queued = responded.or_else(|| {
            script
                .queued
                .get_mut(&path)
                .and_then(VecDeque::pop_front)
                .or_else(|| {
                    script
                        .queued
                        .get_mut(&decoded)
                        .and_then(VecDeque::pop_front)
                })
        });
        queued.or_else(|| {
            script
                .always
                .get(&path)
                .or_else(|| script.always.get(&decoded))
                .cloned()
        })
    };
    // 404 is not retryable, so a missing script entry fails a test fast and says why.
    let reply = reply.unwrap_or_else(|| {
        ScriptedReply::status_json(
            404,
            json!({ "error": { "message": format!("scripted server: no reply left for {} {path}", parts.method) } }),
        )
    });
    if let Some(delay) = reply.delay {
        tokio::time::sleep(delay).await;
    }
    build_response(reply)
}

fn build_response(reply: ScriptedReply) -> Response {
    let mut response = Response::new(Body::from(reply.body));
    *response.status_mut() =
        StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    for (name, value) in reply.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            headers.insert(name, value);
        }
    }
    response
}

/// A [`Sleeper`] that records the requested waits and returns at once.
#[derive(Debug, Clone, Default)]
pub struct RecordingSleeper {
    slept: Arc<Mutex<Vec<Duration>>>,
}

impl RecordingSleeper {
    /// A sleeper with no waits recorded.
    pub fn new() -> Self {
        Self::default()
    }

    /// The waits requested so far.
    pub fn sleeps(&self) -> Vec<Duration> {
        self.slept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[async_trait]
impl Sleeper for RecordingSleeper {
    async fn sleep(&self, duration: Duration) {
        self.slept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(duration);
    }
}

/// A Bedrock Runtime client for `endpoint` (a [`ScriptedServer::base_url`]) with static test
/// credentials and region `us-east-1`: no AWS account, no network beyond the endpoint.
#[cfg(feature = "bedrock")]
pub fn bedrock_client(endpoint: &str) -> aws_sdk_bedrockruntime::Client {
    use aws_sdk_bedrockruntime::config::{BehaviorVersion, Credentials, Region};
    let conf = aws_sdk_bedrockruntime::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            "AKIDTESTTESTTEST",
            "test-secret",
            None,
            None,
            "clawless-test",
        ))
        .endpoint_url(endpoint)
        .build();
    aws_sdk_bedrockruntime::Client::from_conf(conf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_percent_decoded() {
        assert_eq!(
            percent_decode("/model/anthropic.claude-v1%3A0/converse"),
            "/model/anthropic.claude-v1:0/converse"
        );
        assert_eq!(percent_decode("/a%2"), "/a%2");
        assert!(matches_route(
            "/model/m:0/converse",
            "/model/m%3A0/converse"
        ));
    }
}
