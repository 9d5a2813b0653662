//! The skills engine: discovery over object-store sources, frontmatter, eligibility, the
//! `<available_skills>` prompt block, snapshots, slash commands and `skills.bins`.
//!
//! Behaviour follows OpenClaw's (see `spec/openclaw-behaviors.md` §1–§6); what differs is
//! that skills are read through the [`ObjectStore`](clawless_base::object_store::ObjectStore) port
//! and that "is this binary on PATH" is asked of an eligibility context, never of the
//! process running the engine.

pub mod bins;
pub mod commands;
pub mod config;
pub mod diagnostics;
pub mod discovery;
pub mod eligibility;
pub mod entry;
pub mod frontmatter;
pub mod loader;
pub mod location;
pub mod metadata;
pub mod prompt;
pub mod snapshot;
pub mod source;

pub use config::{SkillEntryConfig, SkillsConfig};
pub use diagnostics::{DiagnosticKind, SkillDiagnostic};
pub use eligibility::{EligibilityContext, EligibilityInputs, Ineligibility};
pub use entry::SkillEntry;
pub use loader::{LoadedSkills, SkillLoader};
pub use snapshot::{SkillSnapshot, SnapshotOptions};
pub use source::{SkillLimits, SkillSource, SkillSourceKind};

#[cfg(test)]
mod tests;
