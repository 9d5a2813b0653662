//! In-memory fakes of the core's storage ports, one file per port. Each is checked against its
//! port's suite in [`super::contracts`] by the tests next to it.

mod inbox;
mod sessions;
mod turn_queue;

pub use inbox::InMemoryInbox;
pub use sessions::{IN_MEMORY_MAX_RECORD_BYTES, InMemorySessionStore};
pub use turn_queue::{DEDUP_WINDOW, DEFAULT_VISIBILITY_TIMEOUT, InMemoryTurnQueue};
