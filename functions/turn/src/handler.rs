//! Translates an SQS batch into turn events and reports the ones to retry.
//!
//! Records of one session arrive in order (FIFO group = session key). Once a record fails,
//! the later records of the same group are reported failed too without being processed, so
//! a redelivery keeps them in order; other sessions' records go on. A stop request (its own
//! group, `<session key>:stop`) is handled before the batch's other records.

use std::collections::HashSet;
use std::future::Future;

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use clawless_core::turn::events::STOP_GROUP_SUFFIX;
use clawless_runtime::turn_service::{Deadline, TurnService};
use clawless_runtime::turn_worker::{Processed, process_event_until};

/// Handles one batch within the invocation's `deadline` (a turn about to run past it queues
/// its continuation and counts as done); the response lists the message ids SQS must deliver
/// again.
pub(crate) async fn handle(
    turns: &TurnService, event: SqsEvent, deadline: Option<&Deadline>,
) -> SqsBatchResponse {
    handle_with(event, |body| async move {
        process_event_until(turns, &body, deadline).await
    })
    .await
}

/// [`handle`] with the per-record processing passed in.
async fn handle_with<F, Fut>(event: SqsEvent, mut process: F) -> SqsBatchResponse
where
    F: FnMut(String) -> Fut,
    Fut: Future<Output = Processed>,
{
    let mut failed_groups: HashSet<String> = HashSet::new();
    let mut failures = Vec::new();
    // A stop request goes first: it must not wait behind the turn it stops.
    let (stops, others): (Vec<_>, Vec<_>) = event.records.into_iter().partition(|record| {
        record
            .attributes
            .get("MessageGroupId")
            .is_some_and(|group| group.ends_with(STOP_GROUP_SUFFIX))
    });
    for record in stops.into_iter().chain(others) {
        let id = record.message_id.unwrap_or_default();
        let group = record
            .attributes
            .get("MessageGroupId")
            .cloned()
            .unwrap_or_default();
        if failed_groups.contains(&group) {
            failures.push(failure(id));
            continue;
        }
        match process(record.body.unwrap_or_default()).await {
            Processed::Done => {}
            Processed::Dropped(reason) => {
                tracing::error!(message_id = %id, %reason, "turn event dropped");
            }
            Processed::Retry(reason) => {
                tracing::warn!(message_id = %id, %reason, "turn event will be retried");
                failed_groups.insert(group);
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
    use std::collections::HashMap;

    use aws_lambda_events::event::sqs::SqsMessage;

    use super::*;

    fn record(id: &str, group: &str, body: &str) -> SqsMessage {
        let mut message = SqsMessage::default();
        message.message_id = Some(id.to_owned());
        message.body = Some(body.to_owned());
        message.attributes = HashMap::from([("MessageGroupId".to_owned(), group.to_owned())]);
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
    async fn a_failed_record_holds_back_the_rest_of_its_session_only() {
        // GIVEN a batch where the first record of session A fails
        let mut event = SqsEvent::default();
        event.records = vec![
            record("a1", "A", "retry"),
            record("b1", "B", "ok"),
            record("a2", "A", "ok"),
            record("b2", "B", "drop"),
        ];
        let mut seen = Vec::new();
        // WHEN the batch is handled
        let response = handle_with(event, |body| {
            seen.push(body.clone());
            async move {
                match body.as_str() {
                    "retry" => Processed::Retry("model unavailable".to_owned()),
                    "drop" => Processed::Dropped("undecodable".to_owned()),
                    _ => Processed::Done,
                }
            }
        })
        .await;
        // THEN a1 and (unprocessed) a2 are retried; B is processed, its dropped record acknowledged
        assert_eq!(failed_ids(&response), ["a1", "a2"]);
        assert_eq!(seen, ["retry", "ok", "drop"]);
    }

    #[tokio::test]
    async fn a_stop_request_is_handled_before_the_rest_of_its_batch() {
        let mut event = SqsEvent::default();
        event.records = vec![
            record("a1", "agent:main:main", "slow turn"),
            record("b1", "agent:main:other", "other"),
            record("s1", &format!("agent:main:main{STOP_GROUP_SUFFIX}"), "stop"),
        ];
        let mut seen = Vec::new();
        handle_with(event, |body| {
            seen.push(body);
            async { Processed::Done }
        })
        .await;
        assert_eq!(seen, ["stop", "slow turn", "other"]);
    }

    #[tokio::test]
    async fn a_clean_batch_reports_no_failures() {
        let mut event = SqsEvent::default();
        event.records = vec![record("a1", "A", "ok"), record("a2", "A", "ok")];
        let response = handle_with(event, |_| async { Processed::Done }).await;
        assert!(response.batch_item_failures.is_empty());
    }
}
