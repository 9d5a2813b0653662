//! [`InMemoryTurnQueue`]: an in-memory SQS FIFO queue for the [`TurnQueue`] port, and its
//! timing constants ([`DEFAULT_VISIBILITY_TIMEOUT`], [`DEDUP_WINDOW`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::session::{Delivery, QueueError, QueuedMessage, TurnQueue};
use crate::testing::{lock_state, sleep};

/// Visibility timeout of [`InMemoryTurnQueue::new`], as on the SQS test queues.
pub const DEFAULT_VISIBILITY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long SQS FIFO (and every fake) remembers a deduplication id: five minutes from the send.
pub const DEDUP_WINDOW: Duration = Duration::from_secs(300);

/// How often a waiting [`InMemoryTurnQueue::receive`] looks again.
const IN_MEMORY_POLL: Duration = Duration::from_millis(10);

#[derive(Debug)]
struct MemMessage {
    id: u64,
    group: String,
    body: String,
    visible_at: Instant,
    receive_count: u32,
    receipt: Option<String>,
}

#[derive(Debug, Default)]
struct MemQueue {
    /// Undeleted messages in send order; the first of each group is its head.
    messages: Vec<MemMessage>,
    /// Deduplication ids and when they were first sent.
    dedup: HashMap<String, Instant>,
    next_id: u64,
}

/// An in-memory SQS FIFO queue for the [`TurnQueue`] port.
///
/// - Per group, only the oldest undeleted message (the head) can be delivered, and only while
///   it is visible: a group whose head is in flight, or released with a delay, is held back
///   while other groups flow. A receive returns at most one message per group.
/// - A received message stays invisible for the visibility timeout, then is delivered again
///   with its `receive_count` incremented, until it is deleted.
/// - A send whose deduplication id was seen within [`DEDUP_WINDOW`] is dropped, even if the
///   first message was deleted meanwhile (as SQS does). The scope is the whole queue.
/// - A receipt is valid until its message is received again; deleting or releasing with an
///   older receipt, or one of a deleted message, does nothing.
///
/// Clones share the same messages.
#[derive(Debug, Clone)]
pub struct InMemoryTurnQueue {
    state: Arc<Mutex<MemQueue>>,
    visibility_timeout: Duration,
    dedup_window: Duration,
}

impl Default for InMemoryTurnQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryTurnQueue {
    /// An empty queue with a [`DEFAULT_VISIBILITY_TIMEOUT`] and a [`DEDUP_WINDOW`].
    pub fn new() -> Self {
        Self::with_timeouts(DEFAULT_VISIBILITY_TIMEOUT, DEDUP_WINDOW)
    }

    /// An empty queue with the given visibility timeout and deduplication window.
    pub fn with_timeouts(visibility_timeout: Duration, dedup_window: Duration) -> Self {
        Self {
            state: Arc::default(),
            visibility_timeout,
            dedup_window,
        }
    }

    /// Messages not yet deleted (in flight or not).
    pub fn len(&self) -> usize {
        lock_state(&self.state).messages.len()
    }

    /// True when every message sent has been deleted (or none was sent).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn try_receive(&self, max: usize) -> Vec<Delivery> {
        let now = Instant::now();
        let mut state = lock_state(&self.state);
        let mut heads_seen = HashSet::new();
        let mut deliveries = Vec::new();
        for message in &mut state.messages {
            if deliveries.len() >= max {
                break;
            }
            if !heads_seen.insert(message.group.clone()) || message.visible_at > now {
                continue;
            }
            message.receive_count = message.receive_count.saturating_add(1);
            message.visible_at = now + self.visibility_timeout;
            let receipt = format!("mem-{}-{}", message.id, message.receive_count);
            message.receipt = Some(receipt.clone());
            deliveries.push(Delivery {
                receipt,
                group: message.group.clone(),
                body: message.body.clone(),
                receive_count: message.receive_count,
            });
        }
        deliveries
    }
}

#[async_trait]
impl TurnQueue for InMemoryTurnQueue {
    async fn send(&self, message: &QueuedMessage) -> Result<(), QueueError> {
        let now = Instant::now();
        let mut state = lock_state(&self.state);
        let window = self.dedup_window;
        state
            .dedup
            .retain(|_, sent_at| now.duration_since(*sent_at) < window);
        if state.dedup.contains_key(&message.dedup_id) {
            return Ok(());
        }
        state.dedup.insert(message.dedup_id.clone(), now);
        state.next_id += 1;
        let id = state.next_id;
        state.messages.push(MemMessage {
            id,
            group: message.group.clone(),
            body: message.body.clone(),
            visible_at: now,
            receive_count: 0,
            receipt: None,
        });
        Ok(())
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        let deadline = Instant::now() + wait;
        loop {
            let deliveries = self.try_receive(max);
            let now = Instant::now();
            if !deliveries.is_empty() || max == 0 || now >= deadline {
                return Ok(deliveries);
            }
            sleep(IN_MEMORY_POLL.min(deadline - now)).await;
        }
    }

    async fn delete(&self, receipt: &str) -> Result<(), QueueError> {
        lock_state(&self.state)
            .messages
            .retain(|message| message.receipt.as_deref() != Some(receipt));
        Ok(())
    }

    async fn release(&self, receipt: &str, delay: Duration) -> Result<(), QueueError> {
        let visible_at = Instant::now() + delay;
        let mut state = lock_state(&self.state);
        if let Some(message) = state
            .messages
            .iter_mut()
            .find(|message| message.receipt.as_deref() == Some(receipt))
        {
            message.visible_at = visible_at;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{QueueDeviations, turn_queue_contract};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_memory_turn_queue_passes_the_turn_queue_contract() {
        turn_queue_contract(
            |visibility| async move {
                Box::new(InMemoryTurnQueue::with_timeouts(visibility, DEDUP_WINDOW))
                    as Box<dyn TurnQueue>
            },
            QueueDeviations::default(),
        )
        .await;
    }

    #[tokio::test]
    async fn the_in_memory_queue_forgets_a_dedup_id_after_its_window() {
        // GIVEN a queue with a short deduplication window
        let queue =
            InMemoryTurnQueue::with_timeouts(Duration::from_secs(30), Duration::from_millis(50));
        let message = |body: &str| QueuedMessage {
            group: "agent:main:main".into(),
            dedup_id: "update-1".into(),
            body: body.into(),
        };
        queue.send(&message("first")).await.unwrap();
        queue.send(&message("dropped")).await.unwrap();
        assert_eq!(queue.len(), 1);
        // WHEN the window has passed THEN the same id is accepted again
        sleep(Duration::from_millis(80)).await;
        queue.send(&message("accepted")).await.unwrap();
        assert_eq!(queue.len(), 2);
    }

    #[tokio::test]
    async fn stale_receipts_do_nothing() {
        // GIVEN a message received twice (released in between)
        let queue = InMemoryTurnQueue::new();
        let message = QueuedMessage {
            group: "g".into(),
            dedup_id: "d".into(),
            body: "b".into(),
        };
        queue.send(&message).await.unwrap();
        let first = queue.receive(1, Duration::ZERO).await.unwrap().remove(0);
        queue.release(&first.receipt, Duration::ZERO).await.unwrap();
        let second = queue.receive(1, Duration::ZERO).await.unwrap().remove(0);
        // WHEN the first receipt is used THEN nothing happens; the current one works
        queue.delete(&first.receipt).await.unwrap();
        assert_eq!(queue.len(), 1, "a stale receipt deletes nothing");
        queue.delete(&second.receipt).await.unwrap();
        assert!(queue.is_empty());
    }
}
