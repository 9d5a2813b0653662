//! HTTP routes of node hosts and of their operator. Shared by the `nodes` function and
//! `clawless local`:
//! - [`nodes_router`]: pairing, heartbeats, reports, and (in local mode, where there is no
//!   SQS) receiving jobs;
//! - [`queue_credentials_router`]: `POST /nodes/credentials`, short-lived credentials for a
//!   node's own SQS queue (AWS);
//! - [`admin_router`]: the operator's `/nodes/admin/*` (pairing codes, list, show, revoke),
//!   behind a bearer token ([`AdminToken`], which the `nodes` function reads from its secret
//!   store at the first operator request).
//!
//! A node authenticates with `Authorization: Bearer <node id>:<secret>`; the registry holds
//! only the secret's hash. Unknown, wrong and revoked credentials get 401, malformed bodies
//! 400 with the reason, and a report for an unknown or already resolved job 200 with
//! `"changed": false`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::routing::{get, post};
use axum::{Json, Router};
use clawless_core::nodes::{NodeFacts, NodeRecord, QueueCredentialVendor};
use clawless_exec::node::media::MAX_REPORT_BODY_BYTES;
use clawless_exec::node::wire::secret_hash;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::nodes_service::{NodesError, NodesService, PairRequest, ReportOutcome};
use crate::routes::{ApiError, NodeAuthenticator};
use crate::secrets::{SecretOnDemand, SecretsError};

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
        // A report carries the files its command named (`MEDIA:` lines): up to a few MB.
        .route(
            "/nodes/results",
            post(results).layer(DefaultBodyLimit::max(MAX_REPORT_BODY_BYTES)),
        );
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
    State(state): State<NodesState>, headers: HeaderMap, body: String,
) -> Result<Json<Value>, ApiError> {
    let node = state.auth.node(&headers).await?;
    let facts: NodeFacts = parse_json(&body)?;
    let reply = state.nodes.heartbeat(&node, &facts).await?;
    Ok(Json(
        serde_json::to_value(reply).map_err(|err| ApiError::Internal(Box::new(err)))?,
    ))
}

async fn results(
    State(state): State<NodesState>, headers: HeaderMap, body: String,
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
    State(state): State<NodesState>, headers: HeaderMap, Query(query): Query<PollQuery>,
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
    State(state): State<NodesState>, headers: HeaderMap, body: String,
) -> Result<Json<Value>, ApiError> {
    let node = state.auth.node(&headers).await?;
    let ack: AckRequest = parse_json(&body)?;
    state.nodes.ack_job(&node, &ack.receipt).await?;
    Ok(Json(json!({ "acked": true })))
}

/// Where nodes read their queues, and who vends the credentials (AWS).
#[derive(Clone)]
pub struct QueueAccess {
    /// Vends credentials scoped to one queue.
    pub vendor: Arc<dyn QueueCredentialVendor>,
    /// The queues' region.
    pub region: String,
    /// The SQS endpoint when it is not AWS's own (an emulator).
    pub endpoint_url: Option<String>,
}

impl std::fmt::Debug for QueueAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueAccess")
            .field("region", &self.region)
            .field("endpoint_url", &self.endpoint_url)
            .finish_non_exhaustive()
    }
}

#[derive(Clone)]
struct CredentialsState {
    nodes: Arc<NodesService>,
    auth: RegistryNodeAuth,
    access: QueueAccess,
}

/// `POST /nodes/credentials`: the calling node's queue URL, region, endpoint and credentials
/// that can receive, delete and hide messages of that one queue, for at most an hour.
pub fn queue_credentials_router(nodes: Arc<NodesService>, access: QueueAccess) -> Router {
    let state = CredentialsState {
        auth: RegistryNodeAuth::new(Arc::clone(&nodes)),
        nodes,
        access,
    };
    Router::new()
        .route("/nodes/credentials", post(queue_credentials))
        .with_state(state)
}

async fn queue_credentials(
    State(state): State<CredentialsState>, headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let node = state.auth.node(&headers).await?;
    let credentials = state
        .nodes
        .queue_credentials(&node, state.access.vendor.as_ref())
        .await?;
    Ok(Json(json!({
        "queueUrl": node.queue,
        "region": state.access.region,
        "endpointUrl": state.access.endpoint_url,
        "credentials": credentials,
    })))
}

/// Shortest operator token accepted (the template's `AdminToken` has the same minimum).
pub const MIN_ADMIN_TOKEN_CHARS: usize = 16;

/// Why the operator routes have no usable token.
#[derive(Debug, thiserror::Error)]
pub enum AdminTokenError {
    /// The token is too short to be a secret.
    #[error("{name} is shorter than {MIN_ADMIN_TOKEN_CHARS} characters")]
    TooShort {
        /// What the token is called (the secret's name).
        name: String,
    },
    /// The token's secret could not be read.
    #[error(transparent)]
    Unreadable(#[from] SecretsError),
}

/// The bearer token of the operator routes, kept as its digest.
#[derive(Debug, Clone)]
pub struct AdminToken(Arc<TokenDigest>);

#[derive(Debug)]
enum TokenDigest {
    Known(String),
    /// Read at the first operator request and kept once read and accepted; a failed read
    /// is not kept, so the next request tries again.
    OnDemand {
        secret: Box<SecretOnDemand>,
        digest: tokio::sync::OnceCell<String>,
    },
}

impl AdminToken {
    /// A token known now, called `name` in errors.
    pub fn known(name: &str, token: &str) -> Result<Self, AdminTokenError> {
        Ok(Self(Arc::new(TokenDigest::Known(accepted_digest(
            name, token,
        )?))))
    }

    /// A token read from its secret store at the first operator request: the `nodes`
    /// function's node-host traffic (pairing, heartbeats, reports) never needs it, so its
    /// cold starts do not read it. A token that cannot be read or is too short fails the
    /// operator requests (500, the reason in the log), never the node hosts' requests.
    pub fn on_demand(secret: SecretOnDemand) -> Self {
        Self(Arc::new(TokenDigest::OnDemand {
            secret: Box::new(secret),
            digest: tokio::sync::OnceCell::new(),
        }))
    }

    async fn digest(&self) -> Result<&str, AdminTokenError> {
        match &*self.0 {
            TokenDigest::Known(digest) => Ok(digest),
            TokenDigest::OnDemand { secret, digest } => digest
                .get_or_try_init(|| async { accepted_digest(secret.name(), &secret.read().await?) })
                .await
                .map(String::as_str),
        }
    }
}

fn accepted_digest(name: &str, token: &str) -> Result<String, AdminTokenError> {
    let token = token.trim();
    if token.chars().count() < MIN_ADMIN_TOKEN_CHARS {
        return Err(AdminTokenError::TooShort {
            name: name.to_owned(),
        });
    }
    Ok(secret_hash(token))
}

#[derive(Clone)]
struct AdminState {
    nodes: Arc<NodesService>,
    token: AdminToken,
}

/// The operator's routes, for `Authorization: Bearer <token>`:
/// `POST /nodes/admin/pairing-codes`, `GET /nodes/admin/nodes`,
/// `GET /nodes/admin/nodes/{id}` and `POST /nodes/admin/nodes/{id}/revoke`. Anything else
/// (no header, another token) gets 401.
pub fn admin_router(nodes: Arc<NodesService>, token: AdminToken) -> Router {
    let state = AdminState { nodes, token };
    Router::new()
        .route("/nodes/admin/pairing-codes", post(admin_pairing_code))
        .route("/nodes/admin/nodes", get(admin_list))
        .route("/nodes/admin/nodes/{node_id}", get(admin_show))
        .route("/nodes/admin/nodes/{node_id}/revoke", post(admin_revoke))
        .with_state(state)
}

impl AdminToken {
    /// `Ok` when `headers` carry `Authorization: Bearer <this token>`, else 401 (500 when
    /// the token itself cannot be read). Compares digests, not the tokens, so the
    /// comparison's timing says nothing about the token. A request without a bearer token is
    /// refused before the token is ever read.
    pub async fn authorize(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let presented = headers
            .get(AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .ok_or(ApiError::Unauthorized)?;
        let expected = self
            .digest()
            .await
            .map_err(|err| ApiError::Internal(Box::new(err)))?;
        if secret_hash(presented.trim()) == expected {
            Ok(())
        } else {
            tracing::warn!("operator request with a wrong token refused");
            Err(ApiError::Unauthorized)
        }
    }
}

async fn require_admin(state: &AdminState, headers: &HeaderMap) -> Result<(), ApiError> {
    state.token.authorize(headers).await
}

async fn admin_pairing_code(
    State(state): State<AdminState>, headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    require_admin(&state, &headers).await?;
    let (code, expires_at_ms) = state.nodes.create_pairing_code().await?;
    Ok(Json(json!({"code": code, "expiresAtMs": expires_at_ms})))
}

async fn admin_list(
    State(state): State<AdminState>, headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    require_admin(&state, &headers).await?;
    let nodes: Vec<Value> = state.nodes.list().await?.iter().map(node_view).collect();
    Ok(Json(json!({ "nodes": nodes })))
}

async fn admin_show(
    State(state): State<AdminState>, headers: HeaderMap, Path(node_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    require_admin(&state, &headers).await?;
    let node = state
        .nodes
        .list()
        .await?
        .into_iter()
        .find(|node| node.node_id == node_id)
        .ok_or_else(|| ApiError::NotFound(format!("no node {node_id}")))?;
    Ok(Json(node_view(&node)))
}

async fn admin_revoke(
    State(state): State<AdminState>, headers: HeaderMap, Path(node_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    require_admin(&state, &headers).await?;
    if state.nodes.revoke(&node_id).await? {
        Ok(Json(json!({ "revoked": true })))
    } else {
        Err(ApiError::NotFound(format!("no node {node_id}")))
    }
}

/// A node as operators see it (`clawless nodes list --json|show`, the admin routes): every
/// fact but the secret hash. `exec` is the node's exec report ([`NodeExecReport`]
/// (clawless_core::nodes::NodeExecReport), `null` when it never sent one), which
/// `clawless exec check --node` evaluates against.
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
        "exec": node.exec,
    })
}
