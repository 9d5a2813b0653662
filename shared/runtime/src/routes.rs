//! HTTP routes shared by the Lambda functions and local mode, and the one place where
//! errors become status codes.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use crate::skills_service::{SkillsError, SkillsService};

/// Errors a route can answer with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Missing or bad credentials.
    #[error("unauthorized")]
    Unauthorized,
    /// The request is malformed; the message is shown to the caller.
    #[error("{0}")]
    BadRequest(String),
    /// The thing asked for does not exist; the message is shown to the caller.
    #[error("{0}")]
    NotFound(String),
    /// Anything else; the caller sees an opaque message, the log the whole chain.
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl From<SkillsError> for ApiError {
    fn from(err: SkillsError) -> Self {
        Self::Internal(Box::new(err))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self {
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Internal(source) => {
                tracing::error!(error = ?source, "request failed");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        (status, Json(json!({ "error": self.to_string() }))).into_response()
    }
}

/// Decides whether a request comes from a registered node host
/// ([`crate::node_routes::RegistryNodeAuth`] checks node tokens against the registry).
#[async_trait::async_trait]
pub trait NodeAuthenticator: Send + Sync {
    /// `Ok` when the caller may use node routes.
    async fn authenticate(&self, headers: &HeaderMap) -> Result<(), ApiError>;
}

#[derive(Clone)]
struct NodeRoutesState {
    skills: Arc<SkillsService>,
    auth: Arc<dyn NodeAuthenticator>,
}

/// `GET /skills/bins` → `{"bins": [...]}`.
pub fn skills_bins_router(skills: Arc<SkillsService>, auth: Arc<dyn NodeAuthenticator>) -> Router {
    Router::new()
        .route("/skills/bins", get(skills_bins))
        .with_state(NodeRoutesState { skills, auth })
}

async fn skills_bins(
    State(state): State<NodeRoutesState>, headers: HeaderMap,
) -> Result<Response, ApiError> {
    state.auth.authenticate(&headers).await?;
    let bins = state.skills.bins().await?;
    Ok(Json(json!({ "bins": bins })).into_response())
}

#[cfg(test)]
mod tests {
    use axum::body::{Body, to_bytes};
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;

    use super::*;
    use crate::{ClawlessConfig, StoreFactory};

    /// Admits every caller: these tests are about the route, not node authentication
    /// (`node_routes` and the system tests cover that).
    struct AdmitAll;

    #[async_trait::async_trait]
    impl NodeAuthenticator for AdmitAll {
        async fn authenticate(&self, _headers: &HeaderMap) -> Result<(), ApiError> {
            Ok(())
        }
    }

    fn router(skills: Arc<SkillsService>) -> Router {
        skills_bins_router(skills, Arc::new(AdmitAll))
    }

    fn skills_from(dir: &std::path::Path) -> Arc<SkillsService> {
        let yaml = format!("skills:\n  bundled: {}\n", dir.display());
        let config = ClawlessConfig::from_yaml(&yaml, "test").unwrap();
        let stores = StoreFactory::new(|| unreachable!("no S3 in this test"));
        Arc::new(SkillsService::new(config, &stores).unwrap())
    }

    fn write_skill(dir: &std::path::Path, name: &str, metadata: &str) {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        let text =
            format!("---\nname: {name}\ndescription: {name} skill\nmetadata: {metadata}\n---\n");
        std::fs::write(dir.join(name).join("SKILL.md"), text).unwrap();
    }

    #[tokio::test]
    async fn get_skills_bins_answers_the_sorted_union() {
        let dir = tempfile::tempdir().unwrap();
        write_skill(
            dir.path(),
            "one",
            r#"{"openclaw":{"requires":{"bins":["jq","gh"]}}}"#,
        );
        write_skill(
            dir.path(),
            "two",
            r#"{"openclaw":{"os":["darwin"],"requires":{"anyBins":["memo"]}}}"#,
        );
        let response = router(skills_from(dir.path()))
            .oneshot(Request::get("/skills/bins").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let body = to_bytes(response.into_body(), 1 << 20).await.unwrap();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json, serde_json::json!({"bins": ["gh", "jq", "memo"]}));
    }

    #[tokio::test]
    async fn other_paths_and_methods_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let app = router(skills_from(dir.path()));
        let post = app
            .clone()
            .oneshot(Request::post("/skills/bins").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
        let other = app
            .oneshot(Request::get("/skills").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(other.status(), StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn an_unreachable_store_is_an_opaque_500() {
        // GIVEN skills in a bucket whose endpoint refuses connections
        let s3 = aws_sdk_s3::Config::builder()
            .behavior_version_latest()
            .region(aws_sdk_s3::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_s3::config::Credentials::new(
                "test", "test", None, None, "static",
            ))
            .endpoint_url("http://127.0.0.1:1")
            .force_path_style(true)
            .retry_config(aws_sdk_s3::config::retry::RetryConfig::disabled())
            .build();
        let stores = StoreFactory::with_s3_client(aws_sdk_s3::Client::from_conf(s3));
        let config =
            ClawlessConfig::from_yaml("skills:\n  bundled: s3://nowhere/skills\n", "test").unwrap();
        let skills = Arc::new(SkillsService::new(config, &stores).unwrap());
        // WHEN a node asks for bins
        let response = router(skills)
            .oneshot(Request::get("/skills/bins").body(Body::empty()).unwrap())
            .await
            .unwrap();
        // THEN it gets a 500 that reveals nothing of the cause
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = to_bytes(response.into_body(), 1 << 20).await.unwrap();
        assert_eq!(&body[..], br#"{"error":"internal error"}"#);
    }
}
