//! The operator's cron route, `POST /cron/admin/call`, behind the admin token of the node
//! operator routes ([`AdminToken`]). Served by the `nodes` function and by `clawless local`
//! when an admin token is set; `clawless cron --url URL …` speaks to it.
//!
//! The body is a `cron` tool call's JSON arguments (`{"action": "add", "job": {…}}`), read
//! by the tool's own parser, and the answer is the service's JSON, exactly what the tool
//! returns to the model. A wrong request gets 400 with OpenClaw's sentence as `error`, a
//! missing or wrong token 401, anything else 500. The caller has no session: jobs it adds
//! get no `agentId`, `sessionKey` or inferred chat delivery.

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use clawless_automation::cron::tool::{CronCaller, parse_cron_call};
use serde_json::Value;

use crate::cron_service::CronService;
use crate::node_routes::AdminToken;
use crate::routes::ApiError;

/// Path of the route.
pub const CRON_ADMIN_CALL_PATH: &str = "/cron/admin/call";

#[derive(Clone)]
struct CronAdminState {
    cron: Arc<CronService>,
    token: AdminToken,
}

/// `POST /cron/admin/call` for `Authorization: Bearer <token>`.
pub fn cron_admin_router(cron: Arc<CronService>, token: AdminToken) -> Router {
    Router::new()
        .route(CRON_ADMIN_CALL_PATH, post(call))
        .with_state(CronAdminState { cron, token })
}

async fn call(
    State(state): State<CronAdminState>, headers: HeaderMap, body: String,
) -> Result<Json<Value>, ApiError> {
    state.token.authorize(&headers).await?;
    let args: Value = serde_json::from_str(&body)
        .map_err(|err| ApiError::BadRequest(format!("malformed request: {err}")))?;
    let action = parse_cron_call(&args).map_err(|err| ApiError::BadRequest(err.to_string()))?;
    match state.cron.call(action, &CronCaller::default()).await {
        Ok(answer) => Ok(Json(answer)),
        Err(err) if err.is_input() => Err(ApiError::BadRequest(err.to_string())),
        Err(err) => Err(ApiError::Internal(Box::new(err))),
    }
}

#[cfg(test)]
mod tests {
    use axum::body::{Body, to_bytes};
    use axum::http::{Request, StatusCode};
    use clawless_core::testing::{InMemoryCronStore, InMemoryTimers, InMemoryTurnQueue};
    use serde_json::json;
    use tower::ServiceExt;

    use super::*;
    use crate::config::ClawlessConfig;
    use crate::cron_service::CronDeps;
    use clawless_base::clock::SystemClock;

    const TOKEN: &str = "operator-token-0123456789";

    fn router() -> Router {
        let cron = CronService::new(CronDeps {
            store: Arc::new(InMemoryCronStore::default()),
            timers: Arc::new(InMemoryTimers::default()),
            queue: Arc::new(InMemoryTurnQueue::default()),
            clock: Arc::new(SystemClock),
            config: Arc::new(ClawlessConfig::default()),
            store_label: Some("memory".to_owned()),
        });
        cron_admin_router(
            Arc::new(cron),
            AdminToken::known("CLAWLESS_ADMIN_TOKEN", TOKEN).unwrap(),
        )
    }

    async fn post(router: &Router, token: Option<&str>, body: &str) -> (StatusCode, Value) {
        let mut request = Request::post(CRON_ADMIN_CALL_PATH);
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let response = router
            .clone()
            .oneshot(request.body(Body::from(body.to_owned())).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let bytes = to_bytes(response.into_body(), 1 << 20).await.unwrap();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    #[tokio::test]
    async fn calls_without_the_admin_token_are_refused() {
        let router = router();
        let list = r#"{"action":"list"}"#;
        assert_eq!(post(&router, None, list).await.0, StatusCode::UNAUTHORIZED);
        let wrong = format!("{TOKEN}x");
        assert_eq!(
            post(&router, Some(&wrong), list).await.0,
            StatusCode::UNAUTHORIZED
        );
    }

    #[tokio::test]
    async fn a_good_call_answers_with_the_tools_json_and_a_bad_one_with_its_sentence() {
        let router = router();
        let add = json!({"action": "add", "job": {
            "name": "standup", "schedule": {"kind": "every", "everyMs": 3_600_000},
            "payload": {"kind": "systemEvent", "text": "Stand up."}
        }});
        let (status, job) = post(&router, Some(TOKEN), &add.to_string()).await;
        assert_eq!(status, StatusCode::OK, "{job}");
        assert_eq!(job["name"], "standup");
        assert_eq!(job["sessionTarget"], "main");
        let (status, page) = post(&router, Some(TOKEN), r#"{"action":"list"}"#).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(page["jobs"][0]["id"], job["id"]);

        let (status, error) = post(&router, Some(TOKEN), r#"{"action":"explode"}"#).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(error, json!({"error": "Unknown action: explode"}));
        let (status, error) = post(&router, Some(TOKEN), "not json").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(
            error["error"]
                .as_str()
                .unwrap()
                .starts_with("malformed request")
        );
    }
}
