//! When jobs fire: `at` instants, `every` series, cron expressions with their per-job
//! stagger; whether a job is due; the slot a firing belongs to; and what a schedule that
//! cannot be computed does to its job.
//!
//! Everything takes the clock as epoch milliseconds and the zone of cron jobs without a `tz`
//! as a [`TimeZone`] (OpenClaw uses the host's zone; a Lambda's is UTC, so the runtime
//! passes the user's zone or UTC). Nothing here arms a timer.

use jiff::Timestamp;
use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use sha2::{Digest, Sha256};

use super::expr::{CronExpr, is_recurring_top_of_hour};
use super::types::{CronJob, CronSchedule, RunStatus};
use clawless_base::time::parse_time_zone;

/// The stagger of top-of-hour cron jobs without an explicit `staggerMs` (5 minutes).
pub const DEFAULT_TOP_OF_HOUR_STAGGER_MS: u64 = 300_000;

/// After a successful cron-kind run the next fire is at least this long after its end, so a
/// clock slightly behind the slot cannot fire the same slot twice.
pub const MIN_REFIRE_GAP_MS: u64 = 2_000;

/// A `runningAtMs` marker older than this is treated as stuck and cleared (2 hours).
pub const STUCK_RUN_MS: u64 = 2 * 3_600_000;

/// Consecutive schedule errors after which a job is disabled.
pub const MAX_SCHEDULE_ERRORS: u32 = 3;

/// Why a job's next run could not be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScheduleError(pub String);

/// Parses an absolute time as OpenClaw's tool and CLI accept it: digits only = epoch
/// milliseconds; `YYYY-MM-DD` = midnight UTC; a date-time without an offset = UTC; with `Z`
/// or an offset, that instant. `None` when it is none of these.
pub fn parse_absolute_time_ms(raw: &str) -> Option<u64> {
    parse_absolute_time_in(raw, &TimeZone::UTC)
}

/// Like [`parse_absolute_time_ms`], but offset-less times are read in `tz` (the CLI's
/// `--at … --tz …`).
pub fn parse_absolute_time_in(raw: &str, tz: &TimeZone) -> Option<u64> {
    let text = raw.trim();
    if text.is_empty() {
        return None;
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse::<u64>().ok().filter(|ms| *ms > 0);
    }
    let instant = if let Ok(ts) = text.parse::<Timestamp>() {
        ts
    } else if let Ok(dt) = text.parse::<DateTime>() {
        tz.to_ambiguous_timestamp(dt).compatible().ok()?
    } else {
        let date = text.parse::<Date>().ok()?;
        tz.to_ambiguous_timestamp(date.to_datetime(jiff::civil::Time::midnight()))
            .compatible()
            .ok()?
    };
    u64::try_from(instant.as_millisecond()).ok()
}

/// Formats epoch milliseconds the way JavaScript's `toISOString` does:
/// `2026-02-01T16:00:00.000Z`.
pub fn iso_millis(ms: u64) -> String {
    let ts = i64::try_from(ms)
        .ok()
        .and_then(|ms| Timestamp::from_millisecond(ms).ok())
        .unwrap_or(Timestamp::MAX);
    ts.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// The next run of an `every` series: `lastRunAtMs + everyMs` if that is still ahead, else
/// the first `anchor + k·everyMs` (k ≥ 1) after `now`; the anchor itself while `now` is
/// before it. No anchor counts from `now`. `everyMs` is at least 1.
pub fn next_every_ms(
    every_ms: u64, anchor_ms: Option<u64>, last_run_at_ms: Option<u64>, now_ms: u64,
) -> u64 {
    let every = every_ms.max(1);
    if let Some(next) = last_run_at_ms
        .and_then(|last| last.checked_add(every))
        .filter(|next| *next > now_ms)
    {
        return next;
    }
    let anchor = anchor_ms.unwrap_or(now_ms);
    if now_ms < anchor {
        return anchor;
    }
    let steps = (now_ms - anchor) / every + 1;
    anchor.saturating_add(steps.saturating_mul(every))
}

/// The stagger window of a cron schedule: `staggerMs` when given, else
/// [`DEFAULT_TOP_OF_HOUR_STAGGER_MS`] for top-of-hour expressions, else 0.
pub fn effective_stagger_ms(expr: &str, stagger_ms: Option<u64>) -> u64 {
    stagger_ms.unwrap_or_else(|| {
        if is_recurring_top_of_hour(expr) {
            DEFAULT_TOP_OF_HOUR_STAGGER_MS
        } else {
            0
        }
    })
}

/// A job's fixed offset inside its stagger window: the first four bytes of
/// `sha256(jobId)`, big-endian, modulo `stagger_ms` (0 when the window is at most 1 ms).
pub fn stagger_offset_ms(job_id: &str, stagger_ms: u64) -> u64 {
    if stagger_ms <= 1 {
        return 0;
    }
    let digest = Sha256::digest(job_id.as_bytes());
    let head = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
    u64::from(head) % stagger_ms
}

/// The next occurrence of a cron expression strictly after `now_ms`, in the schedule's zone
/// (`tz`, else `default_tz`), without stagger.
pub fn next_cron_ms(
    expr: &str, tz: Option<&str>, default_tz: &TimeZone, now_ms: u64,
) -> Result<Option<u64>, ScheduleError> {
    let (cron, zone) = parse_cron(expr, tz, default_tz)?;
    cron.next_after(now_ms, &zone)
        .map_err(|error| ScheduleError(error.to_string()))
}

/// The next fire of a staggered cron job strictly after `now_ms`: a base slot plus the job's
/// offset, searching base slots from `now − offset`.
fn next_staggered_cron_ms(
    job_id: &str, expr: &str, tz: Option<&str>, stagger_ms: Option<u64>, default_tz: &TimeZone,
    now_ms: u64,
) -> Result<Option<u64>, ScheduleError> {
    let (cron, zone) = parse_cron(expr, tz, default_tz)?;
    let offset = stagger_offset_ms(job_id, effective_stagger_ms(expr, stagger_ms));
    let mut cursor = now_ms.saturating_sub(offset);
    // One search is enough in practice; the bound only guards against a slot whose shifted
    // time still lands at or before now because of whole-second rounding.
    for _ in 0..4 {
        let Some(base) = cron
            .next_after(cursor, &zone)
            .map_err(|error| ScheduleError(error.to_string()))?
        else {
            return Ok(None);
        };
        let shifted = base.saturating_add(offset);
        if shifted > now_ms {
            return Ok(Some(shifted));
        }
        cursor = base;
    }
    Ok(None)
}

fn parse_cron(
    expr: &str, tz: Option<&str>, default_tz: &TimeZone,
) -> Result<(CronExpr, TimeZone), ScheduleError> {
    let cron = CronExpr::parse(expr).map_err(|error| ScheduleError(error.to_string()))?;
    let zone = match tz.map(str::trim).filter(|tz| !tz.is_empty()) {
        None => default_tz.clone(),
        Some(name) => parse_time_zone(name).map_err(|error| ScheduleError(error.to_string()))?,
    };
    Ok((cron, zone))
}

/// The instant of an `at` schedule.
pub fn at_ms(at: &str) -> Result<u64, ScheduleError> {
    parse_absolute_time_ms(at).ok_or_else(|| {
        ScheduleError(format!(
            "Invalid schedule.at: expected ISO-8601 timestamp (got {at})"
        ))
    })
}

/// When `job` should fire next, seen at `now_ms`; `None` when it never will (disabled, a
/// one-shot that already succeeded, an expression that no longer matches).
///
/// - `at`: the instant, even when past (a one-shot stays due until it succeeds); after an
///   `ok` run only if `at` was moved after that run.
/// - `every`: see [`next_every_ms`]; the anchor defaults to the job's creation.
/// - `cron`: the next slot after `now` in the job's zone, plus its stagger offset.
pub fn next_run_at(
    job: &CronJob, now_ms: u64, default_tz: &TimeZone,
) -> Result<Option<u64>, ScheduleError> {
    if !job.enabled {
        return Ok(None);
    }
    match &job.schedule {
        CronSchedule::At { at } => {
            let at = at_ms(at)?;
            let done = job.state.last_status == Some(RunStatus::Ok);
            Ok(match job.state.last_run_at_ms {
                Some(last) if done && at <= last => None,
                _ => Some(at),
            })
        }
        CronSchedule::Every {
            every_ms,
            anchor_ms,
        } => Ok(Some(next_every_ms(
            *every_ms,
            Some(anchor_ms.unwrap_or(job.created_at_ms)),
            job.state.last_run_at_ms,
            now_ms,
        ))),
        CronSchedule::Cron {
            expr,
            tz,
            stagger_ms,
        } => next_staggered_cron_ms(
            &job.id,
            expr,
            tz.as_deref(),
            *stagger_ms,
            default_tz,
            now_ms,
        ),
    }
}

/// The latest staggered slot of a cron job at or before `now_ms` (`None` for other kinds or
/// when there is none). Start-up catch-up compares it with `lastRunAtMs` to find runs missed
/// while nothing was running.
pub fn previous_slot_at_or_before(
    job: &CronJob, now_ms: u64, default_tz: &TimeZone,
) -> Result<Option<u64>, ScheduleError> {
    let CronSchedule::Cron {
        expr,
        tz,
        stagger_ms,
    } = &job.schedule
    else {
        return Ok(None);
    };
    let (cron, zone) = parse_cron(expr, tz.as_deref(), default_tz)?;
    let offset = stagger_offset_ms(&job.id, effective_stagger_ms(expr, *stagger_ms));
    let Some(cursor) = now_ms.checked_sub(offset) else {
        return Ok(None);
    };
    Ok(cron
        .previous_at_or_before(cursor, &zone)
        .map_err(|error| ScheduleError(error.to_string()))?
        .map(|base| base + offset))
}

/// True while a run of `job` is in progress: `runningAtMs` is set and younger than
/// [`STUCK_RUN_MS`].
pub fn is_running(job: &CronJob, now_ms: u64) -> bool {
    job.state
        .running_at_ms
        .is_some_and(|started| now_ms.saturating_sub(started) < STUCK_RUN_MS)
}

/// Whether a scheduler tick at `now_ms` should start `job`: enabled, not running, and its
/// `nextRunAtMs` reached. A one-shot whose last run ended with a status fires again only as
/// a pending retry (last status `error`, still enabled).
pub fn is_due(job: &CronJob, now_ms: u64) -> bool {
    if !job.enabled || is_running(job, now_ms) {
        return false;
    }
    let Some(next) = job.state.next_run_at_ms else {
        return false;
    };
    if next > now_ms {
        return false;
    }
    !job.is_one_shot() || matches!(job.state.last_status, None | Some(RunStatus::Error))
}

/// The earliest `nextRunAtMs` over enabled jobs: when the timer must fire next.
pub fn next_wake_at(jobs: &[CronJob]) -> Option<u64> {
    jobs.iter()
        .filter(|job| job.enabled)
        .filter_map(|job| job.state.next_run_at_ms)
        .min()
}

/// One firing of a job: the job and the slot it fires for. An at-least-once timer can
/// deliver the same firing twice; running each `(job id, slot)` once makes that harmless.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FiringSlot {
    /// The job.
    pub job_id: String,
    /// The scheduled instant this firing is for (its `nextRunAtMs` when it became due).
    pub slot_ms: u64,
}

impl FiringSlot {
    /// A key for idempotency records and timer names: `cron:<jobId>:<slotMs>`.
    pub fn key(&self) -> String {
        format!("cron:{}:{}", self.job_id, self.slot_ms)
    }
}

/// The slot `job` fires for if it fires now: its `nextRunAtMs`.
pub fn firing_slot(job: &CronJob) -> Option<FiringSlot> {
    job.state.next_run_at_ms.map(|slot_ms| FiringSlot {
        job_id: job.id.clone(),
        slot_ms,
    })
}

/// A job disabled because its schedule failed [`MAX_SCHEDULE_ERRORS`] times in a row; the
/// runtime enqueues [`ScheduleAutoDisabled::system_event_text`] into the agent's main
/// session and wakes it with reason `cron:<jobId>:auto-disabled`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleAutoDisabled {
    /// The job.
    pub job_id: String,
    /// Its name.
    pub job_name: String,
    /// Errors in a row.
    pub errors: u32,
    /// The last error.
    pub error: String,
}

impl ScheduleAutoDisabled {
    /// `⚠️ Cron job "<name>" has been auto-disabled after <n> consecutive schedule errors. Last error: <err>`
    pub fn system_event_text(&self) -> String {
        format!(
            "⚠️ Cron job \"{}\" has been auto-disabled after {} consecutive schedule errors. Last error: {}",
            self.job_name, self.errors, self.error
        )
    }

    /// The heartbeat wake reason: `cron:<jobId>:auto-disabled`.
    pub fn wake_reason(&self) -> String {
        format!("cron:{}:auto-disabled", self.job_id)
    }
}

/// Recomputes `job.state.nextRunAtMs` at `now_ms`. A failure counts a schedule error
/// (`lastError = "schedule error: <err>"`, no next run); the third in a row disables the job
/// and is returned. A success resets the count.
pub fn refresh_next_run(
    job: &mut CronJob, now_ms: u64, default_tz: &TimeZone,
) -> Option<ScheduleAutoDisabled> {
    match next_run_at(job, now_ms, default_tz) {
        Ok(next) => {
            job.state.next_run_at_ms = next;
            job.state.schedule_error_count = None;
            None
        }
        Err(error) => record_schedule_error(job, &error),
    }
}

/// Counts a schedule error on `job`; see [`refresh_next_run`].
pub fn record_schedule_error(
    job: &mut CronJob, error: &ScheduleError,
) -> Option<ScheduleAutoDisabled> {
    let errors = job
        .state
        .schedule_error_count
        .unwrap_or(0)
        .saturating_add(1);
    job.state.schedule_error_count = Some(errors);
    job.state.next_run_at_ms = None;
    job.state.last_error = Some(format!("schedule error: {error}"));
    if errors < MAX_SCHEDULE_ERRORS || !job.enabled {
        return None;
    }
    job.enabled = false;
    Some(ScheduleAutoDisabled {
        job_id: job.id.clone(),
        job_name: job.name.clone(),
        errors,
        error: error.0.clone(),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cron::types::{CronJobState, CronPayload, SessionTarget, WakeMode};

    pub(crate) fn at(instant: &str) -> u64 {
        let ts: Timestamp = instant.parse().expect("valid instant");
        u64::try_from(ts.as_millisecond()).expect("after the epoch")
    }

    pub(crate) fn job(id: &str, schedule: CronSchedule) -> CronJob {
        CronJob {
            id: id.to_owned(),
            agent_id: None,
            session_key: None,
            name: id.to_owned(),
            description: None,
            enabled: true,
            delete_after_run: None,
            created_at_ms: 0,
            updated_at_ms: 0,
            schedule,
            session_target: SessionTarget::Main,
            wake_mode: WakeMode::Now,
            payload: CronPayload::SystemEvent { text: "x".into() },
            delivery: None,
            failure_alert: None,
            state: CronJobState::default(),
        }
    }

    pub(crate) fn cron(expr: &str, tz: Option<&str>, stagger_ms: Option<u64>) -> CronSchedule {
        CronSchedule::Cron {
            expr: expr.into(),
            tz: tz.map(str::to_owned),
            stagger_ms,
        }
    }

    #[test]
    fn absolute_times_without_offset_are_utc() {
        assert_eq!(
            parse_absolute_time_ms("2026-02-01T16:00:00"),
            Some(at("2026-02-01T16:00:00Z"))
        );
        assert_eq!(
            parse_absolute_time_ms("2026-02-01"),
            Some(at("2026-02-01T00:00:00Z"))
        );
        assert_eq!(
            parse_absolute_time_ms("2026-02-01T16:00:00+02:00"),
            Some(at("2026-02-01T14:00:00Z"))
        );
        assert_eq!(
            parse_absolute_time_ms("2026-02-01T16:00"),
            Some(at("2026-02-01T16:00:00Z"))
        );
        assert_eq!(
            parse_absolute_time_ms("1770000000000"),
            Some(1_770_000_000_000)
        );
        for bad in ["", "  ", "tomorrow", "0", "2026-13-01"] {
            assert_eq!(parse_absolute_time_ms(bad), None, "{bad:?}");
        }
        let berlin = parse_time_zone("Europe/Berlin").expect("zone");
        assert_eq!(
            parse_absolute_time_in("2026-02-01T16:00:00", &berlin),
            Some(at("2026-02-01T15:00:00Z"))
        );
    }

    #[test]
    fn iso_millis_matches_javascript() {
        assert_eq!(
            iso_millis(at("2026-02-01T16:00:00Z")),
            "2026-02-01T16:00:00.000Z"
        );
        assert_eq!(iso_millis(1), "1970-01-01T00:00:00.001Z");
    }

    #[test]
    fn every_series_count_from_their_anchor_or_last_run() {
        // Vector 24.
        let a = 1_000_000;
        assert_eq!(next_every_ms(30_000, Some(a), None, a + 10_000), a + 30_000);
        assert_eq!(next_every_ms(30_000, None, None, a + 10_000), a + 40_000);
        let last = a + 20_000;
        assert_eq!(
            next_every_ms(30_000, Some(a), Some(last), a + 25_000),
            last + 30_000
        );
        // Before the anchor, the anchor; exactly on a slot, the next one.
        assert_eq!(next_every_ms(30_000, Some(a), None, a - 5), a);
        assert_eq!(next_every_ms(30_000, Some(a), None, a + 30_000), a + 60_000);
        // A stale last run falls back to the series; a zero period counts as 1 ms.
        assert_eq!(
            next_every_ms(30_000, Some(a), Some(a), a + 95_000),
            a + 120_000
        );
        assert_eq!(next_every_ms(0, Some(a), None, a), a + 1);
    }

    #[test]
    fn every_jobs_without_anchor_count_from_creation() {
        let mut every = job(
            "e",
            CronSchedule::Every {
                every_ms: 60_000,
                anchor_ms: None,
            },
        );
        every.created_at_ms = 1_000;
        assert_eq!(
            next_run_at(&every, 100_000, &TimeZone::UTC),
            Ok(Some(121_000))
        );
    }

    #[test]
    fn cron_jobs_fire_in_their_zone() {
        // Vector 25, through a job (an id whose stagger does not apply: `0 9 …` is exact).
        let weekly = job("w", cron("0 9 * * 3", Some("America/Los_Angeles"), None));
        assert_eq!(
            next_run_at(&weekly, at("2025-12-13T00:00:00Z"), &TimeZone::UTC),
            Ok(Some(at("2025-12-17T17:00:00Z")))
        );
        let daily = job("d", cron("0 8 * * *", Some("Asia/Shanghai"), None));
        assert_eq!(
            next_run_at(&daily, at("2026-03-01T00:00:00Z"), &TimeZone::UTC),
            Ok(Some(at("2026-03-02T00:00:00Z")))
        );
        // Without `tz`, the default zone given by the caller.
        let local = job("l", cron("0 8 * * *", None, None));
        let shanghai = parse_time_zone("Asia/Shanghai").expect("zone");
        assert_eq!(
            next_run_at(&local, at("2026-03-01T00:00:00Z"), &shanghai),
            Ok(Some(at("2026-03-02T00:00:00Z")))
        );
    }

    #[test]
    fn stagger_offset_is_the_first_four_digest_bytes_mod_the_window() {
        // sha256("job-1") = 026ab639…: 0x026ab639 = 40547897, and 40547897 mod 300000 = 47897
        // (computed outside Rust, with `sha256sum`).
        assert_eq!(stagger_offset_ms("job-1", 300_000), 47_897);
        assert_eq!(stagger_offset_ms("job-1", 1), 0);
        assert_eq!(stagger_offset_ms("job-1", 0), 0);
        assert!(stagger_offset_ms("job-2", 300_000) < 300_000);
    }

    #[test]
    fn top_of_hour_jobs_fire_at_their_offset_inside_the_window() {
        let hourly = job("job-1", cron("0 * * * *", None, None));
        let offset = stagger_offset_ms("job-1", DEFAULT_TOP_OF_HOUR_STAGGER_MS);
        let ten = at("2026-01-01T10:00:00Z");
        // Before this hour's shifted fire: it is still ahead.
        assert_eq!(
            next_run_at(&hourly, ten, &TimeZone::UTC),
            Ok(Some(ten + offset))
        );
        // Exactly at it: the next hour's.
        assert_eq!(
            next_run_at(&hourly, ten + offset, &TimeZone::UTC),
            Ok(Some(ten + 3_600_000 + offset))
        );
        // An explicit 0 (`--exact`) fires on the hour.
        let exact = job("job-1", cron("0 * * * *", None, Some(0)));
        assert_eq!(
            next_run_at(&exact, ten, &TimeZone::UTC),
            Ok(Some(ten + 3_600_000))
        );
        assert_eq!(
            previous_slot_at_or_before(&hourly, ten + offset, &TimeZone::UTC),
            Ok(Some(ten + offset))
        );
        assert_eq!(
            previous_slot_at_or_before(&hourly, ten + offset - 1, &TimeZone::UTC),
            Ok(Some(ten - 3_600_000 + offset))
        );
    }

    #[test]
    fn one_shots_stay_due_until_they_succeed() {
        let mut once = job(
            "o",
            CronSchedule::At {
                at: "2026-02-01T16:00:00.000Z".into(),
            },
        );
        let fire = at("2026-02-01T16:00:00Z");
        let later = fire + 3_600_000;
        assert_eq!(next_run_at(&once, later, &TimeZone::UTC), Ok(Some(fire)));
        once.state.last_status = Some(RunStatus::Ok);
        once.state.last_run_at_ms = Some(fire);
        assert_eq!(next_run_at(&once, later, &TimeZone::UTC), Ok(None));
        // Moved after its last run: due again.
        once.schedule = CronSchedule::At {
            at: "2026-02-02T16:00:00.000Z".into(),
        };
        assert_eq!(
            next_run_at(&once, later, &TimeZone::UTC),
            Ok(Some(fire + 86_400_000))
        );
        once.enabled = false;
        assert_eq!(next_run_at(&once, later, &TimeZone::UTC), Ok(None));
    }

    #[test]
    fn due_means_enabled_idle_and_reached() {
        let mut every = job(
            "e",
            CronSchedule::Every {
                every_ms: 1_000,
                anchor_ms: Some(0),
            },
        );
        every.state.next_run_at_ms = Some(500);
        assert!(is_due(&every, 500));
        assert!(!is_due(&every, 499));
        every.state.running_at_ms = Some(400);
        assert!(!is_due(&every, 500));
        // A marker older than two hours is stuck and no longer blocks.
        assert!(is_due(&every, 400 + STUCK_RUN_MS));
        every.enabled = false;
        assert!(!is_due(&every, 400 + STUCK_RUN_MS));

        let mut once = job(
            "o",
            CronSchedule::At {
                at: "1970-01-01T00:00:00.500Z".into(),
            },
        );
        once.state.next_run_at_ms = Some(500);
        once.state.last_status = Some(RunStatus::Error);
        assert!(is_due(&once, 600), "a pending retry is due");
        once.state.last_status = Some(RunStatus::Skipped);
        assert!(!is_due(&once, 600));
    }

    #[test]
    fn the_wake_time_is_the_earliest_enabled_next_run_and_firings_have_keys() {
        let mut a = job(
            "a",
            CronSchedule::Every {
                every_ms: 1,
                anchor_ms: None,
            },
        );
        let mut b = a.clone();
        let mut c = a.clone();
        a.state.next_run_at_ms = Some(30);
        b.id = "b".into();
        b.state.next_run_at_ms = Some(20);
        c.enabled = false;
        c.state.next_run_at_ms = Some(10);
        assert_eq!(next_wake_at(&[a.clone(), b.clone(), c]), Some(20));
        assert_eq!(next_wake_at(&[]), None);
        let slot = firing_slot(&b).expect("slot");
        assert_eq!(slot.key(), "cron:b:20");
    }

    #[test]
    fn three_schedule_errors_in_a_row_disable_the_job() {
        let mut broken = job("b", cron("not a cron", None, None));
        broken.name = "Broken".into();
        broken.state.next_run_at_ms = Some(5);
        assert_eq!(refresh_next_run(&mut broken, 0, &TimeZone::UTC), None);
        assert_eq!(broken.state.next_run_at_ms, None);
        assert!(
            broken
                .state
                .last_error
                .as_deref()
                .is_some_and(|e| e.starts_with("schedule error: "))
        );
        assert_eq!(refresh_next_run(&mut broken, 0, &TimeZone::UTC), None);
        let disabled = refresh_next_run(&mut broken, 0, &TimeZone::UTC).expect("disabled");
        assert!(!broken.enabled);
        assert_eq!(disabled.errors, 3);
        assert_eq!(disabled.wake_reason(), "cron:b:auto-disabled");
        assert!(disabled
            .system_event_text()
            .starts_with("⚠️ Cron job \"Broken\" has been auto-disabled after 3 consecutive schedule errors. Last error: "));
        // A good schedule resets the count.
        broken.enabled = true;
        broken.schedule = cron("0 9 * * *", None, None);
        assert_eq!(refresh_next_run(&mut broken, 0, &TimeZone::UTC), None);
        assert_eq!(broken.state.schedule_error_count, None);
        assert_eq!(broken.state.next_run_at_ms, Some(9 * 3_600_000));
    }

    #[test]
    fn a_bad_zone_is_a_schedule_error() {
        let zoned = job("z", cron("0 9 * * *", Some("Mars/Olympus"), None));
        assert!(next_run_at(&zoned, 0, &TimeZone::UTC).is_err());
    }
}
