//! clawless domain core: the skills engine and the ports (traits) that adapters implement.
//!
//! This crate knows nothing of AWS, HTTP clients, Lambda or files on disk: everything it reads
//! comes through a port such as [`object_store::ObjectStore`]. Adapters live in `clawless-aws`
//! (S3) and `clawless-local` (a directory tree).

pub mod compaction;
pub mod cron;
pub mod exec;
pub mod heartbeat;
pub mod model;
pub mod nodes;
pub mod object_store;
pub mod outbox;
pub mod session;
pub mod skills;
pub mod subagents;
pub mod system_prompt;
pub mod time;
pub mod tool_policy;
pub mod tool_results;
pub mod tools;
pub mod transcript;
pub mod turn;
pub mod yaml;

#[cfg(any(test, feature = "test-support"))]
pub mod testing;
