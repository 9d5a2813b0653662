//! [`InMemoryTimers`] and [`timers_contract`].

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::nodes::testing::{short_label, wall_ms};
use crate::session::QueueError;
use crate::testing::{lock_state, sleep};
use crate::timers::{DueTimer, Timer, Timers};
use crate::turn::events::{ChatRef, InboundMessage, SessionEvent, TurnEvent};
use clawless_base::session_key::ChatType;

/// How often a waiting [`InMemoryTimers::take_due`] looks again.
const POLL: Duration = Duration::from_millis(10);

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[derive(Debug)]
struct MemTimer {
    timer: Timer,
    /// Hidden until then after a take (the taker's clock, Unix milliseconds).
    hidden_until_ms: u64,
    takes: u32,
    receipt: Option<String>,
}

/// An in-memory [`Timers`]: timers by id, taken in due order, hidden for the visibility
/// timeout after a take until acked. Scheduling an id that is still pending does nothing;
/// cancelling removes the id. Clones share the same timers.
#[derive(Debug, Clone)]
pub struct InMemoryTimers {
    timers: Arc<Mutex<BTreeMap<String, MemTimer>>>,
    visibility_timeout: Duration,
}

impl Default for InMemoryTimers {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryTimers {
    /// No timers; a taken timer returns 30 s after its take unless acked.
    pub fn new() -> Self {
        Self::with_visibility_timeout(Duration::from_secs(30))
    }

    /// No timers; a taken timer returns `visibility_timeout` after its take unless acked.
    pub fn with_visibility_timeout(visibility_timeout: Duration) -> Self {
        Self {
            timers: Arc::default(),
            visibility_timeout,
        }
    }

    /// Timers scheduled and not yet acked.
    pub fn len(&self) -> usize {
        lock_state(&self.timers).len()
    }

    /// True when every timer scheduled was acked (or none was scheduled).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The timers scheduled and not yet acked, by id.
    pub fn pending(&self) -> Vec<Timer> {
        lock_state(&self.timers)
            .values()
            .map(|pending| pending.timer.clone())
            .collect()
    }

    fn try_take(&self, now_ms: u64, max: usize) -> Vec<DueTimer> {
        let mut timers = lock_state(&self.timers);
        let mut due: Vec<&mut MemTimer> = timers
            .values_mut()
            .filter(|entry| entry.timer.due_at_ms <= now_ms && entry.hidden_until_ms <= now_ms)
            .collect();
        due.sort_by_key(|entry| entry.timer.due_at_ms);
        due.into_iter()
            .take(max)
            .map(|entry| {
                entry.takes += 1;
                entry.hidden_until_ms = now_ms.saturating_add(millis(self.visibility_timeout));
                let receipt = format!("{}#{}", entry.timer.timer_id, entry.takes);
                entry.receipt = Some(receipt.clone());
                DueTimer {
                    timer: entry.timer.clone(),
                    receipt,
                }
            })
            .collect()
    }
}

#[async_trait]
impl Timers for InMemoryTimers {
    async fn schedule(&self, timer: &Timer) -> Result<(), QueueError> {
        lock_state(&self.timers)
            .entry(timer.timer_id.clone())
            .or_insert_with(|| MemTimer {
                timer: timer.clone(),
                hidden_until_ms: 0,
                takes: 0,
                receipt: None,
            });
        Ok(())
    }

    async fn take_due(
        &self, now_ms: u64, max: usize, wait: Duration,
    ) -> Result<Vec<DueTimer>, QueueError> {
        let started = Instant::now();
        loop {
            let elapsed = started.elapsed();
            let taken = self.try_take(now_ms.saturating_add(millis(elapsed)), max);
            if !taken.is_empty() || max == 0 || elapsed >= wait {
                return Ok(taken);
            }
            sleep(POLL.min(wait - elapsed)).await;
        }
    }

    async fn ack(&self, receipt: &str) -> Result<(), QueueError> {
        lock_state(&self.timers).retain(|_, entry| entry.receipt.as_deref() != Some(receipt));
        Ok(())
    }

    async fn cancel(&self, timer_id: &str) -> Result<(), QueueError> {
        lock_state(&self.timers).remove(timer_id);
        Ok(())
    }
}

/// How a timers backend may knowingly differ from the in-memory and SQLite ones in
/// [`timers_contract`]. The default relaxes nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimersDeviations {
    /// Scheduling one timer id twice delivers it twice. An SQS standard queue has no
    /// deduplication, so the AWS adapter does; the turn queue's deduplication id (derived
    /// from the event) and the turn engine drop the second delivery.
    pub schedule_is_not_idempotent: bool,
    /// A cancelled timer still fires. A message sent to an SQS queue with a delay cannot be
    /// withdrawn, so the SQS adapter's `cancel` does nothing (and the Scheduler adapter's
    /// does nothing for timers short enough to go through SQS); whoever handles a firing
    /// checks that it is still wanted.
    pub cancel_does_not_withdraw: bool,
}

/// Visibility timeout of the timers the contract asks for: a taken, unacked timer returns
/// after it.
pub const CONTRACT_TIMER_VISIBILITY: Duration = Duration::from_secs(2);

/// A timeout event for `call_id` in a session with characters that need care in JSON.
pub fn sample_session_event(call_id: &str) -> SessionEvent {
    SessionEvent {
        session_key: "agent:main:generic:direct:+1 555/ünï".into(),
        agent_id: "main".into(),
        event: TurnEvent::ToolTimeout {
            call_id: call_id.into(),
            attempt: 0,
        },
    }
}

/// Runs the [`Timers`] contract, panicking with a description of the first broken
/// expectation. Takes about 20 seconds (due times and visibility timeouts follow the real
/// clock).
///
/// `fresh_timers()` must return an empty timers store of its own whose taken timers return
/// after [`CONTRACT_TIMER_VISIBILITY`] unless acked.
pub async fn timers_contract<F, Fut>(fresh_timers: F, deviations: TimersDeviations)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Box<dyn Timers>>,
{
    let suite = TimersContract {
        run: short_label("t"),
        deviations,
    };
    suite
        .a_due_timer_is_taken_and_once_acked_never_returns(&*fresh_timers().await)
        .await;
    suite
        .a_timer_is_taken_only_once_it_is_due(&*fresh_timers().await)
        .await;
    suite
        .a_timer_hours_away_is_not_taken(&*fresh_timers().await)
        .await;
    suite
        .a_take_returns_at_most_max_and_every_timer_once(&*fresh_timers().await)
        .await;
    suite
        .scheduling_a_pending_id_again_is_harmless(&*fresh_timers().await)
        .await;
    suite
        .a_waiting_take_returns_when_a_timer_comes_due(&*fresh_timers().await)
        .await;
    suite
        .events_round_trip_exactly(&*fresh_timers().await)
        .await;
    suite
        .a_timer_cancelled_before_it_is_due_never_fires(&*fresh_timers().await)
        .await;
    suite
        .cancelling_an_unknown_id_is_harmless(&*fresh_timers().await)
        .await;
}

struct TimersContract {
    run: String,
    deviations: TimersDeviations,
}

/// Long enough for a long poll to find a timer that is due.
const FIND_WAIT: Duration = Duration::from_secs(5);
/// How long a take waits before the suite concludes that nothing is due.
const NOTHING_WAIT: Duration = Duration::from_secs(1);

impl TimersContract {
    fn timer(&self, name: &str, due_at_ms: u64) -> Timer {
        Timer {
            timer_id: format!("{}-{name}", self.run),
            due_at_ms,
            event: sample_session_event(&format!("call-{name}")),
        }
    }

    async fn schedule(timers: &dyn Timers, timer: &Timer) {
        timers
            .schedule(timer)
            .await
            .unwrap_or_else(|err| panic!("schedule {}: {err}", timer.timer_id));
    }

    async fn take(timers: &dyn Timers, max: usize, wait: Duration) -> Vec<DueTimer> {
        timers
            .take_due(wall_ms(), max, wait)
            .await
            .unwrap_or_else(|err| panic!("take_due: {err}"))
    }

    async fn ack(timers: &dyn Timers, due: &DueTimer) {
        timers
            .ack(&due.receipt)
            .await
            .unwrap_or_else(|err| panic!("ack {}: {err}", due.timer.timer_id));
    }

    async fn expect_nothing(timers: &dyn Timers, why: &str) {
        let taken = Self::take(timers, 10, NOTHING_WAIT).await;
        assert!(taken.is_empty(), "{why}, but got {taken:?}");
    }

    fn ids(taken: &[DueTimer]) -> Vec<String> {
        let mut ids: Vec<String> = taken.iter().map(|due| due.timer.timer_id.clone()).collect();
        ids.sort();
        ids
    }

    /// Takes and acks until `count` timers came; returns their ids sorted.
    async fn drain(timers: &dyn Timers, count: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut taken = Vec::new();
        while taken.len() < count {
            assert!(
                Instant::now() < deadline,
                "only {} of {count} timers came: {taken:?}",
                taken.len()
            );
            for due in Self::take(timers, 10, Duration::from_secs(2)).await {
                Self::ack(timers, &due).await;
                taken.push(due);
            }
        }
        Self::ids(&taken)
    }

    async fn a_due_timer_is_taken_and_once_acked_never_returns(&self, timers: &dyn Timers) {
        let now = wall_ms();
        let acked = self.timer("acked", now - 1_000);
        let forgotten = self.timer("forgotten", now - 500);
        Self::schedule(timers, &acked).await;
        Self::schedule(timers, &forgotten).await;
        let mut taken = Vec::new();
        let deadline = Instant::now() + FIND_WAIT;
        while taken.len() < 2 && Instant::now() < deadline {
            taken.extend(Self::take(timers, 10, Duration::from_secs(1)).await);
        }
        assert_eq!(
            Self::ids(&taken),
            vec![acked.timer_id.clone(), forgotten.timer_id.clone()],
            "both due timers are taken"
        );
        let taken_at = Instant::now();
        for due in &taken {
            let expected = if due.timer.timer_id == acked.timer_id {
                &acked
            } else {
                &forgotten
            };
            assert_eq!(&due.timer, expected, "a timer comes back as scheduled");
        }
        let acked_due = taken
            .iter()
            .find(|due| due.timer.timer_id == acked.timer_id)
            .expect("the acked timer was taken");
        Self::ack(timers, acked_due).await;
        Self::expect_nothing(timers, "taken timers are hidden").await;

        let again = Self::take(timers, 10, Duration::from_secs(10)).await;
        assert_eq!(
            Self::ids(&again),
            vec![forgotten.timer_id.clone()],
            "an unacked timer returns after the visibility timeout, an acked one never"
        );
        assert!(
            taken_at.elapsed() >= CONTRACT_TIMER_VISIBILITY - Duration::from_millis(500),
            "it returned after {:?}",
            taken_at.elapsed()
        );
        Self::ack(timers, &again[0]).await;
        let after = Self::take(
            timers,
            10,
            CONTRACT_TIMER_VISIBILITY + Duration::from_secs(1),
        )
        .await;
        assert!(after.is_empty(), "acked with the latest receipt: {after:?}");
    }

    async fn a_timer_is_taken_only_once_it_is_due(&self, timers: &dyn Timers) {
        let due_at = wall_ms() + 2_500;
        let timer = self.timer("soon", due_at);
        Self::schedule(timers, &timer).await;
        Self::expect_nothing(timers, "a timer due in 2.5 s is not taken now").await;
        let taken = Self::take(timers, 10, FIND_WAIT).await;
        let taken_at = wall_ms();
        assert_eq!(Self::ids(&taken), vec![timer.timer_id.clone()]);
        assert!(
            taken_at >= due_at,
            "never early: taken at {taken_at}, due at {due_at}"
        );
        Self::ack(timers, &taken[0]).await;
    }

    async fn a_timer_hours_away_is_not_taken(&self, timers: &dyn Timers) {
        let timer = self.timer("hours", wall_ms() + 3 * 3_600_000);
        Self::schedule(timers, &timer).await;
        Self::expect_nothing(timers, "a timer due in three hours is not taken").await;
    }

    async fn a_take_returns_at_most_max_and_every_timer_once(&self, timers: &dyn Timers) {
        let now = wall_ms();
        let scheduled: Vec<Timer> = (0..3)
            .map(|index| self.timer(&format!("batch-{index}"), now - 100 * index))
            .collect();
        for timer in &scheduled {
            Self::schedule(timers, timer).await;
        }
        let first = Self::take(timers, 2, FIND_WAIT).await;
        assert!(
            !first.is_empty() && first.len() <= 2,
            "a take of at most 2 got {}",
            first.len()
        );
        for due in &first {
            Self::ack(timers, due).await;
        }
        let mut ids = Self::ids(&first);
        ids.extend(Self::drain(timers, scheduled.len() - first.len()).await);
        ids.sort();
        let mut expected: Vec<String> = scheduled
            .iter()
            .map(|timer| timer.timer_id.clone())
            .collect();
        expected.sort();
        assert_eq!(ids, expected, "every timer is taken exactly once");
        Self::expect_nothing(timers, "all were acked").await;
    }

    async fn scheduling_a_pending_id_again_is_harmless(&self, timers: &dyn Timers) {
        let timer = self.timer("twice", wall_ms() - 1_000);
        Self::schedule(timers, &timer).await;
        Self::schedule(timers, &timer).await;
        let expected = if self.deviations.schedule_is_not_idempotent {
            2
        } else {
            1
        };
        let ids = Self::drain(timers, expected).await;
        assert!(ids.iter().all(|id| id == &timer.timer_id));
        Self::expect_nothing(
            timers,
            if expected == 1 {
                "a timer scheduled twice is taken once"
            } else {
                "a timer scheduled twice is taken at most twice"
            },
        )
        .await;
    }

    async fn a_waiting_take_returns_when_a_timer_comes_due(&self, timers: &dyn Timers) {
        let due_at = wall_ms() + 1_500;
        let timer = self.timer("waited", due_at);
        Self::schedule(timers, &timer).await;
        let started = Instant::now();
        let taken = Self::take(timers, 10, Duration::from_secs(15)).await;
        assert_eq!(Self::ids(&taken), vec![timer.timer_id.clone()]);
        assert!(wall_ms() >= due_at, "never early");
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "a waiting take returns once a timer is due, not at the end of its wait (took {:?})",
            started.elapsed()
        );
        Self::ack(timers, &taken[0]).await;
    }

    async fn events_round_trip_exactly(&self, timers: &dyn Timers) {
        let now = wall_ms();
        let inbound = Timer {
            timer_id: format!("{}-inbound", self.run),
            due_at_ms: now - 1,
            event: SessionEvent {
                session_key: "agent:ops:telegram:group:-100123".into(),
                agent_id: "ops".into(),
                event: TurnEvent::Inbound(InboundMessage {
                    message_id: "m-1".into(),
                    chat: ChatRef {
                        channel: "telegram".into(),
                        chat_id: "-100123".into(),
                        chat_type: ChatType::Group,
                    },
                    sender_id: "u 42".into(),
                    text: "ünïcödé 文件 🦀 \"quoted\" \\ \n\t\u{2028}".into(),
                    sender_is_owner: true,
                    attachments: Vec::new(),
                }),
            },
        };
        let heartbeat = Timer {
            timer_id: format!("{}-heartbeat", self.run),
            due_at_ms: now - 2,
            event: SessionEvent {
                session_key: "agent:main:main".into(),
                agent_id: "main".into(),
                event: TurnEvent::Heartbeat {
                    heartbeat_id: "main:1000".into(),
                    slot_ms: Some(1_000),
                    reason: "interval".into(),
                    attempt: 0,
                },
            },
        };
        Self::schedule(timers, &inbound).await;
        Self::schedule(timers, &heartbeat).await;
        let deadline = Instant::now() + FIND_WAIT;
        let mut taken = Vec::new();
        while taken.len() < 2 && Instant::now() < deadline {
            taken.extend(Self::take(timers, 10, Duration::from_secs(1)).await);
        }
        taken.sort_by(|left, right| left.timer.timer_id.cmp(&right.timer.timer_id));
        let timers_back: Vec<&Timer> = taken.iter().map(|due| &due.timer).collect();
        assert_eq!(
            timers_back,
            vec![&heartbeat, &inbound],
            "timers and their events round-trip exactly"
        );
        for due in &taken {
            Self::ack(timers, due).await;
        }
    }

    async fn a_timer_cancelled_before_it_is_due_never_fires(&self, timers: &dyn Timers) {
        let due_at = wall_ms() + 1_500;
        let cancelled = self.timer("cancelled", due_at);
        let kept = self.timer("kept", due_at);
        Self::schedule(timers, &cancelled).await;
        Self::schedule(timers, &kept).await;
        timers
            .cancel(&cancelled.timer_id)
            .await
            .unwrap_or_else(|err| panic!("cancel {}: {err}", cancelled.timer_id));
        // Everything that fires, until well after both were due.
        let mut ids = Vec::new();
        while wall_ms() < due_at + 2_500 {
            for due in Self::take(timers, 10, Duration::from_secs(1)).await {
                Self::ack(timers, &due).await;
                ids.push(due.timer.timer_id);
            }
        }
        ids.sort();
        let expected = if self.deviations.cancel_does_not_withdraw {
            vec![cancelled.timer_id.clone(), kept.timer_id.clone()]
        } else {
            vec![kept.timer_id.clone()]
        };
        assert_eq!(
            ids, expected,
            "a cancelled timer never fires (unless the backend cannot withdraw it); the other does"
        );
    }

    async fn cancelling_an_unknown_id_is_harmless(&self, timers: &dyn Timers) {
        let unknown = format!("{}-never-scheduled", self.run);
        timers
            .cancel(&unknown)
            .await
            .unwrap_or_else(|err| panic!("cancel of an unknown id: {err}"));
        // Twice, as a cancel retried after a lost answer would.
        timers
            .cancel(&unknown)
            .await
            .unwrap_or_else(|err| panic!("second cancel of an unknown id: {err}"));
        Self::expect_nothing(timers, "cancelling an unknown id schedules nothing").await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_memory_timers_pass_the_timers_contract() {
        timers_contract(
            || async {
                Box::new(InMemoryTimers::with_visibility_timeout(
                    CONTRACT_TIMER_VISIBILITY,
                )) as Box<dyn Timers>
            },
            TimersDeviations::default(),
        )
        .await;
    }

    #[tokio::test]
    async fn in_memory_timers_count_the_caller_clock_not_the_wall_clock() {
        // GIVEN a timer due at 10 000 on the caller's clock
        let timers = InMemoryTimers::new();
        let timer = Timer {
            timer_id: "t".into(),
            due_at_ms: 10_000,
            event: sample_session_event("c"),
        };
        timers.schedule(&timer).await.unwrap();
        // WHEN taken at 9 999 and at 10 000 THEN only the second finds it
        let early = timers
            .take_due(9_999, 10, std::time::Duration::ZERO)
            .await
            .unwrap();
        assert!(early.is_empty());
        let due = timers
            .take_due(10_000, 10, std::time::Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(due.len(), 1);
        timers.ack(&due[0].receipt).await.unwrap();
        assert!(timers.is_empty());
    }
}
