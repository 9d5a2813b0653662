//! clawless core: the turn engine and what it needs to run a turn.
//!
//! Sessions (storage ports, resets, offload), the sans-IO turn state machine, compaction, the
//! system prompt, the tool policy, the built-in tools, tool results, sub-agents and the node
//! ports. The domain crates below it hold the exec analyser (`clawless-exec`), the skills
//! engine (`clawless-skills`) and automation (`clawless-automation`); ports and shared types
//! are in `clawless-base`. This crate knows nothing of AWS, HTTP clients, Lambda or files on
//! disk: adapters live in `clawless-aws` and `clawless-local`.

pub mod compaction;
pub mod elevated;
pub mod nodes;
pub mod outbox;
pub mod sandbox;
pub mod session;
pub mod subagents;
pub mod system_prompt;
pub mod timers;
pub mod tool_policy;
pub mod tool_results;
pub mod tools;
pub mod turn;

#[cfg(any(test, feature = "test-support"))]
pub mod testing;
