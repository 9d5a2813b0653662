//! Node hosts as the backend sees them: the registry, exec jobs, the per-node exec queue,
//! and the short-lived credentials a node reads its queue with.
//!
//! Like [`crate::session`], this module holds only ports and the pure rules every adapter
//! shares (which node ids are valid, how long vended
//! credentials live). Adapters: DynamoDB, SQS and STS in `clawless-aws`, SQLite in
//! `clawless-local`, in-memory in [`testing`](crate::testing) (re-exported from
//! `nodes::testing`), all checked by the same contract suites.
//!
//! - [`registry`]: paired nodes and one-time pairing codes ([`NodeRegistry`]);
//! - [`jobs`]: exec jobs, first result wins ([`ExecJobs`]);
//! - [`process_tool`]: the `process` tool's spec and the texts the backend answers;
//! - [`processes`]: the index of commands a node backgrounded ([`BackgroundProcesses`]);
//! - [`queue`]: one standard queue per node with a dead-letter queue ([`ExecQueue`]);
//! - [`credentials`]: credentials scoped to one node queue ([`QueueCredentialVendor`]);
//! - [`notices`]: what the chat and the model are told about exec;
//! - [`exec_tool`]: the `exec` tool's spec;
//! - [`remote_skills`]: what paired nodes add to skill eligibility.
//!
//! What the backend and a node host exchange (the signed wire messages, a node's record and
//! reported facts, its queue credentials) is `clawless_exec::node`, so the node host needs
//! only that crate; the names used most are re-exported here.

pub mod credentials;
mod error;
pub mod exec_tool;
pub mod jobs;
pub mod notices;
pub mod process_tool;
pub mod processes;
pub mod queue;
pub mod registry;
pub mod remote_skills;

#[cfg(any(test, feature = "test-support"))]
pub mod testing;

pub use clawless_exec::node::credentials::{QueueCredentials, credential_lifetime};
pub use clawless_exec::node::facts::{NodeFactsRef, Precheck, node_exec_facts, precheck};
pub use clawless_exec::node::record::{
    GrantedEntry, MAX_NODE_ID_LEN, NodeFacts, NodeRecord, is_valid_node_id,
};
pub use clawless_exec::node::report::NodeExecReport;
pub use credentials::{CredentialError, QueueCredentialVendor};
pub use error::NodeStoreError;
pub use jobs::{ExecJobRecord, ExecJobs, ResolveOutcome};
pub use processes::{BackgroundProcess, BackgroundProcesses, ProcessStatus, sort_newest_first};
pub use queue::{ExecDelivery, ExecQueue, MAX_RECEIVE_COUNT};
pub use registry::NodeRegistry;
