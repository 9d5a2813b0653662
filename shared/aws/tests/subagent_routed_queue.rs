//! `SubagentRoutedTurnQueue` over two `SqsTurnQueue`s, through the real AWS SDK against
//! `moto_server` on loopback (started by `infra/test`): a sub-agent session's event lands on
//! the sub-agent queue and every other on the main queue, as a raw SDK receive sees them;
//! receipts from either queue acknowledge on the right one; and the routed queue passes the
//! turn-queue contract. These tests fail, never skip, when the emulator is not there.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sqs::types::MessageSystemAttributeName;
use clawless_aws::testing::{
    fresh_fifo_queue, fresh_fifo_queue_with_visibility, moto_sdk_config, sqs_client,
};
use clawless_aws::{SqsTurnQueue, SubagentRoutedTurnQueue};
use clawless_core::session::{QueuedMessage, TurnQueue};
use clawless_core::testing::{QueueDeviations, turn_queue_contract};

const MAIN_SESSION: &str = "agent:main:main";
const CHILD_SESSION: &str = "agent:main:subagent:3f2b8c1e-5d4a-4f6b-9a7c-0e1d2c3b4a59";

fn message(group: &str, dedup_id: &str, body: &str) -> QueuedMessage {
    QueuedMessage {
        group: group.into(),
        dedup_id: dedup_id.into(),
        body: body.into(),
    }
}

fn routed(
    client: &aws_sdk_sqs::Client, main_url: &str, child_url: &str,
) -> SubagentRoutedTurnQueue {
    SubagentRoutedTurnQueue::new(
        Arc::new(SqsTurnQueue::new(client.clone(), main_url)),
        Arc::new(SqsTurnQueue::new(client.clone(), child_url)),
    )
}

/// (group, body) of everything on `url`, taken with a raw SDK receive and left in flight.
async fn raw_messages(client: &aws_sdk_sqs::Client, url: &str) -> Vec<(String, String)> {
    let received = client
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId)
        .send()
        .await
        .expect("raw receive");
    received
        .messages()
        .iter()
        .map(|message| {
            let group = message
                .attributes()
                .and_then(|attributes| attributes.get(&MessageSystemAttributeName::MessageGroupId))
                .cloned()
                .unwrap_or_default();
            (group, message.body().unwrap_or_default().to_owned())
        })
        .collect()
}

#[tokio::test]
async fn a_sub_agent_sessions_event_lands_on_the_sub_agent_queue_and_others_on_the_main_queue() {
    // GIVEN a main and a sub-agent FIFO queue on moto, and the routed queue over them
    let config = moto_sdk_config().await;
    let client = sqs_client(&config);
    let main_url = fresh_fifo_queue(&client).await;
    let child_url = fresh_fifo_queue(&client).await;
    let queue = routed(&client, &main_url, &child_url);

    // WHEN an event of the main session and one of a child are sent through it
    queue
        .send(&message(MAIN_SESSION, "telegram:1", "for the main session"))
        .await
        .unwrap();
    queue
        .send(&message(CHILD_SESSION, "subagent-start:1", "for the child"))
        .await
        .unwrap();

    // THEN each queue holds exactly its own session's event, under the session's group
    assert_eq!(
        raw_messages(&client, &main_url).await,
        [(MAIN_SESSION.to_owned(), "for the main session".to_owned())]
    );
    assert_eq!(
        raw_messages(&client, &child_url).await,
        [(CHILD_SESSION.to_owned(), "for the child".to_owned())]
    );
}

#[tokio::test]
async fn deliveries_from_both_queues_are_acknowledged_on_the_queue_they_came_from() {
    // GIVEN one event on each queue, sent through the routed queue
    let config = moto_sdk_config().await;
    let client = sqs_client(&config);
    let main_url = fresh_fifo_queue_with_visibility(&client, Duration::from_secs(2)).await;
    let child_url = fresh_fifo_queue_with_visibility(&client, Duration::from_secs(2)).await;
    let queue = routed(&client, &main_url, &child_url);
    queue
        .send(&message(MAIN_SESSION, "m-1", "main"))
        .await
        .unwrap();
    queue
        .send(&message(CHILD_SESSION, "c-1", "child"))
        .await
        .unwrap();

    // WHEN the routed queue receives both and deletes them
    let deliveries = queue.receive(10, Duration::from_secs(2)).await.unwrap();
    let mut bodies: Vec<&str> = deliveries.iter().map(|d| d.body.as_str()).collect();
    bodies.sort_unstable();
    assert_eq!(bodies, ["child", "main"]);
    for delivery in &deliveries {
        queue.delete(&delivery.receipt).await.unwrap();
    }

    // THEN neither comes back once the visibility timeout has passed
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(raw_messages(&client, &main_url).await.is_empty());
    assert!(raw_messages(&client, &child_url).await.is_empty());

    // AND a released child event returns on the sub-agent queue, counted again
    queue
        .send(&message(CHILD_SESSION, "c-2", "child again"))
        .await
        .unwrap();
    let first = queue.receive(1, Duration::from_secs(2)).await.unwrap();
    assert_eq!(first.len(), 1);
    queue
        .release(&first[0].receipt, Duration::ZERO)
        .await
        .unwrap();
    let again = queue.receive(1, Duration::from_secs(2)).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(
        (again[0].body.as_str(), again[0].receive_count),
        ("child again", 2)
    );
}

/// moto forgets a deduplication id once its message is deleted (see `sqs_turn_queue.rs`).
const MOTO: QueueDeviations = QueueDeviations {
    dedup_forgets_deleted_messages: true,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_routed_queue_passes_the_turn_queue_contract() {
    let config = moto_sdk_config().await;
    let client = sqs_client(&config);
    turn_queue_contract(
        |visibility| {
            let client = client.clone();
            async move {
                let main_url = fresh_fifo_queue_with_visibility(&client, visibility).await;
                let child_url = fresh_fifo_queue_with_visibility(&client, visibility).await;
                Box::new(routed(&client, &main_url, &child_url)) as Box<dyn TurnQueue>
            }
        },
        MOTO,
    )
    .await;
}
