//! [`SubagentRoutedTurnQueue`]: the turn queue port over two FIFO queues, one for sub-agent
//! sessions and one for every other session.
//!
//! Owns which queue a turn event goes to (by its group, the session key: keys with
//! `:subagent:` go to the sub-agent queue), and receiving and acknowledging across both. The
//! split exists so the deployment can cap sub-agent runs on their own: the turn function
//! consumes the sub-agent queue through an event source mapping with `BatchSize: 1` and a
//! `MaximumConcurrency` (OpenClaw's `agents.defaults.subagents.maxConcurrent`), so children
//! beyond the cap wait on their queue while other sessions' events flow on the main one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use clawless_core::session::{Delivery, QueueError, QueuedMessage, TurnQueue};
use clawless_core::subagents::is_subagent_session_key;

/// Prefix of the receipts of sub-agent queue deliveries. SQS receipt handles never hold a
/// `:`, so a receipt with this prefix cannot be one of the main queue's.
const SUBAGENT_RECEIPT_PREFIX: &str = "subagent-queue:";

/// How long one long poll of either queue lasts while a receive waits for its first
/// message: a message on either queue is found within about this long.
const POLL_SLICE: Duration = Duration::from_secs(1);

/// The turn queue port over a main queue and a sub-agent queue.
///
/// - `send` puts a message whose group is a sub-agent session key (`agent:<id>:subagent:…`,
///   nested ones too) on the sub-agent queue, and any other on the main queue. All events of
///   one session thus share one queue, so their order holds.
/// - `receive` takes from the main queue first and fills the rest of `max` from the
///   sub-agent queue. While both are empty it long-polls them in turn, one second each, until
///   `wait` runs out, so it costs about two requests per second of waiting. The deployment
///   never calls it (the turn function's event source mappings receive), tests and tools do.
/// - Receipts of the sub-agent queue carry a prefix, so `delete` and `release` reach the
///   queue the delivery came from.
#[derive(Debug, Clone)]
pub struct SubagentRoutedTurnQueue {
    sessions: Arc<dyn TurnQueue>,
    subagents: Arc<dyn TurnQueue>,
}

impl SubagentRoutedTurnQueue {
    /// Routes sub-agent sessions to `subagents` and every other session to `sessions`.
    pub fn new(sessions: Arc<dyn TurnQueue>, subagents: Arc<dyn TurnQueue>) -> Self {
        Self {
            sessions,
            subagents,
        }
    }

    /// The queue `message` belongs on.
    fn queue_for(&self, group: &str) -> &dyn TurnQueue {
        if is_subagent_session_key(group) {
            self.subagents.as_ref()
        } else {
            self.sessions.as_ref()
        }
    }

    /// The queue a receipt came from, and the receipt as that queue issued it.
    fn queue_of_receipt<'a>(&self, receipt: &'a str) -> (&dyn TurnQueue, &'a str) {
        match receipt.strip_prefix(SUBAGENT_RECEIPT_PREFIX) {
            Some(own) => (self.subagents.as_ref(), own),
            None => (self.sessions.as_ref(), receipt),
        }
    }

    /// One round: the main queue for up to `max` (waiting up to `slice`), then the sub-agent
    /// queue for the rest (waiting up to `slice` only if the main queue had nothing).
    async fn receive_round(
        &self, max: usize, slice: Duration,
    ) -> Result<Vec<Delivery>, QueueError> {
        let mut deliveries = self.sessions.receive(max, slice).await?;
        let room = max.saturating_sub(deliveries.len());
        if room == 0 {
            return Ok(deliveries);
        }
        let wait = if deliveries.is_empty() {
            slice
        } else {
            Duration::ZERO
        };
        match self.subagents.receive(room, wait).await {
            Ok(children) => {
                deliveries.extend(children.into_iter().map(|mut delivery| {
                    delivery.receipt = format!("{SUBAGENT_RECEIPT_PREFIX}{}", delivery.receipt);
                    delivery
                }));
                Ok(deliveries)
            }
            // What the main queue handed out is in flight: return it rather than leave it
            // invisible until its visibility timeout.
            Err(err) if !deliveries.is_empty() => {
                tracing::warn!(error = ?err, "sub-agent turn queue receive failed");
                Ok(deliveries)
            }
            Err(err) => Err(err),
        }
    }
}

#[async_trait]
impl TurnQueue for SubagentRoutedTurnQueue {
    async fn send(&self, message: &QueuedMessage) -> Result<(), QueueError> {
        self.queue_for(&message.group).send(message).await
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let deadline = Instant::now() + wait;
        loop {
            let slice = deadline
                .saturating_duration_since(Instant::now())
                .min(POLL_SLICE);
            let deliveries = self.receive_round(max, slice).await?;
            if !deliveries.is_empty() || Instant::now() >= deadline {
                return Ok(deliveries);
            }
        }
    }

    async fn delete(&self, receipt: &str) -> Result<(), QueueError> {
        let (queue, receipt) = self.queue_of_receipt(receipt);
        queue.delete(receipt).await
    }

    async fn release(&self, receipt: &str, delay: Duration) -> Result<(), QueueError> {
        let (queue, receipt) = self.queue_of_receipt(receipt);
        queue.release(receipt, delay).await
    }
}

#[cfg(test)]
mod tests {
    use clawless_core::testing::InMemoryTurnQueue;

    use super::*;

    fn message(group: &str, dedup_id: &str) -> QueuedMessage {
        QueuedMessage {
            group: group.to_owned(),
            dedup_id: dedup_id.to_owned(),
            body: format!("body of {dedup_id}"),
        }
    }

    #[tokio::test]
    async fn sends_go_to_the_queue_of_their_session_and_acknowledgements_follow() {
        // GIVEN a routed queue over two in-memory queues
        let sessions = InMemoryTurnQueue::new();
        let subagents = InMemoryTurnQueue::new();
        let routed =
            SubagentRoutedTurnQueue::new(Arc::new(sessions.clone()), Arc::new(subagents.clone()));

        // WHEN a main-session event and a child's event are sent through it
        let child = "agent:main:subagent:6a1c2f0e-93c4-4b5e-8f3d-2b7c9e1d4a55";
        routed
            .send(&message("agent:main:main", "m-1"))
            .await
            .unwrap();
        routed.send(&message(child, "c-1")).await.unwrap();

        // THEN each is on its own queue
        let on_sessions = sessions.receive(10, Duration::ZERO).await.unwrap();
        assert_eq!(
            on_sessions
                .iter()
                .map(|d| d.group.as_str())
                .collect::<Vec<_>>(),
            ["agent:main:main"]
        );
        sessions
            .release(&on_sessions[0].receipt, Duration::ZERO)
            .await
            .unwrap();
        let on_subagents = subagents.receive(10, Duration::ZERO).await.unwrap();
        assert_eq!(
            on_subagents
                .iter()
                .map(|d| d.group.as_str())
                .collect::<Vec<_>>(),
            [child]
        );
        subagents
            .release(&on_subagents[0].receipt, Duration::ZERO)
            .await
            .unwrap();

        // AND a receive through the routed queue gets both, and deletes reach both queues
        let both = routed.receive(10, Duration::ZERO).await.unwrap();
        let mut groups: Vec<&str> = both.iter().map(|d| d.group.as_str()).collect();
        groups.sort_unstable();
        assert_eq!(groups, ["agent:main:main", child]);
        for delivery in &both {
            routed.delete(&delivery.receipt).await.unwrap();
        }
        assert!(
            sessions
                .receive(10, Duration::ZERO)
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            subagents
                .receive(10, Duration::ZERO)
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn a_released_child_event_returns_on_the_sub_agent_queue() {
        let sessions = InMemoryTurnQueue::new();
        let subagents = InMemoryTurnQueue::new();
        let routed =
            SubagentRoutedTurnQueue::new(Arc::new(sessions.clone()), Arc::new(subagents.clone()));
        routed
            .send(&message("agent:main:subagent:1", "c-1"))
            .await
            .unwrap();
        let first = routed.receive(1, Duration::ZERO).await.unwrap();
        assert_eq!(first.len(), 1);
        routed
            .release(&first[0].receipt, Duration::ZERO)
            .await
            .unwrap();
        let again = subagents.receive(1, Duration::ZERO).await.unwrap();
        assert_eq!(again.len(), 1, "released back to the sub-agent queue");
        assert_eq!(again[0].receive_count, 2);
    }

    #[tokio::test]
    async fn a_waiting_receive_finds_a_child_event_sent_while_it_waits() {
        let sessions = InMemoryTurnQueue::new();
        let subagents = InMemoryTurnQueue::new();
        let routed = Arc::new(SubagentRoutedTurnQueue::new(
            Arc::new(sessions),
            Arc::new(subagents),
        ));
        let waiting = {
            let routed = Arc::clone(&routed);
            tokio::spawn(async move { routed.receive(1, Duration::from_secs(10)).await })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        let started = Instant::now();
        routed
            .send(&message("agent:main:subagent:late", "late"))
            .await
            .unwrap();
        let received = waiting.await.unwrap().unwrap();
        assert_eq!(received.len(), 1);
        assert_eq!(received[0].group, "agent:main:subagent:late");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }
}
