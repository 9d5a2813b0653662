//! The skills snapshot a session keeps (spec §4.6–§4.7) and when it is rebuilt.
//!
//! A snapshot is plain data: it is persisted with the session so that a turn does not need
//! to rebuild the prompt, and it stays byte-identical while nothing it depends on changes,
//! which keeps the model provider's prompt cache warm.

use std::hash::Hasher;

use fnv::FnvHasher;
use serde::{Deserialize, Serialize};

use super::eligibility::{
    EligibilityInputs, filter_entries, filters_match, normalize_skill_filter,
};
use super::loader::{LoadedSkills, write_field};
use super::prompt::{
    PromptLimits, PromptSkill, apply_prompt_limits, assemble_prompt, compact_location, limits_note,
};
use super::source::{SkillLimits, SkillSourceKind};

/// An eligible skill, as the session records it (for env injection at run time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotSkill {
    /// Skill name.
    pub name: String,
    /// `metadata.openclaw.primaryEnv`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_env: Option<String>,
    /// Copy of `requires.env`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_env: Option<Vec<String>>,
}

/// A skill listed in the prompt, with its canonical (uncompacted) location.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedSkill {
    /// Skill name.
    pub name: String,
    /// Skill description.
    pub description: String,
    /// Canonical location of its `SKILL.md`.
    pub location: String,
    /// The source it came from.
    pub source: SkillSourceKind,
}

/// What a session stores about its skills.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillSnapshot {
    /// The skills part of the system prompt (may be empty).
    pub prompt: String,
    /// Every eligible skill after the filter, hidden ones included.
    pub skills: Vec<SnapshotSkill>,
    /// The normalised filter it was built with; absent = unrestricted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill_filter: Option<Vec<String>>,
    /// Skills visible to the model, canonical locations.
    pub resolved_skills: Vec<ResolvedSkill>,
    /// Version of the skills it was built from.
    pub version: u64,
    /// Hash of every input it was built from.
    pub fingerprint: String,
}

/// Settings of a snapshot besides the skills and eligibility.
#[derive(Debug, Clone, Copy)]
pub struct SnapshotOptions<'a> {
    /// The agent's skill filter: `None` = all, `Some([])` = none.
    pub filter: Option<&'a [String]>,
    /// Home directories whose prefix becomes `~` in the prompt.
    pub home_dirs: &'a [String],
    /// A line about available node hosts, placed before everything else.
    pub node_note: Option<&'a str>,
    /// Prompt limits.
    pub limits: SkillLimits,
}

/// Hash of everything [`build_snapshot`] reads, to tell whether a stored snapshot is current.
pub fn snapshot_fingerprint(
    loaded: &LoadedSkills, inputs: EligibilityInputs<'_>, options: &SnapshotOptions<'_>,
) -> String {
    let mut hash = FnvHasher::default();
    hash.write(&loaded.fingerprint.to_le_bytes());
    let settings = serde_json::json!({
        "skills": inputs.skills,
        "config": inputs.config,
        "context": inputs.context,
        "filter": normalize_skill_filter(options.filter),
        "home": options.home_dirs,
        "note": options.node_note,
        "limits": options.limits,
    });
    write_field(&mut hash, &settings.to_string());
    format!("{:016x}", hash.finish())
}

/// Builds the snapshot: eligibility, filter, visibility, compaction and limits.
pub fn build_snapshot(
    loaded: &LoadedSkills, inputs: EligibilityInputs<'_>, options: &SnapshotOptions<'_>,
) -> SkillSnapshot {
    let eligible = filter_entries(&loaded.entries, inputs, options.filter);
    let visible: Vec<_> = eligible
        .iter()
        .filter(|entry| entry.visible_to_model())
        .collect();
    let compacted: Vec<String> = visible
        .iter()
        .map(|entry| compact_location(&entry.location, options.home_dirs))
        .collect();
    let prompt_skills: Vec<PromptSkill<'_>> = visible
        .iter()
        .zip(&compacted)
        .map(|(entry, location)| PromptSkill {
            name: &entry.name,
            description: &entry.description,
            location,
        })
        .collect();
    let limited = apply_prompt_limits(
        &prompt_skills,
        PromptLimits {
            max_skills: options.limits.max_skills_in_prompt,
            max_chars: options.limits.max_skills_prompt_chars,
        },
    );
    let note = limits_note(&limited, visible.len());
    SkillSnapshot {
        prompt: assemble_prompt(options.node_note, note.as_deref(), &limited.block),
        skills: eligible
            .iter()
            .map(|entry| {
                let metadata = entry.metadata.as_ref();
                SnapshotSkill {
                    name: entry.name.clone(),
                    primary_env: metadata.and_then(|m| m.primary_env.clone()),
                    required_env: metadata
                        .and_then(|m| m.requires.as_ref())
                        .map(|r| r.env.clone()),
                }
            })
            .collect(),
        skill_filter: normalize_skill_filter(options.filter),
        resolved_skills: visible
            .iter()
            .map(|entry| ResolvedSkill {
                name: entry.name.clone(),
                description: entry.description.clone(),
                location: entry.location.clone(),
                source: entry.source,
            })
            .collect(),
        version: loaded.version,
        fingerprint: snapshot_fingerprint(loaded, inputs, options),
    }
}

/// OpenClaw's version staleness rule: a zero `next` invalidates any versioned snapshot.
pub fn should_refresh_snapshot_for_version(cached: Option<u64>, next: u64) -> bool {
    let cached = cached.unwrap_or(0);
    if next == 0 { cached > 0 } else { cached < next }
}

/// Whether a session's stored snapshot must be rebuilt before a turn.
pub fn snapshot_is_stale(
    existing: Option<&SkillSnapshot>, current_version: u64, current_fingerprint: &str,
    filter: Option<&[String]>,
) -> bool {
    match existing {
        None => true,
        Some(snapshot) => {
            !filters_match(snapshot.skill_filter.as_deref(), filter)
                || snapshot.fingerprint != current_fingerprint
                || should_refresh_snapshot_for_version(Some(snapshot.version), current_version)
        }
    }
}

/// The skills prompt for a run: the snapshot's prompt, trimmed, or `""`.
pub fn skills_prompt_for_run(snapshot: Option<&SkillSnapshot>) -> String {
    snapshot
        .map(|s| s.prompt.trim().to_owned())
        .unwrap_or_default()
}
