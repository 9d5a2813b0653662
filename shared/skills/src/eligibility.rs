//! Eligibility (spec §3.1) and the agent skill filter (§3.2).
//!
//! Binaries and platforms are asked of an [`EligibilityContext`]: the registered node hosts
//! (or this machine in local mode). The process running the engine is never consulted.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::config::SkillsConfig;
use super::entry::SkillEntry;
use super::source::SkillSourceKind;

/// What the machines that will run a skill's commands have.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EligibilityContext {
    /// Platforms available (`linux`, `darwin`, `win32`, …).
    pub platforms: BTreeSet<String>,
    /// Binaries found on PATH on at least one of those machines.
    pub bins: BTreeSet<String>,
    /// Names of environment variables that are set (non-empty) for skills.
    pub env: BTreeSet<String>,
}

impl EligibilityContext {
    /// A context that has nothing: only skills with no requirements are eligible.
    pub fn empty() -> Self {
        Self::default()
    }
}

/// Everything eligibility depends on besides the skill.
#[derive(Debug, Clone, Copy)]
pub struct EligibilityInputs<'a> {
    /// The `skills:` config.
    pub skills: &'a SkillsConfig,
    /// The whole config document, for `requires.config` paths.
    pub config: &'a Value,
    /// What the executing machines have.
    pub context: &'a EligibilityContext,
}

/// One reason a skill is not eligible.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum Ineligibility {
    /// `skills.entries.<key>.enabled: false`.
    Disabled,
    /// A bundled skill missing from `allowBundled`.
    NotInAllowBundled,
    /// None of the skill's platforms is available.
    Os {
        /// What the skill supports.
        required: Vec<String>,
        /// What is available.
        available: Vec<String>,
    },
    /// `requires.bins` not all available.
    MissingBins {
        /// The missing ones.
        bins: Vec<String>,
    },
    /// None of `requires.anyBins` available.
    MissingAnyBins {
        /// The alternatives.
        bins: Vec<String>,
    },
    /// `requires.env` not set.
    MissingEnv {
        /// The missing names.
        env: Vec<String>,
    },
    /// `requires.config` paths not truthy.
    MissingConfig {
        /// The falsy paths.
        paths: Vec<String>,
    },
}

impl std::fmt::Display for Ineligibility {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Disabled => write!(f, "disabled in skills.entries"),
            Self::NotInAllowBundled => write!(f, "bundled skill not in skills.allowBundled"),
            Self::Os {
                required,
                available,
            } => write!(
                f,
                "needs os {} (available: {})",
                required.join(", "),
                if available.is_empty() {
                    "none".to_owned()
                } else {
                    available.join(", ")
                }
            ),
            Self::MissingBins { bins } => write!(f, "missing bins: {}", bins.join(", ")),
            Self::MissingAnyBins { bins } => write!(f, "needs one of: {}", bins.join(", ")),
            Self::MissingEnv { env } => write!(f, "missing env: {}", env.join(", ")),
            Self::MissingConfig { paths } => write!(f, "config not set: {}", paths.join(", ")),
        }
    }
}

/// Why `entry` is not eligible, in OpenClaw's order; empty when it is eligible.
///
/// The first three checks stop at the first failure, as OpenClaw's do; the `requires`
/// checks are all reported so `clawless skills check` can list everything that is missing.
pub fn ineligibility(entry: &SkillEntry, inputs: EligibilityInputs<'_>) -> Vec<Ineligibility> {
    let skill_key = entry.skill_key();
    let entry_config = inputs.skills.entries.get(skill_key);
    if entry_config.is_some_and(|c| c.enabled == Some(false)) {
        return vec![Ineligibility::Disabled];
    }
    if entry.source == SkillSourceKind::Bundled
        && let Some(allowed) = inputs.skills.bundled_allowlist()
        && !allowed
            .iter()
            .any(|name| *name == skill_key || *name == entry.name)
    {
        return vec![Ineligibility::NotInAllowBundled];
    }
    let Some(metadata) = &entry.metadata else {
        return Vec::new();
    };
    let context = inputs.context;
    if !metadata.os.is_empty() && !metadata.os.iter().any(|os| context.platforms.contains(os)) {
        return vec![Ineligibility::Os {
            required: metadata.os.clone(),
            available: context.platforms.iter().cloned().collect(),
        }];
    }
    if metadata.always == Some(true) {
        return Vec::new();
    }
    let Some(requires) = &metadata.requires else {
        return Vec::new();
    };

    let mut reasons = Vec::new();
    let missing_bins: Vec<String> = requires
        .bins
        .iter()
        .filter(|bin| !context.bins.contains(*bin))
        .cloned()
        .collect();
    if !missing_bins.is_empty() {
        reasons.push(Ineligibility::MissingBins { bins: missing_bins });
    }
    if !requires.any_bins.is_empty()
        && !requires
            .any_bins
            .iter()
            .any(|bin| context.bins.contains(bin))
    {
        reasons.push(Ineligibility::MissingAnyBins {
            bins: requires.any_bins.clone(),
        });
    }
    let env_satisfied = |name: &String| {
        context.env.contains(name)
            || entry_config.is_some_and(|c| c.env.get(name).is_some_and(|v| !v.is_empty()))
            || (entry_config.is_some_and(|c| c.api_key.as_deref().is_some_and(|k| !k.is_empty()))
                && metadata.primary_env.as_ref() == Some(name))
    };
    let missing_env: Vec<String> = requires
        .env
        .iter()
        .filter(|name| !env_satisfied(name))
        .cloned()
        .collect();
    if !missing_env.is_empty() {
        reasons.push(Ineligibility::MissingEnv { env: missing_env });
    }
    let missing_config: Vec<String> = requires
        .config
        .iter()
        .filter(|path| !config_path_truthy(inputs.config, path))
        .cloned()
        .collect();
    if !missing_config.is_empty() {
        reasons.push(Ineligibility::MissingConfig {
            paths: missing_config,
        });
    }
    reasons
}

/// Whether `entry` may be used.
pub fn is_eligible(entry: &SkillEntry, inputs: EligibilityInputs<'_>) -> bool {
    ineligibility(entry, inputs).is_empty()
}

/// Paths that count as set when the config does not mention them.
const CONFIG_DEFAULTS_TRUE: [&str; 2] = ["browser.enabled", "browser.evaluateEnabled"];

/// OpenClaw's truthiness of a dotted config path.
pub fn config_path_truthy(config: &Value, path: &str) -> bool {
    let mut current = Some(config);
    for segment in path.split('.') {
        current = current.and_then(|value| value.get(segment));
    }
    match current {
        None | Some(Value::Null) => CONFIG_DEFAULTS_TRUE.contains(&path),
        Some(Value::Bool(flag)) => *flag,
        Some(Value::Number(number)) => number.as_f64().is_some_and(|n| n != 0.0),
        Some(Value::String(text)) => !text.trim().is_empty(),
        Some(Value::Array(_) | Value::Object(_)) => true,
    }
}

/// Normalises an agent's skill filter: `None` = every skill, `Some([])` = no skill.
pub fn normalize_skill_filter(filter: Option<&[String]>) -> Option<Vec<String>> {
    filter.map(|names| {
        names
            .iter()
            .map(|n| n.trim())
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect()
    })
}

/// Whether two filters select the same skills (for snapshot staleness).
pub fn filters_match(a: Option<&[String]>, b: Option<&[String]>) -> bool {
    match (normalize_skill_filter(a), normalize_skill_filter(b)) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            let a: BTreeSet<String> = a.into_iter().collect();
            let b: BTreeSet<String> = b.into_iter().collect();
            a == b
        }
        _ => false,
    }
}

/// Eligible entries that pass the (normalised) filter, in load order.
pub fn filter_entries<'e>(
    entries: &'e [std::sync::Arc<SkillEntry>], inputs: EligibilityInputs<'_>,
    filter: Option<&[String]>,
) -> Vec<&'e std::sync::Arc<SkillEntry>> {
    let filter = normalize_skill_filter(filter);
    entries
        .iter()
        .filter(|entry| is_eligible(entry, inputs))
        .filter(|entry| {
            filter
                .as_ref()
                .is_none_or(|names| names.iter().any(|name| *name == entry.name))
        })
        .collect()
}
