//! The `skills:` section of `clawless.yaml` that the engine reads (OpenClaw's `skills.*`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::source::SkillLimits;

/// Per-deployment skills settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SkillsConfig {
    /// When non-empty: the only bundled skills allowed (by skill key or name).
    pub allow_bundled: Vec<String>,
    /// Per-skill settings keyed by skill key.
    pub entries: BTreeMap<String, SkillEntryConfig>,
    /// Discovery and prompt limits.
    pub limits: SkillLimits,
}

/// `skills.entries.<skillKey>`. `Debug` shows neither the API key nor environment values.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SkillEntryConfig {
    /// `false` turns the skill off.
    pub enabled: Option<bool>,
    /// Satisfies the skill's `primaryEnv` requirement.
    pub api_key: Option<String>,
    /// Environment the skill's commands get; also satisfies `requires.env`.
    pub env: BTreeMap<String, String>,
}

impl std::fmt::Debug for SkillEntryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillEntryConfig")
            .field("enabled", &self.enabled)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl SkillsConfig {
    /// The allowlist for bundled skills, trimmed; `None` when there is none.
    pub fn bundled_allowlist(&self) -> Option<Vec<&str>> {
        let list: Vec<&str> = self
            .allow_bundled
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .collect();
        (!list.is_empty()).then_some(list)
    }
}
