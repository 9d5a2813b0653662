//! The timers port: durable timers (job deadlines, approval timeouts) that hold no compute
//! while they wait, and the chaining rule that lets a queue with a 15-minute delay limit hold
//! timers of any length.
//!
//! On AWS a timer is a message on an SQS standard queue sent with `DelaySeconds` (at most
//! [`MAX_TIMER_DELAY`]). When a message arrives before its timer is due, the receiver sends
//! it again with the remaining delay and deletes the original ("chaining"), as
//! [`timer_redelivery`] decides. The FIFO turn queue cannot carry per-message delays, hence
//! a queue of its own.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::session::QueueError;
use crate::turn::events::SessionEvent;

/// Longest delay one SQS message can carry (`DelaySeconds` ≤ 900).
pub const MAX_TIMER_DELAY: Duration = Duration::from_secs(900);

/// A timer: deliver `event` to the turn queue once `due_at_ms` has passed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Timer {
    /// Unique id (e.g. `deadline:<job id>:<attempt>`); scheduling one id twice is harmless
    /// where the backend can tell.
    pub timer_id: String,
    /// When it is due (Unix milliseconds).
    pub due_at_ms: u64,
    /// What to deliver.
    pub event: SessionEvent,
}

/// A due timer handed out by [`Timers::take_due`]: hidden from other takers until acked or
/// until the backend's visibility timeout ends.
#[derive(Debug, Clone, PartialEq)]
pub struct DueTimer {
    /// The timer.
    pub timer: Timer,
    /// Handle for [`Timers::ack`].
    pub receipt: String,
}

/// Durable timers.
#[async_trait]
pub trait Timers: Send + Sync + std::fmt::Debug {
    /// Schedules `timer`. Where the backend can tell (SQLite, in-memory), scheduling an id
    /// that is still pending does nothing; an SQS queue cannot, and delivers both.
    async fn schedule(&self, timer: &Timer) -> Result<(), QueueError>;

    /// Takes up to `max` timers whose due time has passed, waiting up to `wait` for one to
    /// come due. `now_ms` is the caller's clock at the call; time spent waiting is added to
    /// it. Never returns a timer before it is due.
    async fn take_due(
        &self, now_ms: u64, max: usize, wait: Duration,
    ) -> Result<Vec<DueTimer>, QueueError>;

    /// Acknowledges a taken timer (its event was delivered): it never fires again.
    async fn ack(&self, receipt: &str) -> Result<(), QueueError>;

    /// Cancels the pending timer `timer_id`, where the backend can: it never fires. Cancelling
    /// an id that is unknown, already fired or already cancelled does nothing and is `Ok`.
    ///
    /// Some backends cannot withdraw every timer (an SQS message once sent with a delay is
    /// delivered), and every backend delivers at least once, so whoever handles a firing must
    /// still check that it is wanted (the job it times out is still running, the attempt
    /// matches); cancelling only saves the work of that check.
    async fn cancel(&self, timer_id: &str) -> Result<(), QueueError>;
}

/// The delay to send a timer with so that it arrives when due: `None` when it is due already
/// (`due_at_ms <= now_ms`), otherwise the time left rounded up to whole seconds (a delayed
/// message never arrives early) and capped at [`MAX_TIMER_DELAY`].
///
/// Used when scheduling (the first send) and whenever a timer arrives early (the re-send
/// that chains it): an AWS adapter polling the queue and a Lambda handling its SQS events
/// decide the same way.
pub fn timer_redelivery(due_at_ms: u64, now_ms: u64) -> Option<Duration> {
    timer_redelivery_within(due_at_ms, now_ms, MAX_TIMER_DELAY)
}

/// [`timer_redelivery`] with another cap (tests chain timers in seconds, not minutes).
/// A cap under one second is treated as one second.
pub fn timer_redelivery_within(
    due_at_ms: u64, now_ms: u64, max_delay: Duration,
) -> Option<Duration> {
    let left_ms = due_at_ms.checked_sub(now_ms).filter(|left| *left > 0)?;
    let seconds = left_ms.div_ceil(1000);
    let cap = max_delay.as_secs().max(1);
    Some(Duration::from_secs(seconds.min(cap)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_due_timer_needs_no_redelivery() {
        assert_eq!(timer_redelivery(1_000, 1_000), None);
        assert_eq!(timer_redelivery(1_000, 5_000), None);
        assert_eq!(timer_redelivery(0, u64::MAX), None);
    }

    #[test]
    fn a_timer_not_yet_due_is_delayed_by_the_time_left_rounded_up() {
        assert_eq!(timer_redelivery(1_001, 1_000), Some(Duration::from_secs(1)));
        assert_eq!(timer_redelivery(2_000, 1_000), Some(Duration::from_secs(1)));
        assert_eq!(timer_redelivery(2_001, 1_000), Some(Duration::from_secs(2)));
        assert_eq!(
            timer_redelivery(1_000 + 899_999, 1_000),
            Some(Duration::from_secs(900))
        );
    }

    #[test]
    fn a_long_timer_is_chained_in_steps_of_at_most_fifteen_minutes() {
        // GIVEN a timer due in three hours and a bit
        let start = 1_700_000_000_000u64;
        let due = start + 3 * 3_600_000 + 1_234;
        // WHEN it is re-sent each time it arrives
        let mut now = start;
        let mut sends = 0;
        while let Some(delay) = timer_redelivery(due, now) {
            assert!(delay <= MAX_TIMER_DELAY && delay >= Duration::from_secs(1));
            now += u64::try_from(delay.as_millis()).unwrap();
            sends += 1;
        }
        // THEN it arrives no earlier than due, less than a second late, after 13 sends
        assert!(now >= due && now - due < 1_000, "{now} vs {due}");
        assert_eq!(sends, 13);
    }

    #[test]
    fn a_small_cap_chains_in_seconds() {
        let cap = Duration::from_secs(1);
        assert_eq!(
            timer_redelivery_within(10_000, 0, cap),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            timer_redelivery_within(10_000, 0, Duration::ZERO),
            Some(Duration::from_secs(1)),
            "a zero cap would spin"
        );
    }
}
