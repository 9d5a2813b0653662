//! The [`TurnQueue`] contract: [`turn_queue_contract`], the [`QueueDeviations`] a backend may
//! declare, and the visibility timeouts the suite asks its queues for.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use crate::session::{Delivery, QueuedMessage, TurnQueue};
use crate::testing::{join_all, run_label, sized_json_body, sleep};

/// Visibility timeout of the queues most queue checks use: longer than any check runs, so a
/// message in flight stays in flight.
pub const CONTRACT_VISIBILITY_TIMEOUT: Duration = Duration::from_secs(30);

/// Visibility timeout of the queue the redelivery check uses.
pub const CONTRACT_SHORT_VISIBILITY_TIMEOUT: Duration = Duration::from_secs(2);

/// How a queue backend may knowingly differ from SQS FIFO in [`turn_queue_contract`]. Each
/// field relaxes one documented expectation; the default relaxes nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDeviations {
    /// The backend forgets a deduplication id as soon as its message is deleted, instead of
    /// for five minutes after the send. `moto_server` (5.x) does: it deduplicates only
    /// against messages still in the queue. With this set, the contract still checks that a
    /// repeat is dropped while the first is queued or in flight, but not after deletion.
    pub dedup_forgets_deleted_messages: bool,
}

/// Runs the [`TurnQueue`] contract, panicking with a description of the first broken
/// expectation. Takes about 20 seconds: it waits for visibility timeouts and release delays.
///
/// `fresh_queue(visibility_timeout)` must return an empty queue of its own whose messages
/// stay invisible for `visibility_timeout` after a receive (whole seconds are enough: the
/// suite asks for [`CONTRACT_VISIBILITY_TIMEOUT`] and [`CONTRACT_SHORT_VISIBILITY_TIMEOUT`]).
/// `deviations` names what the backend knowingly does differently from SQS FIFO.
pub async fn turn_queue_contract<F, Fut>(fresh_queue: F, deviations: QueueDeviations)
where
    F: Fn(Duration) -> Fut,
    Fut: Future<Output = Box<dyn TurnQueue>>,
{
    let suite = QueueContract {
        run: run_label("queue"),
        deviations,
    };
    let long = CONTRACT_VISIBILITY_TIMEOUT;
    suite
        .an_empty_queue_waits_then_returns_nothing(&*fresh_queue(long).await)
        .await;
    suite
        .messages_of_one_group_arrive_in_send_order(&*fresh_queue(long).await)
        .await;
    suite
        .a_group_in_flight_is_held_back_until_deleted_or_released(&*fresh_queue(long).await)
        .await;
    suite
        .a_held_back_group_does_not_block_other_groups(&*fresh_queue(long).await)
        .await;
    suite
        .a_repeated_dedup_id_is_dropped(&*fresh_queue(long).await)
        .await;
    suite
        .a_released_message_returns_after_its_delay_with_a_higher_count(&*fresh_queue(long).await)
        .await;
    suite
        .an_unacknowledged_message_returns_after_the_visibility_timeout(
            &*fresh_queue(CONTRACT_SHORT_VISIBILITY_TIMEOUT).await,
        )
        .await;
    suite
        .a_waiting_receive_returns_when_a_message_arrives(&*fresh_queue(long).await)
        .await;
    suite
        .odd_groups_dedup_ids_and_bodies_round_trip_exactly(&*fresh_queue(long).await)
        .await;
}

struct QueueContract {
    run: String,
    deviations: QueueDeviations,
}

/// Long enough for a long poll to find a message that is there.
const FIND_WAIT: Duration = Duration::from_secs(5);

/// How long a receive waits before the suite concludes that nothing is deliverable.
const NOTHING_WAIT: Duration = Duration::from_secs(1);

impl QueueContract {
    /// A session-key-like group unique to this run.
    fn group(&self, rest: &str) -> String {
        format!("agent:{}:{rest}", self.run)
    }

    fn dedup(&self, name: &str) -> String {
        format!("{}-{name}", self.run)
    }

    async fn send(&self, queue: &dyn TurnQueue, group: &str, dedup: &str, body: &str) {
        let message = QueuedMessage {
            group: group.to_owned(),
            dedup_id: self.dedup(dedup),
            body: body.to_owned(),
        };
        queue
            .send(&message)
            .await
            .unwrap_or_else(|err| panic!("send {body:?} to {group:?} failed: {err}"));
    }

    async fn receive(queue: &dyn TurnQueue, max: usize, wait: Duration) -> Vec<Delivery> {
        queue
            .receive(max, wait)
            .await
            .unwrap_or_else(|err| panic!("receive failed: {err}"))
    }

    async fn receive_one(queue: &dyn TurnQueue, what: &str) -> Delivery {
        let mut deliveries = Self::receive(queue, 1, FIND_WAIT).await;
        assert_eq!(deliveries.len(), 1, "expected {what}, got {deliveries:?}");
        deliveries.remove(0)
    }

    async fn expect_nothing(queue: &dyn TurnQueue, why: &str) {
        let deliveries = Self::receive(queue, 10, NOTHING_WAIT).await;
        assert!(deliveries.is_empty(), "{why}, but got {deliveries:?}");
    }

    async fn delete(queue: &dyn TurnQueue, delivery: &Delivery) {
        queue
            .delete(&delivery.receipt)
            .await
            .unwrap_or_else(|err| panic!("delete {:?} failed: {err}", delivery.body));
    }

    async fn release(queue: &dyn TurnQueue, delivery: &Delivery, delay: Duration) {
        queue
            .release(&delivery.receipt, delay)
            .await
            .unwrap_or_else(|err| panic!("release {:?} failed: {err}", delivery.body));
    }

    /// Receives and deletes until `count` messages came, in arrival order.
    async fn drain(queue: &dyn TurnQueue, count: usize) -> Vec<Delivery> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut received = Vec::new();
        while received.len() < count {
            assert!(
                Instant::now() < deadline,
                "only {} of {count} messages arrived: {received:?}",
                received.len()
            );
            for delivery in Self::receive(queue, 10, Duration::from_secs(2)).await {
                Self::delete(queue, &delivery).await;
                received.push(delivery);
            }
        }
        assert_eq!(
            received.len(),
            count,
            "more messages than sent: {received:?}"
        );
        received
    }

    fn bodies(deliveries: &[Delivery]) -> Vec<&str> {
        deliveries
            .iter()
            .map(|delivery| delivery.body.as_str())
            .collect()
    }

    async fn an_empty_queue_waits_then_returns_nothing(&self, queue: &dyn TurnQueue) {
        let started = Instant::now();
        let deliveries = Self::receive(queue, 10, NOTHING_WAIT).await;
        assert!(deliveries.is_empty(), "an empty queue delivers nothing");
        assert!(
            started.elapsed() >= Duration::from_millis(900),
            "a receive on an empty queue waits for `wait` (returned after {:?})",
            started.elapsed()
        );
    }

    async fn messages_of_one_group_arrive_in_send_order(&self, queue: &dyn TurnQueue) {
        let group = self.group("main");
        let sent: Vec<String> = (0..12).map(|index| format!(r#"{{"n":{index}}}"#)).collect();
        for (index, body) in sent.iter().enumerate() {
            self.send(queue, &group, &format!("order-{index}"), body)
                .await;
        }
        let received = Self::drain(queue, sent.len()).await;
        assert_eq!(
            Self::bodies(&received),
            sent,
            "one group arrives in send order"
        );
        for delivery in &received {
            assert_eq!(delivery.group, group, "deliveries name their group");
            assert_eq!(
                delivery.receive_count, 1,
                "first delivery of {:?}",
                delivery.body
            );
        }
        Self::expect_nothing(queue, "deleted messages are gone").await;
    }

    async fn a_group_in_flight_is_held_back_until_deleted_or_released(
        &self, queue: &dyn TurnQueue,
    ) {
        let group = self.group("generic:group:42");
        self.send(queue, &group, "held-1", "g1").await;
        self.send(queue, &group, "held-2", "g2").await;
        let first = Self::receive_one(queue, "the group's first message").await;
        assert_eq!((first.body.as_str(), first.receive_count), ("g1", 1));
        Self::expect_nothing(queue, "g2 must wait while g1 is in flight").await;
        Self::delete(queue, &first).await;
        let second = Self::receive_one(queue, "g2 once g1 is deleted").await;
        assert_eq!(second.body, "g2");

        self.send(queue, &group, "held-3", "g3").await;
        Self::expect_nothing(queue, "g3 must wait while g2 is in flight").await;
        Self::release(queue, &second, Duration::ZERO).await;
        let again = Self::receive_one(queue, "g2 again after its release").await;
        assert_eq!(
            (again.body.as_str(), again.receive_count),
            ("g2", 2),
            "a released message comes back before later ones of its group"
        );
        Self::delete(queue, &again).await;
        let third = Self::receive_one(queue, "g3 once g2 is deleted").await;
        assert_eq!((third.body.as_str(), third.receive_count), ("g3", 1));
        Self::delete(queue, &third).await;
        Self::expect_nothing(queue, "every message was deleted").await;
    }

    async fn a_held_back_group_does_not_block_other_groups(&self, queue: &dyn TurnQueue) {
        let a = self.group("generic:group:4");
        let b = self.group("generic:group:42");
        self.send(queue, &a, "a1", "a1").await;
        self.send(queue, &a, "a2", "a2").await;
        self.send(queue, &b, "b1", "b1").await;
        self.send(queue, &b, "b2", "b2").await;
        let first = Self::receive_one(queue, "the head of one group").await;
        let (blocked, blocked_next, other, other_bodies) = if first.group == a {
            assert_eq!(first.body, "a1", "a group's head comes first");
            (&a, "a2", &b, ["b1", "b2"])
        } else {
            assert_eq!(
                (first.group.as_str(), first.body.as_str()),
                (b.as_str(), "b1")
            );
            (&b, "b2", &a, ["a1", "a2"])
        };
        // With `first` in flight, the other group still flows, in its own order.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut flowed = Vec::new();
        while flowed.len() < 2 {
            assert!(
                Instant::now() < deadline,
                "the other group is stuck: {flowed:?}"
            );
            for delivery in Self::receive(queue, 10, Duration::from_secs(2)).await {
                assert_eq!(
                    &delivery.group, other,
                    "nothing of {blocked} while {:?} is in flight: {delivery:?}",
                    first.body
                );
                Self::delete(queue, &delivery).await;
                flowed.push(delivery);
            }
        }
        assert_eq!(Self::bodies(&flowed), other_bodies);
        Self::delete(queue, &first).await;
        let rest = Self::drain(queue, 1).await;
        assert_eq!(Self::bodies(&rest), vec![blocked_next]);
    }

    async fn a_repeated_dedup_id_is_dropped(&self, queue: &dyn TurnQueue) {
        let group = self.group("main");
        let other = self.group("generic:group:7");
        self.send(queue, &group, "same", "first").await;
        self.send(queue, &group, "same", "repeat while queued")
            .await;
        self.send(queue, &other, "same", "same id, other group")
            .await;
        self.send(queue, &group, "different", "second").await;
        let received = Self::drain(queue, 2).await;
        assert_eq!(
            Self::bodies(&received),
            vec!["first", "second"],
            "a repeated dedup id is dropped queue-wide"
        );
        Self::expect_nothing(queue, "repeats were dropped").await;

        self.send(queue, &group, "in-flight", "third").await;
        let third = Self::receive_one(queue, "third").await;
        self.send(queue, &group, "in-flight", "repeat while in flight")
            .await;
        Self::delete(queue, &third).await;
        Self::expect_nothing(queue, "a repeat of a message in flight was dropped").await;

        if !self.deviations.dedup_forgets_deleted_messages {
            self.send(queue, &group, "same", "repeat after delete")
                .await;
            Self::expect_nothing(
                queue,
                "a dedup id is remembered for five minutes, even after its message is deleted",
            )
            .await;
        }
    }

    async fn a_released_message_returns_after_its_delay_with_a_higher_count(
        &self, queue: &dyn TurnQueue,
    ) {
        let group = self.group("main");
        self.send(queue, &group, "retry", "retry me").await;
        let first = Self::receive_one(queue, "the message").await;
        assert_eq!(first.receive_count, 1);
        Self::release(queue, &first, Duration::ZERO).await;
        let second = Self::receive_one(queue, "the message after a release without delay").await;
        assert_eq!(
            (second.body.as_str(), second.receive_count),
            ("retry me", 2)
        );

        let delay = Duration::from_secs(3);
        Self::release(queue, &second, delay).await;
        let released_at = Instant::now();
        Self::expect_nothing(queue, "a message released with a delay stays hidden").await;
        let third = Self::receive(queue, 1, Duration::from_secs(10)).await;
        assert_eq!(third.len(), 1, "the message returns after its delay");
        assert!(
            released_at.elapsed() >= delay - Duration::from_millis(500),
            "it came back after {:?}, before the {delay:?} delay",
            released_at.elapsed()
        );
        assert_eq!(
            (third[0].body.as_str(), third[0].receive_count),
            ("retry me", 3)
        );
        Self::delete(queue, &third[0]).await;
        Self::expect_nothing(queue, "a deleted message is gone").await;
    }

    async fn an_unacknowledged_message_returns_after_the_visibility_timeout(
        &self, queue: &dyn TurnQueue,
    ) {
        let group = self.group("main");
        self.send(queue, &group, "forgotten", "forgotten").await;
        let first = Self::receive_one(queue, "the message").await;
        let received_at = Instant::now();
        let again = Self::receive(queue, 1, Duration::from_secs(10)).await;
        assert_eq!(
            again.len(),
            1,
            "an unacknowledged message is delivered again"
        );
        assert!(
            received_at.elapsed() >= CONTRACT_SHORT_VISIBILITY_TIMEOUT - Duration::from_millis(500),
            "it came back after {:?}, inside the visibility timeout",
            received_at.elapsed()
        );
        assert_eq!(
            (again[0].body.as_str(), again[0].receive_count),
            ("forgotten", 2)
        );
        assert_eq!(first.body, again[0].body);
        Self::delete(queue, &again[0]).await;
        let after = Self::receive(
            queue,
            10,
            CONTRACT_SHORT_VISIBILITY_TIMEOUT + Duration::from_secs(1),
        )
        .await;
        assert!(
            after.is_empty(),
            "a deleted message never comes back: {after:?}"
        );
    }

    async fn a_waiting_receive_returns_when_a_message_arrives(&self, queue: &dyn TurnQueue) {
        let group = self.group("main");
        let started = Instant::now();
        let receiver =
            Box::pin(async move { Some(Self::receive(queue, 1, Duration::from_secs(15)).await) })
                as Pin<Box<dyn Future<Output = Option<Vec<Delivery>>> + Send + '_>>;
        let group_ref = group.as_str();
        let sender = Box::pin(async move {
            sleep(Duration::from_millis(500)).await;
            self.send(queue, group_ref, "late", "late").await;
            None
        }) as Pin<Box<dyn Future<Output = Option<Vec<Delivery>>> + Send + '_>>;
        let mut outputs = join_all(vec![receiver, sender]).await;
        let received = outputs.remove(0).unwrap_or_default();
        assert_eq!(Self::bodies(&received), vec!["late"]);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "a waiting receive returns once a message arrives, not at the end of its wait \
             (took {:?})",
            started.elapsed()
        );
        Self::delete(queue, &received[0]).await;
    }

    async fn odd_groups_dedup_ids_and_bodies_round_trip_exactly(&self, queue: &dyn TurnQueue) {
        // Longer than SQS's 128-character ids, with characters SQS does not allow in them,
        // and differing only at the end.
        let stem = format!(
            "{}:generic:group:ünï code/{}",
            self.group("x"),
            "x".repeat(140)
        );
        let groups = [format!("{stem}-1"), format!("{stem}-2")];
        let dedup_stem = format!("Ev ünï/{}", "d".repeat(140));
        let bodies = [
            sized_json_body("first body", 64 * 1024),
            sized_json_body("second body", 1000),
        ];
        for (index, (group, body)) in groups.iter().zip(&bodies).enumerate() {
            self.send(queue, group, &format!("{dedup_stem}-{index}"), body)
                .await;
        }
        let mut received = Self::drain(queue, 2).await;
        received.sort_by(|left, right| left.group.cmp(&right.group));
        for ((delivery, group), body) in received.iter().zip(&groups).zip(&bodies) {
            assert_eq!(&delivery.group, group, "the group comes back exactly");
            assert!(&delivery.body == body, "the body comes back byte-exact");
        }
    }
}
