//! Translates an SQS batch into turn events and reports the ones to retry.
//!
//! Records of one session arrive in order (FIFO group = session key). Once a record fails,
//! the later records of the same group are reported failed too without being processed, so
//! a redelivery keeps them in order.

use std::collections::HashSet;

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use clawless_runtime::turn_service::TurnService;
use clawless_runtime::turn_worker::{Processed, process_event};

/// Handles one batch; the response lists the message ids SQS must deliver again.
pub(crate) async fn handle(turns: &TurnService, event: SqsEvent) -> SqsBatchResponse {
    let mut failed_groups: HashSet<String> = HashSet::new();
    let mut failures = Vec::new();
    for record in event.records {
        let id = record.message_id.clone().unwrap_or_default();
        let group = record
            .attributes
            .get("MessageGroupId")
            .cloned()
            .unwrap_or_default();
        if failed_groups.contains(&group) {
            failures.push(failure(id));
            continue;
        }
        let body = record.body.as_deref().unwrap_or("");
        match process_event(turns, body).await {
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
