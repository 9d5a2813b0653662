//! `HttpWebFetcher` against a real HTTP server on loopback.
//!
//! Loopback is exactly what the fetcher must refuse, so the happy-path tests build it with
//! an explicit allowance for the test server's `ip:port`; the other tests check that the
//! allowance is that narrow (other ports, host names and redirects stay refused) and that
//! without it the server is unreachable.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use clawless_core::tools::{FetchError, WebFetcher};
use clawless_runtime::web_fetcher::HttpWebFetcher;

const LIMIT: usize = 2 * 1024 * 1024;
const TIMEOUT: Duration = Duration::from_secs(10);

/// Serves the test routes on a fresh loopback port.
async fn spawn_server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("bound address");
    let app = Router::new()
        .route("/page", get(page))
        .route("/big", get(big))
        .route("/slow", get(slow))
        .route("/loop", get(|| async { redirect("/loop") }))
        .route("/hop/{n}", get(hop))
        .route("/to/{*target}", get(to));
    tokio::spawn(async move { axum::serve(listener, app).await.expect("test server") });
    addr
}

async fn page() -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        "<html><head><title>Test page</title><script>secret()</script></head>\
         <body><h1>Hello</h1><p>from <a href=\"/x\">loopback</a></p></body></html>",
    )
        .into_response()
}

async fn big() -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain")],
        "x".repeat(3 * 1024 * 1024),
    )
        .into_response()
}

async fn slow() -> &'static str {
    tokio::time::sleep(Duration::from_secs(30)).await;
    "too late"
}

/// `/hop/3` redirects to `/hop/2`, …, `/hop/0` serves the page.
async fn hop(Path(n): Path<u32>) -> Response {
    if n == 0 {
        page().await
    } else {
        redirect(&format!("/hop/{}", n - 1))
    }
}

/// `/to/<target>` redirects to `target` verbatim (an absolute URL).
async fn to(Path(target): Path<String>) -> Response {
    redirect(&target)
}

fn redirect(location: &str) -> Response {
    (StatusCode::FOUND, [(header::LOCATION, location.to_owned())]).into_response()
}

fn allowing(addr: SocketAddr) -> HttpWebFetcher {
    HttpWebFetcher::with_allowed_test_addresses([addr]).expect("client builds")
}

#[tokio::test]
async fn loopback_is_refused_without_the_test_allowance() {
    let addr = spawn_server().await;
    let fetcher = HttpWebFetcher::new().unwrap();
    for url in [
        format!("http://{addr}/page"),
        format!("http://localhost:{}/page", addr.port()),
        format!("http://2130706433:{}/page", addr.port()),
        format!("http://[::ffff:127.0.0.1]:{}/page", addr.port()),
    ] {
        let result = fetcher.fetch(&url, LIMIT, TIMEOUT).await;
        assert!(
            matches!(result, Err(FetchError::Refused(_))),
            "{url}: {result:?}"
        );
    }
}

#[tokio::test]
async fn an_allowed_test_server_serves_html() {
    let addr = spawn_server().await;
    let page = allowing(addr)
        .fetch(&format!("http://{addr}/page"), LIMIT, TIMEOUT)
        .await
        .unwrap();
    assert_eq!(page.status, 200);
    assert_eq!(page.url, format!("http://{addr}/page"));
    assert_eq!(
        page.content_type.as_deref(),
        Some("text/html; charset=utf-8")
    );
    assert!(!page.truncated);
    let text =
        clawless_core::tools::web_fetch::html_to_text(&String::from_utf8(page.body).unwrap());
    assert_eq!(text, "Test page\n\nHello\n\nfrom loopback");
}

#[tokio::test]
async fn redirects_are_followed_up_to_five_hops() {
    let addr = spawn_server().await;
    let fetcher = allowing(addr);
    let page = fetcher
        .fetch(&format!("http://{addr}/hop/5"), LIMIT, TIMEOUT)
        .await
        .unwrap();
    assert_eq!(page.url, format!("http://{addr}/hop/0"));
    assert_eq!(page.status, 200);

    for url in [
        format!("http://{addr}/hop/6"),
        format!("http://{addr}/loop"),
    ] {
        let result = fetcher.fetch(&url, LIMIT, TIMEOUT).await;
        assert!(
            matches!(&result, Err(FetchError::Failed(message)) if message.contains("too many redirects")),
            "{url}: {result:?}"
        );
    }
}

#[tokio::test]
async fn a_redirect_to_a_refused_address_is_refused() {
    // GIVEN one allowed server and another loopback server outside the allowance
    let addr = spawn_server().await;
    let other = spawn_server().await;
    let fetcher = allowing(addr);

    for target in [
        format!("http://{other}/page"),
        format!("http://localhost:{}/page", addr.port()),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://0x7f.1/".to_owned(),
        "http://[::1]/".to_owned(),
        "http://metadata.google.internal/".to_owned(),
    ] {
        // WHEN the allowed server redirects there
        let url = format!("http://{addr}/to/{target}");
        let result = fetcher.fetch(&url, LIMIT, TIMEOUT).await;
        // THEN the hop is refused
        assert!(
            matches!(result, Err(FetchError::Refused(_))),
            "{target}: {result:?}"
        );
    }
}

#[tokio::test]
async fn host_names_resolving_to_loopback_are_refused_even_with_the_allowance() {
    // The allowance covers literal `ip:port` only; a name is always judged by what it resolves to.
    let addr = spawn_server().await;
    let result = allowing(addr)
        .fetch(
            &format!("http://localhost:{}/page", addr.port()),
            LIMIT,
            TIMEOUT,
        )
        .await;
    assert!(matches!(result, Err(FetchError::Refused(_))), "{result:?}");
}

#[tokio::test]
async fn the_body_is_cut_at_the_size_limit() {
    let addr = spawn_server().await;
    let page = allowing(addr)
        .fetch(&format!("http://{addr}/big"), 100_000, TIMEOUT)
        .await
        .unwrap();
    assert_eq!(page.body.len(), 100_000);
    assert!(page.truncated);
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let addr = spawn_server().await;
    let timeout = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let result = allowing(addr)
        .fetch(&format!("http://{addr}/slow"), LIMIT, timeout)
        .await;
    assert_eq!(result, Err(FetchError::Timeout(timeout)));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn non_http_schemes_and_credentials_are_rejected() {
    let fetcher = HttpWebFetcher::new().unwrap();
    for url in [
        "file:///etc/passwd",
        "ftp://example.com/",
        "https://user:pw@example.com/",
        "nonsense",
    ] {
        let result = fetcher.fetch(url, LIMIT, TIMEOUT).await;
        assert!(
            matches!(result, Err(FetchError::InvalidUrl(_))),
            "{url}: {result:?}"
        );
    }
}
