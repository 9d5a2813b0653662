//! [`InMemoryExecQueue`] and [`exec_queue_contract`].

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::short_label;
use crate::nodes::{ExecDelivery, ExecQueue, MAX_RECEIVE_COUNT, is_valid_node_id};
use crate::session::QueueError;
use crate::testing::{join_all, lock_state, sized_json_body, sleep};

/// How often a waiting [`InMemoryExecQueue::receive`] looks again.
const POLL: Duration = Duration::from_millis(10);

/// Whole seconds, rounded up: SQS counts visibility timeouts in seconds.
fn whole_seconds(duration: Duration) -> Duration {
    Duration::from_secs(duration.as_secs() + u64::from(duration.subsec_nanos() > 0))
}

#[derive(Debug)]
struct MemExecMessage {
    id: u64,
    body: String,
    visible_at: Instant,
    receive_count: u32,
    receipt: Option<String>,
}

#[derive(Debug, Default)]
struct MemExecQueue {
    messages: Vec<MemExecMessage>,
    dead_letters: Vec<String>,
}

#[derive(Debug, Default)]
struct ExecQueues {
    queues: HashMap<String, MemExecQueue>,
    next_id: u64,
}

/// An in-memory [`ExecQueue`] with SQS standard-queue semantics and a redrive policy:
///
/// - Queues are named `node-<id>`; sending to or receiving from a queue that does not exist
///   (or was deleted) fails.
/// - A received message is hidden for the receive's visibility (whole seconds), then
///   delivered again with its `receive_count` incremented, until deleted. A message already
///   received [`MAX_RECEIVE_COUNT`] times moves to the queue's dead letters instead of being
///   delivered again.
/// - A receipt is valid until its message is received again.
///
/// Clones share the same queues.
#[derive(Debug, Clone, Default)]
pub struct InMemoryExecQueue {
    state: Arc<Mutex<ExecQueues>>,
}

impl InMemoryExecQueue {
    /// No queues.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bodies dead-lettered from `queue`, oldest first.
    pub fn dead_letters(&self, queue: &str) -> Vec<String> {
        lock_state(&self.state)
            .queues
            .get(queue)
            .map(|queue| queue.dead_letters.clone())
            .unwrap_or_default()
    }

    fn try_receive(
        &self, queue: &str, max: usize, visibility: Duration,
    ) -> Result<Vec<ExecDelivery>, QueueError> {
        let now = Instant::now();
        let mut state = lock_state(&self.state);
        let Some(queue) = state.queues.get_mut(queue) else {
            return Err(QueueError::bare(format!("no exec queue {queue:?}")));
        };
        let mut deliveries = Vec::new();
        let mut dead = HashSet::new();
        for message in &mut queue.messages {
            if deliveries.len() >= max {
                break;
            }
            if message.visible_at > now {
                continue;
            }
            if message.receive_count >= MAX_RECEIVE_COUNT {
                dead.insert(message.id);
                continue;
            }
            message.receive_count += 1;
            message.visible_at = now + whole_seconds(visibility);
            let receipt = format!("mem-{}-{}", message.id, message.receive_count);
            message.receipt = Some(receipt.clone());
            deliveries.push(ExecDelivery {
                body: message.body.clone(),
                receipt,
                receive_count: message.receive_count,
            });
        }
        let (dead_messages, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut queue.messages)
            .into_iter()
            .partition(|message| dead.contains(&message.id));
        queue.messages = kept;
        queue
            .dead_letters
            .extend(dead_messages.into_iter().map(|message| message.body));
        Ok(deliveries)
    }
}

#[async_trait]
impl ExecQueue for InMemoryExecQueue {
    async fn create_node_queue(&self, node_id: &str) -> Result<String, QueueError> {
        if !is_valid_node_id(node_id) {
            return Err(QueueError::bare(format!(
                "{node_id:?} is not a valid node id"
            )));
        }
        let name = format!("node-{node_id}");
        lock_state(&self.state)
            .queues
            .entry(name.clone())
            .or_default();
        Ok(name)
    }

    async fn delete_node_queue(&self, queue: &str) -> Result<(), QueueError> {
        lock_state(&self.state).queues.remove(queue);
        Ok(())
    }

    async fn send(&self, queue: &str, body: &str) -> Result<(), QueueError> {
        let mut state = lock_state(&self.state);
        state.next_id += 1;
        let id = state.next_id;
        let Some(messages) = state.queues.get_mut(queue) else {
            return Err(QueueError::bare(format!("no exec queue {queue:?}")));
        };
        messages.messages.push(MemExecMessage {
            id,
            body: body.to_owned(),
            visible_at: Instant::now(),
            receive_count: 0,
            receipt: None,
        });
        Ok(())
    }

    async fn receive(
        &self, queue: &str, max: usize, wait: Duration, visibility: Duration,
    ) -> Result<Vec<ExecDelivery>, QueueError> {
        let deadline = Instant::now() + wait;
        loop {
            let deliveries = self.try_receive(queue, max, visibility)?;
            let now = Instant::now();
            if !deliveries.is_empty() || max == 0 || now >= deadline {
                return Ok(deliveries);
            }
            sleep(POLL.min(deadline - now)).await;
        }
    }

    async fn delete(&self, queue: &str, receipt: &str) -> Result<(), QueueError> {
        let mut state = lock_state(&self.state);
        let Some(messages) = state.queues.get_mut(queue) else {
            return Err(QueueError::bare(format!("no exec queue {queue:?}")));
        };
        messages
            .messages
            .retain(|message| message.receipt.as_deref() != Some(receipt));
        Ok(())
    }
}

/// Runs the [`ExecQueue`] contract against `queues`, panicking with a description of the
/// first broken expectation. Takes about 10 seconds (visibility timeouts). Every queue it
/// creates belongs to a node id unique to this call, and it deletes them at the end.
///
/// `moto_server` 5.2.5 passes it as SQS would, so unlike the turn queue's contract this one
/// has no deviations to declare.
pub async fn exec_queue_contract(queues: &dyn ExecQueue) {
    let suite = ExecQueueContract {
        queues,
        run: short_label("q"),
    };
    let mut created = Vec::new();
    created.push(suite.creating_a_queue_is_idempotent_and_per_node().await);
    suite.invalid_node_ids_are_refused().await;
    created.push(suite.an_empty_queue_waits_then_returns_nothing().await);
    created.push(suite.a_message_round_trips_and_is_gone_once_deleted().await);
    created.extend(suite.queues_are_isolated().await);
    created.push(
        suite
            .receive_returns_at_most_max_and_every_message_once()
            .await,
    );
    created.push(
        suite
            .an_unacknowledged_message_returns_after_its_visibility()
            .await,
    );
    created.push(suite.a_message_received_five_times_is_dead_lettered().await);
    created.push(
        suite
            .a_waiting_receive_returns_when_a_message_arrives()
            .await,
    );
    suite.a_deleted_queue_refuses_sends_and_receives().await;
    for queue in created {
        suite.delete_queue(&queue).await;
    }
}

struct ExecQueueContract<'a> {
    queues: &'a dyn ExecQueue,
    run: String,
}

/// Long enough for a long poll to find a message that is there.
const FIND_WAIT: Duration = Duration::from_secs(5);
/// How long a receive waits before the suite concludes that nothing is deliverable.
const NOTHING_WAIT: Duration = Duration::from_secs(1);
/// Visibility of receives that should stay hidden for the rest of a check.
const LONG_VISIBILITY: Duration = Duration::from_secs(60);

impl ExecQueueContract<'_> {
    fn node(&self, name: &str) -> String {
        format!("{}-{name}", self.run)
    }

    async fn create(&self, name: &str) -> String {
        let node_id = self.node(name);
        self.queues
            .create_node_queue(&node_id)
            .await
            .unwrap_or_else(|err| panic!("create queue of {node_id}: {err}"))
    }

    async fn delete_queue(&self, queue: &str) {
        self.queues
            .delete_node_queue(queue)
            .await
            .unwrap_or_else(|err| panic!("delete queue {queue}: {err}"));
    }

    async fn send(&self, queue: &str, body: &str) {
        self.queues
            .send(queue, body)
            .await
            .unwrap_or_else(|err| panic!("send {body:?} to {queue}: {err}"));
    }

    async fn receive(
        &self, queue: &str, max: usize, wait: Duration, visibility: Duration,
    ) -> Vec<ExecDelivery> {
        self.queues
            .receive(queue, max, wait, visibility)
            .await
            .unwrap_or_else(|err| panic!("receive from {queue}: {err}"))
    }

    async fn receive_one(&self, queue: &str, visibility: Duration, what: &str) -> ExecDelivery {
        let mut deliveries = self.receive(queue, 1, FIND_WAIT, visibility).await;
        assert_eq!(deliveries.len(), 1, "expected {what}, got {deliveries:?}");
        deliveries.remove(0)
    }

    async fn expect_nothing(&self, queue: &str, why: &str) {
        let deliveries = self.receive(queue, 10, NOTHING_WAIT, LONG_VISIBILITY).await;
        assert!(deliveries.is_empty(), "{why}, but got {deliveries:?}");
    }

    async fn delete(&self, queue: &str, delivery: &ExecDelivery) {
        self.queues
            .delete(queue, &delivery.receipt)
            .await
            .unwrap_or_else(|err| panic!("delete {:?}: {err}", delivery.body));
    }

    /// Receives and deletes until `count` messages came; returns their bodies sorted.
    async fn drain(&self, queue: &str, count: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut bodies = Vec::new();
        while bodies.len() < count {
            assert!(
                Instant::now() < deadline,
                "only {} of {count} messages arrived: {bodies:?}",
                bodies.len()
            );
            for delivery in self
                .receive(queue, 10, Duration::from_secs(2), LONG_VISIBILITY)
                .await
            {
                self.delete(queue, &delivery).await;
                bodies.push(delivery.body);
            }
        }
        bodies.sort();
        bodies
    }

    async fn creating_a_queue_is_idempotent_and_per_node(&self) -> String {
        let first = self.create("same").await;
        assert!(!first.is_empty(), "a queue has a handle");
        assert!(
            first.contains(&self.node("same")),
            "the handle {first:?} names the node"
        );
        let again = self.create("same").await;
        assert_eq!(again, first, "creating again returns the same queue");
        self.send(&first, "kept").await;
        let third = self.create("same").await;
        assert_eq!(third, first);
        let delivery = self
            .receive_one(
                &first,
                LONG_VISIBILITY,
                "the message sent before re-creating",
            )
            .await;
        assert_eq!(delivery.body, "kept", "re-creating keeps the messages");
        self.delete(&first, &delivery).await;
        let other = self.create("other").await;
        assert_ne!(other, first, "another node gets another queue");
        self.delete_queue(&other).await;
        first
    }

    async fn invalid_node_ids_are_refused(&self) {
        let too_long = "x".repeat(41);
        for bad in ["", "a b", "a/b", "ünï", "a.b", too_long.as_str()] {
            let result = self.queues.create_node_queue(bad).await;
            assert!(
                result.is_err(),
                "node id {bad:?} is refused, got {result:?}"
            );
        }
    }

    async fn an_empty_queue_waits_then_returns_nothing(&self) -> String {
        let queue = self.create("empty").await;
        let started = Instant::now();
        let deliveries = self
            .receive(&queue, 10, NOTHING_WAIT, LONG_VISIBILITY)
            .await;
        assert!(deliveries.is_empty(), "an empty queue delivers nothing");
        assert!(
            started.elapsed() >= Duration::from_millis(900),
            "a receive on an empty queue waits (returned after {:?})",
            started.elapsed()
        );
        let none = self.receive(&queue, 0, NOTHING_WAIT, LONG_VISIBILITY).await;
        assert!(none.is_empty(), "max 0 receives nothing");
        queue
    }

    async fn a_message_round_trips_and_is_gone_once_deleted(&self) -> String {
        let queue = self.create("round-trip").await;
        let body = sized_json_body("signed job", 64 * 1024);
        self.send(&queue, &body).await;
        let delivery = self
            .receive_one(&queue, LONG_VISIBILITY, "the message")
            .await;
        assert!(delivery.body == body, "a 64 KB body comes back byte-exact");
        assert_eq!(delivery.receive_count, 1, "first delivery");
        assert!(!delivery.receipt.is_empty(), "a delivery has a receipt");
        self.expect_nothing(&queue, "a message in flight is hidden")
            .await;
        self.delete(&queue, &delivery).await;
        self.expect_nothing(&queue, "a deleted message is gone")
            .await;
        queue
    }

    async fn queues_are_isolated(&self) -> Vec<String> {
        // `iso-1` is a prefix of `iso-10`: queue names must not match by prefix.
        let one = self.create("iso-1").await;
        let ten = self.create("iso-10").await;
        self.send(&one, "for one").await;
        self.send(&ten, "for ten").await;
        assert_eq!(self.drain(&one, 1).await, vec!["for one".to_owned()]);
        assert_eq!(self.drain(&ten, 1).await, vec!["for ten".to_owned()]);
        self.expect_nothing(&one, "each queue holds only its own")
            .await;
        vec![one, ten]
    }

    async fn receive_returns_at_most_max_and_every_message_once(&self) -> String {
        let queue = self.create("batch").await;
        let sent: Vec<String> = (0..5)
            .map(|index| format!(r#"{{"job":{index}}}"#))
            .collect();
        for body in &sent {
            self.send(&queue, body).await;
        }
        let batch = self.receive(&queue, 2, FIND_WAIT, LONG_VISIBILITY).await;
        assert!(
            !batch.is_empty() && batch.len() <= 2,
            "a receive of at most 2 got {}",
            batch.len()
        );
        for delivery in &batch {
            self.delete(&queue, delivery).await;
        }
        let mut all: Vec<String> = batch.into_iter().map(|delivery| delivery.body).collect();
        all.extend(self.drain(&queue, sent.len() - all.len()).await);
        all.sort();
        assert_eq!(all, sent, "every message arrives exactly once");
        self.expect_nothing(&queue, "all were deleted").await;
        queue
    }

    async fn an_unacknowledged_message_returns_after_its_visibility(&self) -> String {
        let queue = self.create("visibility").await;
        self.send(&queue, "forgotten").await;
        let visibility = Duration::from_secs(2);
        let first = self.receive_one(&queue, visibility, "the message").await;
        let received_at = Instant::now();
        let again = self
            .receive(&queue, 1, Duration::from_secs(10), LONG_VISIBILITY)
            .await;
        assert_eq!(again.len(), 1, "an unacknowledged message comes back");
        assert!(
            received_at.elapsed() >= visibility - Duration::from_millis(500),
            "it came back after {:?}, inside its visibility",
            received_at.elapsed()
        );
        assert_eq!(
            (again[0].body.as_str(), again[0].receive_count),
            ("forgotten", 2)
        );
        assert_eq!(first.body, again[0].body);
        self.delete(&queue, &again[0]).await;
        self.expect_nothing(&queue, "deleted with the latest receipt")
            .await;
        queue
    }

    async fn a_message_received_five_times_is_dead_lettered(&self) -> String {
        let queue = self.create("poison").await;
        self.send(&queue, "poison").await;
        for count in 1..=MAX_RECEIVE_COUNT {
            // Visibility zero: visible again at once, as a crashing consumer would leave it.
            let delivery = self
                .receive_one(&queue, Duration::ZERO, "the poison message")
                .await;
            assert_eq!(delivery.receive_count, count, "receive {count}");
        }
        self.expect_nothing(
            &queue,
            "a message received five times goes to the dead-letter queue",
        )
        .await;
        queue
    }

    async fn a_waiting_receive_returns_when_a_message_arrives(&self) -> String {
        let queue = self.create("waiting").await;
        let started = Instant::now();
        let queue_ref = queue.as_str();
        let receiver = Box::pin(async move {
            Some(
                self.receive(queue_ref, 1, Duration::from_secs(15), LONG_VISIBILITY)
                    .await,
            )
        })
            as Pin<Box<dyn Future<Output = Option<Vec<ExecDelivery>>> + Send + '_>>;
        let sender = Box::pin(async move {
            sleep(Duration::from_millis(500)).await;
            self.send(queue_ref, "late").await;
            None
        })
            as Pin<Box<dyn Future<Output = Option<Vec<ExecDelivery>>> + Send + '_>>;
        let mut outputs = join_all(vec![receiver, sender]).await;
        let received = outputs.remove(0).unwrap_or_default();
        assert_eq!(received.len(), 1, "the late message arrives: {received:?}");
        assert_eq!(received[0].body, "late");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "a waiting receive returns once a message arrives (took {:?})",
            started.elapsed()
        );
        self.delete(&queue, &received[0]).await;
        queue
    }

    async fn a_deleted_queue_refuses_sends_and_receives(&self) {
        let queue = self.create("deleted").await;
        self.send(&queue, "lost").await;
        self.delete_queue(&queue).await;
        let send = self.queues.send(&queue, "after delete").await;
        assert!(send.is_err(), "sending to a deleted queue fails");
        let receive = self
            .queues
            .receive(&queue, 1, Duration::ZERO, LONG_VISIBILITY)
            .await;
        assert!(
            receive.is_err(),
            "receiving from a deleted queue fails, got {receive:?}"
        );
        self.delete_queue(&queue).await;
    }
}
