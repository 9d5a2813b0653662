//! [`SqliteCronStore`]: the cron store port on the local SQLite database.
//!
//! Owns the SQL of two tables (schema version 5):
//! - `cron_jobs`: one row per job: `job_id` (key), `version`, `body` (the job's JSON, as
//!   upstream's `jobs.json` holds it), and the reserved-slot marks `scheduled_slot_ms` and
//!   `manual_slot_ms` (NULL until a slot of that kind is reserved). A replace writes `body`
//!   and `version` only, so the marks survive it.
//! - `cron_runs`: one row per run-log line: `seq` (a global append counter, so a log's rows
//!   sort in append order), `job_id`, `body` (the line's JSON). Pruning deletes a log's rows
//!   below its newest `keep_lines`, in the append's transaction.
//!
//! Every check-then-write (versioned replace and delete, reservation, append and prune) runs
//! in one `BEGIN IMMEDIATE` transaction, so it holds across processes sharing the file. The
//! decisions themselves are core's ([`StoredCronJob::reserve`], [`job_json`],
//! [`fit_run_entry`]); this module only reads and writes rows.

use async_trait::async_trait;
use clawless_automation::cron::run_log::{RunsQuery, page_runs};
use clawless_automation::cron::store::{fit_run_entry, job_from_json, job_json};
use clawless_automation::cron::{
    CronJob, CronRunLogEntry, CronStore, CronStoreError, Reservation, ReservedSlots, RunSlot,
    RunsPage, StoredCronJob,
};
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};

use super::{SqliteDb, SqliteError};

/// Converts a port integer to SQLite's signed 64-bit one, saturating (times, versions).
fn to_sql(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Reads a non-negative integer column back (negative values, never written, read as 0).
fn from_sql(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

const JOB_COLUMNS: &str = "job_id, version, body, scheduled_slot_ms, manual_slot_ms";

/// A `cron_jobs` row before its JSON is read.
struct JobRow {
    job_id: String,
    version: u64,
    body: String,
    reserved: ReservedSlots,
}

impl JobRow {
    fn from_row(row: &Row<'_>) -> Result<Self, rusqlite::Error> {
        Ok(Self {
            job_id: row.get(0)?,
            version: from_sql(row.get(1)?),
            body: row.get(2)?,
            reserved: ReservedSlots {
                scheduled_ms: row.get::<_, Option<i64>>(3)?.map(from_sql),
                manual_ms: row.get::<_, Option<i64>>(4)?.map(from_sql),
            },
        })
    }

    fn read(connection: &Connection, job_id: &str) -> Result<Option<Self>, rusqlite::Error> {
        connection
            .query_row(
                &format!("SELECT {JOB_COLUMNS} FROM cron_jobs WHERE job_id = ?1"),
                [job_id],
                Self::from_row,
            )
            .optional()
    }

    fn into_stored(self, location: &str) -> Result<StoredCronJob, CronStoreError> {
        let job = job_from_json(&self.body, &format!("{} in SQLite {location}", self.job_id))?;
        Ok(StoredCronJob {
            job,
            version: self.version,
            reserved: self.reserved,
        })
    }
}

/// The cron store port on a [`SqliteDb`], in the tables `cron_jobs` (one row per job: id,
/// version, JSON body, reserved-slot marks) and `cron_runs` (one row per run-log line).
///
/// - `put_job` creates with `INSERT … ON CONFLICT DO NOTHING` (no row inserted is a
///   conflict) and replaces with `UPDATE … WHERE version = expected`, telling a moved-on
///   version from a missing job in the same transaction.
/// - `reserve_run` reads the row, decides with [`StoredCronJob::reserve`] and writes the body,
///   version and mark in one `BEGIN IMMEDIATE` transaction.
/// - `runs` reads the whole log (or every log, ordered by job id then append order) and pages
///   it in memory; a log holds at most `keep_lines` lines.
#[derive(Debug, Clone)]
pub struct SqliteCronStore {
    db: SqliteDb,
}

impl SqliteCronStore {
    /// A cron store on `db`.
    pub fn new(db: SqliteDb) -> Self {
        Self { db }
    }

    fn failed(&self, action: &str, err: SqliteError) -> CronStoreError {
        CronStoreError::backend(
            format!("SQLite {action} in {} failed", self.db.location()),
            err,
        )
    }

    fn location(&self) -> &str {
        self.db.location()
    }
}

#[async_trait]
impl CronStore for SqliteCronStore {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_jobs(&self) -> Result<Vec<StoredCronJob>, CronStoreError> {
        let rows = self
            .db
            .run(|connection| {
                let mut select = connection.prepare(&format!(
                    "SELECT {JOB_COLUMNS} FROM cron_jobs ORDER BY job_id"
                ))?;
                select
                    .query_map([], JobRow::from_row)?
                    .collect::<Result<Vec<_>, _>>()
            })
            .await
            .map_err(|err| self.failed("listing of cron jobs", err))?;
        rows.into_iter()
            .map(|row| row.into_stored(self.location()))
            .collect()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(job_id))]
    async fn get_job(&self, job_id: &str) -> Result<Option<StoredCronJob>, CronStoreError> {
        let id = job_id.to_owned();
        let row = self
            .db
            .run(move |connection| JobRow::read(connection, &id))
            .await
            .map_err(|err| self.failed(&format!("read of cron job {job_id}"), err))?;
        row.map(|row| row.into_stored(self.location())).transpose()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(job_id = %job.id, ?expected))]
    async fn put_job(&self, job: &CronJob, expected: Option<u64>) -> Result<u64, CronStoreError> {
        let body = job_json(job)?;
        let id = job.id.clone();
        self.db
            .run(move |connection| {
                let Some(version) = expected else {
                    let inserted = connection.execute(
                        "INSERT INTO cron_jobs (job_id, version, body) VALUES (?1, 1, ?2)
                         ON CONFLICT (job_id) DO NOTHING",
                        params![id, body],
                    )?;
                    return Ok(if inserted == 1 {
                        Ok(1)
                    } else {
                        Err(CronStoreError::Conflict {
                            job_id: id,
                            expected: None,
                        })
                    });
                };
                let transaction =
                    connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let updated = transaction.execute(
                    "UPDATE cron_jobs SET body = ?2, version = version + 1
                     WHERE job_id = ?1 AND version = ?3",
                    params![id, body, to_sql(version)],
                )?;
                if updated == 1 {
                    transaction.commit()?;
                    return Ok(Ok(version.saturating_add(1)));
                }
                let exists = JobRow::read(&transaction, &id)?.is_some();
                Ok(Err(if exists {
                    CronStoreError::Conflict {
                        job_id: id,
                        expected: Some(version),
                    }
                } else {
                    CronStoreError::NotFound { job_id: id }
                }))
            })
            .await
            .map_err(|err| self.failed(&format!("write of cron job {}", job.id), err))?
    }

    #[tracing::instrument(level = "debug", skip_all, fields(job_id, ?expected))]
    async fn delete_job(
        &self, job_id: &str, expected: Option<u64>,
    ) -> Result<bool, CronStoreError> {
        let id = job_id.to_owned();
        self.db
            .run(move |connection| {
                let Some(version) = expected else {
                    let deleted =
                        connection.execute("DELETE FROM cron_jobs WHERE job_id = ?1", [&id])?;
                    return Ok(Ok(deleted == 1));
                };
                let transaction =
                    connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let deleted = transaction.execute(
                    "DELETE FROM cron_jobs WHERE job_id = ?1 AND version = ?2",
                    params![id, to_sql(version)],
                )?;
                if deleted == 1 {
                    transaction.commit()?;
                    return Ok(Ok(true));
                }
                Ok(match JobRow::read(&transaction, &id)? {
                    None => Ok(false),
                    Some(_) => Err(CronStoreError::Conflict {
                        job_id: id,
                        expected: Some(version),
                    }),
                })
            })
            .await
            .map_err(|err| self.failed(&format!("delete of cron job {job_id}"), err))?
    }

    #[tracing::instrument(level = "debug", skip_all, fields(job_id, %slot, expected_version))]
    async fn reserve_run(
        &self, job_id: &str, slot: RunSlot, now_ms: u64, expected_version: u64,
    ) -> Result<Reservation, CronStoreError> {
        let id = job_id.to_owned();
        let location = self.location().to_owned();
        self.db
            .run(move |connection| {
                let transaction =
                    connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let Some(row) = JobRow::read(&transaction, &id)? else {
                    return Ok(Err(CronStoreError::NotFound { job_id: id }));
                };
                let reservation = row
                    .into_stored(&location)
                    .and_then(|stored| stored.reserve(slot, now_ms, expected_version));
                let Ok(Reservation::Reserved(reserved)) = &reservation else {
                    return Ok(reservation);
                };
                let body = match job_json(&reserved.job) {
                    Ok(body) => body,
                    Err(err) => return Ok(Err(err)),
                };
                transaction.execute(
                    "UPDATE cron_jobs SET body = ?2, version = ?3, scheduled_slot_ms = ?4,
                         manual_slot_ms = ?5
                     WHERE job_id = ?1",
                    params![
                        id,
                        body,
                        to_sql(reserved.version),
                        reserved.reserved.scheduled_ms.map(to_sql),
                        reserved.reserved.manual_ms.map(to_sql),
                    ],
                )?;
                transaction.commit()?;
                Ok(reservation)
            })
            .await
            .map_err(|err| self.failed(&format!("reservation of cron job {job_id}"), err))?
    }

    #[tracing::instrument(level = "debug", skip_all, fields(job_id = %entry.job_id, keep_lines))]
    async fn append_run(
        &self, entry: &CronRunLogEntry, keep_lines: usize,
    ) -> Result<(), CronStoreError> {
        let line = fit_run_entry(entry)?;
        let id = entry.job_id.clone();
        let keep = i64::try_from(keep_lines.max(1)).unwrap_or(i64::MAX);
        self.db
            .run(move |connection| {
                let transaction =
                    connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
                transaction.execute(
                    "INSERT INTO cron_runs (job_id, body) VALUES (?1, ?2)",
                    params![id, line],
                )?;
                // Everything of this log older than its `keep`-th newest line goes.
                transaction.execute(
                    "DELETE FROM cron_runs WHERE job_id = ?1 AND seq < (
                         SELECT MIN(seq) FROM (
                             SELECT seq FROM cron_runs WHERE job_id = ?1
                             ORDER BY seq DESC LIMIT ?2))",
                    params![id, keep],
                )?;
                transaction.commit()
            })
            .await
            .map_err(|err| self.failed(&format!("append to the run log of {}", entry.job_id), err))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(job_id))]
    async fn runs(
        &self, job_id: Option<&str>, query: &RunsQuery,
    ) -> Result<RunsPage, CronStoreError> {
        let id = job_id.map(str::to_owned);
        let lines = self
            .db
            .run(move |connection| {
                let line = |row: &Row<'_>| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?));
                match id {
                    Some(id) => connection
                        .prepare(
                            "SELECT job_id, body FROM cron_runs WHERE job_id = ?1 ORDER BY seq",
                        )?
                        .query_map([id], line)?
                        .collect::<Result<Vec<_>, _>>(),
                    None => connection
                        .prepare("SELECT job_id, body FROM cron_runs ORDER BY job_id, seq")?
                        .query_map([], line)?
                        .collect::<Result<Vec<_>, _>>(),
                }
            })
            .await
            .map_err(|err| self.failed("read of cron run logs", err))?;
        let entries = lines
            .iter()
            .map(|(job_id, line)| {
                serde_json::from_str::<CronRunLogEntry>(line).map_err(|err| {
                    CronStoreError::backend(
                        format!(
                            "unreadable run-log line of cron job {job_id} in SQLite {}",
                            self.location()
                        ),
                        err,
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(page_runs(&entries, query))
    }
}
