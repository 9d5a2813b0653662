//! Test support: SDK clients wired to the local AWS emulator (`moto_server` on loopback).
//!
//! `infra/test` starts the emulator and exports its address as `CLAWLESS_TEST_AWS_ENDPOINT`;
//! tests that need AWS build their clients here and fail (never skip) without it. The SDK
//! configuration is fully explicit (static credentials, region, endpoint), so no credential or
//! region provider chain runs and nothing ever asks EC2 instance metadata (IMDS).
//!
//! [`RequestCounter`] counts the HTTP requests a client sends, so tests can pin how many calls
//! an operation costs (pagination, caching, requests per turn). Every client here has a
//! counting twin; one counter may be attached to clients of several services.
//!
//! [`fresh_table`] ([`dynamodb_on_fresh_table`] with its client) and [`fresh_fifo_queue`] create the DynamoDB table and SQS FIFO queue the
//! session, inbox and turn-queue adapters expect, under unique names; [`fresh_standard_queue`]
//! the timer queue, and [`unique_queue_prefix`] a prefix for per-node queues;
//! [`fresh_schedule_group`] a schedule group for the Scheduler adapter.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_s3::Client;
use aws_sdk_s3::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_s3::config::{
    ConfigBag, Credentials, Intercept, RuntimeComponents, SharedCredentialsProvider,
};
use aws_sdk_s3::error::BoxError;

/// Environment variable holding the emulator's base URL, e.g. `http://127.0.0.1:45123`.
pub const ENDPOINT_ENV: &str = "CLAWLESS_TEST_AWS_ENDPOINT";

/// Region every test client uses.
pub const TEST_REGION: &str = "us-east-1";

/// The emulator's endpoint from [`ENDPOINT_ENV`].
///
/// # Panics
/// When the variable is unset or empty: AWS adapter tests must run against the emulator,
/// and silently skipping them would hide regressions.
pub fn moto_endpoint() -> String {
    match std::env::var(ENDPOINT_ENV) {
        Ok(endpoint) if !endpoint.trim().is_empty() => endpoint.trim().to_owned(),
        _ => panic!(
            "{ENDPOINT_ENV} is not set. S3/DynamoDB/SQS tests need moto: run them through infra/test \
             (or start `moto_server -H 127.0.0.1 -p PORT` and export \
             {ENDPOINT_ENV}=http://127.0.0.1:PORT AWS_EC2_METADATA_DISABLED=true)"
        ),
    }
}

/// SDK configuration for the emulator: endpoint from [`ENDPOINT_ENV`], static `test`
/// credentials, region `us-east-1`, latest behaviour version. Nothing is read from the
/// environment or profile files besides the endpoint, and IMDS is never consulted.
///
/// # Panics
/// When [`ENDPOINT_ENV`] is unset (see [`moto_endpoint`]).
pub async fn moto_sdk_config() -> SdkConfig {
    let credentials = Credentials::new("test", "test", None, None, "clawless-test-static");
    SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(TEST_REGION))
        .credentials_provider(SharedCredentialsProvider::new(credentials))
        .endpoint_url(moto_endpoint())
        .build()
}

fn s3_config(config: &SdkConfig) -> aws_sdk_s3::config::Builder {
    // Path-style addressing: `http://127.0.0.1:PORT/bucket/key`, since bucket subdomains of
    // an IP address do not resolve.
    aws_sdk_s3::config::Builder::from(config).force_path_style(true)
}

/// An S3 client for the emulator (path-style addressing).
pub fn s3_client(config: &SdkConfig) -> Client {
    Client::from_conf(s3_config(config).build())
}

/// An S3 client for the emulator that counts every HTTP request it sends (retries included).
pub fn s3_client_counting(config: &SdkConfig) -> (Client, RequestCounter) {
    let counter = RequestCounter::default();
    let client = Client::from_conf(s3_config(config).interceptor(counter.clone()).build());
    (client, counter)
}

/// A DynamoDB client for the emulator.
pub fn dynamodb_client(config: &SdkConfig) -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::new(config)
}

/// A DynamoDB client for the emulator that counts every HTTP request it sends.
pub fn dynamodb_client_counting(config: &SdkConfig) -> (aws_sdk_dynamodb::Client, RequestCounter) {
    let counter = RequestCounter::default();
    (dynamodb_client_with_counter(config, &counter), counter)
}

/// A DynamoDB client for the emulator whose requests add to `counter`.
pub fn dynamodb_client_with_counter(
    config: &SdkConfig, counter: &RequestCounter,
) -> aws_sdk_dynamodb::Client {
    let conf = aws_sdk_dynamodb::config::Builder::from(config)
        .interceptor(counter.clone())
        .build();
    aws_sdk_dynamodb::Client::from_conf(conf)
}

/// An SQS client for the emulator.
pub fn sqs_client(config: &SdkConfig) -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(config)
}

/// An SQS client for the emulator that counts every HTTP request it sends.
pub fn sqs_client_counting(config: &SdkConfig) -> (aws_sdk_sqs::Client, RequestCounter) {
    let counter = RequestCounter::default();
    (sqs_client_with_counter(config, &counter), counter)
}

/// An SQS client for the emulator whose requests add to `counter`.
pub fn sqs_client_with_counter(
    config: &SdkConfig, counter: &RequestCounter,
) -> aws_sdk_sqs::Client {
    let conf = aws_sdk_sqs::config::Builder::from(config)
        .interceptor(counter.clone())
        .build();
    aws_sdk_sqs::Client::from_conf(conf)
}

/// An EventBridge Scheduler client for the emulator.
pub fn scheduler_client(config: &SdkConfig) -> aws_sdk_scheduler::Client {
    aws_sdk_scheduler::Client::new(config)
}

/// An EventBridge Scheduler client for the emulator whose requests add to `counter`.
pub fn scheduler_client_with_counter(
    config: &SdkConfig, counter: &RequestCounter,
) -> aws_sdk_scheduler::Client {
    let conf = aws_sdk_scheduler::config::Builder::from(config)
        .interceptor(counter.clone())
        .build();
    aws_sdk_scheduler::Client::from_conf(conf)
}

/// Creates a schedule group under a unique name and returns the name (schedules of parallel
/// tests and earlier runs on the same emulator never meet).
///
/// # Panics
/// When the emulator refuses (a test setup failure).
pub async fn fresh_schedule_group(client: &aws_sdk_scheduler::Client) -> String {
    let name = format!("clawless-test-{}", unique_suffix());
    if let Err(err) = client.create_schedule_group().name(&name).send().await {
        panic!(
            "creating test schedule group {name} failed: {}",
            aws_sdk_scheduler::error::DisplayErrorContext(err)
        );
    }
    name
}

/// The ARN of the queue at `queue_url`.
///
/// # Panics
/// When the emulator refuses or answers without one (a test setup failure).
pub async fn queue_arn(client: &aws_sdk_sqs::Client, queue_url: &str) -> String {
    use aws_sdk_sqs::types::QueueAttributeName;
    let output = client
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap_or_else(|err| {
            panic!(
                "reading the ARN of {queue_url} failed: {}",
                aws_sdk_sqs::error::DisplayErrorContext(err)
            )
        });
    output
        .attributes()
        .and_then(|attributes| attributes.get(&QueueAttributeName::QueueArn))
        .cloned()
        .unwrap_or_else(|| panic!("{queue_url} has no ARN"))
}

/// An STS client for the emulator.
pub fn sts_client(config: &SdkConfig) -> aws_sdk_sts::Client {
    aws_sdk_sts::Client::new(config)
}

/// SDK configuration for the emulator signed with `credentials` (e.g. vended ones) instead
/// of the static `test` pair.
///
/// # Panics
/// When [`ENDPOINT_ENV`] is unset (see [`moto_endpoint`]).
pub fn moto_sdk_config_with(credentials: Credentials) -> SdkConfig {
    SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(TEST_REGION))
        .credentials_provider(SharedCredentialsProvider::new(credentials))
        .endpoint_url(moto_endpoint())
        .build()
}

/// Creates a standard queue with a `visibility_timeout` (whole seconds, rounded up) under a
/// unique name and returns its URL (the timer queue's shape).
///
/// # Panics
/// When the emulator refuses (a test setup failure).
pub async fn fresh_standard_queue(
    client: &aws_sdk_sqs::Client, visibility_timeout: Duration,
) -> String {
    use aws_sdk_sqs::types::QueueAttributeName;
    let name = format!("clawless-test-{}", unique_suffix());
    let seconds = visibility_timeout.as_secs() + u64::from(visibility_timeout.subsec_nanos() > 0);
    let created = client
        .create_queue()
        .queue_name(&name)
        .attributes(QueueAttributeName::VisibilityTimeout, seconds.to_string())
        .send()
        .await;
    match created {
        Ok(output) => output
            .queue_url()
            .unwrap_or_else(|| panic!("creating test queue {name} returned no URL"))
            .to_owned(),
        Err(err) => panic!(
            "creating test queue {name} failed: {}",
            aws_sdk_sqs::error::DisplayErrorContext(err)
        ),
    }
}

/// A queue-name prefix unique to one test (`t<pid><time>-<n>-`), so node queues of parallel
/// tests and earlier runs on the same emulator never meet; short, as node queue names must fit
/// SQS's 80 characters.
pub fn unique_queue_prefix() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos());
    format!(
        "t{:x}{nanos:x}-{}-",
        std::process::id() & 0xffff,
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// An S3 client for the emulator whose requests add to `counter`.
pub fn s3_client_with_counter(config: &SdkConfig, counter: &RequestCounter) -> Client {
    Client::from_conf(s3_config(config).interceptor(counter.clone()).build())
}

/// A DynamoDB client on the emulator and a [`fresh_table`] made with it.
///
/// # Panics
/// As [`moto_sdk_config`] and [`fresh_table`] do.
pub async fn dynamodb_on_fresh_table() -> (aws_sdk_dynamodb::Client, String) {
    let client = dynamodb_client(&moto_sdk_config().await);
    let table = fresh_table(&client).await;
    (client, table)
}

/// Creates the sessions table as the adapters expect it (string keys `pk` and `sk`,
/// on-demand billing, TTL on `expires_at`) under a unique name, and returns the name.
///
/// # Panics
/// When the emulator refuses (a test setup failure).
pub async fn fresh_table(client: &aws_sdk_dynamodb::Client) -> String {
    use aws_sdk_dynamodb::types::{
        AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
        TimeToLiveSpecification,
    };
    let name = format!("clawless-test-{}", unique_suffix());
    let definitions = ["pk", "sk"].map(|attribute| {
        AttributeDefinition::builder()
            .attribute_name(attribute)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .expect("attribute definition has its required fields")
    });
    let schema = [("pk", KeyType::Hash), ("sk", KeyType::Range)].map(|(attribute, kind)| {
        KeySchemaElement::builder()
            .attribute_name(attribute)
            .key_type(kind)
            .build()
            .expect("key schema element has its required fields")
    });
    if let Err(err) = client
        .create_table()
        .table_name(&name)
        .set_attribute_definitions(Some(definitions.to_vec()))
        .set_key_schema(Some(schema.to_vec()))
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await
    {
        panic!(
            "creating test table {name} failed: {}",
            aws_sdk_dynamodb::error::DisplayErrorContext(err)
        );
    }
    let ttl = TimeToLiveSpecification::builder()
        .attribute_name(crate::dynamo::EXPIRES_AT)
        .enabled(true)
        .build()
        .expect("TTL specification has its required fields");
    if let Err(err) = client
        .update_time_to_live()
        .table_name(&name)
        .time_to_live_specification(ttl)
        .send()
        .await
    {
        panic!(
            "enabling TTL on test table {name} failed: {}",
            aws_sdk_dynamodb::error::DisplayErrorContext(err)
        );
    }
    name
}

/// Visibility timeout of [`fresh_fifo_queue`].
pub const TEST_VISIBILITY_TIMEOUT: Duration = Duration::from_secs(30);

/// Creates a FIFO queue (content-based deduplication off, a [`TEST_VISIBILITY_TIMEOUT`])
/// under a unique name and returns its URL.
///
/// # Panics
/// When the emulator refuses (a test setup failure).
pub async fn fresh_fifo_queue(client: &aws_sdk_sqs::Client) -> String {
    fresh_fifo_queue_with_visibility(client, TEST_VISIBILITY_TIMEOUT).await
}

/// Like [`fresh_fifo_queue`], with messages invisible for `visibility_timeout` (whole
/// seconds, rounded up) after each receive.
///
/// # Panics
/// When the emulator refuses (a test setup failure).
pub async fn fresh_fifo_queue_with_visibility(
    client: &aws_sdk_sqs::Client, visibility_timeout: Duration,
) -> String {
    use aws_sdk_sqs::types::QueueAttributeName;
    let name = format!("clawless-test-{}.fifo", unique_suffix());
    let seconds = visibility_timeout.as_secs() + u64::from(visibility_timeout.subsec_nanos() > 0);
    let created = client
        .create_queue()
        .queue_name(&name)
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::ContentBasedDeduplication, "false")
        .attributes(QueueAttributeName::VisibilityTimeout, seconds.to_string())
        .send()
        .await;
    match created {
        Ok(output) => output
            .queue_url()
            .unwrap_or_else(|| panic!("creating test queue {name} returned no URL"))
            .to_owned(),
        Err(err) => panic!(
            "creating test queue {name} failed: {}",
            aws_sdk_sqs::error::DisplayErrorContext(err)
        ),
    }
}

/// `<pid>-<time>-<n>`: unique per call within a process and across processes.
fn unique_suffix() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos());
    format!(
        "{}-{nanos:x}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Creates a bucket named `<name_prefix>-<unique suffix>` and returns its name, so tests can
/// share one emulator without seeing each other's objects.
///
/// # Panics
/// When the emulator refuses to create it (a test setup failure).
pub async fn fresh_bucket(client: &Client, name_prefix: &str) -> String {
    let name = unique_bucket_name(name_prefix);
    if let Err(err) = client.create_bucket().bucket(&name).send().await {
        panic!(
            "creating test bucket {name} failed: {}",
            aws_sdk_s3::error::DisplayErrorContext(err)
        );
    }
    name
}

/// `<prefix>-<pid>-<time>-<n>`, lowercased and cut to S3's 63-character limit.
fn unique_bucket_name(name_prefix: &str) -> String {
    let suffix = unique_suffix();
    let prefix: String = name_prefix
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .take(63 - suffix.len() - 1)
        .collect();
    let prefix = prefix.trim_matches('-');
    let prefix = if prefix.is_empty() { "test" } else { prefix };
    format!("{prefix}-{suffix}")
}

/// Counts the HTTP requests sent by the clients it is attached to. Clones share the count.
///
/// Counts in `read_before_transmit`, which runs once per attempt, so a retried call counts
/// each try.
#[derive(Debug, Clone, Default)]
pub struct RequestCounter {
    sent: Arc<AtomicUsize>,
}

impl RequestCounter {
    /// Requests sent since creation or the last [`reset`](Self::reset).
    pub fn count(&self) -> usize {
        self.sent.load(Ordering::SeqCst)
    }

    /// Sets the count back to zero.
    pub fn reset(&self) {
        self.sent.store(0, Ordering::SeqCst);
    }
}

impl Intercept for RequestCounter {
    fn name(&self) -> &'static str {
        "clawless::RequestCounter"
    }

    fn read_before_transmit(
        &self, _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents, _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.sent.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names_are_valid_and_unique() {
        let first = unique_bucket_name("Contract_Suite");
        let second = unique_bucket_name("Contract_Suite");
        assert_ne!(first, second);
        assert!(first.starts_with("contract-suite-"), "{first}");
        let long = unique_bucket_name(&"x".repeat(100));
        assert!(long.len() <= 63, "{long}");
        for name in [first, long, unique_bucket_name("--")] {
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{name}"
            );
            assert!(!name.starts_with('-') && !name.ends_with('-'), "{name}");
        }
    }
}
