//! The reply tokens: words a model answers with to tell the engine what to do with its reply
//! (send nothing, acknowledge a heartbeat, skip an agent-to-agent step). One module, so the
//! prompt that teaches a token and the code that honours it cannot disagree.

/// The reply that tells the engine to send nothing.
pub const NO_REPLY: &str = "NO_REPLY";

/// The reply that acknowledges a heartbeat poll with nothing to report.
pub const HEARTBEAT_OK_TOKEN: &str = "HEARTBEAT_OK";

/// Replies that mean "say nothing" (compared after trimming).
pub const SILENT_REPLIES: [&str; 3] = ["%%NO_REPLY%%", NO_REPLY, HEARTBEAT_OK_TOKEN];

/// A sub-agent's (or agent-to-agent target's) answer that skips its announce step.
pub const ANNOUNCE_SKIP: &str = "ANNOUNCE_SKIP";

/// An agent-to-agent reply step's answer that ends the ping-pong.
pub const REPLY_SKIP: &str = "REPLY_SKIP";
