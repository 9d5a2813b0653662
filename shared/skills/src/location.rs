//! Resolving a skill `<location>` (as the model sees it in the prompt, possibly `~`-compacted)
//! back to an object in one of the agent's skill sources, for the `read` tool.

use std::sync::Arc;

use clawless_base::object_store::ObjectStore;

use super::source::SkillSource;

/// An object in a skill source: where the `read` tool reads a skill file from.
#[derive(Debug, Clone)]
pub struct ResolvedLocation {
    /// The source's store.
    pub store: Arc<dyn ObjectStore>,
    /// The object's key in it.
    pub key: String,
}

/// The store and key a location names, if it lies inside one of `sources`.
///
/// A leading `~/` is expanded with each of `home_dirs`; only keys under a source's prefix
/// resolve, so a location cannot be used to read elsewhere in a shared bucket.
pub fn resolve_skill_location(
    sources: &[SkillSource], location: &str, home_dirs: &[String],
) -> Option<ResolvedLocation> {
    let expanded: Vec<String> = match location.strip_prefix("~/") {
        Some(rest) => home_dirs
            .iter()
            .map(|home| format!("{}/{rest}", home.trim_end_matches('/')))
            .collect(),
        None => vec![location.to_owned()],
    };
    expanded.iter().find_map(|candidate| {
        sources.iter().find_map(|source| {
            let key = source.store.key_for_location(candidate)?;
            key.starts_with(&source.prefix).then(|| ResolvedLocation {
                store: Arc::clone(&source.store),
                key,
            })
        })
    })
}
