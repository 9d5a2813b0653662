//! In-memory fakes of the core's storage ports, one file per port. Each is checked against its
//! port's suite in [`super::contracts`] by the tests next to it.

mod cron_store;
mod inbox;
mod object_store;
mod sessions;
mod turn_queue;

pub use cron_store::InMemoryCronStore;
pub use inbox::InMemoryInbox;
pub use object_store::{CountingObjectStore, InMemoryObjectStore};
pub use sessions::{IN_MEMORY_MAX_RECORD_BYTES, InMemorySessionStore};
pub use turn_queue::{DEDUP_WINDOW, DEFAULT_VISIBILITY_TIMEOUT, InMemoryTurnQueue};
