//! Test support: in-memory port implementations and the contract suites every adapter runs.
//!
//! [`InMemoryObjectStore`] is the fake the core's own tests use; [`object_store_contract`] is the
//! one behavioural definition of [`ObjectStore`](clawless_base::object_store::ObjectStore) that this
//! fake, the directory tree (`clawless-local`) and S3 (`clawless-aws`) all have to pass, so they
//! cannot drift apart.
//!
//! The same holds for the session storage ports: [`InMemorySessionStore`], [`InMemoryInbox`]
//! and [`InMemoryTurnQueue`] are checked by [`session_store_contract`], [`inbox_contract`] and
//! [`turn_queue_contract`], which the DynamoDB/SQS and SQLite adapters run too.
//! [`InMemoryCronStore`] is checked by [`cron_store_contract`], which the SQLite and DynamoDB
//! cron stores run too.
//! Compiled only for tests and with the `test-support` feature; nothing here touches disk or network.
//!
//! Layout, one file per port on each side (everything is re-exported here, so the public path of
//! every item is `clawless_core::testing::Item`):
//! - `fakes/sessions.rs`: [`InMemorySessionStore`], [`IN_MEMORY_MAX_RECORD_BYTES`].
//! - `fakes/inbox.rs`: [`InMemoryInbox`].
//! - `fakes/turn_queue.rs`: [`InMemoryTurnQueue`], [`DEFAULT_VISIBILITY_TIMEOUT`],
//!   [`DEDUP_WINDOW`].
//! - `contracts/sessions.rs`: [`session_store_contract`], [`SessionStoreDeviations`],
//!   [`session_lister_contract`].
//! - `contracts/inbox.rs`: [`inbox_contract`].
//! - `contracts/turn_queue.rs`: [`turn_queue_contract`], [`QueueDeviations`],
//!   [`CONTRACT_VISIBILITY_TIMEOUT`], [`CONTRACT_SHORT_VISIBILITY_TIMEOUT`].
//! - From `clawless_base::testing`: the object store's fake and contract, [`ManualClock`] and
//!   the shared helpers; from `clawless_automation::testing`: the cron store's.
//! - `fixtures.rs`: sample records the adapter tests share: [`session_key`],
//!   [`sample_steps`], [`queued_message`], [`sample_cron_job`], [`sample_run_entry`],
//!   [`sample_node`], [`sample_exec_job`].
//! - `timers.rs`: [`InMemoryTimers`], [`timers_contract`], [`TimersDeviations`],
//!   [`CONTRACT_TIMER_VISIBILITY`], [`sample_session_event`].
//! - Node-host ports: fakes and contracts live in [`crate::nodes::testing`], re-exported here.

mod contracts;
mod fakes;
mod fixtures;
mod timers;

pub use contracts::{
    CONTRACT_SHORT_VISIBILITY_TIMEOUT, CONTRACT_VISIBILITY_TIMEOUT, QueueDeviations,
    SessionStoreDeviations, inbox_contract, session_lister_contract, session_store_contract,
    turn_queue_contract,
};
pub use fakes::{
    DEDUP_WINDOW, DEFAULT_VISIBILITY_TIMEOUT, IN_MEMORY_MAX_RECORD_BYTES, InMemoryInbox,
    InMemorySessionStore, InMemoryTurnQueue,
};
pub use fixtures::{
    queued_message, sample_cron_job, sample_exec_job, sample_node, sample_run_entry, sample_steps,
    session_key,
};
pub use timers::{
    CONTRACT_TIMER_VISIBILITY, InMemoryTimers, TimersDeviations, sample_session_event,
    timers_contract,
};

// The base and automation ports' fakes and suites, by name, so a test reaches every port's
// fake through this one module.
pub use clawless_automation::testing::{
    CronStoreDeviations, InMemoryCronStore, cron_store_contract,
};
pub use clawless_base::testing::{
    CountingObjectStore, InMemoryObjectStore, ManualClock, join_all, object_store_contract,
    object_store_if_absent_race, sized_json_body,
};
pub(crate) use clawless_base::testing::{lock_state, next_id, run_label, sleep};

// Node-host storage ports: fakes and contract suites live in `crate::nodes::testing`.
pub use crate::nodes::testing::*;
