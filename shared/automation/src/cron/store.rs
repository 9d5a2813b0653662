//! The cron store port: durable jobs with optimistic versions, the reservation that starts
//! each firing once, and every job's run log (spec §2.5, §2.6, §5.3).
//!
//! This module owns the port ([`CronStore`]), its error ([`CronStoreError`]) and the rules
//! every adapter applies the same way: which job ids are storable, how large a job may be,
//! what a reservation checks and writes ([`StoredCronJob::reserve`]), and how a run-log line
//! too large to keep is shortened ([`fit_run_entry`]). It knows no database: adapters live in
//! `clawless-local` (SQLite) and `clawless-aws` (DynamoDB), the in-memory fake in
//! [`crate::testing`], and all of them pass [`cron_store_contract`](crate::testing::cron_store_contract).
//!
//! # Versions
//! A job is created at version 1; every write of it (a replace, a reservation) adds one. A
//! replace, delete or reservation names the version it read and fails with
//! [`CronStoreError::Conflict`] if the job moved on meanwhile, so two writers never silently
//! overwrite each other (the upstream store serialised them with a file lock).
//!
//! # Slots and reservations
//! A firing is keyed by `(job id, slot)` ([`FiringSlot`](super::schedule::FiringSlot)), and
//! an at-least-once timer may deliver it twice. [`CronStore::reserve_run`] marks the job
//! running (`state.runningAtMs = now`, `state.lastError` cleared, as upstream persists before
//! executing) and records the slot in the same atomic write; only the write that records a
//! slot may run it. Each job keeps two marks beside its JSON ([`ReservedSlots`]), which a
//! replace never touches:
//! - **scheduled**: the latest [`RunSlot::Scheduled`] reserved. Scheduled slots of a job only
//!   move forward (each is the job's `nextRunAtMs` when it became due), so a slot at or
//!   before the mark is a duplicate and is refused. A job rescheduled to fire before a slot
//!   it already ran is refused until its slots pass the mark again.
//! - **manual**: the latest [`RunSlot::Manual`] reserved. A manual run (`cron.run`) is keyed
//!   by the millisecond it was requested (the `<ms>` of its run id `manual:<jobId>:<ms>:<n>`),
//!   in a series of its own, so a forced run neither consumes nor is blocked by a scheduled
//!   slot. Two manual runs requested in the same millisecond are one run.
//!
//! # Run log
//! Each job has a log of [`CronRunLogEntry`] lines in append order. Upstream prunes a log file
//! to its newest `keepLines` lines once it exceeds `runLog.maxBytes`; the store approximates
//! the byte limit by lines and keeps at most `keep_lines` lines at all times (the newest, by
//! append order). A line over [`MAX_RUN_ENTRY_BYTES`] is shortened by [`fit_run_entry`]. A
//! log outlives its job, as upstream's `runs/<jobId>.jsonl` file does.

use clawless_base::port_error::BoxError;

use std::fmt;

use async_trait::async_trait;

use super::run_log::RunsQuery;
use super::types::{CronJob, CronRunLogEntry, RunsPage};

/// Longest job id a store accepts, in UTF-8 bytes (new jobs get 36-byte UUIDs).
pub const MAX_CRON_JOB_ID_BYTES: usize = 256;

/// Largest job (its JSON) a store accepts. Jobs are small (a schedule, a prompt, delivery
/// settings); the limit keeps a DynamoDB item far below its 400 KB ceiling and makes every
/// backend refuse the same absurd job.
pub const MAX_CRON_JOB_BYTES: usize = 64 * 1024;

/// Largest run-log line (its JSON) a store keeps; longer texts are cut by [`fit_run_entry`].
pub const MAX_RUN_ENTRY_BYTES: usize = 64 * 1024;

/// What replaces the cut-off end of a shortened run-log text.
pub const TRUNCATION_MARKER: &str = "…[truncated]";

/// A job as stored: the job, its version and the slots reserved for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCronJob {
    /// The job (definition and runtime state).
    pub job: CronJob,
    /// 1 when created, plus one per write.
    pub version: u64,
    /// The latest slots reserved, kept outside the job's JSON.
    pub reserved: ReservedSlots,
}

/// The latest slot of each kind reserved for a job (see the [module docs](self)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReservedSlots {
    /// The latest [`RunSlot::Scheduled`] slot reserved.
    pub scheduled_ms: Option<u64>,
    /// The latest [`RunSlot::Manual`] key reserved.
    pub manual_ms: Option<u64>,
}

impl ReservedSlots {
    /// The mark that refuses `slot`: `Some(mark)` when a slot of its kind at or after it was
    /// reserved already, `None` when `slot` is free.
    pub fn taken_by(&self, slot: RunSlot) -> Option<u64> {
        let (mark, wanted) = match slot {
            RunSlot::Scheduled(ms) => (self.scheduled_ms, ms),
            RunSlot::Manual(ms) => (self.manual_ms, ms),
        };
        mark.filter(|mark| *mark >= wanted)
    }

    /// These marks with `slot` recorded.
    pub fn with(self, slot: RunSlot) -> Self {
        match slot {
            RunSlot::Scheduled(ms) => Self {
                scheduled_ms: Some(ms),
                ..self
            },
            RunSlot::Manual(ms) => Self {
                manual_ms: Some(ms),
                ..self
            },
        }
    }
}

/// Which run a reservation is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunSlot {
    /// A scheduled firing: the job's `nextRunAtMs` when it became due
    /// ([`FiringSlot::slot_ms`](super::schedule::FiringSlot::slot_ms)).
    Scheduled(u64),
    /// A manual run (`cron.run`): the millisecond it was requested.
    Manual(u64),
}

impl fmt::Display for RunSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Scheduled(ms) => write!(f, "slot {ms}"),
            Self::Manual(ms) => write!(f, "manual run {ms}"),
        }
    }
}

/// What [`CronStore::reserve_run`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reservation {
    /// This call took the slot: the job as now stored (running since `now`, one version on).
    /// Run it.
    Reserved(Box<StoredCronJob>),
    /// The slot, or a later one of its kind, was reserved before: a duplicate delivery.
    /// Nothing changed; do not run.
    AlreadyTaken {
        /// The mark that refused it.
        last_slot_ms: u64,
    },
}

impl StoredCronJob {
    /// A job as first stored: version 1, no slots reserved.
    pub fn created(job: CronJob) -> Self {
        Self {
            job,
            version: 1,
            reserved: ReservedSlots::default(),
        }
    }

    /// Reserving `slot` for this job as it stands, which a caller read at
    /// `expected_version`: the slot is checked first (a duplicate delivery is
    /// [`Reservation::AlreadyTaken`] whatever the version), then the version
    /// ([`CronStoreError::Conflict`]). When both pass, the job to write: running since
    /// `now_ms`, `lastError` cleared, the slot recorded, one version on. Every adapter decides
    /// with this, under its lock or condition.
    pub fn reserve(
        &self, slot: RunSlot, now_ms: u64, expected_version: u64,
    ) -> Result<Reservation, CronStoreError> {
        if let Some(last_slot_ms) = self.reserved.taken_by(slot) {
            return Ok(Reservation::AlreadyTaken { last_slot_ms });
        }
        if self.version != expected_version {
            return Err(CronStoreError::Conflict {
                job_id: self.job.id.clone(),
                expected: Some(expected_version),
            });
        }
        let mut job = self.job.clone();
        job.state.running_at_ms = Some(now_ms);
        job.state.last_error = None;
        Ok(Reservation::Reserved(Box::new(Self {
            job,
            version: self.version.saturating_add(1),
            reserved: self.reserved.with(slot),
        })))
    }
}

/// How a [`CronStore`] fails. A duplicate firing is not an error
/// ([`Reservation::AlreadyTaken`]), nor is deleting a job that is not there.
#[derive(Debug, thiserror::Error)]
pub enum CronStoreError {
    /// The write lost to another: on create, the id exists; on replace, delete or
    /// reservation, the job is no longer at the version the caller read. Nothing was written;
    /// read the job again and decide again.
    #[error("{}", conflict_message(.job_id, *.expected))]
    Conflict {
        /// The job.
        job_id: String,
        /// The version the caller expected; `None` for a create.
        expected: Option<u64>,
    },
    /// The job does not exist (a replace or reservation of a removed job).
    #[error("cron job {job_id} not found")]
    NotFound {
        /// The job.
        job_id: String,
    },
    /// The store will not hold this: an id it cannot key a job by, or a job over
    /// [`MAX_CRON_JOB_BYTES`]. Nothing was written; the same call fails the same way again.
    #[error("cron job {job_id:?} refused: {reason}")]
    Rejected {
        /// The job.
        job_id: String,
        /// Why, with the limit.
        reason: String,
    },
    /// The backing database failed, or holds a record this build cannot read.
    #[error("cron store unavailable: {message}")]
    Backend {
        /// What failed, naming the store.
        message: String,
        /// The underlying error.
        #[source]
        source: Option<BoxError>,
    },
}

fn conflict_message(job_id: &str, expected: Option<u64>) -> String {
    match expected {
        None => format!("cron job {job_id} already exists"),
        Some(version) => {
            format!("cron job {job_id} changed since version {version} was read")
        }
    }
}

impl CronStoreError {
    /// Wraps an adapter error as [`CronStoreError::Backend`].
    pub fn backend(
        message: impl Into<String>, source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Backend {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    /// [`CronStoreError::Backend`] without an underlying error (an unreadable record).
    pub fn corrupt(message: impl Into<String>) -> Self {
        Self::Backend {
            message: message.into(),
            source: None,
        }
    }
}

/// Refuses ids a store cannot key a job or its run log by: empty, longer than
/// [`MAX_CRON_JOB_ID_BYTES`], or holding `/`, `\` or NUL (upstream names the run-log file
/// after the id, spec §2.5).
pub fn check_job_id(job_id: &str) -> Result<(), CronStoreError> {
    let reason = if job_id.is_empty() {
        "a job id must not be empty".to_owned()
    } else if job_id.len() > MAX_CRON_JOB_ID_BYTES {
        format!(
            "the id has {} bytes; at most {MAX_CRON_JOB_ID_BYTES} are allowed",
            job_id.len()
        )
    } else if job_id.contains(['/', '\\', '\0']) {
        "a job id must not contain /, \\ or NUL".to_owned()
    } else {
        return Ok(());
    };
    Err(CronStoreError::Rejected {
        job_id: job_id.to_owned(),
        reason,
    })
}

/// The JSON a store keeps for `job`, after checking its id and size.
pub fn job_json(job: &CronJob) -> Result<String, CronStoreError> {
    check_job_id(&job.id)?;
    let json = serde_json::to_string(job).map_err(|err| {
        CronStoreError::backend(format!("encoding cron job {} as JSON", job.id), err)
    })?;
    if json.len() > MAX_CRON_JOB_BYTES {
        return Err(CronStoreError::Rejected {
            job_id: job.id.clone(),
            reason: format!(
                "the job is {} bytes of JSON; at most {MAX_CRON_JOB_BYTES} are stored",
                json.len()
            ),
        });
    }
    Ok(json)
}

/// A job read back from its stored JSON; `what` names the record in the error.
pub fn job_from_json(json: &str, what: &str) -> Result<CronJob, CronStoreError> {
    serde_json::from_str(json)
        .map_err(|err| CronStoreError::backend(format!("unreadable cron job {what}"), err))
}

/// The JSON a store keeps for a run-log line: `entry` as it is when it fits in
/// [`MAX_RUN_ENTRY_BYTES`], else with its longest texts (`summary`, `error`,
/// `deliveryError`) cut to fit and ended with [`TRUNCATION_MARKER`]. A run is always
/// recorded: the log is for people, and a cut summary beats a lost run.
pub fn fit_run_entry(entry: &CronRunLogEntry) -> Result<String, CronStoreError> {
    check_job_id(&entry.job_id)?;
    let encode = |entry: &CronRunLogEntry| {
        serde_json::to_string(entry).map_err(|err| {
            CronStoreError::backend(
                format!("encoding a run-log line of cron job {}", entry.job_id),
                err,
            )
        })
    };
    let mut json = encode(entry)?;
    let mut fitted = entry.clone();
    while json.len() > MAX_RUN_ENTRY_BYTES {
        let excess = json.len() - MAX_RUN_ENTRY_BYTES;
        let longest = [
            &mut fitted.summary,
            &mut fitted.error,
            &mut fitted.delivery_error,
        ]
        .into_iter()
        .flatten()
        .max_by_key(|text| text.len());
        let Some(text) = longest.filter(|text| text.len() > TRUNCATION_MARKER.len()) else {
            return Err(CronStoreError::Rejected {
                job_id: entry.job_id.clone(),
                reason: format!(
                    "a run-log line of {} bytes; at most {MAX_RUN_ENTRY_BYTES} are stored",
                    json.len()
                ),
            });
        };
        // Cut where the text's encoded form (escapes count double or more) leaves room for
        // the excess and the marker; the loop cuts another text if the line still overflows.
        let encoded: usize = text.chars().map(encoded_len).sum();
        let budget = encoded.saturating_sub(excess + TRUNCATION_MARKER.len());
        let mut cut = 0;
        let mut used = 0;
        for (index, c) in text.char_indices() {
            used += encoded_len(c);
            if used > budget {
                break;
            }
            cut = index + c.len_utf8();
        }
        text.truncate(cut);
        text.push_str(TRUNCATION_MARKER);
        json = encode(&fitted)?;
    }
    Ok(json)
}

/// The bytes `c` takes inside a JSON string as `serde_json` writes it.
fn encoded_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if u32::from(c) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// The durable cron jobs of one deployment (every agent's; a job names its `agentId`) and
/// their run logs. See the [module docs](self) for versions, slots and pruning.
#[async_trait]
pub trait CronStore: Send + Sync + fmt::Debug {
    /// Every job, in job-id order (bytewise).
    async fn list_jobs(&self) -> Result<Vec<StoredCronJob>, CronStoreError>;

    /// The job, or `None`.
    async fn get_job(&self, job_id: &str) -> Result<Option<StoredCronJob>, CronStoreError>;

    /// Writes `job` and returns its new version. `expected: None` creates it at version 1
    /// ([`CronStoreError::Conflict`] if the id exists); `Some(version)` replaces it only while
    /// it is at that version (`Conflict` if it moved on, [`CronStoreError::NotFound`] if it is
    /// gone). A replace keeps the job's reserved slots. A bad id or a job over
    /// [`MAX_CRON_JOB_BYTES`] is [`CronStoreError::Rejected`].
    async fn put_job(&self, job: &CronJob, expected: Option<u64>) -> Result<u64, CronStoreError>;

    /// Removes the job: `true` when it was there, `false` when it was not. With
    /// `Some(version)`, only while it is at that version ([`CronStoreError::Conflict`]
    /// otherwise). Its run log stays.
    async fn delete_job(&self, job_id: &str, expected: Option<u64>)
    -> Result<bool, CronStoreError>;

    /// Reserves `slot` of the job in one atomic write, the guard that runs each firing once:
    /// see [`StoredCronJob::reserve`] for the checks and what is written. Of any number of
    /// concurrent calls for one slot, exactly one is [`Reservation::Reserved`]; the others,
    /// and every later call for that slot or an earlier one of its kind, are
    /// [`Reservation::AlreadyTaken`]. A missing job is [`CronStoreError::NotFound`].
    async fn reserve_run(
        &self, job_id: &str, slot: RunSlot, now_ms: u64, expected_version: u64,
    ) -> Result<Reservation, CronStoreError>;

    /// Appends a line to `entry.job_id`'s log (cut to fit by [`fit_run_entry`]), then prunes
    /// the log to its newest `keep_lines` lines (at least 1: the line just written stays).
    async fn append_run(
        &self, entry: &CronRunLogEntry, keep_lines: usize,
    ) -> Result<(), CronStoreError>;

    /// A page of one job's log (`Some(job_id)`; empty when it has none) or of every log
    /// (`None`, including logs of removed jobs), filtered, sorted and cut by
    /// [`page_runs`](super::run_log::page_runs). The lines reach `page_runs` in job-id order,
    /// then log order, so lines with the same `ts` come out in that order (reversed for
    /// `desc`) on every backend. Lines are returned as logged; the caller adds `jobName` for
    /// `scope: "all"`.
    async fn runs(
        &self, job_id: Option<&str>, query: &RunsQuery,
    ) -> Result<RunsPage, CronStoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cron::schedule::tests::job;
    use crate::cron::types::CronSchedule;

    fn stored() -> StoredCronJob {
        let mut job = job(
            "j",
            CronSchedule::Every {
                every_ms: 60_000,
                anchor_ms: None,
            },
        );
        job.state.last_error = Some("boom".into());
        StoredCronJob::created(job)
    }

    #[test]
    fn a_reservation_marks_the_job_running_and_records_the_slot() {
        // GIVEN a job at version 1 with an error from its last run
        let before = stored();
        // WHEN slot 1 000 is reserved at 1 005
        let reservation = before.reserve(RunSlot::Scheduled(1_000), 1_005, 1).unwrap();
        // THEN it runs since 1 005, its error is cleared and the slot is taken
        let Reservation::Reserved(after) = reservation else {
            panic!("{reservation:?}");
        };
        assert_eq!(after.version, 2);
        assert_eq!(after.job.state.running_at_ms, Some(1_005));
        assert_eq!(after.job.state.last_error, None);
        assert_eq!(after.reserved.scheduled_ms, Some(1_000));
        assert_eq!(after.reserved.manual_ms, None);
        // AND the same slot again is a duplicate
        assert!(matches!(
            after.reserve(RunSlot::Scheduled(1_000), 1_006, 2),
            Ok(Reservation::AlreadyTaken {
                last_slot_ms: 1_000
            })
        ));
    }

    #[test]
    fn a_duplicate_slot_is_already_taken_even_at_a_stale_version() {
        let mut job = stored();
        job.reserved.scheduled_ms = Some(2_000);
        job.version = 7;
        for slot in [2_000, 1_999, 0] {
            assert!(matches!(
                job.reserve(RunSlot::Scheduled(slot), 5, 3),
                Ok(Reservation::AlreadyTaken {
                    last_slot_ms: 2_000
                })
            ));
        }
        assert!(matches!(
            job.reserve(RunSlot::Scheduled(2_001), 5, 3),
            Err(CronStoreError::Conflict {
                expected: Some(3),
                ..
            })
        ));
    }

    #[test]
    fn manual_and_scheduled_slots_are_separate_series() {
        let marks = ReservedSlots {
            scheduled_ms: Some(5_000),
            manual_ms: None,
        };
        assert_eq!(marks.taken_by(RunSlot::Manual(10)), None);
        let marks = marks.with(RunSlot::Manual(10));
        assert_eq!(marks.taken_by(RunSlot::Manual(10)), Some(10));
        assert_eq!(marks.taken_by(RunSlot::Manual(11)), None);
        assert_eq!(marks.taken_by(RunSlot::Scheduled(5_000)), Some(5_000));
        assert_eq!(marks.scheduled_ms, Some(5_000));
    }

    #[test]
    fn job_ids_a_store_cannot_key_are_rejected_with_the_reason() {
        assert!(check_job_id("0f8fad5b-d9cb-469f-a165-70867728950e").is_ok());
        for (bad, reason) in [
            ("", "must not be empty"),
            ("a/b", "must not contain"),
            ("a\\b", "must not contain"),
            ("a\0b", "must not contain"),
        ] {
            let err = check_job_id(bad).unwrap_err();
            assert!(err.to_string().contains(reason), "{bad:?}: {err}");
        }
        let long = "x".repeat(MAX_CRON_JOB_ID_BYTES + 1);
        assert!(
            check_job_id(&long)
                .unwrap_err()
                .to_string()
                .contains("257 bytes")
        );
    }

    #[test]
    fn errors_read_as_sentences() {
        let created = CronStoreError::Conflict {
            job_id: "j".into(),
            expected: None,
        };
        assert_eq!(created.to_string(), "cron job j already exists");
        let stale = CronStoreError::Conflict {
            job_id: "j".into(),
            expected: Some(4),
        };
        assert_eq!(
            stale.to_string(),
            "cron job j changed since version 4 was read"
        );
        assert_eq!(
            CronStoreError::NotFound { job_id: "j".into() }.to_string(),
            "cron job j not found"
        );
    }

    #[test]
    fn a_job_over_the_size_limit_is_rejected() {
        let mut big = stored().job;
        big.description = Some("d".repeat(MAX_CRON_JOB_BYTES));
        let err = job_json(&big).unwrap_err();
        assert!(matches!(err, CronStoreError::Rejected { .. }), "{err:?}");
        assert!(err.to_string().contains("at most 65536"), "{err}");
    }

    #[test]
    fn an_oversized_run_line_keeps_its_start_and_says_it_was_cut() {
        // GIVEN a run whose summary alone is over the limit, in multi-byte characters
        let entry = CronRunLogEntry {
            ts: 1,
            job_id: "j".into(),
            summary: Some("ü\"".repeat(MAX_RUN_ENTRY_BYTES)),
            error: Some("short".into()),
            ..CronRunLogEntry::default()
        };
        // WHEN it is fitted
        let json = fit_run_entry(&entry).unwrap();
        // THEN it fits, the summary keeps its start and ends with the marker, the rest stays
        assert!(json.len() <= MAX_RUN_ENTRY_BYTES, "{}", json.len());
        let back: CronRunLogEntry = serde_json::from_str(&json).unwrap();
        let summary = back.summary.unwrap();
        assert!(summary.starts_with("ü\"ü\""));
        assert!(summary.ends_with(TRUNCATION_MARKER));
        assert_eq!(back.error.as_deref(), Some("short"));
        // AND a line that fits is stored as it is
        let small = CronRunLogEntry {
            summary: Some("fine".into()),
            ..entry
        };
        assert_eq!(
            fit_run_entry(&small).unwrap(),
            serde_json::to_string(&small).unwrap()
        );
    }
}
