//! [`SqliteNodeRegistry`] and [`SqliteExecJobs`]: the node registry and exec job ports on
//! the local SQLite database.
//!
//! Owns the SQL for pairing codes (`node_pairings`), nodes (`nodes`: scalar columns, with the
//! PATH, skill bins, grants and the optional exec report as JSON text) and exec jobs (`exec_jobs`). Every
//! read-modify-write runs in one `BEGIN IMMEDIATE` transaction or is a single conditional
//! statement, so first-wins rules hold across processes sharing the file.

use async_trait::async_trait;
use clawless_core::nodes::{
    ExecJobRecord, ExecJobs, GrantedEntry, NodeFacts, NodeRecord, NodeRegistry, NodeStoreError,
    ResolveOutcome,
};
use rusqlite::types::Type;
use rusqlite::{OptionalExtension, Row, TransactionBehavior, params};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{SqliteDb, SqliteError};

/// Converts a port integer to SQLite's signed 64-bit one, saturating (times, versions).
fn to_sql(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Reads a non-negative integer column back (negative values, never written, read as 0).
fn from_sql(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

fn to_json(value: &impl Serialize) -> Result<String, rusqlite::Error> {
    serde_json::to_string(value).map_err(|err| rusqlite::Error::ToSqlConversionFailure(err.into()))
}

fn json_column<T: DeserializeOwned>(row: &Row<'_>, index: usize) -> Result<T, rusqlite::Error> {
    let text: String = row.get(index)?;
    serde_json::from_str(&text)
        .map_err(|err| rusqlite::Error::FromSqlConversionFailure(index, Type::Text, err.into()))
}

const NODE_COLUMNS: &str = "node_id, display_name, secret_hash, platform, path, skill_bins, \
     queue, paired_at_ms, last_seen_ms, revoked, revoked_at_ms, granted, policy_version, exec";

/// An optional JSON column: NULL is `None`.
fn optional_json_column<T: DeserializeOwned>(
    row: &Row<'_>, index: usize,
) -> Result<Option<T>, rusqlite::Error> {
    let text: Option<String> = row.get(index)?;
    text.map(|text| {
        serde_json::from_str(&text)
            .map_err(|err| rusqlite::Error::FromSqlConversionFailure(index, Type::Text, err.into()))
    })
    .transpose()
}

fn optional_json(value: Option<&impl Serialize>) -> Result<Option<String>, rusqlite::Error> {
    value.map(to_json).transpose()
}

fn node_from_row(row: &Row<'_>) -> Result<NodeRecord, rusqlite::Error> {
    Ok(NodeRecord {
        node_id: row.get(0)?,
        display_name: row.get(1)?,
        secret_hash: row.get(2)?,
        platform: row.get(3)?,
        path: json_column(row, 4)?,
        skill_bins: json_column(row, 5)?,
        queue: row.get(6)?,
        paired_at_ms: from_sql(row.get(7)?),
        last_seen_ms: from_sql(row.get(8)?),
        revoked: row.get(9)?,
        revoked_at_ms: row.get::<_, Option<i64>>(10)?.map(from_sql),
        granted: json_column(row, 11)?,
        policy_version: from_sql(row.get(12)?),
        exec: optional_json_column(row, 13)?,
    })
}

/// How a grant transaction ended, when SQLite itself did not fail.
enum GrantOutcome {
    Version(u64),
    NotFound,
    Revoked,
}

/// The node registry port on a [`SqliteDb`].
///
/// - A pairing code is redeemed by one `UPDATE … WHERE redeemed_at_ms IS NULL AND
///   expires_at_ms > now`: atomic, so of concurrent redeems one changes the row.
/// - `register` and `create_pairing` insert with `ON CONFLICT DO NOTHING`; no change is a
///   [`NodeStoreError::Conflict`].
/// - `grant` reads, appends and writes the JSON list in one `BEGIN IMMEDIATE` transaction.
/// - `list` orders by `node_id` in SQLite's binary collation, which is byte order.
#[derive(Debug, Clone)]
pub struct SqliteNodeRegistry {
    db: SqliteDb,
}

impl SqliteNodeRegistry {
    /// A registry on `db`.
    pub fn new(db: SqliteDb) -> Self {
        Self { db }
    }

    fn failed(&self, action: &str, err: SqliteError) -> NodeStoreError {
        NodeStoreError::unavailable(
            format!("SQLite {action} in {} failed", self.db.location()),
            err,
        )
    }
}

#[async_trait]
impl NodeRegistry for SqliteNodeRegistry {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn create_pairing(
        &self, code_hash: &str, expires_at_ms: u64,
    ) -> Result<(), NodeStoreError> {
        let hash = code_hash.to_owned();
        let inserted = self
            .db
            .run(move |connection| {
                connection.execute(
                    "INSERT INTO node_pairings (code_hash, expires_at_ms) VALUES (?1, ?2)
                     ON CONFLICT (code_hash) DO NOTHING",
                    params![hash, to_sql(expires_at_ms)],
                )
            })
            .await
            .map_err(|err| self.failed("create of a pairing code", err))?;
        if inserted == 0 {
            return Err(NodeStoreError::Conflict {
                what: "pairing code".into(),
            });
        }
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn redeem_pairing(&self, code_hash: &str, now_ms: u64) -> Result<bool, NodeStoreError> {
        let hash = code_hash.to_owned();
        let changed = self
            .db
            .run(move |connection| {
                connection.execute(
                    "UPDATE node_pairings SET redeemed_at_ms = ?2
                     WHERE code_hash = ?1 AND redeemed_at_ms IS NULL AND expires_at_ms > ?2",
                    params![hash, to_sql(now_ms)],
                )
            })
            .await
            .map_err(|err| self.failed("redeem of a pairing code", err))?;
        Ok(changed == 1)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(node_id = %record.node_id))]
    async fn register(&self, record: &NodeRecord) -> Result<(), NodeStoreError> {
        let node = record.clone();
        let inserted = self
            .db
            .run(move |connection| {
                connection.execute(
                    &format!(
                        "INSERT INTO nodes ({NODE_COLUMNS})
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
                         ON CONFLICT (node_id) DO NOTHING"
                    ),
                    params![
                        node.node_id,
                        node.display_name,
                        node.secret_hash,
                        node.platform,
                        to_json(&node.path)?,
                        to_json(&node.skill_bins)?,
                        node.queue,
                        to_sql(node.paired_at_ms),
                        to_sql(node.last_seen_ms),
                        node.revoked,
                        node.revoked_at_ms.map(to_sql),
                        to_json(&node.granted)?,
                        to_sql(node.policy_version),
                        optional_json(node.exec.as_ref())?,
                    ],
                )
            })
            .await
            .map_err(|err| self.failed(&format!("register of node {}", record.node_id), err))?;
        if inserted == 0 {
            return Err(NodeStoreError::Conflict {
                what: format!("node {}", record.node_id),
            });
        }
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(node_id))]
    async fn get(&self, node_id: &str) -> Result<Option<NodeRecord>, NodeStoreError> {
        let id = node_id.to_owned();
        self.db
            .run(move |connection| {
                connection
                    .query_row(
                        &format!("SELECT {NODE_COLUMNS} FROM nodes WHERE node_id = ?1"),
                        [id],
                        node_from_row,
                    )
                    .optional()
            })
            .await
            .map_err(|err| self.failed(&format!("read of node {node_id}"), err))
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list(&self) -> Result<Vec<NodeRecord>, NodeStoreError> {
        self.db
            .run(move |connection| {
                let mut select = connection.prepare(&format!(
                    "SELECT {NODE_COLUMNS} FROM nodes ORDER BY node_id"
                ))?;
                select
                    .query_map([], node_from_row)?
                    .collect::<Result<Vec<_>, _>>()
            })
            .await
            .map_err(|err| self.failed("listing of nodes", err))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(node_id))]
    async fn heartbeat(
        &self, node_id: &str, facts: &NodeFacts, now_ms: u64,
    ) -> Result<bool, NodeStoreError> {
        let id = node_id.to_owned();
        let facts = facts.clone();
        let changed = self
            .db
            .run(move |connection| {
                // Same rule as `NodeRecord::apply_heartbeat`: a missing name keeps the stored one.
                connection.execute(
                    "UPDATE nodes SET platform = ?2, path = ?3, skill_bins = ?4,
                         display_name = COALESCE(?5, display_name), last_seen_ms = ?6, exec = ?7
                     WHERE node_id = ?1 AND revoked = 0",
                    params![
                        id,
                        facts.platform,
                        to_json(&facts.path)?,
                        to_json(&facts.skill_bins)?,
                        facts.display_name,
                        to_sql(now_ms),
                        optional_json(facts.exec.as_ref())?,
                    ],
                )
            })
            .await
            .map_err(|err| self.failed(&format!("heartbeat of node {node_id}"), err))?;
        Ok(changed == 1)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(node_id))]
    async fn revoke(&self, node_id: &str, now_ms: u64) -> Result<bool, NodeStoreError> {
        let id = node_id.to_owned();
        let changed = self
            .db
            .run(move |connection| {
                connection.execute(
                    "UPDATE nodes SET revoked = 1, revoked_at_ms = COALESCE(revoked_at_ms, ?2)
                     WHERE node_id = ?1",
                    params![id, to_sql(now_ms)],
                )
            })
            .await
            .map_err(|err| self.failed(&format!("revoke of node {node_id}"), err))?;
        Ok(changed == 1)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(node_id, agent_id = %entry.agent_id))]
    async fn grant(&self, node_id: &str, entry: &GrantedEntry) -> Result<u64, NodeStoreError> {
        let id = node_id.to_owned();
        let entry = entry.clone();
        let outcome = self
            .db
            .run(move |connection| {
                let transaction =
                    connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let node = transaction
                    .query_row(
                        &format!("SELECT {NODE_COLUMNS} FROM nodes WHERE node_id = ?1"),
                        [&id],
                        node_from_row,
                    )
                    .optional()?;
                let Some(mut node) = node else {
                    return Ok(GrantOutcome::NotFound);
                };
                if node.revoked {
                    return Ok(GrantOutcome::Revoked);
                }
                if node.apply_grant(&entry) {
                    transaction.execute(
                        "UPDATE nodes SET granted = ?2, policy_version = ?3 WHERE node_id = ?1",
                        params![id, to_json(&node.granted)?, to_sql(node.policy_version)],
                    )?;
                    transaction.commit()?;
                }
                Ok(GrantOutcome::Version(node.policy_version))
            })
            .await
            .map_err(|err| self.failed(&format!("grant to node {node_id}"), err))?;
        match outcome {
            GrantOutcome::Version(version) => Ok(version),
            GrantOutcome::NotFound => Err(NodeStoreError::NotFound {
                what: format!("node {node_id}"),
            }),
            GrantOutcome::Revoked => Err(NodeStoreError::Revoked {
                node_id: node_id.to_owned(),
            }),
        }
    }
}

const JOB_COLUMNS: &str = "job_id, node_id, session_key, agent_id, call_id, attempt, envelope, \
     created_at_ms, deadline_ms, result, resolved_at_ms";

fn job_from_row(row: &Row<'_>) -> Result<ExecJobRecord, rusqlite::Error> {
    Ok(ExecJobRecord {
        job_id: row.get(0)?,
        node_id: row.get(1)?,
        session_key: row.get(2)?,
        agent_id: row.get(3)?,
        call_id: row.get(4)?,
        attempt: row.get(5)?,
        envelope: row.get(6)?,
        created_at_ms: from_sql(row.get(7)?),
        deadline_ms: from_sql(row.get(8)?),
        result: row.get(9)?,
        resolved_at_ms: row.get::<_, Option<i64>>(10)?.map(from_sql),
    })
}

/// The exec job port on a [`SqliteDb`].
///
/// - `create` inserts with `ON CONFLICT DO NOTHING`: an existing id is left as it was.
/// - `next_attempt` is one `UPDATE … WHERE result IS NULL AND attempt < ?`.
/// - `resolve` reads the job and writes the result in one `BEGIN IMMEDIATE` transaction,
///   classifying with [`ExecJobRecord::resolution_for`], so of concurrent resolves exactly
///   one is recorded.
#[derive(Debug, Clone)]
pub struct SqliteExecJobs {
    db: SqliteDb,
}

impl SqliteExecJobs {
    /// Exec jobs on `db`.
    pub fn new(db: SqliteDb) -> Self {
        Self { db }
    }

    fn failed(&self, action: &str, job_id: &str, err: SqliteError) -> NodeStoreError {
        NodeStoreError::unavailable(
            format!(
                "SQLite {action} of exec job {job_id:?} in {} failed",
                self.db.location()
            ),
            err,
        )
    }
}

#[async_trait]
impl ExecJobs for SqliteExecJobs {
    #[tracing::instrument(level = "debug", skip_all, fields(job_id = %job.job_id))]
    async fn create(&self, job: &ExecJobRecord) -> Result<bool, NodeStoreError> {
        let record = job.clone();
        let inserted = self
            .db
            .run(move |connection| {
                connection.execute(
                    &format!(
                        "INSERT INTO exec_jobs ({JOB_COLUMNS})
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
                         ON CONFLICT (job_id) DO NOTHING"
                    ),
                    params![
                        record.job_id,
                        record.node_id,
                        record.session_key,
                        record.agent_id,
                        record.call_id,
                        record.attempt,
                        record.envelope,
                        to_sql(record.created_at_ms),
                        to_sql(record.deadline_ms),
                        record.result,
                        record.resolved_at_ms.map(to_sql),
                    ],
                )
            })
            .await
            .map_err(|err| self.failed("create", &job.job_id, err))?;
        Ok(inserted == 1)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(job_id))]
    async fn get(&self, job_id: &str) -> Result<Option<ExecJobRecord>, NodeStoreError> {
        let id = job_id.to_owned();
        self.db
            .run(move |connection| {
                connection
                    .query_row(
                        &format!("SELECT {JOB_COLUMNS} FROM exec_jobs WHERE job_id = ?1"),
                        [id],
                        job_from_row,
                    )
                    .optional()
            })
            .await
            .map_err(|err| self.failed("read", job_id, err))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(job_id, attempt))]
    async fn next_attempt(
        &self, job_id: &str, attempt: u32, envelope: &str, deadline_ms: u64,
    ) -> Result<bool, NodeStoreError> {
        let id = job_id.to_owned();
        let envelope = envelope.to_owned();
        let changed = self
            .db
            .run(move |connection| {
                connection.execute(
                    "UPDATE exec_jobs SET attempt = ?2, envelope = ?3, deadline_ms = ?4
                     WHERE job_id = ?1 AND result IS NULL AND attempt < ?2",
                    params![id, attempt, envelope, to_sql(deadline_ms)],
                )
            })
            .await
            .map_err(|err| self.failed("next attempt", job_id, err))?;
        Ok(changed == 1)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(job_id, attempt))]
    async fn resolve(
        &self, job_id: &str, attempt: u32, result: &str, now_ms: u64,
    ) -> Result<ResolveOutcome, NodeStoreError> {
        let id = job_id.to_owned();
        let result = result.to_owned();
        self.db
            .run(move |connection| {
                let transaction =
                    connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let job = transaction
                    .query_row(
                        &format!("SELECT {JOB_COLUMNS} FROM exec_jobs WHERE job_id = ?1"),
                        [&id],
                        job_from_row,
                    )
                    .optional()?;
                let Some(job) = job else {
                    return Ok(ResolveOutcome::Unknown);
                };
                let outcome = job.resolution_for(attempt);
                if outcome == ResolveOutcome::Recorded {
                    transaction.execute(
                        "UPDATE exec_jobs SET result = ?2, resolved_at_ms = ?3 WHERE job_id = ?1",
                        params![id, result, to_sql(now_ms)],
                    )?;
                    transaction.commit()?;
                }
                Ok(outcome)
            })
            .await
            .map_err(|err| self.failed("resolve", job_id, err))
    }
}
