//! Keeping a long session inside its model's context window: when and where to compact,
//! what the summary request holds, how a compacted session is shown to the model, which
//! provider errors mean "the prompt was too large", and pruning of old tool results in the
//! request. All of it is pure: the turn service performs the model calls these plan.

pub mod flush;
pub mod format;
pub mod overflow;
pub mod plan;
pub mod pruning;
pub mod summary;
