//! A forwarding HTTP proxy on `127.0.0.1` that records when each request it forwards was in
//! flight, so the bench can subtract what a function spent waiting on the emulators (moto,
//! the scripted model, the reply sink) from its invocation time: what is left is the
//! function's own overhead. Bodies are buffered (the bench's requests are small).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderName, StatusCode};
use axum::response::Response;

/// Intervals during which some proxied request was in flight; shared by several proxies.
#[derive(Debug, Clone, Default)]
pub(crate) struct Timeline {
    spans: Arc<Mutex<Vec<(Instant, Instant)>>>,
}

impl Timeline {
    fn record(&self, start: Instant, end: Instant) {
        self.spans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((start, end));
    }

    /// How long, within `[from, to]`, at least one request was in flight (overlapping
    /// requests count once), and how many requests started in that window.
    pub(crate) fn busy(&self, from: Instant, to: Instant) -> (Duration, usize) {
        let mut spans: Vec<(Instant, Instant)> = self
            .spans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(start, end)| *end > from && *start < to)
            .map(|(start, end)| ((*start).max(from), (*end).min(to)))
            .collect();
        let count = spans.len();
        spans.sort();
        let mut total = Duration::ZERO;
        let mut current: Option<(Instant, Instant)> = None;
        for (start, end) in spans {
            current = match current {
                Some((open, close)) if start <= close => Some((open, close.max(end))),
                Some((open, close)) => {
                    total += close - open;
                    Some((start, end))
                }
                None => Some((start, end)),
            };
        }
        if let Some((open, close)) = current {
            total += close - open;
        }
        (total, count)
    }
}

#[derive(Clone)]
struct Upstream {
    base: String,
    client: reqwest::Client,
    timeline: Timeline,
}

/// Starts a proxy to `upstream` (`http://host:port`, no trailing slash) recording into
/// `timeline`; returns its own base URL.
pub(crate) async fn start(upstream: &str, timeline: &Timeline) -> std::io::Result<String> {
    let state = Upstream {
        base: upstream.trim_end_matches('/').to_owned(),
        client: reqwest::Client::builder()
            .no_proxy()
            .build()
            .map_err(std::io::Error::other)?,
        timeline: timeline.clone(),
    };
    let app = Router::new().fallback(forward).with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, app).await {
            eprintln!("timing proxy stopped: {err}");
        }
    });
    Ok(url)
}

/// Hop-by-hop headers, and the length the server recomputes.
fn is_passed_on(name: &HeaderName) -> bool {
    !matches!(
        name.as_str(),
        "connection" | "transfer-encoding" | "content-length" | "keep-alive" | "host"
    )
}

async fn forward(State(upstream): State<Upstream>, request: Request) -> Response {
    let start = Instant::now();
    let (parts, body) = request.into_parts();
    let answer = relay(&upstream, parts, body).await;
    upstream.timeline.record(start, Instant::now());
    answer.unwrap_or_else(|err| {
        let mut response = Response::new(Body::from(format!("timing proxy: {err}")));
        *response.status_mut() = StatusCode::BAD_GATEWAY;
        response
    })
}

async fn relay(
    upstream: &Upstream, parts: axum::http::request::Parts, body: Body,
) -> Result<Response, String> {
    let body: Bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .map_err(|err| err.to_string())?;
    let path = parts.uri.path_and_query().map_or("/", |path| path.as_str());
    let mut outgoing = upstream
        .client
        .request(parts.method, format!("{}{path}", upstream.base))
        .body(body);
    for (name, value) in &parts.headers {
        if is_passed_on(name) {
            outgoing = outgoing.header(name, value);
        }
    }
    let answer = outgoing.send().await.map_err(|err| err.to_string())?;
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if is_passed_on(name) {
            response = response.header(name, value);
        }
    }
    let bytes = answer.bytes().await.map_err(|err| err.to_string())?;
    response
        .body(Body::from(bytes))
        .map_err(|err| err.to_string())
}
