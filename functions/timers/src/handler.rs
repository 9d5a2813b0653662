//! Translates a timer-queue batch into fired or re-chained timers, and reports the records
//! SQS must deliver again: a timer that could not be forwarded, and a message that is not a
//! timer at all (after the queue's `maxReceiveCount` it lands in the dead-letter queue for a
//! person to see; deleting it would lose whatever it was).

use std::future::Future;

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use clawless_core::timers::Timer;
use clawless_runtime::nodes_service::{NodesError, NodesService, TimerFired};

/// Handles one batch; the response lists the message ids SQS must deliver again.
pub(crate) async fn handle(nodes: &NodesService, event: SqsEvent) -> SqsBatchResponse {
    handle_with(event, |timer| async move { nodes.fire_timer(&timer).await }).await
}

/// [`handle`] with the per-timer step passed in.
async fn handle_with<F, Fut>(event: SqsEvent, mut fire: F) -> SqsBatchResponse
where
    F: FnMut(Timer) -> Fut,
    Fut: Future<Output = Result<TimerFired, NodesError>>,
{
    let mut failures = Vec::new();
    for record in event.records {
        let id = record.message_id.unwrap_or_default();
        let body = record.body.unwrap_or_default();
        let timer: Timer = match serde_json::from_str(&body) {
            Ok(timer) => timer,
            Err(err) => {
                tracing::error!(message_id = %id, error = %err, "not a timer; left for the dead-letter queue");
                failures.push(failure(id));
                continue;
            }
        };
        let timer_id = timer.timer_id.clone();
        match fire(timer).await {
            Ok(fired) => tracing::info!(message_id = %id, %timer_id, ?fired, "timer handled"),
            Err(err) => {
                tracing::warn!(message_id = %id, %timer_id, error = %err, "timer will be retried");
                failures.push(failure(id));
            }
        }
    }
    let mut response = SqsBatchResponse::default();
    response.batch_item_failures = failures;
    response
}

fn failure(id: String) -> BatchItemFailure {
    let mut failure = BatchItemFailure::default();
    failure.item_identifier = id;
    failure
}

#[cfg(test)]
mod tests {
    use aws_lambda_events::event::sqs::SqsMessage;
    use clawless_core::nodes::NodeStoreError;
    use clawless_core::turn::events::{SessionEvent, TurnEvent};

    use super::*;

    fn timer(id: &str) -> Timer {
        Timer {
            timer_id: id.to_owned(),
            due_at_ms: 1_000,
            event: SessionEvent {
                session_key: "agent:main:main".to_owned(),
                agent_id: "main".to_owned(),
                event: TurnEvent::ApprovalTimeout {
                    call_id: format!("call-{id}"),
                },
            },
        }
    }

    fn record(id: &str, body: &str) -> SqsMessage {
        let mut message = SqsMessage::default();
        message.message_id = Some(id.to_owned());
        message.body = Some(body.to_owned());
        message
    }

    fn failed_ids(response: &SqsBatchResponse) -> Vec<&str> {
        response
            .batch_item_failures
            .iter()
            .map(|failure| failure.item_identifier.as_str())
            .collect()
    }

    #[tokio::test]
    async fn only_records_that_could_not_be_handled_are_delivered_again() {
        // GIVEN a batch: a timer that fires, one whose forwarding fails, a message that is
        // not a timer, and a timer that is rescheduled
        let mut event = SqsEvent::default();
        event.records = vec![
            record("m1", &serde_json::to_string(&timer("ok")).unwrap()),
            record("m2", &serde_json::to_string(&timer("broken")).unwrap()),
            record("m3", "{\"not\": \"a timer\"}"),
            record("m4", &serde_json::to_string(&timer("early")).unwrap()),
        ];
        let mut seen = Vec::new();
        // WHEN the batch is handled
        let response = handle_with(event, |timer| {
            seen.push(timer.timer_id.clone());
            async move {
                match timer.timer_id.as_str() {
                    "broken" => Err(NodesError::Store(NodeStoreError::Unavailable {
                        message: "DynamoDB unreachable".to_owned(),
                        source: None,
                    })),
                    "early" => Ok(TimerFired::Rescheduled),
                    _ => Ok(TimerFired::Forwarded),
                }
            }
        })
        .await;
        // THEN every timer was tried, in order, and exactly the failed and unreadable
        // records come back
        assert_eq!(seen, ["ok", "broken", "early"]);
        assert_eq!(failed_ids(&response), ["m2", "m3"]);
    }
}
