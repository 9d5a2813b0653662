//! [`SqliteBackgroundProcesses`]: the background process index on the local SQLite database.
//!
//! Owns the SQL of the `background_processes` table, one row per (session key, process
//! session id). The once-gate of an exit is a single conditional upsert (`… ON CONFLICT DO
//! UPDATE … WHERE status = 'running'`), so of concurrent finishes exactly one changes a row,
//! across processes sharing the file too.

use async_trait::async_trait;
use clawless_core::nodes::{BackgroundProcess, BackgroundProcesses, NodeStoreError, ProcessStatus};
use rusqlite::types::Type;
use rusqlite::{OptionalExtension, Row, params};

use super::{SqliteDb, SqliteError};

const COLUMNS: &str = "session_key, session_id, node_id, exec_job_id, command, status, \
     started_at_ms, ended_at_ms, exit_code";

fn to_sql(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn from_sql(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

fn from_row(row: &Row<'_>) -> Result<BackgroundProcess, rusqlite::Error> {
    let status: String = row.get(5)?;
    let status = ProcessStatus::parse(&status).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            5,
            Type::Text,
            format!("unknown process status {status:?}").into(),
        )
    })?;
    Ok(BackgroundProcess {
        session_key: row.get(0)?,
        session_id: row.get(1)?,
        node_id: row.get(2)?,
        exec_job_id: row.get(3)?,
        command: row.get(4)?,
        status,
        started_at_ms: from_sql(row.get(6)?),
        ended_at_ms: row.get::<_, Option<i64>>(7)?.map(from_sql),
        exit_code: row.get(8)?,
    })
}

/// The background process index on a [`SqliteDb`].
#[derive(Debug, Clone)]
pub struct SqliteBackgroundProcesses {
    db: SqliteDb,
}

impl SqliteBackgroundProcesses {
    /// The index on `db`.
    pub fn new(db: SqliteDb) -> Self {
        Self { db }
    }

    fn failed(&self, action: &str, err: SqliteError) -> NodeStoreError {
        NodeStoreError::unavailable(
            format!(
                "SQLite {action} of the background process index in {} failed",
                self.db.location()
            ),
            err,
        )
    }
}

/// The insert of `entry`'s whole row; the caller adds the conflict clause.
fn insert_sql(conflict: &str) -> String {
    format!(
        "INSERT INTO background_processes ({COLUMNS})
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) {conflict}"
    )
}

fn execute_insert(
    connection: &rusqlite::Connection, sql: &str, entry: &BackgroundProcess,
) -> Result<usize, rusqlite::Error> {
    connection.execute(
        sql,
        params![
            entry.session_key,
            entry.session_id,
            entry.node_id,
            entry.exec_job_id,
            entry.command,
            entry.status.as_str(),
            to_sql(entry.started_at_ms),
            entry.ended_at_ms.map(to_sql),
            entry.exit_code,
        ],
    )
}

#[async_trait]
impl BackgroundProcesses for SqliteBackgroundProcesses {
    async fn record_running(&self, entry: &BackgroundProcess) -> Result<bool, NodeStoreError> {
        let entry = entry.clone();
        let inserted = self
            .db
            .run(move |connection| {
                execute_insert(
                    connection,
                    &insert_sql("ON CONFLICT (session_key, session_id) DO NOTHING"),
                    &entry,
                )
            })
            .await
            .map_err(|err| self.failed("record", err))?;
        Ok(inserted == 1)
    }

    async fn get(
        &self, session_key: &str, session_id: &str,
    ) -> Result<Option<BackgroundProcess>, NodeStoreError> {
        let (key, id) = (session_key.to_owned(), session_id.to_owned());
        self.db
            .run(move |connection| {
                connection
                    .query_row(
                        &format!(
                            "SELECT {COLUMNS} FROM background_processes
                             WHERE session_key = ?1 AND session_id = ?2"
                        ),
                        params![key, id],
                        from_row,
                    )
                    .optional()
            })
            .await
            .map_err(|err| self.failed("read", err))
    }

    async fn list(&self, session_key: &str) -> Result<Vec<BackgroundProcess>, NodeStoreError> {
        let key = session_key.to_owned();
        self.db
            .run(move |connection| {
                let mut statement = connection.prepare(&format!(
                    "SELECT {COLUMNS} FROM background_processes WHERE session_key = ?1
                     ORDER BY started_at_ms DESC, session_id ASC"
                ))?;
                let rows = statement.query_map([key], from_row)?;
                rows.collect::<Result<Vec<_>, _>>()
            })
            .await
            .map_err(|err| self.failed("list", err))
    }

    async fn finish(&self, ended: &BackgroundProcess) -> Result<bool, NodeStoreError> {
        let ended = ended.clone();
        let changed = self
            .db
            .run(move |connection| {
                execute_insert(
                    connection,
                    &insert_sql(
                        "ON CONFLICT (session_key, session_id) DO UPDATE SET
                            node_id = excluded.node_id, exec_job_id = excluded.exec_job_id,
                            command = excluded.command, status = excluded.status,
                            started_at_ms = excluded.started_at_ms,
                            ended_at_ms = excluded.ended_at_ms, exit_code = excluded.exit_code
                         WHERE background_processes.status = 'running'",
                    ),
                    &ended,
                )
            })
            .await
            .map_err(|err| self.failed("finish", err))?;
        Ok(changed == 1)
    }

    async fn remove(&self, session_key: &str, session_id: &str) -> Result<bool, NodeStoreError> {
        let (key, id) = (session_key.to_owned(), session_id.to_owned());
        let deleted = self
            .db
            .run(move |connection| {
                connection.execute(
                    "DELETE FROM background_processes WHERE session_key = ?1 AND session_id = ?2",
                    params![key, id],
                )
            })
            .await
            .map_err(|err| self.failed("remove", err))?;
        Ok(deleted == 1)
    }
}
