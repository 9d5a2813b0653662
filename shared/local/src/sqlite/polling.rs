//! What the SQLite queues ([`SqliteTurnQueue`](super::SqliteTurnQueue),
//! [`SqliteExecQueue`](super::SqliteExecQueue), [`SqliteTimers`](super::SqliteTimers)) share:
//! times as they are stored (wall-clock milliseconds), receipts of the form
//! `<message id>.<receive count>`, and waiting for messages by polling, woken early when this
//! process sends.

use std::future::Future;
use std::time::{Duration, Instant};

use clawless_core::session::QueueError;
use rusqlite::{Transaction, params};

use super::SqliteDb;

/// How often a waiting receive or take looks again for messages other processes sent or that
/// became visible.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// `duration` in whole milliseconds, saturating.
pub(super) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// Wall-clock milliseconds: visibility and deduplication times are stored in the file, so
/// they must mean the same after a restart.
pub(super) fn now_ms() -> i64 {
    i64::try_from(clawless_base::clock::system_now_ms()).unwrap_or(i64::MAX)
}

/// Calls `look` with the time waited so far until it finds something, `max` is 0, or `wait`
/// has passed. Between looks it sleeps up to [`POLL_INTERVAL`], waking at once when this
/// process changes a queue of `db`.
pub(super) async fn poll_until_found<T, Look, Found>(
    db: &SqliteDb, max: usize, wait: Duration, mut look: Look,
) -> Result<Vec<T>, QueueError>
where
    Look: FnMut(Duration) -> Found,
    Found: Future<Output = Result<Vec<T>, QueueError>>,
{
    let started = Instant::now();
    loop {
        // Registered before looking, so a send between the look and the wait still wakes us.
        let changed = db.queue_changed().notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let found = look(started.elapsed()).await?;
        let waited = started.elapsed();
        if !found.is_empty() || max == 0 || waited >= wait {
            return Ok(found);
        }
        tokio::select! {
            () = &mut changed => {}
            () = tokio::time::sleep(POLL_INTERVAL.min(wait - waited)) => {}
        }
    }
}

/// Counts one more receive of message `id` and hides it until `hidden_until_ms`, with
/// `update_sql` (parameters: id, receive count, visible-at, receipt). Returns the new receipt
/// and receive count.
pub(super) fn mark_received(
    transaction: &Transaction<'_>, update_sql: &str, id: i64, previous_count: u32,
    hidden_until_ms: i64,
) -> rusqlite::Result<(String, u32)> {
    let receive_count = previous_count.saturating_add(1);
    let receipt = format!("{id}.{receive_count}");
    transaction.execute(
        update_sql,
        params![id, receive_count, hidden_until_ms, receipt],
    )?;
    Ok((receipt, receive_count))
}

/// The message id a receipt names, if it has the form [`mark_received`] gives.
pub(super) fn receipt_message_id(receipt: &str) -> Option<i64> {
    receipt.split_once('.').and_then(|(id, _)| id.parse().ok())
}
