//! Test support for the cron store port: [`InMemoryCronStore`] and [`cron_store_contract`],
//! the behavioural definition the SQLite and DynamoDB cron stores run too. Compiled only for
//! tests and with the `test-support` feature.

mod cron_store_contract;
mod cron_store_fake;

pub use cron_store_contract::{CronStoreDeviations, cron_store_contract};
pub use cron_store_fake::InMemoryCronStore;
