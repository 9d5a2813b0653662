//! Consuming the turn queue: one event at a time per session, retried on failure.
//!
//! The Lambda function gets its batches from the SQS trigger and reports failed message ids
//! (SQS moves an event that keeps failing to the dead-letter queue); local mode polls the
//! embedded queue with [`run_worker`] and keeps retrying with backoff, so nothing is dropped
//! unless it can never be processed. Both call [`process_event`].

use std::sync::Arc;
use std::time::Duration;

use clawless_core::session::{Delivery, TurnQueue};
use clawless_core::turn::events::SessionEvent;

use crate::turn_service::{Deadline, TurnError, TurnService};

/// What became of one queued event.
#[derive(Debug, PartialEq, Eq)]
pub enum Processed {
    /// Done (or waiting on a node): acknowledge it.
    Done,
    /// Failed in a way a redelivery may fix: leave it on the queue.
    Retry(String),
    /// It can never be processed: acknowledge and log it.
    Dropped(String),
}

/// Decodes and handles one queued event body.
pub async fn process_event(turns: &TurnService, body: &str) -> Processed {
    process_event_until(turns, body, None).await
}

/// [`process_event`] within an invocation's `deadline` (a turn that yields is `Done`: its
/// continuation is on the queue).
pub async fn process_event_until(
    turns: &TurnService,
    body: &str,
    deadline: Option<&Deadline>,
) -> Processed {
    let event: SessionEvent = match serde_json::from_str(body) {
        Ok(event) => event,
        Err(err) => return Processed::Dropped(format!("undecodable turn event: {err}")),
    };
    match turns.handle_until(&event, deadline).await {
        Ok(report) => {
            tracing::info!(session = %event.session_key, ?report, "turn event handled");
            Processed::Done
        }
        Err(err) if err.is_permanent() => Processed::Dropped(err.to_string()),
        Err(err) => {
            tracing::warn!(session = %event.session_key, error = ?err, "turn event failed; will retry");
            Processed::Retry(describe(&err))
        }
    }
}

fn describe(err: &TurnError) -> String {
    err.to_string()
}

/// Backoff before the n-th redelivery: 1 s, 2 s, 4 s, … capped at 30 s.
pub fn retry_delay(receive_count: u32) -> Duration {
    let exponent = receive_count.saturating_sub(1).min(5);
    Duration::from_secs((1u64 << exponent).min(30))
}

/// How many events local mode handles at once (sessions run in parallel; the queue never
/// hands out two events of one session at once). OpenClaw's sub-agent lane allows 8.
pub const LOCAL_CONCURRENCY: usize = 8;

/// Polls `queue` until `shutdown` resolves, handling deliveries of different sessions
/// concurrently, up to [`LOCAL_CONCURRENCY`] at a time: a new event is taken as soon as a
/// slot is free, so one session's long model call never holds another session's message.
pub async fn run_worker(
    turns: Arc<TurnService>,
    queue: Arc<dyn TurnQueue>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let mut shutdown = std::pin::pin!(shutdown);
    let slots = Arc::new(tokio::sync::Semaphore::new(LOCAL_CONCURRENCY));
    let mut running = tokio::task::JoinSet::new();
    loop {
        // Reap finished handlers (their results are logged where they ran).
        while running.try_join_next().is_some() {}
        let free = slots.available_permits();
        if free == 0 {
            tokio::select! {
                () = &mut shutdown => break,
                _ = running.join_next() => continue,
            }
        }
        let receive = queue.receive(free, Duration::from_millis(500));
        let deliveries = tokio::select! {
            () = &mut shutdown => break,
            received = receive => received,
        };
        let deliveries = match deliveries {
            Ok(deliveries) => deliveries,
            Err(err) => {
                tracing::error!(error = ?err, "turn queue receive failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        for delivery in deliveries {
            let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
                break;
            };
            let turns = Arc::clone(&turns);
            let queue = Arc::clone(&queue);
            running.spawn(async move {
                handle_delivery(&turns, queue.as_ref(), delivery).await;
                drop(permit);
            });
        }
    }
    // Let the events in hand finish, as before a stop.
    while running.join_next().await.is_some() {}
}

async fn handle_delivery(turns: &TurnService, queue: &dyn TurnQueue, delivery: Delivery) {
    let outcome = process_event(turns, &delivery.body).await;
    let acknowledge = match &outcome {
        Processed::Done => true,
        Processed::Dropped(reason) => {
            tracing::error!(%reason, group = %delivery.group, "turn event dropped");
            true
        }
        Processed::Retry(_) => false,
    };
    let result = if acknowledge {
        queue.delete(&delivery.receipt).await
    } else {
        queue
            .release(&delivery.receipt, retry_delay(delivery.receive_count))
            .await
    };
    if let Err(err) = result {
        tracing::error!(error = ?err, "turn queue acknowledgement failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_exponentially_up_to_thirty_seconds() {
        let delays: Vec<u64> = (1..=8).map(|n| retry_delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30, 30]);
    }
}
