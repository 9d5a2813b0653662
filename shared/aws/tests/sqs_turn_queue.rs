//! `SqsTurnQueue` through the real AWS SDK against `moto_server` on loopback (started by
//! `infra/test`): the shared turn-queue contract, the wire shape of what is sent, the request
//! counts, and exactly where moto's FIFO emulation differs from SQS.
//! These tests fail, never skip, when the emulator is not there.

use std::time::Duration;

use aws_sdk_sqs::types::MessageSystemAttributeName;
use clawless_aws::SqsTurnQueue;
use clawless_aws::testing::{
    fresh_fifo_queue, fresh_fifo_queue_with_visibility, moto_sdk_config, sqs_client,
    sqs_client_counting,
};
use clawless_core::session::TurnQueue;
use clawless_core::testing::{QueueDeviations, queued_message, turn_queue_contract};

/// moto 5.x deduplicates FIFO sends only against messages still in the queue (see
/// `moto_forgets_a_dedup_id_once_its_message_is_deleted`); real SQS remembers an id for five
/// minutes. Everything else in the contract holds on moto as on SQS.
const MOTO: QueueDeviations = QueueDeviations {
    dedup_forgets_deleted_messages: true,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_turn_queue_passes_the_turn_queue_contract() {
    let config = moto_sdk_config().await;
    let client = sqs_client(&config);
    turn_queue_contract(
        |visibility| {
            let client = client.clone();
            async move {
                let url = fresh_fifo_queue_with_visibility(&client, visibility).await;
                Box::new(SqsTurnQueue::new(client, url)) as Box<dyn TurnQueue>
            }
        },
        MOTO,
    )
    .await;
}

#[tokio::test]
async fn sends_carry_group_and_dedup_ids_and_odd_groups_travel_as_an_attribute() {
    let config = moto_sdk_config().await;
    let client = sqs_client(&config);
    let url = fresh_fifo_queue(&client).await;
    let queue = SqsTurnQueue::new(client.clone(), url.clone());
    queue
        .send(&queued_message("agent:main:main", "telegram:1", "plain"))
        .await
        .unwrap();
    queue
        .send(&queued_message(
            "agent:main:generic:group:ünï",
            "telegram:2",
            "odd",
        ))
        .await
        .unwrap();

    let raw = client
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .message_attribute_names("All")
        .send()
        .await
        .unwrap();
    let mut seen = Vec::new();
    for raw in raw.messages() {
        let system = raw.attributes().unwrap();
        let group_attribute = raw
            .message_attributes()
            .and_then(|map| map.get("clawless-group"))
            .and_then(|value| value.string_value())
            .map(str::to_owned);
        seen.push((
            raw.body().unwrap().to_owned(),
            system[&MessageSystemAttributeName::MessageGroupId].clone(),
            system
                .get(&MessageSystemAttributeName::MessageDeduplicationId)
                .cloned(),
            group_attribute,
        ));
    }
    seen.sort();
    assert_eq!(
        seen,
        vec![
            (
                "odd".into(),
                "agent:main:generic:group:%C3%BCn%C3%AF".into(),
                Some("telegram:2".into()),
                Some("agent:main:generic:group:ünï".into())
            ),
            (
                "plain".into(),
                "agent:main:main".into(),
                Some("telegram:1".into()),
                None
            ),
        ]
    );
}

#[tokio::test]
async fn each_operation_is_one_request_and_receive_asks_for_at_most_ten() {
    let config = moto_sdk_config().await;
    let (client, requests) = sqs_client_counting(&config);
    let url = fresh_fifo_queue(&client).await;
    let queue = SqsTurnQueue::new(client, url);
    for index in 0..12 {
        queue
            .send(&queued_message(
                &format!("agent:main:g{index}"),
                &format!("d{index}"),
                "x",
            ))
            .await
            .unwrap();
    }
    requests.reset();
    let batch = queue.receive(50, Duration::from_secs(1)).await.unwrap();
    assert_eq!(requests.count(), 1);
    assert!(!batch.is_empty() && batch.len() <= 10, "{}", batch.len());
    queue.delete(&batch[0].receipt).await.unwrap();
    queue
        .release(&batch[1].receipt, Duration::from_millis(1))
        .await
        .unwrap();
    assert_eq!(requests.count(), 3);
    assert!(
        queue
            .receive(0, Duration::from_secs(5))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(requests.count(), 3, "max 0 sends nothing");
}

#[tokio::test]
async fn a_missing_queue_is_an_error_with_the_sdk_error_as_source() {
    let config = moto_sdk_config().await;
    let client = sqs_client(&config);
    let url = fresh_fifo_queue(&client).await;
    let missing = url.replace(".fifo", "-gone.fifo");
    let queue = SqsTurnQueue::new(client, missing);
    let err = queue
        .send(&queued_message("agent:main:main", "d", "x"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("SendMessage"), "{err}");
    assert!(std::error::Error::source(&err).is_some());
}

/// Pins the one FIFO behaviour moto does not emulate, so the contract's `MOTO` deviation is
/// revisited when moto changes: real SQS drops a repeated deduplication id for five minutes
/// after the first send, moto only while the first message is still in the queue.
#[tokio::test]
async fn moto_forgets_a_dedup_id_once_its_message_is_deleted() {
    let config = moto_sdk_config().await;
    let client = sqs_client(&config);
    let queue = SqsTurnQueue::new(client.clone(), fresh_fifo_queue(&client).await);
    queue
        .send(&queued_message("g", "same", "first"))
        .await
        .unwrap();
    queue
        .send(&queued_message("g", "same", "while queued"))
        .await
        .unwrap();
    let first = queue.receive(10, Duration::from_secs(1)).await.unwrap();
    assert_eq!(
        first.len(),
        1,
        "dropped while the first is queued: {first:?}"
    );
    queue
        .send(&queued_message("g", "same", "while in flight"))
        .await
        .unwrap();
    queue.delete(&first[0].receipt).await.unwrap();
    assert!(
        queue
            .receive(10, Duration::from_secs(1))
            .await
            .unwrap()
            .is_empty(),
        "dropped while the first is in flight"
    );

    queue
        .send(&queued_message("g", "same", "after delete"))
        .await
        .unwrap();
    let after = queue.receive(10, Duration::from_secs(1)).await.unwrap();
    let bodies: Vec<_> = after
        .iter()
        .map(|delivery| delivery.body.as_str())
        .collect();
    assert_eq!(
        bodies,
        vec!["after delete"],
        "moto accepts the repeat once the first is deleted (SQS would drop it); if this \
         fails, moto now keeps the window and `MOTO` in this file can be relaxed"
    );
}
