//! The node's local job journal: a redelivered job never runs twice, a replayed message is
//! refused.
//!
//! Queues deliver at least once, so the same exec job can arrive again: after a visibility
//! timeout, after the node crashed mid-run, or because someone replays a signed message. The
//! journal is a SQLite file in the node's state dir (WAL, `synchronous = FULL`, so a
//! recorded start survives a power cut, not just a crash) with one row per job key:
//!
//! - [`Journal::begin`] atomically records that a job starts; only the first caller is told
//!   [`JournalState::New`] and may run it. Later callers see `Started` (the node died while it
//!   ran: report it as interrupted, never run it again) or `Finished` (re-post the stored
//!   result);
//! - [`Journal::finish`] stores the result before it is posted, [`Journal::mark_reported`]
//!   records that the backend has it, and [`Journal::unreported`] lists results to re-post
//!   after a restart;
//! - [`Journal::remember_nonce`] keeps message nonces until they expire.
//!
//! Calls are short and synchronous; an async caller may wrap them in `spawn_blocking`.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::atomic::{PRIVATE_FILE_MODE, ensure_private_dir};

/// How long a call waits for another connection's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The schema this code writes; a newer file is refused rather than misread.
const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS jobs (
    job_key TEXT PRIMARY KEY NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('started', 'finished')),
    started_at_ms INTEGER NOT NULL,
    finished_at_ms INTEGER,
    result TEXT,
    reported INTEGER NOT NULL DEFAULT 0,
    CHECK ((state = 'finished') = (result IS NOT NULL))
);
CREATE TABLE IF NOT EXISTS nonces (
    nonce TEXT PRIMARY KEY NOT NULL,
    expires_at_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS nonces_by_expiry ON nonces (expires_at_ms);
";

/// What the journal knew about a job before [`Journal::begin`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalState {
    /// Never seen: it is now recorded as started and the caller may run it.
    New,
    /// Started earlier and never finished: the node stopped while it ran. Report it as
    /// interrupted; do not run it again.
    Started {
        /// When it started, in ms since the epoch.
        started_at_ms: u64,
    },
    /// Finished earlier: re-post the stored result.
    Finished {
        /// The result as given to [`Journal::finish`].
        result: String,
    },
}

/// A journal failure. The node must not run a job whose start it could not record.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The file could not be opened or prepared.
    #[error("could not open the job journal {location}")]
    Open {
        /// The file.
        location: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The file was written by a newer clawless.
    #[error("the job journal {location} has schema {found}, newer than this clawless understands")]
    NewerSchema {
        /// The file.
        location: String,
        /// Its schema version.
        found: i64,
    },
    /// `mark_reported` named a job the journal has no result for.
    #[error("the job journal has no finished job {0}")]
    UnknownJob(String),
    /// A query failed.
    #[error("the job journal failed")]
    Sqlite(#[from] rusqlite::Error),
}

/// The journal. One per node; share it behind an `Arc`.
#[derive(Debug)]
pub struct Journal {
    connection: Mutex<Connection>,
}

impl Journal {
    /// Opens (creating if needed, mode 0600, parent folder 0700) the journal at `path`.
    pub fn open(path: &Path) -> Result<Self, JournalError> {
        let location = path.display().to_string();
        let open_error = |source: Box<dyn std::error::Error + Send + Sync>| JournalError::Open {
            location: location.clone(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            ensure_private_dir(parent).map_err(|err| open_error(err.into()))?;
        }
        // Results hold command output: create the file private before SQLite does (its WAL
        // and shared-memory files copy the main file's mode).
        OpenOptions::new()
            .create(true)
            .append(true)
            .mode(PRIVATE_FILE_MODE)
            .open(path)
            .map_err(|err| open_error(err.into()))?;
        let connection = Connection::open(path).map_err(|err| open_error(err.into()))?;
        Self::prepare(connection, &location, true)
    }

    /// A private in-memory journal (tests, and a node that must not touch disk).
    pub fn open_in_memory() -> Result<Self, JournalError> {
        let connection = Connection::open_in_memory().map_err(|err| JournalError::Open {
            location: ":memory:".to_owned(),
            source: err.into(),
        })?;
        Self::prepare(connection, ":memory:", false)
    }

    fn prepare(connection: Connection, location: &str, wal: bool) -> Result<Self, JournalError> {
        let open_error = |err: rusqlite::Error| JournalError::Open {
            location: location.to_owned(),
            source: err.into(),
        };
        connection.busy_timeout(BUSY_TIMEOUT).map_err(open_error)?;
        if wal {
            let mode: String = connection
                .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
                .map_err(open_error)?;
            tracing::debug!(%location, journal_mode = %mode, "opened the job journal");
        }
        // FULL: a start recorded by `begin` must survive a power cut, or a job could run twice.
        connection
            .pragma_update(None, "synchronous", "FULL")
            .map_err(open_error)?;
        let found: i64 = connection
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(open_error)?;
        if found > SCHEMA_VERSION {
            return Err(JournalError::NewerSchema {
                location: location.to_owned(),
                found,
            });
        }
        connection.execute_batch(SCHEMA).map_err(open_error)?;
        connection
            .pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(open_error)?;
        Ok(Self {
            connection: Mutex::new(connection),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic mid-transaction rolls back when the transaction drops, so the connection is
        // consistent again and a poisoned lock is safe to reuse.
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that `job_key` starts, atomically. Returns [`JournalState::New`] only to the
    /// first caller ever; everyone else gets the state the job was already in.
    pub fn begin(&self, job_key: &str, now_ms: u64) -> Result<JournalState, JournalError> {
        let mut connection = self.lock();
        let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let prior: Option<(String, i64, Option<String>)> = tx
            .query_row(
                "SELECT state, started_at_ms, result FROM jobs WHERE job_key = ?1",
                [job_key],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()?;
        let state = match prior {
            None => {
                tx.execute(
                    "INSERT INTO jobs (job_key, state, started_at_ms) VALUES (?1, 'started', ?2)",
                    params![job_key, to_sql_ms(now_ms)],
                )?;
                JournalState::New
            }
            Some((_, _, Some(result))) => JournalState::Finished { result },
            Some((_, started_at_ms, None)) => JournalState::Started {
                started_at_ms: from_sql_ms(started_at_ms),
            },
        };
        tx.commit()?;
        Ok(state)
    }

    /// Stores the result of `job_key` (before it is posted, so a crash in between re-posts
    /// it). A job finished earlier keeps its first result.
    pub fn finish(&self, job_key: &str, result: &str, now_ms: u64) -> Result<(), JournalError> {
        self.lock().execute(
            "INSERT INTO jobs (job_key, state, started_at_ms, finished_at_ms, result)
             VALUES (?1, 'finished', ?2, ?2, ?3)
             ON CONFLICT (job_key) DO UPDATE
                SET state = 'finished', finished_at_ms = excluded.finished_at_ms,
                    result = excluded.result
                WHERE jobs.state = 'started'",
            params![job_key, to_sql_ms(now_ms), result],
        )?;
        Ok(())
    }

    /// Records that the backend acknowledged the result of `job_key`.
    pub fn mark_reported(&self, job_key: &str) -> Result<(), JournalError> {
        let changed = self.lock().execute(
            "UPDATE jobs SET reported = 1 WHERE job_key = ?1 AND state = 'finished'",
            [job_key],
        )?;
        if changed == 0 {
            return Err(JournalError::UnknownJob(job_key.to_owned()));
        }
        Ok(())
    }

    /// Jobs recorded as started that never finished (the node stopped while they ran),
    /// oldest first.
    pub fn started(&self) -> Result<Vec<String>, JournalError> {
        let connection = self.lock();
        let mut statement = connection.prepare(
            "SELECT job_key FROM jobs WHERE state = 'started' ORDER BY started_at_ms, job_key",
        )?;
        let rows = statement
            .query_map([], |row| row.get(0))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// Finished jobs whose result was never acknowledged, oldest first: `(job_key, result)`.
    pub fn unreported(&self) -> Result<Vec<(String, String)>, JournalError> {
        let connection = self.lock();
        let mut statement = connection.prepare(
            "SELECT job_key, result FROM jobs
             WHERE state = 'finished' AND reported = 0
             ORDER BY finished_at_ms, job_key",
        )?;
        let rows = statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// Remembers a message nonce until `expires_at_ms`, dropping nonces that expired by
    /// `now_ms`. Returns `false` when the nonce was seen before or has already expired:
    /// either way the message must be refused. Nonces are forgotten once they expire, so
    /// callers must also refuse messages past their own expiry.
    pub fn remember_nonce(
        &self, nonce: &str, expires_at_ms: u64, now_ms: u64,
    ) -> Result<bool, JournalError> {
        if expires_at_ms <= now_ms {
            return Ok(false);
        }
        let mut connection = self.lock();
        let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute(
            "DELETE FROM nonces WHERE expires_at_ms <= ?1",
            [to_sql_ms(now_ms)],
        )?;
        let inserted = tx.execute(
            "INSERT OR IGNORE INTO nonces (nonce, expires_at_ms) VALUES (?1, ?2)",
            params![nonce, to_sql_ms(expires_at_ms)],
        )?;
        tx.commit()?;
        Ok(inserted == 1)
    }

    /// Forgets jobs last touched (finished, or started if never finished) before
    /// `older_than_ms`, and nonces that expired by then; returns how many rows went.
    ///
    /// A pruned job would run again if it were redelivered, so pick a cutoff older than any
    /// job's deadline: the worker refuses jobs past their deadline before it calls `begin`.
    pub fn prune(&self, older_than_ms: u64) -> Result<usize, JournalError> {
        let mut connection = self.lock();
        let tx = connection.transaction()?;
        let cutoff = to_sql_ms(older_than_ms);
        let jobs = tx.execute(
            "DELETE FROM jobs WHERE COALESCE(finished_at_ms, started_at_ms) < ?1",
            [cutoff],
        )?;
        let nonces = tx.execute("DELETE FROM nonces WHERE expires_at_ms <= ?1", [cutoff])?;
        tx.commit()?;
        Ok(jobs + nonces)
    }
}

/// SQLite integers are signed; times past year 292 million saturate.
fn to_sql_ms(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

fn from_sql_ms(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;

    use super::*;

    #[test]
    fn the_first_begin_is_new_and_every_later_one_sees_it_started() {
        let journal = Journal::open_in_memory().unwrap();
        assert_eq!(journal.begin("job-1", 1_000).unwrap(), JournalState::New);
        assert_eq!(
            journal.begin("job-1", 2_000).unwrap(),
            JournalState::Started {
                started_at_ms: 1_000
            }
        );
        assert_eq!(journal.begin("job-2", 2_000).unwrap(), JournalState::New);
    }

    #[test]
    fn a_finished_job_returns_its_stored_result_instead_of_running_again() {
        let journal = Journal::open_in_memory().unwrap();
        journal.begin("job", 1).unwrap();
        journal.finish("job", r#"{"exitCode":0}"#, 2).unwrap();
        assert_eq!(
            journal.begin("job", 3).unwrap(),
            JournalState::Finished {
                result: r#"{"exitCode":0}"#.to_owned()
            }
        );
    }

    #[test]
    fn a_second_finish_keeps_the_first_result() {
        let journal = Journal::open_in_memory().unwrap();
        journal.begin("job", 1).unwrap();
        journal.finish("job", "first", 2).unwrap();
        journal.finish("job", "second", 3).unwrap();
        assert_eq!(
            journal.begin("job", 4).unwrap(),
            JournalState::Finished {
                result: "first".to_owned()
            }
        );
    }

    #[test]
    fn concurrent_begins_let_exactly_one_caller_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.sqlite");
        // Two connections to one file, eight threads each: one winner in sixteen.
        let journals = [
            Arc::new(Journal::open(&path).unwrap()),
            Arc::new(Journal::open(&path).unwrap()),
        ];
        let threads: Vec<_> = (0..16)
            .map(|index| {
                let journal = Arc::clone(&journals[index % 2]);
                std::thread::spawn(move || journal.begin("contested", 5).unwrap())
            })
            .collect();
        let news = threads
            .into_iter()
            .map(|thread| thread.join().unwrap())
            .filter(|state| *state == JournalState::New)
            .count();
        assert_eq!(news, 1);
    }

    #[test]
    fn a_started_job_survives_closing_and_reopening_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join("journal.sqlite");
        let journal = Journal::open(&path).unwrap();
        assert_eq!(journal.begin("job", 42).unwrap(), JournalState::New);
        drop(journal);

        let reopened = Journal::open(&path).unwrap();
        assert_eq!(
            reopened.begin("job", 99).unwrap(),
            JournalState::Started { started_at_ms: 42 }
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn unreported_results_are_listed_until_marked_reported() {
        let journal = Journal::open_in_memory().unwrap();
        for (key, at) in [("b", 20), ("a", 10), ("c", 30)] {
            journal.begin(key, at).unwrap();
        }
        journal.finish("b", "rb", 21).unwrap();
        journal.finish("a", "ra", 11).unwrap();
        assert_eq!(
            journal.unreported().unwrap(),
            vec![
                ("a".to_owned(), "ra".to_owned()),
                ("b".to_owned(), "rb".to_owned())
            ]
        );
        journal.mark_reported("a").unwrap();
        assert_eq!(
            journal.unreported().unwrap(),
            vec![("b".to_owned(), "rb".to_owned())]
        );
    }

    #[test]
    fn marking_an_unfinished_or_unknown_job_reported_is_an_error() {
        let journal = Journal::open_in_memory().unwrap();
        journal.begin("running", 1).unwrap();
        assert!(matches!(
            journal.mark_reported("running"),
            Err(JournalError::UnknownJob(key)) if key == "running"
        ));
        assert!(matches!(
            journal.mark_reported("nope"),
            Err(JournalError::UnknownJob(_))
        ));
    }

    #[test]
    fn a_nonce_is_accepted_once_and_refused_as_a_replay_until_it_expires() {
        let journal = Journal::open_in_memory().unwrap();
        assert!(journal.remember_nonce("n1", 1_000, 100).unwrap());
        assert!(!journal.remember_nonce("n1", 1_000, 200).unwrap());
        assert!(!journal.remember_nonce("n1", 5_000, 999).unwrap());
        // After expiry it is pruned; the message's own expiry check refuses it from then on.
        assert!(journal.remember_nonce("n1", 3_000, 1_000).unwrap());
    }

    #[test]
    fn an_already_expired_nonce_is_refused() {
        let journal = Journal::open_in_memory().unwrap();
        assert!(!journal.remember_nonce("late", 100, 100).unwrap());
        assert!(!journal.remember_nonce("later", 50, 100).unwrap());
    }

    #[test]
    fn prune_forgets_old_jobs_and_expired_nonces_only() {
        let journal = Journal::open_in_memory().unwrap();
        journal.begin("old-finished", 10).unwrap();
        journal.finish("old-finished", "r", 20).unwrap();
        journal.begin("old-started", 30).unwrap();
        journal.begin("recent", 10).unwrap();
        journal.finish("recent", "r", 500).unwrap();
        journal.remember_nonce("old", 40, 0).unwrap();
        journal.remember_nonce("fresh", 900, 0).unwrap();

        assert_eq!(journal.prune(100).unwrap(), 3);

        assert_eq!(
            journal.begin("old-finished", 600).unwrap(),
            JournalState::New
        );
        assert_eq!(
            journal.begin("old-started", 600).unwrap(),
            JournalState::New
        );
        assert!(matches!(
            journal.begin("recent", 600).unwrap(),
            JournalState::Finished { .. }
        ));
        assert!(!journal.remember_nonce("fresh", 900, 100).unwrap());
    }

    #[test]
    fn a_journal_from_a_newer_clawless_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.sqlite");
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", 99)
            .unwrap();
        assert!(matches!(
            Journal::open(&path),
            Err(JournalError::NewerSchema { found: 99, .. })
        ));
    }

    #[test]
    fn a_file_that_is_not_sqlite_is_an_open_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.sqlite");
        std::fs::write(&path, vec![b'x'; 4096]).unwrap();
        let err = Journal::open(&path).unwrap_err();
        assert!(matches!(err, JournalError::Open { .. }), "{err:?}");
        assert!(err.to_string().contains("journal.sqlite"));
    }
}
