//! clawless AWS adapters: the core's ports implemented on AWS services.
//!
//! - [`S3ObjectStore`]: the [`ObjectStore`](clawless_base::object_store::ObjectStore) port on
//!   one S3 bucket (skills, workspace files, large transcript blobs).
//! - [`S3MediaLinks`]: the [`MediaLinks`](clawless_base::media_links::MediaLinks) port as
//!   presigned S3 GET URLs (reply files the generic channel hands out by link).
//! - [`DynamoSessionStore`] and [`DynamoInbox`]: the
//!   [`SessionStore`](clawless_core::session::SessionStore) and
//!   [`Inbox`](clawless_core::session::Inbox) ports on one DynamoDB table (layout in
//!   [`dynamo`]).
//! - [`SqsTurnQueue`]: the [`TurnQueue`](clawless_core::session::TurnQueue) port on an SQS
//!   FIFO queue, and [`SubagentRoutedTurnQueue`]: the port over two of them, sub-agent
//!   sessions on their own (so the deployment can cap how many run at once).
//! - [`DynamoNodeRegistry`] and [`DynamoExecJobs`]: the node registry and exec job ports on the
//!   same table (items in [`dynamo_nodes`]).
//! - [`DynamoCronStore`]: the [`CronStore`](clawless_automation::cron::CronStore) port (cron jobs,
//!   slot reservations, run logs) on the same table (items in [`dynamo_cron`]).
//! - [`SqsExecQueue`] and [`SqsTimers`]: one SQS standard queue (plus dead-letter queue) per
//!   node, and durable timers on a standard queue with chained delays.
//! - [`ScheduledTimers`]: timers of any length: short ones on that queue, long ones as
//!   one-time EventBridge Scheduler schedules that send them to it when due.
//! - [`StsQueueCredentials`]: short-lived credentials for one node queue, from STS AssumeRole.
//!
//! This crate translates between the ports and the AWS SDK; it holds no agent logic. With the
//! `test-support` feature, `testing` connects SDK clients to the local AWS emulator.

pub mod dynamo;
pub mod dynamo_cron;
pub mod dynamo_nodes;
pub mod dynamo_processes;
mod s3;
mod s3_media_links;
pub mod scheduler;
mod sqs;
mod sqs_nodes;
pub mod sts;
mod subagent_routed_queue;

pub use dynamo::{DynamoInbox, DynamoSessionStore};
pub use dynamo_cron::DynamoCronStore;
pub use dynamo_nodes::{DynamoExecJobs, DynamoNodeRegistry};
pub use dynamo_processes::DynamoBackgroundProcesses;
pub use s3::S3ObjectStore;
pub use s3_media_links::S3MediaLinks;
pub use scheduler::{ScheduleTarget, ScheduledTimers};
pub use sqs::{SqsTurnQueue, sqs_id};
pub use sqs_nodes::{SqsExecQueue, SqsTimers};
pub use sts::StsQueueCredentials;
pub use subagent_routed_queue::SubagentRoutedTurnQueue;

#[cfg(any(test, feature = "test-support"))]
pub mod testing;
