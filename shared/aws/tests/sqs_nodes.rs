//! `SqsExecQueue` and `SqsTimers` through the real AWS SDK against `moto_server` on loopback
//! (started by `infra/test`): the shared contracts, the queues and redrive policy as created,
//! dead letters landing in the dead-letter queue, and timers chained past the delay limit.
//! These tests fail, never skip, when the emulator is not there.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_sdk_sqs::types::QueueAttributeName;
use clawless_aws::testing::{
    fresh_standard_queue, moto_sdk_config, sqs_client, sqs_client_counting, unique_queue_prefix,
};
use clawless_aws::{SqsExecQueue, SqsTimers};
use clawless_core::nodes::ExecQueue;
use clawless_core::testing::{
    CONTRACT_TIMER_VISIBILITY, TimersDeviations, exec_queue_contract, sample_session_event,
    timers_contract,
};
use clawless_core::timers::{Timer, Timers};

/// SQS standard queues do not deduplicate: a timer scheduled twice is delivered twice; and a
/// delayed message cannot be withdrawn: a cancelled timer still fires.
const SQS_TIMERS: TimersDeviations = TimersDeviations {
    schedule_is_not_idempotent: true,
    cancel_does_not_withdraw: true,
};

fn wall_ms() -> u64 {
    let elapsed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970");
    u64::try_from(elapsed.as_millis()).expect("milliseconds fit u64")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_exec_queue_passes_the_exec_queue_contract() {
    let config = moto_sdk_config().await;
    let queues = SqsExecQueue::new(sqs_client(&config), unique_queue_prefix());
    exec_queue_contract(&queues).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_timers_pass_the_timers_contract() {
    let config = moto_sdk_config().await;
    let client = sqs_client(&config);
    timers_contract(
        || {
            let client = client.clone();
            async move {
                let url = fresh_standard_queue(&client, Duration::from_secs(30)).await;
                Box::new(
                    SqsTimers::new(client, url).with_visibility_timeout(CONTRACT_TIMER_VISIBILITY),
                ) as Box<dyn Timers>
            }
        },
        SQS_TIMERS,
    )
    .await;
}

#[tokio::test]
async fn a_node_queue_is_named_for_its_node_and_redrives_to_its_dead_letter_queue() {
    // GIVEN a node queue
    let config = moto_sdk_config().await;
    let client = sqs_client(&config);
    let prefix = unique_queue_prefix();
    let queues = SqsExecQueue::new(client.clone(), &prefix);
    let url = queues.create_node_queue("n1").await.unwrap();

    // THEN it and its dead-letter queue have the documented names and policy
    assert!(url.ends_with(&format!("/{prefix}node-n1")), "{url}");
    let dlq_url = client
        .get_queue_url()
        .queue_name(format!("{prefix}node-n1-dlq"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    assert_eq!(dlq_url, format!("{url}-dlq"));
    let attributes = client
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::RedrivePolicy)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap();
    let redrive: serde_json::Value =
        serde_json::from_str(&attributes[&QueueAttributeName::RedrivePolicy]).unwrap();
    assert!(
        redrive["deadLetterTargetArn"]
            .as_str()
            .unwrap()
            .ends_with(&format!(":{prefix}node-n1-dlq")),
        "{redrive}"
    );
    assert_eq!(
        redrive["maxReceiveCount"].to_string().trim_matches('"'),
        "5"
    );
    let dlq_retention = client
        .get_queue_attributes()
        .queue_url(&dlq_url)
        .attribute_names(QueueAttributeName::MessageRetentionPeriod)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap();
    assert_eq!(
        dlq_retention[&QueueAttributeName::MessageRetentionPeriod],
        "1209600"
    );

    // WHEN a job is received five times and never deleted
    queues.send(&url, "poison").await.unwrap();
    for _ in 0..5 {
        let got = queues
            .receive(&url, 1, Duration::from_secs(2), Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(got.len(), 1);
    }
    assert!(
        queues
            .receive(&url, 1, Duration::from_secs(1), Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );

    // THEN it waits in the dead-letter queue
    let dead = client
        .receive_message()
        .queue_url(&dlq_url)
        .wait_time_seconds(1)
        .send()
        .await
        .unwrap();
    let bodies: Vec<_> = dead.messages().iter().filter_map(|m| m.body()).collect();
    assert_eq!(bodies, vec!["poison"]);

    // AND deleting the node queue deletes both
    queues.delete_node_queue(&url).await.unwrap();
    assert!(
        client
            .get_queue_url()
            .queue_name(format!("{prefix}node-n1-dlq"))
            .send()
            .await
            .is_err()
    );
}

#[tokio::test]
async fn queue_names_that_would_exceed_eighty_characters_are_refused_before_any_request() {
    let config = moto_sdk_config().await;
    let (client, requests) = sqs_client_counting(&config);
    let queues = SqsExecQueue::new(client, "p".repeat(40));
    let err = queues.create_node_queue(&"n".repeat(40)).await.unwrap_err();
    assert!(err.to_string().contains("80"), "{err}");
    assert_eq!(requests.count(), 0);
}

#[tokio::test]
async fn a_timer_beyond_the_delay_limit_is_chained_until_due() {
    // GIVEN timers that chain in steps of one second, and a timer due in 3.5 s
    let config = moto_sdk_config().await;
    let (client, requests) = sqs_client_counting(&config);
    let url = fresh_standard_queue(&client, Duration::from_secs(30)).await;
    let timers = SqsTimers::new(client, url).with_max_delay(Duration::from_secs(1));
    let due_at = wall_ms() + 3_500;
    let timer = Timer {
        timer_id: "deadline:j1:1".into(),
        due_at_ms: due_at,
        event: sample_session_event("call-1"),
    };
    requests.reset();
    timers.schedule(&timer).await.unwrap();

    // WHEN taken until it comes
    let started = Instant::now();
    let mut taken = Vec::new();
    while taken.is_empty() && started.elapsed() < Duration::from_secs(15) {
        taken = timers
            .take_due(wall_ms(), 10, Duration::from_secs(2))
            .await
            .unwrap();
    }

    // THEN it comes once due, unchanged, after being re-sent along the way
    assert_eq!(taken.len(), 1);
    assert!(wall_ms() >= due_at, "never early");
    assert_eq!(taken[0].timer, timer);
    timers.ack(&taken[0].receipt).await.unwrap();
    let sends_and_more = requests.count();
    assert!(
        sends_and_more > 2 * 2,
        "the first send plus at least two chained re-sends (send + delete each) and the \
         receives: {sends_and_more} requests"
    );
}

#[tokio::test]
async fn a_message_that_is_not_a_timer_is_left_for_the_redrive_policy() {
    let config = moto_sdk_config().await;
    let client = sqs_client(&config);
    let url = fresh_standard_queue(&client, Duration::from_secs(30)).await;
    client
        .send_message()
        .queue_url(&url)
        .message_body("not a timer")
        .send()
        .await
        .unwrap();
    let timers = SqsTimers::new(client.clone(), &url);
    let taken = timers
        .take_due(wall_ms(), 10, Duration::from_secs(1))
        .await
        .unwrap();
    assert!(taken.is_empty());
    let attributes = client
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap();
    assert_eq!(
        attributes[&QueueAttributeName::ApproximateNumberOfMessagesNotVisible],
        "1",
        "it was received, not deleted"
    );
}
