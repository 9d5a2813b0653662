//! The node's HTTP client for the backend: pairing, heartbeats, `skills.bins`, reports,
//! credentials for reading its own SQS queue (on AWS), and (in local mode, where there is no
//! SQS) receiving and acknowledging jobs.
//!
//! Every call but pairing carries `Authorization: Bearer <node id>:<secret>`.

use std::time::Duration;

use clawless_exec::node::credentials::QueueCredentials;
use clawless_exec::node::record::NodeFacts;
use clawless_exec::node::wire::Envelope;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::state::NodeConfig;

/// Why a backend call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The backend could not be reached or answered garbage.
    #[error("backend unreachable: {0}")]
    Unreachable(String),
    /// 401: unknown, wrong or revoked credentials.
    #[error("the backend refused this node's credentials (revoked, or paired elsewhere)")]
    Unauthorized,
    /// Another status.
    #[error("backend answered {status}: {body}")]
    Status {
        /// HTTP status.
        status: u16,
        /// Body, for the log.
        body: String,
    },
    /// The node's SQS queue refused or failed a call (see [`crate::sqs_jobs`]).
    #[error("the job queue failed {operation}: {message}")]
    Queue {
        /// The SQS operation (`ReceiveMessage`, `DeleteMessage`).
        operation: &'static str,
        /// What SQS said.
        message: String,
        /// The SDK error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// What pairing returns.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PairedNode {
    /// The node's id.
    pub node_id: String,
    /// Its secret.
    pub secret: String,
    /// Its queue.
    pub queue: String,
}

/// One job delivery, from the local-mode queue over HTTP or from the node's SQS queue.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobDelivery {
    /// The signed envelope.
    pub body: String,
    /// Handle to acknowledge it.
    pub receipt: String,
    /// How many times it was handed out, this time included (1 when the source does not say).
    #[serde(default = "first_receive")]
    pub receive_count: u32,
}

fn first_receive() -> u32 {
    1
}

/// What `POST /nodes/credentials` returns: where the node's queue is and credentials that let
/// it receive and delete messages there, and nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueAccess {
    /// The node's SQS queue URL.
    pub queue_url: String,
    /// The queue's region.
    pub region: String,
    /// An endpoint to use instead of the region's (an emulator), when set.
    #[serde(default)]
    pub endpoint_url: Option<String>,
    /// Short-lived credentials (`Debug` redacts the secret parts).
    pub credentials: QueueCredentials,
}

#[derive(Deserialize)]
struct JobsReply {
    jobs: Vec<JobDelivery>,
}

/// What a heartbeat returns.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatAnswer {
    /// The registry's policy version.
    pub policy_version: u64,
    /// Entries granted from the chat, signed.
    pub granted: Vec<Envelope>,
}

/// A client for one backend.
#[derive(Debug, Clone)]
pub struct BackendClient {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl BackendClient {
    /// A client for `base_url` (no credentials: pairing only).
    pub fn new(base_url: &str) -> Result<Self, ClientError> {
        let http = clawless_http::client_builder()
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|err| ClientError::Unreachable(err.to_string()))?;
        Ok(Self {
            http,
            base: base_url.trim_end_matches('/').to_owned(),
            token: None,
        })
    }

    /// A client that speaks as the paired node.
    pub fn for_node(config: &NodeConfig) -> Result<Self, ClientError> {
        let mut client = Self::new(&config.url)?;
        client.token = Some(format!("Bearer {}:{}", config.node_id, config.secret));
        Ok(client)
    }

    async fn call(
        &self, method: reqwest::Method, path: &str, body: Option<String>,
    ) -> Result<String, ClientError> {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.header(reqwest::header::AUTHORIZATION, token);
        }
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body);
        }
        let response = request
            .send()
            .await
            .map_err(|err| ClientError::Unreachable(err.to_string()))?;
        let status = response.status().as_u16();
        let text = response
            .text()
            .await
            .map_err(|err| ClientError::Unreachable(err.to_string()))?;
        match status {
            200..=299 => Ok(text),
            401 => Err(ClientError::Unauthorized),
            _ => Err(ClientError::Status { status, body: text }),
        }
    }

    fn parse<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, ClientError> {
        serde_json::from_str(text).map_err(|err| ClientError::Unreachable(err.to_string()))
    }

    /// Exchanges a pairing code for a node id and secret.
    pub async fn pair(&self, code: &str, facts: &NodeFacts) -> Result<PairedNode, ClientError> {
        let body = json!({"code": code, "facts": facts}).to_string();
        let text = self
            .call(reqwest::Method::POST, "/nodes/pair", Some(body))
            .await?;
        Self::parse(&text)
    }

    /// Reports this node's facts; answers with its granted entries.
    pub async fn heartbeat(&self, facts: &NodeFacts) -> Result<HeartbeatAnswer, ClientError> {
        let body = serde_json::to_string(facts)
            .map_err(|err| ClientError::Unreachable(err.to_string()))?;
        let text = self
            .call(reqwest::Method::POST, "/nodes/heartbeat", Some(body))
            .await?;
        Self::parse(&text)
    }

    /// The binaries the agents' skills declare (spec §6).
    pub async fn skills_bins(&self) -> Result<Vec<String>, ClientError> {
        let text = self
            .call(reqwest::Method::GET, "/skills/bins", None)
            .await?;
        let value: Value = Self::parse(&text)?;
        Ok(value
            .get("bins")
            .and_then(Value::as_array)
            .map(|bins| {
                bins.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Long-polls the node's jobs (local mode).
    pub async fn poll_jobs(&self, wait: Duration) -> Result<Vec<JobDelivery>, ClientError> {
        let path = format!("/nodes/jobs?wait={}", wait.as_secs());
        let text = self.call(reqwest::Method::GET, &path, None).await?;
        Ok(Self::parse::<JobsReply>(&text)?.jobs)
    }

    /// Short-lived credentials for reading this node's own SQS queue (AWS mode).
    /// [`ClientError::Unauthorized`] when the node is revoked or unknown.
    pub async fn queue_credentials(&self) -> Result<QueueAccess, ClientError> {
        let text = self
            .call(
                reqwest::Method::POST,
                "/nodes/credentials",
                Some("{}".to_owned()),
            )
            .await?;
        Self::parse(&text)
    }

    /// Acknowledges a job delivery (local mode).
    pub async fn ack_job(&self, receipt: &str) -> Result<(), ClientError> {
        let body = json!({ "receipt": receipt }).to_string();
        self.call(reqwest::Method::POST, "/nodes/jobs/ack", Some(body))
            .await
            .map(|_| ())
    }

    /// Posts a signed report.
    pub async fn report(&self, envelope: &Envelope) -> Result<(), ClientError> {
        self.call(
            reqwest::Method::POST,
            "/nodes/results",
            Some(envelope.to_json()),
        )
        .await
        .map(|_| ())
    }
}
