//! [`SqsTurnQueue`]: the turn queue port on an SQS FIFO queue.
//!
//! Owns the translation between the port and SQS: message group and deduplication ids (made
//! valid for SQS when the port's are not), long polling, receive counts, deletes and
//! visibility changes. SDK errors are kept as the source.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::SdkError;
use aws_sdk_sqs::operation::delete_message::DeleteMessageError;
use aws_sdk_sqs::types::{Message, MessageAttributeValue, MessageSystemAttributeName};
use clawless_core::session::{Delivery, QueueError, QueuedMessage, TurnQueue};
use sha2::{Digest, Sha256};

/// SQS returns at most this many messages per receive.
pub(crate) const MAX_MESSAGES_PER_RECEIVE: usize = 10;
/// Longest long poll SQS allows, in seconds.
pub(crate) const MAX_WAIT_SECONDS: u64 = 20;
/// Longest visibility timeout SQS allows, in seconds (12 hours).
pub(crate) const MAX_VISIBILITY_SECONDS: u64 = 43_200;
/// Longest group or deduplication id SQS allows.
const MAX_ID_LEN: usize = 128;
/// Message attribute carrying the port's group when SQS's `MessageGroupId` had to differ.
const GROUP_ATTRIBUTE: &str = "clawless-group";

/// The turn queue port on one SQS FIFO queue.
///
/// - `send` is `SendMessage` with `MessageGroupId` = the group and `MessageDeduplicationId` =
///   the dedup id. Both must be at most 128 characters of ASCII letters, digits and
///   punctuation for SQS; ids that are not (session keys with spaces or non-ASCII chat ids,
///   long platform ids) are sent as [`sqs_id`] makes them, and the original group travels
///   in the `clawless-group` message attribute so deliveries still name it. The queue's
///   deduplication scope should be the queue (the default) and content-based deduplication
///   off.
/// - `receive` long-polls with `WaitTimeSeconds` = `wait` in whole seconds, rounded up and
///   capped at 20, for at most 10 messages (SQS's maximum), asking for
///   `ApproximateReceiveCount` and `MessageGroupId`. SQS may return several messages of one
///   group in one batch, in order.
/// - `delete` is `DeleteMessage`; `release` is `ChangeMessageVisibility` to `delay` in whole
///   seconds, rounded up and capped at 12 hours.
/// - Bodies must be text SQS accepts: JSON from `serde_json` is, unless it carries the
///   noncharacters U+FFFE or U+FFFF.
#[derive(Debug, Clone)]
pub struct SqsTurnQueue {
    client: Client,
    queue_url: String,
}

impl SqsTurnQueue {
    /// A queue on the FIFO queue at `queue_url`, using `client`.
    pub fn new(client: Client, queue_url: impl Into<String>) -> Self {
        Self {
            client,
            queue_url: queue_url.into(),
        }
    }

    /// The queue's URL.
    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }

    fn failed(
        &self, action: &str, err: impl std::error::Error + Send + Sync + 'static,
    ) -> QueueError {
        QueueError::new(format!("SQS {action} on {} failed", self.queue_url), err)
    }
}

/// Whole seconds, rounded up.
pub(crate) fn ceil_secs(duration: Duration) -> u64 {
    duration.as_secs() + u64::from(duration.subsec_nanos() > 0)
}

pub(crate) fn seconds_i32(duration: Duration, cap: u64) -> i32 {
    i32::try_from(ceil_secs(duration).min(cap)).unwrap_or(i32::MAX)
}

/// A received message's `ApproximateReceiveCount`, 1 when SQS left it out or it is unreadable.
pub(crate) fn approximate_receive_count(message: &Message) -> u32 {
    message
        .attributes()
        .and_then(|map| map.get(&MessageSystemAttributeName::ApproximateReceiveCount))
        .and_then(|count| count.parse().ok())
        .unwrap_or(1)
}

/// Deletes the message `receipt` names from the queue at `queue_url`.
pub(crate) async fn delete_message(
    client: &Client, queue_url: &str, receipt: &str,
) -> Result<(), SdkError<DeleteMessageError>> {
    client
        .delete_message()
        .queue_url(queue_url)
        .receipt_handle(receipt)
        .send()
        .await?;
    Ok(())
}

/// A group or deduplication id SQS accepts, standing for `id`.
///
/// Ids of at most 128 characters from SQS's alphabet (ASCII letters, digits, punctuation)
/// other than `%` pass unchanged. Others are percent-encoded byte by byte (`%` included),
/// and if that is still over 128 characters, replaced by `%h` and the SHA-256 of `id` in
/// hex: a form no encoded id takes, since `%` is always followed by two hex digits there.
/// Distinct ids thus stay distinct (up to SHA-256 collisions).
pub fn sqs_id(id: &str) -> String {
    let allowed = |byte: u8| byte.is_ascii_graphic() && byte != b'%';
    if id.len() <= MAX_ID_LEN && !id.is_empty() && id.bytes().all(allowed) {
        return id.to_owned();
    }
    let mut encoded = String::with_capacity(id.len());
    for byte in id.bytes() {
        if allowed(byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    if !encoded.is_empty() && encoded.len() <= MAX_ID_LEN {
        return encoded;
    }
    let digest = Sha256::digest(id.as_bytes());
    let mut hashed = String::with_capacity(2 + 64);
    hashed.push_str("%h");
    for byte in digest {
        hashed.push_str(&format!("{byte:02x}"));
    }
    hashed
}

#[async_trait]
impl TurnQueue for SqsTurnQueue {
    #[tracing::instrument(level = "debug", skip_all, fields(queue = %self.queue_url, group = %message.group))]
    async fn send(&self, message: &QueuedMessage) -> Result<(), QueueError> {
        let group_id = sqs_id(&message.group);
        let mut request = self
            .client
            .send_message()
            .queue_url(&self.queue_url)
            .message_group_id(&group_id)
            .message_deduplication_id(sqs_id(&message.dedup_id))
            .message_body(&message.body);
        if group_id != message.group {
            let attribute = MessageAttributeValue::builder()
                .data_type("String")
                .string_value(&message.group)
                .build()
                .map_err(|err| self.failed("SendMessage (group attribute)", err))?;
            request = request.message_attributes(GROUP_ATTRIBUTE, attribute);
        }
        request
            .send()
            .await
            .map_err(|err| self.failed("SendMessage", err))?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(queue = %self.queue_url, max, wait = ?wait))]
    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let max = i32::try_from(max.min(MAX_MESSAGES_PER_RECEIVE)).unwrap_or(1);
        let output = self
            .client
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(max)
            .wait_time_seconds(seconds_i32(wait, MAX_WAIT_SECONDS))
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId)
            .message_attribute_names(GROUP_ATTRIBUTE)
            .send()
            .await
            .map_err(|err| self.failed("ReceiveMessage", err))?;
        let mut deliveries = Vec::new();
        for message in output.messages() {
            let Some(receipt) = message.receipt_handle() else {
                return Err(QueueError::bare(format!(
                    "SQS ReceiveMessage on {} returned a message without a receipt handle",
                    self.queue_url
                )));
            };
            let attributes = message.attributes();
            let system = |name: MessageSystemAttributeName| {
                attributes
                    .and_then(|map| map.get(&name))
                    .map(String::as_str)
            };
            let group = message
                .message_attributes()
                .and_then(|map| map.get(GROUP_ATTRIBUTE))
                .and_then(|value| value.string_value())
                .or_else(|| system(MessageSystemAttributeName::MessageGroupId))
                .unwrap_or_default()
                .to_owned();
            let receive_count = approximate_receive_count(message);
            deliveries.push(Delivery {
                receipt: receipt.to_owned(),
                group,
                body: message.body().unwrap_or_default().to_owned(),
                receive_count,
            });
        }
        tracing::debug!(received = deliveries.len(), "received");
        Ok(deliveries)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(queue = %self.queue_url))]
    async fn delete(&self, receipt: &str) -> Result<(), QueueError> {
        delete_message(&self.client, &self.queue_url, receipt)
            .await
            .map_err(|err| self.failed("DeleteMessage", err))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(queue = %self.queue_url, delay = ?delay))]
    async fn release(&self, receipt: &str, delay: Duration) -> Result<(), QueueError> {
        self.client
            .change_message_visibility()
            .queue_url(&self.queue_url)
            .receipt_handle(receipt)
            .visibility_timeout(seconds_i32(delay, MAX_VISIBILITY_SECONDS))
            .send()
            .await
            .map_err(|err| self.failed("ChangeMessageVisibility", err))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_ids_pass_unchanged() {
        for id in [
            "agent:main:main",
            "agent:main:generic:group:42",
            "Ev01ABC-x_y.z+1!",
        ] {
            assert_eq!(sqs_id(id), id);
        }
        assert_eq!(sqs_id(&"a".repeat(128)), "a".repeat(128));
    }

    #[test]
    fn other_ids_are_encoded_or_hashed_and_stay_distinct() {
        assert_eq!(sqs_id("a b"), "a%20b");
        assert_eq!(sqs_id("50%"), "50%25");
        assert_eq!(sqs_id("ü"), "%C3%BC");
        assert_eq!(sqs_id(""), sqs_id(""));
        assert!(sqs_id("").starts_with("%h"));
        let long_a = format!("{}-1", "x".repeat(140));
        let long_b = format!("{}-2", "x".repeat(140));
        let (a, b) = (sqs_id(&long_a), sqs_id(&long_b));
        assert_ne!(a, b);
        for id in [a, b, sqs_id("ünï code/x"), sqs_id(&"ü".repeat(100))] {
            assert!(id.len() <= MAX_ID_LEN, "{id}");
            assert!(id.bytes().all(|byte| byte.is_ascii_graphic()), "{id}");
        }
    }

    #[test]
    fn waits_and_delays_round_up_to_whole_seconds_within_sqs_limits() {
        assert_eq!(seconds_i32(Duration::ZERO, 20), 0);
        assert_eq!(seconds_i32(Duration::from_millis(1), 20), 1);
        assert_eq!(seconds_i32(Duration::from_millis(1500), 20), 2);
        assert_eq!(seconds_i32(Duration::from_secs(60), 20), 20);
        assert_eq!(
            seconds_i32(Duration::from_secs(u64::MAX), MAX_VISIBILITY_SECONDS),
            43_200
        );
    }
}
