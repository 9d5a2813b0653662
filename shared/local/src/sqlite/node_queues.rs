//! [`SqliteExecQueue`] and [`SqliteTimers`]: the per-node exec queues and the durable timers
//! on the local SQLite database.
//!
//! Owns the SQL for exec queues (`exec_queues`: which exist; `exec_messages`: their messages,
//! with SQS standard-queue semantics and a dead-letter flag) and timers (`timers`: one row per
//! timer id, polled by due time). Waiting receives poll, and wake at once when this process
//! sends or schedules.

use std::time::Duration;

use async_trait::async_trait;
use clawless_core::nodes::{ExecDelivery, ExecQueue, MAX_RECEIVE_COUNT, is_valid_node_id};
use clawless_core::session::QueueError;
use clawless_core::timers::{DueTimer, Timer, Timers};
use rusqlite::types::Type;
use rusqlite::{TransactionBehavior, params};

use super::polling::{mark_received, millis, now_ms, poll_until_found, receipt_message_id};
use super::{SqliteDb, SqliteError};

/// Name of the timer set [`SqliteTimers::new`] opens.
pub const DEFAULT_TIMERS: &str = "timers";

/// Visibility timeout of [`SqliteTimers::new`]: how long a taken timer stays hidden before it
/// is handed out again unless acked.
const DEFAULT_TIMER_VISIBILITY: Duration = Duration::from_secs(60);

/// Whole seconds, rounded up, in milliseconds: SQS counts visibility in seconds.
fn whole_seconds_ms(duration: Duration) -> i64 {
    let seconds = duration.as_secs() + u64::from(duration.subsec_nanos() > 0);
    i64::try_from(seconds.saturating_mul(1000)).unwrap_or(i64::MAX)
}

fn no_queue(queue: &str) -> QueueError {
    QueueError::bare(format!("no exec queue {queue:?}"))
}

/// What a statement on an exec queue found, when SQLite itself did not fail.
enum OnQueue<T> {
    Done(T),
    Missing,
}

/// Per-node exec queues in a [`SqliteDb`], behaving like SQS standard queues with a redrive
/// policy:
///
/// - The queue of node `<id>` is named `node-<id>`; sending to, receiving from or deleting on
///   a queue that does not exist (or was deleted) fails.
/// - A received message is hidden for the receive's visibility (whole seconds, rounded up),
///   then delivered again with its `receive_count` incremented, until deleted. A message
///   already received [`MAX_RECEIVE_COUNT`] times is flagged dead instead of delivered.
/// - Messages are handed out oldest first (SQS promises no order; callers must not rely on it).
/// - The receipt is `<message id>.<receive count>`: a receipt from an earlier delivery no
///   longer matches, and deleting with it does nothing.
#[derive(Debug, Clone)]
pub struct SqliteExecQueue {
    db: SqliteDb,
}

impl SqliteExecQueue {
    /// Exec queues in `db`.
    pub fn new(db: SqliteDb) -> Self {
        Self { db }
    }

    /// Bodies dead-lettered from `queue`, oldest first.
    pub async fn dead_letters(&self, queue: &str) -> Result<Vec<String>, QueueError> {
        let name = queue.to_owned();
        self.db
            .run(move |connection| {
                let mut select = connection.prepare(
                    "SELECT body FROM exec_messages WHERE queue = ?1 AND dead = 1 ORDER BY id",
                )?;
                select
                    .query_map([name], |row| row.get(0))?
                    .collect::<Result<Vec<String>, _>>()
            })
            .await
            .map_err(|err| self.failed("dead-letter listing", queue, err))
    }

    /// How many messages `queue` holds, visible or in flight (dead letters excluded).
    pub async fn live_count(&self, queue: &str) -> Result<usize, QueueError> {
        let name = queue.to_owned();
        self.db
            .run(move |connection| {
                connection.query_row(
                    "SELECT COUNT(*) FROM exec_messages WHERE queue = ?1 AND dead = 0",
                    [name],
                    |row| row.get::<_, i64>(0),
                )
            })
            .await
            .map(|count| usize::try_from(count).unwrap_or(0))
            .map_err(|err| self.failed("message count", queue, err))
    }

    fn failed(&self, action: &str, queue: &str, err: SqliteError) -> QueueError {
        QueueError::new(
            format!(
                "SQLite {action} on exec queue {queue:?} in {} failed",
                self.db.location()
            ),
            err,
        )
    }

    fn exists(transaction: &rusqlite::Transaction<'_>, queue: &str) -> rusqlite::Result<bool> {
        transaction
            .query_row(
                "SELECT COUNT(*) FROM exec_queues WHERE name = ?1",
                [queue],
                |row| row.get::<_, i64>(0),
            )
            .map(|count| count > 0)
    }

    async fn try_receive(
        &self, queue: &str, max: usize, visibility: Duration,
    ) -> Result<Vec<ExecDelivery>, QueueError> {
        let name = queue.to_owned();
        let limit = i64::try_from(max).unwrap_or(i64::MAX);
        let hidden_for = whole_seconds_ms(visibility);
        let found = self
            .db
            .run(move |connection| {
                let now = now_ms();
                let transaction =
                    connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
                if !Self::exists(&transaction, &name)? {
                    return Ok(OnQueue::Missing);
                }
                transaction.execute(
                    "UPDATE exec_messages SET dead = 1
                     WHERE queue = ?1 AND dead = 0 AND visible_at_ms <= ?2 AND receive_count >= ?3",
                    params![name, now, MAX_RECEIVE_COUNT],
                )?;
                let visible = {
                    let mut select = transaction.prepare(
                        "SELECT id, body, receive_count FROM exec_messages
                         WHERE queue = ?1 AND dead = 0 AND visible_at_ms <= ?2
                         ORDER BY id LIMIT ?3",
                    )?;
                    select
                        .query_map(params![name, now, limit], |row| {
                            Ok((
                                row.get::<_, i64>(0)?,
                                row.get::<_, String>(1)?,
                                row.get::<_, u32>(2)?,
                            ))
                        })?
                        .collect::<Result<Vec<_>, _>>()?
                };
                let mut deliveries = Vec::with_capacity(visible.len());
                for (id, body, count) in visible {
                    let (receipt, receive_count) = mark_received(
                        &transaction,
                        "UPDATE exec_messages
                         SET receive_count = ?2, visible_at_ms = ?3, receipt = ?4 WHERE id = ?1",
                        id,
                        count,
                        now.saturating_add(hidden_for),
                    )?;
                    deliveries.push(ExecDelivery {
                        body,
                        receipt,
                        receive_count,
                    });
                }
                transaction.commit()?;
                Ok(OnQueue::Done(deliveries))
            })
            .await
            .map_err(|err| self.failed("receive", queue, err))?;
        match found {
            OnQueue::Done(deliveries) => Ok(deliveries),
            OnQueue::Missing => Err(no_queue(queue)),
        }
    }
}

#[async_trait]
impl ExecQueue for SqliteExecQueue {
    #[tracing::instrument(level = "debug", skip_all, fields(node_id))]
    async fn create_node_queue(&self, node_id: &str) -> Result<String, QueueError> {
        if !is_valid_node_id(node_id) {
            return Err(QueueError::bare(format!(
                "{node_id:?} is not a valid node id"
            )));
        }
        let name = format!("node-{node_id}");
        let insert = name.clone();
        self.db
            .run(move |connection| {
                connection.execute(
                    "INSERT INTO exec_queues (name) VALUES (?1) ON CONFLICT (name) DO NOTHING",
                    [insert],
                )
            })
            .await
            .map_err(|err| self.failed("create", &name, err))?;
        Ok(name)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(queue))]
    async fn delete_node_queue(&self, queue: &str) -> Result<(), QueueError> {
        let name = queue.to_owned();
        self.db
            .run(move |connection| {
                let transaction =
                    connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
                transaction.execute("DELETE FROM exec_messages WHERE queue = ?1", [&name])?;
                transaction.execute("DELETE FROM exec_queues WHERE name = ?1", [&name])?;
                transaction.commit()
            })
            .await
            .map_err(|err| self.failed("delete", queue, err))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(queue))]
    async fn send(&self, queue: &str, body: &str) -> Result<(), QueueError> {
        let name = queue.to_owned();
        let body = body.to_owned();
        let sent = self
            .db
            .run(move |connection| {
                let transaction =
                    connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
                if !Self::exists(&transaction, &name)? {
                    return Ok(OnQueue::Missing);
                }
                transaction.execute(
                    "INSERT INTO exec_messages (queue, body, visible_at_ms) VALUES (?1, ?2, ?3)",
                    params![name, body, now_ms()],
                )?;
                transaction.commit()?;
                Ok(OnQueue::Done(()))
            })
            .await
            .map_err(|err| self.failed("send", queue, err))?;
        match sent {
            OnQueue::Done(()) => {
                self.db.queue_changed().notify_waiters();
                Ok(())
            }
            OnQueue::Missing => Err(no_queue(queue)),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(queue, max, wait = ?wait))]
    async fn receive(
        &self, queue: &str, max: usize, wait: Duration, visibility: Duration,
    ) -> Result<Vec<ExecDelivery>, QueueError> {
        poll_until_found(&self.db, max, wait, |_waited| {
            self.try_receive(queue, max, visibility)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(queue))]
    async fn delete(&self, queue: &str, receipt: &str) -> Result<(), QueueError> {
        let Some(id) = receipt_message_id(receipt) else {
            return Err(QueueError::bare(format!(
                "{receipt:?} is not a receipt of exec queue {queue:?}"
            )));
        };
        let name = queue.to_owned();
        let receipt = receipt.to_owned();
        let deleted = self
            .db
            .run(move |connection| {
                let transaction =
                    connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
                if !Self::exists(&transaction, &name)? {
                    return Ok(OnQueue::Missing);
                }
                transaction.execute(
                    "DELETE FROM exec_messages WHERE id = ?1 AND queue = ?2 AND receipt = ?3",
                    params![id, name, receipt],
                )?;
                transaction.commit()?;
                Ok(OnQueue::Done(()))
            })
            .await
            .map_err(|err| self.failed("delete", queue, err))?;
        match deleted {
            OnQueue::Done(()) => Ok(()),
            OnQueue::Missing => Err(no_queue(queue)),
        }
    }
}

/// Durable timers in a [`SqliteDb`], one row per timer id:
///
/// - `schedule` inserts with `ON CONFLICT DO NOTHING`: an id still pending is not scheduled
///   twice (once acked, the id may be scheduled again).
/// - `take_due` hands out timers with `due_at_ms` and their visibility time at or before the
///   caller's clock (plus the time spent waiting), earliest due first, and hides them for the
///   visibility timeout; `ack` deletes by receipt (`<timer id>#<take count>`).
/// - `cancel` deletes by timer id, taken or not.
///
/// Several timer sets can share one database under different names.
#[derive(Debug, Clone)]
pub struct SqliteTimers {
    db: SqliteDb,
    name: String,
    visibility_timeout: Duration,
}

impl SqliteTimers {
    /// The timer set [`DEFAULT_TIMERS`] in `db`, hiding taken timers for 60 s.
    pub fn new(db: SqliteDb) -> Self {
        Self::named(db, DEFAULT_TIMERS)
    }

    /// The timer set `name` in `db`, hiding taken timers for 60 s.
    pub fn named(db: SqliteDb, name: impl Into<String>) -> Self {
        Self {
            db,
            name: name.into(),
            visibility_timeout: DEFAULT_TIMER_VISIBILITY,
        }
    }

    /// Hides taken timers for `visibility_timeout` unless acked.
    pub fn with_visibility_timeout(mut self, visibility_timeout: Duration) -> Self {
        self.visibility_timeout = visibility_timeout;
        self
    }

    fn failed(&self, action: &str, err: SqliteError) -> QueueError {
        QueueError::new(
            format!(
                "SQLite {action} on timers {:?} in {} failed",
                self.name,
                self.db.location()
            ),
            err,
        )
    }

    /// Runs `delete_sql` (parameters: this set's name, `value`); `action` names it in errors.
    async fn delete_where(
        &self, action: &str, delete_sql: &'static str, value: &str,
    ) -> Result<(), QueueError> {
        let name = self.name.clone();
        let value = value.to_owned();
        self.db
            .run(move |connection| connection.execute(delete_sql, params![name, value]))
            .await
            .map_err(|err| self.failed(action, err))?;
        Ok(())
    }

    async fn try_take(&self, now_ms: i64, max: usize) -> Result<Vec<DueTimer>, QueueError> {
        let name = self.name.clone();
        let limit = i64::try_from(max).unwrap_or(i64::MAX);
        let hidden_until = now_ms.saturating_add(millis(self.visibility_timeout));
        self.db
            .run(move |connection| {
                let transaction =
                    connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let due = {
                    let mut select = transaction.prepare(
                        "SELECT timer_id, timer, takes FROM timers
                         WHERE queue = ?1 AND due_at_ms <= ?2 AND visible_at_ms <= ?2
                         ORDER BY due_at_ms, timer_id LIMIT ?3",
                    )?;
                    select
                        .query_map(params![name, now_ms, limit], |row| {
                            let stored: String = row.get(1)?;
                            let timer: Timer = serde_json::from_str(&stored).map_err(|err| {
                                rusqlite::Error::FromSqlConversionFailure(1, Type::Text, err.into())
                            })?;
                            Ok((row.get::<_, String>(0)?, timer, row.get::<_, u32>(2)?))
                        })?
                        .collect::<Result<Vec<_>, _>>()?
                };
                let mut taken = Vec::with_capacity(due.len());
                for (timer_id, timer, takes) in due {
                    let takes = takes.saturating_add(1);
                    let receipt = format!("{timer_id}#{takes}");
                    transaction.execute(
                        "UPDATE timers SET takes = ?3, visible_at_ms = ?4, receipt = ?5
                         WHERE queue = ?1 AND timer_id = ?2",
                        params![name, timer_id, takes, hidden_until, receipt],
                    )?;
                    taken.push(DueTimer { timer, receipt });
                }
                transaction.commit()?;
                Ok(taken)
            })
            .await
            .map_err(|err| self.failed("take", err))
    }
}

fn to_sql(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[async_trait]
impl Timers for SqliteTimers {
    #[tracing::instrument(level = "debug", skip_all, fields(timers = %self.name, timer_id = %timer.timer_id))]
    async fn schedule(&self, timer: &Timer) -> Result<(), QueueError> {
        let name = self.name.clone();
        let id = timer.timer_id.clone();
        let due = to_sql(timer.due_at_ms);
        // The whole timer is stored, so a take hands back exactly what was scheduled.
        let stored = serde_json::to_string(timer)
            .map_err(|err| QueueError::new("encoding a timer as JSON", err))?;
        self.db
            .run(move |connection| {
                connection.execute(
                    "INSERT INTO timers (queue, timer_id, due_at_ms, timer) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (queue, timer_id) DO NOTHING",
                    params![name, id, due, stored],
                )
            })
            .await
            .map_err(|err| self.failed("schedule", err))?;
        self.db.queue_changed().notify_waiters();
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(timers = %self.name, max, wait = ?wait))]
    async fn take_due(
        &self, now_ms: u64, max: usize, wait: Duration,
    ) -> Result<Vec<DueTimer>, QueueError> {
        let now = to_sql(now_ms);
        poll_until_found(&self.db, max, wait, |waited| {
            self.try_take(now.saturating_add(millis(waited)), max)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(timers = %self.name))]
    async fn ack(&self, receipt: &str) -> Result<(), QueueError> {
        self.delete_where(
            "ack",
            "DELETE FROM timers WHERE queue = ?1 AND receipt = ?2",
            receipt,
        )
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(timers = %self.name, timer_id = %timer_id))]
    async fn cancel(&self, timer_id: &str) -> Result<(), QueueError> {
        self.delete_where(
            "cancel",
            "DELETE FROM timers WHERE queue = ?1 AND timer_id = ?2",
            timer_id,
        )
        .await
    }
}
