//! [`DynamoNodeRegistry`] and [`DynamoExecJobs`]: the node registry and exec job ports on the
//! sessions table (one-table design, see [`dynamo`](crate::dynamo)).
//!
//! Owns the node, pairing-code and exec-job items and the conditional writes that make
//! "redeem once" and "first result wins" hold: every decision is a DynamoDB condition, never
//! a read followed by an unconditional write.
//!
//! # Items
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | node | `nodes` | `node#<node id>` | `node_id`, `secret_hash`, `platform`, `queue` (S); `display_name` (S, optional); `path`, `skill_bins`, `granted` (S, JSON); `exec` (S, JSON, optional: the node's exec report, kept only up to [`MAX_EXEC_REPORT_BYTES`]); `paired_at_ms`, `last_seen_ms`, `policy_version` (N); `revoked` (BOOL); `revoked_at_ms` (N, optional) |
//! | pairing code | `pairing#<code hash>` | `code` | `expires_at_ms` (N); `redeemed_at_ms` (N, once redeemed); `expires_at` (N, TTL: a day after expiry) |
//! | exec job | `job#<job id>` | `job` | `node_id`, `session_key`, `agent_id`, `call_id`, `envelope` (S); `attempt`, `created_at_ms`, `deadline_ms` (N); `result` (S) and `resolved_at_ms` (N) once resolved; `expires_at` (N, TTL: 30 days after the deadline) |
//!
//! Every node lives in the one partition `nodes`, sorted by `node#<id>`, so listing them is a
//! single `Query` in node-id order; a deployment has a handful of nodes, far from any
//! partition limit. Codes and jobs have a partition each.

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use clawless_core::nodes::{
    ExecJobRecord, ExecJobs, GrantedEntry, NodeExecReport, NodeFacts, NodeRecord, NodeRegistry,
    NodeStoreError, ResolveOutcome,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_dynamo::aws_sdk_dynamodb_1::{from_item, to_item};

use crate::dynamo::{
    EXPIRES_AT, ITEM_BUDGET, Item, NAME_PK, PK, SK, attribute_str, n, put_condition_failed, s,
    update_condition_failed,
};

/// Partition of every node item.
const NODES_PK: &str = "nodes";
/// Sort key prefix of a node item, followed by the node id.
const NODE_SK_PREFIX: &str = "node#";
/// Partition key prefix of a pairing code, followed by the code's hash.
const PAIRING_PK_PREFIX: &str = "pairing#";
/// Sort key of a pairing code.
const PAIRING_SK: &str = "code";
/// Partition key prefix of an exec job, followed by the job id.
const JOB_PK_PREFIX: &str = "job#";
/// Sort key of an exec job.
const JOB_SK: &str = "job";

/// How long DynamoDB keeps a pairing code after it expired (TTL deletes within days anyway;
/// the redeem condition never relies on it).
const PAIRING_RETENTION_SECS: u64 = 24 * 60 * 60;
/// How long DynamoDB keeps an exec job after its deadline.
const JOB_RETENTION_SECS: u64 = 30 * 24 * 60 * 60;
/// How often a grant re-reads and retries when other grants to the same node got in first.
const GRANT_ATTEMPTS: usize = 32;
/// Largest envelope or result one job holds inline: two of them, the keys and the other
/// attributes stay under the item budget.
pub const MAX_JOB_DOCUMENT_BYTES: usize = 170_000;
/// Largest exec report (JSON) a node item keeps. A larger one is not stored (the node item
/// keeps none, so the backend sends every job to the node to decide): a heartbeat must never
/// fail, nor push the item past DynamoDB's 400 KB limit, because a node described a big disk.
/// A node caps its report at 512 paths, which is far below this.
pub const MAX_EXEC_REPORT_BYTES: usize = 200_000;
/// Room for everything in a node item besides its JSON lists.
const NODE_OVERHEAD: usize = 4_096;

const _: () = assert!(2 * MAX_JOB_DOCUMENT_BYTES + 4_096 < ITEM_BUDGET);

/// The exec report as stored: its JSON, or `None` when there is none or it is larger than
/// [`MAX_EXEC_REPORT_BYTES`].
fn exec_json(
    exec: Option<&NodeExecReport>, node_id: &str,
) -> Result<Option<String>, NodeStoreError> {
    let Some(exec) = exec else {
        return Ok(None);
    };
    let text = json(exec, "an exec report")?;
    if text.len() > MAX_EXEC_REPORT_BYTES {
        tracing::warn!(
            node = %node_id,
            bytes = text.len(),
            limit = MAX_EXEC_REPORT_BYTES,
            "exec report too large to store; jobs go to the node unchecked"
        );
        return Ok(None);
    }
    Ok(Some(text))
}

fn node_sk(node_id: &str) -> String {
    format!("{NODE_SK_PREFIX}{node_id}")
}

fn pairing_pk(code_hash: &str) -> String {
    format!("{PAIRING_PK_PREFIX}{code_hash}")
}

fn job_pk(job_id: &str) -> String {
    format!("{JOB_PK_PREFIX}{job_id}")
}

/// Unix seconds of `ms`, rounded up, plus `retention` seconds: a TTL value.
fn ttl_after(ms: u64, retention: u64) -> u64 {
    ms.div_ceil(1000).saturating_add(retention)
}

fn json(value: &impl Serialize, what: &str) -> Result<String, NodeStoreError> {
    serde_json::to_string(value)
        .map_err(|err| NodeStoreError::unavailable(format!("encoding {what} as JSON"), err))
}

/// A node item's attributes besides its keys. The lists are JSON text.
#[derive(Debug, Serialize, Deserialize)]
struct NodeItem {
    node_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    display_name: Option<String>,
    secret_hash: String,
    platform: String,
    path: String,
    skill_bins: String,
    queue: String,
    paired_at_ms: u64,
    last_seen_ms: u64,
    revoked: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    revoked_at_ms: Option<u64>,
    granted: String,
    policy_version: u64,
    /// `None` when the node sent no report or one over [`MAX_EXEC_REPORT_BYTES`].
    #[serde(skip_serializing_if = "Option::is_none")]
    exec: Option<String>,
}

impl NodeItem {
    fn new(record: &NodeRecord) -> Result<Self, NodeStoreError> {
        Ok(Self {
            node_id: record.node_id.clone(),
            display_name: record.display_name.clone(),
            secret_hash: record.secret_hash.clone(),
            platform: record.platform.clone(),
            path: json(&record.path, "a PATH")?,
            skill_bins: json(&record.skill_bins, "skill bins")?,
            queue: record.queue.clone(),
            paired_at_ms: record.paired_at_ms,
            last_seen_ms: record.last_seen_ms,
            revoked: record.revoked,
            revoked_at_ms: record.revoked_at_ms,
            granted: json(&record.granted, "granted entries")?,
            policy_version: record.policy_version,
            exec: exec_json(record.exec.as_ref(), &record.node_id)?,
        })
    }

    /// The record, `what` naming the item in errors.
    fn into_record(self, what: &str) -> Result<NodeRecord, NodeStoreError> {
        Ok(NodeRecord {
            path: parse_json(&self.path, what, "path")?,
            skill_bins: parse_json(&self.skill_bins, what, "skill_bins")?,
            granted: parse_json(&self.granted, what, "granted")?,
            exec: match &self.exec {
                Some(exec) => Some(parse_json(exec, what, "exec")?),
                None => None,
            },
            node_id: self.node_id,
            display_name: self.display_name,
            secret_hash: self.secret_hash,
            platform: self.platform,
            queue: self.queue,
            paired_at_ms: self.paired_at_ms,
            last_seen_ms: self.last_seen_ms,
            revoked: self.revoked,
            revoked_at_ms: self.revoked_at_ms,
            policy_version: self.policy_version,
        })
    }

    /// Bytes of the item, counting the keys and attribute names as [`NODE_OVERHEAD`].
    fn bytes(&self) -> usize {
        [
            &self.path,
            &self.skill_bins,
            &self.granted,
            &self.secret_hash,
            &self.queue,
            &self.platform,
        ]
        .iter()
        .map(|text| text.len())
        .sum::<usize>()
            + self.exec.as_ref().map_or(0, String::len)
            + self.display_name.as_ref().map_or(0, String::len)
            + 2 * self.node_id.len()
            + NODE_OVERHEAD
    }
}

/// An exec job item's attributes besides its keys and TTL.
#[derive(Debug, Serialize, Deserialize)]
struct JobItem {
    node_id: String,
    session_key: String,
    agent_id: String,
    call_id: String,
    attempt: u32,
    envelope: String,
    created_at_ms: u64,
    deadline_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resolved_at_ms: Option<u64>,
}

impl JobItem {
    fn new(job: &ExecJobRecord) -> Self {
        Self {
            node_id: job.node_id.clone(),
            session_key: job.session_key.clone(),
            agent_id: job.agent_id.clone(),
            call_id: job.call_id.clone(),
            attempt: job.attempt,
            envelope: job.envelope.clone(),
            created_at_ms: job.created_at_ms,
            deadline_ms: job.deadline_ms,
            result: job.result.clone(),
            resolved_at_ms: job.resolved_at_ms,
        }
    }

    fn into_record(self, job_id: String) -> ExecJobRecord {
        ExecJobRecord {
            job_id,
            node_id: self.node_id,
            session_key: self.session_key,
            agent_id: self.agent_id,
            call_id: self.call_id,
            attempt: self.attempt,
            envelope: self.envelope,
            created_at_ms: self.created_at_ms,
            deadline_ms: self.deadline_ms,
            result: self.result,
            resolved_at_ms: self.resolved_at_ms,
        }
    }
}

fn corrupt(what: &str, problem: impl std::fmt::Display) -> NodeStoreError {
    NodeStoreError::corrupt(format!("DynamoDB item {what}: {problem}"))
}

fn parse_json<T: DeserializeOwned>(
    text: &str, what: &str, name: &str,
) -> Result<T, NodeStoreError> {
    serde_json::from_str(text).map_err(|err| NodeStoreError::Unavailable {
        message: format!("DynamoDB item {what}: unreadable {name}"),
        source: Some(Box::new(err)),
    })
}

fn attributes(item: &impl Serialize) -> Result<Item, NodeStoreError> {
    to_item(item).map_err(|err| NodeStoreError::unavailable("encoding a DynamoDB item", err))
}

fn node_from_item(item: Item, table: &str) -> Result<NodeRecord, NodeStoreError> {
    let what = format!(
        "{} in {table}",
        attribute_str(&item, SK).unwrap_or_default()
    );
    let node: NodeItem = from_item(item).map_err(|err| corrupt(&what, err))?;
    node.into_record(&what)
}

fn job_from_item(item: Item, table: &str) -> Result<ExecJobRecord, NodeStoreError> {
    let pk = attribute_str(&item, PK).unwrap_or_default().to_owned();
    let job: JobItem = from_item(item).map_err(|err| corrupt(&format!("{pk} in {table}"), err))?;
    let job_id = pk.strip_prefix(JOB_PK_PREFIX).unwrap_or(&pk).to_owned();
    Ok(job.into_record(job_id))
}

/// The node registry port on the sessions table, laid out as the [module docs](self) say.
///
/// - `create_pairing` and `register` are `PutItem`s conditioned on `attribute_not_exists(pk)`.
/// - `redeem_pairing` is an `UpdateItem` setting `redeemed_at_ms`, conditioned on the code
///   existing, not redeemed, and `expires_at_ms > now`: one of concurrent redeems succeeds.
/// - `heartbeat` and `revoke` are `UpdateItem`s conditioned on the node existing (and, for a
///   heartbeat, not being revoked).
/// - `grant` reads the node (strongly consistent), appends in memory and writes back
///   conditioned on the `policy_version` it read and on not being revoked; a grant that lost
///   to another re-reads and retries, so concurrent grants are all kept.
/// - `list` is one strongly consistent, paginated `Query` of the `nodes` partition.
/// - A node item over the 350 000-byte budget (thousands of grants) is
///   [`NodeStoreError::TooLarge`].
#[derive(Debug, Clone)]
pub struct DynamoNodeRegistry {
    client: Client,
    table: String,
}

impl DynamoNodeRegistry {
    /// A registry on `table` (the sessions table), using `client`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    fn failed(
        &self, action: &str, err: impl std::error::Error + Send + Sync + 'static,
    ) -> NodeStoreError {
        NodeStoreError::unavailable(format!("DynamoDB {action} in {} failed", self.table), err)
    }

    fn check_size(node: &NodeItem) -> Result<(), NodeStoreError> {
        let bytes = node.bytes();
        if bytes > ITEM_BUDGET {
            return Err(NodeStoreError::TooLarge {
                what: format!("node {}", node.node_id),
                bytes,
                limit: ITEM_BUDGET,
            });
        }
        Ok(())
    }

    async fn read_node(&self, node_id: &str) -> Result<Option<NodeRecord>, NodeStoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(NODES_PK))
            .key(SK, s(node_sk(node_id)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| self.failed(&format!("GetItem of node {node_id}"), err))?;
        output
            .item
            .map(|item| node_from_item(item, &self.table))
            .transpose()
    }
}

#[async_trait]
impl NodeRegistry for DynamoNodeRegistry {
    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table))]
    async fn create_pairing(
        &self, code_hash: &str, expires_at_ms: u64,
    ) -> Result<(), NodeStoreError> {
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .item(PK, s(pairing_pk(code_hash)))
            .item(SK, s(PAIRING_SK))
            .item("expires_at_ms", n(expires_at_ms))
            .item(
                EXPIRES_AT,
                n(ttl_after(expires_at_ms, PAIRING_RETENTION_SECS)),
            )
            .condition_expression(format!("attribute_not_exists({NAME_PK})"))
            .expression_attribute_names(NAME_PK, PK)
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(err) if put_condition_failed(&err) => Err(NodeStoreError::Conflict {
                what: "pairing code".into(),
            }),
            Err(err) => Err(self.failed("PutItem of a pairing code", err)),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table))]
    async fn redeem_pairing(&self, code_hash: &str, now_ms: u64) -> Result<bool, NodeStoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(pairing_pk(code_hash)))
            .key(SK, s(PAIRING_SK))
            .update_expression("SET #redeemed = :now")
            .condition_expression(
                "attribute_exists(#pk) AND attribute_not_exists(#redeemed) AND #expires > :now",
            )
            .expression_attribute_names(NAME_PK, PK)
            .expression_attribute_names("#redeemed", "redeemed_at_ms")
            .expression_attribute_names("#expires", "expires_at_ms")
            .expression_attribute_values(":now", n(now_ms))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(err) if update_condition_failed(&err).is_some() => Ok(false),
            Err(err) => Err(self.failed("UpdateItem redeeming a pairing code", err)),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, node_id = %record.node_id))]
    async fn register(&self, record: &NodeRecord) -> Result<(), NodeStoreError> {
        let node = NodeItem::new(record)?;
        Self::check_size(&node)?;
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(attributes(&node)?))
            .item(PK, s(NODES_PK))
            .item(SK, s(node_sk(&record.node_id)))
            .condition_expression(format!("attribute_not_exists({NAME_PK})"))
            .expression_attribute_names(NAME_PK, PK)
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(err) if put_condition_failed(&err) => Err(NodeStoreError::Conflict {
                what: format!("node {}", record.node_id),
            }),
            Err(err) => Err(self.failed(&format!("PutItem of node {}", record.node_id), err)),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, node_id))]
    async fn get(&self, node_id: &str) -> Result<Option<NodeRecord>, NodeStoreError> {
        self.read_node(node_id).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table))]
    async fn list(&self) -> Result<Vec<NodeRecord>, NodeStoreError> {
        let mut nodes = Vec::new();
        let mut start_key = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression(format!("{NAME_PK} = :pk"))
                .expression_attribute_names(NAME_PK, PK)
                .expression_attribute_values(":pk", s(NODES_PK))
                .consistent_read(true)
                .set_exclusive_start_key(start_key.take())
                .send()
                .await
                .map_err(|err| self.failed("Query of nodes", err))?;
            for item in page.items.unwrap_or_default() {
                nodes.push(node_from_item(item, &self.table)?);
            }
            match page.last_evaluated_key {
                Some(last) if !last.is_empty() => start_key = Some(last),
                _ => break,
            }
        }
        // The sort key orders by `node#<id>` bytes, which is node-id order; sorting again
        // keeps the promise even if an item's `node_id` and key ever disagreed.
        nodes.sort_by(|left, right| left.node_id.cmp(&right.node_id));
        Ok(nodes)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, node_id))]
    async fn heartbeat(
        &self, node_id: &str, facts: &NodeFacts, now_ms: u64,
    ) -> Result<bool, NodeStoreError> {
        // Same rule as `NodeRecord::apply_heartbeat`: a missing name keeps the stored one.
        let mut update =
            "SET #platform = :platform, #path = :path, #bins = :bins, #seen = :now".to_owned();
        let mut request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(NODES_PK))
            .key(SK, s(node_sk(node_id)))
            .condition_expression("attribute_exists(#pk) AND #revoked = :false")
            .expression_attribute_names(NAME_PK, PK)
            .expression_attribute_names("#platform", "platform")
            .expression_attribute_names("#path", "path")
            .expression_attribute_names("#bins", "skill_bins")
            .expression_attribute_names("#seen", "last_seen_ms")
            .expression_attribute_names("#revoked", "revoked")
            .expression_attribute_values(":platform", s(&facts.platform))
            .expression_attribute_values(":path", s(json(&facts.path, "a PATH")?))
            .expression_attribute_values(":bins", s(json(&facts.skill_bins, "skill bins")?))
            .expression_attribute_values(":now", n(now_ms))
            .expression_attribute_values(":false", AttributeValue::Bool(false));
        if let Some(name) = &facts.display_name {
            update.push_str(", #name = :name");
            request = request
                .expression_attribute_names("#name", "display_name")
                .expression_attribute_values(":name", s(name));
        }
        // No report (or one too large to keep) clears the stored one: never pre-check stale.
        request = request.expression_attribute_names("#exec", "exec");
        match exec_json(facts.exec.as_ref(), node_id)? {
            Some(exec) => {
                update.push_str(", #exec = :exec");
                request = request.expression_attribute_values(":exec", s(exec));
            }
            None => update.push_str(" REMOVE #exec"),
        }
        match request.update_expression(update).send().await {
            Ok(_) => Ok(true),
            Err(err) if update_condition_failed(&err).is_some() => Ok(false),
            Err(err) => Err(self.failed(&format!("UpdateItem heartbeat of node {node_id}"), err)),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, node_id))]
    async fn revoke(&self, node_id: &str, now_ms: u64) -> Result<bool, NodeStoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(NODES_PK))
            .key(SK, s(node_sk(node_id)))
            .update_expression("SET #revoked = :true, #at = if_not_exists(#at, :now)")
            .condition_expression("attribute_exists(#pk)")
            .expression_attribute_names(NAME_PK, PK)
            .expression_attribute_names("#revoked", "revoked")
            .expression_attribute_names("#at", "revoked_at_ms")
            .expression_attribute_values(":true", AttributeValue::Bool(true))
            .expression_attribute_values(":now", n(now_ms))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(err) if update_condition_failed(&err).is_some() => Ok(false),
            Err(err) => Err(self.failed(&format!("UpdateItem revoking node {node_id}"), err)),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, node_id, agent_id = %entry.agent_id))]
    async fn grant(&self, node_id: &str, entry: &GrantedEntry) -> Result<u64, NodeStoreError> {
        for _ in 0..GRANT_ATTEMPTS {
            let Some(mut node) = self.read_node(node_id).await? else {
                return Err(NodeStoreError::NotFound {
                    what: format!("node {node_id}"),
                });
            };
            if node.revoked {
                return Err(NodeStoreError::Revoked {
                    node_id: node_id.to_owned(),
                });
            }
            let read_version = node.policy_version;
            if !node.apply_grant(entry) {
                return Ok(read_version);
            }
            let item = NodeItem::new(&node)?;
            Self::check_size(&item)?;
            let result = self
                .client
                .update_item()
                .table_name(&self.table)
                .key(PK, s(NODES_PK))
                .key(SK, s(node_sk(node_id)))
                .update_expression("SET #granted = :granted, #version = :new")
                .condition_expression("#version = :read AND #revoked = :false")
                .expression_attribute_names("#granted", "granted")
                .expression_attribute_names("#version", "policy_version")
                .expression_attribute_names("#revoked", "revoked")
                .expression_attribute_values(":granted", s(item.granted))
                .expression_attribute_values(":new", n(node.policy_version))
                .expression_attribute_values(":read", n(read_version))
                .expression_attribute_values(":false", AttributeValue::Bool(false))
                .send()
                .await;
            match result {
                Ok(_) => return Ok(node.policy_version),
                // Another grant (or a revoke) got in between: read again and decide again.
                Err(err) if update_condition_failed(&err).is_some() => {
                    tracing::debug!("grant lost a race; retrying");
                }
                Err(err) => {
                    return Err(self.failed(&format!("UpdateItem grant to node {node_id}"), err));
                }
            }
        }
        Err(NodeStoreError::corrupt(format!(
            "grant to node {node_id} in {} lost {GRANT_ATTEMPTS} races in a row",
            self.table
        )))
    }
}

/// The exec job port on the sessions table, laid out as the [module docs](self) say.
///
/// - `create` is a `PutItem` conditioned on `attribute_not_exists(pk)`.
/// - `next_attempt` is an `UpdateItem` conditioned on the job existing, having no result and
///   an `attempt` below the new one.
/// - `resolve` is an `UpdateItem` conditioned on the job existing, having no result and being
///   at `attempt`; when the condition fails, DynamoDB returns the item as it was
///   (`ReturnValuesOnConditionCheckFailure = ALL_OLD`), which says why, without another read.
/// - Envelopes and results over [`MAX_JOB_DOCUMENT_BYTES`] are [`NodeStoreError::TooLarge`].
#[derive(Debug, Clone)]
pub struct DynamoExecJobs {
    client: Client,
    table: String,
}

impl DynamoExecJobs {
    /// Exec jobs on `table` (the sessions table), using `client`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    fn failed(
        &self, action: &str, job_id: &str, err: impl std::error::Error + Send + Sync + 'static,
    ) -> NodeStoreError {
        NodeStoreError::unavailable(
            format!(
                "DynamoDB {action} of exec job {job_id:?} in {} failed",
                self.table
            ),
            err,
        )
    }

    fn check_document(job_id: &str, what: &str, document: &str) -> Result<(), NodeStoreError> {
        if document.len() > MAX_JOB_DOCUMENT_BYTES {
            return Err(NodeStoreError::TooLarge {
                what: format!("{what} of job {job_id}"),
                bytes: document.len(),
                limit: MAX_JOB_DOCUMENT_BYTES,
            });
        }
        Ok(())
    }

    /// An `UpdateItem` of job `job_id` that applies only while the job exists, is unresolved,
    /// and its `attempt` stands in `attempt_order` (`<` or `=`) to `attempt`. The caller adds
    /// the update expression with its other names and values.
    fn update_unresolved_job(
        &self, job_id: &str, attempt_order: &str, attempt: u32,
    ) -> UpdateItemFluentBuilder {
        self.client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(job_pk(job_id)))
            .key(SK, s(JOB_SK))
            .condition_expression(format!(
                "attribute_exists(#pk) AND attribute_not_exists(#result) \
                 AND #attempt {attempt_order} :attempt"
            ))
            .expression_attribute_names(NAME_PK, PK)
            .expression_attribute_names("#attempt", "attempt")
            .expression_attribute_names("#result", "result")
            .expression_attribute_values(":attempt", n(u64::from(attempt)))
    }
}

#[async_trait]
impl ExecJobs for DynamoExecJobs {
    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, job_id = %job.job_id))]
    async fn create(&self, job: &ExecJobRecord) -> Result<bool, NodeStoreError> {
        Self::check_document(&job.job_id, "envelope", &job.envelope)?;
        if let Some(result) = &job.result {
            Self::check_document(&job.job_id, "result", result)?;
        }
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(attributes(&JobItem::new(job))?))
            .item(PK, s(job_pk(&job.job_id)))
            .item(SK, s(JOB_SK))
            .item(
                EXPIRES_AT,
                n(ttl_after(job.deadline_ms, JOB_RETENTION_SECS)),
            )
            .condition_expression(format!("attribute_not_exists({NAME_PK})"))
            .expression_attribute_names(NAME_PK, PK)
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(err) if put_condition_failed(&err) => Ok(false),
            Err(err) => Err(self.failed("PutItem", &job.job_id, err)),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, job_id))]
    async fn get(&self, job_id: &str) -> Result<Option<ExecJobRecord>, NodeStoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(job_pk(job_id)))
            .key(SK, s(JOB_SK))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| self.failed("GetItem", job_id, err))?;
        output
            .item
            .map(|item| job_from_item(item, &self.table))
            .transpose()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, job_id, attempt))]
    async fn next_attempt(
        &self, job_id: &str, attempt: u32, envelope: &str, deadline_ms: u64,
    ) -> Result<bool, NodeStoreError> {
        Self::check_document(job_id, "envelope", envelope)?;
        let result = self
            .update_unresolved_job(job_id, "<", attempt)
            .update_expression(
                "SET #attempt = :attempt, #envelope = :envelope, #deadline = :deadline, \
                 #expires = :expires",
            )
            .expression_attribute_names("#envelope", "envelope")
            .expression_attribute_names("#deadline", "deadline_ms")
            .expression_attribute_names("#expires", EXPIRES_AT)
            .expression_attribute_values(":envelope", s(envelope))
            .expression_attribute_values(":deadline", n(deadline_ms))
            .expression_attribute_values(":expires", n(ttl_after(deadline_ms, JOB_RETENTION_SECS)))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(err) if update_condition_failed(&err).is_some() => Ok(false),
            Err(err) => Err(self.failed("UpdateItem (next attempt)", job_id, err)),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, job_id, attempt))]
    async fn resolve(
        &self, job_id: &str, attempt: u32, result: &str, now_ms: u64,
    ) -> Result<ResolveOutcome, NodeStoreError> {
        Self::check_document(job_id, "result", result)?;
        let written = self
            .update_unresolved_job(job_id, "=", attempt)
            .update_expression("SET #result = :result, #resolved = :now")
            .expression_attribute_names("#resolved", "resolved_at_ms")
            .expression_attribute_values(":result", s(result))
            .expression_attribute_values(":now", n(now_ms))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let err = match written {
            Ok(_) => return Ok(ResolveOutcome::Recorded),
            Err(err) => err,
        };
        let Some(old) = update_condition_failed(&err) else {
            return Err(self.failed("UpdateItem (resolve)", job_id, err));
        };
        // No old item means there was no job. Otherwise the item as it was says why.
        let Some(old) = old else {
            return Ok(ResolveOutcome::Unknown);
        };
        match job_from_item(old.clone(), &self.table)?.resolution_for(attempt) {
            ResolveOutcome::Recorded => Err(NodeStoreError::corrupt(format!(
                "DynamoDB refused to resolve job {job_id:?} in {}, yet the job accepts the result",
                self.table
            ))),
            outcome => Ok(outcome),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_pairing_and_job_keys_never_meet_session_or_inbox_keys() {
        // Session keys start with `agent:`, inbox claims with `inbox#`.
        for key in [
            NODES_PK.to_owned(),
            pairing_pk("abc"),
            job_pk("agent:main:main"),
        ] {
            assert!(
                !key.starts_with("agent:") && !key.starts_with("inbox#"),
                "{key}"
            );
        }
        assert_ne!(pairing_pk("x"), job_pk("x"));
    }

    #[test]
    fn node_sort_keys_sort_like_node_ids() {
        let mut ids = vec!["b", "A", "a_1", "10", "9", "a"];
        let mut keys: Vec<String> = ids.iter().map(|id| node_sk(id)).collect();
        ids.sort_unstable();
        keys.sort();
        let from_keys: Vec<&str> = keys
            .iter()
            .map(|key| key.strip_prefix(NODE_SK_PREFIX).unwrap())
            .collect();
        assert_eq!(from_keys, ids);
    }

    fn s(text: &str) -> AttributeValue {
        AttributeValue::S(text.into())
    }

    fn n(number: &str) -> AttributeValue {
        AttributeValue::N(number.into())
    }

    #[test]
    fn a_node_item_has_the_documented_attributes_and_types() {
        let record = NodeRecord {
            node_id: "n1".into(),
            display_name: None,
            secret_hash: "ab".into(),
            platform: "linux".into(),
            path: vec!["/usr/bin".into()],
            skill_bins: vec![],
            queue: "q".into(),
            paired_at_ms: 1,
            last_seen_ms: 2,
            revoked: false,
            revoked_at_ms: None,
            granted: vec![],
            policy_version: 3,
            exec: None,
        };
        let item = to_item(NodeItem::new(&record).unwrap()).unwrap();
        let expected = Item::from([
            ("node_id".into(), s("n1")),
            ("secret_hash".into(), s("ab")),
            ("platform".into(), s("linux")),
            ("path".into(), s(r#"["/usr/bin"]"#)),
            ("skill_bins".into(), s("[]")),
            ("queue".into(), s("q")),
            ("paired_at_ms".into(), n("1")),
            ("last_seen_ms".into(), n("2")),
            ("revoked".into(), AttributeValue::Bool(false)),
            ("granted".into(), s("[]")),
            ("policy_version".into(), n("3")),
        ]);
        assert_eq!(item, expected, "absent options are left out, not NULL");
        let mut read = expected;
        read.insert("revoked_at_ms".into(), AttributeValue::Null(true));
        let node: NodeItem = from_item(read).unwrap();
        assert_eq!(node.into_record("n1").unwrap(), record);
    }

    #[test]
    fn an_exec_job_item_has_the_documented_attributes_and_types() {
        let job = ExecJobRecord {
            job_id: "j1".into(),
            node_id: "n1".into(),
            session_key: "agent:main:main".into(),
            agent_id: "main".into(),
            call_id: "c1".into(),
            attempt: 2,
            envelope: "{}".into(),
            created_at_ms: 10,
            deadline_ms: 20,
            result: Some("ok".into()),
            resolved_at_ms: None,
        };
        let item = to_item(JobItem::new(&job)).unwrap();
        let expected = Item::from([
            ("node_id".into(), s("n1")),
            ("session_key".into(), s("agent:main:main")),
            ("agent_id".into(), s("main")),
            ("call_id".into(), s("c1")),
            ("attempt".into(), n("2")),
            ("envelope".into(), s("{}")),
            ("created_at_ms".into(), n("10")),
            ("deadline_ms".into(), n("20")),
            ("result".into(), s("ok")),
        ]);
        assert_eq!(item, expected);
        let mut read = expected;
        read.insert(PK.into(), s("job#j1"));
        assert_eq!(job_from_item(read, "t").unwrap(), job);
    }

    #[test]
    fn ttl_values_are_whole_seconds_after_the_time() {
        assert_eq!(ttl_after(1_000, 10), 11);
        assert_eq!(ttl_after(1_001, 10), 12);
        assert_eq!(ttl_after(u64::MAX, u64::MAX), u64::MAX);
    }
}
