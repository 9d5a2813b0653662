//! [`SqliteTurnQueue`]: the turn queue port on the local SQLite database, with SQS FIFO's
//! semantics.
//!
//! Owns the SQL for named queues (`queue_messages`, `queue_dedup`): per-group ordering,
//! visibility timeouts, the deduplication window, receipts, and waiting for messages by
//! polling (woken early when this process sends or releases).

use std::time::Duration;

use async_trait::async_trait;
use clawless_core::session::{Delivery, QueueError, QueuedMessage, TurnQueue};
use rusqlite::{TransactionBehavior, params};

use super::polling::{mark_received, millis, now_ms, poll_until_found, receipt_message_id};
use super::{SqliteDb, SqliteError};

/// Name of the queue [`SqliteTurnQueue::new`] opens: the turn queue.
pub const DEFAULT_QUEUE: &str = "turns";

/// Visibility timeout of [`SqliteTurnQueue::new`]: how long a received message stays hidden
/// before it is delivered again. Generous, as a local turn may wait on a slow model.
pub const DEFAULT_VISIBILITY_TIMEOUT: Duration = Duration::from_secs(300);

/// How long a deduplication id is remembered after its send, as in SQS FIFO.
pub const DEDUP_WINDOW: Duration = Duration::from_secs(300);

/// One named FIFO queue in a [`SqliteDb`], behaving like SQS FIFO:
///
/// - Per group, only the oldest undeleted message (the head) can be delivered, and only while
///   it is visible; a group whose head is in flight or delayed is held back, others flow.
///   A receive returns at most one message per group, oldest groups first.
/// - A received message is hidden for the visibility timeout, then delivered again with its
///   `receive_count` incremented, until deleted. `release` sets when it is visible again.
/// - A send whose deduplication id was sent to this queue within the last five minutes is
///   dropped, even if that message was deleted since.
/// - The receipt is `<message id>.<receive count>`: a receipt from an earlier delivery no
///   longer matches, and deleting or releasing with it does nothing.
/// - `receive` polls every 50 ms until `wait` runs out, and wakes at once when this process
///   sends or releases.
///
/// Several queues can share one database under different names.
#[derive(Debug, Clone)]
pub struct SqliteTurnQueue {
    db: SqliteDb,
    name: String,
    visibility_timeout: Duration,
    dedup_window: Duration,
}

impl SqliteTurnQueue {
    /// The turn queue ([`DEFAULT_QUEUE`]) in `db`, with a [`DEFAULT_VISIBILITY_TIMEOUT`] and
    /// a [`DEDUP_WINDOW`].
    pub fn new(db: SqliteDb) -> Self {
        Self::named(db, DEFAULT_QUEUE)
    }

    /// The queue `name` in `db`, with a [`DEFAULT_VISIBILITY_TIMEOUT`] and a [`DEDUP_WINDOW`].
    pub fn named(db: SqliteDb, name: impl Into<String>) -> Self {
        Self {
            db,
            name: name.into(),
            visibility_timeout: DEFAULT_VISIBILITY_TIMEOUT,
            dedup_window: DEDUP_WINDOW,
        }
    }

    /// Hides received messages for `visibility_timeout`.
    pub fn with_visibility_timeout(mut self, visibility_timeout: Duration) -> Self {
        self.visibility_timeout = visibility_timeout;
        self
    }

    /// Remembers deduplication ids for `dedup_window` after their send.
    pub fn with_dedup_window(mut self, dedup_window: Duration) -> Self {
        self.dedup_window = dedup_window;
        self
    }

    /// The queue's name within the database.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn failed(&self, action: &str, err: SqliteError) -> QueueError {
        QueueError::new(
            format!(
                "SQLite {action} on queue {:?} in {} failed",
                self.name,
                self.db.location()
            ),
            err,
        )
    }

    /// Makes every message received but not yet deleted visible again at once, and returns
    /// how many. For start-up: whoever held them died with the previous process (one
    /// `clawless local` owns a state dir), so its work resumes now instead of after the
    /// visibility timeout. Their old receipts stop working.
    pub async fn release_in_flight(&self) -> Result<usize, QueueError> {
        let queue = self.name.clone();
        self.db
            .run(move |connection| {
                connection.execute(
                    "UPDATE queue_messages SET visible_at_ms = 0, receipt = NULL
                     WHERE queue = ?1 AND receipt IS NOT NULL",
                    params![queue],
                )
            })
            .await
            .map_err(|err| self.failed("release of in-flight messages", err))
    }

    /// The message id a receipt names, if it is one of ours.
    fn receipt_id(&self, receipt: &str) -> Result<i64, QueueError> {
        receipt_message_id(receipt).ok_or_else(|| {
            QueueError::bare(format!(
                "{receipt:?} is not a receipt of queue {:?}",
                self.name
            ))
        })
    }

    async fn try_receive(&self, max: usize) -> Result<Vec<Delivery>, QueueError> {
        let queue = self.name.clone();
        let limit = i64::try_from(max).unwrap_or(i64::MAX);
        let hidden_for = millis(self.visibility_timeout);
        self.db
            .run(move |connection| {
                let now = now_ms();
                let transaction =
                    connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let heads = {
                    let mut select = transaction.prepare(
                        "SELECT m.id, m.group_key, m.body, m.receive_count FROM queue_messages m
                         WHERE m.queue = ?1 AND m.visible_at_ms <= ?2
                           AND m.id = (SELECT MIN(h.id) FROM queue_messages h
                                       WHERE h.queue = m.queue AND h.group_key = m.group_key)
                         ORDER BY m.id LIMIT ?3",
                    )?;
                    select
                        .query_map(params![queue, now, limit], |row| {
                            Ok((
                                row.get::<_, i64>(0)?,
                                row.get::<_, String>(1)?,
                                row.get::<_, String>(2)?,
                                row.get::<_, u32>(3)?,
                            ))
                        })?
                        .collect::<Result<Vec<_>, _>>()?
                };
                let mut deliveries = Vec::with_capacity(heads.len());
                for (id, group, body, count) in heads {
                    let (receipt, receive_count) = mark_received(
                        &transaction,
                        "UPDATE queue_messages
                         SET receive_count = ?2, visible_at_ms = ?3, receipt = ?4 WHERE id = ?1",
                        id,
                        count,
                        now.saturating_add(hidden_for),
                    )?;
                    deliveries.push(Delivery {
                        receipt,
                        group,
                        body,
                        receive_count,
                    });
                }
                transaction.commit()?;
                Ok(deliveries)
            })
            .await
            .map_err(|err| self.failed("receive", err))
    }
}

#[async_trait]
impl TurnQueue for SqliteTurnQueue {
    #[tracing::instrument(level = "debug", skip_all, fields(queue = %self.name, group = %message.group))]
    async fn send(&self, message: &QueuedMessage) -> Result<(), QueueError> {
        let queue = self.name.clone();
        let message = message.clone();
        let window = millis(self.dedup_window);
        let sent = self
            .db
            .run(move |connection| {
                let now = now_ms();
                let transaction =
                    connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
                transaction.execute(
                    "DELETE FROM queue_dedup WHERE queue = ?1 AND sent_at_ms <= ?2",
                    params![queue, now.saturating_sub(window)],
                )?;
                let fresh = transaction.execute(
                    "INSERT INTO queue_dedup (queue, dedup_id, sent_at_ms) VALUES (?1, ?2, ?3)
                     ON CONFLICT (queue, dedup_id) DO NOTHING",
                    params![queue, message.dedup_id, now],
                )?;
                if fresh == 1 {
                    transaction.execute(
                        "INSERT INTO queue_messages (queue, group_key, body, visible_at_ms)
                         VALUES (?1, ?2, ?3, ?4)",
                        params![queue, message.group, message.body, now],
                    )?;
                }
                transaction.commit()?;
                Ok(fresh == 1)
            })
            .await
            .map_err(|err| self.failed("send", err))?;
        if sent {
            self.db.queue_changed().notify_waiters();
        } else {
            tracing::debug!("dropped a repeated deduplication id");
        }
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(queue = %self.name, max, wait = ?wait))]
    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        poll_until_found(&self.db, max, wait, |_waited| self.try_receive(max)).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(queue = %self.name))]
    async fn delete(&self, receipt: &str) -> Result<(), QueueError> {
        let id = self.receipt_id(receipt)?;
        let receipt = receipt.to_owned();
        self.db
            .run(move |connection| {
                connection.execute(
                    "DELETE FROM queue_messages WHERE id = ?1 AND receipt = ?2",
                    params![id, receipt],
                )
            })
            .await
            .map_err(|err| self.failed("delete", err))?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(queue = %self.name, delay = ?delay))]
    async fn release(&self, receipt: &str, delay: Duration) -> Result<(), QueueError> {
        let id = self.receipt_id(receipt)?;
        let receipt = receipt.to_owned();
        let delay = millis(delay);
        self.db
            .run(move |connection| {
                connection.execute(
                    "UPDATE queue_messages SET visible_at_ms = ?3 WHERE id = ?1 AND receipt = ?2",
                    params![id, receipt, now_ms().saturating_add(delay)],
                )
            })
            .await
            .map_err(|err| self.failed("release", err))?;
        self.db.queue_changed().notify_waiters();
        Ok(())
    }
}
