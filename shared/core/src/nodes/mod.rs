//! Node hosts as the backend sees them: the registry, exec jobs, the per-node exec queue,
//! durable timers, and the signed wire format between the backend and a node.
pub mod wire;
pub mod notices;
pub mod exec_tool;
