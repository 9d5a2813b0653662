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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct SkillEntryConfig {
    /// `false` turns the skill off for every agent; unset or `true` leaves it to the skill's
    /// own requirements.
    #[cfg_attr(feature = "schema", schemars(extend("default" = true)))]
    pub enabled: Option<bool>,
    /// An API key for the skill: it satisfies the skill's requirement on the environment
    /// variable it names as `primaryEnv`.
    pub api_key: Option<String>,
    /// Environment variables for the skill, by name; each one satisfies the skill's
    /// `requires.env` for that name.
    pub env: BTreeMap<String, String>,
    /// Free-form settings for the skill. clawless reads none of them itself; a skill's
    /// `requires.config` may gate on them (`skills.entries.<key>.config.<name>`).
    pub config: serde_json::Map<String, serde_json::Value>,
}

impl std::fmt::Debug for SkillEntryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillEntryConfig")
            .field("enabled", &self.enabled)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("config", &self.config.keys().collect::<Vec<_>>())
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
