//! A local Lambda Runtime API (the `2018-06-01` interface a custom runtime polls), enough to
//! run one function process the way Lambda does and time it: the instant of the process's
//! first `GET …/invocation/next` (the end of init), and for each event the span from handing
//! it out on `next` to its `POST …/invocation/{id}/response` or `…/error`.
//!
//! One [`RuntimeApi`] serves one function process; events are handed out one at a time, in
//! the order [`RuntimeApi::invoke`] is called. It knows nothing about what the events mean.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::{Notify, mpsc, oneshot};

/// Deadline handed to the function with each event (Lambda's `lambda-runtime-deadline-ms`).
const INVOCATION_TIMEOUT: Duration = Duration::from_secs(60);

/// What became of one invocation.
#[derive(Debug, Clone)]
pub(crate) struct Invocation {
    /// When the event was handed out on `next`.
    pub(crate) handed_out: Instant,
    /// When the function posted its response or error.
    pub(crate) finished: Instant,
    /// The posted body (the response payload, or the error document).
    pub(crate) body: String,
    /// True when the function posted to `…/error`.
    pub(crate) is_error: bool,
}

impl Invocation {
    /// From handing the event out to the posted answer.
    pub(crate) fn duration(&self) -> Duration {
        self.finished.saturating_duration_since(self.handed_out)
    }
}

struct Job {
    id: String,
    payload: String,
    answer: oneshot::Sender<Invocation>,
}

struct Running {
    handed_out: Instant,
    answer: oneshot::Sender<Invocation>,
}

struct Shared {
    function_arn: String,
    first_next: OnceLock<Instant>,
    first_next_seen: Notify,
    init_error: OnceLock<String>,
    jobs: tokio::sync::Mutex<mpsc::Receiver<Job>>,
    running: Mutex<HashMap<String, Running>>,
}

/// The Runtime API of one function process, on `127.0.0.1`.
pub(crate) struct RuntimeApi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    jobs: mpsc::Sender<Job>,
    next_id: Mutex<u64>,
    server: tokio::task::JoinHandle<()>,
}

impl RuntimeApi {
    /// Listens on a free port of 127.0.0.1.
    pub(crate) async fn start(function_name: &str) -> std::io::Result<Self> {
        let (jobs, receiver) = mpsc::channel(8);
        let shared = Arc::new(Shared {
            function_arn: format!("arn:aws:lambda:us-east-1:123456789012:function:{function_name}"),
            first_next: OnceLock::new(),
            first_next_seen: Notify::new(),
            init_error: OnceLock::new(),
            jobs: tokio::sync::Mutex::new(receiver),
            running: Mutex::new(HashMap::new()),
        });
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(response),
            )
            .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
            .route("/2018-06-01/runtime/init/error", post(init_error))
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn(async move {
            if let Err(err) = axum::serve(listener, app).await {
                eprintln!("runtime API server stopped: {err}");
            }
        });
        Ok(Self {
            addr,
            shared,
            jobs,
            next_id: Mutex::new(0),
            server,
        })
    }

    /// `host:port`, the value of `AWS_LAMBDA_RUNTIME_API`.
    pub(crate) fn address(&self) -> String {
        self.addr.to_string()
    }

    /// The instant of the first `next` poll, waiting up to `patience`; `None` if it did not
    /// come (the process died or hangs in init).
    pub(crate) async fn first_next(&self, patience: Duration) -> Option<Instant> {
        let seen = self.shared.first_next_seen.notified();
        if let Some(at) = self.shared.first_next.get() {
            return Some(*at);
        }
        // `notify_waiters` only wakes registered waiters: check again after registering.
        tokio::pin!(seen);
        seen.as_mut().enable();
        if let Some(at) = self.shared.first_next.get() {
            return Some(*at);
        }
        tokio::time::timeout(patience, seen).await.ok()?;
        self.shared.first_next.get().copied()
    }

    /// What the function reported to `…/init/error`, if anything.
    pub(crate) fn init_error(&self) -> Option<String> {
        self.shared.init_error.get().cloned()
    }

    /// Hands `payload` to the function on its next poll and waits up to `patience` for its
    /// answer; `None` when none came in time.
    pub(crate) async fn invoke(&self, payload: String, patience: Duration) -> Option<Invocation> {
        let id = {
            let mut next_id = self.next_id.lock().unwrap_or_else(PoisonError::into_inner);
            *next_id += 1;
            format!("bench-{:04}-{}", *next_id, std::process::id())
        };
        let (answer, answered) = oneshot::channel();
        self.jobs
            .send(Job {
                id,
                payload,
                answer,
            })
            .await
            .ok()?;
        tokio::time::timeout(patience, answered).await.ok()?.ok()
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis())
        .unwrap_or_default()
}

fn header(value: &str) -> HeaderValue {
    HeaderValue::from_str(value).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

async fn next(State(shared): State<Arc<Shared>>) -> Response {
    if shared.first_next.set(Instant::now()).is_ok() {
        shared.first_next_seen.notify_waiters();
    }
    let job = shared.jobs.lock().await.recv().await;
    let Some(job) = job else {
        // The bench is over; the process is about to be killed.
        return StatusCode::GONE.into_response();
    };
    let mut headers = HeaderMap::new();
    headers.insert("lambda-runtime-aws-request-id", header(&job.id));
    headers.insert(
        "lambda-runtime-deadline-ms",
        header(&(now_ms() + INVOCATION_TIMEOUT.as_millis()).to_string()),
    );
    headers.insert(
        "lambda-runtime-invoked-function-arn",
        header(&shared.function_arn),
    );
    headers.insert(
        "lambda-runtime-trace-id",
        HeaderValue::from_static("Root=1-00000000-000000000000000000000000;Sampled=0"),
    );
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    shared
        .running
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(
            job.id,
            Running {
                handed_out: Instant::now(),
                answer: job.answer,
            },
        );
    (StatusCode::OK, headers, job.payload).into_response()
}

fn finish(shared: &Shared, id: &str, body: &Bytes, is_error: bool) -> StatusCode {
    let finished = Instant::now();
    let running = shared
        .running
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(id);
    let Some(running) = running else {
        return StatusCode::BAD_REQUEST;
    };
    let invocation = Invocation {
        handed_out: running.handed_out,
        finished,
        body: String::from_utf8_lossy(body).into_owned(),
        is_error,
    };
    // The waiter may have given up (timeout); the answer is then dropped.
    drop(running.answer.send(invocation));
    StatusCode::ACCEPTED
}

async fn response(
    State(shared): State<Arc<Shared>>, Path(id): Path<String>, body: Bytes,
) -> StatusCode {
    finish(&shared, &id, &body, false)
}

async fn error(
    State(shared): State<Arc<Shared>>, Path(id): Path<String>, body: Bytes,
) -> StatusCode {
    finish(&shared, &id, &body, true)
}

async fn init_error(State(shared): State<Arc<Shared>>, body: Bytes) -> StatusCode {
    drop(
        shared
            .init_error
            .set(String::from_utf8_lossy(&body).into_owned()),
    );
    shared.first_next_seen.notify_waiters();
    StatusCode::ACCEPTED
}
