//! `skills.bins` (spec §6): every binary any loaded skill declares, for node hosts to
//! auto-allow. Deliberately ignores eligibility, OS and agent filters.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::discovery::cmp_utf16;
use super::entry::SkillEntry;

/// The sorted union of `requires.bins`, `requires.anyBins` and `install[].bins`.
pub fn collect_skill_bins(entries: &[Arc<SkillEntry>]) -> Vec<String> {
    let mut bins = BTreeSet::new();
    for metadata in entries.iter().filter_map(|entry| entry.metadata.as_ref()) {
        let declared = metadata
            .requires
            .iter()
            .flat_map(|requires| requires.bins.iter().chain(&requires.any_bins))
            .chain(metadata.install.iter().flat_map(|spec| &spec.bins));
        bins.extend(
            declared
                .map(|bin| bin.trim())
                .filter(|bin| !bin.is_empty())
                .map(str::to_owned),
        );
    }
    let mut sorted: Vec<String> = bins.into_iter().collect();
    sorted.sort_by(|a, b| cmp_utf16(a, b));
    sorted
}
