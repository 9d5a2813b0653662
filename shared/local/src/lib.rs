//! clawless embedded adapters: the ports implemented on the local machine, with no AWS.
//!
//! - [`DirObjectStore`]: the [`ObjectStore`](clawless_core::object_store::ObjectStore) port over
//!   a directory tree (skills, workspace files), serving only regular files inside its root.
//! - [`SqliteSessionStore`], [`SqliteInbox`] and [`SqliteTurnQueue`]: the session store, inbox
//!   and turn queue ports on one SQLite file ([`SqliteDb`]), with the same semantics as
//!   DynamoDB and SQS FIFO (module [`sqlite`]).
//! - [`LocalNodeFs`]: the exec engine's node filesystem port on this machine's disk.
//!
//! This crate must not know AWS; it is what `clawless local` runs on.

mod dir_store;
mod dir_walk;
mod node_fs;
pub mod sqlite;

pub use dir_store::DirObjectStore;
pub use node_fs::LocalNodeFs;
pub use sqlite::{SqliteDb, SqliteError, SqliteInbox, SqliteSessionStore, SqliteTurnQueue};
