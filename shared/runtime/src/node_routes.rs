//! HTTP routes node hosts call: pairing, heartbeats, reports, and (in local mode, where
//! there is no SQS) receiving jobs. Shared by the `nodes` function and `clawless local`.
//!
//! A node authenticates with `Authorization: Bearer <node id>:<secret>`; the registry holds
//! only the secret's hash. Unknown, wrong and revoked credentials get 401, malformed bodies
//! 400 with the reason, and a report for an unknown or already resolved job 200 with
//! `"changed": false`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::routing::{get, post};
use axum::{Json, Router};
use clawless_core::nodes::{NodeFacts, NodeRecord};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::nodes_service::{NodesError, NodesService, PairRequest, ReportOutcome};
use crate::routes::{ApiError, NodeAuthenticator};

/// Longest long-poll a node may ask for.
const MAX_POLL_WAIT: Duration = Duration::from_secs(20);

impl From<NodesError> for ApiError {
    fn from(err: NodesError) -> Self {
        match err {
            NodesError::Unauthorized(reason) => {
                tracing::warn!(%reason, "node request refused");
                Self::Unauthorized
            }
            NodesError::BadRequest(reason) => Self::BadRequest(reason),
            other => Self::Internal(Box::new(other)),
        }
    }
}

/// Splits `Bearer <node id>:<secret>`.
fn node_credentials(headers: &HeaderMap) -> Result<(String, String), ApiError> {
    let value = headers
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .ok_or(ApiError::Unauthorized)?;
    let token = value
        .strip_prefix("Bearer ")
        .ok_or(ApiError::Unauthorized)?;
    let (node_id, secret) = token.split_once(':').ok_or(ApiError::Unauthorized)?;
    Ok((node_id.trim().to_owned(), secret.trim().to_owned()))
}

/// Node authentication against the registry (for `GET /skills/bins` too).
#[derive(Debug, Clone)]
pub struct RegistryNodeAuth {
    nodes: Arc<NodesService>,
}

impl RegistryNodeAuth {
    /// Authenticates callers against `nodes`.
    pub fn new(nodes: Arc<NodesService>) -> Self {
        Self { nodes }
    }

    async fn node(&self, headers: &HeaderMap) -> Result<NodeRecord, ApiError> {
        let (node_id, secret) = node_credentials(headers)?;
        Ok(self.nodes.authenticate(&node_id, &secret).await?)
    }
}

#[async_trait]
impl NodeAuthenticator for RegistryNodeAuth {
    async fn authenticate(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        self.node(headers).await.map(|_| ())
    }
}

#[derive(Clone)]
struct NodesState {
    nodes: Arc<NodesService>,
    auth: RegistryNodeAuth,
}

/// The node routes. `with_job_polling` adds `GET /nodes/jobs` and `POST /nodes/jobs/ack`
/// (local mode; on AWS nodes read their SQS queue directly).
pub fn nodes_router(nodes: Arc<NodesService>, with_job_polling: bool) -> Router {
    let state = NodesState {
        auth: RegistryNodeAuth::new(Arc::clone(&nodes)),
        nodes,
    };
    let router = Router::new()
        .route("/nodes/pair", post(pair))
        .route("/nodes/heartbeat", post(heartbeat))
        .route("/nodes/results", post(results));
    let router = if with_job_polling {
        router
            .route("/nodes/jobs", get(poll_jobs))
            .route("/nodes/jobs/ack", post(ack_job))
    } else {
        router
    };
    router.with_state(state)
}

fn parse_json<T: for<'de> Deserialize<'de>>(body: &str) -> Result<T, ApiError> {
    let mut deserializer = serde_json::Deserializer::from_str(body);
    serde_path_to_error::deserialize(&mut deserializer)
        .map_err(|err| ApiError::BadRequest(format!("malformed request: {err}")))
}

async fn pair(State(state): State<NodesState>, body: String) -> Result<Json<Value>, ApiError> {
    let request: PairRequest = parse_json(&body)?;
    let paired = state.nodes.pair(&request).await?;
    Ok(Json(
        serde_json::to_value(paired).map_err(|err| ApiError::Internal(Box::new(err)))?,
    ))
}

async fn heartbeat(
    State(state): State<NodesState>,
    headers: HeaderMap,
    body: String,
) -> Result<Json<Value>, ApiError> {
    let node = state.auth.node(&headers).await?;
    let facts: NodeFacts = parse_json(&body)?;
    let reply = state.nodes.heartbeat(&node, &facts).await?;
    Ok(Json(
        serde_json::to_value(reply).map_err(|err| ApiError::Internal(Box::new(err)))?,
    ))
}

async fn results(
    State(state): State<NodesState>,
    headers: HeaderMap,
    body: String,
) -> Result<Json<Value>, ApiError> {
    let node = state.auth.node(&headers).await?;
    let outcome = state.nodes.submit_report(&node, &body).await?;
    Ok(Json(json!({
        "changed": outcome != ReportOutcome::Ignored,
        "outcome": format!("{outcome:?}"),
    })))
}

#[derive(Debug, Deserialize)]
struct PollQuery {
    #[serde(default)]
    wait: Option<u64>,
}

async fn poll_jobs(
    State(state): State<NodesState>,
    headers: HeaderMap,
    Query(query): Query<PollQuery>,
) -> Result<Json<Value>, ApiError> {
    let node = state.auth.node(&headers).await?;
    let wait = Duration::from_secs(query.wait.unwrap_or(0)).min(MAX_POLL_WAIT);
    let deliveries = state.nodes.receive_jobs(&node, wait).await?;
    let jobs: Vec<Value> = deliveries
        .into_iter()
        .map(|delivery| {
            json!({
                "body": delivery.body,
                "receipt": delivery.receipt,
                "receiveCount": delivery.receive_count,
            })
        })
        .collect();
    Ok(Json(json!({ "jobs": jobs })))
}

#[derive(Debug, Deserialize)]
struct AckRequest {
    receipt: String,
}

async fn ack_job(
    State(state): State<NodesState>,
    headers: HeaderMap,
    body: String,
) -> Result<Json<Value>, ApiError> {
    let node = state.auth.node(&headers).await?;
    let ack: AckRequest = parse_json(&body)?;
    state.nodes.ack_job(&node, &ack.receipt).await?;
    Ok(Json(json!({ "acked": true })))
}

/// A node as operators see it (`clawless nodes list --json|show`, the admin routes): every
/// fact but the secret hash.
pub fn node_view(node: &NodeRecord) -> Value {
    json!({
        "nodeId": node.node_id,
        "displayName": node.display_name,
        "platform": node.platform,
        "path": node.path,
        "skillBins": node.skill_bins,
        "queue": node.queue,
        "pairedAtMs": node.paired_at_ms,
        "lastSeenMs": node.last_seen_ms,
        "revoked": node.revoked,
        "policyVersion": node.policy_version,
        "granted": node.granted.iter().map(|granted| json!({
            "agentId": granted.agent_id,
            "pattern": granted.entry.pattern,
            "argPattern": granted.entry.arg_pattern,
            "source": granted.entry.source,
            "grantedAtMs": granted.granted_at_ms,
        })).collect::<Vec<_>>(),
    })
}
