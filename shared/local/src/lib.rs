//! clawless embedded adapters: the ports implemented on the local machine, with no AWS.
//!
//! - [`DirObjectStore`]: the [`ObjectStore`](clawless_base::object_store::ObjectStore) port over
//!   a directory tree (skills, workspace files), serving only regular files inside its root.
//! - [`SqliteSessionStore`], [`SqliteInbox`] and [`SqliteTurnQueue`]: the session store, inbox
//!   and turn queue ports on one SQLite file ([`SqliteDb`]), with the same semantics as
//!   DynamoDB and SQS FIFO (module [`sqlite`]).
//! - [`SqliteNodeRegistry`], [`SqliteExecJobs`], [`SqliteExecQueue`] and [`SqliteTimers`]: the
//!   node-host ports on the same file, with the semantics of their DynamoDB and SQS adapters.
//! - [`SqliteCronStore`]: the cron store port (jobs, slot reservations, run logs) on the same
//!   file.
//!
//! This crate must not know AWS; it is what `clawless local` runs on.

mod dir_entry;
mod dir_store;
mod dir_walk;
#[cfg(feature = "sqlite")]
pub mod sqlite;

pub use dir_store::DirObjectStore;
#[cfg(feature = "sqlite")]
pub use sqlite::{
    SqliteBackgroundProcesses, SqliteCronStore, SqliteDb, SqliteError, SqliteExecJobs,
    SqliteExecQueue, SqliteInbox, SqliteNodeRegistry, SqliteSessionStore, SqliteTimers,
    SqliteTurnQueue,
};
