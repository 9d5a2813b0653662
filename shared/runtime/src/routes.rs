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

/// Admits every caller. Only until local mode and the `skills-bins` function check node
/// tokens.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenNodeAccess;

#[async_trait::async_trait]
impl NodeAuthenticator for OpenNodeAccess {
    async fn authenticate(&self, _headers: &HeaderMap) -> Result<(), ApiError> {
        Ok(())
    }
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
    State(state): State<NodeRoutesState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    state.auth.authenticate(&headers).await?;
    let bins = state.skills.bins().await?;
    Ok(Json(json!({ "bins": bins })).into_response())
}
