//! Spec test vectors (§1, §3–§6) for the skills engine, over the in-memory object store.

mod commands;
mod corpus;
mod discovery;
mod eligibility;
mod loader;
mod prompt;
mod snapshot;

use std::sync::Arc;

use clawless_base::object_store::ObjectStore;
use clawless_base::testing::InMemoryObjectStore;

use super::loader::LoadedSkills;
use super::{SkillLimits, SkillLoader, SkillSource, SkillSourceKind};

/// Default skills config, an empty config document and a context with nothing available.
#[derive(Default)]
pub(super) struct Setting {
    skills: super::SkillsConfig,
    config: serde_json::Value,
    context: super::EligibilityContext,
}

impl Setting {
    pub(super) fn inputs(&self) -> super::EligibilityInputs<'_> {
        super::EligibilityInputs {
            skills: &self.skills,
            config: &self.config,
            context: &self.context,
        }
    }
}

/// A `SKILL.md` with this name, description and optional `metadata` JSON.
pub(super) fn skill_md(name: &str, description: &str, metadata: Option<&str>) -> String {
    let mut text = format!("---\nname: {name}\ndescription: {description}\n");
    if let Some(metadata) = metadata {
        text.push_str(&format!("metadata: {metadata}\n"));
    }
    text.push_str("---\n\n# Instructions\n");
    text
}

/// A store holding `files` (key → content).
pub(super) fn store_with(files: &[(&str, String)]) -> Arc<InMemoryObjectStore> {
    let store = Arc::new(InMemoryObjectStore::named("test"));
    for (key, content) in files {
        store
            .insert(key, content.clone().into_bytes())
            .expect("insert");
    }
    store
}

pub(super) fn source(
    kind: SkillSourceKind, store: &Arc<InMemoryObjectStore>, prefix: &str,
) -> SkillSource {
    let store: Arc<dyn ObjectStore> = store.clone();
    SkillSource::new(kind, store, prefix)
}

pub(super) async fn load(sources: &[SkillSource], limits: SkillLimits) -> Arc<LoadedSkills> {
    SkillLoader::new(limits).load(sources).await.expect("load")
}

pub(super) fn names(loaded: &LoadedSkills) -> Vec<&str> {
    loaded
        .entries
        .iter()
        .map(|entry| entry.name.as_str())
        .collect()
}
