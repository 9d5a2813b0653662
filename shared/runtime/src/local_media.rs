//! `clawless local`'s media route: `GET /media/<key>?type=…&expires=…&sig=…` serves one file of
//! the local blob store to whoever holds a link made by
//! [`SignedMediaLinks`](clawless_channels::media_links::SignedMediaLinks), the way a
//! presigned S3 URL does on AWS (the generic channel's reply files).
//!
//! Only keys under `media/` are served, and only with a signature over the key, the
//! Content-Type and the expiry: no signature is 401, a wrong one or an expired link 403, a
//! key not in the store 404. The store itself refuses keys with `.`/`..` segments, so no
//! link reaches outside `blobs/`.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use clawless_base::clock::Clock;
use clawless_base::media_links::{MEDIA_PREFIX, is_linkable};
use clawless_base::object_store::{ObjectStore, StoreError};
use clawless_channels::media::{MAX_MEDIA_MAX_MB, MB};
use clawless_channels::media_links::{LinkQuery, LinkRefusal, SignedMediaLinks};

/// Largest file the route serves (the largest any channel stores).
const MAX_SERVED_BYTES: u64 = MAX_MEDIA_MAX_MB * MB;

/// What the route needs: the blob store, the link checker and the time.
#[derive(Clone)]
struct MediaRoute {
    blobs: Arc<dyn ObjectStore>,
    links: SignedMediaLinks,
    clock: Arc<dyn Clock>,
}

/// `GET /media/{*key}` over `blobs`, accepting links signed by `links`.
pub fn media_router(
    blobs: Arc<dyn ObjectStore>, links: SignedMediaLinks, clock: Arc<dyn Clock>,
) -> Router {
    Router::new()
        .route("/media/{*rest}", get(serve))
        .with_state(MediaRoute {
            blobs,
            links,
            clock,
        })
}

fn refused(status: StatusCode, reason: &str) -> Response {
    (status, reason.to_owned()).into_response()
}

async fn serve(
    State(route): State<MediaRoute>, Path(rest): Path<String>, Query(query): Query<LinkQuery>,
) -> Response {
    let key = format!("{MEDIA_PREFIX}{rest}");
    let mime = match route.links.check(&key, &query, route.clock.now_ms()) {
        Ok(mime) => mime,
        Err(refusal @ LinkRefusal::Unsigned) => {
            return refused(StatusCode::UNAUTHORIZED, &refusal.to_string());
        }
        Err(refusal) => return refused(StatusCode::FORBIDDEN, &refusal.to_string()),
    };
    // Links are only ever made for such keys; this holds even if the signing key leaked.
    if !is_linkable(&key) {
        return refused(StatusCode::NOT_FOUND, "no such file");
    }
    let Ok(content_type) = HeaderValue::from_str(&mime) else {
        return refused(
            StatusCode::FORBIDDEN,
            "this link's type is not a header value",
        );
    };
    match route.blobs.get(&key, MAX_SERVED_BYTES).await {
        Ok(Some(object)) => (
            [
                (header::CONTENT_TYPE, content_type),
                (
                    header::X_CONTENT_TYPE_OPTIONS,
                    HeaderValue::from_static("nosniff"),
                ),
                (header::CACHE_CONTROL, HeaderValue::from_static("private")),
            ],
            object.bytes,
        )
            .into_response(),
        Ok(None) | Err(StoreError::InvalidKey { .. }) => {
            refused(StatusCode::NOT_FOUND, "no such file")
        }
        Err(err) => {
            tracing::error!(error = %err, %key, "a linked file could not be read");
            refused(
                StatusCode::SERVICE_UNAVAILABLE,
                "the file could not be read",
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::body::Body;
    use axum::http::Request;
    use clawless_base::media_links::MediaLinks;
    use clawless_base::object_store::PutCondition;
    use clawless_core::testing::InMemoryObjectStore;
    use tower::ServiceExt;

    use super::*;

    #[derive(Debug)]
    struct FixedClock(u64);

    impl Clock for FixedClock {
        fn now_ms(&self) -> u64 {
            self.0
        }
    }

    async fn app_at(now_ms: u64) -> (Router, SignedMediaLinks) {
        let blobs = Arc::new(InMemoryObjectStore::new());
        blobs
            .put(
                "media/outbound/ab.png",
                b"\x89PNG".to_vec(),
                PutCondition::Always,
            )
            .await
            .unwrap();
        blobs
            .put("sessions/s1.json", b"{}".to_vec(), PutCondition::Always)
            .await
            .unwrap();
        let clock: Arc<dyn Clock> = Arc::new(FixedClock(now_ms));
        let links = SignedMediaLinks::new("http://127.0.0.1:1", b"secret", Arc::new(FixedClock(0)))
            .with_ttl(Duration::from_secs(60));
        let app = media_router(blobs, links.clone(), clock);
        (app, links)
    }

    async fn get_path(app: &Router, url: &str) -> (StatusCode, Option<String>, Vec<u8>) {
        let path = url.trim_start_matches("http://127.0.0.1:1");
        let response = app
            .clone()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap()
            .to_vec();
        (status, content_type, body)
    }

    #[tokio::test]
    async fn a_signed_link_serves_its_file_and_anything_else_is_refused() {
        let (app, links) = app_at(1_000).await;
        let url = links
            .link("media/outbound/ab.png", "image/png")
            .await
            .unwrap();
        let (status, content_type, body) = get_path(&app, &url).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(content_type.as_deref(), Some("image/png"));
        assert_eq!(body, b"\x89PNG");

        // Served as something else, for longer, or without a signature: refused.
        let as_html = url.replace("type=image%2Fpng", "type=text%2Fhtml");
        assert_eq!(get_path(&app, &as_html).await.0, StatusCode::FORBIDDEN);
        let longer = url.replace("expires=60000", "expires=6000000");
        assert_eq!(get_path(&app, &longer).await.0, StatusCode::FORBIDDEN);
        let unsigned = url.split("&sig=").next().unwrap().to_owned();
        assert_eq!(get_path(&app, &unsigned).await.0, StatusCode::UNAUTHORIZED);

        // The same link, once expired.
        let (later, _) = app_at(60_000).await;
        let (status, _, body) = get_path(&later, &url).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert_eq!(body, b"this link has expired");

        // Another key under the same signature, a path out of media/, a missing file.
        let other = url.replace("/media/outbound/ab.png", "/media/outbound/cd.png");
        assert_eq!(get_path(&app, &other).await.0, StatusCode::FORBIDDEN);
        let escape = url.replace("/media/outbound/ab.png", "/media/../sessions/s1.json");
        assert_ne!(get_path(&app, &escape).await.0, StatusCode::OK);
        let encoded = url.replace("/media/outbound/ab.png", "/media/..%2Fsessions%2Fs1.json");
        assert_ne!(get_path(&app, &encoded).await.0, StatusCode::OK);
        let missing = links
            .link("media/outbound/none.png", "image/png")
            .await
            .unwrap();
        assert_eq!(get_path(&app, &missing).await.0, StatusCode::NOT_FOUND);
    }
}
