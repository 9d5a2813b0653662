//! Skill sources: where skills are read from, in OpenClaw's precedence order, and the limits
//! that bound how much of a source is read.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use clawless_base::object_store::{ObjectStore, normalize_prefix};

/// The kind of a source; the derive order is the precedence order (later wins on a name clash).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkillSourceKind {
    /// Extra prefixes from config: the lowest precedence, below bundled.
    Extra,
    /// Skills shipped with clawless (`skills/` in this repo, synced to S3 at deploy).
    Bundled,
    /// Skills installed for every agent of this deployment.
    Managed,
    /// The agent workspace's `.agents/skills`.
    AgentsProject,
    /// The agent workspace's `skills`: the highest precedence.
    Workspace,
}

impl SkillSourceKind {
    /// Stable label used in listings and diagnostics.
    pub fn label(self) -> &'static str {
        match self {
            Self::Extra => "extra",
            Self::Bundled => "bundled",
            Self::Managed => "managed",
            Self::AgentsProject => "agents-project",
            Self::Workspace => "workspace",
        }
    }
}

impl fmt::Display for SkillSourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One source: a prefix of an object store.
#[derive(Debug, Clone)]
pub struct SkillSource {
    /// Its place in the precedence order.
    pub kind: SkillSourceKind,
    /// The store holding it.
    pub store: Arc<dyn ObjectStore>,
    /// Normalised prefix (`""` or ending in `/`).
    pub prefix: String,
}

impl SkillSource {
    /// A source at `prefix` of `store`.
    pub fn new(kind: SkillSourceKind, store: Arc<dyn ObjectStore>, prefix: &str) -> Self {
        Self {
            kind,
            store,
            prefix: normalize_prefix(prefix),
        }
    }

    /// Where the source is, for messages (`/abs/dir/` or `s3://bucket/prefix/`).
    pub fn location(&self) -> String {
        let root = self.store.location(self.prefix.trim_end_matches('/'));
        if self.prefix.is_empty() {
            root
        } else {
            format!("{root}/")
        }
    }
}

/// Bounds on discovery and on the prompt (OpenClaw's `skills.limits.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct SkillLimits {
    /// Directories examined per skill source before discovery stops; the rest of the source
    /// is skipped with a warning.
    pub max_candidates_per_root: usize,
    /// Skills kept per source; further ones are skipped with a warning.
    pub max_skills_loaded_per_source: usize,
    /// Most skills listed in the prompt's skills block; the rest are left out (and counted).
    pub max_skills_in_prompt: usize,
    /// Most characters (UTF-16 units) the prompt's skills block may take; skills that do not
    /// fit are left out.
    pub max_skills_prompt_chars: usize,
    /// Largest `SKILL.md` read, in bytes; a larger one is skipped.
    pub max_skill_file_bytes: u64,
    /// Objects listed per store (directory or S3 prefix) before the listing is cut short.
    pub max_listed_objects: usize,
}

impl Default for SkillLimits {
    fn default() -> Self {
        Self {
            max_candidates_per_root: 300,
            max_skills_loaded_per_source: 200,
            max_skills_in_prompt: 150,
            max_skills_prompt_chars: 30_000,
            max_skill_file_bytes: 256_000,
            max_listed_objects: 100_000,
        }
    }
}
