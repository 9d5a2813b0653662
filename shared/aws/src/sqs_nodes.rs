//! [`SqsExecQueue`] and [`SqsTimers`]: the per-node exec queues and the durable timers on
//! SQS standard queues.
//!
//! Owns the node queue naming (`<prefix>node-<id>` and its dead-letter queue
//! `<prefix>node-<id>-dlq`), the redrive policy, and timer chaining: a timer message carries
//! its due time, is sent with the largest `DelaySeconds` that does not overshoot it, and is
//! re-sent whenever it arrives early (see [`timer_redelivery_within`]). SDK errors are kept as
//! the source.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::SdkError;
use aws_sdk_sqs::operation::create_queue::CreateQueueError;
use aws_sdk_sqs::operation::delete_queue::DeleteQueueError;
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use clawless_core::nodes::{ExecDelivery, ExecQueue, MAX_RECEIVE_COUNT, is_valid_node_id};
use clawless_core::session::QueueError;
use clawless_core::timers::timer_redelivery_within;
use clawless_core::timers::{DueTimer, MAX_TIMER_DELAY, Timer, Timers};

use crate::sqs::{
    MAX_MESSAGES_PER_RECEIVE, MAX_VISIBILITY_SECONDS, MAX_WAIT_SECONDS, approximate_receive_count,
    ceil_secs, delete_message, seconds_i32,
};

/// Longest queue name SQS allows.
const MAX_QUEUE_NAME_LEN: usize = 80;
/// Suffix of a node queue's dead-letter queue.
const DLQ_SUFFIX: &str = "-dlq";
/// How long dead letters are kept (SQS's maximum, 14 days), longer than the node queue's
/// 4-day default, so a job never expires in the dead-letter queue before it could be looked at.
const DLQ_RETENTION_SECONDS: u32 = 14 * 24 * 60 * 60;

/// The queue URL of a node queue's dead-letter queue: SQS URLs end with the queue name.
fn dlq_url(queue_url: &str) -> String {
    format!("{queue_url}{DLQ_SUFFIX}")
}

/// Per-node exec queues on SQS standard queues.
///
/// - `create_node_queue(id)` creates `<prefix>node-<id>-dlq` (14-day retention), reads its
///   ARN, then creates `<prefix>node-<id>` with a redrive policy to it
///   (`maxReceiveCount` [`MAX_RECEIVE_COUNT`]), and returns the queue URL. `CreateQueue` is
///   idempotent for equal attributes; if SQS still says the name exists (attributes changed
///   by hand), the existing queue's URL is returned.
/// - `delete_node_queue(url)` deletes the queue and `<url>-dlq`; a queue already gone is fine.
///   SQS refuses to re-create a deleted queue's name for 60 seconds.
/// - `receive` long-polls with `WaitTimeSeconds` = `wait` (whole seconds, rounded up, at most
///   20), `VisibilityTimeout` = `visibility` (whole seconds, rounded up, at most 12 hours) and
///   at most 10 messages, asking for `ApproximateReceiveCount`.
/// - `send` is `SendMessage`, `delete` is `DeleteMessage`.
#[derive(Debug, Clone)]
pub struct SqsExecQueue {
    client: Client,
    name_prefix: String,
}

impl SqsExecQueue {
    /// Node queues named `<name_prefix>node-<id>`, using `client`. The prefix (e.g. the stack
    /// name and a `-`) keeps deployments in one account apart and lets IAM policies match
    /// `<prefix>node-*`.
    pub fn new(client: Client, name_prefix: impl Into<String>) -> Self {
        Self {
            client,
            name_prefix: name_prefix.into(),
        }
    }

    /// The name of `node_id`'s queue (its dead-letter queue adds `-dlq`).
    pub fn queue_name(&self, node_id: &str) -> String {
        format!("{}node-{node_id}", self.name_prefix)
    }

    fn failed(
        &self, action: &str, queue: &str, err: impl std::error::Error + Send + Sync + 'static,
    ) -> QueueError {
        QueueError::new(format!("SQS {action} on {queue} failed"), err)
    }

    /// Creates `name` with `attributes`, or finds it when it exists with other attributes.
    async fn create_queue(
        &self, name: &str, attributes: Vec<(QueueAttributeName, String)>,
    ) -> Result<String, QueueError> {
        let mut request = self.client.create_queue().queue_name(name);
        for (attribute, value) in attributes {
            request = request.attributes(attribute, value);
        }
        match request.send().await {
            Ok(output) => output.queue_url().map(str::to_owned).ok_or_else(|| {
                QueueError::bare(format!("SQS CreateQueue of {name} returned no URL"))
            }),
            Err(SdkError::ServiceError(context))
                if matches!(context.err(), CreateQueueError::QueueNameExists(_)) =>
            {
                tracing::warn!(queue = name, "queue exists with other attributes; using it");
                let output = self
                    .client
                    .get_queue_url()
                    .queue_name(name)
                    .send()
                    .await
                    .map_err(|err| self.failed("GetQueueUrl", name, err))?;
                output.queue_url().map(str::to_owned).ok_or_else(|| {
                    QueueError::bare(format!("SQS GetQueueUrl of {name} returned no URL"))
                })
            }
            Err(err) => Err(self.failed("CreateQueue", name, err)),
        }
    }

    async fn queue_arn(&self, url: &str) -> Result<String, QueueError> {
        let output = self
            .client
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(|err| self.failed("GetQueueAttributes", url, err))?;
        output
            .attributes()
            .and_then(|attributes| attributes.get(&QueueAttributeName::QueueArn))
            .cloned()
            .ok_or_else(|| {
                QueueError::bare(format!("SQS GetQueueAttributes of {url} returned no ARN"))
            })
    }

    async fn delete_queue(&self, url: &str) -> Result<(), QueueError> {
        match self.client.delete_queue().queue_url(url).send().await {
            Ok(_) => Ok(()),
            Err(SdkError::ServiceError(context))
                if matches!(context.err(), DeleteQueueError::QueueDoesNotExist(_)) =>
            {
                Ok(())
            }
            Err(err) => Err(self.failed("DeleteQueue", url, err)),
        }
    }
}

#[async_trait]
impl ExecQueue for SqsExecQueue {
    #[tracing::instrument(level = "debug", skip_all, fields(node_id))]
    async fn create_node_queue(&self, node_id: &str) -> Result<String, QueueError> {
        if !is_valid_node_id(node_id) {
            return Err(QueueError::bare(format!(
                "{node_id:?} is not a valid node id"
            )));
        }
        let name = self.queue_name(node_id);
        let dlq_name = format!("{name}{DLQ_SUFFIX}");
        if dlq_name.len() > MAX_QUEUE_NAME_LEN {
            return Err(QueueError::bare(format!(
                "queue name {dlq_name:?} is longer than SQS's {MAX_QUEUE_NAME_LEN} characters"
            )));
        }
        let dlq_url = self
            .create_queue(
                &dlq_name,
                vec![(
                    QueueAttributeName::MessageRetentionPeriod,
                    DLQ_RETENTION_SECONDS.to_string(),
                )],
            )
            .await?;
        let dlq_arn = self.queue_arn(&dlq_url).await?;
        let redrive = serde_json::json!({
            "deadLetterTargetArn": dlq_arn,
            "maxReceiveCount": MAX_RECEIVE_COUNT.to_string(),
        });
        self.create_queue(
            &name,
            vec![(QueueAttributeName::RedrivePolicy, redrive.to_string())],
        )
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(queue))]
    async fn delete_node_queue(&self, queue: &str) -> Result<(), QueueError> {
        self.delete_queue(queue).await?;
        self.delete_queue(&dlq_url(queue)).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(queue))]
    async fn send(&self, queue: &str, body: &str) -> Result<(), QueueError> {
        self.client
            .send_message()
            .queue_url(queue)
            .message_body(body)
            .send()
            .await
            .map_err(|err| self.failed("SendMessage", queue, err))?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(queue, max, wait = ?wait))]
    async fn receive(
        &self, queue: &str, max: usize, wait: Duration, visibility: Duration,
    ) -> Result<Vec<ExecDelivery>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let max = i32::try_from(max.min(MAX_MESSAGES_PER_RECEIVE)).unwrap_or(1);
        let output = self
            .client
            .receive_message()
            .queue_url(queue)
            .max_number_of_messages(max)
            .wait_time_seconds(seconds_i32(wait, MAX_WAIT_SECONDS))
            .visibility_timeout(seconds_i32(visibility, MAX_VISIBILITY_SECONDS))
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .await
            .map_err(|err| self.failed("ReceiveMessage", queue, err))?;
        let mut deliveries = Vec::new();
        for message in output.messages() {
            let Some(receipt) = message.receipt_handle() else {
                return Err(QueueError::bare(format!(
                    "SQS ReceiveMessage on {queue} returned a message without a receipt handle"
                )));
            };
            let receive_count = approximate_receive_count(message);
            deliveries.push(ExecDelivery {
                body: message.body().unwrap_or_default().to_owned(),
                receipt: receipt.to_owned(),
                receive_count,
            });
        }
        tracing::debug!(received = deliveries.len(), "received");
        Ok(deliveries)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(queue))]
    async fn delete(&self, queue: &str, receipt: &str) -> Result<(), QueueError> {
        delete_message(&self.client, queue, receipt)
            .await
            .map_err(|err| self.failed("DeleteMessage", queue, err))
    }
}

/// Visibility timeout of [`SqsTimers::new`]: how long a taken timer stays hidden before it is
/// handed out again unless acked.
const DEFAULT_TIMER_VISIBILITY: Duration = Duration::from_secs(60);

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The message body of `timer` on the timer queue: the timer as JSON. [`SqsTimers`] sends it,
/// the Scheduler adapter makes it a schedule's input, and the `timers` function reads it.
pub(crate) fn timer_body(timer: &Timer) -> Result<String, QueueError> {
    serde_json::to_string(timer).map_err(|err| QueueError::new("encoding a timer as JSON", err))
}

/// Durable timers on one SQS standard queue (the timer queue; give it a dead-letter queue in
/// the template so a message that can never be read ends there).
///
/// - `schedule` sends the timer as JSON with `DelaySeconds` = [`timer_redelivery_within`] of
///   its due time against the wall clock (0 when due).
/// - `take_due` receives (long polling, at most 10), and for each message: a timer not yet
///   due by the caller's clock (plus the time spent waiting) is sent again with the remaining
///   delay and the original deleted (chaining, so hours-long timers need no compute while
///   they wait); a due timer is handed out, hidden for the visibility timeout until acked. It
///   keeps receiving until a timer is due or `wait` has passed. A message that is not a timer
///   is left alone for the queue's redrive policy, with a warning.
/// - `ack` deletes the message. Scheduling one id twice sends two messages: SQS standard
///   queues do not deduplicate, so consumers rely on the turn queue's deduplication id.
/// - `cancel` does nothing: a delayed message cannot be withdrawn, so a cancelled timer still
///   fires, and handlers check that a firing is still wanted.
#[derive(Debug, Clone)]
pub struct SqsTimers {
    client: Client,
    queue_url: String,
    max_delay: Duration,
    visibility_timeout: Duration,
}

impl SqsTimers {
    /// Timers on the standard queue at `queue_url`, chaining in steps of at most
    /// [`MAX_TIMER_DELAY`] and hiding taken timers for 60 s.
    pub fn new(client: Client, queue_url: impl Into<String>) -> Self {
        Self {
            client,
            queue_url: queue_url.into(),
            max_delay: MAX_TIMER_DELAY,
            visibility_timeout: DEFAULT_TIMER_VISIBILITY,
        }
    }

    /// Chains in steps of at most `max_delay` (capped at [`MAX_TIMER_DELAY`]; tests chain in
    /// seconds).
    pub fn with_max_delay(mut self, max_delay: Duration) -> Self {
        self.max_delay = max_delay.min(MAX_TIMER_DELAY);
        self
    }

    /// Hides taken timers for `visibility_timeout` unless acked.
    pub fn with_visibility_timeout(mut self, visibility_timeout: Duration) -> Self {
        self.visibility_timeout = visibility_timeout;
        self
    }

    /// The timer queue's URL.
    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }

    fn failed(
        &self, action: &str, err: impl std::error::Error + Send + Sync + 'static,
    ) -> QueueError {
        QueueError::new(
            format!("SQS {action} on timer queue {} failed", self.queue_url),
            err,
        )
    }

    async fn send_timer(&self, body: &str, delay: Option<Duration>) -> Result<(), QueueError> {
        let delay_seconds = delay.map_or(0, |delay| seconds_i32(delay, MAX_TIMER_DELAY.as_secs()));
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .delay_seconds(delay_seconds)
            .send()
            .await
            .map_err(|err| self.failed("SendMessage", err))?;
        Ok(())
    }

    /// One receive: the due timers it found; early ones are chained. The caller's clock is
    /// `now_ms` at `started`; messages are judged by it once the receive returns.
    async fn receive_once(
        &self, now_ms: u64, started: Instant, max: usize, wait: Duration,
    ) -> Result<Vec<DueTimer>, QueueError> {
        let max = i32::try_from(max.min(MAX_MESSAGES_PER_RECEIVE)).unwrap_or(1);
        let output = self
            .client
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(max)
            .wait_time_seconds(seconds_i32(wait, MAX_WAIT_SECONDS))
            .visibility_timeout(seconds_i32(self.visibility_timeout, MAX_VISIBILITY_SECONDS))
            .send()
            .await
            .map_err(|err| self.failed("ReceiveMessage", err))?;
        let now_ms = now_ms.saturating_add(millis(started.elapsed()));
        let mut due = Vec::new();
        for message in output.messages() {
            let (Some(receipt), Some(body)) = (message.receipt_handle(), message.body()) else {
                continue;
            };
            let timer: Timer = match serde_json::from_str(body) {
                Ok(timer) => timer,
                Err(err) => {
                    // Deleting it would lose whatever it was; after the queue's
                    // maxReceiveCount it moves to the dead-letter queue for a person to see.
                    tracing::warn!(error = %err, "timer queue message is not a timer; leaving it");
                    continue;
                }
            };
            if let Some(delay) = timer_redelivery_within(timer.due_at_ms, now_ms, self.max_delay) {
                // Send the copy before deleting the original: a crash in between fires the
                // timer twice, never never.
                self.send_timer(body, Some(delay)).await?;
                delete_message(&self.client, &self.queue_url, receipt)
                    .await
                    .map_err(|err| self.failed("DeleteMessage (chained timer)", err))?;
                tracing::debug!(timer_id = %timer.timer_id, delay = ?delay, "chained an early timer");
                continue;
            }
            due.push(DueTimer {
                timer,
                receipt: receipt.to_owned(),
            });
        }
        Ok(due)
    }
}

#[async_trait]
impl Timers for SqsTimers {
    #[tracing::instrument(level = "debug", skip_all, fields(queue = %self.queue_url, timer_id = %timer.timer_id))]
    async fn schedule(&self, timer: &Timer) -> Result<(), QueueError> {
        let body = timer_body(timer)?;
        let delay = timer_redelivery_within(
            timer.due_at_ms,
            clawless_base::clock::system_now_ms(),
            self.max_delay,
        );
        self.send_timer(&body, delay).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(queue = %self.queue_url, max, wait = ?wait))]
    async fn take_due(
        &self, now_ms: u64, max: usize, wait: Duration,
    ) -> Result<Vec<DueTimer>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let started = Instant::now();
        loop {
            let elapsed = started.elapsed();
            let remaining = wait.saturating_sub(elapsed);
            // Whole seconds, as SQS counts them.
            let poll = Duration::from_secs(ceil_secs(remaining));
            let due = self.receive_once(now_ms, started, max, poll).await?;
            if !due.is_empty() || started.elapsed() >= wait {
                return Ok(due);
            }
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(queue = %self.queue_url))]
    async fn ack(&self, receipt: &str) -> Result<(), QueueError> {
        delete_message(&self.client, &self.queue_url, receipt)
            .await
            .map_err(|err| self.failed("DeleteMessage", err))
    }

    /// Does nothing: a message sent with a delay cannot be withdrawn from SQS (only deleted
    /// once received, and finding it would mean receiving every timer). The timer fires
    /// anyway, and whoever handles it checks that it is still wanted.
    #[tracing::instrument(level = "debug", skip_all, fields(queue = %self.queue_url, timer_id = %timer_id))]
    async fn cancel(&self, timer_id: &str) -> Result<(), QueueError> {
        tracing::debug!("an SQS timer cannot be withdrawn; it will fire and be ignored");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_letter_queue_url_is_the_queue_url_with_the_suffix() {
        assert_eq!(
            dlq_url("https://sqs.eu-west-1.amazonaws.com/123456789012/app-node-n1"),
            "https://sqs.eu-west-1.amazonaws.com/123456789012/app-node-n1-dlq"
        );
    }
}
