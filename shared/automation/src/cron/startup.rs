//! Start-up catch-up and manual runs: which jobs run when the scheduler comes back after
//! downtime, what happens to runs a restart interrupted, and the preflight and run id of
//! `cron run`.
//!
//! The planner only edits job state and returns the plan; the runtime persists the jobs,
//! runs the listed firings one after another and arms its timer.

use serde::Serialize;

use super::schedule::{
    FiringSlot, STUCK_RUN_MS, ScheduleAutoDisabled, is_due, is_running, previous_slot_at_or_before,
    record_schedule_error, refresh_next_run,
};
use super::tool::RunMode;
use super::types::{CronJob, CronSchedule, RunStatus};
use super::validate::{ValidationContext, job_spec_error};
use clawless_base::time::TimeZone;

/// Missed jobs run right away at start-up, at most this many.
pub const MAX_IMMEDIATE_CATCH_UP: usize = 5;

/// The rest are spread out this far apart (5 s, 10 s, …).
pub const CATCH_UP_SPACING_MS: u64 = 5_000;

/// The error recorded on a one-shot whose run a restart interrupted.
pub const INTERRUPTED_ONE_SHOT_ERROR: &str =
    "interrupted: the scheduler restarted while this one-shot job was running; it is not run again";

/// What to do at start-up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StartupPlan {
    /// Jobs whose `runningAtMs` marker was cleared (their run died with the old process).
    pub cleared_running: Vec<String>,
    /// Interrupted one-shots: not run again; disabled with a `skipped` status and
    /// [`INTERRUPTED_ONE_SHOT_ERROR`], so a reminder is never sent twice.
    pub interrupted_one_shots: Vec<String>,
    /// Run these now, one after another, earliest slot first. Several missed slots of one
    /// job are one firing.
    pub run_now: Vec<FiringSlot>,
    /// Missed jobs beyond the first five, pushed to now + 5 s, 10 s, …: their new
    /// `nextRunAtMs`.
    pub deferred: Vec<FiringSlot>,
    /// Jobs whose schedule failed for the third time in a row while planning.
    pub schedule_disabled: Vec<ScheduleAutoDisabled>,
}

/// Plans start-up at `now_ms` and updates `jobs` to match: markers cleared, interrupted
/// one-shots disabled, deferred jobs given their new `nextRunAtMs`, a missed cron slot made
/// due, enabled jobs without a next run given one.
///
/// A job is missed when it is enabled and due (its past-due `nextRunAtMs` survives
/// downtime; a one-shot only while it has not finished, or as a pending retry), or when it
/// is a cron job that has run before and whose latest slot is after its last run, unless it
/// is backing off after errors.
pub fn plan_startup(jobs: &mut [CronJob], now_ms: u64, default_tz: &TimeZone) -> StartupPlan {
    let mut plan = StartupPlan::default();
    let mut missed: Vec<(u64, usize)> = Vec::new();
    for (index, job) in jobs.iter_mut().enumerate() {
        if job.state.running_at_ms.take().is_some() {
            plan.cleared_running.push(job.id.clone());
            if job.is_one_shot() {
                job.enabled = false;
                job.state.next_run_at_ms = None;
                job.state.last_status = Some(RunStatus::Skipped);
                job.state.last_run_status = Some(RunStatus::Skipped);
                job.state.last_error = Some(INTERRUPTED_ONE_SHOT_ERROR.to_owned());
                job.updated_at_ms = now_ms;
                plan.interrupted_one_shots.push(job.id.clone());
                continue;
            }
        }
        if !job.enabled {
            continue;
        }
        if is_due(job, now_ms) {
            if let Some(slot) = job.state.next_run_at_ms {
                missed.push((slot, index));
            }
            continue;
        }
        if job.state.next_run_at_ms.is_none()
            && !job.is_one_shot()
            && let Some(disabled) = refresh_next_run(job, now_ms, default_tz)
        {
            plan.schedule_disabled.push(disabled);
            continue;
        }
        let backing_off = job.state.consecutive_errors.unwrap_or(0) > 0;
        let Some(last_run) = job.state.last_run_at_ms else {
            continue;
        };
        if backing_off || !matches!(job.schedule, CronSchedule::Cron { .. }) {
            continue;
        }
        match previous_slot_at_or_before(job, now_ms, default_tz) {
            Ok(Some(slot)) if slot > last_run => {
                job.state.next_run_at_ms = Some(slot);
                missed.push((slot, index));
            }
            Ok(_) => {}
            Err(error) => {
                if let Some(disabled) = record_schedule_error(job, &error) {
                    plan.schedule_disabled.push(disabled);
                }
            }
        }
    }
    missed.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| jobs[a.1].id.cmp(&jobs[b.1].id)));
    let mut later = 0u64;
    for (position, (slot, index)) in missed.into_iter().enumerate() {
        let job = &mut jobs[index];
        if position < MAX_IMMEDIATE_CATCH_UP {
            plan.run_now.push(FiringSlot {
                job_id: job.id.clone(),
                slot_ms: slot,
            });
        } else {
            later += 1;
            let next = now_ms + CATCH_UP_SPACING_MS * later;
            job.state.next_run_at_ms = Some(next);
            plan.deferred.push(FiringSlot {
                job_id: job.id.clone(),
                slot_ms: next,
            });
        }
    }
    plan
}

/// Why `cron run` did not start a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NotRunReason {
    /// A run is in progress.
    AlreadyRunning,
    /// `runMode: "due"` and the job is not due.
    NotDue,
    /// The stored job breaks the rules; record a `skipped` run with the reason.
    InvalidSpec,
}

/// The answer of `cron run`: `{ok:true, ran:false, reason}` or
/// `{ok:true, enqueued:true, runId}` (the outcome is only visible through `runs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ManualRunResponse {
    /// Not started.
    NotRun {
        /// Always true.
        ok: bool,
        /// Always false.
        ran: bool,
        /// Why.
        reason: NotRunReason,
    },
    /// Queued on the cron lane.
    Enqueued {
        /// Always true.
        ok: bool,
        /// Always true.
        enqueued: bool,
        /// `manual:<jobId>:<ms>:<n>`.
        #[serde(rename = "runId")]
        run_id: String,
    },
}

impl ManualRunResponse {
    /// `{ok:true, ran:false, reason}`.
    pub fn not_run(reason: NotRunReason) -> Self {
        Self::NotRun {
            ok: true,
            ran: false,
            reason,
        }
    }

    /// `{ok:true, enqueued:true, runId}`.
    pub fn enqueued(run_id: String) -> Self {
        Self::Enqueued {
            ok: true,
            enqueued: true,
            run_id,
        }
    }
}

/// The id of a manual run: `manual:<jobId>:<ms>:<n>`, `n` counting manual runs (so two in
/// the same millisecond differ).
pub fn manual_run_id(job_id: &str, now_ms: u64, n: u64) -> String {
    format!("manual:{job_id}:{now_ms}:{n}")
}

/// Checks a manual run of `job` before it is queued: a `runningAtMs` older than two hours is
/// cleared as stuck; a live one refuses (`already-running`); a job that breaks the rules
/// refuses (`invalid-spec`, with the error to record as a `skipped` run); in `due` mode a
/// job that is not due refuses (`not-due`). `force` runs even a disabled job.
pub fn preflight_manual_run(
    job: &mut CronJob, mode: RunMode, ctx: &ValidationContext<'_>,
) -> Result<(), (NotRunReason, Option<String>)> {
    let now = ctx.now_ms;
    if job
        .state
        .running_at_ms
        .is_some_and(|started| now.saturating_sub(started) >= STUCK_RUN_MS)
    {
        job.state.running_at_ms = None;
    }
    if is_running(job, now) {
        return Err((NotRunReason::AlreadyRunning, None));
    }
    if let Some(error) = job_spec_error(job, ctx) {
        return Err((NotRunReason::InvalidSpec, Some(error.to_string())));
    }
    if mode == RunMode::Due && !is_due(job, now) {
        return Err((NotRunReason::NotDue, None));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cron::schedule::tests::{at, cron, job};
    use crate::cron::types::{AgentTurn, CronPayload, SessionTarget};
    use crate::cron::validate::tests::ctx;

    const SECOND: u64 = 1_000;
    static UTC: TimeZone = TimeZone::UTC;

    fn every(id: &str, next: u64) -> CronJob {
        let mut job = job(
            id,
            CronSchedule::Every {
                every_ms: 3_600_000,
                anchor_ms: Some(0),
            },
        );
        job.state.next_run_at_ms = Some(next);
        job
    }

    #[test]
    fn seven_missed_jobs_run_five_now_and_space_the_rest() {
        // Vector 34.
        let now = at("2026-03-01T12:00:00Z");
        let mut jobs: Vec<CronJob> = (0..7u64)
            .map(|i| every(&format!("j{i}"), now - (7 - i) * 60 * SECOND))
            .collect();
        jobs.reverse();
        let mut interrupted = job(
            "once",
            CronSchedule::At {
                at: "2026-03-01T11:00:00.000Z".into(),
            },
        );
        interrupted.state.next_run_at_ms = Some(at("2026-03-01T11:00:00Z"));
        interrupted.state.running_at_ms = Some(at("2026-03-01T11:00:00Z"));
        jobs.push(interrupted);

        let plan = plan_startup(&mut jobs, now, &UTC);
        let run_now: Vec<&str> = plan.run_now.iter().map(|f| f.job_id.as_str()).collect();
        assert_eq!(run_now, ["j0", "j1", "j2", "j3", "j4"], "earliest first");
        assert_eq!(
            plan.deferred,
            [
                FiringSlot {
                    job_id: "j5".into(),
                    slot_ms: now + 5_000
                },
                FiringSlot {
                    job_id: "j6".into(),
                    slot_ms: now + 10_000
                },
            ]
        );
        assert_eq!(plan.cleared_running, ["once"]);
        assert_eq!(plan.interrupted_one_shots, ["once"]);
        let once = jobs.iter().find(|j| j.id == "once").expect("kept");
        assert_eq!(
            (
                once.enabled,
                once.state.running_at_ms,
                once.state.next_run_at_ms
            ),
            (false, None, None)
        );
        assert_eq!(
            once.state.last_error.as_deref(),
            Some(INTERRUPTED_ONE_SHOT_ERROR)
        );
        let j6 = jobs.iter().find(|j| j.id == "j6").expect("j6");
        assert_eq!(j6.state.next_run_at_ms, Some(now + 10_000));
    }

    #[test]
    fn interrupted_recurring_jobs_may_catch_up() {
        let now = at("2026-03-01T12:00:00Z");
        let mut recurring = every("r", now - SECOND);
        recurring.state.running_at_ms = Some(now - 2 * SECOND);
        let mut jobs = vec![recurring];
        let plan = plan_startup(&mut jobs, now, &UTC);
        assert_eq!(plan.cleared_running, ["r"]);
        assert_eq!(
            plan.run_now,
            [FiringSlot {
                job_id: "r".into(),
                slot_ms: now - SECOND
            }]
        );
    }

    #[test]
    fn a_cron_job_whose_slot_passed_after_its_last_run_catches_up_once() {
        // Down from Monday to Thursday: three missed 09:00 slots are one run, for the latest.
        let now = at("2026-03-05T12:00:00Z");
        let mut daily = job("d", cron("0 9 * * *", None, None));
        daily.state.last_run_at_ms = Some(at("2026-03-02T09:00:00Z"));
        daily.state.next_run_at_ms = Some(at("2026-03-06T09:00:00Z"));
        let mut fresh = job("f", cron("0 9 * * *", None, None));
        fresh.state.next_run_at_ms = Some(at("2026-03-06T09:00:00Z"));
        let mut backing_off = daily.clone();
        backing_off.id = "b".into();
        backing_off.state.consecutive_errors = Some(2);
        let mut jobs = vec![daily, fresh, backing_off];
        let plan = plan_startup(&mut jobs, now, &UTC);
        assert_eq!(
            plan.run_now,
            [FiringSlot {
                job_id: "d".into(),
                slot_ms: at("2026-03-05T09:00:00Z")
            }]
        );
        assert_eq!(
            jobs[0].state.next_run_at_ms,
            Some(at("2026-03-05T09:00:00Z"))
        );
        assert_eq!(
            jobs[2].state.next_run_at_ms,
            Some(at("2026-03-06T09:00:00Z")),
            "backoff respected"
        );
    }

    #[test]
    fn finished_one_shots_and_disabled_jobs_stay_put() {
        let now = at("2026-03-01T12:00:00Z");
        let mut done = job(
            "done",
            CronSchedule::At {
                at: "2026-03-01T11:00:00.000Z".into(),
            },
        );
        done.state.next_run_at_ms = Some(now - SECOND);
        done.state.last_status = Some(RunStatus::Ok);
        let mut retry = done.clone();
        retry.id = "retry".into();
        retry.state.last_status = Some(RunStatus::Error);
        let mut off = every("off", now - SECOND);
        off.enabled = false;
        let mut unscheduled = every("new", 0);
        unscheduled.state.next_run_at_ms = None;
        let mut jobs = vec![done, retry, off, unscheduled];
        let plan = plan_startup(&mut jobs, now, &UTC);
        let ids: Vec<&str> = plan.run_now.iter().map(|f| f.job_id.as_str()).collect();
        assert_eq!(ids, ["retry"]);
        assert_eq!(
            jobs[3].state.next_run_at_ms,
            Some(at("2026-03-01T13:00:00Z"))
        );
    }

    #[test]
    fn manual_runs_answer_like_the_gateway() {
        // Vector 35.
        let now = at("2026-03-01T12:00:00Z");
        let mut later = every("J", now + 60 * SECOND);
        assert_eq!(
            preflight_manual_run(&mut later, RunMode::Force, &ctx(now)),
            Ok(())
        );
        assert_eq!(
            serde_json::to_value(ManualRunResponse::enqueued(manual_run_id("J", now, 1)))
                .expect("json"),
            serde_json::json!({"ok": true, "enqueued": true, "runId": format!("manual:J:{now}:1")})
        );
        assert_eq!(
            preflight_manual_run(&mut later, RunMode::Due, &ctx(now)),
            Err((NotRunReason::NotDue, None))
        );
        assert_eq!(
            serde_json::to_value(ManualRunResponse::not_run(NotRunReason::NotDue)).expect("json"),
            serde_json::json!({"ok": true, "ran": false, "reason": "not-due"})
        );
        assert_eq!(
            preflight_manual_run(&mut later, RunMode::Due, &ctx(now + 60 * SECOND)),
            Ok(())
        );
    }

    #[test]
    fn manual_runs_refuse_running_and_invalid_jobs_and_clear_stuck_markers() {
        let now = at("2026-03-01T12:00:00Z");
        let mut running = every("r", now);
        running.state.running_at_ms = Some(now - SECOND);
        assert_eq!(
            preflight_manual_run(&mut running, RunMode::Force, &ctx(now)),
            Err((NotRunReason::AlreadyRunning, None))
        );
        running.state.running_at_ms = Some(now - STUCK_RUN_MS);
        assert_eq!(
            preflight_manual_run(&mut running, RunMode::Force, &ctx(now)),
            Ok(())
        );
        assert_eq!(running.state.running_at_ms, None);
        let mut invalid = every("i", now);
        invalid.session_target = SessionTarget::Main;
        invalid.payload = CronPayload::AgentTurn(AgentTurn {
            message: "m".into(),
            ..AgentTurn::default()
        });
        assert!(matches!(
            preflight_manual_run(&mut invalid, RunMode::Force, &ctx(now)),
            Err((NotRunReason::InvalidSpec, Some(error))) if error.starts_with("main cron jobs require")
        ));
        assert_eq!(
            serde_json::to_value(NotRunReason::AlreadyRunning).expect("json"),
            "already-running"
        );
    }
}
