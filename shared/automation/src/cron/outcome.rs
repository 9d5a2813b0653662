//! What a finished run does to its job: state fields, the consecutive-error count,
//! retries of one-shots after transient errors, backoff of recurring jobs, disabling or
//! removing finished one-shots, the next run, and whether a failure alert is due.
//!
//! Pure: the runtime persists the job (or removes it) and sends what [`AppliedRun`] lists.

use std::sync::LazyLock;

use regex::Regex;

use super::config::{
    CronConfig, DEFAULT_FAILURE_ALERT_AFTER, DEFAULT_FAILURE_ALERT_COOLDOWN_MS,
    DEFAULT_FAILURE_ALERT_ENABLED, TransientErrorKind,
};
use super::delivery::{
    FailureNotice, LAST_CHANNEL, delivery_plan, failure_alert_text, failure_notice,
};
use super::schedule::{
    MIN_REFIRE_GAP_MS, ScheduleAutoDisabled, next_run_at, record_schedule_error,
};
use super::types::{
    AlertMode, CronJob, CronSchedule, DeliveryStatus, ErrorReason, FailureAlertSetting, RunStatus,
};
use clawless_base::time::TimeZone;

/// Waits of a recurring job after its 1st, 2nd, … consecutive error (the last repeats).
pub const RECURRING_ERROR_BACKOFF_MS: [u64; 5] = [30_000, 60_000, 300_000, 900_000, 3_600_000];

/// How a run ended, as the runtime observed it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunOutcome {
    /// `ok`, `error` or `skipped` (`None` counts as `ok`).
    pub status: Option<RunStatus>,
    /// Error text of an `error` run, or the reason of a `skipped` one.
    pub error: Option<String>,
    /// The error's class, if the runtime knows it (e.g. from the model client's error).
    pub error_reason: Option<ErrorReason>,
    /// Whether the result was delivered; `None` when unknown or nothing was sent.
    pub delivered: Option<bool>,
    /// Why delivery failed.
    pub delivery_error: Option<String>,
    /// When the run started.
    pub started_at_ms: u64,
    /// When it ended (the clock for everything decided here).
    pub ended_at_ms: u64,
    /// A manual `force` run: an `every` series keeps its rhythm, as if this run had not
    /// happened.
    pub keep_series: bool,
}

impl RunOutcome {
    fn status(&self) -> RunStatus {
        self.status.unwrap_or(RunStatus::Ok)
    }
}

/// What the runtime must do after [`apply_run_outcome`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppliedRun {
    /// Remove the job from the store (a one-shot that succeeded with `deleteAfterRun`).
    pub remove_job: bool,
    /// Send this failure alert (threshold reached, not in cooldown).
    pub failure_alert: Option<FailureAlertPlan>,
    /// Send this failure notice (every failed run, unless best-effort).
    pub failure_notice: Option<FailureNotice>,
    /// The schedule failed for the third time in a row and disabled the job.
    pub schedule_disabled: Option<ScheduleAutoDisabled>,
}

/// A failure alert to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureAlertPlan {
    /// `Cron job "<name>" failed <n> times\nLast error: …`.
    pub text: String,
    /// Channel id, or `last`.
    pub channel: String,
    /// Recipient.
    pub to: Option<String>,
    /// `announce` or `webhook`.
    pub mode: AlertMode,
    /// Account of a multi-account channel.
    pub account_id: Option<String>,
}

/// Records a finished run on `job` (see the module docs) and says what else to do.
///
/// - Always: `runningAtMs` cleared; last run, status, error, duration, delivery fields set;
///   `updatedAtMs = endedAt`.
/// - `error` counts a consecutive error (and may alert); `ok`/`skipped` reset the count.
/// - One-shots: `ok` with `deleteAfterRun` → removed; `ok`/`skipped` → disabled; `error` →
///   retried after `cron.retry.backoffMs` while transient and within `maxAttempts`, else
///   disabled (kept for inspection).
/// - Recurring: `error` → the later of the natural next run and the error backoff; success →
///   the natural next run (a cron job at least 2 s after the run ended).
pub fn apply_run_outcome(
    job: &mut CronJob, outcome: &RunOutcome, config: &CronConfig, default_tz: &TimeZone,
) -> AppliedRun {
    let status = outcome.status();
    let ended = outcome.ended_at_ms;
    let previous_last_run = job.state.last_run_at_ms;
    let plan = delivery_plan(job);

    let state = &mut job.state;
    state.running_at_ms = None;
    state.last_run_at_ms = Some(outcome.started_at_ms);
    state.last_run_status = Some(status);
    state.last_status = Some(status);
    state.last_duration_ms = Some(ended.saturating_sub(outcome.started_at_ms));
    state.last_error = outcome.error.clone();
    state.last_error_reason = (status == RunStatus::Error)
        .then_some(outcome.error_reason)
        .flatten();
    state.last_delivered = outcome.delivered;
    let delivery_status = match outcome.delivered {
        Some(true) => DeliveryStatus::Delivered,
        Some(false) => DeliveryStatus::NotDelivered,
        None if plan.requested() => DeliveryStatus::Unknown,
        None => DeliveryStatus::NotRequested,
    };
    state.last_delivery_status = Some(delivery_status);
    state.last_delivery_error = (delivery_status == DeliveryStatus::NotDelivered)
        .then(|| outcome.delivery_error.clone())
        .flatten();
    job.updated_at_ms = ended;

    let mut applied = AppliedRun::default();
    if status == RunStatus::Error {
        let errors = job.state.consecutive_errors.unwrap_or(0).saturating_add(1);
        job.state.consecutive_errors = Some(errors);
        applied.failure_alert = failure_alert_due(job, config, ended);
        if applied.failure_alert.is_some() {
            job.state.last_failure_alert_at_ms = Some(ended);
        }
        let error = outcome.error.as_deref().unwrap_or("unknown error");
        applied.failure_notice = failure_notice(job, config, error);
    } else {
        job.state.consecutive_errors = Some(0);
        job.state.last_failure_alert_at_ms = None;
    }
    let errors = job.state.consecutive_errors.unwrap_or(0);

    if job.is_one_shot() {
        match status {
            RunStatus::Ok if job.delete_after_run == Some(true) => {
                applied.remove_job = true;
            }
            RunStatus::Ok | RunStatus::Skipped => {
                job.enabled = false;
                job.state.next_run_at_ms = None;
            }
            RunStatus::Error => {
                let retry = transient_error_kind(outcome.error.as_deref().unwrap_or(""))
                    .is_some_and(|kind| config.retries_on(kind))
                    && errors <= config.retry_max_attempts();
                if retry && job.enabled {
                    job.state.next_run_at_ms = Some(ended + config.retry_backoff_ms(errors));
                } else {
                    job.enabled = false;
                    job.state.next_run_at_ms = None;
                }
            }
        }
        return applied;
    }

    if !job.enabled {
        job.state.next_run_at_ms = None;
        return applied;
    }
    // A forced manual run of an `every` job computes the next run as if it had not happened.
    let natural = if outcome.keep_series && matches!(job.schedule, CronSchedule::Every { .. }) {
        let ran_at = job.state.last_run_at_ms;
        job.state.last_run_at_ms = previous_last_run;
        let next = next_run_at(job, ended, default_tz);
        job.state.last_run_at_ms = ran_at;
        next
    } else {
        next_run_at(job, ended, default_tz)
    };
    let natural = match natural {
        Ok(next) => {
            job.state.schedule_error_count = None;
            next
        }
        Err(error) => {
            applied.schedule_disabled = record_schedule_error(job, &error);
            return applied;
        }
    };
    job.state.next_run_at_ms = match status {
        RunStatus::Error => {
            let backoff = ended + recurring_backoff_ms(errors);
            Some(natural.map_or(backoff, |next| next.max(backoff)))
        }
        _ if matches!(job.schedule, CronSchedule::Cron { .. }) => {
            natural.map(|next| next.max(ended + MIN_REFIRE_GAP_MS))
        }
        _ => natural,
    };
    applied
}

/// The wait of a recurring job after `consecutive_errors` errors in a row: 30 s, 1 min,
/// 5 min, 15 min, then 60 min.
pub fn recurring_backoff_ms(consecutive_errors: u32) -> u64 {
    let index = usize::try_from(consecutive_errors.saturating_sub(1)).unwrap_or(usize::MAX);
    RECURRING_ERROR_BACKOFF_MS
        .get(index)
        .copied()
        .unwrap_or(RECURRING_ERROR_BACKOFF_MS[RECURRING_ERROR_BACKOFF_MS.len() - 1])
}

static TRANSIENT_PATTERNS: LazyLock<[(TransientErrorKind, Regex); 5]> = LazyLock::new(|| {
    let pattern = |source: &str| {
        Regex::new(source).unwrap_or_else(|error| unreachable!("fixed pattern: {error}"))
    };
    [
        (
            TransientErrorKind::RateLimit,
            pattern(
                r"(?i)rate limit|too many requests|429|resource has been exhausted|cloudflare|tokens per day",
            ),
        ),
        (
            TransientErrorKind::Overloaded,
            pattern(r"(?i)529|overloaded|high demand|temporarily overloaded|capacity exceeded"),
        ),
        (
            TransientErrorKind::Network,
            pattern(r"(?i)network|econnreset|econnrefused|fetch failed|socket"),
        ),
        (
            TransientErrorKind::Timeout,
            pattern(r"(?i)timeout|etimedout"),
        ),
        (TransientErrorKind::ServerError, pattern(r"\b5\d{2}\b")),
    ]
});

/// The kind of transient error `error` reads as, if any (checked in the order rate limit,
/// overloaded, network, timeout, server error).
pub fn transient_error_kind(error: &str) -> Option<TransientErrorKind> {
    TRANSIENT_PATTERNS
        .iter()
        .find(|(_, pattern)| pattern.is_match(error))
        .map(|(kind, _)| *kind)
}

/// The alert to send now, if `job`'s failure alert is on (its own `failureAlert`, or
/// `cron.failureAlert.enabled`; `failureAlert: false` turns it off), the consecutive errors
/// reached `after` (default 2), the last alert is older than `cooldownMs` (default 1 h),
/// and delivery is not best-effort. Channel: the alert's, else the job's delivery channel,
/// else `last`.
fn failure_alert_due(job: &CronJob, config: &CronConfig, now_ms: u64) -> Option<FailureAlertPlan> {
    let global = &config.failure_alert;
    let own = match &job.failure_alert {
        Some(FailureAlertSetting::Off) => return None,
        Some(FailureAlertSetting::On(alert)) => Some(alert),
        None if global.enabled.unwrap_or(DEFAULT_FAILURE_ALERT_ENABLED) => None,
        None => return None,
    };
    if job.is_best_effort() {
        return None;
    }
    let after = own
        .and_then(|alert| alert.after)
        .or(global.after)
        .unwrap_or(DEFAULT_FAILURE_ALERT_AFTER)
        .max(1);
    let cooldown = own
        .and_then(|alert| alert.cooldown_ms)
        .or(global.cooldown_ms)
        .unwrap_or(DEFAULT_FAILURE_ALERT_COOLDOWN_MS);
    let errors = job.state.consecutive_errors.unwrap_or(0);
    let cooling = job
        .state
        .last_failure_alert_at_ms
        .is_some_and(|last| now_ms.saturating_sub(last) < cooldown);
    if errors < after || cooling {
        return None;
    }
    let delivery = job.delivery.as_ref();
    Some(FailureAlertPlan {
        text: failure_alert_text(&job.name, errors, job.state.last_error.as_deref()),
        channel: own
            .and_then(|alert| alert.channel.clone())
            .or_else(|| delivery.and_then(|d| d.channel.clone()))
            .unwrap_or_else(|| LAST_CHANNEL.to_owned()),
        to: own
            .and_then(|alert| alert.to.clone())
            .or_else(|| delivery.and_then(|d| d.to.clone())),
        mode: own
            .and_then(|alert| alert.mode)
            .or(global.mode)
            .unwrap_or_default(),
        account_id: own
            .and_then(|alert| alert.account_id.clone())
            .or_else(|| global.account_id.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cron::config::{CronRetryConfig, FailureAlertConfig};
    use crate::cron::schedule::tests::{at, cron, job};
    use crate::cron::types::{
        AgentTurn, CronDelivery, CronPayload, DeliveryMode, FailureAlert, SessionTarget,
    };

    const SECOND: u64 = 1_000;
    const MINUTE: u64 = 60 * SECOND;

    fn outcome(status: RunStatus, error: Option<&str>, started: u64, ended: u64) -> RunOutcome {
        RunOutcome {
            status: Some(status),
            error: error.map(str::to_owned),
            started_at_ms: started,
            ended_at_ms: ended,
            ..RunOutcome::default()
        }
    }

    fn apply(job: &mut CronJob, outcome: &RunOutcome) -> AppliedRun {
        apply_run_outcome(job, outcome, &CronConfig::default(), &TimeZone::UTC)
    }

    fn one_shot(delete_after_run: Option<bool>) -> CronJob {
        let mut once = job(
            "o",
            CronSchedule::At {
                at: "2026-02-01T16:00:00.000Z".into(),
            },
        );
        once.delete_after_run = delete_after_run;
        once.state.next_run_at_ms = Some(at("2026-02-01T16:00:00Z"));
        once.state.running_at_ms = Some(at("2026-02-01T16:00:00Z"));
        once
    }

    #[test]
    fn recurring_errors_back_off_then_success_resets() {
        // Vector 26: a 10 s series, failing, so the backoff always outweighs the natural run.
        let mut every = job(
            "e",
            CronSchedule::Every {
                every_ms: 10 * SECOND,
                anchor_ms: Some(0),
            },
        );
        let mut now = 10 * MINUTE;
        let mut waits = Vec::new();
        for _ in 0..6 {
            apply(
                &mut every,
                &outcome(RunStatus::Error, Some("boom"), now, now + SECOND),
            );
            let next = every.state.next_run_at_ms.expect("next");
            waits.push((next - (now + SECOND)) / SECOND);
            now = next;
        }
        assert_eq!(waits, [30, 60, 300, 900, 3600, 3600]);
        assert_eq!(every.state.consecutive_errors, Some(6));
        assert!(every.enabled);
        apply(&mut every, &outcome(RunStatus::Ok, None, now, now + SECOND));
        assert_eq!(every.state.consecutive_errors, Some(0));
        assert_eq!(every.state.next_run_at_ms, Some(now + 10 * SECOND));
        assert_eq!(every.state.last_error, None);
    }

    #[test]
    fn recurring_backoff_steps() {
        let steps: Vec<u64> = (1..=7).map(recurring_backoff_ms).collect();
        assert_eq!(
            steps,
            [
                30_000, 60_000, 300_000, 900_000, 3_600_000, 3_600_000, 3_600_000
            ]
        );
    }

    #[test]
    fn one_shots_retry_transient_errors_then_give_up() {
        // Vector 27.
        let mut once = one_shot(Some(true));
        let mut now = at("2026-02-01T16:00:00Z");
        let mut waits = Vec::new();
        for _ in 0..3 {
            apply(
                &mut once,
                &outcome(
                    RunStatus::Error,
                    Some("429 Too Many Requests"),
                    now,
                    now + SECOND,
                ),
            );
            let next = once.state.next_run_at_ms.expect("a retry");
            waits.push(next - (now + SECOND));
            now = next;
        }
        assert_eq!(waits, [30_000, 60_000, 300_000]);
        let applied = apply(
            &mut once,
            &outcome(
                RunStatus::Error,
                Some("429 Too Many Requests"),
                now,
                now + SECOND,
            ),
        );
        assert!(!once.enabled, "the 4th consecutive error disables it");
        assert_eq!(once.state.next_run_at_ms, None);
        assert!(!applied.remove_job, "kept for inspection");

        let mut fatal = one_shot(Some(true));
        apply(
            &mut fatal,
            &outcome(RunStatus::Error, Some("invalid api key"), 0, 1),
        );
        assert!(!fatal.enabled);
        assert_eq!(fatal.state.next_run_at_ms, None);
    }

    #[test]
    fn retry_on_limits_which_errors_are_retried() {
        let config = CronConfig {
            retry: CronRetryConfig {
                retry_on: Some(vec![TransientErrorKind::Network]),
                max_attempts: Some(1),
                backoff_ms: Some(vec![5_000]),
            },
            ..CronConfig::default()
        };
        let mut limited = one_shot(None);
        apply_run_outcome(
            &mut limited,
            &outcome(RunStatus::Error, Some("429"), 0, 10),
            &config,
            &TimeZone::UTC,
        );
        assert!(!limited.enabled);
        let mut network = one_shot(None);
        apply_run_outcome(
            &mut network,
            &outcome(RunStatus::Error, Some("fetch failed"), 0, 10),
            &config,
            &TimeZone::UTC,
        );
        assert_eq!(network.state.next_run_at_ms, Some(5_010));
        apply_run_outcome(
            &mut network,
            &outcome(RunStatus::Error, Some("fetch failed"), 20, 30),
            &config,
            &TimeZone::UTC,
        );
        assert!(!network.enabled, "max one attempt");
    }

    #[test]
    fn finished_one_shots_are_removed_or_disabled() {
        // Vector 28.
        let mut removed = one_shot(Some(true));
        assert!(apply(&mut removed, &outcome(RunStatus::Ok, None, 0, 1)).remove_job);
        let mut kept = one_shot(Some(false));
        let applied = apply(&mut kept, &outcome(RunStatus::Ok, None, 0, 1));
        assert!(!applied.remove_job);
        assert!(!kept.enabled);
        assert_eq!(kept.state.next_run_at_ms, None);
        let mut skipped = one_shot(Some(true));
        let applied = apply(
            &mut skipped,
            &outcome(RunStatus::Skipped, Some("quiet-hours"), 0, 1),
        );
        assert!(!applied.remove_job);
        assert!(!skipped.enabled);
        assert_eq!(skipped.state.last_error.as_deref(), Some("quiet-hours"));
        assert_eq!(skipped.state.running_at_ms, None);
    }

    #[test]
    fn cron_jobs_wait_two_seconds_after_a_success() {
        // Vector 24/25 spin guard: a run that ended just before the next slot's shifted time
        // still waits 2 s.
        let mut exact = job("c", cron("* * * * * *", None, Some(0)));
        let slot = at("2026-01-01T10:00:00Z");
        apply(&mut exact, &outcome(RunStatus::Ok, None, slot, slot + 100));
        assert_eq!(
            exact.state.next_run_at_ms,
            Some(slot + 100 + MIN_REFIRE_GAP_MS)
        );
        let mut daily = job("d", cron("0 9 * * *", None, None));
        apply(&mut daily, &outcome(RunStatus::Ok, None, slot, slot + 100));
        assert_eq!(daily.state.next_run_at_ms, Some(at("2026-01-02T09:00:00Z")));
    }

    #[test]
    fn forced_runs_keep_an_every_series_in_step() {
        let mut every = job(
            "e",
            CronSchedule::Every {
                every_ms: 10 * MINUTE,
                anchor_ms: Some(0),
            },
        );
        every.state.last_run_at_ms = Some(60 * MINUTE);
        every.state.next_run_at_ms = Some(70 * MINUTE);
        let forced = RunOutcome {
            keep_series: true,
            ..outcome(RunStatus::Ok, None, 63 * MINUTE, 64 * MINUTE)
        };
        apply(&mut every, &forced);
        assert_eq!(every.state.next_run_at_ms, Some(70 * MINUTE));
        assert_eq!(every.state.last_run_at_ms, Some(63 * MINUTE));
        let mut shifted = job(
            "e",
            CronSchedule::Every {
                every_ms: 10 * MINUTE,
                anchor_ms: Some(0),
            },
        );
        apply(
            &mut shifted,
            &outcome(RunStatus::Ok, None, 63 * MINUTE, 64 * MINUTE),
        );
        assert_eq!(shifted.state.next_run_at_ms, Some(73 * MINUTE));
    }

    #[test]
    fn delivery_status_follows_what_was_requested() {
        let mut isolated = job(
            "i",
            CronSchedule::Every {
                every_ms: MINUTE,
                anchor_ms: Some(0),
            },
        );
        isolated.session_target = SessionTarget::Isolated;
        isolated.payload = CronPayload::AgentTurn(AgentTurn {
            message: "m".into(),
            ..AgentTurn::default()
        });
        apply(&mut isolated, &outcome(RunStatus::Ok, None, 0, 1));
        assert_eq!(
            isolated.state.last_delivery_status,
            Some(DeliveryStatus::Unknown)
        );
        let failed = RunOutcome {
            delivered: Some(false),
            delivery_error: Some("chat not found".into()),
            ..outcome(RunStatus::Ok, None, 0, 1)
        };
        apply(&mut isolated, &failed);
        assert_eq!(
            isolated.state.last_delivery_status,
            Some(DeliveryStatus::NotDelivered)
        );
        assert_eq!(
            isolated.state.last_delivery_error.as_deref(),
            Some("chat not found")
        );
        let mut main = job(
            "m",
            CronSchedule::Every {
                every_ms: MINUTE,
                anchor_ms: Some(0),
            },
        );
        apply(&mut main, &outcome(RunStatus::Ok, None, 0, 1));
        assert_eq!(
            main.state.last_delivery_status,
            Some(DeliveryStatus::NotRequested)
        );
        let reasoned = RunOutcome {
            error_reason: Some(ErrorReason::RateLimit),
            ..outcome(RunStatus::Error, Some("429"), 0, 1)
        };
        apply(&mut main, &reasoned);
        assert_eq!(main.state.last_error_reason, Some(ErrorReason::RateLimit));
    }

    #[test]
    fn failure_alerts_fire_at_the_threshold_and_respect_the_cooldown() {
        // Vector 33.
        let mut failing = job(
            "f",
            CronSchedule::Every {
                every_ms: MINUTE,
                anchor_ms: Some(0),
            },
        );
        failing.name = "N".into();
        failing.failure_alert = Some(FailureAlertSetting::On(FailureAlert {
            after: Some(3),
            ..FailureAlert::default()
        }));
        let mut alerts = Vec::new();
        for run in 0..4u64 {
            let start = run * 10 * MINUTE;
            let applied = apply(
                &mut failing,
                &outcome(RunStatus::Error, Some("boom"), start, start + SECOND),
            );
            alerts.push(applied.failure_alert.map(|alert| alert.text));
        }
        assert_eq!(alerts[..2], [None, None]);
        assert_eq!(
            alerts[2].as_deref(),
            Some("Cron job \"N\" failed 3 times\nLast error: boom")
        );
        assert_eq!(alerts[3], None, "within the hour's cooldown");
        // After the cooldown it alerts again; a success clears the streak.
        let later = 2 * 60 * MINUTE;
        assert!(
            apply(
                &mut failing,
                &outcome(RunStatus::Error, Some("boom"), later, later + 1)
            )
            .failure_alert
            .is_some()
        );
        apply(
            &mut failing,
            &outcome(RunStatus::Ok, None, later + 2, later + 3),
        );
        assert_eq!(failing.state.last_failure_alert_at_ms, None);
    }

    #[test]
    fn failure_alerts_need_a_setting_and_skip_best_effort_jobs() {
        let errors = |job: &mut CronJob, config: &CronConfig| {
            (0..3)
                .filter_map(|n| {
                    apply_run_outcome(
                        job,
                        &outcome(RunStatus::Error, Some("e"), n, n + 1),
                        config,
                        &TimeZone::UTC,
                    )
                    .failure_alert
                })
                .count()
        };
        let base = job(
            "f",
            CronSchedule::Every {
                every_ms: MINUTE,
                anchor_ms: Some(0),
            },
        );
        assert_eq!(
            errors(&mut base.clone(), &CronConfig::default()),
            0,
            "off by default"
        );
        let global = CronConfig {
            failure_alert: FailureAlertConfig {
                enabled: Some(true),
                ..FailureAlertConfig::default()
            },
            ..CronConfig::default()
        };
        assert_eq!(
            errors(&mut base.clone(), &global),
            1,
            "on at the 2nd error, then cooling down"
        );
        let mut off = base.clone();
        off.failure_alert = Some(FailureAlertSetting::Off);
        assert_eq!(errors(&mut off, &global), 0);
        let mut best_effort = base.clone();
        best_effort.delivery = Some(CronDelivery {
            mode: DeliveryMode::None,
            best_effort: Some(true),
            ..CronDelivery::default()
        });
        assert_eq!(errors(&mut best_effort, &global), 0);
        let mut routed = base;
        routed.delivery = Some(CronDelivery {
            channel: Some("telegram".into()),
            to: Some("9".into()),
            ..CronDelivery::default()
        });
        let alert = (0..2)
            .filter_map(|n| {
                apply_run_outcome(
                    &mut routed,
                    &outcome(RunStatus::Error, Some("e"), n, n + 1),
                    &global,
                    &TimeZone::UTC,
                )
                .failure_alert
            })
            .next()
            .expect("alert");
        assert_eq!(
            (alert.channel.as_str(), alert.to.as_deref(), alert.mode),
            ("telegram", Some("9"), AlertMode::Announce)
        );
    }

    #[test]
    fn transient_errors_are_classified() {
        let cases = [
            ("429 Too Many Requests", Some(TransientErrorKind::RateLimit)),
            (
                "Resource has been exhausted (e.g. check quota)",
                Some(TransientErrorKind::RateLimit),
            ),
            (
                "Anthropic is overloaded",
                Some(TransientErrorKind::Overloaded),
            ),
            ("read ECONNRESET", Some(TransientErrorKind::Network)),
            ("request timeout", Some(TransientErrorKind::Timeout)),
            (
                "upstream returned 503",
                Some(TransientErrorKind::ServerError),
            ),
            ("invalid api key", None),
            ("error 5000", None),
        ];
        for (error, kind) in cases {
            assert_eq!(transient_error_kind(error), kind, "{error}");
        }
    }

    #[test]
    fn a_failed_isolated_run_carries_its_notice() {
        let mut isolated = job(
            "i",
            CronSchedule::Every {
                every_ms: MINUTE,
                anchor_ms: Some(0),
            },
        );
        isolated.name = "N".into();
        isolated.session_target = SessionTarget::Isolated;
        isolated.payload = CronPayload::AgentTurn(AgentTurn {
            message: "m".into(),
            ..AgentTurn::default()
        });
        let applied = apply(
            &mut isolated,
            &outcome(RunStatus::Error, Some("boom"), 0, 1),
        );
        assert_eq!(
            applied.failure_notice.map(|notice| notice.announce_text()),
            Some("⚠️ Cron job \"N\" failed: boom".to_owned())
        );
    }
}
