//! Cron: scheduled jobs and reminders, as pure logic with no I/O.
//!
//! This module owns the data (jobs, schedules, run-log lines, `cron:` config), the `cron`
//! tool's contract (description, schema, argument parsing, exact errors), normalisation and
//! validation of new jobs, schedule computation (croner expressions in IANA zones, stagger,
//! backoff), what a finished run does to its job, the start-up catch-up plan, run-log paging,
//! and the texts runs and alerts use. Every function takes the clock as epoch milliseconds.
//!
//! It defines the port the jobs and run logs are kept through ([`store::CronStore`], with the
//! reservation that starts each firing once), but knows no database, timers (EventBridge
//! Scheduler, SQLite), the turn service or channels: the runtime keeps the jobs, fires them,
//! runs the turns and sends the messages, calling in here for every decision. Firings are keyed by `(job id, scheduled slot)`
//! ([`schedule::FiringSlot`]) so an at-least-once timer can run each slot once.

pub mod config;
pub mod delivery;
pub mod expr;
pub mod normalize;
pub mod outcome;
pub mod run;
pub mod run_log;
pub mod schedule;
pub mod startup;
pub mod store;
pub mod tool;
pub mod types;
pub mod validate;

pub use config::CronConfig;
pub use store::{CronStore, CronStoreError, Reservation, ReservedSlots, RunSlot, StoredCronJob};
pub use types::*;

/// A refused cron request: the exact sentence the caller (model, CLI user) sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CronInputError {
    message: String,
}

impl CronInputError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}
