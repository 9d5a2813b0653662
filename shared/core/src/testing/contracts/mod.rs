//! Contract suites of the core's storage ports, one file per port: the behavioural definition
//! that the in-memory fakes and every adapter (SQLite, directory tree, AWS) must pass.

mod inbox;
mod sessions;
mod turn_queue;

pub use inbox::inbox_contract;
pub use sessions::{SessionStoreDeviations, session_lister_contract, session_store_contract};
pub use turn_queue::{
    CONTRACT_SHORT_VISIBILITY_TIMEOUT, CONTRACT_VISIBILITY_TIMEOUT, QueueDeviations,
    turn_queue_contract,
};
