//! The exec queue port: one standard (unordered, at-least-once) queue per node, which the
//! node long-polls for its jobs. A job received [`MAX_RECEIVE_COUNT`] times without being
//! deleted goes to the node's dead-letter queue instead of being delivered again.
//!
//! Failures reuse [`QueueError`](crate::session::QueueError), the turn queue's error.

use std::time::Duration;

use async_trait::async_trait;

use crate::session::QueueError;

/// Receives of one message without a delete after which it is dead-lettered: SQS's
/// `maxReceiveCount` in the redrive policy of every node queue.
pub const MAX_RECEIVE_COUNT: u32 = 5;

/// A received job, invisible to other receivers until deleted or its visibility ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecDelivery {
    /// The body as sent (a signed job envelope).
    pub body: String,
    /// Handle for [`ExecQueue::delete`].
    pub receipt: String,
    /// How many times it has been received, this time included.
    pub receive_count: u32,
}

/// Per-node exec queues.
#[async_trait]
pub trait ExecQueue: Send + Sync + std::fmt::Debug {
    /// Creates the queue of `node_id` (with its dead-letter queue) and returns its handle:
    /// the queue URL on AWS (`<prefix>node-<id>`), a name locally. Creating it again returns
    /// the same handle. Refuses a node id that fails
    /// [`is_valid_node_id`](super::is_valid_node_id).
    async fn create_node_queue(&self, node_id: &str) -> Result<String, QueueError>;

    /// Deletes a queue and its dead-letter queue, with the messages in them. Deleting a
    /// queue that is gone is fine; sending to or receiving from it afterwards fails.
    async fn delete_node_queue(&self, queue: &str) -> Result<(), QueueError>;

    /// Enqueues `body`.
    async fn send(&self, queue: &str, body: &str) -> Result<(), QueueError>;

    /// Receives up to `max` messages, in no particular order, waiting up to `wait` for the
    /// first; each stays invisible for `visibility` (whole seconds) unless deleted.
    async fn receive(
        &self, queue: &str, max: usize, wait: Duration, visibility: Duration,
    ) -> Result<Vec<ExecDelivery>, QueueError>;

    /// Acknowledges a delivery: it is never delivered again.
    async fn delete(&self, queue: &str, receipt: &str) -> Result<(), QueueError>;
}
