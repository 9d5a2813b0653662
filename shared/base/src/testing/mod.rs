//! Test support for the base ports: the in-memory object store and the contract suite every
//! object store adapter runs, a clock tests set by hand, and helpers the other crates' fakes
//! and contract suites share (run-unique ids and labels, poison-tolerant locking, an
//! executor-free `sleep` and `join_all`, exact-size JSON bodies).
//!
//! [`InMemoryObjectStore`] is the fake the domain crates' tests use; [`object_store_contract`]
//! is the one behavioural definition of [`ObjectStore`](crate::object_store::ObjectStore) that
//! this fake, the directory tree (`clawless-local`) and S3 (`clawless-aws`) all have to pass.
//! Compiled only for tests and with the `test-support` feature; nothing here touches disk or
//! network.

mod manual_clock;
mod object_store_contract;
mod object_store_fake;
mod property_floor;
mod support;

pub use manual_clock::ManualClock;
pub use object_store_contract::{object_store_contract, object_store_if_absent_race};
pub use object_store_fake::{CountingObjectStore, InMemoryObjectStore};
pub use property_floor::run_with_floor;
pub use support::{join_all, lock_state, next_id, run_label, sized_json_body, sleep};
