//! [`ScheduledTimers`]: durable timers of any length on AWS, composed of the SQS timer queue
//! ([`SqsTimers`]) for timers due within [`MAX_TIMER_DELAY`] and one-time EventBridge
//! Scheduler schedules for the rest.
//!
//! Owns the schedule naming (a deterministic name per timer id, [`schedule_name`]), the
//! `at()` expression a due time becomes ([`at_expression`]), the schedule's target (the timer
//! queue, with the same JSON body [`SqsTimers`] sends, so the `timers` function handles a
//! scheduled firing and a delayed message alike), and the mapping of Scheduler's errors onto
//! the port: a schedule that exists already is a timer already scheduled, one that is gone is
//! a timer already cancelled or fired. The Scheduler client is built at the first long timer
//! or cancel, not before. SDK errors are kept as the source.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_scheduler::Client;
use aws_sdk_scheduler::error::SdkError;
use aws_sdk_scheduler::operation::create_schedule::CreateScheduleError;
use aws_sdk_scheduler::operation::delete_schedule::DeleteScheduleError;
use aws_sdk_scheduler::types::{
    ActionAfterCompletion, DeadLetterConfig, FlexibleTimeWindow, FlexibleTimeWindowMode,
    RetryPolicy, Target,
};
use aws_smithy_types::DateTime;
use aws_smithy_types::date_time::Format;
use clawless_core::session::QueueError;
use clawless_core::timers::{DueTimer, MAX_TIMER_DELAY, Timer, Timers};
use sha2::{Digest, Sha256};

use crate::sqs_nodes::{SqsTimers, timer_body};

/// Longest schedule name Scheduler allows (`[0-9a-zA-Z-_.]{1,64}`).
const MAX_SCHEDULE_NAME_LEN: usize = 64;
/// Hex characters of the timer id's SHA-256 in a schedule name (128 bits).
const NAME_HASH_HEX: usize = 32;
/// How long Scheduler keeps retrying a firing the queue refused (its maximum, 24 hours).
const MAX_EVENT_AGE_SECONDS: i32 = 86_400;
/// How many times Scheduler retries a firing within [`MAX_EVENT_AGE_SECONDS`] (its maximum).
const MAX_RETRY_ATTEMPTS: i32 = 185;
/// Longest schedule description Scheduler allows.
const MAX_DESCRIPTION_LEN: usize = 512;

/// Where a scheduled timer goes, and under which group and role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleTarget {
    /// The schedule group the timers' schedules are created in (the template's
    /// `ScheduleGroup`; the functions' rights are limited to it).
    pub group_name: String,
    /// ARN of the timer queue, the schedules' target.
    pub queue_arn: String,
    /// ARN of the role Scheduler assumes to send to the queue.
    pub role_arn: String,
    /// ARN of a standard queue for firings Scheduler could not deliver within 24 hours
    /// (the timer queue's dead-letter queue; the role must be allowed to send to it).
    pub dead_letter_arn: Option<String>,
}

/// The deterministic schedule name of `timer_id`: up to 31 characters of the id (characters
/// Scheduler does not allow become `_`), a `-`, and 32 hex characters of the id's SHA-256,
/// so distinct ids never share a name and the name still says which timer it is.
pub fn schedule_name(timer_id: &str) -> String {
    let digest = Sha256::digest(timer_id.as_bytes());
    let hash: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    let readable: String = timer_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(MAX_SCHEDULE_NAME_LEN - 1 - NAME_HASH_HEX)
        .collect();
    format!("{readable}-{}", &hash[..NAME_HASH_HEX])
}

/// The `ClientToken` of the schedule `name` in `group`: the hex SHA-256 of both (64
/// characters, as Scheduler allows), so a retried create of one timer is one request to it.
fn client_token(group: &str, name: &str) -> String {
    let digest = Sha256::digest(format!("{group}/{name}").as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The one-time schedule expression for `due_at_ms`: `at(yyyy-mm-ddThh:mm:ss)` in UTC, the
/// due time rounded up to the whole second.
pub fn at_expression(due_at_ms: u64) -> String {
    let seconds = i64::try_from(due_at_ms.div_ceil(1000)).unwrap_or(i64::MAX);
    // RFC 3339 without fractional seconds (there are none) and with a trailing `Z`.
    let formatted = DateTime::from_secs(seconds)
        .fmt(Format::DateTime)
        .unwrap_or_else(|_| "9999-12-31T23:59:59Z".to_owned());
    format!("at({})", formatted.trim_end_matches('Z'))
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The Scheduler client, built at its first use.
struct LazyClient {
    make: Box<dyn Fn() -> Client + Send + Sync>,
    built: OnceLock<Client>,
}

impl LazyClient {
    fn get(&self) -> &Client {
        self.built.get_or_init(|| (self.make)())
    }
}

/// Durable timers of any length: short ones on the SQS timer queue, long ones as one-time
/// EventBridge Scheduler schedules that send the timer to that same queue when due.
///
/// - `schedule`: a timer due within [`MAX_TIMER_DELAY`] (or overdue) goes through
///   [`SqsTimers`] (one delayed message; overdue work is sent at once, never to Scheduler,
///   which may refuse a time in the past). A later one becomes a schedule named
///   [`schedule_name`] in the target's group: expression [`at_expression`] in UTC,
///   `FlexibleTimeWindow` off, `ActionAfterCompletion` `DELETE`, target the timer queue
///   with the scheduler role, input the JSON body [`SqsTimers`] sends, retries for up to
///   24 hours, then the dead-letter queue if one is given. `ClientToken` is derived from the
///   name. A schedule of that name existing already (`ConflictException`) counts as
///   scheduled: scheduling a pending id again does nothing, as on SQLite.
/// - Scheduler fires within the scheduled minute, so a firing may come before the due
///   time; the timer queue's consumer then chains it for the rest, like any early message.
///   So nothing waits for a date by hopping every 15 minutes: a long timer costs one
///   schedule and one or two messages.
/// - `cancel` deletes the timer's schedule (one already gone is fine). A timer that went
///   through SQS cannot be withdrawn and still fires; handlers check a firing is wanted.
///   As any instance may have scheduled the id, `cancel` always asks Scheduler.
/// - `take_due` and `ack` are [`SqsTimers`]'s: every timer, long or short, ends up on the
///   timer queue.
///
/// Delivery is at least once (Scheduler retries, SQS redelivers), so a timer may be handed
/// out twice; ids name one firing (e.g. a job and its scheduled slot), and the turn queue's
/// deduplication and the handlers make a second delivery harmless.
#[derive(Clone)]
pub struct ScheduledTimers {
    short: SqsTimers,
    scheduler: Arc<LazyClient>,
    target: ScheduleTarget,
    schedule_after: Duration,
}

impl std::fmt::Debug for ScheduledTimers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScheduledTimers")
            .field("short", &self.short)
            .field("target", &self.target)
            .field("schedule_after", &self.schedule_after)
            .finish_non_exhaustive()
    }
}

impl ScheduledTimers {
    /// Timers on `short` (the timer queue) and, for those due later than
    /// [`MAX_TIMER_DELAY`], on Scheduler schedules to `target`. `scheduler` builds the
    /// Scheduler client; it is called once, at the first long timer or cancel, so a function
    /// that only ever sets short timers never builds it.
    pub fn new(
        short: SqsTimers, scheduler: impl Fn() -> Client + Send + Sync + 'static,
        target: ScheduleTarget,
    ) -> Self {
        Self {
            short,
            scheduler: Arc::new(LazyClient {
                make: Box::new(scheduler),
                built: OnceLock::new(),
            }),
            target,
            schedule_after: MAX_TIMER_DELAY,
        }
    }

    /// Sends timers due later than `schedule_after` from now to Scheduler (capped at
    /// [`MAX_TIMER_DELAY`], the longest a queue message can wait; tests use seconds).
    pub fn with_schedule_after(mut self, schedule_after: Duration) -> Self {
        self.schedule_after = schedule_after.min(MAX_TIMER_DELAY);
        self
    }

    /// Where the schedules go.
    pub fn target(&self) -> &ScheduleTarget {
        &self.target
    }

    /// Whether a timer due at `due_at_ms` becomes a schedule when scheduled at `now_ms`.
    fn is_long(&self, due_at_ms: u64, now_ms: u64) -> bool {
        due_at_ms > now_ms.saturating_add(millis(self.schedule_after))
    }

    fn failed(
        &self, action: &str, name: &str, err: impl std::error::Error + Send + Sync + 'static,
    ) -> QueueError {
        QueueError::new(
            format!(
                "Scheduler {action} of {}/{name} failed",
                self.target.group_name
            ),
            err,
        )
    }

    fn schedule_target(&self, input: String) -> Result<Target, QueueError> {
        let retry = RetryPolicy::builder()
            .maximum_event_age_in_seconds(MAX_EVENT_AGE_SECONDS)
            .maximum_retry_attempts(MAX_RETRY_ATTEMPTS)
            .build();
        let mut target = Target::builder()
            .arn(&self.target.queue_arn)
            .role_arn(&self.target.role_arn)
            .input(input)
            .retry_policy(retry);
        if let Some(arn) = &self.target.dead_letter_arn {
            target = target.dead_letter_config(DeadLetterConfig::builder().arn(arn).build());
        }
        target
            .build()
            .map_err(|err| QueueError::new("building a schedule target", err))
    }

    async fn create_schedule(&self, timer: &Timer, body: String) -> Result<(), QueueError> {
        let name = schedule_name(&timer.timer_id);
        let window = FlexibleTimeWindow::builder()
            .mode(FlexibleTimeWindowMode::Off)
            .build()
            .map_err(|err| QueueError::new("building a flexible time window", err))?;
        let description: String = format!("clawless timer {}", timer.timer_id)
            .chars()
            .take(MAX_DESCRIPTION_LEN)
            .collect();
        let created = self
            .scheduler
            .get()
            .create_schedule()
            .group_name(&self.target.group_name)
            .name(&name)
            .client_token(client_token(&self.target.group_name, &name))
            .description(description)
            .schedule_expression(at_expression(timer.due_at_ms))
            .schedule_expression_timezone("UTC")
            .flexible_time_window(window)
            .action_after_completion(ActionAfterCompletion::Delete)
            .target(self.schedule_target(body)?)
            .send()
            .await;
        match created {
            Ok(_) => {
                tracing::debug!(schedule = %name, "scheduled a long timer");
                Ok(())
            }
            Err(SdkError::ServiceError(context))
                if matches!(context.err(), CreateScheduleError::ConflictException(_)) =>
            {
                tracing::debug!(schedule = %name, "the timer's schedule exists already");
                Ok(())
            }
            Err(err) => Err(self.failed("CreateSchedule", &name, err)),
        }
    }
}

#[async_trait]
impl Timers for ScheduledTimers {
    #[tracing::instrument(level = "debug", skip_all, fields(timer_id = %timer.timer_id))]
    async fn schedule(&self, timer: &Timer) -> Result<(), QueueError> {
        if !self.is_long(timer.due_at_ms, clawless_base::clock::system_now_ms()) {
            return self.short.schedule(timer).await;
        }
        self.create_schedule(timer, timer_body(timer)?).await
    }

    async fn take_due(
        &self, now_ms: u64, max: usize, wait: Duration,
    ) -> Result<Vec<DueTimer>, QueueError> {
        self.short.take_due(now_ms, max, wait).await
    }

    async fn ack(&self, receipt: &str) -> Result<(), QueueError> {
        self.short.ack(receipt).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(timer_id = %timer_id))]
    async fn cancel(&self, timer_id: &str) -> Result<(), QueueError> {
        let name = schedule_name(timer_id);
        let deleted = self
            .scheduler
            .get()
            .delete_schedule()
            .group_name(&self.target.group_name)
            .name(&name)
            .send()
            .await;
        match deleted {
            Ok(_) => {
                tracing::debug!(schedule = %name, "cancelled a long timer");
                Ok(())
            }
            Err(SdkError::ServiceError(context))
                if matches!(
                    context.err(),
                    DeleteScheduleError::ResourceNotFoundException(_)
                ) =>
            {
                // Never scheduled here (a short timer, which cannot be withdrawn), already
                // fired, or already cancelled.
                self.short.cancel(timer_id).await
            }
            Err(err) => Err(self.failed("DeleteSchedule", &name, err)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_expressions_are_utc_and_round_up_to_the_second() {
        assert_eq!(at_expression(0), "at(1970-01-01T00:00:00)");
        assert_eq!(at_expression(1_000), "at(1970-01-01T00:00:01)");
        assert_eq!(at_expression(1_001), "at(1970-01-01T00:00:02)");
        // 2026-03-01T09:30:00Z and a millisecond: never early.
        assert_eq!(at_expression(1_772_357_400_000), "at(2026-03-01T09:30:00)");
        assert_eq!(at_expression(1_772_357_400_001), "at(2026-03-01T09:30:01)");
        // A leap day and the end of a year.
        assert_eq!(at_expression(1_709_251_199_000), "at(2024-02-29T23:59:59)");
        assert_eq!(at_expression(1_767_225_599_500), "at(2026-01-01T00:00:00)");
    }

    #[test]
    fn schedule_names_are_valid_deterministic_and_distinct() {
        let allowed = |name: &str| {
            !name.is_empty()
                && name.len() <= MAX_SCHEDULE_NAME_LEN
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        let ids = [
            "deadline:job-1:0",
            "deadline:job-1:1",
            "cron:daily report:2026-03-01T09:30:00Z",
            "ünï/cödé 🦀",
            "",
            &"x".repeat(500),
        ];
        let names: Vec<String> = ids.iter().map(|id| schedule_name(id)).collect();
        for (id, name) in ids.iter().zip(&names) {
            assert!(allowed(name), "{id:?} -> {name:?}");
            assert_eq!(&schedule_name(id), name, "deterministic");
        }
        assert_eq!(names[0].len(), "deadline_job-1_0".len() + 1 + NAME_HASH_HEX);
        assert!(names[0].starts_with("deadline_job-1_0-"), "{}", names[0]);
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
    }

    #[test]
    fn client_tokens_are_what_scheduler_accepts_and_follow_group_and_name() {
        let token = client_token("clawless-timers", &schedule_name("deadline:j:1"));
        assert_eq!(token.len(), 64);
        assert!(token.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(
            token,
            client_token("clawless-timers", &schedule_name("deadline:j:1"))
        );
        assert_ne!(
            token,
            client_token("other-group", &schedule_name("deadline:j:1"))
        );
    }
}
