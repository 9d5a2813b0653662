//! The storage ports on one SQLite file (bundled SQLite), all built on a shared [`SqliteDb`]
//! handle: sessions ([`SqliteSessionStore`], [`SqliteInbox`], [`SqliteTurnQueue`]), node
//! hosts ([`SqliteNodeRegistry`], [`SqliteExecJobs`], [`SqliteExecQueue`], [`SqliteTimers`],
//! [`SqliteBackgroundProcesses`])
//! and cron jobs with their run logs ([`SqliteCronStore`]).
//!
//! This module owns opening the database (WAL, a busy timeout, the schema and its version)
//! and running statements off the async executor: every call takes the connection's lock
//! inside tokio's blocking pool, so no async task ever blocks on SQLite. Writers use
//! `BEGIN IMMEDIATE`, so two processes sharing the file serialise their read-modify-write
//! transactions instead of failing half-way; the busy timeout makes the second one wait.
//!
//! WAL checkpoints (copying the log back into the database file, with its fsyncs) run on a
//! background thread with its own connection, never inside a request's commit: SQLite's
//! automatic checkpoint would make whichever write crosses the threshold wait for the disk,
//! a stall every other request then queues behind.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::Notify;

mod cron;
mod node_queues;
mod nodes;
mod polling;
mod processes;
mod queue;
mod sessions;

pub use cron::SqliteCronStore;
pub use node_queues::{DEFAULT_TIMERS, SqliteExecQueue, SqliteTimers};
pub use nodes::{SqliteExecJobs, SqliteNodeRegistry};
pub use processes::SqliteBackgroundProcesses;
pub use queue::{DEDUP_WINDOW, DEFAULT_QUEUE, DEFAULT_VISIBILITY_TIMEOUT, SqliteTurnQueue};
pub use sessions::{SQLITE_MAX_RECORD_BYTES, SqliteInbox, SqliteSessionStore};

/// How long a statement waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the background thread checkpoints the WAL. Often enough that the log stays
/// small: a log that must grow while requests append to it stalls them whenever a checkpoint's
/// fsync holds the file system's journal (at 500 ms, the first 10 s of `webhook_load` on a new
/// database showed p99s of 12–19 ms; at 100 ms, 1.1–1.4 ms).
const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(100);

/// Schema version written to `PRAGMA user_version`; bump with a migration when tables change.
const SCHEMA_VERSION: i64 = 6;

/// Every table the local adapters use. Large bodies live in rowid tables (SQLite advises
/// `WITHOUT ROWID` only for small rows); the small keyed tables are `WITHOUT ROWID`.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    key TEXT PRIMARY KEY NOT NULL,
    version INTEGER NOT NULL,
    meta TEXT NOT NULL,
    live_from INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS session_steps (
    key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (key, seq)
);
CREATE TABLE IF NOT EXISTS inbox_claims (
    event_id TEXT PRIMARY KEY NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS queue_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    group_key TEXT NOT NULL,
    body TEXT NOT NULL,
    visible_at_ms INTEGER NOT NULL,
    receive_count INTEGER NOT NULL DEFAULT 0,
    receipt TEXT
);
CREATE INDEX IF NOT EXISTS queue_messages_by_group ON queue_messages (queue, group_key, id);
CREATE TABLE IF NOT EXISTS queue_dedup (
    queue TEXT NOT NULL,
    dedup_id TEXT NOT NULL,
    sent_at_ms INTEGER NOT NULL,
    PRIMARY KEY (queue, dedup_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS node_pairings (
    code_hash TEXT PRIMARY KEY NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    redeemed_at_ms INTEGER
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS nodes (
    node_id TEXT PRIMARY KEY NOT NULL,
    display_name TEXT,
    secret_hash TEXT NOT NULL,
    platform TEXT NOT NULL,
    path TEXT NOT NULL,
    skill_bins TEXT NOT NULL,
    queue TEXT NOT NULL,
    paired_at_ms INTEGER NOT NULL,
    last_seen_ms INTEGER NOT NULL,
    revoked INTEGER NOT NULL,
    revoked_at_ms INTEGER,
    granted TEXT NOT NULL,
    policy_version INTEGER NOT NULL,
    exec TEXT
);
CREATE TABLE IF NOT EXISTS exec_jobs (
    job_id TEXT PRIMARY KEY NOT NULL,
    node_id TEXT NOT NULL,
    session_key TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    envelope TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    deadline_ms INTEGER NOT NULL,
    result TEXT,
    resolved_at_ms INTEGER
);
CREATE TABLE IF NOT EXISTS exec_queues (
    name TEXT PRIMARY KEY NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS exec_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    body TEXT NOT NULL,
    visible_at_ms INTEGER NOT NULL,
    receive_count INTEGER NOT NULL DEFAULT 0,
    receipt TEXT,
    dead INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS exec_messages_by_queue ON exec_messages (queue, dead, id);
CREATE TABLE IF NOT EXISTS timers (
    queue TEXT NOT NULL,
    timer_id TEXT NOT NULL,
    due_at_ms INTEGER NOT NULL,
    timer TEXT NOT NULL,
    visible_at_ms INTEGER NOT NULL DEFAULT 0,
    takes INTEGER NOT NULL DEFAULT 0,
    receipt TEXT,
    PRIMARY KEY (queue, timer_id)
);
CREATE INDEX IF NOT EXISTS timers_by_due ON timers (queue, due_at_ms);
-- Each send prunes deduplication ids older than the window: without this index that is a
-- scan of every id sent in the last five minutes, per send.
CREATE INDEX IF NOT EXISTS queue_dedup_by_time ON queue_dedup (queue, sent_at_ms);
CREATE INDEX IF NOT EXISTS timers_by_receipt ON timers (queue, receipt);
CREATE TABLE IF NOT EXISTS cron_jobs (
    job_id TEXT PRIMARY KEY NOT NULL,
    version INTEGER NOT NULL,
    body TEXT NOT NULL,
    scheduled_slot_ms INTEGER,
    manual_slot_ms INTEGER
);
CREATE TABLE IF NOT EXISTS cron_runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS cron_runs_by_job ON cron_runs (job_id, seq);
CREATE TABLE IF NOT EXISTS background_processes (
    session_key TEXT NOT NULL,
    session_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    exec_job_id TEXT NOT NULL,
    command TEXT NOT NULL,
    status TEXT NOT NULL,
    started_at_ms INTEGER NOT NULL,
    ended_at_ms INTEGER,
    exit_code INTEGER,
    PRIMARY KEY (session_key, session_id)
) WITHOUT ROWID;
";

/// Brings tables created by an older schema up to date (`CREATE TABLE IF NOT EXISTS` leaves
/// them as they were). Version 3 added `nodes.exec`, the node's reported exec facts; version 4
/// `sessions.live_from`, where a session's live transcript starts. Version 5 added only new
/// tables (`cron_jobs`, `cron_runs`), which [`SCHEMA`] creates in an older file; so did
/// version 6 (`background_processes`).
fn migrate(connection: &Connection) -> Result<(), rusqlite::Error> {
    let has_live_from: bool = connection.query_row(
        "SELECT COUNT(*) > 0 FROM pragma_table_info('sessions') WHERE name = 'live_from'",
        [],
        |row| row.get(0),
    )?;
    if !has_live_from {
        connection.execute_batch(
            "ALTER TABLE sessions ADD COLUMN live_from INTEGER NOT NULL DEFAULT 0",
        )?;
    }
    let has_exec: bool = connection.query_row(
        "SELECT COUNT(*) > 0 FROM pragma_table_info('nodes') WHERE name = 'exec'",
        [],
        |row| row.get(0),
    )?;
    if !has_exec {
        connection.execute_batch("ALTER TABLE nodes ADD COLUMN exec TEXT")?;
    }
    Ok(())
}

/// Failures of the SQLite database itself: opening it, a statement, or the blocking task.
#[derive(Debug, thiserror::Error)]
pub enum SqliteError {
    /// The database could not be opened or prepared.
    #[error("cannot open SQLite database {location}")]
    Open {
        /// The file, or `:memory:`.
        location: String,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// The file was written by a newer clawless.
    #[error(
        "SQLite database {location} has schema version {found}; this build knows {known}",
        known = SCHEMA_VERSION
    )]
    NewerSchema {
        /// The file.
        location: String,
        /// Its `user_version`.
        found: i64,
    },
    /// A statement failed.
    #[error("SQLite statement failed")]
    Statement(#[from] rusqlite::Error),
    /// The blocking task running the statement panicked or was cancelled.
    #[error("SQLite worker task failed")]
    Worker(#[from] tokio::task::JoinError),
}

#[derive(Debug)]
struct Shared {
    connection: Mutex<Connection>,
    location: String,
    /// Woken whenever this process sends or releases a queue message (turn or exec queue) or
    /// schedules a timer, so waiting receivers need not wait for their next poll.
    queue_changed: Notify,
}

/// A handle on one SQLite database. Clones share the connection; every SQLite adapter is
/// built on it.
#[derive(Debug, Clone)]
pub struct SqliteDb {
    shared: Arc<Shared>,
}

impl SqliteDb {
    /// Opens (creating if needed) the database file at `path`: WAL journal,
    /// `synchronous = NORMAL` (durable across a crash of the process, not of the machine), a
    /// 5 s busy timeout, and the schema.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, SqliteError> {
        let path: PathBuf = path.as_ref().to_path_buf();
        let location = path.display().to_string();
        let connection = Connection::open(&path).map_err(|source| SqliteError::Open {
            location: location.clone(),
            source,
        })?;
        let db = Self::prepare(connection, location, true)?;
        db.start_checkpointer(&path);
        Ok(db)
    }

    /// Moves WAL checkpoints off the request path: turns off SQLite's automatic checkpoint on
    /// the shared connection and checkpoints from a thread with its own connection every
    /// [`CHECKPOINT_INTERVAL`], until the last handle is dropped. `PASSIVE` never blocks the
    /// writer; a log left whole by a checkpoint that could not finish is taken up next time.
    /// If the thread cannot start, SQLite's automatic checkpoint stays on.
    fn start_checkpointer(&self, path: &Path) {
        let checkpointer = match Connection::open(path) {
            Ok(connection) => connection,
            Err(err) => {
                tracing::warn!(location = %self.shared.location, error = %err, "no background WAL checkpoints");
                return;
            }
        };
        let shared: Weak<Shared> = Arc::downgrade(&self.shared);
        let location = self.shared.location.clone();
        let started = std::thread::Builder::new()
            .name("sqlite-checkpoint".to_owned())
            .spawn(move || {
                if let Err(err) = checkpointer.busy_timeout(BUSY_TIMEOUT) {
                    tracing::warn!(%location, error = %err, "checkpoint connection");
                }
                loop {
                    std::thread::sleep(CHECKPOINT_INTERVAL);
                    if shared.upgrade().is_none() {
                        return;
                    }
                    if let Err(err) =
                        checkpointer.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
                    {
                        tracing::debug!(%location, error = %err, "WAL checkpoint deferred");
                    }
                }
            });
        match started {
            Ok(_) => {
                let connection = self
                    .shared
                    .connection
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if let Err(err) = connection.pragma_update(None, "wal_autocheckpoint", 0) {
                    tracing::warn!(location = %self.shared.location, error = %err, "automatic WAL checkpoints stay on");
                }
            }
            Err(err) => {
                tracing::warn!(location = %self.shared.location, error = %err, "no background WAL checkpoints");
            }
        }
    }

    /// A private in-memory database, gone when the last clone is dropped.
    pub fn open_in_memory() -> Result<Self, SqliteError> {
        let location = ":memory:".to_owned();
        let connection = Connection::open_in_memory().map_err(|source| SqliteError::Open {
            location: location.clone(),
            source,
        })?;
        Self::prepare(connection, location, false)
    }

    fn prepare(connection: Connection, location: String, wal: bool) -> Result<Self, SqliteError> {
        let open_error = |source| SqliteError::Open {
            location: location.clone(),
            source,
        };
        connection.busy_timeout(BUSY_TIMEOUT).map_err(open_error)?;
        if wal {
            let mode: String = connection
                .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
                .map_err(open_error)?;
            tracing::debug!(%location, journal_mode = %mode, "opened SQLite database");
        }
        connection
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_error)?;
        let found: i64 = connection
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(open_error)?;
        if found > SCHEMA_VERSION {
            return Err(SqliteError::NewerSchema { location, found });
        }
        connection.execute_batch(SCHEMA).map_err(open_error)?;
        migrate(&connection).map_err(open_error)?;
        connection
            .pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(open_error)?;
        Ok(Self {
            shared: Arc::new(Shared {
                connection: Mutex::new(connection),
                location,
                queue_changed: Notify::new(),
            }),
        })
    }

    /// The file this database lives in, or `:memory:`.
    pub fn location(&self) -> &str {
        &self.shared.location
    }

    /// Runs `work` on the connection in tokio's blocking pool.
    pub(crate) async fn run<T, F>(&self, work: F) -> Result<T, SqliteError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, rusqlite::Error> + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        tokio::task::spawn_blocking(move || {
            // A panic inside `work` unwinds through rusqlite's `Transaction`, whose drop rolls
            // back: the connection is consistent again, so a poisoned lock is safe to reuse.
            let mut connection = shared
                .connection
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            work(&mut connection)
        })
        .await?
        .map_err(SqliteError::from)
    }

    /// Signalled when this process changes a queue.
    pub(crate) fn queue_changed(&self) -> &Notify {
        &self.shared.queue_changed
    }
}
