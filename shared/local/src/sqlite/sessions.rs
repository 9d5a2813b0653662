//! [`SqliteSessionStore`] and [`SqliteInbox`]: the session store and inbox ports on the
//! local SQLite database.
//!
//! Owns the SQL for sessions (`sessions`: key, version, meta; `session_steps`: key, seq, body)
//! and inbox claims (`inbox_claims`: event id, expiry), and the mapping of SQLite outcomes to
//! the ports' errors. A commit is one `BEGIN IMMEDIATE` transaction, so it is atomic and
//! serialised against every other writer of the file.

use std::time::Duration;

use async_trait::async_trait;
use clawless_core::session::{
    Claim, Inbox, InboxError, SessionCommit, SessionKey, SessionLister, SessionStore,
    SessionStoreError, SessionSummary, StoredSession, StoredStep, claim_expires_at,
};
use rusqlite::{ErrorCode, OptionalExtension, TransactionBehavior, params};

use super::{SqliteDb, SqliteError};

/// Record limit of [`SqliteSessionStore::new`]. SQLite itself holds far more (1 GB); this
/// keeps a runaway tool output from bloating the file, and matches the offloading wrapper's
/// default blob limit.
pub const SQLITE_MAX_RECORD_BYTES: usize = 16 * 1024 * 1024;

/// Converts a port integer to SQLite's signed 64-bit one, saturating (times, versions).
fn to_sql_int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The session store port on a [`SqliteDb`].
///
/// - A commit runs in one `BEGIN IMMEDIATE` transaction: it checks the stored version
///   against the expected one, inserts the steps (the `(key, seq)` primary key refuses a
///   `seq` that exists) and upserts the meta; any conflict rolls everything back and is
///   [`SessionStoreError::Conflict`].
/// - A load reads meta and steps (`ORDER BY seq`, numerically) in one read transaction.
/// - Bodies are limited to [`SQLITE_MAX_RECORD_BYTES`] unless configured otherwise; a `seq`
///   above `i64::MAX` cannot be stored ([`SessionStoreError::Rejected`]).
#[derive(Debug, Clone)]
pub struct SqliteSessionStore {
    db: SqliteDb,
    max_record_bytes: usize,
}

/// How a commit transaction ended, when SQLite itself did not fail.
enum CommitOutcome {
    Committed(u64),
    Conflict,
}

impl SqliteSessionStore {
    /// A store on `db` holding bodies up to [`SQLITE_MAX_RECORD_BYTES`].
    pub fn new(db: SqliteDb) -> Self {
        Self {
            db,
            max_record_bytes: SQLITE_MAX_RECORD_BYTES,
        }
    }

    /// Refuses bodies over `max_record_bytes` with [`SessionStoreError::TooLarge`].
    pub fn with_max_record_bytes(mut self, max_record_bytes: usize) -> Self {
        self.max_record_bytes = max_record_bytes;
        self
    }

    fn failed(&self, action: &str, key: &SessionKey, err: SqliteError) -> SessionStoreError {
        SessionStoreError::unavailable(
            format!(
                "SQLite {action} of session {key} in {} failed",
                self.db.location()
            ),
            err,
        )
    }

    fn check(&self, key: &SessionKey, commit: &SessionCommit) -> Result<(), SessionStoreError> {
        let bodies =
            std::iter::once(&commit.meta).chain(commit.steps.iter().map(|step| &step.body));
        for body in bodies {
            if body.len() > self.max_record_bytes {
                return Err(SessionStoreError::TooLarge {
                    key: key.to_string(),
                    bytes: body.len(),
                    limit: self.max_record_bytes,
                });
            }
        }
        if let Some(step) = commit
            .steps
            .iter()
            .find(|step| i64::try_from(step.seq).is_err())
        {
            return Err(SessionStoreError::Rejected {
                key: key.to_string(),
                reason: format!("step seq {} is above SQLite's integer range", step.seq),
            });
        }
        if commit.repeated_seq().is_some() {
            return Err(SessionStoreError::Conflict {
                key: key.to_string(),
                expected: commit.expected_version,
            });
        }
        Ok(())
    }
}

impl SqliteSessionStore {
    /// One read transaction: the meta row, then the steps from the start (`live_only` false)
    /// or from the row's `live_from`, through the primary key's range.
    async fn read(
        &self, key: &SessionKey, live_only: bool,
    ) -> Result<Option<StoredSession>, SessionStoreError> {
        let session_key = key.as_str().to_owned();
        let loaded = self
            .db
            .run(move |connection| {
                let transaction = connection.transaction()?;
                let meta: Option<(i64, String, i64)> = transaction
                    .query_row(
                        "SELECT version, meta, live_from FROM sessions WHERE key = ?1",
                        [&session_key],
                        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
                    )
                    .optional()?;
                let Some((version, meta, live_from)) = meta else {
                    return Ok(None);
                };
                let from = if live_only { live_from } else { 0 };
                let last_seq: i64 = transaction.query_row(
                    "SELECT COALESCE(MAX(seq), 0) FROM session_steps WHERE key = ?1",
                    [&session_key],
                    |row| row.get(0),
                )?;
                let mut statement = transaction.prepare_cached(
                    "SELECT seq, body FROM session_steps WHERE key = ?1 AND seq >= ?2 ORDER BY seq",
                )?;
                let steps = statement
                    .query_map(params![&session_key, from], |row| {
                        let seq: i64 = row.get(0)?;
                        Ok(StoredStep {
                            seq: u64::try_from(seq).unwrap_or(0),
                            body: row.get(1)?,
                        })
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Some(StoredSession {
                    version: u64::try_from(version).unwrap_or(0),
                    meta,
                    steps,
                    live_from: u64::try_from(from).unwrap_or(0),
                    last_seq: u64::try_from(last_seq).unwrap_or(0),
                }))
            })
            .await
            .map_err(|err| self.failed("load", key, err))?;
        Ok(loaded)
    }
}

#[async_trait]
impl SessionStore for SqliteSessionStore {
    #[tracing::instrument(level = "debug", skip_all, fields(session = %key))]
    async fn load(&self, key: &SessionKey) -> Result<Option<StoredSession>, SessionStoreError> {
        self.read(key, false).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(session = %key))]
    async fn load_live(
        &self, key: &SessionKey,
    ) -> Result<Option<StoredSession>, SessionStoreError> {
        self.read(key, true).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(session = %key, expected = commit.expected_version, steps = commit.steps.len()))]
    async fn commit(
        &self, key: &SessionKey, commit: &SessionCommit,
    ) -> Result<u64, SessionStoreError> {
        self.check(key, commit)?;
        let session_key = key.as_str().to_owned();
        let commit_owned = commit.clone();
        let outcome = self
            .db
            .run(move |connection| {
                let commit = commit_owned;
                let transaction =
                    connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let current: Option<i64> = transaction
                    .query_row(
                        "SELECT version FROM sessions WHERE key = ?1",
                        [&session_key],
                        |row| row.get(0),
                    )
                    .optional()?;
                if current.unwrap_or(0) != to_sql_int(commit.expected_version) {
                    return Ok(CommitOutcome::Conflict);
                }
                {
                    let mut insert = transaction.prepare(
                        "INSERT INTO session_steps (key, seq, body) VALUES (?1, ?2, ?3)",
                    )?;
                    for step in &commit.steps {
                        match insert.execute(params![session_key, to_sql_int(step.seq), step.body])
                        {
                            Ok(_) => {}
                            Err(err)
                                if err.sqlite_error_code()
                                    == Some(ErrorCode::ConstraintViolation) =>
                            {
                                return Ok(CommitOutcome::Conflict);
                            }
                            Err(err) => return Err(err),
                        }
                    }
                }
                let version = commit.expected_version.saturating_add(1);
                transaction.execute(
                    "INSERT INTO sessions (key, version, meta, live_from) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (key) DO UPDATE SET version = excluded.version,
                       meta = excluded.meta, live_from = excluded.live_from",
                    params![
                        session_key,
                        to_sql_int(version),
                        commit.meta,
                        to_sql_int(commit.live_from)
                    ],
                )?;
                transaction.commit()?;
                Ok(CommitOutcome::Committed(version))
            })
            .await
            .map_err(|err| self.failed("commit", key, err))?;
        match outcome {
            CommitOutcome::Committed(version) => Ok(version),
            CommitOutcome::Conflict => Err(SessionStoreError::Conflict {
                key: key.to_string(),
                expected: commit.expected_version,
            }),
        }
    }

    fn max_record_bytes(&self) -> usize {
        self.max_record_bytes
    }
}

/// Every session's row of `sessions`, in key order (one read).
#[async_trait]
impl SessionLister for SqliteSessionStore {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_sessions(&self) -> Result<Vec<SessionSummary>, SessionStoreError> {
        let rows = self
            .db
            .run(|connection| {
                let mut statement =
                    connection.prepare("SELECT key, version, meta FROM sessions ORDER BY key")?;
                statement
                    .query_map([], |row| {
                        let version: i64 = row.get(1)?;
                        Ok((
                            row.get::<_, String>(0)?,
                            u64::try_from(version).unwrap_or(0),
                            row.get::<_, String>(2)?,
                        ))
                    })?
                    .collect::<Result<Vec<_>, _>>()
            })
            .await
            .map_err(|err| {
                SessionStoreError::unavailable(
                    format!(
                        "SQLite listing of sessions in {} failed",
                        self.db.location()
                    ),
                    err,
                )
            })?;
        Ok(rows
            .into_iter()
            .filter_map(|(key, version, meta)| {
                Some(SessionSummary {
                    key: SessionKey::parse(&key)?,
                    version,
                    meta,
                })
            })
            .collect())
    }
}

/// The inbox port on a [`SqliteDb`]: one row per event id with its expiry. A claim is a
/// single upsert that only overwrites an expired row, so it is atomic without a transaction.
/// Expired rows are overwritten, not swept.
#[derive(Debug, Clone)]
pub struct SqliteInbox {
    db: SqliteDb,
}

impl SqliteInbox {
    /// An inbox on `db`.
    pub fn new(db: SqliteDb) -> Self {
        Self { db }
    }

    fn failed(&self, action: &str, event_id: &str, err: SqliteError) -> InboxError {
        InboxError::new(
            format!(
                "SQLite {action} of inbox claim {event_id:?} in {} failed",
                self.db.location()
            ),
            err,
        )
    }
}

#[async_trait]
impl Inbox for SqliteInbox {
    #[tracing::instrument(level = "debug", skip_all, fields(event_id))]
    async fn claim(
        &self, event_id: &str, ttl: Duration, now_unix: u64,
    ) -> Result<Claim, InboxError> {
        let id = event_id.to_owned();
        let expires_at = to_sql_int(claim_expires_at(now_unix, ttl));
        let now = to_sql_int(now_unix);
        let changed = self
            .db
            .run(move |connection| {
                connection.execute(
                    "INSERT INTO inbox_claims (event_id, expires_at) VALUES (?1, ?2)
                     ON CONFLICT (event_id) DO UPDATE SET expires_at = excluded.expires_at
                     WHERE inbox_claims.expires_at < ?3",
                    params![id, expires_at, now],
                )
            })
            .await
            .map_err(|err| self.failed("claim", event_id, err))?;
        Ok(if changed == 1 {
            Claim::Claimed
        } else {
            Claim::Duplicate
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(event_id))]
    async fn release(&self, event_id: &str) -> Result<(), InboxError> {
        let id = event_id.to_owned();
        self.db
            .run(move |connection| {
                connection.execute("DELETE FROM inbox_claims WHERE event_id = ?1", [id])
            })
            .await
            .map_err(|err| self.failed("release", event_id, err))?;
        Ok(())
    }
}
